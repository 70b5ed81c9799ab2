"""`gradcalc gradcheck`: autograd against central finite differences, per variable and element.

Every expectation comes from a closed form or from this file's own NumPy central differences of a
NumPy re-implementation of the program, never from gradcalc. Wrong derivative rules are injected
with monkeypatch (undone when each test ends) to show that the check can fail, and where.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import MEAN, NEURON, NEURON_TENSOR, SAMPLES, json_ok, run_cli, strict_json

from gradcalc.engine import graph, ops, rules

EPS, RTOL, ATOL = 1e-6, 1e-3, 1e-5  # gradcheck's documented defaults (torch.autograd.gradcheck's)
OK, WRONG, BAD_INPUT = 0, 1, 2
RESULT_KEYS = {"wrt", "shape", "passed", "max_abs_error", "max_abs_at", "max_rel_error", "max_rel_at",
               "worst_at", "elements", "checked", "autograd", "numeric"}

NEURON_VALUES = {"a": 2.0, "w1": 3.0, "w2": -1.0, "w3": 0.5, "w4": 4.0}


# --- helpers ------------------------------------------------------------------------------------

def gradcheck_json(*args: object, expect: int = OK) -> dict[str, Any]:
    """Run `gradcalc gradcheck ARGS --json`, check the exit status and the document's form; return it."""
    result = run_cli("gradcheck", *args, "--json")
    assert result.exit_code == expect, f"exit {result.exit_code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    assert "Traceback" not in result.stderr, result.stderr
    doc = strict_json(result.stdout)
    assert set(doc) == {"of", "order", "mode", "eps", "rtol", "atol", "passed", "results"}, doc.keys()
    assert doc["passed"] is (expect == OK)
    assert doc["passed"] == all(r["passed"] for r in doc["results"])
    for entry in doc["results"]:
        assert set(entry) == RESULT_KEYS | ({"sampled"} if doc["mode"] == "sample" else set()), entry.keys()
        assert np.shape(entry["autograd"]) == tuple(entry["shape"]) == np.shape(entry["numeric"]), entry
    return doc


def by_wrt(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["wrt"]: entry for entry in doc["results"]}


def agrees(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL) -> bool:
    """gradcheck's own criterion, |got - want| <= atol + rtol*|want|, elementwise."""
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    return bool(np.all(np.abs(got - want) <= atol + rtol * np.abs(want)))


def jacobian_fd(fn: Callable[..., Any], leaves: dict[str, np.ndarray], name: str, eps: float = EPS) -> np.ndarray:
    """∂fn/∂leaves[name] by central differences (shape out.shape + leaf.shape), this file's own implementation."""
    base = {k: np.array(v, dtype=float) for k, v in leaves.items()}
    out_shape = np.shape(fn(**base))
    point = base[name]
    jac = np.zeros(out_shape + point.shape)
    for index in np.ndindex(point.shape):
        sides = []
        for sign in (1.0, -1.0):
            moved = dict(base)
            moved[name] = point.copy()
            moved[name][index] += sign * eps
            sides.append(np.asarray(fn(**moved), dtype=float))
        jac[(...,) + index] = (sides[0] - sides[1]) / (2 * eps)
    return jac


def patch_rule(mp: pytest.MonkeyPatch, name: str, *vjps: Any) -> None:
    """Replace primitive `name`'s VJPs (rule(ns, g, ans, *inputs, *params)) until `mp` is undone."""
    assert name in ops.PRIMITIVES, f"no primitive {name!r}: {sorted(ops.PRIMITIVES)}"
    mp.setattr(ops.PRIMITIVES[name], "vjps", tuple(vjps))


def right_rules(name: str) -> tuple[Any, ...]:
    return tuple(rules.RULES[ops.PRIMITIVES[name]])


def assert_rules_restored(*names: str) -> None:
    for name in names:
        assert tuple(ops.PRIMITIVES[name].vjps) == right_rules(name), f"{name}'s rule was left patched"


def neuron_gradient(a: float, w1: float, w2: float, w3: float, w4: float) -> dict[str, float]:
    """∂L/∂leaf of L = 10 - (w3*w1*a + w4*w2*a), by hand."""
    return {"a": -(w3 * w1 + w4 * w2), "w1": -w3 * a, "w2": -w4 * a, "w3": -w1 * a, "w4": -w2 * a}


def neuron_hessian(a: float, w1: float, w2: float, w3: float, w4: float) -> dict[tuple[str, str], float]:
    """∂²L/∂p∂q of the toy network, by hand: L is a sum of two trilinear terms."""
    names = ["a", "w1", "w2", "w3", "w4"]
    pairs = {("w1", "w3"): -a, ("a", "w1"): -w3, ("a", "w3"): -w1,
             ("w2", "w4"): -a, ("a", "w2"): -w4, ("a", "w4"): -w2}
    hess = {(p, q): 0.0 for p in names for q in names}
    for (p, q), value in pairs.items():
        hess[(p, q)] = hess[(q, p)] = value
    return hess


# --- every sample passes; the numbers are the closed forms ---------------------------------------

SAMPLE_OPTIONS = {"doubling.eq": ["--of", "y"]}


def _samples() -> list[Path]:
    found = sorted(SAMPLES.glob("*.eq"))
    assert {"neuron.eq", "neuron_tensor.eq", "mean.eq", "doubling.eq"} <= {p.name for p in found}
    return found


