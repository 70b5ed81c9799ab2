"""Control flow, functions and gradient control against the SPEC ("The equation language", seeds 4 and 5).

Control flow runs on values: only the executed path is in the graph, every loop iteration's operations are
nodes, so the gradient is the one PyTorch computes. Every expected number here comes from a closed form, from
central finite differences, or from PyTorch itself, never from what gradcalc just computed.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from helpers import (
    EXIT_OK,
    SAMPLES,
    assert_bad_input,
    central_difference,
    json_error,
    json_ok,
    located_error,
    run_cli,
)

import gradcalc
from gradcalc.errors import GradcalcError

DOUBLING = str(SAMPLES / "doubling.eq")
SEED4_X = np.array([-0.9618, -3.3220, -0.6637])
SEED4_V = np.array([0.1, 1.0, 0.0001])


def execute(text: str, values: Mapping[str, Any] | None = None, **options: Any) -> gradcalc.program.api.Run:
    return gradcalc.parse_program(text).run(dict(values or {}), **options)


def gradient(text: str, of: str, wrt: list[str], values: Mapping[str, Any] | None = None,
             vector: Any = None) -> gradcalc.program.api.Gradients:
    return execute(text, values).grad(of=of, wrt=wrt, vector=vector)


def program_difference(text: str, values: Mapping[str, Any], of: str, name: str, h: float = 1e-6,
                       weights: np.ndarray | None = None) -> np.ndarray:
    """∂(Σ weights·of)/∂name by central differences, each run a fresh execution of the program."""
    base = {key: np.array(value, dtype=float) for key, value in values.items()}

    def objective(point: np.ndarray) -> float:
        output = np.asarray(execute(text, {**base, name: point}).value(of), dtype=float)
        return float(np.sum(output * weights)) if weights is not None else float(output)

    return central_difference(objective, base[name], h, relative=False)


def human_ok(*args: object) -> str:
    result = run_cli(*args)
    assert result.exit_code == EXIT_OK, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return result.stdout


# --- seed example 4: a loop whose trip count depends on the data ----------------------------------------------

def seed4_trip_count() -> int:
    """norm(2x)·2^n ≥ 1000 first at n: the closed-form number of doublings."""
    return math.ceil(math.log2(1000 / np.linalg.norm(2 * SEED4_X)))


def test_seed4_doubling_sample_json() -> None:
    doc = json_ok("grad", DOUBLING, "--of", "y", "--wrt", "x", "--vector", "[0.1, 1.0, 0.0001]")
    assert seed4_trip_count() == 8  # so y = x·2·2^8 = 512x and ∂(vᵀy)/∂x = 512v
    scale = 2 * 2 ** seed4_trip_count()
    assert doc["of"] == "y"
    assert doc["grad"]["x"] == pytest.approx([51.2, 512, 0.0512], rel=1e-12)
    assert doc["grad"]["x"] == pytest.approx(list(scale * SEED4_V), rel=1e-12)
    assert doc["value"] == pytest.approx(list(scale * SEED4_X), rel=1e-12)
    assert "no_path" not in doc or doc["no_path"] == []


def test_seed4_doubling_sample_human_output_says_how_often_the_loop_ran() -> None:
    out = human_ok("grad", DOUBLING, "--of", "y", "--wrt", "x", "--vector", "[0.1, 1.0, 0.0001]")
    for number in ("51.2", "512", "0.0512"):
        assert number in out, out
    # the while statement is on line 5 of samples/doubling.eq (after two comment lines and two assignments)
    assert (SAMPLES / "doubling.eq").read_text().splitlines()[4].startswith("while")
    assert re.search(r"while loop at line 5 ran 8 times", out), out


def test_seed4_jacobian_is_512_identity() -> None:
    text = (SAMPLES / "doubling.eq").read_text()
    run = execute(text)
    for k in range(3):
        row = run.grad(of="y", wrt=["x"], vector=list(np.eye(3)[k])).grads["x"]
        np.testing.assert_allclose(row, 512 * np.eye(3)[k], rtol=1e-12, atol=0)
    assert [(loop.kind, loop.line, loop.iterations) for loop in run.loops] == [("while", 5, 8)]


def test_seed4_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    x = torch.tensor(SEED4_X, dtype=torch.float64, requires_grad=True)
    y = x * 2
    trips = 0
    while y.norm() < 1000:
        y = y * 2
        trips += 1
    y.backward(torch.tensor(SEED4_V, dtype=torch.float64))
    result = gradient((SAMPLES / "doubling.eq").read_text(), "y", ["x"], vector=list(SEED4_V))
    np.testing.assert_allclose(result.grads["x"], x.grad.numpy(), rtol=1e-13, atol=0)
    np.testing.assert_allclose(result.value, y.detach().numpy(), rtol=1e-13, atol=0)
    assert execute((SAMPLES / "doubling.eq").read_text()).loops[0].iterations == trips


# --- seed example 5: detach and no_grad --------------------------------------------------------------------

def test_seed5_detach_scalar_gives_x_not_2x() -> None:
    for x in (3.0, -1.25, 0.5):
        doc = json_ok("grad", "-e", "x = 1\ny = x * detach(x)", "--set", f"x={x}", "--wrt", "x")
        assert doc["value"] == pytest.approx(x * x, rel=1e-15)
        assert doc["grad"]["x"] == pytest.approx(x, rel=1e-15)  # not 2x


def test_seed5_no_grad_scalar_gives_c() -> None:
    for x in (3.0, -1.25):
        doc = json_ok("grad", "-e", "x = 1\nno_grad { c = x * 2 }\ny = c * x", "--set", f"x={x}",
                      "--of", "y", "--wrt", "x")
        assert doc["value"] == pytest.approx(2 * x * x, rel=1e-15)
        assert doc["grad"]["x"] == pytest.approx(2 * x, rel=1e-15)  # c, not 4x


def test_seed5_detach_tensor_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    values = [1.5, -2.0, 0.25]
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    y = x * x.detach()
    y.backward(torch.ones(3, dtype=torch.float64))
    result = gradient("x = [1, 1, 1]\ny = x * detach(x)", "y", ["x"], {"x": values}, vector="ones")
    np.testing.assert_allclose(result.grads["x"], x.grad.numpy(), rtol=1e-15)
    np.testing.assert_allclose(result.grads["x"], values, rtol=1e-15)


def test_seed5_no_grad_tensor_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    values = [1.5, -2.0, 0.25]
    x = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    with torch.no_grad():
        c = x * 2
    y = (c * x).sum()
    y.backward()
    result = gradient("x = [1, 1, 1]\nno_grad { c = x * 2 }\ny = sum(c * x)", "y", ["x"], {"x": values})
    np.testing.assert_allclose(result.grads["x"], x.grad.numpy(), rtol=1e-15)
    np.testing.assert_allclose(result.grads["x"], 2 * np.array(values), rtol=1e-15)


def test_no_grad_reassignment_and_loop_match_torch() -> None:
    torch = pytest.importorskip("torch")
    text = """
