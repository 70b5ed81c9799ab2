"""The statements a Python user writes: elif, a if c else b, % and //, **=, unpacking, defaults, break and continue.

Every expected number is worked out by hand in the comment beside it (or by central differences), never taken
from what gradcalc just computed. Misuse is an error in the language's style: file, line, column, caret, hint.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from helpers import EXIT_OK, central_difference, json_ok, located_error, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import expressions

import gradcalc


def run(text: str, values: dict[str, Any] | None = None) -> Any:
    return gradcalc.parse_program(text).run(dict(values or {}))


def grads(text: str, of: str, wrt: list[str]) -> dict[str, Any]:
    return run(text).grad(of=of, wrt=wrt).grads


def write(tmp_path: Any, text: str, name: str = "prog.eq") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --- elif and the conditional expression --------------------------------------------------------------

ELIF = """
x = {x}
if x > 1 {{ y = x^2 }} elif x > 0 {{ y = 3*x }} elif x > -1 {{
    y = -x
}} else {{ y = 7 }}
"""


@pytest.mark.parametrize(("x", "value", "slope"), [
    (2.0, 4.0, 4.0),    # x^2, 2x
    (0.5, 1.5, 3.0),    # 3x
    (-0.5, 0.5, -1.0),  # -x
    (-3.0, 7.0, 0.0),   # a constant: no path
])
def test_elif_takes_the_first_branch_whose_condition_holds(x: float, value: float, slope: float) -> None:
    result = run(ELIF.format(x=x)).grad(of="y", wrt=["x"])
    assert float(result.value) == value
    assert float(result.grads["x"]) == slope


def test_elif_is_else_if() -> None:
    """`elif c { }` parses to what `else if c { }` does: an if in the else branch."""
    from gradcalc.language import syntax as S
    from gradcalc.language.parser import parse

    (outer,) = parse("if a { y = 1 } elif b { y = 2 } elif c { y = 3 } else { y = 4 }").body
    assert isinstance(outer, S.If) and len(outer.orelse) == 1
    middle = outer.orelse[0]
    assert isinstance(middle, S.If) and isinstance(middle.cond, S.Name) and middle.cond.name == "b"
    inner = middle.orelse[0]
    assert isinstance(inner, S.If) and isinstance(inner.orelse[0], S.Assign) and inner.orelse[0].value.value == 4


def test_a_conditional_expression_records_only_the_branch_taken() -> None:
    text = "a = 3\nb = 5\nc = a^2 if a < b else b^3\n"
    result = run(text).grad(of="c", wrt=["a", "b"])
    assert float(result.value) == 9.0
    assert float(result.grads["a"]) == 6.0  # 2a
    assert float(result.grads["b"]) == 0.0  # the branch not taken is not in the graph
    assert "b" in result.no_path


def test_diff_says_a_conditional_expression_took_one_path(tmp_path: Any) -> None:
    out = run_cli("diff", write(tmp_path, "x = 2\ny = x^2 if x > 0 else -x\n"))
    assert out.exit_code == EXIT_OK, out.stderr
    assert "∂y/∂x = 2*x" in out.stdout and "along the path this run executed" in out.stdout


def test_conditional_expressions_nest_to_the_right() -> None:
    """a if c else b if d else e is a if c else (b if d else e), as in Python."""
    values = run("x = -2\ny = 1 if x > 0 else 2 if x > -1 else 3").values()
    assert float(values["y"]) == 3.0


def test_a_tensor_condition_points_to_where(tmp_path: Any) -> None:
    path = write(tmp_path, "x = [1, -2]\ny = x if x > 0 else -x\n")
    error = located_error(run_cli("eval", path), line=2, column=12)  # the comparison's operator
    assert "where(" in error.hint


# --- % and // ----------------------------------------------------------------------------------------

def test_remainder_and_floor_division_are_pythons() -> None:
    values = run("a = 7 % 3; b = -7 % 3; c = 7 % -3; d = 7 // 2; e = -7 // 2; f = 7.5 % 2").values()
    # Python: 7 % 3 = 1, -7 % 3 = 2, 7 % -3 = -2, 7 // 2 = 3, -7 // 2 = -4, 7.5 % 2 = 1.5
    assert [float(values[k]) for k in "abcdef"] == [1.0, 2.0, -2.0, 3.0, -4.0, 1.5]


def test_remainder_has_pytorchs_gradient_and_floor_division_none() -> None:
    """d(a % b)/da = 1, d(a % b)/db = -floor(a/b); a // b is integer-valued: no gradient (PyTorch's)."""
    result = run("a = 7.5\nb = 2\nr = a % b + a // b").grad(of="r", wrt=["a", "b"])
    assert float(result.value) == 1.5 + 3.0
    assert float(result.grads["a"]) == 1.0
    assert float(result.grads["b"]) == -3.0  # -floor(7.5/2)


