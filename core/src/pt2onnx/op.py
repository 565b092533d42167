"""``Op``: the object every converter and lowering receives as its first argument.

It is onnxscript's ``OpBuilder`` (``op.Relu(x)``, ``op.Gemm(a, b, transB=1)``: Python
constants promoted to typed initializers, outputs typed by schema inference) plus
what a converter needs to know about the FX node it translates and the few helpers
every converter family would otherwise write again: dtype mapping, shape tensors from
mixed static/symbolic dims, custom-domain nodes, and subgraphs/functions for
higher-order ops translated with the same registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx_ir as ir
import torch
import torch.fx
from onnx_ir.tensor_adapters import from_torch_dtype
from onnxscript import GraphBuilder, OpBuilder

from .errors import ConverterDeclined, UnsupportedArgumentError

if TYPE_CHECKING:
    from .translate import GraphTranslator

__all__ = ["Op"]


class Op(OpBuilder):
    """Emits ONNX nodes for one FX node. ``op.<OnnxOpType>(*inputs, **attributes)`` adds a node.

    Reserved keywords of a node call: ``_outputs`` (number of outputs), ``_domain`` and
    ``_version`` (for a non-default domain).
    """

    def __init__(self, builder: GraphBuilder, translator: GraphTranslator) -> None:
        super().__init__(builder, "", builder.graph.opset_imports[""])
        self._translator = translator
        self._node: torch.fx.Node | None = None

    # -- what is being translated -------------------------------------------------

    @property
    def opset(self) -> int:
        """The target version of the default ONNX domain."""
        version = self.version
        assert version is not None
        return version

    @property
    def node(self) -> torch.fx.Node:
        """The FX node being translated (read its ``meta``, never change it)."""
        if self._node is None:
            raise RuntimeError("Op.node is only available while a node is translated")
        return self._node

    @property
    def output_meta(self) -> Any:
        """torch's ``meta["val"]`` of the node: a FakeTensor, a tuple of them, or a SymInt."""
        return self.node.meta.get("val")

    @property
    def output_dtype(self) -> ir.DataType:
        """The ONNX dtype torch says the node's (first) output has."""
        val = self.output_meta
        if isinstance(val, (tuple, list)):
            val = val[0]
        if isinstance(val, torch.Tensor):
            return from_torch_dtype(val.dtype)
        if isinstance(val, (torch.SymBool, bool)):
            return ir.DataType.BOOL
        if isinstance(val, (torch.SymFloat, float)):
            return ir.DataType.DOUBLE
        return ir.DataType.INT64

    def unsupported(
        self, argument: str, value: object, reason: str, hint: str | None = None, *, since: int | None = None
    ) -> UnsupportedArgumentError:
        """An error to raise for an argument this converter cannot express in ONNX.

        ``since``: the oldest opset that exports this argument, when only the target opset
        is too old for it (the hint then says so); the harness of :mod:`pt2onnx.testing`
        checks such an argument at that opset instead of the converter's oldest.
        """
        if since is not None and hint is None:
            hint = f"export with opset>={since}"
        return UnsupportedArgumentError(argument, value, reason, hint=hint, since=since)

    def decline(self, reason: str) -> ConverterDeclined:
        """The exception to raise to leave this node to the converter this one shadows.

        For a converter that handles only some cases of its op (a pack's fused kernel
        for float32 only, say): ``raise op.decline("FastKernel takes float32 only")``. The
        core drops any node this converter emitted for the node and calls the next
        registration of the op, a lower layer's (the builtin converter, for a pack); the
        report names the plugin that converted each node. If every converter declines,
        the export stops with a ``ConversionError`` listing their reasons.
        """
        return ConverterDeclined(reason)

    def exact_nonfinite(self, deviation: str) -> bool:
        """Whether to emit torch's exact results on NaN and ±inf where that costs run time.

        For a converter whose plain ONNX form matches torch on every finite input but not on
        some non-finite ones, and whose exact form costs the model measurable run time on
        every input (an ``If``, a second pass over the whole tensor), such as max pooling.
        Exact forms that cost next to nothing (a ``Where`` on the output) need no question.

        Returns True when the export asked for torch's semantics (``nonfinite="torch"``,
        ``--nonfinite torch``): emit the exact form. Otherwise (the default,
        ``nonfinite="onnx"``) records ``deviation`` for the export report's "Non-finite
        deviations" section, with this node's op and the converter's plugin, and returns
        False: emit the plain form.

        ``deviation`` says on which inputs the plain form differs, and what torch gives:
        ``"a window holding a NaN may give the largest of its other values (torch: NaN)"``.

        A converter asks once per node, and only where the input can hold NaN or inf
        (floating dtypes)::

            if op.exact_nonfinite("a window holding a NaN ... (torch: NaN)"):
                return exact_form(op, x)
            return op.MaxPool(x, **attrs)
        """
        if not isinstance(deviation, str) or not deviation.strip():
            raise TypeError("op.exact_nonfinite(deviation): say on which inputs the plain form differs from torch")
        return self._translator.exact_nonfinite(deviation)

    # -- small helpers every converter family needs ---------------------------------

    @staticmethod
    def dtype(torch_dtype: torch.dtype) -> ir.DataType:
        """The ONNX dtype (``onnx_ir.DataType``) of a torch dtype.

        For the dtype arguments of aten schemas (``to(dtype=torch.float16)`` arrives as a
        ``torch.dtype``) and for :meth:`constant`: ``op.dtype(torch.float16)`` is
        ``ir.DataType.FLOAT16``.
        """
        return from_torch_dtype(torch_dtype)

    @staticmethod
    def dtype_of(value: ir.Value) -> ir.DataType | None:
        """The dtype of an ONNX value, when known."""
        return value.dtype

    @staticmethod
    def rank_of(value: ir.Value) -> int | None:
        """The rank of an ONNX value, when known."""
        return value.shape.rank() if value.shape is not None else None

    def constant(self, value: Any, dtype: ir.DataType | torch.dtype | None = None) -> ir.Value:
        """A ``Constant`` node holding ``value`` (a Python scalar, list or numpy array).

        Args:
            value: a Python scalar, a (nested) list of them, or a numpy array.
            dtype: the element type, an ``onnx_ir.DataType`` (``ir.DataType.FLOAT``,
                ``op.dtype_of(x)`` to match a value, ``op.output_dtype``) or a
                ``torch.dtype``; ``None`` infers it from ``value`` (Python ints are INT64,
                floats FLOAT). A name such as ``"float32"`` is refused with a ``TypeError``.
        """
        if isinstance(dtype, torch.dtype):
            dtype = from_torch_dtype(dtype)
        elif dtype is not None and not isinstance(dtype, ir.DataType):
            raise TypeError(
                f"op.constant(value, dtype): dtype must be an onnx_ir.DataType or a torch.dtype "
                f"(e.g. ir.DataType.FLOAT, op.dtype_of(x), torch.float32), got {type(dtype).__name__} {dtype!r}"
            )
        if dtype is not None and isinstance(value, (int, float, bool, list)):
            tensor: ir.TensorProtocol = ir.Tensor(np.asarray(value, dtype=dtype.numpy()))
        else:
            tensor = ir.tensor(value, dtype=dtype)
        # Built directly: typed from the tensor, without the builder's schema and inference work.
        node = ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)], num_outputs=1)
        out = node.outputs[0]
        out.type, out.shape, out.const_value = ir.TensorType(tensor.dtype), ir.Shape(tensor.shape.numpy()), tensor
        self.builder.graph.append(node)
        return out

    def shape_tensor(self, dims: Sequence[int | ir.Value]) -> ir.Value:
        """A 1-D INT64 tensor from dims that are ints or 0-d/1-d INT64 Values (symbolic sizes)."""
        if all(isinstance(d, int) for d in dims):
            return self.constant([int(d) for d in dims], ir.DataType.INT64)  # type: ignore[arg-type]
        parts: list[ir.Value] = []
        run: list[int] = []
        for d in dims:
            if isinstance(d, ir.Value):
                if run:
                    parts.append(self.constant(run, ir.DataType.INT64))
                    run = []
                parts.append(self.Reshape(d, self.constant([1], ir.DataType.INT64)))
            else:
                run.append(int(d))
        if run:
            parts.append(self.constant(run, ir.DataType.INT64))
        return parts[0] if len(parts) == 1 else self.Concat(*parts, axis=0)

    def value(self, name: str, dtype: ir.DataType, shape: Sequence[int | str | None] | None) -> ir.Value:
        """A fresh typed value, e.g. an input of a subgraph."""
        return ir.Value(name=name, type=ir.TensorType(dtype), shape=None if shape is None else ir.Shape(shape))

    def custom_node(
        self,
        domain: str,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: dict[str, Any] | None = None,
        *,
        version: int = 1,
        num_outputs: int | None = None,
    ) -> ir.Value | tuple[ir.Value, ...]:
        """One node in a non-default domain; its outputs get torch's types and shapes."""
        if num_outputs is None:
            meta = self.output_meta
            num_outputs = len(meta) if isinstance(meta, (tuple, list)) else 1
        self._translator.use_domain(domain, version)
        outs = self.builder.call_op(
            op_type, list(inputs), dict(attributes or {}), domain=domain, version=version, outputs=num_outputs
        )
        if isinstance(outs, ir.Value):
            return outs
        return tuple(outs)

    # -- graphs inside graphs (higher-order ops) ------------------------------------

    def placeholders(self, gm: torch.fx.GraphModule, prefix: str) -> list[ir.Value]:
        """Fresh typed values, one per placeholder of ``gm``, named ``prefix + name``."""
        return self._translator.placeholder_values(gm.graph, prefix)

    def inline(self, gm: torch.fx.GraphModule, *args: Any) -> list[Any]:
        """Translate ``gm`` into the current graph with its placeholders bound to ``args``.

        Returns the flattened outputs of ``gm``.
        """
        return self._translator.translate_body(self, gm.graph, list(args))

    def subgraph(
        self,
        build: Callable[..., Sequence[ir.Value]],
        inputs: Sequence[ir.Value],
        *,
        name: str,
    ) -> ir.Graph:
        """An ONNX subgraph (for ``If``/``Loop``/``Scan`` attributes).

        ``build(sub_op, *inputs)`` emits its nodes with ``sub_op`` (an :class:`Op` on the
        subgraph, e.g. ``sub_op.inline(gm, *inputs)``) and returns its outputs. Values
        of the enclosing graphs can be used directly (ONNX outer scope).
        """
        return self._translator.build_subgraph(self, build, inputs, name)

    def body(self, gm: torch.fx.GraphModule, *, name: str) -> ir.Graph:
        """Shortcut: the subgraph whose inputs are ``gm``'s placeholders and outputs its outputs."""
        return self.subgraph(lambda sub, *xs: sub.inline(gm, *xs), self.placeholders(gm, f"{name}."), name=name)

    def function(self, gm: torch.fx.GraphModule, *, name: str, domain: str = "pt2onnx.local") -> ir.Function:
        """``gm`` as an ONNX local function (registered in the model once per name)."""
        return self._translator.build_function(self, gm, name, domain)
