"""The static checks' configuration (pyproject.toml) has no holes.

An ignore of a rule whose family ruff does not select does nothing, and says something
false about the code; a mypy ``files`` list that leaves a pack out lets any change there
pass. ``PT2ONNX_PYPROJECT`` points these tests at another pyproject.toml (its folder is the
checkout they read), e.g. the one of an older commit.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import re
import subprocess
import sys
import tomllib
from importlib.util import find_spec
from pathlib import Path
from typing import Any

PYPROJECT = Path(os.environ.get("PT2ONNX_PYPROJECT", Path(__file__).parents[1] / "pyproject.toml"))
ROOT = PYPROJECT.parent


@functools.cache
def _config() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text())


def _ruff(*args: str) -> str:
    ruff = Path(sys.executable).with_name("ruff")
    return subprocess.run([str(ruff), *args], check=True, capture_output=True, text=True, cwd=ROOT).stdout


@functools.cache
def _families() -> dict[str, str]:
    """Every rule-code prefix ruff knows (``E``, ``BLE``, ``PLC``...) -> its linter's name."""
    families = {}
    for linter in json.loads(_ruff("linter", "--output-format", "json")):
        for category in [{"prefix": ""}, *(linter.get("categories") or [])]:
            prefix = linter["prefix"] + category["prefix"]
            if prefix:
                families[prefix] = linter["name"]
    return families


def _linter(code: str) -> str | None:
    """The linter of a rule code or selector: ``BLE001`` is flake8-blind-except, not bugbear's ``B``."""
    prefixes = [p for p in _families() if code.startswith(p)]
    return _families()[max(prefixes, key=len)] if prefixes else None


def _selects(selector: str, code: str) -> bool:
    """Whether ``select = [selector]`` turns on some rule that ignoring ``code`` turns off."""
    if selector == "ALL":
        return True
    return _linter(selector) == _linter(code) and (code.startswith(selector) or selector.startswith(code))


def _ignores(lint: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, code)`` for every code an ignore of ``[tool.ruff.lint]`` names."""
    found = [(key, code) for key in ("ignore", "extend-ignore") for code in lint.get(key, [])]
    for key in ("per-file-ignores", "extend-per-file-ignores"):
        found += [(f"{key} {pattern!r}", code) for pattern, codes in lint.get(key, {}).items() for code in codes]
    return found


def test_every_rule_ruff_is_told_to_ignore_is_selected():
    lint = _config()["tool"]["ruff"]["lint"]
    selected = [*lint.get("select", []), *lint.get("extend-select", [])]
    dead = [f"{where}: {code}" for where, code in _ignores(lint) if not any(_selects(s, code) for s in selected)]
    assert not dead, f"ignored, but no selected family has the rule (select is {selected}): {dead}"


def test_the_family_of_a_code_is_its_longest_prefix():
    # Bugbear's "B" does not select blind-except's BLE001, nor pycodestyle's "E" eradicate's ERA001.
    assert not _selects("B", "BLE001") and not _selects("E", "ERA001") and not _selects("E", "W605")
    assert _selects("PL", "PLC0415") and _selects("A", "A002") and _selects("E501", "E") and _selects("ALL", "D100")


def test_every_per_file_ignore_pattern_matches_a_file():
    lint = _config()["tool"]["ruff"]["lint"]
    patterns = [p for key in ("per-file-ignores", "extend-per-file-ignores") for p in lint.get(key, {})]
    unmatched = [p for p in patterns if not glob.glob(p, root_dir=ROOT, recursive=True)]
    assert not unmatched


def _sources(pattern: str) -> set[Path]:
    return {p for match in glob.glob(pattern, root_dir=ROOT) for p in (ROOT / match).rglob("*.py")}


def _distributions() -> list[Path]:
    """The workspace's distributions: core, plugins/*, contrib/* (each a pyproject.toml beside a src/)."""
    found = [*ROOT.glob("*/pyproject.toml"), *ROOT.glob("*/*/pyproject.toml")]
    return sorted(p.parent for p in found if (p.parent / "src").is_dir())


def test_mypy_checks_every_distribution_of_the_workspace():
    checked = set().union(*(_sources(f) for f in _config()["tool"]["mypy"]["files"]))
    unchecked = [str(d.relative_to(ROOT)) for d in _distributions() if not _sources(str(d / "src")) <= checked]
    assert not unchecked, f"mypy's files leave out the sources of {unchecked}"


def test_every_mypy_override_names_a_module_there_is():
    # mypy says nothing of a section that matches no module (a pack renamed, a typo) unless
    # run with warn_unused_configs, which needs incremental mode off.
    first_party = {p.parent.name for d in _distributions() for p in (d / "src").glob("*/__init__.py")}
    # A pack's declared dependency counts even where the dev venv leaves it out (torchvision: dev.sh).
    declared = {
        re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].replace("-", "_")
        for d in _distributions()
        for requirement in tomllib.loads((d / "pyproject.toml").read_text())["project"].get("dependencies", [])
    }
    patterns = [m for o in _config()["tool"]["mypy"].get("overrides", []) for m in _as_list(o["module"])]
    missing = [m for m in patterns if (top := m.split(".")[0]) not in first_party | declared and find_spec(top) is None]
    assert not missing


def _as_list(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else value
