"""gradcalc against PyTorch: random programs (values and gradients) and grad_fn names.

One generator makes each program: every statement it draws carries both its
gradcalc text and the same operation in PyTorch, so the two builds cannot drift.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import gradcalc  # noqa: E402  (after the skip: no torch, no tests here)

Env = dict[str, Any]
TorchFn = Callable[[Env], Any]


@dataclass
class Generated:
    """A program as gradcalc text and as PyTorch statements, with its leaves' values."""

    leaves: dict[str, np.ndarray]
    statements: list[tuple[str, str, TorchFn]] = field(default_factory=list)  # (name, gradcalc text, torch)

    @property
    def text(self) -> str:
        header = [f"{name} = 0" for name in self.leaves]  # placeholders: the values come from run(values)
        return "\n".join(header + [f"{name} = {text}" for name, text, _ in self.statements]) + "\n"


def _broadcasts(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


def _index_options(shape: tuple[int, ...]) -> list[tuple[str, tuple]]:
    """Keys valid for `shape` (any sizes: a size-1 axis is often what an earlier index left)."""
    if not shape:
        return []
    full = slice(None)
    n = shape[0]
    # Every rank: an entry or row, a list of rows (integer-array indexing), a new axis, the last axis's first.
    options: list[tuple[str, tuple]] = [("[0]", (0,)), ("[-1]", (-1,)), ("[[0, -1, 0]]", ([0, -1, 0],)),
                                        ("[None]", (None,)), ("[..., 0]", (Ellipsis, 0))]
    if n >= 2:
        options.append(("[::2]", (slice(None, None, 2),)))
    if n >= 3:
        options.append(("[1:3]", (slice(1, 3),)))
    if len(shape) == 2:
        m = shape[1]
        options += [("[0, :]", (0, full)), ("[:, -1]", (full, -1)), ("[:, ::2]", (full, slice(None, None, 2)))]
        if n >= 2 and m >= 3:
            options += [("[1:, ::2]", (slice(1, None), slice(None, None, 2))), ("[1, 2]", (1, 2))]
    return options


Pool = list[tuple[str, tuple[int, ...]]]
Step = tuple[str, TorchFn, tuple[int, ...]] | None


def _pick(rnd: random.Random, pool: Pool) -> tuple[str, tuple[int, ...]]:
    """Recent values more often, so programs grow deep as well as wide."""
    weights = [1 + i for i in range(len(pool))]
    return rnd.choices(pool, weights)[0]


def _arith(rnd: random.Random, pool: Pool) -> Step:
    (a, sa), (b, sb) = _pick(rnd, pool), _pick(rnd, pool)
    shape = _broadcasts(sa, sb)
    if shape is None:
        return None
    op = rnd.choice("+-*")
    fns = {"+": lambda e: e[a] + e[b], "-": lambda e: e[a] - e[b], "*": lambda e: e[a] * e[b]}
    return f"{a} {op} {b}", fns[op], shape


def _divide(rnd: random.Random, pool: Pool) -> Step:
    (a, sa), (b, sb) = _pick(rnd, pool), _pick(rnd, pool)
    shape = _broadcasts(sa, sb)
    if shape is None:
        return None
    return f"{a} / (1 + {b} * {b})", lambda e: e[a] / (1 + e[b] * e[b]), shape


def _power(rnd: random.Random, pool: Pool) -> Step:
    a, sa = _pick(rnd, pool)
    kind = rnd.choice(["constant", "tensor", "base"])
    if kind == "constant":
        k = rnd.choice([2, 3, 0.5, 1.5, -1])
        return f"(1 + {a} * {a}) ^ {k}", lambda e: (1 + e[a] * e[a]) ** k, sa
    if kind == "base":
        return f"2 ^ tanh({a})", lambda e: 2 ** torch.tanh(e[a]), sa
    b, sb = _pick(rnd, pool)
    shape = _broadcasts(sa, sb)
    if shape is None:
        return None
    return f"(0.5 + {a} * {a}) ^ tanh({b})", lambda e: (0.5 + e[a] * e[a]) ** torch.tanh(e[b]), shape


# (gradcalc's name, PyTorch's function, the argument's form): log1p and rsqrt get arguments in their domains.
_UNARY: list[tuple[str, Callable[[Any], Any], str]] = [
    ("sin", torch.sin, "{}"), ("cos", torch.cos, "{}"), ("exp", torch.exp, "{}"), ("tanh", torch.tanh, "{}"),
    ("sigmoid", torch.sigmoid, "{}"), ("erf", torch.erf, "{}"), ("gelu", torch.nn.functional.gelu, "{}"),
    ("silu", torch.nn.functional.silu, "{}"), ("elu", torch.nn.functional.elu, "{}"),
    ("leaky_relu", torch.nn.functional.leaky_relu, "{}"), ("expm1", torch.expm1, "{}"),
    ("square", torch.square, "{}"), ("log1p", torch.log1p, "{0} * {0}"), ("rsqrt", torch.rsqrt, "1 + {0} * {0}"),
]


def _unary(rnd: random.Random, pool: Pool) -> Step:
    a, sa = _pick(rnd, pool)
    choice = rnd.randrange(len(_UNARY) + 1)
    if choice == len(_UNARY):
        return f"log(abs({a}) + 1)", lambda e: torch.log(torch.abs(e[a]) + 1), sa
    name, fn, form = _UNARY[choice]
    argument = form.format(a)
    inner: TorchFn = {"{}": lambda e: e[a], "{0} * {0}": lambda e: e[a] * e[a],
                      "1 + {0} * {0}": lambda e: 1 + e[a] * e[a]}[form]
    return f"{name}({argument})", lambda e: fn(inner(e)), sa


def _scale(rnd: random.Random, pool: Pool) -> Step:
    a, sa = _pick(rnd, pool)
    c = rnd.choice([0.5, -1.5, 2.25, 3])
    if rnd.random() < 0.5:
        return f"{c} * {a}", lambda e: c * e[a], sa
    return f"{c} - {a}", lambda e: c - e[a], sa


def _reduce(rnd: random.Random, pool: Pool) -> Step:
    a, sa = _pick(rnd, pool)
    name = rnd.choice(["sum", "mean"])
    axis = rnd.choice([None, *range(len(sa))])
    if axis is None:
        return f"{name}({a})", lambda e: getattr(e[a], name)(), ()
    shape = sa[:axis] + sa[axis + 1:]
    return f"{name}({a}, axis={axis})", lambda e: getattr(e[a], name)(dim=axis), shape


def _matmul(rnd: random.Random, pool: Pool) -> Step:
    (a, sa), (b, sb) = _pick(rnd, pool), _pick(rnd, pool)
    if len(sa) not in (1, 2) or len(sb) not in (1, 2) or sa[-1] != sb[0]:
        return None
    shape = np.matmul(np.zeros(sa), np.zeros(sb)).shape
    return f"{a} @ {b}", lambda e: e[a] @ e[b], shape


def _index(rnd: random.Random, pool: Pool) -> Step:
    a, sa = _pick(rnd, pool)
    options = _index_options(sa)
    if not options:
        return None
    text, key = rnd.choice(options)
    return f"{a}{text}", lambda e: e[a][key], np.zeros(sa)[key].shape


MENU = [_arith, _arith, _divide, _power, _unary, _unary, _scale, _reduce, _matmul, _matmul, _index]
LEAF_SHAPES = [(3,), (2, 3), (3, 3), (), (3,), (1, 3)]
SEEDS = 60


def generate(seed: int) -> Generated:
    """Seed's program, or, where its values overflow (exp of a cube), the next draw's: every one is finite."""
    for attempt in range(100):
        program = _draw(random.Random(seed * 100 + attempt))
        with torch.no_grad():
            env: Env = {name: torch.tensor(value, dtype=torch.float64) for name, value in program.leaves.items()}
            for name, _, fn in program.statements:
                env[name] = fn(env)
        if all(bool(torch.isfinite(value).all()) for value in env.values()):
            return program
    raise AssertionError(f"no finite program in 100 draws from seed {seed}")


def _draw(rnd: random.Random) -> Generated:
    leaves = {}
    for i in range(rnd.choice([2, 3])):
        shape = rnd.choice(LEAF_SHAPES)
        leaves[f"x{i}"] = np.asarray([rnd.uniform(-1.5, 1.5) for _ in range(int(np.prod(shape)))]).reshape(shape)
    program = Generated(leaves)
    pool: Pool = [(name, value.shape) for name, value in leaves.items()]
    for i in range(rnd.randint(4, 8)):
        step = None
        while step is None:
            step = rnd.choice(MENU)(rnd, pool)
        text, fn, shape = step
        program.statements.append((f"t{i}", text, fn))
        pool.append((f"t{i}", shape))
    # L gathers every value nothing else used, so every leaf and statement reaches the output.
    used = {word for _, text, _ in program.statements for word in re.findall(r"\w+", text)}
    dangling = [name for name, _ in pool if name not in used]
    terms = [f"sum({name})" if i % 2 == 0 else f"0.5 * sum(sin({name}))" for i, name in enumerate(dangling)]
    program.statements.append(("L", " + ".join(terms), lambda e: _torch_loss(e, dangling)))
    return program


def _torch_loss(env: Env, dangling: list[str]) -> Any:
    total = env[dangling[0]].sum()
    for i, name in enumerate(dangling[1:], start=1):
        total = total + (env[name].sum() if i % 2 == 0 else 0.5 * torch.sin(env[name]).sum())
    return total


def run_torch(program: Generated) -> tuple[Env, dict[str, np.ndarray]]:
    env: Env = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True)
                for name, value in program.leaves.items()}
    leaves = dict(env)
    for name, _, fn in program.statements:
        env[name] = fn(env)
    env["L"].backward()
    grads = {name: (t.grad.numpy() if t.grad is not None else np.zeros(t.shape)) for name, t in leaves.items()}
    return env, grads


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_program_matches_torch(seed: int) -> None:
    program = generate(seed)
    env, torch_grads = run_torch(program)
    assert torch.isfinite(env["L"]).item(), f"the generator made a non-finite program:\n{program.text}"
    run = gradcalc.parse_program(program.text).run(program.leaves)
    for name, _, _ in program.statements:
        expected = env[name].detach().numpy()
        got = run.value(name)
        assert got.shape == expected.shape, f"{name}: shape {got.shape}, torch {expected.shape}\n{program.text}"
        np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-12, err_msg=f"value of {name}\n{program.text}")
    result = run.grad(of="L", wrt=list(program.leaves))
    for name in program.leaves:
        np.testing.assert_allclose(result.grads[name], torch_grads[name], rtol=1e-9, atol=1e-12,
                                   err_msg=f"∂L/∂{name}\n{program.text}")


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(0, SEEDS, 3))
def test_random_program_second_derivatives_match_torch(seed: int) -> None:
    """The Hessian of L in the first leaf, against torch's double backward."""
    program = generate(seed)
    first = next(iter(program.leaves))

    def loss(value: Any) -> Any:
        env: Env = {name: torch.tensor(leaf, dtype=torch.float64) for name, leaf in program.leaves.items()}
        env[first] = value
        for name, _, fn in program.statements:
            env[name] = fn(env)
        return env["L"]

    size = program.leaves[first].size
    expected = torch.autograd.functional.hessian(loss, torch.tensor(program.leaves[first])).numpy().reshape(size, -1)
    run = gradcalc.parse_program(program.text).run(program.leaves)
    block = np.asarray(run.hessian(of="L", wrt=[first]).blocks[0][0]).reshape(size, -1)
    np.testing.assert_allclose(block, expected, rtol=1e-8, atol=1e-10, err_msg=f"∂²L/∂{first}²\n{program.text}")


