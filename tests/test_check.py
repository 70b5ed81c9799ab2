"""`gradcalc check`: claims parsed, judged, diagnosed and graded, against the contract.

Every expected number is a closed form worked by hand or computed with NumPy, never taken from
gradcalc itself. The toy network (samples/neuron.eq) at a = 2, w1 = 3, w2 = -1, w3 = 0.5, w4 = 4:
b = 6, c = -2, d = -5, L = 15; ∂L/∂w1 = -w3·a = -1, ∂L/∂w2 = -w4·a = -8, ∂L/∂w3 = -b = -6,
∂L/∂w4 = -c = 2, ∂L/∂a = -(w3·w1 + w4·w2) = 2.5, ∂L/∂d = -1, ∂L/∂b = -w3, ∂L/∂c = -w4.
"""

from __future__ import annotations

import io
import math
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_WRONG,
    NEURON,
    NEURON_TENSOR,
    REPO,
    SAMPLES,
    CliResult,
    assert_no_traceback,
    json_error,
    json_ok,
    located_error,
    run_cli,
    strict_json,
)
from hypothesis import HealthCheck, assume, given, settings
from strategies import scalar_cases

import gradcalc
from gradcalc.errors import Source
from gradcalc.language.parser import DEFAULT_MAX_DEPTH, parse_expression, raise_recursion_limit
from gradcalc.tools.homework import check as C

raise_recursion_limit(DEFAULT_MAX_DEPTH)  # before Hypothesis runs, so it does not see the limit change

MEAN = str(SAMPLES / "mean.eq")
DOUBLING = str(SAMPLES / "doubling.eq")
NEURON_VALUES = {"a": 2.0, "w1": 3.0, "w2": -1.0, "w3": 0.5, "w4": 4.0}
NEURON_PROGRAM = "a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\nb = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d\n"
TANH_PROGRAM = "W = [[1,2,3],[4,5,6]]; x = [1, -1, 2]; L = sum(tanh(W @ x))"


def neuron_gradient(a: float = 2, w1: float = 3, w2: float = -1, w3: float = 0.5, w4: float = 4) -> dict[str, float]:
    """∂L/∂· of the toy network, by hand."""
    return {"a": -(w3 * w1 + w4 * w2), "w1": -w3 * a, "w2": -w4 * a, "w3": -(w1 * a), "w4": -(w2 * a),
            "b": -w3, "c": -w4, "d": -1.0}


# --- helpers -------------------------------------------------------------------------------------

def check(*args: object, input: str | None = None) -> CliResult:  # noqa: A002  (click's name for it)
    """`gradcalc check ARGS`, which must never print a traceback."""
    result = run_cli("check", *args, input=input)
    assert_no_traceback(result)
    return result


def check_json(*args: object, code: int | None = None) -> dict[str, Any]:
    """`gradcalc check ARGS --json`: the strict JSON document on stdout (and the exit status, if given)."""
    result = check(*args, "--json")
    if code is not None:
        assert result.exit_code == code, f"exit {result.exit_code}\n{result.stdout}\n{result.stderr}"
    return strict_json(result.stdout)


def claims(*texts: str) -> list[str]:
    """--claim options, one per claim."""
    return [arg for text in texts for arg in ("--claim", text)]


def one(program: str, claim: str, *extra: object) -> dict[str, Any]:
    """The single verdict on one --claim against a program file."""
    doc = check_json(program, *claims(claim), *extra)
    assert len(doc["results"]) == 1, doc
    return doc["results"][0]


def one_expr(program: str, claim: str, *extra: object) -> dict[str, Any]:
    """The single verdict on one --claim against an -e program."""
    doc = check_json("-e", program, *claims(claim), *extra)
    assert len(doc["results"]) == 1, doc
    return doc["results"][0]


def assert_right(verdict: dict[str, Any]) -> None:
    assert verdict["status"] == "right" and verdict["passed"] is True, verdict


def assert_wrong(verdict: dict[str, Any]) -> None:
    assert verdict["status"] == "wrong" and verdict["passed"] is False, verdict


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- 1. parsing ------------------------------------------------------------------------------------

def test_three_syntaxes_keep_the_claim_text_as_written() -> None:
    """ASCII d, ∂, a `check` prefix, `;` and spacing: each claim parsed, its text kept (less `check`)."""
    doc = check_json(NEURON, "--claim", "dL/dw1 = -w3*a;∂L/∂w2 = -8", "--claim", "check dL/da=2.5 ; L = 15",
                     "--claim", "dL/dw3 =   -b", code=EXIT_OK)
    texts = [r["claim"] for r in doc["results"]]
    assert texts == ["dL/dw1 = -w3*a", "∂L/∂w2 = -8", "dL/da=2.5", "L = 15", "dL/dw3 = -b"]
    assert [(r["of"], r["wrt"]) for r in doc["results"]] == [("L", "w1"), ("L", "w2"), ("L", "a"), ("L", None),
                                                           ("L", "w3")]
    assert [r["kind"] for r in doc["results"]] == ["expression", "number", "number", "number", "expression"]
    assert doc["passed"] is True and doc["right"] == doc["total"] == 5
    assert "first_wrong" not in doc
    for result in doc["results"]:
        assert result["line"] is None  # --claim has no lines


def test_answers_file_lines_comments_and_check_prefix(tmp_path: Path) -> None:
    answers = write(tmp_path / "answers.txt",
                    "# my answers\n"
                    "\n"
                    "dL/dw1 = -w3*a      # chain rule\n"
                    "check ∂L/∂w2 = -w4*a\n"
                    "   dL/da = -(w3*w1 + w4*w2)\n"
                    "# dL/dw3 = 999 is commented out\n"
                    "dL/dw4 = 2; L = 15\n")
    doc = check_json(NEURON, answers, code=EXIT_OK)
    assert [(r["claim"], r["line"]) for r in doc["results"]] == [
        ("dL/dw1 = -w3*a", 3), ("∂L/∂w2 = -w4*a", 4), ("dL/da = -(w3*w1 + w4*w2)", 5), ("dL/dw4 = 2", 7),
        ("L = 15", 7)]
    truth = neuron_gradient()
    assert [r["expected"] for r in doc["results"]] == [truth["w1"], truth["w2"], truth["a"], truth["w4"], 15]


def test_claims_separated_by_commas_on_one_line(tmp_path: Path) -> None:
    """`dL/dw1 = -1, dL/dw2 = -8` is two claims; a comma inside brackets stays in its claim's value."""
    answers = write(tmp_path / "answers.txt", "dL/dw1 = -1, dL/dw2 = -w4*a,\ndL/da = maximum(2, 2.5), L = 15\n")
    doc = check_json(NEURON, answers, code=EXIT_OK)
    assert [(r["claim"], r["line"]) for r in doc["results"]] == [
        ("dL/dw1 = -1", 1), ("dL/dw2 = -w4*a", 1), ("dL/da = maximum(2, 2.5)", 2), ("L = 15", 2)]
    tensor = run_cli("check", "-e", "x = [1.0, 2.0]; L = sum(x^2)", "--claim", "dL/dx = [2*x[0], 2*x[1]], L = 5",
                     "--json")
    assert tensor.exit_code == EXIT_OK, tensor.output
    assert [r["expected"] for r in strict_json(tensor.stdout)["results"]] == [[2.0, 4.0], 5.0]


def test_approximately_equal_in_claims() -> None:
    """dL/dw1 ≈ -1.0: ≈ is = in a claim (numbers are judged to their digits either way)."""
    claims = ["dL/dw1 ≈ -1.0", "∂L/∂a ≈ 2.5", "L ≈ 15", "dL/dw2 ≈ -w4*a"]
    doc = strict_json(run_cli("check", NEURON, *[f"--claim={c}" for c in claims], "--json").stdout)
    assert [r["status"] for r in doc["results"]] == ["right"] * 4
    wrong = strict_json(run_cli("check", NEURON, "--claim", "dL/dw1 ≈ 1", "--json").stdout)
    assert wrong["results"][0]["status"] == "wrong"
    for program, hint in [("y ≈ 2", "assign with '='"), ("x = 1; y = x ≈ 2", "compare with '=='")]:
        result = run_cli("eval", "-e", program, "--json")
        assert result.exit_code == EXIT_BAD_INPUT
        error = strict_json(result.stderr)["error"]
        assert error["message"] == "unexpected '≈'" and error["hint"].startswith(hint)


@pytest.mark.parametrize(("line", "message", "column"), [
    ("dL/dw3: -6", "unexpected ':' in a claim's left side", 7),
    ("-1 = dL/dw4", "unexpected '-' where a claim starts", 1),
    ("dL dw4 = 3", "unexpected 'dw4' in a claim's left side", 4),
    ("dL/ = 3", "unexpected '=' in a claim's left side", 5),
    ("dL/dw4 =", "the claim ends before its value", 9),
])
def test_malformed_claim_says_how_a_claim_is_written(tmp_path: Path, line: str, message: str, column: int) -> None:
    answers = write(tmp_path / "answers.txt", f"dL/dw1 = -1\n{line}\n")
    error = _judged_despite(check(NEURON, answers, "--json"), line)
    assert (error["message"], error["line"], error["column"]) == (message, 2, column)
    if "ends" not in message:
        assert error["hint"].startswith("write it as dL/dw1 = <expression>")
    human = check(NEURON, answers).stdout
    assert f"could not be judged: {message}\n  hint: " in human


def test_check_statements_in_the_program_are_judged_with_their_lines(tmp_path: Path) -> None:
    program = write(tmp_path / "hw.eq", NEURON_PROGRAM + "check dL/dw1 = -w3*a\n# a comment\ncheck ∂L/∂a = 2.5\n"
                                                       "check dL/dw3 = -b   # intermediates allowed\n")
    doc = check_json(program, code=EXIT_OK)
    assert [(r["claim"], r["line"]) for r in doc["results"]] == [("dL/dw1 = -w3*a", 6), ("∂L/∂a = 2.5", 8),
                                                                ("dL/dw3 = -b", 9)]


def test_claim_option_replaces_the_programs_check_statements(tmp_path: Path) -> None:
    program = write(tmp_path / "hw.eq", NEURON_PROGRAM + "check dL/dw1 = 12345\n")
    assert check(program).exit_code == EXIT_WRONG  # its own (wrong) claim
    doc = check_json(program, "--claim", "dL/dw1 = -1", code=EXIT_OK)
    assert [r["claim"] for r in doc["results"]] == ["dL/dw1 = -1"]


@pytest.mark.parametrize("body", [
    "if a > 1 {\n  check dL/dw1 = -1\n}",
    "if a > 100 {\n  check dL/dw1 = -1\n}",  # a branch never taken is still refused
    "f(x) {\n  check dL/dw1 = -1\n  return x\n}",
    "while a > 100 {\n  check dL/dw1 = -1\n}",
])
def test_check_statement_inside_a_block_is_a_syntax_error(tmp_path: Path, body: str) -> None:
    program = write(tmp_path / "p.eq", "a = 2; w1 = 3\n" + body + "\nL = a*w1\n")
    for command in ("check", "grad", "eval"):
        body_json = json_error(run_cli(command, program, "--json"))
        assert body_json["type"] == "SyntaxError", body_json
        assert body_json["line"] == 3, body_json  # the check statement's line
        assert "check" in body_json["message"], body_json


def test_check_is_a_keyword(tmp_path: Path) -> None:
    program = write(tmp_path / "p.eq", "check = 3\nL = 2*check\n")
    body = json_error(run_cli("eval", program, "--json"))
    assert body["line"] == 1, body


def test_grad_and_eval_ignore_check_statements(tmp_path: Path) -> None:
    """A program's check statements (even wrong ones) change nothing in grad or eval."""
    plain = write(tmp_path / "plain.eq", NEURON_PROGRAM)
    checked = write(tmp_path / "checked.eq", NEURON_PROGRAM + "check dL/dw1 = 777\ncheck L = 0\ncheck dL/dq = 1\n")
    grads = []
    for path in (plain, checked):
        result = run_cli("grad", path, "--json", "--wrt", "a,w1,w2,w3,w4,d")
        assert result.exit_code == EXIT_OK, result.output
        grads.append(strict_json(result.stdout))
    assert grads[0] == grads[1]
    truth = neuron_gradient()
    assert grads[1]["value"] == 15
    assert grads[1]["grad"] == {name: truth[name] for name in ("a", "w1", "w2", "w3", "w4", "d")}
    values = [strict_json(run_cli("eval", path, "--json").stdout) for path in (plain, checked)]
    assert values[0] == values[1]


def _judged_despite(result: Any, invalid_text: str) -> dict[str, Any]:
    """A claim that does not parse is invalid (exit 1, as in grading; its error on stderr); the other claims are
    still judged."""
    assert result.exit_code == EXIT_WRONG, result.output
    assert "Traceback" not in result.output
    doc = strict_json(result.stdout)
    statuses = {r["claim"]: r["status"] for r in doc["results"]}
    assert statuses == {"dL/dw1 = -1": "right", invalid_text: "invalid"}, statuses
    error = strict_json(result.stderr)["error"]
    assert error == next(r["error"] for r in doc["results"] if r["status"] == "invalid")
    return error


def test_syntax_error_in_answers_file_names_file_line_and_column(tmp_path: Path) -> None:
    answers = write(tmp_path / "answers.txt", "dL/dw1 = -1\n# fine so far\ndL/dw2 = = 3\n")
    body = _judged_despite(run_cli("check", NEURON, answers, "--json"), "dL/dw2 = = 3")
    assert body["type"] == "SyntaxError"
    assert (body["file"], body["line"], body["column"]) == (str(answers), 3, 10)
    human = run_cli("check", NEURON, answers)
    assert "dL/dw1 = -1" in human.stdout and "✓ right" in human.stdout
    assert human.exit_code == EXIT_WRONG  # the student's slip: 1, as in grading
    human.stdout = ""  # the table is there; the error on stderr is the usual located message
    human.exit_code = EXIT_BAD_INPUT  # located_error checks the format of a bad input's message, shared here
    located_error(human, file=str(answers), line=3, column=10, code="dL/dw2 = = 3")


@pytest.mark.parametrize(("text", "column"), [("dL/dw1 = (1 +", 10), ("dL*dw1 = 3", 3), ("dL/dw1 = 2..5", 12)])
def test_syntax_error_in_claim_option(text: str, column: int) -> None:
    body = _judged_despite(run_cli("check", NEURON, "--claim", "dL/dw1 = -1", "--claim", text, "--json"), text)
    assert body["type"] == "SyntaxError"
    assert (body["file"], body["line"], body["column"]) == ("--claim", 1, column)


# --- 2. right, wrong, rounded, truncated --------------------------------------------------------------

def test_every_neuron_gradient_right_as_number_and_wrong_when_off() -> None:
    truth = neuron_gradient()
    texts = [f"dL/d{name} = {value:g}" for name, value in truth.items()]
    doc = check_json(NEURON, *claims(*texts), code=EXIT_OK)
    assert [r["expected"] for r in doc["results"]] == list(truth.values())
    doc = check_json(NEURON, *claims(*[f"dL/d{name} = {value + 3:g}" for name, value in truth.items()]),
                     code=EXIT_WRONG)
    assert doc["passed"] is False and doc["right"] == 0 and doc["total"] == len(truth)