def test_remainder_binds_as_multiplication() -> None:
    """% and // share * and /'s precedence, left to right: 2 + 7 % 4 * 3 is 2 + ((7 % 4) * 3)."""
    values = run("a = 2 + 7 % 4 * 3; b = 2 ^ 3 // 3; c = 17 // 4 % 3").values()
    assert [float(values[k]) for k in "abc"] == [11.0, 2.0, 1.0]


def test_augmented_power_floor_division_and_remainder() -> None:
    values = run("a = 3; a **= 2; b = 10; b //= 3; c = 10; c %= 4; d = 2; d ^= 3").values()
    assert [float(values[k]) for k in "abcd"] == [9.0, 3.0, 2.0, 8.0]


def test_augmented_power_differentiates() -> None:
    result = run("x = 3\ny = x\ny **= 3").grad(of="y", wrt=["x"])
    assert float(result.value) == 27.0 and float(result.grads["x"]) == 27.0  # 3x^2


def test_diff_writes_remainder_as_an_operator(tmp_path: Any) -> None:
    path = write(tmp_path, "a = 7.5\nb = 2\nr = a % b * b\n")
    out = run_cli("diff", path, "--wrt", "b")
    assert out.exit_code == EXIT_OK, out.stderr
    assert "a % b" in out.stdout and "floor(a/b)" in out.stdout
    latex = run_cli("diff", path, "--wrt", "b", "--latex")
    assert r"\bmod" in latex.stdout


# --- unpacking, several return values --------------------------------------------------------------------

def test_unpacking_computes_every_value_before_assigning() -> None:
    values = run("a, b = 1, 2\na, b = b, a\nc, d, = a + 10, b").values()
    assert [float(values[k]) for k in "abcd"] == [2.0, 1.0, 12.0, 1.0]


def test_unpacked_numbers_are_leaves() -> None:
    result = run("w, b = 2, 0.5\nx = 3\ny = w*x + b").grad(of="y")
    assert set(result.grads) == {"w", "b", "x"}
    assert float(result.grads["w"]) == 3.0 and float(result.grads["b"]) == 1.0 and float(result.grads["x"]) == 2.0


def test_a_tensor_unpacks_by_rows() -> None:
    """a, b = x takes x's rows, as Python iterates a NumPy array; each row's gradient goes back to its place."""
    text = "x = [[1., 2], [3, 4]]\nr0, r1 = x\ny = sum(r0 * r1)"
    result = run(text).grad(of="y", wrt=["x"])
    assert float(result.value) == 1 * 3 + 2 * 4
    assert result.grads["x"].tolist() == [[3.0, 4.0], [1.0, 2.0]]  # ∂/∂r0 = r1, ∂/∂r1 = r0


FUNCTION_PAIR = """
polar(x, y) {
    r = sqrt(x^2 + y^2)
    return r, atan2(y, x)
}
a = 3
b = 4
r, t = polar(a, b)
L = r + t
"""


def test_a_function_returns_several_values_unpacked() -> None:
    result = run(FUNCTION_PAIR).grad(of="L", wrt=["a", "b"])
    assert float(result.value) == pytest.approx(5.0 + np.arctan2(4.0, 3.0))
    # dr/da = a/r = 3/5, dt/da = -b/r² = -4/25; dr/db = 4/5, dt/db = a/r² = 3/25
    assert float(result.grads["a"]) == pytest.approx(3 / 5 - 4 / 25)
    assert float(result.grads["b"]) == pytest.approx(4 / 5 + 3 / 25)


