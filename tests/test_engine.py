"""The engine through the Python API: broadcasting, reductions, matmul, indexing, paths, VJPs, depth.

Every expected number comes from a closed form, from NumPy, or from central
finite differences of the program's own output — never from gradcalc's gradients.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest
from helpers import central_difference

import gradcalc
from gradcalc.engine import ops
from gradcalc.engine.autodiff import backward
from gradcalc.engine.graph import leaf

TOY = """
a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4
b = w1*a
c = w2*a
d = w3*b + w4*c
L = 10 - d
"""

RNG = np.random.default_rng(12345)


def finite_difference_grads(text: str, values: Mapping[str, Any], of: str, vector: Any = None,
                            step: float = 1e-6) -> dict[str, np.ndarray]:
    """∂(vᵀ·of)/∂name for each name in values, by central differences of whole program runs."""
    program = gradcalc.parse_program(text)
    base = {name: np.array(value, dtype=np.float64) for name, value in values.items()}

    def objective(point: dict[str, np.ndarray]) -> float:
        y = np.asarray(program.run(point).value(of), dtype=np.float64)
        weights = np.ones(y.shape) if vector is None else np.asarray(vector, dtype=np.float64)
        return float(np.sum(weights * y))

    return {name: central_difference(lambda v, name=name: objective({**base, name: v}), x, step)
            for name, x in base.items()}


def check_program(text: str, values: Mapping[str, Any], of: str, vector: Any = None) -> gradcalc.Run:
    """The program's gradients w.r.t. every name in values: right shapes, and equal to finite differences."""
    run = gradcalc.parse_program(text).run(dict(values))
    result = run.grad(of=of, wrt=list(values), vector=vector)
    expected = finite_difference_grads(text, values, of, None if isinstance(vector, str) else vector)
    for name, value in values.items():
        got = np.asarray(result.grads[name])
        assert got.shape == np.shape(value), f"∂{of}/∂{name}: shape {got.shape}, input shape {np.shape(value)}"
        scale = max(1.0, float(np.max(np.abs(expected[name]), initial=0.0)))
        np.testing.assert_allclose(got, expected[name], rtol=1e-6, atol=1e-7 * scale, err_msg=f"∂{of}/∂{name}")
    return run


# --- Broadcasting ---------------------------------------------------------------------------------

