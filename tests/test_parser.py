"""The fast LALR loop against Lark's own parser: the same syntax tree for every program, the same error otherwise.

gradcalc/language/parser.py runs Lark's parse table with a lean loop and hands a text it rejects back to Lark for
the error message. These tests parse each text both ways (Lark alone by making the fast loop reject
everything) and compare the trees, or the errors, field by field, positions included.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from helpers import SAMPLES
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import expressions, token_soup

from gradcalc.errors import GradcalcError
from gradcalc.language import lalr
from gradcalc.language import parser as P
from gradcalc.language import syntax as S
from gradcalc.program.notation.juxtaposition import NOTATION  # claims as written: 2x, sin x

EVERY_CONSTRUCT = """
# comments, statements, compound assignment, reassignment
a = 3; b = -a^2 + 2**3 ** 2 − 1·2×3÷4 – 1⋅2 + a² + -a⁻¹² + √a + √(a + 1)³ + w₁₂ + π
b += a; b -= 1; b *= 2; b /= 4
const N = 4; const Y = [[0, 1]] * N
W = [[1, 2],
     [3, 4.5e-1],]
v = W @ [1, .5] + W.T[0, :] + W[:, 1] + W[::2, ::-1][0] + W[1:, :1:1][0, 0] + (Wᵀ @ Wᵀᵀ)[0]
s = sum(W, axis=0) + mean(W, axis=-1, keepdims=1)
c = a < b and not (a >= 2 or a == b) and 1 < a <= 3 != 4
x = load("data.npy") \\
    + 1
f(x, y,) = x * y
g(t) {
    u = t^2
    return u + 1
}
override h(z) = z
if a > 1 { y = 1 } else if a < 0 { y = 2 } else {
    y = 3
}
while a < 10 { a += 1 }
for i in range(3) { b = b + i }
no_grad { d = detach(b) }
L = f(a, b) + g(a) + θ_1
check dL/da = 2*a
check ∂L/∂b = 1
check L = 15
check dL/db ≈ 0.39
# statements and indexing as Python, NumPy and PyTorch write them
if a > 1 { y = 1 } elif a < 0 { y = 2 }
elif a == 0 { y = 4 } else { y = 3 }
z = a if a > b else b if b > 0 else -b
m = a % 2 + a // 2 * 3; m **= 2; m //= 2; m %= 5; m ^= 1
p, q = 1, 2; p, q, = q, p
pair(x, k=2, c=-1,) { for i in range(3) { if i == k { break }; continue }; return x*k, c }
u, v = pair(a, k=3)
W[0, 1] = 5; W[[0, 1]] += v; W[W > 2] = 0; W[..., 0] *= 2
r = W[None, ..., [1, 0]] + W[:, newaxis][0]
check dy/dx = 2x sin(x) + x^2 cos(x) + 3x²(a + 1)(a - 1)√x + 1/2 x
"""

CLAIMS = ("dL/dw1 = -w3*a\n∂L/∂a ≈ 2.5  # a comment\nL = 15; check dL/dw2 = -8, dL/dx = [1, f(2, 3)],\n"
          "dy/dx = 2x sin(x)cos(x) + (x - 1)(x + 1)x, dL/da = -2w3 a [1, 2]x\n"
          "dy/dx = sin 2x cos x + e^(sin x)tanh √x x - sin sin x / 2\n"
          "d²y/dx² = 6x, ∂²L/∂a∂b = 1; d^2y/dx^2 = 2, ∂^2 L/∂w^2 = 0, d2y/dx2 = 1, d²L/da db = 3\n"
          "dy/dx = 1 - tanh²(x) + sech^2 2x + sin²(cos²(x))x - tan^2 + cos^(2)\n"
          "dL/dW = δxᵀ + Wᵀδ + X^T Y + hᵀh\n")


class _RejectAll:
    def parse(self, text: str) -> Any:
        raise P._Rejected


def outcome(text: str, start: str = "start") -> tuple:
    """The tree, or the error's text, hint and place: what a user sees."""
    try:
        return ("tree", P._parse(text, start, P.DEFAULT_MAX_DEPTH, NOTATION))
    except GradcalcError as error:
        return ("error", error.message, error.hint, error.pos)


def lark_outcome(text: str, start: str = "start") -> tuple:
    with mock.patch.object(P, "_fast", lambda *args: _RejectAll()):
        return outcome(text, start)


