"""`gradcalc export`: the module it writes computes the program's value and gradient, in NumPy, PyTorch and JAX.

Random programs (broadcasting, reductions, matmul, indexing, user functions, loops) are exported, the module
is executed, and its value_and_grad is held to `gradcalc grad` at the program's values and to central finite
differences of its own f at random points; the PyTorch and JAX modules to the NumPy one. A decision made on a
value is asserted (NumPy, PyTorch) or refused (JAX); what cannot be written is refused by name, and every
primitive is listed as written or refused, deliberately.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, SAMPLES, central_difference, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rules import CASES

from gradcalc.engine.graph import leaf
from gradcalc.engine.primitives import PRIMITIVES
from gradcalc.program.api import Program
from gradcalc.tools import export

# --- random programs --------------------------------------------------------------------------------------

SMOOTH = ["sin", "tanh", "sigmoid", "softplus", "cos", "exp(tanh", "atan"]


def _smooth(name: str, inner: str) -> str:
    return f"exp(tanh({inner}))" if name == "exp(tanh" else f"{name}({inner})"


@st.composite
def programs(draw: Any) -> tuple[str, dict[str, Any]]:
    """A program over W (3×4), v (4), b (3) and s (a number), and the leaves' values at a random point."""
    f1, f2, f3 = (draw(st.sampled_from(SMOOTH)) for _ in range(3))
    reduction = draw(st.sampled_from(["sum", "mean", "max", "logsumexp", "norm"]))
    axis = draw(st.sampled_from(["", ", 0", ", 1"]))
    lines = ["W = [[0.5, -1.2, 0.3, 0.8], [1.1, 0.2, -0.7, 0.4], [-0.3, 0.9, 0.6, -1.4]]",
             "v = [0.7, -0.2, 1.3, 0.5]", "b = [0.1, -0.4, 0.2]", "s = 0.6"]
    terms = []
    if draw(st.booleans()):  # a user function, called twice
        lines.append(f"act(a, c) {{ t = {_smooth(f1, 'a')} * c; return t + a^2 / 2 }}")
        lines.append("h = act(W @ v + b, s)")
        lines.append("k = act(v, 2)")
        terms += ["sum(h)", "k[1] * s"]
    else:
        lines.append(f"h = {_smooth(f1, 'W @ v + b')}")
        terms.append("sum(h * b)")
    lines.append(f"u = {_smooth(f2, 'W * v')} + b[0] * s")  # broadcasting (3, 4) * (4,)
    lines.append(f"r = {reduction}(u{axis})")
    terms.append(f"{'sum(r)' if axis else 'r'}")
    if draw(st.booleans()):  # indexing and slices
        lines.append(f"q = h[0] * v[1:3] + {_smooth(f3, 'W[1, :2]')} * W[:, -1][::2]")
        terms.append("sum(q)")
    if draw(st.booleans()):  # a loop of a fixed count, unrolled
        lines.append("acc = s")
        lines.append("for i in range(3) { acc = acc * s + h[i] }")
        terms.append("acc")
    if draw(st.booleans()):  # writing into a tensor: entries replaced, the rest kept
        lines.append("y = h * v[0]")
        lines.append("y[1] = s * v[2]")
        lines.append("y[[0, 2]] = y[[0, 2]] * b[1:]")
        terms.append("sum(y^2)")
    if draw(st.booleans()):  # matrix products both ways, a transpose
        lines.append("m = W.T @ (W @ v) / 4")
        terms.append("sum(m * v)")
    lines.append("L = " + " + ".join(terms))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    point = {"W": rng.normal(size=(3, 4)), "v": rng.normal(size=4), "b": rng.normal(size=3),
             "s": np.float64(rng.uniform(0.3, 1.2))}
    return "\n".join(lines), point


def module(text: str, to: str = "numpy", *extra: str) -> dict[str, Any]:
    """The exported module's namespace, executed."""
    result = run_cli("export", "-e", text, "--to", to, *extra)
    assert result.exit_code == EXIT_OK, result.stderr
    namespace: dict[str, Any] = {}
    exec(compile(result.stdout, f"<exported {to}>", "exec"), namespace)  # the module under test
    return namespace


def as_numpy(value: Any) -> np.ndarray:
    detach = getattr(value, "detach", None)
    return np.asarray(detach() if detach is not None else value, dtype=np.float64)


