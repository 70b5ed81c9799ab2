"""Every encoding and --color (#19).

Where standard output cannot encode ∂ ✓ ✗ · ᵀ (Windows' redirected output is cp1252; ASCII; a C locale),
gradcalc writes ASCII equivalents (dL/dw1, ok, x, *, .T) instead of exiting 3, keeps a backslash escape for
characters of the user's own (a variable θ), and writes JSON that parses to what UTF-8 output holds.
Each run is a real process with the encoding in its environment, as a shell would start it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest
from helpers import ENV, REPO, run_cli, strict_json
from terminal import run_in_terminal
from typer.testing import CliRunner

from gradcalc.cli.app import app
from gradcalc.cli.symbols import SYMBOLS

NEURON, HOMEWORK = str(REPO / "samples" / "neuron.eq"), str(REPO / "samples" / "homework.eq")
TENSOR, DOUBLING = str(REPO / "samples" / "neuron_tensor.eq"), str(REPO / "samples" / "doubling.eq")
SUBMISSIONS = str(REPO / "samples" / "submissions")

# Each encoding: what the environment says, and the codec its output is in.
C_LOCALE = {"LANG": "C", "LC_ALL": "C", "PYTHONCOERCECLOCALE": "0", "PYTHONUTF8": "0"}
ENCODINGS: dict[str, tuple[dict[str, str], str]] = {
    "cp1252": ({"PYTHONIOENCODING": "cp1252"}, "cp1252"),
    "ascii": ({"PYTHONIOENCODING": "ascii"}, "ascii"),
    "C": (C_LOCALE, "ascii"),
}
# What the environment must not decide for these runs (a developer's UTF-8 locale, colour).
_DROPPED = ("PYTHONIOENCODING", "PYTHONUTF8", "PYTHONCOERCECLOCALE", "LANG", "LANGUAGE", "NO_COLOR", "FORCE_COLOR",
            "COLUMNS", "LINES")


def environment(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED and not k.startswith("LC_")}
    return {**env, "TERM": "dumb", **extra}


class Done:
    def __init__(self, process: subprocess.CompletedProcess[bytes], codec: str) -> None:
        self.status = process.returncode
        # Strict decoding: every byte written is in the stream's encoding (no UTF-8 slipped through).
        self.stdout = process.stdout.decode(codec)
        self.stderr = process.stderr.decode(codec)


def run(args: list[str], extra: dict[str, str], codec: str) -> Done:
    process = subprocess.run([sys.executable, "-m", "gradcalc", *args], cwd=REPO, capture_output=True, timeout=120,
                             check=False, env=environment(extra))
    return Done(process, codec)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Files of a user's own with characters past ASCII: Greek names, notation from notes, an ≈ misplaced."""
    folder = tmp_path_factory.mktemp("encoding")
    (folder / "greek.eq").write_text("θ = 2\nσ = 3\ny = θ^2 * σ\n", encoding="utf-8")
    (folder / "approx.eq").write_text("x = 2\ny ≈ x\n", encoding="utf-8")
    (folder / "answers.txt").write_text("∂L/∂w1 = −w₃·a\n∂L/∂a ≈ 2\n", encoding="utf-8")
    return {name: str(folder / f"{name}.{suffix}") for name, suffix in
            (("greek", "eq"), ("approx", "eq"), ("answers", "txt"))}