def assert_same(text: str, start: str = "start", valid: bool | None = None) -> None:
    fast, lark = outcome(text, start), lark_outcome(text, start)
    assert fast == lark, text
    if valid is not None:
        assert (fast[0] == "tree") == valid, (text, fast)
    if fast[0] == "tree":  # and the fast loop took it, rather than handing it to Lark
        assert P._fast(start, P.DEFAULT_MAX_DEPTH, NOTATION).parse(text) == lark[1]


def test_trees_compare_field_by_field() -> None:
    """The comparisons below are only as good as the syntax tree's equality: values, operators and places count."""
    tree = P.parse("y = a + 1")
    assert tree == P.parse("y = a + 1")
    for other in ["y = a + 2", "y = a - 1", "y = b + 1", "y  = a + 1", "z = a + 1", "y = a + 1; w = 1"]:
        assert tree != P.parse(other), other


def test_every_construct_gives_lark_s_tree() -> None:
    assert_same(EVERY_CONSTRUCT, valid=True)


@pytest.mark.parametrize("path", sorted(SAMPLES.rglob("*.eq")), ids=lambda p: p.name)
def test_samples_give_lark_s_tree(path: Any) -> None:
    # some students' submissions do not parse, on purpose
    assert_same(path.read_text(encoding="utf-8"), valid=None if "submissions" in path.parts else True)


def test_claims_and_values_give_lark_s_tree() -> None:
    assert_same(CLAIMS, "claims", valid=True)
    assert_same((SAMPLES / "answers.txt").read_text(encoding="utf-8"), "claims", valid=True)
    assert_same("randn(3, 2) * 0.5", "value", valid=True)
    assert_same("[[1, 2], [3, 4]]", "value", valid=True)


@pytest.mark.parametrize("text", ["dL/dw3: -6", "-1 = dL/dw4", "dL dw4 = 3", "dL/ = 3", "dL/dw4 ="])
def test_claim_errors_are_lark_s_errors(text: str) -> None:
    assert_same(text, "claims", valid=False)


@pytest.mark.parametrize("text", ["dy/dx = 1/2x", "dy/dx = e^2x", "dy/dx = x/(2)x", "dy/dx = sin 2x)", "y = 2x",
                                  "d³y/dx³ = 1", "d2y/dx = 1", "x²y/dx² = 1",
                                  "check dy/dx = 1/2x", "check dy/dx = x^2x"])
def test_juxtaposition_errors_are_lark_s_errors(text: str) -> None:
    assert_same(text, "claims" if not text.startswith(("check", "y =")) else "start", valid=False)


@pytest.mark.parametrize("text", ["y ≈ 2", "y = x ≈ 2",
                                  "y = 2 x", "y = (1 + 2", "y = 1 +\n", "f(x) = ", "if a { y = 1 } else", "y = 1 ]",
                                  "y == 2", "3 = y", "y = a = 2", "while { }", "y = 1\nelse { }", "y = $",
                                  "const N += 1", "const = 3", "const N", "y = const",
                                  "a, = 1", "a, b = 1, 2, 3", "a, a = f(x)", "return x,", "f(x, y=1, z) = x",
                                  "y = a if b", "y = a if b else", "y = x[...]...", "W[0] == 1 = 2", "elif a { }",
                                  "break = 1", "y = 2 %% 3", "y = 1 //= 2", "a, b += 1, 2",
                                  # which of two errors comes first: the parser's, the brackets' or the lexer's
                                  "y = = 1\nz = $", "y = = 1 ]", "y = 1\ny = = 2 ]\nz = $", "y = (1 +\n$",
                                  "y = 1; y = 2; y = = 3 )"])
def test_errors_are_lark_s_errors(text: str) -> None:
    assert_same(text, valid=False)


