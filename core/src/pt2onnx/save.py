"""Save: protobuf, or protobuf plus external data (automatic above 2 GB), written atomically.

Whatever step fails, the path holds either the whole old model (graph and weights) or
the whole new one:

1. every new file gets a name no existing model reads: the model goes to a hidden
   staging file ``.<name>.<token>.tmp`` beside the target, its external data to
   ``<data stem>.<token><suffix>`` (``model.onnx.<token>.data`` by default), ``token``
   being random and fresh for each save;
2. everything written is flushed to disk (fsync), and the directory too;
3. the staging file is renamed over the target (``os.replace``, atomic on POSIX and
   Windows): the commit point. Before it the old model is untouched;
4. the data files the old model read are removed.

A failure before the commit removes every new file (the token names them all, so
several data files are found as surely as one) and raises :class:`SaveError`; a
failure after it leaves the new model whole and names in a warning the old data file
it could not remove. Only a killed process can leave a ``.tmp`` file or an unread
data file behind; both are safe to delete.

A single-file model is streamed: the graph is serialized without its initializers and
each weight's bytes are written straight from the tensor that holds them, so saving
costs no copy of the weights (a protobuf message would hold two: its fields and its
serialized bytes).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import warnings
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

# An old model file larger than this holds its weights inline: it is not parsed for data files.
_OLD_MODEL_PARSE_LIMIT = 256 * 2**20


def _weights_nbytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    external_data: bool | str | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> list[Path]:
    """Write ``model`` to ``path`` atomically; returns the files written (data files first).

    Args:
        external_data: ``None``: only when the weights would exceed protobuf's 2 GB
            limit; ``True``: always, to ``<name>.<token>.data``; a file name such as
            ``"weights.bin"``: always, to ``weights.<token>.bin`` beside the model;
            ``False``: never. ``token`` is fresh for every save, so the new weights never
            overwrite those the old model reads.
        on_bytes: called with the number of weight bytes each step wrote (progress).

    Raises:
        SaveError: the path is a directory or its directory does not exist, the data file
            name leaves the directory, or the file system refused a step (with the path
            and the reason); the old model at ``path``, if any, is then left as it was.
    """
    target = Path(path)
    directory = target.parent
    if not directory.is_dir():
        raise SaveError(
            f"cannot save to {target}: directory {directory} does not exist",
            hint=f"create {directory} first, or save into a directory that exists",
        )
    if target.is_dir():
        raise SaveError(f"cannot save to {target}: it is a directory", hint="give a file path such as model.onnx")
    weights = _weights_nbytes(model)
    if external_data is None:
        external_data = weights >= PROTOBUF_LIMIT
    if external_data is False and weights >= PROTOBUF_LIMIT:
        raise SaveError(
            f"the weights are {weights / 2**30:.1f} GiB, over protobuf's 2 GB limit",
            hint="save with external_data=True",
        )
    token = secrets.token_hex(8)
    data_name = None if external_data is False else _data_name(target, external_data, token)
    old_data = _data_files_of(target)
    staged = directory / f".{target.name}.{token}.tmp"
    try:
        data_files = _write(model, staged, data_name, token, on_bytes)
        for file in [*data_files, staged]:
            _fsync_file(file)
        _fsync_directory(directory)
        os.replace(staged, target)
    except BaseException as e:
        left = _remove_new_files(directory, token, staged, data_name)
        if not isinstance(e, Exception):
            raise
        also = f" (could not remove {', '.join(left)})" if left else ""
        raise SaveError(
            f"saving to {target} failed: {type(e).__name__}: {e}{also}; the old model, if any, is unchanged",
            hint=_hint(e, directory),
        ) from e
    _fsync_directory(directory)
    for file in old_data - set(data_files):
        try:
            os.unlink(file)
        except FileNotFoundError:
            pass
        except OSError as e:
            warnings.warn(
                f"saved {target}, but could not remove {file}, which only the old model read: {e}",
                UserWarning,
                stacklevel=3,
            )
    return [*data_files, target]


def _data_name(target: Path, external_data: bool | str, token: str) -> str:
    """The external data file's name: the asked name (default ``<name>.data``) with the save's token."""
    asked = external_data if isinstance(external_data, str) else f"{target.name}.data"
    if not asked or asked in (".", "..") or os.path.basename(asked) != asked or "/" in asked or "\\" in asked:
        raise SaveError(
            f"external_data={asked!r} is not a file name in the model's directory",
            hint="give a plain file name such as 'weights.bin'; it is written beside the model",
        )
    stem, dot, suffix = asked.rpartition(".")
    return f"{stem}.{token}.{suffix}" if dot and stem else f"{asked}.{token}"


def _write(
    model: ir.Model, staged: Path, data_name: str | None, token: str, on_bytes: Callable[[int], None] | None
) -> list[Path]:
    """Write the model to ``staged`` (and its data beside it); returns the data files written."""
    if data_name is None and _streamable(model):
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        with os.fdopen(fd, "wb") as f:
            _write_streamed(model, f, on_bytes)
        return []
    ir.save(model, staged, format="protobuf", external_data=data_name)
    if on_bytes is not None:
        on_bytes(_weights_nbytes(model))
    if data_name is None:
        return []
    # Sharded data would be several files; the token names every one of them.
    return sorted(p for p in staged.parent.iterdir() if token in p.name and p != staged and p.is_file())


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: Path) -> None:
    # Makes the new names durable; some platforms and file systems cannot, which costs durability only.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _data_files_of(target: Path) -> set[Path]:
    """The external data files (inside its directory) that the model at ``target`` reads."""
    try:
        if not target.is_file() or target.stat().st_size > _OLD_MODEL_PARSE_LIMIT:
            return set()
        old = ir.load(target)
    except OSError as e:
        warnings.warn(
            f"could not read the model at {target} to find its data files ({e}); they are left in place",
            UserWarning,
            stacklevel=3,
        )
        return set()
    except Exception:  # noqa: BLE001 - not an ONNX model: it has no data files to remove
        return set()
    directory = target.parent.resolve()
    files = set()
    for graph in old.graphs():
        for value in graph.initializers.values():
            tensor = value.const_value
            if isinstance(tensor, ir.ExternalTensor):
                file = (directory / tensor.location).resolve()
                if file.parent == directory:
                    files.add(target.parent / file.name)
    return files


def _remove_new_files(directory: Path, token: str, staged: Path, data_name: str | None) -> list[str]:
    """Remove every file of the failed save; returns those that could not be removed."""
    left = []
    for known in [staged, directory / data_name] if data_name else [staged]:
        try:
            known.unlink(missing_ok=True)
        except OSError as e:
            left.append(f"{known}: {e}")
    try:
        # What else carries the token: more data files, a writer's own temporary directory.
        others = [p for p in directory.iterdir() if token in p.name]
    except OSError as e:
        return [*left, f"{directory}: {e}"]
    for p in others:
        try:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink(missing_ok=True)
        except OSError as e:
            left.append(f"{p}: {e}")
    return left


def _hint(error: BaseException, directory: Path) -> str | None:
    if isinstance(error, PermissionError):
        return f"make {directory} writable, or save somewhere you can write"
    if isinstance(error, OSError) and error.errno == 28:  # ENOSPC
        return f"free space on the disk holding {directory}, or save elsewhere"
    return None


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
