"""Shared helpers for the CLI, error and fuzz tests: run gradcalc in-process and read what it printed."""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

import numpy as np
import pytest
import typer.main
import typer.testing
from hypothesis import settings
from typer.testing import CliRunner

from gradcalc.cli.app import app

REPO = Path(__file__).resolve().parent.parent
SAMPLES = REPO / "samples"
NEURON = str(SAMPLES / "neuron.eq")
NEURON_TENSOR = str(SAMPLES / "neuron_tensor.eq")
MEAN = str(SAMPLES / "mean.eq")

# Rich decides width, colour and terminal features from the environment: pin all of it.
ENV = {"COLUMNS": "120", "LINES": "50", "TERM": "dumb", "NO_COLOR": "1", "FORCE_COLOR": None,
       "PYTHONIOENCODING": "utf-8"}

# Warnings that Python hides by default outside __main__.
_QUIET_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning)

EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT, EXIT_BUG = 0, 1, 2, 3

# Typer's CliRunner makes the Click command of the whole app again on every invoke: ~18 ms of the ~21 ms an
# in-process `gradcalc grad` takes, in each of the suite's ~3,800 runs. A process makes it once; so do the
# tests (Click commands keep no state between runs). Any other Typer app is still made afresh.
_make_command = typer.main.get_command


@functools.cache
def _app_command() -> Any:
    return _make_command(app)


def _command_made_once(typer_app: Any) -> Any:
    return _app_command() if typer_app is app else _make_command(typer_app)


if hasattr(typer.testing, "_get_command"):  # the name Typer's CliRunner.invoke calls (0.12 to 0.28)
    typer.testing._get_command = _command_made_once  # type: ignore[attr-defined]


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


def _process_state() -> dict[str, Any]:
    """What a command run in the test process could leave behind for every later test: limits (--max-memory
    sets RLIMIT_DATA, a grading worker RLIMIT_CPU), the --timeout alarm and its handler, the Ctrl-C handler,
    the working folder and the environment."""
    state: dict[str, Any] = {"cwd": os.getcwd(), "environ": dict(os.environ),
                             "SIGINT handler": signal.getsignal(signal.SIGINT)}
    if hasattr(signal, "setitimer"):
        state["SIGALRM handler"] = signal.getsignal(signal.SIGALRM)
        state["ITIMER_REAL armed"] = signal.getitimer(signal.ITIMER_REAL) != (0.0, 0.0)
    if resource is not None:
        for name in ("RLIMIT_DATA", "RLIMIT_AS", "RLIMIT_CPU"):
            state[name] = resource.getrlimit(getattr(resource, name))
    return state


def run_cli(*args: object, input: str | None = None,  # noqa: A002  (click's name for it)
            env: dict[str, str | None] | None = None) -> CliResult:
    """Run `gradcalc ARGS` in-process; stdout and stderr apart; `env` on top of the pinned ENV.

    An exception that escapes the app would be a traceback for a real user, and a warning would be
    printed on stderr: both are appended to stderr, as a real run would show them. A run must leave the
    test process as it found it (limits, alarms, signal handlers, folder, environment): a process would
    take them with it when it exits, and here they would change every later test.
    """
    runner = CliRunner(env={**ENV, **(env or {})})
    before = _process_state()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        result = runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=True)
    after = _process_state()
    left = [f"{key}: {before[key]!r} -> {after[key]!r}" for key in before if before[key] != after[key]]
    assert not left, f"`gradcalc {' '.join(map(str, args))}` left the test process changed:\n" + "\n".join(left)
    stderr = result.stderr
    # What Python would print on stderr by default (pytest would otherwise swallow it).
    for warning in caught:
        if not issubclass(warning.category, _QUIET_WARNINGS):
            stderr += warnings.formatwarning(warning.message, warning.category, warning.filename, warning.lineno)
    exit_code = result.exit_code
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        stderr += "Traceback (most recent call last):\n" + "".join(
            traceback.format_exception(type(exc), exc, exc.__traceback__))
        exit_code = exit_code if exit_code not in (0, None) else 1
    return CliResult(exit_code, result.stdout, stderr)


def examples(count: int) -> int:
    """How many examples a property test draws: `count`, or under a profile that asks for fewer than Hypothesis's
    100 (`--hypothesis-profile=quick`: 10) as many fewer in proportion, at least 5."""
    scale = min(settings.default.max_examples, 100) / 100
    return max(min(count, 5), round(count * scale))


def _reject_constant(token: str) -> Any:
    pytest.fail(f"output is not strict JSON (RFC 8259): it holds the bare token {token}")


def strict_json(text: str) -> Any:
    """Parse one JSON document, refusing NaN / Infinity tokens that RFC 8259 forbids."""
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        pytest.fail(f"not one JSON document ({exc}): {text!r}")


