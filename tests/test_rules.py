"""Every derivative rule against central finite differences, to first and second order.

The parametrisation walks `ops.PRIMITIVES`, so a new differentiable primitive
fails here until its record (engine/primitives.py) has rules that agree with
its forward function and it has an entry in `CASES` below (the points to check
it at).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from helpers import central_difference

import gradcalc  # noqa: F401  (installs the derivative table)
from gradcalc.engine import ops, rules
from gradcalc.engine.autodiff import backward, hessian, jacobian_fwd, jacobian_rev
from gradcalc.engine.graph import Node, constant, leaf
from gradcalc.engine.primitives import Indices

RNG = np.random.default_rng(20240611)


@dataclass
class Case:
    """One point to check a primitive at: `build(*input_nodes)` must record that primitive last."""

    label: str
    build: Callable[..., Node]
    inputs: tuple[np.ndarray, ...]
    wants: tuple[bool, ...] | None = None  # which inputs are differentiable leaves (default: all)


# --- Domain-safe inputs ---------------------------------------------------------------------------

def normal(*shape: int, scale: float = 1.0) -> np.ndarray:
    return np.asarray(RNG.standard_normal(shape) * scale)


def uniform(lo: float, hi: float, *shape: int) -> np.ndarray:
    return np.asarray(RNG.uniform(lo, hi, shape))


def positive(*shape: int) -> np.ndarray:
    return uniform(0.3, 3.0, *shape)


def signed(*shape: int, lo: float = 0.25, hi: float = 2.0) -> np.ndarray:
    """Magnitudes in [lo, hi] with both signs: away from the kink at 0 (abs, relu, sign, division)."""
    size = int(np.prod(shape))
    signs = np.resize([-1.0, 1.0], size)
    RNG.shuffle(signs)
    return np.asarray(RNG.uniform(lo, hi, shape) * signs.reshape(shape))


def off_jumps(*shape: int) -> np.ndarray:
    """Away from integers and half-integers (the jumps of floor, ceil, round)."""
    whole = RNG.integers(-3, 3, shape)
    frac = RNG.choice([0.15, 0.3, 0.65, 0.85], shape)
    return np.asarray(whole + frac, dtype=np.float64)


def well_conditioned(*shape: int) -> np.ndarray:
    """Square matrices (possibly batched) close to 2·I, far from singular."""
    n = shape[-1]
    return np.asarray(2.0 * np.eye(n) + 0.3 * RNG.standard_normal(shape))


def scalar(value: float) -> np.ndarray:
    return np.asarray(value, dtype=np.float64)


def _elementwise(fn: Callable[[Node], Node], make: Callable[..., np.ndarray]) -> list[Case]:
    return [
        Case("matrix", fn, (make(2, 3),)),
        Case("vector", fn, (make(5),)),
        Case("scalar", fn, (make(),)),
    ]


def _binary(fn: Callable[[Node, Node], Node], left: Callable[..., np.ndarray],
            right: Callable[..., np.ndarray]) -> list[Case]:
    return [
        Case("same shape", fn, (left(2, 3), right(2, 3))),
        Case("(3,1) with (1,4)", fn, (left(3, 1), right(1, 4))),
        Case("scalar with matrix", fn, (left(), right(2, 3))),
        Case("matrix with row", fn, (left(2, 3), right(3))),
        Case("3-D with matrix", fn, (left(2, 1, 3), right(4, 1))),
        Case("constant right", fn, (left(2, 3), right(2, 3)), (True, False)),
        Case("constant left", fn, (left(3,), right(2, 3)), (False, True)),
    ]


def _reductions(fn: Callable[..., Node], make: Callable[..., np.ndarray]) -> list[Case]:
    return [
        Case("all", lambda x: fn(x, None, False), (make(3, 4),)),
        Case("all, keepdims", lambda x: fn(x, None, True), (make(3, 4),)),
        Case("axis 0", lambda x: fn(x, 0, False), (make(3, 4),)),
        Case("axis 1", lambda x: fn(x, 1, False), (make(3, 4),)),
        Case("axis -1, keepdims", lambda x: fn(x, -1, True), (make(3, 4),)),
        Case("axes (0, 2) of 3-D", lambda x: fn(x, (0, 2), False), (make(2, 3, 4),)),
        Case("axis 1 of 3-D, keepdims", lambda x: fn(x, 1, True), (make(2, 3, 4),)),
        Case("vector", lambda x: fn(x, None, False), (make(5),)),
    ]


def _prod_values(*shape: int) -> np.ndarray:
    return signed(*shape, lo=0.5, hi=1.5)


def _with_zeros() -> np.ndarray:
    """Row 0 has one zero, row 1 two zeros, row 2 none: each branch of prod's rule."""
    x = _prod_values(3, 4)
    x[0, 1] = 0.0
    x[1, 0] = x[1, 3] = 0.0
    return x


