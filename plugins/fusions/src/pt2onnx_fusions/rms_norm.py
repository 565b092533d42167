"""The RMS norm transformers write by hand (Llama, T5, ...) as one ``RMSNormalization`` (opset 23)."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir
import onnxscript.rewriter

from .graph import scalar

__all__ = ["fuse_rms_norm"]


def _normalized(op: Any, x: ir.Value, square: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value) -> Any:
    inverse = op.Reciprocal(op.Sqrt(op.Add(op.ReduceMean(square, axes, keepdims=1), eps)))
    return op.Mul(weight, op.Mul(x, inverse))


def _pattern(op: Any, x: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value) -> Any:
    # What ``weight * (x * rsqrt(mean(x ** 2, -1, keepdim=True) + eps))`` translates to
    # (pt2onnx-aten writes ``x ** 2`` as ``x * x``, as torch computes it).
    return _normalized(op, x, op.Mul(x, x), axes, eps, weight)


def _pattern_pow(op: Any, x: ir.Value, two: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value) -> Any:
    # The same with ``Pow(x, 2)``, as other converters may write it.
    return _normalized(op, x, op.Pow(x, two), axes, eps, weight)


def _matches(
    context: Any, x: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value, two: ir.Value | None = None, **_: Any
) -> bool:
    rank = x.shape.rank() if x.shape is not None else None
    axis = axes.const_value.numpy().reshape(-1).tolist() if axes.const_value is not None else None
    return (
        rank is not None
        and axis in ([-1], [rank - 1])
        and (two is None or scalar(two) == 2.0)
        and scalar(eps) is not None
        and weight.shape is not None
        and weight.shape.rank() == 1
        # float32 only: onnxruntime has no bfloat16 RMSNormalization kernel, float16 squares
        # overflow above 256 in torch but not in the fused op's float32 statistics, and
        # float64 would lose precision in them.
        and x.dtype == ir.DataType.FLOAT
    )


def _fused(op: Any, x: ir.Value, axes: ir.Value, eps: ir.Value, weight: ir.Value, **_: Any) -> Any:
    return op.RMSNormalization(x, weight, axis=-1, epsilon=scalar(eps))


_RULES = onnxscript.rewriter.RewriteRuleSet(
    [
        onnxscript.rewriter.RewriteRule(_pattern, _fused, _matches, name="RMSNormalization"),
        onnxscript.rewriter.RewriteRule(_pattern_pow, _fused, _matches, name="RMSNormalization(Pow)"),
    ],
    commute=True,
)


def fuse_rms_norm(model: ir.Model) -> None:
    """Rewrite each hand-written RMS norm into ``RMSNormalization``."""
    onnxscript.rewriter.rewrite(model, pattern_rewrite_rules=_RULES)
