"""The command line says what it can do and does what the API does: ``--dynamic`` on a
factory with keyword inputs, ``--version``, ``--weights``/``--dtype``/``--max-shard-bytes``,
``--nonfinite``, progress while ``--verify`` runs, and the exit statuses docs/cli.md lists."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import cli_process
from terminal import run_on_a_terminal

ROOT = Path(__file__).resolve().parent.parent
PT2ONNX = cli_process.which("pt2onnx")

MODELS = """\
import torch
from torch.export import Dim


class Encoder(torch.nn.Module):
    # Called as transformers models are: keyword inputs, and **kwargs for the rest.
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, input_ids, attention_mask=None, **kwargs):
        hidden = self.embed(input_ids)
        if attention_mask is not None:
            hidden = hidden * attention_mask.unsqueeze(-1)
        if "scale" in kwargs:
            hidden = hidden * kwargs["scale"]
        return hidden


def _inputs(batch=2, seq=5):
    torch.manual_seed(0)
    return torch.randint(0, 50, (batch, seq)), torch.ones(batch, seq)


def keywords():
    ids, mask = _inputs()
    return Encoder().eval(), {"args": (ids,), "kwargs": {"attention_mask": mask}}


def keywords_only():
    ids, mask = _inputs()
    return Encoder().eval(), {"kwargs": {"input_ids": ids, "attention_mask": mask}}


def positional():
    return Encoder().eval(), _inputs()


def caught_by_kwargs():
    ids, mask = _inputs()
    return Encoder().eval(), {"args": (ids,), "kwargs": {"attention_mask": mask, "scale": torch.ones(2, 5, 1)}}


def with_options():
    ids, mask = _inputs()
    # The factory's own dynamic_shapes, which --dynamic adds to: None for an input, a tuple per axis.
    shapes = {"input_ids": None, "attention_mask": (None, Dim("seq"))}
    return Encoder().eval(), {"args": (ids,), "kwargs": {"attention_mask": mask}}, {"dynamic_shapes": shapes}


def nested_under_kwargs():
    ids, mask = _inputs()
    # torch's documented form: what **kwargs catches nested under its name.
    shapes = {"input_ids": {0: Dim("batch")}, "kwargs": {"scale": None}}
    inputs = {"args": (ids,), "kwargs": {"attention_mask": mask, "scale": torch.ones(1, 5, 1)}}
    return Encoder().eval(), inputs, {"dynamic_shapes": shapes}


class Apart(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 8)

    def forward(self, input_ids, attention_mask=None):
        return self.embed(input_ids), attention_mask.sum(-1)


def apart():
    ids, mask = _inputs()
    return Apart().eval(), {"args": (ids,), "kwargs": {"attention_mask": mask}}


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def on_meta():
    with torch.device("meta"):
        model = Net().eval()
    return model, (torch.randn(2, 64),)


def real():
    torch.manual_seed(0)
    return Net().eval(), (torch.randn(2, 64),)


def pooled():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2))
    return net.eval(), (torch.randn(1, 3, 8, 8),)
