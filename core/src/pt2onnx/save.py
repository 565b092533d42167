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
serialized bytes). External data is written one tensor at a time too, into one file or,
with ``max_shard_bytes``, into shards of at most that size
(``<stem>.<token>-00001-of-00003<suffix>``), all committed by the one rename. Weights
read from a checkpoint (:mod:`pt2onnx.weights`) are read as they are written; in a
single file, the next weight is prepared while one is written (at most two held).

On a terminal a progress bar shows each tensor as it is written (``quiet=True``: none).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import sys
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import onnx
import onnx_ir as ir

from .errors import OptionError, SaveError, WeightsError
from .weights import unreadable_weights

__all__ = ["PROTOBUF_LIMIT", "prepare_location", "save_model"]

#: Protobuf cannot serialize messages of 2 GB or more.
PROTOBUF_LIMIT = 2**31 - 1

# Protobuf tags (field number << 3 | wire type 2, length-delimited) of the fields streamed.
_MODEL_GRAPH = (7 << 3) | 2
_GRAPH_INITIALIZER = (5 << 3) | 2
_TENSOR_RAW_DATA = (9 << 3) | 2

# An old model file larger than this holds its weights inline: it is not parsed for data files.
_OLD_MODEL_PARSE_LIMIT = 256 * 2**20

# Initializers smaller than this stay in the model file when the weights go to external data (as onnx_ir does).
_INLINE_LIMIT = 256

#: Called with each initializer once its values are written.
Advance = Callable[[ir.Value], None]


def _weights_nbytes(model: ir.Model) -> int:
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)


def save_model(
    model: ir.Model,
    path: str | os.PathLike[str],
    external_data: bool | str | None = None,
    *,
    max_shard_bytes: int | None = None,
    quiet: bool = False,
) -> list[Path]:
    """Write ``model`` to ``path`` atomically; returns the files written (data files first).

    Args:
        external_data: ``None``: only when the weights would exceed protobuf's 2 GB
            limit (or ``max_shard_bytes`` is given); ``True``: always, to
            ``<name>.<token>.data``; a file name such as ``"weights.bin"``: always, to
            ``weights.<token>.bin`` beside the model; ``False``: never. ``token`` is fresh
            for every save, so the new weights never overwrite those the old model reads.
        max_shard_bytes: split the external data into files of at most this many bytes
            (``<name>.<token>-00001-of-00003.data``, ...; a tensor larger than that gets a
            file of its own). onnxruntime loads the model as it is.
        quiet: no progress bar, even on a terminal.

    Raises:
        WeightsError: the model was exported from the meta device without ``weights=``:
            it has no values to write (nothing is written).
        OptionError: ``max_shard_bytes`` is not a positive int, or comes with ``external_data=False``.
        SaveError: the path is a directory or its directory does not exist, the data file
            name leaves the directory, or the file system refused a step (with the path
            and the reason); the old model at ``path``, if any, is then left as it was.
    """
    target = Path(path)
    valueless = unreadable_weights(model)
    if valueless:
        listed = ", ".join(valueless[:5]) + (f" and {len(valueless) - 5} more" if len(valueless) > 5 else "")
        raise WeightsError(
            f"cannot save to {target}: the weights {listed} have no values (the model is on the meta device)",
            hint="export with the checkpoint: pt2onnx.export(..., weights='model.safetensors', a folder of "
            "shards with model.safetensors.index.json, or a state dict)",
        )
    if max_shard_bytes is not None:
        if isinstance(max_shard_bytes, bool) or not isinstance(max_shard_bytes, int) or max_shard_bytes <= 0:
            raise OptionError(
                f"max_shard_bytes={max_shard_bytes!r} is not a positive number of bytes",
                hint="pass e.g. max_shard_bytes=2 * 2**30 for files of at most 2 GiB",
            )
        if external_data is False:
            raise OptionError(
                "max_shard_bytes splits the external data, and external_data=False asks for none",
                hint="leave external_data out (or True, or a file name) to shard the weights",
            )
        external_data = True if external_data is None else external_data
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
        with _progress(model, target, quiet) as advance:
            data_files = _write(model, staged, data_name, token, max_shard_bytes, advance)
        for file in [*data_files, staged]:
            _fsync_file(file)
        if data_files:
            # The data files' names must be durable before the model that reads them is; a
            # model in one file needs only the rename made durable (below).
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
    for file in sorted(old_data - set(data_files)):
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


