"""The shell's conventions (#19): bare `gradcalc`, one style for every error, -o and the format, colour,
completion, and --help examples that work after a wheel install."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    NEURON,
    REPO,
    assert_bad_input,
    json_error,
    run_cli,
)

from gradcalc.cli.app import app


def command_names() -> list[str]:
    return [c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands]


def process(*args: str, env: dict[str, str] | None = None, **kwargs: Any) -> subprocess.CompletedProcess:
    """`gradcalc ARGS` as a shell runs it: a process of its own."""
    return subprocess.run([sys.executable, "-m", "gradcalc", *args], cwd=REPO, capture_output=True, timeout=60,
                          check=False, env={**os.environ, **(env or {})}, **kwargs)


# --- bare gradcalc: a usage error that lists the commands ---------------------------------------------------------

def test_bare_gradcalc_lists_the_commands_on_stderr_and_exits_2() -> None:
    """Nothing to do is a usage error (rg, uv, curl): short help on stderr, nothing on stdout, status 2."""
    result = process(text=True)
    assert result.returncode == EXIT_BAD_INPUT
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith("usage: gradcalc COMMAND")
    for name in command_names():
        assert any(line.startswith(f"  {name} ") for line in lines), (name, result.stderr)
    assert "gradcalc --help" in result.stderr and "Traceback" not in result.stderr


def test_help_asked_for_is_on_stdout_with_status_0() -> None:
    for args in (["--help"], ["-h"], ["grad", "--help"]):
        result = process(*args, text=True)
        assert result.returncode == EXIT_OK and "Usage: gradcalc" in result.stdout and result.stderr == "", args


# --- one error style: Click's usage errors look like gradcalc's own -----------------------------------------------

USAGE_ERRORS = [
    (("grad", NEURON, "--bogus"), "no such option: --bogus", "'gradcalc grad --help' lists the options"),
    (("grad", NEURON, "--wr", "a"), "no such option: --wr", "--wrt"),
    (("graph", NEURON, "--format", "jpeg"), "invalid value for '--format': 'jpeg' is not one of", "--help"),
    (("jvp", NEURON, "--wrt", "a"), "missing option '--tangent'", "'gradcalc jvp --help'"),
    (("grad", NEURON, "--of"), "option '--of' requires an argument", "'gradcalc grad --help'"),
    (("eval", NEURON, "--seed", "-1"), "invalid value for '--seed'", "--help"),
    (("grad", NEURON, "extra"), "got unexpected extra argument", "--help"),
    (("grd", NEURON), "no such command 'grd'", "did you mean 'grad'?"),
    (("--bogus",), "no such option: --bogus", "'gradcalc --help' lists the commands"),
]


@pytest.mark.parametrize(("args", "message", "hint"), USAGE_ERRORS, ids=[" ".join(a[::2]) for a, _, _ in USAGE_ERRORS])
def test_a_usage_error_looks_like_a_program_error(args: tuple[str, ...], message: str, hint: str) -> None:
    """`error: message` and `  hint: ...`, status 2, as a syntax error is written; no Rich box, no usage banner."""
    result = run_cli(*args)
    assert_bad_input(result)
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: {message}"), result.stderr
    assert len(lines) == 2 and lines[1].startswith("  hint: ") and hint in lines[1], result.stderr
    with_json = (args[0], "--json", *args[1:]) if args[0] in command_names() else (*args, "--json")
    body = json_error(run_cli(*with_json))
    assert body["type"] == "UsageError" and body["message"].startswith(message) and hint in body["hint"], body


def test_a_usage_error_and_a_program_error_are_written_alike() -> None:
    usage, program = run_cli("grad", NEURON, "--bogus"), run_cli("grad", NEURON, "--wrt", "nope")
    for result in (usage, program):
        assert_bad_input(result)
        assert result.stderr.startswith("error: ") and "\n  hint: " in result.stderr, result.stderr
    assert set(json_error(run_cli("grad", NEURON, "--bogus", "--json"))) == \
        set(json_error(run_cli("grad", NEURON, "--wrt", "nope", "--json"))) - {"file"}


def test_a_usage_error_in_a_process_is_one_message_on_stderr() -> None:
    result = process("graph", "samples/neuron.eq", "--format", "jpeg", text=True)
    assert result.returncode == EXIT_BAD_INPUT and result.stdout == ""
    assert result.stderr.startswith("error: invalid value for '--format'") and "╭" not in result.stderr
