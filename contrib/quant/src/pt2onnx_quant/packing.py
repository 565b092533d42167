"""Block-wise weight quantization in onnxruntime's ``MatMulNBits`` layout, and back.

A weight ``[N, K]`` (``nn.Linear``'s: out, in) is cut along K into blocks of ``block_size``
(the last one zero-padded); each block of each row gets a scale and, when asymmetric, a
zero point. The quantized values are unsigned, ``bits`` wide, and packed into bytes along K,
the first value in the low bits: ``packed`` is ``[N, k_blocks, block_size * bits // 8]``
uint8, ``scales`` ``[N, k_blocks]`` in the weight's dtype, ``zero_points`` ``[N,
ceil(k_blocks * bits / 8)]`` uint8 packed the same way (None when symmetric: onnxruntime
then takes ``2 ** (bits - 1)``). A weight is ``(q - zero_point) * scale``.

The scales and rounding are those of onnxruntime's own quantizer (``MatMulNBitsQuantizer``,
MLAS ``range2scale``/``range2scalezp``): symmetric blocks map the value of largest magnitude
to ``-2 ** (bits - 1)`` (so the scale may be negative) and use every level; asymmetric ones
span ``[min(0, lowest), max(0, highest)]``, so 0 is exact. ``tests/test_quant_packing.py``
checks the values against onnxruntime's quantizer (its padding aside: onnxruntime leaves it 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "BITS",
    "BLOCK_SIZES",
    "QuantizedWeight",
    "check_config",
    "dequantize",
    "pack_bits",
    "quantize",
    "unpack_bits",
]

#: The weight widths this pack emits (MatMulNBits takes 2 to 8; 4 and 8 are the ones onnxruntime's CPU kernels serve fast).
BITS = (4, 8)
#: MatMulNBits' block sizes: a power of 2 from 16; onnxruntime's CPU kernels take up to 256.
BLOCK_SIZES = (16, 32, 64, 128, 256)


@dataclass(frozen=True)
class QuantizedWeight:
    """A weight ``[N, K]`` quantized block-wise, in ``MatMulNBits``' input layout."""

    packed: torch.Tensor
    scales: torch.Tensor
    zero_points: torch.Tensor | None
    in_features: int
    bits: int
    block_size: int


def check_config(bits: int, block_size: int) -> None:
    """Raise ``ValueError`` unless ``bits`` and ``block_size`` are ones ``MatMulNBits`` takes here."""
    if bits not in BITS:
        raise ValueError(f"bits={bits!r}: pt2onnx-quant quantizes weights to {' or '.join(map(str, BITS))} bits")
    if block_size not in BLOCK_SIZES:
        raise ValueError(
            f"block_size={block_size!r}: MatMulNBits takes a power of 2 from 16 to 256 ({', '.join(map(str, BLOCK_SIZES))})"
        )


def quantize(weight: torch.Tensor, bits: int = 4, block_size: int = 32, symmetric: bool = True) -> QuantizedWeight:
    """Quantize ``weight`` (``[N, K]``, floating) block-wise along K, as onnxruntime's quantizer does."""
    check_config(bits, block_size)
    if weight.dim() != 2 or not weight.dtype.is_floating_point:
        raise ValueError(f"quantize takes a floating [N, K] weight, not {weight.dtype} of shape {tuple(weight.shape)}")
    if not torch.isfinite(weight).all():
        raise ValueError("the weight holds NaN or inf: no scale represents it")
    blocks = _blocks(weight.detach().float(), block_size)
    mid, top = 2 ** (bits - 1), 2**bits - 1
    if symmetric:
        low, high = blocks.amin(-1), blocks.amax(-1)
        peak = torch.where(high.abs() > low.abs(), high, low)
        scales = (peak / -mid).to(weight.dtype)
        zero = torch.full_like(scales, mid, dtype=torch.float32)
    else:
        low, high = blocks.amin(-1).clamp(max=0), blocks.amax(-1).clamp(min=0)
        scale = (high - low) / top
        # The zero point from the float32 scale, before it is stored in the weight's dtype.
        zero = _round_half_away(torch.where(scale != 0, -low / scale, low)).clamp(0, top)
        scales = scale.to(weight.dtype)
    # Multiplied by the reciprocal of the stored scale, as onnxruntime's quantizer does.
    s = scales.float()
    reciprocal = torch.where(s != 0, 1 / s, torch.zeros_like(s))
    q = _round_half_away(blocks * reciprocal[..., None] + zero[..., None]).clamp(0, top).to(torch.uint8)
    zero_points = None if symmetric else pack_bits(zero.to(torch.uint8), bits)
    return QuantizedWeight(pack_bits(q, bits), scales, zero_points, weight.shape[1], bits, block_size)


def dequantize(
    packed: torch.Tensor,
    scales: torch.Tensor,
    zero_points: torch.Tensor | None,
    in_features: int,
    bits: int,
    block_size: int,
) -> torch.Tensor:
    """The float32 weight ``[N, K]`` the quantized tensors stand for: ``(q - zero_point) * scale``."""
    n, k_blocks = scales.shape
    q = unpack_bits(packed, bits).reshape(n, k_blocks, block_size).float()
    if zero_points is None:
        zero = torch.full((n, k_blocks), 2 ** (bits - 1), dtype=torch.float32, device=q.device)
    else:
        zero = unpack_bits(zero_points, bits)[:, :k_blocks].float()
    weight = (q - zero[..., None]) * scales.float()[..., None]
    return weight.reshape(n, k_blocks * block_size)[:, :in_features]


def _blocks(weight: torch.Tensor, block_size: int) -> torch.Tensor:
    """``[N, K]`` as ``[N, k_blocks, block_size]``, the last block zero-padded."""
    n, k = weight.shape
    pad = -k % block_size
    return torch.nn.functional.pad(weight, (0, pad)).reshape(n, -1, block_size)


def _round_half_away(x: torch.Tensor) -> torch.Tensor:
    # C's roundf (onnxruntime's quantizer), not torch.round's half-to-even; in float64, so that
    # adding the half cannot round a value just below .5 up.
    x64 = x.double()
    return (torch.sign(x64) * torch.floor(x64.abs() + 0.5)).float()


def pack_bits(q: torch.Tensor, bits: int) -> torch.Tensor:
    """uint8 values below ``2 ** bits`` packed along the last dim, the first in the low bits."""
    if bits == 8:
        return q.contiguous()
    if q.shape[-1] % 2:
        q = torch.nn.functional.pad(q, (0, 1))
    pairs = q.reshape(*q.shape[:-1], -1, 2)
    return (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()


def unpack_bits(packed: torch.Tensor, bits: int) -> torch.Tensor:
    """The inverse of :func:`pack_bits` (the last dim comes back whole bytes long: ``2 *`` for 4 bits)."""
    if bits == 8:
        return packed
    return torch.stack([packed & 0x0F, packed >> 4], dim=-1).flatten(-2)
