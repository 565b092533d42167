"""pt2onnx-quant: weight-only int4/int8 quantization of linear layers, exported as onnxruntime's ``MatMulNBits``.

:func:`quantize_weights` replaces a model's ``nn.Linear`` layers by :class:`QuantizedLinear`
(in place); :func:`from_torchao` does it for layers torchao quantized; each calls the custom
op ``pt2onnx_quant::matmul_nbits`` (:mod:`.ops`), which the plugin (:mod:`.plugin`, entry
point ``quant``) exports as one ``com.microsoft::MatMulNBits`` node. :func:`accuracy` and
:func:`token_agreement` measure an export against the float model.
"""

from __future__ import annotations

from .accuracy import Accuracy, TokenAgreement, accuracy, token_agreement
from .linear import ACCURACY_LEVELS, QuantizedLinear, quantize_weights
from .packing import BITS, BLOCK_SIZES, QuantizedWeight, dequantize, quantize
from .torchao_weights import from_torchao

__all__ = [
    "quantize_weights",
    "from_torchao",
    "QuantizedLinear",
    "accuracy",
    "token_agreement",
    "Accuracy",
    "TokenAgreement",
    "quantize",
    "dequantize",
    "QuantizedWeight",
    "ACCURACY_LEVELS",
    "BITS",
    "BLOCK_SIZES",
]
