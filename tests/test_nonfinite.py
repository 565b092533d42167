"""``export(nonfinite=...)``: torch's results on NaN and ±inf, or the ONNX op's where torch's cost
run time; ``op.exact_nonfinite`` asks, and the report lists the ops that differ (issue #27).

The max-pool converters that ask are tested against eager in
``plugins/aten/tests/test_aten_pooling.py``; here, the option, the plugin API and the report.
"""

from __future__ import annotations

import json
import sys
import types

import pytest
import torch

import pt2onnx
from pt2onnx.errors import ConversionError, OptionError
from pt2onnx.plugin import hookimpl

DEVIATION = "a NaN gives 0 (torch: NaN)"


def _plugin(name: str, *, decline: bool = False, deviation: str = DEVIATION) -> types.ModuleType:
    """A plugin whose relu asks for torch's non-finite results: ``Relu`` if so, else ``Max(x, 0)``."""
    module = types.ModuleType(name)

    def relu(op, self):
        exact = op.exact_nonfinite(deviation)
        if decline:
            raise op.decline("only for tests")
        return op.Relu(self) if exact else op.Max(self, op.constant(0.0, op.dtype_of(self)))

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter("aten::relu.default", relu)

    module.pt2onnx_register_converters = pt2onnx_register_converters  # type: ignore[attr-defined]
    return module


class TwoRelus(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.relu(x) - 1), x.sum()


def _op_types(result: pt2onnx.ExportResult) -> list[str]:
    return [node.op_type for node in result.model.graph]


def test_a_converter_that_asks_gives_its_plain_form_by_default_and_the_report_lists_it(tmp_path):
    x = torch.randn(2, 3)
    result = pt2onnx.export(TwoRelus(), (x,), plugins=[_plugin("plain_relu")], report=tmp_path / "report.md")
    assert "Max" in _op_types(result) and "Relu" not in _op_types(result)
    report = result.report
    assert report.nonfinite == "onnx"
    [deviation] = report.nonfinite_deviations
    assert (deviation.op, deviation.count, deviation.plugin, deviation.deviation) == (
        "aten::relu.default",
        2,  # nodes, not calls
        "plain_relu",
        DEVIATION,
    )
    assert result.verify(x).ok  # exact on finite inputs

    text = (tmp_path / "report.md").read_text()
    assert "- non-finite inputs: 1 op differs from torch on some NaN or ±inf inputs" in text
    assert "## Non-finite deviations" in text
    assert f"| aten::relu.default | 2 | plain_relu | {DEVIATION} |" in text
    assert '- To export torch\'s exact forms: nonfinite="torch" (--nonfinite torch).' in text
    assert text.index("## Non-finite deviations") < text.index("## Ops")

    html = report.to_html()
    assert "<h2>Non-finite deviations</h2>" in html and f"<td>{DEVIATION}</td>" in html
    data = json.loads(report.to_json())
    assert data["nonfinite"] == "onnx"
    assert data["nonfinite_deviations"] == [
        {"op": "aten::relu.default", "count": 2, "plugin": "plain_relu", "deviation": DEVIATION}
    ]
    assert "aten::relu.default" in str(report) and DEVIATION in str(report)


def test_nonfinite_torch_gives_the_exact_form_and_lists_nothing():
    result = pt2onnx.export(TwoRelus(), (torch.randn(2, 3),), plugins=[_plugin("plain_relu")], nonfinite="torch")
    assert "Relu" in _op_types(result) and "Max" not in _op_types(result)
    assert result.report.nonfinite == "torch" and result.report.nonfinite_deviations == []
    text = result.report.to_markdown()
    assert "Non-finite deviations" not in text
    assert '- non-finite inputs: torch\'s results on NaN and ±inf everywhere (nonfinite="torch")' in text


def test_an_export_without_deviations_has_no_section():
    result = pt2onnx.export(TwoRelus(), (torch.randn(2, 3),))  # the builtin relu asks nothing
    assert result.report.nonfinite_deviations == []
    assert "non-finite" not in result.report.to_markdown().lower()
    assert "non-finite" not in str(result.report)
    assert json.loads(result.report.to_json())["nonfinite_deviations"] == []


def test_a_converter_that_declines_after_asking_leaves_no_deviation():
    # The node goes to the builtin relu: the plain form the declining converter chose is not in the model.
    result = pt2onnx.export(TwoRelus(), (torch.randn(2, 3),), plugins=[_plugin("declining", decline=True)])
    assert result.report.provider("aten::relu.default") == "aten"
    assert result.report.nonfinite_deviations == []


def test_a_deviation_must_say_where_the_plain_form_differs():
    with pytest.raises(ConversionError, match=r"TypeError: op.exact_nonfinite\(deviation\): say on which inputs"):
        pt2onnx.export(TwoRelus(), (torch.randn(2, 3),), plugins=[_plugin("silent", deviation=" ")])


@pytest.mark.parametrize("value", ["exact", "ONNX", None, True])
def test_an_unknown_nonfinite_value_is_an_option_error_before_capture(value, monkeypatch):
    called = []
    monkeypatch.setattr(sys.modules["pt2onnx.export"], "capture", lambda *a, **k: called.append(1))
    with pytest.raises(OptionError, match=rf"nonfinite={value!r} is not one of 'onnx', 'torch'") as info:
        pt2onnx.export(TwoRelus(), (torch.randn(2, 3),), nonfinite=value)
    assert "'torch' (torch's results on every input)" in (info.value.hint or "")
    assert not called