@pytest.mark.parametrize(("text", "message", "line", "column"), [
    # a character nothing matches comes after the parser's error, in the same statement or bracket
    ("a = 1 +* 2 $", "unexpected '*'", 1, 8),
    ("a = (1 +* 2\nc = $", "unexpected '*'", 1, 9),
    ("a = (1 + 2 b\nc = $", "missing operator before 'b'", 1, 12),
    ("y = 1 +\n$", "the line ends in the middle of an expression", 1, 8),
    # a block's '{' on an earlier line is not the culprit (a new line ends a statement in it); the '(' in it is
    ("if x {\n y = 1 +* 2\n", "unexpected '*'", 2, 9),
    ("if x {\n y = (1 +\n z = 2\n}", "'(' opened here is still open at line 3", 2, 6),
])
def test_the_first_error_in_the_text_is_the_one_reported(text: str, message: str, line: int, column: int) -> None:
    error = outcome(text)
    assert error[0] == "error" and (error[1], error[3].line, error[3].column) == (message, line, column), error
    assert_same(text, valid=False)


@settings(max_examples=150, deadline=None)
@given(st.lists(expressions(["x", "y", "w1"]), min_size=1, max_size=4), st.sampled_from(["\n", "; ", "\n\n"]))
def test_random_programs_give_lark_s_tree(bodies: list[str], separator: str) -> None:
    text = separator.join(f"v{i} = {body}" for i, body in enumerate(bodies))
    assert_same(text, valid=True)


@settings(max_examples=300, deadline=None)
@given(token_soup, st.sampled_from(["start", "claims", "value"]))
def test_token_soups_give_lark_s_outcome(text: str, start: str) -> None:
    assert_same(text, start)


# --- the lexer against Lark's own ------------------------------------------------------------

BLANKS = ["y = 1 \\\n  + 2  # after a continuation\n", "y = 1\t\\  \n\t+ 2\r\nz = y",
          "a = 1   \n\n  # only a comment\n   ",
          "b = [1,\n  2]  \\\n\n", "s = \"a\nb\"\n t = 1", "x=1;y=x#c\n#d", "  \t", "", "# nothing\n", "w = 1 \\\n"]


@functools.cache
def lark_lexer() -> Any:
    """Lark's standard lexer on the same grammar (built once: building it takes a tenth of a second)."""
    from lark import Lark

    return Lark(P.grammar_text(), parser="lalr", lexer="basic")


def lark_tokens(text: str) -> list[tuple]:
    """Lark's standard lexer on the same grammar: the reference for gradcalc's one-regex lexer."""
    lark = lark_lexer()
    return [(t.type, lalr.composed(t.value.translate(lalr.SUBSCRIPTS)) if t.type == "NAME" else t.value,
             t.start_pos, t.line, t.column) for t in lark.lex(text)]


def our_tokens(text: str) -> list[tuple]:
    lexer = P._fast("start", P.DEFAULT_MAX_DEPTH).lexer
    try:
        return [(t.type, t.value, t.start_pos, t.line, t.column) for t in lexer.lex(text)]
    except lalr.BadCharacter as bad:
        from lark.exceptions import UnexpectedCharacters

        raise UnexpectedCharacters(text, bad.pos, bad.line, bad.column) from None


def lex_outcome(tokens: Any, text: str) -> tuple:
    from lark.exceptions import UnexpectedCharacters

    try:
        return ("tokens", tokens(text))
    except UnexpectedCharacters as error:
        return ("error", error.pos_in_stream, error.line, error.column)


@pytest.mark.parametrize("text", [EVERY_CONSTRUCT, CLAIMS, *BLANKS, "y = 1 $", "y = 1  \\ x", "a = 2\n  @@ ~"])
def test_lexer_gives_lark_s_tokens(text: str) -> None:
    assert lex_outcome(our_tokens, text) == lex_outcome(lark_tokens, text)


@pytest.mark.parametrize("path", sorted(SAMPLES.rglob("*.eq")) + sorted(SAMPLES.rglob("*.txt")), ids=lambda p: p.name)
def test_lexer_gives_lark_s_tokens_on_samples(path: Any) -> None:
    text = path.read_text(encoding="utf-8")
    assert lex_outcome(our_tokens, text) == lex_outcome(lark_tokens, text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["x", " ", "\t", "\n", "\\\n", "\\ \n", "# c", "1.5", "if", "=", "(", ")", "$", "\r\n",
                                 "\r", "\f", " \r", "\t\r\n",
                                 "\"s\"", "w₁", "**", "²", "'"]), max_size=30))
