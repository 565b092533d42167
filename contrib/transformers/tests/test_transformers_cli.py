"""``pt2onnx-transformers causal-lm``: the command-line form of ``export_causal_lm``."""

from __future__ import annotations

import subprocess
import sys

import onnx
import pytest
import torch
from tiny_models import causal_lm

from pt2onnx_transformers.cli import main

pytestmark = pytest.mark.slow


def test_a_checkpoint_directory_exports_verified(tmp_path, capsys):
    causal_lm("qwen2").save_pretrained(tmp_path / "qwen2")
    output = tmp_path / "qwen2.onnx"
    assert main(["causal-lm", str(tmp_path / "qwen2"), "-o", str(output), "--verify"]) == 0
    out = capsys.readouterr().out
    assert "inputs: input_ids, attention_mask, past_key_values.0.key" in out
    assert "outputs: logits, present.0.key" in out
    assert "max abs" in out and "BAD" not in out
    names = [i.name for i in onnx.load(output).graph.input]
    assert names[:3] == ["input_ids", "attention_mask", "past_key_values.0.key"]


def test_a_missing_model_is_a_usage_error(tmp_path, capsys):
    assert main(["causal-lm", str(tmp_path / "nowhere"), "-o", str(tmp_path / "m.onnx")]) == 2
    assert "cannot load" in capsys.readouterr().err


def test_an_output_path_that_cannot_take_the_file_fails_before_the_capture(tmp_path, capsys, monkeypatch):
    causal_lm("qwen2").config.save_pretrained(tmp_path / "qwen2")
    (tmp_path / "taken").write_text("a file where a folder is asked for")

    def capture(*args, **kwargs):
        raise AssertionError("captured: the path was checked only after the export")

    monkeypatch.setattr(torch.export, "export", capture)
    assert main(["causal-lm", str(tmp_path / "qwen2"), "-o", str(tmp_path / "taken" / "m.onnx")]) == 1
    err = capsys.readouterr().err
    assert f"[save] cannot save to {tmp_path / 'taken' / 'm.onnx'}: {tmp_path / 'taken'} is a file" in err
    assert "captured" not in err


def test_the_command_pauses_the_garbage_collector_and_freezes_it_at_exit():
    # As pt2onnx's own command: collection paused while it runs (loading the model included) and
    # enabled again after it; the interpreter's final collections would walk all torch left.
    script = (
        "import atexit, gc\n"
        "atexit.register(lambda: print('at exit', gc.get_freeze_count() > 0))\n"
        "import pt2onnx_transformers.cli as cli\n"
        "command = cli._main\n"
        "cli._main = lambda argv: print('during main', gc.isenabled()) or command(argv)\n"
        "for _ in range(2):\n"
        "    try:\n"
        "        cli.main(['causal-lm'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('after main', gc.get_freeze_count(), gc.isenabled())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True)
    lines = [line for line in done.stdout.splitlines() if line.startswith(("during", "after", "at exit"))]
    assert lines == ["during main False", "during main False", "after main 0 True", "at exit True"]