def test_integers_are_exact() -> None:
    """2 and 3 are not 2.5: an integer is compared exactly, never rounded."""
    assert_wrong(one(NEURON, "dL/da = 2"))
    assert_wrong(one(NEURON, "dL/da = 3"))
    assert_right(one(NEURON, "dL/da = 2.5"))
    assert_right(one(NEURON, "dL/da = 2.50"))


SMOOTH_CASES = [
    # program, its output, the derivative's closed form, the value's closed form
    ("x = 0.7; y = sin(x)*x", "y", "x", lambda x: math.cos(x) * x + math.sin(x), lambda x: math.sin(x) * x),
    ("x = 1.3; y = exp(x)/x", "y", "x", lambda x: math.exp(x) / x - math.exp(x) / x**2, lambda x: math.exp(x) / x),
    ("x = 2.2; y = -log(x)*x^2", "y", "x", lambda x: -(2 * x * math.log(x) + x), lambda x: -math.log(x) * x**2),
]


def _digits(value: float, decimals: int, mode: str) -> str:
    """value written with `decimals` decimals: rounded, truncated, or one unit too far from zero."""
    scale = 10**decimals
    if mode == "rounded":
        shown = round(value * scale)
    elif mode == "truncated":
        shown = math.trunc(value * scale)
    else:  # "over": the rounded value, one more unit away from zero: off by more than half a unit, too big
        shown = round(value * scale) + (1 if value > 0 else -1)
    return f"{shown / scale:.{decimals}f}"


@pytest.mark.parametrize("case", SMOOTH_CASES, ids=["sin", "exp", "log"])
def test_numbers_to_the_digits_written(case: tuple[Any, ...]) -> None:
    """Rounded and truncated numbers are right to the digits written; one unit over is wrong."""
    program, of, wrt, derivative, value = case
    x = float(program.split(";")[0].split("=")[1])
    true_derivative, true_value = derivative(x), value(x)
    # the closed forms against NumPy's central difference, so a typo above cannot pass quietly
    h = 1e-6
    numeric = (value(x + h) - value(x - h)) / (2 * h)
    assert abs(numeric - true_derivative) < 1e-6
    texts = []
    for decimals in (1, 2, 3, 4):
        for mode in ("rounded", "truncated"):
            texts.append(f"d{of}/d{wrt} = {_digits(true_derivative, decimals, mode)}")
            texts.append(f"{of} = {_digits(true_value, decimals, mode)}")
    doc = check_json("-e", program, *claims(*texts), code=EXIT_OK)
    assert doc["right"] == len(texts), [r for r in doc["results"] if not r["passed"]]
    assert np.isclose(doc["results"][0]["expected"], true_derivative, rtol=1e-12)
    over = [f"d{of}/d{wrt} = {_digits(true_derivative, d, 'over')}" for d in (1, 2, 3, 4)]
    over += [f"{of} = {_digits(true_value, d, 'over')}" for d in (1, 2, 3, 4)]
    doc = check_json("-e", program, *claims(*over), code=EXIT_WRONG)
    assert doc["right"] == 0, [r for r in doc["results"] if r["passed"]]


def test_rounded_example_from_the_contract() -> None:
    """dy/dx = cos(0.7)·0.7 + sin(0.7) = 1.1796...: 1.18 (rounded), 1.17 (truncated) right; 1.19, 1 wrong."""
    program = "x = 0.7; y = sin(x)*x"
    truth = float(np.cos(0.7) * 0.7 + np.sin(0.7))
    for text in ("1.18", "1.17", "1.2", "1.1", "1.180", "1.1796"):
        verdict = one_expr(program, f"dy/dx = {text}")
        assert_right(verdict)
        assert verdict["kind"] == "number" and math.isclose(verdict["expected"], truth, rel_tol=1e-12)
    for text in ("1.19", "1", "1.3", "1.1797"):
        assert_wrong(one_expr(program, f"dy/dx = {text}"))
    assert_right(one_expr(program, "dy/dx = cos(x)*x + sin(x)"))


def test_one_unit_below_an_exact_value_is_wrong() -> None:
    """∂L/∂w1 = -1 exactly: -0.9 is neither -1 rounded nor truncated (both are -1.0)."""
    assert_wrong(one(NEURON, "dL/dw1 = -0.9"))
    assert_wrong(one(MEAN, "dout/dx = 4.4"))
    assert_wrong(one(NEURON, "dL/dw3 = -5.9"))


def test_one_unit_below_an_exact_value_is_wrong_where_the_float_difference_is_above_a_unit() -> None:
    """2.4 for 2.5 and 1.9 for 2 are wrong (these do not hit the float edge of the bug above)."""
    assert_wrong(one(NEURON, "dL/da = 2.4"))
    assert_wrong(one(NEURON, "dL/dw4 = 1.9"))


def test_rtol_atol_replace_the_digit_rule() -> None:
    program = "x = 0.7; y = sin(x)*x"  # dy/dx = 1.17961
    assert_right(one_expr(program, "dy/dx = 1.1"))  # truncated: right by the digit rule
    assert_wrong(one_expr(program, "dy/dx = 1.1", "--rtol", "0.01"))  # 6.7% off
    assert_right(one_expr(program, "dy/dx = 1.17", "--rtol", "0.01"))  # 0.8% off
    assert_wrong(one_expr(program, "dy/dx = 1.18", "--rtol", "1e-6"))
    assert_right(one(NEURON, "dL/da = 2", "--atol", "0.6"))  # integers exact no more: |2 - 2.5| < 0.6
    assert_wrong(one(NEURON, "dL/da = 2", "--atol", "0.4"))


def test_expression_right_at_the_point_only_is_wrong() -> None:
    """-4*a equals -w4*a at w4 = 4 only: judged wrong, and w4 held at 4 (written as a number) is named;
    5*w1 is 15 at w1 = 3 only, whatever is held, and the nearby point is named."""
    verdict = one(NEURON, "dL/dw2 = -4*a")
    assert_wrong(verdict)
    assert verdict["expected"] == -8 and verdict["got"] == -8
    assert verdict["diagnosis"].startswith("right if w4 is a constant:"), verdict
    assert "declare `const w4 = 4`" in verdict["diagnosis"], verdict
    verdict = one(NEURON, "L = 5*w1")  # 15 at w1 = 3 only
    assert_wrong(verdict)
    assert verdict["diagnosis"].startswith("right at the program's values only"), verdict
    assert_right(one(NEURON, "dL/dw2 = -w4*a"))


def test_value_claims() -> None:
    doc = check_json(NEURON, *claims("L = 15", "b = 6", "c = -2", "d = -5", "L = 10 - d",
                                     "L = 10 - w3*w1*a - w4*w2*a", "b = w1*a"), code=EXIT_OK)
    assert [r["wrt"] for r in doc["results"]] == [None] * 7
    assert [r["expected"] for r in doc["results"]] == [15, 6, -2, -5, 15, 15, 6]
    assert_wrong(one(NEURON, "L = 14"))
    assert_wrong(one(NEURON, "L = 10 + d"))


def test_expression_claims_may_use_intermediates() -> None:
    doc = check_json(NEURON, *claims("dL/dw1 = -w3*a", "dL/dw3 = -b", "dL/dw4 = -c", "dL/db = -w3",
                                     "dL/dc = -w4", "dL/dd = -1", "dL/dL = 1"), code=EXIT_OK)
    assert doc["right"] == 7


def test_claims_at_set_values() -> None:
    """--set a=3: ∂L/∂w1 = -w3·a = -1.5, ∂L/∂a = -(0.5·3 + 4·(-1)) = 2.5, L = 10 - (4.5 - 12) = 17.5."""
    assert_wrong(one(NEURON, "dL/dw1 = -1", "--set", "a=3"))
    assert_right(one(NEURON, "dL/dw1 = -1.5", "--set", "a=3"))
    assert_right(one(NEURON, "dL/dw1 = -w3*a", "--set", "a=3"))
    assert_right(one(NEURON, "L = 17.5", "--set", "a=3"))
    truth = neuron_gradient(a=3, w3=2)
    doc = check_json(NEURON, "--set", "a=3", "--set", "w3=2",
                     *claims(*[f"dL/d{n} = {v:g}" for n, v in truth.items()]), code=EXIT_OK)
    assert doc["right"] == len(truth)


def test_tensor_claims_elementwise_and_broadcast() -> None:
    """mean(3(x + 2)^2) over 4 entries at x = 1: ∂out/∂x = 6(x + 2)/4 = 4.5 everywhere; out = 27."""
    assert_right(one(MEAN, "dout/dx = 4.5"))
    assert_right(one(MEAN, "dout/dx = [[4.5, 4.5], [4.5, 4.5]]"))
    assert_right(one(MEAN, "dout/dx = [4.5, 4.5]"))  # a row broadcast down
    assert_right(one(MEAN, "dout/dx = 1.5*(x + 2)"))
    assert_right(one(MEAN, "out = 27"))
    assert_right(one(MEAN, "dz/dx = 18"))  # z = 3(x + 2)^2 is a tensor: the gradient of sum(z) is 6(x + 2)
    verdict = one(MEAN, "dout/dx = [[4.5, 4.5], [4.5, 4.6]]")
    assert_wrong(verdict)
    assert verdict["expected"] == [[4.5, 4.5], [4.5, 4.5]]
    assert_wrong(one(MEAN, "dout/dx = 4"))


def test_many_tensor_claims_each_keep_their_own_literal() -> None:
    """A run caches tensor literals by syntax node; claims are parsed, judged and freed one by one, and a
    freed claim's memory is reused: each claim must still be compared with its own numbers."""
    written = [f"dout/dx = [[{v}, {v}], [{v}, {v}]]" for v in (4.5, 4.4, 4.5, 1.0, 4.5, 4.6, 4.5)]
    doc = check_json(MEAN, *claims(*written), code=EXIT_WRONG)
    assert [r["status"] for r in doc["results"]] == ["right", "wrong", "right", "wrong", "right", "wrong", "right"]
    run = gradcalc.parse_program("x = 1").run()
    for i in range(50):
        assert run.evaluate(parse_expression(f"[{i}, {i + 1}]"), Source("", "claim")).tolist() == [i, i + 1]


def test_tensor_claims_on_random_tensors() -> None:
    """The tensor toy network (randn leaves): expressions compared elementwise."""
    doc = check_json(NEURON_TENSOR, *claims("dL/dw1 = -w3*a", "dL/da = -(w3*w1 + w4*w2)", "dL/dw3 = -b"),
                     code=EXIT_OK)
    assert doc["right"] == 3
    values = strict_json(run_cli("eval", NEURON_TENSOR, "--json").stdout)["values"]
    a, w3 = np.array(values["a"]), np.array(values["w3"])
    np.testing.assert_allclose(doc["results"][0]["expected"], -w3 * a, rtol=1e-12)
    verdict = one(NEURON_TENSOR, "dL/dw1 = w3*a")
    assert_wrong(verdict)
    assert verdict["diagnosis"].startswith("sign error"), verdict


def test_jacobian_and_gradient_claims_on_a_vector_output() -> None:
    """doubling.eq doubles x 9 times (norm(2^9 x) ≥ 1000 first): y = 512x, Jacobian 512·I, ∇sum(y) = 512."""
    x = np.array([-0.9618, -3.3220, -0.6637])
    k = 1
    while np.linalg.norm(x * 2**k) < 1000:
        k += 1
    assert 2**k == 512
    for text in ("dy/dx = 512*eye(3)", "dy/dx = 512", "dy/dx = [512, 512, 512]",
                 "dy/dx = [[512, 0, 0], [0, 512, 0], [0, 0, 512]]", "y = 512*x"):
        assert_right(one(DOUBLING, text))
    jacobian = one(DOUBLING, "dy/dx = 512*eye(3)")
    assert jacobian["expected"] == (512 * np.eye(3)).tolist()
    assert one(DOUBLING, "dy/dx = 512")["expected"] == [512, 512, 512]
    assert_wrong(one(DOUBLING, "dy/dx = 512*ones(3, 3)"))  # a Jacobian claim: off-diagonals are 0
    assert_wrong(one(DOUBLING, "dy/dx = 1536"))  # not the sum over outputs of ∂y_i/∂x twice over
    assert_wrong(one(DOUBLING, "dy/dx = 256*eye(3)"))


# --- 3. diagnoses --------------------------------------------------------------------------------

def test_sign_error() -> None:
    for text, label in [("dL/dw1 = w3*a", "∂L/∂w1"), ("dL/dw1 = 1", "∂L/∂w1"), ("dL/dd = 1", "∂L/∂d"),
                        ("dL/da = w3*w1 + w4*w2", "∂L/∂a"), ("dL/dw3 = 6", "∂L/∂w3")]:
        verdict = one(NEURON, text)
        assert_wrong(verdict)
        assert verdict["diagnosis"].startswith("sign error:"), verdict
        assert label in verdict["diagnosis"], verdict


@pytest.mark.parametrize(("text", "factor"), [
    ("dL/dw1 = -2*w3*a", "2"), ("dL/dw1 = 2*w3*a", "-2"), ("dL/dw1 = -3.7*w3*a", "3.7"),
    ("dL/dw2 = -w4*a/2", "1/2"), ("dL/dw1 = -2", "2"), ("dL/dw1 = -10", "10"), ("dL/dw1 = -0.5", "1/2"),
    ("dL/dw2 = -80", "10"),
])
def test_factor_off(text: str, factor: str) -> None:
    verdict = one(NEURON, text)
    assert_wrong(verdict)
    label = "∂L/∂" + text.split("/d")[1].split(" ", maxsplit=1)[0]
    assert verdict["diagnosis"] == f"a factor off: the claim is {factor} × {label}", verdict


def test_no_factor_named_for_an_odd_number() -> None:
    """One number cannot tell a factor of 3.7 from any wrong number: no factor diagnosis."""
    verdict = one(NEURON, "dL/dw1 = -3.7")
    assert_wrong(verdict)
    assert "factor" not in verdict.get("diagnosis", ""), verdict


def test_missing_chain_rule_path() -> None:
    """∂L/∂a sums L → d → b → a (-w3·w1 = -1.5) and L → d → c → a (-w4·w2 = 4)."""
    verdict = one(NEURON, "dL/da = -w3*w1")
    assert_wrong(verdict)
    assert verdict["diagnosis"].startswith("a missing chain-rule path:"), verdict
    assert "leaves out L → d → c → a" in verdict["diagnosis"], verdict
    verdict = one(NEURON, "dL/da = -w4*w2")
    assert verdict["diagnosis"].startswith("a missing chain-rule path:"), verdict
    assert "leaves out L → d → b → a" in verdict["diagnosis"], verdict
    verdict = one(NEURON, "dL/da = -1.5")  # a number: the same path left out
    assert "leaves out L → d → c → a" in verdict["diagnosis"], verdict