def finite_differences(f: Any, point: dict[str, np.ndarray], name: str) -> np.ndarray:
    def moved(x: np.ndarray) -> float:
        return float(f(**{**point, name: x.reshape(np.shape(point[name]))}))

    return central_difference(moved, np.asarray(point[name], dtype=np.float64), step=1e-6)


SLOW = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SLOW
@given(programs())
def test_numpy_module_equals_grad_and_finite_differences(case: tuple[str, dict[str, np.ndarray]]) -> None:
    text, point = case
    exported = module(text)
    # At the program's values (the defaults): the same numbers as gradcalc grad.
    value, grads = exported["value_and_grad"]()
    run = Program(text).run()
    expected = run.grad("L")
    assert np.isclose(value, expected.value, rtol=1e-12, atol=1e-12)
    assert np.isclose(exported["f"](), expected.value, rtol=1e-12, atol=1e-12)
    assert list(grads) == ["W", "v", "b", "s"]
    for name, g in grads.items():
        np.testing.assert_allclose(as_numpy(g), expected.grads[name], rtol=1e-10, atol=1e-12, err_msg=name)
    # At a random point: central differences of the module's own f, and gradcalc run there.
    value, grads = exported["value_and_grad"](**point)
    there = Program(text).run(point).grad("L")
    assert np.isclose(value, there.value, rtol=1e-10)
    for name, g in grads.items():
        np.testing.assert_allclose(as_numpy(g), finite_differences(exported["f"], point, name), rtol=1e-5,
                                   atol=1e-6, err_msg=name)
        np.testing.assert_allclose(as_numpy(g), there.grads[name], rtol=1e-9, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("to", ["torch", "jax"])
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=programs())
def test_torch_and_jax_modules_equal_the_numpy_one(to: str, case: tuple[str, dict[str, np.ndarray]]) -> None:
    pytest.importorskip(to)
    text, point = case
    reference = module(text)["value_and_grad"](**point)
    exported = module(text, to)
    value, grads = exported["value_and_grad"](**point)
    assert np.isclose(as_numpy(value), reference[0], rtol=1e-10)
    assert np.isclose(as_numpy(exported["f"](**point)), reference[0], rtol=1e-10)
    for name, g in grads.items():
        np.testing.assert_allclose(as_numpy(g), as_numpy(reference[1][name]), rtol=1e-9, atol=1e-12, err_msg=name)


# Programs through many builtins and statements: each module's value and gradients equal gradcalc grad's.
EXAMPLES = [
    "a = 1.5; b = -0.5; v = [a, b, a*b]; L = sum(softmax(v) * [1, 2, 3])",
    "W = [[1., 2], [3, 4]]; x = [0.5, -1]; L = sum(where(W @ x > 0, W @ x, 0.1 * W @ x))",
    "x = [0.3, -2, 1.5]; L = sum(clip(x, -1, 1) ^ 2) + max(x) - min(x) + mean(abs(x))",
    "W = randn(3, 4); x = ones(4); L = norm(tanh(W @ x))",
    "x = [1., 2, 3, 4]; y = reshape(x, [2, 2]); L = sum(y.T @ y) + sum(transpose(y) * y)",
    "x = [1., 2, 3]; y = [4., 5]; L = sum(concatenate([x, y]) ^ 2)",
    "x = [1., 2, 3]; u, v, w = x; L = u * v + w",
    "x = 2.0; no_grad { c = x^2 }; L = c * x",
    "x = 2.0; L = x; L += x^2; L *= 3",
    "A = [[1., 2], [3, 4]]; B = [[0.5, 1], [1, 0.5]]; L = sum(einsum('ij,jk->ik', A, B)) + trace(inv(A))",
    "x = 0.5; L = sigmoid(x) + relu(x) + softplus(x) + silu(x) + elu(x) + leaky_relu(x) + log1p(x) + expm1(x)",
    "x = 3.0; n = floor(x); L = x * n",
    "x = [1., 2, 3]; L = sum(cumsum(x) * flip(x)) + var(x) + std(x)",
    "f(n, x) { if n <= 0 { return x } else { return f(n - 1, x * x) } }\nx = 1.1\nL = f(3, x)",
    "A = [[2., 1], [1, 3]]; b = [1., 2]; L = sum(solve(A, b)) + sum(cholesky(A))",
    "x = [1., 2]; L = logsumexp(x) + sum(log_softmax(x)) + mse_loss(x, [0, 1])",
    "x = 2.; y = x % 1.5 + x // 1; L = y * x",
    "x = [3., 1, 2]; L = argmax(x) * sum(x)",
    "x = 1.0; L = x > 0",
    "x = [1., 2, 3]; w = 2; y = x * w; y[[0, 2]] = w^2; y[1:] = y[1:] * x[0]; L = sum(y^2)",
    "f = 2; np = 3; const torch = 4; value = f * np; jnp = value + torch; L = jnp * f",  # the module's own names
]


