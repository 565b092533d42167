"""The target opset: by default the newest one the installed onnxruntime runs."""

from __future__ import annotations

import functools

import onnx
import onnx.helper as oh
import onnxruntime as ort

from .errors import OptionError

__all__ = ["MIN_OPSET", "default_opset", "check_opset"]

#: The oldest opset pt2onnx exports: every builtin converter serves it, or registers
#: ``since=`` the opset that gave ONNX its op (``pt2onnx ops OP`` shows the ranges).
MIN_OPSET = 14


@functools.cache
def default_opset() -> int:
    """The newest opset both onnx and the installed onnxruntime know, probed once."""
    for version in range(onnx.defs.onnx_opset_version(), MIN_OPSET - 1, -1):
        opset = [oh.make_opsetid("", version)]
        graph = oh.make_graph(
            [oh.make_node("Identity", ["x"], ["y"])],
            "probe",
            [oh.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])],
            [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])],
        )
        model = oh.make_model(graph, opset_imports=opset, ir_version=oh.find_min_ir_version_for(opset))
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        except Exception:  # noqa: BLE001 - onnxruntime rejects opsets it does not know
            continue
        return version
    return MIN_OPSET


def check_opset(opset: int | None) -> int:
    """``opset`` validated, or the default.

    Raises:
        OptionError: ``opset`` is not an int in ``[MIN_OPSET, newest opset onnx knows]``.
    """
    if opset is None:
        return default_opset()
    newest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= newest:
        raise OptionError(
            f"opset={opset!r} is not supported: pt2onnx exports opsets {MIN_OPSET} to {newest} "
            f"(the installed onnx knows up to {newest}; the installed onnxruntime runs up to {default_opset()})",
            hint=f"pass an opset in [{MIN_OPSET}, {newest}], or leave it out for {default_opset()}",
        )
    return opset
