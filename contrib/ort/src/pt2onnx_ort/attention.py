"""``scaled_dot_product_attention`` as one ``com.microsoft::MultiHeadAttention`` node.

The standard-op graph is MatMul, Mul, Add, Softmax, MatMul over (batch, heads, seq, size)
tensors; MultiHeadAttention runs it as one fused kernel. It takes the query as
(batch, seq, heads * size) and the key and value as (batch, heads, seq, size), so only
the query and the output are transposed.

Opt-in (``plugins=["pt2onnx_ort.attention"]``, or ``[tool.pt2onnx] plugins``), for two
measured reasons (``benchmarks/results/ort_fusions.md``, onnxruntime 1.32, CPU): it is
faster than the builtin lowering only below opset 23 (x1.15-1.31 against the explicit
MatMul/Softmax form there; x0.80-0.86 against ONNX ``Attention`` from opset 23), and at a
NaN its kernel is not torch (a query holding a NaN gets a row of NaN; torch's CPU
attention, and the builtin lowering, a finite row). What MultiHeadAttention cannot take
(float64, key/value heads unlike the query's, causal attention of unequal lengths, ...)
it declines: the builtin converter exports that node.
"""

from __future__ import annotations

import sys

import torch

from pt2onnx.plugin import ConverterRegistrar, converter, hookimpl

from ._runtime import DOMAIN, implemented

PROBE = ("MultiHeadAttention", ((1, 2, 8), (1, 2, 2, 4), (1, 2, 2, 4)), (("num_heads", 2),))

_FUSED_DTYPES = (torch.float32, torch.float16)


@converter("aten::scaled_dot_product_attention.default")
def scaled_dot_product_attention(
    op, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False
):
    q, k, v = (arg.meta["val"] for arg in op.node.args[:3])
    heads = q.shape[1] if q.dim() == 4 else None
    if heads is None or not isinstance(heads, int) or k.dim() != 4 or v.dim() != 4:
        raise op.decline("MultiHeadAttention needs 4-D inputs with a static head count")
    if q.dtype not in _FUSED_DTYPES:
        raise op.decline(f"MultiHeadAttention runs float32 and float16 only, not {q.dtype}")
    if dropout_p:
        raise op.decline("MultiHeadAttention has no dropout")
    if k.shape[1] != heads or v.shape[1] != heads:
        raise op.decline("key/value heads differ from query heads")
    if is_causal and str(q.shape[2]) != str(k.shape[2]):
        # onnxruntime aligns its causal mask bottom-right, torch top-left: they agree only when square.
        raise op.decline("causal attention with query length != key length")

    q_bsd = op.Reshape(op.Transpose(query, perm=[0, 2, 1, 3]), op.constant([0, 0, -1]))
    attrs: dict[str, int | float] = {"num_heads": heads, "unidirectional": int(bool(is_causal))}
    if scale is not None:
        attrs["scale"] = float(scale)
    bias = None if attn_mask is None else _attention_bias(op, attn_mask, query, key)
    inputs = [q_bsd, key, value, None, None, bias] if bias is not None else [q_bsd, key, value]
    out = op.custom_node(DOMAIN, "MultiHeadAttention", inputs, attrs, num_outputs=1)
    return op.Transpose(op.Reshape(out, op.constant([0, 0, heads, -1])), perm=[0, 2, 1, 3])


def _attention_bias(op, mask, query, key):
    """sdpa's mask (bool: True attends; float: added) as MultiHeadAttention's (B|1, N|1, S, L) bias."""
    if op.dtype_of(mask) == op.dtype(torch.bool):
        zero = op.constant(0.0, op.dtype_of(query))
        mask = op.Where(mask, zero, op.constant(float("-inf"), op.dtype_of(query)))
    rank = op.rank_of(mask)
    if rank < 4:
        mask = op.Unsqueeze(mask, op.constant(list(range(4 - rank))))
    ones = op.constant([1, 1])
    # Shape's start/end are opset 15: Gather the sequence lengths of the whole shapes instead.
    lengths = op.constant([2])
    sizes = op.Concat(ones, op.Gather(op.Shape(query), lengths), op.Gather(op.Shape(key), lengths), axis=0)
    return op.Expand(mask, sizes)


@hookimpl
def pt2onnx_register_converters(register: ConverterRegistrar) -> None:
    if implemented(*PROBE):
        register.module(sys.modules[__name__])
