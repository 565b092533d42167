"""The pytest plugin of :mod:`pt2onnx.testing` (entry point ``pytest11``): proofs that can fail.

``pytest --pt2onnx-prove NAME`` (repeatable, or the ini option ``pt2onnx_prove``) fails
the session unless every converter, lowering, custom-op handler, decomposition and
rewrite that plugin ``NAME`` registers did work in an export of a *passing* test that
matched eager PyTorch (:func:`pt2onnx.testing.assert_exports_like_eager`), on the test's
inputs and on the harness's witness input, at a tolerance that can tell a right
converter from a wrong one (:mod:`pt2onnx.testing.record`). A test that only declares an
op, or an export that the builtin converter did instead of the pack's, proves nothing;
the summary says why each registration left is unproven. Works with pytest-xdist:
workers send what they proved to the controller.

A plugin name that is neither loaded by a session nor importable is a usage error at
start-up, naming the plugins that exist.

While each test runs, pytest's log capture is kept off torch's structured-trace logger
(:func:`_quiet_torch_trace`): a failing test shows its own log, not hundreds of empty
``DEBUG torch.__trace`` lines.

Nothing here imports torch until a test runs, so the plugin is free where unused (with
``--pt2onnx-prove``, the plugins are loaded at start-up to check the names).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Generator
from typing import Any

import pytest

from .record import Evidence, Proof, collecting, find_plugin, unproven

_EVIDENCE = pytest.StashKey[Evidence]()  # on the config: what the session's passing tests proved
_TEST_EVIDENCE = pytest.StashKey[Evidence]()  # on an item: what its call proved
_MISSING = pytest.StashKey[dict[str, list[tuple[Proof, str]]]]()
_WORKER_KEY = "pt2onnx_proofs"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("pt2onnx")
    group.addoption(
        "--pt2onnx-prove",
        action="append",
        default=[],
        metavar="PLUGIN",
        help="fail unless every registration of this pt2onnx plugin is proven by a passing test (repeatable)",
    )
    parser.addini("pt2onnx_prove", "pt2onnx plugins whose every registration must be proven", type="linelist")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_EVIDENCE] = Evidence()
    if hasattr(config, "workerinput"):  # an xdist worker: the controller checked the names
        return
    from ..errors import PluginError

    for name in _plugins_to_prove(config):
        try:
            find_plugin(name)
        except PluginError as e:
            hint = f"\n  what to do: {e.hint}" if e.hint else ""
            raise pytest.UsageError(f"--pt2onnx-prove {name}: {e.message}{hint}") from None


#: torch's structured-trace logger (what ``TORCH_TRACE`` writes to a file).
TORCH_TRACE_LOGGER = "torch.__trace"


def _quiet_torch_trace() -> None:
    """Take pytest's log capture off torch's structured-trace logger.

    pytest attaches its capturing handlers to every logger that does not propagate, and
    torch's ``torch.__trace`` does not: it is always at DEBUG level and meant to have a
    handler only when ``TORCH_TRACE`` names a folder. With pytest's handlers on it, torch
    builds a trace record (graphs as text) at each step of every export, and a failing
    test shows them as hundreds of empty ``DEBUG torch.__trace`` lines. The handlers pytest
    also put on the root logger are removed; torch's own stay, so ``TORCH_TRACE`` works.
    """
    if "torch" not in sys.modules:
        return
    logger = logging.getLogger(TORCH_TRACE_LOGGER)
    captured = logging.getLogger().handlers
    for handler in [h for h in logger.handlers if h in captured]:
        logger.removeHandler(handler)


# trylast: inside the logging plugin's wrappers, which attach the handlers as each phase starts.
@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, Any, Any]:
    _quiet_torch_trace()
    return (yield)


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    _quiet_torch_trace()
    with collecting() as evidence:
        try:
            return (yield)
        finally:
            item.stash[_TEST_EVIDENCE] = evidence


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, Any, Any]:
    _quiet_torch_trace()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    if report.when == "call" and report.passed and not hasattr(report, "wasxfail"):
        item.config.stash[_EVIDENCE].add(item.stash.get(_TEST_EVIDENCE, Evidence()), item.nodeid)
    return report


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist controller: take what a worker proved."""
    wire = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if wire is not None:
        node.config.stash[_EVIDENCE].add(Evidence.from_wire(wire))


def _plugins_to_prove(config: pytest.Config) -> list[str]:
    names = [*config.getoption("pt2onnx_prove"), *config.getini("pt2onnx_prove")]
    return list(dict.fromkeys(n for n in names if n))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller decides
        config.workeroutput[_WORKER_KEY] = config.stash[_EVIDENCE].to_wire()
        return
    plugins = _plugins_to_prove(config)
    if not plugins or session.shouldfail or session.shouldstop:
        return
    missing = {name: unproven(name, config.stash[_EVIDENCE]) for name in plugins}
    config.stash[_MISSING] = {name: rows for name, rows in missing.items() if rows}
    if config.stash[_MISSING] and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    plugins = _plugins_to_prove(config)
    if not plugins or _MISSING not in config.stash:
        return
    missing = config.stash[_MISSING]
    for name in plugins:
        rows = missing.get(name, [])
        if not rows:
            terminalreporter.write_line(f"pt2onnx: every registration of plugin {name!r} is proven by a passing test")
            continue
        terminalreporter.write_line(
            f"pt2onnx: {len(rows)} registration(s) of plugin {name!r} not proven by any passing test "
            "(assert_exports_like_eager must convert with them and match eager, on the witness input too):",
            red=True,
        )
        for (kind, op, function), why in rows:
            terminalreporter.write_line(f"  {kind:<13} {op:<48} {function}")
            terminalreporter.write_line(f"      {why}")
