"""``pt2onnx-transformers``: export a Hugging Face causal LM with its cache from the command line.

    pt2onnx-transformers causal-lm MODEL -o model.onnx [--verify] [--report]
    pt2onnx-transformers causal-lm MODEL --genai FOLDER [--tokenizer NAME] [--max-length N] [--verify]
    pt2onnx-transformers causal-lm MODEL (-o model.onnx | --genai FOLDER) --static-cache --max-length N
    pt2onnx-transformers seq2seq MODEL -o FOLDER
    pt2onnx-transformers seq2seq WHISPER --genai FOLDER

``MODEL`` is a local checkpoint directory or a Hub model id (``AutoModelForCausalLM``);
a directory holding only a ``config.json`` gives a random-weight model of that config. A local
checkpoint is exported without loading it: the model is built on the meta device and each weight
is read from the checkpoint as it is written (``--verify`` loads it, to compare).
The export is :func:`pt2onnx_transformers.export_causal_lm`; with ``--genai`` it is written
as an onnxruntime-genai model folder (:func:`pt2onnx_transformers.save_genai_folder`: the
model, its external data, ``genai_config.json``, and the tokenizer's files: ``--tokenizer``'s,
else ``MODEL``'s when it has them). ``--static-cache`` exports past buffers of ``--max-length``
tokens that ``present`` updates in place (``export_causal_lm(cache="static")``), which genai runs
with ``past_present_share_buffer: true``. ``seq2seq`` writes optimum's encoder and decoder graphs
(:func:`pt2onnx_transformers.export_seq2seq`), or for Whisper with ``--genai`` an onnxruntime-genai
folder (:func:`pt2onnx_transformers.genai_whisper.export_genai_whisper`). Exit status as ``pt2onnx``'s: 0 success, 1 error, 2 usage,
4 capture failed, 5 the model differs from eager.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from pt2onnx.errors import CaptureError, Pt2OnnxError, VerificationError

from .checkpoint import empty_causal_lm, is_checkpoint, on_meta
from .genai import CONFIG_FILE, save_genai_folder
from .genai_whisper import AUDIO_PROCESSOR_FILE, export_genai_whisper
from .inputs import causal_lm_inputs, export_causal_lm
from .merged import USE_CACHE_BRANCH
from .seq2seq import export_seq2seq
from .static import StaticCacheLM, static_cache_inputs

__all__ = ["load_causal_lm", "load_seq2seq", "load_tokenizer", "main"]

#: Files of a saved tokenizer, one of which a checkpoint folder with a tokenizer holds.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json", "spiece.model")


def load_causal_lm(name: str) -> torch.nn.Module:
    """The causal LM ``name`` names: a local checkpoint folder built without its weights (on the meta
    device, :func:`~pt2onnx_transformers.checkpoint.empty_causal_lm`: export it with ``weights=name``),
    a Hub id loaded, or random weights for a folder holding only a config."""
    from transformers import AutoConfig, AutoModelForCausalLM

    path = Path(name)
    if is_checkpoint(path):
        return empty_causal_lm(path)
    if path.is_dir() and (path / "config.json").is_file():
        return AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path)).eval()
    return AutoModelForCausalLM.from_pretrained(name).eval()


def load_tokenizer(name: str) -> Any:
    """The tokenizer of ``name`` (a directory or Hub id); None for a directory without tokenizer files."""
    from transformers import AutoTokenizer

    path = Path(name)
    if path.is_dir() and not any((path / file).is_file() for file in TOKENIZER_FILES):
        return None
    return AutoTokenizer.from_pretrained(name)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pt2onnx-transformers", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    lm = sub.add_parser("causal-lm", help="a causal LM with its KV cache: one graph for the prompt and each step")
    lm.add_argument("model", metavar="MODEL", help="checkpoint directory, Hub id, or directory with a config.json")
    to = lm.add_mutually_exclusive_group(required=True)
    to.add_argument("-o", "--output", help="the ONNX file")
    to.add_argument(
        "--genai",
        metavar="FOLDER",
        help="an onnxruntime-genai model folder: model.onnx, its data, genai_config.json, the tokenizer",
    )
    lm.add_argument(
        "--tokenizer", metavar="NAME", help="with --genai: the tokenizer's directory or Hub id (default: MODEL's)"
    )
    lm.add_argument(
        "--max-length",
        type=int,
        help="with --genai: search.max_length, prompt included (default: the context length); "
        "with --static-cache: the length of the cache buffers",
    )
    lm.add_argument(
        "--static-cache",
        action="store_true",
        help="past buffers of --max-length written in place: genai's past_present_share_buffer (default: a "
        "cache that grows by concatenation)",
    )
    lm.add_argument("--batch", type=int, default=2, help="example batch size (dynamic in the graph)")
    lm.add_argument("--sequence-length", type=int, default=3)
    lm.add_argument("--past-sequence-length", type=int, default=5)
    lm.add_argument("--opset", type=int, default=None)
    lm.add_argument("--verify", action="store_true", help="run a decoding step in onnxruntime and compare with eager")
    lm.add_argument("--report", action="store_true", help="print the export report")
    s2s = sub.add_parser(
        "seq2seq",
        help="an encoder-decoder model: encoder, decoder, decoder-with-past and merged decoder graphs (optimum's files)",
    )
    s2s.add_argument("model", metavar="MODEL", help="checkpoint directory, Hub id, or directory with a config.json")
    s2s_to = s2s.add_mutually_exclusive_group(required=True)
    s2s_to.add_argument("-o", "--output", metavar="FOLDER", help="the folder the graphs go in")
    s2s_to.add_argument(
        "--genai",
        metavar="FOLDER",
        help="Whisper as an onnxruntime-genai folder: encoder.onnx, decoder.onnx, their data, genai_config.json, "
        "the tokenizer and audio_processor_config.json where MODEL has them",
    )
    s2s.add_argument("--opset", type=int, default=None)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pt2onnx-transformers`` console script; returns the exit status."""
    # The interpreter's final collections walk every object torch and the export leave (about
    # 1 s at exit on 2 cores) to free what the OS takes back anyway: frozen at exit, as `pt2onnx` does.
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    # Collection paused while the command runs, as `pt2onnx` does: loading the model (transformers
    # imports its modeling code and torch._dynamo then) and the export build objects that live
    # to the end, which full collections walk again and again to free almost nothing.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _main(argv)
    finally:
        if was_enabled:
            gc.enable()


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "seq2seq":
        return _seq2seq(args)
    if args.genai is None and (args.tokenizer is not None or (args.max_length is not None and not args.static_cache)):
        parser.error("--tokenizer and --max-length go with --genai (--max-length also with --static-cache)")
    if args.static_cache and args.max_length is None:
        parser.error("--static-cache needs --max-length, the length of the cache buffers (prompt included)")
    if args.max_length is not None and args.max_length < 1:
        parser.error(f"--max-length {args.max_length}: give the longest sequence, prompt included (at least 1)")
    if args.static_cache and args.max_length <= args.sequence_length:
        parser.error(
            f"--max-length {args.max_length}: the static cache's example needs at least --sequence-length + 1 "
            f"= {args.sequence_length + 1} tokens"
        )
    try:
        model = load_causal_lm(args.model)
    except (OSError, ValueError) as e:
        print(f"pt2onnx-transformers: error: cannot load {args.model!r}: {e}", file=sys.stderr)
        return 2
    except Pt2OnnxError as e:
        print(f"pt2onnx-transformers: error: {e}", file=sys.stderr)
        return 1
    tokenizer = None
    if args.genai is not None:
        try:
            tokenizer = load_tokenizer(args.tokenizer or args.model)
        except (OSError, ValueError) as e:
            if args.tokenizer is not None:
                print(
                    f"pt2onnx-transformers: error: cannot load the tokenizer {args.tokenizer!r}: {e}", file=sys.stderr
                )
                return 2
            print(f"no tokenizer for {args.model!r} ({e}); the folder is written without one")
    try:
        sizes = {"batch": args.batch, "sequence_length": args.sequence_length}
        options: dict[str, Any] = {"cache": "static", "max_length": args.max_length} if args.static_cache else {}
        if on_meta(model):
            options["weights"] = args.model
            print(f"weights streamed from {args.model} as they are written (the model is not loaded)")
        if args.output is not None:
            options["f"] = args.output  # a path that cannot take the file fails before the export
        result = export_causal_lm(
            model, **sizes, past_sequence_length=args.past_sequence_length, opset=args.opset, **options
        )
        if args.genai is not None:
            save_genai_folder(model, result, args.genai, tokenizer=tokenizer, max_length=args.max_length)
            print(f"saved {args.genai}: {len(result.model.graph)} nodes, opset {result.report.opset}")
            print(_describe_genai(Path(args.genai), tokenizer))
        else:
            print(f"saved {args.output}: {len(result.model.graph)} nodes, opset {result.report.opset}")
        print(f"inputs: {', '.join(result.input_names)}\noutputs: {', '.join(result.output_names)}")
        if args.report:
            print(result.report)
        if args.verify:
            # Other sizes than the example's: another batch, one new token, a longer past.
            if args.static_cache:
                past = min(7, args.max_length - 1)
                step = static_cache_inputs(
                    model, args.max_length, batch=3, sequence_length=1, past_sequence_length=past, seed=1
                )
            else:
                step = causal_lm_inputs(model, batch=3, sequence_length=1, past_sequence_length=7, seed=1)
                step["use_cache"] = True
            # A model exported without its weights is compared with the checkpoint loaded.
            eager = _loaded(args.model, args.max_length if args.static_cache else None) if on_meta(model) else None
            check = result.verify(**step, _eager=eager)
            print(check)
            if not check.ok:
                raise VerificationError(
                    "the exported model differs from eager PyTorch beyond the tolerance (see above)"
                )
    except Pt2OnnxError as e:
        print(f"pt2onnx-transformers: error: {e}", file=sys.stderr)
        return 5 if isinstance(e, VerificationError) else 4 if isinstance(e, CaptureError) else 1
    return 0


