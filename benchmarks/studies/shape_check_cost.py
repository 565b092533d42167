"""What the checks of converters' outputs cost, on a 12-layer Llama.

``python benchmarks/studies/shape_check_cost.py`` exports the model twice (the first warms up) and
profiles the second export; it prints the per-converter checks' cumulative time (each
output's dims against torch's, each emitted node's inference error) beside translation's,
and the whole-model check (ONNX shape inference, ``check_shapes``) beside the export's.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
from pathlib import Path

import torch

import pt2onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite: model_cases


def main() -> None:
    import model_cases

    torch.manual_seed(0)
    case = model_cases.llama_125m()  # the benchmark's 12-layer Llama, its inputs and dynamic shapes
    pt2onnx.export(case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes, quiet=True)
    profile = cProfile.Profile()
    profile.enable()
    pt2onnx.export(case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes, quiet=True)
    profile.disable()
    stats = pstats.Stats(profile).stats.items()  # type: ignore[attr-defined]
    cumulative = {where[2]: row[3] for where, row in stats}
    per_node = sum(cumulative.get(name, 0.0) for name in ("_dims_agree", "_check_emitted"))
    translate = cumulative["translate_program"]
    whole = cumulative["check_shapes"]
    total = next(row[3] for where, row in stats if where[0].endswith("pt2onnx/export.py") and where[2] == "export")
    print(
        f"translation {translate:.3f} s; per-converter checks {per_node * 1000:.1f} ms ({100 * per_node / translate:.1f}%)"
    )
    print(f"export {total:.3f} s; whole-model check {whole * 1000:.1f} ms ({100 * whole / total:.1f}%)")


if __name__ == "__main__":
    main()
