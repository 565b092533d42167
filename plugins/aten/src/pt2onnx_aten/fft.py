"""Fourier transforms through ONNX ``DFT``, with complex values as a trailing dim of 2.

A complex tensor reaches these converters (and leaves them) as a real tensor whose last
dim holds the real and imaginary parts, as ``DFT`` takes it; ``view_as_real`` and
``view_as_complex`` are then identities. ``dim`` lists the transformed dims; each is one
``DFT`` node. ``normalization`` is torch's: 0 none, 1 by ``1/sqrt(n)``, 2 by ``1/n``
(``n`` the product of the signal sizes). Only forward ``DFT`` nodes are emitted; an
inverse is ``conj(dft(conj(x)))``. ONNX has ``DFT`` from opset 17 (the FFT converters are
registered ``since=17``: no composition of older ops computes it but a matrix product
per dim), with its axis an attribute before opset 20 and an input from 20 on.
"""

from __future__ import annotations

from pt2onnx.plugin import converter

from ._common import D
from ._dims import one_d, shape_of

_FLOATS = frozenset({D.FLOAT, D.DOUBLE})


def _check(op, x):
    if x.dtype not in _FLOATS:
        raise op.unsupported("self", x.dtype.name, "onnxruntime's DFT runs float32 and float64 only")


def _dft(op, x, axis):
    """The forward DFT of ``x`` along ``axis`` (non-negative), unscaled, two-sided.

    From opset 20, along axis 1 only, the others swapped there and back: OpenVINO reads
    ``DFT``'s axis input as 1 whatever it holds (docs/runtime_issues.md).
    """
    if op.opset < 20:
        return op.DFT(x, None, axis=axis, inverse=0, onesided=0)
    if axis == 1:
        return op.DFT(x, None, op.constant(1, D.INT64), inverse=0, onesided=0)
    if axis == 0:  # a lone signal: a batch of one in front
        lone = op.Unsqueeze(x, op.constant([0], D.INT64))
        return op.Squeeze(_dft(op, lone, 1), op.constant([0], D.INT64))
    perm = list(range(op.rank_of(x)))
    perm[1], perm[axis] = axis, 1
    swapped = op.Transpose(x, perm=perm)
    return op.Transpose(_dft(op, swapped, 1), perm=perm)


def _conj(op, x):
    real, imaginary = op.Split(x, op.constant([1, 1]), axis=-1, _outputs=2)
    return op.Concat(real, op.Neg(imaginary), axis=-1)


def _inverse(op, x, axes):
    """The unscaled inverse DFT over ``axes``: ``conj(dft(conj(x)))``.

    onnxruntime's own inverse DFT loses precision for lengths that are not powers of two
    (float32-level errors in float64); its forward DFT does not.
    """
    y = _conj(op, x)
    for axis in axes:
        y = _dft(op, y, axis)
    return _conj(op, y)


def _size(op, x, axis):
    """The signal size along ``axis``: an int when static, else a 0-d INT64 Value."""
    size = x.shape[axis] if x.shape is not None else None
    if isinstance(size, int):
        return size
    return op.Squeeze(shape_of(op, x, start=axis, end=axis + 1), op.constant([0], D.INT64))


def _scaled(op, y, sizes, normalization):
    """``y`` scaled as torch's ``normalization`` says: by ``n ** 0``, ``n ** -0.5`` or ``n ** -1``."""
    power = {0: 0.0, 1: -0.5, 2: -1.0}[normalization]
    if power == 0.0:
        return y
    dtype = y.dtype
    n = 1
    for s in sizes:
        if isinstance(s, int):
            n *= s
    factor = op.constant(float(n) ** power, dtype)
    for s in sizes:
        if not isinstance(s, int):
            factor = op.Mul(factor, op.Pow(op.Cast(s, to=dtype), op.constant(power, dtype)))
    return op.Mul(y, factor)


def _axes(dim, rank):
    return [d % rank for d in dim]


@converter("aten::_fft_r2c.default", complex_values=True, since=17)
def fft_r2c(op, self, dim, normalization, onesided):
    _check(op, self)
    axes = _axes(dim, self.shape.rank())
    sizes = [_size(op, self, a) for a in axes]
    # Real input as (..., 1); the last transformed dim first, then the rest in full. One-sided:
    # its first n // 2 + 1 bins, sliced from the full transform (OpenVINO gets DFT's own
    # onesided wrong, docs/runtime_issues.md; onnxruntime takes as long either way).
    y = _dft(op, op.Unsqueeze(self, op.constant([-1], D.INT64)), axes[-1])
    if onesided:
        n = sizes[-1]
        bins = n // 2 + 1 if isinstance(n, int) else op.Add(op.Div(n, op.constant(2, D.INT64)), op.constant(1, D.INT64))
        y = op.Slice(y, op.constant([0], D.INT64), one_d(op, bins), op.constant([axes[-1]], D.INT64))
    for axis in axes[:-1]:
        y = _dft(op, y, axis)
    return _scaled(op, y, sizes, normalization)


@converter("aten::_fft_c2c.default", complex_values=True, since=17)
def fft_c2c(op, self, dim, normalization, forward):
    _check(op, self)
    axes = _axes(dim, self.shape.rank() - 1)
    sizes = [_size(op, self, a) for a in axes]
    if forward:
        y = self
        for axis in axes:
            y = _dft(op, y, axis)
    else:
        y = _inverse(op, self, axes)
    return _scaled(op, y, sizes, normalization)


@converter("aten::_fft_c2r.default", complex_values=True, since=17)
def fft_c2r(op, self, dim, normalization, last_dim_size):
    _check(op, self)
    axes = _axes(dim, self.shape.rank() - 1)
    y = _inverse(op, self, axes[:-1]) if len(axes) > 1 else self
    # The last dim holds the first n // 2 + 1 bins of a Hermitian spectrum (n = last_dim_size):
    # the others are the conjugates of bins 1 .. n - n // 2 - 1, in reverse order.
    axis = op.constant([axes[-1]], D.INT64)
    n = op.Reshape(
        last_dim_size if not isinstance(last_dim_size, int) else op.constant(last_dim_size, D.INT64),
        op.constant([1], D.INT64),
    )
    half = op.Div(n, op.constant([2], D.INT64))
    one = op.constant([1], D.INT64)
    kept = op.Slice(y, op.constant([0], D.INT64), op.Add(half, one), axis)
    mirrored = op.Slice(y, one, op.Sub(n, half), axis)
    mirrored = op.Slice(
        mirrored, op.constant([-1], D.INT64), op.constant([-(2**62)], D.INT64), axis, op.constant([-1], D.INT64)
    )
    full = op.Concat(kept, _conj(op, mirrored), axis=axes[-1])
    # Its inverse DFT is real: the real part of dft(conj(full)).
    signal = _dft(op, _conj(op, full), axes[-1])
    real = op.Squeeze(
        op.Slice(signal, op.constant([0], D.INT64), one, op.constant([-1], D.INT64)), op.constant([-1], D.INT64)
    )
    sizes = [_size(op, self, a) for a in axes[:-1]] + [last_dim_size]
    return _scaled(op, real, sizes, normalization)


@converter("aten::_conj.default", "aten::conj_physical.default", complex_values=True)
def conj(op, self):
    if not op.output_meta.is_complex():
        return op.Identity(self)  # the conjugate of a real tensor is itself
    return _conj(op, self)


@converter("aten::view_as_real.default", "aten::view_as_complex.default", complex_values=True)
def view_as_real(op, self):
    # Complex values already are (..., 2) real tensors.
    return op.Identity(self)