def test_chain_rule_path_counted_twice() -> None:
    verdict = one(NEURON, "dL/da = -(w3*w1 + 2*w4*w2)")
    assert_wrong(verdict)
    assert verdict["got"] == -(0.5 * 3 + 2 * 4 * -1)
    assert verdict["diagnosis"].startswith("a chain-rule path counted twice:"), verdict
    assert "L → d → c → a" in verdict["diagnosis"], verdict


def _tanh_gradient() -> np.ndarray:
    """∂/∂W sum(tanh(W x)) = outer(1 - tanh(W x)^2, x), by hand."""
    W = np.array([[1.0, 2, 3], [4, 5, 6]])
    x = np.array([1.0, -1, 2])
    return np.outer(1 - np.tanh(W @ x) ** 2, x)


def _literal(matrix: np.ndarray) -> str:
    return "[" + ", ".join("[" + ", ".join(repr(float(v)) for v in row) + "]" for row in matrix) + "]"


def test_matrix_claims_right_transposed_and_misshapen() -> None:
    truth = _tanh_gradient()
    verdict = one_expr(TANH_PROGRAM, f"dL/dW = {_literal(truth)}")
    assert_right(verdict)
    np.testing.assert_allclose(verdict["expected"], truth, rtol=1e-12)
    assert_right(one_expr(TANH_PROGRAM, "dL/dW = outer(1 - tanh(W @ x)^2, x)"))
    for text in (f"dL/dW = {_literal(truth.T)}", "dL/dW = outer(x, 1 - tanh(W @ x)^2)"):
        verdict = one_expr(TANH_PROGRAM, text)
        assert_wrong(verdict)
        assert verdict["diagnosis"].startswith("transposed:"), verdict
        np.testing.assert_allclose(verdict["got"], truth.T, rtol=1e-12)
    for text, shape in (("dL/dW = ones(3, 2)", "(3, 2)"), ("dL/dW = ones(2)", "(2,)"), ("dL/dx = ones(2)", "(2,)")):
        verdict = one_expr(TANH_PROGRAM, text)
        assert_wrong(verdict)
        assert verdict["diagnosis"].startswith(f"the claim has shape {shape}"), verdict
    verdict = one_expr(TANH_PROGRAM, "dL/dW = -outer(1 - tanh(W @ x)^2, x)")
    assert verdict["diagnosis"].startswith("sign error"), verdict
    verdict = one_expr(TANH_PROGRAM, "dL/dW = 2*outer(1 - tanh(W @ x)^2, x)")
    assert verdict["diagnosis"].startswith("a factor off: the claim is 2 ×"), verdict


def test_first_wrong_along_one_chain() -> None:
    """d, b and w1 all wrong: backpropagation carries ∂L/∂d into the others, so d is first."""
    doc = check_json(NEURON, *claims("dL/dw1 = w3*a", "dL/db = w3", "dL/dd = 1", "dL/dw4 = 2"), code=EXIT_WRONG)
    assert doc["first_wrong"] == "∂L/∂d"
    assert doc["right"] == 1 and doc["total"] == 4
    doc = check_json(NEURON, *claims("dL/dw1 = w3*a", "dL/db = w3"), code=EXIT_WRONG)
    assert doc["first_wrong"] == "∂L/∂b"
    doc = check_json(NEURON, *claims("dL/da = 1", "dL/dd = 1"), code=EXIT_WRONG)
    assert doc["first_wrong"] == "∂L/∂d"


@pytest.mark.parametrize("texts", [("dL/dw2 = 8", "dL/dw3 = 6"), ("dL/db = 1", "dL/dc = 1"), ("dL/dw1 = 7",)])
def test_no_first_wrong_for_unrelated_claims(texts: tuple[str, ...]) -> None:
    doc = check_json(NEURON, *claims(*texts), code=EXIT_WRONG)
    assert "first_wrong" not in doc, doc


def _evaluate(text: str, values: dict[str, float]) -> float:
    """A derivative as gradcalc diff prints it (products, sums, powers), evaluated in Python."""
    return float(eval(text.replace("^", "**"), {"__builtins__": {}}, dict(values)))


def test_wrong_claims_carry_the_correct_derivative() -> None:
    """The derivative text is what `gradcalc diff --in-terms-of shortest` prints, and it evaluates to the
    true gradient (b = w1*a: ∂L/∂w3 is -b, shorter than -a*w1)."""
    truth = neuron_gradient()
    doc = check_json(NEURON, *claims("dL/dw1 = 7", "dL/da = -w3*w1", "dL/dw3 = b", "dL/dw4 = 2"), code=EXIT_WRONG)
    wrong = [r for r in doc["results"] if not r["passed"]]
    assert [r["wrt"] for r in wrong] == ["w1", "a", "w3"]
    assert "derivative" not in doc["results"][3]  # right claims carry none
    for result in wrong:
        diff = strict_json(run_cli("diff", NEURON, "--of", "L", "--wrt", result["wrt"], "--in-terms-of", "shortest",
                                   "--json").stdout)
        assert result["derivative"] == diff["derivative"]
        values = {**NEURON_VALUES, "b": 6.0, "c": -2.0, "d": -5.0}
        assert _evaluate(result["derivative"], values) == truth[result["wrt"]]
        assert_right(one(NEURON, f"dL/d{result['wrt']} = {result['derivative']}"))


def test_human_report_shows_verdicts_and_diagnosis() -> None:
    result = check(NEURON, *claims("dL/dw1 = -w3*a", "dL/da = -w3*w1"))
    assert result.exit_code == EXIT_WRONG
    assert "dL/da = -w3*w1" in result.stdout
    assert "missing chain-rule path" in result.stdout
    assert "1 of 2" in result.stdout


# --- 4. invalid claims and exit statuses -------------------------------------------------------------

@pytest.mark.parametrize(("text", "name", "suggestion", "column"), [
    ("dL/dW3 = 1", "W3", "w3", None), ("dL/dw3 = -A*w1", "A", "a", 11), ("dl/dw1 = 1", "l", "L", None),
    ("dL/dw1 = -W3*a", "W3", "w3", 11),
])
def test_unknown_name_is_invalid_with_a_suggestion(text: str, name: str, suggestion: str,
                                                   column: int | None) -> None:
    result = check(NEURON, "--claim", "dL/dw1 = w3*a", "--claim", text, "--json")  # one wrong, one invalid
    assert result.exit_code == EXIT_WRONG
    doc = strict_json(result.stdout)
    assert doc["passed"] is False
    wrong, invalid = doc["results"]
    assert wrong["status"] == "wrong"
    assert invalid["status"] == "invalid" and invalid["passed"] is False and invalid["claim"] == text
    error = invalid["error"]
    assert set(error) >= {"type", "message", "line", "column", "file"}, error
    assert error["type"] == "NameError" and error["file"] == "--claim" and error["line"] == 1
    assert f"'{name}'" in error["message"]
    assert f"'{suggestion}'" in error["message"] + error.get("hint", ""), error
    if column is not None:
        assert error["column"] == column
    assert strict_json(result.stderr) == {"error": error}