@pytest.mark.parametrize("path", _samples(), ids=lambda p: p.name)
def test_every_sample_passes(path: Path) -> None:
    doc = gradcheck_json(path, *SAMPLE_OPTIONS.get(path.name, []))
    assert doc["order"] == 1 and (doc["eps"], doc["rtol"], doc["atol"]) == (EPS, RTOL, ATOL)
    assert doc["results"], "no variable was checked"
    for entry in doc["results"]:
        assert entry["passed"] is True, entry
        assert agrees(entry["autograd"], entry["numeric"]), entry
        assert entry["max_abs_error"] <= ATOL + RTOL * np.max(np.abs(entry["numeric"]))


def test_neuron_closed_forms_and_own_differences() -> None:
    doc = gradcheck_json(NEURON)
    assert doc["of"] == "L"
    found = by_wrt(doc)
    assert list(found) == list(NEURON_VALUES)  # every leaf, in program order
    expected = neuron_gradient(**NEURON_VALUES)
    assert expected["w1"] == -1 and expected["a"] == 2.5

    def loss(a: Any, w1: Any, w2: Any, w3: Any, w4: Any) -> Any:
        b, c = w1 * a, w2 * a
        return 10 - (w3 * b + w4 * c)

    for name, entry in found.items():
        assert entry["shape"] == []
        assert entry["autograd"] == pytest.approx(expected[name], abs=1e-12), name
        mine = float(jacobian_fd(loss, NEURON_VALUES, name))
        assert entry["numeric"] == pytest.approx(mine, rel=1e-9, abs=1e-9), name
        assert entry["max_abs_error"] == pytest.approx(abs(entry["autograd"] - entry["numeric"]), abs=1e-15)


