"""Linear layers torchao quantized weight-only, as :class:`QuantizedLinear` with the same quantized values.

torchao's ``quantize_(model, Int8WeightOnlyConfig())`` and ``quantize_(model,
IntxWeightOnlyConfig(weight_dtype=torch.int4 or torch.int8, granularity=PerGroup(g) or
PerAxis(0)))`` leave each ``nn.Linear`` with a weight tensor subclass holding signed
``qdata``, a ``scale`` and a ``zero_point`` per row or group: the weight is ``(qdata -
zero_point) * scale``. :func:`from_torchao` moves those values into ``MatMulNBits``' unsigned
layout (both offset by ``2 ** (bits - 1)``), so the export computes with torchao's weights.
torchao's ``Int4WeightOnlyConfig`` needs CUDA kernels (its CPU layouts need the ``mslk``
package) and is not taken; ``IntxWeightOnlyConfig(weight_dtype=torch.int4)`` is its CPU form.

torchao is never imported here: its tensors are recognized by their class and attributes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch

from .linear import QuantizedLinear, check_accuracy_level, replace_modules
from .packing import BLOCK_SIZES, QuantizedWeight, pack_bits

__all__ = ["from_torchao", "weight_from_torchao"]

# torchao's weight-only tensor classes, and the attribute that holds their activation quantization.
_ACTIVATION_ATTRIBUTE = {"Int8Tensor": "act_quant_kwargs", "IntxUnpackedToInt8Tensor": "activation_quantization"}
# By name: torch.int4 is missing from torch's type stubs.
_BITS = {"torch.int4": 4, "torch.int8": 8}


def from_torchao(model: torch.nn.Module, *, accuracy_level: int = 0, exclude: Iterable[str] = ()) -> torch.nn.Module:
    """Replace, in place, each ``nn.Linear`` whose weight torchao quantized by a :class:`QuantizedLinear`.

    ``accuracy_level`` and ``exclude`` as for :func:`pt2onnx_quant.quantize_weights`; the
    bits and blocks are torchao's. Returns ``model``.

    Raises:
        ValueError: no linear layer holds a torchao weight, or one holds a kind this cannot
            express as ``MatMulNBits`` (another width, activations quantized too, ...).
    """
    check_accuracy_level(accuracy_level)
    if not any(_is_torchao_linear(m) for m in model.modules()):
        raise ValueError(
            "no linear layer of the model holds a torchao-quantized weight (run torchao's quantize_ first)"
        )
    return replace_modules(
        model,
        _is_torchao_linear,
        lambda linear: QuantizedLinear(weight_from_torchao(linear.weight), linear.bias, accuracy_level),
        exclude,
    )


def weight_from_torchao(weight: Any) -> QuantizedWeight:
    """A torchao weight-only int4/int8 tensor (``[N, K]``) in ``MatMulNBits``' layout, the same values."""
    kind = type(weight).__name__
    if kind not in _ACTIVATION_ATTRIBUTE:
        raise ValueError(
            f"torchao's {kind} is not taken: only weight-only int8/int4 weights (Int8WeightOnlyConfig, "
            "IntxWeightOnlyConfig(weight_dtype=torch.int4 or torch.int8)) are MatMulNBits"
        )
    if getattr(weight, _ACTIVATION_ATTRIBUTE[kind]) is not None:
        raise ValueError(f"this torchao {kind} quantizes activations too; MatMulNBits quantizes weights only")
    bits = 8 if kind == "Int8Tensor" else _BITS.get(str(weight.target_dtype))
    if bits is None:
        raise ValueError(f"torchao weights of {weight.target_dtype}: MatMulNBits here takes int4 or int8")
    qdata = weight.qdata
    n, k = qdata.shape
    rows, group = weight.block_size
    if rows != 1:
        raise ValueError(f"torchao block_size {tuple(weight.block_size)}: MatMulNBits blocks lie along one row")
    block_size = _block_size(group, k)
    k_blocks = -(-k // block_size)
    # Each MatMulNBits block lies in one torchao group: it takes that group's scale and zero point.
    group_of_block = torch.arange(k_blocks) * block_size // group
    mid = 2 ** (bits - 1)
    scales = weight.scale.reshape(n, -1)[:, group_of_block].to(weight.dtype)
    torchao_zero = weight.zero_point if weight.zero_point is not None else torch.zeros_like(weight.scale)
    zero = torchao_zero.reshape(n, -1)[:, group_of_block].to(torch.int32) + mid
    if zero.min() < 0 or zero.max() >= 2**bits:
        raise ValueError(f"torchao zero points outside the {bits}-bit range")
    # Padded with each row's last zero point: the padding stands for weights of 0.
    q = zero[:, -1:].repeat(1, k_blocks * block_size)
    q[:, :k] = qdata.to(torch.int32) + mid
    packed = pack_bits(q.reshape(n, k_blocks, block_size).to(torch.uint8), bits)
    zero_points = None if bool((torchao_zero == 0).all()) else pack_bits(zero.to(torch.uint8), bits)
    return QuantizedWeight(packed, scales, zero_points, k, bits, block_size)


def _is_torchao_linear(module: torch.nn.Module) -> bool:
    return type(module) is torch.nn.Linear and type(module.weight).__module__.startswith("torchao.")


def _block_size(group: int, k: int) -> int:
    """A MatMulNBits block size that lies within torchao's groups of ``group`` weights."""
    if group >= k:
        # One scale per row: any block size holds it; the fewest blocks that cover the row.
        return next((b for b in BLOCK_SIZES if b >= k), BLOCK_SIZES[-1])
    fitting = [b for b in BLOCK_SIZES if group % b == 0]
    if not fitting:
        raise ValueError(f"torchao group size {group}: MatMulNBits needs groups of a multiple of 16 weights")
    return fitting[-1]
