"""The primitives: how each is evaluated (through the backend) and recorded.

Each primitive is defined once here. From that one definition come two
namespaces with the same function names, which the derivative rules in
rules.py are written against:

- `numeric`: the functions on raw arrays (a first-order backward pass);
- this module's functions: the same operations recorded as graph nodes (a
  differentiable backward pass, for Hessians and symbolic derivatives).

The language's builtins (builtins.py) are made of these functions.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from ..errors import ShapeError, ValueProblem
from . import backend as B
from . import graph
from .graph import Node, Primitive, apply, constant, new_node

PRIMITIVES: dict[str, Primitive] = {}


def _define(name: str, forward: Callable[..., Any], n_inputs: int | None = 1, grad_fn: str | Callable[[Node], str] = "",
            broadcasts: bool = False, differentiable: bool = True) -> Primitive:
    prim = Primitive(name, forward, n_inputs, grad_fn or f"{name.capitalize()}Backward0", broadcasts, differentiable)
    PRIMITIVES[name] = prim
    return prim


def _is_literal(node: Node) -> bool:
    return node.op is None and not node.requires_grad and node.value.shape == ()


# Elementwise arithmetic, broadcasting like NumPy.
ADD = _define("add", operator.add, 2, "AddBackward0", broadcasts=True)
SUB = _define("sub", operator.sub, 2, lambda n: "RsubBackward1" if _is_literal(n.inputs[0]) else "SubBackward0",
              broadcasts=True)
MUL = _define("mul", operator.mul, 2, "MulBackward0", broadcasts=True)
DIV = _define("div", operator.truediv, 2, lambda n: "MulBackward0" if _is_literal(n.inputs[0]) else "DivBackward0",
              broadcasts=True)
POW = _define("pow", operator.pow, 2, lambda n: "PowBackward2" if _is_literal(n.inputs[0]) else (
    "PowBackward0" if _is_literal(n.inputs[1]) else "PowBackward1"), broadcasts=True)

# Primitives that are one function of the array library, called directly rather than through a
# wrapper (whose call cost 45 ns: a fifth of a scalar op); _bind points them at the library in use.
_LIBRARY: dict[Primitive, str] = {}


def _library(name: str, attr: str = "", n_inputs: int = 1, broadcasts: bool = False) -> Primitive:
    prim = _define(name, getattr(B.xp, attr or name), n_inputs, broadcasts=broadcasts)
    _LIBRARY[prim] = attr or name
    return prim


MAXIMUM = _library("maximum", n_inputs=2, broadcasts=True)
MINIMUM = _library("minimum", n_inputs=2, broadcasts=True)
ATAN2 = _library("atan2", "arctan2", 2, broadcasts=True)
CLIP = _define("clip", lambda x, lo, hi: B.xp.minimum(B.xp.maximum(x, lo), hi), 3,
               lambda n: "ClampBackward1" if _is_literal(n.inputs[1]) and _is_literal(n.inputs[2])
               else "ClampBackward0",
               broadcasts=True)
WHERE = _define("where", lambda c, x, y: B.xp.where(c != 0, x, y), 3, "WhereBackward0", broadcasts=True)
NEG = _define("neg", operator.neg, 1, "NegBackward0")

# Elementwise functions of one argument.
EXP = _library("exp")
LOG = _library("log")
LOG2 = _library("log2")
LOG10 = _library("log10")
SQRT = _library("sqrt")
SIN = _library("sin")
COS = _library("cos")
TAN = _library("tan")
ASIN = _library("asin", "arcsin")
ACOS = _library("acos", "arccos")
ATAN = _library("atan", "arctan")
SINH = _library("sinh")
COSH = _library("cosh")
TANH = _library("tanh")
ABS = _library("abs")
# 1/(1+exp(-x)) saturates cleanly to 0 and 1 in floating point; a primitive for speed and naming.
SIGMOID = _define("sigmoid", lambda x: 1.0 / (1.0 + B.xp.exp(-x)))
RELU = _define("relu", lambda x: B.xp.maximum(x, 0))
SOFTPLUS = _define("softplus", lambda x: B.xp.logaddexp(0, x))  # log(1 + e^x) without overflow
# Piecewise constant: gradient zero wherever it exists, as in PyTorch.
SIGN = _library("sign")
FLOOR = _library("floor")
CEIL = _library("ceil")
ROUND = _library("round")


def _as_float(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: fn(*args).astype(B.dtype)


# Comparisons and logic give 0/1 in the working dtype; they have no gradient (PyTorch: bool, no grad_fn).
LT = _define("lt", _as_float(operator.lt), 2, differentiable=False)
LE = _define("le", _as_float(operator.le), 2, differentiable=False)
GT = _define("gt", _as_float(operator.gt), 2, differentiable=False)
GE = _define("ge", _as_float(operator.ge), 2, differentiable=False)
EQ = _define("eq", _as_float(operator.eq), 2, differentiable=False)
NE = _define("ne", _as_float(operator.ne), 2, differentiable=False)
AND = _define("logical_and", _as_float(lambda x, y: B.xp.logical_and(x != 0, y != 0)), 2, differentiable=False)
OR = _define("logical_or", _as_float(lambda x, y: B.xp.logical_or(x != 0, y != 0)), 2, differentiable=False)
NOT = _define("logical_not", _as_float(lambda x: x == 0), 1, differentiable=False)


# Reductions: params (axis, keepdims); axis None reduces everything.
def _reduction_name(base: str, dim_suffix: str = "1", all_suffix: str = "0") -> Callable[[Node], str]:
    return lambda n: f"{base}Backward{all_suffix if n.params[0] is None else dim_suffix}"


def _norm(x: Any, axis: Any, keepdims: bool) -> Any:
    return B.xp.sqrt(B.xp.sum(x * x, axis=axis, keepdims=keepdims))


def _logsumexp(x: Any, axis: Any, keepdims: bool) -> Any:
    top = B.xp.max(x, axis=axis, keepdims=True)
    top = B.xp.where(B.xp.isfinite(top), top, 0)  # all -inf: log(0) = -inf, not NaN
    total = B.xp.log(B.xp.sum(B.xp.exp(x - top), axis=axis, keepdims=True)) + top
    return total if keepdims else B.xp.squeeze(total, axis=axis)


def _softmax(x: Any, axis: int) -> Any:
    shifted = B.xp.exp(x - B.xp.max(x, axis=axis, keepdims=True))
    return shifted / B.xp.sum(shifted, axis=axis, keepdims=True)


SUM = _define("sum", lambda x, axis, keepdims: B.xp.sum(x, axis=axis, keepdims=keepdims), 1, _reduction_name("Sum"))
MEAN = _define("mean", lambda x, axis, keepdims: B.xp.mean(x, axis=axis, keepdims=keepdims), 1, _reduction_name("Mean"))
PROD = _define("prod", lambda x, axis, keepdims: B.xp.prod(x, axis=axis, keepdims=keepdims), 1, _reduction_name("Prod"))
MAX = _define("max", lambda x, axis, keepdims: B.xp.max(x, axis=axis, keepdims=keepdims), 1,
              _reduction_name("Max", "0", "1"))
MIN = _define("min", lambda x, axis, keepdims: B.xp.min(x, axis=axis, keepdims=keepdims), 1,
              _reduction_name("Min", "0", "1"))
NORM = _define("norm", _norm, 1, "LinalgVectorNormBackward0")
LOGSUMEXP = _define("logsumexp", _logsumexp, 1, "LogsumexpBackward0")
SOFTMAX = _define("softmax", _softmax, 1, "SoftmaxBackward0")


# Shapes and indexing.
def _sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast result back to `shape` (undo NumPy broadcasting)."""
    if x.shape == shape:
        return x
    total = B.xp.sum(x, axis=B.summed_axes(x.shape, shape), keepdims=True)
    return B.xp.reshape(total, shape)