def _clip_inputs() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    x = np.array([[-2.0, -0.8, -0.1, 0.2, 0.9, 1.7], [1.3, 0.05, -1.1, -0.35, 0.6, 2.2]])
    lo = np.array([[-0.5, -0.6, -0.4, -0.45, -0.55, -0.5]])
    hi = np.array([[0.7], [0.45]])
    return x, lo, hi


def _matmul_cases() -> list[Case]:
    mm = ops.matmul
    return [
        Case("matrix @ matrix", mm, (normal(2, 3), normal(3, 4))),
        Case("matrix @ vector", mm, (normal(2, 3), normal(3))),
        Case("vector @ matrix", mm, (normal(3), normal(3, 4))),
        Case("vector @ vector", mm, (normal(3), normal(3))),
        Case("batched 3-D @ 2-D", mm, (normal(2, 2, 3), normal(3, 4))),
        Case("2-D @ batched 3-D", mm, (normal(2, 3), normal(2, 3, 4))),
        Case("batch broadcast (1,2,3) @ (2,3,2)", mm, (normal(1, 2, 3), normal(2, 3, 2))),
        Case("vector @ batched 3-D", mm, (normal(3), normal(2, 3, 2))),
        Case("constant left", mm, (normal(2, 3), normal(3, 4)), (False, True)),
    ]


def _index_cases() -> list[Case]:
    def at(key: tuple) -> Callable[[Node], Node]:
        return lambda x: ops.index(x, key)

    full = slice(None)
    return [
        Case("x[0]", at((0,)), (normal(5),)),
        Case("x[1:3]", at((slice(1, 3),)), (normal(5),)),
        Case("x[-1]", at((-1,)), (normal(5),)),
        Case("x[::2]", at((slice(None, None, 2),)), (normal(5),)),
        Case("x[::-1]", at((slice(None, None, -1),)), (normal(4),)),
        Case("m[0, :]", at((0, full)), (normal(3, 4),)),
        Case("m[:, 1]", at((full, 1)), (normal(3, 4),)),
        Case("m[1, 2]", at((1, 2)), (normal(3, 4),)),
        Case("m[1:, ::2]", at((slice(1, None), slice(None, None, 2))), (normal(3, 4),)),
        Case("t[0]", at((0,)), (normal(2, 3, 4),)),
        *_array_index_cases(at),
    ]


def _array_index_cases(at: Callable[[tuple], Callable[[Node], Node]]) -> list[Case]:
    """x[[0, 2, 2]], masks (read as the entries they pick), x[None]: entries picked twice get both gradients."""
    full = slice(None)
    return [
        Case("x[[0, 2, 2]]", at((Indices((0, 2, 2)),)), (normal(4),)),
        Case("m[[1, 0]]", at((Indices((1, 0)),)), (normal(3, 4),)),
        Case("m[:, [[0, 1], [3, 3]]]", at((full, Indices(((0, 1), (3, 3))))), (normal(3, 4),)),
        Case("m[mask] (two array indices)", at((Indices((0, 1, 2)), Indices((2, 0, 3)))), (normal(3, 4),)),
        Case("m[None, 1]", at((None, 1)), (normal(3, 4),)),
    ]


def _scatter_cases() -> list[Case]:
    def into(key: tuple, shape: tuple[int, ...]) -> Callable[[Node], Node]:
        return lambda g: ops.scatter(g, key, shape)

    full = slice(None)
    return [
        Case("into x[1:3]", into((slice(1, 3),), (5,)), (normal(2),)),
        Case("into x[-1]", into((-1,), (5,)), (normal(),)),
        Case("into x[::2]", into((slice(None, None, 2),), (5,)), (normal(3),)),
        Case("into m[0, :]", into((0, full), (3, 4)), (normal(4),)),
        Case("into m[:, 1]", into((full, 1), (3, 4)), (normal(3),)),
        Case("into m[1, 2]", into((1, 2), (3, 4)), (normal(),)),
        Case("into x[[0, 2, 2]]", into((Indices((0, 2, 2)),), (4,)), (normal(3),)),
        Case("into m[:, [1, 1]]", into((full, Indices((1, 1))), (3, 4)), (normal(3, 2),)),
    ]


def _remainder_cases() -> list[Case]:
    """a % b where a/b is away from whole numbers (the jumps)."""
    b, row = uniform(1.0, 2.0, 2, 3), signed(3)
    return [
        Case("same shape", ops.remainder, (off_jumps(2, 3) * b, b)),
        Case("matrix with a row of both signs", ops.remainder, (off_jumps(2, 3) * row, row)),
        Case("constant divisor", ops.remainder, (off_jumps(2, 3) * b, b), (True, False)),
    ]


