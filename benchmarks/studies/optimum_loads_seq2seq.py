"""optimum's own runtime classes load pt2onnx's encoder-decoder folders and generate as PyTorch does.

    python benchmarks/studies/optimum_loads_seq2seq.py --optimum-python /work/optimum-venv/bin/python

Exports the tiny T5, BART, Marian, Pegasus and Whisper of the transformers pack's tests with
``export_seq2seq`` and saves each into a folder with its checkpoint (``save_pretrained``), then, in
optimum-onnx's venv, loads the folder with ``ORTModelForSeq2SeqLM`` (Whisper:
``ORTModelForSpeechSeq2Seq``), once with ``use_merged=True`` (``decoder_model_merged.onnx``) and
once with ``use_merged=False`` (the two decoder graphs), and checks that its greedy ``generate()``
gives the tokens of PyTorch's ``generate()`` of the exported model (here, in this venv's
transformers). Prints a line per model and mode, and whether PyTorch in optimum's venv (its own
transformers, loading the checkpoint) gives those tokens too; exits 1 if optimum's differ.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "contrib" / "transformers" / "tests"), str(ROOT / "tests")]

MODELS = ("t5", "bart", "marian", "pegasus", "whisper")

# Runs in optimum's venv: python -c ... FOLDER, the cases (inputs and tokens) as a JSON line on stdin.
_CHECK = """
import json, sys, warnings
from importlib.metadata import version
import torch, transformers
from optimum.onnxruntime import ORTModelForSeq2SeqLM, ORTModelForSpeechSeq2Seq

warnings.filterwarnings("ignore")
folder, failed = sys.argv[1], 0
for name, case in json.loads(sys.stdin.readline()).items():
    path = f"{folder}/{name}"
    inputs = {key: torch.tensor(value) for key, value in case["inputs"].items()}
    options = {"max_new_tokens": 10, "min_new_tokens": 10, "do_sample": False, "num_beams": 1}
    speech = name == "whisper"
    auto = transformers.WhisperForConditionalGeneration if speech else transformers.AutoModelForSeq2SeqLM
    with torch.no_grad():
        own = auto.from_pretrained(path).eval().generate(**inputs, **options).tolist() == case["tokens"]
    runtime = ORTModelForSpeechSeq2Seq if speech else ORTModelForSeq2SeqLM
    for merged in (True, False):
        loaded = runtime.from_pretrained(path, use_merged=merged, use_cache=True)
        same = loaded.generate(**inputs, **options).tolist() == case["tokens"]
        failed += not same
        files = "decoder_model_merged.onnx" if merged else "decoder_model.onnx + decoder_with_past_model.onnx"
        print(f"{name:8} {files:50} {'same' if same else 'DIFFERENT'} tokens"
              f" (PyTorch here: {'same' if own else 'other'} tokens)")
print(", ".join(f"{d} {version(d)}" for d in ("optimum-onnx", "optimum", "transformers", "torch", "onnxruntime")))
sys.exit(1 if failed else 0)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--optimum-python", required=True, help="the python of a venv with optimum-onnx[onnxruntime]")
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    import torch
    from tiny_models import seq2seq

    from pt2onnx_transformers.seq2seq import export_seq2seq

    names = args.models.split(",")
    cases = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            model = seq2seq(name)
            model.save_pretrained(f"{tmp}/{name}")
            model.generation_config.save_pretrained(f"{tmp}/{name}")
            export_seq2seq(model, quiet=True).save(f"{tmp}/{name}")
            generator = torch.Generator().manual_seed(1)
            if name == "whisper":
                frames = 2 * model.config.max_source_positions
                inputs = {"input_features": torch.randn(2, model.config.num_mel_bins, frames, generator=generator)}
            else:
                ids = torch.randint(3, 100, (2, 6), generator=generator)
                inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
            with torch.no_grad():
                tokens = model.generate(**inputs, max_new_tokens=10, min_new_tokens=10, do_sample=False, num_beams=1)
            cases[name] = {"inputs": {k: v.tolist() for k, v in inputs.items()}, "tokens": tokens.tolist()}
        script = f"import sys; exec(compile({_CHECK!r}, 'optimum_check', 'exec'))"
        return subprocess.run(
            [args.optimum_python, "-c", script, tmp], input=json.dumps(cases) + "\n", text=True
        ).returncode


if __name__ == "__main__":
    raise SystemExit(main())