def json_ok(*args: object, input: str | None = None) -> Any:  # noqa: A002
    """Run a command with --json that must succeed; return its parsed document."""
    result = run_cli(*args, "--json", input=input)
    assert result.exit_code == EXIT_OK, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert_no_traceback(result)
    return strict_json(result.stdout)


def assert_no_traceback(result: CliResult) -> None:
    for text in (result.stdout, result.stderr):
        assert "Traceback" not in text, text
        assert "internal error" not in text, text
        assert "RecursionError" not in text, text


# error: FILE:LINE:COL: message
_WHERE = re.compile(r"^error: (?P<file>.+?):(?P<line>\d+):(?P<column>\d+): (?P<message>.+)$")
_CODE = re.compile(r"^(?P<gutter>\s*(?P<number>\d+) \| )(?P<code>.*)$")
_CARET = re.compile(r"^(?P<gutter>\s*\| )(?P<pad> *)(?P<caret>\^+)\s*$")


@dataclass
class TextError:
    file: str
    line: int
    column: int
    message: str
    code: str
    hint: str
    text: str


def assert_bad_input(result: CliResult) -> None:
    """Exit 2, nothing on stdout, no traceback."""
    assert result.exit_code == EXIT_BAD_INPUT, (
        f"expected exit 2, got {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}")
    assert_no_traceback(result)
    assert result.stdout == "", f"an error must print nothing on stdout, got {result.stdout!r}"
    assert result.stderr.strip(), "an error must say something on stderr"


def located_error(result: CliResult, *, file: str | None = None, line: int | None = None,
                  column: int | None = None, code: str | None = None) -> TextError:
    """Check the human error format: `error: FILE:LINE:COL: message`, the source line, a caret under
    the column, and a hint; return the parts."""
    assert_bad_input(result)
    lines = result.stderr.rstrip("\n").splitlines()
    assert sum(1 for text in lines if text.startswith("error:")) == 1, f"one message expected:\n{result.stderr}"
    where = _WHERE.match(lines[0])
    assert where, f"first line is not 'error: FILE:LINE:COL: message':\n{result.stderr}"
    code_match = next((m for m in map(_CODE.match, lines[1:]) if m), None)
    caret_match = next((m for m in map(_CARET.match, lines[1:]) if m), None)
    assert code_match, f"no offending source line shown:\n{result.stderr}"
    assert caret_match, f"no caret line shown:\n{result.stderr}"
    assert int(code_match["number"]) == int(where["line"]), result.stderr
    # the caret sits under the reported column of the shown code (in a long line's window, '...' before it: in it)
    caret_at = len(caret_match["gutter"]) + len(caret_match["pad"])
    if code_match["code"].startswith("..."):
        assert 3 <= caret_at - len(code_match["gutter"]) < len(code_match["code"]), f"caret off:\n{result.stderr}"
    else:
        assert caret_at == len(code_match["gutter"]) + int(where["column"]) - 1, f"caret misplaced:\n{result.stderr}"
    hints = [text.strip()[len("hint:"):].strip() for text in lines if text.strip().startswith("hint:")]
    assert hints and hints[0], f"no hint:\n{result.stderr}"
    error = TextError(where["file"], int(where["line"]), int(where["column"]), where["message"],
                      code_match["code"], hints[0], result.stderr)
    if file is not None:
        assert error.file == file, result.stderr
    if line is not None:
        assert error.line == line, result.stderr
    if column is not None:
        assert error.column == column, result.stderr
    if code is not None:  # shown as the terminal gets it: invisible and control characters escaped
        from gradcalc.inert import inert

        assert error.code.rstrip() == inert(code.expandtabs(1).rstrip()), result.stderr
    return error


def json_error(result: CliResult) -> dict[str, Any]:
    """Check that stderr is exactly one JSON object {"error": {type, message, line, column, ...}}."""
    assert_bad_input(result)
    doc = strict_json(result.stderr)
    assert isinstance(doc, dict) and list(doc) == ["error"], doc
    body = doc["error"]
    for key in ("type", "message", "line", "column"):
        assert key in body, f"JSON error lacks {key!r}: {body}"
    assert isinstance(body["type"], str) and body["type"], body
    assert isinstance(body["message"], str) and body["message"], body
    assert body["line"] is None or isinstance(body["line"], int), body
    assert body["column"] is None or isinstance(body["column"], int), body
    return body


def central_difference(fn: Callable[[np.ndarray], float], x: np.ndarray, step: float = 1e-6,
                       relative: bool = True) -> np.ndarray:
    """∂fn/∂x by central differences, one entry at a time (the step scales with |x| when relative)."""
    point = np.array(x, dtype=np.float64)
    grad = np.zeros(point.shape)
    for k in np.ndindex(point.shape):
        h = step * max(1.0, abs(float(point[k]))) if relative else step
        original = point[k]
        point[k] = original + h
        up = fn(point.copy())
        point[k] = original - h
        down = fn(point.copy())
        point[k] = original
        grad[k] = (up - down) / (2 * h)
    return grad
