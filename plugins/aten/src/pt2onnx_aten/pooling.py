"""Pooling: max (with torch's indices), average, adaptive average."""

from __future__ import annotations

import numpy as np
import torch

from pt2onnx.plugin import converter

from ._common import FLOAT32_16, FLOATS, D, as_dtype, batched, compute, int_list, is_inf, is_nan, kernel_dtype, meta_of
from ._dims import reduce_over, shape_of, size, static_dims


def _spatial(op):
    # The op name says it: max_pool2d -> 2; the kernel may be one int for every dim.
    name = op.node.target._schema.name
    return int(next(c for c in reversed(name) if c.isdigit()))


def _window(op, kernel_size, stride, padding, dilation=1):
    spatial = _spatial(op)
    kernel = int_list(kernel_size, spatial)
    return spatial, {
        "kernel_shape": kernel,
        "strides": int_list(stride, spatial) if stride else kernel,  # torch: stride=[] means the kernel
        "pads": int_list(padding, spatial) * 2,
        "dilations": int_list(dilation, spatial),
    }


def _within_input(op, x, attrs):
    """``attrs`` with a kernel longer than its unpadded, static axis cut to the axis.

    With ceil_mode, torch pools such an axis to one window, clipped to the input (ALIGN's
    pooler: a 2560-wide kernel over an 18x18 map, its global mean). onnxruntime clips it
    too; OpenVINO refuses a kernel longer than its padded input. The cut window is the same.
    """
    spatial = len(attrs["kernel_shape"])
    sizes = static_dims(x)[-spatial:] if x.shape is not None else [None] * spatial
    kernel = list(attrs["kernel_shape"])
    for j, n in enumerate(sizes):
        padded = attrs["pads"][j] or attrs["pads"][j + spatial]
        if n is not None and not padded and attrs.get("dilations", [1] * spatial)[j] == 1 and kernel[j] > n:
            kernel[j] = n
    return attrs | {"kernel_shape": kernel}


def _example_shorter_than_kernel(op, attrs):
    """Whether each spatial axis is dynamic and was shorter than its kernel in the example,
    unpadded, pooled with ceil_mode and a stride of at least the kernel: a pooling meant to
    take the whole map (ALIGN's pooler: AvgPool2d(2560, ceil_mode=True) over 18x18)."""
    spatial = len(attrs["kernel_shape"])
    sizes = meta_of(op.node.args[0]).shape[-spatial:]
    return (
        attrs["ceil_mode"]
        and not any(attrs["pads"])
        and all(st >= k for st, k in zip(attrs["strides"], attrs["kernel_shape"]))
        and all(isinstance(n, torch.SymInt) and n.node.has_hint() for n in sizes)
        and all(n.node.hint < k for n, k in zip(sizes, attrs["kernel_shape"]))
    )


def _whole_or_windows(op, x, spatial, attrs):
    """A ceil_mode average pooling whose kernel may be longer than the (dynamic) map.

    Where every axis fits in its kernel, torch pools the map to its mean; onnxruntime clips
    the window as torch does, OpenVINO refuses a kernel longer than its input
    (docs/runtime_issues.md). The mean is taken there, and the AveragePool where the map
    is longer (which the program accepts too).
    """
    kernel = op.constant(attrs["kernel_shape"], D.INT64)
    within = op.Cast(op.LessOrEqual(shape_of(op, x, start=-spatial), kernel), to=D.INT64)
    fits = op.Cast(op.ReduceMin(within, keepdims=0), to=D.BOOL)
    axes = list(range(-spatial, 0))
    name = op.node.name
    return op.If(
        fits,
        then_branch=op.subgraph(
            lambda sub: [reduce_over(sub, "ReduceMean", x, axes, keepdims=1)], [], name=f"{name}.mean"
        ),
        else_branch=op.subgraph(
            lambda sub: [_torch_sized(sub, x, sub.AveragePool(x, **attrs), attrs)], [], name=f"{name}.windows"
        ),
    )


