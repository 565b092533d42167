"""Target opsets: registrations bounded by ``since``/``until``, resolved per export, shown and explained."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import onnx
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._export.db.case import SupportLevel

import pt2onnx
from exportdb_cases import EXAMPLES, second_input
from pt2onnx.cli import main
from pt2onnx.errors import OptionError, PluginConflictError, PluginError, UnsupportedOpsError
from pt2onnx.opset import KEPT_KERNELS, MIN_OPSET, default_opset, newest_opset
from pt2onnx.plugin import ConverterRegistrar, CustomOpRegistrar, converter, hookimpl, onnxruntime_has_kernel
from pt2onnx.testing import assert_exports_like_eager
from pt2onnx.testing.harness import OLDEST_OPSET_EVERY_ENV


class ReluNet(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) - 0.5


def _op_types(result: pt2onnx.ExportResult) -> set[str]:
    return {n.op_type for n in result.model.graph}


# Three ONNX forms of relu, so each export shows which one the registry picked.
@converter("aten::relu", until=15)
def relu_as_max(op, self):
    return op.Max(self, op.constant(0.0, op.dtype_of(self)))


@converter("aten::relu", since=16)
def relu_as_clip(op, self):
    return op.Clip(self, op.constant(0.0, op.dtype_of(self)))


@converter("aten::relu", since=19)
def relu_as_relu(op, self):
    return op.Relu(self)


class ReluForms:
    """One plugin with one relu per opset range."""

    name = "ReluForms"

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.module(sys.modules[__name__])


@pytest.mark.parametrize(
    ("opset", "emitted"), [(14, "Max"), (15, "Max"), (16, "Clip"), (18, "Clip"), (19, "Relu"), (None, "Relu")]
)
def test_the_registration_with_the_highest_since_not_above_the_target_wins(opset, emitted):
    result = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=opset, plugins=[ReluForms()])
    assert result.report.opset == (opset or default_opset())
    assert result.model.opset_imports[""] == result.report.opset
    assert emitted in _op_types(result) and not {"Max", "Clip", "Relu"} - {emitted} & _op_types(result)
    assert result.report.provider("aten::relu.default") == "ReluForms"


class ProjectRelu:
    """A higher layer's relu, for opsets 20 and later only."""

    name = "ProjectRelu"

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", relu_as_max, since=20)


def test_layers_decide_only_between_registrations_that_serve_the_target():
    # At 19 the plugins= layer has nothing for relu: the builtin converter still converts it.
    below = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=19, plugins=[ProjectRelu()])
    assert below.report.provider("aten::relu.default") == "aten" and "Max" not in _op_types(below)
    # From 20 on, the higher layer wins as always and the report says what it shadows.
    above = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=20, plugins=[ProjectRelu()])
    assert above.report.provider("aten::relu.default") == "ProjectRelu" and "Max" in _op_types(above)
    usage = next(u for u in above.report.ops if u.op == "aten::relu.default")
    assert any("aten" in s for s in usage.shadowed)


class OldRelu:
    name = "OldRelu"

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", relu_as_max, until=17)


class NewRelu:
    name = "NewRelu"

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", relu_as_relu, since=18)


class AnyRelu:
    name = "AnyRelu"

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", relu_as_clip)


@pytest.mark.parametrize(("opset", "emitted", "provider"), [(17, "Max", "OldRelu"), (18, "Relu", "NewRelu")])
def test_two_plugins_of_one_layer_with_disjoint_ranges_do_not_conflict(opset, emitted, provider):
    result = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=opset, plugins=[OldRelu(), NewRelu()])
    assert emitted in _op_types(result) and result.report.provider("aten::relu.default") == provider


