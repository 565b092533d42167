"""Capture preparations: pytree types, patches and dynamic-shape hints plugins put around torch.export."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.utils._pytree as pytree
from torch.export import Dim

import pt2onnx
from pt2onnx.cli import main
from pt2onnx.errors import CaptureError, PluginConflictError, PluginError
from pt2onnx.plugin import PreparationRegistrar, hookimpl
from pt2onnx.testing import assert_exports_like_eager


class Pair:
    """A container torch's pytree does not know."""

    def __init__(self, first, second):
        self.first, self.second = first, second


def _flatten(pair):
    return [(pytree.MappingKey("first"), pair.first), (pytree.MappingKey("second"), pair.second)], type(pair)


def _unflatten(children, cls):
    return cls(*children)


class PairPlugin:
    name = "pairs"

    def __init__(self, cls=Pair, **templates):
        self.cls, self.templates = cls, templates

    @hookimpl
    def pt2onnx_register_capture_preparations(self, register: PreparationRegistrar) -> None:
        register.pytree(self.cls, _flatten, _unflatten, **self.templates)


class SwapPair(torch.nn.Module):
    def forward(self, pair):
        return Pair(pair.second * 2, pair.first + 1)


def _pair():
    return Pair(torch.randn(3, 4), torch.randn(3, 4))


def test_a_pytree_type_is_registered_and_names_its_leaves():
    result = assert_exports_like_eager(
        SwapPair(), (_pair(),), plugins=[PairPlugin(input_names="{path}.{key}", output_names="swapped.{key}")]
    )
    assert result.input_names == ["pair.first", "pair.second"]
    assert result.output_names == ["swapped.first", "swapped.second"]
    assert result.report.preparations == [f"pytree {__name__}.Pair (pairs [argument])"]
    assert Pair in pytree.SUPPORTED_NODES  # and stays registered: run() flattens it again
    swapped = result.run(Pair(torch.ones(2, 4), torch.zeros(2, 4)))
    assert torch.equal(swapped.first, torch.zeros(2, 4)) and torch.equal(swapped.second, torch.full((2, 4), 2.0))


class LinearPair(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, pair):
        return self.linear(pair.first) + pair.second


def test_a_meta_device_model_takes_its_inputs_inside_a_plugins_type(tmp_path):
    # The example inputs go to the meta device with the weights; a plugin's type is walked
    # into only once it is registered, so registering comes first (a cache of a checkpoint export).
    class MetaPair(Pair):
        pass

    real = LinearPair()
    with torch.device("meta"):
        model = LinearPair()
    pair = MetaPair(torch.randn(3, 4), torch.randn(3, 4))
    result = pt2onnx.export(model, (pair,), weights=real.state_dict(), plugins=[PairPlugin(MetaPair)])
    got = result.run(MetaPair(torch.ones(3, 4), torch.zeros(3, 4)))
    torch.testing.assert_close(got, real(Pair(torch.ones(3, 4), torch.zeros(3, 4))))


class Other(Pair):
    pass


def test_without_templates_leaves_keep_the_default_names():
    model = SwapPair()
    model.forward = lambda pair: Other(pair.second * 2, pair.first + 1)
    result = assert_exports_like_eager(model, (Other(torch.randn(3), torch.randn(3)),), plugins=[PairPlugin(Other)])
    assert result.input_names == ["pair_first", "pair_second"]
    assert result.output_names == ["first", "second"]


def test_a_type_registered_by_other_code_is_left_as_it_is():
    class Foreign(Pair):
        pass

    pytree.register_pytree_node(
        Foreign,
        lambda p: ([p.first, p.second], None),
        lambda c, _: Foreign(*c),
        flatten_with_keys_fn=lambda p: ([(pytree.SequenceKey(0), p.first), (pytree.SequenceKey(1), p.second)], None),
    )
    model = SwapPair()
    model.forward = lambda pair: pair.first + pair.second
    result = assert_exports_like_eager(
        model, (Foreign(torch.randn(3), torch.randn(3)),), plugins=[PairPlugin(Foreign, input_names="{path}.{key}")]
    )
    assert result.input_names == ["pair_0", "pair_1"]  # the foreign registration's flatten, unnamed
    assert result.report.preparations == []