def test_lexer_gives_lark_s_tokens_on_blank_soups(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert lex_outcome(our_tokens, text) == lex_outcome(lark_tokens, text)


def test_a_long_run_of_blanks_before_a_bad_character_fails_at_once() -> None:
    # Blanks are skipped by a possessive group: no backtracking over their ways of splitting.
    text = "y = 1" + " \t" * 20_000 + "$"
    assert lex_outcome(our_tokens, text) == ("error", len(text) - 1, 1, len(text))


# --- the tables shipped as data ----------------------------------------------------------------


def test_shipped_tables_are_what_lark_builds_from_the_grammar_now() -> None:
    """lalr_tables.json is Lark's analysis of gradcalc.lark as it is: after editing the grammar, regenerate it
    with `python -m gradcalc.language.lalr`."""
    shipped = json.loads(Path(lalr.TABLES).read_text(encoding="utf-8"))
    stale = "the grammar changed: regenerate the tables with `python -m gradcalc.language.lalr`"
    assert shipped["grammar"] == lalr.grammar_text(), stale
    assert shipped == lalr.build(), stale


def test_an_edited_grammar_is_built_again_not_read_from_stale_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The grammar stays the source: tables built from another grammar are not used for this one."""
    edited = lalr.grammar_text().replace('POW_OP: "^" | "**"', 'POW_OP: "^" | "**" | "↑"')
    assert edited != lalr.grammar_text()
    monkeypatch.setattr(lalr, "grammar_text", lambda: edited)
    monkeypatch.setattr(lalr, "_loaded", None)
    monkeypatch.setattr(lalr, "_lexer", None)
    tables = lalr.tables()
    assert tables["grammar"] == edited
    assert "↑" in tables["lexer"]["pattern"]
    assert lalr.tables() is tables  # built once a process


def test_the_loop_keeps_lark_s_children_and_placeholders() -> None:
    """[optional] parts missing are None in the method's arguments, as with Lark: f() has no params, and a
    slice's missing bounds are None (these reach _ToSyntax through the table's placeholders)."""
    function, assign = P.parse("f() = 1\ny = x[:, 1:][::2]").body
    assert isinstance(function, S.FuncDef) and isinstance(assign, S.Assign)
    assert function.params == []
    index = assign.value
    assert isinstance(index, S.Index) and isinstance(index.target, S.Index)
    (step,) = index.subscripts
    assert step.start is None and step.stop is None and step.step.value == 2.0
    assert index.target.subscripts[0].start is None and index.target.subscripts[0].stop is None
    assert isinstance(index.target.subscripts[1].start, S.Number)


PROGRAM_LINES = [line for line in EVERY_CONSTRUCT.splitlines() if line and not line.startswith("#")]


def rename(line: str, names: dict[str, str]) -> str:
    """The line with its one-letter names changed (whole words only: `and` stays), and its digits 1 → 7."""
    return re.sub(r"\b[a-z]\b", lambda m: names.get(m.group(), m.group()), line).replace("1", "7")


def test_statements_of_a_shape_met_before_give_lark_s_tree() -> None:
    """A statement of a shape met before is built by replaying the reductions recorded for it (lalr.Parser):
    every construct three times over, and with its names and numbers changed, is still Lark's tree; and every
    statement the loop takes alone (not a block over lines, nor a check) is replayed from its shape's third."""
    parser = P._fast("start", P.DEFAULT_MAX_DEPTH, NOTATION).parser
    parser.shapes.clear()
    changed = [rename(line, dict(zip("xyab", "uvcd"))) for line in PROGRAM_LINES]
    text = "\n".join(PROGRAM_LINES + changed + PROGRAM_LINES)
    assert_same(text, valid=True)
    alone = [line for line in PROGRAM_LINES if not any(sign in line for sign in ("{", "}", "\\", "check"))
             and lark_outcome(line)[0] == "tree"]  # (a line of a statement over several lines is no program)
    assert len(alone) >= 10
    parser.shapes.clear()
    text = "\n".join(alone * 4)
    assert P._fast("start", P.DEFAULT_MAX_DEPTH, NOTATION).parse(text) == lark_outcome(text)[1]
    shapes = [shape for table in parser.shapes.values() for shape in table.values() if shape]  # (a stretch: [])
    once = [shape for shape in shapes if shape[3] == 1]  # the first line's: no statement before it in those states
    assert len(once) <= 3 and len(shapes) - len(once) >= len(alone) - 1
    assert all(shape[0] is not None for shape in shapes if shape[3] > 1)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(PROGRAM_LINES), min_size=1, max_size=12), st.sampled_from(["\n", "; ", "\n\n"]),
       st.permutations(list("abuvxyz")))