def test_two_plugins_of_one_layer_that_both_serve_the_target_still_conflict():
    with pytest.raises(PluginConflictError, match=r"'NewRelu' \(converter\), 'AnyRelu' \(converter\)"):
        pt2onnx.export(ReluNet(), (torch.randn(3, 4),), opset=18, plugins=[NewRelu(), AnyRelu()])
    # Below 18 only AnyRelu serves: no conflict.
    result = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=17, plugins=[NewRelu(), AnyRelu()])
    assert result.report.provider("aten::relu.default") == "AnyRelu"


@pytest.mark.parametrize(
    ("since", "until", "message"),
    [(18, 17, "since=18 is above until=17"), (0, None, "since=0 is not an opset"), (None, "17", "until='17'")],
)
def test_a_range_that_holds_no_opset_is_refused_where_it_is_written(since, until, message):
    with pytest.raises(ValueError, match=message):
        converter("aten::relu", since=since, until=until)

    class Bad:
        name = "Bad"

        @hookimpl
        def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
            register.converter("aten::relu", relu_as_max, since=since, until=until)

    with pytest.raises(PluginError, match=f"plugin 'Bad'.*{message}"):
        pt2onnx.export(ReluNet(), (torch.randn(3, 4),), plugins=[Bad()])


@torch.library.custom_op("pt2onnx_opsets::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@torch.library.custom_op("pt2onnx_opsets::unhandled", mutates_args=())
def unhandled(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@unhandled.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class TwiceSince18:
    name = "TwiceSince18"

    @hookimpl
    def pt2onnx_register_custom_ops(self, register: CustomOpRegistrar) -> None:
        register.expand("pt2onnx_opsets::twice", lambda op, x: op.Add(x, x), since=18)


class TwoCustomOps(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return unhandled(twice(x))


class Twice(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return twice(x) + 1.0


def test_an_op_converted_only_at_other_opsets_is_listed_with_the_oldest_opset_that_works():
    with pytest.raises(UnsupportedOpsError) as info:
        pt2onnx.export(TwoCustomOps(), (torch.randn(3),), opset=17, plugins=[TwiceSince18()])
    message = str(info.value)
    assert "2 op(s) in the graph have no converter" in message
    assert "pt2onnx_opsets::unhandled.default: 1 node(s)" in message
    assert (
        "pt2onnx_opsets::twice.default: 1 node(s)" in message
        and "opsets: converted at opsets 18+ (TwiceSince18), not at 17; the oldest that works: opset=18" in message
    )
    assert info.value.hint.startswith(
        "pt2onnx_opsets::twice.default is converted at other opsets than 17: export at an opset its line names"
    )
    assert "pt2onnx_opsets::unhandled.default is a custom op" in info.value.hint
    assert info.value.other_opsets == {
        "pt2onnx_opsets::twice.default": "converted at opsets 18+ (TwiceSince18), not at 17; "
        "the oldest that works: opset=18"
    }
    # unknown_custom_ops="emit" emits only ops that no plugin handles at any opset.
    with pytest.raises(UnsupportedOpsError, match="twice") as emitted:
        pt2onnx.export(TwoCustomOps(), (torch.randn(3),), opset=17, plugins=[TwiceSince18()], unknown_custom_ops="emit")
    assert "pt2onnx_opsets::unhandled.default" not in str(emitted.value)
    assert_exports_like_eager(Twice(), (torch.randn(3),), opset=18, plugins=[TwiceSince18()])


def test_check_opset_accepts_14_to_the_newest_onnx_knows():
    assert MIN_OPSET == 14
    assert pt2onnx.export(ReluNet(), (torch.randn(2),), opset=14).model.opset_imports[""] == 14
    with pytest.raises(OptionError, match=r"opset=13 is not supported: pt2onnx exports opsets 14 to \d+"):
        pt2onnx.export(ReluNet(), (torch.randn(2),), opset=13)


@pytest.mark.parametrize(
    ("op_type", "opset", "kernel"),
    # Identity and Gelu have kernels; Swish and CastLike are run as their function bodies.
    # Attention is ONNX's from 23; NoSuchOp is nobody's.
    [
        ("Identity", 14, True),
        ("Gelu", 20, True),
        ("Swish", 24, False),
        ("CastLike", 21, False),
        ("Attention", 22, False),
        ("NoSuchOp", 24, False),
    ],
)
def test_onnxruntime_has_kernel_tells_a_kernel_from_a_function_body(op_type, opset, kernel):
    assert onnxruntime_has_kernel(op_type, opset) is kernel


def test_an_opset_onnxruntime_does_not_know_has_no_kernel():
    assert onnxruntime_has_kernel("Identity", newest_opset()) and not onnxruntime_has_kernel("Identity", 10_000)


def test_the_default_opset_is_the_newest_that_keeps_onnxruntimes_attention_kernel():
    # onnxruntime 1.32 has kernels for Attention-23 and -24, none for Attention-25: a Llama
    # exported at 25+ runs the explicit form, 1.2-1.4x slower (benchmarks/results/attention_forms.md).
    default = default_opset()
    assert KEPT_KERNELS == ("Attention",)
    assert MIN_OPSET <= default <= newest_opset()
    assert onnxruntime_has_kernel("Attention", default)
    assert not any(onnxruntime_has_kernel("Attention", v) for v in range(default + 1, newest_opset() + 1))
    assert pt2onnx.export(ReluNet(), (torch.randn(2),)).model.opset_imports[""] == default


def test_the_harness_exports_at_the_opset_it_is_given():
    for opset in (14, 17):
        result = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=opset)
        assert result.report.opset == opset and result.model.opset_imports[""] == opset


class OpsetsSeen:
    """A plugin whose relu notes every opset it converts at, and is wrong below ``wrong_below``."""

    name = "OpsetsSeen"

    def __init__(self, *, since: int | None = None, wrong_below: int = 0) -> None:
        self.since, self.wrong_below, self.opsets = since, wrong_below, []

    def relu(self, op, self_):
        self.opsets.append(op.opset)
        if op.opset < self.wrong_below:
            return op.Abs(self_)  # |x| is not relu: wrong at these opsets only
        return op.Max(self_, op.constant(0.0, op.dtype_of(self_)))

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", self.relu, since=self.since)


def test_the_harness_also_proves_a_converter_at_its_minimum_opset_14():
    plugin = OpsetsSeen()
    result = assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[plugin])
    assert result.report.opset == default_opset()
    assert plugin.opsets == [default_opset(), MIN_OPSET]


def test_a_converter_wrong_only_below_some_opset_fails_the_harness_naming_that_opset():
    plugin = OpsetsSeen(wrong_below=16)
    with pytest.raises(AssertionError) as info:
        assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[plugin])
    message = str(info.value)
    assert message.startswith(
        f"ONNX model differs from eager PyTorch at opset 14 (the oldest pt2onnx exports), "
        f"after the default opset {default_opset()} passed:"
    )
    assert plugin.opsets == [default_opset(), 14]


def test_a_converter_registered_since_17_is_proven_at_17(monkeypatch):
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "1")
    plugin = OpsetsSeen(since=17, wrong_below=18)
    with pytest.raises(AssertionError) as info:
        assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[plugin])
    assert "at opset 17 (registered since=17: converter aten::relu of OpsetsSeen), after the default" in str(info.value)
    right = OpsetsSeen(since=17)
    assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[right])
    assert right.opsets == [default_opset(), 17]


