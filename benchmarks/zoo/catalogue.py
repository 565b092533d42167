"""The zoo's model lists: per library, every model a name and a builder of a :class:`Case`.

A builder returns the model in eval mode with random weights, an example input (batch 1,
small sizes) and a second input of other sizes for the dynamic-shape check. Builders
import their library themselves, so listing names stays cheap and one model's import
trouble is that model's row.

Libraries:

- ``torchvision``: every name of ``torchvision.models.list_models()``. Its wheel here is a
  CUDA build whose C++ ops do not load, so :func:`setup_torchvision` puts it on the path
  and gives its ops Python CPU kernels (``tests/torchvision_ops.py``) first; timm needs
  the same, as it imports torchvision.
- ``timm``: one model per family: the family is the name's first word less a trailing size
  number, the model its member whose name says smallest (size word, then number; see
  :func:`timm_family`, :func:`timm_smallest`).
- ``diffusers``: the usual pipeline blocks, from tiny configs modelled on diffusers' own tests.
- ``transformers``: every model type of ``transformers.CONFIG_MAPPING``, from its default
  config shrunk by :func:`shrink_config`, as its base model (``AutoModel``).

Sizes are tried in order and the first the model runs eagerly is taken, so a model that
fixes its input size (ViT at 224) still gets one; the second input is the next size that
runs, else the same size at batch 3 (the example then at batch 2: torch holds a batch of 1
static).
"""

from __future__ import annotations

import functools
import importlib
import inspect
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
LIBRARIES = ("torchvision", "timm", "diffusers", "transformers")

#: Models seen passing with pt2onnx, static and auto, in onnxruntime (sample runs of
#: 2026-11-27, torch 2.13, transformers 5.24, timm 1.0.31, diffusers 0.42.1, onnxruntime
#: 1.32), each under ~25 s in its process with pt2onnx alone: the CI sample
#: (tests/test_zoo_sample.py) is drawn from these only. Add a model once a run shows it passing.
EXPECTED_PASS: dict[str, tuple[str, ...]] = {
    "torchvision": (
        "lraspp_mobilenet_v3_large",
        "mnasnet0_5",
        "mobilenet_v3_small",
        "resnet18",
        "shufflenet_v2_x0_5",
        "squeezenet1_0",
    ),
    "timm": (
        "convnext_atto",
        "mobilenetv3_small_050",
        "resnet10t",
        "test_convnext",
        "test_efficientnet",
        "test_resnet",
        "test_vit",
    ),
    "diffusers": (
        "AutoencoderKL.decoder",
        "AutoencoderKL.encoder",
        "DiTTransformer2DModel",
        "FluxTransformer2DModel",
        "SD3Transformer2DModel",
        "UNet2DConditionModel",
        "UNet2DModel",
    ),
    "transformers": ("bert", "clip", "gpt2", "lighton_ocr", "llama", "vit", "wav2vec2", "whisper"),
}


