"""``QuantizedLinear`` and ``quantize_weights``: a model's linear layers, weight-only quantized.

``quantize_weights(model)`` replaces, in place, each ``torch.nn.Linear`` by a
:class:`QuantizedLinear` holding its weight in ``MatMulNBits``' layout
(:mod:`pt2onnx_quant.packing`) and calling ``pt2onnx_quant::matmul_nbits``. The model still
runs in PyTorch; exported, each layer is one ``com.microsoft::MatMulNBits`` node.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable
from typing import Any

import torch

from .ops import matmul_nbits
from .packing import QuantizedWeight, check_config, quantize

__all__ = ["ACCURACY_LEVELS", "QuantizedLinear", "quantize_weights"]

#: MatMulNBits' ``accuracy_level``: 0 unset (onnxruntime's most accurate kernel), 1 float32,
#: 2 float16, 3 bfloat16, 4 int8 (the input quantized per block: fastest, least exact).
ACCURACY_LEVELS = (0, 1, 2, 3, 4)


class QuantizedLinear(torch.nn.Module):
    """A linear layer whose weight is quantized block-wise to ``bits`` (an inference-only module).

    Buffers ``packed``, ``scales``, ``zero_points`` (None when symmetric) and ``bias`` (None
    without one) are ``MatMulNBits``' inputs; ``forward`` calls
    ``pt2onnx_quant::matmul_nbits``, the product with the dequantized weight.
    """

    packed: torch.Tensor
    scales: torch.Tensor
    zero_points: torch.Tensor | None
    bias: torch.Tensor | None

    def __init__(self, weight: QuantizedWeight, bias: torch.Tensor | None = None, accuracy_level: int = 0) -> None:
        super().__init__()
        check_config(weight.bits, weight.block_size)
        check_accuracy_level(accuracy_level)
        self.in_features = weight.in_features
        self.out_features = weight.scales.shape[0]
        self.bits, self.block_size, self.accuracy_level = weight.bits, weight.block_size, accuracy_level
        self.register_buffer("packed", weight.packed)
        self.register_buffer("scales", weight.scales)
        self.register_buffer("zero_points", weight.zero_points)
        self.register_buffer("bias", None if bias is None else bias.detach().clone())

    @classmethod
    def from_linear(
        cls,
        linear: torch.nn.Linear,
        bits: int = 4,
        block_size: int = 32,
        symmetric: bool = True,
        accuracy_level: int = 0,
    ) -> QuantizedLinear:
        """``linear`` with its weight quantized (:func:`pt2onnx_quant.packing.quantize`)."""
        return cls(quantize(linear.weight, bits, block_size, symmetric), linear.bias, accuracy_level)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T + bias`` with the dequantized weight ``W``."""
        return matmul_nbits(
            x,
            self.packed,
            self.scales,
            self.zero_points,
            self.bias,
            self.in_features,
            self.bits,
            self.block_size,
            self.accuracy_level,
        )

    def extra_repr(self) -> str:
        symmetric = self.zero_points is None
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, bits={self.bits}, "
            f"block_size={self.block_size}, symmetric={symmetric}, accuracy_level={self.accuracy_level}, "
            f"bias={self.bias is not None}"
        )


def quantize_weights(
    model: torch.nn.Module,
    bits: int = 4,
    block_size: int = 32,
    *,
    symmetric: bool = True,
    accuracy_level: int = 0,
    exclude: Iterable[str] = (),
) -> torch.nn.Module:
    """Quantize the weights of ``model``'s linear layers to ``bits`` (4 or 8), in place.

    Args:
        bits: 4 or 8.
        block_size: how many weights along the input features share a scale: 16, 32, 64,
            128 or 256. Smaller blocks are more exact and take more scales.
        symmetric: one scale per block, zero at the middle level (``2 ** (bits - 1)``); False
            adds a zero point per block, so a block of one sign uses every level.
        accuracy_level: MatMulNBits' attribute (:data:`ACCURACY_LEVELS`): how onnxruntime may
            compute the product; 4 quantizes the input to int8, faster and less exact.
        exclude: module names (``fnmatch`` patterns: ``"lm_head"``, ``"*.mlp.down_proj"``)
            to leave in floating point. A pattern that matches no linear layer is an error.

    Returns ``model`` (a :class:`QuantizedLinear` if ``model`` itself is an ``nn.Linear``).

    Only layers whose type is exactly ``torch.nn.Linear`` are replaced: a subclass may compute
    otherwise (``nn.MultiheadAttention``'s projection is read as a weight, never called).

    Raises:
        ValueError: an unsupported ``bits``, ``block_size`` or ``accuracy_level``, or an
            ``exclude`` pattern that matches no linear layer.
    """
    check_config(bits, block_size)
    check_accuracy_level(accuracy_level)
    return replace_modules(
        model,
        lambda module: type(module) is torch.nn.Linear,
        lambda linear: QuantizedLinear.from_linear(linear, bits, block_size, symmetric, accuracy_level),
        exclude,
    )


def replace_modules(
    model: torch.nn.Module,
    select: Callable[[torch.nn.Module], bool],
    build: Callable[[Any], torch.nn.Module],
    exclude: Iterable[str] = (),
) -> torch.nn.Module:
    """Replace, in place, each submodule ``select`` picks by ``build(module)``; returns ``model``.

    ``exclude``: ``fnmatch`` patterns of module names left as they are; each must match a
    module ``select`` picks, so a misspelt name is an error, not a no-op. A ``model`` that
    is itself picked cannot change in place: its replacement is returned.
    """
    patterns = list(exclude)
    picked = [(name, module) for name, module in model.named_modules() if select(module)]
    unmatched = [p for p in patterns if not any(fnmatch.fnmatchcase(name, p) for name, _ in picked)]
    if unmatched:
        raise ValueError(f"exclude={unmatched}: no layer this replaces is named so")
    for name, module in picked:
        if any(fnmatch.fnmatchcase(name, p) for p in patterns):
            continue
        if not name:
            return build(module)
        parent, _, child = name.rpartition(".")
        setattr(model.get_submodule(parent), child, build(module))
    return model


def check_accuracy_level(level: int) -> None:
    if level not in ACCURACY_LEVELS:
        raise ValueError(f"accuracy_level={level!r}: MatMulNBits takes 0 (unset), 1 (float32), 2, 3 or 4 (int8)")
