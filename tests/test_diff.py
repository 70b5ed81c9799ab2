"""`gradcalc diff`: derivatives as simplified, printable expressions (gradcalc syntax and LaTeX).

Every expected value is independent of gradcalc's derivative code: central finite differences of the
program's own values (tests.helpers.central_difference), SymPy (a test-only dependency), closed forms
worked out by hand, or golden texts. The printed derivative is fed back to gradcalc as a program, so
the text is also checked to be valid gradcalc syntax that means what it says.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from helpers import (
    EXIT_BAD_INPUT,
    NEURON,
    REPO,
    assert_bad_input,
    assert_no_traceback,
    central_difference,
    examples,
    json_error,
    json_ok,
    run_cli,
    strict_json,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from strategies import scalar_cases

import gradcalc
from gradcalc.errors import GradcalcError
from gradcalc.language.parser import DEFAULT_MAX_DEPTH, raise_recursion_limit

# gradcalc raises the recursion limit on its first run; do it now, so Hypothesis does not see it change.
raise_recursion_limit(DEFAULT_MAX_DEPTH)


def fast(count: int) -> settings:
    return settings(max_examples=examples(count), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                                           HealthCheck.data_too_large])


def sympy_module() -> Any:
    return pytest.importorskip("sympy")


# --- tools: running programs, finite differences, evaluating printed derivatives ----------------------


def literal(value: Any) -> str:
    """A value as gradcalc source: a number or a nested list literal."""
    return json.dumps(np.asarray(value, dtype=float).tolist())


def program_value(text: str, values: Mapping[str, Any], name: str) -> np.ndarray:
    """The value of `name` after running `text` with `values` (leaves replaced, or free names given)."""
    program = gradcalc.parse_program(text)
    return np.asarray(program.run({k: np.asarray(v, dtype=float) for k, v in values.items()}).value(name), float)


def fd_gradient(text: str, values: Mapping[str, Any], of: str, name: str) -> np.ndarray:
    """∂of/∂name by central differences of whole runs of the original program."""
    program = gradcalc.parse_program(text)
    base = {k: np.asarray(v, dtype=float) for k, v in values.items()}

    def objective(point: np.ndarray) -> float:
        return float(program.run({**base, name: point}).value(of))

    return central_difference(objective, base[name])


def derivative_source(text: str, where: Sequence[tuple[str, str]] | Mapping[str, str],
                      values: Mapping[str, Any], result: str = "D_") -> str:
    """The program `leaf = value; ...; t1 = ...; t2 = ...; D_ = <derivative>`."""
    pairs = list(where.items()) if isinstance(where, Mapping) else list(where)
    lines = [f"{name} = {literal(value)}" for name, value in values.items()]
    lines += [f"{name} = {body}" for name, body in pairs]
    lines.append(f"{result} = {text}")
    return "\n".join(lines)


def evaluate_derivative(derivative: Any, values: Mapping[str, Any]) -> np.ndarray:
    """Evaluate a symbolic.Derivative's printed text (with its where parts) at `values` with gradcalc."""
    where = [(name, body) for name, body, _ in derivative.where]
    return program_value(derivative_source(derivative.text, where, values), {}, "D_")


def api_diff(text: str, values: Mapping[str, Any], of: str, wrt: Sequence[str], **options: Any) -> list[Any]:
    program = gradcalc.parse_program(text)
    return program.run({k: np.asarray(v, dtype=float) for k, v in values.items()}).diff(of, list(wrt), **options)


def assert_close(got: Any, expected: Any, what: str, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}\n{got}\n{expected}"
    scale = max(1.0, float(np.max(np.abs(expected))) if expected.size else 1.0)
    assert np.allclose(got, expected, rtol=rtol, atol=atol * scale), f"{what}:\ngot      {got}\nexpected {expected}"


# --- tools: reading printed text structurally ---------------------------------------------------------


def form(text: str) -> Any:
    """A canonical structure of gradcalc text: a sum of signed products, each a multiset of factors.

    Terms and factors may come in any order, and `-(w3*a)` reads the same as `-a*w3`, but nothing is
    simplified: `x*1` and `x` differ, `2*x*sin(x) + x^2*cos(x)` and `x*(2*sin(x) + x*cos(x))` differ.
    """
    return _canon(ast.parse(text.replace("^", "**"), mode="eval").body)


def _terms(node: ast.AST, sign: int, out: list[tuple[int, ast.AST]]) -> None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        _terms(node.left, sign, out)
        _terms(node.right, -sign if isinstance(node.op, ast.Sub) else sign, out)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _terms(node.operand, -sign, out)
    else:
        out.append((sign, node))


def _factors(node: ast.AST, out: list[Any]) -> int:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left, out) * _factors(node.right, out)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        sign = _factors(node.left, out)
        out.append(("over", _canon(node.right)))
        return sign
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_factors(node.operand, out)
    out.append(_atom(node))
    return 1


def _atom(node: ast.AST) -> Any:
    if isinstance(node, ast.Constant):
        return ("num", float(node.value))
    if isinstance(node, ast.Name):
        return ("name", node.id)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
        return ("pow", _canon(node.left), _canon(node.right))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return ("call", node.func.id, tuple(_canon(a) for a in node.args))
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _canon(node)
    return ("other", ast.dump(node))


def _canon(node: ast.AST) -> Any:
    found: list[tuple[int, ast.AST]] = []
    _terms(node, 1, found)
    terms = []
    for outer, term in found:
        factors: list[Any] = []
        sign = outer * _factors(term, factors)
        terms.append((sign, tuple(sorted(factors, key=repr))))
    if len(terms) == 1:
        sign, factors = terms[0]
        return factors[0] if sign == 1 and len(factors) == 1 else ("prod", sign, factors)
    return ("sum", tuple(sorted(terms, key=repr)))


def assert_form(text: str, *accepted: str) -> None:
    assert form(text) in [form(a) for a in accepted], f"{text!r} is none of the accepted forms {accepted}"


# Text that simplification must have removed: x*1, 1*x, x*0, x + 0, x^1, x^0, --x, x/1.
LEFTOVERS = {
    "1*x": re.compile(r"(?<![\w.])1\*"),
    "x*1": re.compile(r"\*1(?![\w.])"),
    "0*x": re.compile(r"(?<![\w.])0\*"),
    "x*0": re.compile(r"\*0(?![\w.])"),
    "x + 0": re.compile(r"[+-] 0(?![\w.])"),
    "x^1": re.compile(r"\^1(?![\w.])"),
    "x^0": re.compile(r"\^0(?![\w.])"),
    "x/1": re.compile(r"/1(?![\w.])"),
    "--x": re.compile(r"--|- -|\+ -|-\(-[\w.]+\)"),
}


def assert_simplified(text: str) -> None:
    for identity, pattern in LEFTOVERS.items():
        assert not pattern.search(text), f"{text!r} still holds {identity!r} (at {pattern.search(text)})"


# --- tools: SymPy readings of gradcalc text and of LaTeX --------------------------------------------


def sympy_of_text(text: str, where: Sequence[tuple[str, str]], names: Sequence[str]) -> Any:
    """gradcalc text (with its where parts substituted) as a SymPy expression."""
    sp = sympy_module()
    from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

    z = sp.Symbol("z_")
    local: dict[str, Any] = {name: sp.Symbol(name) for name in names}
    local["sigmoid"] = sp.Lambda(z, 1 / (1 + sp.exp(-z)))
    transformations = (*standard_transformations, convert_xor)
    for name, body in where:
        local[name] = parse_expr(body, local_dict=dict(local), transformations=transformations)
    return parse_expr(text, local_dict=local, transformations=transformations)


_LATEX_TOKEN = re.compile(
    r"\s+|\\left\(|\\right\)|\\left\||\\right\||\\operatorname\{\w+\}|\\[A-Za-z]+"
    r"|\d+(?:\.\d+)?(?:e[-+]?\d+)?|[A-Za-z](?:_\{\w+\})?|[{}^+\-,]")
_LATEX_END = {None, "+", "-", "}", r"\right)", r"\right|", ","}


def latex_tokens(text: str) -> list[str]:
    tokens, at = [], 0
    while at < len(text):
        match = _LATEX_TOKEN.match(text, at)
        assert match, f"unexpected LaTeX at {at}: {text[at:]!r} in {text!r}"
        if not match.group().isspace():
            tokens.append(match.group())
        at = match.end()
    return tokens


