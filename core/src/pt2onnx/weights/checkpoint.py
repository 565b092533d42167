"""Weights apart from the model: a checkpoint whose tensors are read only when the model is written.

A model built on the ``meta`` device has shapes and dtypes but no values; capture,
translation and optimization need no more. Its initializers become
:class:`CheckpointTensor` objects, which know their dtype and shape and where their
values are: a safetensors file, a folder of shards with its
``model.safetensors.index.json``, or a mapping of names to tensors (``weights=`` of
:func:`pt2onnx.export`). Saving reads each one when it is written and drops it, so the
weights never sit in memory together.

The checkpoint is matched to the model by qualified name when the model is exported,
before anything is written: every mismatch (missing, extra, mis-shaped, mis-typed
tensors) is listed in one :class:`~pt2onnx.errors.WeightsError`. Names that torch ties
to one tensor (``lm_head.weight`` and ``model.embed_tokens.weight``) are one initializer,
found in the checkpoint under any of its names.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx_ir as ir
import torch
import torch.utils._pytree as pytree
from onnx_ir.tensor_adapters import TorchTensor, from_torch_dtype
from torch.export import ExportedProgram
from torch.export.graph_signature import InputKind

from ..errors import WeightsError

__all__ = [
    "CheckpointTensor",
    "WeightSource",
    "Weights",
    "attach_weights",
    "checkpoint_values_hidden",
    "holds_meta_tensors",
    "inputs_on_meta",
    "mapping_source",
    "open_weights",
    "reads_checkpoint",
    "transposed",
    "unreadable_weights",
]

#: What ``weights=`` takes: a safetensors file, a folder of them, or names mapped to tensors.
Weights = str | os.PathLike | Mapping[str, torch.Tensor]

INDEX_FILE = "model.safetensors.index.json"

# safetensors' dtype names (``safe_open(...).get_slice(name).get_dtype()``).
_SAFETENSORS_DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F8_E4M3": torch.float8_e4m3fn,
    "F8_E5M2": torch.float8_e5m2,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U64": torch.uint64,
    "U32": torch.uint32,
    "U16": torch.uint16,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


@dataclass(frozen=True)
class WeightSpec:
    """A checkpoint tensor's dtype and shape, known without reading its values."""

    dtype: torch.dtype
    shape: tuple[int, ...]


class WeightSource:
    """Where the weights are: the tensors' specs up front, each tensor's values on demand."""

    def __init__(self, description: str, specs: dict[str, WeightSpec]) -> None:
        self.description = description
        self.specs = specs

    def load(self, name: str) -> torch.Tensor:
        """The tensor ``name``, read now (a fresh read each call: callers drop it when written)."""
        raise NotImplementedError


class _Safetensors(WeightSource):
    """safetensors files, each opened (memory-mapped) per tensor read and closed after.

    A file kept open keeps every page read so far mapped into the process, which would
    grow its resident memory to the checkpoint's size; one tensor's mapping is dropped
    as soon as the tensor is written.
    """

    def __init__(self, description: str, files: dict[str, Path]) -> None:
        from safetensors import safe_open

        self._safe_open = safe_open
        self.files = files
        specs: dict[str, WeightSpec] = {}
        for file in sorted(set(files.values())):
            with safe_open(file, framework="pt") as f:
                held = set(f.keys())
                for name in [n for n, where in files.items() if where == file and n in held]:
                    view = f.get_slice(name)
                    dtype = _SAFETENSORS_DTYPES.get(view.get_dtype())
                    if dtype is None:
                        raise WeightsError(
                            f"{file}: tensor {name!r} has dtype {view.get_dtype()}, which pt2onnx cannot read",
                            hint="convert the checkpoint to a floating or integer dtype torch supports",
                        )
                    specs[name] = WeightSpec(dtype, tuple(view.get_shape()))
        missing = sorted(set(files) - set(specs))
        if missing:
            raise WeightsError(
                f"{description} lists tensors its shards do not hold: {', '.join(missing)}",
                hint=f"the index ({INDEX_FILE}) and the shards disagree; re-save the checkpoint",
            )
        super().__init__(description, specs)

    def load(self, name: str) -> torch.Tensor:
        with self._safe_open(self.files[name], framework="pt") as f:
            return f.get_tensor(name)


class _Mapping(WeightSource):
    def __init__(self, tensors: Mapping[str, torch.Tensor], description: str | None = None) -> None:
        self.tensors = dict(tensors)
        specs = {}
        for name, tensor in self.tensors.items():
            if not isinstance(tensor, torch.Tensor):
                raise WeightsError(
                    f"weights[{name!r}] is a {type(tensor).__name__}, not a tensor",
                    hint="map every name to a torch.Tensor",
                )
            specs[name] = WeightSpec(tensor.dtype, tuple(tensor.shape))
        super().__init__(description or f"the mapping of {len(specs)} tensors", specs)

    def load(self, name: str) -> torch.Tensor:
        return self.tensors[name].detach()