def test_programs_of_repeated_shapes_give_lark_s_tree(lines: list[str], separator: str, names: list[str]) -> None:
    renamed = [rename(line, dict(zip("abuvxyz", names))) for line in lines]
    assert_same(separator.join(lines + renamed + lines))


# One shape (the same token kinds), spelled many ways: each copy of a replayed statement has tokens of other widths
# and other texts than the copy its replay was recorded from (a width or a text kept from the record would show).
SPELLINGS = {"mul": ["*", "·", "×", "÷", "⋅", "∙", "∗", "⊙", "/", "@"], "add": ["+", "-", "−", "–"],
             "pow": ["^", "**"], "sup": ["²", "³", "⁻¹", "⁻¹²"], "blank": [" ", "\t", "  ", " \t"],
             "name": ["a", "θ", "w₁", "y\u0302", "ŷ", "longer_name", "α"],
             "number": ["1", "250.5", ".5", "1e-3", "12345"]}
SHAPES = ["v{k} = {name}{blank}{mul} {number} {add}{blank}{name}", "v{k} = ({name} {mul} {number}) {pow} {name}",
          "v{k} = {name}{sup} {add} √{name} {mul} [{number}, {name}][0]",
          "v{k} = f({name}, k={number}) {add} {name}{sup}",
          "v{k} = {name} if {name} > {number} else {number}   # {name}",
          "check d{name}/d{name} = {number} {mul} {name}"]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(SHAPES), st.integers(3, 7), st.sampled_from(["", " + )", " +", " $", " {", " = 2"]), st.data())
def test_a_shape_replayed_in_other_spellings_gives_lark_s_outcome(shape: str, copies: int, error: str,
                                                                  data: st.DataObject) -> None:
    """A statement replayed from its shape's third, each copy with other operators' spellings, other names and
    numbers and blanks (ones of other widths): Lark's tree, and with a slip in the last copy, Lark's error there."""
    lines = [re.sub(r"\{(\w+)\}", lambda m: data.draw(st.sampled_from(SPELLINGS[m[1]])), shape.replace("{k}", str(k)))
             for k in range(copies)]
    code, hash_, comment = lines[-1].partition("   #")
    lines[-1] = code + error + hash_ + comment  # (the slip before the comment)
    # (in a check, `= 2` is a derivation's next step, not a slip)
    assert_same("\n".join(lines + ["z = 1"]), valid=None if shape.startswith("check") else not error)


RUN = "h{k} = tanh(0.5*h{j} + {k}.25)*w - b{j}"  # one shape, other names and numbers on each line


@pytest.mark.parametrize("text", [
    "\n".join(RUN.format(k=k, j=k - 1) for k in range(12)),  # to the end of the text, with no last new line
    "".join(RUN.format(k=k, j=k - 1) + "\r\n" for k in range(12)),  # CRLF
    "".join(RUN.format(k=k, j=k - 1) + ("\n# a comment\n" if k == 6 else "\n\n   \n" if k == 8 else "\n")
            for k in range(12)),  # a comment and blank lines in the run: the loop counts the lines between
    "f(x) {\n" + "".join(f"    {RUN.format(k=k, j=k - 1)}\n" for k in range(12)) + "    return h11\n}\nL = f(1)\n",
    "if c > 0 {\n" + "".join(f"  {RUN.format(k=k, j=k - 1)}\n" for k in range(8)) + "}\nelse { y = 1 }\n",
    "if c > 0 {\n" + "".join(f"  {RUN.format(k=k, j=k - 1)}\n" for k in range(8)) + "}\nelse {\n"
    + "".join(f"  {RUN.format(k=k, j=k - 1)}\n" for k in range(8)) + "}\n",
    "".join(RUN.format(k=k, j=k - 1) + "\n" for k in range(8)) + "else { y = 1 }\n",  # an `else` joins the last
    "".join(f"if c > {k} {{ y = y*2 }}\n" for k in range(8)) + "else { y = 1 }\nelif c { y = 3 }\n",
    "".join(RUN.format(k=k, j=k - 1) + "\n" for k in range(8)) + RUN.format(k=9, j=8) + " +\n",  # a slip after it
    "".join(RUN.format(k=k, j=k - 1) + ("; " if k % 3 else "\n") for k in range(12)),  # runs of `;` are not runs
    "".join(RUN.format(k=k, j=k - 1) + "\n" for k in range(6)) + "y = (1 +\n  2)\n"
    + "".join(RUN.format(k=k, j=k - 1) + "\n" for k in range(6, 12)),  # a statement over lines between two runs
])
def test_a_run_of_statements_of_one_shape_gives_lark_s_outcome(text: str) -> None:
    """Statements of one shape one after another (a chain's, a network's layers) are replayed in one call from
    the second (lalr.Parser._compiled's run): Lark's tree, places included, or Lark's error, wherever the run
    is, however it ends; and the run's loop was taken where it could be."""
    parser = P._fast("start", P.DEFAULT_MAX_DEPTH, NOTATION).parser
    parser.shapes.clear()
    assert_same(text)
    runs = [shape for table in parser.shapes.values() for shape in table.values()
            if len(shape) > 7 and callable(shape[7])]
    assert runs or ";" in text or text.startswith("if")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PROGRAM_LINES), st.integers(1, 5)), min_size=1, max_size=5),
       st.sampled_from(["\n", "\r\n", "\n\n", "\n# c\n", "\n  \t\n"]), st.booleans(), st.data())