x = 0.7
y = x * 3
no_grad { y = y * 2 }
s = 0
z = 0
for i in range(3) {
    no_grad { s = s + x }
    z = z + s * x + detach(z) * x
}
out = y * x + z
"""
    x = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    y = x * 3
    with torch.no_grad():
        y = y * 2
    s = torch.tensor(0.0, dtype=torch.float64)
    z = torch.tensor(0.0, dtype=torch.float64)
    for _ in range(3):
        with torch.no_grad():
            s = s + x
        z = z + s * x + z.detach() * x
    out = y * x + z
    out.backward()
    result = gradient(text, "out", ["x"])
    assert float(result.value) == pytest.approx(out.item(), rel=1e-14)
    assert float(result.grads["x"]) == pytest.approx(x.grad.item(), rel=1e-14)


def test_detach_and_no_grad_closed_forms_without_torch() -> None:
    # out = y·x + z with y = 6x held constant; the for loop as above, by hand:
    # z1 = x·x + 0;  z2 = z1 + 2x·x + z1·x;  z3 = z2 + 3x·x + z2·x  (s and the detached z are constants)
    x = 0.7
    text = ("x = 1\ny = x * 3\nno_grad { y = y * 2 }\ns = 0\nz = 0\n"
            "for i in range(3) {\n no_grad { s = s + x }\n z = z + s * x + detach(z) * x\n}\nout = y * x + z")
    z1 = x * x
    z2 = z1 + 2 * x * x + z1 * x
    z3 = z2 + 3 * x * x + z2 * x
    dz1 = x  # s1 = x constant
    dz2 = dz1 + 2 * x + z1  # s2 = 2x constant, detach(z1) = z1 constant
    dz3 = dz2 + 3 * x + z2
    result = gradient(text, "out", ["x"], {"x": x})
    assert float(result.value) == pytest.approx(6 * x * x + z3, rel=1e-14)
    assert float(result.grads["x"]) == pytest.approx(6 * x + dz3, rel=1e-14)


def test_no_grad_output_has_no_path() -> None:
    doc = json_ok("grad", "-e", "x = 3\nno_grad { y = x * x }", "--of", "y", "--wrt", "x")
    assert doc["value"] == 9
    assert doc["grad"]["x"] == 0
    assert doc["no_path"] == ["x"]


# --- if / else if / else --------------------------------------------------------------------------------------

BRANCHES = """
x = 0
if x > 1 {
    y = x^3
} else if x > 0 {
    y = sin(x) * x
} else if x > -1 {
    y = exp(2*x)
} else {
    y = -x / 2
}
"""


@pytest.mark.parametrize(("x", "value", "derivative"), [
    (2.0, 8.0, 12.0),
    (0.5, math.sin(0.5) * 0.5, math.cos(0.5) * 0.5 + math.sin(0.5)),
    (-0.5, math.exp(-1.0), 2 * math.exp(-1.0)),
    (-3.0, 1.5, -0.5),
])
def test_else_if_chain_takes_each_branch(x: float, value: float, derivative: float) -> None:
    doc = json_ok("grad", "-e", BRANCHES, "--set", f"x={x}", "--of", "y", "--wrt", "x")
    assert doc["value"] == pytest.approx(value, rel=1e-14)
    assert doc["grad"]["x"] == pytest.approx(derivative, rel=1e-14)


@pytest.mark.parametrize(("a", "b", "value", "da", "db"), [
    (1.5, 2.0, 1.5 * 4.0, 4.0, 2 * 1.5 * 2.0),     # y = a·b², ∂a = b², ∂b = 2ab
    (-1.5, 2.0, 2.0 - 2.25, 3.0, 1.0),             # y = b − a², ∂a = −2a, ∂b = 1
])
def test_if_else_gradient_follows_the_branch_taken(a: float, b: float, value: float, da: float, db: float) -> None:
    text = "a = 1\nb = 1\nif a > 0 {\n  y = a * b^2\n} else {\n  y = b - a^2\n}"
    doc = json_ok("grad", "-e", text, "--set", f"a={a}", "--set", f"b={b}", "--of", "y", "--wrt", "a,b")
    assert doc["value"] == pytest.approx(value, rel=1e-14)
    assert doc["grad"]["a"] == pytest.approx(da, rel=1e-14)
    assert doc["grad"]["b"] == pytest.approx(db, rel=1e-14)


def test_branch_not_taken_leaves_no_path() -> None:
    text = "a = 1\nb = [[1, 2], [3, 4]]\nif a > 0 { y = a * 2 } else { y = sum(b) }"
    doc = json_ok("grad", "-e", text, "--set", "a=1", "--of", "y", "--wrt", "a,b")
    assert doc["grad"]["a"] == 2
    assert doc["grad"]["b"] == [[0, 0], [0, 0]]
    assert doc["no_path"] == ["b"]
    # the other branch: the condition reads a, but a comparison has no gradient
    doc = json_ok("grad", "-e", text, "--set", "a=-1", "--of", "y", "--wrt", "a,b")
    assert doc["value"] == 10
    assert doc["grad"]["a"] == 0
    assert doc["grad"]["b"] == [[1, 1], [1, 1]]
    assert doc["no_path"] == ["a"]


@pytest.mark.parametrize(("x", "derivative"), [
    (1.0, 2.0),        # 0 < x and not x > 2: y = x²
    (3.0, 27.0),       # else: y = x³ → 3x² = 27
    (6.0, 3.0),        # x > 5: y = 3x
    (-2.0, 3.0),       # x < -1: y = 3x
    (-0.5, 0.75),      # else: 3x²
])
def test_conditions_combine_with_and_or_not(x: float, derivative: float) -> None:
    text = ("x = 0\nif x > 0 and not (x > 2) { y = x^2 } else if x < -1 or x > 5 { y = 3*x }"
            " else { y = x^3 }")
    doc = json_ok("grad", "-e", text, "--set", f"x={x}", "--of", "y", "--wrt", "x")
    assert doc["grad"]["x"] == pytest.approx(derivative, rel=1e-14)


@pytest.mark.parametrize(("x", "expected"), [(0.5, 1.0), (1.5, 3.0), (-0.5, 3.0)])
def test_chained_comparison_condition(x: float, expected: float) -> None:
    # 0 < x < 1: y = x², so ∂y/∂x = 2x = 1 at 0.5; otherwise y = 3x
    doc = json_ok("grad", "-e", "x = 0\nif 0 < x < 1 { y = x^2 } else { y = 3*x }", "--set", f"x={x}",
                  "--of", "y", "--wrt", "x")
    assert doc["grad"]["x"] == pytest.approx(expected, rel=1e-14)


def test_if_without_else_keeps_the_old_value() -> None:
    text = "x = 0\ny = x * 5\nif x > 10 { y = y * x }"
    assert json_ok("grad", "-e", text, "--set", "x=2", "--of", "y", "--wrt", "x")["grad"]["x"] == 5
    assert json_ok("grad", "-e", text, "--set", "x=20", "--of", "y", "--wrt", "x")["grad"]["x"] == 200  # 10x


# --- loops -----------------------------------------------------------------------------------------------------

NESTED = "y = 1\nx = 1\nfor i in range(3) {\n    for j in range(2) {\n        y = y * x\n    }\n}"


@pytest.mark.parametrize(("x", "y0"), [(1.2, 1.5), (-0.7, 2.0), (2.0, -0.25)])
def test_nested_for_loops_give_x_to_the_sixth(x: float, y0: float) -> None:
    doc = json_ok("grad", "-e", NESTED, "--set", f"x={x}", "--set", f"y={y0}", "--of", "y", "--wrt", "x,y")
    assert doc["value"] == pytest.approx(y0 * x**6, rel=1e-14)
    assert doc["grad"]["x"] == pytest.approx(6 * y0 * x**5, rel=1e-14)
    assert doc["grad"]["y"] == pytest.approx(x**6, rel=1e-14)  # --wrt y means the leaf y = y0


def test_nested_loops_are_counted_apart() -> None:
    run = execute(NESTED, {"x": 1.2})
    assert sorted((loop.line, loop.kind, loop.iterations) for loop in run.loops) == [(3, "for", 3), (4, "for", 6)]


def test_nested_loops_on_one_line_are_counted_apart() -> None:
    # Two loops that share a line are still two loops: the outer one runs 3 times, the inner one 6.
    run = execute("y = 1\nx = 1.2\nfor i in range(3) { for j in range(2) { y = y * x } }")
    assert float(run.value("y")) == pytest.approx(1.2**6, rel=1e-14)
    assert sorted(loop.iterations for loop in run.loops) == [3, 6], run.loops
    out = human_ok("eval", "-e", "y = 1\nx = 1.2\nfor i in range(3) { for j in range(2) { y = y * x } }")
    assert "ran 9 times" not in out, out


WHILE = "x = 1\ny = x\nwhile y < 10 {\n    y = y * 2\n}"


@pytest.mark.parametrize("x", [0.3, 3.0, 7.0, 20.0, 0.01])
def test_while_trip_count_follows_the_data(x: float) -> None:
    trips = max(0, math.ceil(math.log2(10 / x)))  # smallest n ≥ 0 with x·2^n ≥ 10
    run = execute(WHILE, {"x": x})
    assert [(loop.kind, loop.line, loop.iterations) for loop in run.loops] == [("while", 3, trips)]
    result = run.grad(of="y", wrt=["x"])
    assert float(result.value) == pytest.approx(x * 2**trips, rel=1e-15)
    assert float(result.grads["x"]) == pytest.approx(2.0**trips, rel=1e-15)
    doc = json_ok("grad", "-e", WHILE, "--set", f"x={x}", "--of", "y", "--wrt", "x")
    assert doc["grad"]["x"] == pytest.approx(2.0**trips, rel=1e-15)
    out = human_ok("grad", "-e", WHILE, "--set", f"x={x}", "--of", "y", "--wrt", "x")
    plural = "" if trips == 1 else "s"
    assert re.search(rf"while loop at line 3 ran {trips} time{plural}\b", out), out


def test_data_dependent_while_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    text = "x = [0.3, -0.2]\nw = 1.1\ny = x\nwhile sum(y * y) < 50 {\n  y = tanh(y) * w + y * w\n}\nL = sum(y * x)"
    x = torch.tensor([0.3, -0.2], dtype=torch.float64, requires_grad=True)
    w = torch.tensor(1.1, dtype=torch.float64, requires_grad=True)
    y = x
    trips = 0
    while (y * y).sum() < 50:
        y = torch.tanh(y) * w + y * w
        trips += 1
    loss = (y * x).sum()
    loss.backward()
    run = execute(text)
    result = run.grad(of="L", wrt=["x", "w"])
    assert trips > 3
    assert run.loops[0].iterations == trips
    assert float(result.value) == pytest.approx(loss.item(), rel=1e-13)
    np.testing.assert_allclose(result.grads["x"], x.grad.numpy(), rtol=1e-12)
    assert float(result.grads["w"]) == pytest.approx(w.grad.item(), rel=1e-12)


def test_for_sum_with_indexing() -> None:
    text = "x = [1, 2, 3, 4]\ns = 0\nfor i in range(4) {\n  s = s + x[i] * x[i]\n}"
    values = np.array([0.5, -1.0, 2.0, 3.0])
    result = gradient(text, "s", ["x"], {"x": values})
    assert float(result.value) == pytest.approx(float(values @ values), rel=1e-15)
    np.testing.assert_allclose(result.grads["x"], 2 * values, rtol=1e-15)


def test_for_range_forms() -> None:
    # range(a, b, step) with a negative step: i = 5, 3, 1, so y = 9x and ∂y/∂x = 9
    doc = json_ok("grad", "-e", "x = 2\ny = 0\nfor i in range(5, 0, -2) { y = y + i * x }", "--of", "y",
                  "--wrt", "x")
    assert doc["value"] == 18
    assert doc["grad"]["x"] == 9
    doc = json_ok("grad", "-e", "x = 2\ny = x\nfor i in range(2, 6) { y = y * x }", "--of", "y", "--wrt", "x")
    assert doc["value"] == 2**5
    assert doc["grad"]["x"] == 5 * 2**4
    # an empty range runs no iteration
    doc = json_ok("grad", "-e", "x = 2\ny = x\nfor i in range(0) { y = y * x }", "--of", "y", "--wrt", "x")
    assert doc["grad"]["x"] == 1


def test_range_bound_from_a_variable() -> None:
    text = "n = 3\nx = 1.5\ny = 1\nfor i in range(n) { y = y * x }"
    for n in (0, 2, 5):
        doc = json_ok("grad", "-e", text, "--set", f"n={n}", "--of", "y", "--wrt", "x")
        assert doc["value"] == pytest.approx(1.5**n, rel=1e-15)
        assert doc["grad"]["x"] == pytest.approx(n * 1.5 ** (n - 1) if n else 0.0, rel=1e-15, abs=0)


def test_loop_variable_is_a_plain_number() -> None:
    # y = Σ_i i·x over i = 0..3: ∂y/∂x = 0+1+2+3 = 6; the loop variable itself has no path
    text = "x = 2\ny = 0\nfor i in range(4) {\n  y = y + i * x\n}"
    doc = json_ok("grad", "-e", text, "--of", "y", "--wrt", "x,i")
    assert doc["value"] == 12
    assert doc["grad"]["x"] == 6
    assert doc["grad"]["i"] == 0
    assert doc["no_path"] == ["i"]
    out = human_ok("grad", "-e", text, "--of", "y", "--wrt", "x,i")
    row = next(line for line in out.splitlines() if line.startswith("i "))
    assert "no path from y" in row, out


def test_loop_variable_keeps_its_last_value() -> None:
    assert json_ok("eval", "-e", "for i in range(2, 9, 3) { y = i * 2 }")["values"] == {"i": 8, "y": 16}
    # A body that never reads i (its node is made once, after the loop), and one whose function reads it.
    assert json_ok("eval", "-e", "y = 1\nfor i in range(2, 9, 3) { y = y * 2 }")["values"] == {"y": 8, "i": 8}
    program = "f(u) = u + i\ny = 0\nfor i in range(4) { y = f(y) }"
    assert json_ok("eval", "-e", program)["values"] == {"y": 6, "i": 3}  # 0 + 1 + 2 + 3
    assert json_ok("eval", "-e", "i = 7\nfor i in range(0) { y = 1 }")["values"] == {"i": 7}


def test_loop_inside_a_function_counts_every_call() -> None:
    text = "x = 1.1\nf(u) {\n  k = 0\n  while k < 3 { u = u * 2; k = k + 1 }\n  return u\n}\ny = f(x) + f(x*x)"
    run = execute(text)
    assert [(loop.kind, loop.line, loop.iterations) for loop in run.loops] == [("while", 4, 6)]
    result = run.grad(of="y", wrt=["x"])
    assert float(result.value) == pytest.approx(8 * 1.1 + 8 * 1.21, rel=1e-14)
    assert float(result.grads["x"]) == pytest.approx(8 + 16 * 1.1, rel=1e-14)


def test_assigning_the_loop_variable_does_not_change_the_iterations() -> None:
    # as in Python: the next iteration takes the next number of the range
    assert json_ok("eval", "-e", "y = 0\nfor i in range(3) { i = i * 10; y = y + i }")["values"] == {"y": 30, "i": 20}


def test_return_from_inside_a_loop_in_a_function() -> None:
    text = "f(u) {\n  for k in range(10) {\n    if k > 2 { return u * k }\n  }\n  return u\n}\nx = 2\ny = f(x)"
    run = execute(text)
    assert [loop.iterations for loop in run.loops] == [4]  # k = 0, 1, 2, 3 and the return leaves the loop
    result = run.grad(of="y", wrt=["x"])
    assert float(result.value) == 6
    assert float(result.grads["x"]) == 3


def test_blank_lines_and_comments_inside_blocks() -> None:
    text = "x = 1\n\nwhile x < 4 {   # grow\n  # nothing here\n\n  x = x + 1   ;\n}\n"
    run = execute(text)
    assert float(run.value("x")) == 4
    assert [(loop.line, loop.iterations) for loop in run.loops] == [(3, 3)]


def test_error_inside_a_loop_body_points_at_its_line() -> None:
    located_error(run_cli("eval", "-e", "x = [1, 2]\nfor i in range(2) {\n  y = x + [1, 2, 3]\n}"), line=3, column=9)


def test_for_needs_range() -> None:
    error = located_error(run_cli("eval", "-e", "x = [1, 2]\nfor i in x { y = i }"), line=2, column=10)
    assert "range" in error.text


def test_function_defined_inside_a_block_is_an_error() -> None:
    located_error(run_cli("eval", "-e", "x = 1\nif x > 0 {\n  f(u) = u\n}"), line=3, column=3)


def test_a_mistake_in_a_block_is_reported_before_an_earlier_statement_runs() -> None:
    """The loop's mistake is found before line 1's load runs, which would fail (no such file) first."""
    error = located_error(run_cli("eval", "-e", 'w = load("missing.npy")\nfor i in range(3) { w = w * q }'), line=2)
    assert "'q' is used but never given a value" in error.text, error.text


def test_a_set_leaf_statement_is_still_checked() -> None:
    """--set x skips evaluating x's own statement, not checking it."""
    error = located_error(run_cli("eval", "-e", "x = foo(1)\ny = 2*x", "--set", "x=3"), line=1, column=5)
    assert "unknown function 'foo'" in error.text, error.text


