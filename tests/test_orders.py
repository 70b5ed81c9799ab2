"""Derivatives of any order (diff --order N, --wrt x,y,x), Taylor polynomials and Hessian-vector products
(issue #23 item 4), against closed forms, finite differences and the Hessian."""

from __future__ import annotations

import math
import re
import time

import numpy as np
import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, assert_bad_input, examples, json_ok, run_cli
from hypothesis import HealthCheck, given, settings
from strategies import scalar_cases

import gradcalc


def fast(count: int) -> settings:
    return settings(max_examples=examples(count), deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])


def nth(program: str, at: dict[str, float], wrt: list[str], order: int = 1) -> float:
    """The derivative's value at the point, through Run.diff (the expression's value, as autograd made it)."""
    (result,) = gradcalc.parse_program(program).run(at).diff(None, wrt, order)
    return float(result.value)


def evaluated(text: str, at: dict[str, float]) -> float:
    """A printed derivative's text evaluated as a program of its own: the text itself must be right."""
    return float(gradcalc.parse_program(f"d = {text}").run(at).value("d"))


# Closed forms written by hand: the n-th derivative of each function, n = 3..6.
CLOSED = [
    ("y = exp(2*x)", lambda x, n: 2**n * math.exp(2 * x)),
    ("y = sin(x)", lambda x, n: math.sin(x + n * math.pi / 2)),
    ("y = x^7", lambda x, n: math.factorial(7) / math.factorial(7 - n) * x ** (7 - n)),
    ("y = log(x)", lambda x, n: (-1) ** (n - 1) * math.factorial(n - 1) / x**n),
    ("y = 1/(1 - x)", lambda x, n: math.factorial(n) / (1 - x) ** (n + 1)),
]


@pytest.mark.parametrize("order", [3, 4, 5, 6])
@pytest.mark.parametrize(("program", "closed"), CLOSED, ids=[c[0] for c in CLOSED])
def test_order_n_against_closed_forms(program: str, closed: object, order: int) -> None:
    x = 0.3
    run = gradcalc.parse_program(program).run({"x": x})
    (result,) = run.diff("y", ["x"], order)
    expected = closed(x, order)  # type: ignore[operator]
    assert float(result.value) == pytest.approx(expected, rel=1e-10)
    assert evaluated(result.text, {"x": x}) == pytest.approx(expected, rel=1e-9)
    assert result.wrt == ("x",) * order


@pytest.mark.parametrize("order", [3, 4, 5])
def test_order_n_against_finite_differences_of_order_n_minus_1(order: int) -> None:
    program, x, h = "y = tanh(x) * exp(sin(x)) + x^2 / (2 + cos(x))", 0.4, 1e-5
    below, above = nth(program, {"x": x - h}, ["x"], order - 1), nth(program, {"x": x + h}, ["x"], order - 1)
    assert nth(program, {"x": x}, ["x"], order) == pytest.approx((above - below) / (2 * h), rel=1e-5, abs=1e-6)


def test_mixed_partials_taken_in_any_order_are_equal() -> None:
    program, at = "z = exp(x*y) * sin(x + 2*y)", {"x": 0.3, "y": -0.7}
    values = {order: nth(program, at, list(order)) for order in ["xyx", "yxx", "xxy"]}
    assert values["xyx"] == pytest.approx(values["yxx"], rel=1e-12)
    assert values["xyx"] == pytest.approx(values["xxy"], rel=1e-12)
    # ∂³z/∂x²∂y by finite differences in y of ∂²z/∂x².
    h = 1e-5
    step = [nth(program, {"x": 0.3, "y": -0.7 + s}, ["x"], 2) for s in (-h, h)]
    assert values["xxy"] == pytest.approx((step[1] - step[0]) / (2 * h), rel=1e-6)


def test_mixed_partial_by_closed_form() -> None:
    # By hand: ∂/∂x of x³y² is 3x²y², then ∂/∂y 6x²y, ∂/∂x 12xy, ∂/∂y 12x: 18 at x = 1.5.
    assert nth("z = x^3 * y^2", {"x": 1.5, "y": 2.0}, ["x", "y", "x", "y"]) == pytest.approx(18.0)


@fast(15)
@given(scalar_cases())
def test_third_order_mixed_partials_agree_on_random_programs(case: tuple[str, list[str], list[dict[str, float]]]
                                                               ) -> None:
    program, names, points = case
    first, last = names[0], names[-1]
    orders = [[first, first, last], [first, last, first], [last, first, first]]
    values = [nth(program, points[0], order) for order in orders]
    assert values[1] == pytest.approx(values[0], rel=1e-7, abs=1e-7)
    assert values[2] == pytest.approx(values[0], rel=1e-7, abs=1e-7)


def test_higher_orders_list_each_mixed_partial_once() -> None:
    run = gradcalc.parse_program("z = x^3 * y^2").run({"x": 1.0, "y": 2.0})
    results = run.diff("z", ["x", "y"], 3)
    assert [r.wrt for r in results] == [("x", "x", "x"), ("x", "x", "y"), ("x", "y", "y"), ("y", "y", "y")]
    # 6y², 12xy, 6x², 0 at (1, 2)
    assert [float(r.value) for r in results] == [24.0, 24.0, 6.0, 0.0]


