"""A bounded, seeded sample of the model zoo (benchmarks/zoo) through pt2onnx: static and auto, in onnxruntime.

One model per library (four under ``HYPOTHESIS_PROFILE=thorough``), drawn from those the full zoo run marks as passing
(``catalogue.EXPECTED_PASS``), with the seed of ``HYPOTHESIS_SEED`` when set (so every CI
run tries others, and ``HYPOTHESIS_SEED=N`` reproduces one), else a fixed one. Each model
runs through the zoo runner's own ``run_model``: in a process of its own, under a timeout.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # benchmarks/ is no installed package: imported from the checkout
    sys.path.insert(0, str(ROOT))

from benchmarks.zoo.catalogue import EXPECTED_PASS  # noqa: E402
from benchmarks.zoo.run import markdown, run_model  # noqa: E402

pytestmark = pytest.mark.slow

#: One per library keeps the sample to about a minute of CI's 30 (each model takes ~15-20 s).
PER_LIBRARY = 4 if os.environ.get("HYPOTHESIS_PROFILE") == "thorough" else 1
SEED = os.environ.get("HYPOTHESIS_SEED", "25")
#: Seconds per model, all its steps: the slowest expected model takes ~30 s alone.
TIMEOUT = 120


def sample(seed: str, per_library: int = PER_LIBRARY) -> list[tuple[str, str]]:
    """``per_library`` expected-to-pass models of each library, drawn with ``seed``."""
    rng = random.Random(seed)
    return [
        (library, name)
        for library, names in sorted(EXPECTED_PASS.items())
        for name in sorted(rng.sample(sorted(names), min(per_library, len(names))))
    ]


@pytest.mark.parametrize(("library", "name"), sample(SEED))
def test_zoo_model_passes(library: str, name: str) -> None:
    print(f"zoo sample (seed {SEED}): {library} {name}")
    rows = run_model(
        library, name, exporters=["pt2onnx"], modes=["static", "auto"], runtimes=["onnxruntime"], timeout=TIMEOUT
    )
    assert [(r["mode"], r["built"]) for r in rows] == [("static", "built"), ("auto", "built")]
    failures = [
        f"{r['mode']} {step}: {r[step]}" for r in rows for step in ("export", "onnxruntime") if r.get(step) != "pass"
    ]
    assert not failures, "\n".join(failures)


def test_sample_is_bounded_and_seeded() -> None:
    chosen = sample(SEED)
    assert chosen == sample(SEED)
    assert all(name in EXPECTED_PASS[library] for library, name in chosen)
    assert len(chosen) <= PER_LIBRARY * len(EXPECTED_PASS)


def test_the_table_marks_only_listed_failures_of_pt2onnx_as_expected() -> None:
    def row(model: str, exporter: str, status: str) -> dict:
        return {"library": "transformers", "model": model, "exporter": exporter, "mode": "static", "built": "built"} | {
            "export": "pass",
            "onnxruntime": status,
        }

    diff = "fail: numerics: on the example: output 0: max abs diff 0.429"
    rows = [row("paligemma", "pt2onnx", diff), row("paligemma", "torch.onnx", diff), row("llama", "pt2onnx", diff)]
    failures = [line for line in markdown(rows, "run.py", "now", {}).splitlines() if "max abs diff 0.429" in line]
    assert len(failures) == 3
    assert "two attention paths disagree" in failures[0]
    assert failures[1].endswith("|  |") and failures[2].endswith("|  |")


def test_an_other_input_torch_refuses_is_listed_apart_not_as_a_failure() -> None:
    refused = "refused by torch's guards: Guard failed: (x_dim2 - 1)//32 + 1 == 2"
    row = {"library": "timm", "model": "mobilevit_xxs", "exporter": "pt2onnx", "mode": "auto", "built": "built"}
    row |= {"export": "pass", "onnxruntime": "pass", "other_input": refused}
    table = markdown([row], "run.py", "now", {})
    assert "| timm | pt2onnx | 1 | 0 | - | - | - | 1/1 | 1/1 | 0/1 |" in table
    failures = table.split("## Failures")[1].split("## Other inputs")[0]
    assert "mobilevit_xxs" not in failures
    assert (
        f"| timm | mobilevit_xxs | pt2onnx | {refused} |" in table.split("## Other inputs torch's program refuses")[1]
    )


def test_the_refusal_of_torch_onnx_is_its_programs_own_guard_check() -> None:
    import torch
    from benchmarks.zoo.run import _guard_failure

    class PairsWhereEven(torch.nn.Module):
        def forward(self, x):
            if x.shape[1] % 2 == 0:
                return x.reshape(x.shape[0], -1, 2).sum(-1)
            return x

    auto = torch.export.Dim.AUTO
    program = torch.export.export(PairsWhereEven(), (torch.randn(3, 8),), dynamic_shapes=({0: auto, 1: auto},))
    assert _guard_failure(program, (torch.randn(3, 12),), {}) is None
    assert "Guard failed" in (_guard_failure(program, (torch.randn(3, 7),), {}) or "")


def test_a_run_past_the_tolerance_passes_only_as_close_to_exact_as_eager_float32(monkeypatch) -> None:
    import numpy as np
    import torch
    from benchmarks.zoo import run
    from benchmarks.zoo.catalogue import Case

    class Cancels(torch.nn.Module):
        """One large sum in two orders, subtracted: 0 in float64, float32 rounding noise (0.06) in eager."""

        def forward(self, x):
            big = x * 1e4
            return big.sum(-1, keepdim=True) - big.sort(-1).values.cumsum(-1)[..., -1:]

    torch.manual_seed(0)
    case = Case(Cancels(), (torch.randn(1, 4096),))
    check = run.Check(case, case.args, case.kwargs)
    exact = check.exact()
    assert exact is not None and float((check.expected[0].double() - exact[0]).abs().max()) > 1e-3
    for offset, passes in ((0.0, True), (1.0, False)):
        got = [(exact[0] + offset).float().numpy()]
        monkeypatch.setattr(run, "_run_onnxruntime", lambda path, feeds, got=got: got)
        result = run.check_runtime("onnxruntime", Path("unused.onnx"), case, [check])
        assert (result["status"] == "pass") is passes, result
        measured = result.get("numerics", "") if passes else result["status"]
        assert "from eager in float64, eager's own float32 run" in measured
    assert np.isfinite(result["max_abs_diff"])


def test_the_sizes_a_dynamic_export_returns_are_compared_with_eagers_ints(tmp_path) -> None:
    import torch
    from benchmarks.zoo import run
    from benchmarks.zoo.catalogue import Case

    import pt2onnx

    class WithSize(torch.nn.Module):
        """Returns its input's width beside a tensor, as MaskFormer-Swin returns its stages' sizes."""

        def forward(self, x):
            return x * 2, (x.shape[-1],)

    case = Case(WithSize(), (torch.randn(2, 5),))
    check = run.Check(case, case.args, case.kwargs)
    for dynamic, outputs in ((None, 1), ("auto", 2)):
        path = tmp_path / f"{dynamic}.onnx"
        pt2onnx.export(case.model, case.args, dynamic_shapes=dynamic, f=path, quiet=True)
        result = run.check_runtime("onnxruntime", path, case, [check])
        assert result["status"] == "pass", result
        assert len(check.expected_for(run._run_onnxruntime(path, check.feeds))) == outputs


def test_a_buffer_the_model_updates_is_no_output_compared_with_eagers(tmp_path) -> None:
    import onnx
    import torch
    from benchmarks.zoo import run
    from benchmarks.zoo.catalogue import Case

    import pt2onnx

    class ReassignsItsTable(torch.nn.Module):
        """CTRL: ``self.pos_encoding = self.pos_encoding.to(device)`` in forward, a buffer mutation."""

        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.randn(5))

        def forward(self, x):
            self.table = self.table.to(x.device)
            return x * self.table

    case = Case(ReassignsItsTable(), (torch.randn(2, 5),))
    check = run.Check(case, case.args, case.kwargs)
    path = tmp_path / "m.onnx"
    pt2onnx.export(case.model, case.args, f=path, quiet=True)
    assert [o.name for o in onnx.load(path).graph.output][1:] == ["table.updated"]
    for runtime in ("onnxruntime", "openvino"):
        assert run.check_runtime(runtime, path, case, [check])["status"] == "pass"


def test_keywords_a_models_kwargs_catches_are_fed_by_their_names(tmp_path) -> None:
    import torch
    from benchmarks.zoo import run
    from benchmarks.zoo.catalogue import Case

    import pt2onnx

    class TakesMore(torch.nn.Module):
        """DeepSeek-OCR2's SAM encoder: ``forward(pixel_values, **kwargs)``, called with ``input_ids`` too."""

        def forward(self, pixel_values, **kwargs):
            return pixel_values * 2 + kwargs["input_ids"].sum()

    # Called with input_ids first: the file's inputs come in that order, the signature's the other way.
    case = Case(TakesMore(), (), {"input_ids": torch.tensor([[1, 2]]), "pixel_values": torch.randn(1, 3)})
    check = run.Check(case, case.args, case.kwargs)
    path = tmp_path / "m.onnx"
    pt2onnx.export(case.model, case.args, case.kwargs, f=path, quiet=True)
    assert run.check_runtime("onnxruntime", path, case, [check])["status"] == "pass"