def _torch_sized(op, x, pooled, attrs):
    """``pooled`` declared with torch's sizes: before opset 22, ONNX's shape inference counts
    a ceil_mode window that starts in the right padding, which torch and onnxruntime drop
    (length 2, kernel 1, stride 2: ONNX says 2, both give 1). A Slice to torch's size fixes
    the declaration and changes nothing at run time; sizes unknown until then are not declared.
    """
    if not attrs["ceil_mode"] or op.opset >= 22 or x.shape is None or pooled.shape is None:
        return pooled
    spatial = len(attrs["kernel_shape"])
    sizes, declared = static_dims(x)[-spatial:], static_dims(pooled)[-spatial:]
    window = zip(sizes, attrs["kernel_shape"], attrs["strides"], attrs["pads"], attrs.get("dilations", [1] * spatial))
    wanted = []
    for n, k, st, p, d in window:
        if n is None:
            return pooled
        out = (n + 2 * p - d * (k - 1) - 1 + st - 1) // st + 1
        wanted.append(out - 1 if (out - 1) * st >= n + p else out)
    if wanted == declared:
        return pooled
    axes = list(range(-spatial, 0))
    return op.Slice(pooled, op.constant([0] * spatial), op.constant(wanted), op.constant(axes))


#: Where onnxruntime's MaxPool differs from torch (1.32; its kernels differ from each other):
#: a NaN is compared like any value, so it wins or loses by its place in the window.
MAX_POOL_DEVIATION = (
    "a window holding a NaN may give the largest of its other values, or the lowest finite value if it has "
    "none (torch: NaN); a window of only -inf may give the lowest finite value (torch: -inf); onnxruntime's "
    "kernels differ in which windows"
)
#: MaxPool with indices keeps -inf: only a NaN differs.
MAX_POOL_INDICES_DEVIATION = (
    "a window holding a NaN may give the largest of its other values and that value's index (torch: NaN and "
    "the index of the window's last NaN); onnxruntime's kernels differ in which windows"
)


def _max_pool(op, x, attrs, exact):
    """``MaxPool``; ``exact``: with torch's NaN and -inf, a window holding a NaN gives NaN,
    one of only -inf gives -inf.

    onnxruntime's MaxPool compares a NaN like any value (it wins or loses by its place in
    the window), and its float32 kernels give the lowest finite value for a window of -inf
    (onnxruntime 1.32). A second MaxPool of a code per element (2: NaN,
    1: anything else, 0: -inf) says which windows torch fills with NaN or -inf. Only an
    input holding a NaN or -inf needs it, and such an input's sum is not finite: an ``If``
    on the sum pools once otherwise (a sum that overflows takes the exact branch too).
    The ``If`` and the sum cost a small CNN about a quarter of its run time in onnxruntime
    (graph compilers stop fusing at the ``If``): the exact form is asked for by the export
    (``nonfinite="torch"``), not the default.
    """
    out = _torch_sized(op, x, op.MaxPool(x, **attrs), attrs)
    if not exact:
        return out

    def exact_form(sub):
        zero, one, two = (sub.constant(v, x.dtype) for v in (0.0, 1.0, 2.0))
        code = sub.Where(is_nan(sub, x), two, sub.Where(is_inf(sub, x, detect_positive=0), zero, one))
        window = _torch_sized(sub, x, sub.MaxPool(code, **attrs), attrs)
        fixed = sub.Where(sub.Less(window, one), sub.constant(float("-inf"), x.dtype), out)
        return [sub.Where(sub.Greater(window, one), sub.constant(float("nan"), x.dtype), fixed)]

    wide = x if x.dtype in (D.FLOAT, D.DOUBLE) else op.Cast(x, to=D.FLOAT)  # float16 sums overflow early
    total = op.ReduceSum(wide, keepdims=0)
    finite = op.Equal(op.Sub(total, total), op.constant(0.0, wide.dtype))  # inf - inf and NaN are NaN
    name = op.node.name
    return op.If(
        finite,
        then_branch=op.subgraph(lambda sub: [sub.Identity(out)], [], name=f"{name}.pooled"),
        else_branch=op.subgraph(exact_form, [], name=f"{name}.nan_or_neg_inf"),
    )


