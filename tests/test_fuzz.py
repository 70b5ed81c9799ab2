"""Fuzzing: no input — random text, token soups, random programs, random command lines — may end in a
traceback, an internal error (exit 3) or exit 1; the parser raises only GradcalcError.
"""

from __future__ import annotations

import string

import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_WRONG,
    MEAN,
    NEURON,
    NEURON_TENSOR,
    CliResult,
    examples,
    run_cli,
    strict_json,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import token_soup

from gradcalc.errors import GradcalcError
from gradcalc.language.parser import DEFAULT_MAX_DEPTH, parse, parse_expression, raise_recursion_limit
from gradcalc.program.builtins import BUILTINS
from gradcalc.program.notation.juxtaposition import NOTATION  # as the program layer parses: check statements' 2x
from gradcalc.program.notation.reading import parse_claims

# gradcalc raises the recursion limit on its first run; do it now, so that Hypothesis does not see it
# change in the middle of a test (and warn).
raise_recursion_limit(DEFAULT_MAX_DEPTH)


def fast(count: int) -> settings:
    """No deadline (the first run builds the parser), a fixed number of examples (a tenth of it under
    --hypothesis-profile=quick)."""
    return settings(max_examples=examples(count), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# Keep random programs cheap: small tensors, short loops, shallow recursion.
LIMITS = ("--max-elements", "10000", "--max-iterations", "30", "--max-recursion", "30")


def check_clean(result: CliResult, args: tuple[object, ...], json_mode: bool) -> None:
    """Exit 0 or 2; no traceback; with --json, strict JSON on stdout (exit 0) or one JSON error on stderr (exit 2)."""
    shown = f"args: {[str(a)[:300] for a in args]}\nexit {result.exit_code}\nstdout: {result.stdout[-1500:]}\n" \
            f"stderr: {result.stderr[-3000:]}"
    assert result.exit_code in (EXIT_OK, EXIT_BAD_INPUT), shown
    assert "Traceback" not in result.output, shown
    assert "internal error" not in result.output, shown
    if result.exit_code == EXIT_BAD_INPUT:
        assert result.stderr.strip(), shown
        if json_mode:
            doc = strict_json(result.stderr)
            assert set(doc["error"]) >= {"type", "message", "line", "column"}, shown
    elif json_mode:
        assert isinstance(strict_json(result.stdout), dict), shown
        assert "Warning" not in result.stderr, shown


def run_program(command: str, program: str, *extra: str, json_mode: bool = True) -> CliResult:
    args = (command, "-e", program, *LIMITS, *extra, *(("--json",) if json_mode else ()))
    result = run_cli(*args)
    check_clean(result, args, json_mode)
    return result


# --- the parser alone ------------------------------------------------------------------------------------------

program_alphabet = st.sampled_from([*string.printable, "θ", "∂", "é", "\u00a0", "\u2028", "١"])
program_like_text = st.text(alphabet=program_alphabet, max_size=80)


def parse_or_gradcalc_error(text: str, max_depth: int = 200) -> None:
    try:
        parse(text, max_depth, NOTATION)
    except GradcalcError as error:
        assert error.message, repr(text)
        assert error.pos is None or (error.pos.line >= 1 and error.pos.column >= 1), (repr(text), error.pos)


@fast(400)
@given(st.text(max_size=120))
def test_parser_random_text(text: str) -> None:
    parse_or_gradcalc_error(text)


@fast(400)
@given(program_like_text)
def test_parser_program_like_text(text: str) -> None:
    parse_or_gradcalc_error(text)


@pytest.mark.slow
@fast(600)
@given(token_soup)
def test_parser_token_soup(text: str) -> None:
    parse_or_gradcalc_error(text)


@pytest.mark.slow
@fast(200)
@given(st.text(alphabet="()[]{}1x+-, \n", max_size=60), st.integers(min_value=0, max_value=8))
def test_parser_brackets_and_small_depth_limits(text: str, depth: int) -> None:
    parse_or_gradcalc_error(text, depth)


@fast(300)
@given(token_soup)
def test_parse_expression_token_soup(text: str) -> None:
    """--set values are parsed as one expression."""
    try:
        parse_expression(text, dialect=NOTATION)
    except GradcalcError as error:
        assert error.message
        assert error.pos is None or (error.pos.line >= 1 and error.pos.column >= 1), (repr(text), error.pos)


CLAIM_TOKENS = ["dL", "dw1", "da", "dd", "∂L", "∂w1", "∂", "d", "/", "L", "w1", "a", "b", "check", "=", "-", "*",
                "(", ")", "[", "]", ",", "\n", ";", "#", "2.5", "0.39", "1e1", "W3", "sin", "ones(2)", "eye(3)",
                # LaTeX, as answers pasted from a notebook are written
                "\\frac", "{", "}", "\\partial", "^", "_", "\\sqrt", "\\cdot", "\\left(", "\\right)", "\\left|",
                "\\right|", "\\sin", "\\sigma", "\\alpha", "\\mathrm", "\\", "\\foo", "\\begin", "[3]", "2x", "e^",
                # second derivatives
                "²", "³", "d²L", "∂²", "dw1²", "^2", "d2L", "dw2",
                # LaTeX matrices
                "\\begin{bmatrix}", "\\end{bmatrix}", "&", "\\\\", "\\begin{vmatrix}", "\\end"]
claim_soup = st.lists(st.tuples(st.sampled_from(CLAIM_TOKENS), st.sampled_from(["", " ", "\n"])), max_size=16).map(
    lambda pairs: "".join(token + gap for token, gap in pairs))


@fast(200)
@given(st.one_of(claim_soup, program_like_text))
def test_claims_parser_raises_only_gradcalc_errors(text: str) -> None:
    try:
        claims = parse_claims(text)
    except GradcalcError as error:
        assert error.message, repr(text)
        assert error.pos is None or (error.pos.line >= 1 and error.pos.column >= 1), (repr(text), error.pos)
        return
    for claim in claims:
        assert claim.text, repr(text)


@pytest.mark.slow
@fast(120)
@given(st.lists(st.one_of(claim_soup, st.text(max_size=30)), min_size=1, max_size=3), st.booleans())
def test_cli_check_random_claims(claims: list[str], json_mode: bool) -> None:
    """Any claim text: judged (0 or 1), or bad input (2) with a message; never a traceback."""
    args = ("check", NEURON, *[f"--claim={c}" for c in claims], "--points", "2", *LIMITS,
            *(("--json",) if json_mode else ()))
    result = run_cli(*args)
    shown = f"args: {args}\nexit {result.exit_code}\n{result.output[-3000:]}"
    assert result.exit_code in (EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT), shown
    assert "Traceback" not in result.output and "internal error" not in result.output, shown
    if json_mode:
        doc = strict_json(result.stdout) if result.stdout.strip() else strict_json(result.stderr)
        assert isinstance(doc, dict), shown
    if result.exit_code == EXIT_BAD_INPUT:
        assert result.stderr.strip(), shown


# --- the CLI on random programs ---------------------------------------------------------------------------------

@fast(150)
@given(st.text(max_size=80), st.sampled_from(["eval", "grad"]), st.booleans())
def test_cli_random_text(text: str, command: str, json_mode: bool) -> None:
    run_program(command, text, json_mode=json_mode)


@pytest.mark.slow
@fast(250)
@given(token_soup, st.sampled_from(["eval", "grad"]), st.booleans())
def test_cli_token_soup(text: str, command: str, json_mode: bool) -> None:
    run_program(command, text, json_mode=json_mode)


@fast(60)
@given(token_soup)
def test_cli_token_soup_from_stdin(text: str) -> None:
    args = ("grad", "-", *LIMITS, "--json")
    check_clean(run_cli(*args, input=text), args, True)


@pytest.mark.slow
@fast(200)
@given(token_soup)
def test_cli_syntax_errors_say_what_was_expected(text: str) -> None:
    """Every error placed in the program comes with a hint: what was expected, how to fix it."""
    result = run_program("eval", text, json_mode=False)
    if result.exit_code == EXIT_BAD_INPUT and result.stderr.startswith("error: <expr>:"):
        hints = [line for line in result.stderr.splitlines() if line.strip().startswith("hint:")]
        assert hints and hints[0].strip() != "hint:", f"program {text!r}: no hint\n{result.stderr}"


# Random programs that mostly parse, so that the evaluator and the backward pass get fuzzed too.
VARIABLES = ["x", "y", "z", "w"]
FUNCTIONS = sorted(name for name in BUILTINS if name != "load")

numbers = st.sampled_from(["0", "1", "2", "0.5", "3", "1e-3", "10", "1e300", "-1", "-2.5"])
literals = st.one_of(
    numbers,
    st.lists(numbers, min_size=1, max_size=3).map(lambda xs: "[" + ", ".join(xs) + "]"),
    st.lists(st.lists(numbers, min_size=2, max_size=2), min_size=1, max_size=2).map(
        lambda rows: "[" + ", ".join("[" + ", ".join(r) + "]" for r in rows) + "]"),
)


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "@", "^", "<", "==", "and", "or"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(st.sampled_from(["-", "not "]), inner).map(lambda t: f"{t[0]}{t[1]}"),
        st.tuples(st.sampled_from(FUNCTIONS), st.lists(inner, max_size=3),
                  st.sampled_from(["", ", axis=0", ", axis=1", ", axis=-1"])).map(
            lambda t: f"{t[0]}({', '.join(t[1])}{t[2] if t[1] else ''})"),
        st.tuples(inner, st.sampled_from(["[0]", "[1]", "[-1]", "[0:2]", "[0, :]", ".T", "[::2]"])).map(
            lambda t: f"{t[0]}{t[1]}"),
        st.lists(inner, min_size=1, max_size=3).map(lambda items: "[" + ", ".join(items) + "]"),
    )