def test_a_function_local_read_before_assignment_is_an_error_even_when_a_global_has_the_name() -> None:
    """As in Python: a name a function assigns is local throughout its body."""
    error = located_error(run_cli("eval", "-e", "t = 5\nf(x) {\n  y = t\n  t = 2\n  return x + y\n}\nz = f(1)"),
                          line=3, column=7)
    assert "'t' is used before it is assigned" in error.text, error.text


def test_a_function_s_parameter_or_local_cannot_be_set() -> None:
    """--set names the program's variables; a function's own names are none of them."""
    for program in ("x = 2; f(q) = q * x; y = f(3)", "x = 2; f(u) { q = u * x; return q }; y = f(3)"):
        result = run_cli("grad", "-e", program, "--set", "q=1")
        assert_bad_input(result)
        assert "the program has no variable 'q'" in result.stderr, result.stderr
    assert json_ok("grad", "-e", "f(u) = u*x; y = f(2)", "--set", "x=3")["grad"] == {"x": 2}  # a free input is


def test_a_function_defined_twice_is_an_error() -> None:
    """Functions may be called before their definition, so two definitions leave a call ambiguous."""
    error = located_error(run_cli("eval", "-e", "f(x) = q\nf(x) = x\nw = f(1)"), line=2, column=1)
    assert "function 'f' is defined twice (first at line 1)" in error.text, error.text


