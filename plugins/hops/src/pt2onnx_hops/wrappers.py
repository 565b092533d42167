"""Wrappers that only change torch's global state (grad mode, autocast): inlined."""

from __future__ import annotations

from pt2onnx.plugin import lowering


@lowering("higher_order::wrap_with_set_grad_enabled")
def wrap_with_set_grad_enabled(op, enable_grad, body, *args):
    return tuple(op.inline(body, *args))


@lowering("higher_order::wrap_with_autocast")
def wrap_with_autocast(op, device_type, dtype, enabled, cache_enabled, body, *args):
    # The body was traced under autocast, so its dtype casts are already explicit nodes.
    return tuple(op.inline(body, *args))
