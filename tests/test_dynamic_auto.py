"""``dynamic_shapes="auto"`` works wherever a static export does: a dim the model bounds
(a position table) or fixes takes the model's own constraint, and the report says so."""

from __future__ import annotations

import time

import pytest
import torch
from torch.export import Dim

import pt2onnx
from pt2onnx.plugin import hookimpl
from pt2onnx.testing import assert_exports_like_eager


class Positions(torch.nn.Module):
    """Learned positions for at most 16 tokens, sliced from a buffer as BERT's are: torch
    bounds the sequence dim by 16."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Embedding(16, 4)
        self.register_buffer("positions", torch.arange(16), persistent=False)

    def forward(self, tokens):
        return tokens.unsqueeze(-1) * self.table(self.positions[: tokens.shape[1]])


class Heads(torch.nn.Module):
    """A width the model fixes: four features."""

    def forward(self, x):
        return x.reshape(x.shape[0], 4) * 2


class Named:
    """A pack's hint naming dims without the model's bounds (as the transformers pack names sequence_length)."""

    def __init__(self, **dims):
        self.dims = dims

    @hookimpl
    def pt2onnx_register_capture_preparations(self, register):
        register.dynamic_shapes("named.dims", lambda model, args, kwargs: self.dims)


def test_a_dim_the_model_bounds_takes_its_bound():
    hint = Named(tokens={1: Dim("sequence_length")})
    result = assert_exports_like_eager(Positions(), (torch.randn(2, 5),), plugins=[hint])
    assert result.report.shapes_refined == ["sequence_length = Dim('sequence_length', max=16)"]
    assert "refined by the model: sequence_length = Dim('sequence_length', max=16)" in str(result.report)
    assert result.verify(torch.randn(2, 16)).ok  # the bound itself (the hint names only dim 1)
    assert "dynamic shapes refined by the model: sequence_length" in result.report.to_markdown()


def test_a_dim_the_model_fixes_becomes_static():
    hint = Named(x={0: Dim("batch"), 1: Dim("features")})
    result = assert_exports_like_eager(Heads(), (torch.randn(3, 4),), plugins=[hint])
    assert result.report.shapes_refined == ["features = 4 suggested; the dim left to torch (Dim.AUTO)"]
    assert result.model.graph.inputs[0].shape[1] == 4
    assert "the model's code fixes it to 4" in result.report.static_dims["x"][1]


class RelativeShift(torch.nn.Module):
    """XLNet's relative attention shift: 2*S - 1 relative positions viewed S at a time, so torch
    guards (2*S - 1) % S != 0, true at every S but 1, which it cannot prove for a named range."""

    def forward(self, x):
        s = x.shape[1]
        positions = torch.arange(s, -s + 1, -1.0, dtype=torch.int64).float()
        if (2 * s - 1) % s != 0:
            positions = positions[:s]
        return x * positions


def test_a_guard_torch_cannot_prove_over_a_named_range_leaves_the_dim_to_torch():
    hint = Named(x={1: Dim("sequence_length", max=511)})
    with pytest.raises(torch._dynamo.exc.UserError, match="Not all values of sequence_length"):
        torch.export.export(RelativeShift(), (torch.randn(2, 5),), dynamic_shapes={"x": {1: hint.dims["x"][1]}})
    result = assert_exports_like_eager(
        RelativeShift(),
        (torch.randn(2, 5),),
        plugins=[hint],
        dynamic_shapes="auto",
        other_inputs=[((torch.randn(2, 9),), {})],
    )
    assert result.report.shapes_refined == [
        "sequence_length: torch cannot prove (((-1) + 2*L['x'].size()[1]) % L['x'].size()[1]) != 0 for every size; "
        "the dim left to torch (Dim.AUTO)"
    ]
    assert str(result.model.graph.inputs[0].shape) == "[2,sequence_length]"


def test_a_spec_the_user_gives_is_not_refined():
    spec = {"tokens": {1: Dim("sequence_length")}}
    try:
        pt2onnx.export(Positions(), (torch.randn(2, 5),), dynamic_shapes=spec, fallback=False)
    except pt2onnx.errors.CaptureError as e:
        assert "Dim('sequence_length', max=16)" in str(e)
    else:
        raise AssertionError("a user's own dynamic_shapes were changed without a word")


class AddPositions(torch.nn.Module):
    """A 16-row position table added to H * W tokens, as a DiT's patch embedding does:
    torch keeps H and W dynamic under a guard that their product is 16."""

    def __init__(self):
        super().__init__()
        self.register_buffer("positions", torch.randn(1, 16, 8))

    def forward(self, x):
        return x.reshape(1, -1, 8) + self.positions


class PatchesThenDownsamples(torch.nn.Module):
    """SAM's encoder: 4-pixel patches plus a 4x4 position table (torch guards ``H // 4 == 4``,
    H itself free in 16..19), then a stride-2 conv: its output is 2 wherever the guard holds,
    which torch cannot prove for ``((H // 4 - 1) // 2) + 1``."""

    def __init__(self):
        super().__init__()
        self.patches = torch.nn.Conv2d(1, 4, 4, stride=4)
        self.positions = torch.nn.Parameter(torch.randn(1, 4, 4, 4))
        self.down = torch.nn.Conv2d(4, 4, 3, stride=2, padding=1)

    def forward(self, x):
        return self.down(self.patches(x) + self.positions)


def test_a_size_a_guard_fixes_through_part_of_its_expression_stays_static():
    result = assert_exports_like_eager(
        PatchesThenDownsamples(), (torch.randn(1, 1, 16, 16),), other_inputs=[((torch.randn(1, 1, 19, 17),), {})]
    )
    assert any(guard.endswith("== 2") for guard in result.report.size_guards), result.report.size_guards


def test_a_size_torch_guards_stays_static_and_the_report_names_the_guard():
    result = assert_exports_like_eager(
        AddPositions(), (torch.randn(1, 4, 4, 8),), other_inputs=[((torch.randn(1, 2, 8, 8),), {})]
    )
    assert result.report.size_guards == {"x_dim1*x_dim2 == 16": "add"}
    assert "guarded: x_dim1*x_dim2 == 16 (from node add)" in str(result.report)
    assert "size held static under torch's guard: x_dim1*x_dim2 == 16" in result.report.to_markdown()


class PairsWhereEven(torch.nn.Module):
    """Sums neighbouring pairs where the width is even, as MobileViT pads to whole patches
    only where it must: a Python ``if`` on a size, so torch's program guards the width."""

    def forward(self, x):
        if x.shape[1] % 2 == 0:
            return x.reshape(x.shape[0], -1, 2).sum(-1)
        return x


def test_sizes_torch_guards_are_listed_and_run_refuses_the_others():
    result = pt2onnx.export(PairsWhereEven(), (torch.randn(3, 8),), dynamic_shapes="auto")
    accepted = result.report.guarded_sizes["x_dim1"]
    assert accepted.startswith(
        "4, 6, ..., 256 (every 2) of 2..256 tried"
    )  # 2: a pair count of 1, which torch specializes
    assert "x_dim0" not in result.report.guarded_sizes  # the batch is free
    assert f"sizes torch's guards accept: x_dim1: {accepted}" in str(result.report)
    assert f"(the ONNX graph does not check them): x_dim1: {accepted}" in result.report.to_markdown()
    assert result.verify(torch.randn(5, 12)).ok
    assert result.guard_failure(torch.randn(5, 12)) is None
    odd = torch.randn(5, 7)
    why = result.guard_failure(odd)
    assert why is not None and "x_dim1 % 2" in why and "x_dim1 = 7" in why


class AtMostSixteen(torch.nn.Module):
    """A short-input path: torch's program keeps the width dynamic below 17 only."""

    def forward(self, x):
        if x.shape[1] <= 16:
            return x * 2
        return x


def test_a_bound_a_guard_sets_is_listed_with_the_sizes_below_it():
    result = pt2onnx.export(AtMostSixteen(), (torch.randn(3, 8),), dynamic_shapes="auto")
    assert result.report.guarded_sizes == {"x_dim1": "2..16 of 2..256 tried (the other dims as in the example)"}
    assert result.verify(torch.randn(2, 16)).ok
    longer = torch.randn(2, 17)
    assert "x_dim1 = 17 is above 16" in (result.guard_failure(longer) or "")
    # The graph took the short path: at 17 it doubles where eager does not, and run() says so.
    with pytest.warns(pt2onnx.errors.GuardedSizeWarning, match="torch's captured program refuses these input sizes"):
        assert torch.equal(result.run(longer), longer * 2)


def test_a_model_without_guards_lists_none():
    result = pt2onnx.export(Heads(), (torch.randn(3, 4),), dynamic_shapes="auto")
    assert result.report.guarded_sizes == {}
    assert result.guard_failure(torch.randn(7, 4)) is None
    assert "has size 5 at dim 1, but the exported model fixed that dim to 4" in (
        result.guard_failure(torch.randn(7, 5)) or ""
    )  # a static dim refuses other sizes too


def test_a_guard_python_cannot_read_is_dropped_so_the_example_is_never_refused():
    from pt2onnx.interface.guards import SizeGuards

    printed = ["x_dim1 % 2 == 0", "not_a_function(x_dim1) > 0", "x_dim1 < 8"]  # the last fails at the example
    guards = SizeGuards({(0, 1): "x_dim1"}, {"x_dim1": (0, float("inf"))}, printed, {"x_dim1": 8})
    assert guards.guards == ["x_dim1 % 2 == 0"]
    assert guards.failure({"x_dim1": 8}) is None
    assert "x_dim1 % 2 == 0 fails at x_dim1 = 7" in (guards.failure({"x_dim1": 7}) or "")


class LengthAsData(torch.nn.Module):
    """Captures only with a static length, as S3D's pooling with dynamic frames and pixels
    (there torch's symbolic shapes hand sympy an inequality it cannot solve)."""

    def forward(self, x):
        if isinstance(x.shape[1], torch.SymInt):
            raise NotImplementedError("this model's length cannot be symbolic")
        return x * x.shape[1]


def test_auto_where_every_dim_dynamic_fails_keeps_the_batch_dynamic_and_says_why():
    # fallback=False: TorchDynamo (strict=True) specializes the length instead of failing.
    x = torch.randn(3, 5)
    with pytest.warns(pt2onnx.capture.CaptureFallbackWarning, match="the batch dims .axis 0. kept dynamic"):
        result = pt2onnx.export(LengthAsData(), (x,), dynamic_shapes="auto", fallback=False)
    why = result.report.static_dims["x"][1]
    assert why.startswith("kept at 5: with every dim dynamic the capture failed (")
    assert "the batch dims (axis 0) kept dynamic" in why
    assert 0 not in result.report.static_dims["x"]
    other = torch.randn(7, 5)
    torch.testing.assert_close(torch.as_tensor(result.run(other)), other * 5)
    with pytest.raises(pt2onnx.errors.VerificationError, match="kept at 5"):
        result.run(torch.randn(3, 6))


def test_a_spec_the_user_gives_is_not_narrowed():
    with pytest.raises(pt2onnx.errors.CaptureError, match="cannot be symbolic"):
        pt2onnx.export(LengthAsData(), (torch.randn(3, 5),), dynamic_shapes={"x": {1: Dim("length")}}, fallback=False)


class SlowWhenTheLengthIsSymbolic(torch.nn.Module):
    """Stands for a capture sympy keeps busy for minutes (timm's DaViT: floor divisions of window reshapes)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, x):
        if isinstance(x.shape[1], torch.SymInt):
            time.sleep(self.seconds)
        return x * 2


def test_an_auto_capture_past_its_time_is_narrowed_and_says_so(monkeypatch):
    monkeypatch.setenv(pt2onnx.capture.AUTO_CAPTURE_SECONDS, "1")
    start = time.perf_counter()
    with pytest.warns(pt2onnx.capture.CaptureFallbackWarning, match="ran past 1 s"):
        result = pt2onnx.export(SlowWhenTheLengthIsSymbolic(120), (torch.randn(3, 5),), dynamic_shapes="auto")
    assert time.perf_counter() - start < 60, "the capture was not stopped"
    why = result.report.static_dims["x"][1]
    assert why.startswith("kept at 5: with every dim dynamic the capture ran past 1 s (torch's symbolic shapes; ")
    assert why.endswith("the batch dims (axis 0) kept dynamic")
    other = torch.randn(7, 5)
    torch.testing.assert_close(torch.as_tensor(result.run(other)), other * 2)


def test_a_spec_the_user_gives_and_auto_with_no_bound_are_never_stopped(monkeypatch):
    monkeypatch.setenv(pt2onnx.capture.AUTO_CAPTURE_SECONDS, "1")
    given = pt2onnx.export(
        SlowWhenTheLengthIsSymbolic(1.5), (torch.randn(3, 5),), dynamic_shapes={"x": {1: Dim("length")}}
    )
    monkeypatch.setenv(pt2onnx.capture.AUTO_CAPTURE_SECONDS, "0")
    waited = pt2onnx.export(SlowWhenTheLengthIsSymbolic(1.5), (torch.randn(3, 5),), dynamic_shapes="auto")
    assert not waited.report.static_dims
    for result in (given, waited):
        longer = torch.randn(3, 9)  # the length dynamic: both captures ran to their end
        torch.testing.assert_close(torch.as_tensor(result.run(longer)), longer * 2)


def test_the_auto_capture_bound_is_read_from_the_environment(monkeypatch):
    from pt2onnx.capture import AUTO_CAPTURE_SECONDS, auto_capture_seconds

    for text, seconds in (("", 300.0), ("45", 45.0), ("0", None), ("2.5", 2.5)):
        monkeypatch.setenv(AUTO_CAPTURE_SECONDS, text)
        assert auto_capture_seconds() == seconds
    monkeypatch.setenv(AUTO_CAPTURE_SECONDS, "five minutes")
    with pytest.raises(pt2onnx.errors.CaptureError, match="is not a number of seconds"):
        auto_capture_seconds()