def test_runs_of_every_construct_give_lark_s_outcome(runs: list[tuple[str, int]], separator: str, broken: bool,
                                                     data: st.DataObject) -> None:
    """Every construct in runs of copies, each copy renamed (a run's statements share kinds, not texts), between
    any separators, and with a character changed anywhere if `broken`: Lark's tree or Lark's error."""
    lines = [rename(line, dict(zip("xyab", data.draw(st.permutations(list("xyabuv")))))) if k else line
             for line, copies in runs for k in range(copies)]
    text = separator.join(lines)
    if broken:
        at = data.draw(st.integers(0, len(text) - 1))
        text = text[:at] + data.draw(st.sampled_from(list("()[]{}=+*,;\n 1$"))) + text[at + 1:]
    assert_same(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(PROGRAM_LINES), min_size=1, max_size=6), st.data())
def test_corrupted_programs_give_lark_s_outcome(lines: list[str], data: st.DataObject) -> None:
    """Real programs with one character deleted, doubled or replaced: the same tree, or the same error at the
    same line and column, whether the tables' loop or Lark's parser reads them."""
    text = "\n".join(lines)
    at = data.draw(st.integers(0, len(text) - 1))
    edit = data.draw(st.sampled_from(["delete", "double", "replace"]))
    if edit == "delete":
        text = text[:at] + text[at + 1:]
    elif edit == "double":
        text = text[:at] + text[at] + text[at:]
    else:
        text = text[:at] + data.draw(st.sampled_from(list("()[]{}=+*,;:.\n 1xé$"))) + text[at + 1:]
    assert_same(text)


def test_lark_explains_an_error_from_the_line_of_the_statement_the_loop_rejected() -> None:
    """Lark re-reads a rejected text to explain its error: the statements before the rejected one, which parsed,
    are given to it as blanks with their lines and columns kept (an error at statement 99,991 of 10^5 took 36 s
    to explain), and the error is the one the whole text gives."""
    text = "y = 1\n" * 50 + "y = (y +\n  2) * = 3\nz = 1\n"
    from lark import Lark

    seen: list[str] = []
    read = Lark.parse
    with mock.patch.object(Lark, "parse", lambda self, given, *rest: (seen.append(given), read(self, given, *rest))[1]):
        fast = outcome(text)
    assert seen and seen[0].startswith(" " * 5 + "\n") and seen[0].endswith(text[text.index("y = (y"):])
    assert len(seen[0]) == len(text) and seen[0].count("\n") == text.count("\n")
    assert fast == lark_outcome(text) and fast[0] == "error" and fast[3].line == 52


