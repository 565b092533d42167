"""Save: protobuf, or protobuf plus external data (automatic above 2 GB), written atomically.

Everything is written into a temporary directory beside the target and moved into
place only when complete, so a failed save leaves no partial file.

A single-file model is streamed: the graph is serialized without its initializers and
each weight's bytes are written straight from the tensor that holds them, so saving
costs no copy of the weights (a protobuf message would hold two: its fields and its
serialized bytes).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np
import onnx
import onnx_ir as ir

from .errors import SaveError

__all__ = ["PROTOBUF_LIMIT", "save_model"]

#: Protobuf cannot serialize messages of 2 GB or more.
PROTOBUF_LIMIT = 2**31 - 1

# Protobuf tags (field number << 3 | wire type 2, length-delimited) of the fields streamed.
_MODEL_GRAPH = (7 << 3) | 2
_GRAPH_INITIALIZER = (5 << 3) | 2
_TENSOR_RAW_DATA = (9 << 3) | 2


def _weights_nbytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    external_data: bool | str | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write ``model`` to ``path``; returns the files written.

    Args:
        external_data: ``None``: only when the weights would exceed protobuf's 2 GB
            limit; ``True``: always, to ``<name>.data``; a string: always, to that file
            name (relative to ``path``'s directory); ``False``: never.
        on_bytes: called with the number of weight bytes each step wrote (progress).
    """
    target = Path(path)
    if not target.parent.is_dir():
        raise SaveError(f"cannot save to {target}: directory {target.parent} does not exist")
    if external_data is None:
        external_data = _weights_nbytes(model) >= PROTOBUF_LIMIT
    if external_data is False and _weights_nbytes(model) >= PROTOBUF_LIMIT:
        raise SaveError(
            f"the weights are {_weights_nbytes(model) / 2**30:.1f} GiB, over protobuf's 2 GB limit",
            hint="save with external_data=True",
        )
    data_name = None
    if external_data:
        data_name = external_data if isinstance(external_data, str) else f"{target.name}.data"
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        if data_name is None and _streamable(model):
            with open(staging / target.name, "wb") as f:
                _write_streamed(model, f, on_bytes)
        else:
            ir.save(model, staging / target.name, external_data=data_name)
            if on_bytes is not None:
                on_bytes(_weights_nbytes(model))
        written = []
        # The data file goes into place first: the model never points at missing data.
        for name in [data_name, target.name]:
            if name is not None and (staging / name).exists():
                os.replace(staging / name, target.parent / name)
                written.append(target.parent / name)
        return written
    except Exception as e:
        raise SaveError(f"saving to {target} failed: {type(e).__name__}: {e}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _streamable(model: ir.Model) -> bool:
    """Raw little-endian bytes can represent every initializer (strings cannot)."""
    return sys.byteorder == "little" and all(
        v.const_value is not None and v.const_value.dtype != ir.DataType.STRING
        for v in model.graph.initializers.values()
    )


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(tag: int, length: int) -> bytes:
    """The key and length prefix of a length-delimited field."""
    return _varint(tag) + _varint(length)


@contextmanager
def _initializers_detached(graph: ir.Graph) -> Iterator[list[ir.Value]]:
    """The graph's initializers, taken out of it for the duration (order kept)."""
    values = list(graph.initializers.values())
    graph.initializers.clear()
    try:
        yield values
    finally:
        for value in values:
            graph.register_initializer(value)


def _write_streamed(model: ir.Model, f: BinaryIO, on_bytes: Callable[[int], None] | None = None) -> None:
    """Write ``model`` as one protobuf file, its weights streamed from their tensors.

    Protobuf fields may come in any order and a repeated field may be split, so the
    file is: the model without its graph, then the graph field, whose payload is the
    graph without initializers followed by one initializer field per weight, each a
    tensor header followed by its ``raw_data``. Only the lengths must be known first.
    """
    with _initializers_detached(model.graph) as initializers:
        proto = ir.serde.serialize_model(model)
    graph_bytes = proto.graph.SerializeToString()
    proto.ClearField("graph")
    headers = []
    for value in initializers:
        tensor = value.const_value
        assert tensor is not None
        header = onnx.TensorProto(name=value.name, data_type=tensor.dtype.value, dims=tensor.shape.numpy())
        if tensor.doc_string:
            header.doc_string = tensor.doc_string
        for key, text in tensor.metadata_props.items():
            header.metadata_props.add(key=key, value=text)
        headers.append(header.SerializeToString() + _field(_TENSOR_RAW_DATA, tensor.nbytes))
    tensor_lengths = [len(h) + v.const_value.nbytes for h, v in zip(headers, initializers)]  # type: ignore[union-attr]
    graph_length = len(graph_bytes) + sum(len(_field(_GRAPH_INITIALIZER, n)) + n for n in tensor_lengths)
    f.write(proto.SerializeToString())
    f.write(_field(_MODEL_GRAPH, graph_length))
    f.write(graph_bytes)
    for value, header, length in zip(initializers, headers, tensor_lengths):
        assert value.const_value is not None
        f.write(_field(_GRAPH_INITIALIZER, length))
        f.write(header)
        payload = _raw_bytes(value.const_value)
        if len(payload) != value.const_value.nbytes:
            raise SaveError(
                f"initializer {value.name!r}: {len(payload)} bytes, its type says {value.const_value.nbytes}"
            )
        f.write(payload)
        if on_bytes is not None:
            on_bytes(len(payload))


def _raw_bytes(tensor: ir.TensorProtocol) -> memoryview:
    """The tensor's ONNX ``raw_data``: a view of its array, no copy, unless sub-byte types need packing."""
    if tensor.dtype.bitwidth % 8:
        return memoryview(tensor.tobytes())
    array = np.ascontiguousarray(tensor.numpy()).reshape(-1)
    return array.view(np.uint8).data