def test_a_converter_that_fails_at_its_minimum_opset_fails_the_harness_naming_it():
    def relu_reshaped_to_its_shape_from_0(op, self):
        return op.Reshape(op.Relu(self), op.Shape(self, start=0))  # Shape's start is opset 15

    class ShapeFrom0:
        name = "ShapeFrom0"

        @hookimpl
        def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
            register.converter("aten::relu", relu_reshaped_to_its_shape_from_0)

    with pytest.raises(
        AssertionError,
        match=r"export failed at opset 14 \(the oldest pt2onnx exports\), after the default opset \d+ passed: ",
    ):
        assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[ShapeFrom0()])


class ArgumentSince17:
    """A relu that declares its argument needs opset 17 (op.unsupported(since=17)), and is wrong at 17."""

    name = "ArgumentSince17"

    def __init__(self, *, wrong_at_17: bool) -> None:
        self.wrong_at_17, self.opsets = wrong_at_17, []

    def relu(self, op, self_):
        self.opsets.append(op.opset)
        if op.opset < 17:
            raise op.unsupported("self", "this tensor", f"needs opset 17 (target: {op.opset})", since=17)
        if op.opset == 17 and self.wrong_at_17:
            return op.Abs(self_)
        return op.Relu(self_)

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", self.relu)