class LatexReader:
    """A strict reader for the LaTeX subset gradcalc prints; a double superscript (x^{a}^{b}) is an error."""

    def __init__(self, text: str, symbols: Mapping[str, Any]) -> None:
        self.sp = sympy_module()
        self.tokens = latex_tokens(text)
        self.at = 0
        self.symbols = symbols
        z = self.sp.Symbol("z_")
        sp = self.sp
        self.functions = {r"\sin": sp.sin, r"\cos": sp.cos, r"\tan": sp.tan, r"\tanh": sp.tanh,
                          r"\sinh": sp.sinh, r"\cosh": sp.cosh, r"\log": sp.log, r"\exp": sp.exp,
                          r"\arcsin": sp.asin, r"\arccos": sp.acos, r"\arctan": sp.atan,
                          r"\sigma": sp.Lambda(z, 1 / (1 + sp.exp(-z))), r"\operatorname{sign}": sp.sign}

    def read(self) -> Any:
        value = self.expr()
        assert self.peek() is None, f"unread LaTeX from token {self.at}: {self.tokens[self.at:]}"
        return value

    def peek(self) -> str | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        assert token is not None, "LaTeX ends too early"
        assert expected is None or token == expected, f"expected {expected!r}, got {token!r} in {self.tokens}"
        self.at += 1
        return token

    def expr(self) -> Any:
        value = self.term()
        while self.peek() in ("+", "-"):
            value = value + self.term() if self.take() == "+" else value - self.term()
        return value

    def term(self) -> Any:
        negative = self.peek() == "-"
        if negative:
            self.take()
        value = self.factor()
        while self.peek() not in _LATEX_END:
            if self.peek() == r"\cdot":
                self.take()
            value = value * self.factor()
        return -value if negative else value

    def factor(self) -> Any:
        base = self.atom()
        if self.peek() == "^":
            self.take()
            self.take("{")
            exponent = self.expr()
            self.take("}")
            assert self.peek() != "^", f"double superscript (invalid LaTeX) in {' '.join(self.tokens)}"
            base = base ** exponent
        return base

    def atom(self) -> Any:
        sp = self.sp
        token = self.take()
        if token[0].isdigit():
            return sp.Float(token) if ("." in token or "e" in token) else sp.Integer(token)
        if token == r"\left(":
            value = self.expr()
            self.take(r"\right)")
            return value
        if token == r"\left|":
            value = self.expr()
            self.take(r"\right|")
            return sp.Abs(value)
        if token in (r"\frac", r"\sqrt"):
            self.take("{")
            top = self.expr()
            self.take("}")
            if token == r"\sqrt":
                return sp.sqrt(top)
            self.take("{")
            bottom = self.expr()
            self.take("}")
            return top / bottom
        if token in self.functions:
            self.take(r"\left(")
            argument = self.expr()
            self.take(r"\right)")
            return self.functions[token](argument)
        if token == "e":
            return sp.E
        name = token.replace("_{", "").replace("}", "")
        assert re.fullmatch(r"[A-Za-z]\w*", name), f"unknown LaTeX token {token!r}"
        return self.symbols.get(name, sp.Symbol(name))


def sympy_of_latex(latex: str, where: Sequence[tuple[str, str]]) -> Any:
    symbols: dict[str, Any] = {}
    for name, body in where:
        symbols[name] = LatexReader(body, dict(symbols)).read()
    return LatexReader(latex, symbols).read()


def latex_form(latex: str) -> list[tuple[str, tuple[str, ...]]]:
    """LaTeX as signed terms of factors (each factor's exact tokens), in a canonical order: golden up to order."""
    tokens = latex_tokens(latex)
    terms: list[tuple[str, list[str]]] = [("+", [])]
    depth, piece = 0, []
    for i, token in enumerate(tokens):
        if depth == 0 and not piece and token in ("+", "-"):
            terms.append((token, []))
            continue
        piece.append(token)
        depth += token in ("{", r"\left(", r"\left|")
        depth -= token in ("}", r"\right)", r"\right|")
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        command = token.startswith("\\") and token not in (r"\right)", r"\right|", r"\cdot")
        if depth == 0 and not (following in ("^", "{") or token == "^" or (command and following == r"\left(")):
            if piece != [r"\cdot"]:
                terms[-1][1].append(" ".join(piece))
            piece = []
    return sorted((sign, tuple(sorted(factors))) for sign, factors in terms if factors)


def assert_latex_form(latex: str, expected: str) -> None:
    assert latex_form(latex) == latex_form(expected), f"LaTeX {latex!r}\nexpected (up to order) {expected!r}"


# --- random scalar expressions ---------------------------------------------------------------------

def finite_enough(text: str, points: Sequence[Mapping[str, float]]) -> bool:
    for point in points:
        try:
            value = float(program_value(text, point, "f"))
        except GradcalcError:
            return False
        if not math.isfinite(value) or abs(value) > 1e6:
            return False
    return True


@pytest.mark.slow
@given(scalar_cases(powers=True))
@fast(200)
def test_random_expression_derivative_text_evaluates_to_the_finite_difference_gradient(case: Any) -> None:
    text, names, points = case
    assume(finite_enough(text, points))
    results = api_diff(text, points[0], "f", names)
    again = api_diff(text, points[0], "f", names)
    assert [(r.text, r.latex, r.where) for r in results] == [(r.text, r.latex, r.where) for r in again], \
        "the same derivative printed twice differs"
    for name, result in zip(names, results):
        assert result.evaluable, result.text
        assert_simplified(result.text)
        for part_name, body, _ in result.where:
            assert_simplified(body)
            assert re.fullmatch(r"t\d+", part_name), part_name
        for point in points:
            expected = fd_gradient(text, point, "f", name)
            got = evaluate_derivative(result, point)
            assert_close(got, expected, f"{text}: ∂f/∂{name} = {result.text} where {result.where} at {point}",
                         rtol=1e-4, atol=1e-5)


@given(scalar_cases())
@fast(80)
def test_random_expression_derivative_text_agrees_with_sympy(case: Any) -> None:
    sp = sympy_module()
    text, names, points = case
    assume(finite_enough(text, points))
    original = sympy_of_text(text.split("=", 1)[1], [], names)
    for name, result in zip(names, api_diff(text, points[0], "f", names)):
        reading = sympy_of_text(result.text, [(n, b) for n, b, _ in result.where], names)
        assert_agrees(sp, reading, sp.diff(original, sp.Symbol(name)), points,
                      f"{text}: ∂f/∂{name} = {result.text} where {result.where}")


@given(scalar_cases())
@fast(80)
def test_random_expression_derivative_latex_agrees_with_sympy(case: Any) -> None:
    """The LaTeX is well formed (no double superscript) and means the derivative."""
    sp = sympy_module()
    text, names, points = case
    assume(finite_enough(text, points))
    original = sympy_of_text(text.split("=", 1)[1], [], names)
    for name, result in zip(names, api_diff(text, points[0], "f", names)):
        reading = sympy_of_latex(result.latex, [(n, latex) for n, _, latex in result.where])
        assert_agrees(sp, reading, sp.diff(original, sp.Symbol(name)), points,
                      f"{text}: ∂f/∂{name} = {result.latex!r} where {result.where}")


def assert_agrees(sp: Any, reading: Any, expected: Any, points: Sequence[Mapping[str, float]], what: str) -> None:
    for point in points:
        at = {sp.Symbol(k): v for k, v in point.items()}
        want = float(sp.N(expected.subs(at)))
        got = complex(sp.N(reading.subs(at)))
        assert abs(got.imag) < 1e-9 and math.isclose(got.real, want, rel_tol=1e-7, abs_tol=1e-9), \
            f"{what}: {got} at {point}; SymPy says {want}"


# --- golden simplification -----------------------------------------------------------------------


def diff_json(*args: object) -> dict[str, Any]:
    return json_ok("diff", *args)


def test_golden_x_squared_sin_x() -> None:
    doc = diff_json("-e", "y = x^2*sin(x)", "--wrt", "x")
    assert_form(doc["derivative"], "2*x*sin(x) + x^2*cos(x)", "x*(2*sin(x) + x*cos(x))")
    assert doc["where"] == {}
    assert_latex_form(doc["latex"], r"2 x \sin\left(x\right) + x^{2} \cos\left(x\right)")