def load_seq2seq(name: str) -> torch.nn.Module:
    """The encoder-decoder model ``name`` names (``AutoModelForSeq2SeqLM``, else a speech one such as
    Whisper): a checkpoint (directory or Hub id), or random weights for a folder holding only a config."""
    from transformers import AutoConfig, AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq

    path = Path(name)
    config = AutoConfig.from_pretrained(name)
    bare = path.is_dir() and not any(path.glob("*.safetensors"))
    for auto in (AutoModelForSeq2SeqLM, AutoModelForSpeechSeq2Seq):
        try:
            return (auto.from_config(config) if bare else auto.from_pretrained(name)).eval()
        except ValueError:  # not a model type of this auto class: the next one
            continue
    raise ValueError(f"{type(config).__name__} is neither a text nor a speech sequence-to-sequence model")


def _seq2seq(args: argparse.Namespace) -> int:
    try:
        model = load_seq2seq(args.model)
    except (OSError, ValueError) as e:
        print(
            f"pt2onnx-transformers: error: cannot load {args.model!r} as an encoder-decoder model: {e}", file=sys.stderr
        )
        return 2
    if args.genai is not None:
        return _genai_whisper(model, args)
    try:
        exported = export_seq2seq(model, opset=args.opset)
        exported.save(args.output)
    except Pt2OnnxError as e:
        print(f"pt2onnx-transformers: error: {e}", file=sys.stderr)
        return 4 if isinstance(e, CaptureError) else 1
    for name, result in exported.graphs().items():
        print(
            f"saved {Path(args.output) / name}.onnx: {len(result.model.graph)} nodes; inputs: {', '.join(result.input_names)}"
        )
    print(
        f"saved {Path(args.output) / 'decoder_model_merged'}.onnx: If over the two decoder graphs; "
        f"inputs: decoder_with_past_model's and {USE_CACHE_BRANCH}"
    )
    return 0