def test_generator_covers_the_menu() -> None:
    """The programs together use every kind of operation on the menu."""
    texts = "\n".join(generate(seed).text for seed in range(SEEDS))
    functions = [f"{name}(" for name, _, _ in _UNARY]
    for needle in (" + ", " - ", " * ", " / ", "^", *functions, "log(abs(", "sum(", "mean(", "axis=", " @ ",
                   "[[0, -1, 0]]", "[None]", "[..., 0]", "[::2]", "[0, :]"):
        assert needle in texts, f"no generated program uses {needle!r}"


# --- grad_fn names ----------------------------------------------------------------------------------

def test_toy_network_grad_fn_names() -> None:
    run = gradcalc.parse_program("a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\n"
                                 "b = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d\n").run()
    t = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True)
         for name, value in {"a": 2.0, "w1": 3.0, "w2": -1.0, "w3": 0.5, "w4": 4.0}.items()}
    b = t["w1"] * t["a"]
    c = t["w2"] * t["a"]
    d = t["w3"] * b + t["w4"] * c
    loss = 10 - d
    assert run.node("d").grad_fn == "AddBackward0" == type(d.grad_fn).__name__
    assert run.node("L").grad_fn == "RsubBackward1" == type(loss.grad_fn).__name__
    assert run.node("b").grad_fn == "MulBackward0" == type(b.grad_fn).__name__
    assert run.node("a").grad_fn is None  # a leaf, as t["a"].grad_fn is None


