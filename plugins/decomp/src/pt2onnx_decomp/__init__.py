"""pt2onnx-decomp: which ops to keep whole when the program is re-traced, and extra decompositions.

The core already never decomposes an op some plugin converts. The ``keep`` list here
records, per op, the decision that its direct ONNX translation beats torch's
decomposition, so ``pt2onnx ops`` can show it and the choice does not silently depend
on which pack happens to convert the op.
"""

from __future__ import annotations

from pt2onnx.plugin import DecompositionRegistrar, hookimpl

KEEP = (
    "aten::linear",
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::batch_norm",
    "aten::flatten",
    "aten::dropout",
)


@hookimpl
def pt2onnx_register_decompositions(register: DecompositionRegistrar) -> None:
    register.keep(*KEEP)