def _exact_nonfinite(op, x, deviation):
    """Whether the export wants torch's results on NaN and ±inf for ``x`` (only floats hold them)."""
    dtype = op.dtype_of(x)
    return (dtype is None or dtype.is_floating_point()) and op.exact_nonfinite(deviation)


@converter("aten::max_pool1d.default", "aten::max_pool2d.default", "aten::max_pool3d.default")
def max_pool(op, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    spatial, attrs = _window(op, kernel_size, stride, padding, dilation)
    attrs = _within_input(op, self, attrs | {"ceil_mode": int(ceil_mode)})
    exact = _exact_nonfinite(op, self, MAX_POOL_DEVIATION)
    return compute(
        op,
        lambda x: batched(op, x, spatial, lambda xb: _max_pool(op, xb, attrs, exact)),
        [self],
        op.output_dtype,
        FLOATS,
    )


@converter("aten::max_pool2d_with_indices.default", "aten::max_pool3d_with_indices.default")
def max_pool_with_indices(op, self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    spatial, attrs = _window(op, kernel_size, stride, padding, dilation)
    attrs = _within_input(op, self, attrs | {"ceil_mode": int(ceil_mode)})
    # torch's NaN costs a second MaxPool, of the whole input in float64: asked for, not the default.
    exact = _exact_nonfinite(op, self, MAX_POOL_INDICES_DEVIATION)

    def pool(x):
        out, flat = (_torch_sized(op, x, v, attrs) for v in op.MaxPool(x, _outputs=2, **attrs))
        # ONNX numbers indices over the whole tensor, torch within each (batch, channel) plane.
        plane = shape_of(op, x, start=-spatial)
        index = op.Mod(flat, op.ReduceProd(plane, keepdims=1))
        if not exact:
            return out, index
        # torch gives a window holding a NaN the value NaN and the index of its last NaN
        # (onnxruntime skips NaN): the largest position of a NaN in the window, pooled exactly
        # as float64, else -1.
        count = op.ReduceProd(plane, keepdims=0)
        positions = op.Reshape(op.Range(op.constant(0), count, op.constant(1)), plane)
        nan_at = op.Where(is_nan(op, x), op.Cast(positions, to=D.DOUBLE), op.constant(-1.0, D.DOUBLE))
        last_nan = _torch_sized(op, x, op.MaxPool(nan_at, **attrs), attrs)
        has_nan = op.GreaterOrEqual(last_nan, op.constant(0.0, D.DOUBLE))
        out = op.Where(has_nan, op.constant(float("nan"), x.dtype), out)
        return out, op.Where(has_nan, op.Cast(last_nan, to=D.INT64), index)

    # bfloat16 is pooled in float32: exact, a max only picks.
    dtype = op.output_dtype
    wide = kernel_dtype(op, dtype, FLOATS)
    out, indices = batched(op, as_dtype(op, self, wide), spatial, pool)
    return (out if wide == dtype else op.Cast(out, to=dtype)), indices


@converter("aten::avg_pool1d.default", "aten::avg_pool2d.default", "aten::avg_pool3d.default")
def avg_pool(
    op, self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None
):
    spatial, attrs = _window(op, kernel_size, stride, padding)
    del attrs["dilations"]
    attrs |= {"ceil_mode": int(ceil_mode), "count_include_pad": int(count_include_pad)}
    if divisor_override is not None:
        attrs["count_include_pad"] = 1
    attrs = _within_input(op, self, attrs)
    if divisor_override is None and _example_shorter_than_kernel(op, attrs):
        whole_or_windows = lambda x: _whole_or_windows(op, x, spatial, attrs)  # noqa: E731
        return compute(op, lambda x: batched(op, x, spatial, whole_or_windows), [self], op.output_dtype, FLOAT32_16)

    def pool(x):
        out = _torch_sized(op, x, op.AveragePool(x, **attrs), attrs)
        if divisor_override is None:
            return out
        # torch divides the window's sum by the divisor; AveragePool divided it by the
        # window's positions in the padded input (fewer for a ceil_mode window that sticks out).
        counts = _padded_window_counts(op, x, out, spatial, attrs)
        return op.Mul(out, op.Div(op.Cast(counts, to=x.dtype), op.constant(float(divisor_override), x.dtype)))

    return compute(op, lambda x: batched(op, x, spatial, pool), [self], op.output_dtype, FLOAT32_16)


def _padded_window_counts(op, x, pooled, spatial, attrs):
    """How many positions of the padded input each window covers, broadcast over the spatial dims.

    A window starts at ``i * stride - pad`` and ends at ``min(start + kernel, size + pad)``:
    constants for static sizes, else computed from ``Shape``.
    """
    rank = op.rank_of(x)
    counts = None
    for j, (k, s, p) in enumerate(zip(attrs["kernel_shape"], attrs["strides"], attrs["pads"])):
        axis = rank - spatial + j
        n, out = static_dims(x)[axis], static_dims(pooled)[axis] if pooled.shape is not None else None
        trailing = [1] * (spatial - 1 - j)
        if n is not None and out is not None:
            starts = np.arange(out) * s - p
            dim = op.constant((np.minimum(starts + k, n + p) - starts).reshape([out, *trailing]))
        else:
            bins = op.Range(op.constant(0), op.Squeeze(shape_of(op, pooled, start=axis, end=axis + 1)), op.constant(1))
            starts = op.Sub(op.Mul(bins, op.constant(s)), op.constant(p))
            ends = op.Min(op.Add(starts, op.constant(k)), op.Add(size(op, x, axis), op.constant([p])))
            dim = op.Reshape(op.Sub(ends, starts), op.constant([-1, *trailing]))
        counts = dim if counts is None else op.Mul(counts, dim)
    return counts


def _bins(size, out):
    """torch's adaptive pooling matrix: row i averages input[floor(i*size/out) : ceil((i+1)*size/out)]."""
    matrix = np.zeros((out, size))
    for i in range(out):
        start, end = (i * size) // out, -((-(i + 1) * size) // out)
        matrix[i, start:end] = 1.0 / (end - start)
    return matrix


#: torch's adaptive average pooling adds float16 and bfloat16 in float32: so does the model.
_ACCUMULATE = frozenset({D.FLOAT, D.DOUBLE})


def _bin_layout(op, n, out):
    """Where torch's adaptive bins lie along a dim of size ``n`` cut into ``out`` bins.

    Bin i averages ``input[floor(i*n/out) : ceil((i+1)*n/out)]``. Returns
    ``(index, inside, count)``: ``index`` (out, w) the positions each bin reads (w = the
    widest bin; a narrower bin repeats its last position), ``inside`` (out, w) which of them
    are its own, ``count`` (out,) its size. Constants for a static size, else computed
    from the symbolic one.
    """
    if isinstance(n, int) and isinstance(out, int):
        starts = np.array([(i * n) // out for i in range(out)])
        ends = np.array([-((-(i + 1) * n) // out) for i in range(out)])
        slot = starts[:, None] + np.arange(int((ends - starts).max()))[None, :]
        index = np.minimum(slot, ends[:, None] - 1)
        return op.constant(index.astype(np.int64)), op.constant(slot < ends[:, None]), op.constant(ends - starts)
    size_1d, out_1d = op.shape_tensor([n]), op.shape_tensor([out])
    one = op.constant([1])
    bins = op.Range(op.constant(0), op.Squeeze(out_1d), op.constant(1))
    starts = op.Div(op.Mul(bins, size_1d), out_1d)
    ends = op.Div(op.Add(op.Mul(op.Add(bins, one), size_1d), op.Sub(out_1d, one)), out_1d)
    count = op.Sub(ends, starts)
    width = op.ReduceMax(count, keepdims=0)
    slot = op.Add(
        op.Unsqueeze(starts, one), op.Unsqueeze(op.Range(op.constant(0), width, op.constant(1)), op.constant([0]))
    )
    last = op.Unsqueeze(op.Sub(ends, one), one)
    return op.Min(slot, last), op.LessOrEqual(slot, last), count


def _adaptive_mean(op, x, axis, n, out):
    """The mean of every adaptive bin along ``axis`` (negative: counted from the end).

    Bins of unequal sizes overlap, so no pooling window reads them: each bin gathers its
    positions, divides them by its size, zeroes those of its wider neighbours (a Where, so a
    NaN or inf outside the bin stays out) and sums them. The division comes before the sum:
    a division by per-bin sizes last would sit right before the Conv that often follows, and
    OpenVINO folds such a Multiply into the Conv's weights when the bins match its kernel,
    wrongly (docs/runtime_issues.md, "a Multiply before a Conv").
    """
    index, inside, count = _bin_layout(op, n, out)
    count = op.Unsqueeze(count, op.constant([1]))  # each bin's size, over its positions
    after = list(range(1, -axis))  # the dims after ``axis``: the masks broadcast over them
    if after:
        inside = op.Unsqueeze(inside, op.constant([a + 1 for a in after]))
        count = op.Unsqueeze(count, op.constant([a + 1 for a in after]))
    shares = op.Div(op.Gather(x, index, axis=axis), op.Cast(count, to=x.dtype))
    return op.ReduceSum(op.Where(inside, shares, op.constant(0.0, x.dtype)), op.constant([axis]), keepdims=0)


@converter(
    "aten::adaptive_avg_pool1d.default",
    "aten::adaptive_avg_pool2d.default",
    "aten::adaptive_avg_pool3d.default",
    "aten::_adaptive_avg_pool2d.default",
    "aten::_adaptive_avg_pool3d.default",
)
def adaptive_avg_pool(op, self, output_size):
    spatial = _spatial(op)
    outputs = [output_size] if not isinstance(output_size, (list, tuple)) else list(output_size)
    outputs = outputs * spatial if len(outputs) == 1 else outputs
    sizes = static_dims(self)[-spatial:]
    if all(isinstance(o, int) and o == 1 for o in outputs):
        axes = op.constant(list(range(-spatial, 0)))
        return compute(
            op, lambda x: reduce_over(op, "ReduceMean", x, axes, keepdims=1), [self], op.output_dtype, _ACCUMULATE
        )
    static = all(isinstance(v, int) for v in (*sizes, *outputs))
    if static and all(s % o == 0 for s, o in zip(sizes, outputs)) and op.output_dtype != D.DOUBLE:
        # Equal bins side by side: one AveragePool (onnxruntime has none for float64).
        kernel = [s // o for s, o in zip(sizes, outputs)]
        attrs = {"kernel_shape": kernel, "strides": kernel}
        return compute(
            op,
            lambda x: batched(op, x, spatial, lambda xb: op.AveragePool(xb, **attrs)),
            [self],
            op.output_dtype,
            _ACCUMULATE,
        )

    def pool(x):
        # Every size read from the input: pooling one dim leaves the others as they are, and
        # an intermediate's shape may be unknown (LessOrEqual is a function before opset 16).
        lengths = [size(op, x, axis) if n is None else n for axis, n in enumerate(sizes, start=-spatial)]
        for axis, (n, out) in enumerate(zip(lengths, outputs), start=-spatial):
            x = _adaptive_mean(op, x, axis, n, out)
        return x

    return compute(op, pool, [self], op.output_dtype, _ACCUMULATE)
