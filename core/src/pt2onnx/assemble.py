"""Assemble: turn the translated graph into a model, as the graph signature says.

User inputs stay graph inputs; parameters, buffers and lifted constants become
initializers named by their fully qualified names, referencing torch's tensors
(never copied); mutated buffers and inputs become extra outputs. Inputs and outputs get
the names :mod:`pt2onnx.interface.names` gives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir
import onnx_ir.passes.common as common_passes
import torch
from onnx_ir.tensor_adapters import TorchTensor
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind, OutputKind

from .errors import ConversionError
from .interface.names import IONames, updated_name
from .translate import TranslatedGraph

__all__ = ["OutputLayout", "assemble", "separate_outputs_from_subgraphs"]


@dataclass
class OutputLayout:
    """How the ONNX inputs and outputs map to what ``forward`` takes and returns.

    ``user`` has one entry per flattened user output: the ONNX output name, or
    ``("constant", value)`` for outputs torch specialized to a Python value.
    ``mutations`` maps ONNX output names of mutated buffers/inputs to their targets.
    ``inputs`` maps the placeholder names of renamed user inputs to their ONNX names.
    ``complex`` names the user outputs holding complex values as (..., 2) real tensors.
    """

    user: list[str | tuple[str, Any]] = field(default_factory=list)
    mutations: dict[str, str] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)
    complex: set[str] = field(default_factory=set)


def _initializer(value: ir.Value, name: str, tensor: torch.Tensor) -> ir.Value:
    value.name = name
    if tensor.is_complex():  # held as (..., 2) real values, as the value was typed
        tensor = torch.view_as_real(tensor.resolve_conj()).contiguous()
    value.const_value = TorchTensor(tensor.detach(), name=name)
    return value


def _output_value(graph: ir.Graph, value: ir.Value, name: str, used: set[ir.Value]) -> ir.Value:
    """A value that may be declared as graph output ``name``."""
    if value.is_graph_input() or value.is_initializer() or value in used or value.producer() is None:
        identity = ir.node("Identity", inputs=[value], num_outputs=1)
        graph.append(identity)
        out = identity.outputs[0]
        out.type, out.shape = value.type, value.shape
        value = out
    value.name = name
    used.add(value)
    return value


def _output_metas(program: ExportedProgram) -> list[Any]:
    """torch's ``meta["val"]`` of each output of the FX graph, in the order of its output specs."""
    output = next(iter(program.graph.find_nodes(op="output")))

    def flat(arg: Any) -> list[Any]:
        if isinstance(arg, (list, tuple)):
            return [m for a in arg for m in flat(a)]
        return [arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg]

    return flat(output.args[0])


def assemble(
    program: ExportedProgram,
    translated: TranslatedGraph,
    opset: int,
    names: IONames,
) -> tuple[ir.Model, OutputLayout]:
    """Build the ONNX model from ``translated`` following ``program``'s graph signature.

    ``names``: the ONNX names of the user inputs that are renamed (by placeholder name) and
    of every user output (:func:`pt2onnx.interface.names.io_names`).
    """
    graph = translated.graph
    renamed_inputs = {}
    for placeholder, name in names.inputs.items():
        value = translated.placeholders.get(placeholder)
        if isinstance(value, ir.Value):
            value.name = name
            renamed_inputs[placeholder] = value
    state = program.state_dict
    constants = program.constants
    to_initializers: list[ir.Value] = []
    for spec in program.graph_signature.input_specs:
        value = translated.placeholders.get(spec.arg.name)
        if spec.kind == InputKind.USER_INPUT or not isinstance(value, ir.Value):
            continue
        target = spec.target
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER) and target in state:
            to_initializers.append(_initializer(value, target, state[target]))
        elif target in constants and isinstance(constants[target], torch.Tensor):
            to_initializers.append(_initializer(value, target, constants[target]))
        else:
            raise ConversionError(
                f"input {spec.arg.name!r} of kind {spec.kind.name} (target {target!r}) cannot be exported",
                hint="torchbind objects and effect tokens have no ONNX form; remove them from the model",
            )
    for value in to_initializers:
        graph.inputs.remove(value)
        graph.register_initializer(value)

    fx_outputs = translated.outputs
    output_names = iter(names.outputs)
    layout = OutputLayout()
    used: set[ir.Value] = set()
    user_outputs: list[ir.Value] = []
    mutation_outputs: list[ir.Value] = []
    targets: list[str] = []
    complex_outputs: set[ir.Value] = set()
    for spec, value, meta in zip(program.graph_signature.output_specs, fx_outputs, _output_metas(program)):
        if spec.kind == OutputKind.USER_OUTPUT:
            name = next(output_names)
            if isinstance(value, ir.Value):
                user_outputs.append(_output_value(graph, value, name, used))
                layout.user.append(name)
                if isinstance(meta, torch.Tensor) and meta.is_complex():
                    complex_outputs.add(user_outputs[-1])
            else:
                layout.user.append(("constant", value))
        elif spec.kind in (OutputKind.BUFFER_MUTATION, OutputKind.PARAMETER_MUTATION, OutputKind.USER_INPUT_MUTATION):
            assert spec.target is not None
            mutation_outputs.append(_output_value(graph, value, updated_name(spec.target), used))
            targets.append(spec.target)
        else:
            raise ConversionError(
                f"output {spec.arg} of kind {spec.kind.name} cannot be exported",
                hint="export the model for inference (eval mode, no gradients)",
            )
    graph.outputs.extend(user_outputs + mutation_outputs)

    for domain, version in translated.domains.items():
        graph.opset_imports[domain] = version
    opset_ids = [onnx.helper.make_opsetid(d, v) for d, v in graph.opset_imports.items()]
    model = ir.Model(
        graph,
        ir_version=onnx.helper.find_min_ir_version_for(opset_ids, ignore_unknown=True),  # custom domains
        producer_name="pt2onnx",
        functions=list(translated.functions.values()),
    )
    common_passes.NameFixPass()(model)
    # The pass renames outputs that clash with input names (``forward(x, y)`` returning {"y": ...}).
    fixed = iter(user_outputs)
    layout.user = [entry if not isinstance(entry, str) else next(fixed).name or entry for entry in layout.user]
    layout.mutations = {value.name or target: target for value, target in zip(mutation_outputs, targets)}
    layout.inputs = {placeholder: value.name or placeholder for placeholder, value in renamed_inputs.items()}
    layout.complex = {value.name or "" for value in complex_outputs}
    return model, layout


def separate_outputs_from_subgraphs(model: ir.Model) -> None:
    """Subgraphs read a copy of each graph output they read from the main graph.

    OpenVINO's ONNX frontend (2026.4) fails an ``If`` whose branch reads an outer value that
    is also a graph output ("'then' and 'else' branches have to have the same number of
    outputs"; docs/runtime_issues.md). Run after the optimizer, which removes Identity copies.
    """
    graph = model.graph
    for value in list(graph.outputs):
        inner = [(node, index) for node, index in value.uses() if node.graph is not graph]
        if not inner:
            continue
        copy = ir.node("Identity", inputs=[value], num_outputs=1)
        copied = copy.outputs[0]
        copied.name = f"{value.name}.read_in_subgraph"
        copied.type, copied.shape = value.type, value.shape
        producer = value.producer()
        if producer is not None and producer.graph is graph:
            graph.insert_after(producer, copy)
        else:
            graph.insert_before(graph[0], copy)
        for node, index in inner:
            node.replace_input_with(index, copied)