def _scatter(g: Any, key: tuple, shape: tuple[int, ...]) -> Any:
    out = B.xp.zeros(shape, dtype=g.dtype)
    out[key] = g
    return out


def _index_name(node: Node) -> str:
    key = node.params[0]
    if all(isinstance(k, int) or k == slice(None) for k in key) and any(isinstance(k, int) for k in key):
        return "SelectBackward0"
    return "SliceBackward0"


RESHAPE = _define("reshape", lambda x, shape: B.xp.reshape(x, shape), 1, "ViewBackward0")
TRANSPOSE = _define("transpose", lambda x, axes: B.xp.transpose(x, axes), 1,
                    lambda n: "PermuteBackward0" if n.params[0] is None else "TransposeBackward0")
BROADCAST_TO = _define("broadcast_to", lambda x, shape: B.xp.broadcast_to(x, shape), 1, "ExpandBackward0")
SUM_TO = _define("sum_to", _sum_to, 1, "SumBackward1")
INDEX = _define("index", lambda x, key: x[key], 1, _index_name)
SCATTER = _define("scatter", _scatter, 1, "IndexPutBackward0")
def _stack(*xs: Any) -> Any:
    B.check_size((len(xs), *xs[0].shape), "the stacked tensor")  # [x, x, x]: each within the limit, not all
    return B.xp.stack(xs)


STACK = _define("stack", _stack, None, "StackBackward0")