@pytest.mark.parametrize(("text", "name"), [
    ("dL/dpi = 0", "pi"), ("dL/de = 0", "e"), ("dL/dπ = 0", "π"), ("dpi/da = 0", "pi"), ("pi = 3.14", "pi"),
    ("d²L/da de = 0", "e"), ("dL/dFalse = 0", "False"),
])
def test_a_constant_is_no_variable_to_differentiate(text: str, name: str) -> None:
    """pi and e are constants, not the program's variables: the claim is invalid, its error points at the claim
    (not at the key's first line), and the other claims are still judged. It was an internal error (KeyError)."""
    result = check(NEURON, "--claim", "dL/dw1 = -w3*a", "--claim", text, "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    right, invalid = strict_json(result.stdout)["results"]
    assert right["status"] == "right"
    assert invalid["status"] == "invalid" and invalid["claim"] == text
    error = invalid["error"]
    assert (error["file"], error["line"], error["column"]) == ("--claim", 1, 1), error
    assert f"'{name}' is a constant" in error["message"] and "not a variable" in error["message"], error
    assert "w1" in error["hint"], error


def test_a_constant_the_program_assigns_is_its_variable() -> None:
    assert_right(one_expr("e = 3; L = e^2", "dL/de = 6"))  # 2e at e = 3


def test_invalid_claim_in_an_answers_file_has_its_line(tmp_path: Path) -> None:
    answers = write(tmp_path / "a.txt", "dL/dw1 = -1\n\ndL/dw2 = -w4*A\n")
    result = check(NEURON, answers, "--json")
    assert result.exit_code == EXIT_WRONG
    doc = strict_json(result.stdout)
    assert [r["status"] for r in doc["results"]] == ["right", "invalid"]
    error = doc["results"][1]["error"]
    assert (error["file"], error["line"], error["column"]) == (str(answers), 3, 14)
    assert doc["results"][1]["line"] == 3
    human = check(NEURON, answers)
    assert human.exit_code == EXIT_WRONG
    assert "error" in human.stderr and "line 3" not in human.stdout.split("\n")[0]


@pytest.mark.parametrize(("texts", "code", "right"), [
    (("dL/dw1 = -1", "dL/da = 2.5"), EXIT_OK, 2),
    (("dL/dw1 = -1", "dL/da = 2"), EXIT_WRONG, 1),
    (("dL/dw1 = -1", "dL/dw9 = 2"), EXIT_WRONG, 1),
    (("dL/dw1 = 1", "dL/dw9 = 2"), EXIT_WRONG, 0),
])
def test_exit_status(texts: tuple[str, ...], code: int, right: int) -> None:
    """0 all right; 1 some wrong or invalid (the student's, as in grading); 2 is for the command's own input."""
    for extra in ((), ("--json",)):
        result = check(NEURON, *claims(*texts), *extra)
        assert result.exit_code == code, result.output
        if extra:
            doc = strict_json(result.stdout)
            assert doc["passed"] is (code == EXIT_OK)
            assert doc["right"] == right and doc["total"] == 2
            if "dL/dw9 = 2" in texts:  # the invalid claim's error, where errors go
                assert strict_json(result.stderr)["error"]["type"] == "NameError"
            else:
                assert result.stderr == ""


def test_json_keys_and_strict_values() -> None:
    """Every result has the contract's keys; infinities and NaN come out as strings."""
    doc = check_json(NEURON, *claims("dL/dw1 = log(0)", "L = 0/0", "dL/da = 2.5"), code=EXIT_WRONG)
    assert set(doc) >= {"passed", "results", "right", "total"}
    for result in doc["results"]:
        assert set(result) >= {"claim", "passed", "expected", "got", "status", "kind", "of", "wrt", "line"}, result
    assert doc["results"][0]["got"] == "-Infinity"
    assert doc["results"][1]["got"] == "NaN"
    assert doc["results"][0]["status"] == doc["results"][1]["status"] == "wrong"


def test_no_claims_is_bad_usage() -> None:
    assert json_error(run_cli("check", NEURON, "--json"))["type"] == "UsageError"


def test_missing_answers_file(tmp_path: Path) -> None:
    body = json_error(run_cli("check", NEURON, tmp_path / "nope.txt", "--json"))
    assert "nope.txt" in body["message"]


# --- 5. grading --------------------------------------------------------------------------------

RIGHT = ["dL/dw1 = -w3*a", "∂L/∂w2 = -8", "check dL/dw3 = -b", "dL/dw4 = 2", "dL/da = 2.5", "L = 15",
         "dL/dd = -1", "dL/db = -w3", "∂L/∂c = -w4", "dL/da = -(w3*w1 + w4*w2)"]
WRONG = ["dL/dw1 = w3*a", "dL/dw2 = -4*a", "dL/da = -w3*w1", "dL/dw3 = -5", "L = 14", "dL/dw4 = 20"]
MODEL = ("# the key's network with other values: a model's own statements are ignored\n"
         "a = 100; w1 = 1; w2 = 1; w3 = 1; w4 = 1\nb = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d\n"
         "check dL/dw1 = -w3*a\ncheck dL/da = 2.5\ncheck ∂L/∂w4 = 2\n")


def _answers(index: int, wrong_at: int | None = None) -> str:
    lines = [RIGHT[(index + k) % len(RIGHT)] for k in range(5)]
    if wrong_at is not None:
        lines[wrong_at] = WRONG[index % len(WRONG)]
    return f"# submission {index}\n" + "\n".join(lines) + "\n"


def _make_class(folder: Path) -> dict[str, dict[str, Any]]:
    """200 submissions in a fixed, shuffled mix; what each should get, by name."""
    kinds = ["right"] * 80 + ["one_wrong"] * 60 + ["syntax"] * 30 + ["empty"] * 20 + ["model"] * 10
    random.Random(2024).shuffle(kinds)
    expected: dict[str, dict[str, Any]] = {}
    for i, kind in enumerate(kinds):
        name = f"s{i:03d}.eq" if kind == "model" else f"s{i:03d}.txt"
        if kind == "right":
            text, want = _answers(i), {"passed": True, "right": 5, "total": 5}
        elif kind == "one_wrong":
            text, want = _answers(i, i % 5), {"passed": False, "right": 4, "total": 5, "wrong_line": 2 + i % 5}
        elif kind == "syntax":  # one claim does not parse: it alone is invalid, the other three are judged
            line = 1 + i % 4
            lines = [RIGHT[k] for k in range(4)]
            lines[line - 1] = "dL/dw1 = = -w3*a"
            text, want = "\n".join(lines) + "\n", {"passed": False, "right": 3, "total": 4, "error_line": line}
        elif kind == "empty":
            text = "" if i % 2 else "# nothing yet\n\n"
            want = {"passed": False, "right": 0, "total": 0}
        else:
            text, want = MODEL, {"passed": True, "right": 3, "total": 3}
        write(folder / name, text)
        expected[name] = {"kind": kind, **want}
    return expected


def test_grading_a_class_of_200(tmp_path: Path) -> None:
    """80 right, 60 with one wrong claim of 5, 30 with a claim that does not parse, 20 empty, 10 models, 2 jobs."""
    folder = tmp_path / "class"
    expected = _make_class(folder)
    start = time.monotonic()
    result = check(NEURON, folder, "--jobs", "2", "--json")
    elapsed = time.monotonic() - start
    assert result.exit_code == EXIT_WRONG, result.stderr
    doc = strict_json(result.stdout)
    assert doc["passed"] is False
    assert doc["totals"] == {"submissions": 200, "passed": 90, "failed": 110, "not_judged": 0, "timed_out": 0,
                             "claims_right": 80 * 5 + 60 * 4 + 30 * 3 + 10 * 3,
                             "claims_total": 80 * 5 + 60 * 5 + 30 * 4 + 10 * 3}
    names = [s["submission"] for s in doc["submissions"]]
    assert names == sorted(expected)
    for sub in doc["submissions"]:
        want = expected[sub["submission"]]
        got = {key: sub[key] for key in ("passed", "right", "total")}
        assert got == {key: want[key] for key in ("passed", "right", "total")}, (want, sub)
        assert len(sub["results"]) == want["total"]
        if want["passed"]:
            assert sub["first_problem"] is None and "error" not in sub, sub
        else:
            assert sub["first_problem"], sub
        if want["kind"] == "one_wrong":
            (bad,) = [r for r in sub["results"] if not r["passed"]]
            assert bad["status"] == "wrong" and bad["line"] == want["wrong_line"], sub
        elif want["kind"] == "syntax":
            (bad,) = [r for r in sub["results"] if not r["passed"]]
            assert bad["status"] == "invalid" and bad["line"] == want["error_line"], sub
            assert bad["error"]["type"] == "SyntaxError" and bad["error"]["line"] == want["error_line"], sub
            assert bad["error"]["file"].endswith(sub["submission"]), sub
            assert "error" not in sub, sub
        elif want["kind"] == "empty":
            assert sub["first_problem"] == "no claims found", sub
        elif want["kind"] == "model":
            assert [r["line"] for r in sub["results"]] == [7, 8, 9]
    assert elapsed < 30, f"grading 200 submissions took {elapsed:.1f} s"


def test_grading_all_right_exits_0_and_skips_hidden_files(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    write(folder / "b.txt", "dL/dw1 = -1\n")
    write(folder / "a" / "x.txt", "dL/da = 2.5\n")
    write(folder / "a" / "deeper" / "y.ans", "∂L/∂w2 = -w4*a\nL = 15\n")
    write(folder / "c.eq", MODEL)
    write(folder / ".hidden.txt", "dL/dw1 = 99\n")  # wrong, but hidden: never graded
    write(folder / ".git" / "config", "not a submission\n")
    write(folder / "a" / ".swap", "garbage ((\n")
    doc = check_json(NEURON, folder, code=EXIT_OK)
    assert doc["passed"] is True
    assert [s["submission"] for s in doc["submissions"]] == ["a/deeper/y.ans", "a/x.txt", "b.txt", "c.eq"]
    assert doc["totals"] == {"submissions": 4, "passed": 4, "failed": 0, "not_judged": 0, "timed_out": 0,
                             "claims_right": 7, "claims_total": 7}
    human = check(NEURON, folder, "-v")
    assert human.exit_code == EXIT_OK
    assert ".hidden" not in human.stdout


def test_two_sections_with_the_same_file_names_are_told_apart(tmp_path: Path) -> None:
    write(tmp_path / "A" / "hw.txt", "dL/dw1 = -1\n")
    write(tmp_path / "B" / "hw.txt", "dL/dw1 = 1\n")
    doc = check_json(NEURON, tmp_path / "A", tmp_path / "B", code=EXIT_WRONG)
    assert [(s["submission"], s["passed"]) for s in doc["submissions"]] == [("A/hw.txt", True), ("B/hw.txt", False)]


def test_grading_several_files_and_an_unreadable_one(tmp_path: Path) -> None:
    """Files given one by one are graded as given; a missing or non-UTF-8 file is reported, not fatal."""
    good = write(tmp_path / "good.txt", "dL/dw1 = -1\n")
    binary = tmp_path / "binary.txt"
    binary.write_bytes(b"\xff\xfe\x00dL/dw1")
    result = check(NEURON, good, binary, tmp_path / "missing.txt", "--json")
    assert result.exit_code == EXIT_WRONG
    doc = strict_json(result.stdout)
    assert [s["submission"] for s in doc["submissions"]] == [str(good), str(binary), str(tmp_path / "missing.txt")]
    assert [s["passed"] for s in doc["submissions"]] == [True, False, False]
    assert "error" in doc["submissions"][1] and "error" in doc["submissions"][2]
    assert doc["totals"]["not_judged"] == 2


def test_grading_rejects_claim_option(tmp_path: Path) -> None:
    write(tmp_path / "s" / "a.txt", "dL/dw1 = -1\n")
    assert json_error(run_cli("check", NEURON, tmp_path / "s", "--claim", "L = 15", "--json"))["type"]


def test_model_file_without_eq_suffix_judges_only_its_check_statements(tmp_path: Path) -> None:
    """A program with check statements is a model, whatever its name: its other statements are ignored."""
    homework = write(tmp_path / "homework.txt", NEURON_PROGRAM.replace("a = 2", "a = 7") +
                     "check dL/dw1 = -w3*a\ncheck dL/da = 2.5\n")
    doc = check_json(NEURON, homework)
    assert [r["claim"] for r in doc["results"]] == ["dL/dw1 = -w3*a", "dL/da = 2.5"]
    assert doc["passed"] is True


SLOW = "dL/dw1 = sum(ones(3000, 3000) @ ones(3000, 3000)) * 0 - w3*a\n"  # 5 products of 2.7e10 flops: seconds


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_timeout_kills_a_slow_submission_and_grades_the_rest(tmp_path: Path, jobs: str) -> None:
    """The slow one (seconds per product) is killed at 0.5 s; the worker is replaced; the next one is judged."""
    folder = tmp_path / "class"
    write(folder / "a_slow.txt", SLOW * 3)
    write(folder / "b_fine.txt", "dL/dw1 = -w3*a\ndL/da = 2.5\n")
    write(folder / "c_wrong.txt", "dL/dw1 = 1\n")
    start = time.monotonic()
    result = check(NEURON, folder, "--timeout", "0.5", "--jobs", jobs, "--json")
    elapsed = time.monotonic() - start
    assert result.exit_code == EXIT_WRONG
    doc = strict_json(result.stdout)
    slow, fine, wrong = doc["submissions"]
    assert slow["submission"] == "a_slow.txt" and slow["passed"] is False
    assert slow["error"]["type"] == "TimeoutError", slow
    assert slow["first_problem"]
    assert (fine["passed"], fine["right"], fine["total"]) == (True, 2, 2)
    assert (wrong["passed"], wrong["right"], wrong["total"]) == (False, 0, 1)
    assert doc["totals"]["timed_out"] == 1 and doc["totals"]["not_judged"] == 1
    assert doc["totals"]["passed"] == 1 and doc["totals"]["failed"] == 1
    assert elapsed < 5, f"took {elapsed:.1f} s: the slow submission was not cut off"


# --- 7. the Python API ------------------------------------------------------------------------

API_CLAIMS = ["dL/dw1 = -w3*a", "dL/dw2 = -4*a", "dL/da = -w3*w1", "dL/da = -(w3*w1 + 2*w4*w2)", "dL/dw3 = 6",
              "dL/dw1 = -2", "L = 15", "dL/dd = 1", "dL/db = w3", "dL/dw4 = 2.0"]


def test_python_api_gives_the_cli_verdicts() -> None:
    run = gradcalc.load(NEURON).run(keep_values=True)
    report = C.Judge(run).report("api", C.parse_claim_option("; ".join(API_CLAIMS)))
    doc = check_json(NEURON, "--claim", "; ".join(API_CLAIMS), code=EXIT_WRONG)
    assert [v.claim for v in report.verdicts] == API_CLAIMS == [r["claim"] for r in doc["results"]]
    for verdict, result in zip(report.verdicts, doc["results"]):
        assert verdict.status == result["status"]
        assert verdict.passed is result["passed"]
        assert verdict.diagnosis == result.get("diagnosis", "")
        assert float(verdict.expected) == result["expected"]
        assert float(verdict.got) == result["got"]
    assert [v.passed for v in report.verdicts] == [True, False, False, False, False, False, True, False, False, True]
    assert report.right == doc["right"] == 3
    assert report.passed is doc["passed"] is False
    assert report.first_wrong == doc["first_wrong"] == "∂L/∂d"


def test_python_api_at_other_values() -> None:
    """Judge of a run with a = 3: ∂L/∂w1 = -1.5."""
    run = gradcalc.load(NEURON).run({"a": 3}, keep_values=True)
    report = C.Judge(run).report("api", C.parse_claim_option("dL/dw1 = -1.5; dL/dw1 = -1"))
    assert [v.status for v in report.verdicts] == ["right", "wrong"]
    assert [float(v.expected) for v in report.verdicts] == [-1.5, -1.5]


def test_ctrl_c_while_grading_stops_every_worker_without_a_traceback(tmp_path: Path) -> None:
    """SIGINT to the whole process group (what a terminal's Ctrl-C sends): exit 130, 'interrupted', no worker left."""
    import os
    import signal
    import subprocess
    import sys


    slow = "dL/dw1 = sum(ones(2000, 2000) @ ones(2000, 2000)) * 0 - w3*a\n" * 6
    for i in range(3):
        (tmp_path / f"s{i}.txt").write_text(slow, encoding="utf-8")
    # SIGINT back to Python's handler first: a shell without job control starts background jobs ignoring it.
    start = ("import signal, sys, runpy; signal.signal(signal.SIGINT, signal.default_int_handler); "
             "sys.argv = ['gradcalc'] + sys.argv[1:]; runpy.run_module('gradcalc', run_name='__main__')")
    process = subprocess.Popen([sys.executable, "-c", start, "check", NEURON, str(tmp_path), "--jobs", "2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    time.sleep(2.0)  # the workers are busy judging
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=30)
    assert process.returncode == 130, err.decode()
    assert "Traceback" not in err.decode() and "interrupted" in err.decode()
    time.sleep(0.2)
    with pytest.raises(ProcessLookupError):
        os.killpg(process.pid, 0)  # no process of the group is left


def test_claims_written_with_typographic_signs() -> None:
    """−, ·, × and ÷ pasted from notes or a PDF are minus, times and division."""
    claims = ["dL/dw1 = −w3·a", "∂L/∂a = −(w3×w1 + w4·w2)", "dL/dw3 = −b÷1", "dL÷dw4 = −c"]
    result = run_cli("check", NEURON, *[f"--claim={c}" for c in claims], "--json")
    assert result.exit_code == EXIT_OK, result.output
    doc = strict_json(result.stdout)
    assert [r["claim"] for r in doc["results"]] == claims
    assert [r["expected"] for r in doc["results"]] == [-1.0, 2.5, -6.0, 2.0]
    notes = ["dL/dw₁ = −w₃⋅a", "∂L/∂w₂ = –w₄·a", "dL/da = √(w1²)⋅(−w3) – w2·w4"]  # subscripts, ⋅, en dash, √, ²
    result = run_cli("check", NEURON, *[f"--claim={c}" for c in notes], "--json")
    assert result.exit_code == EXIT_OK, result.output
    assert [r["expected"] for r in strict_json(result.stdout)["results"]] == [-1.0, -8.0, 2.5]
    wrong = run_cli("check", NEURON, "--claim", "dL/dw1 = w3·a", "--json")
    assert wrong.exit_code == EXIT_WRONG
    assert strict_json(wrong.stdout)["results"][0]["diagnosis"].startswith("sign error")


@pytest.mark.parametrize(("claim", "right"), [
    ("dy/dx = 3x^2 sin(x) + x^3 cos(x)", True),   # 3·x²: the power binds first; a space ends the exponent
    ("dy/dx = 3x²sin(x) + x³cos(x)", True),
    ("dy/dx = x^2(3sin(x) + x cos(x))", True),    # x²·(...): after a power's operand a bracket multiplies too
    ("dy/dx = (3sin(x) + x cos(x))x x", True),
    ("dy/dx = x x(3sin(x) + x cos(x))", True),    # and a variable before a bracket: x·(...), not a call
    ("dy/dx = x^2 sin(x)(3 + x cot(x))", True),
    ("dy/dx = e^(2ln(x))(3sin(x) + x cos(x))", True),
    ("dy/dx = 3x sin(x)", False),                 # a product of the wrong things is judged, not rejected
    ("dy/dx = 1/2 x", False),                     # with a space: (1/2)·x
])
def test_claims_written_by_juxtaposition_multiply(claim: str, right: bool) -> None:
    """Answers as students write them: 3x^2, 2x sin(x), (a + b)(a - b) are products (claims only)."""
    program = "x = 0.7; y = x^3 * sin(x)"
    result = run_cli("check", "-e", program, "--claim", claim, "--json")
    doc = strict_json(result.stdout)
    assert result.exit_code == (EXIT_OK if right else EXIT_WRONG), result.output
    assert doc["results"][0]["claim"] == claim
    x = 0.7
    assert doc["results"][0]["expected"] == pytest.approx(3 * x**2 * math.sin(x) + x**3 * math.cos(x), rel=1e-12)
    if claim == "dy/dx = 1/2 x":
        assert doc["results"][0]["got"] == pytest.approx(x / 2, rel=1e-12)


def test_a_variable_before_a_bracket_multiplies_and_a_power_ends_before_it() -> None:
    """e^x(1 + x), the derivative of x·e^x as answers write it: e^x·(1 + x), not e^(x·(1 + x))."""
    program = "x = 0.5; y = x*exp(x)"
    claims = ["dy/dx = e^x(1 + x)", "dy/dx = (1 + x)e^x", "dy/dx = e^x + x e^x", "dy/dx = e^-x(1 + x)"]
    result = run_cli("check", "-e", program, *[f"--claim={c}" for c in claims], "--json")
    results = strict_json(result.stdout)["results"]
    assert [r["status"] for r in results] == ["right", "right", "right", "wrong"], result.output
    assert results[3]["got"] == pytest.approx(math.exp(-0.5) * 1.5, rel=1e-12)
    user_function = run_cli("check", "-e", "f(t) = t^2\nx = 3; y = f(x)", "--claim", "dy/dx = 2x", "--claim",
                            "y = f(x)", "--json")
    assert user_function.exit_code == EXIT_OK, user_function.output  # a function's call stays a call


def test_juxtaposition_in_check_statements_and_answer_files(tmp_path: Any) -> None:
    answers = tmp_path / "answers.txt"
    answers.write_text("dy/dx = 2x sin(x) + x^2 cos(x)\ndy/dx = 2x sin(x), y = 4 sin(2)\n", encoding="utf-8")
    result = run_cli("check", "-e", "x = 2; y = x^2 * sin(x)", str(answers), "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    assert [r["status"] for r in strict_json(result.stdout)["results"]] == ["right", "wrong", "right"]
    inline = run_cli("check", "-e", "x = 2; y = x^2 * sin(x)\ncheck dy/dx = 2x sin(x) + x^2 cos(x)", "--json")
    assert inline.exit_code == EXIT_OK, inline.output


@pytest.mark.parametrize("claims", [["2x", "3x"], ["1", "2x", "1"], ["1", "1", "1", "2x"], ["2x sin(x)", "3x cos x"]])
def test_every_check_statement_reads_juxtaposition(claims: list[str]) -> None:
    """Each check statement is read as a claim, however many come before it (the second one was read as code)."""
    text = "x = 2\ny = x^2 * sin(x)\n" + "".join(f"check dy/dx = {claim}\n" for claim in claims)
    result = run_cli("check", "-e", text, "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    assert [r["status"] for r in strict_json(result.stdout)["results"]] == ["wrong"] * len(claims)


def test_an_unclosed_bracket_in_a_later_check_statement_is_reported_as_such() -> None:
    result = run_cli("check", "-e", "x = 2; y = x^2\ncheck dy/dx = 2x sin(x)\ncheck dy/dx = 2x ((", "--json")
    assert json_error(result)["message"] == "'(' is never closed"


@pytest.mark.parametrize(("claim", "column", "message", "hint"), [
    ("dy/dx = 1/2x", 12, "'/2x' is ambiguous: is 'x' in the denominator or not?", "write /(2*x...) if it is"),
    ("dy/dx = e^2x", 12, "'^2x' is ambiguous: is 'x' in the exponent or not?", "or ^2*x if it is not"),
    ("dy/dx = x/(2)x", 14, "'/(2)x' is ambiguous", "/(2)*x"),
    ("dy/dx = 3/x(x + 1)", 11, "'/x(...)' is ambiguous", "/(x*(...)) if it is"),
])
def test_ambiguous_juxtaposition_is_an_error_with_both_readings(claim: str, column: int, message: str,
                                                                 hint: str) -> None:
    result = run_cli("check", "-e", "x = 2; y = x^3", "--claim", claim, "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid"
    error = verdict["error"]
    assert message in error["message"] and hint in error["hint"], error
    assert (error["line"], error["column"]) == (1, column), error


def test_programs_do_not_multiply_by_juxtaposition() -> None:
    """A program is code: `2x` there is a typo to point at, not a product to guess."""
    result = run_cli("eval", "-e", "x = 3; y = 2x", "--json")
    assert json_error(result)["message"] == "missing operator before 'x'"


def test_ln_is_the_natural_logarithm_in_claims_and_programs() -> None:
    result = run_cli("check", "-e", "x = 3; y = ln(x)^2", "--claim", "dy/dx = 2*ln(x)/x", "--json")
    assert result.exit_code == EXIT_OK, result.output
    assert strict_json(result.stdout)["results"][0]["expected"] == pytest.approx(2 * math.log(3) / 3, rel=1e-12)


# --- any derivative, as diff prints it, is judged right; any change to it, wrong ----------------------------

def _inlined(derivative: Any) -> str:
    """The derivative's text with its shared parts (t1 = ...) written in place: one expression."""
    text = derivative.text
    for name, body, _ in reversed(derivative.where):
        text = re.sub(rf"\b{name}\b", f"({body})", text)
    return text


def _random_case(case: Any) -> tuple[str, list[str], Any, list[Any]]:
    """A random program's text, names, run (at its first point) and derivatives; a case that cannot run is skipped."""
    text, names, points = case
    values = {name: np.asarray(v, dtype=float) for name, v in points[0].items()}
    try:
        run = gradcalc.parse_program(text).run(values, keep_values=True)
        value = float(run.value("f"))
        derivatives = run.diff("f", names)
    except gradcalc.GradcalcError:
        assume(False)
    assume(math.isfinite(value) and abs(value) < 1e6)
    return text, names, run, derivatives


@given(scalar_cases())
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_programs_their_derivatives_are_right_and_perturbed_ones_wrong(case: Any) -> None:
    """For a random smooth f, `df/dx = <its derivative>` holds as an identity; `... * 1.001` and `... + 0.01·x`
    do not. The derivative text comes from diff; the verdict from evaluating both sides at several points."""
    text, names, run, derivatives = _random_case(case)
    judge = C.Judge(run)
    for name, derivative in zip(names, derivatives):
        exact = _inlined(derivative)
        gradient = float(run.grad("f", [name]).grads[name])
        assume(math.isfinite(gradient) and abs(gradient) < 1e6)
        # The shift is relative to the derivative's size: 262144 + 0.01*x is 262144 to a relative 1e-6.
        shift = f"{0.01 * max(1.0, abs(gradient)):.6g}*{name}"
        claims = f"df/d{name} = {exact}\ndf/d{name} = ({exact}) * 1.001 + 0.01\ndf/d{name} = {exact} + {shift}"
        report = judge.report("random", (C.answers(claims, C.Source(claims, "answers.txt")),
                                         C.Source(claims, "answers.txt")))
        right, scaled, shifted = report.verdicts
        assert right.status == "right", (text, name, exact, right)
        assert scaled.status == "wrong", (text, name, scaled)
        assert shifted.status == "wrong", (text, name, shifted)


MLP_LAYER = ("X = [[1, 2], [3, 4], [5, 6]]; W = [[0.5, -1], [2, 1]]; b = [0.1, 0.2]; "
             "H = tanh(X @ W + b); L = sum(H)")


def test_a_batch_gradient_not_summed_and_a_square_matrix_transposed_are_diagnosed() -> None:
    X, W, b = np.array([[1, 2], [3, 4], [5, 6.0]]), np.array([[0.5, -1], [2, 1.0]]), np.array([0.1, 0.2])
    local = 1 - np.tanh(X @ W + b) ** 2  # ∂L/∂(XW + b), one row per example
    doc = check_json("-e", MLP_LAYER, *claims("dL/db = 1 - H^2", "dL/dW = (1 - H^2).T @ X",
                                              "dL/db = sum(1 - H^2, axis=0)", "dL/dW = X.T @ (1 - H^2)"),
                     code=EXIT_WRONG)
    per_example, transposed, bias, weights = doc["results"]
    assert per_example["diagnosis"].startswith("not summed: summed over axis 0"), per_example
    np.testing.assert_allclose(per_example["expected"], local.sum(axis=0), rtol=1e-12)
    assert transposed["diagnosis"].startswith("transposed:"), transposed
    np.testing.assert_allclose(transposed["expected"], X.T @ local, rtol=1e-12)
    assert bias["status"] == "right" and weights["status"] == "right"
    assert per_example["derivative"] == "sum(1 - H^2, axis=0)"  # in the program's words: H = tanh(...)


def test_a_batch_gradient_not_averaged_is_diagnosed_where_the_loss_is_a_mean() -> None:
    key = ("X = [[1.0, 2], [0.5, -1], [2, 0], [-1, 1]]; w = [0.3, -0.2]; b = 0.1; y = [1, 0, 1, 0]; "
           "p = sigmoid(X @ w + b); L = -mean(y*log(p) + (1 - y)*log(1 - p))")
    doc = check_json("-e", key, *claims("dL/db = sigmoid(X@w + b) - y", "dL/db = mean(p - y)"), code=EXIT_WRONG)
    per_example, right = doc["results"]
    assert per_example["diagnosis"].startswith("not averaged: averaged over axis 0"), per_example
    X, w, y = np.array([[1.0, 2], [0.5, -1], [2, 0], [-1, 1]]), np.array([0.3, -0.2]), np.array([1, 0, 1, 0])
    np.testing.assert_allclose(right["expected"], np.mean(1 / (1 + np.exp(-(X @ w + 0.1))) - y), rtol=1e-12)
    assert right["status"] == "right", right


def test_a_number_off_in_its_last_digit_is_told_the_value_to_those_digits() -> None:
    doc = check_json("-e", "x = 0.3932; y = x^2/2",
                     *claims("dy/dx = 0.40", "dy/dx = 0.38", "dy/dx = 0.9", "dy/dx = 0.7", "dy/dx = -0.4"),
                     code=EXIT_WRONG)
    two_places, low, far, doubled, negative = doc["results"]
    assert two_places["diagnosis"].endswith("the value is 0.39"), two_places  # 0.3932 to 2 places
    assert low["diagnosis"].endswith("the value is 0.39"), low
    assert "diagnosis" not in far  # five units off is no slip of the last digit
    # 0.7 is 2 × 0.3932 = 0.79 truncated to one digit: too coarse to call it a path counted twice (y has one path)
    assert "diagnosis" not in doubled, doubled
    assert negative["diagnosis"].startswith("sign error"), negative


@pytest.mark.parametrize("notation", ["{m}e{k}", "{m}*10^{k}", "{m} × 10^{k}", "{m}·10^({k})", r"{m} \times 10^{{{k}}}",
                                      "{m}×10{sup}"])
def test_scientific_notation_is_a_number_to_its_digits(notation: str) -> None:
    """8.07×10² is 807 to 3 significant digits, as 8.07e2 is; one unit over in the mantissa is wrong."""
    superscripts = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
    for x, (right, over, k) in {3.0: ("8.07", "8.08", "2"), -3.0: ("4.96", "4.97", "-3")}.items():
        truth = 2 * math.exp(2 * x)  # 806.858 and 0.0049575
        texts = [notation.format(m=m, k=k, sup=k.translate(superscripts)) for m in (right, over)]
        doc = check_json("-e", f"x = {x}; y = exp(2*x)", *claims(*(f"dy/dx = {t}" for t in texts)), code=EXIT_WRONG)
        good, bad = doc["results"]
        assert good["status"] == "right" and "rounded to 3 significant digits" in good["note"], good
        assert bad["status"] == "wrong", bad
        assert good["expected"] == pytest.approx(truth, rel=1e-12)


def test_an_integer_near_the_value_is_told_it_means_exactly_that() -> None:
    doc = check_json("-e", "x = 3; y = exp(2*x)", *claims("dy/dx = 807", "dy/dx = 807.", "dy/dx = 806"),
                     code=EXIT_WRONG)
    exact, rounded, short = doc["results"]
    assert exact["status"] == "wrong" and exact["diagnosis"].startswith("an integer means exactly 807"), exact
    assert "807. or 8.07e2" in exact["diagnosis"], exact
    assert rounded["status"] == "right", rounded
    assert short["status"] == "wrong" and "diagnosis" not in short, short


def test_many_claims_that_fail_leave_the_next_one_judged() -> None:
    """Each failed claim gives back its nesting depth: claim 301 is judged, not refused as 'nested too deep'."""
    run = gradcalc.load(NEURON).run(keep_values=True)
    text = "dL/dw1 = -w3*foo(a)\n" * 300 + "dL/dw1 = -(w3*(a))\n"
    source = C.Source(text, "answers.txt")
    report = C.Judge(run).report("many", (C.answers(text, source), source))
    assert [v.status for v in report.verdicts[:300]] == ["invalid"] * 300
    assert "unknown function 'foo'" in report.verdicts[0].error["message"]
    assert report.verdicts[-1].status == "right", report.verdicts[-1]


def _latex_inlined(derivative: Any) -> str:
    """The derivative's LaTeX with its shared parts (t_{1} = ...) written in place: one expression."""
    text = derivative.latex
    for name, _, body in reversed(derivative.where):
        shown = re.escape(name[0]) + r"_\{" + re.escape(name[1:]) + r"\}" if name[1:].isdigit() else re.escape(name)
        text = re.sub(shown, lambda _, body=body: rf"\left({body}\right)", text)
    return text


@given(scalar_cases())
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_diff_s_latex_read_back_as_a_claim_is_right(case: Any) -> None:
    """What `diff --latex` prints, pasted as a claim (\\frac{\\partial f}{\\partial x} = ...), is judged right,
    and the same LaTeX times 1.001 wrong: claims read LaTeX as diff writes it (and as students type it)."""
    text, names, run, derivatives = _random_case(case)
    judge = C.Judge(run)
    for name, derivative in zip(names, derivatives):
        gradient = float(run.grad("f", [name]).grads[name])
        assume(math.isfinite(gradient) and 1e-6 < abs(gradient) < 1e6)
        latex = _latex_inlined(derivative)
        claims = rf"\frac{{\partial f}}{{\partial {name}}} = {latex}" + "\n" + \
            rf"\frac{{\partial f}}{{\partial {name}}} = 1.001 \cdot \left({latex}\right)"
        source = C.Source(claims, "answers.txt")
        right, scaled = judge.report("latex", (C.answers(claims, source), source)).verdicts
        assert right.status == "right", (text, name, latex, right)
        assert scaled.status == "wrong", (text, name, latex, scaled)


@pytest.mark.parametrize(("claim", "expected"), [
    (r"\frac{dy}{dx} = 2x\sin(x)+x^{2}\cos x", "right"),
    (r"\frac{\mathrm{d}y}{\mathrm{d}x} = x\left(2\sin x + x\cos x\right)", "right"),
    (r"\frac{\partial y}{\partial x} = 2 x \sin{\left(x \right)} + x^{2} \cos{\left(x \right)}", "right"),  # SymPy's
    (r"dy/dx = \frac{x^{2}}{\csc x} \cdot \left(\frac{2}{x} + \cot x\right)", "right"),
    (r"\frac{dy}{dx} = 2x\sin x", "wrong"),
    (r"\frac{dy}{dx} = x \left(2 \sin{\left(x \right)} + x \cos{\left(x \right)}\right) + "
     r"x^{2} \left(\sin^{2}{\left(x \right)} + \cos^{2}(x) - 1\right)", "right"),  # SymPy's powers of functions
])
def test_claims_in_latex(claim: str, expected: str) -> None:
    result = run_cli("check", "-e", "x = 0.7; y = x^2 * sin(x)", "--claim", claim, "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == expected, result.output
    assert verdict["claim"] == claim  # shown as written
    assert verdict["expected"] == pytest.approx(2 * 0.7 * math.sin(0.7) + 0.49 * math.cos(0.7), rel=1e-12)


@pytest.mark.parametrize(("claim", "column", "message"), [
    (r"\frac{dy}{dx} = \foo{x}", 17, r"unknown LaTeX command '\foo'"),
    (r"\frac{dy}{dx} = \frac{1}{2 x", 25, "'{' is never closed"),
    (r"\frac{dy}{dx} = x^{2} + \begin{vmatrix} 1 \end{vmatrix}", 25, "a LaTeX environment claims do not read"),
    (r"\frac{dy}{dx} = \begin{bmatrix} 1 & 2", 17, r"\begin{bmatrix} is never ended"),
    (r"\frac{dy}{dx} = 2 \cdot z", 25, "the claim names 'z'"),  # a place after the reading, in the LaTeX
    (r"\frac{dy}{dx} = \cos^{n} x", 26, r"the power of \cos needs its argument in brackets"),  # ^2 x is read
])
def test_latex_claim_errors_point_into_the_latex(claim: str, column: int, message: str) -> None:
    result = run_cli("check", "-e", "x = 0.7; y = x^2 * sin(x)", "--claim", claim, "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid", result.output
    assert message in verdict["error"]["message"], verdict
    assert verdict["error"]["column"] == column, verdict


def test_latex_claims_about_the_neuron_show_as_written() -> None:
    claims = [r"\frac{\partial L}{\partial w_{1}} = -a \cdot w_{3}", r"\frac{\partial L}{\partial w_2} = -a w_4",
              r"\frac{\partial L}{\partial a} = -\left(w_{1} w_{3} + w_{2} w_{4}\right)"]
    result = run_cli("check", NEURON, *[f"--claim={c}" for c in claims], "--json")
    assert result.exit_code == EXIT_OK, result.output
    doc = strict_json(result.stdout)
    assert [r["claim"] for r in doc["results"]] == claims
    assert [r["expected"] for r in doc["results"]] == [-1.0, -8.0, 2.5]


SECOND = "a = 0.7; b = 1.3; L = a^2*b + sin(a*b)"


@pytest.mark.parametrize(("claim", "expected"), [
    ("∂²L/∂a² = 2b - b^2 sin(a b)", 2 * 1.3 - 1.3**2 * math.sin(0.91)),
    ("d²L/da² = 2b - b²sin(ab)", 2 * 1.3 - 1.3**2 * math.sin(0.91)),
    ("d^2L/da^2 = 2*b - b^2*sin(a*b)", 2 * 1.3 - 1.3**2 * math.sin(0.91)),
    ("d2L/da2 = 2b - b^2 sin(ab)", 2 * 1.3 - 1.3**2 * math.sin(0.91)),
    ("∂²L/∂a∂b = 2a + cos(ab) - ab sin(ab)", 2 * 0.7 + math.cos(0.91) - 0.91 * math.sin(0.91)),
    ("∂^2 L/∂b ∂a = 2a + cos(ab) - ab sin(ab)", 2 * 0.7 + math.cos(0.91) - 0.91 * math.sin(0.91)),
    ("d²L/da db = 2a + cos(ab) - ab sin(ab)", 2 * 0.7 + math.cos(0.91) - 0.91 * math.sin(0.91)),
    (r"\frac{\partial^{2} L}{\partial b^{2}} = - a^{2} \sin{\left(a b \right)}", -0.49 * math.sin(0.91)),
    (r"\frac{\partial^2 L}{\partial a \partial b} = 2 a - a b \sin(a b) + \cos(a b)",
     2 * 0.7 + math.cos(0.91) - 0.91 * math.sin(0.91)),
])
def test_second_derivative_claims(claim: str, expected: float) -> None:
    """Second derivatives as courses write them, judged against the Hessian (closed forms here)."""
    result = run_cli("check", "-e", SECOND, "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["expected"] == pytest.approx(expected, rel=1e-12)
    assert verdict["claim"] == claim
    assert verdict["wrt"] in (["a", "a"], ["a", "b"], ["b", "a"], ["b", "b"])


def test_a_wrong_second_derivative_gets_the_right_one_and_a_diagnosis() -> None:
    result = run_cli("check", "-e", SECOND, "--claim", "∂²L/∂a² = b - b²sin(ab)/2")
    assert result.exit_code == EXIT_WRONG, result.output
    assert "a factor off: the claim is 1/2 × ∂²L/∂a²" in result.stdout
    assert "correct: ∂²L/∂a² =" in result.stdout and "sin(a*b)" in result.stdout


@pytest.mark.parametrize(("claim", "message"), [
    ("d³L/da³ = 0", "a derivative of order 3"),
    ("d2L/da = 0", "'d2L' is a second derivative, but 'da' is not of second order"),
])
def test_unsupported_derivative_orders_are_errors(claim: str, message: str) -> None:
    result = run_cli("check", "-e", SECOND, "--claim", claim, "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid" and message in verdict["error"]["message"], verdict


@pytest.mark.parametrize("key", [
    "z = [1.0, 2.0, 0.5]; t = [0, 1, 0]; p = softmax(z); L = -sum(t*log(p))",
    "z = [[1.0, 2.0, 0.5], [0.1, -1, 2]]; t = [[0, 1, 0], [0.2, 0.3, 0.5]]; p = softmax(z, axis=1); "
    "L = -sum(t*log(p))",
])
def test_softmax_cross_entropy_s_textbook_gradient_is_right(key: str) -> None:
    """p - t holds where t is a distribution: the target is moved to other distributions, not off them."""
    result = run_cli("check", "-e", key, "--claim", "dL/dz = p - t", "--claim", "dL/dz = t - p", "--claim",
                     "dL/dz = p", "--json")
    right, sign, wrong = strict_json(result.stdout)["results"]
    assert right["status"] == "right", right
    assert sign["status"] == "wrong" and "sign" in sign["diagnosis"], sign
    assert wrong["status"] == "wrong", wrong


@pytest.mark.parametrize(("claim", "message", "hint"), [
    ("d²f/dxdz = 1", "a second derivative's bottom is read as one name", "d²f/dx dz"),
    ("f'(x) = 2xy", "unexpected character", "dy/dx = ..."),
])
def test_derivative_notations_gradcalc_does_not_read_say_how_to_write_them(claim: str, message: str,
                                                                           hint: str) -> None:
    result = run_cli("check", "-e", "x = 1.0; y = 2.0; z = 3.0; f = x*y*z", "--claim", claim, "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid", verdict
    assert message in verdict["error"]["message"] and hint in verdict["error"]["hint"], verdict["error"]


@pytest.mark.parametrize("claim", [r"$\frac{dL}{da} = 2.5$", r"$$\frac{\partial L}{\partial w_1} = -w_3 a$$",
                                   r"\(\frac{dL}{da} = 2.5\)", r"\[ \frac{\partial L}{\partial a} = 2.5 \]"])
def test_latex_math_delimiters_are_read_past(claim: str) -> None:
    """$...$, $$...$$, \\(...\\) and \\[...\\] as pasted from a notebook: the claim inside is judged."""
    result = run_cli("check", NEURON, "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["expected"] in (2.5, -1.0) and "$" not in verdict["claim"], verdict


def test_a_decimal_comma_is_told_to_be_a_dot() -> None:
    result = run_cli("check", NEURON, "--claim", "dL/da = 2,5", "--json")
    error = strict_json(result.stdout)["results"][0]["error"]
    assert error["message"] == "'2,5': a comma separates claims" and "2.5" in error["hint"], error


def test_names_side_by_side_are_a_product_when_they_split_one_way_only() -> None:
    """2ab is 2·a·b where a and b are variables and ab is not; with variables x, xy and y, xyy splits two ways."""
    result = run_cli("check", "-e", SECOND, "--claim", "dL/da = 2ab + b cos(ab)", "--json")
    assert result.exit_code == EXIT_OK, result.output
    two_ways = run_cli("check", "-e", "x = 1; xy = 2; y = 3; z = x*y*y + xy", "--claim", "dz/dx = yy",
                       "--claim", "dz/dy = xyy", "--json")
    first, second = strict_json(two_ways.stdout)["results"]
    assert first["status"] == "right", first  # yy: y·y, one way
    assert second["status"] == "invalid" and "'xyy'" in second["error"]["message"], second


def test_a_program_s_own_function_is_called_not_split() -> None:
    """With variables a, b and a function ab, ab(x) is the call and xab(x) is x·ab(x)."""
    key = "ab(t) = t^2; a = 2; b = 3; x = 1.5; y = ab(x)*a*b"
    doc = check_json("-e", key, *claims("y = ab(x)ab", "y = xab(x)ab/x", "y = ab(x + 1)ab"), code=EXIT_WRONG)
    call, after, wrong = doc["results"]
    assert call["status"] == after["status"] == "right" and call["got"] == after["got"] == 13.5, (call, after)
    assert wrong["got"] == pytest.approx(2.5**2 * 6), wrong


@pytest.mark.parametrize(("claim", "expected"), [
    ("df/dx = xy^2", lambda x, y: x * y**2),  # a power written right after is the last factor's, as printed
    ("df/dx = xy²", lambda x, y: x * y**2),
    (r"\frac{df}{dx} = xy^{2}", lambda x, y: x * y**2),
    ("df/dx = (xy)^2", lambda x, y: (x * y) ** 2),
    ("df/dx = x²y²", lambda x, y: x**2 * y**2),
    ("df/dx = 2xy(x + y)^2", lambda x, y: 2 * x * y * (x + y) ** 2),
    ("df/dx = x(1 + x)^2", lambda x, y: x * (1 + x) ** 2),
    ("df/dx = xsin(y)", lambda x, y: x * math.sin(y)),  # variables, then a function's call
    ("df/dx = 2xsin(x)^2", lambda x, y: 2 * x * math.sin(x) ** 2),
    ("df/dx = -2xe^{-x^2}", lambda x, y: -2 * x * math.exp(-x * x)),
    ("df/dx = xσ(y)", lambda x, y: x / (1 + math.exp(-y))),
])
def test_names_side_by_side_take_powers_and_calls_as_written(claim: str, expected: Callable[[float, float], float]) \
        -> None:
    """Each reading's value, and it is an identity only where it is the derivative (f' = x²y², the answer)."""
    result = run_cli("check", "-e", "x = 1.5; y = 0.7; f = x^3*y^2/3", "--claim", claim, "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["got"] == pytest.approx(expected(1.5, 0.7), rel=1e-12), verdict
    assert verdict["status"] == ("right" if claim in ("df/dx = (xy)^2", "df/dx = x²y²") else "wrong"), verdict


@pytest.mark.parametrize("claim", ["dy/dx = 1 - tanh²(x)", "dy/dx = 1 - tanh^2(x)", "dy/dx = 1 - tanh² x",
                                   "dy/dx = sech²x", "dy/dx = sech^2 x", "dy/dx = 1/cosh²(x)",
                                   r"\frac{dy}{dx} = 1 - \tanh^{2}{\left(x \right)}"])
def test_a_function_s_power_is_the_power_of_its_value(claim: str) -> None:
    """tanh²x is (tanh x)², as derivatives are written (d tanh x = sech²x dx = (1 - tanh²x) dx)."""
    result = run_cli("check", "-e", "x = 0.3; y = tanh(x)", "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["got"] == pytest.approx(1 / math.cosh(0.3) ** 2, rel=1e-12)


TENSOR_KEY = "x = [0.5, -1]; W = [[1, 2], [3, 4]]; L = sum([1, 2]*x) + sum([[1, 2], [3, 4]] * W * W)"


@pytest.mark.parametrize("claim", [
    r"\frac{\partial L}{\partial x} = \begin{bmatrix} 1 & 2 \end{bmatrix}",
    r"\frac{\partial L}{\partial x} = \begin{pmatrix} 1 \\ 2 \end{pmatrix}",  # a column is a vector too
    r"\frac{\partial L}{\partial W} = 2\begin{bmatrix} 1 & 4 \\ 9 & 16 \end{bmatrix}",
    r"\frac{\partial L}{\partial W} = 2 W \odot \begin{bmatrix}1 & 2 \\ 3 & 4\end{bmatrix}",  # diff --latex
    "dL/dW = 2W ⊙ [[1, 2], [3, 4]]",
])
def test_latex_matrices_in_claims(claim: str) -> None:
    result = run_cli("check", "-e", TENSOR_KEY, "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["claim"] == claim
    expected = [1.0, 2.0] if "partial x" in claim else [[2.0, 8.0], [18.0, 32.0]]
    assert verdict["got"] == expected


LAYER_KEY = ("W = [[1.0, 2], [3, 4], [5, 6]]; x = [0.5, -1]; b = [0.1, 0.2, 0.3]; X = [[1.0, 2], [3, -1], [0.5, 0.5]]; "
             "h = tanh(W @ x + b); Y = X @ W.T; L = sum(h^2) + sum(Y^2)/2")


INDEX_KEY = "x = [1.0, 2, 3]; W = [[1.0, 2], [3, 4]]; L = x[1]*sum(x) + W[1, 0]*sum(W)"


@pytest.mark.parametrize("key", [TENSOR_KEY, LAYER_KEY, INDEX_KEY])
def test_diff_s_latex_of_tensor_derivatives_read_back_as_claims(key: str) -> None:
    """diff --latex writes W x for a matrix product, δ xᵀ for an outer one, ⊙ for an elementwise one of
    matrices, \\sum x and one-hot matrices; read back as claims, each is the derivative."""
    names = {TENSOR_KEY: ["x", "W"], LAYER_KEY: ["W", "x", "b", "X"], INDEX_KEY: ["x", "W"]}[key]
    for name in names:
        doc = json_ok("diff", "-e", key, "--wrt", name, "--latex")
        latex = doc["latex"]
        for placeholder, text in doc.get("where", {}).items():  # t_{1} = tanh(...): written out in full
            latex = latex.replace(f"{placeholder[0]}_{{{placeholder[1:]}}}", rf"\left({text}\right)")
        claim = rf"\frac{{\partial L}}{{\partial {name}}} = {latex}"
        result = run_cli("check", "-e", key, "--claim", claim, "--json")
        assert result.exit_code == EXIT_OK, (claim, result.output)


@pytest.mark.parametrize(("claim", "expected"), [
    ("dL/dW = 2h(1 - h^2) x^T + Y^T X", lambda v: np.outer(2 * v["h"] * (1 - v["h"] ** 2), v["x"]) + v["Y"].T @ v["X"]),
    ("dL/dW = 2(h - h³)xᵀ + Yᵀ X", lambda v: np.outer(2 * (v["h"] - v["h"] ** 3), v["x"]) + v["Y"].T @ v["X"]),
    (r"\frac{\partial L}{\partial x} = W^{T} \left(2 h \odot (1 - h^{2})\right)",
     lambda v: v["W"].T @ (2 * v["h"] * (1 - v["h"] ** 2))),
    ("dL/dx = W^T (2h(1 - h^2))", lambda v: v["W"].T @ (2 * v["h"] * (1 - v["h"] ** 2))),
    ("dL/dX = Y W", lambda v: v["Y"] @ v["W"]),
    ("dL/dX = Yᵀ W", lambda v: v["Y"].T @ v["W"]),  # a transposed factor: wrong
    ("dL/db = 2h(1 - h²)", lambda v: 2 * v["h"] * (1 - v["h"] ** 2)),  # vectors side by side: elementwise
    ("L = hᵀh + 1/2 sum(Y ⊙ Y)", lambda v: v["h"] @ v["h"] + (v["Y"] ** 2).sum() / 2),  # xᵀy: the dot product
])
def test_products_side_by_side_are_math_s_products(claim: str, expected: Callable[[dict[str, Any]], Any]) -> None:
    """W x is a matrix product, δ xᵀ an outer product, xᵀ y a dot product, 2x and vectors elementwise."""
    run = gradcalc.parse_program(LAYER_KEY).run()
    values = {name: run.value(name) for name in ("W", "x", "X", "h", "Y")}
    result = run_cli("check", "-e", LAYER_KEY, "--claim", claim, "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    np.testing.assert_allclose(verdict["got"], expected(values), rtol=1e-12)
    assert verdict["status"] == ("wrong" if "Yᵀ W" in claim else "right"), verdict


def test_subscripts_typed_with_an_underscore_name_the_program_s_variables() -> None:
    """w_1 is w1 where the program has w1 and no w_1 (as typed in a plain-text answer), in both sides of a claim."""
    claims = ["dL/dw1 = -a w_3", "dL/dw_2 = -a*w_4", "∂L/∂w_4 = -c"]
    result = run_cli("check", NEURON, *[f"--claim={c}" for c in claims], "--json")
    assert result.exit_code == EXIT_OK, result.output
    assert [r["expected"] for r in strict_json(result.stdout)["results"]] == [-1.0, -8.0, 2.0]
    # a program with both names keeps them apart
    both = run_cli("check", "-e", "x_1 = 2; x1 = 3; y = x_1*x1", "--claim", "dy/dx_1 = x1", "--claim", "dy/dx1 = x_1",
                   "--json")
    assert both.exit_code == EXIT_OK, both.output


def test_a_long_flat_sum_in_a_claim_is_judged() -> None:
    """20,000 terms side by side are no nesting: judged right (they were a RecursionError, exit 3)."""
    claim = "dL/dw1 = -w3*a" + " + 0" * 20_000
    result = run_cli("check", NEURON, "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output[:500]
    assert strict_json(result.stdout)["results"][0]["expected"] == -1.0


def test_a_byte_order_mark_is_no_character(tmp_path: Path) -> None:
    """Notepad starts UTF-8 files with a byte-order mark: answers and programs read as if it were not there."""
    answers = tmp_path / "answers.txt"
    answers.write_bytes("\ufeffdL/dw1 = -w3*a\r\ndL/da = 2.5\r\n".encode())
    result = run_cli("check", NEURON, str(answers), "--json")
    assert result.exit_code == EXIT_OK, result.output
    model = tmp_path / "model.eq"
    model.write_bytes(("\ufeff" + Path(NEURON).read_text(encoding="utf-8")).encode())
    assert json_ok("grad", str(model))["grad"]["w1"] == -1


def test_lines_ended_by_a_lone_carriage_return_are_lines(tmp_path: Path) -> None:
    """Classic Mac OS ends lines with \\r alone: they were read as one line, two right answers as one wrong claim."""
    answers = tmp_path / "answers.txt"
    answers.write_bytes(b"dL/dw1 = -w3*a\rdL/da = 2.5\r")
    result = run_cli("check", NEURON, str(answers), "--json")
    assert result.exit_code == EXIT_OK, result.output
    assert [(r["claim"], r["line"], r["status"]) for r in strict_json(result.stdout)["results"]] == [
        ("dL/dw1 = -w3*a", 1, "right"), ("dL/da = 2.5", 2, "right")]
    model = tmp_path / "model.eq"
    model.write_bytes(Path(NEURON).read_bytes().replace(b"\n", b"\r"))
    assert json_ok("grad", str(model))["grad"]["w1"] == -1


def test_answers_from_standard_input() -> None:
    result = run_cli("check", NEURON, "-", "--json", input="dL/dw1 = -w3*a\ndL/da = 2\n")
    assert result.exit_code == EXIT_WRONG, result.output
    assert [r["status"] for r in strict_json(result.stdout)["results"]] == ["right", "wrong"]
    twice = run_cli("check", "-", "-", input="a = 1\n")
    assert twice.exit_code == EXIT_BAD_INPUT and "read once" in twice.stderr


def test_a_derivative_written_upside_down_is_diagnosed() -> None:
    doc = check_json(NEURON, *claims("dw1/dL = -w3*a", "dw1/dL = -1", "da/dL = 3"), code=EXIT_WRONG)
    expression, number, other = doc["results"]
    for verdict in (expression, number):
        assert verdict["expected"] == 0 and verdict["diagnosis"].startswith("upside down: the claim is ∂L/∂w1"), verdict
    assert "diagnosis" not in other, other  # ∂L/∂a is 2.5, not 3: nothing to say


def test_points_0_says_it_was_asked_for() -> None:
    (verdict,) = check_json(NEURON, *claims("dL/dw1 = -w3*a"), "--points", "0", code=EXIT_OK)["results"]
    assert verdict["note"] == "checked at the program's values only (--points 0)", verdict


@pytest.mark.parametrize(("key", "claim", "swap"), [
    ("W = [[1, 2], [3, 4]]; x = [0.5, -1]; h = tanh(W @ x); L = sum(h^2)", "dL/dx = W(2h(1 - h²))", "Wᵀ for W"),
    ("W = [[1, 2], [3, 4]]; x = [0.5, -1]; h = tanh(W @ x); L = sum(h^2)", "dL/dx = W.T.T @ (2*h*(1 - h^2))",
     "W for Wᵀ"),  # (Wᵀ)ᵀ: the inner Wᵀ is the one to turn back
    ("W = [[1, 2], [3, 4], [5, 6]]; x = [0.5, -1]; h = tanh(W @ x); y = [1.0, 0, 2]; L = sum((h - y)^2)",
     "dL/dx = W (2(h - y)(1 - h²))", "Wᵀ for W"),  # 3×2 times 3: the shapes do not even fit
    ("W = [[1, 2], [3, 4], [5, 6]]; x = [0.5, -1]; h = tanh(W @ x); y = [1.0, 0, 2]; L = sum((h - y)^2)",
     "dL/dW = xᵀ 2(h - y)(1 - h²)", ""),  # not a slip of one matrix: no such diagnosis
])
def test_a_transpose_slip_is_diagnosed(key: str, claim: str, swap: str) -> None:
    """Backpropagation's usual slip, W where Wᵀ is meant: wrong (not invalid, even where shapes do not fit)."""
    (verdict,) = check_json("-e", key, *claims(claim), code=None)["results"]
    if swap:
        assert verdict["status"] == "wrong" and verdict["diagnosis"].startswith(f"a transpose slip: with {swap}"), \
            verdict
    else:
        assert "transpose slip" not in verdict.get("diagnosis", ""), verdict


@pytest.mark.parametrize(("claim", "expected"), [("dy/dx = ½x", 0.35), ("y = ¼x²", 0.1225), ("dy/dx = ¾x - ¼x", 0.35),
                                                 ("dy/dx = ⅓x", 0.7 / 3)])
def test_fractions_written_as_one_character(claim: str, expected: float) -> None:
    (verdict,) = check_json("-e", "x = 0.7; y = x^2/4", *claims(claim))["results"]
    assert verdict["got"] == pytest.approx(expected, rel=1e-12), verdict
    assert verdict["status"] == ("wrong" if "⅓" in claim else "right"), verdict


def test_latex_sums_with_limits_are_an_error_that_says_what_is_read() -> None:
    result = run_cli("check", "-e", "x = [1.0, 2, 3]; L = sum(x^2)", "--claim", r"L = \sum_i x_i^2", "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid" and "\\sum_{...}" in verdict["error"]["message"], verdict
    assert r"\sum x" in verdict["error"]["hint"], verdict


# exp(x^6) at x = 3: x^6 = 729 > log(max float) = 709.8, so ∂L/∂x = 6x^5·exp(x^6) is inf.
INFINITE_KEY = "x = 3; L = exp(x^6)"
# (y·x)/x at x = 0: ∂L/∂y = (1/x)·x = inf·0, NaN (autograd's value; x/x is 1 only where x ≠ 0).
NAN_KEY = "x = 0; y = 2; L = y*x/x"


@pytest.mark.parametrize(("key", "claim", "right", "note"), [
    (INFINITE_KEY, "dL/dx = 1e-2", False, "the true value is infinite"),  # was right: '(the value is inf)'
    (INFINITE_KEY, "dL/dx = 2", False, "the true value is infinite"),
    (INFINITE_KEY, "dL/dx = 1.79e308", False, "the true value is infinite"),
    (INFINITE_KEY, "dL/dx = nan", False, "the true value is infinite"),
    (INFINITE_KEY, "dL/dx = -inf", False, "sign error"),
    (INFINITE_KEY, "dL/dx = inf", True, ""),
    (INFINITE_KEY, "dL/dx = 1e309", True, ""),  # the literal overflows to inf, as in a program
    (NAN_KEY, "dL/dy = 1", False, "the true value is not a number"),
    (NAN_KEY, "dL/dy = 0", False, "the true value is not a number"),
    (NAN_KEY, "dL/dy = inf", False, "the true value is not a number"),
    (NAN_KEY, "dL/dy = nan", True, ""),
    (NAN_KEY, "dL/dy = 0/0", True, ""),
])
def test_a_number_against_an_infinite_or_nan_value_is_judged_by_what_it_is(key: str, claim: str, right: bool,
                                                                           note: str) -> None:
    """An infinite value is matched only by an infinity of its sign, NaN only by NaN: no digits of a finite
    number are 'rounded' inf (|inf - 0.01| <= 1e-12·inf held, so 1e-2 was right 'rounded to 1 digit')."""
    verdict = one_expr(key, claim)
    assert verdict["status"] == ("right" if right else "wrong"), verdict
    assert verdict["kind"] == "number"
    assert verdict.get("diagnosis", "").startswith(note), verdict
    assert "rounded" not in verdict.get("note", "") and "truncated" not in verdict.get("note", ""), verdict


def test_the_correct_derivative_of_a_0_over_0_is_nan_not_the_folded_constant() -> None:
    """∂(x/x)/∂x = 0 where x ≠ 0, but at x = 0 it is 0/0: the claim 0 is wrong, and the correct derivative
    shown is NaN, autograd's value (it was 'correct: ∂L/∂x = 0', the simplifier's x/x = 1 folded)."""
    verdict = one_expr("x = 0; L = x/x", "dL/dx = 0")
    assert_wrong(verdict)
    assert (verdict["expected"], verdict["derivative"]) == ("NaN", "nan"), verdict
    human = check("-e", "x = 0; L = x/x", "--claim", "dL/dx = 0").stdout
    assert "correct: ∂L/∂x = nan" in human and "correct: ∂L/∂x = 0" not in human, human


def test_a_tensor_against_an_infinite_entry_is_judged_entrywise() -> None:
    key = "x = [1, 3]; L = sum(exp(x^6))"  # ∂L/∂x = 6x^5·exp(x^6) = [6e, inf]
    wrong = one_expr(key, "dL/dx = [6*e, 1e300]")
    assert_wrong(wrong)
    assert wrong["diagnosis"].startswith("the true value is infinite at 1 of 2 entries"), wrong
    assert_right(one_expr(key, "dL/dx = [6*e, inf]"))
    assert_right(one_expr(key, "dL/dx = 6*x^5*exp(x^6)"))  # finite at x = 1 and nearby 3: confirmed there


def test_an_expression_equal_only_as_infinities_is_not_right() -> None:
    """exp(x^6) is inf where ∂L/∂x is: equal there, but not the derivative. At x = 3 the nearby points below
    x = 2.99 are finite and tell them apart; at x = 5 every nearby point (x in [4, 6]) is infinite too, so
    no expression is confirmed: it must not be right because every comparison was inf = inf."""
    wrong = one_expr(INFINITE_KEY, "dL/dx = exp(x^6)")
    assert_wrong(wrong)
    assert wrong["diagnosis"].startswith("right at the program's values only"), wrong
    assert_right(one_expr(INFINITE_KEY, "dL/dx = 6*x^5*exp(x^6)"))
    for claim in ("dL/dx = exp(x^6)", "dL/dx = 6*x^5*exp(x^6)", "dL/dx = 1e300*exp(x^6)"):
        verdict = one_expr("x = 5; L = exp(x^6)", claim)
        assert_wrong(verdict)
        assert verdict["diagnosis"].startswith("not confirmed"), verdict
    assert_right(one_expr("x = 5; L = exp(x^6)", "dL/dx = inf"))  # a number: inf is what it is


@pytest.mark.parametrize("claim", [
    "dL/dx = 4 + 0*exp(1e6*(x - 2)^2)",  # 0·inf is NaN at every point but x = 2
    "dL/dx = 4 + (exp(1e6*(x - 2)^2) - exp(1e6*(x - 2)^2))",  # inf - inf
    "dL/dx = 4 + sum(zeros(round(abs(x - 2)*-1e6)))",  # zeros(0) at x = 2, a negative size elsewhere
])
def test_a_claim_that_is_no_number_nearby_is_not_right_by_being_skipped(claim: str) -> None:
    """∂(x²)/∂x = 2x = 4 at x = 2, and so is the claim; nearby it is NaN or fails where 2x is a number. Such
    points were skipped, and with all of them skipped the claim was right ('checked at the program's values
    only'): now a claim must agree wherever the derivative is finite."""
    verdict = one_expr("x = 2; L = x^2", claim)
    assert_wrong(verdict)
    assert verdict["diagnosis"].startswith("right at the program's values only"), verdict


def test_points_where_the_derivative_is_not_finite_are_still_skipped() -> None:
    """∂L/∂x = sqrt(a) + 2x at a = 0, x = 2 is 4; a moves to [-0.5, 0.5], where sqrt(a) is NaN for a < 0:
    those points say nothing, the others confirm the claim."""
    verdict = one_expr("a = 0; x = 2; L = x*sqrt(a) + x^2", "dL/dx = sqrt(a) + 2*x")
    assert_right(verdict)
    assert "nearby point" in verdict["note"], verdict


def test_a_wrong_claim_about_a_long_loop_costs_about_what_a_right_one_does() -> None:
    """Grading gives each submission the same time limit, so a wrong answer's feedback must not cost much more
    than judging a right one: the correct derivative is shown only where it has at most DERIVATIVE_BUDGET
    operations (a 3,000-step loop's took 10 s and 1 GB to print as feedback; judging took 0.3 s)."""
    steps, x, c = 3000, 1.0001, 0.001
    key = gradcalc.parse_program(f"x = {x}\ny = x\nfor i in range({steps}) {{ y = y * x + 0.001 }}\nL = y")
    # by hand: y_n = x^(n+1) + c·Σ_{j<n} x^j, so dy_n/dx = (n+1)·x^n + c·Σ_{1<=j<n} j·x^(j-1)
    value = (steps + 1) * x ** steps + c * sum(j * x ** (j - 1) for j in range(1, steps))
    judged = []
    for claim in (f"dL/dx = {value:.8g}", "dL/dx = 3"):
        judge = C.Judge(key.run(keep_values=True))
        started = time.perf_counter()
        report = judge.report("x", C.parse_claim_option(claim))
        judged.append((time.perf_counter() - started, report))
    (right_time, right), (wrong_time, wrong) = judged
    assert right.verdicts[0].status == "right" and wrong.verdicts[0].status == "wrong"
    verdict = wrong.verdicts[0]
    assert verdict.derivative == "", verdict
    assert re.fullmatch(r"the derivative is too long to print here \([\d,]+ operations\); gradcalc diff prints it",
                        verdict.note), verdict.note
    assert wrong_time < 3 * right_time + 2, (wrong_time, right_time)
    human = check("-e", "x = 1.0001; y = x; for i in range(3000) { y = y * x + 0.001 }; L = y",
                  "--claim", "dL/dx = 3").stdout
    assert "correct: ∂L/∂x = " in human and "too long to print here" in human, human


def test_a_wrong_claim_about_a_small_program_still_gets_the_derivative() -> None:
    verdict = one(NEURON, "dL/dw1 = 1")  # ∂L/∂w1 = -w3·a
    assert verdict["derivative"] == "-a*w3" and "note" not in verdict, verdict


@pytest.mark.parametrize("number", ["1e-308", "-1e-308", "2.5e-309", "5e-324", "1e-400", "1e308", "1.79e308",
                                    "1" + "0" * 400, "8.07e-310", "1e-323*x", "[1e308, 1e-308]"])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_numbers_at_the_ends_of_the_floats_are_judged_wrong_not_an_internal_error(number: str, dtype: str) -> None:
    """∂(x²)/∂x = 2x = 4 at x = 2, which none of these is. The ratio of a subnormal claim to 4 has an inverse
    past the floats, which made the factor-off diagnosis an internal error (OverflowError)."""
    verdict = one_expr("x = 2; L = x^2", f"dL/dx = {number}", "--dtype", dtype)
    assert_wrong(verdict)
    assert verdict["expected"] == 4


@pytest.mark.parametrize(("key", "claim", "diagnosis"), [
    (NEURON_PROGRAM, "dL/dw1 = -1e-308*w3*a", "a factor off: the claim is 1e-308 × ∂L/∂w1"),  # not 1/(309 digits)
    (NEURON_PROGRAM, "dL/dw1 = -1e-30*w3*a", "a factor off: the claim is 1e-30 × ∂L/∂w1"),
    (NEURON_PROGRAM, "dL/dw1 = -1000*w3*a", "a factor off: the claim is 1000 × ∂L/∂w1"),
    (NEURON_PROGRAM, "dL/dw1 = 1e-308", ""),  # -1 is no power of ten times 1e-308 worth naming
    (NEURON_PROGRAM, "dL/dw1 = -1e30", ""),  # not 'off in the last digit: the value is 0'
    ("x = 1.62e300; L = x", "L = 1.5e300",
     "off in the last digit written: to the digits written, the value is 1.6e+300"),
])
def test_diagnoses_of_numbers_far_out_are_short(key: str, claim: str, diagnosis: str) -> None:
    verdict = one_expr(key, claim)
    assert_wrong(verdict)
    assert verdict.get("diagnosis", "") == diagnosis, verdict


@pytest.mark.parametrize("claim", ["dy/dx = 1e400", "y = 1e309", r"dy/dx = 1.5 \times 10^{400}"])
def test_a_number_too_large_for_a_float_is_judged_wrong(claim: str) -> None:
    """1e400 is inf: wrong (it was an OverflowError, exit 3, and every other claim lost)."""
    doc = check_json("-e", "x = 2; y = x^2", *claims(claim, "dy/dx = 4"), code=EXIT_WRONG)
    huge, four = doc["results"]
    assert huge["status"] == "wrong" and four["status"] == "right", doc


GAUSS = "x = 0.8; σ = 1.3; μ = 0.2; f = exp(-(x - μ)^2 / (2*σ^2)) / (σ * sqrt(2*π))"


@pytest.mark.parametrize("claim", ["df/dx = -(x - μ)/σ^2 f", "df/dx = -(x - μ)/σ² f", "df/dx = -(x - μ) f/σ^2",
                                   r"df/dx = -\frac{x-\mu}{\sigma^2} f",
                                   r"df/dx = -\frac{x-\mu}{\sigma^3 \sqrt{2\pi}} "
                                   r"\exp\left(-\frac{(x-\mu)^2}{2\sigma^2}\right)",
                                   "df/dx = -(x-μ)/(σ³√(2π)) e^{-(x-μ)²/(2σ²)}"])
def test_a_variable_named_like_a_function_is_the_variable(claim: str) -> None:
    """σ is the sigmoid, unless the program has a variable σ: then σ x is σ·x and σ^2 x is σ²·x."""
    (verdict,) = check_json("-e", GAUSS, *claims(claim), code=EXIT_OK)["results"]
    true = -(0.8 - 0.2) / 1.3**2 * math.exp(-(0.6**2) / (2 * 1.3**2)) / (1.3 * math.sqrt(2 * math.pi))
    assert verdict["got"] == pytest.approx(true, rel=1e-12), verdict


def test_a_rounded_literal_keeps_its_digits_when_transposed() -> None:
    doc = check_json("-e", "X = [[1.0, 2], [3, 4]]; L = sum(X*X)/7",
                     *claims("dL/dX = [[0.29, 0.86], [0.57, 1.14]]^T", "dL/dX = [[0.29, 0.86], [0.57, 1.14]]ᵀ",
                             "dL/dX = [[0.29, 0.57], [0.86, 1.14]]ᵀ"), code=EXIT_WRONG)
    assert [r["status"] for r in doc["results"]] == ["right", "right", "wrong"], doc


@pytest.mark.parametrize(("key", "claim"), [
    ("x = 0.7; y = exp(x)*sin(x)^2", "y = e^{x} sin^2(x)"),  # a plain function's power in LaTeX-ish text
    ("x = 0.7; y = exp(x)*sin(x)^2", r"y = e^{x}\cdot sin^{2}(x)"),
    ("x = 0.8; f = x^3", r"d^2f/dx^2 = \frac{6x}{1}"),  # d^2f/dx^2 on the left of a LaTeX claim
    ("x = 0.8; f = x^3", r"\frac{d^2 f}{dx^2} = 6x"),
])
def test_powers_in_latex_read_as_in_plain_text(key: str, claim: str) -> None:
    result = run_cli("check", "-e", key, "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output


@pytest.mark.parametrize(("key", "claim", "expected"), [
    ("m = 4; y = 2.0; x = 1.0; L = x*(y + 4)/m", "dL/dx = 1/m (y + 4)", 1.5),  # a space ends a denominator
    ("x = 1.7; y = 0.6; f = sqrt(x)*(1 + y^2)", "f = √x (1+y²)", math.sqrt(1.7) * 1.36),  # √ binds to x alone
    ("x = 1.2; y = (x^2 + 1)/(x - 3)", "dy/dx = [(x-3)(2x) - (x^2+1)(1)]/(x-3)^2", (1.2**2 - 6 * 1.2 - 1) / 1.8**2),
    ("x = 1.2; y = (x^2 + 1)/(x - 3)", r"y = \left[x^2+1\right]/(x-3)", (1.2**2 + 1) / -1.8),  # [ ] group
    ("x = 1.5; y = (x + 1)^2", "dy/dx = 2[x + 1]", 5.0),
    ("V = [[1.0, 2], [0, 1], [3, -1]]; a = [0.2, 0.3, 0.5]; L = sum((a @ V)*[1, -2])", "dL/da = V [1, -2]",
     [-3.0, -2.0, 5.0]),  # a space: V times the vector, not V[1, -2]
    ("f(t) = t^2; x = 1.5; y = f(x)*3", "y = 3f (x)", 6.75),  # the program's function, with a space
])
def test_brackets_after_a_space_multiply_and_brackets_of_one_expression_group(key: str, claim: str,
                                                                               expected: Any) -> None:
    (verdict,) = check_json("-e", key, *claims(claim))["results"]
    np.testing.assert_allclose(verdict["got"], expected, rtol=1e-12)


@pytest.mark.parametrize("claim", ["x = tan t e^{-t}", "x = tan t e^-t", "dx/dt = sec^2 t e^{-t} - tan t e^{-t}"])
def test_a_function_s_argument_without_brackets_ends_at_e(claim: str) -> None:
    """tan t e^-t is tan(t)·e^-t, as sin 2x cos x is sin(2x)·cos(x)."""
    result = run_cli("check", "-e", "t = 0.6; x = tan(t)*exp(-t)", "--claim", claim, "--json")
    assert result.exit_code == EXIT_OK, result.output


def test_a_root_before_a_name_and_a_bracket_is_ambiguous() -> None:
    """√x(1 + y²): is the bracket under the root? Readers split on it, as on 1/2x: an error with both readings."""
    result = run_cli("check", "-e", "x = 1.7; y = 0.6; f = sqrt(x)*(1 + y^2)", "--claim", "f = √x(1+y²)", "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid", verdict
    assert "'√x(...)' is ambiguous" in verdict["error"]["message"] and "√(x*(...))" in verdict["error"]["hint"]


# --- the diagnosis registry ------------------------------------------------------------------------

TRANSPOSE_KEY = "W = [[1, 2], [3, 4]]; x = [0.5, -1]; h = tanh(W @ x); L = sum(h^2)"
UNFIT_KEY = "W = [[1, 2], [3, 4], [5, 6]]; x = [0.5, -1]; h = tanh(W @ x); y = [1.0, 0, 2]; L = sum((h - y)^2)"
MEAN_LOSS_KEY = ("X = [[1.0, 2], [0.5, -1], [2, 0], [-1, 1]]; w = [0.3, -0.2]; b = 0.1; y = [1, 0, 1, 0]; "
                 "p = sigmoid(X @ w + b); L = -mean(y*log(p) + (1 - y)*log(1 - p))")
# ∂L/∂x = 17 at x = 1, the sum of three paths: through a (2b = 6), through b (3a = 6), through c (5)
THREE_PATHS_KEY = "x = 1; a = 2*x; b = 3*x; c = 5*x; L = a*b + c"

# Each claim's mistake, worked out by hand on the neuron (∂L/∂w1 = -w3·a = -1; ∂L/∂a = -w3·w1 - w4·w2 = 2.5,
# the paths L → d → b → a (-1.5) and L → d → c → a (4)), and the summary the grading table shows for it.
DIAGNOSED = [
    (NEURON_PROGRAM, "dL/dw1 = w3*a", "sign", "sign error"),  # -(-1)
    (NEURON_PROGRAM, "dL/dw1 = -2*w3*a", "factor", "a factor off"),  # 2 × (-1)
    (MEAN_LOSS_KEY, "dL/db = sum(sigmoid(X@w + b) - y)", "missing_divisor", "a forgotten 1/N"),  # 4 × the mean's
    (NEURON_PROGRAM, "dL/da = -w3*w1", "missing_path", "a missing chain-rule path"),  # L → d → c → a left out
    (THREE_PATHS_KEY, "dL/dx = 5", "missing_path", "missing chain-rule paths"),  # only the path through c
    (NEURON_PROGRAM, "dL/da = 0", "all_paths_missing", "the claim leaves out every chain-rule path"),
    (NEURON_PROGRAM, "dL/da = -(w3*w1 + 2*w4*w2)", "double_counted_path", "a chain-rule path counted twice"),
    (MLP_LAYER, "dL/dW = (1 - H^2).T @ X", "transposed", "transposed"),  # square: the shape fits
    (TANH_PROGRAM, "dL/dW = outer(x, 1 - tanh(W @ x)^2)", "transposed", "transposed"),  # (3, 2) for (2, 3)
    (MLP_LAYER, "dL/db = 1 - H^2", "not_summed", "not summed"),  # one row per example: (3, 2) for (2,)
    (MEAN_LOSS_KEY, "dL/db = sigmoid(X@w + b) - y", "not_averaged", "not averaged"),  # 4 per-example values
    (TANH_PROGRAM, "dL/dW = ones(3, 2)", "shape", "the claim has shape (3, 2) but ∂L/∂W has shape (2, 3)"),
    (NEURON_PROGRAM, "dw1/dL = -w3*a", "upside_down", "upside down"),  # ∂L/∂w1 written as ∂w1/∂L
    (TRANSPOSE_KEY, "dL/dx = W(2h(1 - h²))", "transpose_slip", "a transpose slip"),  # Wᵀ(…) is right
    (UNFIT_KEY, "dL/dx = W (2(h - y)(1 - h²))", "transpose_slip", "a transpose slip"),  # 3×2 times 3: unfit
    ("x = [-1.0, 2]; v = [4.0, 5]; L = sum(v*relu(3*x))", "dL/dx = 3v", "missing_mask",
     "a missing ReLU mask"),  # 3v·1[x > 0]
    ("x = [1.0, 2]; L = sum(x^2) + sum(3*x)", "dL/dx = 2x", "missing_term", "a missing term"),  # 2x + 3
    ("x = 2; w = 3; z = w*x; L = z^2", "dL/dx = 2z", "missing_local_factor", "a missing local factor"),  # 2z·w
    (UNFIT_KEY, "dL/dx = x(h - y)", "shape", "the claim's shapes do not fit"),  # (2,) times (3,)
    (INFINITE_KEY, "dL/dx = 2", "not_finite", "the true value is infinite"),  # 6x^5·exp(729) overflows
    (NAN_KEY, "dL/dy = 1", "not_finite", "the true value is not a number (NaN)"),
    ("x = 2; L = x^2", "dL/dx = 4 + 0*exp(1e6*(x - 2)^2)", "only_here", "right at the program's values only"),
    ("y = 1; z = 0.5; p = sigmoid(z); L = -(y*log(p) + (1 - y)*log(1 - p))", "dL/dz = p - 1", "held_constant",
     "right if y is a constant"),  # p - y with the label y = 1 written as a number
    ("x = 5; L = exp(x^6)", "dL/dx = exp(x^6)", "not_confirmed", "not confirmed"),  # inf everywhere it is tried
    ("x = 0.3932; y = x^2/2", "dy/dx = 0.40", "last_digit", "off in the last digit written"),  # 0.39
    ("x = 3; y = exp(2*x)", "dy/dx = 807", "exact_integer",
     "an integer means exactly 807; the value is 806.858 (to say it is rounded, write 807. or 8.07e2)"),
]


@pytest.mark.parametrize(("key", "claim", "code", "summary"), DIAGNOSED)
def test_each_diagnosis_has_its_code_in_the_json(key: str, claim: str, code: str, summary: str) -> None:
    verdict = one_expr(key, claim)
    assert_wrong(verdict)
    assert verdict["diagnosis_code"] == code, verdict
    assert verdict["diagnosis"] == summary or verdict["diagnosis"].startswith(summary + ": "), verdict
    assert list(verdict).index("diagnosis_code") == list(verdict).index("diagnosis") + 1, verdict  # beside it


def test_every_diagnosis_in_the_registry_is_produced_by_a_claim() -> None:
    assert {code for _, _, code, _ in DIAGNOSED} == {entry.code for entry in C.DIAGNOSES}


def test_the_registry_codes_are_unique_snake_case_and_the_docs() -> None:
    codes = [entry.code for entry in C.DIAGNOSES]
    assert len(codes) == len(set(codes)), codes
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", code) for code in codes), codes
    readme = (REPO / "docs" / "json.md").read_text(encoding="utf-8")  # the checkout's: an installed gradcalc has none
    listed = readme.split('`"diagnosis_code"` is one of:', 1)[1].split("\n\n", 1)[0]
    assert re.findall(r"^  - `([a-z_]+)`: \S", listed, re.MULTILINE) == codes


def test_no_diagnosis_no_code() -> None:
    doc = check_json(NEURON, *claims("dL/dw1 = -w3*a", "dL/dw1 = -3.7", "dL/dq = 1"), code=None)
    for verdict in doc["results"]:
        assert "diagnosis" not in verdict and "diagnosis_code" not in verdict, verdict


def test_grading_summarises_by_the_diagnosis_summary() -> None:
    doc = check_json(NEURON, SAMPLES / "submissions", code=EXIT_WRONG)
    problems = {s["submission"]: s["first_problem"] for s in doc["submissions"]}
    assert problems["bob.txt"] == "∂L/∂d wrong: sign error", problems
    assert problems["carol.eq"] == "∂L/∂a wrong: a missing chain-rule path", problems
    codes = {r.get("diagnosis_code") for s in doc["submissions"] for r in s["results"]}
    assert {"sign", "missing_path"} <= codes, codes
    human = check(NEURON, SAMPLES / "submissions").stdout
    assert "∂L/∂d wrong: sign error" in human, human


def test_the_summary_is_the_entrys_not_a_split_of_the_text() -> None:
    """The grading table and the note column show the diagnosis's summary as it is, ':' and all."""
    from rich.console import Console

    from gradcalc.cli import render
    verdict = C.Verdict("dL/dw = 1", "L", "w", 1, "wrong")
    verdict.diagnose(C.Diagnosis("shape", "a summary: with a colon", "and its detail"))
    assert (verdict.diagnosis, verdict.diagnosis_code) == ("a summary: with a colon: and its detail", "shape")
    report = C.Report("hw", [verdict])
    assert report.first_problem() == "∂L/∂w wrong: a summary: with a colon"
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render.check_view(report))
    (row,) = [line for line in console.export_text().splitlines() if "✗ wrong" in line]
    assert row.rstrip().endswith("a summary: with a colon"), row