@pytest.mark.parametrize("to", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("text", EXAMPLES)
def test_builtins_and_statements_export_to_every_library(text: str, to: str) -> None:
    if to != "numpy":
        pytest.importorskip(to)
    value, grads = module(text, to)["value_and_grad"]()
    expected = Program(text.replace("\\n", "\n")).run().grad()
    assert np.isclose(as_numpy(value), expected.value, rtol=1e-12)
    assert list(grads) == list(expected.grads)
    for name, g in grads.items():
        np.testing.assert_allclose(as_numpy(g), expected.grads[name], rtol=1e-10, atol=1e-12, err_msg=name)


def test_the_jax_module_is_jit_compiled() -> None:
    jax = pytest.importorskip("jax")
    exported = module((SAMPLES / "mlp.eq").read_text(encoding="utf-8"), "jax")
    compiled = jax.jit(exported["value_and_grad"])
    value, grads = compiled()
    # The MLP's loss at its values, as `gradcalc grad samples/mlp.eq` prints it (1.2897).
    assert abs(float(value) - 1.2897) < 1e-4
    assert np.shape(grads["W1"]) == (4, 5)


def test_the_toy_network_reads_like_its_file() -> None:
    result = run_cli("export", str(SAMPLES / "neuron.eq"), "--to", "numpy")
    assert result.exit_code == EXIT_OK, result.stderr
    source = result.stdout
    assert "# Generated " in source and "neuron.eq" in source and "by gradcalc " in source
    for line in ("b = w1 * a", "c = w2 * a", "d = w3 * b + w4 * c", "L = 10.0 - d"):
        assert f"    {line}\n" in source, line
    assert "def f(a=2.0, w1=3.0, w2=-1.0, w3=0.5, w4=4.0):" in source
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # the module under test
    value, grads = namespace["value_and_grad"]()
    # The tutorial's numbers: L = 10 - (w3·w1·a + w4·w2·a) = 10 - (3 - 8) = 15; ∂L/∂a = -(w3·w1 + w4·w2) = 2.5,
    # ∂L/∂w1 = -w3·a, ∂L/∂w2 = -w4·a, ∂L/∂w3 = -b = -w1·a, ∂L/∂w4 = -c = -w2·a.
    assert value == 15.0
    assert grads == {"a": 2.5, "w1": -1.0, "w2": -8.0, "w3": -6.0, "w4": 2.0}


def test_wrt_and_of_choose_what_is_differentiated() -> None:
    exported = module("a = 2; w = 3; h = w*a; L = (h - 1)^2; M = h^3", "numpy", "--of", "L", "--wrt", "w")
    value, grads = exported["value_and_grad"]()
    assert value == 25.0
    assert list(grads) == ["w"] and grads["w"] == 2 * 5 * 2  # 2(wa - 1)·a
    # A leaf the output does not reach gets a zero gradient, as gradcalc grad gives it.
    value, grads = module("a = 2; z = 5; L = a^2")["value_and_grad"]()
    assert grads["z"] == 0.0 and grads["a"] == 4.0


def test_a_gradient_that_is_a_forward_value_keeps_the_forward_pass_s_name() -> None:
    source = run_cli("export", "-e", "a = 2; b = 1; L = a * sin(b)", "--to", "numpy").stdout
    forward = source.split("def value_and_grad")[0]
    assert "    L = a * np.sin(b)\n" in forward and "g_a" not in forward  # ∂L/∂a is sin(b): no g_a in f
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # the module under test
    assert namespace["value_and_grad"]()[1]["a"] == np.sin(1.0)


def test_a_branch_and_a_loop_count_on_values_are_asserted() -> None:
    text = ("x = 1.5\ny = 2\nif x > 1 { z = x * y } else { z = x + y }\n"
            "n = 0\nwhile z < 6 { z = z * x; n = n + 1 }\nL = z^2")
    exported = module(text)
    source = run_cli("export", "-e", text, "--to", "numpy").stdout
    assert "assert x > 1.0, PATH" in source
    # The recorded path: z = 3, then 4.5, 6.75 (two turns); L = 6.75² and dL/dx = 2z·dz/dx.
    value, grads = exported["value_and_grad"]()
    assert np.isclose(value, 6.75**2)
    assert np.isclose(grads["x"], 2 * 6.75 * 3 * 1.5**2 * 2)  # z = x·y·x², dz/dx = 3x²y
    assert np.isclose(exported["value_and_grad"](x=1.45)[0], (1.45 * 2 * 1.45**2) ** 2)  # still two turns
    with pytest.raises(AssertionError, match="another path"):
        exported["f"](x=0.5)  # the else branch
    with pytest.raises(AssertionError, match="another path"):
        exported["f"](x=1.1)  # three turns of the loop


def test_jax_refuses_a_decision_on_a_value_with_its_place() -> None:
    result = run_cli("export", "-e", "x = 1.5\nif x > 1 { y = x } else { y = -x }\nL = y^2", "--to", "jax")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "<expr>:2:" in result.stderr and "jax.jit" in result.stderr and "--to numpy" in result.stderr
    assert "Traceback" not in result.stderr
    # A decision on a constant is the same at every point: no guard, and JAX exports it.
    assert run_cli("export", "-e", "const N = 3\nx = 1.5\nif N > 1 { y = x } else { y = -x }\nL = y^2",
                   "--to", "jax").exit_code == EXIT_OK


@pytest.mark.parametrize(("text", "words"), [
    ("x = [1, 2, 3]; L = prod(x)", "export cannot write prod: its derivative rule"),
    ("x = 0.5; L = erf(x)", "export cannot write erf"),
    ("x = 2; y = detach(x) * x; L = y", "detach(...) at line 1"),
    ("x = 2; y = 3; L = x > 1 and y > 1", "at line 1"),
    ("x = [1, 2]; y = x^2", "value_and_grad needs a single number"),
    ("const a = 2; L = a^2", "the program has no leaves"),
])
def test_what_cannot_be_written_is_refused_with_a_message(text: str, words: str) -> None:
    for to in ("numpy", "torch", "jax") if "prod" not in text else ("numpy",):
        result = run_cli("export", "-e", text, "--to", to)
        assert result.exit_code == EXIT_BAD_INPUT, (to, result.stdout)
        assert words in result.stderr, result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("args", "words"), [
    (("--wrt", "h"), "--wrt h: h is an intermediate"),
    (("--wrt", "q"), "--wrt q: q is not a variable"),
    (("--of", "nope"), "no variable 'nope'"),
    (("--dtype", "float32"), "export writes float64 code"),
    (("--to", "tensorflow"), "tensorflow"),
])
def test_bad_options_are_refused(args: tuple[str, ...], words: str) -> None:
    extra = () if "--to" in args else ("--to", "numpy")
    result = run_cli("export", "-e", "a = 2; h = a^2; L = h + 1", *extra, *args)
    assert result.exit_code == EXIT_BAD_INPUT
    assert words in result.stderr, result.stderr