class SumPair(torch.nn.Module):
    def forward(self, pair):
        return pair.first * pair.second


def test_a_type_named_by_path_is_registered_once_its_module_is_imported(tmp_path, monkeypatch):
    (tmp_path / "lazy_pairs.py").write_text(
        "class LazyPair:\n    def __init__(self, first, second):\n        self.first, self.second = first, second\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "lazy_pairs", raising=False)
    plugin = PairPlugin("lazy_pairs:LazyPair", input_names="{path}.{key}")
    assert_exports_like_eager(torch.nn.ReLU(), (torch.randn(2, 3),), plugins=[plugin])
    assert "lazy_pairs" not in sys.modules  # naming the type imported nothing

    from lazy_pairs import LazyPair

    result = assert_exports_like_eager(SumPair(), (LazyPair(torch.randn(3), torch.randn(3)),), plugins=[plugin])
    assert result.input_names == ["pair.first", "pair.second"]
    assert result.report.preparations == ["pytree lazy_pairs.LazyPair (pairs [argument])"]


def test_a_type_path_naming_no_class_fails_the_export_naming_the_plugin():
    with pytest.raises(
        PluginError, match=r"plugin 'pairs': pytree type 'torch:NoSuchPair': module 'torch' has no class"
    ):
        pt2onnx.export(torch.nn.ReLU(), (torch.randn(2),), plugins=[PairPlugin("torch:NoSuchPair")])


@pytest.mark.parametrize("path", ["torch.NoSuchPair", "torch:1st", ":Pair"])
def test_a_malformed_type_path_is_refused(path):
    with pytest.raises(PluginError, match=r"register.pytree takes a class or its path 'module:qualname'"):
        pt2onnx.export(torch.nn.ReLU(), (torch.randn(2),), plugins=[PairPlugin(path)])


def test_a_template_with_an_unknown_field_is_refused():
    with pytest.raises(PluginError, match=r"\{path\} and \{key\}"):
        pt2onnx.export(SwapPair(), (_pair(),), plugins=[PairPlugin(input_names="{arg}.{key}")])


def _rows(x):
    """Untraceable with a dynamic first dim: a Python loop over it specializes it."""
    return torch.stack([x[i] * (i + 1) for i in range(x.shape[0])])


def _rows_traceable(x):
    return x * torch.arange(1, x.shape[0] + 1, dtype=x.dtype).unsqueeze(-1)


class Rows(torch.nn.Module):
    def forward(self, x):
        return sys.modules[__name__]._rows(x)


class RowsPatch:
    name = "rows"

    def __init__(self, patch_name="rows.traceable"):
        self.patch_name = patch_name

    @hookimpl
    def pt2onnx_register_capture_preparations(self, register: PreparationRegistrar) -> None:
        register.patch(self.patch_name, _swap_rows)


def _swap_rows(model):
    if not isinstance(model, Rows):
        return None
    return _swapped()


class _swapped:
    def __enter__(self):
        self.original = sys.modules[__name__]._rows
        sys.modules[__name__]._rows = _rows_traceable

    def __exit__(self, *exc):
        sys.modules[__name__]._rows = self.original


ROWS = {"x": {0: Dim("rows"), 1: Dim.AUTO}}


def test_a_patch_makes_untraceable_code_traceable_and_is_undone():
    with pytest.raises(CaptureError, match="specialized"):
        pt2onnx.export(Rows(), (torch.randn(4, 3),), dynamic_shapes=ROWS)
    result = assert_exports_like_eager(Rows(), (torch.randn(4, 3),), dynamic_shapes=ROWS, plugins=[RowsPatch()])
    assert result.report.preparations == ["patch rows.traceable (rows [argument])"]
    assert _rows is sys.modules[__name__]._rows
    assert result.verify(torch.randn(7, 3)).ok


def test_a_patch_that_does_not_apply_is_not_reported():
    result = assert_exports_like_eager(SwapPair(), (_pair(),), plugins=[RowsPatch(), PairPlugin()])
    assert [p.split()[0] for p in result.report.preparations] == ["pytree"]


class NamedRows:
    name = "named_rows"

    def __init__(self, dim_name="rows"):
        self.dim_name = dim_name

    @hookimpl
    def pt2onnx_register_capture_preparations(self, register: PreparationRegistrar) -> None:
        register.dynamic_shapes("rows.names", lambda model, args, kwargs: {"input": {0: Dim(self.dim_name)}})


def test_a_hint_names_dims_of_auto_exports_only():
    x = torch.randn(4, 3)
    result = assert_exports_like_eager(torch.nn.ReLU(), (x,), plugins=[NamedRows()])
    assert [str(d) for d in result.model.graph.inputs[0].shape] == ["rows", "3"]
    assert result.report.preparations == ["dynamic_shapes rows.names (named_rows [argument])"]
    explicit = assert_exports_like_eager(
        torch.nn.ReLU(), (x,), dynamic_shapes={"input": {0: Dim("n")}}, plugins=[NamedRows()]
    )
    assert explicit.report.preparations == []
    assert [str(d) for d in explicit.model.graph.inputs[0].shape] == ["n", "3"]


def test_two_plugins_of_one_layer_conflict_only_where_the_preparation_applies():
    first, second = RowsPatch(), RowsPatch()
    second.name = "rows_again"
    with pytest.raises(PluginConflictError, match=r"rows\.traceable.*'rows'.*'rows_again'"):
        pt2onnx.export(Rows(), (torch.randn(4, 3),), dynamic_shapes=ROWS, plugins=[first, second])
    # A model the patch does not apply to exports as if there were no conflict.
    assert_exports_like_eager(torch.nn.ReLU(), (torch.randn(2, 3),), plugins=[first, second])


def test_two_pytree_registrations_conflict_only_for_a_program_holding_the_type():
    class Conflicted(Pair):
        pass

    first, second = PairPlugin(Conflicted), PairPlugin(Conflicted)
    second.name = "pairs_again"
    assert_exports_like_eager(torch.nn.ReLU(), (torch.randn(2, 3),), plugins=[first, second])
    model = SwapPair()
    model.forward = lambda pair: pair.first - pair.second
    with pytest.raises(PluginConflictError, match="Conflicted"):
        pt2onnx.export(model, (Conflicted(torch.randn(3), torch.randn(3)),), plugins=[first, second])


def test_a_higher_layer_replaces_an_installed_preparation():
    # pt2onnx-transformers (installed) registers the hint "transformers.dims"; plugins= wins over it.
    class Mine:
        name = "mine"

        @hookimpl
        def pt2onnx_register_capture_preparations(self, register: PreparationRegistrar) -> None:
            register.dynamic_shapes("transformers.dims", lambda model, args, kwargs: {"input": {0: Dim("mine")}})

    result = assert_exports_like_eager(torch.nn.ReLU(), (torch.randn(3, 2),), plugins=[Mine()])
    assert result.report.preparations == ["dynamic_shapes transformers.dims (mine [argument])"]
    assert str(result.model.graph.inputs[0].shape[0]) == "mine"


def test_a_blocked_plugin_prepares_nothing():
    with pytest.raises(CaptureError, match="specialized"):
        pt2onnx.export(Rows(), (torch.randn(4, 3),), dynamic_shapes=ROWS, plugins=[RowsPatch()], disable=["rows"])


def test_pt2onnx_plugins_counts_each_plugins_preparations(capsys):
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "preparations"
    rows = {line.split()[0]: line.split() for line in lines[1:] if line and not line.startswith(" ")}
    assert int(rows["transformers"][-1]) == 8  # three cache types, four patches, one hint
    assert int(rows["aten"][-1]) == 0
