"""``pt2onnx ops --coverage``: forward ops counted apart from backward ones, functionalized ops named."""

from __future__ import annotations

from pt2onnx.cli import main
from pt2onnx.coverage import core_aten_ops, forward_coverage
from pt2onnx.registry import session_registry


def test_every_forward_op_is_converted_or_functionalized_before_translation():
    covered, missing, functionalized = forward_coverage(session_registry())
    assert missing == []
    assert {"aten::resize_.default", "aten::atan2.out", "aten::_native_batch_norm_legit.default"} <= set(functionalized)
    assert {"aten::_fft_r2c.default", "aten::_fft_c2r.default", "aten::_fft_c2c.default"} & set(core_aten_ops()) <= set(
        covered
    )
    assert not any("backward" in name for name in covered + missing + functionalized)


def test_the_report_counts_forward_and_backward_ops_apart(capsys):
    assert main(["ops", "--coverage"]) == 0
    lines = capsys.readouterr().out.splitlines()
    forward = next(line for line in lines if line.strip().startswith("forward ops:"))
    backward = next(line for line in lines if line.strip().startswith("backward ops:"))
    covered, missing, _ = forward_coverage(session_registry())
    assert forward.split(":")[1].split()[0] == f"{len(covered)}/{len(covered) + len(missing)}"
    assert int(backward.split(":")[1].split("/")[1].split()[0]) == sum("backward" in n for n in core_aten_ops())
    start = next(i for i, line in enumerate(lines) if line.startswith("not counted"))
    assert "  aten::resize_.default" in lines[start + 1 : start + 6]
