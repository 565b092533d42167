"""scaled_dot_product_attention: ONNX Attention (opset 23) where it matches and onnxruntime has
a kernel for it, else MatMul/Softmax.

onnxruntime (1.32) has CPU kernels for Attention-23 and -24 only: at opset 25 and above it
runs the op's function body (59 nodes per Attention), slower than the explicit form below
(benchmarks/results/attention_forms.md); the converter asks the installed onnxruntime, and
pt2onnx's default opset is one with the kernel.

Both forms mask as torch does: a bool mask keeps True positions (torch adds 0 or -inf, so
an infinite score at a masked position is NaN), a float mask is added to the scores, ``is_causal`` keeps key j for query i when j <= i (top-left aligned). A query
row whose scores are all -inf (its keys masked out) gives zeros, as torch's safe softmax
does: onnxruntime's Attention does so for masked rows itself; the explicit form selects
zeros for them (+5 nodes). Where the scores of a row are -inf from the inputs themselves
(infinite or overflowing queries and keys), or NaN from a NaN query, onnxruntime's
Attention gives NaN where torch gives zeros. torch's CPU flash kernel (4-D inputs of one
batch and head size, no attn_mask) also gives zeros for a row whose scores are all NaN or
-inf; its math kernel (any mask, 3-D inputs) NaN: the explicit form does as the kernel torch
picks.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from pt2onnx.plugin import converter, onnxruntime_has_kernel

from ._common import FLOAT32_16, FLOATS, compute, is_nan
from ._dims import reduce_over, shape_of

D = ir.DataType


def _groups(op, query, key):
    """Query heads per key/value head: an int, or a 1-element Value for symbolic head counts."""
    hq, hkv = query.shape[-3], key.shape[-3]
    if isinstance(hq, int) and isinstance(hkv, int):
        return hq // hkv
    return op.Div(shape_of(op, query, start=-3, end=-2), shape_of(op, key, start=-3, end=-2))


def _repeat_heads(op, x, groups):
    """torch's repeat_interleave of the key/value heads: (..., Hkv, S, E) -> (..., Hkv * groups, S, E)."""
    batch, heads, rest = shape_of(op, x, end=-3), shape_of(op, x, start=-3, end=-2), shape_of(op, x, start=-2)
    g = op.constant([groups]) if isinstance(groups, int) else groups
    expanded = op.Expand(op.Unsqueeze(x, op.constant([-3])), op.Concat(batch, heads, g, rest, axis=0))
    return op.Reshape(expanded, op.Concat(batch, op.Mul(heads, g), rest, axis=0))


def _causal(op, query, key):
    """(L, S) bool mask, True where key j <= query i."""
    zero, one = op.constant(0), op.constant(1)
    rows = op.Range(zero, op.Squeeze(shape_of(op, query, start=-2, end=-1)), one)
    cols = op.Range(zero, op.Squeeze(shape_of(op, key, start=-2, end=-1)), one)
    return op.LessOrEqual(op.Unsqueeze(cols, zero), op.Unsqueeze(rows, one))


def _scale(op, query, scale, dtype):
    if scale is not None:
        return op.constant(float(scale), dtype)
    depth = query.shape[-1]
    if isinstance(depth, int):
        return op.constant(1.0 / math.sqrt(depth), dtype)
    return op.Reciprocal(op.Sqrt(op.Cast(shape_of(op, query, start=-1), to=dtype)))


def _explicit(op, q, k, v, mask, is_causal, scale, flash_kernel):
    """The scores, masked, softmaxed and applied to v, as the CPU kernel torch picks computes
    them: ``flash_kernel`` for its flash kernel (4-D, one batch and head size, no mask)."""
    dtype = q.dtype
    rank = op.rank_of(k)
    perm = [*range(rank - 2), rank - 1, rank - 2]
    scores = op.Mul(op.MatMul(q, op.Transpose(k, perm=perm)), _scale(op, q, scale, dtype))
    neg_inf = op.constant(float("-inf"), dtype)
    # torch's math kernel adds masks: a bool mask (and is_causal) as 0 / -inf, so an infinite
    # or NaN score at a masked position is NaN, not -inf. Its flash kernel overwrites the
    # positions is_causal masks with -inf instead.
    if mask is not None:
        scores = op.Add(scores, op.Where(mask, op.constant(0.0, dtype), neg_inf) if mask.dtype == D.BOOL else mask)
    if is_causal and flash_kernel:
        scores = op.Where(_causal(op, q, k), scores, neg_inf)
    elif is_causal:
        scores = op.Add(scores, op.Where(_causal(op, q, k), op.constant(0.0, dtype), neg_inf))
    # torch's _safe_softmax: a row of -inf scores attends to nothing (zeros, not NaN). Its
    # CPU flash kernel takes each row's max past NaN scores: a row of NaN and -inf is empty.
    empty = op.Equal(scores, neg_inf)
    if flash_kernel:
        empty = op.Or(empty, is_nan(op, scores))
    masked_out = reduce_over(op, "ReduceMin", op.Cast(empty, to=D.UINT8), [-1], keepdims=1)
    weights = op.Where(op.Cast(masked_out, to=D.BOOL), op.constant(0.0, dtype), op.Softmax(scores, axis=-1))
    return op.MatMul(weights, v)