def _index_put_cases() -> list[Case]:
    def put(key: tuple) -> Callable[[Node, Node], Node]:
        return lambda x, v: ops.index_put(x, v, key)

    return [
        Case("x[1:3] = v", put((slice(1, 3),)), (normal(5), normal(2))),
        Case("m[1, 2] = s", put((1, 2)), (normal(3, 4), normal())),
        Case("m[[0, 2]] = row (broadcast)", put((Indices((0, 2)),)), (normal(3, 4), normal(4))),
        Case("x[[3, 0]] = v", put((Indices((3, 0)),)), (normal(4), normal(2))),
        Case("into a constant", put((0,)), (normal(3), normal()), (False, True)),
    ]


def _det_values() -> np.ndarray:
    m = well_conditioned(3, 3)
    return m[[1, 0, 2]]  # rows swapped: a negative determinant


_sign_pattern = np.array([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])


# --- Issue 25's functions -------------------------------------------------------------------------

def _statistic_cases(fn: Callable[..., Node]) -> list[Case]:
    return [
        Case("all", lambda x: fn(x, None, False, 0), (normal(3, 4),)),
        Case("all, ddof 1", lambda x: fn(x, None, False, 1), (normal(3, 4),)),
        Case("axis 0, ddof 1", lambda x: fn(x, 0, False, 1), (normal(3, 4),)),
        Case("axis -1, keepdims", lambda x: fn(x, -1, True, 0), (normal(3, 4),)),
        Case("axes (0, 2) of 3-D", lambda x: fn(x, (0, 2), False, 1), (normal(2, 3, 4),)),
        Case("vector", lambda x: fn(x, None, False, 0), (normal(5),)),
    ]


def _cumulative_cases(fn: Callable[..., Node], make: Callable[..., np.ndarray]) -> list[Case]:
    return [
        Case("vector", lambda x: fn(x, 0), (make(5),)),
        Case("matrix, axis 0", lambda x: fn(x, 0), (make(3, 4),)),
        Case("matrix, axis 1", lambda x: fn(x, 1), (make(3, 4),)),
        Case("3-D, axis 1", lambda x: fn(x, 1), (make(2, 3, 4),)),
    ]


def _with_a_zero(*shape: int) -> np.ndarray:
    x = _prod_values(*shape)
    x.reshape(-1)[1] = 0.0
    return x


def _probabilities(*shape: int) -> np.ndarray:
    p = uniform(0.1, 1.0, *shape)
    return np.asarray(p / p.sum(axis=-1, keepdims=True))


def _one_hot(labels: list[int], classes: int) -> np.ndarray:
    return np.asarray(np.eye(classes)[labels])


def _spd(m: Node) -> Node:
    """A symmetric positive definite matrix made of any square m (m m^T + I, one operation reading m)."""
    return ops.add(ops.einsum(m, m, "ij,kj->ik"), ops.eye(m.shape[-1], m.shape[-1]))


def _spd_value(n: int) -> np.ndarray:
    m = normal(n, n)
    return np.asarray(m @ m.T + np.eye(n))


