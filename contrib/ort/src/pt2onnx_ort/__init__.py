"""pt2onnx-ort: converters emitting onnxruntime contrib ops (domain ``com.microsoft``).

Installed, the pack sits in the installed layer and so wins over the builtin converters
of the same ops. Its entry point registers only the fusions measured faster than the
builtin export in onnxruntime (``benchmarks/results/ort_fusions.md``), for the opsets
where they are (FastGelu: up to 19), each only if the installed onnxruntime runs its
contrib op (checked once with a one-node session); a case a fusion cannot take is
declined to the builtin converter. ``pt2onnx_ort.attention`` (MultiHeadAttention) is
opt-in: ``plugins=["pt2onnx_ort.attention"]``. Block the pack with ``disable=["ort"]``
or ``pt2onnx -p no:ort``.
"""

from __future__ import annotations

from pt2onnx.plugin import ConverterRegistrar, hookimpl

from . import activations
from ._runtime import implemented


@hookimpl
def pt2onnx_register_converters(register: ConverterRegistrar) -> None:
    if implemented(*activations.PROBE):
        register.module(activations)
