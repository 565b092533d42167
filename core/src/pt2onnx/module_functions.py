"""Modules as ONNX functions: keep chosen ``nn.Module`` boundaries as ONNX local functions.

torch.export flattens the module hierarchy; ``nn_module_stack`` still says which module
call made each node. Before translation, the nodes of each call of a chosen module are
outlined into a sub-GraphModule called through ``torch.ops.higher_order.invoke_subgraph``,
so the ``invoke_subgraph`` lowering turns it into one ONNX local function per distinct
module class and configuration (same ops, attributes and input types), called once per
instance. Parameters stay initializers of the main graph and are passed as function
inputs. Nested chosen modules become functions calling functions.

A call whose outputs are used before its last node (which torch's module calls never
produce) is left inline, with a warning.
"""

from __future__ import annotations

import operator
import re
import warnings
from collections.abc import Sequence
from typing import Any

import torch
import torch.fx

__all__ = ["ModuleSelection", "outline_modules"]

#: ``True`` for every submodule, or the classes whose instances become functions.
ModuleSelection = bool | Sequence[type[torch.nn.Module]]

_Entry = tuple[str, str, str]  # (nn_module_stack key, module path, class name)


def _class_name(cls: Any) -> str:
    return cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"


def _stack(node: torch.fx.Node) -> list[_Entry]:
    stack = node.meta.get("nn_module_stack") or {}
    return [(key, path, _class_name(cls)) for key, (path, cls) in stack.items()]


class _Selector:
    def __init__(self, selection: ModuleSelection) -> None:
        self.all = selection is True
        self.names = set() if isinstance(selection, bool) else {_class_name(c) for c in selection}

    def __call__(self, entry: _Entry) -> bool:
        _, path, cls = entry
        if path in ("", "L['self']") or path.startswith("_empty_nn_module_stack"):
            return False  # the root module is the graph itself
        return self.all or cls in self.names


def _group_of(node: torch.fx.Node, select: _Selector, enclosing: frozenset[str]) -> _Entry | None:
    for entry in _stack(node):
        if entry[0] not in enclosing and select(entry):
            return entry
    return None


def _fingerprint(gm: torch.fx.GraphModule) -> str:
    """Equal for two outlined calls exactly when they compute the same thing on the same types."""
    index: dict[torch.fx.Node, int] = {}
    parts: list[str] = []

    def arg(a: Any) -> Any:
        if isinstance(a, torch.fx.Node):
            return f"%{index[a]}"
        if isinstance(a, (list, tuple)):
            return [arg(x) for x in a]
        if isinstance(a, dict):
            return {k: arg(v) for k, v in a.items()}
        return repr(a)

    for i, node in enumerate(gm.graph.nodes):
        index[node] = i
        val = node.meta.get("val")
        typed = f"{val.dtype}{list(val.shape)}" if isinstance(val, torch.Tensor) else type(val).__name__
        target = node.target
        if node.op == "get_attr":
            # Subgraphs (HOP bodies, nested outlined modules) compare by content, not by name.
            attr = getattr(gm, str(target))
            target = f"[{_fingerprint(attr)}]" if isinstance(attr, torch.fx.GraphModule) else target
        parts.append(f"{node.op}|{target}|{arg(node.args)}|{arg(node.kwargs)}|{typed}")
    return "\n".join(parts)