def test_unpacking_through_every_command(tmp_path: Any) -> None:
    path = write(tmp_path, FUNCTION_PAIR)
    doc = json_ok("grad", path, "--wrt", "a")
    assert doc["grad"]["a"] == pytest.approx(3 / 5 - 4 / 25)
    jac = json_ok("jacobian", path, "--of", "r", "--wrt", "a,b")
    assert [block["jacobian"] for block in jac["blocks"]] == pytest.approx([0.6, 0.8])  # a/r, b/r
    hess = json_ok("hessian", path, "--of", "r", "--wrt", "a")
    assert hess["hessian"] == pytest.approx(16 / 125)  # b²/r³
    for command in (["diff", "--wrt", "a"], ["graph"], ["explain", "--wrt", "a"], ["eval"]):
        result = run_cli(command[0], path, *command[1:])
        assert result.exit_code == EXIT_OK, f"{command}: {result.stderr}"


# --- default arguments -----------------------------------------------------------------------------------

DEFAULTS = """
scale = 10
f(x, k=2, c=scale) = k*x + c
a = 3
y1 = f(a)
y2 = f(a, 5)
y3 = f(a, c=1)
"""


def test_defaults_fill_the_parameters_left_out() -> None:
    values = run(DEFAULTS).values()
    assert [float(values[k]) for k in ("y1", "y2", "y3")] == [16.0, 25.0, 7.0]  # 2·3+10, 5·3+10, 2·3+1


def test_a_default_that_reads_a_variable_carries_its_gradient() -> None:
    result = run(DEFAULTS).grad(of="y1", wrt=["a", "scale"])
    assert float(result.grads["a"]) == 2.0 and float(result.grads["scale"]) == 1.0


def test_a_default_that_recurses_meets_the_recursion_limit(tmp_path: Any) -> None:
    # the default is computed inside each call, so f(2) calls f(1) calls f(1) ... without end
    path = write(tmp_path, "f(a, b=f(1)) = a + b\ny = f(2)\n")
    error = located_error(run_cli("eval", path, "--max-recursion", "5"), file=path, line=1, column=8)
    assert "nested more than 5 deep" in error.message, error.message
    assert "--max-recursion" in error.hint


# --- break and continue ------------------------------------------------------------------------------------

LOOP = """
x = 1.5
s = 0
for i in range(10) {
    if i == 2 { continue }
    if i > 4 { break }
    s += x^i
}
n = 0
while 1 {
    n += 1
    if n >= 3 { break }
}
"""


def test_break_and_continue() -> None:
    # s = x^0 + x^1 + x^3 + x^4 (2 is skipped, the loop leaves at 5); n counts to 3
    result = run(LOOP).grad(of="s", wrt=["x"])
    x = 1.5
    assert float(result.value) == pytest.approx(1 + x + x**3 + x**4)
    assert float(result.grads["x"]) == pytest.approx(1 + 3 * x**2 + 4 * x**3)
    assert float(run(LOOP).values()["n"]) == 3.0


def test_break_counts_the_iterations_that_ran(tmp_path: Any) -> None:
    out = run_cli("grad", write(tmp_path, LOOP), "--of", "s")
    assert "the for loop at line 4 ran 6 times" in out.stdout  # i = 0..5
    assert "the while loop at line 10 ran 3 times" in out.stdout


def test_break_in_a_function_leaves_its_loop() -> None:
    text = "f(x) {\n  t = x\n  while 1 { t = t*2; if t > 10 { break } }\n  return t\n}\ny = f(3)\n"
    assert float(run(text).values()["y"]) == 12.0  # 3, 6, 12


def test_loop_matches_finite_differences() -> None:
    def value(point: np.ndarray) -> float:
        return float(run(LOOP.replace("x = 1.5", f"x = {float(point[()])!r}")).values()["s"])

    expected = central_difference(value, np.array(1.5))
    assert float(run(LOOP).grad(of="s", wrt=["x"]).grads["x"]) == pytest.approx(float(expected), rel=1e-6)


