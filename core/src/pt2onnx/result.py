"""``ExportResult``: the exported model, its report, and running and verifying it."""

from __future__ import annotations

import contextlib
import inspect
import os
import tempfile
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import onnx
import onnx_ir as ir
import onnxruntime as ort
import torch
import torch.utils._pytree as pytree
from onnx_ir.tensor_adapters import from_torch_dtype
from torch.export import ExportedProgram
from torch.export.graph_signature import OutputKind

from .assemble import OutputLayout
from .errors import GuardedSizeWarning, VerificationError, WeightsError
from .interface.calling import copy_inputs, user_input_names, user_inputs
from .interface.guards import SizeGuards
from .interface.matching import match_inputs
from .progress import Progress
from .provenance import METADATA_KEYS, ModuleInfo, find_node, module_of_state
from .report import Report
from .runtime import Verification, compare, from_ort, to_ort
from .save import PROTOBUF_LIMIT, save_model
from .weights.checkpoint import unreadable_weights
from .weights.dtype import cast_inputs, eager_in, like_eager

__all__ = ["ExportResult"]


def _tensor(module: torch.nn.Module, target: str) -> torch.Tensor:
    """The parameter or buffer of ``module`` named ``target`` (a fully qualified name)."""
    owner, _, name = target.rpartition(".")
    try:
        tensor = getattr(module.get_submodule(owner), name)
    except AttributeError:
        tensor = None
    if not isinstance(tensor, torch.Tensor):
        raise VerificationError(
            f"the eager model has no parameter or buffer {target!r}, which the exported one updates",
            hint="pass the model that was exported: result.verify(*inputs, _eager=model)",
        )
    return tensor


@contextlib.contextmanager
def _put_back(module: torch.nn.Module, targets: Iterable[str]) -> Iterator[None]:
    """Put the parameters and buffers ``targets`` of ``module`` back as they were, after the block.

    The block may update them in place or bind new tensors to their names.
    """
    saved = [(target, _tensor(module, target)) for target in targets]
    values = [tensor.clone() for _, tensor in saved]
    try:
        yield
    finally:
        with torch.no_grad():
            for (target, tensor), value in zip(saved, values):
                tensor.copy_(value)
                owner, _, name = target.rpartition(".")
                setattr(module.get_submodule(owner), name, tensor)