#: pt2onnx's failures the zoo found and that stay open, each with its reason: (library,
#: model, mode, step) -> reason; mode "*" for both modes. The results table marks them
#: "expected"; any other failure of pt2onnx is new.
EXPECTED_FAILURES: dict[tuple[str, str, str, str], str] = {
    ("timm", "lamhalobotnet50ts_256", "auto", "export"): (
        "torch's: the auto capture takes 498 s (2 s static), in sympy's simplify under torch's FloorDiv.eval, "
        "from the shape arithmetic of HaloAttn's unfold and reshapes (timm/layers/halo_attn.py); spelling "
        "out the reshapes' -1 sizes does not bring it under 600 s"
    ),
    ("transformers", "aimv2_text_model", "*", "onnxruntime"): (
        "transformers' two attention paths disagree, not the export: the text model builds a causal mask "
        "(create_causal_mask) for attention modules with is_causal=False, so eager SDPA, which skips an "
        "all-ones causal mask and relies on is_causal, attends both ways, while eager attention and any traced "
        "run apply the mask; eager SDPA and eager attention differ by 0.931, both exporters' files match eager "
        "attention within 5e-7"
    ),
    ("transformers", "aimv2_text_model", "*", "openvino"): "as its onnxruntime run (torch.onnx's file too)",
    ("transformers", "aimv2", "*", "onnxruntime"): (
        "as aimv2_text_model: eager SDPA and eager attention differ by 2.66 on its text tower, pt2onnx's file "
        "matches eager attention exactly"
    ),
    ("transformers", "aimv2", "*", "openvino"): "as its onnxruntime run (torch.onnx's file too)",
    ("transformers", "longformer", "*", "export"): (
        "torch.export's: whether any token attends globally (is_index_global_attn.flatten().any().item(), "
        "modeling_longformer.py) decides Python branches whose global path gathers a data-dependent number "
        "of tokens; transformers records the flag for the TorchScript tracer, torch.export cannot take it "
        "(torch.onnx fails the same)"
    ),
    ("transformers", "led", "*", "export"): "as longformer's: its encoder is Longformer's self-attention",
    ("transformers", "paligemma", "*", "onnxruntime"): (
        "transformers' two attention paths disagree, not the export: the config's text model has "
        "use_bidirectional_attention, so eager SDPA, skipping the all-ones mask, attends both ways, while "
        "eager attention and any traced run apply the causal mask built; eager SDPA and eager attention "
        "differ by 0.429, both exporters' files match eager attention within 5e-7"
    ),
    ("transformers", "paligemma", "*", "openvino"): "as its onnxruntime run (torch.onnx's file too)",
    ("transformers", "colpali", "*", "onnxruntime"): (
        "as paligemma, whose language model it runs: eager SDPA and eager attention differ by 0.0455, "
        "pt2onnx's file matches eager attention within 3e-8"
    ),
    ("transformers", "colpali", "*", "openvino"): "as its onnxruntime run",
    ("transformers", "phi4_multimodal_vision", "*", "onnxruntime"): (
        "transformers' two attention paths disagree, not the export: Phi4MultimodalVisionAttention sets "
        "is_causal=True in a bidirectional (SigLIP) encoder, so eager SDPA, whose all-ones bidirectional mask "
        "create_bidirectional_mask skips, attends causally, while eager attention and any traced run apply "
        "the mask; eager SDPA and eager attention differ by 4.69, pt2onnx's file matches eager attention "
        "within 4.6e-4, torch.onnx's misses eager SDPA by the same 4.69"
    ),
    ("transformers", "phi4_multimodal_vision", "*", "openvino"): "as its onnxruntime run (torch.onnx's file too)",
    ("transformers", "vilt", "*", "export"): (
        "torch.export's, and no export could match eager: ViLT's visual embedding resizes its position table "
        "once per image, to sizes read from the pixel mask's values (a Python loop over tensor values), and "
        "picks its patches with torch.multinomial, a random draw (modeling_vilt.py, visual_embed); torch.onnx "
        "fails the same capture"
    ),
    ("transformers", "superpoint", "auto", "onnxruntime"): (
        "rounding on near-ties, not the export: the random-weight model's keypoint scores are all within 1e-6 "
        "of 1/65 (a softmax of near-zero logits), and its non-maximum suppression keeps a pixel where it equals "
        "the max-pooled map; onnxruntime's Softmax is 1 ulp off torch's at some pixels, which flips one keypoint "
        "of the 64x64 input (0.859 off in keypoints, descriptors follow), where OpenVINO's file matches; "
        "no FX node before the comparison differs by more than 1e-3 (the scores by ulps)"
    ),
}


def expected_failure(library: str, model: str, mode: str, step: str) -> str | None:
    """Why pt2onnx's failure of this step is expected, or None for a failure that is new."""
    return EXPECTED_FAILURES.get((library, model, mode, step)) or EXPECTED_FAILURES.get((library, model, "*", step))


class NotBuilt(Exception):
    """The model does not build, or does not run eagerly on any input tried: not an export failure."""


@dataclass
class Case:
    """One model and its inputs.

    Attributes:
        model: the module, in eval mode.
        args, kwargs: the example input.
        other_args, other_kwargs: an input of other sizes (the dynamic export's second check).
        opset: the opset to export at, or None for each exporter's default.
        compare: whether outputs are compared elementwise (not for random-weight detections,
            whose scores tie and whose boxes then come out in any order).
    """

    model: torch.nn.Module
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    other_args: tuple[Any, ...] = ()
    other_kwargs: dict[str, Any] = field(default_factory=dict)
    opset: int | None = None
    compare: bool = True


@dataclass(frozen=True)
class Entry:
    """A model of the zoo: its library, its name, and how to build it."""

    library: str
    name: str
    build: Callable[[], Case]


# -- shared helpers -------------------------------------------------------------------


def setup_torchvision() -> None:
    """Make torchvision importable (and timm with it): tests/torchvision_ops.py puts its folder on the path
    and gives its ops CPU kernels."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    if "torchvision" not in sys.modules:
        from torchvision_ops import install

        install()


def _runs(model: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Exception | None:
    """None if ``model(*args, **kwargs)`` runs eagerly, else its error."""
    try:
        with torch.no_grad():
            model(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (any error means: not this input)
        return e
    return None


def _first_that_runs(
    model: torch.nn.Module, candidates: Iterator[tuple[tuple[Any, ...], dict[str, Any]]]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The first candidate input the model runs eagerly; NotBuilt with the last error if none."""
    error: Exception | None = None
    for args, kwargs in candidates:
        error = _runs(model, args, kwargs)
        if error is None:
            return args, kwargs
    raise NotBuilt(f"eager: {type(error).__name__}: {first_line(str(error))}")