def test_broadcast_column_plus_row() -> None:
    a = RNG.standard_normal((3, 1))
    b = RNG.standard_normal((1, 4))
    text = "a = 0; b = 0; c = a + b; L = sum(c * c)"
    run = check_program(text, {"a": a, "b": b}, "L")
    assert run.value("c").shape == (3, 4)
    result = run.grad(of="L", wrt=["a", "b"])
    c = a + b
    np.testing.assert_allclose(result.grads["a"], 2 * c.sum(axis=1, keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(result.grads["b"], 2 * c.sum(axis=0, keepdims=True), rtol=1e-12)


def test_broadcast_scalar_times_matrix() -> None:
    text = "s = 1.5; M = [[1, -2, 0.5], [3, 4, -1]]; L = sum(s * M * M)"
    run = gradcalc.parse_program(text).run()
    result = run.grad(of="L", wrt=["s", "M"])
    m = np.array([[1, -2, 0.5], [3, 4, -1]])
    assert result.grads["s"].shape == ()
    assert result.grads["M"].shape == (2, 3)
    assert float(result.grads["s"]) == pytest.approx(float(np.sum(m * m)), rel=1e-12)
    np.testing.assert_allclose(result.grads["M"], 2 * 1.5 * m, rtol=1e-12)
    check_program("s = 0; M = 0; L = sum(s * M * M)", {"s": 1.5, "M": m}, "L")


def test_broadcast_matrix_with_row_vector_and_3d() -> None:
    values = {"x": RNG.standard_normal((2, 3)), "r": RNG.standard_normal(3), "t": RNG.standard_normal((4, 1, 1))}
    check_program("x = 0; r = 0; t = 0; y = sin(x * r) + t / (1 + r * r); L = sum(y * y)", values, "L")


# --- Reductions -----------------------------------------------------------------------------------

def _logsumexp(x: np.ndarray, axis: Any) -> Any:
    return np.log(np.sum(np.exp(x), axis=axis))


REDUCTIONS = {
    "sum": np.sum,
    "mean": np.mean,
    "prod": np.prod,
    "max": np.max,
    "min": np.min,
    "norm": lambda x, axis: np.sqrt(np.sum(x * x, axis=axis)),
    "logsumexp": _logsumexp,
}


@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("fn", list(REDUCTIONS))
def test_reduction_with_axis(fn: str, axis: int | None) -> None:
    x = RNG.uniform(0.4, 1.6, (3, 4)) * np.array([1, -1, 1, -1])  # no ties, no zeros
    call = f"{fn}(x)" if axis is None else f"{fn}(x, axis={axis})"
    text = f"x = 0; y = {call}; L = sum(sin(y) + y * y)"
    run = check_program(text, {"x": x}, "L")
    np.testing.assert_allclose(run.value("y"), REDUCTIONS[fn](x, axis=axis), rtol=1e-12)


@pytest.mark.parametrize("fn", list(REDUCTIONS))
def test_reduction_keepdims(fn: str) -> None:
    x = RNG.uniform(0.4, 1.6, (3, 4)) * np.array([1, -1, 1, -1])
    run = check_program(f"x = 0; y = {fn}(x, 1, 1); L = sum(y * [[1], [2], [3]])", {"x": x}, "L")
    assert run.value("y").shape == (3, 1)


@pytest.mark.parametrize(("keepdims", "shape"), [("True", (3, 1)), ("False", (3,)), ("1", (3, 1)), ("0", (3,))])
def test_keepdims_is_written_as_numpy_writes_it(keepdims: str, shape: tuple[int, ...]) -> None:
    x = RNG.uniform(0.4, 1.6, (3, 4))
    run = gradcalc.parse_program(f"x = 0; y = sum(x, axis=1, keepdims={keepdims})").run({"x": x})
    np.testing.assert_allclose(run.value("y"), x.sum(axis=1).reshape(shape), rtol=1e-12)


def test_a_superscript_t_is_the_transpose() -> None:
    """Wᵀ, as notes write it, is W.T: the same value and the same gradients."""
    W, x = RNG.normal(size=(3, 2)), RNG.normal(size=3)
    marked = gradcalc.parse_program("W = 0; x = 0; y = sum((Wᵀ @ x)^2) + sum(W ⊙ W)").run({"W": W, "x": x})
    dotted = gradcalc.parse_program("W = 0; x = 0; y = sum((W.T @ x)^2) + sum(W * W)").run({"W": W, "x": x})
    np.testing.assert_allclose(marked.value("y"), ((W.T @ x) ** 2).sum() + (W * W).sum(), rtol=1e-12)
    for name in ("W", "x"):
        np.testing.assert_allclose(marked.grad("y", [name]).grads[name], dotted.grad("y", [name]).grads[name],
                                   rtol=1e-12)


@pytest.mark.parametrize(("base", "exponent", "expected"), [
    # PyTorch 2.13's gradients of x^y at x = 0 (∂/∂x, ∂/∂y): 0 · log 0 is taken as 0 only where y ≥ 0
    (0.0, -1.0, (-math.inf, -math.inf)), (-0.0, -1.0, (-math.inf, math.inf)), (0.0, -2.5, (-math.inf, -math.inf)),
    (0.0, 2.0, (0.0, 0.0)), (0.0, 0.0, (0.0, 0.0)), (0.0, 0.5, (math.inf, 0.0)),
])
def test_power_at_a_zero_base_takes_pytorch_s_values(base: float, exponent: float,
                                                     expected: tuple[float, float]) -> None:
    run = gradcalc.parse_program("a = 1; b = 1; L = a^b").run({"a": base, "b": exponent})
    grads = run.grad("L", ["a", "b"]).grads
    assert (float(grads["a"]), float(grads["b"])) == expected


def test_prod_with_a_zero_entry() -> None:
    text = "x = [[1, 2, 0], [3, 4, 5]]; p = prod(x); r = prod(x, axis=1); L = sum(r * [1, 10])"
    run = gradcalc.parse_program(text).run()
    assert float(run.value("p")) == 0.0
    # ∂prod/∂x_ij is the product of the other entries: only the zero's own entry is non-zero.
    np.testing.assert_array_equal(run.grad(of="p", wrt=["x"]).grads["x"], [[0, 0, 120], [0, 0, 0]])
    np.testing.assert_allclose(run.grad(of="L", wrt=["x"]).grads["x"], [[0, 0, 2], [200, 150, 120]], rtol=1e-12)
    two_zeros = gradcalc.parse_program("x = [0, 2, 0, 3]; p = prod(x)").run()
    np.testing.assert_array_equal(two_zeros.grad(of="p").grads["x"], [0, 0, 0, 0])


# --- Matrix products ------------------------------------------------------------------------------

@pytest.mark.parametrize(("left", "right"), [
    ((2, 3), (3, 4)),
    ((2, 3), (3,)),
    ((3,), (3, 4)),
    ((3,), (3,)),
    ((2, 2, 3), (3, 4)),
])
def test_matmul_shapes(left: tuple[int, ...], right: tuple[int, ...]) -> None:
    a, b = RNG.standard_normal(left), RNG.standard_normal(right)
    run = check_program("A = 0; B = 0; C = A @ B; L = sum(sin(C) + C * C)", {"A": a, "B": b}, "L")
    expected = np.matmul(a, b)
    assert run.value("C").shape == expected.shape
    np.testing.assert_allclose(run.value("C"), expected, rtol=1e-12)


def test_matmul_closed_form() -> None:
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((3, 4))
    grads = gradcalc.parse_program("A = 0; B = 0; L = sum(A @ B)").run({"A": a, "B": b}).grad(wrt=["A", "B"]).grads
    np.testing.assert_allclose(grads["A"], np.ones((2, 4)) @ b.T, rtol=1e-12)
    np.testing.assert_allclose(grads["B"], a.T @ np.ones((2, 4)), rtol=1e-12)


# --- Indexing and slicing -------------------------------------------------------------------------

@pytest.mark.parametrize(("expr", "key", "shape"), [
    ("x[0]", (0,), (5,)),
    ("x[1:3]", (slice(1, 3),), (5,)),
    ("x[-1]", (-1,), (5,)),
    ("x[::2]", (slice(None, None, 2),), (5,)),
    ("x[0, :]", (0, slice(None)), (3, 4)),
    ("x[:, 1]", (slice(None), 1), (3, 4)),
    ("x[1, 2]", (1, 2), (3, 4)),
    ("x[-1][1:]", (-1, slice(1, None)), (3, 4)),
])
def test_index_gradient_scatters_into_zeros(expr: str, key: tuple, shape: tuple[int, ...]) -> None:
    x = RNG.uniform(0.5, 2.0, shape) * np.where(RNG.random(shape) < 0.5, -1, 1)
    run = gradcalc.parse_program(f"x = 0; y = {expr}; L = sum(y * y)").run({"x": x})
    np.testing.assert_array_equal(run.value("y"), x[key])
    expected = np.zeros(shape)
    expected[key] = 2 * x[key]
    got = run.grad(of="L", wrt=["x"]).grads["x"]
    assert got.shape == shape
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=0)


def test_overlapping_indices_accumulate() -> None:
    run = gradcalc.parse_program("x = [1, 2, 3, 4]; L = x[1] * 3 + sum(x[0:2]) + sum(x[1:]) * x[3]").run()
    # ∂/∂x = [1, 3 + 1 + x3, x3, x3 + (x1 + x2 + x3)] at x = [1, 2, 3, 4]
    np.testing.assert_allclose(run.grad().grads["x"], [1, 8, 4, 13], rtol=1e-12)


# --- Several paths, intermediates -----------------------------------------------------------------

def test_reuse_on_several_paths() -> None:
    run = gradcalc.parse_program("a = 1.7; b = a + a; c = a*a*a; d = b * c").run()
    assert float(run.grad(of="b", wrt=["a"]).grads["a"]) == pytest.approx(2.0, rel=1e-15)
    assert float(run.grad(of="c", wrt=["a"]).grads["a"]) == pytest.approx(3 * 1.7**2, rel=1e-14)
    # d = 2a·a³ = 2a⁴: 8a³
    assert float(run.grad(of="d", wrt=["a"]).grads["a"]) == pytest.approx(8 * 1.7**3, rel=1e-14)


def test_gradient_with_respect_to_intermediates() -> None:
    run = gradcalc.parse_program(TOY).run()
    result = run.grad(of="L", wrt=["d", "b", "c"])
    assert float(result.grads["d"]) == -1.0
    assert float(result.grads["b"]) == -0.5  # -w3
    assert float(result.grads["c"]) == -4.0  # -w4
    assert result.no_path == set()


def test_no_path_gives_zero_and_is_reported() -> None:
    result = gradcalc.parse_program(TOY).run().grad(of="b", wrt=["w1", "w4"])
    assert float(result.grads["w1"]) == 2.0
    assert float(result.grads["w4"]) == 0.0
    assert result.no_path == {"w4"}


def test_a_leaf_reassigned_as_a_new_leaf_keeps_each_path() -> None:
    """x's first leaf feeds y; the name x then holds a second leaf. ∂z/∂x is taken at the final x only,
    whether backward plans from every leaf the run made (wrt everything) or prunes (wrt a subset)."""
    run = gradcalc.parse_program("x = 1.5\nw = 0.5\ny = x*x\nx = 3\nz = y*x + w*x").run()
    both = run.grad(of="z", wrt=["x", "w"])
    assert float(both.grads["x"]) == pytest.approx(1.5**2 + 0.5, rel=1e-15)  # y + w at the second x
    assert float(both.grads["w"]) == pytest.approx(3.0, rel=1e-15)
    assert float(run.grad(of="z", wrt=["x"]).grads["x"]) == pytest.approx(1.5**2 + 0.5, rel=1e-15)
    assert float(run.grad(of="y", wrt=["x"]).grads["x"]) == 0.0  # y came from the first leaf, not this x


def test_rules_off_every_path_from_the_targets_do_not_run() -> None:
    """logdet's rule needs an inverse, which a singular A lacks: differentiating only w never runs it."""
    text = "A = [[1, 2], [2, 4]]\nw = 2\nL = w*w + logdet(A)"
    run = gradcalc.parse_program(text).run()
    assert float(run.grad(of="L", wrt=["w"]).grads["w"]) == 4.0
    with pytest.raises(gradcalc.GradcalcError, match="singular"):
        run.grad(of="L")


# --- Vector-Jacobian products ---------------------------------------------------------------------

VJP_PROGRAM = "x = 0; A = 0; y = tanh(A @ x) + x * sum(x * x)"


def test_vector_ones() -> None:
    values = {"x": RNG.standard_normal(3), "A": RNG.standard_normal((3, 3))}
    check_program(VJP_PROGRAM, values, "y", vector="ones")


def test_vector_random() -> None:
    values = {"x": RNG.standard_normal(3), "A": RNG.standard_normal((3, 3))}
    check_program(VJP_PROGRAM, values, "y", vector=RNG.standard_normal(3))
    check_program(VJP_PROGRAM, values, "y", vector=[0.1, -2.0, 0.5])


def test_vector_seed_example_4() -> None:
    text = "x = [-0.9618, -3.3220, -0.6637]; y = x * 2; while norm(y) < 1000 { y = y * 2 }"
    result = gradcalc.parse_program(text).run().grad(of="y", wrt=["x"], vector="[0.1, 1.0, 0.0001]")
    np.testing.assert_allclose(result.grads["x"], [51.2, 512, 0.0512], rtol=1e-12)


def test_non_scalar_output_without_vector_is_an_error() -> None:
    run = gradcalc.parse_program(VJP_PROGRAM).run({"x": np.ones(3), "A": np.eye(3)})
    with pytest.raises(gradcalc.GradcalcError, match="scalar"):
        run.grad(of="y")


# --- The seeds' numbers ---------------------------------------------------------------------------

def test_toy_network_seed_numbers() -> None:
    result = gradcalc.parse_program(TOY).run().grad(of="L")
    assert float(result.value) == 15.0
    assert set(result.grads) == {"a", "w1", "w2", "w3", "w4"}
    expected = {"w1": -1.0, "w2": -8.0, "w3": -6.0, "w4": 2.0, "a": 2.5}
    assert {name: float(g) for name, g in result.grads.items()} == expected


def test_toy_network_default_output_is_last_assigned() -> None:
    result = gradcalc.parse_program(TOY).run().grad()
    assert result.of == "L"
    assert float(result.grads["w2"]) == -8.0


def test_mean_seed_example() -> None:
    run = gradcalc.parse_program("x = ones(2, 2); y = x + 2; z = y * y * 3; out = mean(z)").run()
    result = run.grad(of="out", wrt=["x"])
    assert float(result.value) == 27.0
    assert result.grads["x"].shape == (2, 2)
    np.testing.assert_array_equal(result.grads["x"], np.full((2, 2), 4.5))


# --- Nothing accumulates --------------------------------------------------------------------------

def test_second_backward_gives_the_same_gradients() -> None:
    run = gradcalc.parse_program(TOY).run()
    first = run.grad(of="L")
    second = run.grad(of="L")
    assert {k: float(v) for k, v in first.grads.items()} == {k: float(v) for k, v in second.grads.items()}
    run.grad(of="L", create_graph=True)
    third = run.grad(of="L")
    assert {k: float(v) for k, v in third.grads.items()} == {k: float(v) for k, v in first.grads.items()}


def test_engine_backward_twice() -> None:
    x = leaf(np.array([0.5, -1.0, 2.0]))
    y = ops.sum(ops.mul(ops.sin(x), x))
    expected = np.cos(x.value) * x.value + np.sin(x.value)
    for _ in range(3):
        got = backward(y, np.float64(1.0), [x])[x]
        np.testing.assert_allclose(got, expected, rtol=1e-14)


# --- float32 --------------------------------------------------------------------------------------

FLOAT32_PROGRAM = """
x = [0.3, -1.2, 2.0]
W = [[0.5, -0.25, 1.0], [0.1, 0.2, -0.3]]
h = tanh(W @ x) + sigmoid(x[0:2])
p = softmax(h) * log2(abs(x[0:2]) + 1)
L = sum(p ^ 2) + mean(exp(x) / 3) + norm(W) * prod(x) + logsumexp(x) - max(h)
"""


def test_float32_results_are_float32_and_close_to_float64() -> None:
    program = gradcalc.parse_program(FLOAT32_PROGRAM)
    single = program.run(dtype="float32").grad(of="L")
    double = program.run(dtype="float64").grad(of="L")
    assert np.asarray(single.value).dtype == np.float32
    assert np.asarray(double.value).dtype == np.float64
    assert float(single.value) == pytest.approx(float(double.value), rel=1e-5)
    assert set(single.grads) == set(double.grads) == {"x", "W"}
    for name in ("x", "W"):
        assert single.grads[name].dtype == np.float32, f"∂L/∂{name} is {single.grads[name].dtype}"
        np.testing.assert_allclose(single.grads[name], double.grads[name], rtol=2e-5, atol=2e-6)


def test_float32_value_dtype() -> None:
    run = gradcalc.parse_program("x = [1, 2]; y = x / 3").run(dtype="float32")
    assert run.value("y").dtype == np.float32


# --- Depth ----------------------------------------------------------------------------------------

@pytest.mark.slow
def test_million_node_chain() -> None:
    """y = x + x + ... (a million adds): ∂y/∂x = 1,000,001, found without recursion."""
    n = 1_000_000
    started = time.perf_counter()
    x = leaf(np.float64(0.3))
    y = x
    for _ in range(n):
        y = ops.add(y, x)
    got = backward(y, np.float64(1.0), [x])
    assert float(got[x]) == n + 1
    assert float(y.value) == pytest.approx(0.3 * (n + 1), rel=1e-9)
    assert time.perf_counter() - started < 60


@pytest.mark.slow
def test_ten_thousand_statement_program() -> None:
    steps = 10_000
    text = "x = 0.5\ny = x\n" + "y = sin(y)*0.999 + 0.01*y*y\n" * steps
    run = gradcalc.parse_program(text).run()
    result = run.grad(of="y", wrt=["x"])
    value, derivative = 0.5, 1.0
    for _ in range(steps):
        derivative *= 0.999 * math.cos(value) + 0.02 * value
        value = math.sin(value) * 0.999 + 0.01 * value * value
    assert float(result.value) == pytest.approx(value, rel=1e-10)
    assert float(result.grads["x"]) == pytest.approx(derivative, rel=1e-8)


def test_retain_graph_false_frees_intermediates_and_forbids_a_second_backward() -> None:
    text = "x = [0.5, -1.2, 2.0]\nL = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)"
    x = np.array([0.5, -1.2, 2.0])
    expected = (1 - np.tanh(x) ** 2) * x + np.tanh(x) - 2 * x * np.exp(-x * x) - 1.5 * x * x
    run = gradcalc.parse_program(text).run()
    np.testing.assert_allclose(run.grad(of="L", wrt=["x"], retain_graph=False).grads["x"], expected, rtol=1e-12)
    with pytest.raises(gradcalc.GradcalcError, match="retain_graph"):
        run.grad(of="L", wrt=["x"])
    kept = gradcalc.parse_program(text).run()
    for _ in range(2):  # the default keeps the graph: differentiate as often as wanted
        np.testing.assert_allclose(kept.grad(of="L", wrt=["x"]).grads["x"], expected, rtol=1e-12)


def test_gradients_added_in_place_leave_values_and_seeds_alone() -> None:
    """A node used on many paths sums its gradient in place; values, the seed and pass-through gradients stay."""
    x = np.array([0.5, -1.0, 2.0])
    run = gradcalc.parse_program("x = 0\ny = x*2\nz = y + y\nw = z + y - x\nL = w * x").run({"x": x})
    before = {name: run.value(name).copy() for name in run.names}
    vector = np.array([1.0, 2.0, 3.0])
    kept = vector.copy()
    result = run.grad("L", ["x", "y", "z"], vector)
    # w = z + y - x = 3y - x = 5x, L = w·x = 5x²: ∂L/∂x = 10x·v; ∂L/∂y = (2 + 1)·x·v; ∂L/∂z = x·v
    np.testing.assert_allclose(result.grads["x"], 10 * x * vector)
    np.testing.assert_allclose(result.grads["y"], 3 * x * vector)
    np.testing.assert_allclose(result.grads["z"], x * vector)
    np.testing.assert_array_equal(vector, kept)
    for name, value in before.items():
        np.testing.assert_array_equal(run.value(name), value, err_msg=name)


def test_backward_needs_no_more_memory_than_the_forward_pass() -> None:
    """The 10^6-element program of the benchmark: backward's peak stays within the forward pass's."""
    import tracemalloc

    x = np.random.default_rng(0).standard_normal(10**6)
    program = gradcalc.parse_program("x = 0\nL = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)")
    tracemalloc.start()
    try:
        run = program.run({"x": x})
        forward_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        gradient = run.grad("L", ["x"], retain_graph=False).grads["x"]
        backward_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    expected = np.tanh(x) + x * (1 - np.tanh(x) ** 2) - 2 * x * np.exp(-x * x) - 1.5 * x * x
    np.testing.assert_allclose(gradient, expected, rtol=1e-12, atol=1e-12)
    assert backward_peak <= forward_peak * 1.02, (backward_peak / 2**20, forward_peak / 2**20)


# --- The run's tape: backward's order without searching the graph -------------------------------

TAPE_PROGRAM = """
x = 0.3; w = [1.5, -2]; k = 2
dead = exp(x) * w          # requires grad, on the tape, leads nowhere
h(v) { u = v * v; return sin(u) + v }
y = 0
for i in range(3) { y = y + i * h(x) * k }
no_grad { c = x * 10 }
z = sum(w * y) + c * x
L = z * z + y
"""


@pytest.mark.parametrize("of, wrt", [("L", ["x", "w", "k", "i", "y", "z", "dead", "c"]), ("z", ["y", "w"]),
                                     ("y", ["x", "w"]), ("dead", ["x"])])
def test_backward_on_the_runs_tape_matches_the_graph_search(of: str, wrt: list[str]) -> None:
    run = gradcalc.parse_program(TAPE_PROGRAM).run()
    output, targets = run.node(of), [run.node(name) for name in wrt]
    assert output in run.tape  # the fast path is the one taken
    seed = np.ones(output.shape)
    on_tape = backward(output, seed, targets, tape=run.tape)
    searched = backward(output, seed, targets)
    assert set(on_tape) == set(searched)
    assert not any(target in on_tape for target in targets if not target.requires_grad)  # i: a plain number
    for target in targets:
        if target in searched:
            np.testing.assert_array_equal(on_tape[target], searched[target])
    # And the API (which passes the tape) agrees with finite differences of whole runs (not for x:
    # no_grad makes c a constant to autograd, as in PyTorch, while a finite difference moves it).
    leaves = {name: run.value(name) for name in ("w", "k") if name in wrt}
    if leaves and output.shape == ():
        expected = finite_difference_grads(TAPE_PROGRAM, leaves, of)
        result = run.grad(of=of, wrt=list(leaves))
        for name in leaves:
            np.testing.assert_allclose(result.grads[name], expected[name], rtol=1e-6, atol=1e-8)


def test_diag_puts_a_vector_on_a_diagonal_and_reads_a_matrix_s() -> None:
    v, A = RNG.normal(size=3), RNG.normal(size=(3, 2))
    program = gradcalc.parse_program("v = 0; A = 0; D = diag(v); d = diag(A); L = sum(D @ A) + sum(d^2)")
    run = program.run({"v": v, "A": A})
    np.testing.assert_allclose(run.value("D"), np.diag(v), rtol=1e-12)
    np.testing.assert_allclose(run.value("d"), np.diag(A), rtol=1e-12)
    grads = run.grad("L", ["v", "A"]).grads
    np.testing.assert_allclose(grads["v"], A.sum(axis=1), rtol=1e-12)  # ∂/∂v_i of Σ_i v_i Σ_j A_ij
    expected = v[:, None] * np.ones((3, 2)) + np.pad(2 * np.diag(np.diag(A)), ((0, 1), (0, 0)))  # + 2 A_ii
    np.testing.assert_allclose(grads["A"], expected, rtol=1e-12)
