"""Issue 25's functions through the language: values against NumPy or by hand, gradients against closed forms,
PyTorch's grad_fn names, how diff writes them, batch mode, and each misuse's message (line, column, caret, hint).

Their rules are checked against finite differences, to second order, by the rule-table walk (test_rules.py).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import run_cli

import gradcalc

X = np.array([0.5, -1.2, 2.0, 0.0])
Z = np.array([[1.0, 2.0, 0.5], [0.1, -0.3, 0.8]])
M = np.array([[4.0, 1.0, 0.5], [1.0, 3.0, 0.2], [0.5, 0.2, 2.0]])  # symmetric positive definite


def run(expr: str, **values: np.ndarray) -> gradcalc.Run:
    leaves = {"x": X, "z": Z, "m": M} | values
    header = "".join(f"{name} = 0\n" for name in leaves)
    return gradcalc.parse_program(f"{header}r = {expr}\n").run(leaves)


def value(expr: str, **values: np.ndarray) -> np.ndarray:
    return np.asarray(run(expr, **values).value("r"))


def gradient(expr: str, wrt: str = "x", weights: np.ndarray | None = None) -> np.ndarray:
    program = run(expr)
    out = np.asarray(program.value("r"))
    vector = None if out.shape == () else (np.ones(out.shape) if weights is None else weights)
    return np.asarray(program.grad(of="r", wrt=[wrt], vector=vector).grads[wrt])


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    return np.array([0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x.ravel()]).reshape(x.shape)


# --- values and first derivatives ------------------------------------------------------------------------

def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


ELEMENTWISE = [
    ("expm1(x)", np.expm1(X), np.exp(X)),
    ("exp2(x)", 2.0**X, 2.0**X * math.log(2)),
    ("square(x)", X**2, 2 * X),
    ("erf(x)", np.array([math.erf(v) for v in X]), 2 / math.sqrt(math.pi) * np.exp(-X**2)),
    ("gelu(x)", X * _normal_cdf(X), _normal_cdf(X) + X * np.exp(-X**2 / 2) / math.sqrt(2 * math.pi)),
    ("silu(x)", X * sigmoid(X), sigmoid(X) * (1 + X * (1 - sigmoid(X)))),
    ("elu(x)", np.where(X > 0, X, np.expm1(X)), np.where(X > 0, 1, np.exp(X))),
    ("elu(x, alpha=2)", np.where(X > 0, X, 2 * np.expm1(X)), np.where(X > 0, 1, 2 * np.exp(X))),
    ("leaky_relu(x)", np.where(X > 0, X, 0.01 * X), np.where(X > 0, 1, 0.01)),
    ("leaky_relu(x, negative_slope=0.2)", np.where(X > 0, X, 0.2 * X), np.where(X > 0, 1, 0.2)),
    ("clamp(x, min=0)", np.maximum(X, 0), (X >= 0) * 1.0),
    ("clamp(x, -1, 1)", np.clip(X, -1, 1), (np.abs(X) <= 1) * 1.0),
    ("clamp(x, max=1)", np.minimum(X, 1), (X <= 1) * 1.0),
]


@pytest.mark.parametrize(("expr", "expected", "derivative"), ELEMENTWISE, ids=[e for e, _, _ in ELEMENTWISE])
def test_elementwise_value_and_derivative(expr: str, expected: np.ndarray, derivative: np.ndarray) -> None:
    np.testing.assert_allclose(value(expr), expected, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(gradient(expr), derivative, rtol=1e-12, atol=1e-15)


def test_rsqrt_is_one_over_the_square_root() -> None:
    y = np.array([0.25, 4.0, 2.0])
    np.testing.assert_allclose(value("rsqrt(y)", y=y), [2.0, 0.5, 1 / math.sqrt(2)], rtol=1e-15)
    program = run("rsqrt(y)", y=y)
    np.testing.assert_allclose(program.grad(of="r", wrt=["y"], vector=np.ones(3)).grads["y"],
                               -0.5 * y**-1.5, rtol=1e-14)


def test_var_and_std_take_numpys_ddof_zero_by_default() -> None:
    np.testing.assert_allclose(value("var(x)"), np.var(X), rtol=1e-14)
    np.testing.assert_allclose(value("var(x, ddof=1)"), np.var(X, ddof=1), rtol=1e-14)
    np.testing.assert_allclose(value("std(z, axis=1, ddof=1)"), np.std(Z, axis=1, ddof=1), rtol=1e-14)
    np.testing.assert_allclose(value("std(z, axis=0, keepdims=True)"), np.std(Z, axis=0, keepdims=True),
                               rtol=1e-14)
    # d var/dx_i = 2 (x_i - mean) / (n - ddof)
    np.testing.assert_allclose(gradient("var(x, ddof=1)"), 2 * (X - X.mean()) / 3, rtol=1e-13)
    np.testing.assert_allclose(gradient("std(x)"), (X - X.mean()) / (4 * np.std(X)), rtol=1e-13)


def test_shapes() -> None:
    assert value("squeeze(reshape(x, 1, 4, 1))").shape == (4,)
    assert value("squeeze(reshape(x, 1, 4, 1), axis=2)").shape == (1, 4)
    assert value("unsqueeze(x, 0)").shape == (1, 4)
    assert value("expand_dims(x, -1)").shape == (4, 1)
    np.testing.assert_array_equal(value("flatten(z)"), Z.ravel())
    np.testing.assert_array_equal(value("flip(x)"), X[::-1])
    np.testing.assert_array_equal(value("flip(z, axis=1)"), Z[:, ::-1])
    np.testing.assert_array_equal(value("concatenate([x, z[0]])"), np.concatenate([X, Z[0]]))
    np.testing.assert_array_equal(value("cat([z, z], axis=1)"), np.concatenate([Z, Z], axis=1))
    np.testing.assert_array_equal(value("concatenate(z)"), Z.ravel())  # a tensor: its rows are the parts
    np.testing.assert_array_equal(value("stack([z[0], z[1]], axis=1)"), Z.T)
    np.testing.assert_array_equal(value("zeros_like(z) + ones_like(x)[0]"), np.ones((2, 3)))
    assert float(value("len(z)")) == 2.0
    np.testing.assert_array_equal(value("shape(z)"), [2.0, 3.0])
    # Each part of a concatenation gets its own slice of the gradient.
    weights = np.arange(1.0, 8.0)
    np.testing.assert_array_equal(gradient("concatenate([x, z[0]])", "x", weights), [1, 2, 3, 4])
    np.testing.assert_array_equal(gradient("concatenate([x, z[0]])", "z", weights), [[5, 6, 7], [0, 0, 0]])
    np.testing.assert_array_equal(gradient("flip(x)", "x", weights[:4]), [4, 3, 2, 1])


def test_cumulative_sums_and_products() -> None:
    np.testing.assert_array_equal(value("cumsum(x)"), np.cumsum(X))
    np.testing.assert_array_equal(value("cumsum(z)"), np.cumsum(Z))  # NumPy's default: flattened
    np.testing.assert_array_equal(value("cumprod(z, axis=1)"), np.cumprod(Z, axis=1))
    np.testing.assert_array_equal(gradient("cumsum(x)"), [4, 3, 2, 1])
    # x = [a, b, c, 0]: cumprod = [a, ab, abc, 0], each partial written out by hand (a zero among them).
    a, b, c, _ = X
    np.testing.assert_allclose(gradient("cumprod(x)"), [1 + b + b * c, a + a * c, a * b, a * b * c], rtol=1e-14)


def test_argmax_and_argmin_are_positions_without_a_gradient() -> None:
    assert float(value("argmax(x)")) == 2.0 and float(value("argmin(z)")) == 4.0
    np.testing.assert_array_equal(value("argmax(z, axis=1)"), [1, 2])
    assert run("argmax(x)").node("r").grad_fn is None
    np.testing.assert_array_equal(gradient("x * argmax(x)"), [2, 2, 2, 2])  # a constant factor


def test_log_softmax_and_the_losses() -> None:
    log_p = Z - np.log(np.exp(Z).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(value("log_softmax(z)"), log_p, rtol=1e-14)
    labels = np.array([2.0, 0.0])
    picked = -log_p[[0, 1], [2, 0]]
    np.testing.assert_allclose(value("cross_entropy(z, y)", y=labels), picked.mean(), rtol=1e-14)
    np.testing.assert_allclose(value("cross_entropy(z, y, reduction='sum')", y=labels), picked.sum(), rtol=1e-14)
    np.testing.assert_allclose(value('cross_entropy(z, y, reduction="none")', y=labels), picked, rtol=1e-14)
    probabilities = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(value("cross_entropy(z, y)", y=probabilities),
                               -(probabilities * log_p).sum(axis=1).mean(), rtol=1e-14)
    # d/dz of the mean over N examples: (softmax(z) - one_hot(y)) / N
    program = run("cross_entropy(z, y)", y=labels)
    one_hot = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]])
    np.testing.assert_allclose(program.grad(of="r", wrt=["z"]).grads["z"], (np.exp(log_p) - one_hot) / 2,
                               rtol=1e-13)
    target = np.array([1.0, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(value("mse_loss(x, t)", t=target), np.mean((X - 1) ** 2), rtol=1e-14)
    np.testing.assert_allclose(value("mse_loss(x, 1, reduction='sum')"), np.sum((X - 1) ** 2), rtol=1e-14)
    program = run("mse_loss(x, t)", t=target)
    np.testing.assert_allclose(program.grad(of="r", wrt=["x"]).grads["x"], (X - 1) / 2, rtol=1e-14)


def test_norms() -> None:
    assert float(value("norm(x, ord=1)")) == pytest.approx(3.7)
    assert float(value("norm(x, ord=inf)")) == 2.0
    assert float(value("norm(x)")) == pytest.approx(math.sqrt(0.25 + 1.44 + 4))
    assert float(value("norm(z, ord='fro')")) == pytest.approx(math.sqrt(np.sum(Z**2)))
    np.testing.assert_allclose(value("norm(z, axis=1, ord=1)"), [3.5, 1.2], rtol=1e-15)
    np.testing.assert_array_equal(gradient("norm(x, ord=1)"), [1, -1, 1, 0])
    np.testing.assert_array_equal(gradient("norm(x, ord=inf)"), [0, 0, 1, 0])


def test_linear_algebra() -> None:
    b = np.array([1.0, -2.0, 0.5])
    solution = value("solve(m, b)", b=b)
    np.testing.assert_allclose(M @ solution, b, rtol=1e-13)
    np.testing.assert_allclose(value("matmul(m, b)", b=b), M @ b, rtol=1e-15)
    np.testing.assert_allclose(value("einsum('ij,j->i', m, b)", b=b), M @ b, rtol=1e-15)
    np.testing.assert_allclose(value("einsum('ij,ij', m, m)"), np.sum(M * M), rtol=1e-15)  # implicit: all summed
    np.testing.assert_allclose(value("logdet(m)"), math.log(np.linalg.det(M)), rtol=1e-14)
    np.testing.assert_allclose(value("slogdet(-m)"), [-1.0, math.log(np.linalg.det(M))], rtol=1e-14)
    assert math.isnan(float(value("logdet(-m)")))  # log of a negative determinant, as torch.logdet
    np.testing.assert_array_equal(gradient("logdet(-m)", "m"), np.zeros((3, 3)))  # NaN's gradient: torch's zero
    lower = value("cholesky(m)")
    np.testing.assert_allclose(lower @ lower.T, M, rtol=1e-14)
    assert np.all(np.triu(lower, 1) == 0)
    # d solve(A, b)/db = A^-1, d logdet(A)/dA = A^-T
    program = run("sum(solve(m, b))", b=b)
    np.testing.assert_allclose(program.grad(of="r", wrt=["b"]).grads["b"], np.linalg.inv(M).T @ np.ones(3),
                               rtol=1e-13)
    np.testing.assert_allclose(gradient("logdet(m)", "m"), np.linalg.inv(M).T, rtol=1e-13)


def test_det_of_a_singular_matrix_has_the_adjugate_as_its_gradient() -> None:
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    program = run("det(s)", s=singular)
    assert float(program.value("r")) == 0.0
    np.testing.assert_allclose(program.grad(of="r", wrt=["s"]).grads["s"], [[4, -2], [-2, 1]], atol=1e-15)
    rank_two = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])
    program = run("det(s)", s=rank_two)
    cofactors = [[-3, 6, -3], [6, -12, 6], [-3, 6, -3]]  # each by hand: (-1)^(i+j) times its 2×2 minor
    np.testing.assert_allclose(program.grad(of="r", wrt=["s"]).grads["s"], cofactors, atol=1e-12)


# --- PyTorch's grad_fn names ---------------------------------------------------------------------------------

GRAD_FNS = [
    ("expm1(x)", "Expm1Backward0"), ("exp2(x)", "Exp2Backward0"), ("square(x)", "PowBackward0"),
    ("rsqrt(m)", "RsqrtBackward0"), ("erf(x)", "ErfBackward0"), ("gelu(x)", "GeluBackward0"),
    ("silu(x)", "SiluBackward0"), ("elu(x)", "EluBackward0"), ("leaky_relu(x)", "LeakyReluBackward0"),
    ("clamp(x, min=0)", "ClampBackward1"), ("var(x)", "VarBackward0"), ("std(x, axis=0)", "StdBackward0"),
    ("squeeze(unsqueeze(x, 0))", "SqueezeBackward0"), ("squeeze(unsqueeze(x, 0), axis=0)", "SqueezeBackward1"),
    ("unsqueeze(x, 1)", "UnsqueezeBackward0"), ("flatten(z)", "ViewBackward0"), ("flip(x)", "FlipBackward0"),
    ("cat([x, x])", "CatBackward0"), ("stack([x, x])", "StackBackward0"), ("cumsum(x)", "CumsumBackward0"),
    ("cumprod(x)", "CumprodBackward0"), ("log_softmax(z)", "LogSoftmaxBackward0"),
    ("cross_entropy(z, [1, 2])", "NllLossBackward0"), ("cross_entropy(z, softmax(z))", "DivBackward1"),
    ("cross_entropy(z, softmax(z), reduction='sum')", "NegBackward0"), ("mse_loss(x, 0)", "MseLossBackward0"),
    ("matmul(z, m)", "MmBackward0"), ("solve(m, x[0:3])", "LinalgSolveExBackward0"),
    ("logdet(m)", "WhereBackward0"), ("norm(x, ord=1)", "LinalgVectorNormBackward0"),
    ("norm(z, axis=0, ord=inf)", "LinalgVectorNormBackward0"), ("stack([x, x], axis=1)", "StackBackward0"),
    ("cholesky(m)", "LinalgCholeskyExBackward0"),
]


@pytest.mark.parametrize(("expr", "name"), GRAD_FNS, ids=[e for e, _ in GRAD_FNS])
def test_grad_fn_is_pytorchs_name(expr: str, name: str) -> None:
    assert run(expr).node("r").grad_fn == name


# --- diff and LaTeX ------------------------------------------------------------------------------------------

def _diff(program: str, *args: str) -> str:
    result = run_cli("diff", "-e", program, *args)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_diff_writes_the_functions_as_a_program_calls_them() -> None:
    out = _diff("x = [0.5, 2]; L = std(x, ddof=1) + sum(cumsum(flip(x)))", "--wrt", "x")
    assert "std(x, ddof=1)" in out and "flip(" in out and "axis=0" in out
    out = _diff("z = [1.0, 2, 0.5]; L = cross_entropy(z, 1)", "--wrt", "z")
    assert "∂L/∂z = softmax(z, axis=0) - [0, 1, 0]" in out
    out = _diff("z = [1.0, 2, 0.5]; L = erf(z[0]) + gelu(z[1])", "--wrt", "z", "--latex")
    assert r"\operatorname{erf}" in out
    out = _diff("A = [[1.0, 2], [3, 4]]; x = [1.0, 2]; L = sum(einsum('ij,j->i', A, x))", "--wrt", "A")
    assert "einsum('i,j->ij', ones(2), x)" in out


def test_a_check_with_cross_entropy_in_the_model_is_judged() -> None:
    model = "z = [1.0, 2.0, 0.5]; y = [0, 1, 0]; L = cross_entropy(z, y)"
    right = run_cli("check", "-e", model, "--claim", "dL/dz = softmax(z) - y")
    assert right.exit_code == 0 and "1 of 1 claim right" in right.stdout, right.stdout + right.stderr
    wrong = run_cli("check", "-e", model, "--claim", "dL/dz = y - softmax(z)")
    assert "0 of 1 claim right" in wrong.stdout


def test_jvp_tangent_a_number_is_that_number_in_every_entry() -> None:
    result = run_cli("jvp", "-e", "x = [1, 2, 3]; y = x^2", "--wrt", "x", "--tangent", "2", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["tangent"] == [2, 2, 2] and document["jvp"] == [4, 8, 12]


def test_batch_mode_runs_the_functions_with_their_batching_rules(tmp_path: object) -> None:
    program = ("x = [0.0, 0, 0]\nL = var(x, ddof=1) + sum(cumsum(flip(x))) + cross_entropy(x, 1) + einsum('i,i', x, x)"
               " + mse_loss(x, flip(x), reduction='sum') + sum(stack([x, x], axis=1) * [[1, 2], [3, 4], [5, 6]])\n")
    points = [[0.5, -1.0, 2.0], [1.0, 1.0, 3.0]]
    at = "\n".join(json.dumps({"x": p}) for p in points)
    result = run_cli("grad", "-e", program, "--at", "-", "--json", input=at + "\n")
    assert result.exit_code == 0, result.stderr
    for line, point in zip(result.stdout.splitlines(), points, strict=True):
        single = run_cli("grad", "-e", program, "--set", f"x={json.dumps(point)}", "--json")
        expected = json.loads(single.stdout)
        got = json.loads(line)
        assert got["value"] == pytest.approx(expected["value"], rel=1e-12)
        np.testing.assert_allclose(got["grad"]["x"], expected["grad"]["x"], rtol=1e-12)


# --- misuse: line, column, caret, hint ---------------------------------------------------------------------

MISUSE = [
    ("L = var(x, correction=1)", "var has no parameter 'correction'", "ddof=1 for PyTorch's"),
    ("L = std(x, unbiased=1)", "std has no parameter 'unbiased'", "gradcalc uses NumPy's names: ddof="),
    ("L = sum(log_softmax(x, dim=0))", "log_softmax has no parameter 'dim'", "axis="),
    ("L = var(x, ddof=3)", "var with ddof=3 of 3 entries", "less than the number of entries"),
    ("L = sum(elu(x, 1, 2))", "elu takes at most 2 arguments, got 3", "usage: elu(x, alpha=…)"),
    ("L = sum(cumsum(x, axis=1))", "axis 1 is out of range for a tensor of shape (3,)", "use an axis from 0 to 0"),
    ("L = sum(squeeze(x, axis=0))", "squeeze: axis 0 has size 3, not 1", "squeeze(x) removes every one"),
    ("L = cross_entropy(x, 1, reduction='avg')", "reduction 'avg' is not one of 'mean', 'sum', 'none'", "'mean'"),
    ("L = cross_entropy(x, 1, reduction=1)", "reduction is quoted text", "reduction='mean'"),
    ("L = cross_entropy(x, 3)", "class indices must be whole numbers from 0 to 2", "probabilities"),
    ("L = sum(sin('x'))", "quoted text is only allowed", "remove the quotes"),
    ("L = sum(concatenate([x, [[1]]]))", "shapes (3,) and (1, 1) differ", "every shape must match"),
    ("L = sum(stack([x, x[0:2]]))", "stack needs tensors of one shape", "concatenate([a, b])"),
    ("L = norm(reshape(x, 3, 1), ord=1)", "norm of a matrix with ord=1", "axis="),
    ("L = norm(x, ord=3)", "ord=3 is not supported", "ord=inf"),
    ("L = norm(x, p=1)", "norm has no parameter 'p'", "ord="),
    ("L = einsum('ii', x)", "'ii' names 2 axes for a tensor of shape (3,)", "one letter per axis"),
    ("L = einsum('ij,j', x)", "name 2 operands, got 1", "einsum('ij,jk->ik', A, B)"),
    ("L = sum(unsqueeze(x))", "unsqueeze is missing its argument 'axis'", "usage: unsqueeze(x, axis)"),
    ("L = len(x[0])", "len of a number", "first axis"),
    ("L = sum(clamp(x))", "clamp needs min or max", "clamp(x, min=0)"),
    ("L = logdet(x)", "logdet needs a square matrix", "check the shape"),
    ("L = sum(cholesky(-eye(2)))", "not positive definite", "A @ A.T + eye(n)"),
]


@pytest.mark.parametrize(("line", "message", "hint"), MISUSE, ids=[m for _, m, _ in MISUSE])
def test_misuse_is_an_error_with_place_and_hint(line: str, message: str, hint: str) -> None:
    result = run_cli("grad", "-e", f"x = [1.0, 2, 3]\n{line}")
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    assert message in result.stderr, result.stderr
    assert "hint:" in result.stderr and hint in result.stderr, result.stderr
    assert "<expr>:2:" in result.stderr and "^" in result.stderr, result.stderr  # the line, the column, the caret


# --- on a device: the fake one (tests/fakedevice.py refuses NumPy outside the backend) -------------------

DEVICE_PROGRAM = (
    "z = [[2.0, -1.0, 0.5], [0.1, 0.3, -0.2]]; w = [1.0, 2, 3]; h = gelu(z) * erf(w) + silu(z) * elu(-w)\n"
    "S = eye(3) + outer(w, w)\n"
    "L = cross_entropy(h, [0, 2]) + var(w, ddof=1) + sum(cumprod(flip(w))) + logdet(S) + sum(solve(S, w))\n"
    "L = L + sum(cholesky(S)) + mse_loss(h, z) + sum(einsum('ij,j->i', z, w)) + norm(w, ord=1) + argmax(w)\n"
    "L = L + sum(concatenate([w, squeeze(unsqueeze(w, 0))])) + det([[1, 2], [2, 4]] * w[0]) + std(log_softmax(z))\n"
)


@pytest.mark.parametrize("command", ["grad", "hessian"])
def test_the_functions_run_on_a_device_as_on_the_cpu(command: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    import fakedevice

    from gradcalc.engine import backend as B

    cpu = run_cli(command, "-e", DEVICE_PROGRAM, "--wrt", "w", "--json")
    assert cpu.exit_code == 0, cpu.stderr
    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    try:
        device = run_cli(command, "-e", DEVICE_PROGRAM, "--wrt", "w", "--json", "--device", "gpu")
    finally:
        B.use("cpu")
    assert device.exit_code == 0, device.stderr
    assert device.stdout == cpu.stdout


# --- a two-layer classifier as a PyTorch user writes it, through every command ------------------------------

CLASSIFIER = """\
const Y = [[1, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 1]]
X = [[0.5, -1.0], [1.5, 0.2], [-0.3, 0.8], [1.0, 1.0]]
W1 = [[0.2, -0.4, 0.1], [0.5, 0.3, -0.2]]
b1 = [0.1, 0.0, -0.1]
W2 = [[0.3, -0.2, 0.5], [-0.1, 0.4, 0.2], [0.2, 0.1, -0.3]]
b2 = [0.0, 0.1, -0.1]
h = gelu(X @ W1 + b1)
z = matmul(h, W2) + b2
L = cross_entropy(z, [0, 2, 1, 2]) + 0.01 * sum(square(W1))
check dL/dz = (softmax(z) - Y)/4
check dL/db2 = sum(softmax(z) - Y, axis=0)/4
check dL/dW2 = h.T @ (softmax(z) - Y)/4
check dL/dz = (exp(log_softmax(z, axis=1)) - Y)/4
check dL/dz = softmax(z) - Y
"""


def test_a_two_layer_classifier_runs_differentiates_and_is_checked(tmp_path: object) -> None:
    from pathlib import Path

    program = Path(str(tmp_path)) / "classifier.eq"
    program.write_text(CLASSIFIER, encoding="utf-8")
    checked = run_cli("check", program)
    assert "4 of 5 claims right" in checked.stdout, checked.stdout + checked.stderr
    for args in (("grad",), ("hessian", "--wrt", "b2"), ("jacobian", "--of", "z", "--wrt", "b1"),
                 ("diff", "--wrt", "b2"), ("graph",), ("explain", "--wrt", "W2"),
                 ("gradcheck", "--order", "2", "--wrt", "W1")):
        result = run_cli(args[0], program, *args[1:])
        assert result.exit_code == 0, (args, result.stdout + result.stderr)
    diff = run_cli("diff", program, "--wrt", "b2").stdout
    assert "∂L/∂b2 = 1/4*sum(softmax(b2 + gelu(b1 + X @ W1) @ W2, axis=1) - [[1, 0, 0], [0, 0, 1], [0, 1, 0], " \
           "[0, 0, 1]], axis=0)" in diff, diff