expressions = st.recursive(st.one_of(literals, st.sampled_from([*VARIABLES, "pi", "e"])), _extend, max_leaves=8)


def _statement(depth: int) -> st.SearchStrategy[str]:
    assign = st.tuples(st.sampled_from(VARIABLES), st.sampled_from(["=", "=", "=", "+=", "*="]), expressions).map(
        lambda t: f"{t[0]} {t[1]} {t[2]}")
    if depth == 0:
        return assign
    body = st.lists(_statement(depth - 1), min_size=1, max_size=3).map("; ".join)
    return st.one_of(
        assign, assign, assign,
        st.tuples(expressions, body).map(lambda t: f"if {t[0]} {{ {t[1]} }}"),
        st.tuples(expressions, body, body).map(lambda t: f"if {t[0]} {{ {t[1]} }} else {{ {t[2]} }}"),
        st.tuples(expressions, body).map(lambda t: f"while {t[0]} {{ {t[1]} }}"),
        st.tuples(st.sampled_from(["2", "3", "0", "-1", "2.5"]), body).map(
            lambda t: f"for i in range({t[0]}) {{ {t[1]} }}"),
        body.map(lambda b: f"no_grad {{ {b} }}"),
    )


programs = st.tuples(
    st.lists(st.tuples(st.sampled_from(VARIABLES), literals).map(lambda t: f"{t[0]} = {t[1]}"), max_size=3),
    st.lists(_statement(2), min_size=1, max_size=5),
).map(lambda parts: "\n".join(parts[0] + parts[1]))


