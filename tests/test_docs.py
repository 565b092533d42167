"""The documentation site: every page's examples run as the page says (tests/docs_runner.py).

Datasette's habit: a page whose example no longer works fails the suite. Docstring
examples of the API reference pages run too.
"""

from __future__ import annotations

import inspect
import os
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

import pt2onnx
import pt2onnx.plugin
import pt2onnx.testing

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
RUNNER = Path(__file__).with_name("docs_runner.py")
# errors.md's examples raise on purpose: tests/test_errors.py runs each and checks its error.
PAGES = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md") if p.name != "errors.md")

sys.path.insert(0, str(RUNNER.parent))
import cli_process  # noqa: E402
from docs_runner import blocks  # noqa: E402


def _run_page(page: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return cli_process.run_python(RUNNER, str(page), str(workdir), env=env, timeout=900)


@pytest.mark.parametrize("page", PAGES)
def test_page_examples_run(page, tmp_path):
    workdir = tmp_path / "work"
    workdir.mkdir()
    done = _run_page(DOCS / page, workdir)
    assert done.returncode == 0, f"{page}:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"


def test_the_runner_fails_a_page_whose_output_differs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('```python title="hello.py"\nprint("hello")\n```\n\n```console\n$ python hello.py\ngoodbye\n```\n')
    done = _run_page(page, tmp_path)
    assert done.returncode == 1
    assert "missing (in order) from the output: 'goodbye'" in done.stderr
    page.write_text("```console\n$ python -c 'raise SystemExit(3)'\n(exit status 3)\n```\n")
    assert _run_page(page, tmp_path).returncode == 0
    page.write_text("```bash\npt2onnx plugins\n```\n")
    done = _run_page(page, tmp_path)
    assert done.returncode == 1 and "a bash block may only install" in done.stderr


def test_blocks_that_do_not_run_say_why():
    skipped = {
        (page, block.line): block.not_run
        for page in PAGES
        for block in blocks((DOCS / page).read_text())
        if block.not_run is not None
    }
    assert all(len(reason) > 20 for reason in skipped.values()), skipped
    # Few, each with its reason: every other example runs.
    assert len(skipped) <= 3, skipped


def _docstring_examples(module: types.ModuleType) -> list[str]:
    texts = [inspect.getdoc(module) or ""]
    for _, member in inspect.getmembers(module):
        if getattr(member, "__module__", None) == module.__name__:
            texts.append(inspect.getdoc(member) or "")
    return [m["body"] for text in texts for m in re.finditer(r"```python\n(?P<body>.*?)```", text, re.S)]


def _exec_example(code: str, name: str) -> types.ModuleType:
    module = types.ModuleType(name)
    sys.modules[name] = module
    exec(compile(code, name, "exec"), module.__dict__)
    return module


def test_the_plugin_api_docstring_example_is_a_working_plugin():
    [example] = _docstring_examples(pt2onnx.plugin)
    plugin = _exec_example(example, "docstring_gelu_pack")
    x = torch.randn(3, 5)
    result = pt2onnx.export(torch.nn.GELU(approximate="tanh"), (x,), plugins=[plugin])
    assert result.report.provider("aten::gelu.default") == "docstring_gelu_pack"
    assert result.verify(x).ok


def test_the_testing_docstring_example_runs_its_test():
    [example] = _docstring_examples(pt2onnx.testing)
    module = _exec_example(example, "docstring_testing_example")
    tests = [fn for name, fn in vars(module).items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()


def test_the_docs_build_of_dev_sh_fails_on_a_broken_link(tmp_path):
    """``./dev.sh test``'s docs build, with its own flags, stops on a warning (``--quiet``
    beside ``--strict`` once hid them all from the strict count)."""
    line = next(line for line in (ROOT / "dev.sh").read_text().splitlines() if "mkdocs build" in line)
    words = shlex.split(line.split("mkdocs build", 1)[1])
    flags = [w for i, w in enumerate(words) if w.startswith("-") and w != "--site-dir" and words[i - 1] != "--site-dir"]
    assert "--strict" in flags
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# Home\n\nSee [the missing page](no_such_page.md).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: broken\n")
    build = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", *flags, "--site-dir", str(tmp_path / "site")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert build.returncode != 0, f"mkdocs build {' '.join(flags)} passed a page with a broken link:\n{build.stderr}"
    assert "no_such_page.md" in build.stderr
