"""Save: the streamed single file holds exactly what onnx_ir would write; a save is atomic in every layout.

The atomicity tests inject a failure at every file-system step of a save, one step per
run, and check after each that the path holds the whole old model or the whole new one
and that no temporary file is left.
"""

from __future__ import annotations

import builtins
import errno
import functools
import io
import os
import re
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from onnx_ir.tensor_adapters import TorchTensor

import pt2onnx
import pt2onnx.save
from pt2onnx.errors import SaveError
from pt2onnx.save import save_model
from small_models import MLP

TORCH_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8, torch.bool]


def _model_holding(tensors: list[ir.TensorProtocol]) -> ir.Model:
    """A model whose outputs are its initializers, one Identity each."""
    values = [
        ir.Value(name=f"w{i}", shape=t.shape, type=ir.TensorType(t.dtype), const_value=t) for i, t in enumerate(tensors)
    ]
    outputs = []
    nodes = []
    for i, value in enumerate(values):
        node = ir.Node("", "Identity", [value], num_outputs=1)
        node.outputs[0].name = f"out{i}"
        node.outputs[0].shape = value.shape
        node.outputs[0].type = value.type
        nodes.append(node)
        outputs.append(node.outputs[0])
    graph = ir.Graph([], outputs, nodes=nodes, initializers=values, opset_imports={"": 21}, name="g")
    return ir.Model(graph, ir_version=10)


def _initializers(path: os.PathLike[str] | str) -> dict[str, np.ndarray]:
    proto = onnx.load(str(path))
    return {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}


def _tensor(draw: st.DrawFn) -> ir.TensorProtocol:
    dtype = draw(st.sampled_from(TORCH_DTYPES))
    shape = draw(st.lists(st.integers(0, 4), max_size=3))
    data = torch.randn(shape).mul(10).to(dtype)
    if draw(st.booleans()) and data.dim() >= 2:
        # Non-contiguous torch storage, as a transposed view of a weight would be.
        data = data.transpose(0, 1)
    kind = draw(st.sampled_from(["torch", "numpy", "lazy"]))
    if kind == "numpy" and dtype != torch.bfloat16:
        return ir.Tensor(data.numpy())
    if kind == "lazy":
        return ir.LazyTensor(
            functools.partial(TorchTensor, data), dtype=TorchTensor(data).dtype, shape=ir.Shape(data.shape)
        )
    return TorchTensor(data)


@given(st.lists(st.composite(_tensor)(), min_size=1, max_size=5))
def test_streamed_file_holds_what_onnx_ir_writes(tmp_path_factory, tensors):
    directory = tmp_path_factory.mktemp("save")
    model = _model_holding(tensors)
    save_model(model, directory / "streamed.onnx")
    ir.save(model, directory / "reference.onnx")
    onnx.checker.check_model(str(directory / "streamed.onnx"), full_check=True)
    got, expected = _initializers(directory / "streamed.onnx"), _initializers(directory / "reference.onnx")
    assert list(got) == list(expected)
    for name in expected:
        assert got[name].dtype == expected[name].dtype and got[name].shape == expected[name].shape
        np.testing.assert_array_equal(got[name], expected[name])
    # The model object is left as it was: same initializers, in order.
    assert [v.name for v in model.graph.initializers.values()] == [f"w{i}" for i in range(len(tensors))]
    assert all(v.is_initializer() for v in model.graph.initializers.values())


def test_sub_byte_and_float8_tensors_are_packed_like_onnx_ir(tmp_path):
    tensors = [
        ir.Tensor(np.array([1, -2, 3, -8, 7], dtype=ml_dtypes.int4), dtype=ir.DataType.INT4),
        ir.Tensor(np.array([0.5, -1.0, 448.0], dtype=ml_dtypes.float8_e4m3fn)),
    ]
    model = _model_holding(tensors)
    save_model(model, tmp_path / "streamed.onnx")
    ir.save(model, tmp_path / "reference.onnx")
    got, expected = _initializers(tmp_path / "streamed.onnx"), _initializers(tmp_path / "reference.onnx")
    for name in expected:
        np.testing.assert_array_equal(got[name].astype(np.float32), expected[name].astype(np.float32))