def test_negative_zero_literal_keeps_its_sign() -> None:
    """Numbers written in a program share constant nodes; 0 and -0 must not share one (1/-0 is -inf)."""
    doc = json_ok("eval", "-e", "a = 1/0\nb = 1/-0\nc = 1/0.0\nd = 1/-0.0")
    assert doc["values"] == {"a": "Infinity", "b": "-Infinity", "c": "Infinity", "d": "-Infinity"}


# --- short-circuit and / or ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("x", "stop"), [("[1, 2, 3]", 3), ("[1, -2, 3]", 1), ("[-1, 2, 3]", 0)])
def test_and_short_circuits_indexing(x: str, stop: int) -> None:
    text = f"x = {x}\ni = 0\nwhile i < 3 and x[i] > 0 {{ i = i + 1 }}"
    assert json_ok("eval", "-e", text)["values"]["i"] == stop


def test_or_short_circuits_indexing() -> None:
    text = "x = [1, 2, 3]\ni = 0\nwhile not (i >= 3 or x[i] <= 0) { i = i + 1 }"
    assert json_ok("eval", "-e", text)["values"]["i"] == 3


def test_short_circuit_in_if_and_in_expressions() -> None:
    text = "x = [1, 2, 3]\ni = 3\nif i < 3 and x[i] > 0 { y = 1 } else { y = 2 }\nz = i < 3 and x[i] > 0\n" \
           "w = i >= 3 or x[i] > 0"
    values = json_ok("eval", "-e", text)["values"]
    assert values["y"] == 2
    assert values["z"] == 0
    assert values["w"] == 1
    # with i in range both sides count
    values = json_ok("eval", "-e", text, "--set", "i=1")["values"]
    assert (values["y"], values["z"], values["w"]) == (1, 1, 1)


