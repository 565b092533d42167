"""Creating tensors: arange, linspace, full, zeros/ones, *_like, new_*, empty, fill, copy, masked_fill.

``empty`` and ``empty_strided`` are filled with zeros: torch leaves their contents
undefined, so any value is correct, and a model that reads them before writing them
has no meaning to preserve. Zeros make the exported model deterministic.
"""

from __future__ import annotations

import onnx_ir as ir

from pt2onnx.plugin import converter

from ._common import HALVES
from ._dims import expand_to, scalar_of, to_dtype, widen


def _filled(op, shape, value):
    """A tensor of torch's output dtype, of ``shape`` (a 1-D INT64 Value), filled with ``value``."""
    return expand_to(op, scalar_of(op, value, op.output_dtype), shape)


@converter("aten::full.default")
def full(op, size, fill_value, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), fill_value)


@converter("aten::zeros.default", "aten::empty.memory_format")
def zeros(op, size, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), 0)


@converter("aten::empty_strided.default")
def empty_strided(op, size, stride, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), 0)


@converter("aten::ones.default")
def ones(op, size, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), 1)


@converter("aten::full_like.default")
def full_like(op, self, fill_value, **kwargs):
    return _filled(op, op.Shape(self), fill_value)


@converter("aten::zeros_like.default", "aten::empty_like.default")
def zeros_like(op, self, **kwargs):
    return _filled(op, op.Shape(self), 0)


@converter("aten::ones_like.default")
def ones_like(op, self, **kwargs):
    return _filled(op, op.Shape(self), 1)


@converter("aten::new_zeros.default", "aten::new_empty.default")
def new_zeros(op, self, size, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), 0)


@converter("aten::new_ones.default")
def new_ones(op, self, size, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), 1)


@converter("aten::new_full.default")
def new_full(op, self, size, fill_value, **kwargs):
    return _filled(op, op.shape_tensor(list(size)), fill_value)


@converter("aten::fill.Scalar", "aten::fill.Tensor")
def fill(op, self, value):
    return _filled(op, op.Shape(self), value)


@converter("aten::copy.default")
def copy(op, self, src, non_blocking=False):
    return expand_to(op, to_dtype(op, src, self.dtype), op.Shape(self))


@converter("aten::masked_fill.Scalar", "aten::masked_fill.Tensor")
def masked_fill(op, self, mask, value):
    data = widen(op, self, "Where")
    out = op.Where(mask, scalar_of(op, value, data.dtype), data)
    return to_dtype(op, out, self.dtype)


@converter("aten::arange.start_step")
def arange_start_step(op, start, end, step=1, **kwargs):
    # Integer ranges are computed exactly in int64, floating ones in double as torch does.
    if op.output_dtype.is_floating_point():
        compute = ir.DataType.DOUBLE
    elif any(isinstance(b, float) for b in (start, end, step)):
        return _integer_arange_of_float_bounds(op, start, end, step)
    else:
        compute = ir.DataType.INT64
    out = op.Range(scalar_of(op, start, compute), scalar_of(op, end, compute), scalar_of(op, step, compute))
    return to_dtype(op, out, op.output_dtype)


def _integer_arange_of_float_bounds(op, start, end, step):
    # torch's CPU kernel truncates each bound toward zero (scalar_of does: int()). An int64
    # range then counts from the truncated bounds; a narrower one takes its length from the
    # float bounds, ceil((end - start) / step): arange(0.5, 3, 1.5) is [0, 1, 2] in int64, [0, 1] in int32.
    int64, double = ir.DataType.INT64, ir.DataType.DOUBLE
    if op.output_dtype == int64:  # a step that truncates to 0 fails in torch's capture already
        return op.Range(scalar_of(op, start, int64), scalar_of(op, end, int64), scalar_of(op, step, int64))
    length = op.Ceil(
        op.Div(op.Sub(scalar_of(op, end, double), scalar_of(op, start, double)), scalar_of(op, step, double))
    )
    index = op.Range(op.constant(0, int64), op.Cast(length, to=int64), op.constant(1, int64))
    out = op.Add(op.Mul(index, scalar_of(op, step, int64)), scalar_of(op, start, int64))
    return to_dtype(op, out, op.output_dtype)


