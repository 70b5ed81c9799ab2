"""Jacobians, Hessians and Jacobian-vector products: `gradcalc jacobian`, `hessian`, `jvp` and the API.

Every expected value is independent of gradcalc's derivative code: a closed form, central
finite differences of the program's own values (tests.helpers.central_difference), or PyTorch.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pytest
from helpers import (
    SAMPLES,
    assert_bad_input,
    assert_no_traceback,
    central_difference,
    json_error,
    json_ok,
    located_error,
    run_cli,
    strict_json,
)

import gradcalc

DOUBLING = str(SAMPLES / "doubling.eq")
X_DOUBLING = np.array([-0.9618, -3.3220, -0.6637])


# --- tools -------------------------------------------------------------------------------------------


def _run(text: str, values: Mapping[str, Any] | None = None) -> Any:
    return gradcalc.parse_program(text).run(dict(values or {}))


def _as_json(value: Any) -> str:
    return json.dumps(np.asarray(value, dtype=float).tolist())


def _sets(values: Mapping[str, Any]) -> list[str]:
    """--set NAME=JSON for each value."""
    args: list[str] = []
    for name, value in values.items():
        args += ["--set", f"{name}={_as_json(value)}"]
    return args


def numeric_jacobian(evaluate: Callable[[dict[str, np.ndarray]], Any], values: Mapping[str, Any],
                     wrt: str, step: float = 1e-6) -> np.ndarray:
    """∂evaluate(values)/∂values[wrt], shape out.shape + wrt.shape, by central differences.

    central_difference differentiates a scalar function; each output entry is one such function.
    The program runs are cached, so every perturbed point is evaluated once for all entries.
    """
    base = {name: np.asarray(value, dtype=np.float64) for name, value in values.items()}
    cache: dict[bytes, np.ndarray] = {}

    def at(point: np.ndarray) -> np.ndarray:
        key = point.tobytes()
        if key not in cache:
            cache[key] = np.asarray(evaluate({**base, wrt: point}), dtype=np.float64)
        return cache[key]

    out = at(base[wrt].copy())
    jac = np.zeros(out.shape + base[wrt].shape)
    for k in np.ndindex(out.shape):
        jac[k] = central_difference(lambda point, k=k: float(at(point)[k]), base[wrt], step)
    return jac


def fd_jacobian(text: str, values: Mapping[str, Any], of: str, wrt: str) -> np.ndarray:
    program = gradcalc.parse_program(text)
    return numeric_jacobian(lambda vals: program.run(vals).value(of), values, wrt)


def fd_hessian_block(text: str, values: Mapping[str, Any], of: str, first: str, second: str) -> np.ndarray:
    """∂/∂second of ∂of/∂first (shape first.shape + second.shape): finite differences of the gradient."""
    program = gradcalc.parse_program(text)
    return numeric_jacobian(lambda vals: program.run(vals).grad(of, [first]).grads[first], values, second)


def assert_close(got: Any, expected: Any, rtol: float = 1e-6, what: str = "") -> None:
    """Entrywise close, with an absolute floor scaled to the largest expected entry."""
    got, expected = np.asarray(got, dtype=float), np.asarray(expected, dtype=float)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    scale = max(1.0, float(np.abs(expected).max(initial=0.0)))
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=rtol * scale, err_msg=what)


_LABEL = re.compile(r"^[^\W\d]\w*(\[[\d,]+\])?$")


def _is_label(token: str) -> bool:
    """x, x[0] or W[1,2]: a row or column label of a printed matrix."""
    return bool(_LABEL.match(token))


def parse_matrix(stdout: str, title: str) -> tuple[list[str], list[str], np.ndarray]:
    """The labelled matrix printed under the line that starts with `title`: rows, columns, numbers.

    A wide matrix may come as several tables of columns one after the other (each with its own
    header line of column labels): they are put back together.
    """
    lines = stdout.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(title)), None)
    assert start is not None, f"no {title!r} heading in:\n{stdout}"
    rows: list[str] = []
    columns: list[str] = []
    entries: dict[tuple[str, str], float] = {}
    at = start + 1
    while at < len(lines):
        header = lines[at].split()
        if not header or not all(map(_is_label, header)):
            break
        at += 1
        if any(label in columns for label in header):
            break  # the next matrix (a Hessian's next block has its own heading first)
        columns += header
        while at < len(lines):
            parts = lines[at].split()
            if len(parts) != len(header) + 1 or not _is_label(parts[0]) or any(map(_is_label, parts[1:])):
                break
            if parts[0] not in rows:
                rows.append(parts[0])
            for label, text in zip(header, parts[1:]):
                entries[parts[0], label] = float(text)
            at += 1
        while at < len(lines) and not lines[at].strip():
            at += 1
    matrix = np.array([[entries.get((r, c), np.nan) for c in columns] for r in rows])
    return rows, columns, matrix


# --- seeds: 512·I and 2·I ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "rev", "fwd"])
def test_doubling_sample_jacobian_is_512_identity_json(mode: str) -> None:
    doc = json_ok("jacobian", DOUBLING, "--of", "y", "--wrt", "x", "--mode", mode)
    assert doc["of"] == "y"
    assert doc["wrt"] == "x"
    assert doc["shape"] == [3, 3]
    assert_close(doc["jacobian"], 512 * np.eye(3), rtol=1e-12)
    assert doc["mode"] == ("rev" if mode == "auto" else mode)  # 3 inputs, 3 outputs: not fewer inputs


def test_doubling_sample_jacobian_human_output_is_labelled() -> None:
    result = run_cli("jacobian", DOUBLING, "--of", "y", "--wrt", "x")
    assert result.exit_code == 0, result.output
    assert_no_traceback(result)
    rows, columns, matrix = parse_matrix(result.stdout, "∂y/∂x")
    assert rows == ["y[0]", "y[1]", "y[2]"]
    assert columns == ["x[0]", "x[1]", "x[2]"]
    assert_close(matrix, 512 * np.eye(3), rtol=1e-12)


def test_doubling_sample_jacobian_api_matches_finite_differences() -> None:
    program = gradcalc.load(DOUBLING)
    result = program.run().jacobian("y", ["x"], mode="fwd")
    assert_close(result.blocks[0], 512 * np.eye(3), rtol=1e-12)
    numeric = numeric_jacobian(lambda vals: program.run(vals).value("y"), {"x": X_DOUBLING}, "x")
    assert_close(result.blocks[0], numeric, rtol=1e-6)


@pytest.mark.parametrize("mode", ["auto", "rev", "fwd"])
def test_two_x_has_jacobian_two_identity(mode: str) -> None:
    doc = json_ok("jacobian", "-e", "x = [1, 2, 3]; y = 2*x", "--of", "y", "--wrt", "x", "--mode", mode)
    assert doc["shape"] == [3, 3]
    assert_close(doc["jacobian"], 2 * np.eye(3), rtol=1e-12)
    result = _run("x = [1, 2, 3]; y = 2*x").jacobian("y", ["x"], mode=mode)
    assert result.of == "y"
    assert result.wrt == ["x"]
    assert_close(result.value, [2, 4, 6], rtol=1e-12)
    assert_close(result.blocks[0], 2 * np.eye(3), rtol=1e-12)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_jacobian_of_a_leaf_with_respect_to_itself_is_identity(mode: str) -> None:
    result = _run("x = [[1, 2], [3, 4]]; y = x * 2").jacobian("x", ["x"], mode=mode)
    assert_close(result.blocks[0], np.eye(4).reshape(2, 2, 2, 2), rtol=1e-12)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_scalar_of_scalar_jacobian_has_empty_shape(mode: str) -> None:
    doc = json_ok("jacobian", "-e", "y = x^2 * sin(x)", "--set", "x=2", "--wrt", "x", "--mode", mode)
    assert doc["shape"] == []
    assert doc["jacobian"] == pytest.approx(2 * 2 * np.sin(2) + 4 * np.cos(2), rel=1e-12)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_float32_jacobian_of_doubling_sample(mode: str) -> None:
    doc = json_ok("jacobian", DOUBLING, "--of", "y", "--wrt", "x", "--mode", mode, "--dtype", "float32")
    assert_close(doc["jacobian"], 512 * np.eye(3), rtol=1e-6)


def test_hessian_through_a_while_loop() -> None:
    text = "x = [-0.9618, -3.3220, -0.6637]; y = x * 2; while norm(y) < 1000 { y = y * 2 }; L = sum(y^2)"
    doc = json_ok("hessian", "-e", text, "--of", "L", "--wrt", "x")
    assert_close(doc["hessian"], 2 * 512**2 * np.eye(3), rtol=1e-12)  # L = 512² Σ x²
    assert doc["value"] == pytest.approx(512**2 * float(np.sum(X_DOUBLING**2)), rel=1e-12)


def test_scalar_hessian_closed_form_and_human_output() -> None:
    expected = 2 * np.sin(2) + 8 * np.cos(2) - 4 * np.sin(2)  # (x² sin x)'' at 2
    doc = json_ok("hessian", "-e", "y = x^2 * sin(x)", "--set", "x=2", "--wrt", "x")
    assert doc["shape"] == []
    assert doc["hessian"] == pytest.approx(expected, rel=1e-12)
    result = run_cli("hessian", "-e", "y = x^2 * sin(x)", "--set", "x=2", "--wrt", "x")
    assert result.exit_code == 0, result.output
    _, _, matrix = parse_matrix(result.stdout, "∂²y/∂x²")
    assert matrix[0, 0] == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize("mode", ["auto", "rev", "fwd"])
def test_empty_output_has_an_empty_jacobian(mode: str) -> None:
    """torch.func.jacrev gives shape (0, 3) for an empty output: so must both modes here."""
    result = _run("x = [1, 2, 3]; y = x[3:] * 2").jacobian("y", ["x"], mode=mode)
    assert result.blocks[0].shape == (0, 3)
    doc = json_ok("jacobian", "-e", "x = [1, 2, 3]; y = x[3:] * 2", "--wrt", "x", "--mode", mode)
    assert doc["shape"] == [0, 3]
    assert doc["jacobian"] == []


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_empty_wrt_has_an_empty_jacobian(mode: str) -> None:
    result = _run("x = [1, 2, 3]; e = x[3:]; y = sum(e) + x").jacobian("y", ["e", "x"], mode=mode)
    assert result.blocks[0].shape == (3, 0)
    assert_close(result.blocks[1], np.eye(3), rtol=1e-12)


# --- closed forms ------------------------------------------------------------------------------------

TANH = "y = tanh(W @ x + b)"


def _tanh_values(m: int = 3, n: int = 4, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"W": rng.normal(size=(m, n)), "x": rng.normal(size=n), "b": rng.normal(size=m)}


def _tanh_closed_forms(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    y = np.tanh(v["W"] @ v["x"] + v["b"])
    d = 1 - y**2
    m, n = v["W"].shape
    jw = np.zeros((m, m, n))
    for i in range(m):
        jw[i, i, :] = d[i] * v["x"]  # J[i, k, j] = δ_ik (1 − y_i²) x_j
    return {"x": d[:, None] * v["W"], "W": jw, "b": np.diag(d)}


@pytest.mark.parametrize("mode", ["auto", "rev", "fwd"])
def test_tanh_layer_jacobians_match_closed_forms(mode: str) -> None:
    values = _tanh_values()
    expected = _tanh_closed_forms(values)
    result = _run(TANH, values).jacobian("y", ["x", "W", "b"], mode=mode)
    assert result.wrt == ["x", "W", "b"]
    assert_close(result.value, np.tanh(values["W"] @ values["x"] + values["b"]), rtol=1e-12)
    for name, block in zip(result.wrt, result.blocks):
        assert block.shape == (3, *values[name].shape), name
        assert_close(block, expected[name], rtol=1e-10, what=f"∂y/∂{name} ({mode})")


def test_tanh_layer_jacobian_blocks_through_cli_json() -> None:
    values = _tanh_values(m=4, n=2, seed=7)  # 2 + 8 + 4 = 14 inputs, 4 outputs: reverse
    expected = _tanh_closed_forms(values)
    doc = json_ok("jacobian", "-e", TANH, *_sets(values), "--of", "y", "--wrt", "x,W", "--wrt", "b")
    assert doc["of"] == "y"
    assert doc["wrt"] == ["x", "W", "b"]
    assert doc["mode"] == "rev"
    assert [block["wrt"] for block in doc["blocks"]] == ["x", "W", "b"]
    for block in doc["blocks"]:
        name = block["wrt"]
        assert block["shape"] == [4, *values[name].shape]
        assert_close(block["jacobian"], expected[name], rtol=1e-10, what=name)


def test_jacobian_with_respect_to_an_intermediate() -> None:
    values = _tanh_values()
    h = values["W"] @ values["x"] + values["b"]
    result = _run("h = W @ x + b; y = tanh(h)", values).jacobian("y", ["h"], mode="rev")
    assert_close(result.blocks[0], np.diag(1 - np.tanh(h) ** 2), rtol=1e-10)
    result = _run("h = W @ x + b; y = tanh(h)", values).jacobian("y", ["h"], mode="fwd")
    assert_close(result.blocks[0], np.diag(1 - np.tanh(h) ** 2), rtol=1e-10)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_matrix_product_jacobian_wrt_a_matrix(mode: str) -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(2, 3)), rng.normal(size=(3, 4))
    result = _run("Y = A @ B", {"A": a, "B": b}).jacobian("Y", ["A", "B"], mode=mode)
    ja, jb = result.blocks
    # Y[i, j] = Σ_k A[i, k] B[k, j]: ∂Y[i,j]/∂A[p,q] = δ_ip B[q, j], ∂Y[i,j]/∂B[p,q] = A[i, p] δ_jq
    expected_a = np.einsum("ip,qj->ijpq", np.eye(2), b)
    expected_b = np.einsum("ip,jq->ijpq", a, np.eye(4))
    assert_close(ja, expected_a, rtol=1e-12, what="∂Y/∂A")
    assert_close(jb, expected_b, rtol=1e-12, what="∂Y/∂B")


def test_quadratic_form_hessian_is_a_plus_a_transpose() -> None:
    rng = np.random.default_rng(4)
    a, x = rng.normal(size=(4, 4)), rng.normal(size=4)
    doc = json_ok("hessian", "-e", "L = x @ A @ x", *_sets({"A": a, "x": x}), "--of", "L", "--wrt", "x")
    assert doc["of"] == "L"
    assert doc["wrt"] == "x"
    assert doc["shape"] == [4, 4]
    assert doc["value"] == pytest.approx(float(x @ a @ x), rel=1e-12)
    assert_close(doc["hessian"], a + a.T, rtol=1e-12)


def test_quadratic_form_block_hessian_with_the_matrix() -> None:
    rng = np.random.default_rng(5)
    a, x = rng.normal(size=(3, 3)), rng.normal(size=3)
    result = _run("L = x @ A @ x", {"A": a, "x": x}).hessian("L", ["x", "A"])
    assert result.wrt == ["x", "A"]
    (hxx, hxa), (hax, haa) = result.blocks
    # ∂L/∂x_i = ((A + Aᵀ) x)_i, so ∂²L/∂x_i∂A_kl = δ_ik x_l + δ_il x_k; L is linear in A.
    eye = np.eye(3)
    expected_xa = np.einsum("ik,l->ikl", eye, x) + np.einsum("il,k->ikl", eye, x)
    assert_close(hxx, a + a.T, rtol=1e-12, what="xx")
    assert_close(hxa, expected_xa, rtol=1e-12, what="xA")
    assert_close(hax, expected_xa.transpose(1, 2, 0), rtol=1e-12, what="Ax")
    assert_close(haa, np.zeros((3, 3, 3, 3)), what="AA")


def test_quartic_chain_hessian_closed_form_and_human_output() -> None:
    text = "x = [1, 2, 3]; L = sum(x^4) + sum(x[:-1] * x[1:])"
    x = np.array([1.0, 2.0, 3.0])
    expected = np.diag(12 * x**2) + np.diag(np.ones(2), 1) + np.diag(np.ones(2), -1)
    doc = json_ok("hessian", "-e", text, "--wrt", "x")
    assert doc["value"] == pytest.approx(float(np.sum(x**4) + np.sum(x[:-1] * x[1:])), rel=1e-12)
    assert_close(doc["hessian"], expected, rtol=1e-12)
    result = run_cli("hessian", "-e", text, "--wrt", "x")
    assert result.exit_code == 0, result.output
    heading = next(line for line in result.stdout.splitlines() if line.startswith("∂²L/∂x²"))
    assert "symmetric" in heading
    rows, columns, matrix = parse_matrix(result.stdout, "∂²L/∂x²")
    assert rows == columns == ["x[0]", "x[1]", "x[2]"]
    assert_close(matrix, expected, rtol=1e-12)


def test_quartic_chain_hessian_larger_random_point() -> None:
    x = np.random.default_rng(6).normal(size=6)
    result = _run("L = sum(x^4) + sum(x[:-1] * x[1:])", {"x": x}).hessian("L", ["x"])
    expected = np.diag(12 * x**2) + np.diag(np.ones(5), 1) + np.diag(np.ones(5), -1)
    assert_close(result.blocks[0][0], expected, rtol=1e-12)


BROADCAST = "y = a * B + c"


def _broadcast_values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(8)
    return {"a": rng.normal(size=(3, 1)), "B": rng.normal(size=(3, 4)), "c": rng.normal(size=4)}


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_broadcasting_jacobian_blocks_match_finite_differences(mode: str) -> None:
    values = _broadcast_values()
    result = _run(BROADCAST, values).jacobian("y", ["a", "B", "c"], mode=mode)
    for name, block in zip(result.wrt, result.blocks):
        assert block.shape == (3, 4, *values[name].shape), name
        assert_close(block, fd_jacobian(BROADCAST, values, "y", name), rtol=1e-6, what=f"∂y/∂{name} {mode}")


def test_broadcasting_jacobian_blocks_closed_form_via_cli() -> None:
    values = _broadcast_values()
    a, b = values["a"], values["B"]
    expected = {
        "a": np.einsum("ip,jq->ijpq", np.eye(3), np.ones((4, 1))) * b[:, :, None, None],  # B[i,j] δ_ip
        "B": np.einsum("ip,jq->ijpq", np.eye(3), np.eye(4)) * a[:, :, None, None],  # a[i] δ_ip δ_jq
        "c": np.broadcast_to(np.eye(4), (3, 4, 4)),  # δ_jq
    }
    doc = json_ok("jacobian", "-e", BROADCAST, *_sets(values), "--wrt", "a,B,c")
    for block in doc["blocks"]:
        assert_close(block["jacobian"], expected[block["wrt"]], rtol=1e-12, what=block["wrt"])


# --- random programs: rev == fwd == finite differences -----------------------------------------------

LEAVES = {"x": (3,), "M": (2, 3), "s": ()}
Pool = list[tuple[str, tuple[int, ...]]]


def _pick(rnd: random.Random, pool: Pool) -> tuple[str, tuple[int, ...]]:
    return rnd.choices(pool, [(1 + i) ** 2 for i in range(len(pool))])[0]  # recent values more often: depth


def _unary(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    a, shape = _pick(rnd, pool)
    forms = ["sin({})", "tanh({})", "sigmoid({})", "{}^2", "exp(0.3 * {})", "softplus({})", "sqrt(1 + {}^2)",
             "cos({}) * 2"]
    if not smooth:
        forms += ["abs({})", "clip({}, -0.8, 0.8)"]
    return rnd.choice(forms).format(a), shape


def _binary(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    (a, sa), (b, sb) = _pick(rnd, pool), _pick(rnd, pool)
    try:
        shape = tuple(np.broadcast_shapes(sa, sb))
    except ValueError:
        return None
    return rnd.choice(["{} + {}", "{} * {}", "{} - {}", "{} / (1 + {}^2)"]).format(a, b), shape


def _reduce(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    a, shape = _pick(rnd, pool)
    if not shape:
        return None
    fn = rnd.choice(["sum", "mean", "logsumexp", "norm", "prod"] + ([] if smooth else ["max", "min"]))
    axis = rnd.choice([None, *range(len(shape)), -1])
    out = np.sum(np.zeros(shape), axis=axis).shape
    return (f"{fn}({a})" if axis is None else f"{fn}({a}, axis={axis})"), out


def _matmul(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    operands = [(name, shape) for name, shape in pool if shape]
    operands += [(f"{name}.T", shape[::-1]) for name, shape in pool if len(shape) == 2]
    pairs = [(u, v) for u in operands for v in operands
             if u[1][-1] == v[1][0] and not (len(u[1]) == 1 and len(v[1]) == 1)]
    if not pairs:
        return None
    (u, su), (v, sv) = rnd.choice(pairs)
    return f"{u} @ {v}", (np.zeros(su) @ np.zeros(sv)).shape


def _index(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    a, shape = _pick(rnd, pool)
    full = slice(None)
    if len(shape) == 1:
        options = [("[0]", (0,)), ("[-1]", (-1,)), ("[1:]", (slice(1, None),)), ("[::2]", (slice(None, None, 2),))]
    elif len(shape) == 2:
        options = [("[0]", (0,)), ("[:, 1]", (full, 1)), ("[1:, :]", (slice(1, None), full)), ("[-1, 0]", (-1, 0))]
    else:
        return None
    text, index = rnd.choice(options)
    return f"{a}{text}", np.zeros(shape)[index].shape


def _softmax(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    a, shape = _pick(rnd, pool)
    if not shape:
        return None
    if len(shape) == 2 and rnd.random() < 0.5:
        return f"softmax({a}, axis=0)", shape
    return f"softmax({a})", shape


def _where(rnd: random.Random, pool: Pool, smooth: bool) -> tuple[str, tuple[int, ...]] | None:
    if smooth:
        return None
    (a, sa), (b, sb) = _pick(rnd, pool), _pick(rnd, pool)
    if sb not in ((), sa):
        return None
    return f"where({a} > 0, {a}, {b} * 2)", sa


MENU = [_unary, _binary, _reduce, _matmul, _index, _softmax, _where]


def random_program(seed: int, smooth: bool, statements: int = 5) -> tuple[str, str, dict[str, np.ndarray]]:
    """(text, output name, leaf values) of a random program on the leaves x (3,), M (2, 3) and s ()."""
    rnd = random.Random(seed)
    rng = np.random.default_rng(seed)
    values = {name: rng.normal(size=shape) for name, shape in LEAVES.items()}
    pool: Pool = list(LEAVES.items())
    lines = []
    while len(lines) < statements:
        made = rnd.choice(MENU)(rnd, pool, smooth)
        if made is None:
            continue
        name = f"t{len(lines)}"
        lines.append(f"{name} = {made[0]}")
        pool.append((name, made[1]))
    # every leaf and every statement reaches the output, which keeps the last value's shape
    mixed = " + ".join(f"sum({name})" for name, _ in pool)
    lines.append(f"y = {pool[-1][0]} * (1 + 0.5 * sin(0.3 * ({mixed})))")
    header = [f"{name} = 0" for name in LEAVES]  # placeholders: the values come from run(values)
    return "\n".join(header + lines) + "\n", "y", values


@pytest.mark.parametrize("seed", range(16))
def test_random_program_rev_fwd_and_finite_differences_agree(seed: int) -> None:
    text, out, values = random_program(seed, smooth=False)
    run = _run(text, values)
    rev = run.jacobian(out, list(LEAVES), mode="rev")
    fwd = run.jacobian(out, list(LEAVES), mode="fwd")
    assert rev.mode == "rev"
    assert fwd.mode == "fwd"
    out_shape = np.shape(run.value(out))
    for name, jr, jf in zip(LEAVES, rev.blocks, fwd.blocks):
        where = f"∂{out}/∂{name} of\n{text}"
        assert jr.shape == out_shape + LEAVES[name], where
        assert_close(jf, jr, rtol=1e-9, what=f"fwd vs rev, {where}")
        assert_close(jr, fd_jacobian(text, values, out, name), rtol=1e-5, what=f"rev vs differences, {where}")


@pytest.mark.parametrize("seed", range(100, 108))
def test_random_program_jvp_and_vjp_match_finite_difference_jacobian(seed: int) -> None:
    text, out, values = random_program(seed, smooth=False)
    run = _run(text, values)
    rng = np.random.default_rng(seed)
    out_shape = np.shape(run.value(out))
    for name, shape in LEAVES.items():
        numeric = fd_jacobian(text, values, out, name)
        tangent = rng.normal(size=shape)
        tangents = run.jvp(out, name, tangent)
        assert tangents.of == out
        assert tangents.wrt == name
        assert_close(tangents.jvp, np.tensordot(numeric, tangent, axes=len(shape)), rtol=1e-5,
                     what=f"J·v for {name} of\n{text}")
        cotangent = rng.normal(size=out_shape)
        vjp = run.grad(out, [name], vector=cotangent).grads[name]
        assert_close(vjp, np.tensordot(cotangent, numeric, axes=len(out_shape)), rtol=1e-5,
                     what=f"vᵀ·J for {name} of\n{text}")


# --- --mode auto ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "wrt", "mode", "expected"), [
    ("x = [1, 2]; y = x[0] * [1, 2, 3] + x[1]", "x", "fwd", [[1, 1], [2, 1], [3, 1]]),  # 2 inputs < 3 outputs
    ("x = [1, 2, 3, 4, 5]; y = x[:2] * x[3:]", "x", "rev", [[4, 0, 0, 1, 0], [0, 5, 0, 0, 2]]),  # 5 > 2
    ("x = [1, 2, 3]; y = 3 * x", "x", "rev", 3 * np.eye(3)),  # equal: reverse
    ("x = [1, 2, 3]; y = sum(x^2)", "x", "rev", [2, 4, 6]),  # scalar output
    ("t = 2; y = t * [1, 2, 3]", "t", "fwd", [1, 2, 3]),  # scalar input
    ("a = [1, 2]; b = [3, 4]; y = [a[0] * b[0], a[1] * b[1], a[0]]", "a,b", "rev", None),  # 2 + 2 > 3
])
def test_auto_mode_picks_forward_only_when_inputs_are_fewer(text: str, wrt: str, mode: str, expected: Any) -> None:
    doc = json_ok("jacobian", "-e", text, "--of", "y", "--wrt", wrt)
    assert doc["mode"] == mode, doc
    if expected is not None:
        assert_close(doc["jacobian"], expected, rtol=1e-12)
    else:
        blocks = {block["wrt"]: block["jacobian"] for block in doc["blocks"]}
        assert_close(blocks["a"], [[3, 0], [0, 4], [1, 0]], rtol=1e-12)
        assert_close(blocks["b"], [[1, 0], [0, 2], [0, 0]], rtol=1e-12)
    assert _run(text).jacobian("y", wrt.split(",")).mode == mode


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_explicit_mode_is_reported(mode: str) -> None:
    doc = json_ok("jacobian", "-e", "x = [1, 2]; y = x[0] * [1, 2, 3] + x[1]", "--wrt", "x", "--mode", mode)
    assert doc["mode"] == mode
    assert_close(doc["jacobian"], [[1, 1], [2, 1], [3, 1]], rtol=1e-12)
    result = run_cli("jacobian", "-e", "x = [1, 2]; y = x[0] * [1, 2, 3] + x[1]", "--wrt", "x", "--mode", mode)
    assert ("reverse" if mode == "rev" else "forward") + " mode" in result.stdout


# --- JVP and VJP against closed forms ------------------------------------------------------------------


def test_jvp_of_tanh_layer_is_jacobian_times_tangent() -> None:
    values = _tanh_values()
    expected = _tanh_closed_forms(values)
    rng = np.random.default_rng(11)
    run = _run(TANH, values)
    for name in ("x", "W", "b"):
        tangent = rng.normal(size=values[name].shape)
        result = run.jvp("y", name, tangent)
        assert_close(result.tangent, tangent, rtol=1e-15)
        assert_close(result.value, np.tanh(values["W"] @ values["x"] + values["b"]), rtol=1e-12)
        assert_close(result.jvp, np.tensordot(expected[name], tangent, axes=tangent.ndim), rtol=1e-10, what=name)


def test_jvp_through_cli_json() -> None:
    values = _tanh_values()
    expected = _tanh_closed_forms(values)
    tangent = np.random.default_rng(12).normal(size=(3, 4))
    doc = json_ok("jvp", "-e", TANH, *_sets(values), "--of", "y", "--wrt", "W", "--tangent", _as_json(tangent))
    assert doc["of"] == "y"
    assert doc["wrt"] == "W"
    assert doc["shape"] == [3]
    assert_close(doc["tangent"], tangent, rtol=1e-15)
    assert_close(doc["value"], np.tanh(values["W"] @ values["x"] + values["b"]), rtol=1e-12)
    assert_close(doc["jvp"], np.tensordot(expected["W"], tangent, axes=2), rtol=1e-10)


def test_jvp_of_doubling_sample_and_tangent_ones() -> None:
    doc = json_ok("jvp", DOUBLING, "--of", "y", "--wrt", "x", "--tangent", "[1, 0, 0]")
    assert_close(doc["jvp"], [512, 0, 0], rtol=1e-12)
    doc = json_ok("jvp", DOUBLING, "--of", "y", "--wrt", "x", "--tangent", "ones")
    assert_close(doc["jvp"], [512, 512, 512], rtol=1e-12)
    doc = json_ok("jvp", "-e", "y = x^2 * sin(x)", "--set", "x=2", "--wrt", "x", "--tangent", "1")
    assert doc["jvp"] == pytest.approx(4 * np.sin(2) + 4 * np.cos(2), rel=1e-12)


def test_jvp_human_output() -> None:
    result = run_cli("jvp", DOUBLING, "--of", "y", "--wrt", "x", "--tangent", "[0, 1, 0]")
    assert result.exit_code == 0, result.output
    assert "J·v" in result.stdout
    assert "512" in result.stdout


def test_vjp_of_tanh_layer_is_vector_times_jacobian() -> None:
    values = _tanh_values()
    expected = _tanh_closed_forms(values)
    vector = np.random.default_rng(13).normal(size=3)
    grads = _run(TANH, values).grad("y", ["x", "W", "b"], vector=vector).grads
    for name in ("x", "W", "b"):
        assert_close(grads[name], np.tensordot(vector, expected[name], axes=1), rtol=1e-10, what=name)
    doc = json_ok("grad", "-e", TANH, *_sets(values), "--of", "y", "--wrt", "W", "--vector", _as_json(vector))
    assert_close(doc["grad"]["W"], np.tensordot(vector, expected["W"], axes=1), rtol=1e-10)


# --- Hessians: symmetric, and equal to differences of the gradient ------------------------------------


@pytest.mark.parametrize("seed", range(200, 210))
def test_random_smooth_hessian_is_symmetric_and_matches_differences(seed: int) -> None:
    text, out, values = random_program(seed, smooth=True, statements=5)
    if np.shape(_run(text, values).value(out)):
        text += f"L = sum({out})\n"
        out = "L"
    names = list(LEAVES)
    result = _run(text, values).hessian(out, names)
    assert result.wrt == names
    sizes = {name: int(np.prod(shape)) for name, shape in LEAVES.items()}
    for i, first in enumerate(names):
        for j, second in enumerate(names):
            block = result.blocks[i][j]
            where = f"∂²{out}/∂{first}∂{second} of\n{text}"
            assert block.shape == LEAVES[first] + LEAVES[second], where
            mirror = result.blocks[j][i].reshape(sizes[second], sizes[first]).T
            assert_close(block.reshape(sizes[first], sizes[second]), mirror, rtol=1e-9, what=f"symmetry, {where}")
            assert_close(block, fd_hessian_block(text, values, out, first, second), rtol=1e-5, what=where)


def test_block_hessian_cli_matches_differences_and_says_symmetric() -> None:
    rng = np.random.default_rng(21)
    values = {"W": rng.normal(size=(2, 3)), "x": rng.normal(size=3)}
    text = "h = tanh(W @ x); L = sum(h^2) + sum(x^3) / 3"
    doc = json_ok("hessian", "-e", text, *_sets(values), "--of", "L", "--wrt", "x", "--wrt", "W")
    assert doc["of"] == "L"
    assert doc["wrt"] == ["x", "W"]
    h = np.tanh(values["W"] @ values["x"])
    assert doc["value"] == pytest.approx(float(np.sum(h**2) + np.sum(values["x"] ** 3) / 3), rel=1e-12)
    pairs = [block["wrt"] for block in doc["blocks"]]
    assert pairs == [["x", "x"], ["x", "W"], ["W", "x"], ["W", "W"]]
    for block in doc["blocks"]:
        first, second = block["wrt"]
        assert block["shape"] == list(values[first].shape + values[second].shape)
        assert_close(block["hessian"], fd_hessian_block(text, values, "L", first, second), rtol=1e-5,
                     what=f"{first},{second}")
    result = run_cli("hessian", "-e", text, *_sets(values), "--of", "L", "--wrt", "x,W")
    assert result.exit_code == 0, result.output
    headings = {line.split()[0]: line for line in result.stdout.splitlines() if line.startswith("∂²L/∂")}
    assert "symmetric" in headings["∂²L/∂x²"], result.stdout
    assert "symmetric" in headings["∂²L/∂W²"], result.stdout
    assert "symmetric" not in headings["∂²L/∂x∂W"], result.stdout  # a 3×6 block is not a symmetric matrix
    _, _, hxx = parse_matrix(result.stdout, "∂²L/∂x²")
    assert_close(hxx, doc["blocks"][0]["hessian"], rtol=1e-5)  # the table shows the same numbers (6 digits)


def test_hessian_of_neuron_sample_is_the_closed_form() -> None:
    # L = 10 - (w3*w1*a + w4*w2*a): ∂²L/∂w1∂w3 = -a = -2, ∂²L/∂w3² = ∂²L/∂w1² = 0
    doc = json_ok("hessian", str(SAMPLES / "neuron.eq"), "--wrt", "w1,w3")
    blocks = {tuple(block["wrt"]): block["hessian"] for block in doc["blocks"]}
    assert blocks == {("w1", "w1"): 0.0, ("w1", "w3"): -2.0, ("w3", "w1"): -2.0, ("w3", "w3"): 0.0}
    assert doc["value"] == 15.0


# --- errors ------------------------------------------------------------------------------------------


def test_hessian_of_a_non_scalar_output_exits_2_naming_the_line(tmp_path: Any) -> None:
    path = tmp_path / "vector.eq"
    path.write_text("x = [1, 2]\ny = x^2\n", encoding="utf-8")
    error = located_error(run_cli("hessian", path, "--of", "y", "--wrt", "x"), file=str(path), line=2,
                          code="y = x^2")
    assert re.search(r"hessian needs a scalar output", error.message, re.IGNORECASE), error.text
    body = json_error(run_cli("hessian", path, "--of", "y", "--wrt", "x", "--json"))
    assert body["line"] == 2
    assert "scalar" in body["message"]
    with pytest.raises(gradcalc.GradcalcError, match="scalar"):
        _run("x = [1, 2]\ny = x^2").hessian("y", ["x"])


def test_wrong_shaped_tangent_exits_2() -> None:
    result = run_cli("jvp", "-e", "x = [1, 2]; y = x^2", "--of", "y", "--wrt", "x", "--tangent", "[1, 2, 3]")
    assert_bad_input(result)
    assert "tangent" in result.stderr
    assert "(2,)" in result.stderr or "[2]" in result.stderr
    assert_bad_input(run_cli("jvp", "-e", "x = [1, 2]; y = x^2", "--wrt", "x", "--tangent", "[[1, 2]]"))
    assert_bad_input(run_cli("jvp", "-e", "x = [1, 2]; y = x^2", "--wrt", "x", "--tangent", "[1, "))
    with pytest.raises(gradcalc.GradcalcError, match="shape"):
        _run("x = [1, 2]; y = x^2").jvp("y", "x", np.ones(3))


@pytest.mark.parametrize("command", [
    ["jacobian", "--of", "y", "--wrt", "xs"],
    ["jacobian", "--of", "y", "--wrt", "x,xs"],
    ["hessian", "--of", "L", "--wrt", "xs"],
    ["jvp", "--of", "y", "--wrt", "xs", "--tangent", "ones"],
])
def test_unknown_wrt_exits_2_with_did_you_mean(command: list[str]) -> None:
    result = run_cli(command[0], "-e", "x = [1, 2]; y = x^2; L = sum(y)", *command[1:])
    assert_bad_input(result)
    assert "xs" in result.stderr
    assert "did you mean 'x'" in result.stderr


def test_unknown_of_exits_2_with_did_you_mean() -> None:
    result = run_cli("jacobian", "-e", "x = [1, 2]; yy = x^2", "--of", "yz", "--wrt", "x")
    assert_bad_input(result)
    assert "did you mean 'yy'" in result.stderr


def test_unknown_mode_exits_2() -> None:
    result = run_cli("jacobian", "-e", "x = [1, 2]; y = x^2", "--wrt", "x", "--mode", "nope")
    assert_bad_input(result)
    assert "nope" in result.stderr
    body = json_error(run_cli("jacobian", "-e", "x = [1, 2]; y = x^2", "--wrt", "x", "--mode", "nope", "--json"))
    assert "nope" in body["message"]
    with pytest.raises(gradcalc.GradcalcError):
        _run("x = [1, 2]; y = x^2").jacobian("y", ["x"], mode="nope")


# --- no path: zero blocks of the right shape -----------------------------------------------------------


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_wrt_with_no_path_gives_a_zero_block(mode: str) -> None:
    text = "x = [1, 2]; z = [[3, 4, 5]]; w = z * 2; y = x^2 * detach(w[0, 0])"
    result = _run(text).jacobian("y", ["x", "z", "w"], mode=mode)
    assert_close(result.blocks[0], np.diag([12.0, 24.0]), rtol=1e-12)
    assert result.blocks[1].shape == (2, 1, 3)
    assert result.blocks[2].shape == (2, 1, 3)
    assert not np.any(result.blocks[1])
    assert not np.any(result.blocks[2])
    doc = json_ok("jacobian", "-e", text, "--of", "y", "--wrt", "x,z", "--mode", mode)
    assert doc["blocks"][1] == {"wrt": "z", "shape": [2, 1, 3], "jacobian": [[[0.0] * 3], [[0.0] * 3]]}


def test_output_without_any_path_gives_zero_blocks() -> None:
    text = "x = [1, 2]; z = 3; y = [4, 5, 6] * z"
    for mode in ("rev", "fwd"):
        result = _run(text).jacobian("y", ["x", "z"], mode=mode)
        assert result.blocks[0].shape == (3, 2)
        assert not np.any(result.blocks[0])
        assert_close(result.blocks[1], [4, 5, 6], rtol=1e-12)


def test_hessian_and_jvp_with_no_path_give_zeros() -> None:
    text = "x = [1, 2]; z = [3, 4, 5]; L = sum(x^3)"
    result = _run(text).hessian("L", ["x", "z"])
    assert_close(result.blocks[0][0], np.diag([6.0, 12.0]), rtol=1e-12)
    for (i, j), shape in {(0, 1): (2, 3), (1, 0): (3, 2), (1, 1): (3, 3)}.items():
        assert result.blocks[i][j].shape == shape
        assert not np.any(result.blocks[i][j])
    doc = json_ok("hessian", "-e", text, "--wrt", "z")
    assert doc["shape"] == [3, 3]
    assert doc["hessian"] == [[0.0] * 3] * 3
    doc = json_ok("jvp", "-e", "x = [1, 2]; z = [3, 4, 5]; y = x^3", "--of", "y", "--wrt", "z", "--tangent", "ones")
    assert doc["jvp"] == [0.0, 0.0]
    # a linear output has a zero Hessian, not an error
    assert json_ok("hessian", "-e", "x = [1, 2]; L = sum(3 * x)", "--wrt", "x")["hessian"] == [[0.0] * 2] * 2


# --- large matrices: summarised, and whole with --full ------------------------------------------------


def _thirty(tmp_path: Any) -> tuple[list[str], np.ndarray]:
    a = np.round(np.random.default_rng(30).normal(size=(30, 30)), 4)
    values = tmp_path / "a.json"
    values.write_text(json.dumps({"A": a.tolist()}), encoding="utf-8")
    return ["jacobian", "-e", "x = linspace(0, 1, 30); y = A @ x + x^2", "--values", values, "--of", "y",
            "--wrt", "x"], a + np.diag(2 * np.linspace(0, 1, 30))


def test_large_jacobian_is_summarised(tmp_path: Any) -> None:
    args, _ = _thirty(tmp_path)
    result = run_cli(*args)
    assert result.exit_code == 0, result.output
    assert "…" in result.stdout
    assert "--full" in result.stdout
    assert "y[0]" in result.stdout
    assert "y[29]" in result.stdout
    assert "y[15]" not in result.stdout  # the middle rows are elided
    assert "x[15]" not in result.stdout
    assert len(result.stdout.splitlines()) < 20


def test_large_jacobian_is_shown_whole_with_full(tmp_path: Any) -> None:
    args, expected = _thirty(tmp_path)
    result = run_cli(*args, "--full")
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout, result.stdout
    rows, columns, matrix = parse_matrix(result.stdout, "∂y/∂x")
    assert columns == [f"x[{j}]" for j in range(30)], result.stdout
    assert rows == [f"y[{i}]" for i in range(30)], result.stdout
    assert_close(matrix, expected, rtol=1e-5)
    doc = strict_json(run_cli(*args, "--json").stdout)
    assert_close(doc["jacobian"], expected, rtol=1e-12)


def test_large_hessian_is_summarised_and_shown_whole_with_full() -> None:
    x = np.round(np.linspace(-1, 2, 30), 6)
    args = ["hessian", "-e", "L = sum(x^4) + sum(x[:-1] * x[1:])", "--set", f"x={_as_json(x)}", "--wrt", "x"]
    expected = np.diag(12 * x**2) + np.diag(np.ones(29), 1) + np.diag(np.ones(29), -1)
    summary = run_cli(*args)
    assert summary.exit_code == 0, summary.output
    assert "…" in summary.stdout
    assert "x[15]" not in summary.stdout
    result = run_cli(*args, "--full")
    assert result.exit_code == 0, result.output
    assert "…" not in result.stdout, result.stdout
    rows, columns, matrix = parse_matrix(result.stdout, "∂²L/∂x²")
    assert rows == columns == [f"x[{j}]" for j in range(30)], result.stdout
    assert_close(matrix, expected, rtol=1e-5)


# --- PyTorch -------------------------------------------------------------------------------------------


def _torch_jacobians(fn: Callable[..., Any], values: list[np.ndarray]) -> list[np.ndarray]:
    torch = pytest.importorskip("torch")
    func = pytest.importorskip("torch.func")
    args = tuple(torch.tensor(v, dtype=torch.float64) for v in values)
    found = func.jacrev(fn, argnums=tuple(range(len(args))))(*args)
    return [f.detach().numpy() for f in found]


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_softmax_layer_jacobian_matches_torch(mode: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(41)
    values = {"W": rng.normal(size=(4, 3)), "x": rng.normal(size=3), "b": rng.normal(size=4)}
    expected = _torch_jacobians(lambda w, x, b: torch.softmax(w @ x + b, dim=-1), list(values.values()))
    result = _run("y = softmax(W @ x + b)", values).jacobian("y", list(values), mode=mode)
    for name, got, want in zip(values, result.blocks, expected):
        assert_close(got, want, rtol=1e-10, what=name)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_reductions_with_axis_jacobian_matches_torch(mode: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(42)
    values = {"A": rng.normal(size=(3, 4)), "x": rng.normal(size=4)}
    text = "Y = logsumexp(A * x, axis=1) + prod(sigmoid(A), axis=1) * norm(x) - mean(A^2, axis=1)"

    def reference(a: Any, x: Any) -> Any:
        return (torch.logsumexp(a * x, dim=1) + torch.prod(torch.sigmoid(a), dim=1) * torch.linalg.norm(x)
                - torch.mean(a**2, dim=1))

    expected = _torch_jacobians(reference, list(values.values()))
    result = _run(text, values).jacobian("Y", list(values), mode=mode)
    for name, got, want in zip(values, result.blocks, expected):
        assert_close(got, want, rtol=1e-10, what=name)


@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_matrix_output_jacobian_matches_torch(mode: str) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(43)
    values = {"A": rng.normal(size=(2, 3)), "B": rng.normal(size=(3, 2))}
    text = "Y = where(A @ B > 0, A @ B, 0.1 * (A @ B)) + clip(A[:, :2], -0.5, 0.5) * B.T[0, :2]"

    def reference(a: Any, b: Any) -> Any:
        p = a @ b
        return torch.where(p > 0, p, 0.1 * p) + torch.clamp(a[:, :2], -0.5, 0.5) * b.T[0, :2]

    expected = _torch_jacobians(reference, list(values.values()))
    result = _run(text, values).jacobian("Y", list(values), mode=mode)
    for name, got, want in zip(values, result.blocks, expected):
        assert got.shape == (2, 2, *values[name].shape)
        assert_close(got, want, rtol=1e-10, what=name)


def test_hessian_matches_torch() -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(44)
    values = {"x": rng.normal(size=3), "A": rng.normal(size=(2, 3))}
    text = "L = logsumexp(A @ x) + sum(x^2 * sin(x)) + prod(tanh(A), axis=0) @ x"

    def reference(x: Any, a: Any) -> Any:
        return torch.logsumexp(a @ x, dim=0) + torch.sum(x**2 * torch.sin(x)) + torch.prod(torch.tanh(a), dim=0) @ x

    args = tuple(torch.tensor(v, dtype=torch.float64) for v in values.values())
    expected = torch.autograd.functional.hessian(reference, args)
    result = _run(text, values).hessian("L", list(values))
    for i, first in enumerate(values):
        for j, second in enumerate(values):
            assert_close(result.blocks[i][j], expected[i][j].numpy(), rtol=1e-10, what=f"{first},{second}")


# --- one-hot seeds kept as a diagonal (batching.Batched) agree with the dense identity ------------------

ONE_HOT_PROGRAMS = [
    ("y = tanh(W @ x + b)", ["x", "W", "b"]),
    ("y = x @ W", ["x", "W"]),
    ("y = (A @ X) * s", ["A", "X", "s"]),
    ("y = X @ A / (1 + s)", ["A", "X"]),
    ("y = reshape(x * v, [2, 2]) @ A", ["x"]),
    ("y = exp(x) * v", ["x"]),  # v holds an infinity: 0·inf off the diagonal is NaN, as the dense product gives
    ("y = where(x > 0, x^3, -x) * s[0]", ["x"]),  # masked gradients (where) stay one-hot
    ("y = relu(x) * sum(abs(X @ A))", ["x", "A"]),
]


@pytest.mark.parametrize(("text", "wrt"), ONE_HOT_PROGRAMS)
@pytest.mark.parametrize("mode", ["rev", "fwd"])
def test_one_hot_seeds_give_the_dense_seeds_jacobian(text: str, wrt: list[str], mode: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from gradcalc.engine import backend as B
    from gradcalc.engine import batching

    rng = np.random.default_rng(3)
    values = {"W": rng.standard_normal((4, 4)), "x": rng.standard_normal(4), "b": rng.standard_normal(4),
              "A": rng.standard_normal((2, 2)), "X": rng.standard_normal((2, 2)), "s": rng.standard_normal(2),
              "v": np.array([1.0, np.inf, -2.0, 0.5])}
    program = "\n".join(f"{name} = 0" for name in values) + "\n" + text
    run = gradcalc.parse_program(program).run(values)
    structured = run.jacobian("y", wrt, mode).blocks

    def dense_basis(shape: tuple[int, ...]) -> Any:
        size = int(np.prod(shape))
        return batching.Batched(B.xp.reshape(B.xp.eye(size, dtype=B.dtype), (size, *shape)))

    monkeypatch.setattr(batching, "basis", dense_basis)
    dense = gradcalc.parse_program(program).run(values).jacobian("y", wrt, mode).blocks
    for name, got, expected in zip(wrt, structured, dense):
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected), err_msg=name)
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=name)


def test_an_empty_output_has_an_empty_jacobian() -> None:
    """y = x[2:] of a 2-vector is empty: its Jacobian is 0×2 (as torch.autograd.functional.jacobian), not a crash."""
    program = "x = [1., 2]; y = x[2:]"
    result = run_cli("jacobian", "-e", program)
    assert result.exit_code == 0, result.output
    assert "0×2" in result.stdout
    doc = json_ok("jacobian", "-e", program)
    assert doc["shape"] == [0, 2] and doc["jacobian"] == []