def test_out_of_range_index_without_short_circuit_is_an_error() -> None:
    # the guard is what saves the index above: without it the same index is a clear error
    assert_bad_input(run_cli("eval", "-e", "x = [1, 2, 3]\ni = 3\nif x[i] > 0 { y = 1 }"))


# --- functions -----------------------------------------------------------------------------------------------------

def test_functions_calling_functions_chain_rule() -> None:
    text = """
f(a, b) = g(a * b) + h(a, b, a)
g(u) = sin(u)
h(a, b, c) = a * b + c^2
x = 0.7
z = -1.3
y = f(x, z)
"""
    x, z = 0.7, -1.3
    result = gradient(text, "y", ["x", "z"])
    assert float(result.value) == pytest.approx(math.sin(x * z) + x * z + x * x, rel=1e-14)
    assert float(result.grads["x"]) == pytest.approx(math.cos(x * z) * z + z + 2 * x, rel=1e-14)
    assert float(result.grads["z"]) == pytest.approx(math.cos(x * z) * x + x, rel=1e-14)


def test_function_of_four_parameters_and_of_none() -> None:
    text = "lin(a, b, c, d) = a * b + c * d\nk() = 2.5\nx = 3\nw = -2\ny = lin(x, w, x, x) * k()"
    result = gradient(text, "y", ["x", "w"])
    assert float(result.value) == pytest.approx((3 * -2 + 9) * 2.5, rel=1e-15)
    assert float(result.grads["x"]) == pytest.approx((-2 + 2 * 3) * 2.5, rel=1e-15)
    assert float(result.grads["w"]) == pytest.approx(3 * 2.5, rel=1e-15)


def test_block_function_locals_do_not_leak() -> None:
    text = "t = 5\nsq1(u) {\n  t = u * u\n  s = t + 1\n  return s * 2\n}\nx = 3\ny = sq1(x) + t"
    run = execute(text)
    assert "s" not in run.names
    assert float(run.value("t")) == 5
    result = run.grad(of="y", wrt=["x", "t"])
    assert float(result.value) == 2 * (9 + 1) + 5
    assert float(result.grads["x"]) == 4 * 3
    assert float(result.grads["t"]) == 1
    with pytest.raises(GradcalcError):
        run.grad(of="s")
    values = json_ok("eval", "-e", text)["values"]
    assert set(values) == {"t", "x", "y"}
    assert values["t"] == 5


def test_parameters_shadow_globals() -> None:
    text = "x = 2\nf(x) = x * 3\ny = f(x * x) + x"
    result = gradient(text, "y", ["x"])
    assert float(result.value) == 12 + 2
    assert float(result.grads["x"]) == 3 * 2 * 2 + 1


