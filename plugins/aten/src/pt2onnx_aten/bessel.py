"""Modified Bessel functions of the first kind: i0, special_i0e, special_i1, special_i1e;
and the Kaiser window, made of i0.

ONNX has none. Each is torch's CPU kernel (Cephes): a Chebyshev series in ``|x|/2 - 2``
up to 8, one in ``32/|x| - 2`` beyond, summed by Clenshaw's recurrence (``chbevl``) with
torch's coefficients, in float32 (half precision computes in float32, as torch does) or
float64. For float32 torch keeps only the last 17 and 7 coefficients of the i1 series,
and so do these. Both series are computed for every element and ``Where`` picks one: about
170 nodes for i0, that constant folding leaves as they are (each depends on ``x``).
"""

from __future__ import annotations

import numpy as np

from pt2onnx.plugin import converter

from ._common import D, compute
from ._dims import scalar_of, to_dtype

_I0E_SMALL: tuple[float, ...] = (
    -4.41534164647933937950e-18,
    3.33079451882223809783e-17,
    -2.43127984654795469359e-16,
    1.71539128555513303061e-15,
    -1.16853328779934516808e-14,
    7.67618549860493561688e-14,
    -4.85644678311192946090e-13,
    2.95505266312963983461e-12,
    -1.72682629144155570723e-11,
    9.67580903537323691224e-11,
    -5.18979560163526290666e-10,
    2.65982372468238665035e-9,
    -1.30002500998624804212e-8,
    6.04699502254191894932e-8,
    -2.67079385394061173391e-7,
    1.11738753912010371815e-6,
    -4.41673835845875056359e-6,
    1.64484480707288970893e-5,
    -5.75419501008210370398e-5,
    1.88502885095841655729e-4,
    -5.76375574538582365885e-4,
    1.63947561694133579842e-3,
    -4.32430999505057594430e-3,
    1.05464603945949983183e-2,
    -2.37374148058994688156e-2,
    4.93052842396707084878e-2,
    -9.49010970480476444210e-2,
    1.71620901522208775349e-1,
    -3.04682672343198398683e-1,
    6.76795274409476084995e-1,
)
_I0E_LARGE: tuple[float, ...] = (
    -7.23318048787475395456e-18,
    -4.83050448594418207126e-18,
    4.46562142029675999901e-17,
    3.46122286769746109310e-17,
    -2.82762398051658348494e-16,
    -3.42548561967721913462e-16,
    1.77256013305652638360e-15,
    3.81168066935262242075e-15,
    -9.55484669882830764870e-15,
    -4.15056934728722208663e-14,
    1.54008621752140982691e-14,
    3.85277838274214270114e-13,
    7.18012445138366623367e-13,
    -1.79417853150680611778e-12,
    -1.32158118404477131188e-11,
    -3.14991652796324136454e-11,
    1.18891471078464383424e-11,
    4.94060238822496958910e-10,
    3.39623202570838634515e-9,
    2.26666899049817806459e-8,
    2.04891858946906374183e-7,
    2.89137052083475648297e-6,
    6.88975834691682398426e-5,
    3.36911647825569408990e-3,
    8.04490411014108831608e-1,
)
_I1E_SMALL: tuple[float, ...] = (
    2.77791411276104639959e-18,
    -2.11142121435816608115e-17,
    1.55363195773620046921e-16,
    -1.10559694773538630805e-15,
    7.60068429473540693410e-15,
    -5.04218550472791168711e-14,
    3.22379336594557470981e-13,
    -1.98397439776494371520e-12,
    1.17361862988909016308e-11,
    -6.66348972350202774223e-11,
    3.62559028155211703701e-10,
    -1.88724975172282928790e-9,
    9.38153738649577178388e-9,
    -4.44505912879632808065e-8,
    2.00329475355213526229e-7,
    -8.56872026469545474066e-7,
    3.47025130813767847674e-6,
    -1.32731636560394358279e-5,
    4.78156510755005422638e-5,
    -1.61760815825896745588e-4,
    5.12285956168575772895e-4,
    -1.51357245063125314899e-3,
    4.15642294431288815669e-3,
    -1.05640848946261981558e-2,
    2.47264490306265168283e-2,
    -5.29459812080949914269e-2,
    1.02643658689847095384e-1,
    -1.76416518357834055153e-1,
    2.52587186443633654823e-1,
)
_I1E_LARGE: tuple[float, ...] = (
    7.51729631084210481353e-18,
    4.41434832307170791151e-18,
    -4.65030536848935832153e-17,
    -3.20952592199342395980e-17,
    2.96262899764595013876e-16,
    3.30820231092092828324e-16,
    -1.88035477551078244854e-15,
    -3.81440307243700780478e-15,
    1.04202769841288027642e-14,
    4.27244001671195135429e-14,
    -2.10154184277266431302e-14,
    -4.08355111109219731823e-13,
    -7.19855177624590851209e-13,
    2.03562854414708950722e-12,
    1.41258074366137813316e-11,
    3.25260358301548823856e-11,
    -1.89749581235054123450e-11,
    -5.58974346219658380687e-10,
    -3.83538038596423702205e-9,
    -2.63146884688951950684e-8,
    -2.51223623787020892529e-7,
    -3.88256480887769039346e-6,
    -1.10588938762623716291e-4,
    -9.76109749136146840777e-3,
    7.78576235018280120474e-1,
)
_FLOAT32_I1E_SMALL, _FLOAT32_I1E_LARGE = 17, 7  # torch's float kernels truncate the i1 series
_KERNELS = frozenset({D.FLOAT, D.DOUBLE})