# Text output: (arguments, exit statuses allowed, what it must say). A pair is (cp1252's form, ASCII's form):
# cp1252 has ·, ×, ², – and keeps them; only what an encoding lacks is replaced.
TEXT: dict[str, tuple[list[str], set[int], list[Any]]] = {
    "grad": (["grad", NEURON], {0}, ["dL/dvariable"]),
    "grad --vector": (["grad", "-e", "x = [1, 2]; y = x^2", "--vector", "ones"], {0},
                      [("v.T·dy/dvariable", "v.T*dy/dvariable")]),
    "eval": (["eval", TENSOR], {0}, [("3×3", "3x3")]),
    "check": (["check", HOMEWORK], {1}, ["ok right", "x wrong", "x dL/dw2 = -4*a (line 11)", "L -> d -> c -> a",
                                         "correct: dL/da = -w1*w3 - w2*w4", "3 of 5 claims right"]),
    "check, claims in notes' notation": (["check", NEURON, "{answers}"], {1},
                                         [("dL/dw1 = -w3·a", "dL/dw1 = -w3*a"), "dL/da ~= 2", "ok right", "x wrong"]),
    "grading": (["check", NEURON, SUBMISSIONS, "-v"], {1},
                ["-- alice.txt", "ok right", "x wrong", "sign error: the claim is the negative of dL/dd",
                 ("erin.eq          –  line 6", "erin.eq          -  line 6")]),
    "diff": (["diff", NEURON, "--of", "L", "--wrt", "w1"], {0}, ["dL/dw1 = -a*w3"]),
    "diff --order 2": (["diff", "-e", "y = x^2 * sin(x)", "--wrt", "x", "--set", "x=2", "--order", "2"], {0},
                       [("d²y/dx² = ", "d^2y/dx^2 = ")]),
    "hessian": (["hessian", "-e", "x = [1, 2, 3]; L = sum(x^4)", "--wrt", "x"], {0},
                [("d²L/dx²   shape 3×3", "d^2L/dx^2   shape 3x3")]),
    "graph": (["graph", NEURON], {0}, ["L = 15   RsubBackward1   dL/dL = 1\n`-- dL/dd = -1  d = -5",
                                       "    +-- dd/db = w3 = 0.5", "    |   +-- db/dw1 = a = 2"]),
    "explain": (["explain", NEURON, "--of", "L", "--wrt", "a"], {0},
                ["dL/da: 2 paths from L to a", "  L -> d -> b -> a",
                 ("dL/dd · dd/db · db/da = (-1) · (w3) · (w1)", "dL/dd * dd/db * db/da = (-1) * (w3) * (w1)"),
                 "ok equals dL/da = 2.5 from autograd"]),
    "jacobian": (["jacobian", DOUBLING, "--of", "y", "--wrt", "x"], {0},
                 [("dy/dx   shape 3×3, reverse mode", "dy/dx   shape 3x3, reverse mode")]),
    "gradcheck": (["gradcheck", "-e", "x = [0.5, 1.5]; L = sum(x^3 * log(x))"], {0}, ["ok pass"]),
    "gradcheck failing": (["gradcheck", "-e", "x = 0.0; y = relu(x)"], {1}, ["x FAIL"]),
    "minimize --explain": (["minimize", NEURON, "--wrt", "w1", "--steps", "1", "--method", "adam", "--explain"], {0},
                           ["m <- beta1", "m_hat = m/(1 - beta1^t)", "eps = 1e-08", "||grad L|| = 1"]),
    "taylor": (["taylor", "-e", "y = exp(x)", "--set", "x=0", "--wrt", "x", "--order", "3"], {0},
               [("y ~= 1 + x + 1/2*x^2 + 1/6*x^3", "y ~= 1 + x + 1/2*x^2 + 1/6*x^3")]),
    "grading with questions": (["check", str(REPO / "samples" / "graded.eq"), SUBMISSIONS], {1},
                               ["dL/dw1 wrong: sign error", "The class's mistakes", ("dL/dw1", "dL/dw1")]),
    "syntax error": (["grad", "-e", "y = x +"], {2}, ["error: <expr>:1:"]),
    "error with a hint in symbols": (["grad", "{approx}"], {2}, ["(~= is for claims: check dL/dw1 ~= 0.39)"]),
    "--help": (["grad", "--help"], {0}, [("v.T·J", "v.T*J")]),
    # A name of the user's own that the encoding lacks is a backslash escape, never a crash.
    "Greek names": (["grad", "{greek}"], {0}, ["\\u03b8    scalar      2", "\\u03c3    scalar      3"]),
}

# JSON output: the same data as on UTF-8, in every encoding (all commands under ASCII, a few under the others).
JSON: dict[str, list[str]] = {
    "grad": ["grad", NEURON, "--json"],
    "eval": ["eval", TENSOR, "--json"],
    "check": ["check", NEURON, "{answers}", "--json"],
    "grading": ["check", NEURON, SUBMISSIONS, "--json"],
    "diff": ["diff", NEURON, "--of", "L", "--wrt", "w1", "--json"],
    "graph": ["graph", NEURON, "--json"],
    "explain": ["explain", NEURON, "--of", "L", "--wrt", "a", "--json"],
    "jacobian": ["jacobian", DOUBLING, "--of", "y", "--wrt", "x", "--json"],
    "gradcheck": ["gradcheck", "-e", "x = [0.5, 1.5]; L = sum(x^3 * log(x))", "--json"],
    "Greek names": ["grad", "{greek}", "--json"],
    "error": ["grad", "{approx}", "--json"],
}
JSON_EVERYWHERE = ("check", "grading", "Greek names", "error")