def test_block_function_with_loop_and_if() -> None:
    text = """
pw(u, n) {
    r = 1
    for k in range(n) { r = r * u }
    if r > 100 { return r / 100 }
    return r
}
x = 1.5
y = pw(x, 4) + pw(x, 12)
"""
    x = 1.5
    assert x**4 < 100 < x**12
    result = gradient(text, "y", ["x"], {"x": x})
    assert float(result.value) == pytest.approx(x**4 + x**12 / 100, rel=1e-14)
    assert float(result.grads["x"]) == pytest.approx(4 * x**3 + 12 * x**11 / 100, rel=1e-14)


def test_function_reading_a_global_keeps_its_gradient() -> None:
    # f reads the leaf w: y = f(3) = 3w depends on w, even though the call's argument is a constant
    result = gradient("w = 2\nf(u) = w * u\ny = f(3)", "y", ["w"])
    assert float(result.value) == 6
    assert result.no_path == set()
    assert float(result.grads["w"]) == 3


def test_zero_parameter_function_reading_a_global_keeps_its_gradient() -> None:
    result = gradient("w = 2\nf() = w * w\ny = f()", "y", ["w"])
    assert float(result.value) == 4
    assert float(result.grads["w"]) == 4  # 2w


def test_function_reading_a_global_with_variable_argument() -> None:
    result = gradient("w = 2\nf(u) = w * u\nx = 3\ny = f(x)", "y", ["w", "x"])
    assert float(result.grads["w"]) == 3
    assert float(result.grads["x"]) == 2


@pytest.mark.parametrize("n", [0, 1, 5])
def test_recursion_with_a_base_case(n: int) -> None:
    text = f"p(u, n) {{\n  if n <= 0 {{ return 1 }}\n  return u * p(u, n - 1)\n}}\nx = 1.3\ny = p(x, {n})"
    result = gradient(text, "y", ["x"])
    assert float(result.value) == pytest.approx(1.3**n, rel=1e-14)
    assert float(result.grads["x"]) == pytest.approx(n * 1.3 ** (n - 1) if n else 0.0, rel=1e-14)


@pytest.mark.parametrize("n", [1, 4])
def test_a_function_may_return_from_both_branches_of_an_if(n: int) -> None:
    text = f"fact(u, n) {{ if n <= 1 {{ return u }} else {{ return n * fact(u, n - 1) }} }}\nx = 1.3\ny = fact(x, {n})"
    result = gradient(text, "y", ["x"])
    assert float(result.grads["x"]) == math.factorial(n)


@pytest.mark.parametrize(("body", "message", "line"), [
    ("y = n", "function 'f' never returns a value", 1),  # no return anywhere: before the run
    ("if n > 5 { return n }", "function 'f' ended without returning a value", 1),  # only when that path runs
])
def test_a_function_without_a_return_on_the_path_taken_is_an_error(body: str, message: str, line: int) -> None:
    error = json_error(run_cli("eval", "-e", f"f(n) {{ {body} }}\ny = f(2)", "--json"))
    assert error["message"] == message and error["line"] == line, error


def test_mutual_recursion() -> None:
    text = ("ev(n) { if n <= 0 { return 1 }; return od(n - 1) }\n"
            "od(n) { if n <= 0 { return 0 }; return ev(n - 1) }\ny = ev(7) + 10 * od(7) + 100 * ev(4)")
    assert json_ok("eval", "-e", text)["values"]["y"] == 110


RECURSE = "p(u, n) {\n  if n <= 0 { return 1 }\n  return u * p(u, n - 1)\n}\nx = 1.001\ny = p(x, 300)"


def test_recursion_past_the_default_limit_is_an_error() -> None:
    result = run_cli("eval", "-e", RECURSE)
    assert_bad_input(result)
    assert "--max-recursion" in result.stderr
    body = json_error(run_cli("eval", "-e", RECURSE, "--json"))
    assert "--max-recursion" in body["message"] + body.get("hint", "")
    assert body["line"] in (3, 6)  # the recursive call, or the call that started it


def test_raising_max_recursion_lets_deep_recursion_run() -> None:
    doc = json_ok("grad", "-e", RECURSE, "--max-recursion", "400", "--of", "y", "--wrt", "x")
    assert doc["value"] == pytest.approx(1.001**300, rel=1e-12)
    assert doc["grad"]["x"] == pytest.approx(300 * 1.001**299, rel=1e-12)


def test_endless_recursion_is_an_error_naming_the_flag() -> None:
    result = run_cli("eval", "-e", "f(n) = f(n) + 1\ny = f(1)", "--max-recursion", "25")
    assert_bad_input(result)
    assert "--max-recursion" in result.stderr
    assert "25" in result.stderr


@pytest.mark.parametrize(("call", "given"), [("f(1)", 1), ("f(1, 2, 3)", 3), ("f()", 0)])
def test_wrong_arity_is_an_error(call: str, given: int) -> None:
    error = located_error(run_cli("eval", "-e", f"f(a, b) = a * b\ny = {call}"), line=2, column=5)
    assert "2" in error.message and str(given) in error.message, error.text


def test_wrong_arity_of_block_function_and_zero_parameter_function() -> None:
    located_error(run_cli("eval", "-e", "g(u) { return u }\nx = 1\ny = g(x, x)"), line=3, column=5)
    located_error(run_cli("eval", "-e", "k() = 2\ny = k(1)"), line=2, column=5)


@pytest.mark.parametrize("definition", ["sigmoid(z) = z", "exp(z) { return z }", "sum(a, b) = a + b"])
def test_redefining_a_builtin_needs_override(definition: str) -> None:
    error = located_error(run_cli("eval", "-e", f"{definition}\ny = 1"), line=1, column=1)
    assert "override" in error.text, error.text


def test_override_replaces_a_builtin() -> None:
    text = "override sigmoid(z) = 2 * z\nx = 3\ny = sigmoid(x) + tanh(x)"
    doc = json_ok("grad", "-e", text, "--of", "y", "--wrt", "x")
    assert doc["value"] == pytest.approx(6 + math.tanh(3), rel=1e-15)
    assert doc["grad"]["x"] == pytest.approx(2 + 1 - math.tanh(3) ** 2, rel=1e-14)


