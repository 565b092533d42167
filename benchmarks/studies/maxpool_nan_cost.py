"""What torch's NaN and -inf semantics of max pooling cost in onnxruntime, on the benchmark's CNN and ResNet.

    python benchmarks/studies/maxpool_nan_cost.py [--runs 3000]

onnxruntime's MaxPool skips NaN (torch gives the window NaN) and gives the lowest finite
value for a window of -inf. pt2onnx's ``max_pool`` converter under ``nonfinite="torch"``
therefore pools once when the input's sum is finite and takes an exact branch (a second
MaxPool of a per-element code) otherwise: an ``If`` per MaxPool. This study decided the
default (issue #27): plain MaxPool, the exact form asked for with ``nonfinite="torch"``. This script times five versions of one export, one
thread, in shuffled rounds (``latency.interleaved``; median over ``--runs``):

* ``as exported``: the ``If`` on the input's sum (``nonfinite="torch"``);
* ``plain MaxPool``: each ``If`` replaced by its pooled branch (what torch.onnx emits;
  wrong for NaN and -inf);
* ``always exact``: each ``If`` replaced by its exact branch, inlined (no control flow);
* ``check by GlobalAveragePool``: the sum checked on ``GlobalAveragePool(x)``, which
  onnxruntime runs in its blocked convolution layout, instead of on ``x``;
* ``pool inside the branches``: each branch pools ``x`` itself, so the ``If`` returns a
  value made inside it instead of copying one made outside (onnxruntime refuses a branch
  that returns an outer value directly).

The last two are exact too: they are the cheaper forms of the same ``If`` tried
(2026-11-26, three runs: 0.98-1.01x and 1.00-1.05x of as exported: at most 2% cheaper).

Measured 2026-11-26 on this 2-core machine (onnxruntime 1.32, ``--runs 3000``): as
exported / plain / always exact, CNN 97.1 / 74.7 / 177.7 us (plain 0.77x), ResNet 68.1 /
60.0 / 85.3 us (0.88x): the ``If`` accounts for the excess of both over torch.onnx in
``benchmarks/results/results.md`` (1.29x and 1.14x); inlining the exact branch costs more.
Absolute times vary by about 30% between runs on this shared machine; the ratios hold.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the suite: latency, model_cases

from latency import interleaved


def _prune(graph: onnx.GraphProto) -> None:
    """Drop nodes whose outputs nothing reads (the sum checks of removed ``If`` nodes)."""
    while True:
        used = {i for n in graph.node for i in n.input} | {o.name for o in graph.output}
        dead = [n for n in graph.node if not any(o in used for o in n.output)]
        if not dead:
            return
        for n in dead:
            graph.node.remove(n)


def plain_max_pool(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each ``If`` replaced by its then-branch: ``Identity(pooled)``."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    rename = {}
    for node in [n for n in graph.node if n.op_type == "If"]:
        then = next(a.g for a in node.attribute if a.name == "then_branch")
        rename[node.output[0]] = then.node[0].input[0]
        graph.node.remove(node)
    for node in graph.node:
        node.input[:] = [rename.get(i, i) for i in node.input]
    _prune(graph)
    return model


def always_exact(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each ``If`` replaced by its else-branch's nodes, renamed apart and inlined."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    nodes = []
    for node in graph.node:
        if node.op_type != "If":
            nodes.append(node)
            continue
        branch = next(a.g for a in node.attribute if a.name == "else_branch")
        local = {o: f"{node.name}/{o}" for m in branch.node for o in m.output}
        local.update({i.name: f"{node.name}/{i.name}" for i in branch.initializer})
        local[branch.output[0].name] = node.output[0]
        for initializer in branch.initializer:
            initializer.name = local[initializer.name]
            graph.initializer.append(initializer)
        for inner in branch.node:
            inner.name = f"{node.name}/{inner.name}"
            inner.input[:] = [local.get(i, i) for i in inner.input]
            inner.output[:] = [local[o] for o in inner.output]
            nodes.append(inner)
    del graph.node[:]
    graph.node.extend(nodes)
    _prune(graph)
    return model


def _if_nodes(model: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, onnx.NodeProto], list[onnx.NodeProto]]:
    copy = onnx.ModelProto.FromString(model.SerializeToString())
    producer = {out: node for node in copy.graph.node for out in node.output}
    return copy, producer, [n for n in copy.graph.node if n.op_type == "If"]


def _branch(node: onnx.NodeProto, name: str) -> onnx.GraphProto:
    return next(a.g for a in node.attribute if a.name == name)


def check_by_global_average_pool(model: onnx.ModelProto) -> onnx.ModelProto:
    """The ``If``'s sum read from ``GlobalAveragePool(x)`` (N, C, 1, 1) instead of ``x``."""
    model, producer, ifs = _if_nodes(model)
    for node in ifs:
        equal = producer[node.input[0]]
        total = producer[producer[equal.input[0]].input[0]]  # Equal(Sub(total, total), 0)
        pooled = onnx.helper.make_node(
            "GlobalAveragePool", [total.input[0]], [f"{total.output[0]}.pooled"], name=f"{total.name}.pooled"
        )
        model.graph.node.insert(list(model.graph.node).index(total), pooled)
        total.input[0] = pooled.output[0]
    return model