FUNCTION_CASES: dict[str, list[Case]] = {
    "expm1": _elementwise(ops.expm1, normal),
    "exp2": _elementwise(ops.exp2, normal),
    "rsqrt": _elementwise(ops.rsqrt, positive),
    "erf": _elementwise(ops.erf, lambda *s: normal(*s, scale=1.5)),
    "gelu": _elementwise(ops.gelu, lambda *s: normal(*s, scale=2.0)),
    "silu": _elementwise(ops.silu, lambda *s: normal(*s, scale=2.0)),
    "elu": [*_elementwise(lambda x: ops.elu(x, 1.0), signed),
            Case("alpha 0.4", lambda x: ops.elu(x, 0.4), (signed(2, 3),))],
    "leaky_relu": [*_elementwise(lambda x: ops.leaky_relu(x, 0.01), signed),
                   Case("slope 0.3", lambda x: ops.leaky_relu(x, 0.3), (signed(2, 3),))],
    "var": _statistic_cases(ops.var),
    "std": _statistic_cases(ops.std),
    "squeeze": [
        Case("(1,3,1) to (3,)", lambda x: ops.squeeze(x, (3,), None), (normal(1, 3, 1),)),
        Case("axis 0 of (1,2,3)", lambda x: ops.squeeze(x, (2, 3), 0), (normal(1, 2, 3),)),
    ],
    "unsqueeze": [
        Case("vector to a row", lambda x: ops.unsqueeze(x, (1, 3), 0), (normal(3),)),
        Case("matrix, axis 2", lambda x: ops.unsqueeze(x, (2, 3, 1), 2), (normal(2, 3),)),
    ],
    "flip": [
        Case("vector", lambda x: ops.flip(x, (0,)), (normal(4),)),
        Case("matrix, axis 1", lambda x: ops.flip(x, (1,)), (normal(3, 4),)),
        Case("matrix, both axes", lambda x: ops.flip(x, (0, 1)), (normal(3, 4),)),
    ],
    "concatenate": [
        Case("vectors of 3 and 2", lambda a, b: ops.concatenate(a, b, 0), (normal(3), normal(2))),
        Case("matrices, axis 1", lambda a, b, c: ops.concatenate(a, b, c, 1), (normal(2, 1), normal(2, 3),
                                                                              normal(2, 2))),
        Case("matrices, axis 0, one constant", lambda a, b: ops.concatenate(a, b, 0), (normal(1, 3), normal(2, 3)),
             (False, True)),
    ],
    "norm_ord": [
        Case("ord 1, all", lambda x: ops.norm_ord(x, None, False, 1), (signed(3, 4),)),
        Case("ord 1, axis 1, keepdims", lambda x: ops.norm_ord(x, 1, True, 1), (signed(3, 4),)),
        Case("ord inf, all", lambda x: ops.norm_ord(x, None, False, math.inf), (signed(3, 4),)),
        Case("ord inf, axis 0", lambda x: ops.norm_ord(x, 0, False, math.inf), (signed(3, 4),)),
    ],
    "stack_axis": [
        Case("vectors along axis 1", lambda a, b: ops.stack_axis(a, b, 1), (normal(3), normal(3))),
        Case("matrices along axis 2, one constant", lambda a, b, c: ops.stack_axis(a, b, c, 2),
             (normal(2, 3), normal(2, 3), normal(2, 3)), (True, False, True)),
    ],
    "cumsum": _cumulative_cases(ops.cumsum, normal),
    "cumprod": [
        *_cumulative_cases(ops.cumprod, _prod_values),
        Case("a zero, vector", lambda x: ops.cumprod(x, 0), (np.array([0.7, 0.0, -1.3, 1.1]),)),
        Case("zeros, matrix axis 1", lambda x: ops.cumprod(x, 1), (_with_zeros(),)),
        Case("a zero, 3-D axis 1", lambda x: ops.cumprod(x, 1), (_with_a_zero(2, 3, 2),)),
    ],
    "log_softmax": [
        Case("axis 1", lambda x: ops.log_softmax(x, 1), (normal(3, 4),)),
        Case("axis 0", lambda x: ops.log_softmax(x, 0), (normal(3, 4),)),
        Case("vector", lambda x: ops.log_softmax(x, 0), (normal(5, scale=3.0),)),
    ],
    "cross_entropy": [
        Case("indices, mean", lambda z, p: ops.cross_entropy(z, p, "mean", True),
             (normal(4, 3), _one_hot([2, 0, 1, 2], 3)), (True, False)),
        Case("indices, sum", lambda z, p: ops.cross_entropy(z, p, "sum", True),
             (normal(4, 3), _one_hot([2, 0, 1, 2], 3)), (True, False)),
        Case("indices, none", lambda z, p: ops.cross_entropy(z, p, "none", True),
             (normal(4, 3), _one_hot([1, 0, 1, 2], 3)), (True, False)),
        Case("probabilities, mean", lambda z, p: ops.cross_entropy(z, p, "mean", False),
             (normal(2, 5), _probabilities(2, 5))),
        Case("one example", lambda z, p: ops.cross_entropy(z, p, "mean", False), (normal(4), _probabilities(4))),
        Case("probabilities, none", lambda z, p: ops.cross_entropy(z, p, "none", False),
             (normal(3, 2), _probabilities(3, 2))),
    ],
    "mse_loss": [
        Case("mean", lambda x, y: ops.mse_loss(x, y, "mean"), (normal(2, 3), normal(2, 3))),
        Case("sum", lambda x, y: ops.mse_loss(x, y, "sum"), (normal(4), normal(4))),
        Case("none, constant target", lambda x, y: ops.mse_loss(x, y, "none"), (normal(2, 3), normal(2, 3)),
             (True, False)),
    ],
    "solve": [
        Case("vector right side", ops.solve, (well_conditioned(3, 3), normal(3))),
        Case("matrix right side", ops.solve, (well_conditioned(3, 3), normal(3, 2))),
        Case("constant matrix", ops.solve, (well_conditioned(2, 2), normal(2)), (False, True)),
    ],
    "logdet": [
        Case("3x3", lambda x: ops.logdet(x, False), (well_conditioned(3, 3),)),
        Case("batched", lambda x: ops.logdet(x, False), (well_conditioned(2, 2, 2),)),
        Case("log |det|, negative determinant", lambda x: ops.logdet(x, True), (_det_values(),)),
    ],
    "einsum": [
        Case("'ij,j->i'", lambda a, x: ops.einsum(a, x, "ij,j->i"), (normal(2, 3), normal(3))),
        Case("'ij,jk->ki'", lambda a, b: ops.einsum(a, b, "ij,jk->ki"), (normal(2, 3), normal(3, 4))),
        Case("'ij->' (letters only one operand has)", lambda a: ops.einsum(a, "ij->"), (normal(2, 3),)),
        Case("'i,j->ij'", lambda a, b: ops.einsum(a, b, "i,j->ij"), (normal(2), normal(3))),
        Case("'bij,bjk->bik', one constant", lambda a, b: ops.einsum(a, b, "bij,bjk->bik"),
             (normal(2, 2, 3), normal(2, 3, 2)), (True, False)),
        Case("'ij,ik,j->k'", lambda a, b, c: ops.einsum(a, b, c, "ij,ik,j->k"), (normal(2, 3), normal(2, 2),
                                                                               normal(3))),
    ],
    "cholesky": [
        Case("3x3", lambda m: ops.cholesky(_spd(m)), (normal(3, 3),)),
        Case("2x2", lambda m: ops.cholesky(_spd(m)), (normal(2, 2),)),
        # The matrix itself, each entry moved alone (gradcheck's differences): the value reads (A + Aᵀ)/2.
        Case("3x3 moved entry by entry", ops.cholesky, (_spd_value(3),)),
        Case("a stack of two 3x3", ops.cholesky, (np.stack([_spd_value(3), _spd_value(3)]),)),
    ],
}

