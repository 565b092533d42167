"""The custom op a quantized linear layer calls: ``pt2onnx_quant::matmul_nbits``.

One op per layer, so that ``torch.export`` captures the quantized product whole and the
plugin (:mod:`pt2onnx_quant.plugin`) exports it as one ``com.microsoft::MatMulNBits``
node. Its eager kernel dequantizes the weight and multiplies, so the quantized model runs
in PyTorch too, and gives the results the export is compared with.
"""

from __future__ import annotations

import torch

from .packing import dequantize

__all__ = ["matmul_nbits"]


@torch.library.custom_op("pt2onnx_quant::matmul_nbits", mutates_args=())
def matmul_nbits(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    zero_points: torch.Tensor | None,
    bias: torch.Tensor | None,
    in_features: int,
    bits: int,
    block_size: int,
    accuracy_level: int = 0,
) -> torch.Tensor:
    """``x @ W.T + bias``, ``W`` the weight ``packed``/``scales``/``zero_points`` stand for.

    The tensors are in ``MatMulNBits``' layout (:mod:`pt2onnx_quant.packing`).
    ``accuracy_level`` only goes to the exported node: onnxruntime may compute in lower
    precision above 0 (4: ``x`` quantized to int8 per block); eager is always the exact
    product of ``x`` and the dequantized weight.
    """
    weight = dequantize(packed, scales, zero_points, in_features, bits, block_size)
    return torch.nn.functional.linear(x, weight.to(x.dtype), bias)


@matmul_nbits.register_fake
def _(
    x: torch.Tensor,
    packed: torch.Tensor,
    scales: torch.Tensor,
    zero_points: torch.Tensor | None,
    bias: torch.Tensor | None,
    in_features: int,
    bits: int,
    block_size: int,
    accuracy_level: int = 0,
) -> torch.Tensor:
    # What torch.export needs: the output's dtype and shape (N is the packed weight's first dim).
    return x.new_empty((*x.shape[:-1], packed.shape[0]))
