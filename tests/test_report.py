"""The export report as a file (Markdown, HTML, JSON) and as data, kept current by save() and verify()."""

from __future__ import annotations

import importlib.metadata
import json
import math
import sys
import types
from html.parser import HTMLParser

import onnx
import pytest
import torch

import pt2onnx
from pt2onnx.errors import SaveError
from pt2onnx.plugin import hookimpl
from pt2onnx.report import Report
from pt2onnx.runtime import OutputDifference, Verification


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1, self.fc2 = torch.nn.Linear(6, 8), torch.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x))), x.sum(-1)


def _relu_plugin() -> types.ModuleType:
    """A plugin overriding the builtin relu converter (argument layer)."""
    module = types.ModuleType("report_relu_override")

    @hookimpl
    def pt2onnx_register_converters(register):
        register.converter("aten::relu.default", lambda op, self: op.Relu(self))

    module.pt2onnx_register_converters = pt2onnx_register_converters  # type: ignore[attr-defined]
    return module


def _export(tmp_path, name: str) -> tuple[pt2onnx.ExportResult, torch.Tensor]:
    x = torch.randn(2, 6)
    batch = torch.export.Dim("batch")
    result = pt2onnx.export(
        Block().eval(),
        (x,),
        dynamic_shapes={"x": {0: batch}},
        plugins=[_relu_plugin()],
        report=tmp_path / name,
    )
    return result, x


def test_markdown_report_is_written_by_export_and_rewritten_by_save_and_verify(tmp_path):
    result, _ = _export(tmp_path, "report.md")
    text = (tmp_path / "report.md").read_text()
    assert "## Verification" not in text and "saved:" not in text  # neither ran yet
    for phase in ("plugins", "capture", "decompose", "translate", "assemble", "optimize"):
        assert f"| {phase} | {result.report.timings[phase]:.3f} |" in text
    assert "- capture: strict=False" in text
    assert "| input | x | FLOAT | [batch, 6] |" in text
    assert "| aten::relu.default | 1 | report_relu_override | argument | - | aten [builtin] |" in text
    assert "| aten::linear.default | 2 | aten | builtin | - |" in text
    cse = next(p for p in result.report.passes if p.name == "cse")
    assert f"| cse | {cse.nodes_before} | {cse.nodes_after} | {cse.removed} |" in text

    result.save(tmp_path / "model.onnx")
    size = (tmp_path / "model.onnx").stat().st_size
    check = result.verify(torch.randn(5, 6))
    text = (tmp_path / "report.md").read_text()
    assert f"- saved: {tmp_path / 'model.onnx'} ({size / 1024:.1f} KiB)" in text
    assert "- ok: onnxruntime against eager PyTorch" in text
    assert len(check.outputs) == 2
    for output in check.outputs:
        tolerance = f"{output.atol:g} | {output.rtol:g}"
        row = f"| {output.name} | {output.dtype} | {output.max_abs:.3g} | {output.max_rel:.3g} | {tolerance} | ok | ok | ok | ok |"
        assert row in text


def test_html_report_is_a_page_with_the_same_tables(tmp_path):
    result, x = _export(tmp_path, "report.html")
    result.verify(x)
    page = (tmp_path / "report.html").read_text()

    class Cells(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.rows: list[list[str]] = []
            self.cell: list[str] | None = None

        def handle_starttag(self, tag, attrs):
            if tag == "tr":
                self.rows.append([])
            elif tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append("".join(self.cell))
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    parser = Cells()
    parser.feed(page)
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert ["aten::relu.default", "1", "report_relu_override", "argument", "-", "aten [builtin]"] in parser.rows
    assert ["input", "x", "FLOAT", "[batch, 6]"] in parser.rows
    verified = [r for r in parser.rows if r and r[0] == result.report.verifications[0].outputs[0].name]
    assert verified and verified[0][6:] == ["ok", "ok", "ok", "ok"]


def test_json_report_holds_the_same_data_as_the_object(tmp_path):
    result, x = _export(tmp_path, "report.json")
    result.save(tmp_path / "model.onnx")
    result.verify(x)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data == json.loads(result.report.to_json())
    report = result.report
    assert data["capture"] == report.capture == "strict=False"
    assert data["opset"] == report.opset
    assert data["nodes_final"] == report.nodes_final
    saved = onnx.load(tmp_path / "model.onnx")
    assert data["weights_bytes"] == sum(len(t.raw_data) for t in saved.graph.initializer) >= 4 * (6 * 8 + 8 + 8 * 3 + 3)
    assert data["saved"] == {str(tmp_path / "model.onnx"): (tmp_path / "model.onnx").stat().st_size}
    relu = next(op for op in data["ops"] if op["op"] == "aten::relu.default")
    assert relu == {
        "op": "aten::relu.default",
        "count": 1,
        "plugin": "report_relu_override",
        "layer": "argument",
        "shadowed": ["aten [builtin]"],
        "how": "converted",
        "declined_by": [],
    }
    assert {p["name"] for p in data["passes"]} == {p.name for p in report.passes}
    assert all(p["removed"] == p["nodes_before"] - p["nodes_after"] for p in data["passes"])
    assert data["inputs"] == [{"name": "x", "dtype": "FLOAT", "shape": ["batch", 6]}]
    [check] = data["verifications"]
    assert check["ok"] is True and len(check["outputs"]) == 2
    assert data["versions"]["torch"] == importlib.metadata.version("torch")
    assert {p["name"]: p["layer"] for p in data["plugins"]}["aten"] == "builtin"


def test_json_has_no_bare_infinity():
    bad = OutputDifference("y", math.inf, math.inf, False, True, True, False)
    report = Report(verifications=[Verification((bad,))])
    text = report.to_json()
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard JSON constant {c}"))
    check = json.loads(text)["verifications"][0]
    assert check["ok"] is False and check["max_abs"] == "inf"


def test_an_unknown_report_suffix_fails_before_exporting(tmp_path, monkeypatch):
    called = []
    monkeypatch.setattr(sys.modules["pt2onnx.export"], "capture", lambda *a, **k: called.append(1))
    with pytest.raises(SaveError, match=r"unknown suffix '\.txt'") as info:
        pt2onnx.export(Block(), (torch.randn(2, 6),), report=tmp_path / "report.txt")
    assert ".md, .html, .json" in (info.value.hint or "")
    assert not called and not list(tmp_path.iterdir())


def test_report_shows_the_capture_fallback_and_why(tmp_path):
    def add(carry, y):
        return [carry + y, carry + y]

    class LegacyScan(torch.nn.Module):  # the seeds' scan call: torch >= 2.6 rejects its keywords
        def forward(self, x):
            init = torch.zeros_like(x[0])
            return torch.ops.higher_order.scan(add, [init], [x], dim=0, reverse=False, additional_inputs=[])[0]

    with pytest.warns(pt2onnx.capture.CaptureFallbackWarning):
        result = pt2onnx.export(LegacyScan(), (torch.randn(3, 3),), report=tmp_path / "r.md")
    text = (tmp_path / "r.md").read_text()
    assert f"- capture: {result.report.capture}" in text
    assert "legacy scan signature" in result.report.capture
    reason = result.report.capture_fallback
    assert reason and f"- capture fallback because: {reason.splitlines()[0]}" in text