LEAVES = {
    "x": np.array([0.5, -1.25, 2.0]),
    "A": np.arange(6.0).reshape(2, 3) / 7 - 0.3,
    "B": np.arange(12.0).reshape(3, 4) / 11 - 0.5,
    "M": np.array([[2.0, 0.3, -0.1], [0.2, 1.5, 0.4], [-0.3, 0.1, 1.8]]),
    "T": np.arange(12.0).reshape(2, 2, 3) / 5 - 1,
}

# (gradcalc expression, the same in PyTorch)
GRAD_FN_CASES: list[tuple[str, Callable[[Env], Any]]] = [
    ("x * x", lambda e: e["x"] * e["x"]),
    ("A + x", lambda e: e["A"] + e["x"]),
    ("x - A", lambda e: e["x"] - e["A"]),
    ("10 - x", lambda e: 10 - e["x"]),
    ("x - 1", lambda e: e["x"] - 1),
    ("x / A", lambda e: e["x"] / e["A"]),
    ("x / 2", lambda e: e["x"] / 2),
    ("2 / x", lambda e: 2 / e["x"]),
    ("x ^ 2", lambda e: e["x"] ** 2),
    ("2 ^ x", lambda e: 2 ** e["x"]),
    ("abs(x) ^ x", lambda e: torch.abs(e["x"]) ** e["x"]),
    ("-x", lambda e: -e["x"]),
    ("mean(A)", lambda e: e["A"].mean()),
    ("mean(A, axis=0)", lambda e: e["A"].mean(dim=0)),
    ("sum(A)", lambda e: e["A"].sum()),
    ("sum(A, axis=1)", lambda e: e["A"].sum(dim=1)),
    ("prod(A)", lambda e: e["A"].prod()),
    ("max(x)", lambda e: e["x"].max()),
    ("min(x)", lambda e: e["x"].min()),
    ("norm(x)", lambda e: e["x"].norm()),
    ("logsumexp(x)", lambda e: e["x"].logsumexp(0)),
    ("softmax(x)", lambda e: torch.softmax(e["x"], 0)),
    ("A @ B", lambda e: e["A"] @ e["B"]),
    ("A @ x", lambda e: e["A"] @ e["x"]),
    ("x @ B", lambda e: e["x"] @ e["B"]),
    ("x @ x", lambda e: e["x"] @ e["x"]),
    ("T @ B", lambda e: e["T"] @ e["B"]),
    ("x[0]", lambda e: e["x"][0]),
    ("x[1:3]", lambda e: e["x"][1:3]),
    ("A[0, :]", lambda e: e["A"][0, :]),
    ("A[:, 1]", lambda e: e["A"][:, 1]),
    ("A.T", lambda e: e["A"].T),
    ("transpose(A, 0, 1)", lambda e: e["A"].transpose(0, 1)),
    ("reshape(A, 3, 2)", lambda e: e["A"].reshape(3, 2)),
    ("exp(x)", lambda e: torch.exp(e["x"])),
    ("sin(x)", lambda e: torch.sin(e["x"])),
    ("tanh(x)", lambda e: torch.tanh(e["x"])),
    ("sigmoid(x)", lambda e: torch.sigmoid(e["x"])),
    ("relu(x)", lambda e: torch.relu(e["x"])),
    ("clip(x, -1, 1)", lambda e: e["x"].clamp(-1, 1)),
    ("maximum(x, A)", lambda e: torch.maximum(e["x"], e["A"])),
    ("where(x > 0, x, 0)", lambda e: torch.where(e["x"] > 0, e["x"], 0.0)),
    ("trace(M)", lambda e: e["M"].trace()),
    ("det(M)", lambda e: torch.linalg.det(e["M"])),
    ("inv(M)", lambda e: torch.linalg.inv(e["M"])),
    ("[x, x]", lambda e: torch.stack([e["x"], e["x"]])),
]


