"""``dynamic_shapes="auto"`` works wherever a static export does: a dim the model bounds
(a position table) or fixes takes the model's own constraint, and the report says so."""

from __future__ import annotations

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
    assert result.report.shapes_refined == ["features = 4"]
    assert result.model.graph.inputs[0].shape[1] == 4


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


def test_a_size_torch_guards_stays_static_and_the_report_names_the_guard():
    result = assert_exports_like_eager(
        AddPositions(), (torch.randn(1, 4, 4, 8),), other_inputs=[((torch.randn(1, 2, 8, 8),), {})]
    )
    assert result.report.size_guards == {"x_dim1*x_dim2 == 16": "add"}
    assert "guarded: x_dim1*x_dim2 == 16 (from node add)" in str(result.report)
    assert "size held static under torch's guard: x_dim1*x_dim2 == 16" in result.report.to_markdown()