def test_exported_model_saved_then_loaded_runs_like_eager(tmp_path):
    x = torch.randn(2, 8)
    model = MLP().eval()
    result = pt2onnx.export(model, (x,))
    result.save(tmp_path / "mlp.onnx")
    (got,) = ort.InferenceSession(str(tmp_path / "mlp.onnx")).run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), model(x).detach())
    data, onnx_file = result.save(tmp_path / "external.onnx", external_data=True)
    assert onnx_file == tmp_path / "external.onnx"
    assert re.fullmatch(r"external\.onnx\.[0-9a-f]{16}\.data", data.name)
    assert sorted(os.listdir(tmp_path)) == sorted(["mlp.onnx", "external.onnx", data.name])
    (got,) = ort.InferenceSession(str(tmp_path / "external.onnx")).run(None, {"x": x.numpy()})
    torch.testing.assert_close(torch.from_numpy(got), model(x).detach())


def test_failed_streamed_save_leaves_no_partial_file(tmp_path, monkeypatch):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))
    calls = []

    def fails_on_second_weight(tensor):
        calls.append(tensor)
        if len(calls) == 2:
            raise OSError("disk full")
        return memoryview(tensor.tobytes())

    monkeypatch.setattr("pt2onnx.save._raw_bytes", fails_on_second_weight)
    with pytest.raises(SaveError, match="disk full"):
        result.save(tmp_path / "model.onnx")
    assert os.listdir(tmp_path) == []
    # The model is intact: saving again works.
    monkeypatch.undo()
    result.save(tmp_path / "model.onnx")
    assert set(_initializers(tmp_path / "model.onnx")) == set(result.model.graph.initializers)


def test_the_next_weight_is_prepared_on_a_worker_while_one_is_written(tmp_path, monkeypatch):
    # Each payload write waits until the next weight's preparation has begun: a save that
    # prepared each weight only after writing the one before would time out here.
    tensors = [ir.Tensor(np.full((64, 64), i, np.float32)) for i in range(4)]
    started = [threading.Event() for _ in tensors]
    threads = []
    real = pt2onnx.save._raw_bytes

    def preparing(tensor):
        threads.append(threading.current_thread().name)
        started[int(tensor.numpy().flat[0])].set()
        return real(tensor)

    class WaitingFile(io.BytesIO):
        def write(self, data):
            if len(data) == 64 * 64 * 4:
                index = int(np.frombuffer(data, np.float32)[0])
                if index + 1 < len(tensors):
                    assert started[index + 1].wait(timeout=10), (
                        f"weight {index + 1} not prepared while {index} was written"
                    )
            return super().write(data)

    monkeypatch.setattr(pt2onnx.save, "_raw_bytes", preparing)
    f = WaitingFile()
    pt2onnx.save._write_streamed(_model_holding(tensors), f)
    assert len(threads) == 4 and all(name.startswith("pt2onnx-save") for name in threads), threads
    (tmp_path / "model.onnx").write_bytes(f.getvalue())
    assert [a[0, 0] for a in _initializers(tmp_path / "model.onnx").values()] == [0, 1, 2, 3]


def test_failed_external_data_save_leaves_no_partial_file(tmp_path, monkeypatch):
    result = pt2onnx.export(MLP().eval(), (torch.randn(2, 8),))

    def broken_write(tensors, base_dir, relative_path, **options):
        (Path(base_dir) / relative_path).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr("onnx_ir.external_data.convert_tensors_to_external", broken_write)
    with pytest.raises(SaveError, match="disk full"):
        result.save(tmp_path / "model.onnx", external_data=True)
    assert os.listdir(tmp_path) == []