CASES: dict[str, list[Case]] = {
    "add": _binary(ops.add, normal, normal),
    "sub": [*_binary(ops.sub, normal, normal),
            Case("literal minus tensor (rsub)", ops.sub, (scalar(10.0), normal(2, 3)), (False, True))],
    "mul": _binary(ops.mul, normal, normal),
    "div": [*_binary(ops.div, normal, signed),
            Case("literal over tensor", ops.div, (scalar(2.0), signed(3)), (False, True))],
    "pow": [
        *_binary(ops.power, positive, normal),
        Case("negative base, integer exponents", ops.power,
             (signed(2, 3), np.array([2.0, 3.0, -1.0])), (True, False)),
        Case("negative base, scalar 3", ops.power, (signed(4), scalar(3.0)), (True, False)),
        Case("literal base 2^x", ops.power, (scalar(2.0), normal(3)), (False, True)),
    ],
    "maximum": _binary(ops.maximum, normal, normal),
    "minimum": _binary(ops.minimum, normal, normal),
    "atan2": _binary(ops.atan2, signed, signed),
    "clip": [
        Case("broadcast bounds", ops.clip, _clip_inputs()),
        Case("scalar bounds", ops.clip, (np.array([-1.5, -0.2, 0.3, 0.8, 2.0]), scalar(-0.5), scalar(0.5))),
        Case("constant bounds", ops.clip, (normal(3, 4, scale=2.0), scalar(-0.7), scalar(0.9)), (True, False, False)),
        Case("lo > hi gives hi", ops.clip, (np.array([-2.0, 0.1, 3.0]), scalar(1.0), scalar(-1.0))),
    ],
    "where": [
        Case("matrix condition", ops.where, (_sign_pattern, normal(2, 3), normal(2, 3)), (False, True, True)),
        Case("broadcast (2,1), (1,3), scalar", ops.where,
             (np.array([[1.0], [0.0]]), normal(1, 3), normal()), (False, True, True)),
        Case("scalar condition", ops.where, (scalar(1.0), normal(3), normal(2, 3)), (False, True, True)),
        # A float tensor may be the condition (non-zero is true); it gets gradient zero, like a comparison.
        Case("differentiable condition", ops.where, (np.array([[1.5, 0.0, -2.0]]), normal(2, 3), normal(2, 3))),
    ],
    "neg": _elementwise(ops.neg, normal),
    "exp": _elementwise(ops.exp, normal),
    "log": _elementwise(ops.log, positive),
    "log2": _elementwise(ops.log2, positive),
    "log10": _elementwise(ops.log10, positive),
    "log1p": _elementwise(ops.log1p, lambda *s: uniform(-0.9, 3.0, *s)),
    "sqrt": _elementwise(ops.sqrt, positive),
    "sin": _elementwise(ops.sin, lambda *s: normal(*s, scale=2.0)),
    "cos": _elementwise(ops.cos, lambda *s: normal(*s, scale=2.0)),
    "tan": _elementwise(ops.tan, lambda *s: uniform(-1.2, 1.2, *s)),
    "asin": _elementwise(ops.asin, lambda *s: uniform(-0.9, 0.9, *s)),
    "acos": _elementwise(ops.acos, lambda *s: uniform(-0.9, 0.9, *s)),
    "atan": _elementwise(ops.atan, lambda *s: normal(*s, scale=2.0)),
    "sinh": _elementwise(ops.sinh, normal),
    "cosh": _elementwise(ops.cosh, normal),
    "tanh": _elementwise(ops.tanh, normal),
    "abs": _elementwise(ops.abs_, signed),
    "sigmoid": _elementwise(ops.sigmoid, lambda *s: normal(*s, scale=2.0)),
    "relu": _elementwise(ops.relu, signed),
    "softplus": _elementwise(ops.softplus, lambda *s: normal(*s, scale=2.0)),
    "sign": _elementwise(ops.sign, signed),
    "floor": _elementwise(ops.floor, off_jumps),
    "ceil": _elementwise(ops.ceil, off_jumps),
    "round": _elementwise(ops.round_, off_jumps),
    "sum": _reductions(ops.sum, normal),
    "mean": _reductions(ops.mean, normal),
    "prod": [
        *_reductions(ops.prod, _prod_values),
        Case("zeros, axis 1", lambda x: ops.prod(x, 1, False), (_with_zeros(),)),
        Case("zeros, axis 0, keepdims", lambda x: ops.prod(x, 0, True), (_with_zeros().T.copy(),)),
        Case("one zero, all", lambda x: ops.prod(x, None, False), (np.array([0.7, 0.0, -1.3, 1.1]),)),
        Case("two zeros, all", lambda x: ops.prod(x, None, False), (np.array([0.0, 0.9, 0.0, -1.2]),)),
    ],
    "max": _reductions(ops.max, normal),
    "min": _reductions(ops.min, normal),
    "norm": _reductions(ops.norm, normal),
    "logsumexp": _reductions(ops.logsumexp, lambda *s: normal(*s, scale=2.0)),
    "softmax": [
        Case("axis 0", lambda x: ops.softmax(x, 0), (normal(3, 4),)),
        Case("axis 1", lambda x: ops.softmax(x, 1), (normal(3, 4),)),
        Case("axis -1 of 3-D", lambda x: ops.softmax(x, -1), (normal(2, 3, 4),)),
        Case("axis 1 of 3-D", lambda x: ops.softmax(x, 1), (normal(2, 3, 4),)),
        Case("vector", lambda x: ops.softmax(x, 0), (normal(5, scale=3.0),)),
    ],
    "reshape": [
        Case("(2,3) to (3,2)", lambda x: ops.reshape(x, (3, 2)), (normal(2, 3),)),
        Case("(2,3) to (6,)", lambda x: ops.reshape(x, (6,)), (normal(2, 3),)),
        Case("(6,) to (2,-1)", lambda x: ops.reshape(x, (2, -1)), (normal(6),)),
        Case("scalar to (1,1)", lambda x: ops.reshape(x, (1, 1)), (normal(),)),
    ],
    "transpose": [
        Case("matrix .T", lambda x: ops.transpose(x, None), (normal(2, 3),)),
        Case("3-D reversed", lambda x: ops.transpose(x, None), (normal(2, 3, 4),)),
        Case("3-D (1,0,2)", lambda x: ops.transpose(x, (1, 0, 2)), (normal(2, 3, 4),)),
        Case("3-D (2,0,1)", lambda x: ops.transpose(x, (2, 0, 1)), (normal(2, 3, 4),)),
    ],
    "broadcast_to": [
        Case("(3,1) to (2,3,4)", lambda x: ops.broadcast_to(x, (2, 3, 4)), (normal(3, 1),)),
        Case("scalar to (2,3)", lambda x: ops.broadcast_to(x, (2, 3)), (normal(),)),
        Case("(4,) to (3,4)", lambda x: ops.broadcast_to(x, (3, 4)), (normal(4),)),
    ],
    "sum_to": [
        Case("(2,3,4) to (3,1)", lambda x: ops.sum_to(x, (3, 1)), (normal(2, 3, 4),)),
        Case("(2,3) to scalar", lambda x: ops.sum_to(x, ()), (normal(2, 3),)),
        Case("(3,4) to (1,4)", lambda x: ops.sum_to(x, (1, 4)), (normal(3, 4),)),
        Case("(2,3,4) to (4,)", lambda x: ops.sum_to(x, (4,)), (normal(2, 3, 4),)),
    ],
    "index": _index_cases(),
    "scatter": _scatter_cases(),
    "remainder": _remainder_cases(),
    "index_put": _index_put_cases(),
    "stack": [
        Case("two vectors", ops.stack, (normal(3), normal(3))),
        Case("three matrices", ops.stack, (normal(2, 2), normal(2, 2), normal(2, 2))),
        Case("scalars", ops.stack, (normal(), normal(), normal())),
        Case("one constant", ops.stack, (normal(3), normal(3)), (False, True)),
    ],
    "matmul": _matmul_cases(),
    "trace": [
        Case("square", ops.trace, (normal(3, 3),)),
        Case("wide", ops.trace, (normal(2, 4),)),
        Case("batched", ops.trace, (normal(2, 3, 3),)),
    ],
    "det": [
        Case("3x3", ops.det, (well_conditioned(3, 3),)),
        Case("2x2", ops.det, (well_conditioned(2, 2),)),
        Case("negative determinant", ops.det, (_det_values(),)),
        Case("batched", ops.det, (well_conditioned(2, 3, 3),)),
        Case("singular 2x2 (the adjugate)", ops.det, (np.array([[1.0, 2.0], [2.0, 4.0]]),)),
        Case("singular 3x3 of rank 2", ops.det, (np.array([[1.0, 2.0, 3.0], [2.0, -1.0, 0.5], [3.0, 1.0, 3.5]]),)),
    ],
    "inv": [
        Case("3x3", ops.inv, (well_conditioned(3, 3),)),
        Case("2x2", ops.inv, (well_conditioned(2, 2),)),
        Case("batched", ops.inv, (well_conditioned(2, 3, 3),)),
    ],
    **FUNCTION_CASES,
}