@pytest.mark.parametrize(("expr", "torch_fn"), GRAD_FN_CASES, ids=[expr for expr, _ in GRAD_FN_CASES])
def test_grad_fn_name_matches_torch(expr: str, torch_fn: Callable[[Env], Any]) -> None:
    header = "\n".join(f"{name} = 0" for name in LEAVES)
    run = gradcalc.parse_program(f"{header}\nr = {expr}\n").run(LEAVES)
    env = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True) for name, value in LEAVES.items()}
    expected = torch_fn(env)
    np.testing.assert_allclose(run.value("r"), expected.detach().numpy(), rtol=1e-12, atol=1e-14)
    assert run.node("r").grad_fn == type(expected.grad_fn).__name__


# --- Kinks and ties: the subgradient PyTorch picks -----------------------------------------------------

KINK_LEAVES = {
    "k": np.array([-1.0, 0.0, 0.0, 2.0, 2.0, 1.0]),
    "j": np.array([0.5, 0.0, 1.0, 2.0, -3.0, 1.0]),
    "z": np.zeros(3),
    "p": np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0], [4.0, 5.0, 6.0]]),
}

KINK_CASES: list[tuple[str, Callable[[Env], Any]]] = [
    ("relu(k)", lambda e: torch.relu(e["k"])),
    ("abs(k)", lambda e: torch.abs(e["k"])),
    ("max(k)", lambda e: e["k"].max()),
    ("min(j - k)", lambda e: (e["j"] - e["k"]).min()),
    ("maximum(k, j)", lambda e: torch.maximum(e["k"], e["j"])),
    ("minimum(k, j)", lambda e: torch.minimum(e["k"], e["j"])),
    ("clip(k, 0, 1)", lambda e: e["k"].clamp(0, 1)),
    ("clip(k, j, 2)", lambda e: torch.clamp(e["k"], e["j"], torch.tensor(2.0, dtype=torch.float64))),
    ("norm(z)", lambda e: e["z"].norm()),
    ("prod(p)", lambda e: e["p"].prod()),
    ("prod(p, axis=1)", lambda e: e["p"].prod(dim=1)),
    ("prod(p, axis=0)", lambda e: e["p"].prod(dim=0)),
    ("z ^ 2 + z ^ j[0:3]", lambda e: e["z"] ** 2 + e["z"] ** e["j"][0:3]),
    ("z ^ 0", lambda e: e["z"] ** 0),
    ("z ^ (j[3:6] - 4)", lambda e: e["z"] ** (e["j"][3:6] - 4)),  # a zero base, negative exponents: ±inf
    ("sign(k) + floor(k) + ceil(k) + round(k)",
     lambda e: torch.sign(e["k"]) + torch.floor(e["k"]) + torch.ceil(e["k"]) + torch.round(e["k"])),
    ("where(k > 0, k * j, j)", lambda e: torch.where(e["k"] > 0, e["k"] * e["j"], e["j"])),
]