def test_an_argument_a_converter_declares_newer_is_proven_at_the_opset_it_declares(monkeypatch):
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "1")
    right = ArgumentSince17(wrong_at_17=False)
    assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[right])
    assert right.opsets == [default_opset(), 14, 17]
    with pytest.raises(AssertionError) as info:
        assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[ArgumentSince17(wrong_at_17=True)])
    assert "at opset 17 (argument self='this tensor' needs since=17), after the default" in str(info.value)
    with pytest.raises(pt2onnx.errors.UnsupportedArgumentError, match="needs opset 17") as error:
        pt2onnx.export(ReluNet(), (torch.randn(3, 4),), opset=16, plugins=[ArgumentSince17(wrong_at_17=False)])
    assert error.value.since == 17 and error.value.hint == "export with opset>=17"


class WrongOldForm:
    """A relu right in its form for 17 and later, wrong in its form for older opsets."""

    name = "WrongOldForm"

    @hookimpl
    def pt2onnx_register_converters(self, register: ConverterRegistrar) -> None:
        register.converter("aten::relu", lambda op, self: op.Abs(self), until=16)
        register.converter("aten::relu", relu_as_relu, since=17)


def test_an_op_with_a_form_per_opset_range_is_proven_in_its_oldest_form_too(monkeypatch):
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "1")
    with pytest.raises(AssertionError, match=r"differs from eager PyTorch at opset 14 \(the oldest pt2onnx exports\)"):
        assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), plugins=[WrongOldForm()])


@pytest.mark.parametrize(
    ("every", "checked"),
    # A large N selects, of these fixed inputs, only the first call's, and those again.
    [("1", [True] * 4), ("1000003", [True, False, False, True]), ("0", [False] * 4)],
)
def test_which_calls_of_a_test_check_the_oldest_opset_too(monkeypatch, every, checked):
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, every)
    plugin = OpsetsSeen()
    for k, expected in zip([0, 1, 2, 0], checked):
        plugin.opsets.clear()
        assert_exports_like_eager(ReluNet(), (torch.full((3, 4), k - 1.0),), plugins=[plugin])
        assert plugin.opsets == ([default_opset(), MIN_OPSET] if expected else [default_opset()])


def test_which_calls_check_the_oldest_opset_depends_on_values_not_memory_layout(monkeypatch):
    # A size-1 dim may carry any stride (hypothesis's index tensors do); the choice must
    # neither fail on it nor differ from the same values laid out densely.
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "1000003")
    dense = torch.tensor([[-1.0]])
    strided = torch.tensor([[-1.0, 5.0]]).as_strided((1, 1), (2, 2))
    for x in [dense, strided]:
        plugin = OpsetsSeen()
        assert_exports_like_eager(ReluNet(), (x,), plugins=[plugin])
        assert plugin.opsets == [default_opset(), MIN_OPSET]


def test_hypothesis_replaying_a_failing_example_meets_the_same_check(monkeypatch):
    # The first example fails at opset 14; shrinking tries others, which are not checked
    # there, and the replay of the failing one must be, or hypothesis reports it as flaky.
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "1000003")

    @settings(max_examples=5, deadline=None, database=None)
    @given(x=st.floats(-10, -1))
    def check(x):
        assert_exports_like_eager(ReluNet(), (torch.full((2,), x),), plugins=[OpsetsSeen(wrong_below=16)])

    with pytest.raises(AssertionError, match=r"differs from eager PyTorch at opset 14"):
        check()


