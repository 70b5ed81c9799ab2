"""Batched cotangents and primals: run every derivative rule, and every primitive, on a stack at once.

A Jacobian is the VJP mapped over a basis of seeds (HIPS autograd's `jacobian`,
JAX's `vmap(vjp)`). Instead of a Python loop of backward passes, one pass carries
a `Batched` gradient: an array with one extra leading axis, one entry per seed.
The rules in rules.py are not touched: they run on `namespace`, whose functions
are ops.numeric's, taught to keep the leading axis out of the way (axes shift by
one, shapes gain a prefix, broadcasting aligns logical shapes). This is the one
place that knows about the batch axis.

The same stacks carry a batch of points through a whole run (`primal_batching`, JAX's
`vmap`): each leaf given per point is a `Batched` value, every primitive evaluates through
its batched function, and what does not depend on the points stays one array. A host
decision (a branch, an index, a size) reads a `Batched` value as one number only where all
points agree; where they differ it raises `Divergent`, and the caller splits the batch by
the points' values there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any, TypeVar

from . import backend as B
from . import ops
from .graph import ELEMENTWISE_BATCH, OWN_BATCH, REDUCTION_BATCH, UNBATCHED, Primitive
from .primitives import (
    ADD,
    ARGMAX,
    ARGMIN,
    BROADCAST_TO,
    CHOLESKY,
    CONCATENATE,
    CROSS_ENTROPY,
    CUMPROD,
    CUMSUM,
    DET,
    DIV,
    EINSUM,
    EQ,
    FLIP,
    INDEX,
    INDEX_PUT,
    INV,
    LOG_SOFTMAX,
    LOGDET,
    MATMUL,
    MSE_LOSS,
    MUL,
    NE,
    NORM_ORD,
    POW,
    PRIMITIVES,
    RESHAPE,
    SCATTER,
    SOFTMAX,
    SOLVE,
    SQUEEZE,
    STACK,
    STACK_AXIS,
    STD,
    SUB,
    SUM_TO,
    TRACE,
    TRANSPOSE,
    UNSQUEEZE,
    VAR,
    WHERE,
)


class Batched:
    """A stack of B arrays of one logical shape: `stack.shape == (B,) + shape`.

    The seeds of a Jacobian are one-hot: seed i is d[i] at flat position i and 0
    elsewhere. Such a stack is kept as the vector d (`diagonal`, with `logical`
    its shape) for as long as the rules allow — a product with a vector, a
    reshape, a matrix product — so that J = diag(1 - y²)·W costs n² work rather
    than an n³ matrix product; any other operation reads `stack`, the dense form.
    """

    __slots__ = ("_stack", "diagonal", "logical")
    __array_ufunc__ = None  # NumPy defers to these operators

    def __init__(self, stack: Any, diagonal: Any = None, logical: tuple[int, ...] = ()) -> None:
        self._stack = stack
        self.diagonal = diagonal
        self.logical = logical

    @property
    def stack(self) -> Any:
        if self._stack is None:
            size = self.diagonal.shape[0]
            _check((size, *self.logical))
            dense = B.xp.zeros((size, size), dtype=self.diagonal.dtype)
            dense[B.xp.arange(size), B.xp.arange(size)] = self.diagonal
            self._stack = B.xp.reshape(dense, (size, *self.logical))
        return self._stack

    @property
    def shape(self) -> tuple[int, ...]:
        return self.logical if self._stack is None else tuple(self._stack.shape[1:])

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> Any:
        return self.diagonal.dtype if self._stack is None else self._stack.dtype

    def __add__(self, other: Any) -> Batched:
        return _elementwise(ADD.forward)(self, other)

    def __radd__(self, other: Any) -> Batched:
        return _elementwise(ADD.forward)(other, self)

    def __sub__(self, other: Any) -> Batched:
        return _elementwise(SUB.forward)(self, other)

    def __rsub__(self, other: Any) -> Batched:
        return _elementwise(SUB.forward)(other, self)

    def __mul__(self, other: Any) -> Batched:
        return _elementwise(MUL.forward)(self, other)

    def __rmul__(self, other: Any) -> Batched:
        return _elementwise(MUL.forward)(other, self)

    def __truediv__(self, other: Any) -> Batched:
        return _elementwise(DIV.forward)(self, other)

    def __rtruediv__(self, other: Any) -> Batched:
        return _elementwise(DIV.forward)(other, self)

    def __pow__(self, other: Any) -> Batched:
        return _elementwise(POW.forward)(self, other)

    def __neg__(self) -> Batched:
        if self._stack is None:
            return Batched(None, -self.diagonal, self.logical)
        return Batched(-self.stack)

    def __matmul__(self, other: Any) -> Batched:
        return _matmul(self, other)

    def __rmatmul__(self, other: Any) -> Batched:
        return _matmul(other, self)

    def __iadd__(self, other: Any) -> Batched:
        stack = self.stack
        stack += _aligned(other, self.ndim)
        self._stack, self.diagonal = stack, None
        return self

    # A batch of points read on the host (a branch, an index, a size): one value where every point agrees.

    __hash__ = None  # type: ignore[assignment]  # == is elementwise

    def __eq__(self, other: Any) -> Batched:  # type: ignore[override]
        return _elementwise(EQ.forward)(self, other)

    def __ne__(self, other: Any) -> Batched:  # type: ignore[override]
        return _elementwise(NE.forward)(self, other)

    def __getitem__(self, key: Any) -> Any:
        return _index(self, key if isinstance(key, tuple) else (key,))

    @property
    def size(self) -> int:
        size = 1
        for n in self.shape:
            size *= n
        return size

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        """The one value all points share (NumPy's view of it), or Divergent with each point's own."""
        host = B.to_host(self.stack)
        first = host[0, ...]  # an array, as __array__ must give, even for a scalar
        same = host == first
        if host.dtype.kind in "fc":  # NaN at the same place in every point is agreement too
            same |= (host != host) & (first != first)  # noqa: PLR0124  (NaN: only it differs from itself; NumPy is backend.py's)
        if not same.all():
            raise Divergent([row.tobytes() for row in host])
        return first if dtype is None else first.astype(dtype)

    def item(self) -> Any:
        return self.__array__().item()

    def __bool__(self) -> bool:
        return bool(self.__array__())

    def __float__(self) -> float:
        return float(self.__array__())

    def __int__(self) -> int:
        return int(self.__array__())


class Divergent(BaseException):
    """The points of a batch take different paths here: `keys` holds one hashable per point, equal
    for points that agree (a branch's condition, an index, a size).

    A BaseException, as GeneratorExit is: it must pass the interpreter's and graph.apply's handlers,
    which make any Exception a message about the program; the batch's caller catches it."""

    def __init__(self, keys: list[Any]) -> None:
        super().__init__("the points of a batch take different paths")
        self.keys = keys


class Unbatchable(BaseException):
    """A primitive with no batching rule met a batch of points: run them one by one (a BaseException, as
    Divergent is)."""


def _check(shape: tuple[int, ...]) -> None:
    """--max-elements for what the batched pass makes: every seed's copy of an intermediate counts."""
    B.check_size(tuple(shape), "an intermediate of the batched pass (one copy per seed)")


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
        shape = None
        for a in args:
            if a.__class__ is Batched:
                stack = a._stack
                if stack is None or (shape is not None and stack.shape != shape):
                    break
                shape = stack.shape
            elif getattr(a, "ndim", 0):
                break
        else:
            if shape is None:
                return forward(*args)
            # Stacks of one shape and numbers (a batch of points' scalars, a rule's factor): the result is
            # no larger than an input, and no axis needs aligning (a fifth of a batched run went there).
            return Batched(forward(*[a._stack if a.__class__ is Batched else a for a in args]))
        if not any(isinstance(a, Batched) for a in args):
            return forward(*args)
        if forward is MUL.forward or forward is WHERE.forward:
            kept = _scaled_diagonal(*args) if forward is MUL.forward else _masked_diagonal(*args)
            if kept is not None:
                return kept
        ndim = max(getattr(a, "ndim", 0) for a in args)
        aligned = [_aligned(a, ndim) for a in args]
        _check(B.broadcast_shapes(*(tuple(getattr(a, "shape", ())) for a in aligned)))
        return Batched(forward(*aligned))

    return apply


def _scaled_diagonal(a: Any, b: Any) -> Batched | None:
    """One-hot seeds times a finite array of their shape (or a scalar) stay one-hot: d[i]·v[i] at i."""
    seeds, other = (a, b) if isinstance(a, Batched) else (b, a)
    if isinstance(other, Batched) or seeds.diagonal is None or seeds._stack is not None:
        return None
    other = B.xp.asarray(other)
    if B.broadcast_shapes(other.shape, seeds.logical) != seeds.logical or not B.xp.isfinite(other).all():
        return None  # a larger result, or inf·0 off the diagonal (NaN, as the dense product gives)
    return Batched(None, seeds.diagonal * _flat(other, seeds.logical), seeds.logical)


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


def _flat(value: Any, logical: tuple[int, ...]) -> Any:
    """An unbatched array broadcast to the seeds' shape, in their flat order (seed i's entry at i)."""
    return B.xp.reshape(B.xp.broadcast_to(value, logical), (-1,))


def _masked_diagonal(condition: Any, x: Any, y: Any) -> Batched | None:
    """where(c, seeds, 0) and where(c, 0, seeds) keep one-hot seeds one-hot (a rule's masked gradient)."""
    seeds, other = (x, y) if isinstance(x, Batched) else (y, x)
    if isinstance(condition, Batched) or isinstance(other, Batched) or not isinstance(seeds, Batched) \
            or seeds.diagonal is None or seeds._stack is not None:
        return None
    if not (isinstance(other, (int, float)) and other == 0):
        return None
    condition = B.xp.asarray(condition)
    if B.broadcast_shapes(condition.shape, seeds.logical) != seeds.logical:
        return None
    keep = _flat(condition != 0, seeds.logical)
    kept = B.xp.where(keep if seeds is x else ~keep, seeds.diagonal, 0)
    return Batched(None, kept.astype(seeds.diagonal.dtype, copy=False), seeds.logical)


# The batched function of each primitive whose record says this module has its own (OWN_BATCH).
_OWN: dict[Primitive, Callable[..., Any]] = {}
_F = TypeVar("_F", bound=Callable[..., Any])


def _own(prim: Primitive) -> Callable[[_F], _F]:
    def register(fn: _F) -> _F:
        _OWN[prim] = fn
        return fn

    return register


@_own(RESHAPE)
def _reshape(x: Any, shape: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return RESHAPE.forward(x, shape)
    if x.diagonal is not None and x._stack is None:  # the flat positions do not move
        return Batched(None, x.diagonal, tuple(shape))
    return Batched(B.xp.reshape(x.stack, x.stack.shape[:1] + tuple(shape)))


@_own(TRANSPOSE)
def _transpose(x: Any, axes: tuple[int, ...] | None) -> Any:
    if not isinstance(x, Batched):
        return TRANSPOSE.forward(x, axes)
    order = tuple(reversed(range(x.ndim))) if axes is None else axes
    return Batched(B.xp.transpose(x.stack, (0, *(a + 1 for a in order))))


@_own(BROADCAST_TO)
def _broadcast_to(x: Any, shape: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return BROADCAST_TO.forward(x, shape)
    stack = _aligned(x, len(shape))
    _check(stack.shape[:1] + tuple(shape))  # a view, but what follows it will be as large
    return Batched(B.xp.broadcast_to(stack, stack.shape[:1] + tuple(shape)))


@_own(SUM_TO)
def _sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return SUM_TO.forward(x, shape)
    if x.shape == tuple(shape):
        return x
    axes = tuple(1 + a for a in B.summed_axes(x.shape, tuple(shape)))  # past the batch axis
    total = B.xp.sum(x.stack, axis=axes, keepdims=True)
    return Batched(B.xp.reshape(total, x.stack.shape[:1] + tuple(shape)))


@_own(INDEX)
def _index(x: Any, key: tuple) -> Any:
    if not isinstance(x, Batched):
        return INDEX.forward(x, key)
    if any(isinstance(k, Batched) for k in key):
        raise Unbatchable("an index that differs between points")
    picked = x.stack[(slice(None), *key)]
    if any(not isinstance(k, (int, slice)) and k is not None and k is not Ellipsis for k in key):
        # Array indices apart from each other move their axes first, before the batch axis: a shape
        # other than one point's means the batch axis moved, so the points go one by one.
        expected = B.xp.broadcast_to(B.xp.zeros((), dtype=picked.dtype), x.shape)[key].shape
        if tuple(picked.shape) != (x.stack.shape[0], *expected):
            raise Unbatchable("array indices that move the batch axis")
    return Batched(picked)


@_own(SCATTER)
def _scatter(g: Any, key: tuple, shape: tuple[int, ...]) -> Any:
    if not isinstance(g, Batched):
        return SCATTER.forward(g, key, shape)
    _check(g.stack.shape[:1] + tuple(shape))
    out = B.xp.zeros(g.stack.shape[:1] + tuple(shape), dtype=g.dtype)
    if any(isinstance(k, tuple) for k in key):  # entries picked twice add up (the forward _index kept the axes)
        B.xp.add.at(out, (slice(None), *key), g.stack)
    else:
        out[(slice(None), *key)] = g.stack
    return Batched(out)


@_own(INDEX_PUT)
def _index_put(x: Any, value: Any, key: tuple) -> Any:
    """y[key] = value for a batch: each point's y written with its own value (or the one value)."""
    if not isinstance(x, Batched) and not isinstance(value, Batched):
        return INDEX_PUT.forward(x, value, key)
    if any(isinstance(k, Batched) for k in key):
        raise Unbatchable("an index that differs between points")
    count = (x if isinstance(x, Batched) else value).stack.shape[0]
    out = B.xp.array(x.stack if isinstance(x, Batched) else B.xp.broadcast_to(x, (count, *x.shape)), copy=True)
    written = out[(slice(None), *key)]
    expected = B.xp.broadcast_to(B.xp.zeros((), dtype=out.dtype), out.shape[1:])[key].shape
    if tuple(written.shape) != (count, *expected):
        raise Unbatchable("array indices that move the batch axis")
    out[(slice(None), *key)] = _aligned(value, len(expected))
    return Batched(out)


@_own(SOFTMAX)
def _softmax(x: Any, axis: int) -> Any:
    if not isinstance(x, Batched):
        return SOFTMAX.forward(x, axis)
    return Batched(SOFTMAX.forward(x.stack, _axes(axis, x.ndim)))


@_own(MATMUL)
def _matmul(a: Any, b: Any) -> Any:
    if not isinstance(a, Batched) and not isinstance(b, Batched):
        return MATMUL.forward(a, b)
    product = _one_hot_matmul(a, b)
    if product is not None:
        return product
    if isinstance(b, Batched) and b.ndim == 1:
        # A logical vector on the right, (.., k) @ (k,) at each point: for one matrix, the stack times its
        # transpose, (count, k) @ (k, rows), one GEMM whose result has the batch axis first and contiguous
        # (M @ stackᵀ gave it transposed: every elementwise pass after it strided); for a stack of
        # matrices, one batched matmul (einsum's own loop runs no BLAS).
        if isinstance(a, Batched):
            if a.ndim == 1:
                return Batched(B.xp.einsum("bk,bk->b", a.stack, b.stack))
            return Batched(B.xp.matmul(a.stack, _aligned(b, a.ndim - 1)[..., None])[..., 0])
        if a.ndim == 1:
            return Batched(b.stack @ a)
        rows = b.stack @ B.xp.reshape(a, (-1, a.shape[-1])).T
        return Batched(B.xp.reshape(rows, (rows.shape[0], *a.shape[:-1])))
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
    return _promoted_matmul(a, b)


def _promoted_matmul(a: Any, b: Any) -> Batched:
    """Any other product, as NumPy's matmul defines it per point: a vector is a matrix of one row (on the left)
    or one column (on the right), the batch axis leads every stack, and leading axes broadcast."""
    left, right = a.ndim == 1, b.ndim == 1
    ndim = max(a.ndim + left, b.ndim + right)

    def raw(x: Any, vector_axis: int | None) -> Any:
        if not isinstance(x, Batched):
            return x if vector_axis is None else B.xp.expand_dims(x, vector_axis)
        stack = x.stack if vector_axis is None else B.xp.expand_dims(x.stack, vector_axis)
        missing = ndim + 1 - stack.ndim  # leading axes of the other side: inserted after the batch axis
        return stack.reshape(stack.shape[:1] + (1,) * missing + stack.shape[1:])

    out = raw(a, -2 if left else None) @ raw(b, -1 if right else None)
    if right:
        out = out[..., 0]
    if left:
        out = out[..., 0, :] if not right else out[..., 0]
    return Batched(out)


def _one_hot_matmul(a: Any, b: Any) -> Batched | None:
    """A matrix product with one-hot seeds (logical matrices) on one side: row or column picks, no GEMM.

    Seed i is d[i]·E(r, c) with (r, c) = divmod(i, width): E(r, c) @ M has row r equal to
    M[c, :]; M @ E(r, c) has column c equal to M[:, r].
    """
    seeds, other = (a, b) if isinstance(a, Batched) else (b, a)
    if isinstance(other, Batched) or seeds.diagonal is None or seeds._stack is not None:
        return None
    if len(seeds.logical) != 2 or other.ndim != 2:
        return None
    count = seeds.diagonal.shape[0]
    rows, columns = B.xp.divmod(B.xp.arange(count), seeds.logical[1])
    weights = seeds.diagonal
    if seeds is a:  # (k, w) @ (w, p): row r of seed i is d[i]·M[c, :]
        out = B.xp.zeros((count, seeds.logical[0], other.shape[1]), dtype=weights.dtype)
        out[B.xp.arange(count), rows, :] = weights[:, None] * other[columns, :]
        return Batched(out)
    # (m, k) @ (k, w): column c of seed i is d[i]·M[:, r]
    out = B.xp.zeros((count, other.shape[0], seeds.logical[1]), dtype=weights.dtype)
    out[B.xp.arange(count), :, columns] = weights[:, None] * B.xp.transpose(other[:, rows])
    return Batched(out)



# --- Issue 25's functions (kept apart for merging) ------------------------------------------------

@_own(SQUEEZE)
@_own(UNSQUEEZE)
def _reshaped(x: Any, shape: tuple[int, ...], axis: Any) -> Any:
    return _reshape(x, shape)


@_own(FLIP)
def _flip(x: Any, axes: tuple[int, ...]) -> Any:
    if not isinstance(x, Batched):
        return FLIP.forward(x, axes)
    return Batched(B.xp.flip(x.stack, axis=tuple(a + 1 for a in axes)))


def _along(prim: Primitive) -> Callable[..., Any]:
    """A primitive along one axis (cumsum, log_softmax): the same axis of each point, one past the batch axis."""
    def along(x: Any, axis: int) -> Any:
        if not isinstance(x, Batched):
            return prim.forward(x, axis)
        return Batched(prim.forward(x.stack, axis % x.ndim + 1))

    return along


for _prim in (CUMSUM, CUMPROD, LOG_SOFTMAX):
    _OWN[_prim] = _along(_prim)


def _position(prim: Primitive) -> Callable[..., Any]:
    """argmax and argmin: over the axis, or over each point's flattened entries."""
    def position(x: Any, axis: int | None) -> Any:
        if not isinstance(x, Batched):
            return prim.forward(x, axis)
        if axis is None:
            return Batched(prim.forward(B.xp.reshape(x.stack, (x.stack.shape[0], -1)), 1))
        return Batched(prim.forward(x.stack, axis % x.ndim + 1))

    return position


for _prim in (ARGMAX, ARGMIN):
    _OWN[_prim] = _position(_prim)


def _statistic(prim: Primitive) -> Callable[..., Any]:
    def statistic(x: Any, axis: Any, keepdims: bool, ddof: int) -> Any:
        if not isinstance(x, Batched):
            return prim.forward(x, axis, keepdims, ddof)
        return Batched(prim.forward(x.stack, _axes(axis, x.ndim), keepdims, ddof))

    return statistic


for _prim in (VAR, STD, NORM_ORD):  # each with one more param after axis and keepdims
    _OWN[_prim] = _statistic(_prim)


@_own(CONCATENATE)
def _concatenate(*args: Any) -> Any:
    *parts, axis = args
    batched = next((p for p in parts if isinstance(p, Batched)), None)
    if batched is None:
        return CONCATENATE.forward(*args)
    count = batched.stack.shape[0]
    stacks = [p.stack if isinstance(p, Batched) else B.xp.broadcast_to(p, (count, *p.shape)) for p in parts]
    return Batched(B.xp.concatenate(stacks, axis=axis + 1))


def _stacks(parts: Any) -> list[Any] | None:
    """Each part as a stack of the batch's size (one that is no batch repeated, as a view); None if none is."""
    batched = next((p for p in parts if isinstance(p, Batched)), None)
    if batched is None:
        return None
    count = batched.stack.shape[0]
    return [p.stack if isinstance(p, Batched) else B.xp.broadcast_to(p, (count, *B.xp.shape(p))) for p in parts]


@_own(STACK_AXIS)
def _stack_axis(*args: Any) -> Any:
    *parts, axis = args
    stacks = _stacks(parts)
    if stacks is None:
        return STACK_AXIS.forward(*args)
    return Batched(B.xp.stack(stacks, axis=axis + 1))


@_own(STACK)
def _stack(*parts: Any) -> Any:
    """The tensor literal [a, b, c]: the parts along a new first axis, one past the batch axis."""
    stacks = _stacks(parts)
    if stacks is None:
        return STACK.forward(*parts)
    B.check_size((len(parts), *parts[0].shape), "the stacked tensor")  # each point's, as one run checks it
    _check((stacks[0].shape[0], len(parts), *parts[0].shape))
    return Batched(B.xp.stack(stacks, axis=1))


def _leading(prim: Primitive) -> Callable[..., Any]:
    """A function of the last axes that NumPy maps over any leading ones (det, inv, trace of the last two,
    cholesky, logdet): the stack goes in whole."""
    def leading(x: Any, *params: Any) -> Any:
        if not isinstance(x, Batched):
            return prim.forward(x, *params)
        return Batched(prim.forward(x.stack, *params))

    return leading


for _prim in (TRACE, DET, INV, LOGDET, CHOLESKY):
    _OWN[_prim] = _leading(_prim)


def _loss(prim: Primitive) -> Callable[..., Any]:
    """cross_entropy and mse_loss: each point's losses ('none'), then each point's reduction."""
    def loss(x: Any, y: Any, reduction: str, *rest: Any) -> Any:
        batched = x if isinstance(x, Batched) else y if isinstance(y, Batched) else None
        if batched is None:
            return prim.forward(x, y, reduction, *rest)
        ndim = max(x.ndim, y.ndim)  # x and y broadcast against each other within each point
        losses = prim.forward(_aligned(x, ndim), _aligned(y, ndim), "none", *rest)
        if reduction == "none":
            return Batched(losses)
        within = tuple(range(1, losses.ndim))
        return Batched(B.xp.sum(losses, axis=within) if reduction == "sum" else B.xp.mean(losses, axis=within))

    return loss


for _prim in (CROSS_ENTROPY, MSE_LOSS):
    _OWN[_prim] = _loss(_prim)


@_own(SOLVE)
def _solve(a: Any, b: Any) -> Any:
    if not isinstance(a, Batched) and not isinstance(b, Batched):
        return SOLVE.forward(a, b)
    vector = b.ndim == 1
    if not isinstance(a, Batched):  # one matrix, many right-hand sides: one solve with them as columns
        if vector:
            return Batched(B.xp.linalg.solve(a, b.stack.T).T)
        return Batched(B.xp.linalg.solve(a, b.stack))
    raw_b = b.stack if isinstance(b, Batched) else B.xp.broadcast_to(b, (a.stack.shape[0], *b.shape))
    if vector:
        return Batched(B.xp.linalg.solve(a.stack, raw_b[..., None])[..., 0])
    return Batched(B.xp.linalg.solve(a.stack, raw_b))


@_own(EINSUM)
def _einsum(*args: Any) -> Any:
    *operands, spec = args
    if not any(isinstance(x, Batched) for x in operands):
        return EINSUM.forward(*args)
    letter = next(c for c in "zyxwvutsrqponmlkjihgfedcbaZYXWVUTSRQPONMLKJIHGFEDCBA" if c not in spec)
    inputs, output = spec.split("->")
    subscripts = [letter + s if isinstance(x, Batched) else s
                  for s, x in zip(inputs.split(","), operands, strict=True)]
    raws = [x.stack if isinstance(x, Batched) else x for x in operands]
    return Batched(B.xp.einsum(",".join(subscripts) + "->" + letter + output, *raws))

def _zeros_like(x: Any) -> Any:
    if isinstance(x, Batched):
        return Batched(B.xp.zeros(x.stack.shape, dtype=x.dtype))
    return B.xp.zeros(x.shape, dtype=B.dtype)


def _namespace() -> SimpleNamespace:
    """ops.numeric's functions, each as its record's `batching` says: for elementwise ones and reductions
    the forward function taught the batch axis, else this module's own function or numeric's."""
    ns = SimpleNamespace(**vars(ops.numeric))
    for prim in PRIMITIVES.values():
        if prim.batching == ELEMENTWISE_BATCH:
            batched = _elementwise(prim.forward)
        elif prim.batching == REDUCTION_BATCH:
            batched = _reduction(prim.forward)
        elif prim.batching == OWN_BATCH:
            batched = _OWN[prim]
        else:
            assert prim.batching == UNBATCHED, f"{prim.name}: no batching declared"
            continue
        for name in prim.names:
            setattr(ns, name, batched)
    ns.zeros_like = _zeros_like
    return ns


namespace = _namespace()
# Rebuilt when the array library changes, after ops has bound its primitives to it (ops registered first).
B.on_switch(lambda xp: namespace.__dict__.update(vars(_namespace())))


def basis(shape: tuple[int, ...]) -> Batched:
    """Every one-hot seed of a shape, stacked (the rows of an identity matrix), kept as their diagonal."""
    size = 1
    for n in shape:
        size *= n
    return Batched(None, B.xp.ones(size, dtype=B.dtype), tuple(shape))


def _dispatched(batched: Callable[..., Any], forward: Callable[..., Any]) -> Callable[..., Any]:
    """A primitive's evaluation during primal batching: its batched function where a value is a batch."""

    def evaluate(*args: Any) -> Any:
        for a in args:
            if isinstance(a, Batched):
                return batched(*args)
        return forward(*args)

    return evaluate


def _refused(prim: Primitive, forward: Callable[..., Any]) -> Callable[..., Any]:
    def evaluate(*args: Any) -> Any:
        for a in args:
            if isinstance(a, Batched):
                raise Unbatchable(f"{prim.name} has no batching rule")
        return forward(*args)

    return evaluate


def _primal(forwards: dict[Primitive, Callable[..., Any]]) -> dict[Primitive, Callable[..., Any]]:
    """Each primitive's evaluation in a batch of points, made from its evaluation on one."""
    table: dict[Primitive, Callable[..., Any]] = {}
    for prim, forward in forwards.items():
        if prim.batching == ELEMENTWISE_BATCH:  # each passes what is no batch to `forward` itself
            table[prim] = _elementwise(forward)
        elif prim.batching == REDUCTION_BATCH:
            table[prim] = _reduction(forward)
        elif prim.batching == OWN_BATCH:
            table[prim] = _dispatched(_OWN[prim], forward)
        else:
            table[prim] = _refused(prim, forward)
    return table


_PRIMAL: dict[Primitive, Callable[..., Any]] = {}  # made at the first batch, again after the library changes
B.on_switch(lambda xp: _PRIMAL.clear())


@contextlib.contextmanager
def primal_batching() -> Iterator[None]:
    """Within the block, every primitive evaluates batches of points (leaves given as `Batched` stacks), and
    the first-order rules (ops.numeric) run on them: a run of the program is a run of the whole batch.

    The array library must not change inside the block (it rebinds the primitives), and no other thread
    may run the engine meanwhile (the records are shared)."""
    saved = {prim: prim.forward for prim in PRIMITIVES.values()}
    numeric = dict(vars(ops.numeric))
    if not _PRIMAL:
        _PRIMAL.update(_primal(saved))
    try:
        for prim, forward in _PRIMAL.items():
            prim.forward = forward
        ops.numeric.__dict__.update(vars(namespace))
        yield
    finally:
        for prim, forward in saved.items():
            prim.forward = forward
        ops.numeric.__dict__.clear()
        ops.numeric.__dict__.update(numeric)


def unstack(value: Any, count: int) -> Any:
    """A batched run's value on the host as `count` points: (count, *shape), the same for each where it is
    one array (it does not depend on the points)."""
    if isinstance(value, Batched):
        return B.to_host(value.stack)
    host = B.to_host(value)
    return host.reshape((1, *host.shape)).repeat(count, axis=0)