# The runs of the default selection; the rest of the matrix is marked slow (each run is a process of its own).
QUICK = {("text", "check", encoding) for encoding in ENCODINGS} | {
    ("text", "graph", "C"), ("text", "grad --vector", "ascii"), ("text", "syntax error", "cp1252"),
    ("text", "Greek names", "ascii"), ("text", "grad --vector", "C"),
    *(("json", "check", encoding) for encoding in ENCODINGS), ("json", "error", "ascii")}


def matrix(kind: str, names: Any) -> list[Any]:
    """(name, encoding) for each run of a kind, those outside QUICK marked slow."""
    return [pytest.param(name, encoding, marks=() if (kind, name, encoding) in QUICK else pytest.mark.slow,
                         id=f"{name}-{encoding}")
            for name in names for encoding in ENCODINGS
            if kind == "text" or encoding == "ascii" or name in JSON_EVERYWHERE]


def filled(args: list[str], files: dict[str, str]) -> list[str]:
    return [arg.format(**files) if arg.startswith("{") else arg for arg in args]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, files: dict[str, str]) -> Iterator[dict[tuple[str, str, str], Future[Done]]]:
    """The runs the selected tests read, all started at once (a process each: start-up is most of their time)."""
    wanted: set[tuple[str, str, str]] = set()
    for item in request.session.items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if getattr(item, "module", None) is request.module and "encoding" in params:
            kind = "json" if "json" in item.name else "text"
            names = [params["name"]] if "name" in params else ["check", "grad --vector"]
            wanted |= {(kind, name, params["encoding"]) for name in names}
    jobs: dict[tuple[str, str, str], Future[Done]] = {}
    with ThreadPoolExecutor(max_workers=4) as pool:
        for kind, name, encoding in sorted(wanted):
            args = TEXT[name][0] if kind == "text" else JSON[name]
            extra, codec = ENCODINGS[encoding]
            jobs[(kind, name, encoding)] = pool.submit(run, filled(args, files), extra, codec)
        yield jobs


# A product symbol written as an escape (\u2202), the stopgap's way: never, in any encoding.
ESCAPED = re.compile("|".join(re.escape(char.encode("ascii", "backslashreplace").decode()) for char in
                              [*SYMBOLS, *"⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻"]))


@pytest.mark.parametrize(("name", "encoding"), matrix("text", TEXT))
def test_text_output_is_written_in_ascii_equivalents(runs: dict[Any, Future[Done]], name: str,
                                                     encoding: str) -> None:
    _, statuses, expected = TEXT[name]
    done = runs[("text", name, encoding)].result()
    written = done.stdout + done.stderr
    assert done.status in statuses, (done.status, written[-2000:])
    assert "Traceback" not in written and "internal error" not in written, written[-2000:]
    for each in expected:
        phrase = (each[0] if encoding == "cp1252" else each[1]) if isinstance(each, tuple) else each
        assert phrase in written, (phrase, written)
    assert not ESCAPED.search(written), ESCAPED.search(written)
    if encoding != "cp1252":
        assert written.isascii()


@pytest.mark.parametrize("encoding", ["ascii", "C"])
def test_tables_stay_aligned_where_symbols_are_replaced(runs: dict[Any, Future[Done]], encoding: str) -> None:
    """The view is translated before Rich lays it out: "ok right" is a character wider than "✓ right", and the
    columns after it still line up (a translation of the written text would push them one to the right)."""
    lines = runs[("text", "check", encoding)].result().stdout.splitlines()
    header = lines[0]
    rows = lines[1:6]
    assert [row.index("ok right") if "ok right" in row else row.index("x wrong") for row in rows] == \
        [header.index("verdict")] * 5, lines[:6]
    assert [row.index("holds") for row in rows if "holds" in row] == [header.index("note")] * 2
    vector = runs[("text", "grad --vector", encoding)].result().stdout.splitlines()
    column = next(line for line in vector if "v.T*dy/dvariable" in line)
    assert {len(line) for line in vector[3:] if line} == {len(column)}, vector  # right-justified under it


