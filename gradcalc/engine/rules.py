"""How derivative rules are written, and the helpers that several primitives' rules share.

A primitive's rules are part of its record (primitives.py): one vector-Jacobian
product per input, `rule(ns, g, ans, *inputs, *params)`, which returns the
gradient with respect to that input, given `g`, the gradient with respect to
the output `ans`. Rules are written with `ns`'s functions and Python's
operators only, so the same rule runs on raw arrays (`ops.numeric`: a
first-order backward pass), records graph nodes (`ops`: a differentiable
backward pass, which gives Hessians, forward mode and symbolic derivatives)
or carries a stack of seeds at once (`batching.namespace`: Jacobians). The
chain rule is written nowhere else.

Elementwise primitives that broadcast return gradients of the output's shape;
autodiff.backward sums them back to each input's shape (unbroadcasting).
A `None` rule means the input gets no gradient (the condition of `where`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import backend as B
from .graph import Node, Primitive

if TYPE_CHECKING:
    from .graph import Rule, Rules


def _kept(shape: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    """The reduced shape with the reduced axes kept as 1s."""
    if axis is None:
        return (1,) * len(shape)
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def expand(ns: Any, g: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """A reduction's output gradient, broadcast back over the reduced axes."""
    if not keepdims:
        g = ns.reshape(g, _kept(x.shape, axis))
    return ns.broadcast_to(g, x.shape)