def prepare_location(path: str | os.PathLike[str]) -> Path:
    """Make ``path``'s missing parent folders and check that a model can be written there.

    For ``export(..., f=path)``, before the export starts: a location that cannot take the
    model fails now instead of after the whole export. A staging file is created and removed
    beside the target, as :func:`save_model` will create one; folders made here stay if the
    export fails later.

    Raises:
        SaveError: the path is a directory; a file stands where a folder is needed; or
            the file system refused to make a folder or a file there (no permission, a
            read-only file system), with the path and the reason.
    """
    target = Path(path)
    if target.is_dir():
        raise SaveError(f"cannot save to {target}: it is a directory", hint="give a file path such as model.onnx")
    directory = target.parent
    blocking = next((p for p in [directory, *directory.parents] if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise SaveError(
            f"cannot save to {target}: {blocking} is a file, not a folder",
            hint=f"save elsewhere, or move {blocking} out of the way",
        )
    probe = directory / f".{target.name}.{secrets.token_hex(8)}.tmp"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
        os.unlink(probe)
    except OSError as e:
        raise SaveError(
            f"cannot save to {target}: {type(e).__name__}: {e}", hint=_hint(e, directory) or "save somewhere else"
        ) from e
    return target


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


def _shard_name(data_name: str, token: str, index: int, count: int) -> str:
    """``model.onnx.<token>.data`` -> ``model.onnx.<token>-00002-of-00003.data`` (one shard: unchanged)."""
    if count == 1:
        return data_name
    return data_name.replace(f".{token}", f".{token}-{index:05d}-of-{count:05d}", 1)


def _write(
    model: ir.Model, staged: Path, data_name: str | None, token: str, max_shard_bytes: int | None, advance: Advance
) -> list[Path]:
    """Write the model to ``staged`` (and its data beside it); returns the data files written."""
    if data_name is None and _streamable(model):
        fd = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        with os.fdopen(fd, "wb") as f:
            _write_streamed(model, f, advance)
        return []
    if data_name is None:
        ir.save(model, staged, format="protobuf")
        return []
    return _write_external(model, staged, data_name, token, max_shard_bytes, advance)


def _shards(values: list[ir.Value], max_shard_bytes: int | None) -> list[list[ir.Value]]:
    """The initializers in order, cut into runs of at most ``max_shard_bytes`` (a larger tensor alone)."""
    shards: list[list[ir.Value]] = [[]]
    size = 0
    for value in values:
        nbytes = value.const_value.nbytes  # type: ignore[union-attr]
        if max_shard_bytes is not None and shards[-1] and size + nbytes > max_shard_bytes:
            shards.append([])
            size = 0
        shards[-1].append(value)
        size += nbytes
    return shards


def _write_external(
    model: ir.Model, staged: Path, data_name: str, token: str, max_shard_bytes: int | None, advance: Advance
) -> list[Path]:
    """Write the weights one tensor at a time into one data file or several, then the model referencing them."""
    directory = staged.parent
    values = [
        v
        for graph in model.graphs()
        for v in graph.initializers.values()
        if v.const_value is not None
        and not isinstance(v.const_value, ir.ExternalTensor)
        and v.const_value.dtype != ir.DataType.STRING
        and v.const_value.nbytes >= _INLINE_LIMIT
    ]
    shards = _shards(values, max_shard_bytes)
    originals = [(v, v.const_value) for v in values]
    files = []
    try:
        for index, shard in enumerate(shards, start=1):
            name = _shard_name(data_name, token, index, len(shards))
            files.append(directory / name)
            tensors = [v.const_value for v in shard]

            def written_before(
                tensor: object, info: ir.external_data.CallbackInfo, shard: list[ir.Value] = shard
            ) -> None:
                if info.index:  # called as each tensor starts: the one before it is written
                    advance(shard[info.index - 1])

            external = ir.external_data.convert_tensors_to_external(
                tensors,  # type: ignore[arg-type]
                base_dir=directory,
                relative_path=name,
                callback=written_before,
            )
            if shard:
                advance(shard[-1])
            for value, written in zip(shard, external):
                value.const_value = written
        ir.save(model, staged, format="protobuf")
        inline = set(values)
        for graph in model.graphs():
            for value in graph.initializers.values():
                if value not in inline and value.const_value is not None:
                    advance(value)
    finally:
        for value, tensor in originals:
            value.const_value = tensor
    return [f for f in files if f.exists()]


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


def _write_streamed(model: ir.Model, f: BinaryIO, advance: Advance | None = None) -> None:
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
    # Each weight's bytes are prepared (transposed, read from a checkpoint) on a worker
    # thread while the one before is written: both release the GIL. At most two weights'
    # bytes are held at a time.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="pt2onnx-save") as pool:
        tensors = [_weight_of(v) for v in initializers]
        upcoming = pool.submit(_raw_bytes, tensors[0]) if tensors else None
        for index, (value, header, length) in enumerate(zip(initializers, headers, tensor_lengths)):
            assert upcoming is not None
            payload = upcoming.result()
            upcoming = pool.submit(_raw_bytes, tensors[index + 1]) if index + 1 < len(tensors) else None
            if len(payload) != tensors[index].nbytes:
                raise SaveError(
                    f"initializer {value.name!r}: {len(payload)} bytes, its type says {tensors[index].nbytes}"
                )
            f.write(_field(_GRAPH_INITIALIZER, length))
            f.write(header)
            f.write(payload)
            del payload
            if advance is not None:
                advance(value)


def _weight_of(value: ir.Value) -> ir.TensorProtocol:
    """The initializer's tensor; a graph initializer always has one."""
    assert value.const_value is not None
    return value.const_value


def _raw_bytes(tensor: ir.TensorProtocol) -> memoryview:
    """The tensor's ONNX ``raw_data``: a view of its array, no copy, unless sub-byte types need packing."""
    if tensor.dtype.bitwidth % 8:
        return memoryview(tensor.tobytes())
    array = np.ascontiguousarray(tensor.numpy()).reshape(-1)
    return array.view(np.uint8).data


def _console() -> Any:
    """The terminal the progress bar is drawn on (a function, so tests can draw it elsewhere)."""
    from rich.console import Console

    return Console(stderr=True)


@contextmanager
def _progress(model: ir.Model, target: Path, quiet: bool) -> Iterator[Advance]:
    """A progress bar of the bytes written, naming the tensor last written; silent off a terminal."""
    console = None if quiet else _console()
    if console is None or not console.is_terminal:
        yield lambda tensor: None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn, TransferSpeedColumn

    total = _weights_nbytes(model)
    columns = (
        TextColumn(f"pt2onnx save {target.name}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
    )
    # Drawn once per tensor (not on a timer): every tensor's name shows, and nothing is drawn between.
    with Progress(*columns, console=console, auto_refresh=False) as bar:
        task = bar.add_task("", total=total)

        def advance(value: ir.Value) -> None:
            nbytes = value.const_value.nbytes if value.const_value is not None else 0
            bar.update(task, advance=nbytes, description=value.name or "", refresh=True)

        yield advance
