"""The residual sum a ``LayerNormalization`` reads is a ``Sum``: onnxruntime's CPU provider
then keeps ``Sum`` + ``LayerNormalization`` instead of fusing an ``Add`` into its slower
``SkipLayerNormalization`` (``benchmarks/studies/skip_layer_norm.py`` times both)."""

from __future__ import annotations

import onnx
import onnxruntime as ort
import torch

from pt2onnx.testing import assert_exports_like_eager


def _post_norm_layer():
    torch.manual_seed(0)
    return torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True).eval()


def _x(batch=2, seq=7):
    torch.manual_seed(batch * 10 + seq)
    return (torch.randn(batch, seq, 64),)


def _ops(proto: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in proto.graph.node]


def _after_onnxruntime(result, tmp_path) -> list[str]:
    """The op types of the model as onnxruntime's CPU provider optimizes it (its default level)."""
    path = tmp_path / "model.onnx"
    result.save(path)
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return _ops(onnx.load(options.optimized_model_filepath))


def test_a_post_norm_layer_reads_its_residual_sums_as_sum(tmp_path):
    result = assert_exports_like_eager(_post_norm_layer(), _x(), other_inputs=[(_x(3, 12), {})])
    norms = [n for n in result.model.graph if n.op_type == "LayerNormalization"]
    assert len(norms) == 2 and all(n.inputs[0].producer().op_type == "Sum" for n in norms)
    assert {p.name: p.changed for p in result.report.passes}["sum_before_layer_norm"]
    optimized = _after_onnxruntime(result, tmp_path)
    assert "SkipLayerNormalization" not in optimized and optimized.count("LayerNormalization") == 2


def test_switched_off_onnxruntime_fuses_the_add(tmp_path):
    """What the pass avoids: when onnxruntime stops fusing Add + LayerNormalization, this fails,
    and the pass (and its entry in docs/runtime_issues.md) can go."""
    result = assert_exports_like_eager(_post_norm_layer(), _x(), optimize={"sum_before_layer_norm": False})
    assert "Sum" not in [n.op_type for n in result.model.graph]
    assert _after_onnxruntime(result, tmp_path).count("SkipLayerNormalization") == 2


def test_a_sum_read_elsewhere_too_stays_one_value():
    """A pre-norm block's residual stream feeds the norm and the next residual: one ``Sum``, both read it."""

    class PreNorm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.norm, self.linear = torch.nn.LayerNorm(64), torch.nn.Linear(64, 64)

        def forward(self, x, y):
            h = x + y
            return h + self.linear(self.norm(h)), h

    torch.manual_seed(0)
    result = assert_exports_like_eager(PreNorm().eval(), (torch.randn(2, 5, 64), torch.randn(2, 5, 64)))
    (summed,) = [n for n in result.model.graph if n.op_type == "Sum"]
    assert summed.outputs[0].is_graph_output() and len(list(summed.outputs[0].uses())) == 2