@pytest.mark.parametrize(("name", "encoding"), matrix("json", JSON))
def test_json_means_the_same_in_every_encoding(runs: dict[Any, Future[Done]], files: dict[str, str],
                                               name: str, encoding: str) -> None:
    done = runs[("json", name, encoding)].result()
    utf8 = run_cli(*filled(JSON[name], files))
    assert done.status == utf8.exit_code != 3, (done.status, done.stderr[-2000:])
    stream, expected = (done.stderr, utf8.stderr) if name == "error" else (done.stdout, utf8.stdout)
    assert stream.isascii()  # every character past ASCII a \u escape: valid in any encoding
    assert strict_json(stream) == strict_json(expected)


def test_json_on_utf8_is_written_as_it_was(files: dict[str, str]) -> None:
    """On UTF-8 the characters are themselves, not escapes: the bytes README examples show, unchanged."""
    done = run_cli(*filled(JSON["check"], files))  # helpers.ENV: PYTHONIOENCODING=utf-8
    assert '"claim": "∂L/∂w1 = −w₃·a"' in done.stdout, done.stdout
    doc = json.loads(done.stdout)
    assert doc["results"][0]["claim"] == "∂L/∂w1 = −w₃·a"
    assert done.stdout == json.dumps(doc, ensure_ascii=False) + "\n"


def test_a_terminal_in_the_c_locale_gets_ascii_fitted_to_it() -> None:
    """A real terminal whose locale is C (no UTF-8): ASCII forms, the tree's guides in ASCII, 60 columns fitted."""
    env = {**C_LOCALE, "PYTHONIOENCODING": ""}  # empty: unset for Python, so the locale decides
    shown = run_in_terminal("check", HOMEWORK, columns=60, env=env)
    assert shown.status == 1 and shown.raw.isascii(), shown.raw[:500]
    assert "ok right" in shown.screen and "x wrong" in shown.screen and "dL/dw1 = -w3*a" in shown.screen
    assert max(map(len, shown.screen.splitlines())) <= 60, shown.screen
    tree = run_in_terminal("graph", NEURON, columns=120, env=env)
    assert tree.status == 0 and "`-- dL/dd = -1" in tree.screen and "+-- dd/dw3" in tree.screen, tree.screen


def test_diff_steps_align_their_rules_in_what_cp1252_writes() -> None:
    """θ and ŷ are written \u03b8 and \u0177 (six columns, not one): the rules' column and where a line is
    too long for its rule are decided from that text, as a terminal of 80 columns shows it (they were decided
    from the names as typed: the rules out of line, and lines past 80 columns that the terminal broke)."""
    shown = run_in_terminal("diff", "-e", "θ = 1.5; ŷ = sin(θ)*θ; y = ŷ^2", "--wrt", "θ", "--steps",
                            env={"PYTHONIOENCODING": "cp1252"})
    assert shown.status == 0, shown.stderr
    lines = shown.screen.splitlines()
    assert max(map(len, lines)) <= 80, shown.screen
    product = lines.index(r"  d/d\u03b8[\u03b8*sin(\u03b8)]")
    assert lines[product + 1:product + 3] == [
        r"    = \u03b8*d/d\u03b8[sin(\u03b8)] + sin(\u03b8)  (product rule)",
        r"    = \u03b8*cos(\u03b8) + sin(\u03b8)             (derivative of sin)",
    ], shown.screen
    chain = lines.index(r"  d/d\u03b8[y]")
    assert lines[chain + 1:chain + 6] == [
        r"    = (2*\u0177)*(\u03b8*cos(\u03b8) + sin(\u03b8))",  # with its rule: 96 columns
        r"      (chain rule: 1 path, y -> \u0177 -> \u03b8)",
        r"    = 2*\u0177*(\u03b8*cos(\u03b8) + sin(\u03b8))  (simplify)",
        r"    = 2*(\u03b8^2*cos(\u03b8)*sin(\u03b8) + \u03b8*sin(\u03b8)^2)",
        r"      (substitute \u0177 = \u03b8*sin(\u03b8); simplify)",
    ], shown.screen