def first_line(text: str) -> str:
    """The first non-empty line of ``text``, at most 300 characters."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _sized_case(
    model: torch.nn.Module,
    make: Callable[[int, Sequence[int]], tuple[Any, ...]],
    sizes: Sequence[Sequence[int]],
    **options: Any,
) -> Case:
    """A case whose input is ``make(batch, size)``: the first size that runs, then another size.

    A model that runs at one size only (a position table for 224 px) varies its batch
    instead: 2, then 3, since torch holds a batch of 1 static (``auto`` would refuse batch 2
    by design, for either exporter).
    """
    model.eval()
    error: Exception | None = None
    for index, size in enumerate(sizes):
        example = make(1, size)
        error = _runs(model, example, {})
        if error is None:
            others = [make(1, later) for later in sizes[index + 1 :]]
            try:
                other, _ = _first_that_runs(model, iter((o, {}) for o in others))
            except NotBuilt:
                example, other = make(2, size), make(3, size)
            return Case(model, example, other_args=other, **options)
    raise NotBuilt(f"eager: {type(error).__name__}: {first_line(str(error))}")


def _image(channels: int = 3) -> Callable[[int, Sequence[int]], tuple[Any, ...]]:
    def make(batch: int, size: Sequence[int]) -> tuple[Any, ...]:
        return (torch.randn(batch, channels, *size),)

    return make


# -- torchvision ----------------------------------------------------------------------

#: Square image sizes tried for classification and segmentation, smallest first.
_IMAGE_SIZES = [(64, 64), (96, 96), (224, 224), (256, 256), (299, 299)]
#: (frames, height, width) tried for video models.
_VIDEO_SIZES = [(4, 64, 64), (8, 96, 96), (16, 224, 224), (16, 256, 256)]
#: Two-stage detectors pool with RoiAlign, which onnxruntime has no opset-22 kernel of.
_RCNN_OPSET = 21


def _torchvision_case(name: str) -> Case:
    setup_torchvision()
    import torchvision

    torch.manual_seed(0)
    builder = torchvision.models.get_model_builder(name)
    module = builder.__module__
    # No backbone weights either: their default is a download (segmentation, detection).
    options = {"weights_backbone": None} if "weights_backbone" in inspect.signature(builder).parameters else {}
    model = builder(weights=None, **options).eval()
    if ".detection." in module:
        opset = _RCNN_OPSET if "rcnn" in name else None
        example, other = ([torch.rand(3, 320, 320)],), ([torch.rand(3, 256, 384)],)
        _first_that_runs(model, iter([(example, {})]))
        return Case(model, example, other_args=other, opset=opset, compare=False)
    if ".optical_flow." in module:

        def flow(batch: int, size: Sequence[int]) -> tuple[Any, ...]:
            return torch.rand(batch, 3, *size), torch.rand(batch, 3, *size)

        return _sized_case(model, flow, [(128, 128), (128, 160)])
    if ".video." in module:
        return _sized_case(model, _image(), _VIDEO_SIZES)
    return _sized_case(model, _image(), _IMAGE_SIZES)


def _torchvision_entries() -> list[Entry]:
    setup_torchvision()
    import torchvision

    return [Entry("torchvision", n, functools.partial(_torchvision_case, n)) for n in torchvision.models.list_models()]


# -- timm -----------------------------------------------------------------------------

#: Prefixes that name a source, not an architecture: the family is the next word. ``test_``
#: names timm's own tiny test models (``test_vit``): each its own family, and the quickest.
_TIMM_SOURCES = {"tf", "gluon", "legacy", "ig", "ssl", "swsl", "tv", "hf", "timm", "test"}
#: Size words in timm names, smallest first (a name without one ranks after them all).
_TIMM_SIZES = ["atto", "femto", "pico", "nano", "tiny", "xxs", "xs", "mini", "small", "s", "lite", "base", "b"]


def timm_family(name: str) -> str:
    """The family of a timm model: the name's first word, less a trailing size or version number.

    ``resnet18d`` -> ``resnet``, ``vit_tiny_patch16_224`` -> ``vit``, ``regnetx_002`` ->
    ``regnetx``, ``convnext_atto`` -> ``convnext``; a source prefix (``tf_``, ``gluon_``,
    ...) keeps the next word: ``tf_efficientnet_b0`` -> ``tf_efficientnet``.
    """
    words = name.split("_")
    head = "_".join(words[:2]) if words[0] in _TIMM_SOURCES and len(words) > 1 else words[0]
    return re.sub(r"\d+[a-z]?$", "", head) or head


def _timm_size_key(name: str) -> tuple[int, int, int]:
    """Sort key for "smallest first" among a family's names, by name alone (building ~1,400 models costs minutes).

    The rank of the smallest size word in the name, then the smallest number in it (depth,
    width or resolution: ``resnet10t`` before ``resnet50``), then the name's length.
    """
    words = set(re.split(r"[_\-.]", name))
    rank = min((i for i, word in enumerate(_TIMM_SIZES) if word in words), default=len(_TIMM_SIZES))
    numbers = [int(n) for n in re.findall(r"\d+", name)]
    return rank, min(numbers, default=0), len(name)


def timm_smallest(names: Sequence[str]) -> dict[str, str]:
    """Family -> its smallest model (by :func:`_timm_size_key`), for ``names``."""
    families: dict[str, list[str]] = {}
    for name in names:
        families.setdefault(timm_family(name), []).append(name)
    return {family: min(members, key=_timm_size_key) for family, members in sorted(families.items())}


def _timm_case(name: str) -> Case:
    setup_torchvision()
    import timm

    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False).eval()
    channels, *size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    # Small sizes first; the model's own size where it fixes it (patch embeddings of ViTs).
    sizes = [(64, 64), (96, 96), tuple(size), (size[0] + 32, size[1] + 32)]
    return _sized_case(model, _image(channels), list(dict.fromkeys(sizes)))


def _timm_entries() -> list[Entry]:
    setup_torchvision()
    import timm

    return [Entry("timm", n, functools.partial(_timm_case, n)) for n in timm_smallest(timm.list_models()).values()]


# -- diffusers ------------------------------------------------------------------------


class _Encode(torch.nn.Module):
    """An autoencoder's encoder: image -> the latent distribution's parameters."""

    def __init__(self, vae: torch.nn.Module):
        super().__init__()
        self.vae = vae

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.vae.encode(image).latent_dist.parameters


class _Decode(torch.nn.Module):
    """An autoencoder's decoder: latent -> image."""

    def __init__(self, vae: torch.nn.Module):
        super().__init__()
        self.vae = vae

    def forward(self, latent: torch.Tensor) -> torch.Tensor:
        return self.vae.decode(latent).sample