@pytest.mark.parametrize(("expr", "torch_fn"), KINK_CASES, ids=[expr for expr, _ in KINK_CASES])
def test_subgradient_at_kinks_matches_torch(expr: str, torch_fn: Callable[[Env], Any]) -> None:
    header = "\n".join(f"{name} = 0" for name in KINK_LEAVES)
    run = gradcalc.parse_program(f"{header}\nr = {expr}\n").run(KINK_LEAVES)
    env = {name: torch.tensor(value, dtype=torch.float64, requires_grad=True) for name, value in KINK_LEAVES.items()}
    out = torch_fn(env)
    weights = np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape))
    (out * torch.tensor(weights)).sum().backward()
    np.testing.assert_allclose(run.value("r"), out.detach().numpy(), rtol=1e-12)
    result = run.grad(of="r", wrt=list(KINK_LEAVES), vector=weights if weights.shape else None)
    for name, t in env.items():
        expected = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
        np.testing.assert_allclose(result.grads[name], expected, rtol=1e-12, atol=0, err_msg=f"∂r/∂{name}")


# --- Issue 25's functions on random shapes: values, gradients (with random weights) and grad_fn names -------

def _function_leaves(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n, m = (int(v) for v in rng.integers(2, 6, 2))
    square = rng.standard_normal((n, n))
    return {
        "x": rng.standard_normal(n) * 1.5,
        "z": rng.standard_normal((m, n)),
        "p": rng.dirichlet(np.ones(n), m),  # rows of probabilities over n classes
        "labels": rng.integers(0, n, m).astype(np.float64),
        "S": square @ square.T + n * np.eye(n),  # symmetric positive definite
        "t": rng.standard_normal((m, n)),
    }


FUNCTION_CASES: list[tuple[str, Callable[[Env], Any]]] = [
    ("expm1(x)", lambda e: torch.expm1(e["x"])),
    ("exp2(x)", lambda e: torch.exp2(e["x"])),
    ("square(z)", lambda e: torch.square(e["z"])),
    ("rsqrt(exp(x))", lambda e: torch.rsqrt(torch.exp(e["x"]))),
    ("erf(x)", lambda e: torch.erf(e["x"])),
    ("gelu(z)", lambda e: torch.nn.functional.gelu(e["z"])),
    ("gelu(z, approximate='tanh')", lambda e: torch.nn.functional.gelu(e["z"], approximate="tanh")),
    ("silu(z)", lambda e: torch.nn.functional.silu(e["z"])),
    ("elu(z, alpha=0.7)", lambda e: torch.nn.functional.elu(e["z"], alpha=0.7)),
    ("leaky_relu(z, negative_slope=0.1)", lambda e: torch.nn.functional.leaky_relu(e["z"], 0.1)),
    ("clamp(z, min=-0.5)", lambda e: torch.clamp(e["z"], min=-0.5)),
    ("var(z, ddof=1)", lambda e: torch.var(e["z"])),
    ("std(z, axis=1, ddof=0)", lambda e: torch.std(e["z"], dim=1, correction=0)),
    ("var(z, axis=0, keepdims=True, ddof=1)", lambda e: torch.var(e["z"], dim=0, keepdim=True)),
    ("squeeze(unsqueeze(x, 0))", lambda e: e["x"].unsqueeze(0).squeeze()),
    ("unsqueeze(z, 1)", lambda e: e["z"].unsqueeze(1)),
    ("flatten(z)", lambda e: e["z"].flatten()),
    ("flip(z, axis=1)", lambda e: torch.flip(e["z"], (1,))),
    ("cat([z, t], axis=1)", lambda e: torch.cat([e["z"], e["t"]], dim=1)),
    ("concatenate([x, x * 2])", lambda e: torch.cat([e["x"], e["x"] * 2])),
    ("stack([x, x * 2])", lambda e: torch.stack([e["x"], e["x"] * 2])),
    ("stack([z, t, z], axis=2)", lambda e: torch.stack([e["z"], e["t"], e["z"]], dim=2)),
    ("cumsum(z, axis=1)", lambda e: torch.cumsum(e["z"], 1)),
    ("cumprod(z, axis=0)", lambda e: torch.cumprod(e["z"], 0)),
    ("log_softmax(z, axis=1)", lambda e: torch.log_softmax(e["z"], 1)),
    ("cross_entropy(z, labels)", lambda e: torch.nn.functional.cross_entropy(e["z"], e["labels"].long())),
    ("cross_entropy(z, labels, reduction='none')",
     lambda e: torch.nn.functional.cross_entropy(e["z"], e["labels"].long(), reduction="none")),
    ("cross_entropy(z, p)", lambda e: torch.nn.functional.cross_entropy(e["z"], e["p"])),
    ("cross_entropy(z, p, reduction='sum')",
     lambda e: torch.nn.functional.cross_entropy(e["z"], e["p"], reduction="sum")),
    ("cross_entropy(x, p[0])", lambda e: torch.nn.functional.cross_entropy(e["x"], e["p"][0])),
    ("mse_loss(z, t)", lambda e: torch.nn.functional.mse_loss(e["z"], e["t"])),
    ("mse_loss(z, t, reduction='sum')", lambda e: torch.nn.functional.mse_loss(e["z"], e["t"], reduction="sum")),
    ("norm(x)", lambda e: torch.linalg.vector_norm(e["x"])),
    ("norm(flatten(z), ord=1)", lambda e: torch.linalg.vector_norm(e["z"].flatten(), 1)),
    ("norm(z, axis=1, ord=inf)", lambda e: torch.linalg.vector_norm(e["z"], float("inf"), dim=1)),
    ("norm(z, ord='fro')", lambda e: torch.linalg.norm(e["z"], "fro")),
    ("matmul(z, S)", lambda e: torch.matmul(e["z"], e["S"])),
    ("einsum('ij,jk->ik', z, S)", lambda e: torch.einsum("ij,jk->ik", e["z"], e["S"])),
    ("solve(S, x)", lambda e: torch.linalg.solve(e["S"], e["x"])),
    ("solve(S, z.T)", lambda e: torch.linalg.solve(e["S"], e["z"].T)),
    ("logdet(S)", lambda e: torch.logdet(e["S"])),
    ("slogdet(S)[1]", lambda e: torch.linalg.slogdet(e["S"])[1]),
    ("cholesky(S)", lambda e: torch.linalg.cholesky(e["S"])),
]
# grad_fn names that are not PyTorch's: einsum's depends on the path torch takes through views and products;
# slogdet's value is picked out of a stack; gelu's tanh form is made of the operations it names.
_OWN_GRAD_FN = {"einsum('ij,jk->ik', z, S)", "slogdet(S)[1]", "gelu(z, approximate='tanh')"}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("expr", "torch_fn"), FUNCTION_CASES, ids=[expr for expr, _ in FUNCTION_CASES])
def test_function_matches_torch(expr: str, torch_fn: Callable[[Env], Any], seed: int) -> None:
    leaves = _function_leaves(seed)
    header = "\n".join(f"{name} = 0" for name in leaves)
    run = gradcalc.parse_program(f"{header}\nr = {expr}\n").run(leaves)
    env = {name: torch.tensor(value, dtype=torch.float64, requires_grad=name != "labels")
           for name, value in leaves.items()}
    out = torch_fn(env)
    np.testing.assert_allclose(run.value("r"), out.detach().numpy(), rtol=1e-11, atol=1e-13)
    if expr not in _OWN_GRAD_FN:
        assert run.node("r").grad_fn == type(out.grad_fn).__name__
    weights = np.random.default_rng(seed + 10).standard_normal(tuple(out.shape)) if out.shape else np.float64(1.0)
    (out * torch.tensor(weights)).sum().backward()
    used = [name for name in leaves if name != "labels" and re.search(rf"\b{name}\b", expr)]
    result = run.grad(of="r", wrt=used, vector=weights if weights.shape else None)
    for name in used:
        grad = env[name].grad
        expected = grad.numpy() if grad is not None else np.zeros(leaves[name].shape)
        np.testing.assert_allclose(result.grads[name], expected, rtol=1e-9, atol=1e-11, err_msg=f"∂r/∂{name}")