class _Outliner:
    def __init__(self, select: _Selector) -> None:
        self.select = select
        self.functions: dict[str, str] = {}  # fingerprint -> function name
        self.count = 0

    def outline(self, gm: torch.fx.GraphModule, enclosing: frozenset[str]) -> None:
        groups: dict[str, list[torch.fx.Node]] = {}
        entries: dict[str, _Entry] = {}
        owner: dict[torch.fx.Node, str] = {}
        for node in gm.graph.nodes:
            if node.op != "call_function":
                continue
            entry = _group_of(node, self.select, enclosing)
            if entry is None and node.target is operator.getitem and node.args[0] in owner:
                key: str | None = owner[node.args[0]]  # multi-output results stay with their producer
            else:
                key = entry[0] if entry is not None else None
            if key is None:
                continue
            if entry is not None:
                entries.setdefault(key, entry)
            groups.setdefault(key, []).append(node)
            owner[node] = key
        for key, nodes in groups.items():
            self._outline_group(gm, nodes, entries[key], enclosing | {key})
        gm.graph.lint()
        gm.recompile()

    def _outline_group(
        self, gm: torch.fx.GraphModule, nodes: list[torch.fx.Node], entry: _Entry, enclosing: frozenset[str]
    ) -> None:
        members = set(nodes)
        order = {n: i for i, n in enumerate(gm.graph.nodes)}
        last = max(nodes, key=order.__getitem__)
        outputs = [n for n in nodes if any(u not in members for u in n.users)]
        if any(order[u] < order[last] for n in outputs for u in n.users if u not in members):
            warnings.warn(
                f"module call {entry[1]} ({entry[2]}) is interleaved with other code; it is left inline",
                UserWarning,
                stacklevel=4,
            )
            return
        sub_root = torch.nn.Module()
        sub_graph = torch.fx.Graph()
        env: dict[torch.fx.Node, torch.fx.Node] = {}
        inputs: list[torch.fx.Node] = []

        def bind(outer: torch.fx.Node) -> torch.fx.Node:
            if outer in env:
                return env[outer]
            if outer.op == "get_attr":
                setattr(sub_root, str(outer.target), getattr(gm, str(outer.target)))
                env[outer] = sub_graph.get_attr(str(outer.target))
            else:
                env[outer] = sub_graph.placeholder(f"arg{len(inputs)}")
                inputs.append(outer)
            env[outer].meta.update({k: v for k, v in outer.meta.items() if k in ("val", "tensor_meta")})
            return env[outer]

        for node in sorted(nodes, key=order.__getitem__):
            for used in node.all_input_nodes:
                if used not in members:
                    bind(used)
            env[node] = sub_graph.node_copy(node, lambda n: env[n])
        sub_graph.output(tuple(env[n] for n in outputs))
        sub_gm = torch.fx.GraphModule(sub_root, sub_graph)
        self.outline(sub_gm, enclosing)

        name = self._function_name(entry[2], _fingerprint(sub_gm))
        attr = f"_pt2onnx_module_{self.count}"
        self.count += 1
        setattr(gm, attr, sub_gm)
        with gm.graph.inserting_after(last):
            get = gm.graph.get_attr(attr)
        with gm.graph.inserting_after(get):
            call = gm.graph.call_function(torch.ops.higher_order.invoke_subgraph, (get, name, *inputs))
        call.meta.update(last.meta)
        call.meta["val"] = tuple(n.meta.get("val") for n in outputs)
        cursor = call
        for i, out in enumerate(outputs):
            with gm.graph.inserting_after(cursor):
                cursor = gm.graph.call_function(operator.getitem, (call, i))
            cursor.meta.update(out.meta)
            out.replace_all_uses_with(cursor, delete_user_cb=lambda user: user not in members)
        for node in sorted(nodes, key=order.__getitem__, reverse=True):
            gm.graph.erase_node(node)

    def _function_name(self, class_name: str, fingerprint: str) -> str:
        if fingerprint not in self.functions:
            base = re.sub(r"\W", "_", class_name.rsplit(".", 1)[-1])
            taken = sum(1 for n in self.functions.values() if n == base or n.startswith(f"{base}_"))
            self.functions[fingerprint] = base if taken == 0 else f"{base}_{taken}"
        return self.functions[fingerprint]


def outline_modules(gm: torch.fx.GraphModule, selection: ModuleSelection) -> torch.fx.GraphModule:
    """A copy of ``gm`` whose chosen module calls are ``invoke_subgraph`` calls (``gm`` is unchanged)."""
    graph = torch.fx.Graph()
    output = graph.graph_copy(gm.graph, {})
    graph.output(output)
    copy = torch.fx.GraphModule(gm, graph)
    _Outliner(_Selector(selection)).outline(copy, frozenset())
    return copy