def test_override_block_form_and_other_functions_see_it() -> None:
    text = "override exp(z) {\n  return z * z\n}\nf(u) = exp(u) + 1\nx = 3\ny = f(x)"
    doc = json_ok("grad", "-e", text, "--of", "y", "--wrt", "x")
    assert doc["value"] == 10
    assert doc["grad"]["x"] == 6


def test_override_of_a_non_builtin_is_an_error() -> None:
    error = located_error(run_cli("eval", "-e", "override mine(z) = z\ny = mine(1)"), line=1)
    assert "override" in error.text


# --- limits and runtime errors ------------------------------------------------------------------------------------

RUNAWAY = "x = 1\ny = 0\nwhile x > 0 {\n  x = x + 1\n}\n"


def test_runaway_while_stops_and_names_its_line() -> None:
    error = located_error(run_cli("eval", "-e", RUNAWAY, "--max-iterations", "50"), line=3, column=1)
    assert "line 3" in error.message, error.text
    assert "50" in error.text
    assert "--max-iterations" in error.text
    body = json_error(run_cli("eval", "-e", RUNAWAY, "--max-iterations", "50", "--json"))
    assert body["line"] == 3
    assert "line 3" in body["message"]


def test_runaway_loop_inside_a_function_names_its_line() -> None:
    text = "f(u) {\n  k = 0\n  while u > 0 { u = u + 1 }\n  return u\n}\nx = 1\ny = f(x)"
    error = located_error(run_cli("grad", "-e", text, "--max-iterations", "20"), line=3)
    assert "line 3" in error.message, error.text


@pytest.mark.slow
def test_default_iteration_limit_is_one_million() -> None:
    error = located_error(run_cli("eval", "-e", "x = 1\nwhile 1 { }"), line=2, column=1)
    assert re.search(r"1,?000,?000", error.text), error.text


@pytest.mark.parametrize(("text", "trips"), [
    ("k = 0\nwhile k < 5 { k = k + 1 }", 5),
    ("y = 0\nfor i in range(5) { y = y + i }", 5),
])
def test_iteration_limit_is_inclusive(text: str, trips: int) -> None:
    json_ok("eval", "-e", text, "--max-iterations", str(trips))
    located_error(run_cli("eval", "-e", text, "--max-iterations", str(trips - 1)), line=text.count("\n") + 1)


def test_for_loop_past_the_limit_is_an_error() -> None:
    error = located_error(run_cli("eval", "-e", "y = 0\nfor i in range(100) { y = y + i }", "--max-iterations", "10"),
                          line=2, column=1)
    assert "--max-iterations" in error.text


def test_tensor_condition_is_an_error_that_suggests_all_or_any() -> None:
    for text, line in [("x = [1, 2]\nif x > 0 { y = x }", 2), ("x = [1, 2]\nwhile x < 5 { x = x + 1 }", 2),
                       ("x = [1, 2]\nif x > 0 and 1 > 0 { y = x }", 2)]:
        error = located_error(run_cli("eval", "-e", text), line=line)
        assert "all" in error.text and "any" in error.text, error.text
        body = json_error(run_cli("eval", "-e", text, "--json"))
        assert "all" in body["message"] + body.get("hint", "")


def test_all_and_any_make_scalar_conditions() -> None:
    text = "x = [1, -2]\nif all(x > 0) { y = 1 } else if any(x > 0) { y = 2 } else { y = 3 }"
    assert json_ok("eval", "-e", text)["values"]["y"] == 2
    assert json_ok("eval", "-e", text, "--set", "x=[1, 2]")["values"]["y"] == 1
    assert json_ok("eval", "-e", text, "--set", "x=[-1, -2]")["values"]["y"] == 3


@pytest.mark.parametrize("text", [
    "x = log(0 - 1)\nif x { y = 1 }",
    "x = 0\nq = x / x\nwhile q { y = 1 }",
    "x = sqrt(0 - 1)\nif x { y = 1 } else { y = 2 }",
])
def test_nan_condition_is_an_error(text: str) -> None:
    error = located_error(run_cli("eval", "-e", text), line=text.count("\n") + 1)
    assert "nan" in error.message.lower(), error.text


def test_bad_range_bound_is_a_located_error() -> None:
    located_error(run_cli("eval", "-e", "y = 0\nfor i in range(2.5) { y = i }"), line=2)


# --- syntax errors ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "column", "words"), [
    ("x = 1\nreturn x", 2, 1, "return"),
    ("x = 1\nif x > 0 {\n  return x\n}", 3, 3, "return"),
    ("x = 1\nelse { y = 2 }", 2, 1, "else"),
    ("x = 1\nwhile x < 3 { x = x + 1 } else { y = 2 }", 2, 27, "else"),
    ("x = 1\nif x > 0 {\n  y = x\n", 2, 10, "{"),
    ("f(u) {\n  return u\ny = f(1)", 1, 6, "{"),
    ("x = 1\ny = x }", 2, 7, "}"),
    ("x = 1\nif x > 0 { y = 1 } }", 2, 20, "}"),
    # Code that may never run is checked before the run (the builder walks the tree, no compile step): a
    # mistake in a branch not taken, a loop that runs 0 times or a function never called is still an error.
    ("x = 1\nif x > 2 { y = foo(x) } else { y = x }", 2, 16, "unknown function 'foo'"),
    ("x = 1\nif x < 2 { y = x } else { y = x + nope }", 2, 35, "'nope' is used but never given a value"),
    ("x = 1\nwhile x > 2 { x = x - bar }", 2, 23, "'bar' is used but never given a value"),
    ("x = 1\nfor i in range(0) { x = max(x, 1, 2, 3) }", 2, 25, "max takes at most 3 arguments"),
    ("f(t) = sinn(t)\ny = 2", 1, 8, "unknown function 'sinn'"),
    ("f(t) {\n  if t > 0 { return g(t, 1) }\n  return t\n}\ng(a) = a\ny = 2", 2, 21, "g takes 1 argument"),
    ("x = 1\nno_grad { y = x.H }", 2, 17, "unknown attribute '.H'"),
    ("x = 1\nif x > 2 { return x }", 2, 12, "'return' outside a function"),
])
def test_control_flow_mistakes_are_located(text: str, line: int, column: int, words: str) -> None:
    error = located_error(run_cli("eval", "-e", text), line=line, column=column)
    assert words in error.message, error.text
    body = json_error(run_cli("eval", "-e", text, "--json"))
    assert (body["line"], body["column"]) == (line, column)