"""


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return cli_process.run("pt2onnx", *args, cwd=cwd, env={**os.environ, **(env or {})})


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "models.py").write_text(MODELS)
    return tmp_path


def _input_shapes(done: subprocess.CompletedProcess[str]) -> dict[str, list]:
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    return {i["name"]: i["shape"] for i in json.loads(done.stdout)["report"]["inputs"]}


# -- --dynamic: every input the factory passes, however it passes it ----------------------------


@pytest.mark.parametrize("factory", ["keywords", "keywords_only", "positional"])
def test_dynamic_names_inputs_passed_by_keyword_or_position(project, factory):
    done = run(
        "export",
        f"models.py:{factory}",
        "-o",
        "m.onnx",
        "--dynamic",
        "input_ids:0=batch",
        "--dynamic",
        "input_ids:1=seq",
        "--dynamic",
        "attention_mask:0=batch",
        "--dynamic",
        "attention_mask:-1=seq",  # the last axis
        "--json",
        "--quiet",
        cwd=project,
    )
    assert _input_shapes(done) == {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]}
    session = ort.InferenceSession(str(project / "m.onnx"))
    ids = np.random.default_rng(0).integers(0, 50, (3, 7))
    (out,) = session.run(None, {"input_ids": ids, "attention_mask": np.ones((3, 7), np.float32)})
    assert out.shape == (3, 7, 8)


def test_dynamic_leaves_the_inputs_it_does_not_name_static(project):
    # torch.export wants every input named in dynamic_shapes: the one --dynamic leaves out is static.
    done = run(
        "export", "models.py:apart", "-o", "m.onnx", "--dynamic", "input_ids:0=batch", "--json", "--quiet", cwd=project
    )
    assert _input_shapes(done) == {"input_ids": ["batch", 5], "attention_mask": [2, 5]}


def test_dynamic_names_a_keyword_caught_by_kwargs(project):
    done = run(
        "export",
        "models.py:caught_by_kwargs",
        "-o",
        "m.onnx",
        "--dynamic",
        "input_ids:0=batch",
        "--dynamic",
        "attention_mask:0=batch",
        "--dynamic",
        "scale:0=batch",
        "--json",
        "--quiet",
        cwd=project,
    )
    assert _input_shapes(done) == {"input_ids": ["batch", 5], "attention_mask": ["batch", 5], "scale": ["batch", 5, 1]}


def test_dynamic_adds_to_the_factorys_own_dynamic_shapes(project):
    # The factory gives None for input_ids and a tuple per axis for attention_mask, with a Dim "seq".
    done = run(
        "export",
        "models.py:with_options",
        "-o",
        "m.onnx",
        "--dynamic",
        "input_ids:0=batch",
        "--dynamic",
        "input_ids:1=seq",  # the factory's Dim of that name
        "--dynamic",
        "attention_mask:0=batch",
        "--json",
        "--quiet",
        cwd=project,
    )
    assert _input_shapes(done) == {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]}


def test_dynamic_adds_to_dynamic_shapes_nested_under_kwargs(project):
    done = run(
        "export",
        "models.py:nested_under_kwargs",
        "-o",
        "m.onnx",
        "--dynamic",
        "attention_mask:0=batch",  # shares the factory's Dim("batch") of input_ids
        "--json",
        "--quiet",
        cwd=project,
    )
    assert _input_shapes(done) == {"input_ids": ["batch", 5], "attention_mask": ["batch", 5], "scale": [1, 5, 1]}


@pytest.mark.parametrize(
    ("flag", "message"),
    [
        ("input_ids:2", "input 'input_ids' has 2 dims (shape [2, 5]), so no axis 2"),
        ("nope:0", "the model has no input 'nope'; its inputs are ['input_ids', 'attention_mask']"),
    ],
)
def test_dynamic_mistakes_are_usage_errors(project, flag, message):
    done = run("export", "models.py:keywords", "-o", "m.onnx", "--dynamic", flag, cwd=project)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "internal error" not in done.stderr
    assert not (project / "m.onnx").exists()


def test_dynamic_on_an_input_the_example_leaves_out(project):
    done = run("export", "models.py:positional", "-o", "m.onnx", "--dynamic", "scale:0", cwd=project)
    assert done.returncode == 2 and "its inputs are ['input_ids', 'attention_mask']" in done.stderr
    (project / "one.py").write_text(
        "from models import Encoder, _inputs\n\ndef make():\n    return Encoder().eval(), (_inputs()[0],)\n"
    )
    done = run("export", "one.py:make", "-o", "m.onnx", "--dynamic", "attention_mask:0", cwd=project)
    assert done.returncode == 2, done.stderr
    assert "the example inputs do not pass 'attention_mask'" in done.stderr


# -- --version ----------------------------------------------------------------------------------


def test_version_names_pt2onnx_and_what_it_runs_on_without_importing_torch():
    import importlib.metadata

    import pt2onnx

    done = subprocess.run([PT2ONNX, "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    line = done.stdout.strip()
    assert line.startswith(f"pt2onnx {pt2onnx.__version__} ("), line
    for name in ("torch", "onnx", "onnxruntime"):
        assert f"{name} {importlib.metadata.version(name)}" in line, line
    code = (
        "import sys\nfrom pt2onnx.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "torch imported: False" in done.stdout, done.stdout + done.stderr


# -- what the API offers: --weights, --dtype, --max-shard-bytes -----------------------------------


def _checkpoint(project: Path) -> tuple[torch.nn.Module, torch.Tensor]:
    namespace: dict = {}
    exec((project / "models.py").read_text(), namespace)
    model, (x,) = namespace["real"]()
    from safetensors.torch import save_file

    save_file(model.state_dict(), str(project / "net.safetensors"))
    return model, x


def test_weights_dtype_and_shards_from_the_command_line(project):
    model, x = _checkpoint(project)
    done = run(
        "export",
        "models.py:on_meta",
        "-o",
        "net.onnx",
        "--weights",
        "net.safetensors",
        "--dtype",
        "float16",
        "--max-shard-bytes",
        "4KiB",
        "--json",
        "--quiet",
        cwd=project,
    )
    assert done.returncode == 0, done.stderr
    files = json.loads(done.stdout)["files"]
    shards = [f for f in files if f.endswith(".data")]
    assert len(shards) >= 2, files  # a tensor larger than a shard gets a file of its own
    session = ort.InferenceSession(str(project / "net.onnx"))
    assert [i.type for i in session.get_inputs()] == ["tensor(float)"]  # the inputs keep their dtype
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(got, expected, atol=2e-2, rtol=2e-2)
    assert not np.allclose(got, expected, atol=1e-7, rtol=0)  # computed in float16, not float32


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-shard-bytes", "lots"], "argument --max-shard-bytes: 'lots' is not a size"),
        (["--max-shard-bytes", "0"], "'0' is not a positive size"),
        (["--dtype", "int8"], "argument --dtype: invalid choice: 'int8'"),
        (["--weights", "missing.safetensors"], "--weights missing.safetensors: no such file or folder"),
    ],
)
def test_bad_weights_dtype_and_shard_flags_are_usage_errors(project, flags, message):
    done = run("export", "models.py:real", "-o", "net.onnx", *flags, cwd=project)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert not (project / "net.onnx").exists()


def test_max_shard_bytes_takes_plain_and_unit_sizes(project):
    for size in ("500MB", "1_000"):
        done = run("export", "models.py:real", "-o", "net.onnx", "--max-shard-bytes", size, "--quiet", cwd=project)
        assert done.returncode == 0, (size, done.stderr)


def test_verify_of_a_meta_device_model_is_a_usage_error(project):
    _checkpoint(project)
    done = run("export", "models.py:on_meta", "-o", "net.onnx", "--weights", "net.safetensors", "--verify", cwd=project)
    assert done.returncode == 2, done.stderr
    assert "builds the model on the meta device" in done.stderr and "internal error" not in done.stderr


# -- --verify shows that it runs ------------------------------------------------------------------


def _stderr_on_a_terminal(args: list[str], cwd: Path) -> tuple[int, str, str]:
    status, out, err = run_on_a_terminal(args, cwd)
    return status, out, re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", err)


def test_verify_shows_a_phase_line_on_a_terminal(project):
    status, out, err = _stderr_on_a_terminal(
        [PT2ONNX, "export", "models.py:real", "-o", "net.onnx", "--verify"], project
    )
    assert status == 0, err
    assert "max abs difference to eager" in out
    assert "pt2onnx verify" in err, err
    status, out, err = _stderr_on_a_terminal(
        [PT2ONNX, "export", "models.py:real", "-o", "net.onnx", "--verify", "--quiet"], project
    )
    assert status == 0 and "pt2onnx verify" not in err, err


# -- --nonfinite: torch's results on NaN and ±inf, or the ONNX op's where they cost run time ---


def _op_types(path: Path) -> set[str]:
    return {node.op_type for node in onnx.load(str(path)).graph.node}


def test_nonfinite_picks_the_max_pool_form_and_says_which_ops_differ(project):
    done = run("export", "models.py:pooled", "-o", "plain.onnx", "--quiet", cwd=project)
    assert done.returncode == 0, done.stderr
    assert "non-finite inputs: aten::max_pool2d.default differs from torch" in done.stdout
    assert "--nonfinite torch" in done.stdout
    assert "If" not in _op_types(project / "plain.onnx")

    done = run(
        "export", "models.py:pooled", "-o", "exact.onnx", "--nonfinite", "torch", "--json", "--quiet", cwd=project
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)["report"]
    assert report["nonfinite"] == "torch" and report["nonfinite_deviations"] == []
    assert "If" in _op_types(project / "exact.onnx")


def test_a_nonfinite_value_the_api_has_not_is_a_usage_error(project):
    done = run("export", "models.py:pooled", "-o", "m.onnx", "--nonfinite", "exact", cwd=project)
    assert done.returncode == 2, done.stderr
    assert "argument --nonfinite: invalid choice: 'exact'" in done.stderr
    assert not (project / "m.onnx").exists()