def test_cli_order_labels_and_json() -> None:
    result = run_cli("diff", "-e", "z = x^3 * y^2", "--wrt", "x,y,x")
    assert result.exit_code == EXIT_OK
    assert result.stdout.startswith("∂³z/∂x∂y∂x = 12*x*y")
    result = run_cli("diff", "-e", "y = x^5", "--wrt", "x", "--order", "4", "--latex")
    assert r"\frac{\partial^{4} y}{\partial x^{4}} = 120 x" in result.stdout
    doc = json_ok("diff", "-e", "z = x^3 * y^2", "--wrt", "x,x,y")
    assert doc["wrt"] == ["x", "x", "y"]
    assert doc["derivative"] == "12*x*y"


@pytest.mark.parametrize("args", [
    ["-e", "z = x^3 * y^2", "--wrt", "x,y,x", "--order", "2"],  # the names say order 3
    ["-e", "x = [1, 2]; z = sum(x^3)", "--wrt", "x", "--order", "3"],  # a tensor variable
    ["-e", "y = x^2", "--wrt", "x", "--order", "0"],
])
def test_bad_orders_exit_2(args: list[str]) -> None:
    assert_bad_input(run_cli("diff", *args))


# --- exact numbers in diff -------------------------------------------------------------------------

def test_rationals_stay_rationals_and_decimal_gives_decimals() -> None:
    assert json_ok("diff", "-e", "y = x^3/3 + x/2", "--wrt", "x")["derivative"] == "x^2 + 1/2"
    assert json_ok("diff", "-e", "y = x^3/3 + x/2", "--wrt", "x", "--decimal")["derivative"] == "x^2 + 0.5"
    latex = json_ok("diff", "-e", "y = 3*x^4/8 - x^2/4", "--wrt", "x")["latex"]
    assert latex == r"\frac{3}{2} x^{3} - \frac{1}{2} x", latex
    assert json_ok("diff", "-e", "y = 0.2*x^2", "--wrt", "x")["derivative"] == "0.4*x"  # a decimal as written
    # pi and e by name, and their multiples (tests/test_exact.py has sqrt(2), log(2), 1/sqrt(3) and more)
    assert json_ok("diff", "-e", "y = pi*x^2/2 + e*x", "--wrt", "x")["derivative"] == "pi*x + e"
    assert json_ok("diff", "-e", "y = pi*x^2 + 2*e*x", "--wrt", "x")["derivative"] == "2*pi*x + 2*e"


# --- Taylor ---------------------------------------------------------------------------------------

def coefficients(program: str, wrt: list[str], at: dict[str, float], order: int) -> dict[tuple[int, ...], float]:
    result = gradcalc.parse_program(program).run(at).taylor(None, wrt, order)
    return dict(result.terms)


def test_taylor_of_exp_and_sin_about_0() -> None:
    exp = coefficients("y = exp(x)", ["x"], {"x": 0.0}, 6)
    assert [exp[(k,)] for k in range(7)] == pytest.approx([1, 1, 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720], rel=1e-14)
    sin = coefficients("y = sin(x)", ["x"], {"x": 0.0}, 5)
    assert [sin[(k,)] for k in range(6)] == pytest.approx([0, 1, 0, -1 / 6, 0, 1 / 120], rel=1e-14, abs=1e-15)


def test_taylor_of_a_polynomial_is_the_polynomial_about_the_point() -> None:
    # p = x³ - 2x + 1 about 1: p(1) = 0, p'(1) = 1, p''(1)/2 = 3, p'''/6 = 1, nothing after.
    found = coefficients("p = x^3 - 2*x + 1", ["x"], {"x": 1.0}, 5)
    assert [found[(k,)] for k in range(6)] == [0, 1, 3, 1, 0, 0]
    result = run_cli("taylor", "-e", "p = x^3 - 2*x + 1", "--wrt", "x", "--at", "1", "--order", "5")
    assert result.stdout.startswith("p ≈ (x - 1) + 3*(x - 1)^2 + (x - 1)^3\n")


def test_taylor_of_two_variables() -> None:
    # exp(x)·cos(y) about (0, 0): Σ xⁱ/i! · (1 - y²/2 + ...)
    found = coefficients("z = exp(x) * cos(y)", ["x", "y"], {"x": 0.0, "y": 0.0}, 3)
    expected = {(0, 0): 1, (1, 0): 1, (0, 1): 0, (2, 0): 1 / 2, (1, 1): 0, (0, 2): -1 / 2,
                (3, 0): 1 / 6, (2, 1): 0, (1, 2): -1 / 2, (0, 3): 0}
    assert list(found) == list(expected)  # graded order, the first variable's power highest first
    assert [found[k] for k in expected] == pytest.approx(list(expected.values()), abs=1e-15)