# -- bad targets ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mlps() -> tuple[pt2onnx.ExportResult, pt2onnx.ExportResult]:
    """Two exports of one architecture with different weights: the old model and the new one."""
    results = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        results.append(pt2onnx.export(MLP().eval(), (torch.randn(2, 8),)))
    return results[0], results[1]


def test_a_path_that_is_a_directory_is_an_error_and_nothing_is_written(tmp_path, mlps):
    (tmp_path / "model.onnx").mkdir()
    for external_data in (None, True):
        with pytest.raises(SaveError, match=r"model\.onnx: it is a directory"):
            mlps[0].save(tmp_path / "model.onnx", external_data=external_data)
    assert os.listdir(tmp_path) == ["model.onnx"] and os.listdir(tmp_path / "model.onnx") == []


@pytest.mark.parametrize("name", ["../escape.bin", "/tmp/escape.bin", "sub/weights.bin", "..", "", "a\\b.bin"])
def test_external_data_names_stay_in_the_target_directory(tmp_path, mlps, name):
    target = tmp_path / "inner" / "model.onnx"
    target.parent.mkdir()
    with pytest.raises(SaveError, match="is not a file name in the model's directory"):
        mlps[0].save(target, external_data=name)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*")) == ["inner"]


def test_a_custom_external_data_name_keeps_its_stem_and_suffix(tmp_path, mlps):
    data, _ = mlps[0].save(tmp_path / "model.onnx", external_data="weights.bin")
    assert re.fullmatch(r"weights\.[0-9a-f]{16}\.bin", data.name)
    _check_holds(tmp_path / "model.onnx", mlps[0])


def test_a_missing_directory_is_an_error(tmp_path, mlps):
    with pytest.raises(SaveError, match="does not exist"):
        mlps[0].save(tmp_path / "nowhere" / "model.onnx")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_directory_is_a_save_error_with_path_and_reason(tmp_path, mlps):
    tmp_path.chmod(0o555)
    try:
        with pytest.raises(SaveError, match=rf"{re.escape(str(tmp_path))}.*Permission denied") as info:
            mlps[0].save(tmp_path / "model.onnx")
        assert "writable" in str(info.value)
    finally:
        tmp_path.chmod(0o755)
    assert os.listdir(tmp_path) == []


def test_permission_denied_is_a_save_error_with_path_reason_and_hint(tmp_path, mlps, monkeypatch):
    # The same refusal a read-only directory gives, for runs as root (which may write anywhere).
    def refuse(path, *args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(path))

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(SaveError, match=r"model\.onnx failed: PermissionError: .*Permission denied") as info:
        mlps[0].save(tmp_path / "model.onnx")
    assert f"make {tmp_path} writable" in str(info.value)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == []


def test_saving_over_an_external_data_model_replaces_its_data_file(tmp_path, mlps):
    old, new = mlps
    old_data, _ = old.save(tmp_path / "model.onnx", external_data=True)
    new_data, _ = new.save(tmp_path / "model.onnx", external_data=True)
    assert new_data != old_data and not old_data.exists()
    assert sorted(os.listdir(tmp_path)) == sorted(["model.onnx", new_data.name])
    _check_holds(tmp_path / "model.onnx", new)
    # Back to one file: the data file goes too.
    assert old.save(tmp_path / "model.onnx") == [tmp_path / "model.onnx"]
    assert os.listdir(tmp_path) == ["model.onnx"]
    _check_holds(tmp_path / "model.onnx", old)


def test_another_models_data_file_is_never_touched(tmp_path, mlps):
    old, new = mlps
    other_data, _ = old.save(tmp_path / "other.onnx", external_data=True)
    old.save(tmp_path / "model.onnx", external_data=True)
    new.save(tmp_path / "model.onnx", external_data=True)
    assert other_data.exists()
    _check_holds(tmp_path / "other.onnx", old)


# -- a failure at every step -----------------------------------------------------------------