def mapping_source(tensors: Mapping[str, torch.Tensor], description: str) -> WeightSource:
    """A :class:`WeightSource` of tensors in memory (``description`` names them in errors)."""
    return _Mapping(tensors, description)


def open_weights(weights: Weights) -> WeightSource:
    """The :class:`WeightSource` of a ``weights=`` argument (reads the headers, not the tensors).

    Raises:
        WeightsError: the path does not exist, is no safetensors file, or names a folder
            without safetensors files; the index names a shard that is not there.
    """
    if isinstance(weights, Mapping):
        return _Mapping(weights)
    if not isinstance(weights, (str, os.PathLike)):
        raise WeightsError(
            f"weights= takes a safetensors file, a folder of them or a mapping of names to tensors, "
            f"not a {type(weights).__name__}",
            hint="pass the checkpoint's path (model.safetensors, or the folder of its shards) or a state dict",
        )
    path = Path(weights)
    if path.is_file():
        return _Safetensors(str(path), dict.fromkeys(_keys(path), path))
    if not path.is_dir():
        raise WeightsError(f"weights={str(weights)!r}: no such file or folder", hint="pass the checkpoint's path")
    index = path / INDEX_FILE
    if index.is_file():
        weight_map = json.loads(index.read_text())["weight_map"]
        files = {name: path / file for name, file in weight_map.items()}
        absent = sorted({str(f) for f in files.values() if not f.is_file()})
        if absent:
            raise WeightsError(
                f"{index} names shards that are not there: {', '.join(absent)}",
                hint="download or copy every shard of the checkpoint into the folder",
            )
        return _Safetensors(str(path), files)
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise WeightsError(
            f"weights={str(weights)!r}: the folder holds no *.safetensors file",
            hint=f"pass a folder with model.safetensors, or with shards and their {INDEX_FILE}",
        )
    files = {}
    for shard in shards:
        for name in _keys(shard):
            if name in files:
                raise WeightsError(
                    f"tensor {name!r} is in two files of {path}: {files[name].name} and {shard.name}",
                    hint=f"keep one copy, or add the checkpoint's {INDEX_FILE} saying which shard holds what",
                )
            files[name] = shard
    return _Safetensors(str(path), files)


def _keys(file: Path) -> list[str]:
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(file, framework="pt") as f:
            return list(f.keys())
    except (SafetensorError, OSError) as e:
        raise WeightsError(
            f"{file} is not a readable safetensors file: {e}",
            hint="pass a .safetensors checkpoint (torch .bin/.pt files: load them and pass the state dict)",
        ) from e


class CheckpointTensor(ir.LazyTensor):
    """An initializer known by its dtype and shape whose values are read from a source when needed.

    Derived initializers (a transposed weight, a weight cast to the export's dtype) are
    the same source tensor with a permutation or a dtype applied as it is read. Nothing
    is cached: each read is dropped once written. ``source`` is None when the model was
    captured without values: reading then raises a
    :class:`~pt2onnx.errors.WeightsError` saying to pass ``weights=``.
    """

    def __init__(
        self,
        key: str,
        dtype: torch.dtype,
        shape: tuple[int, ...],
        *,
        source: WeightSource | None,
        name: str | None = None,
        permutation: tuple[int, ...] | None = None,
    ) -> None:
        frozen = ir.Shape(shape)
        frozen.freeze()
        super().__init__(self._read, dtype=from_torch_dtype(dtype), shape=frozen, name=name or key)
        self.key = key
        self.source = source
        self.torch_dtype = dtype
        self.permutation = permutation

    def permuted(self, permutation: tuple[int, ...]) -> CheckpointTensor:
        """This tensor with its axes permuted as it is read (the folded ``Transpose(weight)``)."""
        inner = self.permutation or tuple(range(len(self.shape)))
        dims = self.shape.numpy()
        return CheckpointTensor(
            self.key,
            self.torch_dtype,
            tuple(dims[i] for i in permutation),
            source=self.source,
            name=f"{self.name}.transposed",
            permutation=tuple(inner[i] for i in permutation),
        )

    def load(self) -> torch.Tensor:
        """Read the values now: permuted and cast to this tensor's dtype in one copy at most."""
        if self.source is None:
            raise WeightsError(
                f"initializer {self.name!r} has no values: the model was exported from the meta device",
                hint="pass the checkpoint with pt2onnx.export(..., weights='model.safetensors' or its folder, "
                "or a state dict)",
            )
        tensor = self.source.load(self.key)
        if self.permutation is not None:
            tensor = tensor.permute(self.permutation)
        return tensor.to(dtype=self.torch_dtype, memory_format=torch.contiguous_format)

    def _read(self) -> ir.TensorProtocol:
        return TorchTensor(self.load(), name=self.name)

    def __repr__(self) -> str:
        where = self.source.description if self.source is not None else "no source"
        return f"{self._repr_base()}(key={self.key!r}, from {where})"