@pytest.mark.parametrize(("program", "wrt", "accepted"), [
    ("y = x*1*w", "x", ["w"]),                              # x*1
    ("y = (x + 0)*w", "x", ["w"]),                          # x+0
    ("y = x + 0*w*x", "x", ["1"]),                          # x*0
    ("y = x^1 * w", "x", ["w"]),                            # x^1
    ("y = -(-x)*w", "x", ["w"]),                            # --x
    ("y = -(-(-x))", "x", ["-1"]),
    ("y = 2*x*3*w", "x", ["6*w"]),                          # numeric factors combined
    ("y = 2*(3*(x/4))", "x", ["3/2"]),
    ("y = x*w + w*x", "x", ["2*w"]),                        # like terms collected
    ("y = x + x + x - 2*x", "x", ["1"]),
    ("y = x*w + 3*w*x - x*w", "w", ["3*x"]),
    ("y = x*x*x", "x", ["3*x^2"]),                          # powers of one base collected
    ("y = x^2*x^3", "x", ["5*x^4"]),
    ("y = x^2/x", "x", ["1"]),
    ("y = x*w*x*w", "x", ["2*x*w^2"]),
    ("y = sin(x)^2 + cos(x)^2", "x", ["0"]),                # like terms cancel
    ("y = 3*x^2 - x^2", "x", ["4*x"]),
    ("x = 1.0; w = 2.0; y = 3*w", "x", ["0"]),              # no path: zero
    ("y = 1/x", "x", ["-1/x^2", "-x^-2", "-(1/x^2)"]),
    ("y = log(x)", "x", ["1/x", "x^-1"]),
    ("y = exp(2*x)", "x", ["2*exp(2*x)"]),
    ("y = tanh(x)", "x", ["1 - tanh(x)^2"]),
    ("y = sigmoid(x)", "x", ["sigmoid(x)*(1 - sigmoid(x))"]),
    ("y = sqrt(x)", "x", ["1/2/sqrt(x)", "1/(2*sqrt(x))", "0.5*x^-0.5"]),
    ("y = (x + 1)^3", "x", ["3*(x + 1)^2", "3*(1 + x)^2"]),
    # a sum inside the sum a common factor leaves: ((x + 1) + 1)*exp(x) was printed
    ("y = exp(x)*(x + 1)", "x", ["(x + 2)*exp(x)", "(2 + x)*exp(x)"]),
    ("y = exp(x)*(x - 1)", "x", ["x*exp(x)"]),
    ("y = exp(x)*(1 - x)", "x", ["-x*exp(x)"]),
    ("y = exp(x)*(2*x - 1)", "x", ["(2*x + 1)*exp(x)", "(1 + 2*x)*exp(x)"]),
])
def test_simplification_identities(program: str, wrt: str, accepted: list[str]) -> None:
    doc = diff_json("-e", program, "--wrt", wrt)
    assert doc["where"] == {}, doc
    assert_simplified(doc["derivative"])
    assert_form(doc["derivative"], *accepted)


@pytest.mark.parametrize(("program", "wrt", "accepted"), [
    ("y = -(x - w)*(w - x)", "x", ["2*x - 2*w", "2*(x - w)", "-2*(w - x)"]),
    ("y = (x - w)^2 + (w - x)^2", "x", ["4*x - 4*w", "4*(x - w)", "-4*(w - x)"]),
    ("y = 3*(x - w) + 3*(w - x)*x", "x", ["3 + 3*w - 6*x", "3*(1 + w - 2*x)"]),
])
def test_like_terms_collected_across_scaled_sums(program: str, wrt: str, accepted: list[str]) -> None:
    """x - y - (-x + y) holds like terms (x and -(-x)) left uncollected: it is 2*x - 2*y."""
    doc = diff_json("-e", program, "--wrt", wrt)
    assert_form(doc["derivative"], *accepted)


@pytest.mark.parametrize(("program", "wrt", "accepted"), [
    ("p = sigmoid(z); L = -(y*log(p) + (1 - y)*log(1 - p))", "z", ["-y + sigmoid(z)", "sigmoid(z) - y"]),
    ("L = -(y*log(sigmoid(z)) + (1 - y)*log(1 - sigmoid(z)))", "z", ["-y + sigmoid(z)", "sigmoid(z) - y"]),
    ("x = [1.0, 2.0]; w = [0.5, -0.25]; p = sigmoid(w @ x + b); L = -(y*log(p) + (1 - y)*log(1 - p))", "b",
     ["-y + sigmoid(b + w @ x)", "sigmoid(b + w @ x) - y", "-y + sigmoid(w @ x + b)"]),
])
def test_binary_cross_entropy_of_a_sigmoid_is_p_minus_y(program: str, wrt: str, accepted: list[str]) -> None:
    """p*(-y/p - (y - 1)/(1 - p))*(1 - p): distributed, its factors cancel and its like terms meet."""
    doc = diff_json("-e", program, "--wrt", wrt)
    assert doc["where"] == {}, doc
    assert_form(doc["derivative"], *accepted)


def test_mean_squared_error_coefficients_print_as_fractions_once() -> None:
    """mean over 3 points: 2/3 written once for the residual, not 0.6666666666666666 on each of its terms."""
    program = "x = [1.0, 2.0, 3.0]; y = [2.0, 4.0, 7.0]; w = 0.5; b = 0.1; L = mean((w*x + b - y)^2)"
    doc = diff_json("-e", program, "--wrt", "w")
    assert_form(doc["derivative"], "sum(2/3*x*(b + w*x - y))")
    x, y = np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 7.0])
    assert doc["value"] == pytest.approx(float(np.mean(2 * (0.5 * x + 0.1 - y) * x)), rel=1e-14)
    latex = diff_json("-e", program, "--wrt", "w", "--latex")["latex"]
    assert r"\frac{2}{3} x \left(b + w x - y\right)" in latex, latex


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.floats(-1e4, 1e4, allow_nan=False), st.builds(lambda p, q: p / q, st.integers(-5000, 5000),
                                                                  st.integers(1, 150))))
def test_fraction_found_as_python_s_fractions_would(value: float) -> None:
    """ratio() walks the continued fraction in floats; Fraction.limit_denominator does it exactly. Fifths, tenths,
    twentieths... stay decimals; with decimal (diff --decimal) so does every short decimal (0.5)."""
    from fractions import Fraction

    from gradcalc.engine.symbolic import ratio

    best = Fraction(value).limit_denominator(100)
    exact = best.denominator not in (1, 5, 10, 20, 25, 50, 100) and best.numerator / best.denominator == value
    expected = (best.numerator, best.denominator) if exact else None
    assert ratio(value) == expected
    assert ratio(value, decimal=True) == (expected if len(repr(abs(value))) > 8 else None)


@pytest.mark.parametrize(("value", "text"), [
    (2 / 3, "2/3"), (-2 / 3, "-2/3"), (1 / 7, "1/7"), (5 / 12, "5/12"), (0.5, "1/2"), (0.1, "0.1"), (3.0, "3"),
    (1.25, "5/4"), (0.03, "0.03"), (0.2, "0.2"), (0.05, "0.05"),
    (0.6666666666666667, "0.6666666666666667"),  # not the double 2/3 gives: kept exact
    (1 / 101, repr(1 / 101)),  # a denominator past 100: a decimal
])
def test_coefficients_print_as_short_exact_fractions(value: float, text: str) -> None:
    from gradcalc.engine.symbolic import coefficient

    assert coefficient(value) == text
    assert eval(text) == value  # the printed text is the same double


def test_softmax_cross_entropy_is_softmax_minus_t() -> None:
    """-sum(t*log(softmax(z))): p*sum(t) - t, which is p - t for a one-hot t (said with the text:
    tests/test_words.py has t that sums to other numbers), with no ones(3) or sum(-t) left over."""
    program = "z = [2.0, 1.0, 0.1]; t = [1, 0, 0]; L = -sum(t*log(softmax(z)))"
    doc = diff_json("-e", program, "--wrt", "z")
    assert_form(doc["derivative"], "softmax(z, axis=0) - t")
    assert doc["given"] == ["sum(t) = 1"]
    z = np.array([2.0, 1.0, 0.1])
    p = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(doc["value"], p - [1, 0, 0], rtol=1e-12)


def test_broadcast_gradient_of_a_sum_has_no_times_one() -> None:
    """∂sum(x)/∂x is a tensor of ones: printed without a leftover `1*`."""
    doc = diff_json("-e", "x = [1., 2., 3.]; y = sum(x)", "--wrt", "x")
    assert_simplified(doc["derivative"])
    assert_close(program_value(derivative_source(doc["derivative"], doc["where"], {"x": [1, 2, 3]}), {}, "D_"),
                 np.ones(3), "∂sum(x)/∂x")


# --- the seeds' toy network --------------------------------------------------------------------------

NEURON_VALUES = {"a": 2.0, "w1": 3.0, "w2": -1.0, "w3": 0.5, "w4": 4.0}