class _InjectedFailure(OSError):
    pass


class _Steps:
    """Counts the file-system steps of a save (opens, writes, fsyncs, renames, removals, listings) and fails one."""

    def __init__(self, fail_at: int | None = None) -> None:
        self.labels: list[str] = []
        self.fail_at = fail_at

    def step(self, label: str) -> None:
        index = len(self.labels)
        self.labels.append(label)
        if index == self.fail_at:
            raise _InjectedFailure(errno.ENOSPC, f"injected failure at step {index}: {label}")


def _kind(path: object) -> str:
    """A file's role, independent of the save's random token: what the step labels show."""
    name = Path(os.fsdecode(path)).name if isinstance(path, (str, bytes, os.PathLike)) else "fd"
    name = re.sub(r"[0-9a-f]{16}", "<token>", name)
    return re.sub(r"\.<token>((?:-\d{5}-of-\d{5})?(?:\.data)?)\.[A-Za-z0-9_]{8}$", ".<token>\\1.<writer-tmp>", name)


class _CountedFile:
    def __init__(self, file, steps: _Steps, name: str) -> None:
        self._file, self._steps, self._name = file, steps, name

    def write(self, data):
        self._steps.step(f"write {self._name}")
        return self._file.write(data)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._file.close()

    def __getattr__(self, name):
        return getattr(self._file, name)


_OS_STEPS = ("open", "replace", "rename", "remove", "unlink", "rmdir", "mkdir", "fsync", "listdir", "scandir")


@contextmanager
def _counted(steps: _Steps) -> Iterator[None]:
    originals = {name: getattr(os, name) for name in _OS_STEPS}
    original_open, original_fdopen = builtins.open, os.fdopen

    def counted(name):
        def call(*args, **kwargs):
            steps.step(f"os.{name} {_kind(args[0]) if args else ''}".strip())
            return originals[name](*args, **kwargs)

        return call

    def counted_open(file, mode="r", *args, **kwargs):
        writing = any(c in mode for c in "wax+")
        steps.step(f"open({'w' if writing else 'r'}) {_kind(file)}")
        handle = original_open(file, mode, *args, **kwargs)
        return _CountedFile(handle, steps, _kind(file)) if writing else handle

    def counted_fdopen(fd, mode="r", *args, **kwargs):
        steps.step("os.fdopen")
        return _CountedFile(original_fdopen(fd, mode, *args, **kwargs), steps, "staged model")

    for name in _OS_STEPS:
        setattr(os, name, counted(name))
    builtins.open, os.fdopen = counted_open, counted_fdopen
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(os, name, fn)
        builtins.open, os.fdopen = original_open, original_fdopen


def _weights_of(path: Path) -> dict[str, np.ndarray]:
    proto = onnx.load(str(path))  # with its external data
    return {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}


def _referenced_files(path: Path) -> set[str]:
    proto = onnx.load(str(path), load_external_data=False)
    return {
        entry.value
        for t in proto.graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
        for entry in t.external_data
        if entry.key == "location"
    }


def _check_holds(path: Path, result: pt2onnx.ExportResult) -> None:
    got = _weights_of(path)
    expected = {v.name: v.const_value.numpy() for v in result.model.graph.initializers.values()}
    assert got.keys() == expected.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name])


# (old layout or None, new layout): external_data of the old save and of the new one, or
# "sharded": external data in files of at most 300 bytes (the MLP's two external tensors,
# 512 and 256 bytes, in two files).
SHARDED = "sharded"
SCENARIOS = {
    "nothing -> single file": (None, False),
    "nothing -> external data": (None, True),
    "single file -> external data": (False, True),
    "external data -> external data": (True, True),
    "external data -> single file": (True, False),
    "nothing -> sharded": (None, SHARDED),
    "single file -> sharded": (False, SHARDED),
    "sharded -> sharded": (SHARDED, SHARDED),
    "sharded -> external data": (SHARDED, True),
    "sharded -> single file": (SHARDED, False),
}


