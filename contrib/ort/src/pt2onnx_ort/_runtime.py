"""Which ``com.microsoft`` contrib ops the installed onnxruntime implements."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnxruntime
from onnx import TensorProto, helper

DOMAIN = "com.microsoft"


@functools.cache
def implemented(
    op_type: str, input_shapes: tuple[tuple[int, ...], ...], attributes: tuple[tuple[str, int], ...]
) -> bool:
    """Whether a one-node ``com.microsoft::op_type`` model runs on onnxruntime's CPU provider."""
    names = [f"x{i}" for i in range(len(input_shapes))]
    # Any: make_node takes the attributes as keywords beside its own (name, doc_string, ...).
    attrs: dict[str, Any] = dict(attributes)
    node = helper.make_node(op_type, names, ["y"], domain=DOMAIN, **attrs)
    graph = helper.make_graph(
        [node],
        "probe",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in zip(names, input_shapes)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)], ir_version=8
    )
    feeds = {n: np.ones(s, dtype=np.float32) for n, s in zip(names, input_shapes)}
    try:
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        session.run(None, feeds)
    except Exception:  # noqa: BLE001 - any failure means "not implemented here"
        return False
    return True
