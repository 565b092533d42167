"""pt2onnx-fusions: rewrites that fuse multi-node patterns of the translated graph into standard ONNX ops.

A converter sees one FX node. The patterns here span several: the RMS norm, tanh-GELU
and rotary embedding that transformers write out by hand, the head reshapes and
key/value repetition around attention, ``nn.MultiheadAttention``'s sequence-first
layout, a query scaled before attention, the index grids of vmapped mask builders, the
form of grouped-query attention every runtime compiles, and the reshapes around a
``Gemm`` on flattened rows; and one keeps onnxruntime from a fusion slower than what it
fuses (``sum_before_layer_norm``).
Each is a rewrite pass of its own (see ``pt2onnx_register_rewrites``), in the report
and switchable with ``optimize={name: False}``; each is registered ``since=`` the opset
that gave ONNX the op it emits, so below it the pass is off and the report says why.
"""

from __future__ import annotations

from pt2onnx.plugin import RewriteRegistrar, hookimpl

from .attention import fuse_attention_heads, fuse_repeated_kv
from .attention_scale import fold_attention_scale
from .flat_gemm import unflatten_gemm
from .gelu import fuse_gelu_tanh
from .grouped_attention import portable_grouped_attention
from .index_grid import simplify_index_grids
from .layer_norm_sum import sum_before_layer_norm
from .packed_attention import fuse_packed_attention
from .rms_norm import fuse_rms_norm
from .rotary import fuse_rotary_embedding

#: The rewrites in the order they run (later ones match what earlier ones produced), each
#: with the opset that gave ONNX the op it emits: below it, the pass is off and the report says so.
REWRITES = {
    "fuse_rms_norm": (fuse_rms_norm, 23),
    "fuse_gelu_tanh": (fuse_gelu_tanh, 20),
    "simplify_index_grids": (simplify_index_grids, None),
    "fuse_rotary_embedding": (fuse_rotary_embedding, 23),
    "fuse_repeated_kv": (fuse_repeated_kv, 23),
    "fuse_attention_heads": (fuse_attention_heads, 23),
    "fuse_packed_attention": (fuse_packed_attention, 23),
    "fold_attention_scale": (fold_attention_scale, 23),
    "portable_grouped_attention": (portable_grouped_attention, 23),
    "unflatten_gemm": (unflatten_gemm, None),
    "sum_before_layer_norm": (sum_before_layer_norm, None),
}


@hookimpl
def pt2onnx_register_rewrites(register: RewriteRegistrar) -> None:
    for name, (fn, since) in REWRITES.items():
        register.rewrite(name, fn, since=since)
