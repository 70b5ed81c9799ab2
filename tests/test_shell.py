"""The shell's conventions (#19): bare `gradcalc`, one style for every error, -o and the format, colour,
completion, and --help examples that work after a wheel install."""

from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
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
from terminal import run_in_terminal

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


@pytest.mark.slow
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


# --- shell completion (Typer's): commands, options, --format values and the program's variable names ----------------

@functools.cache
def completion_script(shell: str) -> str:
    """What `gradcalc --show-completion SHELL` prints (the shell named, not detected from the parent process);
    the same text every time, so asked for once a session."""
    result = process("--show-completion", shell, env={"_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION": "1"}, text=True)
    assert result.returncode == EXIT_OK, result.stderr
    return result.stdout


@pytest.fixture
def gradcalc_on_path(tmp_path: Any) -> dict[str, str]:
    """A `gradcalc` command on PATH that runs this checkout, as the console script would."""
    command = tmp_path / "bin" / "gradcalc"
    command.parent.mkdir()
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m gradcalc "$@"\n', encoding="utf-8")
    command.chmod(0o755)
    return {"PATH": f"{command.parent}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def test_help_offers_to_install_completion() -> None:
    result = run_cli("--help")
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


BASH_CASES = [
    (["gr"], ["grad", "graph", "gradcheck"]),
    (["graph", "samples/neuron.eq", "--format", ""], ["tree", "dot", "mermaid", "svg", "png", "html"]),
    (["grad", "samples/neuron.eq", "--wrt", "w"], ["w1", "w2", "w3", "w4"]),
    (["grad", "samples/neuron.eq", "--wrt", "w1,a,"], [f"w1,a,{n}" for n in "a w1 w2 w3 w4 b c d L".split()]),
    (["jacobian", "-e", "x=[1,2];y=x^2", "--of", ""], ["x", "y"]),
    (["grad", "--js"], ["--json"]),
]


# Each case starts bash and two processes: the variable names after a comma in every run, the rest in the full run.
BASH_PARAMS = [pytest.param(words, expected, id=" ".join(words),
                            marks=() if words[-1] == "w1,a," else pytest.mark.slow) for words, expected in BASH_CASES]


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
@pytest.mark.parametrize(("words", "expected"), BASH_PARAMS)
def test_bash_completion(gradcalc_on_path: dict[str, str], words: list[str], expected: list[str]) -> None:
    """The script bash sources, driven as bash drives it: COMP_WORDS and COMP_CWORD, then COMPREPLY."""
    driver = (completion_script("bash") + "\nCOMP_WORDS=(gradcalc " + " ".join(shlex.quote(w) for w in words) +
              f")\nCOMP_CWORD={len(words)}\n_gradcalc_completion gradcalc\nprintf '%s\\n' \"${{COMPREPLY[@]}}\"\n")
    result = subprocess.run(["bash", "-c", driver], cwd=REPO, capture_output=True, text=True, timeout=60,
                            check=False, env={**os.environ, **gradcalc_on_path})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == expected, result


@pytest.mark.slow
@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion(shell: str) -> None:
    """The exchange their scripts make (_TYPER_COMPLETE_ARGS: the line so far), checked without the shells."""
    script = completion_script(shell)
    assert "_GRADCALC_COMPLETE=complete_" + shell in script and "_TYPER_COMPLETE_ARGS" in script, script
    env = {"_GRADCALC_COMPLETE": f"complete_{shell}", "_TYPER_COMPLETE_FISH_ACTION": "get-args"}
    for line, expected in (("gradcalc graph samples/neuron.eq --format ",
                            ["tree", "dot", "mermaid", "svg", "png", "html"]),
                           ("gradcalc grad samples/neuron.eq --of w", ["w1", "w2", "w3", "w4"])):
        result = process(env={**env, "_TYPER_COMPLETE_ARGS": line}, text=True)
        assert result.returncode == EXIT_OK, result.stderr
        for word in expected:
            assert (f'"{word}"' if shell == "zsh" else f"{word}\n") in result.stdout, (line, result.stdout)


# --- graph's output: -o -, the format from -o's suffix, binary only where it cannot mess up a screen ---------------

FAKE_DOT = """#!/bin/sh
# Graphviz's dot, as far as gradcalc uses it: the picture of the graph read on stdin, in the format -T names.
cat > /dev/null
case "$1" in
  -Tpng) printf '\\211PNG\\r\\n\\032\\n\\000\\377fake png' ;;
  -Tsvg) printf '<svg xmlns="http://www.w3.org/2000/svg"><text>\\342\\210\\202L/\\342\\210\\202a</text></svg>\\n' ;;
  *) exit 1 ;;
esac
"""
PNG_BYTES = b"\x89PNG\r\n\x1a\n\x00\xfffake png"


@pytest.fixture
def fake_dot(tmp_path: Any) -> dict[str, str]:
    """A `dot` on PATH that draws fake pictures: the tests need no Graphviz."""
    program = tmp_path / "graphviz" / "dot"
    program.parent.mkdir()
    program.write_text(FAKE_DOT, encoding="utf-8")
    program.chmod(0o755)
    return {"PATH": f"{program.parent}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("kind", ["dot", "mermaid"])
def test_output_dash_is_standard_output(kind: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """-o - is standard output, not a file named '-': the same bytes as -o FILE and as no -o."""
    monkeypatch.chdir(tmp_path)
    dashed = run_cli("graph", NEURON, "--format", kind, "-o", "-")
    assert dashed.exit_code == EXIT_OK, dashed.output
    assert not (tmp_path / "-").exists()
    run_cli("graph", NEURON, "--format", kind, "-o", tmp_path / "file")
    assert dashed.stdout == (tmp_path / "file").read_text(encoding="utf-8") == \
        run_cli("graph", NEURON, "--format", kind).stdout
    assert dashed.stdout.startswith("digraph" if kind == "dot" else "graph TD")


def test_output_dash_with_the_tree_prints_the_tree() -> None:
    assert run_cli("graph", NEURON, "-o", "-").stdout == run_cli("graph", NEURON).stdout


@pytest.mark.parametrize(("suffix", "start"), [(".dot", b"digraph"), (".gv", b"digraph"), (".DOT", b"digraph"),
                                               (".mmd", b"graph TD"), (".mermaid", b"graph TD"),
                                               (".svg", b"<svg"), (".png", b"\x89PNG"),
                                               (".html", b"<!DOCTYPE html>"), (".HTM", b"<!DOCTYPE html>")])
def test_the_format_comes_from_the_suffix(suffix: str, start: bytes, tmp_path: Any, fake_dot: dict[str, str]) -> None:
    """Which format a suffix means is the command's own logic: checked in-process (the pipes are checked below)."""
    target = tmp_path / f"graph{suffix}"
    result = run_cli("graph", NEURON, "-o", target, env=fake_dot)
    assert result.exit_code == EXIT_OK and result.stdout == "", result.output
    assert target.read_bytes().startswith(start)


@pytest.mark.parametrize(("args", "message"), [
    (("--format", "dot", "-o", "g.svg"), "--format dot contradicts -o g.svg: a .svg file is svg"),
    (("--format", "png", "-o", "g.mmd"), "--format png contradicts -o g.mmd: a .mmd file is mermaid"),
    (("--format", "tree", "-o", "g.dot"), "-o writes --format dot, mermaid, svg, png or html"),
    (("-o", "g.txt"), "cannot tell the format of -o g.txt from its suffix"),
    (("--format", "dot", "--json"), "--json and --format dot do not combine"),
    (("--format", "tree", "--json"), "--json and --format tree do not combine"),
    (("-o", "g.json", "--json"), "--json and -o g.json do not combine"),
])
def test_contradictory_output_flags_are_usage_errors(args: tuple[str, ...], message: str, tmp_path: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("graph", NEURON, *args)
    if "--json" in args:  # the error is a JSON document, as every error is with --json
        body = json_error(result)
        assert body["message"].startswith(message) and body["hint"], body
    else:
        assert_bad_input(result)
        assert result.stderr.startswith(f"error: {message}") and "\n  hint: " in result.stderr, result.stderr
    assert list(tmp_path.iterdir()) == []  # refused before anything is written


def test_a_file_format_with_an_unknown_suffix_is_written_as_asked(tmp_path: Any) -> None:
    target = tmp_path / "graph.txt"
    assert run_cli("graph", NEURON, "--format", "mermaid", "-o", target).exit_code == EXIT_OK
    assert target.read_text(encoding="utf-8").startswith("graph TD")


@pytest.mark.parametrize("args", [(), ("-o", "-")])
def test_png_goes_to_a_pipe_byte_for_byte(args: tuple[str, ...], fake_dot: dict[str, str]) -> None:
    """`gradcalc graph ... --format png > g.png`: standard output is not a terminal, so the bytes go there."""
    result = process("graph", "samples/neuron.eq", "--format", "png", *args, env=fake_dot)
    assert result.returncode == EXIT_OK, result.stderr
    assert result.stdout == PNG_BYTES and result.stderr == b""


def test_svg_goes_to_a_pipe_as_utf8_whatever_the_locale(fake_dot: dict[str, str]) -> None:
    """A file format's bytes are the file's, not re-encoded for the terminal (a cp1252 pipe keeps ∂ as UTF-8)."""
    result = process("graph", "samples/neuron.eq", "--format", "svg", env={**fake_dot, "PYTHONIOENCODING": "cp1252"})
    assert result.returncode == EXIT_OK, result.stderr
    assert "∂L/∂a".encode() in result.stdout


def test_png_is_refused_on_a_terminal_unless_forced(fake_dot: dict[str, str]) -> None:
    """As curl: binary output would mess up the screen, so it is refused (exit 2); -o - says 'I mean it'."""
    shown = run_in_terminal("graph", "samples/neuron.eq", "--format", "png", env=fake_dot)
    assert shown.status == EXIT_BAD_INPUT and shown.raw == b""
    assert shown.stderr.startswith("error: a PNG is binary: it is not written to a terminal"), shown.stderr
    assert "> graph.png" in shown.stderr and "-o -" in shown.stderr
    forced = run_in_terminal("graph", "samples/neuron.eq", "--format", "png", "-o", "-", env=fake_dot)
    assert forced.status == EXIT_OK and forced.raw.startswith(b"\x89PNG"), forced


# --- colour: NO_COLOR and FORCE_COLOR, as Rich documents them ------------------------------------------------------

COLOURED = "\x1b[31m"  # red: the verdict of a wrong claim
CHECK = ("check", "samples/neuron.eq", "--claim", "dL/da = 2", "--claim", "dL/dw1 = -1")


def plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.mark.slow
def test_a_pipe_gets_no_colour_unless_forced() -> None:
    piped = process(*CHECK, env={"NO_COLOR": "", "FORCE_COLOR": ""}, text=True)
    assert piped.returncode == 1 and "\x1b" not in piped.stdout
    forced = process(*CHECK, env={"NO_COLOR": "", "FORCE_COLOR": "1", "TERM": "xterm-256color"}, text=True)
    assert forced.returncode == 1 and COLOURED in forced.stdout
    assert plain(forced.stdout) == piped.stdout  # the same table, whole (not fitted to a width), no padding left
    both = process(*CHECK, env={"NO_COLOR": "1", "FORCE_COLOR": "1", "TERM": "xterm-256color"}, text=True)
    assert COLOURED not in both.stdout and plain(both.stdout) == piped.stdout  # NO_COLOR wins over colour
    doc = process(*CHECK, "--json", env={"FORCE_COLOR": "1", "TERM": "xterm-256color"}, text=True)
    assert "\x1b" not in doc.stdout + doc.stderr  # JSON never goes through Rich


@pytest.mark.slow
def test_a_terminal_gets_colour_unless_no_color() -> None:
    assert COLOURED in run_in_terminal(*CHECK).raw.decode()
    shown = run_in_terminal(*CHECK, env={"NO_COLOR": "1"})
    assert shown.status == 1 and COLOURED not in shown.raw.decode() and "✗ wrong" in shown.screen


# --- --help: examples that work where gradcalc is installed (a wheel has no samples/) ------------------------------

def help_examples() -> list[tuple[str, list[str]]]:
    """Each command's example lines, as words (a trailing '(note)' left out)."""
    found = []
    for command in app.registered_commands:
        name = command.name or (command.callback.__name__ if command.callback else "")
        text = (command.callback.__doc__ if command.callback else "") or ""
        text += command.epilog or ""
        for line in text.split("Examples", 1)[-1].splitlines():
            if line.strip().startswith("gradcalc "):
                found.append((name, shlex.split(re.split(r"\s{2,}\(", line.strip())[0])))
    return found


def test_help_names_no_file_of_the_source_tree() -> None:
    for name in command_names():
        assert "samples/" not in run_cli(name, "--help").stdout, name
    assert "samples/" not in run_cli("--help").stdout


INLINE = [(name, words) for name, words in help_examples() if "-e" in words]


@pytest.mark.parametrize(("name", "words"), INLINE, ids=[" ".join(w[1:]) for _, w in INLINE])
def test_every_inline_help_example_runs(name: str, words: list[str], tmp_path: Any,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The examples with -e need no file: each runs as shown, successfully, in an empty folder."""
    monkeypatch.chdir(tmp_path)
    result = run_cli(*words[1:])
    assert result.exit_code == EXIT_OK, result.output


def test_every_command_has_an_inline_example() -> None:
    assert {name for name, _ in INLINE} >= set(command_names()) - {"doctor", "examples"}  # they run no program


def test_help_at_80_columns_gives_the_option_help_room() -> None:
    """An --x/--no-x pair takes a column of its own in Rich's help: with --anomaly/--no-anomaly every
    command's option help was squeezed into about 25 of 80 columns. One name per option keeps it readable."""
    shown = run_cli("grad", "--help", env={"COLUMNS": "80"}).stdout
    row = next(line for line in shown.splitlines() if line.lstrip("│ ").startswith("--wrt"))
    column = row.split("NAME", 1)[1].lstrip(" ").rstrip("│")  # the help text's column, its padding included
    assert len(row) <= 80 and len(column) >= 30, row
    assert "--no-anomaly" in shown and "--anomaly " not in shown