# --- misuse: errors in the language's style ------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "column", "words"), [
    ("x = 1\nbreak\n", 2, 1, "'break' outside a loop"),
    ("f(x) {\n  continue\n  return x\n}\n", 2, 3, "'continue' outside a loop"),
    ("f(x) {\n  break\n}\n", 2, 3, "'break' outside a loop"),  # not "never returns": the break is the mistake
    ("a, b = 1, 2, 3\n", 1, 14, "2 names but 3 values"),
    ("a, b = 1\n", 1, 8, "2 names to unpack, but the value is a single number"),
    ("a, b = [1., 2, 3]\n", 1, 8, "the value is a tensor of shape (3,)"),
    ("a, a = 1, 2\n", 1, 4, "assigned twice"),
    ("f(x) = x\nu, v = f(1)\n", 2, 8, "the value is a single number"),
    ("f(x) { return x, x }\nu, v, w = f(1)\n", 2, 11, "f returns 2 values at line 1"),
    ("f(x) { return x, x }\ny = f(1) + 1\n", 2, 5, "returns 2 values, used here as one"),
    ("u, v = sin(1)\n", 1, 8, "the value is a single number"),
    ("f(x, y=2, z) = x\n", 1, 11, "without a default follows one with a default"),
    ("f(x, y=2) = x + y\na = f()\n", 2, 5, "takes 1 to 2 arguments (x, y=…), got 0"),
    ("f(x, y=2) = x + y\na = f(1, w=3)\n", 2, 10, "no parameter 'w'"),
    ("f(x, y=2) = x + y\na = f(1, 2, 3)\n", 2, 5, "takes 1 to 2 arguments"),
    ("f(x, y=2) = x + y\na = f(1, x=3)\n", 2, 10, "got 'x' twice"),
    ("f(x, y=q) = x + y\na = f(1)\n", 1, 8, "'q' is used but never given a value"),
    ("f(x, y=2*x) = x + y\na = f(1)\n", 1, 10, "the default of 'y' reads the parameter 'x'"),
])
def test_misuse_is_a_located_error(tmp_path: Any, text: str, line: int, column: int, words: str) -> None:
    path = write(tmp_path, text)
    error = located_error(run_cli("eval", path), file=path, line=line, column=column)
    assert words in error.message, error.message
    assert error.hint


def test_keywords_are_no_names(tmp_path: Any) -> None:
    for word in ("elif", "break", "continue"):
        path = write(tmp_path, f"{word} = 1\n")
        error = located_error(run_cli("eval", path), line=1, column=1)
        assert "keyword" in error.message or "statement" in error.message, error.message


# --- random programs: each statement form against the plain program it stands for -----------------------------

POINT = st.tuples(*[st.floats(-1.5, 1.5, allow_nan=False).map(lambda v: round(v, 3))] * 2)


@settings(max_examples=40, deadline=None)
@given(expressions(["x", "y"]), expressions(["x", "y"]), POINT)
def test_random_statements_give_the_plain_programs_gradients(a: str, b: str, point: tuple[float, float]) -> None:
    """`c = A if x > y else B` is the branch taken; `p, q = A, B` and `return A, B` are A and B; `elif` is else-if."""
    x, y = point
    start = f"x = {x!r}\ny = {y!r}\n"
    chosen = a if x > y else b
    renamed = re.sub(r"\bx\b", "s", re.sub(r"\by\b", "t", a))  # a over f's parameters
    forms = {
        f"c = ({a}) if x > y else ({b})": f"c = {chosen}",
        f"p, q = {a}, {b}\nc = p * q + p": f"c = ({a}) * ({b}) + ({a})",
        f"f(s, t=y) {{ return {renamed}, s }}\nu, v = f(x)\nc = u - v":
            f"c = ({a}) - x",
        f"if x > 1 {{ c = {a} }} elif x > y {{ c = {b} }} else {{ c = x }}":
            f"c = {a if x > 1 else b if x > y else 'x'}",
        f"c = 0\nfor i in range(4) {{ if i == 1 {{ continue }}; if i == 3 {{ break }}; c += ({a}) * i }}":
            f"c = ({a}) * 2",
    }
    for written, plain in forms.items():
        got = run(start + written).grad(of="c", wrt=["x", "y"])
        expected = run(start + plain).grad(of="c", wrt=["x", "y"])
        np.testing.assert_allclose(float(got.value), float(expected.value), rtol=1e-12, err_msg=written)
        for name in ("x", "y"):
            np.testing.assert_allclose(float(got.grads[name]), float(expected.grads[name]), rtol=1e-9, atol=1e-12,
                                       err_msg=written)