def _layout(layout: bool | str) -> dict[str, object]:
    """The save options of a layout of :data:`SCENARIOS`."""
    return {"external_data": True, "max_shard_bytes": 300} if layout == SHARDED else {"external_data": layout}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_a_failure_at_any_step_leaves_the_old_model_or_the_new_one_whole(tmp_path, mlps, scenario):
    old_layout, new_layout = SCENARIOS[scenario]
    old, new = mlps

    def fresh(base: Path) -> Path:
        directory = base / "models"  # one name in every run: the step labels show it
        directory.mkdir(parents=True)
        if old_layout is not None:
            old.save(directory / "model.onnx", **_layout(old_layout))
        return directory / "model.onnx"

    counting = _Steps()
    target = fresh(tmp_path / "count")
    with _counted(counting):
        written = new.save(target, **_layout(new_layout))
    _check_holds(target, new)
    if new_layout == SHARDED:
        assert len(written) == 3 and len(_referenced_files(target)) == 2, written
    labels = counting.labels
    assert any(label.startswith("os.replace") for label in labels) and any("fsync" in label for label in labels)
    assert any(label.startswith("write") for label in labels)

    for index, label in enumerate(labels):
        target = fresh(tmp_path / f"fail{index}")
        old_files = set(os.listdir(target.parent))
        steps = _Steps(fail_at=index)
        raised = None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with _counted(steps):
                    new.save(target, **_layout(new_layout))
            except SaveError as e:
                raised = e
        where = f"failure at step {index} ({label})"
        assert steps.labels[index] == label, f"{where}: the steps differ from the counting run"
        files = set(os.listdir(target.parent))
        if raised is not None:
            assert "injected failure" in str(raised) and str(target) in str(raised), where
            # Nothing of the new save is left; the old model (if any) is whole and unchanged.
            assert files == old_files, f"{where}: left {files - old_files}, removed {old_files - files}"
            if old_layout is not None:
                _check_holds(target, old)
            continue
        # The failure came after the commit: the new model is whole.
        _check_holds(target, new)
        left = files - {target.name} - _referenced_files(target)
        # Only an old data file whose removal (or discovery) was the failed step may stay, named in a warning.
        assert all(not name.startswith(".") for name in files), f"{where}: temporary files {files}"
        if left:
            assert left <= old_files, f"{where}: left {left}"
            assert any(str(next(iter(left))) in str(w.message) or "could not read" in str(w.message) for w in caught), (
                where
            )
        for p in target.parent.iterdir():
            assert p.is_file(), f"{where}: left the directory {p}"


def test_the_steps_come_in_the_protocols_order(tmp_path, mlps):
    """External data over external data: data and model written and synced, then the commit, then the old data removed."""
    old, new = mlps
    directory = tmp_path / "models"
    directory.mkdir()
    old.save(directory / "model.onnx", external_data=True)
    steps = _Steps()
    with _counted(steps):
        new.save(directory / "model.onnx", external_data=True)
    labels = steps.labels

    def first(label: str, after: int = -1) -> int:
        return next(i for i, x in enumerate(labels) if x == label and i > after)

    read_old = first("open(r) model.onnx")  # the old model, for the data files it reads
    data_written = first("write model.onnx.<token>.data")
    model_written = first("write .model.onnx.<token>.tmp")
    data_synced = first("os.fsync fd", first("os.open model.onnx.<token>.data"))
    model_synced = first("os.fsync fd", first("os.open .model.onnx.<token>.tmp"))
    commit = first("os.replace .model.onnx.<token>.tmp")
    old_data_removed = first("os.unlink model.onnx.<token>.data")
    assert read_old < data_written < model_written < data_synced < model_synced < commit < old_data_removed
    assert labels[commit - 1] == "os.fsync fd" and labels[commit - 2] == "os.open models"  # the directory, before
    assert old_data_removed == len(labels) - 1
