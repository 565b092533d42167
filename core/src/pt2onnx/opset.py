"""The target opset: by default the newest one the installed onnxruntime runs at full speed."""

from __future__ import annotations

import functools
import os
import tempfile

import onnx
import onnx.helper as oh
import onnxruntime as ort

from .errors import OptionError

__all__ = ["MIN_OPSET", "KEPT_KERNELS", "check_opset", "default_opset", "newest_opset", "onnxruntime_has_kernel"]

#: The oldest opset pt2onnx exports: every builtin converter serves it, or registers
#: ``since=`` the opset that gave ONNX its op (``pt2onnx ops OP`` shows the ranges).
MIN_OPSET = 14


#: Ops that onnxruntime runs with kernels of its own at some opsets and as their ONNX
#: function body at others: the default opset is one where it has the kernel (onnxruntime
#: 1.32 has one for Attention-23 and -24, none for Attention-25; at opset 28 a Llama runs
#: 1.3-1.5x slower for it, benchmarks/results/attention_forms.md).
KEPT_KERNELS = ("Attention",)


def _probe(op_type: str, opset: int) -> onnx.ModelProto:
    """One ``op_type`` node at ``opset`` on float inputs, one per input the op requires."""
    schema = onnx.defs.get_schema(op_type, opset)
    names = [f"x{i}" for i in range(schema.min_input)]
    inputs = [oh.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [1, 1, 2, 4]) for n in names]
    node = oh.make_node(op_type, names, ["y"])
    graph = oh.make_graph([node], "probe", inputs, [oh.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    opsets = [oh.make_opsetid("", opset)]
    return oh.make_model(graph, opset_imports=opsets, ir_version=oh.find_min_ir_version_for(opsets))


@functools.cache
def onnxruntime_has_kernel(op_type: str, opset: int) -> bool:
    """Whether the installed onnxruntime runs ``op_type`` at ``opset`` with a CPU kernel of
    its own rather than the op's ONNX function body (or not at all).

    For ops whose required inputs may all be float tensors (Attention, LayerNormalization,
    Gelu, ...): a session with its optimizations off keeps such a node, or inlines the body.
    False for an op onnx does not define at ``opset``.
    """
    if _since(op_type, opset) is None:
        return False
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    with tempfile.TemporaryDirectory() as directory:
        options.optimized_model_filepath = os.path.join(directory, "run.onnx")
        try:
            ort.InferenceSession(
                _probe(op_type, opset).SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception:  # noqa: BLE001 - onnxruntime rejects opsets and ops it does not know
            return False
        return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node] == [op_type]


def _since(op_type: str, opset: int) -> int | None:
    try:
        return onnx.defs.get_schema(op_type, opset).since_version
    except onnx.defs.SchemaError:
        return None


@functools.cache
def newest_opset() -> int:
    """The newest opset both onnx and the installed onnxruntime know, probed once."""
    for version in range(onnx.defs.onnx_opset_version(), MIN_OPSET - 1, -1):
        if onnxruntime_has_kernel("Identity", version):
            return version
    return MIN_OPSET


@functools.cache
def default_opset() -> int:
    """The newest opset both onnx and the installed onnxruntime know at which onnxruntime
    keeps the kernels it has for :data:`KEPT_KERNELS`, probed once."""
    for version in range(newest_opset(), MIN_OPSET - 1, -1):
        ops = [op for op in KEPT_KERNELS if _since(op, version) is not None]
        if all(onnxruntime_has_kernel(op, version) or not _ever_had_kernel(op, version) for op in ops):
            return version
    return MIN_OPSET


def _ever_had_kernel(op_type: str, opset: int) -> bool:
    """Whether onnxruntime has its own kernel for ``op_type`` at ``opset`` or an older opset."""
    versions = {_since(op_type, v) for v in range(MIN_OPSET, opset + 1)} - {None}
    return any(onnxruntime_has_kernel(op_type, v) for v in versions)


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
            f"(the installed onnx knows up to {newest}; the installed onnxruntime runs up to {newest_opset()})",
            hint=f"pass an opset in [{MIN_OPSET}, {newest}], or leave it out for {default_opset()}",
        )
    return opset