def test_a_shrunk_mamba2_config_keeps_its_heads_tiling_the_expanded_width():
    # Mamba2's config validator requires hidden_size * expand == num_heads * head_dim: the
    # generic head_dim the zoo gives attention models broke it, and the type never built.
    from benchmarks.zoo.catalogue import shrink_config
    from transformers import Mamba2Config

    full = Mamba2Config().to_dict()
    config = Mamba2Config(**{**full, **shrink_config(full)})
    assert config.hidden_size * config.expand == config.num_heads * config.head_dim
    assert config.hidden_size < full["hidden_size"] and config.num_hidden_layers < full["num_hidden_layers"]


def test_a_shrunk_latent_attention_config_keeps_a_key_value_head_per_query_head():
    # GLM-4-MoE-Lite's latent attention projects keys and values for every query head: shrunk
    # to fewer key/value heads, only eager SDPA's enable_gqa ran it and every capture failed.
    from benchmarks.zoo.catalogue import shrink_config
    from transformers import AutoConfig

    full = AutoConfig.for_model("glm4_moe_lite").to_dict()
    shrunk = shrink_config(full)
    assert shrunk["num_key_value_heads"] == shrunk["num_attention_heads"] < full["num_attention_heads"]
    llama = AutoConfig.for_model("llama").to_dict()  # no latent attention: grouped heads as before
    assert shrink_config(llama)["num_key_value_heads"] < shrink_config(llama)["num_attention_heads"]


