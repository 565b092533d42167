"""The tanh GELU transformers write by hand (GPT-2's ``gelu_new``) as one ``Gelu(approximate="tanh")`` (opset 20).

``0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x ** 3)))`` translates to eight
nodes, its constants on either side and its products in any association; the
``FastGELU`` spelling ``x * c * (1 + 0.044715 * x * x)`` of the tanh argument is the
same polynomial. Products are matched as a whole (their constant and their factors),
so each association and order of the operands is one case.

The fused Gelu computes what the formula computes except where the formula's own terms
overflow: for |x| > finfo.max / 2, ``0.5 * (x * 2)`` is inf in eager PyTorch and x here.
"""

from __future__ import annotations

import math

import onnx_ir as ir

from .graph import graphs, new_node, produced_by, replace_node, scalar

__all__ = ["fuse_gelu_tanh"]

_SQRT_2_OVER_PI = math.sqrt(2 / math.pi)
_CUBIC = 0.044715

#: How far a constant may be from its exact value: its dtype rounds it. No double:
#: onnxruntime's double Gelu is accurate to ~1e-8 only, the unfused nodes to ~1e-16.
_RTOL = {ir.DataType.FLOAT16: 2e-3, ir.DataType.BFLOAT16: 1.6e-2, ir.DataType.FLOAT: 1e-6}


def _product(value: ir.Value, *, whole: bool = False) -> tuple[float, list[ir.Value]]:
    """``value`` as a constant times its factors, looking through ``Mul`` and small integer ``Pow``.

    Only intermediate products (used once) are opened, not ``x`` itself when it is one;
    ``whole`` opens ``value`` regardless.
    """
    constant = scalar(value)
    if constant is not None:
        return constant, []
    if not whole and (value.is_graph_output() or len(value.uses()) != 1):
        return 1.0, [value]
    mul = produced_by(value, "Mul")
    if mul is not None and mul.inputs[0] is not None and mul.inputs[1] is not None:
        (a, a_factors), (b, b_factors) = _product(mul.inputs[0]), _product(mul.inputs[1])
        return a * b, a_factors + b_factors
    power = produced_by(value, "Pow")
    if power is not None and power.inputs[0] is not None and (n := scalar(power.inputs[1])) in (2.0, 3.0):
        return 1.0, [power.inputs[0]] * int(n)
    return 1.0, [value]


def _plus_one(value: ir.Value | None, rtol: float) -> ir.Value | None:
    """``y`` when ``value`` is ``1 + y``."""
    add = produced_by(value, "Add")
    if add is None:
        return None
    for one, other in (add.inputs, reversed(add.inputs)):
        if (c := scalar(one)) is not None and math.isclose(c, 1.0, rel_tol=rtol):
            return other
    return None


def _is_cubic_term(value: ir.Value | None, x: ir.Value, power: int, rtol: float) -> bool:
    """Whether ``value`` is ``0.044715 * x ** power``."""
    if value is None:
        return False
    constant, factors = _product(value, whole=True)
    return math.isclose(constant, _CUBIC, rel_tol=rtol) and len(factors) == power and all(f is x for f in factors)


def _is_tanh_argument(value: ir.Value | None, x: ir.Value, rtol: float) -> bool:
    """Whether ``value`` is ``sqrt(2 / pi) * (x + 0.044715 * x ** 3)``, or its ``x * (1 + 0.044715 * x ** 2)`` form."""
    if value is None:
        return False
    constant, factors = _product(value, whole=True)
    if not math.isclose(constant, _SQRT_2_OVER_PI, rel_tol=rtol):
        return False
    if len(factors) == 1 and (add := produced_by(factors[0], "Add")):
        a, b = add.inputs
        return (a is x and _is_cubic_term(b, x, 3, rtol)) or (b is x and _is_cubic_term(a, x, 3, rtol))
    if len(factors) == 2 and any(f is x for f in factors):
        other = factors[1] if factors[0] is x else factors[0]
        return _is_cubic_term(_plus_one(other, rtol), x, 2, rtol)
    return False


def _gelu_input(node: ir.Node) -> ir.Value | None:
    """``x`` when the ``Mul`` ``node`` computes ``0.5 * x * (1 + tanh(...))`` of it."""
    constant, factors = _product(node.outputs[0], whole=True)
    if len(factors) != 2:
        return None
    for x, other in (factors, reversed(factors)):
        rtol = _RTOL.get(x.dtype) if x.dtype is not None else None
        if rtol is None or not math.isclose(constant, 0.5, rel_tol=rtol):
            continue
        tanh = produced_by(_plus_one(other, rtol), "Tanh")
        if tanh is not None and _is_tanh_argument(tanh.inputs[0], x, rtol):
            return x
    return None


def fuse_gelu_tanh(model: ir.Model) -> None:
    """Rewrite each hand-written tanh GELU into ``Gelu(approximate="tanh")``."""
    for graph in graphs(model):
        for node in list(graph):
            if node.graph is None or node.op_type != "Mul" or node.domain != "":
                continue
            x = _gelu_input(node)
            out = node.outputs[0]
            # Size-1 constants of a higher rank would broadcast x to it.
            if x is None or x.shape is None or out.shape is None or x.shape.rank() != out.shape.rank():
                continue
            replace_node(node, new_node("Gelu", [x], {"approximate": "tanh"}))
