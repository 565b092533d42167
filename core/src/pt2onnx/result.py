"""``ExportResult``: the exported model, its report, and running and verifying it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch
import torch.utils._pytree as pytree
from torch.export import ExportedProgram

from .assemble import OutputLayout
from .errors import VerificationError
from .progress import Progress
from .provenance import METADATA_KEYS, ModuleInfo, find_node, module_of_state
from .report import Report
from .runtime import Verification, compare, from_ort, to_ort
from .save import PROTOBUF_LIMIT, save_model
from .signature import flatten_inputs, user_input_names

__all__ = ["ExportResult"]


def _clone(tree: Any) -> Any:
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


class ExportResult:
    """What :func:`pt2onnx.export` returns.

    Attributes:
        model: the ONNX model as an ``onnx_ir.Model`` (weights reference torch's tensors).
        program: the ``ExportedProgram`` that was translated.
        report: the :class:`~pt2onnx.report.Report` of the export.
        report_file: where the report is written (``export(report=...)``), or ``None``;
            ``save()`` and ``verify()`` rewrite it.
    """

    def __init__(
        self,
        model: ir.Model,
        program: ExportedProgram,
        layout: OutputLayout,
        report: Report,
        eager: torch.nn.Module | None,
        *,
        progress: Progress | None = None,
        report_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.model = model
        self.program = program
        self.layout = layout
        self.report = report
        self.report_file = report_file
        self._eager = eager
        self._session: ort.InferenceSession | None = None
        self._progress = progress or Progress(enabled=False)
        self._write_report()

    def _write_report(self) -> None:
        if self.report_file is not None:
            self.report.write(self.report_file)

    @property
    def model_proto(self) -> onnx.ModelProto:
        """The model as an ``onnx.ModelProto`` (serializes the weights; below 2 GB only)."""
        return ir.serde.serialize_model(self.model)

    @property
    def input_names(self) -> list[str]:
        return [v.name or "" for v in self.model.graph.inputs]

    @property
    def output_names(self) -> list[str]:
        return [v.name or "" for v in self.model.graph.outputs]

    def save(self, path: str | os.PathLike[str], external_data: bool | str | None = None) -> list[Path]:
        """Write the model atomically; external data automatically above protobuf's 2 GB limit."""
        with self.report.phase("save"), self._progress.phase("save", self.report.weights_bytes, "bytes") as advance:
            written = save_model(self.model, path, external_data, on_bytes=advance)
        self.report.saved.update({str(p): p.stat().st_size for p in written})
        self._write_report()
        return written

    def session(self, **options: Any) -> ort.InferenceSession:
        """An onnxruntime session of the model (created once; ``options`` set SessionOptions fields)."""
        if self._session is None or options:
            so = ort.SessionOptions()
            for key, value in options.items():
                setattr(so, key, value)
            providers = ["CPUExecutionProvider"]
            weights = sum(
                v.const_value.nbytes for v in self.model.graph.initializers.values() if v.const_value is not None
            )
            if weights < PROTOBUF_LIMIT:
                session = ort.InferenceSession(self.model_proto.SerializeToString(), so, providers=providers)
            else:
                with tempfile.TemporaryDirectory() as tmp:
                    path = Path(tmp) / "model.onnx"
                    save_model(self.model, path, external_data=True)
                    session = ort.InferenceSession(str(path), so, providers=providers)
            if options:
                return session
            self._session = session
        return self._session

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model in onnxruntime, called like the PyTorch module, returning what it returns.

        Inputs the model mutates in place are updated in place here too.
        """
        leaves = flatten_inputs(self.program, args, kwargs)
        names = user_input_names(self.program)
        onnx_inputs = set(self.input_names)
        renamed = self.layout.inputs
        feeds = {
            renamed.get(name, name): to_ort(leaf)
            for name, leaf in zip(names, leaves)
            if renamed.get(name, name) in onnx_inputs
        }
        missing = onnx_inputs - set(feeds)
        if missing:
            raise VerificationError(f"no value given for ONNX input(s) {sorted(missing)}")
        outputs = self.session().run_with_ort_values(self.output_names, feeds)
        by_name = dict(zip(self.output_names, outputs))
        user = [self._output(by_name, e) if isinstance(e, str) else e[1] for e in self.layout.user]
        for name, target in self.layout.mutations.items():
            if target in names:
                leaves[names.index(target)].copy_(from_ort(by_name[name]))
        spec = self.program.call_spec.out_spec
        return pytree.tree_unflatten(user, spec) if spec is not None else user

    def _output(self, outputs: dict[str, ort.OrtValue], name: str) -> torch.Tensor:
        tensor = from_ort(outputs[name])
        # Complex values come out of the model as (..., 2) real tensors.
        return torch.view_as_complex(tensor.contiguous()) if name in self.layout.complex else tensor

    def verify(self, *args: Any, _atol: float | None = None, _rtol: float | None = None, **kwargs: Any) -> Verification:
        """Run eager PyTorch and onnxruntime on the same inputs and compare every output.

        Returns a :class:`~pt2onnx.runtime.Verification` (per output: max abs/rel
        difference, shape/dtype/NaN agreement). Each output is compared by its own dtype:
        integers and bools exactly, floats within their dtype's tolerance
        (:data:`pt2onnx.runtime.TOLERANCES`) unless ``_atol``/``_rtol`` are given
        (underscored so they never clash with the model's own keyword arguments).
        """
        eager = self._eager if self._eager is not None else self.program.module()
        with self.report.phase("verify"):
            with torch.no_grad():
                expected = eager(*_clone(args), **_clone(kwargs))
            got = self.run(*_clone(args), **_clone(kwargs))
            names = [e for e in self.layout.user if isinstance(e, str)]
            check = compare(names, expected, got, atol=_atol, rtol=_rtol)
        self.report.verifications.append(check)
        self._write_report()
        return check

    # -- provenance ---------------------------------------------------------------------

    def provenance(self, node_or_name: ir.Node | ir.Value | str) -> dict[str, str]:
        """Where an ONNX node came from: FX node, aten op, module path and class, source line.

        ``node_or_name``: an ``onnx_ir`` node or value, a node name, or an output name
        (main graph, subgraphs and local functions are searched). Keys are the metadata
        props without their ``pt2onnx.`` prefix: ``fx_node``, ``op``, ``module``,
        ``module_class``, ``source``.
        """
        node = find_node(self.model, node_or_name)
        props = node.metadata_props
        return {prop.removeprefix("pt2onnx."): props[prop] for prop in METADATA_KEYS.values() if prop in props}

    def source_of(self, node_or_name: ir.Node | ir.Value | str) -> str | None:
        """The line of the user's code that made an ONNX node (``file:line in function: code``)."""
        return self.provenance(node_or_name).get("source")

    def module_of(self, initializer_name: str) -> ModuleInfo:
        """The module a parameter or buffer initializer belongs to: its path and class."""
        if initializer_name not in self.model.graph.initializers:
            raise KeyError(f"{initializer_name!r} is not an initializer of the model")
        return module_of_state(initializer_name, self._eager, self.program.graph)

    def __repr__(self) -> str:
        return f"<ExportResult {len(self.model.graph)} nodes, inputs={self.input_names}, outputs={self.output_names}>"