# --- Issue 25's "Done when": a two-layer classifier as a PyTorch user writes it ------------------------------

CLASSIFIER = """\
X = {X}
labels = {labels}
W1 = 0; b1 = 0; W2 = 0; b2 = 0
h = tanh(X @ W1 + b1)
scores = h @ W2 + b2
L = cross_entropy(scores, labels)
Y = eye({C})[labels]
L_onehot = -sum(Y * log_softmax(scores, axis=1)) / len(X)
L_probabilities = cross_entropy(scores, Y, reduction='sum')
"""


@pytest.mark.parametrize("seed", range(3))
def test_two_layer_classifier_matches_torch(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n, d, hidden, classes = 5, 3, 4, 3
    x = rng.standard_normal((n, d))
    labels = rng.integers(0, classes, n)
    params = {"W1": rng.standard_normal((d, hidden)), "b1": rng.standard_normal(hidden) * 0.1,
              "W2": rng.standard_normal((hidden, classes)), "b2": rng.standard_normal(classes) * 0.1}
    text = CLASSIFIER.format(X=x.tolist(), labels=labels.tolist(), C=classes)
    run = gradcalc.parse_program(text).run(params)
    t = {name: torch.tensor(value, requires_grad=True) for name, value in params.items()}
    target = torch.tensor(labels)
    scores = torch.tanh(torch.tensor(x) @ t["W1"] + t["b1"]) @ t["W2"] + t["b2"]
    losses = {"L": torch.nn.functional.cross_entropy(scores, target),
              "L_onehot": -(torch.eye(classes, dtype=torch.float64)[target] * torch.log_softmax(scores, 1)).sum() / n,
              "L_probabilities": torch.nn.functional.cross_entropy(
                  scores, torch.eye(classes, dtype=torch.float64)[target], reduction="sum")}
    assert run.node("L").grad_fn == type(losses["L"].grad_fn).__name__ == "NllLossBackward0"
    for loss, expected in losses.items():
        torch_grads = torch.autograd.grad(expected, list(t.values()), retain_graph=True)
        result = run.grad(of=loss, wrt=list(params))
        np.testing.assert_allclose(float(result.value), expected.item(), rtol=1e-12, err_msg=loss)
        for name, grad in zip(t, torch_grads, strict=True):
            np.testing.assert_allclose(result.grads[name], grad.numpy(), rtol=1e-10, atol=1e-13,
                                       err_msg=f"∂{loss}/∂{name}")
    # Second order: the Hessian in the output layer's bias, torch's by double backward.
    hessian = torch.autograd.functional.hessian(
        lambda b: torch.nn.functional.cross_entropy(
            torch.tanh(torch.tensor(x) @ t["W1"].detach() + t["b1"].detach()) @ t["W2"].detach() + b, target),
        t["b2"].detach())
    block = np.asarray(run.hessian(of="L", wrt=["b2"]).blocks[0][0])
    np.testing.assert_allclose(block, hessian.numpy(), rtol=1e-10, atol=1e-13)


# --- Statements and edges of issue 25 against torch 2.13 ------------------------------------------------------

EDGE_LEAVES = {
    "x": np.array([1.5, -2.5, 3.7]),
    "b": np.array([2.0, 0.7, 1.1]),
    "W": np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]]),
    "N": np.array([[0.0, 1.0], [1.0, 0.0]]),  # det -1: logdet is NaN
}