def test_taylor_polynomial_text_is_close_to_the_function_near_the_point() -> None:
    doc = json_ok("taylor", "-e", "z = exp(x) * cos(y)", "--wrt", "x,y", "--at", "0.2,1", "--order", "6")
    assert doc["at"] == {"x": 0.2, "y": 1.0}
    near = {"x": 0.25, "y": 0.95}
    assert evaluated(doc["polynomial"], near) == pytest.approx(math.exp(0.25) * math.cos(0.95), rel=1e-9)


def test_taylor_fractions_and_decimal() -> None:
    result = run_cli("taylor", "-e", "y = exp(x)", "--wrt", "x", "--at", "0", "--order", "5")
    assert "1/120*x^5" in result.stdout
    result = run_cli("taylor", "-e", "y = exp(x)", "--wrt", "x", "--at", "0", "--order", "5", "--decimal")
    assert "0.008333333333333333*x^5" in result.stdout
    assert not re.search(r"\d/\d", result.stdout)
    # cos(1) is no fraction, however close a large denominator comes
    doc = json_ok("taylor", "-e", "y = cos(x)", "--wrt", "x", "--at", "1", "--order", "1")
    assert doc["polynomial"].startswith("0.5403023058681398 ")


@pytest.mark.parametrize("args", [
    ["-e", "z = x*y", "--wrt", "x,y", "--at", "1,2,3"],
    ["-e", "z = x*y", "--at", "1"],
    ["-e", "x = [1, 2]; z = sum(x)", "--wrt", "x"],
    ["-e", "x = [1, 2]; z = x", "--wrt", "x"],
])
def test_taylor_bad_input_exits_2(args: list[str]) -> None:
    assert_bad_input(run_cli("taylor", *args))


# --- Hessian-vector products -------------------------------------------------------------------------

@fast(25)
@given(scalar_cases())
def test_hvp_is_the_hessian_times_v_on_random_programs(case: tuple[str, list[str], list[dict[str, float]]]) -> None:
    program, names, points = case
    # The scalar names become the entries of one vector x.
    body = program[len("f = "):]
    for i, name in enumerate(names):
        body = re.sub(rf"\b{name}\b", f"x[{i}]", body)
    run = gradcalc.parse_program(f"f = {body}").run({"x": [points[0][name] for name in names]})
    v = np.linspace(-1.0, 1.5, len(names))
    hessian = run.hessian("f", ["x"]).blocks[0][0]
    assert run.hvp("f", "x", v.tolist()).hvp == pytest.approx(hessian @ v, rel=1e-9, abs=1e-9)


def test_hvp_by_closed_form_and_vector_forms() -> None:
    program = "x = [1, 2, 3]; v = [0, 1, 0]; L = sum(x^4) + sum(x[:-1] * x[1:])"
    # H = diag(12x²) + the off-diagonal ones: H·e1 = [1, 48, 1]
    assert json_ok("hvp", "-e", program, "--wrt", "x", "--vector", "v")["hvp"] == [1, 48, 1]
    assert json_ok("hvp", "-e", program, "--wrt", "x", "--vector", "[0, 1, 0]")["hvp"] == [1, 48, 1]
    assert json_ok("hvp", "-e", program, "--wrt", "x", "--vector", "ones")["hvp"] == [13, 50, 109]


@pytest.mark.parametrize("args", [
    ["-e", "x = [1, 2]; L = sum(x^2)", "--wrt", "x", "--vector", "[1, 2, 3]"],
    ["-e", "x = [1, 2]; L = x^2", "--wrt", "x", "--vector", "ones"],
    ["-e", "x = [1, 2]; L = sum(x^2)", "--wrt", "x", "--vector", "nope"],
])
def test_hvp_bad_input_exits_2(args: list[str]) -> None:
    result = run_cli("hvp", *args)
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert_bad_input(result)


@pytest.mark.slow
def test_hvp_time_is_linear_in_n() -> None:
    program = gradcalc.parse_program("x = 0\nL = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)")

    def best(n: int) -> float:
        x = np.random.default_rng(0).standard_normal(n)
        run = program.run({"x": x})
        times = []
        for _ in range(3):
            start = time.perf_counter()
            run.hvp("L", "x", x)
            times.append(time.perf_counter() - start)
        return min(times)

    small, large = best(20_000), best(200_000)
    # Linear: about 10x for 10x the size; a Hessian formed (n²) would be 100x. Generous: a shared machine.
    assert large / small < 35, (small, large)


def test_taylor_names_a_negative_centre_as_a_sum() -> None:
    """About w = -1 the terms are powers of w + 1 (as the polynomial writes them), never w - -1."""
    result = run_cli("taylor", "-e", "w = -1; y = w^3", "--wrt", "w", "--order", "3")
    assert result.exit_code == 0, result.output
    assert "powers of w + 1" in result.stdout and "- -" not in result.stdout, result.stdout
    assert "y ≈ -1 + 3*(w + 1) - 3*(w + 1)^2 + (w + 1)^3" in result.stdout, result.stdout