@converter("aten::arange.start")
def arange_start(op, start, end, **kwargs):
    return arange_start_step(op, start, end, 1)


@converter("aten::arange.default")
def arange(op, end, **kwargs):
    return arange_start_step(op, 0, end, 1)


@converter(
    "aten::linspace.default",
    "aten::linspace.Tensor_Tensor",
    "aten::linspace.Tensor_Scalar",
    "aten::linspace.Scalar_Tensor",
)
def linspace(op, start, end, steps, **kwargs):
    """torch's CPU kernel: ``start + step * i`` over the first half, ``end - step * (steps -
    1 - i)`` over the rest, ``start`` alone for one step (torch's decomposition differs).

    Integer dtypes take ``start`` and ``end`` as integers first (4.3 counts from 4), the
    step in double, and truncate each value, computed as one fused multiply-add
    (:func:`_fused`). float16/bfloat16 run in float32, rounded once: torch rounds after
    each operation in an order that depends on the CPU's vector width, within about one
    unit in the last place of the larger bound."""
    dtype = op.output_dtype
    integral = not dtype.is_floating_point()
    wide = ir.DataType.DOUBLE if integral else ir.DataType.FLOAT if dtype in HALVES else dtype
    if integral:
        start, end = (scalar_of(op, v, dtype) for v in (start, end))
    start, end = (scalar_of(op, v, wide) for v in (start, end))
    n = scalar_of(op, steps, ir.DataType.INT64)
    index = op.Cast(op.Range(op.constant(0, ir.DataType.INT64), n, op.constant(1, ir.DataType.INT64)), to=wide)
    last = op.Cast(op.Sub(n, op.constant(1, ir.DataType.INT64)), to=wide)
    step = op.Div(op.Sub(end, start), last)
    # The first half counts up from start, the rest down from end: end + step * (i - last).
    rising = op.Less(index, op.Cast(op.Div(n, op.constant(2, ir.DataType.INT64)), to=wide))
    base = op.Where(rising, start, end)
    count = op.Where(rising, index, op.Sub(index, last))
    values = _fused(op, base, step, count) if integral else op.Add(base, op.Mul(step, count))
    # One step: the step is 0 / 0, torch fills in start.
    return to_dtype(op, op.Where(op.Equal(last, op.constant(0, wide)), start, values), dtype)


def _fused(op, base, step, count):
    """``base + step * count`` in double, rounded once as a fused multiply-add rounds it.

    torch's AVX2 and AVX-512 kernels are compiled with FMA contraction, and where a value
    lands on an integer that rounding decides its truncation (1 to -33 in 51 steps: -15 at
    step 25; rounded twice, and under ``ATEN_CPU_CAPABILITY=default``, -16). ``base``
    holds integers. The step's high 26 bits (Veltkamp's split) and its low bits times
    ``count`` are exact, and so is ``base - nearest + high`` (Sterbenz), ``nearest`` being
    the integer nearest the sum: the residual's rounding cannot move ``nearest + residual``
    across a rounding midpoint while ``steps < 2**27`` and ``steps * max(|start|, |end|)
    < 2**53``."""
    scaled = op.Mul(step, op.constant(2.0**27 + 1, ir.DataType.DOUBLE))
    high = op.Sub(scaled, op.Sub(scaled, step))
    high, low = op.Mul(high, count), op.Mul(op.Sub(step, high), count)
    nearest = op.Round(op.Add(op.Add(base, high), low))
    return op.Add(nearest, op.Add(op.Add(op.Sub(base, nearest), high), low))