@pytest.mark.parametrize(
    "name",
    [
        # Inkling2's experts (transformers::grouped_mm_fallback) were 3.2e-4 off in OpenVINO
        # while the rows past the last expert were a Pad, or zeros concatenated; a Where now.
        "inkling2_loop_text",
        # GroupViT's attention did not compile in OpenVINO once onnxscript's rules had folded
        # its bmm of flattened heads into a MatMul of a 3-D and a 4-D operand.
        "groupvit_vision_model",
        # OpenVINO names Llama 4's vision input "pad" as well as pixel_values, and any_name
        # gave "pad": the harness fed the inputs by position, in the wrong order.
        "llama4_vision_model",
    ],
)
def test_models_openvino_got_wrong_run_right_there(tmp_path, name) -> None:
    pytest.importorskip("openvino")
    from benchmarks.zoo import run
    from benchmarks.zoo.catalogue import entry

    import pt2onnx

    case = entry("transformers", name).build()
    check = run.Check(case, case.args, case.kwargs)
    path = tmp_path / "m.onnx"
    pt2onnx.export(case.model, case.args, case.kwargs, f=path, quiet=True)
    assert run.check_runtime("openvino", path, case, [check])["status"] == "pass"


@pytest.mark.parametrize(
    "name",
    [
        # Nemotron 3's diarization encoder sizes values by the query heads and keys by the
        # key/value heads: shrunk to fewer key/value heads, it ran eagerly only (SDPA's enable_gqa).
        "nemotron3_diarization_audio",
        # Llama 4's text model rotates queries and keys in complex numbers (polar, a complex product).
        "llama4_text",
        # Llama 4's vision encoder: its rotations are a complex buffer; its pixel shuffle did not
        # build before the shrunk MLP read hidden_size / ratio^2 features.
        "llama4_vision_model",
        # ViT-MAE draws a random noise to mask patches unless given one, UnivNet one to vocode
        # from: the zoo gives it.
        "vit_mae",
        "univnet",
    ],
)
def test_models_the_zoo_could_not_build_or_export_match_eager_now(tmp_path, name) -> None:
    from benchmarks.zoo import run
    from benchmarks.zoo.catalogue import entry

    import pt2onnx

    case = entry("transformers", name).build()
    check = run.Check(case, case.args, case.kwargs)
    path = tmp_path / "m.onnx"
    pt2onnx.export(case.model, case.args, case.kwargs, f=path, quiet=True)
    assert run.check_runtime("onnxruntime", path, case, [check])["status"] == "pass"