def test_a_constant_is_not_a_leaf_to_differentiate() -> None:
    result = run_cli("export", str(SAMPLES / "mlp.eq"), "--to", "numpy", "--wrt", "X")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "'X' is a constant" in result.stderr


def test_output_file_and_json(tmp_path: Any) -> None:
    target = tmp_path / "net.py"
    result = run_cli("export", str(SAMPLES / "neuron.eq"), "--to", "numpy", "-o", target)
    assert result.exit_code == EXIT_OK and result.stdout == ""
    assert "def value_and_grad(" in target.read_text(encoding="utf-8")
    doc = json.loads(run_cli("export", str(SAMPLES / "neuron.eq"), "--to", "jax", "--json").stdout)
    assert doc["to"] == "jax" and "jax.value_and_grad(f" in doc["module"]


# --- every primitive, written or refused -------------------------------------------------------------------

# Refused, each for its reason: a rule that chooses its formula by the values (prod and cumprod look for
# zeros, det for a singular matrix), an evaluation on the host (erf, gelu: math.erf entry by entry), a pair
# of results (logdet's slogdet).
REFUSED = {"prod", "cumprod", "det", "erf", "gelu", "logdet"}
WITHOUT_CASES = {"lt": 2, "le": 2, "gt": 2, "ge": 2, "eq": 2, "ne": 2, "logical_and": 2, "logical_or": 2,
                 "logical_not": 1, "floor_divide": 2, "argmax": 1, "argmin": 1}  # no rule: no CASES entry