def test_neuron_tensor_jacobian_closed_form() -> None:
    values = {k: np.array(v) for k, v in strict_json(run_cli("eval", NEURON_TENSOR, "--json").stdout)["values"].items()}
    a, w1, w2, w3, w4 = (values[k] for k in ("a", "w1", "w2", "w3", "w4"))
    assert a.shape == (3, 3)
    eye = np.einsum("ik,jl->ijkl", np.eye(3), np.eye(3))  # ∂X_ij/∂X_kl
    closed = {"a": -(w3 * w1 + w4 * w2), "w1": -w3 * a, "w2": -w4 * a, "w3": -w1 * a, "w4": -w2 * a}
    found = by_wrt(gradcheck_json(NEURON_TENSOR))
    assert set(found) == set(closed)
    for name, local in closed.items():
        entry = found[name]
        assert entry["shape"] == [3, 3, 3, 3]  # of.shape + wrt.shape: the whole Jacobian of a tensor output
        np.testing.assert_allclose(entry["autograd"], local[:, :, None, None] * eye, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(entry["numeric"], local[:, :, None, None] * eye, rtol=1e-6, atol=1e-8)


def test_mean_and_doubling_closed_forms() -> None:
    (entry,) = gradcheck_json(MEAN)["results"]
    assert entry["wrt"] == "x" and entry["shape"] == [2, 2]
    np.testing.assert_allclose(entry["autograd"], np.full((2, 2), 6 * 3 / 4), rtol=1e-12)  # 6(x+2)/4 at x = 1

    x = np.array([-0.9618, -3.3220, -0.6637])
    factor, y = 2.0, x * 2
    while np.linalg.norm(y) < 1000:
        y, factor = y * 2, factor * 2
    doc = gradcheck_json(SAMPLES / "doubling.eq", "--of", "y")
    (entry,) = doc["results"]
    assert doc["of"] == "y" and entry["shape"] == [3, 3]
    np.testing.assert_allclose(entry["autograd"], factor * np.eye(3), rtol=1e-12)
    np.testing.assert_allclose(entry["numeric"], factor * np.eye(3), rtol=1e-6, atol=1e-6)


# Inline programs: (program text, the same function in NumPy, its leaves).
PROGRAMS = {
    "sin-exp": ("x = [0.3, -1.2, 2.0]; y = sin(x) * exp(-x)",
                lambda x: np.sin(x) * np.exp(-x), {"x": [0.3, -1.2, 2.0]}),
    "log-pow": ("x = [0.5, 1.5, 3.0]; L = sum(log(x) * x^2)",
                lambda x: np.sum(np.log(x) * x**2), {"x": [0.5, 1.5, 3.0]}),
    "matmul": ("W = [[0.2, -0.5, 1.0], [0.7, 0.1, -0.3]]; v = [1.0, -2.0, 0.5]; y = tanh(W @ v)",
               lambda W, v: np.tanh(W @ v), {"W": [[0.2, -0.5, 1.0], [0.7, 0.1, -0.3]], "v": [1.0, -2.0, 0.5]}),
    "sum-axis-index": ("A = [[1.0, 2, 3], [4, 5, 6]]; s = sum(A * A, axis=0); L = s[1] + 2 * s[2]",
                       lambda A: np.sum(A * A, axis=0)[1] + 2 * np.sum(A * A, axis=0)[2],
                       {"A": [[1.0, 2, 3], [4, 5, 6]]}),
    "broadcast": ("x = [[0.1], [0.2]]; b = [1.0, -1.0, 0.5]; y = tanh(x * b + b)",
                  lambda x, b: np.tanh(x * b + b), {"x": [[0.1], [0.2]], "b": [1.0, -1.0, 0.5]}),
    "slices": ("x = [1.0, 2, 3, 4]; L = sum(x[:-1] * x[1:])",
               lambda x: np.sum(x[:-1] * x[1:]), {"x": [1.0, 2, 3, 4]}),
    "mean-keepdims": ("A = [[1.0, 2, 4], [0.5, -1, 3]]; m = mean(A, axis=1, keepdims=1); L = sum((A - m)^2)",
                      lambda A: np.sum((A - A.mean(axis=1, keepdims=True)) ** 2), {"A": [[1.0, 2, 4], [0.5, -1, 3]]}),
}


@pytest.mark.parametrize("key", list(PROGRAMS))
def test_inline_programs_pass_and_match_own_differences(key: str) -> None:
    text, fn, leaves = PROGRAMS[key]
    leaves = {k: np.array(v, dtype=float) for k, v in leaves.items()}
    found = by_wrt(gradcheck_json("-e", text))
    assert list(found) == list(leaves)
    out_shape = np.shape(fn(**leaves))
    for name, entry in found.items():
        mine = jacobian_fd(fn, leaves, name)
        assert entry["passed"] is True
        assert tuple(entry["shape"]) == out_shape + leaves[name].shape
        np.testing.assert_allclose(entry["autograd"], mine, rtol=1e-6, atol=1e-8, err_msg=name)
        np.testing.assert_allclose(entry["numeric"], mine, rtol=1e-7, atol=1e-8, err_msg=name)


def test_of_an_intermediate() -> None:
    found = by_wrt(gradcheck_json(NEURON, "--of", "d"))
    v = NEURON_VALUES
    want = {"a": v["w3"] * v["w1"] + v["w4"] * v["w2"], "w1": v["w3"] * v["a"], "w2": v["w4"] * v["a"],
            "w3": v["w1"] * v["a"], "w4": v["w2"] * v["a"]}
    assert {k: e["autograd"] for k, e in found.items()} == pytest.approx(want, abs=1e-12)


# --- a wrong rule is caught, and pointed at ------------------------------------------------------

def test_wrong_unary_rule_fails_with_worst_values(monkeypatch: pytest.MonkeyPatch) -> None:
    x = 0.3
    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", lambda ns, g, ans, x: g * ns.sin(x))  # sin' = sin: wrong
        doc = gradcheck_json("-e", f"x = {x}; y = sin(x)", expect=WRONG)
        (entry,) = doc["results"]
        assert entry["passed"] is False and entry["wrt"] == "x"
        assert entry["autograd"] == pytest.approx(np.sin(x), rel=1e-12)
        assert entry["numeric"] == pytest.approx(np.cos(x), rel=1e-8)
        assert entry["max_abs_error"] == pytest.approx(np.cos(x) - np.sin(x), rel=1e-7)
        assert entry["max_rel_error"] == pytest.approx((np.cos(x) - np.sin(x)) / np.cos(x), rel=1e-7)
        assert entry["max_abs_at"] == entry["max_rel_at"] == []

        text = run_cli("gradcheck", "-e", f"x = {x}; y = sin(x)")
        assert text.exit_code == WRONG
        assert "✗ FAIL" in text.stdout and "1 of 1 disagree" in text.stdout
        shown = re.search(r"x: autograd (\S+), finite differences (\S+)", text.stdout)
        assert shown, text.stdout
        assert float(shown[1]) == pytest.approx(np.sin(x), rel=1e-5)
        assert float(shown[2]) == pytest.approx(np.cos(x), rel=1e-5)
    assert_rules_restored("sin")
    gradcheck_json("-e", f"x = {x}; y = sin(x)")  # right again once the patch is undone


def test_wrong_rule_for_one_input_of_a_binary_op(monkeypatch: pytest.MonkeyPatch) -> None:
    p, q = 1.5, 0.8
    with monkeypatch.context() as mp:
        right_p, _ = right_rules("div")
        patch_rule(mp, "div", right_p, lambda ns, g, ans, x, y: g * ans / y)  # ∂(x/y)/∂y with its sign lost
        found = by_wrt(gradcheck_json("-e", f"p = {p}; q = {q}; r = p / q", expect=WRONG))
        assert found["p"]["passed"] is True
        assert found["p"]["autograd"] == pytest.approx(1 / q, rel=1e-12)
        assert found["q"]["passed"] is False
        assert found["q"]["autograd"] == pytest.approx(p / q**2, rel=1e-12)
        assert found["q"]["numeric"] == pytest.approx(-p / q**2, rel=1e-7)

        # In the toy network every weight is the first factor of a product and `a` always the second.
        right_y = right_rules("mul")[1]
        patch_rule(mp, "mul", lambda ns, g, ans, x, y: 2 * (g * y), right_y)
        found = by_wrt(gradcheck_json(NEURON, expect=WRONG))
        closed = neuron_gradient(**NEURON_VALUES)
        assert [n for n, e in found.items() if not e["passed"]] == ["w1", "w2", "w3", "w4"]
        assert found["a"]["autograd"] == pytest.approx(closed["a"], abs=1e-12)
        for name in ("w1", "w2", "w3", "w4"):
            assert found[name]["autograd"] == pytest.approx(2 * closed[name], abs=1e-12)
            assert found[name]["numeric"] == pytest.approx(closed[name], rel=1e-7)
    assert_rules_restored("div", "mul")


def _worst(autograd: np.ndarray, numeric: np.ndarray) -> tuple[list[int], list[int]]:
    """Where |autograd - numeric| is largest, and where it is largest relative to max(|autograd|, |numeric|)."""
    error = np.abs(autograd - numeric)
    scale = np.maximum(np.abs(autograd), np.abs(numeric))
    relative = np.divide(error, scale, out=np.zeros_like(error), where=scale > 0)
    return ([int(i) for i in np.unravel_index(np.argmax(error), error.shape)],
            [int(i) for i in np.unravel_index(np.argmax(relative), error.shape)])


def _sin_wrong_past_one(ns: Any, g: Any, ans: Any, x: Any) -> Any:
    return g * (ns.cos(x) + 0.1 * x * ns.gt(x, 1))  # right where x <= 1, off by 0.1x where x > 1


def _sin_wrong_past_one_numpy(x: np.ndarray) -> np.ndarray:
    return np.cos(x) + 0.1 * x * (x > 1)


def test_worst_element_located_in_a_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = np.array([0.2, 1.2, 1.5, 2.5]), np.array([1.0, 5, 1, 1])
    wrong, right = w * _sin_wrong_past_one_numpy(x), w * np.cos(x)
    abs_at, rel_at = _worst(wrong, right)
    assert (abs_at, rel_at) == ([1], [2])  # the case tells the two apart
    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", _sin_wrong_past_one)
        program = "x = [0.2, 1.2, 1.5, 2.5]; L = sum([1, 5, 1, 1] * sin(x))"
        (entry,) = gradcheck_json("-e", program, expect=WRONG)["results"]
        np.testing.assert_allclose(entry["autograd"], wrong, rtol=1e-12)
        np.testing.assert_allclose(entry["numeric"], right, rtol=1e-7)
        assert entry["max_abs_at"] == abs_at and entry["max_rel_at"] == rel_at
        assert entry["max_abs_error"] == pytest.approx(5 * 0.12, rel=1e-6)
        assert entry["max_rel_error"] == pytest.approx(0.15 / (np.cos(1.5) + 0.15), rel=1e-5)

        # The detail line shows the entry furthest past its tolerance (here x[2], not the largest error x[1]).
        worst = int(np.argmax(np.abs(wrong - right) / (ATOL + RTOL * np.abs(right))))
        assert worst == 2 and entry["worst_at"] == [worst]
        text = run_cli("gradcheck", "-e", program)
        assert text.exit_code == WRONG
        shown = re.search(rf"x\[{worst}\]: autograd (\S+), finite differences (\S+)", text.stdout)
        assert shown, text.stdout
        assert float(shown[1]) == pytest.approx(wrong[worst], rel=1e-5)
        assert float(shown[2]) == pytest.approx(right[worst], rel=1e-5)
    assert_rules_restored("sin")


def test_worst_element_located_in_a_jacobian(monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.array([[0.2, 1.5], [2.5, 0.4]])
    eye = np.einsum("ik,jl->ijkl", np.eye(2), np.eye(2))  # sin is elementwise: a diagonal Jacobian
    right = np.cos(x)[:, :, None, None] * eye
    wrong = _sin_wrong_past_one_numpy(x)[:, :, None, None] * eye
    abs_at, rel_at = _worst(wrong, right)
    assert (abs_at, rel_at) == ([1, 0, 1, 0], [0, 1, 0, 1])
    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", _sin_wrong_past_one)
        (entry,) = gradcheck_json("-e", "x = [[0.2, 1.5], [2.5, 0.4]]; y = sin(x)", expect=WRONG)["results"]
        assert entry["shape"] == [2, 2, 2, 2]
        np.testing.assert_allclose(entry["autograd"], wrong, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(entry["numeric"], right, rtol=1e-7, atol=1e-9)
        assert entry["max_abs_at"] == abs_at and entry["max_rel_at"] == rel_at
    assert_rules_restored("sin")


# --- second order --------------------------------------------------------------------------------

def test_order_two_diagonal_hessian() -> None:
    x = np.array([0.5, 1.5])
    doc = gradcheck_json("-e", "x = [0.5, 1.5]; L = sum(x^3 * log(x))", "--order", "2")
    assert doc["order"] == 2
    (entry,) = doc["results"]
    assert entry["wrt"] == "x, x" and entry["shape"] == [2, 2]
    np.testing.assert_allclose(entry["autograd"], np.diag(6 * x * np.log(x) + 5 * x), rtol=1e-12, atol=1e-14)
    mine = jacobian_fd(lambda x: 3 * x**2 * np.log(x) + x**2, {"x": x}, "x")  # differences of the gradient
    np.testing.assert_allclose(entry["numeric"], mine, rtol=1e-7, atol=1e-9)


def test_order_two_neuron_blocks() -> None:
    doc = gradcheck_json(NEURON, "--order", "2")
    hess = neuron_hessian(**NEURON_VALUES)
    assert hess[("w3", "w1")] == -NEURON_VALUES["a"]
    found = by_wrt(doc)
    assert list(found) == [f"{p}, {q}" for p in NEURON_VALUES for q in NEURON_VALUES]  # every pair, row by row
    for (p, q), value in hess.items():
        entry = found[f"{p}, {q}"]
        assert entry["shape"] == [] and entry["passed"] is True
        assert entry["autograd"] == pytest.approx(value, abs=1e-12), (p, q)
        assert entry["numeric"] == pytest.approx(value, rel=1e-6, abs=1e-8), (p, q)


def test_order_two_mixed_shapes() -> None:
    x, W = np.array([0.5, 1.5]), np.array([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    program = "x = [0.5, 1.5]; W = [[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]]; L = sum(sin(x @ W))"
    found = by_wrt(gradcheck_json("-e", program, "--order", "2", "--wrt", "x,W"))

    def grads(x: Any, W: Any) -> list[np.ndarray]:
        c = np.cos(x @ W)
        return [W @ c, np.outer(x, c)]

    leaves = {"x": x, "W": W}
    for i, (a, first) in enumerate(leaves.items()):
        for b, second in leaves.items():
            mine = jacobian_fd(lambda x, W, i=i: grads(x, W)[i], leaves, b)
            entry = found[f"{a}, {b}"]
            assert tuple(entry["shape"]) == first.shape + second.shape
            np.testing.assert_allclose(entry["autograd"], mine, rtol=1e-6, atol=1e-8, err_msg=f"{a}, {b}")


def test_order_two_catches_a_rule_right_to_first_order_only(monkeypatch: pytest.MonkeyPatch) -> None:
    x = 0.3

    def sin_rule(ns: Any, g: Any, ans: Any, x: Any) -> Any:
        # The right value, but recorded as a constant: the backward pass has no path back to x.
        return g * ns.cos(graph.constant(x.value) if isinstance(x, graph.Node) else x)

    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", sin_rule)
        program = f"x = {x}; y = sin(x)"
        (entry,) = gradcheck_json("-e", program)["results"]
        assert entry["autograd"] == pytest.approx(np.cos(x), rel=1e-12)
        (entry,) = gradcheck_json("-e", program, "--order", "2", expect=WRONG)["results"]
        assert entry["autograd"] == 0
        assert entry["numeric"] == pytest.approx(-np.sin(x), rel=1e-6)
    assert_rules_restored("sin")
    (entry,) = gradcheck_json("-e", f"x = {x}; y = sin(x)", "--order", "2")["results"]
    assert entry["autograd"] == pytest.approx(-np.sin(x), rel=1e-12)


# --- kinks: autograd takes PyTorch's choice, differences take the average slope ------------------

@pytest.mark.parametrize(("fn", "numpy_fn", "torch_choice"), [
    ("relu", lambda t: np.maximum(t, 0.0), 0.0),  # PyTorch: relu'(0) = 0
    ("abs", np.abs, 0.0),  # PyTorch: abs'(0) = sign(0) = 0
])
def test_kink_at_zero(fn: str, numpy_fn: Callable[[float], float], torch_choice: float) -> None:
    numeric = (numpy_fn(EPS) - numpy_fn(-EPS)) / (2 * EPS)  # relu: 0.5, abs: 0
    expect = OK if agrees(torch_choice, numeric) else WRONG
    assert expect == (WRONG if fn == "relu" else OK)
    (entry,) = gradcheck_json("-e", f"x = 0; y = {fn}(x)", expect=expect)["results"]
    assert entry["autograd"] == torch_choice
    assert entry["numeric"] == pytest.approx(numeric, abs=1e-12)


@pytest.mark.parametrize("mode", [[], ["--fast"], ["--order", "2"]])
def test_cholesky_s_symmetric_gradient_agrees_with_differences_of_each_entry(mode: list[str]) -> None:
    """cholesky reads (A + Aᵀ)/2 (A where A is symmetric), so moving A[0, 1] alone moves the value by half of
    what moving both off-diagonal entries does: the symmetric gradient PyTorch gives, not 0 (one triangle read)."""
    a, b, c = 4.0, 1.0, 3.0  # A = [[a, b], [b, c]]; L = [[√a, 0], [b/√a, √(c - b²/a)]]
    corner = np.sqrt(c - b * b / a)
    # L = L00 + 2 L10 + 3 L11, differentiated by hand; b's derivative shared by A[0, 1] and A[1, 0].
    d_a = 1 / (2 * np.sqrt(a)) - b / a**1.5 + 3 * (b * b / a**2) / (2 * corner)
    d_b = 2 / np.sqrt(a) - 3 * (b / a) / corner
    d_c = 3 / (2 * corner)
    want = np.array([[d_a, d_b / 2], [d_b / 2, d_c]])
    assert want[0, 1] == pytest.approx(0.2738665, abs=1e-7)  # PyTorch 2.13's A.grad[0, 1]
    text = f"A = [[{a}, {b}], [{b}, {c}]]; L = sum(cholesky(A) * [[1, 0], [2, 3]])"
    (entry,) = gradcheck_json("-e", text, *mode)["results"]
    if not mode:
        np.testing.assert_allclose(entry["autograd"], want, rtol=1e-12)
        np.testing.assert_allclose(entry["numeric"], want, rtol=1e-7)


# --- options and bad input -----------------------------------------------------------------------

def test_wrt_restricts_and_orders() -> None:
    for args in (["--wrt", "w1,a"], ["--wrt", "w1", "--wrt", "a"]):
        found = by_wrt(gradcheck_json(NEURON, *args))
        assert list(found) == ["w1", "a"]
        assert found["a"]["autograd"] == pytest.approx(2.5, abs=1e-12)


def test_custom_tolerances_decide(monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", lambda ns, g, ans, x: g * ns.cos(x) * 1.01)  # 1% off
        gradcheck_json("-e", "x = 0.3; y = sin(x)", expect=WRONG)
        doc = gradcheck_json("-e", "x = 0.3; y = sin(x)", "--rtol", "0.02")
        assert doc["rtol"] == 0.02
        gradcheck_json("-e", "x = 0.3; y = sin(x)", "--atol", "0.02")
    assert_rules_restored("sin")


@pytest.mark.parametrize(("args", "says"), [
    (["--wrt", "b"], ["gradcheck moves inputs", "'b'"]),
    (["--wrt", "w1,d"], ["gradcheck moves inputs", "'d'"]),
    (["--wrt", "zz"], ["'zz'"]),
    (["--eps", "0"], ["--eps"]),
    (["--eps", "-1e-6"], ["--eps"]),
    (["--order", "3"], ["--order"]),
])
def test_bad_input(args: list[str], says: list[str]) -> None:
    result = run_cli("gradcheck", NEURON, *args)
    assert result.exit_code == BAD_INPUT, result.output
    assert result.stdout == "" and "Traceback" not in result.stderr
    for text in says:
        assert text in result.stderr, result.stderr


def test_bad_input_json_error() -> None:
    result = run_cli("gradcheck", NEURON, "--wrt", "b", "--json")
    assert result.exit_code == BAD_INPUT and result.stdout == ""
    error = strict_json(result.stderr)["error"]
    assert "gradcheck moves inputs" in error["message"] and "a, w1, w2, w3, w4" in error["hint"]


def test_order_two_needs_a_scalar_output() -> None:
    result = run_cli("gradcheck", NEURON_TENSOR, "--order", "2")
    assert result.exit_code == BAD_INPUT and result.stdout == ""
    assert "scalar" in result.stderr


def test_float32_warns() -> None:
    loose = ["--eps", "1e-3", "--rtol", "1e-2", "--atol", "1e-3"]  # what the warning recommends
    result = run_cli("gradcheck", NEURON, "--dtype", "float32", "--json", *loose)
    assert result.exit_code == OK, result.output
    assert result.stderr == ""  # with --json the warning is in the document; stderr holds only errors
    doc = strict_json(result.stdout)
    assert doc["passed"] is True and "float32" in doc["warning"]
    # At float64's eps, L = 15 moves by less than float32 resolves (ulp ~1e-6): the differences are noise.
    result = run_cli("gradcheck", NEURON, "--dtype", "float32", "--eps", "1e-6", "--rtol", "1e-3", "--atol", "1e-5")
    assert result.exit_code == WRONG and "warning" in result.stderr
    assert "warning" not in run_cli("gradcheck", NEURON).stderr


def test_float32_s_defaults_are_its_own() -> None:
    """Without options, float32 checks with eps 1e-3, rtol 1e-2, atol 1e-3 (float64's 1e-6 is noise there)."""
    doc = json_ok("gradcheck", NEURON, "--dtype", "float32")
    assert (doc["eps"], doc["rtol"], doc["atol"], doc["passed"]) == (1e-3, 1e-2, 1e-3, True), doc
    assert (json_ok("gradcheck", NEURON)["eps"], json_ok("gradcheck", NEURON)["rtol"]) == (1e-6, 1e-3)


@pytest.mark.parametrize(("command", "flag", "value"), [("gradcheck", "--rtol", "inf"), ("gradcheck", "--atol", "nan"),
                                                         ("gradcheck", "--rtol", "-1"), ("check", "--atol", "nan"),
                                                         ("check", "--rtol", "inf")])
def test_tolerances_must_be_finite_and_not_negative(command: str, flag: str, value: str) -> None:
    claim = ["--claim", "dL/dw1 = 5"] if command == "check" else []
    result = run_cli(command, NEURON, *claim, f"{flag}={value}", "--json")
    assert result.exit_code == BAD_INPUT, result.output
    assert flag in strict_json(result.stderr)["error"]["message"]


# --- problems found and fixed ------------------------------------------------------------------------------

def test_nan_on_both_sides_is_reported_consistently() -> None:
    result = run_cli("gradcheck", "-e", "x = -1; y = sqrt(x)", "--json")
    assert result.exit_code in (OK, WRONG), result.output
    (entry,) = strict_json(result.stdout)["results"]
    error = entry["max_abs_error"]
    within = isinstance(error, float | int) and error <= ATOL
    assert entry["passed"] is within, entry  # a FAIL must show an error past tolerance, a pass one within


def test_a_leaf_used_as_a_size() -> None:
    result = run_cli("gradcheck", "-e", "n = 3; x = [1.0, 2, 3]; y = sum(reshape(x, n, 1))")
    assert "Traceback" not in result.stderr
    # Either the leaf that cannot move is left out (x still checked), or the error says which leaf and how to avoid it.
    assert result.exit_code == OK or ("'n'" in result.stderr and "--wrt" in result.stderr), result.output
    explicit = run_cli("gradcheck", "-e", "n = 3; x = [1.0, 2, 3]; y = sum(reshape(x, n, 1))", "--wrt", "n")
    assert explicit.exit_code == 2 and "moved 'n'" in explicit.stderr and "--wrt" in explicit.stderr


def test_fail_detail_shows_a_failing_element(monkeypatch: pytest.MonkeyPatch) -> None:
    x, w = np.array([0.1, 0.2]), np.array([1000.0, 1.0])
    offset = 0.0005 + 0.0015 * (x > 0.15)
    wrong, right = w * (np.cos(x) + offset), w * np.cos(x)
    error = np.abs(wrong - right)
    assert list(error <= ATOL + RTOL * np.abs(right)) == [True, False]  # x[0] within tolerance, x[1] past it
    assert np.argmax(error) == 0
    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", lambda ns, g, ans, x: g * (ns.cos(x) + 0.0005 + 0.0015 * ns.gt(x, 0.15)))
        result = run_cli("gradcheck", "-e", "x = [0.1, 0.2]; L = sum([1000, 1] * sin(x))")
    assert_rules_restored("sin")
    assert result.exit_code == WRONG, result.output
    shown = re.search(r"x\[(\d)\]: autograd (\S+), finite differences (\S+)", result.stdout)
    assert shown, result.stdout
    assert int(shown[1]) == 1, result.stdout  # the element that fails


# --- batched moves: the same differences as a rerun per move --------------------------------------

def _check(text: str, **options: Any) -> Any:
    """gradcheck through the API (the batched path is an option there: batch=False reruns per move)."""
    from gradcalc import parse_program
    from gradcalc.tools.gradcheck import gradcheck

    return gradcheck(parse_program(text).run(), **options)


def _numbers(rng: np.random.Generator, shape: tuple[int, ...], low: float = 0.3) -> str:
    """A tensor literal of random values at least `low` away from 0 (no kink of abs or relu in reach)."""
    values = rng.uniform(low, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    return np.array2string(values, separator=", ", precision=6, floatmode="fixed").replace("\n", "")


UNARY = ["sin({})", "cos({})", "tanh({})", "exp({} / 2)", "sigmoid({})", "softplus({})", "atan({})",
         "sqrt(abs({}) + 1)", "log(abs({}) + 1)", "{}^3", "relu({})", "-{}", "2 / ({}^2 + 1)"]
BINARY = ["{} * w", "{} / (w^2 + 1)", "maximum({}, w)", "atan2({}, w)", "where({} > 0, {}, w)", "{} - 3 * w",
          "A @ {}", "A * {}", "{}[1:] * {}[:-1]", "softmax({}, 0)", "reshape({}, 2, 2)", "[{}[0], 2 * {}[3]]",
          "f({})", "g({})"]
REDUCE = ["sum({})", "mean({})", "max({})", "norm({})", "logsumexp({})", "prod({})", "sum({}, axis=0)",
          "{}", "sum(transpose({}))"]


def random_program(seed: int) -> str:
    """A straight-line program of leaves x (4,), w (4,) and A (3, 4): a unary, a binary and a reduction."""
    rng = np.random.default_rng(seed)
    pick = lambda options: options[int(rng.integers(len(options)))]
    first = pick(UNARY).format("x")  # every pair of a binary and a reduction once, over the seeds
    second = BINARY[seed // len(REDUCE) % len(BINARY)].replace("{}", "u")
    last = REDUCE[seed % len(REDUCE)].format("v")
    return (f"f(t) {{ return t^2 + sin(t) }}\n"
            f"g(t) {{ s = 0 * t\n for i in range(3) {{ s = s + t[i] * (i + 1) * t }}\n return s }}\n"
            f"x = {_numbers(rng, (4,))}\nw = {_numbers(rng, (4,))}\nA = {_numbers(rng, (3, 4))}\n"
            f"u = {first}\nv = {second}\nL = {last}\n")


@pytest.mark.parametrize("seed", range(len(BINARY) * len(REDUCE)))
def test_batched_equals_a_rerun_per_move_on_random_programs(seed: int) -> None:
    text = random_program(seed)
    batched, rerun = _check(text), _check(text, batch=False)
    assert batched.batched and not rerun.batched, text  # a straight-line program: every leaf replayed
    assert [c.wrt for c in batched.comparisons] == [c.wrt for c in rerun.comparisons]
    for mine, theirs in zip(batched.comparisons, rerun.comparisons):
        assert mine.numeric.shape == theirs.numeric.shape == mine.autograd.shape, text
        # Both are central differences of the same values; they differ by rounding only (eps 1e-6: ~1e-10).
        np.testing.assert_allclose(mine.numeric, theirs.numeric, rtol=1e-6, atol=1e-7, err_msg=text)
        assert mine.passed == theirs.passed, text


@pytest.mark.parametrize("text", [
    # A branch the move of x[0] (1e-7 from 0) crosses: the replay of the path taken would miss it.
    "x = [1e-7, 2.0]; if x[0] > 0 { y = x^2 } else { y = -x }; L = sum(y)",
    "x = [0.5, 2.0]; n = 1; while n * x[0] < 1 { n = n + 1 }; L = sum(x) * n",  # x0 - eps: 3 passes, not 2
    # A value that leaves the graph: detach, and a scalar's short-circuit.
    "x = [1.0, 2.0]; L = sum(x * detach(x))",
    "x = [1e-7, 2.0]; b = x[0] > 0 and 1; L = sum(x) * (b + 1)",
])
def test_value_dependent_programs_rerun_per_move(text: str) -> None:
    batched, rerun = _check(text), _check(text, batch=False)
    assert not batched.batched, text
    for mine, theirs in zip(batched.comparisons, rerun.comparisons, strict=True):
        np.testing.assert_array_equal(mine.numeric, theirs.numeric)


def test_a_crossed_branch_fails_as_the_program_runs() -> None:
    # ∂L/∂x0 by the program: L jumps from 4 + x0^2 to -2 - x0 across 0, so the differences are ~3e6.
    (entry,) = _check("x = [1e-7, 2.0]; if x[0] > 0 { y = x^2 } else { y = -x }; L = sum(y)").comparisons
    assert not entry.passed
    assert entry.numeric[0] == pytest.approx((4 + (1e-7 + EPS) ** 2 - (-2 - (1e-7 - EPS))) / (2 * EPS), rel=1e-6)
    assert entry.autograd[0] == pytest.approx(2e-7)


def test_ten_thousand_elements_batched_with_a_closed_form() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(10_000)
    from gradcalc import parse_program
    from gradcalc.tools.gradcheck import gradcheck

    run = parse_program("x = zeros(10000); L = sum(x^3 * log(abs(x) + 1))").run({"x": x.tolist()})
    result = gradcheck(run)
    (entry,) = result.comparisons
    assert result.batched and entry.passed
    closed = 3 * x**2 * np.log(np.abs(x) + 1) + x**3 * np.sign(x) / (np.abs(x) + 1)
    np.testing.assert_allclose(entry.numeric, closed, rtol=1e-5, atol=1e-7)


# --- --fast and --sample ---------------------------------------------------------------------------

BIG = "x = randn(1000); W = randn(3, 1000); y = tanh(W @ sin(x))"


def test_fast_matches_its_closed_form() -> None:
    doc = gradcheck_json("-e", "x = [0.5, 1.5, -0.7]; L = sum(x^3)", "--fast")
    assert doc["mode"] == "fast"
    (entry,) = doc["results"]
    assert entry["shape"] == [] and entry["elements"] == entry["checked"] == 3
    # vᵀJu for L = sum(x^3) is 3x²·u: u is the seed's unit direction, so only its length is known here.
    assert abs(entry["autograd"]) <= np.linalg.norm(3 * np.array([0.5, 1.5, -0.7]) ** 2) + 1e-12
    assert entry["numeric"] == pytest.approx(entry["autograd"], rel=1e-7)


def test_fast_tensor_output_and_seed() -> None:
    one, same, other = (gradcheck_json("-e", BIG, "--fast", "--seed", s) for s in ("1", "1", "2"))
    assert [e["wrt"] for e in one["results"]] == ["x", "W"]
    assert one["results"] == same["results"]  # the same directions for the same seed
    assert one["results"][0]["autograd"] != other["results"][0]["autograd"]


@pytest.mark.parametrize("flag", [["--fast"], ["--sample", "400"], []])
def test_a_wrong_rule_fails_every_mode(monkeypatch: pytest.MonkeyPatch, flag: list[str]) -> None:
    with monkeypatch.context() as mp:
        # tanh' = 1 - tanh², written 1 - tanh: wrong wherever tanh is not 0 or 1.
        patch_rule(mp, "tanh", lambda ns, g, ans, x: g * (1 - ans))
        doc = gradcheck_json("-e", BIG, *flag, expect=WRONG)
        assert all(not e["passed"] for e in doc["results"]), flag
    assert_rules_restored("tanh")
    gradcheck_json("-e", BIG, *flag)


def test_a_wrong_rule_at_a_few_elements_fails_sampling_all_of_them(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "x = randn(50); L = sum(sin(x))"
    with monkeypatch.context() as mp:
        patch_rule(mp, "sin", lambda ns, g, ans, x: g * (ns.cos(x) + 0.01 * ns.gt(x, 1.5)))  # wrong past 1.5 only
        doc = gradcheck_json("-e", text, "--sample", "50", expect=WRONG)
        (entry,) = doc["results"]
        values = np.array(strict_json(run_cli("eval", "-e", text, "--json").stdout)["values"]["x"])
        assert values[entry["worst_at"][0]] > 1.5
        assert entry["checked"] == entry["elements"] == 50


def test_sample_counts_and_is_seeded() -> None:
    text = "x = randn(2, 500); L = sum(exp(x / 3))"
    doc = gradcheck_json("-e", text, "--sample", "7")
    (entry,) = doc["results"]
    assert doc["mode"] == "sample" and entry["elements"] == 1000 and entry["checked"] == 7
    assert entry["shape"] == [7] and len({tuple(at) for at in entry["sampled"]}) == 7
    assert all(0 <= i < 2 and 0 <= j < 500 for i, j in entry["sampled"])
    x = np.array(strict_json(run_cli("eval", "-e", text, "--json").stdout)["values"]["x"])
    closed = [np.exp(x[i, j] / 3) / 3 for i, j in entry["sampled"]]  # each sampled element's derivative
    np.testing.assert_allclose(entry["numeric"], closed, rtol=1e-6, atol=1e-6)  # L ~ 1e3: rounding / 2eps
    np.testing.assert_allclose(entry["autograd"], closed, rtol=1e-12)
    assert gradcheck_json("-e", text, "--sample", "7")["results"][0]["sampled"] == entry["sampled"]
    assert gradcheck_json("-e", text, "--sample", "7", "--seed", "3")["results"][0]["sampled"] != entry["sampled"]
    (everything,) = gradcheck_json("-e", text, "--sample", "5000")["results"]
    assert everything["checked"] == 1000 and len(everything["sampled"]) == 1000
    shown = run_cli("gradcheck", "-e", text, "--sample", "7").stdout
    assert "7 of 1,000" in shown and "random sample" in shown


def test_sample_with_order_two_is_a_hessian_s_columns() -> None:
    doc = gradcheck_json("-e", "x = [0.5, 1.5, 2.5, 3.0]; L = sum(x^4)", "--order", "2", "--sample", "2")
    (entry,) = doc["results"]
    x = np.array([0.5, 1.5, 2.5, 3.0])
    hessian = np.diag(12 * x**2)
    columns = [at[0] for at in entry["sampled"]]
    assert entry["shape"] == [4, 2]
    np.testing.assert_allclose(entry["numeric"], hessian[:, columns], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(("args", "says"), [
    (["--fast", "--sample", "3"], "choose one"),
    (["--fast", "--order", "2"], "--fast"),
    (["--sample", "0"], "--sample"),
])
def test_fast_and_sample_bad_input(args: list[str], says: str) -> None:
    result = run_cli("gradcheck", NEURON, *args)
    assert result.exit_code == BAD_INPUT and result.stdout == "" and "Traceback" not in result.stderr
    assert says in result.stderr, result.stderr


# --- the progress bar: on a terminal only, never with --json ----------------------------------------

SLOW = "x = randn(300); if x[0] > -100 { s = 1 }; L = sum(x^2)"  # a branch on x: a rerun per move


@pytest.mark.parametrize(("terminal", "json_mode", "shown"), [(True, False, True), (True, True, False),
                                                               (False, False, False)])
def test_progress_bar_only_on_a_terminal_without_json(monkeypatch: pytest.MonkeyPatch, terminal: bool,
                                                      json_mode: bool, shown: bool) -> None:
    import typer.testing

    from gradcalc.cli import render

    monkeypatch.setattr(render.GradcheckProgress, "after", 0.0)  # a bar from the first move, not after a second
    if terminal:  # what the in-process runner gives for standard error, told to be a terminal
        monkeypatch.setattr(typer.testing._NamedTextIOWrapper, "isatty", lambda self: True)
    # TERM=xterm: on a dumb terminal (the tests' TERM) Rich draws no live display at all.
    result = run_cli("gradcheck", "-e", SLOW, *(["--json"] if json_mode else []), env={"TERM": "xterm"})
    assert result.exit_code == OK, result.output
    assert ("moving elements" in result.stderr) is shown, result.stderr[-500:]
    if json_mode:
        assert result.stderr == "" and strict_json(result.stdout)["passed"] is True
