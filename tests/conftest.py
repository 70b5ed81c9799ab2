"""Shared fixtures: every test starts on the CPU in float64, recording graphs. A plain run leaves out the tests
marked slow; `pytest --full` runs them too (CI does)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

import gradcalc  # noqa: F401  (installs the derivative table on the primitives)
from gradcalc.engine import backend, graph

# The property tests draw the same examples on every run, so that a CI result can be reproduced and a
# landing does not depend on luck; `pytest --hypothesis-profile=explore` searches new examples, and
# `--hypothesis-profile=quick` draws a tenth as many (helpers.examples) for a quick look while working.
settings.register_profile("default", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500, print_blob=True)
settings.register_profile("quick", derandomize=True, max_examples=10, print_blob=True)
settings.load_profile("default")


_LEFT_OUT = pytest.StashKey[int]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--full", action="store_true",
                     help="run every test, the ones marked slow too (what CI runs); a plain run leaves them out")


def _named_on_the_command_line(config: pytest.Config) -> list[tuple[Path, str]]:
    """The tests the command line names (`path::test`, `path::test[param]`): (file, name)."""
    named = []
    for arg in config.args:
        path, separator, name = arg.partition("::")
        if separator:
            named.append(((config.invocation_params.dir / path).resolve(), name))
    return named


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the tests marked slow, unless --full, a -m expression (which chooses for itself), or the
    command line names them."""
    if config.getoption("--full") or config.getoption("markexpr") or "-m" in config.invocation_params.args:
        return
    named = _named_on_the_command_line(config)

    def wanted(item: pytest.Item) -> bool:
        if item.get_closest_marker("slow") is None:
            return True
        name = item.nodeid.partition("::")[2]
        return any(item.path.resolve() == path and (name == test or name.startswith((f"{test}[", f"{test}::")))
                   for path, test in named)

    kept = [item for item in items if wanted(item)]
    if len(kept) < len(items):
        config.hook.pytest_deselected(items=[item for item in items if not wanted(item)])
        config.stash[_LEFT_OUT] = len(items) - len(kept)
        if hasattr(config, "workeroutput"):  # a pytest-xdist worker: the count goes to the controller
            config.workeroutput["slow_left_out"] = len(items) - len(kept)
        items[:] = kept


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    """pytest-xdist: each worker collected and left out the same tests; the controller says how many."""
    count = getattr(node, "workeroutput", {}).get("slow_left_out", 0)
    config = node.config  # type: ignore[attr-defined]
    config.stash[_LEFT_OUT] = max(config.stash.get(_LEFT_OUT, 0), count)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if config.stash.get(_LEFT_OUT, 0):
        terminalreporter.write_line(f"{config.stash[_LEFT_OUT]} tests marked slow were left out: "
                                    "`pytest --full` runs every test, as CI does")


@pytest.fixture(autouse=True)
def float64_cpu():
    """A run with dtype='float32' switches the backend globally; put it back around every test."""
    backend.use("cpu", "float64")
    graph.recording = True
    yield
    backend.use("cpu", "float64")
    graph.recording = True