def holds_meta_tensors(module: torch.nn.Module) -> bool:
    """Whether any parameter or buffer of ``module`` is on the meta device (has no values)."""
    return any(t.is_meta for t in [*module.parameters(), *module.buffers()])


def inputs_on_meta(args: Any, kwargs: Any) -> tuple[Any, Any]:
    """The example inputs moved to the meta device, to call a model whose weights are there.

    torch refuses to mix devices (``linear(cpu_input, meta_weight)``); ONNX has no devices,
    and capture needs only the inputs' shapes and dtypes.
    """

    def move(leaf: Any) -> Any:
        return leaf.to("meta") if isinstance(leaf, torch.Tensor) else leaf

    return pytree.tree_map(move, args), pytree.tree_map(move, kwargs)


def unreadable_weights(model: ir.Model) -> list[str]:
    """Names of the model's initializers captured without values (no ``weights=`` to read them from)."""
    return [
        name
        for graph in model.graphs()
        for name, value in graph.initializers.items()
        if isinstance(value.const_value, CheckpointTensor) and value.const_value.source is None
    ]


@dataclass
class _Entry:
    """One tensor of the captured program's state: its names (tied ones too) and what it is."""

    names: list[str]
    tensor: torch.Tensor
    kind: InputKind
    persistent: bool


def _state_entries(program: ExportedProgram) -> list[_Entry]:
    """The program's parameters, buffers and tensor constants, tied names grouped on one tensor."""
    tensors = {**program.constants, **program.state_dict}
    by_tensor: dict[int, _Entry] = {}
    for spec in program.graph_signature.input_specs:
        target = spec.target
        if spec.kind == InputKind.USER_INPUT or target is None:
            continue
        tensor = tensors.get(target)
        if not isinstance(tensor, torch.Tensor):
            continue
        persistent = spec.kind == InputKind.PARAMETER or (spec.kind == InputKind.BUFFER and spec.persistent is True)
        entry = by_tensor.get(id(tensor))
        if entry is None:
            by_tensor[id(tensor)] = _Entry([target], tensor, spec.kind, persistent)
        elif target not in entry.names:
            entry.names.append(target)
            entry.persistent = entry.persistent or persistent
    # Tied names torch lifted once: the state dict names every one of them.
    for name, tensor in program.state_dict.items():
        entry = by_tensor.get(id(tensor))
        if entry is not None and name not in entry.names:
            entry.names.append(name)
    return list(by_tensor.values())


def _describe(spec: WeightSpec) -> str:
    return f"{list(spec.shape)} {str(spec.dtype).removeprefix('torch.')}"


def attach_weights(
    model: ir.Model,
    program: ExportedProgram,
    weights: WeightSource | None,
    *,
    original_dtypes: Mapping[str, torch.dtype] | None = None,
    model_values: WeightSource | None = None,
) -> None:
    """Give the model's initializers their values' source; one initializer per tied tensor.

    Without ``weights``, the tensors on the meta device become unreadable
    :class:`CheckpointTensor` objects (saving them is an error naming ``weights=``) and
    the others keep their values. With ``weights``, every parameter and persistent buffer
    is read from it (under any of its tied names); a non-persistent buffer or tensor
    constant is read from it when it holds it, else keeps the model's value, if it has one.

    Args:
        original_dtypes: the dtype each tensor had before the export converted the model
            (``dtype=``): the checkpoint must hold that dtype, or any floating one, which is
            cast as it is read. Without it, the checkpoint's dtype must be the model's.
        model_values: where the model's own values are when the program captured holds
            none (the meta-device copy ``dtype=`` captures): non-persistent buffers and
            constants missing from ``weights`` are read from there.

    Raises:
        WeightsError: listing every tensor missing from ``weights``, every tensor
            ``weights`` holds that the model has not, and every one of the wrong shape or
            dtype; nothing is changed then.
    """
    original_dtypes = original_dtypes or {}
    entries = _state_entries(program)
    found: dict[int, tuple[WeightSource, str]] = {}
    missing, shapes, dtypes = [], [], []
    for entry in entries:
        tensor = entry.tensor
        if weights is None:
            continue
        where = next(((weights, n) for n in entry.names if n in weights.specs), None)
        if where is None and not entry.persistent and model_values is not None:
            where = next(((model_values, n) for n in entry.names if n in model_values.specs), None)
        if where is None:
            if entry.persistent or tensor.is_meta:
                note = "" if entry.persistent else " (a non-persistent buffer or constant: checkpoints never hold it)"
                missing.append(
                    f"{' = '.join(entry.names)} {_describe(WeightSpec(tensor.dtype, tuple(tensor.shape)))}{note}"
                )
            continue
        source, key = where
        spec = source.specs[key]
        if spec.shape != tuple(tensor.shape):
            shapes.append(f"{key}: {list(spec.shape)} in the checkpoint, {list(tensor.shape)} in the model")
            continue
        expected = original_dtypes.get(entry.names[0], tensor.dtype)
        converted = expected != tensor.dtype and spec.dtype.is_floating_point and expected.is_floating_point
        if spec.dtype != expected and not converted:
            dtypes.append(f"{key}: {spec.dtype} in the checkpoint, {expected} in the model")
            continue
        found[id(tensor)] = where
    if weights is not None:
        known = {name for entry in entries for name in entry.names}
        extra = [f"{name} {_describe(spec)}" for name, spec in weights.specs.items() if name not in known]
        _raise_mismatches(weights, missing=missing, extra=extra, shapes=shapes, dtypes=dtypes)

    graph = model.graph
    for entry in entries:
        values = [graph.initializers[n] for n in entry.names if n in graph.initializers]
        where = found.get(id(entry.tensor))
        if not values or (where is None and not entry.tensor.is_meta):
            continue
        reader = where[0] if where is not None else None
        key = where[1] if where is not None else values[0].name or entry.names[0]
        values[0].const_value = CheckpointTensor(
            key, entry.tensor.dtype, tuple(entry.tensor.shape), source=reader, name=values[0].name
        )
        # Tied names are one initializer: the values are read once.
        for twin in values[1:]:
            twin.replace_all_uses_with(values[0])
            graph.initializers.pop(twin.name)  # type: ignore[arg-type]


