"""The primitives as functions: each record of primitives.py, evaluated and recorded.

From the records come two namespaces with the same function names, which the
derivative rules (rules.py) are written against:

- `numeric`: the functions on raw arrays (a first-order backward pass);
- this module's functions: the same operations recorded as graph nodes (a
  differentiable backward pass, for Hessians and symbolic derivatives).

Both are made below from `PRIMITIVES`, one function per record, under its name
and its aliases: `ops.exp(x)`, `ops.sum(x, axis, keepdims)`, `ops.power(x, y)`.
The records themselves are here too, by their names in primitives.py
(`ops.EXP`). Node's operators are the recording functions themselves. The
language's builtins (program/builtins.py) are made of these functions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from ..errors import ValueProblem
from . import backend as B
from . import graph, primitives
from .graph import Node, Primitive, apply, constant, new_node
from .primitives import PRIMITIVES, broadcast_shape

if TYPE_CHECKING:
    # The functions and records named after the primitives are made at import, below: to a type checker
    # each is Any.
    def __getattr__(name: str) -> Any: ...


def _lift(x: Any) -> Node:
    return x if isinstance(x, Node) else constant(x)


_SHAPE = operator.attrgetter("shape")


def _unary(prim: Primitive) -> Callable[[Any], Node]:
    """A fast recorder for differentiable elementwise functions of one argument (they cannot fail on shapes)."""

    def record(x: Any) -> Node:
        if x.__class__ is not Node:
            x = _lift(x)
        return new_node(prim.forward(x.value), prim, (x,), (), graph.recording and x.requires_grad)

    return record


def _binary(prim: Primitive) -> Callable[[Any, Any], Node]:
    """A fast recorder for elementwise binary primitives: checks broadcasting before allocating."""
    differentiable = prim.differentiable

    def record(x: Any, y: Any) -> Node:
        try:
            xv, yv = x.value, y.value
        except AttributeError:  # a number, not a node (the rarer case: cheaper than two isinstance calls)
            x, y = _lift(x), _lift(y)
            xv, yv = x.value, y.value
        if xv.shape != yv.shape:
            broadcast_shape(prim, xv.shape, yv.shape)
        requires_grad = differentiable and graph.recording and (x.requires_grad or y.requires_grad)
        return new_node(prim.forward(xv, yv), prim, (x, y), (), requires_grad)

    return record


def _recorder(prim: Primitive) -> Callable[..., Node]:
    """Any other primitive: inputs (lifted to nodes), then params (the kind's defaults where left out)."""
    n = prim.n_inputs
    several = prim.kind.elementwise and n != 1
    check = prim.check or (broadcast_shape if several else None)  # clip, where: the inputs must broadcast

    wanted = len(prim.params) if prim.defaults else 0

    def record(*args: Any) -> Node:
        if n is None:  # any number of inputs, then the params (concatenate's axis)
            count = len(args) - len(prim.params)
            return apply(prim, tuple(map(_lift, args[:count])), args[count:])
        inputs = tuple(map(_lift, args[:n]))  # map, not a generator: no frame per input
        if check is not None:
            check(prim, *map(_SHAPE, inputs))
        params = args[n:]
        return apply(prim, inputs, _params(prim, params) if wanted and len(params) < wanted else params)

    return record


def _params(prim: Primitive, given: tuple) -> tuple:
    """A call's params, with the kind's defaults for those left out (sum(x) is sum(x, None, False))."""
    missing = len(prim.params) - len(given)
    return given + prim.defaults[len(prim.defaults) - missing:] if missing > 0 else given


def _recording(prim: Primitive) -> Callable[..., Node]:
    if prim.kind.elementwise and prim.n_inputs == 1 and prim.differentiable and not prim.params:
        record: Callable[..., Node] = _unary(prim)
    elif prim.kind.elementwise and prim.n_inputs == 2:
        record = _binary(prim)
    else:
        record = _recorder(prim)
    record.__name__ = record.__qualname__ = prim.name
    record.__doc__ = f"Record {prim.name} ({prim.kind.name})."
    return record


# --- Recording: the graph namespace -------------------------------------------------------

RECORDING: dict[str, Callable[..., Node]] = {
    name: record for prim in PRIMITIVES.values() for record in (_recording(prim),) for name in prim.names}
globals().update(RECORDING)
globals().update((name, value) for name, value in vars(primitives).items() if isinstance(value, Primitive))
_index, _transpose = RECORDING["index"], RECORDING["transpose"]


def eye(n: int, m: int) -> Node:
    """An identity matrix as a constant node (rules use it: the trace rule)."""
    return constant(B.xp.eye(n, m, dtype=B.dtype))


def zeros_like(x: Any) -> Node:
    return constant(B.xp.zeros(x.shape, dtype=B.dtype))


def checked_index(x: Node, key: tuple) -> Node:
    """x[key] with an error that names the shape when an index is out of range."""
    shape = x.shape
    if len([k for k in key if k is not None]) > len(shape):
        raise ValueProblem(f"too many indices ({len(key)}) for a tensor of shape {shape}",
                           f"it has {len(shape)} dimension{'s' if len(shape) != 1 else ''}")
    for axis, k in enumerate(key):
        if isinstance(k, int) and not -shape[axis] <= k < shape[axis]:
            raise ValueProblem(f"index {k} is out of range for dimension {axis} of size {shape[axis]}",
                               f"use an index from 0 to {shape[axis] - 1} (or negative, from the end)")
    return _index(x, key)


# --- The numeric namespace: the same names on raw arrays -------------------------------------

def _with_defaults(prim: Primitive) -> Callable[..., Any]:
    forward = prim.forward
    if not prim.defaults:
        return forward
    wanted = len(prim.params)
    return lambda x, *params: forward(x, *params) if len(params) == wanted else forward(x, *_params(prim, params))


def _numeric() -> dict[str, Callable[..., Any]]:
    table = {name: _with_defaults(prim) for prim in PRIMITIVES.values() for name in prim.names}
    return table | dict(eye=lambda n, m: B.xp.eye(n, m, dtype=B.dtype),
                        zeros_like=lambda x: B.xp.zeros(x.shape, dtype=B.dtype))


numeric = SimpleNamespace(**_numeric())
# Rebuilt when the array library changes, after primitives.py has pointed the records at it (registered first).
B.on_switch(lambda xp: numeric.__dict__.update(_numeric()))


# --- Node arithmetic ---------------------------------------------------------------------------

def _reflected(fn: Callable[[Any, Any], Node]) -> Callable[[Any, Any], Node]:
    return lambda self, other: fn(other, self)


def _operators() -> dict[str, Any]:
    """Node's operators (graph.py declares them): the recording functions themselves, with no call between."""
    table: dict[str, Any] = {
        "__getitem__": lambda self, key: _index(self, key if isinstance(key, tuple) else (key,)),
        "T": property(lambda self: _transpose(self, None)),
    }
    for prim in PRIMITIVES.values():
        if prim.dunder:
            table[f"__{prim.dunder}__"] = RECORDING[prim.name]
            if prim.n_inputs == 2:
                table[f"__r{prim.dunder}__"] = _reflected(RECORDING[prim.name])
    return table


for _attribute, _method in _operators().items():
    setattr(Node, _attribute, _method)