def _chbevl(op, y, coefficients):
    """Cephes ``chbevl``: the Chebyshev series of ``coefficients`` at ``y``, by Clenshaw's recurrence."""
    b0, b1, b2 = op.constant(coefficients[0], y.dtype), op.constant(0.0, y.dtype), None
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = op.Add(op.Sub(op.Mul(y, b1), b2), op.constant(c, y.dtype))
    return op.Mul(op.constant(0.5, y.dtype), op.Sub(b0, b2))


def _series(op, x, small, large):
    """``(|x|, series, near)``: the series of ``small`` (``near``) where ``|x| <= 8``, of ``large``
    over ``sqrt(|x|)`` beyond (and for NaN)."""
    magnitude = op.Abs(x)
    two, eight = op.constant(2.0, x.dtype), op.constant(8.0, x.dtype)
    within = op.LessOrEqual(magnitude, eight)
    # Each series sees only arguments of its own side (8 for the others): no 32 / 0 or
    # inf - inf in the one Where drops, which constant folding would warn about.
    near_x = op.Where(op.Greater(magnitude, eight), eight, magnitude)
    far_x = op.Where(within, eight, magnitude)
    near = _chbevl(op, op.Sub(op.Div(near_x, two), two), small)
    far = op.Div(_chbevl(op, op.Sub(op.Div(op.constant(32.0, x.dtype), far_x), two), large), op.Sqrt(far_x))
    return magnitude, op.Where(within, near, far), near


def _i1_series(op, x):
    small, large = _I1E_SMALL, _I1E_LARGE
    if x.dtype != D.DOUBLE:
        small, large = small[-_FLOAT32_I1E_SMALL:], large[-_FLOAT32_I1E_LARGE:]
    return small, large


def _odd(op, x, value):
    """``value`` with the sign of ``x`` (i1 and i1e are odd functions)."""
    return op.Where(op.Less(x, op.constant(0.0, x.dtype)), op.Neg(value), value)


def _i0(op, x):
    magnitude, scaled, _ = _series(op, x, _I0E_SMALL, _I0E_LARGE)
    return op.Mul(op.Exp(magnitude), scaled)


@converter("aten::i0.default", "aten::special_i0.default")
def i0(op, self):
    return compute(op, lambda x: _i0(op, x), [self], op.output_dtype, _KERNELS)


@converter("aten::special_i0e.default")
def i0e(op, self):
    return compute(op, lambda x: _series(op, x, _I0E_SMALL, _I0E_LARGE)[1], [self], op.output_dtype, _KERNELS)


@converter("aten::special_i1.default")
def i1(op, self):
    def emit(x):
        small, large = _i1_series(op, x)
        magnitude, scaled, near = _series(op, x, small, large)
        # Up to 8 the series is that of exp(-x) I1(x) / x.
        eight = op.LessOrEqual(magnitude, op.constant(8.0, x.dtype))
        value = op.Where(eight, op.Mul(op.Mul(op.Exp(magnitude), magnitude), near), op.Mul(op.Exp(magnitude), scaled))
        return _odd(op, x, value)

    return compute(op, emit, [self], op.output_dtype, _KERNELS)


@converter("aten::special_i1e.default")
def i1e(op, self):
    def emit(x):
        small, large = _i1_series(op, x)
        magnitude, scaled, near = _series(op, x, small, large)
        eight = op.LessOrEqual(magnitude, op.constant(8.0, x.dtype))
        return _odd(op, x, op.Where(eight, op.Mul(near, magnitude), scaled))

    return compute(op, emit, [self], op.output_dtype, _KERNELS)


@converter("aten::kaiser_window.default", "aten::kaiser_window.periodic", "aten::kaiser_window.beta")
def kaiser_window(op, window_length, periodic=True, beta=12.0, **kwargs):
    """torch's CPU kernel: ``i0(beta * sqrt(|1 - ((n - a) / a)**2|)) / i0(beta)`` over ``n`` in
    ``[0, N)``, ``a = (N - 1) / 2``, ``N`` one more than the length when periodic (the last
    value dropped); in float32 for half precision, float64 for float64. A length of 0 or 1
    (0 / 0 in the formula) is known at export: torch guards a symbolic one against 1."""
    dtype = op.output_dtype
    if isinstance(window_length, int) and window_length <= 1:
        return to_dtype(op, op.constant(np.ones(window_length, np.float32)), dtype)
    wide = D.DOUBLE if dtype == D.DOUBLE else D.FLOAT
    i64 = D.INT64
    length = scalar_of(op, window_length, i64)
    count = op.Add(length, op.constant(1, i64)) if periodic else length
    n = op.Cast(op.Range(op.constant(0, i64), length, op.constant(1, i64)), to=wide)
    alpha = op.Div(op.Sub(op.Cast(count, to=wide), op.constant(1.0, wide)), op.constant(2.0, wide))
    ratio = op.Div(op.Sub(n, alpha), alpha)
    one = op.constant(1.0, wide)
    shape = op.constant(float(beta), wide)
    argument = op.Mul(shape, op.Sqrt(op.Abs(op.Sub(one, op.Mul(ratio, ratio)))))

    return to_dtype(op, op.Div(_i0(op, argument), _i0(op, shape)), dtype)