def _example(name: str) -> tuple[list[np.ndarray], tuple]:
    """Inputs and params the primitive is recorded with (tests/test_rules.py's first case)."""
    prim = PRIMITIVES[name]
    if name in WITHOUT_CASES:
        inputs = [np.array([[0.5, -1.0, 2.0], [0.0, 1.5, -0.3]]), np.array([0.5, 1.0, -2.0])][:WITHOUT_CASES[name]]
        params = (1,) if prim.params == ("axis",) else ()
        return inputs, params
    case = CASES[name][0]
    out = case.build(*[leaf(np.asarray(value, dtype=np.float64), f"x{i}") for i, value in enumerate(case.inputs)])
    assert out.op is prim
    return [node.value for node in out.inputs], out.params


def test_every_primitive_is_written_or_refused_deliberately() -> None:
    refused = {name for name in PRIMITIVES if export.writable(PRIMITIVES[name], *_example(name)) is not None}
    assert refused == REFUSED


@pytest.mark.parametrize("name", sorted(set(PRIMITIVES) - REFUSED - {"scatter"}))
@pytest.mark.parametrize("to", ["numpy", "torch", "jax"])
def test_every_written_evaluation_computes_what_gradcalc_does(name: str, to: str) -> None:
    """The expression written for each primitive, run by the library, gives the primitive's value."""
    library = pytest.importorskip({"numpy": "numpy", "torch": "torch", "jax": "jax.numpy"}[to])
    inputs, params = _example(name)
    expected = PRIMITIVES[name].forward(*inputs, *params)
    text = export.written(PRIMITIVES[name], inputs, params, to)
    names: dict[str, Any] = {"np": np, "torch": library, "jnp": library}
    exec(export.helpers(to), names)  # the functions a module defines where it calls them (_index_put)
    if to == "jax":
        import jax

        jax.config.update("jax_enable_x64", True)
    convert: dict[str, Callable[[Any], Any]] = {"numpy": np.asarray, "torch": lambda v: library.tensor(v),
                                                "jax": lambda v: library.asarray(v)}
    names.update({f"x{i}": convert[to](value) for i, value in enumerate(inputs)})
    got = eval(text, names)  # the written expression, in the library it was written for
    np.testing.assert_allclose(as_numpy(got), expected, rtol=1e-12, atol=1e-12, err_msg=text)


# --- the source: lint-clean as written ---------------------------------------------------------------------

LOOPED = ("x = [1.0, 2, 3]\nsq(a) { return a^2 }\ns = 0\nfor i in range(3) { s = s + sq(x[i]) * x[i] }\n"
          "L = s + x[1:] @ x[:-1]")


@pytest.mark.parametrize("to", ["numpy", "torch", "jax"])
@pytest.mark.parametrize("program", ["mlp", "looped", "guarded"])
def test_the_module_passes_ruff(to: str, program: str, tmp_path: Any) -> None:
    args = {"mlp": [str(SAMPLES / "mlp.eq")], "looped": ["-e", LOOPED],
            "guarded": ["-e", "x = 1.5\nif x > 1 { y = x } else { y = -x }\nL = y^2"]}[program]
    result = run_cli("export", *args, "--to", to)
    if program == "guarded" and to == "jax":
        assert result.exit_code == EXIT_BAD_INPUT
        return
    assert result.exit_code == EXIT_OK, result.stderr
    path = tmp_path / "exported.py"
    path.write_text(result.stdout, encoding="utf-8")
    # No configuration (ruff's defaults), and the stricter rules most projects add.
    for rules in ([], ["--select", "E,F,W,I,B,UP,RUF"]):
        done = subprocess.run([sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", *rules, str(path)],
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + result.stdout