def test_an_error_s_caret_is_under_its_character_as_the_line_is_written(tmp_path: Any) -> None:
    """θ is written \\u03b8 in cp1252 (six columns, not one), an accent typed after its letter takes no column and a
    wide character two: the caret is placed by what the terminal shows (it was placed by characters, so it
    pointed inside the escape, at the 'b' of \\u03b8, instead of at the '$')."""
    program = tmp_path / "bad.eq"
    program.write_text("θ = 1\ny = sin(θ) $ 2\n", encoding="utf-8")
    shown = run_in_terminal("grad", str(program), env={"PYTHONIOENCODING": "cp1252"})  # (errors: standard error)
    assert shown.status == 2, shown.stderr
    lines = shown.stderr.splitlines()
    code = next(line for line in lines if line.startswith("   2 | "))
    caret = lines[lines.index(code) + 1]
    assert code == r"   2 | y = sin(\u03b8) $ 2" and caret.index("^") == code.index("$"), shown.stderr
    program.write_text("y\u0302 = 1\n名前 = 2\ny = y\u0302 + 名前 $\n", encoding="utf-8")  # ŷ typed y + ̂
    shown = run_in_terminal("grad", str(program))
    lines = shown.stderr.splitlines()
    code = next(line for line in lines if line.startswith("   3 | "))
    caret = lines[lines.index(code) + 1]
    from rich.cells import cell_len

    assert cell_len(caret[:caret.index("^")]) == cell_len(code[:code.index("$")]), shown.stderr


# --- --color -------------------------------------------------------------------------------------------------------

COLOURED = "\x1b[31m"  # red: the verdict of a wrong claim
CHECK = ("check", NEURON, "--claim", "dL/da = 2", "--claim", "dL/dw1 = -1")


def piped(*args: str, env: dict[str, str | None] | None = None) -> Any:
    """In-process, output captured (a pipe), with the environment of helpers.ENV changed by env."""
    return CliRunner(env={**ENV, **(env or {})}).invoke(app, list(args))


def test_color_never_on_a_terminal_writes_no_escape_code() -> None:
    assert COLOURED in run_in_terminal(*CHECK).raw.decode()  # the terminal gets colour by default
    shown = run_in_terminal(*CHECK, "--color", "never", env={"FORCE_COLOR": "1"})
    assert shown.status == 1 and b"\x1b" not in shown.raw and "✗ wrong" in shown.screen, shown.raw[:300]


def test_color_always_colours_a_pipe_whatever_the_environment_says() -> None:
    plain = piped(*CHECK, env={"NO_COLOR": None})
    assert plain.exit_code == 1 and "\x1b" not in plain.stdout
    for env in ({"NO_COLOR": None}, {"NO_COLOR": "1"}, {"NO_COLOR": "1", "TERM": "dumb"}):  # helpers.ENV: dumb
        coloured = piped(*CHECK, "--color", "always", env=env)
        assert coloured.exit_code == 1 and COLOURED in coloured.stdout, env
        assert re.sub(r"\x1b\[[0-9;]*m", "", coloured.stdout) == plain.stdout  # the same table, whole
    forced = {"NO_COLOR": None, "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    never = piped(*CHECK, "--color", "never", env=forced)
    assert never.exit_code == 1 and never.stdout == plain.stdout
    assert COLOURED in piped(*CHECK, "--color", "auto", env=forced).stdout  # auto: the environment decides
    assert COLOURED in piped(*CHECK, env=forced).stdout  # and auto is the default


def test_color_is_every_command_s_option() -> None:
    for args in (["grad", NEURON], ["doctor"], ["graph", NEURON], ["grad", NEURON, "--json"]):
        result = run_cli(*args, "--color", "never")
        assert result.exit_code == 0 and "\x1b" not in result.stdout, (args, result.stderr)
    bad = run_cli("grad", NEURON, "--color", "sometimes")
    assert bad.exit_code == 2 and "sometimes" in bad.stderr and bad.stdout == ""


@pytest.mark.slow
def test_latin_1_too() -> None:
    """ISO 8859-1 (older terminals' default) has ·, × and ², not ∂: one more encoding the same table serves."""
    done = run(["grad", NEURON], {"PYTHONIOENCODING": "latin-1"}, "latin-1")
    assert done.status == 0 and "dL/dvariable" in done.stdout and not ESCAPED.search(done.stdout)