def _genai_whisper(model: torch.nn.Module, args: argparse.Namespace) -> int:
    from transformers import AutoFeatureExtractor

    extras: dict[str, Any] = {}
    for name, load in (("tokenizer", load_tokenizer), ("feature_extractor", AutoFeatureExtractor.from_pretrained)):
        try:
            extras[name] = load(args.model)
        except (OSError, ValueError) as e:
            print(f"no {name.replace('_', ' ')} for {args.model!r} ({type(e).__name__}); the folder is written without")
    if extras.get("feature_extractor") is None:
        print(f"no {AUDIO_PROCESSOR_FILE}: feed audio_features with Generator.set_model_input")
    try:
        exported = export_genai_whisper(model, args.genai, opset=args.opset, **extras)
    except Pt2OnnxError as e:
        print(f"pt2onnx-transformers: error: {e}", file=sys.stderr)
        return 4 if isinstance(e, CaptureError) else 1
    for name, result in (("encoder", exported.encoder), ("decoder", exported.decoder)):
        print(
            f"saved {Path(args.genai) / name}.onnx: {len(result.model.graph)} nodes; inputs: {', '.join(result.input_names)}"
        )
    print(_describe_genai(Path(args.genai), extras.get("tokenizer")))
    return 0


def _loaded(name: str, static_length: int | None) -> torch.nn.Module:
    """The checkpoint ``name`` loaded, called as its export is (over static buffers of ``static_length``)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(name).eval()
    return StaticCacheLM(model, static_length).eval() if static_length is not None else model


def _describe_genai(folder: Path, tokenizer: Any) -> str:
    written_config = json.loads((folder / CONFIG_FILE).read_text())
    config, search = written_config["model"], written_config["search"]
    ids = ", ".join(f"{k} {config[k + '_token_id']}" for k in ("eos", "bos", "pad"))
    written = f"{type(tokenizer).__name__}'s files" if tokenizer is not None else "no tokenizer"
    shared = (
        f"; past and present share buffers of {search['max_length']}" if search["past_present_share_buffer"] else ""
    )
    return f"{CONFIG_FILE}: type {config['type']}, context {config['context_length']}, {ids}; {written}{shared}"


if __name__ == "__main__":
    raise SystemExit(main())