def _raise_mismatches(weights: WeightSource, **problems: list[str]) -> None:
    titles = {
        "missing": "missing",
        "extra": "not in the model",
        "shapes": "of another shape",
        "dtypes": "of another dtype",
    }
    count = sum(len(listed) for listed in problems.values())
    if not count:
        return
    lines = [f"the weights in {weights.description} do not match the model ({count} problems):"]
    for kind, listed in problems.items():
        if listed:
            lines.append(f"  {titles[kind]} ({len(listed)}):")
            lines.extend(f"    {item}" for item in listed)
    raise WeightsError(
        "\n".join(lines),
        hint="pass the checkpoint saved from this model's architecture and configuration. Buffers "
        "computed when the model is built (rotary inv_freq) are in no checkpoint: build the modules "
        "holding them off the meta device (model.model.rotary_emb = LlamaRotaryEmbedding(config)), or "
        "build only the parameters on meta (accelerate.init_empty_weights() leaves buffers on the CPU)",
    )


def transposed(tensor: ir.TensorProtocol, perm: tuple[int, ...]) -> ir.TensorProtocol:
    """``tensor`` transposed by ``perm``, lazily: computed when the model is serialized (a
    :class:`CheckpointTensor` is transposed as it is read), so no copy is held before."""
    if isinstance(tensor, CheckpointTensor):
        return tensor.permuted(perm)
    dims = tensor.shape.numpy()
    shape = ir.Shape([dims[i] for i in perm])
    return ir.LazyTensor(functools.partial(_transpose, tensor, perm), dtype=tensor.dtype, shape=shape)


def _transpose(tensor: ir.TensorProtocol, perm: tuple[int, ...]) -> ir.TensorProtocol:
    if isinstance(tensor, TorchTensor):  # torch's blocked copy is several times faster than numpy's
        return TorchTensor(tensor.raw.permute(perm).contiguous())
    return ir.Tensor(np.ascontiguousarray(tensor.numpy().transpose(perm)), dtype=tensor.dtype)


def _checkpoint_values(model: ir.Model) -> list[tuple[ir.Value, CheckpointTensor]]:
    return [
        (value, value.const_value)
        for graph in model.graphs()
        for value in graph.initializers.values()
        if isinstance(value.const_value, CheckpointTensor)
    ]


def reads_checkpoint(model: ir.Model) -> bool:
    """Whether some initializer of ``model`` is read from a checkpoint (or has no values at all)."""
    return bool(_checkpoint_values(model))


@contextlib.contextmanager
def checkpoint_values_hidden(model: ir.Model) -> Iterator[None]:
    """Initializers read from a checkpoint look valueless while the block runs, as graph inputs do.

    Reading one costs a read from disk (or is impossible, without ``weights=``), and a
    graph pass that folds constants or compares weights would read them all; to it they
    are values known by type and shape only.
    """
    hidden = _checkpoint_values(model)
    for value, _ in hidden:
        value.const_value = None
    try:
        yield
    finally:
        for value, tensor in hidden:
            value.const_value = tensor