def count(x: Any, axis: Any) -> int:
    """How many entries a reduction over `axis` takes in."""
    if axis is None:
        return math.prod(x.shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    return math.prod(x.shape[a] for a in axes)


def prod_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    return expand(ns, g, x, axis, keepdims) * _product_of_others(ns, ans, x, axis, keepdims)


def _product_of_others(ns: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    """∂prod/∂x_i: the product of the other entries of x_i's slice.

    Without zeros it is prod/x_i. With zeros, ans/x is 0/0, so each entry's product of
    the others is taken directly, masking it out with an identity matrix: n² work for
    slices of n entries, but exact and differentiable again (Hessians, diff).
    """
    values = x.value if isinstance(x, Node) else x
    if not bool(B.to_host(values == 0).any()):
        return expand(ns, ans, x, axis, keepdims) / x
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
    return ns.transpose(others, inverse_permutation(order, x.ndim)) if order != tuple(range(x.ndim)) else others


def extremum_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    # Ties share the gradient evenly, as PyTorch's max() and amax() do.
    hit = ns.eq(x, expand(ns, ans, x, axis, keepdims))
    return expand(ns, g, x, axis, keepdims) * hit / expand(ns, ns.sum(hit, axis, True), x, axis, True)


def norm_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: Any, keepdims: bool) -> Any:
    # Zero at a zero vector (PyTorch's subgradient choice).
    full = expand(ns, ans, x, axis, keepdims)
    return expand(ns, g, x, axis, keepdims) * ns.where(ns.eq(full, 0), 0, x / ns.where(ns.eq(full, 0), 1, full))


def swap(ns: Any, x: Any) -> Any:
    """Swap the last two axes."""
    axes = list(range(x.ndim))
    axes[-2], axes[-1] = axes[-1], axes[-2]
    return ns.transpose(x, tuple(axes))


def _reshaped(ns: Any, x: Any, shape: tuple[int, ...]) -> Any:
    return x if x.shape == shape else ns.reshape(x, shape)


def _summed_to(ns: Any, x: Any, shape: tuple[int, ...]) -> Any:
    return x if x.shape == shape else ns.sum_to(x, shape)


def matmul_vjp(which: int) -> Rule:
    def rule(ns: Any, g: Any, ans: Any, x: Any, y: Any) -> Any:
        if x.ndim == 1 and y.ndim == 1:  # a dot product: g·y and g·x (diff prints them so, not via 1×1 matrices)
            return g * (y if which == 0 else x)
        # Promote 1-D operands to matrices as NumPy's matmul does, then undo it.
        x2 = _reshaped(ns, x, (1, x.shape[0])) if x.ndim == 1 else x
        y2 = _reshaped(ns, y, (y.shape[0], 1)) if y.ndim == 1 else y
        batch = tuple(B.broadcast_shapes(x2.shape[:-2], y2.shape[:-2]))
        g2 = _reshaped(ns, g, batch + (x2.shape[-2], y2.shape[-1]))
        if which == 0:
            return _reshaped(ns, _summed_to(ns, g2 @ swap(ns, y2), x2.shape), x.shape)
        return _reshaped(ns, _summed_to(ns, swap(ns, x2) @ g2, y2.shape), y.shape)

    return rule


def trace_vjp(ns: Any, g: Any, ans: Any, x: Any) -> Any:
    return ns.reshape(g, g.shape + (1, 1)) * ns.eye(x.shape[-2], x.shape[-1])


def index_vjp(ns: Any, g: Any, ans: Any, x: Any, key: tuple) -> Any:
    return ns.scatter(g, key, x.shape)


def inverse_permutation(axes: tuple[int, ...] | None, ndim: int) -> tuple[int, ...] | None:
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


# Piecewise constant (sign, floor): gradient zero wherever it exists, as in PyTorch.
piecewise_constant: Rule = lambda ns, g, ans, x: ns.zeros_like(g)


def pow_exponent(ns: Any, g: Any, ans: Any, x: Any, y: Any) -> Any:
    """d/dy x^y = x^y log x. Where x = 0 and y ≥ 0 it is 0 (PyTorch's choice, avoiding 0 · -inf); where
    x = 0 and y < 0, x^y log x is ∓inf, as PyTorch has it."""
    zero = ns.logical_and(ns.eq(x, 0), ns.ge(y, 0))
    return ns.where(zero, 0, g * ans * ns.log(ns.where(zero, 1, x)))



# --- Rules of issue 25's functions (kept apart for merging) ----------------------------------------

class EachPart:
    """concatenate's rules: part i gets its slice of the gradient along the axis (the last argument)."""

    def __getitem__(self, i: int) -> Rule:
        def rule(ns: Any, g: Any, ans: Any, *args: Any) -> Any:
            *parts, axis = args
            start = sum(p.shape[axis] for p in parts[:i])
            return ns.index(g, (slice(None),) * axis + (slice(start, start + parts[i].shape[axis]),))

        return rule



class EachOperand:
    """einsum's rules: operand i gets the einsum of the output gradient with the other operands, broadcast
    along the letters that only it has (summed out by it alone). The spec is the last argument."""

    def __getitem__(self, i: int) -> Rule:
        def rule(ns: Any, g: Any, ans: Any, *args: Any) -> Any:
            *operands, spec = args
            inputs, output = spec.split("->")
            letters = inputs.split(",")
            target = letters[i]
            others = [s for k, s in enumerate(letters) if k != i]
            reached = set(output).union(*others)
            kept = "".join(c for c in target if c in reached)
            rest = [x for k, x in enumerate(operands) if k != i]
            partial = ns.einsum(g, *rest, ",".join([output, *others]) + "->" + kept)
            if kept == target:
                return partial
            x = operands[i]
            partial = ns.reshape(partial, tuple(n if c in reached else 1 for c, n in zip(target, x.shape, strict=True)))
            return ns.broadcast_to(partial, x.shape)

        return rule

class EachLayer:
    """stack_axis's rules: part i gets the gradient's entry i along the new axis (the last argument)."""

    def __getitem__(self, i: int) -> Rule:
        def rule(ns: Any, g: Any, ans: Any, *args: Any) -> Any:
            return ns.index(g, (slice(None),) * args[-1] + (i,))

        return rule


def _moved_last(ns: Any, x: Any, axis: int) -> tuple[Any, tuple[int, ...] | None]:
    """x with `axis` moved last, and the permutation that did it (None: it was last already)."""
    if axis == x.ndim - 1:
        return x, None
    order = tuple(a for a in range(x.ndim) if a != axis) + (axis,)
    return ns.transpose(x, order), order


def cumprod_vjp(ns: Any, g: Any, ans: Any, x: Any, axis: int) -> Any:
    """Without zeros, the reversed cumulative sum of g·ans, over x. With zeros (0/0 there), each
    ∂ans_j/∂x_i = ∏_{k≤j, k≠i} x_k for i ≤ j directly: n² work per slice, exact and differentiable again."""
    flipped = (axis,)
    values = x.value if isinstance(x, Node) else x
    if not bool(B.to_host(values == 0).any()):
        return ns.flip(ns.cumsum(ns.flip(g * ans, flipped), axis), flipped) / x
    n = x.shape[axis]
    moved, order = _moved_last(ns, x, axis)
    g_moved, _ = _moved_last(ns, g, axis)
    rows = ns.reshape(moved, moved.shape[:-1] + (1, n))
    grid = ns.broadcast_to(rows, moved.shape[:-1] + (n, n))  # [..., i, j] = x_j
    identity = ns.eye(n, n)
    partial = ns.cumprod(ns.where(identity, 1, grid), len(moved.shape))  # x_i replaced by 1 in row i
    upper = ns.cumsum(identity, 1)  # [i, j] = 1 where j ≥ i
    seeds = ns.reshape(g_moved, g_moved.shape[:-1] + (1, n))
    total = ns.sum(partial * upper * seeds, len(moved.shape), False)
    return total if order is None else ns.transpose(total, inverse_permutation(order, x.ndim))


def solve_matrix_vjp(ns: Any, gb: Any, ans: Any) -> Any:
    """solve(A, b)'s gradient for A, given b's (gb = A^-T g): -gb xᵀ, x the solution."""
    if ans.ndim == 1:
        return -(ns.reshape(gb, (gb.shape[0], 1)) * ns.reshape(ans, (1, ans.shape[0])))
    return -(gb @ swap(ns, ans))


def cholesky_vjp(ns: Any, g: Any, ans: Any, x: Any) -> Any:
    """PyTorch's: L^-T Φ(Lᵀ ḡ) L^-1, symmetrized (Φ: the lower triangle, its diagonal halved)."""
    n = x.shape[-1]
    identity = ns.eye(n, n)
    lower = ns.cumsum(identity, 0)  # [i, j] = 1 where j ≤ i
    product = swap(ns, ans) @ (g * lower)
    phi = product * lower - 0.5 * product * identity
    inverse = ns.inv(ans)
    half = swap(ns, inverse) @ phi @ inverse
    return 0.5 * (half + swap(ns, half))


def det_vjp(ns: Any, g: Any, ans: Any, x: Any) -> Any:
    """d det(X) = det(X) tr(X^-1 dX): the cofactor matrix det(X) X^-T, or, where X is singular (no inverse),
    the cofactors themselves (the adjugate's transpose: [[4, -2], [-2, 1]] for [[1, 2], [2, 4]])."""
    values = x.value if isinstance(x, Node) else x
    values = getattr(values, "stack", values)  # a batch of points (batching.Batched): the cofactors if any is singular
    with B.errstate():
        spread = B.xp.linalg.svd(values, compute_uv=False)  # singular values, largest first
        singular = bool(B.to_host(~(spread[..., -1] > 1e-12 * spread[..., 0])).any())
    if not singular:
        return ns.reshape(g * ans, g.shape + (1, 1)) * swap(ns, ns.inv(x))
    return ns.reshape(g, g.shape + (1, 1)) * cofactors(ns, x)


def cofactors(ns: Any, x: Any) -> Any:
    """Each entry's cofactor, (-1)^(i+j) times the determinant of x without row i and column j."""
    n = x.shape[-1]
    if n == 1:
        return ns.reshape(ns.zeros_like(x), x.shape) + 1.0
    identity = B.xp.eye(n, dtype=B.dtype)
    keep = [identity[[k for k in range(n) if k != i]] for i in range(n)]  # (n-1)×n: drops row i
    entries = [(-1.0) ** (i + j) * ns.det(keep[i] @ x @ keep[j].T) for i in range(n) for j in range(n)]
    table = ns.reshape(ns.stack(*entries), (n, n) + x.shape[:-2])
    return table if x.ndim == 2 else ns.transpose(table, tuple(range(2, x.ndim)) + (0, 1))

# Each differentiable primitive's rules as its record declares them, filled as primitives.py defines
# them: what a test that patches a primitive's `vjps` puts back and compares with.
RULES: dict[Primitive, Rules] = {}