@pytest.mark.slow
@fast(200)
@given(programs, st.sampled_from([(), ("--vector", "ones"), ("--dtype", "float32"), ("--wrt", "x,y")]))
def test_cli_random_programs_grad(program: str, extra: tuple[str, ...]) -> None:
    run_program("grad", program, *extra)


@pytest.mark.slow
@fast(100)
@given(programs, st.booleans())
def test_cli_random_programs_eval(program: str, json_mode: bool) -> None:
    run_program("eval", program, json_mode=json_mode)


# --- the CLI on random command lines -------------------------------------------------------------------------------

# argv cannot hold a NUL character (C strings), so random words leave it out.
argv_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)

OPTION_WORDS = [
    "--json", "--full", "--set", "--values", "--seed", "--dtype", "--device", "--of", "--wrt", "--vector",
    "-e", "--expr", "--max-elements", "--max-iterations", "--max-depth", "--max-recursion", "--allow-read",
    "-h", "--version", "-", "--", "--claim", "--rtol", "--atol", "--points", "--jobs", "--timeout", "-v",
    "--eps", "--order",
]
VALUE_WORDS = [
    NEURON, NEURON_TENSOR, MEAN, "samples", "nope.eq", "a=3", "x=[1,2]", "w1=randn(2)", "b=1", "a=", "=", "a=[1,",
    "L", "d", "w1,a", "w1,,", "x", "ones", "[1, 2]", "[[1,2,3],[4,5,6],[7,8,9]]", "float32", "float64", "float16",
    "cpu", "0", "1", "3", "-1", "100", "1e3", "y = x^2", "y = 2 x", "a = 2; b = a*a", "", " ", "é", "{}", "[]",
    "null", "NaN", "dL/dw1 = -w3*a", "dL/da = 2.5", "db/da = 3", "∂L/∂d = x", "L = 15", "samples/submissions",
    "samples/answers.txt", "2", "1e-300",
]