def test_a_resumed_run_keeps_the_models_it_finished_and_runs_only_the_others() -> None:
    from benchmarks.zoo.catalogue import Entry
    from benchmarks.zoo.run import resumed

    def row(model: str) -> dict[str, str]:
        return {"library": "timm", "model": model, "exporter": "pt2onnx", "mode": "static", "export": "pass"}

    chosen = [Entry("timm", name, lambda: None) for name in ("a", "b", "c")]
    record = {"versions": {"torch": "2.13.0"}, "rows": [row("a"), row("z")]}
    rows, rest = resumed(record, chosen, {"torch": "2.13.0"})
    assert rows == [row("a")]  # "z", outside this run's choice, does not enter its table
    assert [e.name for e in rest] == ["b", "c"]
    with pytest.raises(SystemExit, match="earlier run had"):
        resumed(record, chosen, {"torch": "2.12.0"})


def test_each_exporter_runs_in_a_process_of_its_own_under_the_whole_timeout(monkeypatch) -> None:
    import subprocess

    from benchmarks.zoo import run

    calls = []

    def fake_run(command, *, timeout, **kwargs):
        exporter = command[command.index("--exporters") + 1]
        calls.append((exporter, timeout))
        if exporter == "pt2onnx":  # the first one's hang does not cut the second one's time
            raise subprocess.TimeoutExpired(command, timeout)
        return subprocess.CompletedProcess(command, 3, "", "worker died\n")

    monkeypatch.setattr(run.subprocess, "run", fake_run)
    rows = run.run_model("timm", "test_vit", ("pt2onnx", "torch.onnx"), ("static", "auto"), ("onnxruntime",), 50)
    assert calls == [("pt2onnx", 50), ("torch.onnx", 50)]
    exports = {(r["exporter"], r["mode"]): r["export"] for r in rows}
    assert exports == {
        ("pt2onnx", "static"): "fail: timeout after 50 s",
        ("pt2onnx", "auto"): "fail: timeout after 50 s",
        ("torch.onnx", "static"): "fail: crash: exit 3: worker died",
        ("torch.onnx", "auto"): "fail: crash: exit 3: worker died",
    }


def test_runs_merge_with_a_later_run_of_a_row_replacing_the_earlier_one() -> None:
    from benchmarks.zoo.run import merged

    def row(model: str, exporter: str, export: str) -> dict[str, str]:
        return {"library": "timm", "model": model, "exporter": exporter, "mode": "auto", "export": export}

    first = {
        "command": "a",
        "date": "d1",
        "versions": {"torch": "2.13.0"},
        "rows": [row("x", "pt2onnx", "timeout"), row("x", "torch.onnx", "fail"), row("y", "pt2onnx", "pass")],
    }
    again = {
        "command": "b",
        "date": "d2",
        "versions": {"torch": "2.13.0"},
        "rows": [row("x", "pt2onnx", "pass"), row("z", "pt2onnx", "pass")],
    }
    record = merged([first, again])
    # x's torch.onnx row, not run again, stays.
    assert record["rows"] == [
        row("x", "pt2onnx", "pass"),
        row("x", "torch.onnx", "fail"),
        row("y", "pt2onnx", "pass"),
        row("z", "pt2onnx", "pass"),
    ]
    assert record["command"] == "a + b"
    # Dates span every run's, whichever order the runs merge in (a resumed run's date is later).
    earlier = {**first, "date": "2026-11-28 23:03 UTC to 2026-11-29 00:56 UTC"}
    resumed = {**again, "date": "2026-11-29 01:34 UTC"}
    assert merged([resumed, earlier])["date"] == "2026-11-28 23:03 UTC to 2026-11-29 01:34 UTC"
    with pytest.raises(SystemExit, match="do not mix"):
        merged([first, {**again, "versions": {"torch": "2.12.0"}}])


def test_shards_split_the_chosen_models_between_runs(tmp_path, monkeypatch) -> None:
    from benchmarks.zoo import run

    ran: list[str] = []
    monkeypatch.setattr(
        run,
        "run_model",
        lambda library, name, *rest: ran.append(name) or [{"exporter": "e", "mode": "m", "model_s": 0, "built": "no"}],
    )
    monkeypatch.setattr(run, "markdown", lambda *args: "")
    names = [e.name for e in run.select(["timm"], None, 0)]
    for k in range(3):
        run.main(["--library", "timm", "--shard", f"{k}/3", "--out", str(tmp_path / f"shard{k}")])
    assert sorted(ran) == sorted(names) and len(ran) == len(names)
    assert ran[: len(names[0::3])] == names[0::3]
