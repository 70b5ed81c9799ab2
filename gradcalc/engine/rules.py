"""The derivative table: one vector-Jacobian product per primitive input.

Each rule is `rule(ns, g, ans, *inputs, *params)` and returns the gradient
with respect to one input, given `g`, the gradient with respect to the output
`ans`. Rules are written with `ns`'s functions and Python's operators only, so
the same rule runs on raw arrays (`ops.numeric`: a first-order backward pass)
or records graph nodes (`ops`: a differentiable backward pass, which gives
Hessians and symbolic derivatives). The chain rule is written nowhere else.

Elementwise primitives that broadcast return gradients of the output's shape;
autodiff.backward sums them back to each input's shape (unbroadcasting).
A `None` entry means the input gets no gradient (the condition of `where`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from . import backend as B
from . import ops
from .graph import Node, Primitive

Rule = Callable[..., Any]


def _kept(shape: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    """The reduced shape with the reduced axes kept as 1s."""
    if axis is None:
        return (1,) * len(shape)
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _expand(ns: Any, g: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """A reduction's output gradient, broadcast back over the reduced axes."""
    if not keepdims:
        g = ns.reshape(g, _kept(x.shape, axis))
    return ns.broadcast_to(g, x.shape)


def _count(x: Any, axis: Any) -> int:
    if axis is None:
        return math.prod(x.shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(x.shape[a] for a in axes)


def _prod_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    return _expand(ns, g, x, axis, keepdims) * _product_of_others(ns, ans, x, axis, keepdims)


def _product_of_others(ns: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """∂prod/∂x_i: the product of the other entries of x_i's slice.

    Without zeros it is prod/x_i. With zeros, ans/x is 0/0, so each entry's product of
    the others is taken directly, masking it out with an identity matrix: n² work for
    slices of n entries, but exact and differentiable again (Hessians, diff).
    """
    values = x.value if isinstance(x, Node) else x
    if not bool(B.to_host(values == 0).any()):
        return _expand(ns, ans, x, axis, keepdims) / x
    reduced = tuple(range(x.ndim)) if axis is None else tuple(
        sorted(a % x.ndim for a in (axis if isinstance(axis, tuple) else (axis,))))
    kept = tuple(a for a in range(x.ndim) if a not in reduced)
    order = kept + reduced
    moved = ns.transpose(x, order) if order != tuple(range(x.ndim)) else x
    n = math.prod(x.shape[a] for a in reduced)
    rows = ns.reshape(moved, tuple(x.shape[a] for a in kept) + (1, n))
    grid = ns.broadcast_to(rows, rows.shape[:-2] + (n, n))
    others = ns.prod(ns.where(ns.eye(n, n), 1, grid), -1, False)  # row i: x with x_i replaced by 1
    others = ns.reshape(others, moved.shape)
    return ns.transpose(others, _inverse_permutation(order, x.ndim)) if order != tuple(range(x.ndim)) else others


def _extremum_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    # Ties share the gradient evenly, as PyTorch's max() and amax() do.
    hit = ns.eq(x, _expand(ns, ans, x, axis, keepdims))
    return _expand(ns, g, x, axis, keepdims) * hit / _expand(ns, ns.sum(hit, axis, True), x, axis, True)


def _norm_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    # Zero at a zero vector (PyTorch's subgradient choice).
    full = _expand(ns, ans, x, axis, keepdims)
    return _expand(ns, g, x, axis, keepdims) * ns.where(ns.eq(full, 0), 0, x / ns.where(ns.eq(full, 0), 1, full))


def _swap(ns: Any, x: Any) -> Any:
    """Swap the last two axes."""
    axes = list(range(x.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return ns.transpose(x, tuple(axes))


def _reshaped(ns: Any, x: Any, shape: tuple[int, ...]) -> Any:
    return x if x.shape == shape else ns.reshape(x, shape)


def _summed_to(ns: Any, x: Any, shape: tuple[int, ...]) -> Any:
    return x if x.shape == shape else ns.sum_to(x, shape)


def _matmul_vjp(which: int) -> Rule:
    def rule(ns: Any, g: Any, ans: Any, x: Any, y: Any) -> Any:
        if x.ndim == 1 and y.ndim == 1:  # a dot product: g·y and g·x (diff prints them so, not via 1×1 matrices)
            return g * (y if which == 0 else x)
        # Promote 1-D operands to matrices as NumPy's matmul does, then undo it.
        x2 = _reshaped(ns, x, (1, x.shape[0])) if x.ndim == 1 else x
        y2 = _reshaped(ns, y, (y.shape[0], 1)) if y.ndim == 1 else y
        batch = tuple(B.broadcast_shapes(x2.shape[:-2], y2.shape[:-2]))
        g2 = _reshaped(ns, g, batch + (x2.shape[-2], y2.shape[-1]))
        if which == 0:
            return _reshaped(ns, _summed_to(ns, g2 @ _swap(ns, y2), x2.shape), x.shape)
        return _reshaped(ns, _summed_to(ns, _swap(ns, x2) @ g2, y2.shape), y.shape)

    return rule


def _trace_vjp(ns: Any, g: Any, ans: Any, x: Any) -> Any:
    return ns.reshape(g, g.shape + (1, 1)) * ns.eye(x.shape[-2], x.shape[-1])


def _index_vjp(ns: Any, g: Any, ans: Any, x: Any, key: tuple) -> Any:
    return ns.scatter(g, key, x.shape)


def _inverse_permutation(axes: tuple[int, ...] | None, ndim: int) -> tuple[int, ...] | None:
    if axes is None:
        return None
    inverse = [0] * ndim
    for i, a in enumerate(axes):
        inverse[a] = i
    return tuple(inverse)


class EachInput:
    """The rule of a primitive with any number of inputs: input i gets `rule(..., i)`."""

    def __init__(self, rule: Callable[..., Any]) -> None:
        self.rule = rule

    def __getitem__(self, i: int) -> Rule:
        return lambda ns, g, ans, *args: self.rule(ns, g, ans, i)


_zero: Rule = lambda ns, g, ans, x: ns.zeros_like(g)
_half = 0.5


def _pow_exponent(ns: Any, g: Any, ans: Any, x: Any, y: Any) -> Any:
    """d/dy x^y = x^y log x. Where x = 0 and y ≥ 0 it is 0 (PyTorch's choice, avoiding 0 · -inf); where
    x = 0 and y < 0, x^y log x is ∓inf, as PyTorch has it."""
    zero = ns.logical_and(ns.eq(x, 0), ns.ge(y, 0))
    return ns.where(zero, 0, g * ans * ns.log(ns.where(zero, 1, x)))


RULES: dict[Primitive, Any] = {
    ops.ADD: (lambda ns, g, ans, x, y: g,
              lambda ns, g, ans, x, y: g),
    ops.SUB: (lambda ns, g, ans, x, y: g,
              lambda ns, g, ans, x, y: -g),
    ops.MUL: (lambda ns, g, ans, x, y: g * y,
              lambda ns, g, ans, x, y: g * x),
    ops.DIV: (lambda ns, g, ans, x, y: g / y,
              lambda ns, g, ans, x, y: -g * ans / y),
    # 0 where y = 0 (d/dx x^0 = 0, also at x = 0, where x^(y-1) is infinite).
    ops.POW: (lambda ns, g, ans, x, y: ns.where(ns.eq(y, 0), 0, g * y * x ** (y - 1)),
              _pow_exponent),
    ops.MAXIMUM: (lambda ns, g, ans, x, y: g * (ns.gt(x, y) + _half * ns.eq(x, y)),
                  lambda ns, g, ans, x, y: g * (ns.lt(x, y) + _half * ns.eq(x, y))),
    ops.MINIMUM: (lambda ns, g, ans, x, y: g * (ns.lt(x, y) + _half * ns.eq(x, y)),
                  lambda ns, g, ans, x, y: g * (ns.gt(x, y) + _half * ns.eq(x, y))),
    # At (0, 0) these are NaN, where PyTorch has 0: a guard there would print in every `diff` of atan2.
    ops.ATAN2: (lambda ns, g, ans, y, x: g * x / (x * x + y * y),
                lambda ns, g, ans, y, x: -g * y / (x * x + y * y)),
    ops.CLIP: (lambda ns, g, ans, x, lo, hi: g * ns.ge(x, lo) * ns.le(x, hi),
               lambda ns, g, ans, x, lo, hi: g * ns.lt(x, lo) * ns.le(lo, hi),
               lambda ns, g, ans, x, lo, hi: g * ns.logical_or(ns.gt(x, hi), ns.gt(lo, hi))),
    ops.WHERE: (None,
                lambda ns, g, ans, c, x, y: ns.where(c, g, 0),
                lambda ns, g, ans, c, x, y: ns.where(c, 0, g)),
    ops.NEG: (lambda ns, g, ans, x: -g,),
    ops.EXP: (lambda ns, g, ans, x: g * ans,),
    ops.LOG: (lambda ns, g, ans, x: g / x,),
    ops.LOG2: (lambda ns, g, ans, x: g / (x * math.log(2)),),
    ops.LOG10: (lambda ns, g, ans, x: g / (x * math.log(10)),),
    ops.SQRT: (lambda ns, g, ans, x: g / (2 * ans),),
    ops.SIN: (lambda ns, g, ans, x: g * ns.cos(x),),
    ops.COS: (lambda ns, g, ans, x: -g * ns.sin(x),),
    ops.TAN: (lambda ns, g, ans, x: g * (1 + ans * ans),),
    ops.ASIN: (lambda ns, g, ans, x: g / ns.sqrt(1 - x * x),),
    ops.ACOS: (lambda ns, g, ans, x: -g / ns.sqrt(1 - x * x),),
    ops.ATAN: (lambda ns, g, ans, x: g / (1 + x * x),),
    ops.SINH: (lambda ns, g, ans, x: g * ns.cosh(x),),
    ops.COSH: (lambda ns, g, ans, x: g * ns.sinh(x),),
    ops.TANH: (lambda ns, g, ans, x: g * (1 - ans * ans),),
    ops.ABS: (lambda ns, g, ans, x: g * ns.sign(x),),
    ops.SIGMOID: (lambda ns, g, ans, x: g * ans * (1 - ans),),
    ops.RELU: (lambda ns, g, ans, x: g * ns.gt(x, 0),),
    ops.SOFTPLUS: (lambda ns, g, ans, x: g * ns.sigmoid(x),),
    ops.SIGN: (_zero,),
    ops.FLOOR: (_zero,),
    ops.CEIL: (_zero,),
    ops.ROUND: (_zero,),
    ops.SUM: (lambda ns, g, ans, x, axis, keepdims: _expand(ns, g, x, axis, keepdims),),
    ops.MEAN: (lambda ns, g, ans, x, axis, keepdims: _expand(ns, g, x, axis, keepdims) / _count(x, axis),),
    ops.PROD: (_prod_vjp,),
    ops.MAX: (_extremum_vjp,),
    ops.MIN: (_extremum_vjp,),
    ops.NORM: (_norm_vjp,),
    ops.LOGSUMEXP: (lambda ns, g, ans, x, axis, keepdims:
                    _expand(ns, g, x, axis, keepdims) * ns.exp(x - _expand(ns, ans, x, axis, keepdims)),),
    ops.SOFTMAX: (lambda ns, g, ans, x, axis: ans * (g - ns.sum(g * ans, axis, True)),),
    ops.RESHAPE: (lambda ns, g, ans, x, shape: ns.reshape(g, x.shape),),
    ops.TRANSPOSE: (lambda ns, g, ans, x, axes: ns.transpose(g, _inverse_permutation(axes, x.ndim)),),
    ops.BROADCAST_TO: (lambda ns, g, ans, x, shape: ns.sum_to(g, x.shape),),
    ops.SUM_TO: (lambda ns, g, ans, x, shape: ns.broadcast_to(g, x.shape),),
    ops.INDEX: (_index_vjp,),
    ops.SCATTER: (lambda ns, g, ans, x, key, shape: ns.index(g, key),),
    ops.STACK: EachInput(lambda ns, g, ans, i: ns.index(g, (i,))),
    ops.MATMUL: (_matmul_vjp(0), _matmul_vjp(1)),
    ops.TRACE: (_trace_vjp,),
    # d det(X) = det(X) tr(X^-1 dX); d X^-1 = -X^-1 dX X^-1.
    ops.DET: (lambda ns, g, ans, x: ns.reshape(g * ans, g.shape + (1, 1)) * _swap(ns, ns.inv(x)),),
    ops.INV: (lambda ns, g, ans, x: -(_swap(ns, ans) @ g @ _swap(ns, ans)),),
}


# What the rules above read besides shapes: (input positions, whether the output), so the
# forward pass can free temporaries no rule needs. Unlisted primitives keep everything.
READS: dict[Primitive, tuple[tuple[int, ...], bool]] = {
    ops.ADD: ((), False), ops.SUB: ((), False), ops.NEG: ((), False),
    ops.MUL: ((0, 1), False), ops.DIV: ((1,), True),
    ops.EXP: ((), True), ops.TANH: ((), True), ops.SIGMOID: ((), True), ops.SQRT: ((), True), ops.TAN: ((), True),
    ops.SIN: ((0,), False), ops.COS: ((0,), False), ops.LOG: ((0,), False), ops.ABS: ((0,), False),
    ops.RELU: ((0,), False), ops.SOFTPLUS: ((0,), False), ops.ATAN: ((0,), False),
    ops.SINH: ((0,), False), ops.COSH: ((0,), False), ops.ASIN: ((0,), False), ops.ACOS: ((0,), False),
    ops.LOG2: ((0,), False), ops.LOG10: ((0,), False),
    ops.SIGN: ((), False), ops.FLOOR: ((), False), ops.CEIL: ((), False), ops.ROUND: ((), False),
    ops.SUM: ((), False), ops.MEAN: ((), False), ops.RESHAPE: ((), False), ops.TRANSPOSE: ((), False),
    ops.BROADCAST_TO: ((), False), ops.SUM_TO: ((), False), ops.INDEX: ((), False), ops.SCATTER: ((), False),
    ops.MATMUL: ((0, 1), False), ops.TRACE: ((), False),
}


def install() -> None:
    """Attach each rule to its primitive (and fail loudly if a primitive has none)."""
    for prim in ops.PRIMITIVES.values():
        if not prim.differentiable:
            continue
        if prim not in RULES:
            raise RuntimeError(f"primitive {prim.name} has no derivative rule")
        prim.vjps = RULES[prim]
        if prim in READS:
            inputs, output = READS[prim]
            prim.reads_inputs, prim.reads_output = frozenset(inputs), output
            prim.frees_inputs = prim.n_inputs is None or len(prim.reads_inputs) < prim.n_inputs


install()
