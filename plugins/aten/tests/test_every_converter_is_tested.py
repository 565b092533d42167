"""Every converter pt2onnx-aten registers is proven by a property test that declares it with ``@covers``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pt2onnx.testing import untested_converters

HERE = Path(__file__).parent


def _test_modules():
    for path in sorted(HERE.glob("test_*.py")):
        if path.stem == Path(__file__).stem:
            continue
        spec = importlib.util.spec_from_file_location(f"_aten_tests_{path.stem}", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module


def test_every_aten_converter_has_a_property_test():
    missing = untested_converters("aten", _test_modules())
    assert not missing, f"{len(missing)} converter(s) without a @covers property test: {missing}"