@pytest.mark.parametrize("continued", ["x = 1 + \\\n  2\n" + "y = 1\n" * 50, "y = 1\n" * 49 + "x = 1 + \\\n  2\n"])
def test_lark_explains_an_error_from_its_statement_s_line_in_a_program_with_a_continued_line(continued: str) -> None:
    """The same where a line before the error is continued by `\\` (which makes the loop read the program as
    tokens): Lark is still given the statements that parsed as blanks. 69a2f79 did so; since the rewrite Lark
    re-read the whole text (an error at the end of 3·10^4 statements, one line continued: 1.4 s then, 5.6 s now)."""
    text = continued + "y = (y +\n  2) * = 3\nz = 1\n"
    from lark import Lark

    seen: list[str] = []
    read = Lark.parse
    with mock.patch.object(Lark, "parse", lambda self, given, *rest: (seen.append(given), read(self, given, *rest))[1]):
        fast = outcome(text)
    rejected = text.index("y = (y")
    assert seen and not seen[0][:rejected].strip() and seen[0][rejected:] == text[rejected:]
    assert len(seen[0]) == len(text) and seen[0].count("\n") == text.count("\n")
    assert fast == lark_outcome(text) and fast[0] == "error" and fast[3].line == text[:rejected].count("\n") + 2


def test_nodes_made_without_their_init_are_those_it_would_make() -> None:
    """A replay (and parser._call) sets a node's slots instead of calling its __init__, only where __init__ keeps
    its arguments and nothing else: a class whose __init__ does more is made by calling it."""
    assert lalr._plain_slots(S.Call) == ("name", "args", "keywords", "at")  # parser._call relies on it
    assert lalr._plain_slots(S.Const) is None  # Const(name, value, pos) sets op itself

    class Checked(S.Name):
        __slots__ = ()

        def __init__(self, name: str, pos: Any) -> None:
            super().__init__(name.strip(), pos)

    assert lalr._plain_slots(Checked) is None  # (a marker has no strip: made by calling it)
    inlined = [name for name, template in P.NODES.items()
               if isinstance(template, tuple) and lalr._plain_slots(P.NODE_NAMES[template[0]]) is not None]
    assert {"name", "number", "binop", "assign"} <= set(inlined)


def test_statements_in_blocks_over_lines_are_replayed_too() -> None:
    """A block's statements are read one at a time as the program's are (its { and } tracked across them), so a
    body of repeated shapes is replayed; the trees and errors are Lark's, blocks nested, closed, or not."""
    parser = P._fast("start", P.DEFAULT_MAX_DEPTH, NOTATION).parser
    parser.shapes.clear()
    body = "\n".join(f"    y{k} = sin(x)*{k} + y{k - 1}" for k in range(1, 40))
    text = f"x = 1\ny0 = 0\nf(x) {{\n    y0 = x\n{body}\n    return y39\n}}\nfor i in range(2) {{\n" \
           f"    if i > 0 {{\n{body}\n    }}\n    else {{ y39 = 1 }}\n}}\nL = f(y39)\n"
    assert_same(text, valid=True)
    inside = [shape for state, table in parser.shapes.items() if len(state) > 2 for shape in table.values()
              if shape and shape[0] is not None]
    assert inside  # replays written for statements inside the blocks
    for broken in (text.replace("    }\n", "", 1), text.replace("return y39\n}", "return y39\n}}"),
                   text + "g(x) {\n" + body, text.replace("y5 = ", "y5 = (", 1), "if x > 0 {\n" + body + "\n)\n"):
        assert_same(broken)


def test_lark_explains_an_error_after_a_semicolon_from_its_line() -> None:
    """A statement rejected after `;` is explained from the start of its line, where the line's first statement
    is not in a block (Lark re-read the whole text: 16.5 s for an error on the last line of 10^5 statements)."""
    from lark import Lark

    read = Lark.parse
    seen: list[str] = []
    for text, restart in [("y = 1\n" * 50 + "a = 1; b = 2; c = = 3\nz = 1\n", "a = 1;"),
                          ("y = 1\n" * 50 + "if y > 0 { y = 2 }; c = = 3\n", "if y > 0"),
                          ("f(x) {\n" + "  y = 1\n" * 20 + "  a = 1; c = = 3\n}\n", None)]:
        seen.clear()
        with mock.patch.object(Lark, "parse",
                               lambda self, given, *rest: (seen.append(given), read(self, given, *rest))[1]):
            fast = outcome(text)
        assert fast == lark_outcome(text) and fast[0] == "error", text
        if restart is None:  # in a block, Lark needs its {: the whole text
            assert seen[0] == text
        else:
            at = text.index(restart)
            assert not seen[0][:at].strip() and seen[0][at:] == text[at:] and len(seen[0]) == len(text)
