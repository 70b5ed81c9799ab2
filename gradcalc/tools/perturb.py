"""Many nearby runs at once: a run's recorded graph replayed with one leaf's element moves as a batch.

gradcheck needs f(x ± eps·e_j) for every element j of a leaf. Rerunning the
program 2n times is quadratic work for an elementwise program; instead the
recorded graph is replayed once per chunk of elements, every primitive applied
to a stack of perturbed values (a leading batch axis, through batching.py's
namespace). A stack whose seeds each differ from the base value at one flat
position only (the moved element, through elementwise operations and
reshapes) is kept as that base and one value per seed (`Moved`), so an
elementwise program costs O(n) per chunk, not O(n) per seed; a full sum of
such a stack is the base's sum plus each seed's change.

A replay follows the path the run took. It is exact only where that path
cannot depend on the moved leaf: `replayable` says when it is so.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ..engine import backend as B
from ..engine import batching, graph
from ..engine.graph import ELEMENTWISE_BATCH, UNBATCHED, Node, Released
from ..engine.primitives import MATMUL, MEAN, STACK, SUM
from ..language import syntax as S
from ..program import builtins
from ..program.api import Run

# Builtins whose result carries a value out of the graph (detach) or decides on all of its entries
# (all, any) without the host decision gradcheck can watch; `and`/`or` short-circuit on a scalar.
_OFF_GRAPH = {"detach", "all", "any"}
# Elements in one stack of a dense replay (4M float64: 32 MB an intermediate).
STACK_ELEMENTS = 1 << 22


class Moved:
    """A stack of values equal to `base` except at flat position pos[k] of seed k, which holds diag[k]."""

    __slots__ = ("base", "diag", "pos")

    def __init__(self, base: Any, pos: Any, diag: Any) -> None:
        self.base = B.xp.asarray(base)
        self.pos = pos
        self.diag = diag

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.base.shape)

    def dense(self) -> batching.Batched:
        seeds = self.pos.shape[0]
        batching._check((seeds, *self.shape))
        stack = B.xp.array(B.xp.broadcast_to(self.base, (seeds, *self.shape)))
        stack.reshape(seeds, -1)[B.xp.arange(seeds), self.pos] = self.diag
        return batching.Batched(stack)


@contextlib.contextmanager
def _watched() -> Iterator[list[Node]]:
    """The nodes whose values the run reads on the host for a decision (a branch, a count, a size, an index).

    graph.host_value is where the interpreter and the builtins take those values: it is wrapped for
    the block, and put back after it."""
    seen: list[Node] = []
    original = graph.host_value

    def watched(node: Node) -> Any:
        seen.append(node)
        return original(node)

    graph.host_value = watched
    builtins.host_value = watched
    try:
        yield seen
    finally:
        graph.host_value = original
        builtins.host_value = original


def traced(run: Run) -> tuple[Run, list[Node] | None]:
    """The run again, with the nodes its host decisions read; None for those where the syntax alone
    shows a value leaving the graph unwatched (detach, all, any, and/or)."""
    for expr in S.code(run.program.module.body, functions=True):
        if isinstance(expr, S.BoolOp) or (isinstance(expr, S.Call) and expr.name in _OFF_GRAPH):
            return run, None
    with _watched() as seen:
        again = run.rerun({})
    return again, seen


def _reached(roots: list[Node]) -> list[Node]:
    """Every node the roots are computed from (the roots too), in creation order: a topological order."""
    found: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) in found:
            continue
        found[id(node)] = node
        stack.extend(node.inputs)
    return sorted(found.values(), key=lambda n: n.seq)


def depends(roots: list[Node], leaf: Node) -> bool:
    """Whether any root's value is computed from `leaf` (through any operation, differentiable or not)."""
    return any(node is leaf for node in _reached(roots))


def replayable(decisions: list[Node] | None, leaf: Node) -> bool:
    """Whether a replay moving `leaf` follows the program: no host decision reads a value computed from it."""
    return decisions is not None and not depends(decisions, leaf)