def _vae() -> torch.nn.Module:
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        block_out_channels=[32, 64],
        in_channels=3,
        out_channels=3,
        down_block_types=["DownEncoderBlock2D", "DownEncoderBlock2D"],
        up_block_types=["UpDecoderBlock2D", "UpDecoderBlock2D"],
        latent_channels=4,
    )


def _diffusers_case(name: str) -> Case:
    import diffusers

    torch.manual_seed(0)
    t = torch.tensor([10])
    if name == "UNet2DModel":
        model = diffusers.UNet2DModel(
            block_out_channels=(32, 64),
            layers_per_block=2,
            sample_size=32,
            in_channels=3,
            out_channels=3,
            down_block_types=("DownBlock2D", "AttnDownBlock2D"),
            up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        )
        case = Case(model, (torch.randn(1, 3, 32, 32), t), other_args=(torch.randn(1, 3, 48, 64), t))
    elif name == "UNet2DConditionModel":
        model = diffusers.UNet2DConditionModel(
            block_out_channels=(32, 64),
            layers_per_block=2,
            sample_size=32,
            in_channels=4,
            out_channels=4,
            down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
            up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
            cross_attention_dim=32,
            attention_head_dim=8,
        )
        case = Case(
            model,
            (torch.randn(1, 4, 16, 16), t, torch.randn(1, 4, 32)),
            other_args=(torch.randn(1, 4, 24, 32), t, torch.randn(1, 7, 32)),
        )
    elif name == "AutoencoderKL.encoder":
        case = Case(_Encode(_vae()), (torch.randn(1, 3, 32, 32),), other_args=(torch.randn(1, 3, 48, 64),))
    elif name == "AutoencoderKL.decoder":
        case = Case(_Decode(_vae()), (torch.randn(1, 4, 8, 8),), other_args=(torch.randn(1, 4, 12, 16),))
    elif name == "SD3Transformer2DModel":
        model = diffusers.SD3Transformer2DModel(
            sample_size=32,
            patch_size=1,
            in_channels=4,
            num_layers=1,
            attention_head_dim=8,
            num_attention_heads=4,
            caption_projection_dim=32,
            joint_attention_dim=32,
            pooled_projection_dim=64,
            out_channels=4,
        )

        def sd3(height: int, width: int, text: int) -> dict[str, Any]:
            return {
                "hidden_states": torch.randn(1, 4, height, width),
                "encoder_hidden_states": torch.randn(1, text, 32),
                "pooled_projections": torch.randn(1, 64),
                "timestep": t,
            }

        case = Case(model, (), sd3(16, 16, 7), other_kwargs=sd3(24, 32, 9))
    elif name == "FluxTransformer2DModel":
        model = diffusers.FluxTransformer2DModel(
            patch_size=1,
            in_channels=4,
            num_layers=1,
            num_single_layers=1,
            attention_head_dim=16,
            num_attention_heads=2,
            joint_attention_dim=32,
            pooled_projection_dim=32,
            axes_dims_rope=[4, 4, 8],
        )

        def flux(tokens: int, text: int) -> dict[str, Any]:
            return {
                "hidden_states": torch.randn(1, tokens, 4),
                "encoder_hidden_states": torch.randn(1, text, 32),
                "pooled_projections": torch.randn(1, 32),
                "timestep": torch.tensor([1.0]),
                "img_ids": torch.randn(tokens, 3),
                "txt_ids": torch.randn(text, 3),
                "return_dict": False,
            }

        case = Case(model, (), flux(16, 8), other_kwargs=flux(24, 5))
    elif name == "DiTTransformer2DModel":
        model = diffusers.DiTTransformer2DModel(
            in_channels=4,
            out_channels=8,
            activation_fn="gelu-approximate",
            num_attention_heads=2,
            attention_head_dim=4,
            num_layers=2,
            patch_size=2,
            sample_size=8,
        )
        # Its position embedding fixes the image to H * W == 16 patches (torch keeps H and W
        # under that guard), so the batch is what varies: 2 then 3, as torch holds a 1 static.
        example = (torch.randn(2, 4, 8, 8), torch.tensor([10, 20]), torch.tensor([1, 2]))
        other = (torch.randn(3, 4, 8, 8), torch.tensor([10, 20, 30]), torch.tensor([1, 2, 3]))
        case = Case(model, example, other_args=other)
    else:
        raise KeyError(name)
    case.model.eval()
    _first_that_runs(case.model, iter([(case.args, case.kwargs)]))
    _first_that_runs(case.model, iter([(case.other_args, case.other_kwargs)]))
    return case