# (gradcalc program ending in r, the same in PyTorch, torch's grad_fn name where gradcalc gives it too)
EDGE_CASES: list[tuple[str, Callable[[Env], Any], str | None]] = [
    ("r = x % b", lambda e: e["x"] % e["b"], "RemainderBackward1"),
    ("r = x % 2", lambda e: e["x"] % 2, "RemainderBackward0"),
    # torch's 2 % x has no derivative ('not implemented'); a tensor 2 has: -floor(2/x), what gradcalc gives.
    ("r = 2 % x", lambda e: torch.tensor(2.0, dtype=torch.float64) % e["x"], "RemainderBackward1"),
    # torch's x // b refuses backward; its differentiable spelling has gradient zero, as gradcalc's // (a constant).
    ("r = x // b * x", lambda e: torch.div(e["x"], e["b"], rounding_mode="floor") * e["x"], "MulBackward0"),
    ("u, v = W\nr = u * v", lambda e: torch.unbind(e["W"])[0] * torch.unbind(e["W"])[1], "MulBackward0"),
    ("u, v = W\nr = v", lambda e: list(e["W"])[1], "UnbindBackward0"),
    ("r = x[0] if x[1] > 0 else x[2] ^ 2", lambda e: e["x"][0] if e["x"][1] > 0 else e["x"][2] ** 2, "PowBackward0"),
    ("r = x * 2\nr[1] = b[0] * x[2]", None, "CopySlices"),
    ("r = x * 1\nr **= 2", lambda e: (e["x"] * 1) ** 2, "PowBackward0"),
    ("r = logdet(N)", lambda e: torch.logdet(e["N"]), "WhereBackward0"),  # NaN, gradient zero
    ("r = slogdet(N)[1]", lambda e: torch.linalg.slogdet(e["N"])[1], None),
    ("r = var(W) + std(W, axis=1)", lambda e: torch.var(e["W"], correction=0) + torch.std(e["W"], 1, correction=0),
     "AddBackward0"),
    ("r = var(W, ddof=1) + std(W, axis=1, ddof=1)", lambda e: torch.var(e["W"]) + torch.std(e["W"], 1),
     "AddBackward0"),
]