class Replay:
    """The graph of `output` replayed with `leaf` moved element by element, a chunk of elements at a time."""

    def __init__(self, output: Node, leaf: Node) -> None:
        self.output = output
        self.leaf = leaf
        self.nodes = _reached([output])
        dirty: set[int] = {id(leaf)}
        for node in self.nodes:
            if any(id(i) in dirty for i in node.inputs):
                dirty.add(id(node))
        # Computed again: what the move changes, and what it reads whose value the run freed.
        self.order = [n for n in self.nodes if n.op is not None and (id(n) in dirty or type(n.value) is Released)]
        self.dirty = dirty
        # What a seed's copy costs: only values the move changes get a batch axis.
        self.largest = max((_size(n.value.shape) for n in self.nodes if id(n) in dirty), default=1)
        self.densified = False

    def chunk(self) -> int:
        """How many elements one dense replay moves at once (two seeds each) within STACK_ELEMENTS."""
        return max(1, min(STACK_ELEMENTS, B.max_elements) // (2 * max(1, self.largest)))

    def differences(self, positions: Any, eps: float) -> Any:
        """(f(x + eps e_j) - f(x - eps e_j)) / 2eps for each flat position j given: shape (len, *f.shape)."""
        count = len(positions)
        pos = B.xp.asarray(positions)
        base = B.xp.asarray(self.leaf.value)
        flat = B.xp.reshape(base, (-1,)).astype(B.host.float64)[pos]
        moved = B.xp.concatenate([flat + eps, flat - eps]).astype(base.dtype)
        values: dict[int, Any] = {id(self.leaf): Moved(base, B.xp.concatenate([pos, pos]), moved)}
        for node in self.order:
            args = [values.get(id(i), i.value) for i in node.inputs]
            values[id(node)] = self._apply(node, args)
        out = values.get(id(self.output), self.output.value)
        shape = tuple(self.output.value.shape)
        result = B.xp.zeros((count, *shape), dtype=B.host.float64)
        if isinstance(out, Moved):  # each seed changed its own position: one entry a column
            change = (out.diag[:count].astype(B.host.float64) - out.diag[count:]) / (2 * eps)
            result.reshape(count, -1)[B.xp.arange(count), out.pos[:count]] = change
        elif isinstance(out, batching.Batched):
            stack = out.stack.astype(B.host.float64)
            result[...] = (stack[:count] - stack[count:]) / (2 * eps)
        return result

    def _apply(self, node: Node, args: list[Any]) -> Any:
        prim = node.op
        assert prim is not None
        if not any(isinstance(a, (Moved, batching.Batched)) for a in args):
            return prim.forward(*args, *node.params)
        moved = [a for a in args if isinstance(a, Moved)]
        if moved and len(moved) == sum(isinstance(a, (Moved, batching.Batched)) for a in args):
            kept = self._sparse(node, args, moved)
            if kept is not None:
                return kept
        self.densified = True
        args = [a.dense() if isinstance(a, Moved) else a for a in args]
        if prim is STACK:  # (stack has no batched function: no rule applies it to a gradient)
            seeds = next(a.stack.shape[0] for a in args if isinstance(a, batching.Batched))
            parts = [a.stack if isinstance(a, batching.Batched) else B.xp.broadcast_to(a, (seeds, *a.shape))
                     for a in args]
            batching._check((seeds, len(parts), *parts[0].shape[1:]))
            return batching.Batched(B.xp.stack(parts, axis=1))
        if prim.batching == UNBATCHED:  # trace, det, inv: NumPy's own, over the leading axes
            return batching.Batched(prim.forward(*[a.stack for a in args], *node.params))
        matrix, vectors = args if prim is MATMUL and len(args) == 2 else (None, None)
        if isinstance(vectors, batching.Batched) and vectors.ndim == 1 and getattr(matrix, "ndim", 0) == 2 \
                and not isinstance(matrix, batching.Batched):
            # M @ v for a stack of v: one product of the stack with Mᵀ (batching.py's M @ stackᵀ multiplies a
            # transposed view, which NumPy does without BLAS: 100x slower at 10 x 4000).
            return batching.Batched(vectors.stack @ B.xp.transpose(matrix))
        return getattr(batching.namespace, prim.name)(*args, *node.params)

    def _sparse(self, node: Node, args: list[Any], moved: list[Moved]) -> Any:
        """The result kept as base and one value per seed, where the operation allows; else None."""
        prim = node.op
        assert prim is not None
        shape = moved[0].shape
        pos = moved[0].pos
        if any(m.pos is not pos or m.shape != shape for m in moved):
            return None
        if prim.batching == ELEMENTWISE_BATCH:
            if tuple(node.value.shape) != shape:  # broadcast past the moved shape: seeds differ in more places
                return None
            bases = [a.base if isinstance(a, Moved) else a for a in args]
            picks = [a.diag if isinstance(a, Moved) else _picked(a, shape, pos) for a in args]
            return Moved(prim.forward(*bases), pos, prim.forward(*picks))
        if prim.name == "reshape":  # flat positions do not move
            return Moved(B.xp.reshape(args[0].base, node.params[0]), pos, args[0].diag)
        if prim in (SUM, MEAN) and len(args) == 1 and _all_axes(node.params[0], len(shape)):
            x = args[0]
            total = prim.forward(x.base, *node.params)
            change = x.diag - B.xp.reshape(x.base, (-1,))[pos]
            if prim is MEAN:
                change = change / max(1, _size(shape))
            seeds = pos.shape[0]
            stack = B.xp.reshape(total, (1, *total.shape)) + B.xp.reshape(change, (seeds,) + (1,) * total.ndim)
            return batching.Batched(stack.astype(total.dtype, copy=False))
        return None


def _picked(value: Any, shape: tuple[int, ...], pos: Any) -> Any:
    """An unchanged operand's entries at the moved positions, broadcast to the moved shape."""
    value = B.xp.asarray(value)
    if value.ndim == 0:
        return value
    return B.xp.reshape(B.xp.broadcast_to(value, shape), (-1,))[pos]


def _all_axes(axis: Any, ndim: int) -> bool:
    if axis is None:
        return True
    axes = axis if isinstance(axis, tuple) else (axis,)
    return {a % ndim for a in axes} == set(range(ndim)) if ndim else True


def _size(shape: tuple[int, ...]) -> int:
    size = 1
    for n in shape:
        size *= n
    return size