def _mask_rows(op, mask, query):
    """The mask with a row per query: onnxruntime's ``Attention`` does not broadcast a
    ``(..., 1, S)`` mask over the queries, though the ONNX spec allows it."""
    if mask.shape[-2] == query.shape[-2]:
        return mask
    ones = op.constant([1] * (op.rank_of(mask) - 2), D.INT64)
    return op.Expand(mask, op.Concat(ones, shape_of(op, query, start=-2, end=-1), op.constant([1]), axis=0))


def _fits_flash_kernel(query, key, value):
    """Whether torch's CPU flash kernel takes these 4-D inputs (sdp_utils_cpp.cpp): one head
    size, one batch size, and as many key as value heads."""
    q, k, v = query.shape, key.shape, value.shape
    return q[-1] == k[-1] == v[-1] and q[0] == k[0] == v[0] and k[1] == v[1]


def _no_dropout(op, dropout_p):
    if dropout_p != 0:
        raise op.unsupported(
            "dropout_p", dropout_p, "attention dropout is random", hint="pass dropout_p=0.0 outside training"
        )


@converter("aten::scaled_dot_product_attention.default", since=23)
def scaled_dot_product_attention(
    op, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False
):
    """One ``Attention`` (opset 23) for 4-D float32/float16 inputs with a 2-D or 4-D mask or
    none, where onnxruntime has a kernel for it; anything else as before 23."""
    _no_dropout(op, dropout_p)
    four_d = all(op.rank_of(v) == 4 for v in (query, key, value))
    mask_fits = attn_mask is None or op.rank_of(attn_mask) in (2, 4)
    # onnxruntime's Attention computes float64 in float32: float64 takes the explicit form.
    fits = four_d and mask_fits and op.output_dtype in FLOAT32_16
    if not (fits and onnxruntime_has_kernel("Attention", op.opset)):
        return scaled_dot_product_attention_before_23(
            op, query, key, value, attn_mask, dropout_p, is_causal, scale=scale, enable_gqa=enable_gqa
        )
    attrs: dict[str, int | float] = {"is_causal": int(is_causal)}
    if scale is not None:
        attrs["scale"] = float(scale)
    inputs = [query, key, value] if attn_mask is None else [query, key, value, _mask_rows(op, attn_mask, query)]
    return op.Attention(*inputs, **attrs)


@converter("aten::scaled_dot_product_attention.default", until=22)
def scaled_dot_product_attention_before_23(
    op, query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None, enable_gqa=False
):
    """MatMul, Softmax, MatMul: ONNX has ``Attention`` from opset 23."""
    _no_dropout(op, dropout_p)
    groups = _groups(op, query, key) if enable_gqa else 1
    dtype = op.output_dtype
    four_d = all(op.rank_of(v) == 4 for v in (query, key, value))
    bool_mask = attn_mask is not None and attn_mask.dtype == D.BOOL
    flash_kernel = attn_mask is None and four_d and _fits_flash_kernel(query, key, value)

    def explicit(q, k, v, float_mask=None):
        if groups != 1:
            k, v = _repeat_heads(op, k, groups), _repeat_heads(op, v, groups)
        return _explicit(op, q, k, v, attn_mask if bool_mask else float_mask, is_causal, scale, flash_kernel)

    # The float mask is computed with the scores (bfloat16 in float32); a bool one stays bool.
    values = [query, key, value] if attn_mask is None or bool_mask else [query, key, value, attn_mask]
    return compute(op, explicit, values, dtype, FLOATS)
