"""What a saved model reveals of the user's machine: source paths relative (default), full, or none."""

from __future__ import annotations

import importlib
import textwrap
from pathlib import Path

import onnx
import pytest
import torch

import pt2onnx
from pt2onnx.errors import OptionError
from pt2onnx.project import project_root

THIS_FILE = Path(__file__).resolve()


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda v: self.lin(v).relu(), lambda v: v - 1.0, (x,))


def _saved(tmp_path: Path, model: torch.nn.Module, **options) -> tuple[bytes, list[str]]:
    """The saved model's bytes and every node's pt2onnx.source (subgraphs included)."""
    x = torch.randn(2, 4)
    result = pt2onnx.export(model, (x,), **options)
    assert result.verify(x).ok
    result.save(tmp_path / "model.onnx")
    data = (tmp_path / "model.onnx").read_bytes()
    proto = onnx.load_from_string(data)
    sources = []

    def visit(graph: onnx.GraphProto) -> None:
        for node in graph.node:
            sources.extend(p.value for p in node.metadata_props if p.key == "pt2onnx.source")
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    visit(attribute.g)

    visit(proto.graph)
    return data, sources


def test_relative_is_the_default_and_no_absolute_path_is_saved(tmp_path):
    data, sources = _saved(tmp_path, Net().eval())
    relative = THIS_FILE.relative_to(project_root()).as_posix()
    assert sources and all(s.startswith(f"{relative}:") for s in sources), sources
    assert len(sources) > 3  # nodes of the If's branches too
    assert str(project_root()).encode() not in data


def test_full_keeps_absolute_paths(tmp_path):
    _, sources = _saved(tmp_path, Net().eval(), source_paths="full")
    assert sources and all(s.startswith(f"{THIS_FILE}:") for s in sources), sources


def test_none_saves_no_source_line_at_all(tmp_path):
    data, sources = _saved(tmp_path, Net().eval(), source_paths="none")
    assert sources == []
    assert b"test_privacy.py" not in data and b"x.sum() > 0" not in data
    # The rest of the provenance stays: which FX node, op and module made each node.
    proto = onnx.load_from_string(data)
    keys = {p.key for n in proto.graph.node for p in n.metadata_props}
    assert {"pt2onnx.fx_node", "pt2onnx.op"} <= keys


def test_a_file_outside_the_project_is_shown_from_its_import_root(tmp_path, monkeypatch):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "outside_model.py").write_text(
        textwrap.dedent(
            """
            import torch

            class Outside(torch.nn.Module):
                def forward(self, x):
                    return x * 3.0  # the outside line
            """
        )
    )
    monkeypatch.syspath_prepend(str(outside))
    module = importlib.import_module("outside_model")
    data, sources = _saved(tmp_path, module.Outside())
    assert sources and all(s.startswith("outside_model.py:") for s in sources), sources
    assert str(outside).encode() not in data


def test_an_unknown_mode_is_an_option_error():
    with pytest.raises(OptionError, match=r"source_paths='absolute' is not one of 'relative', 'full', 'none'"):
        pt2onnx.export(Net(), (torch.randn(2, 4),), source_paths="absolute")
