"""Export in another floating dtype (``dtype=`` of :func:`pt2onnx.export`): fp32 -> fp16 or bf16.

The graph must compute in the new dtype, as the model converted with ``model.to(dtype)``
does in eager, so that is what is captured: a copy of the model on the meta device (free
whatever its size, and the user's model is left as it was) converted with ``.to(dtype)``,
called with its floating inputs converted. Its weights come from the checkpoint given
with ``weights=``, or from the model itself, and are converted one at a time as they
are written, so neither the model nor a converted copy of it is ever in memory twice.

The graph's floating inputs keep the dtype of the example inputs and its outputs the
dtype of the model's weights, by ``Cast`` nodes at the graph's edges
(``keep_io_dtype=True``, the default, so callers feed and read what they did before), or
are in the new dtype (``keep_io_dtype=False``).
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Mapping
from typing import Any

import onnx_ir as ir
import torch
import torch.utils._pytree as pytree
from onnx_ir.tensor_adapters import from_torch_dtype
from torch.export import ExportedProgram

from ..errors import CaptureError, OptionError
from ..interface.calling import user_inputs

__all__ = [
    "FLOATING_DTYPES",
    "cast_inputs",
    "check_dtype",
    "converted_model",
    "eager_in",
    "keep_io_dtypes",
    "like_eager",
    "weights_dtype",
]

#: The dtypes ``dtype=`` converts floating weights to.
FLOATING_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def check_dtype(dtype: Any) -> torch.dtype:
    """``dtype`` if it is a floating dtype the export can convert to, else an :class:`OptionError`."""
    if dtype not in FLOATING_DTYPES:
        raise OptionError(
            f"dtype={dtype!r} is not one of {', '.join(str(d) for d in FLOATING_DTYPES)}",
            hint="pass dtype=torch.float16 or torch.bfloat16 to convert the floating weights and the computation",
        )
    return dtype


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {
        **dict(module.named_parameters(remove_duplicate=False)),
        **dict(module.named_buffers(remove_duplicate=False)),
    }


def converted_model(
    module: torch.nn.Module, dtype: torch.dtype
) -> tuple[torch.nn.Module, dict[str, torch.dtype], dict[str, torch.Tensor]]:
    """A meta-device copy of ``module`` converted to ``dtype``, to capture.

    Returns the copy, the dtype every parameter and buffer had (by qualified name), and
    the module's own tensors that hold values (to read the weights from when the
    export is given no checkpoint).
    """
    state = _state(module)
    memo: dict[int, Any] = {}
    for tensor in state.values():
        empty = torch.empty_like(tensor, device="meta")
        memo[id(tensor)] = (
            torch.nn.Parameter(empty, requires_grad=tensor.requires_grad)
            if isinstance(tensor, torch.nn.Parameter)
            else empty
        )
    try:
        twin = copy.deepcopy(module, memo)
    except Exception as e:
        raise CaptureError(
            f"converting the model to {dtype} needs a copy of it on the meta device, and copying failed: "
            f"{type(e).__name__}: {e}",
            hint=f"convert the model yourself (on the meta device: model.to({dtype}) costs nothing) "
            "and export it without dtype=",
        ) from e
    twin.to(dtype)
    originals = {name: tensor.dtype for name, tensor in state.items()}
    own = {name: tensor for name, tensor in state.items() if not tensor.is_meta}
    return twin, originals, own


def eager_in(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """The eager model to compare an export in ``dtype`` with: ``module`` itself if its floating
    weights are in ``dtype``, else a converted copy (``verify`` needs the values, unlike capture)."""
    floating = [t for t in [*module.parameters(), *module.buffers()] if t.is_floating_point()]
    if all(t.dtype == dtype for t in floating):
        return module
    return copy.deepcopy(module).to(dtype)


def like_eager(got: Any, expected: Any) -> Any:
    """The ONNX outputs, each floating one in its eager counterpart's dtype (``keep_io_dtype`` casts them back)."""
    got_leaves, spec = pytree.tree_flatten(got)
    expected_leaves = pytree.tree_leaves(expected)
    if len(got_leaves) != len(expected_leaves):
        return got
    leaves = [
        g.to(e.dtype)
        if isinstance(g, torch.Tensor)
        and isinstance(e, torch.Tensor)
        and g.is_floating_point()
        and e.is_floating_point()
        else g
        for g, e in zip(got_leaves, expected_leaves)
    ]
    return pytree.tree_unflatten(leaves, spec)


def weights_dtype(original_dtypes: Mapping[str, torch.dtype]) -> torch.dtype | None:
    """The model's floating dtype before the conversion: that of most of its floating tensors."""
    counts = Counter(d for d in original_dtypes.values() if d.is_floating_point)
    return counts.most_common(1)[0][0] if counts else None


def cast_inputs(args: tuple[Any, ...], kwargs: dict[str, Any], dtype: torch.dtype) -> tuple[Any, Any]:
    """The example inputs with their floating tensors converted to ``dtype``."""

    def cast(leaf: Any) -> Any:
        return leaf.to(dtype) if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() else leaf

    return pytree.tree_map(cast, args), pytree.tree_map(cast, kwargs)


def keep_io_dtypes(
    model: ir.Model,
    program: ExportedProgram,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    compute: torch.dtype,
    outputs: torch.dtype | None,
) -> None:
    """Give the graph's floating inputs the example inputs' dtype and its ``compute``-typed outputs ``outputs``.

    A ``Cast`` after each such input converts it to ``compute``; one before each such
    output converts it back.
    """
    graph = model.graph
    dtype_of = {
        name: leaf.dtype
        for name, leaf in user_inputs(program, args, kwargs).items()
        if isinstance(leaf, torch.Tensor) and leaf.is_floating_point() and leaf.dtype != compute
    }
    compute_ir = from_torch_dtype(compute)
    first = next(iter(graph), None)
    for value in graph.inputs:
        if value.name not in dtype_of or value.dtype != compute_ir:
            continue
        uses = list(value.uses())  # before the Cast becomes one
        cast = ir.node("Cast", inputs=[value], attributes={"to": compute_ir}, num_outputs=1)
        converted = cast.outputs[0]
        converted.name, converted.dtype, converted.shape = (
            f"{value.name}.{compute_ir.name.lower()}",
            compute_ir,
            value.shape,
        )
        for user, index in uses:
            user.replace_input_with(index, converted)
        if first is not None:
            graph.insert_before(first, cast)
        else:
            graph.append(cast)
        value.dtype = from_torch_dtype(dtype_of[value.name])
    if outputs is None or outputs == compute:
        return
    outputs_ir = from_torch_dtype(outputs)
    for i, value in enumerate(list(graph.outputs)):
        if value.dtype != compute_ir:
            continue
        name = value.name
        value.name = f"{name}.{compute_ir.name.lower()}"
        cast = ir.node("Cast", inputs=[value], attributes={"to": outputs_ir}, num_outputs=1)
        out = cast.outputs[0]
        out.name, out.dtype, out.shape = name, outputs_ir, value.shape
        graph.append(cast)
        graph.outputs[i] = out
