"""Bad input: exit 2, one clear message naming FILE:LINE:COL with the line and a caret, a hint, never a traceback;
with --json, one JSON object {"error": {...}} on stderr.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
import tracemalloc
from dataclasses import dataclass

import numpy as np
import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    NEURON,
    NEURON_TENSOR,
    assert_bad_input,
    json_error,
    json_ok,
    located_error,
    run_cli,
    strict_json,
)


@dataclass(frozen=True)
class Case:
    """A program with one mistake, where it is, and words the message or hint must hold."""

    id: str
    program: str
    line: int
    columns: tuple[int, ...]  # acceptable columns (1-based); usually one
    kinds: tuple[str, ...]  # acceptable JSON types
    says: tuple[str, ...] = ()  # in the message or the hint
    hint_says: tuple[str, ...] = ()  # in the hint
    args: tuple[str, ...] = ()

    @property
    def code(self) -> str:
        return re.split("\n|\r(?!\n)", self.program)[self.line - 1]  # a file's lines end at \n, or a lone \r


SYNTAX = ("SyntaxError",)
CASES = [
    # syntax errors
    Case("missing-operator", "y = 2 x", 1, (7,), SYNTAX, ("operator",), ("2*x",)),
    Case("missing-operator-line-3", "a = 2\nb = a * 3\nc = 2 b\n", 3, (7,), SYNTAX, hint_says=("2*b",)),
    Case("missing-operator-numbers", "y = 1 2", 1, (7,), SYNTAX, hint_says=("*",)),
    Case("missing-operator-in-a-call", "x = 1\nL = exp(-2x)", 2, (11,), SYNTAX, hint_says=("'2*x'",)),
    Case("missing-operator-in-a-list", "x = 1\nL = [3*(2x + 1), 1]", 2, (10,), SYNTAX, hint_says=("'2*x'",)),
    Case("python-def", "x = 1\ndef f(z):\n  return z", 2, (1,), SYNTAX, ("Python",), ("f(x) = x^2",)),
    Case("python-import", "import numpy as np\nx = 1", 1, (1,), SYNTAX, ("Python",), ("imports nothing",)),
    Case("misspelt-keyword", "x = 1\nwhle x < 10 { x = x*2 }", 2, (6,), SYNTAX, hint_says=("'while'",)),
    Case("matlab-transpose", "W = [[1, 2]]\ny = W'", 2, (6,), SYNTAX, hint_says=("W.T", "transpose(")),
    Case("max-of-two-values", "a = 2\nb = 3\nL = max(a, b)", 3, (5,), ("ValueError", "ArgumentError", "ShapeError"),
         hint_says=("maximum(a, b)",)),
    Case("min-of-two-values", "x = [1, 2]\nL = min(x, 1.5)", 2, (5,), ("ValueError", "ArgumentError"),
         hint_says=("minimum(a, b)",)),
    Case("power-t-transpose", "W = [[1, 2]]\ny = W^T", 2, (7,), ("NameError",), hint_says=("W.T",)),
    Case("torch-t-method", "W = [[1, 2]]\ny = W.t()", 2, (6, 8), SYNTAX, hint_says=("W.T",)),
    Case("unclosed-paren", "y = (1 + 2", 1, (5, 11), SYNTAX, hint_says=(")",)),
    Case("unclosed-bracket-over-lines", "x = 1\ny = [1,\n 2\n", 2, (5,), SYNTAX, hint_says=("]",)),
    Case("unmatched-close", "y = 1 + 2)", 1, (10,), SYNTAX, (")",)),
    Case("unmatched-brace", "y = 1 }", 1, (7,), SYNTAX, ("}",)),
    Case("mismatched-brackets", "y = [1, 2)", 1, (10,), SYNTAX, (")", "[")),
    Case("assign-in-condition", "x = 1\nif x = 1 { y = 2 }", 2, (6,), SYNTAX, hint_says=("==",)),
    Case("bare-expression", "x = 1\nx + 1", 2, (1, 3), SYNTAX, hint_says=("=",)),
    Case("double-equals-statement", "y == 2", 1, (1, 3), SYNTAX, hint_says=("=",)),
    Case("unexpected-character", "y = 2 $ 3", 1, (7,), SYNTAX, ("$",)),
    Case("unexpected-bang", "x = 1\ny = !x", 2, (5,), SYNTAX, ("!",), ("not",)),
    Case("unterminated-double-quote", 'y = load("abc)', 1, (10,), SYNTAX, hint_says=("quote",)),
    Case("unterminated-single-quote", "y = load('abc)", 1, (10,), SYNTAX, hint_says=("quote",)),
    Case("ends-mid-statement", "y = 1 +", 1, (7, 8), SYNTAX),
    Case("double-operator", "x = 2; y = x +* 2", 1, (15,), SYNTAX, ("*",)),
    Case("else-without-if", "x = 1\nelse { y = 1 }", 2, (1,), SYNTAX, ("else",)),
    Case("keyword-as-name", "while = 3", 1, (1, 7), SYNTAX),
    Case("number-starts-a-statement", "x = 1\n3 = x", 2, (1,), SYNTAX),
    Case("keyword-starts-a-statement", "x = 1\nand = x", 2, (1,), SYNTAX),
    Case("tab-indented", "a = 2\n\tb = a $ 1", 2, (8,), SYNTAX, ("$",)),
    Case("crlf-line-ends", "a = 2\r\nb = 2 a\r\n", 2, (7,), SYNTAX, hint_says=("2*a",)),
    Case("no-break-space", "a = 1\nL =\u00a0a", 2, (4,), SYNTAX, ("\\xa0",), ("plain space",)),  # pasted from a PDF
    Case("zero-width-space", "a = 1\nL = a\u200b+ 1", 2, (6,), SYNTAX, ("\\u200b",), ("plain space",)),
    Case("lone-cr-line-ends", "a = 2\rb = 2 a\r", 2, (7,), SYNTAX, hint_says=("2*a",)),  # classic Mac OS
    Case("form-feed-in-a-comment", "x = 1  # page\f\ny = 2 x", 2, (7,), SYNTAX, hint_says=("2*x",)),
    Case("line-separator-in-a-comment", "x = 1  # pasted\u2028text\ny = 2 x", 2, (7,), SYNTAX, hint_says=("2*x",)),
    # names
    Case("unknown-function", "x = 2\ny = sinn(x)", 2, (5,), ("NameError",), ("sinn",), ("sin",)),
    Case("variable-typo", "value = 2\ny = valeu + 1", 2, (5,), ("NameError",), ("valeu",), ("value",)),
    Case("never-given", "y = x + 1", 1, (5,), ("NameError",), ("x",), ("--set x=",)),
    Case("function-used-as-value", "y = sin + 1", 1, (5,), ("NameError",), ("sin",)),
    Case("unknown-attribute", "x = [1, 2]\ny = x.Q", 2, (7,), ("NameError",), ("Q",), (".T",)),
    # arity
    Case("too-many-arguments", "y = sin(1, 2)", 1, (5,), ("ArgumentError",), ("sin",), ("sin(x)",)),
    Case("missing-argument", "y = maximum(1)", 1, (5,), ("ArgumentError",), ("maximum",), ("maximum(a, b)",)),
    Case("unknown-keyword", "y = sum([1, 2], axs=0)", 1, (17,), ("ArgumentError",), ("axs",), ("axis",)),
    # habits from PyTorch and NumPy: the message says gradcalc's way
    Case("pytorch-dim", "y = sum([[1, 2]], dim=0)", 1, (19,), ("ArgumentError",), ("dim",), ("axis=", "PyTorch")),
    Case("pytorch-keepdim", "y = mean([[1, 2]], axis=0, keepdim=1)", 1, (28,), ("ArgumentError",), ("keepdim",),
         ("keepdims=",)),
    Case("method-call", "x = [1, 2]\ny = x.sum()", 2, (10,), SYNTAX, ("method",), ("sum(x)",)),
    Case("method-call-with-arguments", "x = [1, 2]\ny = x.pow(2)", 2, (10,), SYNTAX, ("method",), ("pow(x, ...)",)),
    Case("module-prefix", "x = 1\ny = torch.sin(x)", 2, (14,), SYNTAX, ("prefix",), ("sin(...)",)),
    Case("nested-module-prefix", "x = 1\ny = torch.nn.functional.relu(x)", 2, (29,), SYNTAX, ("prefix",),
         ("relu(...)",)),
    Case("unknown-method", "x = [1, 2]\ny = x.frobnicate()", 2, (17,), SYNTAX, ("method",), ("--help",)),
    # notation from notes, in a program (claims read it; a program asks for the code)
    Case("function-without-brackets", "x = 1\ny = sin x", 2, (9,), SYNTAX, ("argument",), ("sin(x)",)),
    Case("function-power-caret", "x = 1\ny = tanh^2(x)", 2, (11,), SYNTAX, ("power",), ("tanh(...)^2",)),
    Case("function-power-superscript", "x = 1\ny = cos²(x)", 2, (9,), SYNTAX, ("power",), ("cos(...)²",)),
    Case("absolute-value-bars", "x = 1\ny = |x|", 2, (5,), SYNTAX, ("|",), ("abs(x)",)),
    Case("user-function-arity", "f(a, b) = a * b\ny = f(1)", 2, (5,), ("ArgumentError",), ("f", "2")),
    # shapes and values
    Case("broadcast", "x = [1,2,3]; z = [1,2]; y = x + z", 1, (31,), ("ShapeError",), ("(3,)", "(2,)")),
    Case("matmul-inner", "x = ones(2, 3)\nz = ones(2, 3)\ny = x @ z", 3, (7,), ("ShapeError",), ("(2, 3)",)),
    Case("ragged-literal", "x = [[1, 2], [3]]", 1, (5,), ("ShapeError",), ("(1,)", "(2,)")),
    Case("singular", "y = inv([[1,2],[2,4]])", 1, (5,), ("ValueError",), ("singular",)),
    Case("det-not-square", "x = ones(2, 3)\ny = det(x)", 2, (5,), ("ValueError",), ("(2, 3)",)),
    Case("index-out-of-range", "x = [1,2,3]; y = x[5]", 1, (18, 19, 20), ("ValueError", "IndexError"), ("5", "3")),
    Case("negative-index-out-of-range", "x = [1,2,3]\ny = x[-4]", 2, (5, 6, 7), ("ValueError", "IndexError"), ("-4",)),
    Case("fractional-index", "x = [1,2,3]\ny = x[1.5]", 2, (5, 6, 7), ("ArgumentError", "ValueError"), ("1.5",)),
    Case("axis-out-of-range", "y = sum(ones(2, 2), axis=5)", 1, (5,), ("ValueError",), ("5", "(2, 2)")),
    Case("bad-reshape", "y = reshape(ones(4), 3)", 1, (5,), ("ValueError",), ("(4,)", "(3,)")),
    Case("tensor-condition", "x = [1, 2]\nif x > 0 { y = 1 }", 2, (4, 6), ("ValueError",), ("(2,)",)),
    # limits
    Case("while-past-limit", "x = 1\nwhile x > 0 { x = x + 1 }", 2, (1,), ("LimitError",), ("2",),
         ("--max-iterations",), ("--max-iterations", "100")),
    Case("for-past-limit", "for i in range(1000000000) { y = i }", 1, (1,), ("LimitError",),
         hint_says=("--max-iterations",)),
    Case("huge-for-range", "for i in range(1e30) { y = i }", 1, (1, 10, 16), ("LimitError", "ValueError"),
         hint_says=("--max-iterations",)),
    Case("recursion", "f(n) = f(n)\ny = f(1)", 1, (8,), ("LimitError",), hint_says=("--max-recursion",)),
    Case("max-elements", "x = ones(20000, 20000)\ny = sum(x)", 1, (5,), ("LimitError",), ("20000",),
         ("--max-elements",)),
    Case("max-elements-broadcast", "x = ones(20000, 1)\nz = ones(1, 20000)\ny = x + z", 3, (7,), ("LimitError",),
         hint_says=("--max-elements",)),
    Case("max-elements-eye", "x = eye(20000)", 1, (5,), ("LimitError",), hint_says=("--max-elements",)),
    Case("max-elements-arange", "x = arange(1e9)", 1, (5,), ("LimitError",), hint_says=("--max-elements",)),
    Case("max-elements-lowered", "x = ones(4, 4)", 1, (5,), ("LimitError",), hint_says=("--max-elements",),
         args=("--max-elements", "10")),
    Case("max-elements-literal", "x = [1, 2, 3, 4]\ny = x", 1, (5,), ("LimitError",), hint_says=("--max-elements",),
         args=("--max-elements", "2")),
    # no elements, but one size past the limit: NumPy cannot make the dimension (it was an internal error)
    Case("max-elements-empty-huge-size", "y = ones(0, 1e20)", 1, (5,), ("LimitError",), ("size",),
         ("--max-elements",)),
    Case("max-elements-empty-huge-reshape", "y = reshape(zeros(0), [1e20, 0])", 1, (5,), ("LimitError",), ("size",),
         ("--max-elements",)),
    Case("max-elements-empty-huge-eye", "y = eye(0, 2^70)", 1, (5,), ("LimitError",), ("size",),
         ("--max-elements",)),
    Case("max-depth-lowered", "y = ((((1))))", 1, (5, 6, 7, 8, 9), ("LimitError", "SyntaxError"),
         hint_says=("--max-depth",), args=("--max-depth", "3")),
]


def _write(tmp_path, case: Case) -> str:
    path = tmp_path / "prog.eq"
    path.write_text(case.program, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_message(tmp_path, case: Case) -> None:
    path = _write(tmp_path, case)
    for command in ("eval", "grad"):
        error = located_error(run_cli(command, path, *case.args), file=path, line=case.line, code=case.code)
        assert error.column in case.columns, error.text
        text = error.message + " " + error.hint
        for word in case.says:
            assert word in text, f"{word!r} not in:\n{error.text}"
        for word in case.hint_says:
            assert word in error.hint, f"{word!r} not in the hint:\n{error.text}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_json(tmp_path, case: Case) -> None:
    path = _write(tmp_path, case)
    body = json_error(run_cli("grad", path, "--json", *case.args))
    assert body["line"] == case.line, body
    assert body["column"] in case.columns, body
    assert body["type"] in case.kinds, body
    assert body.get("file") == path, body
    text = body["message"] + " " + body.get("hint", "")
    for word in (*case.says, *case.hint_says):
        assert word in text, f"{word!r} not in {body}"


@pytest.mark.parametrize("case", CASES[:8], ids=[c.id for c in CASES[:8]])
def test_inline_program_errors_name_expr(case: Case) -> None:
    located_error(run_cli("eval", "-e", case.program, *case.args), file="<expr>", line=case.line, code=case.code)


def test_stdin_program_errors_name_stdin() -> None:
    located_error(run_cli("eval", "-", input="a = 1\ny = 2 x\n"), file="<stdin>", line=2, column=7, code="y = 2 x")


# --- limits: fast refusals, deep nesting ----------------------------------------------------------------------

def test_max_elements_is_checked_before_allocating() -> None:
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = run_cli("eval", "-e", "x = ones(20000, 20000)")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    elapsed = time.perf_counter() - started
    assert_bad_input(result)
    assert "--max-elements" in result.stderr
    assert elapsed < 3, f"took {elapsed:.1f} s: was the tensor allocated?"
    assert peak < 200 * 2**20, f"peak {peak / 2**20:.0f} MiB: the 3.2 GB tensor was (partly) allocated"


@pytest.mark.parametrize("program", ["y = zeros(0, 1e20)", "y = full(1e20, 0, 7)", "y = randn(0, 1e20)",
                                     "y = rand(1e300, 0)", "y = zeros(0, 1e300, 1e300)", "y = x", "y = sum(x)"])
def test_a_size_past_the_limit_is_refused_though_the_tensor_is_empty(program: str) -> None:
    """The limit is on elements, and an empty tensor has none; but no library can make a dimension
    of 10^20 (NumPy: 'Maximum allowed dimension exceeded'), so any single size past it is refused too."""
    for command in ("eval", "grad", "diff"):
        result = run_cli(command, "-e", program, "--set", "x=zeros(0, 1e20)")
        assert_bad_input(result)
        assert "--max-elements" in result.stderr and "size" in result.stderr, result.stderr
        assert len(result.stderr) < 600, result.stderr  # 1e300 is not written out digit by digit


def test_sizes_up_to_the_limit_still_make_empty_tensors() -> None:
    assert json_ok("eval", "-e", "y = zeros(0, 100)", "--max-elements", "100")["values"]["y"] == []


def test_max_elements_raised_allows_it() -> None:
    assert json_ok("eval", "-e", "x = ones(4, 4)\ny = sum(x)", "--max-elements", "16")["values"]["y"] == 16


def test_max_elements_in_set_value() -> None:
    result = run_cli("eval", "-e", "y = x", "--set", "x=ones(20000, 20000)")
    assert_bad_input(result)
    assert "--max-elements" in result.stderr


DEEP = 5000
DEEP_PROGRAMS = {
    "parentheses": "y = " + "(" * DEEP + "1" + ")" * DEEP,
    "brackets": "y = " + "[" * DEEP + "1" + "]" * DEEP,
    "negations": "y = " + "-(" * DEEP + "1" + ")" * DEEP,
    "bare-minus": "y = " + "-" * DEEP + "1",
    "bare-plus": "y = " + "+" * DEEP + "1",
    "calls": "y = " + "sin(" * DEEP + "1" + ")" * DEEP,
    "powers": "y = 1" + "^1" * DEEP,
    "not": "y = " + "not " * DEEP + "1",
    "indexing": "x = [1]\ny = x" + "[0]" * DEEP,
    "transposes": "x = [1]\ny = x" + ".T" * DEEP,
}


@pytest.mark.parametrize("name", list(DEEP_PROGRAMS))
def test_deep_nesting_is_a_clear_error(name: str) -> None:
    program = DEEP_PROGRAMS[name]
    result = run_cli("grad", "-e", program)
    assert_bad_input(result)
    assert "--max-depth" in result.stderr, result.stderr[-500:]
    assert result.stderr.startswith("error: <expr>:"), result.stderr[:200]
    body = json_error(run_cli("grad", "-e", program, "--json"))
    assert body["line"] == program.count("\n") + 1
    assert "--max-depth" in body["message"] + body.get("hint", "")


def test_deep_nesting_in_a_file(tmp_path) -> None:
    path = tmp_path / "deep.eq"
    path.write_text("x = 1\n" + "y = " + "(" * DEEP + "x" + ")" * DEEP + "\n", encoding="utf-8")
    error = located_error(run_cli("grad", path), file=str(path), line=2)
    assert "--max-depth" in error.hint


def test_long_flat_expression_is_not_deep() -> None:
    doc = json_ok("grad", "-e", "x = 1\ny = x" + " + x" * DEEP)
    assert doc["value"] == DEEP + 1
    assert doc["grad"] == {"x": DEEP + 1}


@pytest.mark.parametrize("where", [0, 10, 25_000, 49_990])
def test_an_error_in_a_long_line_shows_the_line_around_it(where: int) -> None:
    """A line of 200,000 characters (a generated program, a hostile submission) was printed whole, twice over
    with the caret's spaces: the message shows a window of it, the caret under the offending token."""
    terms = ["x"] * 50_000
    terms[where] = "x $"
    result = run_cli("grad", "-e", "x = 1\ny = " + " + ".join(terms))
    assert result.exit_code == EXIT_BAD_INPUT
    error = result.stderr.splitlines()
    assert error[0] == f"error: <expr>:2:{5 + 4 * where + 2}: unexpected character '$'", error[0]
    code, caret = error[1], error[2]
    assert len(code) < 140 and len(caret) < 140, result.stderr
    assert code[caret.index("^")] == "$" and caret.count("^") == 1, result.stderr
    assert code.startswith("   2 | ...") == (where > 20) and code.endswith("...") == (where < 49_980), code


