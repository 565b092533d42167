"""optimum's ``decoder_model_merged.onnx``: the first decoding step and every later one in one graph.

The two decoder graphs of :func:`~pt2onnx_transformers.seq2seq.export_seq2seq` are two captures
(whether a layer computes its cross-attention keys or reads them is a Python flag of transformers'
cache), so they cannot be one traced graph. Merged, they are the two branches of an ONNX ``If`` on a
``use_cache_branch`` input (true: the with-past graph), over one copy of the weights: optimum's
``ORTModelForSeq2SeqLM`` and onnxruntime-genai's users load that file, and a runtime holds the
decoder's weights once instead of once per graph.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import onnx_ir as ir
import onnxruntime as ort

__all__ = ["USE_CACHE_BRANCH", "merge_decoders", "save_model", "session"]

#: The merged graph's boolean input of shape ``[1]``: true runs the with-past branch.
USE_CACHE_BRANCH = "use_cache_branch"
# Weights above this go to an external data file: protobuf cannot serialize a model of 2 GB.
_INLINE_LIMIT = 2**31 - 2**26


def merge_decoders(decoder: ir.Model, decoder_with_past: ir.Model) -> ir.Model:
    """One model that runs ``decoder_with_past`` where ``use_cache_branch`` is true, else ``decoder``.

    Its inputs are ``decoder_with_past``'s and ``use_cache_branch``; its outputs are theirs (both
    graphs must return the same names, and ``decoder`` take a subset of ``decoder_with_past``'s
    inputs). Weights of the same name and values are stored once. The given models are not changed
    (the merge works on clones, which share their tensors).

    Raises:
        ValueError: the two graphs' inputs or outputs do not line up as two steps of one decoder.
    """
    first, past = decoder.clone(), decoder_with_past.clone()
    _check_steps(first.graph, past.graph)
    inputs = {v.name or "": ir.Value(name=v.name, type=v.type, shape=v.shape) for v in past.graph.inputs}
    flag = ir.Value(name=USE_CACHE_BRANCH, type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([1]))
    weights: dict[str, ir.Value] = {}
    branches = {tag: _branch(model.graph, tag, inputs, weights) for tag, model in (("past", past), ("first", first))}
    outputs = [
        ir.Value(name=a.name, type=a.type, shape=_common_shape(a.shape, b.shape))
        for a, b in zip(decoder_with_past.graph.outputs, decoder.graph.outputs)
    ]
    choose = ir.Node(
        "",
        "If",
        [flag],
        [ir.AttrGraph("then_branch", branches["past"]), ir.AttrGraph("else_branch", branches["first"])],
        outputs=outputs,
        name="use_cache_branch_if",
    )
    graph = ir.Graph(
        [*inputs.values(), flag],
        outputs,
        nodes=[choose],
        initializers=list(weights.values()),
        opset_imports=dict(past.graph.opset_imports),
        name="decoder_model_merged",
    )
    functions = {**first.functions, **past.functions}
    return ir.Model(
        graph,
        ir_version=past.ir_version,
        producer_name=past.producer_name,
        producer_version=past.producer_version,
        functions=list(functions.values()),
        metadata_props=dict(past.metadata_props),
    )


def _check_steps(first: ir.Graph, past: ir.Graph) -> None:
    taken = {v.name: v.dtype for v in past.inputs}
    unknown = [v.name for v in first.inputs if taken.get(v.name) != v.dtype]
    if unknown:
        raise ValueError(
            f"the first step's inputs {unknown} are not inputs of the with-past graph (of the same type): "
            "merge the two decoder graphs of one export_seq2seq"
        )
    names = ([v.name for v in first.outputs], [v.name for v in past.outputs])
    if names[0] != names[1]:
        raise ValueError(f"the two decoder graphs return different outputs: {names[0]} and {names[1]}")
    if dict(first.opset_imports) != dict(past.opset_imports):
        raise ValueError(f"the two decoder graphs import other opsets: {first.opset_imports} and {past.opset_imports}")


def _branch(graph: ir.Graph, tag: str, inputs: dict[str, ir.Value], weights: dict[str, ir.Value]) -> ir.Graph:
    """``graph``'s nodes as a subgraph reading the merged graph's inputs and weights, its names prefixed."""
    # export_seq2seq returns no input as it came (a past comes back through a node, as present.*).
    outputs = list(graph.outputs)
    for value in graph.inputs:
        value.replace_all_uses_with(inputs[value.name or ""])
    for name, value in graph.initializers.items():
        shared = weights.get(name)
        if shared is None or not _same_tensor(shared, value):
            if shared is not None:
                name = f"{tag}/{name}"  # a constant of the same name and other values: both kept
            shared = weights[name] = ir.Value(
                name=name, type=value.type, shape=value.shape, const_value=value.const_value
            )
        value.replace_all_uses_with(shared)
    # Value names are unique across a model and its subgraphs: each branch's get its tag.
    for node in graph.all_nodes():
        node.name = f"{tag}/{node.name}" if node.name else None
        for value in node.outputs:
            value.name = f"{tag}/{value.name}"
    nodes = list(graph)
    graph.outputs.clear()
    graph.remove(nodes)
    return ir.Graph((), outputs, nodes=nodes, name=tag)


def _same_tensor(a: ir.Value, b: ir.Value) -> bool:
    x, y = a.const_value, b.const_value
    if x is None or y is None:
        return x is y
    if x is y:
        return True
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x.numpy(), y.numpy())


def _common_shape(a: ir.Shape | None, b: ir.Shape | None) -> ir.Shape | None:
    """The dims both branches' outputs share; a dim they differ in is left unnamed."""
    if a is None or b is None or len(a) != len(b):
        return None
    return ir.Shape([x if x == y else None for x, y in zip(a, b)])


def _weight_bytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def save_model(model: ir.Model, path: str | os.PathLike[str]) -> list[Path]:
    """Write ``model`` to ``path`` (its weights to ``path.data`` above 2 GB); the ``.onnx`` file
    appears only once whole. Returns the files written."""
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial")
    data = f"{path.name}.data" if _weight_bytes(model) >= _INLINE_LIMIT else None
    try:
        ir.save(model, partial, external_data=data)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return [path] if data is None else [path, path.with_name(data)]


def session(model: ir.Model) -> ort.InferenceSession:
    """An onnxruntime session (CPU) of ``model``, through a temporary file above 2 GB of weights."""
    providers = ["CPUExecutionProvider"]
    if _weight_bytes(model) < _INLINE_LIMIT:
        return ort.InferenceSession(ir.to_proto(model).SerializeToString(), providers=providers)
    with tempfile.TemporaryDirectory() as tmp:
        saved = save_model(model, Path(tmp) / "model.onnx")
        return ort.InferenceSession(str(saved[0]), providers=providers)