DIFFUSERS_MODELS = (
    "UNet2DModel",
    "UNet2DConditionModel",
    "AutoencoderKL.encoder",
    "AutoencoderKL.decoder",
    "SD3Transformer2DModel",
    "FluxTransformer2DModel",
    "DiTTransformer2DModel",
)


def _diffusers_entries() -> list[Entry]:
    return [Entry("diffusers", n, functools.partial(_diffusers_case, n)) for n in DIFFUSERS_MODELS]


# -- transformers ---------------------------------------------------------------------

HIDDEN, HEADS, KV_HEADS, HEAD_DIM, LAYERS, VOCAB = 32, 4, 2, 8, 2, 100
_LAYER_COUNTS = (
    "num_hidden_layers",
    "num_layers",
    "n_layer",
    "n_layers",
    "encoder_layers",
    "decoder_layers",
    "num_decoder_layers",
)
#: Config attribute -> its tiny value, set where the default config has the attribute.
_SHRINK: dict[str, int] = {
    **dict.fromkeys(["hidden_size", "d_model", "n_embd", "embed_dim", "dim", "projection_dim"], HIDDEN),
    **dict.fromkeys(
        [
            "intermediate_size",
            "ffn_dim",
            "encoder_ffn_dim",
            "decoder_ffn_dim",
            "d_ff",
            "n_inner",
            "moe_intermediate_size",
        ],
        2 * HIDDEN,
    ),
    **dict.fromkeys(_LAYER_COUNTS, LAYERS),
    **dict.fromkeys(
        ["num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads", "num_heads"],
        HEADS,
    ),
    "num_key_value_heads": KV_HEADS,
    "head_dim": HEAD_DIM,
    "rotary_dim": HEAD_DIM,  # GPT-J, CodeGen: rotary over part of a head, at most all of it
    "reassemble_hidden_size": HIDDEN,  # DPT-like necks read the backbone at its width
    **dict.fromkeys(["n_group", "num_group", "topk_group"], 1),  # expert groups of the 4 experts left
    "num_kv_shared_layers": 0,  # Gemma3n: later layers reuse earlier ones' cache, not with 2 layers
    "vocab_size_per_layer_input": VOCAB,  # Gemma3n's per-layer embeddings
    "vocab_size": VOCAB,
    **dict.fromkeys(["num_experts", "num_local_experts", "n_routed_experts"], 4),
    "num_experts_per_tok": 2,
    "max_source_positions": 32,  # audio encoders that fix their input length to twice this
}
#: Per-stage lists of a hierarchical backbone -> the most each stage keeps.
_STAGE_LISTS: dict[str, int] = {"num_heads": HEADS, "depths": LAYERS}
#: Special token ids at or above VOCAB are moved here, and input ids are drawn below it.
_SPECIAL_BASE = VOCAB - 10