def _copy_slices(env: Env) -> Any:
    r = env["x"] * 2
    r[1] = env["b"][0] * env["x"][2]
    return r


@pytest.mark.parametrize(("text", "torch_fn", "grad_fn"), EDGE_CASES, ids=[text for text, _, _ in EDGE_CASES])
def test_statements_and_edges_match_torch(text: str, torch_fn: Callable[[Env], Any] | None, grad_fn: str | None
                                          ) -> None:
    header = "\n".join(f"{name} = 0" for name in EDGE_LEAVES)
    run = gradcalc.parse_program(f"{header}\n{text}\n").run(EDGE_LEAVES)
    env = {name: torch.tensor(value, requires_grad=True) for name, value in EDGE_LEAVES.items()}
    out = (torch_fn or _copy_slices)(env)
    np.testing.assert_allclose(run.value("r"), out.detach().numpy(), rtol=1e-13)
    if grad_fn is not None:
        assert run.node("r").grad_fn == type(out.grad_fn).__name__ == grad_fn
    weights = np.arange(1.0, out.numel() + 1).reshape(tuple(out.shape))
    (out * torch.tensor(weights)).sum().backward()
    result = run.grad(of="r", wrt=list(EDGE_LEAVES), vector=weights if weights.shape else None)
    for name, t in env.items():
        expected = t.grad.numpy() if t.grad is not None else np.zeros(t.shape)
        np.testing.assert_allclose(result.grads[name], expected, rtol=1e-12, atol=1e-15, err_msg=f"∂r/∂{name}")


def test_det_at_a_singular_matrix_is_torchs_double_backward_gradient() -> None:
    """gradcalc's det gradient at a singular matrix is the adjugate's transpose, which torch 2.13 gives when it
    differentiates with create_graph=True (its plain backward gives zeros there: docs/language.md says so)."""
    run = gradcalc.parse_program("P = [[1., 2], [2, 4]]\nr = det(P)\n").run()
    matrix = torch.tensor([[1.0, 2.0], [2.0, 4.0]], dtype=torch.float64, requires_grad=True)
    (torch_grad,) = torch.autograd.grad(torch.linalg.det(matrix), matrix, create_graph=True)
    np.testing.assert_allclose(run.grad(of="r", wrt=["P"]).grads["P"], torch_grad.detach().numpy(), atol=1e-15)
    np.testing.assert_allclose(torch_grad.detach().numpy(), [[4, -2], [-2, 1]], atol=1e-15)


@pytest.mark.slow
@pytest.mark.parametrize(("expr", "torch_fn"), FUNCTION_CASES, ids=[expr for expr, _ in FUNCTION_CASES])
def test_function_second_derivatives_match_torch(expr: str, torch_fn: Callable[[Env], Any]) -> None:
    """The Hessian of sum(f * weights) in f's first differentiable input, against torch's double backward."""
    leaves = _function_leaves(0)
    name = next(name for name in leaves if name != "labels" and re.search(rf"\b{name}\b", expr))
    env = {key: torch.tensor(value, dtype=torch.float64) for key, value in leaves.items()}
    shape = tuple(torch_fn(env).shape)
    weights = np.random.default_rng(7).standard_normal(shape)
    header = "\n".join(f"{key} = 0" for key in leaves)
    run = gradcalc.parse_program(f"{header}\nw = {weights.tolist()}\nr = sum(({expr}) * w)\n").run(leaves)

    def scalar(value: Any) -> Any:
        return (torch_fn({**env, name: value}) * torch.tensor(weights)).sum()

    expected = torch.autograd.functional.hessian(scalar, env[name]).numpy().reshape(leaves[name].size, -1)
    block = np.asarray(run.hessian(of="r", wrt=[name]).blocks[0][0]).reshape(leaves[name].size, -1)
    np.testing.assert_allclose(block, expected, rtol=1e-8, atol=1e-10, err_msg=f"∂²/∂{name}² of {expr}")