@pytest.mark.parametrize(("wrt", "accepted", "value", "latex"), [
    ("w1", ["-(w3*a)"], -1.0, "-a w_{3}"),
    ("w2", ["-(w4*a)"], -8.0, "-a w_{4}"),
    ("w3", ["-(w1*a)"], -6.0, "-a w_{1}"),
    ("w4", ["-(w2*a)"], 2.0, "-a w_{2}"),
    ("a", ["-(w3*w1 + w4*w2)"], 2.5, "-w_{1} w_{3} - w_{2} w_{4}"),
])
def test_neuron_derivatives_in_the_leaves(wrt: str, accepted: list[str], value: float, latex: str) -> None:
    doc = diff_json(NEURON, "--of", "L", "--wrt", wrt)
    assert doc["of"] == "L" and doc["wrt"] == wrt
    assert_form(doc["derivative"], *accepted)
    assert doc["value"] == pytest.approx(value)
    assert_latex_form(doc["latex"], latex)
    # the printed text, evaluated at other values, is still the derivative
    other = {"a": -1.3, "w1": 0.7, "w2": 2.1, "w3": -0.4, "w4": 1.9}
    text = (REPO / "samples" / "neuron.eq").read_text()
    got = program_value(derivative_source(doc["derivative"], doc["where"], other), {}, "D_")
    assert_close(got, fd_gradient(text, other, "L", wrt), f"∂L/∂{wrt} = {doc['derivative']}")


def test_neuron_intermediate_and_text_view() -> None:
    doc = diff_json(NEURON, "--wrt", "d")
    assert_form(doc["derivative"], "-1")
    result = run_cli("diff", NEURON, "--of", "L", "--wrt", "w1")
    assert result.exit_code == 0, result.output
    assert_no_traceback(result)
    assert re.search(r"∂L/∂w1 = (-a\*w3|-w3\*a|-\(w3\*a\)|-\(a\*w3\))", result.stdout), result.stdout
    assert "-1" in result.stdout  # its value at the program's values


def test_neuron_several_derivatives_json_shape() -> None:
    doc = diff_json(NEURON, "--wrt", "w1,a")
    assert set(doc) == {"of", "derivatives"} and doc["of"] == "L"
    assert [e["wrt"] for e in doc["derivatives"]] == ["w1", "a"]
    for entry in doc["derivatives"]:
        assert {"of", "wrt", "derivative", "latex", "where", "evaluable", "value"} <= set(entry)
        assert isinstance(entry["derivative"], str) and isinstance(entry["latex"], str)
        assert isinstance(entry["where"], dict) and entry["evaluable"] is True
    assert [e["value"] for e in doc["derivatives"]] == pytest.approx([-1.0, 2.5])


# --- LaTeX golden tests ---------------------------------------------------------------------------


@pytest.mark.parametrize(("program", "wrt", "expected"), [
    ("y = x^2*sin(x)", "x", r"2 x \sin\left(x\right) + x^{2} \cos\left(x\right)"),
    ("y = 1/x", "x", r"-\frac{1}{x^{2}}"),
    ("y = log(x)", "x", r"\frac{1}{x}"),
    ("y = exp(2*x)", "x", r"2 e^{2 x}"),
    ("y = tanh(x)", "x", r"1 - \tanh\left(x\right)^{2}"),
    ("y = sigmoid(x)", "x", r"\sigma\left(x\right) \left(1 - \sigma\left(x\right)\right)"),
    ("y = w1^3", "w1", r"3 w_{1}^{2}"),
    ("y = θ^2 * x_max", "θ", r"2 x_{max} \theta"),
    ("y = θ^2 * x_max", "x_max", r"\theta^{2}"),
    ("y = exp(-x^2)", "x", r"-2 x e^{-x^{2}}"),
    ("y = 2^x", "x", r"\ln 2 \cdot 2^{x}"),  # ln 2 by name, not 0.6931471805599453
])
def test_latex_golden(program: str, wrt: str, expected: str) -> None:
    doc = diff_json("-e", program, "--wrt", wrt)
    assert_latex_form(doc["latex"], expected)


def test_latex_of_a_second_derivative_matches_the_readme() -> None:
    result = run_cli("diff", "-e", "y = x^2 * sin(x)", "--wrt", "x", "--set", "x=2", "--order", "2", "--latex")
    assert result.exit_code == 0, result.output
    first = result.stdout.splitlines()[0]
    head, _, body = first.partition(" = ")
    assert head == r"\frac{\partial^{2} y}{\partial x^{2}}", first
    assert_latex_form(body, r"-x^{2} \sin\left(x\right) + 4 x \cos\left(x\right) + 2 \sin\left(x\right)")
    assert "-5.14777" in result.stdout


@pytest.mark.parametrize("program", ["y = exp(x)^3", "y = exp(x)/(1 + exp(x))", "y = x/(1 + x^2)",
                                     "y = sqrt(1 + x^2)^3", "y = sigmoid(x)^2", "y = 1/(1 + exp(-x))"])
def test_latex_is_well_formed_and_means_the_derivative(program: str) -> None:
    """No double superscripts (`e^{x}^{3}` is a TeX error), and the LaTeX reads back as the derivative."""
    sp = sympy_module()
    (result,) = api_diff(program, {"x": 0.3}, "y", ["x"])
    reading = sympy_of_latex(result.latex, [(n, latex) for n, _, latex in result.where])
    x = sp.Symbol("x")
    expected = sp.diff(sympy_of_text(program.split("=", 1)[1], [], ["x"]), x)
    for point in (-0.8, 0.3, 1.1):
        assert float(sp.N(reading.subs(x, point))) == pytest.approx(float(sp.N(expected.subs(x, point))), rel=1e-9)


# --- the printed text is gradcalc syntax: `gradcalc eval -e` evaluates it ----------------------------


@pytest.mark.parametrize(("program", "of", "wrt", "values"), [
    ("y = x^2 * sin(x)", "y", "x", {"x": 2.0}),
    ("y = x/(1 + x^2)", "y", "x", {"x": 0.8}),
    ("u = tanh(w*x + b); v = u*u*w; L = exp(-v) + v*u", "L", "w", {"x": 0.4, "w": -1.2, "b": 0.3}),
    ("u = tanh(w*x + b); v = u*u*w; L = exp(-v) + v*u", "L", "x", {"x": 0.4, "w": -1.2, "b": 0.3}),
    ("p = sigmoid(a*b); q = log(1 + p^2); L = q*p - q/p", "L", "a", {"a": 0.9, "b": -0.6}),
    ("y = (x - 1)^2/3 + (x + 2)^2/3 + x^3/7 - x^(2/3)", "y", "x", {"x": 0.7}),  # printed with fractions
    ("y = (2*x/3 + w/3)^3", "y", "x", {"x": 0.7, "w": -0.4}),
])
def test_printed_derivative_evaluates_with_gradcalc_eval(program: str, of: str, wrt: str,
                                                        values: dict[str, float]) -> None:
    sets = [item for name, value in values.items() for item in ("--set", f"{name}={value}")]
    doc = diff_json("-e", program, "--of", of, "--wrt", wrt, *sets)
    source = derivative_source(doc["derivative"], doc["where"], values)
    evaluated = json_ok("eval", "-e", source)
    got = evaluated["values"]["D_"]
    expected = fd_gradient(program, values, of, wrt)
    assert_close(got, expected, f"{source}")
    assert doc["value"] == pytest.approx(float(expected), rel=1e-5)


def test_text_view_shows_the_where_parts() -> None:
    program = "u = tanh(w*x + b); v = u*u*w; L = exp(-v) + v*u"
    doc = diff_json("-e", program, "--of", "L", "--wrt", "x", "--set", "x=0.4", "--set", "w=-1.2", "--set", "b=0.3")
    assert doc["where"], "a derivative with a repeated subexpression names it"
    result = run_cli("diff", "-e", program, "--of", "L", "--wrt", "x", "--set", "x=0.4", "--set", "w=-1.2",
                     "--set", "b=0.3")
    assert result.exit_code == 0, result.output
    assert f"∂L/∂x = {doc['derivative']}" in result.stdout
    for name, body in doc["where"].items():
        assert re.search(rf"(where)?\s+{name} = {re.escape(body)}\s*$", result.stdout, re.M), result.stdout


# --- determinism ----------------------------------------------------------------------------------


def test_same_text_twice_in_process() -> None:
    program = "u = tanh(w*x + b); v = u*u*w + sin(u*x); L = exp(-v) + v*u"
    args = ("diff", "-e", program, "--of", "L", "--json")
    first, second = run_cli(*args), run_cli(*args)
    assert first.exit_code == 0 and first.stdout == second.stdout
    latex = ("diff", "-e", program, "--of", "L", "--latex")
    assert run_cli(*latex).stdout == run_cli(*latex).stdout