def test_syntax_errors_from_the_api_carry_a_place() -> None:
    with pytest.raises(GradcalcError) as info:
        gradcalc.parse_program("x = 1\nif x > 0 {\n  y = x\n")
    assert info.value.pos is not None and info.value.pos.line == 2


# --- no path ---------------------------------------------------------------------------------------------------

def test_no_path_in_human_output_and_json() -> None:
    text = "a = 2\nb = [[1, 2], [3, 4]]\nc = [0.5, 0.5, 0.5]\ny = a * 3"
    out = human_ok("grad", "-e", text, "--of", "y", "--wrt", "a,b,c")
    lines = out.splitlines()
    starts = {name: next(k for k, line in enumerate(lines) if line.startswith(name + " ")) for name in "abc"}
    rows = {"a": "\n".join(lines[starts["a"]:starts["b"]]), "b": "\n".join(lines[starts["b"]:starts["c"]]),
            "c": "\n".join(lines[starts["c"]:])}
    assert "no path from y" in rows["b"], out  # a tensor row spans lines: the note goes below them
    gradient_rows = [line.rstrip() for line in rows["b"].splitlines() if line.rstrip().endswith(("0],", "0]]"))]
    assert len(gradient_rows) == 2 and len({len(line) for line in gradient_rows}) == 1, out  # still aligned
    assert "no path from y" in rows["c"], out
    assert "no path" not in rows["a"], out
    doc = json_ok("grad", "-e", text, "--of", "y", "--wrt", "a,b,c")
    assert doc["grad"] == {"a": 3, "b": [[0, 0], [0, 0]], "c": [0, 0, 0]}
    assert sorted(doc["no_path"]) == ["b", "c"]


def test_no_path_through_a_loop_that_never_runs() -> None:
    text = "x = 2\nw = 3\ny = x\nwhile y > 100 { y = y / w }"
    doc = json_ok("grad", "-e", text, "--of", "y", "--wrt", "x,w")
    assert doc["grad"] == {"x": 1, "w": 0}
    assert doc["no_path"] == ["w"]
    # x = 150 runs the loop once: y = x / w, ∂y/∂x = 1/w, ∂y/∂w = -x/w²
    doc = json_ok("grad", "-e", text, "--set", "x=150", "--of", "y", "--wrt", "x,w")
    assert doc["grad"]["x"] == pytest.approx(1 / 3, rel=1e-15)
    assert doc["grad"]["w"] == pytest.approx(-150 / 9, rel=1e-15)
    assert doc.get("no_path", []) == []


# --- finite differences on random programs with control flow (away from branch switches) --------------------------

UNARY = ["sin({})", "cos({})", "tanh({})", "sigmoid({})", "softplus({})", "exp(0.3 * {})", "({})^2"]


def random_program(seed: int) -> tuple[str, dict[str, Any]]:
    """A program with a for-loop sum over x[i], an if/else on a leaf far from 0, a fixed-count while loop,
    nested loops and a function: every condition is far from switching under a small step."""
    rnd = random.Random(seed)
    n = rnd.randint(2, 4)

    def u(inner: str) -> str:
        return rnd.choice(UNARY).format(inner)

    lines = [
        f"helper(p, q) = {u('p')} * q + {u('q')}",
        f"x = [{', '.join('1' for _ in range(n))}]",
        "a = 1",
        "w = 0.5",
        "s = 0",
        f"for i in range({n}) {{",
        f"    s = s + {u('x[i]')} * {rnd.choice(['w', 'x[i]', '1.5', 'x[' + str(n - 1) + ' - i]'])}",
        "}",
        "if a > 0 {",
        f"    y = s * a + {u('w')}",
        f"}} else if a > {rnd.choice(['-100', '-50'])} {{",
        f"    y = s - a * {u('w')}",
        "} else {",
        "    y = s",
        "}",
        "k = 0",
        f"while k < {rnd.randint(1, 3)} {{",
        f"    y = {u('y')} * {rnd.choice(['0.7', 'w', 'a'])} + helper(w, x[0])",
        "    k = k + 1",
        "}",
        f"for i in range({rnd.randint(1, 2)}) {{ for j in range({n}) {{ y = y + 0.1 * x[j] * {u('y')} }} }}",
        f"if w < 5 and not (a == 0) {{ L = y * {u('a')} }} else {{ L = y }}",
    ]
    text = "\n".join(lines)
    values = {
        "x": [rnd.choice([-1, 1]) * rnd.uniform(0.3, 1.2) for _ in range(n)],
        "a": (1 if seed % 2 else -1) * rnd.uniform(0.5, 2.0),  # far from the switch at 0; each branch by turns
        "w": rnd.uniform(-1.0, 1.0),
    }
    return text, values


@pytest.mark.parametrize("seed", range(10))
def test_random_control_flow_programs_match_finite_differences(seed: int) -> None:
    text, values = random_program(seed)
    result = gradient(text, "L", ["x", "a", "w"], values)
    assert result.no_path == set(), result.no_path
    for name in ("x", "a", "w"):
        expected = program_difference(text, values, "L", name)
        got = np.asarray(result.grads[name], dtype=float)
        scale = max(1.0, float(np.max(np.abs(expected))))
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6 * scale,
                                   err_msg=f"∂L/∂{name} of\n{text}\nat {values}")


@pytest.mark.parametrize(("program", "noted"), [
    ("f(u) {\n  if u > 0 { return u } else { return -u }\n}\nx = 2\ny = f(x)", True),  # an if in a function
    ("x = 2\nno_grad { if x > 0 { c = 1 } else { c = 2 } }\ny = c * x", True),  # an if in a block
    ("x = 2\ny = x * x", False),
])
def test_diff_says_when_it_followed_the_path_a_run_took(program: str, noted: bool) -> None:
    result = run_cli("diff", "-e", program, "--wrt", "x")
    assert result.exit_code == 0, result.stderr
    assert ("differentiated along the path this run executed" in result.stdout) is noted