def shrink_config(values: dict[str, Any]) -> dict[str, Any]:
    """The overrides that make a config (given as its ``to_dict()``) tiny, nested configs included.

    Known size attributes take :data:`_SHRINK`'s values; per-layer lists (``layer_types``)
    are cut to the new layer count; special token ids outside the new vocabulary are moved
    into its top.
    """
    layers = next(
        (values[k] for k in ("num_hidden_layers", "num_layers", "n_layer") if isinstance(values.get(k), int)), None
    )
    # A backbone's out_features name its stages (DINOv2's stage9..stage12 for Depth Anything's
    # neck): its layers stay, as narrow as the rest.
    backbone = "out_features" in values
    overrides: dict[str, Any] = {}
    special = _SPECIAL_BASE
    for key, value in values.items():
        if isinstance(value, dict) and "model_type" in value:
            overrides[key] = {**value, **shrink_config(value)}
        elif backbone and key in _LAYER_COUNTS:
            continue
        elif key in _SHRINK and isinstance(value, int) and not isinstance(value, bool):
            overrides[key] = min(value, _SHRINK[key]) if key != "head_dim" else _SHRINK[key]
        elif key in _STAGE_LISTS and isinstance(value, list) and value and all(type(v) is int for v in value):
            # Per-stage heads and depths (Swin: [3, 6, 12, 24], [2, 2, 6, 2]): as many stages, each
            # tiny, in powers of two, which divide the widths HIDDEN doubles to.
            overrides[key] = [1 << (min(v, _STAGE_LISTS[key]).bit_length() - 1) if v > 0 else v for v in value]
        elif (
            not backbone and isinstance(value, list) and layers is not None and len(value) == layers and layers > LAYERS
        ):
            # The first layers and the last: hybrids (linear attention, then every n-th
            # layer full attention) keep one of each kind.
            overrides[key] = value[: LAYERS - 1] + value[-1:]
        elif key.endswith(("_token_id", "_token_index")) and isinstance(value, int) and value >= VOCAB:
            overrides[key] = special
            special += 1
    if isinstance(values.get("kv_lora_rank"), int) and values.get("num_key_value_heads") == values.get(
        "num_attention_heads"
    ):
        # Latent attention (DeepSeek-V3, GLM-4-MoE-Lite) projects keys and values for every query
        # head: fewer key/value heads would be an inconsistent config that only eager SDPA's
        # enable_gqa runs (a traced run repeats them to twice the query heads).
        overrides["num_key_value_heads"] = overrides.get("num_attention_heads", values["num_attention_heads"])
    if isinstance(values.get("pixel_shuffle_ratio"), float) and isinstance(values.get("intermediate_size"), int):
        # Llama 4's pixel shuffle folds 1/ratio^2 patches into one before an MLP that reads
        # intermediate_size features; its output is what the projector reads as vision_output_dim.
        hidden = overrides.get("hidden_size", values.get("hidden_size", HIDDEN))
        overrides["intermediate_size"] = round(hidden / values["pixel_shuffle_ratio"] ** 2)
        overrides.update(dict.fromkeys(["projector_input_dim", "projector_output_dim", "vision_output_dim"], HIDDEN))
    if all(isinstance(values.get(k), int) for k in ("expand", "num_heads", "head_dim", "hidden_size")):
        # Mamba2's heads tile the expanded width (its config checks hidden_size * expand ==
        # num_heads * head_dim), in as many state groups as divide them.
        width = overrides.get("hidden_size", values["hidden_size"]) * values["expand"]
        heads = overrides.get("num_heads", values["num_heads"])
        if width % heads == 0:
            overrides["head_dim"] = width // heads
        if isinstance(values.get("n_groups"), int):
            overrides["n_groups"] = 1
    return overrides


def _text_inputs(model: torch.nn.Module, batch: int, length: int) -> dict[str, Any]:
    parameters = inspect.signature(model.forward).parameters
    ids = torch.randint(4, _SPECIAL_BASE, (batch, length))
    inputs: dict[str, Any] = {"input_ids": ids}
    if "attention_mask" in parameters:
        inputs["attention_mask"] = torch.ones_like(ids)
    if getattr(model.config, "is_encoder_decoder", False) and "decoder_input_ids" in parameters:
        inputs["decoder_input_ids"] = torch.randint(4, _SPECIAL_BASE, (batch, max(length - 2, 1)))
    return inputs