def pool_inside_the_branches(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each branch runs the ``MaxPool`` of ``x`` itself; the one outside goes."""
    model, producer, ifs = _if_nodes(model)
    for node in ifs:
        then, otherwise = _branch(node, "then_branch"), _branch(node, "else_branch")
        pooled = then.node[0].input[0]
        pool = producer[pooled]
        inner = onnx.helper.make_node("MaxPool", list(pool.input), [then.output[0].name], name=f"{node.name}.then")
        inner.attribute.extend(pool.attribute)
        del then.node[:]
        then.node.append(inner)
        local = f"{pooled}.else"
        for other in otherwise.node:
            other.input[:] = [local if i == pooled else i for i in other.input]
        again = onnx.helper.make_node("MaxPool", list(pool.input), [local], name=f"{node.name}.else")
        again.attribute.extend(pool.attribute)
        otherwise.node.insert(0, again)
    _prune(model.graph)
    return model


def _session(model: onnx.ModelProto) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])


def measure(name: str, runs: int) -> dict[str, float]:
    import model_cases

    import pt2onnx

    case = getattr(model_cases, name)()
    exported = pt2onnx.export(
        case.model, (), case.inputs, dynamic_shapes=case.dynamic_shapes, nonfinite="torch"
    ).model_proto
    variants = {
        "as exported": exported,
        "plain MaxPool": plain_max_pool(exported),
        "always exact": always_exact(exported),
        "check by GlobalAveragePool": check_by_global_average_pool(exported),
        "pool inside the branches": pool_inside_the_branches(exported),
    }
    sessions = {k: _session(m) for k, m in variants.items()}
    feeds = {k: v.numpy() for k, v in case.inputs.items()}
    reference = sessions["as exported"].run(None, feeds)[0]
    for label, session in sessions.items():
        np.testing.assert_allclose(session.run(None, feeds)[0], reference, rtol=1e-4, atol=1e-5, err_msg=label)
    # The exact forms agree at NaN and -inf too (a NaN pixel spreads through the first conv).
    [(key, image)] = feeds.items()
    odd = image.copy()
    odd[0, 0, 5, 5], odd[-1, -1, 20:, 20:] = np.nan, -np.inf
    odd_reference = sessions["as exported"].run(None, {key: odd})[0]
    for label in ("always exact", "check by GlobalAveragePool", "pool inside the branches"):
        np.testing.assert_allclose(sessions[label].run(None, {key: odd})[0], odd_reference, err_msg=label)
    times = interleaved({k: functools.partial(s.run, None, feeds) for k, s in sessions.items()}, runs)
    return {label: statistics.median(t) * 1e6 for label, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3000)
    args = parser.parse_args()
    print(f"onnxruntime {ort.__version__}, one thread, median of {args.runs} interleaved runs (us)")
    for name in ("cnn", "resnet"):
        medians = measure(name, args.runs)
        base = medians["as exported"]
        print(name, "  ".join(f"{k}: {v:.1f} ({v / base:.2f}x)" for k, v in medians.items()))


if __name__ == "__main__":
    main()
