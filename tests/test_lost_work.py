"""``export(..., f=PATH)`` makes PATH's missing folders, and a PATH that cannot be written fails before capture.

Issue #28 ("Lost work"): a missing folder used to fail only after the whole export, and the
result was gone with the error.
"""

from __future__ import annotations

import errno
import os

import onnxruntime as ort
import pytest
import torch

import pt2onnx
from pt2onnx.errors import SaveError

#: Shapes of the inputs of every call of ``Recording.forward``, in this process.
FORWARD_CALLS: list[tuple[int, ...]] = []


class Recording(torch.nn.Module):
    """A model that notes each call of its forward: capture calls it, a check before capture does not.

    The calls go to a list outside the module: torch.export puts back the state of the
    module that the forward changes.
    """

    def __init__(self) -> None:
        super().__init__()
        self.before = len(FORWARD_CALLS)

    @property
    def calls(self) -> int:
        return len(FORWARD_CALLS) - self.before

    def forward(self, x):
        FORWARD_CALLS.append(tuple(x.shape))
        return x * 2


X = torch.randn(2, 3)


def test_missing_folders_are_made_and_the_model_saved(tmp_path):
    target = tmp_path / "out" / "v1" / "model.onnx"
    model = Recording()
    result = pt2onnx.export(model, (X,), f=target)
    assert model.calls > 0  # what the tests below assert is not: the probe sees capture
    assert target.is_file()
    session = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"])
    (y,) = session.run(None, {result.input_names[0]: X.numpy()})
    torch.testing.assert_close(torch.from_numpy(y), X * 2)
    assert sorted(p.name for p in (tmp_path / "out" / "v1").iterdir()) == ["model.onnx"]  # no probe left


def test_a_file_where_a_folder_is_needed_fails_before_capture(tmp_path):
    (tmp_path / "out").write_text("not a folder")
    model = Recording()
    with pytest.raises(SaveError) as info:
        pt2onnx.export(model, (X,), f=tmp_path / "out" / "sub" / "model.onnx")
    assert model.calls == 0, "the location must be checked before the model is captured"
    assert f"{tmp_path / 'out'} is a file, not a folder" in str(info.value)
    assert str(info.value).startswith("[save]") and "what to do:" in str(info.value)
    assert (tmp_path / "out").read_text() == "not a folder"


def test_a_directory_as_the_target_fails_before_capture(tmp_path):
    (tmp_path / "model.onnx").mkdir()
    model = Recording()
    with pytest.raises(SaveError, match=r"model\.onnx: it is a directory"):
        pt2onnx.export(model, (X,), f=tmp_path / "model.onnx")
    assert model.calls == 0, "the location must be checked before the model is captured"


def test_a_location_without_permission_fails_before_capture(tmp_path, monkeypatch):
    # What a read-only folder does to anyone but root; refused here for paths under tmp_path only.
    real_open = os.open

    def refuse(path, *args, **kwargs):
        if str(path).startswith(str(tmp_path)):
            raise PermissionError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    model = Recording()
    with pytest.raises(SaveError) as info:
        pt2onnx.export(model, (X,), f=tmp_path / "model.onnx")
    assert model.calls == 0, "the location must be checked before the model is captured"
    assert "model.onnx: PermissionError: [Errno 13] Permission denied" in str(info.value)
    assert f"make {tmp_path} writable" in str(info.value)
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only directories")
def test_a_read_only_folder_fails_before_capture(tmp_path):
    tmp_path.chmod(0o555)
    model = Recording()
    try:
        with pytest.raises(SaveError, match="Permission denied"):
            pt2onnx.export(model, (X,), f=tmp_path / "new" / "model.onnx")
    finally:
        tmp_path.chmod(0o755)
    assert model.calls == 0, "the location must be checked before the model is captured"
