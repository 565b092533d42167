"""Import the pack from its source without installing it: its tests pass it with ``plugins=[...]``.

Neither installed nor put on ``sys.path`` (a build leaves ``*.egg-info`` in ``src/``, which
would make it an installed plugin for every test of the session, shadowing the builtin
converters); tests/custom_ops installs it into a temporary directory to check discovery
and precedence.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parents[1] / "src" / "pt2onnx_ort"

if "pt2onnx_ort" not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        "pt2onnx_ort", _PACKAGE / "__init__.py", submodule_search_locations=[str(_PACKAGE)]
    )
    assert _spec is not None and _spec.loader is not None
    sys.modules["pt2onnx_ort"] = _module = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_module)
