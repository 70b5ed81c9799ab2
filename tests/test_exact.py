"""Exact constants in diff (issue #23 item 3): sqrt(2), 2*e, pi/2, log(2) and 1/sqrt(3) print as written, not
as digits; --decimal prints the digits; every printed form (text and LaTeX) evaluates to the derivative."""

from __future__ import annotations

import math
import random
import warnings

import pytest
from helpers import examples, json_ok
from hypothesis import given, settings
from hypothesis import strategies as st

import gradcalc
from gradcalc.engine.symbolic import exact

# (program, derivative, its LaTeX, with --decimal): written by hand.
CASES = [
    ("y = sqrt(2)*x^2", "2*sqrt(2)*x", r"2 \sqrt{2} x", "2.8284271247461903*x"),
    ("y = 2*e*x", "2*e", "2 e", "5.43656365691809"),
    ("y = pi*x^2/2", "pi*x", r"\pi x", "pi*x"),  # pi and e alone are names with --decimal too, as before
    ("y = x/sqrt(3)", "1/sqrt(3)", r"\frac{1}{\sqrt{3}}", "0.5773502691896258"),
    ("y = log(2)*x", "log(2)", r"\ln 2", "log(2)"),
    ("y = exp(1)*x", "e", "e", "e"),
    ("y = sqrt(8)*x", "2*sqrt(2)", r"2 \sqrt{2}", "2.8284271247461903"),
    ("y = sqrt(2)*x/2", "sqrt(2)/2", r"\frac{\sqrt{2}}{2}", "0.7071067811865476"),
    ("y = x/sqrt(2)", "1/sqrt(2)", r"\frac{1}{\sqrt{2}}", "0.7071067811865475"),  # one bit apart: as written
    ("y = x/sqrt(2) + sqrt(2)*x/2", "sqrt(2)", r"\sqrt{2}", "1.414213562373095"),  # the short form, not 2/sqrt(2)
    ("y = 3*pi*x^2/7", "6*pi/7*x", r"\frac{6 \pi}{7} x", "2.6927937030769655*x"),
    ("y = 2^(1/3)*x^2", "2*2^(1/3)*x", r"2 \sqrt[3]{2} x", "2.5198420997897464*x"),
    ("y = x/pi^2", "1/pi^2", r"\frac{1}{\pi^{2}}", "0.10132118364233778"),
    ("y = sqrt(2)*x^3/3 - e*x", "sqrt(2)*x^2 - e", r"\sqrt{2} x^{2} - e",
     "1.414213562373095*x^2 - e"),  # sqrt(2)*3/3 is a bit off sqrt(2): the digits are what autograd made
    ("y = pi*sin(x) + pi*x", "pi*(cos(x) + 1)", r"\pi \left(\cos\left(x\right) + 1\right)",
     "pi*(cos(x) + 1)"),  # written once, as a fraction shared by every term is
    # no constant where the program wrote none: decimals and other numbers keep their digits
    ("y = 1.4142*x", "1.4142", "1.4142", "1.4142"),
    ("y = 0.1*x^2", "0.2*x", r"0.2 x", "0.2*x"),
    ("y = cos(1)*x", "0.5403023058681398", "0.5403023058681398", "0.5403023058681398"),
]


def autodiff(program: str, x: float) -> float:
    (result,) = gradcalc.parse_program(program).run({"x": x}).diff(None, ["x"], 1)
    return float(result.value)


def evaluated(text: str, x: float) -> float:
    """The text run as a program of its own, at x (a literal: a constant derivative reads no x)."""
    return float(gradcalc.parse_program(f"x = {x!r}; d = {text}").run({}).value("d"))


@pytest.mark.parametrize(("program", "text", "latex", "decimal"), CASES)
def test_constants_print_exactly_and_decimal_prints_digits(program: str, text: str, latex: str, decimal: str) -> None:
    doc = json_ok("diff", "-e", program, "--wrt", "x")
    assert (doc["derivative"], doc["latex"]) == (text, latex)
    assert json_ok("diff", "-e", program, "--wrt", "x", "--decimal")["derivative"] == decimal
    rng = random.Random(program)
    for x in [rng.uniform(-3, 3) for _ in range(4)]:
        want = autodiff(program, x)
        for form in (text, decimal):
            assert evaluated(form, x) == pytest.approx(want, rel=1e-14, abs=1e-300), (form, x)


@pytest.mark.parametrize(("program", "latex"), [(c[0], c[2]) for c in CASES])
def test_latex_reads_back_to_the_derivative(program: str, latex: str) -> None:
    """check reads the LaTeX (\\sqrt{2}, \\pi, e, \\ln 2, \\sqrt[3]{2}) as the number it prints."""
    doc = json_ok("check", "-e", program, "--set", "x=1.3", "--claim", rf"\frac{{\partial y}}{{\partial x}} = {latex}")
    assert doc["passed"], doc


def test_text_output_and_a_where_definition() -> None:
    """The plain text output and a named intermediate's definition print the same exact forms."""
    doc = json_ok("diff", "-e", "u = sqrt(3)*x; y = u^2 + u*sin(u)", "--wrt", "x")
    assert "sqrt(3)" in doc["derivative"] + "".join(doc["where"].values()), doc
    assert "1.7320508075688772" not in str(doc), doc


_PYTHON = {"sqrt": math.sqrt, "pi": math.pi, "e": math.e, "log": math.log}


def _python(text: str) -> float:
    return float(eval(text.replace("^", "**"), {"__builtins__": {}}, _PYTHON))


_CONSTANTS = st.sampled_from([math.sqrt(2), math.sqrt(3), math.sqrt(5), math.sqrt(6), math.pi, math.e,
                              math.log(2), math.pi ** 2, math.sqrt(2 * math.pi), 3 ** (1 / 3)])


@settings(max_examples=examples(300), deadline=None)
@given(st.integers(1, 999), st.integers(1, 60), _CONSTANTS, st.booleans())
def test_multiples_of_constants_are_found_and_print_the_same_number(p: int, q: int, constant: float,
                                                                     inverse: bool) -> None:
    value = p / (q * constant) if inverse else p * constant / q
    form = exact(value)
    assert form is not None, value
    assert math.isclose(_python(form.text), value, rel_tol=5e-16), (form, value)


@settings(max_examples=examples(300), deadline=None)
@given(st.floats(1e-6, 1e6))
def test_any_form_found_is_the_same_number(value: float) -> None:
    """Most doubles have no exact form; where one is found, it is the number (to a few units in the last place)."""
    form = exact(value)
    if form is not None:
        assert math.isclose(_python(form.text), value, rel_tol=1e-15), (form, value)


@pytest.mark.parametrize("value", [0.1, 0.3, 1.4142, 2.718, 3.14159, 0.5403023058681398, 1e-7, 123456.789,
                                   1.7e308, 5e-324])  # the last two overflow and underflow: no warning either
def test_decimals_and_other_numbers_have_no_exact_form(value: float) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert exact(value) is None