def _config_value(config: Any, name: str, default: Any) -> Any:
    """``config.<name>``, else the same in its vision or audio sub-config, else ``default``."""
    for part in (config, getattr(config, "vision_config", None), getattr(config, "audio_config", None)):
        value = getattr(part, name, None)
        if value is not None:
            return value
    return default


def _pixel_inputs(model: torch.nn.Module, batch: int, grow: int) -> dict[str, Any]:
    size = _config_value(model.config, "image_size", 32)
    size = size[0] if isinstance(size, list | tuple) else size
    channels = _config_value(model.config, "num_channels", 3)
    return {"pixel_values": torch.randn(batch, channels, size + grow, size + grow)}


def _audio_inputs(model: torch.nn.Module, name: str, batch: int, grow: int) -> Iterator[dict[str, Any]]:
    if name == "input_values":
        yield {"input_values": torch.randn(batch, 1600 + 160 * grow)}
        return
    bins = _config_value(model.config, "num_mel_bins", None) or _config_value(model.config, "feature_size", 80)
    frames = 2 * _config_value(model.config, "max_source_positions", 32)
    yield {"input_features": torch.randn(batch, bins, frames)}  # whisper-like: fixed length
    yield {"input_features": torch.randn(batch, bins, frames + 8 * grow)}
    yield {"input_features": torch.randn(batch, frames + 8 * grow, bins)}  # speech2text-like: (time, features)


def _candidates(model: torch.nn.Module, batch: int, grow: int) -> Iterator[dict[str, Any]]:
    """Inputs to try for a transformers model, by its main input; ``grow`` > 0 gives other sizes."""
    parameters = inspect.signature(model.forward).parameters
    # No KV cache out: its object is no pytree eager's outputs flatten into, so they could
    # not be matched to the export's.
    no_cache = {"use_cache": False} if "use_cache" in parameters else {}
    for inputs in _main_candidates(model, batch, grow):
        if "noise" in parameters and "pixel_values" in inputs:
            # ViT-MAE keeps the patches a random noise orders first, drawn inside unless given:
            # given, as for any deterministic run (no export can match a draw of its own).
            pixels = inputs["pixel_values"]
            patch = _config_value(model.config, "patch_size", 16)
            patch = patch[0] if isinstance(patch, list | tuple) else patch
            patches = (pixels.shape[-2] // patch) * (pixels.shape[-1] // patch)
            yield {**inputs, "noise": torch.rand(pixels.shape[0], patches), **no_cache}
        if "noise_sequence" in parameters and "input_features" in inputs:
            # UnivNet's vocoder draws its noise the same way: (batch, frames, model_in_channels).
            frames = inputs["input_features"].shape[:2]
            channels = _config_value(model.config, "model_in_channels", 64)
            yield {**inputs, "noise_sequence": torch.randn(*frames, channels), **no_cache}
        yield {**inputs, **no_cache}


def _main_candidates(model: torch.nn.Module, batch: int, grow: int) -> Iterator[dict[str, Any]]:
    main = getattr(model, "main_input_name", "input_ids")
    parameters = inspect.signature(model.forward).parameters
    if main == "input_ids":
        text = _text_inputs(model, batch, 8 + 4 * grow)
        yield text
        if "pixel_values" in parameters:  # multimodal: both
            yield {**text, **_pixel_inputs(model, batch, 0)}
    elif main == "pixel_values":
        yield _pixel_inputs(model, batch, 32 * grow)
        yield _pixel_inputs(model, batch, 0)
    elif main in ("input_features", "input_values"):
        for audio in _audio_inputs(model, main, batch, grow):
            yield audio
            if "decoder_input_ids" in parameters:
                yield {**audio, "decoder_input_ids": torch.randint(4, _SPECIAL_BASE, (batch, 4 + grow))}
    else:
        raise NotBuilt(f"main input {main!r}: no input generator")


def _transformers_case(model_type: str) -> Case:
    # Before transformers is imported: it looks for torchvision and timm once, and their
    # models (timm_wrapper, ...) build only where it finds them.
    setup_torchvision()
    import transformers

    torch.manual_seed(0)
    try:
        default = transformers.AutoConfig.for_model(model_type)
        overrides = shrink_config(default.to_dict())
        config = transformers.AutoConfig.for_model(model_type, **overrides)
        model = _base_model(transformers, config).eval()
        if "num_key_value_heads" in overrides and _keys_and_values_differ(model):
            overrides["num_key_value_heads"] = overrides.get("num_attention_heads", default.num_attention_heads)
            config = transformers.AutoConfig.for_model(model_type, **overrides)
            model = _base_model(transformers, config).eval()
    except Exception as e:
        raise NotBuilt(f"{type(e).__name__}: {first_line(str(e))}") from e
    _untie(model)
    example = _first_that_runs(model, (((), c) for c in _candidates(model, 1, 0)))
    keys = example[1].keys()
    # The other input: same keys, other sizes where the model takes them, else batch 2.
    others = [c for c in _candidates(model, 1, 1) if c.keys() == keys]
    others += [c for c in _candidates(model, 2, 0) if c.keys() == keys]
    other = _first_that_runs(model, iter(((), c) for c in others))
    return Case(model, (), example[1], other_kwargs=other[1])


def _keys_and_values_differ(model: torch.nn.Module) -> bool:
    """Whether an attention projects keys and values to different widths.

    Nemotron 3's audio encoders size keys by the key/value heads and values by the query
    heads: consistent only where the two counts are equal, as in their default configs, and
    a shrunk config with fewer key/value heads runs eagerly (SDPA's enable_gqa) but no traced
    run does. Such a model keeps a key/value head per query head.
    """
    return any(
        isinstance(k, torch.nn.Linear) and isinstance(v, torch.nn.Linear) and k.out_features != v.out_features
        for k, v in ((getattr(m, "k_proj", None), getattr(m, "v_proj", None)) for m in model.modules())
    )


def _untie(model: torch.nn.Module) -> None:
    """Random weights for each matrix that transformers initializes to one value.

    A MoE router's weights start at zero (AFMoE), so every expert ties, and which of the tied
    experts ``topk`` picks is each implementation's own (torch: the last, ONNX: the first):
    no exporter's file could match. A trained router has no ties.
    """
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2 and parameter.numel() > 1 and parameter.is_floating_point():
                flat = parameter.flatten()
                if bool((flat == flat[0]).all()):
                    parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.02)