# --- The check ------------------------------------------------------------------------------------

def _value(array: np.ndarray) -> Any:
    """As the engine holds values: a NumPy scalar for shape (), else the array."""
    return array[()] if array.ndim == 0 else array


def partial_difference(fn: Callable[[list[np.ndarray]], float], arrays: Sequence[np.ndarray], i: int,
                       step: float = 1e-6) -> np.ndarray:
    """∂fn/∂arrays[i] by central differences."""
    others = [a.copy() for a in arrays]
    return central_difference(lambda x: fn([*others[:i], x, *others[i + 1:]]), arrays[i], step)


def _close(got: Any, expected: np.ndarray, what: str) -> None:
    got = np.asarray(got, dtype=np.float64)
    assert got.shape == expected.shape, f"{what}: gradient shape {got.shape}, input shape {expected.shape}"
    scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * scale, err_msg=what)


def _as_array(g: Any) -> np.ndarray:
    return np.asarray(g.value if isinstance(g, Node) else g, dtype=np.float64)


def check_case(prim: Any, case: Case) -> None:
    rng = np.random.default_rng(7)
    arrays = [np.asarray(a, dtype=np.float64) for a in case.inputs]
    wants = case.wants or (True,) * len(arrays)
    chosen = [i for i, want in enumerate(wants) if want]

    def record(point: Sequence[np.ndarray]) -> tuple[Node, list[Node]]:
        nodes = [leaf(_value(a.copy()), requires_grad=want) for a, want in zip(point, wants, strict=True)]
        return case.build(*nodes), [nodes[i] for i in chosen]

    out, targets = record(arrays)
    assert out.op is prim, f"{case.label}: the case records {out.op}, not {prim.name}"
    assert out.requires_grad, f"{case.label}: the output does not require grad"
    seed = np.asarray(rng.standard_normal(np.shape(out.value)))

    def seeded_output(point: list[np.ndarray]) -> float:
        nodes = [leaf(_value(a.copy()), requires_grad=False) for a in point]
        return float(np.sum(seed * np.asarray(case.build(*nodes).value)))

    # First order, numeric backward: seedᵀ·J against finite differences of seedᵀ·f.
    numeric = backward(out, _value(seed), targets)
    expected_first = {i: partial_difference(seeded_output, arrays, i) for i in chosen}
    for i, target in zip(chosen, targets, strict=True):
        got = numeric.get(target, np.zeros(arrays[i].shape))
        _close(got, expected_first[i], f"{prim.name} [{case.label}] first order, input {i}")

    # The differentiable backward gives the same numbers, as graph nodes.
    recorded = backward(out, constant(_value(seed)), targets, create_graph=True)
    for i, target in zip(chosen, targets, strict=True):
        got = _as_array(recorded[target]) if target in recorded else np.zeros(arrays[i].shape)
        _close(got, expected_first[i], f"{prim.name} [{case.label}] first order (create_graph), input {i}")

    # Second order: differentiate s = Σ vᵢ·gradᵢ; compare with finite differences of the numeric gradient.
    directions = {i: rng.standard_normal(arrays[i].shape) for i in chosen}
    total: Node | None = None
    for i, target in zip(chosen, targets, strict=True):
        if target in recorded:
            term = ops.sum(ops.mul(constant(_value(directions[i])), recorded[target]))
            total = term if total is None else ops.add(total, term)
    assert total is not None
    second = backward(total, np.float64(1.0), targets)

    def directional_gradient(point: list[np.ndarray]) -> float:
        at_out, at_targets = record(point)
        grads = backward(at_out, _value(seed), at_targets)
        return float(sum(np.sum(directions[i] * _as_array(grads.get(t, 0.0)))
                         for i, t in zip(chosen, at_targets, strict=True)))

    for i, target in zip(chosen, targets, strict=True):
        got = second.get(target, np.zeros(arrays[i].shape))
        expected = partial_difference(directional_gradient, arrays, i)
        _close(got, expected, f"{prim.name} [{case.label}] second order, input {i}")