def test_raised_max_depth_allows_deep_nesting() -> None:
    """In a child process: the raised limit must not crash the interpreter either."""
    program = "x = 2\ny = " + "-(" * DEEP + "x" + ")" * DEEP
    proc = subprocess.run(
        [sys.executable, "-m", "gradcalc", "grad", "-", "--json", "--max-depth", str(4 * DEEP)],
        input=program, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = strict_json(proc.stdout)
    assert doc["value"] == 2  # an even number of negations
    assert doc["grad"] == {"x": 1}


# --- files ---------------------------------------------------------------------------------------------------

def test_missing_program_file(tmp_path) -> None:
    missing = str(tmp_path / "nope.eq")
    result = run_cli("grad", missing)
    assert_bad_input(result)
    assert missing in result.stderr
    assert "hint:" in result.stderr
    body = json_error(run_cli("grad", missing, "--json"))
    assert missing in body["message"]


def test_program_is_a_folder(tmp_path) -> None:
    result = run_cli("eval", tmp_path)
    assert_bad_input(result)
    assert str(tmp_path) in result.stderr


def test_program_not_utf8(tmp_path) -> None:
    path = tmp_path / "latin1.eq"
    path.write_bytes("y = 2 # \xe9t\xe9\n".encode("latin-1"))
    result = run_cli("eval", path)
    assert_bad_input(result)
    assert str(path) in result.stderr


@pytest.fixture
def folders(tmp_path):
    prog, other = tmp_path / "prog", tmp_path / "other"
    prog.mkdir()
    other.mkdir()
    np.save(other / "o.npy", np.array([1.0, 2.0]))
    return prog, other


def test_missing_load_file(folders) -> None:
    prog, _ = folders
    path = prog / "p.eq"
    path.write_text('x = 1\nz = load("missing.npy")\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=2, column=5, code='z = load("missing.npy")')
    assert "missing.npy" in error.message
    body = json_error(run_cli("eval", path, "--json"))
    assert (body["line"], body["column"]) == (2, 5)


def test_load_outside_the_folder_needs_allow_read(folders) -> None:
    prog, other = folders
    path = prog / "p.eq"
    path.write_text('o = load("../other/o.npy")\ny = sum(o)\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=1, column=5)
    assert "--allow-read" in error.hint
    body = json_error(run_cli("eval", path, "--json"))
    assert "--allow-read" in body["message"] + body.get("hint", "")
    assert json_ok("eval", path, "--allow-read", other)["values"] == {"o": [1, 2], "y": 3}


def test_load_absolute_path_outside_the_folder(folders) -> None:
    prog, other = folders
    path = prog / "p.eq"
    path.write_text(f'o = load("{other / "o.npy"}")\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=1)
    assert "--allow-read" in error.hint
    assert json_ok("eval", path, "--allow-read", other)["values"] == {"o": [1, 2]}


def test_load_through_a_symlink_out_of_the_folder(folders) -> None:
    prog, other = folders
    (prog / "link.npy").symlink_to(other / "o.npy")
    path = prog / "p.eq"
    path.write_text('o = load("link.npy")\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=1)
    assert "--allow-read" in error.hint


def test_inline_program_loads_only_from_the_current_folder(folders, monkeypatch) -> None:
    prog, _ = folders
    monkeypatch.chdir(prog)
    result = run_cli("eval", "-e", 'o = load("../other/o.npy")')
    assert_bad_input(result)
    assert "--allow-read" in result.stderr


@pytest.mark.parametrize("content,name", [
    ("garbage", "bad.npz"),
    ('{"a": 1}', "obj.json"),
    ("p,q\nx,y\n", "words.csv"),
    ("hello", "t.txt"),
])
def test_unreadable_load_file(folders, content: str, name: str) -> None:
    prog, _ = folders
    (prog / name).write_text(content, encoding="utf-8")
    path = prog / "p.eq"
    path.write_text(f'x = load("{name}")\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=1, column=5)
    assert name in error.message


def test_load_npz_needs_a_member_name(folders) -> None:
    prog, _ = folders
    np.savez(prog / "two.npz", w=np.ones(2), v=np.zeros(2))
    path = prog / "p.eq"
    path.write_text('x = load("two.npz")\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=1, column=5)
    text = error.message + " " + error.hint
    assert "'w'" in text or '"w"' in text or " w," in text, text
    assert "v" in text
    path.write_text('x = load("two.npz", "zz")\n', encoding="utf-8")
    error = located_error(run_cli("eval", path), file=str(path), line=1, column=5)
    assert "zz" in error.message


def test_load_header_only_csv_prints_no_python_warning(folders) -> None:
    prog, _ = folders
    (prog / "h.csv").write_text("p,q\n", encoding="utf-8")
    path = prog / "p.eq"
    path.write_text('x = load("h.csv")\n', encoding="utf-8")
    result = run_cli("eval", path)
    assert result.exit_code in (EXIT_OK, EXIT_BAD_INPUT)
    assert "Warning" not in result.stderr, result.stderr
    assert ".py:" not in result.stderr, result.stderr


# --- --set and --values ---------------------------------------------------------------------------------------

def test_set_unparsable_value() -> None:
    error = located_error(run_cli("grad", NEURON, "--set", "a=[1,2"), line=1, column=1, code="[1,2")
    assert "--set a" in error.file
    assert "]" in error.hint
    body = json_error(run_cli("grad", NEURON, "--set", "a=[1,2", "--json"))
    assert body["type"] == "SyntaxError"


def test_set_value_error_points_into_the_value() -> None:
    """The column is the value's own column, not shifted by an internal prefix."""
    error = located_error(run_cli("eval", "-e", "y = x", "--set", "x=sinn(2)"), line=1, code="sinn(2)")
    assert error.column == 1, error.text
    assert "sin" in error.hint
    error = located_error(run_cli("eval", "-e", "y = x", "--set", "x=ones(20000, 20000)"), line=1)
    assert error.column == 1, error.text


def test_set_unknown_name_did_you_mean() -> None:
    result = run_cli("grad", NEURON, "--set", "w11=1")
    assert_bad_input(result)
    assert "w11" in result.stderr
    assert "did you mean 'w1'" in result.stderr
    body = json_error(run_cli("grad", NEURON, "--set", "w11=1", "--json"))
    assert "w1'" in body.get("hint", "") + body["message"]


def test_set_name_the_program_lacks() -> None:
    result = run_cli("grad", NEURON, "--set", "nope=1")
    assert_bad_input(result)
    assert "nope" in result.stderr
    assert "hint:" in result.stderr


def test_set_computed_variable() -> None:
    result = run_cli("grad", NEURON, "--set", "b=1")
    assert_bad_input(result)
    assert "'b'" in result.stderr
    assert "w1" in result.stderr and "a" in result.stderr  # names the leaves to set instead
    body = json_error(run_cli("grad", NEURON, "--set", "b=1", "--json"))
    assert body["type"] == "UsageError"


@pytest.mark.parametrize("item", ["a", "=3", "a=", "a=1; b=2", "a=x+1", "a=$"])
def test_set_malformed(item: str) -> None:
    result = run_cli("grad", NEURON, "--set", item)
    assert_bad_input(result)
    assert "hint:" in result.stderr
    json_error(run_cli("grad", NEURON, "--set", item, "--json"))


@pytest.mark.parametrize("content", ["{nope", "[1, 2]", '{"zz": 1}', '{"a": {"b": 1}}', '{"a": null}',
                                     '{"a": [1, [2]]}', '{"a": "abc"}'])
def test_values_file_bad_content(tmp_path, content: str) -> None:
    path = tmp_path / "values.json"
    path.write_text(content, encoding="utf-8")
    result = run_cli("grad", NEURON, "--values", path)
    assert_bad_input(result)
    assert "hint:" in result.stderr
    json_error(run_cli("grad", NEURON, "--values", path, "--json"))


def test_values_file_missing(tmp_path) -> None:
    missing = str(tmp_path / "values.json")
    result = run_cli("grad", NEURON, "--values", missing)
    assert_bad_input(result)
    assert missing in result.stderr


def test_values_npz_garbage(tmp_path) -> None:
    path = tmp_path / "values.npz"
    path.write_bytes(b"garbage, not a zip")
    result = run_cli("grad", NEURON, "--values", path)
    assert_bad_input(result)
    assert "values.npz" in result.stderr


def test_values_unknown_name_did_you_mean(tmp_path) -> None:
    path = tmp_path / "values.json"
    path.write_text('{"w11": 1}', encoding="utf-8")
    result = run_cli("grad", NEURON, "--values", path)
    assert_bad_input(result)
    assert "w1'" in result.stderr


# --- --of, --wrt, --vector --------------------------------------------------------------------------------------

def test_non_scalar_gradient_without_vector() -> None:
    error = located_error(run_cli("grad", NEURON_TENSOR), file=NEURON_TENSOR, line=8, code="L = 10 - d")
    text = error.message + " " + error.hint
    assert "--vector" in text and "sum" in text and "scalar" in text
    assert "(3, 3)" in text or "3×3" in text


def test_unknown_of_did_you_mean() -> None:
    result = run_cli("grad", NEURON, "--of", "LL")
    assert_bad_input(result)
    assert "LL" in result.stderr
    assert "did you mean 'L'" in result.stderr
    body = json_error(run_cli("grad", NEURON, "--of", "LL", "--json"))
    assert "'L'" in body.get("hint", "") + body["message"]


def test_unknown_wrt_did_you_mean() -> None:
    result = run_cli("grad", NEURON, "--wrt", "w1,w11")
    assert_bad_input(result)
    assert "w11" in result.stderr
    assert "did you mean 'w1'" in result.stderr
    json_error(run_cli("grad", NEURON, "--wrt", "w11", "--json"))


def test_unknown_wrt_without_close_name_lists_the_variables() -> None:
    result = run_cli("grad", NEURON, "--wrt", "zzz")
    assert_bad_input(result)
    assert "zzz" in result.stderr
    assert "w4" in result.stderr


@pytest.mark.parametrize("vector", ["[1, 2]", "[[1, 2, 3], [1, 2, 3]]", "[1, 2, 3, 4, 5, 6, 7, 8, 9]"])
def test_wrong_shaped_vector(vector: str) -> None:
    result = run_cli("grad", NEURON_TENSOR, "--vector", vector)
    assert_bad_input(result)
    assert "--vector" in result.stderr
    assert "(3, 3)" in result.stderr or "3×3" in result.stderr
    body = json_error(run_cli("grad", NEURON_TENSOR, "--vector", vector, "--json"))
    assert body["type"] == "UsageError"


def test_wrong_shaped_vector_for_a_scalar_output() -> None:
    result = run_cli("grad", NEURON, "--vector", "[1, 2]")
    assert_bad_input(result)
    assert "--vector" in result.stderr


def test_unparsable_vector_speaks_of_vector_not_set() -> None:
    result = run_cli("grad", NEURON_TENSOR, "--vector", "foo")
    assert_bad_input(result)
    assert "--vector" in result.stderr
    assert "--set" not in result.stderr, result.stderr


# --- usage -------------------------------------------------------------------------------------------------------

def test_no_program() -> None:
    result = run_cli("grad")
    assert_bad_input(result)
    assert "-e" in result.stderr


def test_file_and_expr_both() -> None:
    assert_bad_input(run_cli("grad", NEURON, "-e", "y = 1"))


def test_program_without_assignments() -> None:
    result = run_cli("grad", "-e", "# only a comment")
    assert_bad_input(result)
    body = json_error(run_cli("grad", "-e", "", "--json"))
    assert body["message"]


@pytest.mark.parametrize("args", [
    ("grad", NEURON, "--dtype", "float16"),
    ("grad", NEURON, "--device", "tpu"),
    ("grad", NEURON, "--bogus"),
    ("grad", NEURON, "--of"),
    ("grad", NEURON, "--max-elements", "many"),
    ("frobnicate",),
])
def test_bad_options_exit_2_without_traceback(args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "Traceback" not in result.output


def test_bad_option_value_with_json_is_a_json_error() -> None:
    """SPEC: with --json, errors are {"error": {...}} on stderr, for a script to read."""
    json_error(run_cli("grad", NEURON, "--dtype", "float16", "--json"))


@pytest.mark.parametrize("seed", ["-1", "-12345"])
def test_negative_seed_is_not_an_internal_error(seed: str) -> None:
    result = run_cli("eval", "-e", "x = randn(2)", "--seed", seed)
    assert result.exit_code in (EXIT_OK, EXIT_BAD_INPUT), result.output
    assert "internal error" not in result.output and "Traceback" not in result.output, result.output
    if result.exit_code == EXIT_BAD_INPUT:
        assert "--seed" in result.stderr


def test_huge_max_depth_is_not_an_internal_error() -> None:
    """In a child process: a fixed version might really raise the recursion limit."""
    proc = subprocess.run(
        [sys.executable, "-m", "gradcalc", "eval", "-e", "y = (1)", "--max-depth", "1000000000"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode in (EXIT_OK, EXIT_BAD_INPUT), proc.stderr
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


@pytest.mark.parametrize("args", [
    ("-e", "x = 1e300"),
    ("-e", "x = [1e300, 1e300]"),
    ("-e", "x = 1", "--set", "x=1e300"),
])
def test_float32_overflow_is_infinity_without_python_warnings(args: tuple[str, ...]) -> None:
    result = run_cli("eval", *args, "--dtype", "float32", "--json")
    assert result.exit_code == EXIT_OK, result.output
    assert "Warning" not in result.stderr, result.stderr
    assert result.stderr == "", result.stderr
    x = strict_json(result.stdout)["values"]["x"]
    assert x in ("Infinity", ["Infinity", "Infinity"])


@pytest.mark.parametrize(("text", "line", "column", "closer"), [
    ("a = 2\ny = (a + 3\nz = y * 2\n", 2, 5, ")"),
    ("x = [1, 2,\n  3, 4]\ny = sum([x[0], x[1]\nL = y\n", 3, 9, "]"),
    ("f(t) = t^2\ny = f(2\nz = 1\n", 2, 6, ")"),
])
def test_a_bracket_left_open_is_named_where_it_opened(tmp_path, text: str, line: int, column: int,
                                                      closer: str) -> None:
    """Not 'unexpected z' on the next line: the unclosed bracket, where it was opened, and how to close it."""
    path = tmp_path / "open.eq"
    path.write_text(text, encoding="utf-8")
    error = located_error(run_cli("eval", path), line=line, column=column)
    assert "still open at line" in error.message
    assert f"'{closer}'" in error.hint


def test_an_answers_line_left_open_is_named_not_the_next_claim(tmp_path) -> None:
    """The open bracket is the error, on its own line; the next claim is judged as usual."""
    answers = tmp_path / "answers.txt"
    answers.write_text("dL/dw1 = -(w3*a\ndL/dw2 = -w4*a\n", encoding="utf-8")
    result = run_cli("check", NEURON, answers, "--json")
    assert result.exit_code == 1  # the student's slip: some claim wrong or invalid (docs/errors.md)
    error = strict_json(result.stderr)["error"]
    assert (error["line"], error["column"]) == (1, 11) and "'('" in error["message"]
    statuses = [r["status"] for r in strict_json(result.stdout)["results"]]
    assert statuses == ["invalid", "right"]


@pytest.mark.parametrize("command", ["grad", "hessian"])
def test_logdet_s_derivative_at_a_singular_matrix_says_it_is_the_rule_s_inverse(command: str) -> None:
    """The value is -inf; the derivative's rule needs the inverse: the error says so, and names logdet, not inv.
    (det's has the cofactors where the matrix is singular: test_functions.py.)"""
    assert json_ok("eval", "-e", "A = [[1, 2], [2, 4]]\nL = det(A)")["values"]["L"] == 0
    error = json_error(run_cli(command, "-e", "A = [[1, 2], [2, 4]]\nL = logdet(A)", "--json"))
    assert error["message"] == "the derivative of logdet needs the inverse of a singular matrix", error
    assert "inv:" not in error["message"] and error["line"] == 2, error


@pytest.mark.parametrize(("command", "program", "what"), [
    ("jacobian", "x = ones(300)\ny = x^2", "the Jacobian ∂y/∂x would have 90,000 elements"),
    ("hessian", "x = ones(300)\ny = sum(x^3)", "the Hessian block ∂²y/∂x² would have 90,000 elements"),
])
def test_max_elements_holds_for_jacobians_and_hessians(command: str, program: str, what: str) -> None:
    error = json_error(run_cli(command, "-e", program, "--max-elements", "1000", "--json"))
    assert error["message"].startswith(what) and error["line"] == 2, error
    assert json_ok(command, "-e", program.replace("300", "30"), "--max-elements", "1000")  # 900 entries: fine


@pytest.mark.parametrize("end", ["\r", "\r\n", "\n"], ids=["lone-cr", "crlf", "lf"])
def test_inline_program_lines_end_as_a_file_s(end: str) -> None:
    """-e text ends its lines as a file does: a lone \\r too (classic Mac OS; pasted), never the language's blank."""
    assert json_ok("grad", "-e", f"a = 1{end}y = a*2") == {"of": "y", "value": 2.0, "grad": {"a": 2.0}}
    located_error(run_cli("grad", "-e", f"a = 2{end}b = 2 a{end}"), file="<expr>", line=2, column=7, code="b = 2 a")