def _base_model(transformers: Any, config: Any) -> torch.nn.Module:
    """``AutoModel`` of ``config``; for a part's config that no auto class maps (``CLIPSegTextConfig``,
    a vision or text tower of a composite model), the model class of its modeling module that takes
    that config: the one named after it (``CLIPSegTextModel``), else the first that is no task head
    (``DiaDecoder``, ``Sam3DetrEncoder``), else its task head (``DepthAnythingForDepthEstimation``)."""
    try:
        return transformers.AutoModel.from_config(config)
    except ValueError as e:
        if "Unrecognized configuration class" not in str(e):
            raise
        module = importlib.import_module(type(config).__module__.replace(".configuration_", ".modeling_"))
        named = type(config).__name__.removesuffix("Config") + "Model"
        parts = [
            cls
            for name, cls in vars(module).items()
            if isinstance(cls, type)
            and issubclass(cls, transformers.PreTrainedModel)
            and getattr(cls, "config_class", None) is type(config)
            and not name.endswith("PreTrainedModel")
        ]
        # Named after the config first, then any that is no task head; a model that is only
        # a task head (DepthAnythingForDepthEstimation) comes as that head.
        parts.sort(key=lambda cls: (cls.__name__ != named, "For" in cls.__name__))
        if not parts:
            raise
        return parts[0](config)


def _transformers_entries() -> list[Entry]:
    from transformers import CONFIG_MAPPING

    return [Entry("transformers", n, functools.partial(_transformers_case, n)) for n in sorted(CONFIG_MAPPING.keys())]


# -- the zoo --------------------------------------------------------------------------

_ENTRIES: dict[str, Callable[[], list[Entry]]] = {
    "torchvision": _torchvision_entries,
    "timm": _timm_entries,
    "diffusers": _diffusers_entries,
    "transformers": _transformers_entries,
}


def entries(library: str) -> list[Entry]:
    """Every model of ``library`` (one of :data:`LIBRARIES`), by name."""
    if library not in _ENTRIES:
        raise ValueError(f"unknown library {library!r}; known: {', '.join(LIBRARIES)}")
    return _ENTRIES[library]()


def entry(library: str, name: str) -> Entry:
    """The model ``name`` of ``library``."""
    if library == "diffusers":
        if name not in DIFFUSERS_MODELS:
            raise KeyError(name)
        return Entry(library, name, functools.partial(_diffusers_case, name))
    builders = {"torchvision": _torchvision_case, "timm": _timm_case, "transformers": _transformers_case}
    return Entry(library, name, functools.partial(builders[library], name))