def test_a_wrong_oldest_opset_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv(OLDEST_OPSET_EVERY_ENV, "every")
    with pytest.raises(ValueError, match=r"PT2ONNX_OLDEST_OPSET_EVERY='every': expected 0 \(never\), 1"):
        assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),))


def test_an_explicit_opset_is_the_only_one_the_harness_exports_at():
    plugin = OpsetsSeen(wrong_below=16)
    assert_exports_like_eager(ReluNet(), (torch.randn(3, 4),), opset=16, plugins=[plugin])
    assert plugin.opsets == [16]


PROJECT_RELU = """
from pt2onnx.plugin import converter, hookimpl
import sys

@converter("aten::relu.default", until=17)
def relu_as_max(op, self):
    return op.Max(self, op.constant(0.0, op.dtype_of(self)))

@hookimpl
def pt2onnx_register_converters(register):
    register.module(sys.modules[__name__])
"""


def test_ops_shows_each_registration_with_its_opset_range(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text('[tool.pt2onnx]\nplugins = ["old_relu"]\n')
    (tmp_path / "old_relu.py").write_text(PROJECT_RELU)
    monkeypatch.chdir(tmp_path)
    assert main(["ops", "aten::relu.default", "--opset", "17"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "aten::relu.default: converter old_relu.relu_as_max from old_relu [project] (opsets up to 17)"
    assert out[1] == "    shadows aten [builtin]"
    assert main(["ops", "aten::relu.default", "--opset", "18"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("aten::relu.default: converter pt2onnx_aten.") and out[0].endswith("from aten [builtin]")
    assert out[1] == "aten::relu.default: at opsets up to 17: converter old_relu.relu_as_max from old_relu [project]"
    assert main(["ops", "aten::relu.default", "--opset", "18", "--json"]) == 0
    (data,) = json.loads(capsys.readouterr().out)
    assert data["opset"] == 18
    assert [(c["plugin"], c["since"], c["until"]) for c in data["converters"]] == [("aten", None, None)]
    assert [(c["plugin"], c["since"], c["until"], c["function"]) for c in data["other_opsets"]] == [
        ("old_relu", None, 17, "old_relu.relu_as_max")
    ]
    assert main(["ops", "aten::relu.default", "--opset", "13"]) == 2
    assert "opset=13 is not supported" in capsys.readouterr().err


class HandWrittenRMSNorm(torch.nn.Module):
    """The RMS norm transformers write out by hand, which ``fuse_rms_norm`` (opset 23) fuses."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6))


def test_a_rewrite_registered_for_newer_opsets_is_off_and_the_report_says_why():
    x = torch.randn(2, 3, 8)
    newest = assert_exports_like_eager(HandWrittenRMSNorm(), (x,), opset=23)
    assert "RMSNormalization" in _op_types(newest) and "fuse_rms_norm" in {p.name for p in newest.report.passes}
    assert "fuse_rms_norm" not in newest.report.passes_off
    older = assert_exports_like_eager(HandWrittenRMSNorm(), (x,), opset=19)
    assert "RMSNormalization" not in _op_types(older)
    assert "fuse_rms_norm" not in {p.name for p in older.report.passes}
    assert older.report.passes_off["fuse_rms_norm"] == "registered for opsets 23+, the target is 19"
    assert older.report.passes_off["fuse_gelu_tanh"] == "registered for opsets 20+, the target is 19"
    assert "rewrites off at opset 19:" in str(older.report)
    assert "off at opset 19: fuse_rms_norm: registered for opsets 23+" in older.report.to_markdown()
    assert older.report.to_dict()["passes_off"]["fuse_rms_norm"].startswith("registered for opsets 23+")
    # optimize= may still name a pass that is off at this opset.
    named = pt2onnx.export(HandWrittenRMSNorm(), (x,), opset=19, optimize={"fuse_rms_norm": False})
    assert named.verify(x).ok


# -- the benchmark's models and the ExportDB examples at 14, 17, the default and the newest --

OPSETS = [14, 17, None, *([newest_opset()] if newest_opset() != default_opset() else [])]


def _benchmark_models() -> Any:
    """``benchmarks/model_cases.py``, loaded from its file: benchmarks/ stays off the session's path."""
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "model_cases.py"
    spec = importlib.util.spec_from_file_location("benchmark_model_cases", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


BENCHMARK = _benchmark_models()
# The standard set in its smallest configurations: llama_125m is llama_tiny's architecture
# at full size, encoder_12l the encoder at 12 layers (here 1).
SMALLEST = {name: build for name, build in BENCHMARK.MODELS.items() if name not in ("llama_125m", "encoder_12l")}
SMALLEST["encoder_1l"] = lambda: BENCHMARK.encoder(1)


@pytest.mark.slow
@pytest.mark.drawn(22, "every converter's opsets are proven by its property tests; these are whole models")
@pytest.mark.parametrize("opset", OPSETS, ids=lambda o: f"opset{o or 'default'}")
@pytest.mark.parametrize("name", sorted(SMALLEST))
def test_benchmark_model_exports_and_verifies(name, opset):
    case = SMALLEST[name]()
    result = pt2onnx.export(case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes, opset=opset)
    assert result.model.opset_imports[""] == (opset or default_opset())
    onnx.checker.check_model(result.model_proto, full_check=True)  # every node valid at that opset
    for inputs in (case.inputs, case.second):
        check = result.verify(**inputs)
        assert check.ok, f"{check}\n{result.report}"


@pytest.mark.slow
@pytest.mark.parametrize("opset", OPSETS, ids=lambda o: f"opset{o or 'default'}")
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_exportdb_example_exports_and_verifies(name, opset):
    case = EXAMPLES[name]
    if case.support_level == SupportLevel.NOT_SUPPORTED_YET:
        pytest.skip("torch.export cannot capture it (tests/test_exportdb.py checks the error)")
    model, kwargs = copy.deepcopy(case.model), dict(case.example_kwargs or {})
    result = pt2onnx.export(model, case.example_args, kwargs, dynamic_shapes=case.dynamic_shapes, opset=opset)
    assert result.model.opset_imports[""] == (opset or default_opset())
    onnx.checker.check_model(result.model_proto, full_check=True)  # every node valid at that opset
    checks = [(case.example_args, kwargs)]
    if case.dynamic_shapes is not None:
        checks.append(second_input(case))
    for args, inputs in checks:
        check = result.verify(*args, **inputs)
        assert check.ok, f"{check}\n{result.report}"


FLOAT8 = [torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz]


class Float8Eye(torch.nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        return torch.eye(x.shape[0], dtype=self.dtype), (x * 3).to(self.dtype)


@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_float8_outputs_come_back_from_onnxruntime_in_their_dtype(dtype):
    # numpy has no float8: ExportResult.run reads them as raw bytes (as bfloat16). The
    # harness also exports again below opset 19, where float8 is refused with since=19.
    x = torch.tensor([0.5, -1.25, 2.0])
    result = assert_exports_like_eager(Float8Eye(dtype), (x,))
    eye, scaled = result.run(x)
    assert eye.dtype == scaled.dtype == dtype
    assert torch.equal(scaled.view(torch.uint8), (x * 3).to(dtype).view(torch.uint8))


def test_float8_below_opset_19_names_the_opset_that_has_it():
    with pytest.raises(pt2onnx.errors.UnsupportedArgumentError, match="float8 types from opset 19") as info:
        pt2onnx.export(Float8Eye(torch.float8_e5m2), (torch.ones(3),), opset=18)
    assert info.value.since == 19