@pytest.mark.slow
@fast(300)
@given(
    st.sampled_from(["eval", "grad", "check", "gradcheck"]),
    st.lists(st.one_of(st.sampled_from(OPTION_WORDS), st.sampled_from(VALUE_WORDS), argv_text),
             max_size=8),
)
def test_cli_random_arguments(command: str, words: list[str]) -> None:
    args = (command, *words, *LIMITS)
    result = run_cli(*args, input="a = 2\nb = a * 3\n")
    if command in ("check", "gradcheck") and result.exit_code == EXIT_WRONG:  # a wrong claim or gradient
        result = CliResult(EXIT_OK, result.stdout, result.stderr)
    check_clean(result, args, False)


@fast(100)
@given(st.lists(st.one_of(st.sampled_from([*OPTION_WORDS, *VALUE_WORDS, "eval", "grad"]), argv_text),
                max_size=6))
def test_cli_random_top_level_arguments(words: list[str]) -> None:
    """Whatever comes first — a command, an option, junk — the exit status is 0 or 2."""
    args = tuple(words)
    result = run_cli(*args)
    assert result.exit_code in (EXIT_OK, EXIT_BAD_INPUT), (args, result.exit_code, result.output[-2000:])
    assert "Traceback" not in result.output, (args, result.output[-2000:])
    assert "internal error" not in result.output, (args, result.output[-2000:])


@pytest.mark.slow
@fast(60)
@given(programs, st.sampled_from([(), ("--order", "2"), ("--dtype", "float32"), ("--wrt", "x,y")]), st.booleans())
def test_cli_gradcheck_random_programs(program: str, extra: tuple[str, ...], json_mode: bool) -> None:
    """gradcheck on any program: agrees (0), disagrees (1, a kink or a float32 step) or bad input (2)."""
    args = ("gradcheck", "-e", program, *LIMITS, *extra, *(("--json",) if json_mode else ()))
    result = run_cli(*args)
    if result.exit_code == EXIT_WRONG:
        result = CliResult(EXIT_OK, result.stdout, result.stderr)
    check_clean(result, args, json_mode)


@pytest.mark.slow
@fast(60)
@given(programs, st.sampled_from(VARIABLES), st.sampled_from(VARIABLES), st.sampled_from(["1", "0.5", "x*y", "2*x"]))
def test_cli_check_claims_on_random_programs(program: str, of: str, wrt: str, right_side: str) -> None:
    args = ("check", "-e", program, "--claim", f"d{of}/d{wrt} = {right_side}", "--points", "2", *LIMITS)
    result = run_cli(*args)
    assert result.exit_code in (EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT), (args, result.output[-2000:])
    assert "Traceback" not in result.output and "internal error" not in result.output, (args, result.output[-3000:])
