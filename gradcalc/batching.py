"""Batched cotangents: run every derivative rule on a stack of seeds at once.

A Jacobian is the VJP mapped over a basis of seeds (HIPS autograd's `jacobian`,
JAX's `vmap(vjp)`). Instead of a Python loop of backward passes, one pass carries
a `Batched` gradient: an array with one extra leading axis, one entry per seed.
The rules in rules.py are not touched: they run on `namespace`, whose functions
are ops.numeric's, taught to keep the leading axis out of the way (axes shift by
one, shapes gain a prefix, broadcasting aligns logical shapes). This is the one
place that knows about the batch axis.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from . import backend as B
from . import ops


class Batched:
    """A stack of B arrays of one logical shape: `stack.shape == (B,) + shape`."""

    __slots__ = ("stack",)
    __array_ufunc__ = None  # NumPy defers to these operators

    def __init__(self, stack: Any) -> None:
        self.stack = stack

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.stack.shape[1:])

    @property
    def ndim(self) -> int:
        return self.stack.ndim - 1

    @property
    def dtype(self) -> Any:
        return self.stack.dtype

    def __add__(self, other: Any) -> Batched:
        return _elementwise(ops.ADD.forward)(self, other)

    def __radd__(self, other: Any) -> Batched:
        return _elementwise(ops.ADD.forward)(other, self)

    def __sub__(self, other: Any) -> Batched:
        return _elementwise(ops.SUB.forward)(self, other)

    def __rsub__(self, other: Any) -> Batched:
        return _elementwise(ops.SUB.forward)(other, self)

    def __mul__(self, other: Any) -> Batched:
        return _elementwise(ops.MUL.forward)(self, other)

    def __rmul__(self, other: Any) -> Batched:
        return _elementwise(ops.MUL.forward)(other, self)

    def __truediv__(self, other: Any) -> Batched:
        return _elementwise(ops.DIV.forward)(self, other)

    def __rtruediv__(self, other: Any) -> Batched:
        return _elementwise(ops.DIV.forward)(other, self)

    def __pow__(self, other: Any) -> Batched:
        return _elementwise(ops.POW.forward)(self, other)

    def __neg__(self) -> Batched:
        return Batched(-self.stack)

    def __matmul__(self, other: Any) -> Batched:
        return _matmul(self, other)

    def __rmatmul__(self, other: Any) -> Batched:
        return _matmul(other, self)

    def __iadd__(self, other: Any) -> Batched:
        self.stack += _aligned(other, self.ndim)
        return self


def _aligned(value: Any, ndim: int) -> Any:
    """The raw array of `value`, shaped to broadcast against a batch of logical rank `ndim`."""
    if isinstance(value, Batched):
        stack = value.stack
        missing = ndim - value.ndim
        if missing > 0:  # insert the broadcast axes after the batch axis, not before it
            stack = stack.reshape(stack.shape[:1] + (1,) * missing + stack.shape[1:])
        return stack
    return value


def _elementwise(forward: Callable[..., Any]) -> Callable[..., Any]:
    def apply(*args: Any) -> Any:
        if not any(isinstance(a, Batched) for a in args):
            return forward(*args)
        ndim = max(getattr(a, "ndim", 0) for a in args)
        return Batched(forward(*[_aligned(a, ndim) for a in args]))

    return apply


def _axes(axis: Any, ndim: int) -> Any:
    """A logical axis (or axes, or None for all) as axes of the stack."""
    if axis is None:
        return tuple(range(1, ndim + 1))
    if isinstance(axis, tuple):
        return tuple(a % ndim + 1 for a in axis)
    return axis % ndim + 1


def _reduction(forward: Callable[..., Any]) -> Callable[..., Any]:
    def reduce(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
        if not isinstance(x, Batched):
            return forward(x, axis, keepdims)
        if x.ndim == 0:
            return x
        return Batched(forward(x.stack, _axes(axis, x.ndim), keepdims))

    return reduce


def _reshape(x: Any, shape: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return ops.RESHAPE.forward(x, shape)
    return Batched(B.xp.reshape(x.stack, x.stack.shape[:1] + tuple(shape)))


def _transpose(x: Any, axes: tuple[int, ...] | None) -> Any:
    if not isinstance(x, Batched):
        return ops.TRANSPOSE.forward(x, axes)
    order = tuple(reversed(range(x.ndim))) if axes is None else axes
    return Batched(B.xp.transpose(x.stack, (0, *(a + 1 for a in order))))


def _broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return ops.BROADCAST_TO.forward(x, shape)
    stack = _aligned(x, len(shape))
    return Batched(B.xp.broadcast_to(stack, stack.shape[:1] + tuple(shape)))


def _sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return ops.SUM_TO.forward(x, shape)
    if x.shape == tuple(shape):
        return x
    lead = x.ndim - len(shape)
    axes = tuple(1 + i for i in range(lead)) + tuple(
        1 + lead + i for i, n in enumerate(shape) if n == 1 and x.shape[lead + i] != 1)
    total = B.xp.sum(x.stack, axis=axes, keepdims=True)
    return Batched(B.xp.reshape(total, x.stack.shape[:1] + tuple(shape)))


def _index(x: Any, key: tuple) -> Any:
    if not isinstance(x, Batched):
        return ops.INDEX.forward(x, key)
    return Batched(x.stack[(slice(None), *key)])


def _scatter(g: Any, key: tuple, shape: tuple[int, ...]) -> Any:
    if not isinstance(g, Batched):
        return ops.SCATTER.forward(g, key, shape)
    out = B.xp.zeros(g.stack.shape[:1] + tuple(shape), dtype=g.dtype)
    out[(slice(None), *key)] = g.stack
    return Batched(out)


def _softmax(x: Any, axis: int) -> Any:
    if not isinstance(x, Batched):
        return ops.SOFTMAX.forward(x, axis)
    return Batched(ops.SOFTMAX.forward(x.stack, _axes(axis, x.ndim)))


def _matmul(a: Any, b: Any) -> Any:
    if not isinstance(a, Batched) and not isinstance(b, Batched):
        return ops.MATMUL.forward(a, b)
    if isinstance(b, Batched) and b.ndim == 1:
        # A logical vector on the right: (.., k) @ (k,) per seed is a product with its transpose.
        raw_a = a.stack if isinstance(a, Batched) else a
        if isinstance(a, Batched):
            return Batched(B.xp.einsum("b...k,bk->b...", raw_a, b.stack))
        return Batched(B.xp.moveaxis(raw_a @ b.stack.T, -1, 0)) if raw_a.ndim > 1 else Batched(raw_a @ b.stack.T)
    raw_b = b.stack if isinstance(b, Batched) else b
    # The seeds become columns (or rows) of one matrix product: NumPy would otherwise run one
    # product per seed, each re-reading the whole matrix (20x slower for a 1000x1000 Jacobian).
    if isinstance(a, Batched) and not isinstance(b, Batched) and raw_b.ndim == 2:
        rows = a.stack.reshape(-1, a.stack.shape[-1]) @ raw_b
        return Batched(rows.reshape(a.stack.shape[:-1] + raw_b.shape[-1:]))
    if not isinstance(a, Batched) and a.ndim == 2 and b.ndim == 2:
        count, inner, width = raw_b.shape
        columns = a @ B.xp.transpose(raw_b, (1, 0, 2)).reshape(inner, count * width)
        return Batched(B.xp.transpose(columns.reshape(a.shape[0], count, width), (1, 0, 2)))
    if isinstance(a, Batched):
        if a.ndim == 1 and isinstance(b, Batched):  # (k,) @ (k, n) per seed
            return Batched(B.xp.einsum("bk,bk...->b...", a.stack, raw_b))
        return Batched(a.stack @ raw_b)
    return Batched(a @ raw_b)


def _zeros_like(x: Any) -> Any:
    if isinstance(x, Batched):
        return Batched(B.xp.zeros(x.stack.shape, dtype=x.dtype))
    return B.xp.zeros(x.shape, dtype=B.dtype)


def _namespace() -> SimpleNamespace:
    ns = SimpleNamespace(**vars(ops.numeric))
    for name, prim in ops.PRIMITIVES.items():
        if prim.broadcasts or name in ops.ELEMENTWISE_UNARY or not prim.differentiable:
            setattr(ns, name, _elementwise(prim.forward))
    ns.power, ns.abs_, ns.round_ = ns.pow, ns.abs, ns.round
    for name in ("sum", "mean", "prod", "max", "min", "norm", "logsumexp"):
        setattr(ns, name, _reduction(ops.PRIMITIVES[name].forward))
    ns.reshape, ns.transpose, ns.broadcast_to, ns.sum_to = _reshape, _transpose, _broadcast_to, _sum_to
    ns.index, ns.scatter, ns.softmax, ns.matmul, ns.zeros_like = _index, _scatter, _softmax, _matmul, _zeros_like
    return ns


namespace = _namespace()


def basis(shape: tuple[int, ...]) -> Batched:
    """Every one-hot seed of a shape, stacked: the rows of an identity matrix."""
    size = 1
    for n in shape:
        size *= n
    return Batched(B.xp.reshape(B.xp.eye(size, dtype=B.dtype), (size, *shape)))
