"""Every primitive's batching rule against a loop over the points: engine/primitives.py's records, all of them.

A rule evaluates a primitive on a stack of points at once (engine/batching.py, as `jax.vmap` does); it
must give, point by point, what the primitive gives on each point alone. Each record needs an example
below: a record added without one fails test_every_primitive_has_an_example, so a new primitive cannot
ship without its rule being checked. Each example runs with every input batched, and with each input
batched alone (the others the same at every point: a program's constants, a leaf not given per point).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from gradcalc.engine import batching
from gradcalc.engine.primitives import PRIMITIVES

POINTS = 4


def _u(*shape: int, low: float = -0.9, high: float = 0.9) -> Callable[[np.random.Generator], Any]:
    return lambda rng: rng.uniform(low, high, shape)


def _spd(n: int) -> Callable[[np.random.Generator], Any]:
    def make(rng: np.random.Generator) -> Any:
        a = rng.uniform(-1, 1, (n, n))
        return a @ a.T + n * np.eye(n)  # symmetric positive definite, well conditioned

    return make


def _signs(*shape: int) -> Callable[[np.random.Generator], Any]:
    return lambda rng: (rng.uniform(size=shape) > 0.5).astype(float)


def _onehot(rng: np.random.Generator) -> Any:
    return np.eye(3)[rng.integers(0, 3, 2)]


UNARY = _u(2, 3)
POSITIVE = _u(2, 3, low=0.2, high=1.8)
ROW = _u(3)

# name: (one generator per input, the params). Inputs of different shapes check the broadcasting.
EXAMPLES: dict[str, tuple[list[Callable[[np.random.Generator], Any]], tuple[Any, ...]]] = {
    **{name: ([UNARY, ROW], ()) for name in ("add", "sub", "mul", "maximum", "minimum", "atan2", "lt", "le",
                                              "gt", "ge", "eq", "ne")},
    "div": ([UNARY, _u(3, low=0.5, high=1.5)], ()),
    "remainder": ([UNARY, _u(3, low=0.5, high=1.5)], ()),
    "floor_divide": ([UNARY, _u(3, low=0.5, high=1.5)], ()),
    "index_put": ([_u(4, 3), ROW], ((slice(1, 3),),)),  # y[1:3] = row: the row written into two of four rows
    "pow": ([POSITIVE, ROW], ()),
    "clip": ([UNARY, _u(3, low=-0.5, high=0.0), _u(2, 1, low=0.0, high=0.5)], ()),
    "where": ([_signs(2, 3), UNARY, ROW], ()),
    "logical_and": ([_signs(2, 3), _signs(3)], ()),
    "logical_or": ([_signs(2, 3), _signs(3)], ()),
    "logical_not": ([_signs(2, 3)], ()),
    **{name: ([UNARY], ()) for name in ("neg", "exp", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh",
                                         "tanh", "abs", "sigmoid", "relu", "softplus", "sign", "floor", "ceil",
                                         "round", "expm1", "exp2", "erf", "gelu", "silu")},
    **{name: ([POSITIVE], ()) for name in ("log", "log2", "log10", "log1p", "sqrt", "rsqrt")},
    "elu": ([UNARY], (0.7,)),
    "leaky_relu": ([UNARY], (0.1,)),
    **{name: ([UNARY], (1, True)) for name in ("sum", "mean", "prod", "max", "min", "norm", "logsumexp")},
    "softmax": ([UNARY], (1,)),
    "reshape": ([UNARY], ((3, 2),)),
    "transpose": ([_u(2, 3, 4)], ((2, 0, 1),)),
    "broadcast_to": ([ROW], ((2, 3),)),
    "sum_to": ([UNARY], ((1, 3),)),
    "index": ([_u(4, 3)], ((slice(1, 3), 2),)),
    "scatter": ([_u(2)], ((slice(1, 3), 2), (4, 3))),
    "stack": ([ROW, ROW, ROW], ()),
    "matmul": ([_u(2, 3), _u(3, 4)], ()),
    "trace": ([_u(3, 3)], ()),
    "det": ([_u(3, 3)], ()),
    "inv": ([_spd(3)], ()),
    "var": ([UNARY], (1, False, 1)),
    "std": ([UNARY], (0, True, 0)),
    "norm_ord": ([UNARY], (None, False, 1)),
    "squeeze": ([_u(2, 1, 3)], ((2, 3), 1)),
    "unsqueeze": ([UNARY], ((2, 1, 3), 1)),
    "flip": ([UNARY], ((1,),)),
    "concatenate": ([UNARY, _u(1, 3)], (0,)),
    "stack_axis": ([UNARY, UNARY], (2,)),
    "cumsum": ([UNARY], (1,)),
    "cumprod": ([UNARY], (0,)),
    "argmax": ([UNARY], (1,)),
    "argmin": ([UNARY], (None,)),
    "log_softmax": ([UNARY], (1,)),
    "cross_entropy": ([UNARY, _u(2, 3, low=0.0, high=1.0)], ("mean", False)),
    "mse_loss": ([UNARY, ROW], ("sum",)),
    "einsum": ([_u(2, 3), _u(3, 4), _u(4)], ("ij,jk,k->i",)),
    "solve": ([_spd(3), _u(3, 2)], ()),
    "logdet": ([_spd(3)], (False,)),
    "cholesky": ([_spd(3)], ()),
}

# Examples of the same primitive with other shapes or params: the cases a rule treats apart.
MORE: list[tuple[str, list[Callable[[np.random.Generator], Any]], tuple[Any, ...]]] = [
    ("matmul", [_u(2, 3), ROW], ()),  # matrix @ vector: a stack of vectors on the right
    ("matmul", [ROW, _u(3, 4)], ()),
    ("matmul", [ROW, ROW], ()),
    ("matmul", [_u(5, 2, 3), _u(3, 4)], ()),
    ("matmul", [_u(5, 2, 3), ROW], ()),
    ("matmul", [ROW, _u(5, 3, 2)], ()),
    ("sum", [_u(2, 3, 4)], (None, False)),
    ("sum", [_u(2, 3, 4)], ((0, 2), False)),
    ("solve", [_spd(3), ROW], ()),
    ("logdet", [_u(3, 3)], (True,)),
    ("index", [_u(4, 3)], ((np.array([0, 2, 2]),),)),
    ("cross_entropy", [UNARY, _onehot], ("none", True)),
    ("mse_loss", [UNARY, UNARY], ("mean",)),
    ("concatenate", [UNARY, UNARY, UNARY], (1,)),
    ("trace", [_u(2, 3, 3)], ()),
]


def test_every_primitive_has_an_example() -> None:
    missing = sorted(set(PRIMITIVES) - set(EXAMPLES))
    assert not missing, f"add a batching example for: {', '.join(missing)}"


def test_every_primitive_declares_a_batching_rule() -> None:
    """None is left to the per-point fallback (batching.Unbatchable): each runs batched."""
    unbatched = sorted(name for name, prim in PRIMITIVES.items() if prim.batching == "unbatched")
    assert not unbatched, f"no batching rule: {', '.join(unbatched)}"


def _cases() -> list[Any]:
    cases = [pytest.param(name, makers, params, id=name) for name, (makers, params) in EXAMPLES.items()]
    cases += [pytest.param(name, makers, params, id=f"{name}-{i}") for i, (name, makers, params) in enumerate(MORE)]
    return cases


@pytest.mark.parametrize(("name", "makers", "params"), _cases())
def test_the_rule_equals_a_loop_over_the_points(name: str, makers: list[Any], params: tuple[Any, ...]) -> None:
    prim = PRIMITIVES[name]
    forward = prim.forward
    rule = batching._primal({prim: forward})[prim]
    rng = np.random.default_rng(len(name))
    points = [[make(rng) for make in makers] for _ in range(POINTS)]
    shared = [make(rng) for make in makers]  # an input that is the same at every point
    subsets = [set(range(len(makers)))] + ([{i} for i in range(len(makers))] if len(makers) > 1 else [])
    for batched in subsets:
        args = [batching.Batched(np.stack([point[i] for point in points])) if i in batched else shared[i]
                for i in range(len(makers))]
        found = rule(*args, *params)
        assert isinstance(found, batching.Batched), f"{name}: a batch in, no batch out"
        stack = np.asarray(found.stack)
        assert stack.shape[0] == POINTS
        for p, point in enumerate(points):
            alone = forward(*[point[i] if i in batched else shared[i] for i in range(len(makers))], *params)
            assert stack[p].shape == np.shape(alone), f"{name}, inputs {sorted(batched)} batched, point {p}"
            np.testing.assert_allclose(stack[p], alone, rtol=1e-12, atol=1e-12,
                                       err_msg=f"{name}, inputs {sorted(batched)} batched, point {p}")