# Linear algebra.
_MATMUL_NAMES = {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0", (1, 2): "SqueezeBackward4"}
MATMUL = _define("matmul", operator.matmul, 2,
                 lambda n: _MATMUL_NAMES.get((n.inputs[0].ndim, n.inputs[1].ndim), "UnsafeViewBackward0"))
TRACE = _define("trace", lambda x: B.xp.trace(x, axis1=-2, axis2=-1), 1, "TraceBackward0")
DET = _define("det", lambda x: B.xp.linalg.det(x), 1, "LinalgDetBackward0")
INV = _define("inv", lambda x: B.xp.linalg.inv(x), 1, "LinalgInvExBackward0")


# --- Recording: the graph namespace -------------------------------------------------------

def _lift(x: Any) -> Node:
    return x if isinstance(x, Node) else constant(x)


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

    record.__name__ = prim.name
    record.__doc__ = f"Record {prim.name} (elementwise, broadcasting)."
    return record


_SYMBOLS = {"add": "'+'", "sub": "'-'", "mul": "'*'", "div": "'/'", "pow": "'^'"}


def broadcast_shape(prim: Primitive, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape, or a ShapeError naming both shapes; checks the size limit."""
    try:
        shape = B.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(s) for s in shapes)
        raise ShapeError(
            f"shapes {listed} do not broadcast in {_SYMBOLS.get(prim.name, prim.name)}",
            "each dimension, counted from the right, must be equal or 1 (NumPy broadcasting)",
        ) from None
    B.check_size(shape, f"the result of {prim.name}")
    return shape


def _unary(prim: Primitive) -> Callable[[Any], Node]:
    """A fast recorder for elementwise functions of one argument (they cannot fail on shapes)."""

    def record(x: Any) -> Node:
        if x.__class__ is not Node:
            x = _lift(x)
        return new_node(prim.forward(x.value), prim, (x,), (), graph.recording and x.requires_grad)

    record.__name__ = prim.name
    record.__doc__ = f"Record {prim.name} (elementwise)."
    return record


def _recorder(prim: Primitive) -> Callable[..., Node]:
    n = prim.n_inputs

    def record(*args: Any) -> Node:
        if n is None:
            return apply(prim, tuple(_lift(a) for a in args))
        return apply(prim, tuple(_lift(a) for a in args[:n]), tuple(args[n:]))

    record.__name__ = prim.name
    record.__doc__ = f"Record {prim.name}."
    return record


add, sub, mul, div, power = (_binary(p) for p in (ADD, SUB, MUL, DIV, POW))
maximum, minimum, atan2 = (_binary(p) for p in (MAXIMUM, MINIMUM, ATAN2))
lt, le, gt, ge, eq, ne = (_binary(p) for p in (LT, LE, GT, GE, EQ, NE))
logical_and, logical_or = _binary(AND), _binary(OR)
_ELEMENTWISE = (NEG, EXP, LOG, LOG2, LOG10, SQRT, SIN, COS, TAN, ASIN, ACOS, ATAN, SINH, COSH, TANH, ABS, SIGMOID,
                RELU, SOFTPLUS, SIGN, FLOOR, CEIL, ROUND)
ELEMENTWISE_UNARY = frozenset(p.name for p in _ELEMENTWISE)
(neg, exp, log, log2, log10, sqrt, sin, cos, tan, asin, acos, atan, sinh, cosh, tanh, abs_, sigmoid, relu,
 softplus, sign, floor, ceil, round_) = (_unary(p) for p in _ELEMENTWISE)
logical_not = _recorder(NOT)
(reshape, transpose, broadcast_to, sum_to, index, scatter, stack, trace, det, inv, softmax) = (_recorder(p) for p in (
    RESHAPE, TRANSPOSE, BROADCAST_TO, SUM_TO, INDEX, SCATTER, STACK, TRACE, DET, INV, SOFTMAX))
_sum, _mean, _prod, _max, _min, _normr, _lse = (_recorder(p) for p in (SUM, MEAN, PROD, MAX, MIN, NORM, LOGSUMEXP))


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Node:  # noqa: A001  (the language's name)
    return _sum(x, axis, keepdims)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Node:
    return _mean(x, axis, keepdims)


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Node:
    return _prod(x, axis, keepdims)


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Node:  # noqa: A001
    return _max(x, axis, keepdims)


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Node:  # noqa: A001
    return _min(x, axis, keepdims)


def norm(x: Any, axis: Any = None, keepdims: bool = False) -> Node:
    return _normr(x, axis, keepdims)


def logsumexp(x: Any, axis: Any = None, keepdims: bool = False) -> Node:
    return _lse(x, axis, keepdims)


def clip(x: Any, lo: Any, hi: Any) -> Node:
    x, lo, hi = _lift(x), _lift(lo), _lift(hi)
    broadcast_shape(CLIP, x.shape, lo.shape, hi.shape)
    return apply(CLIP, (x, lo, hi))


def where(c: Any, x: Any, y: Any) -> Node:
    c, x, y = _lift(c), _lift(x), _lift(y)
    broadcast_shape(WHERE, c.shape, x.shape, y.shape)
    return apply(WHERE, (c, x, y))


def matmul(x: Any, y: Any) -> Node:
    x, y = _lift(x), _lift(y)
    matmul_shape(x.shape, y.shape)
    return apply(MATMUL, (x, y))


def matmul_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of a @ b, or a ShapeError that says which dimensions disagree."""
    if not a or not b:
        raise ShapeError(f"matrix product of shapes {a} and {b}: '@' needs at least one dimension on each side",
                         "use '*' to multiply by a scalar")
    inner_a, inner_b = a[-1], (b[0] if len(b) == 1 else b[-2])
    if inner_a != inner_b:
        raise ShapeError(
            f"matrix product of shapes {a} and {b}: inner dimensions {inner_a} and {inner_b} differ",
            "the last dimension of the left side must equal the "
            + ("length of the right side" if len(b) == 1 else "second-to-last of the right side")
            + "; transpose one side (x.T) or check the shapes",
        )
    batch_a, batch_b = a[:-2], b[:-2]
    try:
        batch = B.broadcast_shapes(batch_a, batch_b)
    except ValueError:
        raise ShapeError(f"matrix product of shapes {a} and {b}: batch dimensions do not broadcast", "") from None
    shape = batch + (a[-2:-1] if len(a) > 1 else ()) + (b[-1:] if len(b) > 1 else ())
    B.check_size(shape, "the matrix product")
    return shape


def eye(n: int, m: int) -> Node:
    """An identity matrix as a constant node (rules use it: the trace rule)."""
    return constant(B.xp.eye(n, m, dtype=B.dtype))


def zeros_like(x: Any) -> Node:
    return constant(B.xp.zeros(x.shape, dtype=B.dtype))


# --- The numeric namespace: the same names on raw arrays -------------------------------------

def _numeric() -> dict[str, Callable[..., Any]]:
    return {name: prim.forward for name, prim in PRIMITIVES.items()} | dict(
        power=POW.forward, abs_=ABS.forward, round_=ROUND.forward,
        sum=lambda x, axis=None, keepdims=False: SUM.forward(x, axis, keepdims),
        mean=lambda x, axis=None, keepdims=False: MEAN.forward(x, axis, keepdims),
        prod=lambda x, axis=None, keepdims=False: PROD.forward(x, axis, keepdims),
        max=lambda x, axis=None, keepdims=False: MAX.forward(x, axis, keepdims),
        min=lambda x, axis=None, keepdims=False: MIN.forward(x, axis, keepdims),
        norm=lambda x, axis=None, keepdims=False: NORM.forward(x, axis, keepdims),
        logsumexp=lambda x, axis=None, keepdims=False: LOGSUMEXP.forward(x, axis, keepdims),
        eye=lambda n, m: B.xp.eye(n, m, dtype=B.dtype),
        zeros_like=lambda x: B.xp.zeros(x.shape, dtype=B.dtype),
    )


numeric = SimpleNamespace(**_numeric())


def _bind(xp: Any) -> None:
    """Point the library's primitives, and the numeric namespace, at `xp`'s functions."""
    for prim, attr in _LIBRARY.items():
        prim.forward = getattr(xp, attr)
    numeric.__dict__.update(_numeric())


B.on_switch(_bind)


# --- Node arithmetic ---------------------------------------------------------------------------

def _reflected(fn: Callable[[Any, Any], Node]) -> Callable[[Any, Any], Node]:
    return lambda self, other: fn(other, self)


Node.__add__ = add  # type: ignore[assignment]
Node.__radd__ = _reflected(add)  # type: ignore[assignment]
Node.__sub__ = sub  # type: ignore[assignment]
Node.__rsub__ = _reflected(sub)  # type: ignore[assignment]
Node.__mul__ = mul  # type: ignore[assignment]
Node.__rmul__ = _reflected(mul)  # type: ignore[assignment]
Node.__truediv__ = div  # type: ignore[assignment]
Node.__rtruediv__ = _reflected(div)  # type: ignore[assignment]
Node.__pow__ = power  # type: ignore[assignment]
Node.__rpow__ = _reflected(power)  # type: ignore[assignment]
Node.__matmul__ = matmul  # type: ignore[assignment]
Node.__rmatmul__ = _reflected(matmul)  # type: ignore[assignment]
Node.__neg__ = neg  # type: ignore[assignment]
Node.__getitem__ = lambda self, key: index(self, key if isinstance(key, tuple) else (key,))  # type: ignore[assignment]
Node.T = property(lambda self: transpose(self, None))  # type: ignore[attr-defined]


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
    return index(x, key)


# Last: every primitive above gets its derivative rules as soon as the primitives exist.
from . import rules as _rules  # noqa: E402, F401