@pytest.mark.slow
def test_same_text_under_different_hash_seeds() -> None:
    program = "u = tanh(w*x + b); v = u*u*w + sin(u*x) + cos(b*w); L = exp(-v) + v*u + w*x*b"
    outputs = []
    for seed in ("0", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed, "NO_COLOR": "1", "COLUMNS": "120"}
        done = subprocess.run([sys.executable, "-m", "gradcalc", "diff", "-e", program, "--of", "L", "--json"],
                              capture_output=True, text=True, env=env, cwd=REPO, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        outputs.append(strict_json(done.stdout))
    assert outputs[0] == outputs[1]


# --- second derivatives ---------------------------------------------------------------------------


def test_second_derivatives_against_closed_forms() -> None:
    program = "f = x^2*y + sin(x*y)"
    closed = {
        ("x", "x"): lambda x, y: 2 * y - y * y * math.sin(x * y),
        ("x", "y"): lambda x, y: 2 * x + math.cos(x * y) - x * y * math.sin(x * y),
        ("y", "x"): lambda x, y: 2 * x + math.cos(x * y) - x * y * math.sin(x * y),
        ("y", "y"): lambda x, y: -x * x * math.sin(x * y),
    }
    doc = diff_json("-e", program, "--wrt", "x,y", "--order", "2", "--set", "x=0.7", "--set", "y=-0.4")
    entries = doc["derivatives"]
    assert [tuple(e["wrt"]) for e in entries] == list(closed)
    for entry in entries:
        formula = closed[tuple(entry["wrt"])]
        assert entry["value"] == pytest.approx(formula(0.7, -0.4), rel=1e-9)
        for x, y in ((0.7, -0.4), (-1.3, 0.9), (2.1, 1.7)):
            got = program_value(derivative_source(entry["derivative"], entry["where"], {"x": x, "y": y}), {}, "D_")
            assert float(got) == pytest.approx(formula(x, y), rel=1e-9, abs=1e-12), entry


def test_second_derivative_golden_and_value() -> None:
    doc = diff_json("-e", "y = x^2 * sin(x)", "--wrt", "x", "--order", "2", "--set", "x=2")
    assert doc["wrt"] == ["x", "x"]
    assert_form(doc["derivative"], "2*sin(x) + 4*x*cos(x) - x^2*sin(x)")
    assert doc["value"] == pytest.approx(2 * math.sin(2) + 8 * math.cos(2) - 4 * math.sin(2), rel=1e-12)


@pytest.mark.parametrize(("program", "pairs"), [
    ("f = w*x", {("x", "x"): "0", ("x", "w"): "1", ("w", "x"): "1", ("w", "w"): "0"}),
    ("f = x^3 + w", {("x", "x"): "6*x", ("x", "w"): "0", ("w", "x"): "0", ("w", "w"): "0"}),
    ("f = exp(x*w)", {("x", "x"): "w^2*exp(x*w)", ("x", "w"): "exp(x*w) + x*w*exp(x*w)",
                      ("w", "x"): "exp(x*w) + x*w*exp(x*w)", ("w", "w"): "x^2*exp(x*w)"}),
])
def test_second_derivative_simple_closed_forms(program: str, pairs: dict[tuple[str, str], str]) -> None:
    doc = diff_json("-e", program, "--wrt", "x,w", "--order", "2")
    for entry in doc["derivatives"]:
        expected = pairs[tuple(entry["wrt"])]
        point = {"x": 0.45, "w": -0.8}
        got = program_value(derivative_source(entry["derivative"], entry["where"], point), {}, "D_")
        want = program_value(f"x = {point['x']}; w = {point['w']}; E_ = {expected}", {}, "E_")
        assert float(got) == pytest.approx(float(want), rel=1e-9, abs=1e-12), (entry, expected)
        if expected in ("0", "1", "6*x"):
            assert_form(entry["derivative"], expected)
        assert "value" not in entry  # no --set: differentiated at a placeholder point, no value


# --- shared subexpressions keep the text linear --------------------------------------------------------


def chain(n: int) -> str:
    lines = ["x = 0.4", "w = 0.8", "y0 = x"]
    lines += [f"y{i} = tanh(w*y{i - 1} + x) + 0.1*y{i - 1}^2" for i in range(1, n + 1)]
    return "\n".join(lines)


def printed_size(doc: Mapping[str, Any]) -> int:
    return len(doc["derivative"]) + sum(len(k) + len(v) for k, v in doc["where"].items())


def test_shared_subexpressions_keep_a_long_chain_linear() -> None:
    sizes = {}
    for n in (100, 300):
        doc = diff_json("-e", chain(n), "--of", f"y{n}", "--wrt", "x")
        sizes[n] = printed_size(doc)
        assert doc["where"], "a chain's derivative names its shared parts"
        assert_simplified(doc["derivative"])
    # linear growth is 3x (a little more for longer t-names); quadratic would be 9x, exponential far more
    assert sizes[300] <= 4 * sizes[100], sizes


@pytest.mark.slow
def test_long_chain_derivative_text_still_evaluates_right() -> None:
    n = 300
    text = chain(n)
    doc = diff_json("-e", text, "--of", f"y{n}", "--wrt", "x,w")
    for entry in doc["derivatives"]:
        name = entry["wrt"]
        values = {"x": 0.4, "w": 0.8}
        got = program_value(derivative_source(entry["derivative"], entry["where"], values), {}, "D_")
        assert_close(got, fd_gradient(text, values, f"y{n}", name), f"∂y{n}/∂{name}", rtol=1e-5)
        assert entry["value"] == pytest.approx(float(got), rel=1e-9)


# --- --keep and --in-terms-of intermediates --------------------------------------------------------

KEEP_PROGRAM = "x = 0.7; w = 1.3\nu = sin(x*w)\nv = u*u + x\nL = exp(v) * w"


def keep_values(x: float, w: float) -> dict[str, float]:
    u = math.sin(x * w)
    return {"x": x, "w": w, "u": u, "v": u * u + x}


def uses(text: str, name: str) -> bool:
    return re.search(rf"(?<![\w.]){name}(?![\w(])", text) is not None


@pytest.mark.parametrize(("options", "kept", "expanded"), [
    (("--keep", "v"), ["v"], ["u"]),
    (("--keep", "u,v"), ["u", "v"], []),
    (("--keep", "u", "--keep", "v"), ["u", "v"], []),
    (("--in-terms-of", "intermediates"), ["u", "v"], []),
    (("--in-terms-of", "leaves"), [], ["u", "v"]),
])
def test_kept_intermediates_stay_symbols_and_evaluate_right(options: tuple[str, ...], kept: list[str],
                                                             expanded: list[str]) -> None:
    doc = diff_json("-e", KEEP_PROGRAM, "--of", "L", "--wrt", "x", *options)
    everything = doc["derivative"] + " " + " ".join(doc["where"].values())
    for name in kept:
        assert uses(everything, name), f"{name} should be kept as a symbol: {doc}"
    for name in expanded:
        assert not uses(everything, name), f"{name} should be expanded into the leaves: {doc}"
    if "u" in kept:
        assert "sin(" not in everything, doc
    for x, w in ((0.7, 1.3), (-0.35, 0.6), (1.2, -0.9)):
        values = keep_values(x, w)
        given_values = {k: values[k] for k in ("x", "w", *kept)}
        got = program_value(derivative_source(doc["derivative"], doc["where"], given_values), {}, "D_")
        assert_close(got, fd_gradient(KEEP_PROGRAM, {"x": x, "w": w}, "L", "x"), f"{options}: {doc['derivative']}")
    assert doc["value"] == pytest.approx(float(fd_gradient(KEEP_PROGRAM, {"x": 0.7, "w": 1.3}, "L", "x")), rel=1e-6)


def test_keep_through_the_api_and_for_the_neuron() -> None:
    (result,) = api_diff(KEEP_PROGRAM, {}, "L", ["w"], keep=["v"])
    assert uses(result.text, "v"), result.text
    for options in (("--in-terms-of", "intermediates"), ("--keep", "b")):
        doc = diff_json(NEURON, "--wrt", "w3", *options)
        assert uses(doc["derivative"] + " " + " ".join(doc["where"].values()), "b"), doc  # ∂L/∂w3 = -b, b kept
        assert doc["value"] == pytest.approx(-6.0)
        for b in (6.0, -2.5, 0.75):  # with b given any value, the text is -b
            values = {**NEURON_VALUES, "b": b}
            got = program_value(derivative_source(doc["derivative"], doc["where"], values), {}, "D_")
            assert float(got) == pytest.approx(-b), (options, doc)


def test_kept_node_gradient_is_written_in_front_as_the_chain_rule_reads() -> None:
    """∂L/∂a with d kept: dL_dd*(w1*w3 + w2*w4), ∂L/∂d times ∂d/∂a, not dL_dd*w1*w3 + dL_dd*w2*w4."""
    doc = diff_json(NEURON, "--wrt", "a", "--keep", "d", "--latex")
    assert_form(doc["derivative"], "dL_dd*(w1*w3 + w2*w4)")
    assert doc["latex"].startswith(r"dL_{dd} \left(") or r"} = dL_{dd} \left(" in doc["latex"], doc["latex"]
    for d_grad in (-1.0, 2.0):  # the text means ∂L/∂d times ∂d/∂a for any ∂L/∂d
        values = {**NEURON_VALUES, "dL_dd": d_grad}
        got = program_value(derivative_source(doc["derivative"], {}, values), {}, "D_")
        assert float(got) == pytest.approx(d_grad * (3 * 0.5 + (-1) * 4)), doc


# --- tensors -------------------------------------------------------------------------------------


def test_sum_of_squares_is_two_x() -> None:
    doc = diff_json("-e", "x = [1., -2., 3.]; y = sum(x*x)", "--wrt", "x")
    assert_form(doc["derivative"], "2*x")
    assert doc["value"] == pytest.approx([2.0, -4.0, 6.0])


W_VALUE = [[0.3, -1.2], [0.8, 0.5], [-0.4, 0.9]]
X_VALUE = [0.7, -0.6]

TENSOR_CASES = {
    "tanh layer": ("y = sum(tanh(W @ x))", {"W": W_VALUE, "x": X_VALUE}),
    "sigmoid layer": ("y = sum(sigmoid(W @ x + b)^2)", {"W": W_VALUE, "x": X_VALUE, "b": [0.1, -0.2, 0.3]}),
    "matrix product": ("y = sum((A @ B)^2)", {"A": [[1., 2.], [0.5, -1.]], "B": [[0.3, 2.], [1.5, -1.]]}),
    "broadcast add": ("y = sum((A + v)^2)", {"A": [[1., 2., 3.], [0.5, -1., 2.]], "v": [1., -2., 0.5]}),
    "column broadcast": ("y = sum((A * c)^2)", {"A": [[1., 2., 3.], [0.5, -1., 2.]], "c": [[2.], [3.]]}),
    "sum over an axis": ("y = sum(sum(A*A, axis=0) * v)", {"A": [[1., 2., 3.], [0.5, -1., 2.]],
                                                           "v": [1., -2., 0.5]}),
    "mean over an axis": ("y = sum(mean(A, axis=1)^2)", {"A": [[1., 2., 3.], [0.5, -1., 2.]]}),
    "softmax": ("y = sum(softmax(x) * v)", {"x": [1., 2., 3.], "v": [1., -2., 0.5]}),
    "logsumexp": ("y = logsumexp(x)", {"x": [1., 2., 3.]}),
    "prod": ("y = prod(x)", {"x": [1., 2., 3.]}),
    "norm": ("y = norm(x)", {"x": [1., 2., 3.]}),
    "det": ("y = det(A)", {"A": [[1., 2.], [0.5, -1.]]}),
    "stack": ("y = sum([a, 2*a, a^2] * v)", {"a": 1.5, "v": [1., -2., 0.5]}),
    "one-hot index": ("y = x[1]^2 + x[0]", {"x": [1., 2., 3.]}),
    "scalar times a tensor": ("y = sum(exp(a * ones(3)))", {"a": 0.5}),
    "dot": ("y = dot(x, x)", {"x": [1., 2., 3.]}),
    "vector @ matrix": ("y = sum(x @ A)", {"x": [1., 2.], "A": [[1., 2., 3.], [0.5, -1., 2.]]}),
    "inverse": ("y = sum(inv(A))", {"A": [[1., 2.], [0.5, -1.]]}),
    "dense layer (an outer product)": ("y = sum(tanh(W @ x + b)^2)",
                                       {"W": [[0.1, 0.2], [0.3, 0.4], [-0.5, 0.6]], "x": [1., 2.], "b": [0., 1., -1.]}),
}


def test_dense_layer_weight_gradient_prints_as_an_outer_product() -> None:
    """∂L/∂W of tanh(W @ x) is δ xᵀ: outer(δ, x) in text, δ x^{T} in LaTeX, not reshape(δ, [n, 1]) @ reshape(x, ...)."""
    program = "x = [1.0, 2.0]; W = [[0.1, 0.2], [0.3, 0.4]]; h = tanh(W @ x); L = sum(h^2)"
    doc = diff_json("-e", program, "--wrt", "W", "--latex")
    assert doc["derivative"].startswith("outer(") and doc["derivative"].endswith(", x)"), doc["derivative"]
    assert "reshape" not in doc["derivative"]
    assert doc["latex"].endswith("x^{T}"), doc["latex"]


FACTORED_CASES = [
    # (program, wrt, the derivative as printed, its LaTeX): a factor of every term is written once, after the sum
    ("x = [1.0, -2.0, 0.5]; w = [0.1, 0.2, -0.3]; b = 0.05; y = 1; p = sigmoid(dot(w, x) + b); "
     "L = -(y*log(p) + (1 - y)*log(1 - p))", "w", "(sigmoid(b + w @ x) - y)*x",
     r"\left(\sigma\left(b + w x\right) - y\right) x"),
    ("x = 2; a = 3; b = 4; q = 1.5; L = -x*a*q - x*b*q", "q", "-(a + b)*x", r"-\left(a + b\right) x"),
    ("x = 2; a = 3; b = 4; q = 1.5; L = x*a*q^2/2 - x*b*q", "q", "(a*q - b)*x", r"\left(a q - b\right) x"),
    ("w = [1.0, 2.0]; x = [3.0, 4.0]; L = dot(w, x)^2", "w", "2*x*(w @ x)", r"2 x \left(w x\right)"),
]


@pytest.mark.parametrize(("program", "wrt", "text", "latex"), FACTORED_CASES)
def test_common_factors_are_written_once(program: str, wrt: str, text: str, latex: str) -> None:
    """(σ(z) - y)·x, as the textbook writes the logistic regression gradient, not x*sigmoid(z) - x*y;
    a dot product's gradient without the 1×1 matrices of matmul's general rule."""
    doc = diff_json("-e", program, "--wrt", wrt, "--latex")
    assert doc["derivative"] == text
    assert doc["latex"].split(" = ", 1)[-1] == latex
    (result,) = api_diff(program, {}, "L", [wrt])
    values = {name: gradcalc.parse_program(program).run().value(name) for name in ("x", "w", "a", "b", "q", "y")
              if re.search(rf"\b{name} = ", program)}
    assert_close(evaluate_derivative(result, values), fd_gradient(program, values, "L", wrt), f"∂L/∂{wrt} = {text}")


@pytest.mark.parametrize("case", list(TENSOR_CASES))
def test_tensor_derivative_text_evaluates_to_the_gradient(case: str) -> None:
    """Each printed tensor derivative, evaluated by gradcalc, has the gradient's shape and values."""
    body, values = TENSOR_CASES[case]
    text = "\n".join(f"{name} = {literal(value)}" for name, value in values.items()) + "\n" + body
    names = list(values)
    results = api_diff(text, {}, "y", names)
    for name, result in zip(names, results):
        expected = fd_gradient(text, values, "y", name)
        assert_close(result.value, expected, f"{case}: the value of ∂y/∂{name}")
        if not result.evaluable:
            assert "scatter(" in result.text + str(result.where), result.text
            continue
        try:
            got = evaluate_derivative(result, values)
        except GradcalcError as exc:
            pytest.fail(f"{case}: ∂y/∂{name} = {result.text} (evaluable) is not valid gradcalc: {exc}")
        assert_close(got, expected, f"{case}: ∂y/∂{name} = {result.text} where {result.where}")


def test_tanh_layer_wrt_x_at_random_points() -> None:
    rng = np.random.default_rng(7)
    text = "y = sum(tanh(W @ x))"
    start = {"W": rng.standard_normal((3, 2)), "x": rng.standard_normal(2)}
    (result,) = api_diff(text, start, "y", ["x"])
    for _ in range(3):
        values = {"W": rng.standard_normal((3, 2)), "x": rng.standard_normal(2)}
        W, x = values["W"], values["x"]
        closed = W.T @ (1 - np.tanh(W @ x) ** 2)
        assert_close(evaluate_derivative(result, values), closed, f"∂y/∂x = {result.text}", rtol=1e-9)


# --- control flow ----------------------------------------------------------------------------------

PATH_NOTE = re.compile(r"path", re.I)


@pytest.mark.parametrize(("program", "value", "accepted"), [
    ("x = 0.3\nif x > 0 { y = x^2 } else { y = -x }", 0.3, "2*x"),
    ("x = 0.3\nif x > 0 { y = x^2 } else { y = -x }", -0.5, "-1"),
    ("x = 0.3\ny = x\nfor i in range(2) { y = y * x }", 0.3, "3*x^2"),
    ("x = 0.3\ny = x\nwhile y < 10 { y = y * 2 }", 0.3, "64"),          # 0.3 doubled 6 times passes 10
    ("x = 0.3\ny = x\nwhile y < 10 { y = y * 2 }", 3.0, "4"),
    ("f(t) { r = -t\n if t > 0 { r = t^2 }\n return r }\nx = 0.3\ny = f(x)", 0.3, "2*x"),
    ("f(t) { r = -t\n if t > 0 { r = t^2 }\n return r }\nx = 0.3\ny = f(x)", -0.5, "-1"),
    ("x = 0.3\nno_grad { k = 1 }\nif x > 0 { y = x^3 } else { y = x }", 0.3, "3*x^2"),
], ids=["if-taken", "else-taken", "for", "while-6", "while-2", "if-in-function", "else-in-function",
        "if-after-no_grad"])
def test_control_flow_is_differentiated_along_the_executed_path_and_says_so(program: str, value: float,
                                                                             accepted: str) -> None:
    doc = diff_json("-e", program, "--of", "y", "--wrt", "x", "--set", f"x={value}")
    assert_form(doc["derivative"], accepted)
    result = run_cli("diff", "-e", program, "--of", "y", "--wrt", "x", "--set", f"x={value}")
    assert result.exit_code == 0, result.output
    assert PATH_NOTE.search(result.stdout), f"no note that only the executed path was differentiated:\n" \
                                            f"{result.stdout}"


def test_function_with_branch_local_assignments_differentiates() -> None:
    """A name assigned inside a function's branches is local to it, not a free input to give a placeholder."""
    program = "f(t) { if t > 0 { r = t^2 } else { r = -t }\n return r }\nx = 0.5\ny = f(x)"
    assert float(program_value(program, {}, "y")) == pytest.approx(0.25)  # the program itself runs
    result = run_cli("diff", "-e", program, "--of", "y", "--wrt", "x", "--json")
    assert result.exit_code == 0, result.output
    doc = strict_json(result.stdout)
    assert_form(doc["derivative"], "2*x")
    assert doc["value"] == pytest.approx(1.0)


def test_placeholder_point_omits_the_value() -> None:
    doc = diff_json("-e", "y = sin(x)*w", "--wrt", "x")
    assert "value" not in doc
    assert_form(doc["derivative"], "w*cos(x)")
    result = run_cli("diff", "-e", "y = sin(x)*w", "--wrt", "x")
    assert result.exit_code == 0 and "--set" in result.stdout, result.output
    with_values = diff_json("-e", "y = sin(x)*w", "--wrt", "x", "--set", "x=0.2", "--set", "w=3")
    assert with_values["value"] == pytest.approx(3 * math.cos(0.2))


# --- errors --------------------------------------------------------------------------------------


def test_non_scalar_output_exits_2_with_a_jacobian_hint() -> None:
    result = run_cli("diff", "-e", "x = [1., 2.]; y = x*2", "--wrt", "x")
    assert_bad_input(result)
    assert "jacobian" in result.stderr
    body = json_error(run_cli("diff", "-e", "x = [1., 2.]; y = x*2", "--wrt", "x", "--json"))
    assert "jacobian" in json.dumps(body)


@pytest.mark.parametrize("order", ["0", "-1"])
def test_unsupported_order_exits_2(order: str) -> None:
    result = run_cli("diff", "-e", "y = x^4", "--wrt", "x", "--order", order)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert_no_traceback(result)
    assert result.stdout == ""


def test_unsupported_order_through_the_api() -> None:
    run = gradcalc.parse_program("x = 0.5; y = x^4").run({})
    with pytest.raises(GradcalcError):
        run.diff("y", ["x"], order=0)


def test_unknown_keep_exits_2_and_names_it() -> None:
    result = run_cli("diff", NEURON, "--wrt", "a", "--keep", "bogus")
    assert_bad_input(result)
    assert "bogus" in result.stderr
    body = json_error(run_cli("diff", NEURON, "--wrt", "a", "--keep", "bogus", "--json"))
    assert "bogus" in body["message"]


def test_second_order_of_a_tensor_variable_exits_2() -> None:
    result = run_cli("diff", "-e", "x = [1., 2.]; y = sum(x^3)", "--wrt", "x", "--order", "2")
    assert_bad_input(result)
    assert "hessian" in result.stderr


def test_unknown_wrt_exits_2() -> None:
    assert_bad_input(run_cli("diff", NEURON, "--wrt", "w9"))


@pytest.mark.parametrize(("program", "wrt", "text", "latex"), [
    # a bias added to every row: its gradient sums the rows
    ("X = [[1, 2], [3, 4], [5, 6]]; b = [0.1, 0.2]; L = sum(tanh(X + b))", "b",
     "sum(1 - tanh(X + b)^2, axis=0)", r"\sum_{\text{axis } 0}"),
    # a column broadcast along the rows: summed over axis 1, keeping its (2, 1) shape
    ("x = [[1, 2], [3, 4]]; c = [[1], [2]]; L = sum(x * c)", "c", "sum(x, axis=1, keepdims=1)",
     r"\sum_{\text{axis } 1} x"),
    # a scalar used on every entry: the sum is linear, its coefficient comes out (not sum(-exp(x)))
    ("x = [1, 2]; q = 1.5; L = sum(-exp(x)*q)", "q", "-sum(exp(x))", r"-\sum e^{x}"),
    ("x = [1, 2]; q = 1.5; L = sum(2*exp(x)*q)", "q", "2*sum(exp(x))", r"2 \left(\sum e^{x}\right)"),
])
def test_unbroadcast_sums_print_as_plain_sums(program: str, wrt: str, text: str, latex: str) -> None:
    doc = json_ok("diff", "-e", program, "--wrt", wrt)
    assert doc["derivative"] == text
    assert latex in doc["latex"]
    again = program_value(f"{program}\nD_ = {doc['derivative']}", {}, "D_")  # the text means what it says
    np.testing.assert_allclose(again, doc["value"], rtol=1e-12)


@pytest.mark.parametrize(("program", "text", "latex"), [
    ("y = e^x", "e^x", "e^{x}"),  # not 2.718281828459045^x
    ("y = 2^x", "log(2)*2^x", r"\ln 2 \cdot 2^{x}"),
    ("y = pi*x", "pi", r"\pi"),
])
def test_constants_print_by_name(program: str, text: str, latex: str) -> None:
    doc = json_ok("diff", "-e", program, "--wrt", "x", "--set", "x=0.5")
    assert doc["derivative"] == text, doc
    assert json_ok("diff", "-e", program, "--wrt", "x", "--latex")["latex"] == latex
    value = json_ok("eval", "-e", f"x = 0.5; d = {text}")["values"]["d"]  # the text evaluates back
    assert value == pytest.approx(doc["value"], rel=1e-15)


def test_latex_keeps_an_axis_a_shape_and_brackets_comparisons() -> None:
    axis = json_ok("diff", "-e", "x = [[1.0, 2], [3, 4]]; y = sum(sum(x, axis=1)^2)", "--wrt", "x", "--latex")
    assert r"\sum_{\text{axis } 1" in axis["latex"], axis
    shape = json_ok("diff", "-e", "x = [[1.0, 2], [3, 4]]; y = sum(reshape(x, 4)^2)", "--wrt", "x", "--latex")
    assert "[2, 2]" in shape["latex"] and "[4]" in shape["latex"], shape
    named = json_ok("diff", "-e", "w_2 = 3.0; y = w_2^2", "--wrt", "w_2", "--latex")
    assert named["latex"] == "2 w_{2}", named


def test_latex_fraction_of_one_factor_has_no_brackets_below() -> None:
    latex = json_ok("diff", "-e", "y = x/(x + 1)", "--wrt", "x", "--latex")["latex"]
    assert latex.startswith(r"\frac{1}{x + 1} - "), latex
    assert r"\frac{x}{\left(x + 1\right)^{2}}" in latex, latex  # a power keeps its base's brackets


# --- numbers at the ends of the floats: infinities, NaN, subnormals, empty tensors -------------------------------

@pytest.mark.parametrize(("program", "wrt", "text", "latex", "value"), [
    # 1e309 overflows to inf: ∂(x·inf)/∂x is the constant inf (printing it was an internal error)
    ("x = 1; L = x * 1e309", "x", "inf", r"\infty", math.inf),
    ("x = 1; L = x * -1e309", "x", "-inf", r"-\infty", -math.inf),
    # ∂(x·inf - x·inf)/∂x = inf - inf, which is NaN
    ("x = 1; L = x * 1e309 - x * 1e309", "x", "nan", r"\mathrm{NaN}", math.nan),
    # ∂(y·x·inf)/∂y = inf·x, infinite at x = 1
    ("x = 1; y = 2; L = y * x * 1e309", "y", "inf*x", r"\infty x", math.inf),
])
def test_infinite_and_undefined_numbers_print_as_inf_and_nan(program: str, wrt: str, text: str, latex: str,
                                                            value: float) -> None:
    doc = json_ok("diff", "-e", program, "--wrt", wrt, "--latex")
    assert (doc["derivative"], doc["latex"]) == (text, latex), doc
    assert doc["evaluable"] is True
    expected = {math.inf: "Infinity", -math.inf: "-Infinity"}.get(value, "NaN")
    assert doc["value"] == expected, doc
    again = json_ok("eval", "-e", f"{program}\nD_ = {text}")["values"]["D_"]  # inf and nan are constants
    assert again == expected


def test_inf_and_nan_are_constants_of_the_language() -> None:
    values = json_ok("eval", "-e", "a = inf; b = -inf; c = nan; d = 1/inf; nan_ = 2")["values"]
    assert (values["a"], values["b"], values["c"], values["d"]) == ("Infinity", "-Infinity", "NaN", 0.0)
    assert json_ok("eval", "-e", "inf = 3; y = inf*2")["values"]["y"] == 6  # an assignment shadows it


@pytest.mark.parametrize("x", ["2", "1e-300", "1e300"])
def test_a_subnormal_coefficient_raised_to_a_power_is_kept_as_a_power(x: str) -> None:
    """∂(1/(1e-320·x))/∂x = -1/(1e-320·x²): 1e-320^-2 overflows, which was an internal error
    (OverflowError in the simplifier); the printed text still means the derivative."""
    doc = json_ok("diff", "-e", "L = 1/(x*1e-320)", "--wrt", "x", "--set", f"x={x}")
    again = json_ok("eval", "-e", f"x = {x}; D_ = {doc['derivative']}")["values"]["D_"]
    exponent = 320 - 2 * math.log10(float(x))  # by hand: -1/(1e-320·x²) = -10^(320 - 2·log10 x)
    if exponent > math.log10(sys.float_info.max):
        assert doc["value"] == again == "-Infinity", doc
    else:  # 1e-320 is subnormal, stored to 5 digits: 9.99989e-321
        assert doc["value"] == pytest.approx(-(10.0 ** exponent), rel=1e-4), doc
        assert again == pytest.approx(doc["value"], rel=1e-12)


@pytest.mark.parametrize(("program", "wrt", "shape", "text"), [
    ("y = -1; w = eye(0); x = y", "w", [0, 0], "zeros(0, 0)"),  # x does not depend on w
    ("y = -1; w = zeros(0, 3); x = y * 2", "w", [0, 3], "zeros(0, 3)"),
    ("w = zeros(0); x = 2 + sum(w)", "w", [0], "ones(0)"),  # ∂sum(w)/∂w is ones, here with no entries
])
def test_the_derivative_by_an_empty_tensor_has_its_shape(program: str, wrt: str, shape: list[int], text: str) -> None:
    """A tensor with no entries: ∂/∂w has w's shape and no entries, written with the shape (its LaTeX was an
    internal error: reshape of an empty matrix)."""
    for latex in ([], ["--latex"]):
        doc = json_ok("diff", "-e", program, "--wrt", wrt, *latex)
        assert doc["derivative"] == text, doc
        assert doc["value"] == []
    result = gradcalc.parse_program(program).run().diff("x", [wrt])[0]
    assert evaluate_derivative(result, {}).shape == tuple(shape)


@pytest.mark.parametrize(("program", "wrt", "text", "value"), [
    # ∂(y·x/x)/∂y = x/x: 1 where x ≠ 0, 0/0 (NaN) at x = 0; the simplifier folds x/x to 1
    ("x = 0; y = 2; L = y*x/x", "y", "nan", "NaN"),
    ("x = 2; y = 2; L = y*x/x", "y", "1", 1.0),
    # ∂(x/x)/∂x = 1/x - x/x² = 0 where x ≠ 0, inf - inf (NaN) at x = 0
    ("x = 0; L = x/x", "x", "nan", "NaN"),
    ("x = [0, 1]; L = sum(x/x)", "x", "[nan, 0]", ["NaN", 0.0]),
    # ∂(x²/x)/∂x: 1 where x ≠ 0; autograd: 2x/x - x²/x² = 0/0 - 0/0 at x = 0
    ("x = 0; L = x^2/x", "x", "nan", "NaN"),
])
def test_a_derivative_folded_to_a_constant_prints_as_its_value_where_that_is_nan(program: str, wrt: str, text: str,
                                                                               value: Any) -> None:
    """Folding x/x to 1 is right except at x = 0, where the derivative is 0/0: there the printed derivative
    is autograd's value, NaN, not the folded constant (check printed 'correct: ∂L/∂x = 0')."""
    doc = json_ok("diff", "-e", program, "--wrt", wrt)
    assert (doc["derivative"], doc["value"]) == (text, value), doc
    again = json_ok("eval", "-e", f"{program}\nD_ = {text}")["values"]["D_"]
    assert again == value  # still gradcalc syntax


def test_graph_and_explain_show_a_0_over_0_local_derivative_as_nan() -> None:
    program = "x = 0; y = 2; L = y*x/x"  # ∂L/∂y = x/x = 0/0 at x = 0
    edges = json_ok("graph", "-e", program)["edges"]
    (edge,) = [e for e in edges if e["derivative"] in ("nan", "1")]
    assert (edge["derivative"], edge["value"]) == ("nan", "NaN"), edges
    doc = json_ok("explain", "-e", program, "--wrt", "y")
    assert (doc["sum"], doc["gradient"], doc["agrees"]) == ("NaN", "NaN", True), doc  # NaN is NaN, not ≠
    assert "✓ equals" in run_cli("explain", "-e", program, "--wrt", "y").stdout


# --- long derivatives: linear time and memory ------------------------------------------------------------------

def _loop_program(steps: int) -> str:
    return f"x = 1.0001\ny = x\nfor i in range({steps}) {{ y = y * x + 0.001 }}\nL = y"


def _loop_derivative(steps: int, x: float = 1.0001, c: float = 0.001) -> float:
    """By hand: y_0 = x, y_k+1 = x·y_k + c, so y_n = x^(n+1) + c·Σ_{j<n} x^j and
    dy_n/dx = (n+1)·x^n + c·Σ_{1<=j<n} j·x^(j-1)."""
    return (steps + 1) * x ** steps + c * sum(j * x ** (j - 1) for j in range(1, steps))


def test_a_gradient_summed_over_a_loop_reads_back_as_its_closed_form() -> None:
    """∂L/∂x sums one term per step (x is used at every step); the sum is read as one sum."""
    (result,) = api_diff(_loop_program(30), {}, "L", ["x"])
    assert float(result.value) == pytest.approx(_loop_derivative(30), rel=1e-12)
    assert float(evaluate_derivative(result, {"x": 1.0001})) == pytest.approx(_loop_derivative(30), rel=1e-12)


@pytest.mark.slow
def test_a_gradient_summed_over_a_long_loop_is_read_in_linear_memory() -> None:
    """Read one addition at a time, each partial sum copied the terms before it: n² memory and time for a
    loop of n steps (5,000 steps: 20 s and 0.7 GB; 1,500: about 200 MiB). Read as one sum it is linear."""
    import tracemalloc

    run = gradcalc.parse_program(_loop_program(1500)).run()
    tracemalloc.start()
    try:
        (result,) = run.diff("L", ["x"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 40 * 2**20, f"peak {peak / 2**20:.0f} MiB reading a 1,500-step derivative"
    assert float(result.value) == pytest.approx(_loop_derivative(1500), rel=1e-9)
    assert len(result.where) > 1000  # still printed whole by diff: the steps are named t1, t2, ...


def test_a_budget_refuses_a_derivative_with_more_operations_before_reading_it() -> None:
    from gradcalc.engine.symbolic import TooLong

    run = gradcalc.parse_program(_loop_program(1000)).run()
    with pytest.raises(TooLong) as caught:
        run.diff("L", ["x"], budget=500)
    assert caught.value.operations > 500 and "gradcalc diff prints it" in caught.value.message
    (small,) = gradcalc.parse_program("x = 2; L = x^3").run().diff("L", ["x"], budget=500)
    assert small.text == "3*x^2"