DIFFERENTIABLE = [name for name, prim in ops.PRIMITIVES.items() if prim.differentiable]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_rule_matches_finite_differences(name: str) -> None:
    prim = ops.PRIMITIVES[name]
    assert prim in rules.RULES, f"primitive {name} has no entry in rules.RULES"
    assert name in CASES, f"primitive {name} has no test inputs: add an entry to CASES in {__file__}"
    cases = CASES[name]
    assert len(cases) >= 2, f"{name}: check at least two points"
    if prim.broadcasts:
        assert any(len({a.shape for a in case.inputs}) > 1 for case in cases), \
            f"{name} broadcasts: add a case with inputs of different shapes"
    failures = []
    for case in cases:
        try:
            check_case(prim, case)
        except AssertionError as exc:
            failures.append(str(exc).strip())
        except Exception as exc:  # a rule that crashes is as wrong as one that gives wrong numbers
            failures.append(f"{name} [{case.label}]: {type(exc).__name__}: {exc}")
    assert not failures, "\n\n".join(failures)


def test_every_case_names_a_primitive() -> None:
    """A stale entry (a primitive renamed or removed) is a mistake in this table."""
    assert set(CASES) <= set(ops.PRIMITIVES), set(CASES) - set(ops.PRIMITIVES)


def _one_row_at_a_time(out: Node, targets: list[Node]) -> list[np.ndarray]:
    """The Jacobian as a loop of single VJPs, one per output entry (the unbatched reference)."""
    shape = np.shape(out.value)
    rows: list[list[np.ndarray]] = [[] for _ in targets]
    for k in np.ndindex(shape):
        seed = np.zeros(shape)
        seed[k] = 1.0
        found = backward(out, _value(seed), targets)
        for row, target in zip(rows, targets, strict=True):
            row.append(np.asarray(found.get(target, np.zeros(np.shape(target.value))), dtype=np.float64))
    return [np.reshape(np.stack(row), shape + np.shape(t.value)) for row, t in zip(rows, targets, strict=True)]


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_batched_jacobians_and_hessians_match_one_pass_per_row(name: str) -> None:
    """Every rule under batching.namespace (reverse and forward mode) gives the loop's numbers."""
    failures = []
    for case in CASES[name]:
        wants = case.wants or (True,) * len(case.inputs)
        nodes = [leaf(_value(np.asarray(a, dtype=np.float64)), requires_grad=w)
                 for a, w in zip(case.inputs, wants, strict=True)]
        targets = [n for n, w in zip(nodes, wants, strict=True) if w]
        out = case.build(*nodes)
        expected = _one_row_at_a_time(out, targets)
        weights = constant(_value(np.random.default_rng(3).standard_normal(np.shape(out.value))))
        scalar = ops.sum(ops.mul(weights, out))
        gradient = backward(scalar, constant(np.float64(1.0)), targets, create_graph=True)
        try:
            for mode, got in (("rev", jacobian_rev(out, targets)), ("fwd", jacobian_fwd(out, targets))):
                for g, e in zip(got, expected, strict=True):
                    _close(g, e, f"{name} [{case.label}] {mode}-mode Jacobian")
            hessian_rows = hessian(scalar, targets)
            for i, target in enumerate(targets):
                if target not in gradient or not gradient[target].requires_grad:
                    continue
                for j, reference in enumerate(_one_row_at_a_time(gradient[target], targets)):
                    _close(hessian_rows[i][j], reference, f"{name} [{case.label}] Hessian block {i},{j}")
        except AssertionError as exc:
            failures.append(str(exc).strip())
        except Exception as exc:
            failures.append(f"{name} [{case.label}]: {type(exc).__name__}: {exc}")
    assert not failures, "\n\n".join(failures)