class ExportResult:
    """What :func:`pt2onnx.export` returns.

    Attributes:
        model: the ONNX model as an ``onnx_ir.Model`` (weights reference torch's tensors).
        program: the ``ExportedProgram`` that was translated.
        report: the :class:`~pt2onnx.report.Report` of the export.
        report_file: where the report is written (``export(report=...)``), or ``None``;
            ``save()`` and ``verify()`` rewrite it.
        dtype: the floating dtype the model was converted to (``dtype=`` of the export), or None.
        input_aliases: other names ``run`` and ``verify`` take a keyword input by (given name ->
            the name it was captured by); a pack's export function sets them, e.g.
            pt2onnx-transformers' ``export_causal_lm`` takes the cache as ``cache`` or ``past_key_values``.
    """

    def __init__(
        self,
        model: ir.Model,
        program: ExportedProgram,
        layout: OutputLayout,
        report: Report,
        eager: torch.nn.Module | None,
        dtype: torch.dtype | None = None,
        *,
        progress: Progress | None = None,
        report_file: str | os.PathLike[str] | None = None,
        quiet: bool = False,
        guards: SizeGuards | None = None,
    ) -> None:
        self.model = model
        self.program = program
        self.layout = layout
        self.report = report
        self.report_file = report_file
        self.dtype = dtype
        self.input_aliases: dict[str, str] = {}
        self._eager = eager
        self._matching: dict[str, Any] | None = None
        self._session: ort.InferenceSession | None = None
        self._progress = progress or Progress(enabled=False)
        self._quiet = quiet  # export(quiet=True) silences save()'s progress bar too
        self._guards = guards
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

    def save(
        self,
        path: str | os.PathLike[str],
        external_data: bool | str | None = None,
        *,
        max_shard_bytes: int | None = None,
        quiet: bool = False,
    ) -> list[Path]:
        """Write the model atomically; external data automatically above protobuf's 2 GB limit.

        ``max_shard_bytes`` splits the external data into files of at most that size;
        ``quiet`` hides the progress bar shown on a terminal. Weights exported from a
        checkpoint (``weights=``) are read from it one at a time as they are written.
        See :func:`pt2onnx.save.save_model`.
        """
        with self.report.phase("save"):
            written = save_model(
                self.model,
                path,
                external_data,
                max_shard_bytes=max_shard_bytes,
                quiet=quiet or self._quiet,
            )
        self.report.saved.update({str(p): p.stat().st_size for p in written})
        self._write_report()
        return written

    def session(self, **options: Any) -> ort.InferenceSession:
        """An onnxruntime session of the model (created once; ``options`` set SessionOptions fields)."""
        valueless = unreadable_weights(self.model)
        if valueless:
            raise WeightsError(
                f"cannot run the model: {len(valueless)} weights ({', '.join(valueless[:3])}, ...) have no values "
                "(the model is on the meta device)",
                hint="export with the checkpoint: pt2onnx.export(..., weights='model.safetensors' or its folder, "
                "or a state dict)",
            )
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
                    save_model(self.model, path, external_data=True, quiet=True)
                    session = ort.InferenceSession(str(path), so, providers=providers)
            if options:
                return session
            self._session = session
        return self._session

    def run(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model in onnxruntime, called like the PyTorch module, returning what it returns.

        Inputs are matched to the captured ones by the forward's parameter names, given by
        position or by keyword; inputs the program took as constants (``use_cache=True``)
        may be left out; an input of several tensors (a cache) may be given as its tensors,
        each by its ONNX input name. A missing, extra or differently structured input is a
        one-line :class:`~pt2onnx.errors.VerificationError` naming it and what the model
        takes (:func:`pt2onnx.interface.matching.match_inputs`).

        Inputs the model mutates in place are updated in place here too.
        """
        return self._run(args, kwargs)[0]

    def _matches(self) -> dict[str, Any]:
        """What matches given inputs to the captured ones: the forward's signature, aliases, ONNX input names."""
        if self._matching is None:
            try:
                signature = inspect.signature(self._eager.forward) if self._eager is not None else None
            except (TypeError, ValueError):  # a forward without a readable signature: the program's names
                signature = None
            renamed = self.layout.inputs
            names = [renamed.get(name, name) for name in user_input_names(self.program)]
            self._matching = {"signature": signature, "names": names}
        return {**self._matching, "aliases": self.input_aliases}

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, ort.OrtValue]]:
        """What :meth:`run` returns, and the ``<target>.updated`` outputs by ONNX output name."""
        inputs = user_inputs(self.program, args, kwargs, **self._matches())
        onnx_inputs = set(self.input_names)
        renamed = self.layout.inputs
        feeds = {
            renamed.get(name, name): to_ort(value)
            for name, value in inputs.items()
            if renamed.get(name, name) in onnx_inputs
        }
        missing = onnx_inputs - set(feeds)
        if missing:
            raise VerificationError(f"no value given for ONNX input(s) {sorted(missing)}")
        self._check_static_dims({name: tuple(value.shape()) for name, value in feeds.items()})
        refused = self._refused(inputs)
        if refused:
            # torch's guards are sufficient conditions, not necessary ones: the graph may still be
            # exact there (pdist's derived size), so the run goes on, and the caller is told.
            warnings.warn(refused, GuardedSizeWarning, stacklevel=3)
        outputs = self.session().run_with_ort_values(self.output_names, feeds)
        by_name = dict(zip(self.output_names, outputs))
        user = [self._output(by_name, e) if isinstance(e, str) else e[1] for e in self.layout.user]
        for name, target in self.layout.mutations.items():
            if target in inputs:
                inputs[target].copy_(from_ort(by_name[name]))
        spec = self.program.call_spec.out_spec
        updated = {name: by_name[name] for name in self.layout.mutations}
        return (pytree.tree_unflatten(user, spec) if spec is not None else user), updated

    def guard_failure(self, *args: Any, **kwargs: Any) -> str | None:
        """Why torch's captured program refuses these inputs' sizes, or None where it takes them.

        Takes the inputs as :meth:`run` does. A size that differs from a dim the export holds
        static is refused, and so is one that fails torch's guards on input sizes, which
        torch's program checks before it runs (``report.guarded_sizes`` lists the dims they
        narrow): the ONNX graph cannot, and at such sizes it may fail or compute garbage.
        :meth:`run` and :meth:`verify` raise a :class:`~pt2onnx.errors.VerificationError`
        for a static dim, and warn with a :class:`~pt2onnx.errors.GuardedSizeWarning` for a
        failed guard (the graph may still be exact there: torch's guards are sufficient, not
        necessary), with this text.
        """
        inputs = user_inputs(self.program, args, kwargs, **self._matches())
        renamed = self.layout.inputs
        shapes = {renamed.get(n, n): tuple(v.shape) for n, v in inputs.items() if isinstance(v, torch.Tensor)}
        try:
            self._check_static_dims(shapes)
        except VerificationError as e:
            return e.message
        return self._refused(inputs)

    def _refused(self, inputs: dict[str, Any]) -> str | None:
        if self._guards is None:
            return None
        why = self._guards.failure(self._guards.sizes(list(inputs.values())))
        if why is None:
            return None
        accepted = "; ".join(f"{dim}: {sizes}" for dim, sizes in self.report.guarded_sizes.items())
        return (
            f"torch's captured program refuses these input sizes: {why}"
            + (f" (it accepts {accepted})" if accepted else "")
            + ". The ONNX graph cannot check torch's guards, and at such sizes it may fail or compute garbage: "
            "run it at sizes the guards accept, or export with an example of the sizes you will run at"
        )

    def _check_static_dims(self, shapes: dict[str, tuple[int, ...]]) -> None:
        """A clear error for an input whose rank or static dim differs from the graph's, where
        onnxruntime would say only ``Got invalid dimensions``: which dim the export fixed, and why."""
        renamed = {onnx: captured for captured, onnx in self.layout.inputs.items()}
        for value in self.model.graph.inputs:
            name = value.name or ""
            if name not in shapes or value.shape is None:
                continue
            got = shapes[name]
            expected = [dim if isinstance(dim, int) else None for dim in value.shape]
            if len(got) != len(expected):
                raise VerificationError(
                    f"input {name!r} has {len(got)} dims {list(got)}; the exported model takes {len(expected)}: "
                    f"{value.shape}"
                )
            for axis, (size, fixed) in enumerate(zip(got, expected)):
                if fixed is None or size == fixed:
                    continue
                why = self.report.static_dims.get(renamed.get(name, name), {}).get(axis)
                reason = (
                    f"with dynamic_shapes='auto', {why}"
                    if why
                    else "no dynamic_shapes made it dynamic, or torch specialized it while tracing"
                )
                raise VerificationError(
                    f"input {name!r} has size {size} at dim {axis}, but the exported model fixed that dim to {fixed} "
                    f"({reason}); export again with that dim dynamic (dynamic_shapes=) and an example where it is "
                    f"not 0 or 1, or feed it at size {fixed}"
                )

    def _output(self, outputs: dict[str, ort.OrtValue], name: str) -> torch.Tensor:
        tensor = from_ort(outputs[name])
        if name not in self.layout.complex:
            return tensor
        # Complex values come out of the model as (..., 2) real tensors. An empty one may carry
        # strides view_as_complex refuses (it wants the last one 1), so it is copied to fresh ones.
        return torch.view_as_complex(tensor.clone(memory_format=torch.contiguous_format))

    def verify(
        self,
        *args: Any,
        _atol: float | None = None,
        _rtol: float | None = None,
        _eager: torch.nn.Module | None = None,
        **kwargs: Any,
    ) -> Verification:
        """Run eager PyTorch and onnxruntime on the same inputs and compare every output.

        Takes the inputs as :meth:`run` does; both sides are called with them laid out as
        captured (constants left out filled in, keywords by their captured names).

        Returns a :class:`~pt2onnx.runtime.Verification` (per output: max abs/rel
        difference, shape/dtype/NaN agreement). Each output is compared by its own dtype:
        integers and bools exactly, floats within their dtype's tolerance
        (:data:`pt2onnx.runtime.TOLERANCES`) unless ``_atol``/``_rtol`` are given
        (underscored so they never clash with the model's own keyword arguments).

        What the model updates in place is compared too, as ``<target>.updated``: each
        buffer and parameter it mutates, read from eager's module after the call (then put
        back as it was: the user's module, and the weights the ONNX model holds, which are
        its tensors, stay unchanged), and each input it mutates (both sides run on copies).

        ``_eager`` is the model to compare with, when the exported one holds no weights
        (built on the meta device, exported with ``weights=``): the same model with its
        weights. A model exported with ``dtype=`` is compared with eager in that dtype:
        a converted copy of the model, called with its floating inputs converted.
        """
        args, kwargs = match_inputs(self.program, args, kwargs, **self._matches())
        eager = _eager if _eager is not None else self._eager if self._eager is not None else self.program.module()
        empty = [name for name, t in [*eager.named_parameters(), *eager.named_buffers()] if t.is_meta]
        if empty:
            raise VerificationError(
                f"cannot run the model in eager PyTorch: its weights {', '.join(empty[:3])}"
                f"{f' and {len(empty) - 3} more' if len(empty) > 3 else ''} are on the meta device",
                hint="pass the model built with its weights: result.verify(*inputs, _eager=model)",
            )
        eager_args, eager_kwargs = copy_inputs(args), copy_inputs(kwargs)
        if self.dtype is not None:
            eager = eager_in(eager, self.dtype)
            eager_args, eager_kwargs = cast_inputs(eager_args, eager_kwargs, self.dtype)
        state, inputs = self._mutations()
        with self.report.phase("verify"):
            with torch.no_grad(), _put_back(eager, state.values()):
                expected = eager(*eager_args, **eager_kwargs)
                expected_updates = [_tensor(eager, target).clone() for target in state.values()]
                if state:  # an output may be a tensor put back below
                    expected = copy_inputs(expected)
            onnx_args, onnx_kwargs = copy_inputs(args), copy_inputs(kwargs)
            if self.dtype is not None and any(v.dtype == from_torch_dtype(self.dtype) for v in self.model.graph.inputs):
                onnx_args, onnx_kwargs = cast_inputs(onnx_args, onnx_kwargs, self.dtype)  # keep_io_dtype=False
            got, updated = self._run(onnx_args, onnx_kwargs)
            expected_updates += self._user_inputs(inputs.values(), eager_args, eager_kwargs)
            got_updates = [from_ort(updated[name]) for name in state]
            got_updates += self._user_inputs(inputs.values(), onnx_args, onnx_kwargs)
            if self.dtype is not None:
                got, got_updates = like_eager(got, expected), like_eager(got_updates, expected_updates)
            names = [e for e in self.layout.user if isinstance(e, str)]
            check = compare(names, expected, got, atol=_atol, rtol=_rtol)
            updates = compare([*state, *inputs], expected_updates, got_updates, atol=_atol, rtol=_rtol)
            check = Verification(check.outputs + updates.outputs)
        self.report.verifications.append(check)
        self._write_report()
        return check

    def _mutations(self) -> tuple[dict[str, str], dict[str, str]]:
        """The ``<target>.updated`` outputs of mutated parameters and buffers, and of mutated user inputs.

        Each maps the ONNX output name to its target: a fully qualified name, or a user
        input's placeholder name.
        """
        inputs = {
            spec.target
            for spec in self.program.graph_signature.output_specs
            if spec.kind == OutputKind.USER_INPUT_MUTATION
        }
        mutations = self.layout.mutations.items()
        return (
            {name: target for name, target in mutations if target not in inputs},
            {name: target for name, target in mutations if target in inputs},
        )

    def _user_inputs(self, targets: Iterable[str], args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        """The user inputs with the placeholder names ``targets``, taken from ``args`` and ``kwargs``."""
        inputs = user_inputs(self.program, args, kwargs)
        return [inputs[target] for target in targets]

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
