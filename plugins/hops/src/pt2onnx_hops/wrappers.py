"""Wrappers that only change torch's global state (grad mode, autocast): inlined."""

from __future__ import annotations

from pt2onnx.plugin import lowering


@lowering("higher_order::wrap_with_set_grad_enabled")
def wrap_with_set_grad_enabled(op, enable_grad, body, *args):
    return tuple(op.inline(body, *args))


# Its outputs come back in the outer dtype but were computed in the autocast one (bfloat16
# on the CPU), whose rounding onnxruntime's kernels and torch's meet differently: as far
# from eager as bfloat16's default tolerance is above float32's (5e-2 against 1e-5).
@lowering("higher_order::wrap_with_autocast", tolerance=5000)
def wrap_with_autocast(op, device_type, dtype, enabled, cache_enabled, body, *args):
    # The body was traced under autocast, so its dtype casts are already explicit nodes.
    return tuple(op.inline(body, *args))
