"""Every primitive, declared once: one `Primitive(...)` record each.

A record says what the primitive is called and what kind it is, how it is
evaluated (through the backend, so --device can switch libraries), PyTorch's
name for its backward node, its derivative rule for each input (written
against a namespace `ns`, see rules.py) and which values those rules read, how
it batches, how `diff` folds and prints it, and, where a program calls it by
name, its builtin's help line. Every table of the engine and the language is
made from these records (`PRIMITIVES`, at the bottom): the recording functions
and `numeric` (ops.py), the batched namespace (batching.py), the builtins
(program/builtins.py), and symbolic's folds and printers. Adding a primitive
is adding its record here, plus its finite-difference check (tests/test_rules.py).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

from ..errors import ShapeError, ValueProblem
from . import backend as B
from .graph import ELEMENTWISE_BATCH, OWN_BATCH, REDUCTION_BATCH, Kind, Node, Primitive
from .rules import (
    RULES,
    EachInput,
    EachLayer,
    EachOperand,
    EachPart,
    cholesky_vjp,
    count,
    cumprod_vjp,
    det_vjp,
    expand,
    extremum_vjp,
    index_vjp,
    inverse_permutation,
    matmul_vjp,
    norm_vjp,
    piecewise_constant,
    pow_exponent,
    prod_vjp,
    solve_matrix_vjp,
    swap,
    trace_vjp,
)

ELEMENTWISE = Kind("elementwise", inputs="x", elementwise=True, batching=ELEMENTWISE_BATCH, builtin="elementwise")
BROADCASTING = Kind("broadcasting", inputs="x y", elementwise=True, broadcasts=True, batching=ELEMENTWISE_BATCH)
# 0/1 in the working dtype, with no gradient (PyTorch: bool, no grad_fn).
COMPARISON = Kind("comparison", inputs="x y", elementwise=True, batching=ELEMENTWISE_BATCH)
LOGIC = Kind("logic", inputs="x y", elementwise=True, batching=ELEMENTWISE_BATCH)
# axis None reduces everything.
REDUCTION = Kind("reduction", inputs="x", params=("axis", "keepdims"), defaults=(None, False),
                 batching=REDUCTION_BATCH, builtin="reduction over all entries or an axis")
ALONG_AXIS = Kind("along an axis", inputs="x", params=("axis",))
SHAPE = Kind("shape", inputs="x")
LINEAR_ALGEBRA = Kind("linear algebra", inputs="x")


# --- shapes: checked before anything is evaluated -------------------------------------------------

def broadcast_shape(prim: Primitive, *shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The broadcast shape, or a ShapeError naming both shapes; checks the size limit."""
    try:
        shape = B.broadcast_shapes(*shapes)
    except ValueError:
        listed = " and ".join(str(s) for s in shapes)
        raise ShapeError(
            f"shapes {listed} do not broadcast in {repr(prim.operator) if prim.operator else prim.name}",
            "each dimension, counted from the right, must be equal or 1 (NumPy broadcasting)",
        ) from None
    B.check_size(shape, f"the result of {prim.name}")
    return shape


def matmul_shape(prim: Primitive, a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of a @ b, or a ShapeError that says which dimensions disagree."""
    if not a or not b:
        raise ShapeError(f"matrix product of shapes {a} and {b}: {prim.operator!r} needs at least one dimension on "
                         "each side", "use '*' to multiply by a scalar")
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


def _matrix(prim: Primitive, shape: tuple[int, ...]) -> None:
    if len(shape) < 2:
        raise ValueProblem(f"{prim.name} needs a matrix, got shape {shape}", "check the shape, e.g. with eval")


def _square(prim: Primitive, shape: tuple[int, ...]) -> None:
    if len(shape) < 2 or shape[-1] != shape[-2]:
        raise ValueProblem(f"{prim.name} needs a square matrix, got shape {shape}", "check the shape, e.g. with eval")


# --- PyTorch's names for backward nodes that depend on the node -----------------------------------

def _is_literal(node: Node) -> bool:
    return node.op is None and not node.requires_grad and node.value.shape == ()


def _reduction_name(base: str, dim_suffix: str = "1", all_suffix: str = "0") -> Callable[[Node], str]:
    return lambda n: f"{base}Backward{all_suffix if n.params[0] is None else dim_suffix}"


def _index_name(node: Node) -> str:
    key = node.params[0]
    if len(key) == 1 and isinstance(key[0], Row):  # u, v = W: PyTorch iterates a tensor by unbind()
        return "UnbindBackward0"
    if any(isinstance(k, tuple) for k in key):  # an array index or a mask (read as the entries it picks)
        return "IndexBackward0"
    if all(isinstance(k, int) or k == slice(None) or k is Ellipsis for k in key) and any(
            isinstance(k, int) for k in key):
        return "SelectBackward0"
    if any(k is None for k in key) and all(k is None or k == slice(None) or k is Ellipsis for k in key):
        return "UnsqueezeBackward0"  # x[None]
    return "SliceBackward0"


_MATMUL_NAMES = {(2, 2): "MmBackward0", (2, 1): "MvBackward0", (1, 1): "DotBackward0", (1, 2): "SqueezeBackward4"}


# --- evaluations that are more than one library function ------------------------------------------

def _as_float(fn: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *args: fn(*args).astype(B.dtype)


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


def _sum_to(x: Any, shape: tuple[int, ...]) -> Any:
    """Sum a broadcast result back to `shape` (undo NumPy broadcasting)."""
    if x.shape == shape:
        return x
    total = B.xp.sum(x, axis=B.summed_axes(x.shape, shape), keepdims=True)
    return B.xp.reshape(total, shape)


def _scatter(g: Any, key: tuple, shape: tuple[int, ...]) -> Any:
    out = B.xp.zeros(shape, dtype=g.dtype)
    if any(isinstance(k, tuple) for k in key):
        B.xp.add.at(out, key, g)  # an entry picked twice (x[[0, 0]]) gets both gradients, as index_add
    else:
        out[key] = g
    return out


def _stack(*xs: Any) -> Any:
    B.check_size((len(xs), *xs[0].shape), "the stacked tensor")  # [x, x, x]: each within the limit, not all
    return B.xp.stack(xs)


# --- the records ----------------------------------------------------------------------------------
# A string for the evaluation names the array library's function, called directly (no wrapper).

# Arithmetic: the language's operators, broadcasting like NumPy.
ADD = Primitive("add", BROADCASTING, operator.add, (
    lambda ns, g, ans, x, y: g,
    lambda ns, g, ans, x, y: g,
), reads="", operator="+", dunder="add")
SUB = Primitive("sub", BROADCASTING, operator.sub, (
    lambda ns, g, ans, x, y: g,
    lambda ns, g, ans, x, y: -g,
), reads="", grad_fn=lambda n: "RsubBackward1" if _is_literal(n.inputs[0]) else "SubBackward0",
    operator="-", dunder="sub")
MUL = Primitive("mul", BROADCASTING, operator.mul, (
    lambda ns, g, ans, x, y: g * y,
    lambda ns, g, ans, x, y: g * x,
), reads="x y", operator="*", dunder="mul")
DIV = Primitive("div", BROADCASTING, operator.truediv, (
    lambda ns, g, ans, x, y: g / y,
    lambda ns, g, ans, x, y: -g * ans / y,
), reads="y ans", grad_fn=lambda n: "MulBackward0" if _is_literal(n.inputs[0]) else "DivBackward0",
    operator="/", dunder="truediv")
POW = Primitive("pow", BROADCASTING, operator.pow, (
    # 0 where y = 0 (d/dx x^0 = 0, also at x = 0, where x^(y-1) is infinite).
    lambda ns, g, ans, x, y: ns.where(ns.eq(y, 0), 0, g * y * x ** (y - 1)),
    pow_exponent,
), reads="x y ans", grad_fn=lambda n: "PowBackward2" if _is_literal(n.inputs[0]) else (
    "PowBackward0" if _is_literal(n.inputs[1]) else "PowBackward1"),
    operator="^", dunder="pow", builtin="x^y (NumPy's power, PyTorch's pow)", aliases=("power",))

# Elementwise functions of two or three inputs.
MAXIMUM = Primitive("maximum", BROADCASTING, "maximum", (
    lambda ns, g, ans, x, y: g * (ns.gt(x, y) + 0.5 * ns.eq(x, y)),
    lambda ns, g, ans, x, y: g * (ns.lt(x, y) + 0.5 * ns.eq(x, y)),
), reads="a b ans", inputs="a b", builtin="elementwise larger of a and b")
MINIMUM = Primitive("minimum", BROADCASTING, "minimum", (
    lambda ns, g, ans, x, y: g * (ns.lt(x, y) + 0.5 * ns.eq(x, y)),
    lambda ns, g, ans, x, y: g * (ns.gt(x, y) + 0.5 * ns.eq(x, y)),
), reads="a b ans", inputs="a b", builtin="elementwise smaller of a and b")
# At (0, 0) these are NaN, where PyTorch has 0: a guard there would print in every `diff` of atan2.
ATAN2 = Primitive("atan2", BROADCASTING, "arctan2", (
    lambda ns, g, ans, y, x: g * x / (x * x + y * y),
    lambda ns, g, ans, y, x: -g * y / (x * x + y * y),
), reads="y x ans", inputs="y x", builtin="elementwise angle of (x, y)")
CLIP = Primitive("clip", BROADCASTING, lambda x, lo, hi: B.xp.minimum(B.xp.maximum(x, lo), hi), (
    lambda ns, g, ans, x, lo, hi: g * ns.ge(x, lo) * ns.le(x, hi),
    lambda ns, g, ans, x, lo, hi: g * ns.lt(x, lo) * ns.le(lo, hi),
    lambda ns, g, ans, x, lo, hi: g * ns.logical_or(ns.gt(x, hi), ns.gt(lo, hi)),
), reads="x lo hi ans", inputs="x lo hi",
    grad_fn=lambda n: "ClampBackward1" if _is_literal(n.inputs[1]) and _is_literal(n.inputs[2]) else "ClampBackward0",
    builtin="x limited to [lo, hi]")
WHERE = Primitive("where", BROADCASTING, lambda c, x, y: B.xp.where(c != 0, x, y), (
    None,
    lambda ns, g, ans, c, x, y: ns.where(c, g, 0),
    lambda ns, g, ans, c, x, y: ns.where(c, 0, g),
), reads="cond a b ans", inputs="cond a b", builtin="a where cond is non-zero, else b")

# Elementwise functions of one argument.
NEG = Primitive("neg", ELEMENTWISE, operator.neg, (
    lambda ns, g, ans, x: -g,
), reads="", operator="-", dunder="neg", builtin=None)
EXP = Primitive("exp", ELEMENTWISE, "exp", (lambda ns, g, ans, x: g * ans,), reads="ans",
                fold=math.exp, latex="e^{{{}}}")
LOG = Primitive("log", ELEMENTWISE, "log", (lambda ns, g, ans, x: g / x,), reads="x",
                fold=math.log, latex=r"\log\left({}\right)", also=("ln",))  # ln: as courses write it
LOG2 = Primitive("log2", ELEMENTWISE, "log2", (lambda ns, g, ans, x: g / (x * math.log(2)),), reads="x",
                 fold=math.log2)
LOG10 = Primitive("log10", ELEMENTWISE, "log10", (lambda ns, g, ans, x: g / (x * math.log(10)),), reads="x",
                  fold=math.log10)
LOG1P = Primitive("log1p", ELEMENTWISE, "log1p", (lambda ns, g, ans, x: g / (1 + x),), reads="x",
                  fold=math.log1p, grad_fn="Log1PBackward0")
SQRT = Primitive("sqrt", ELEMENTWISE, "sqrt", (lambda ns, g, ans, x: g / (2 * ans),), reads="ans",
                 fold=math.sqrt, latex=r"\sqrt{{{}}}")
SIN = Primitive("sin", ELEMENTWISE, "sin", (lambda ns, g, ans, x: g * ns.cos(x),), reads="x",
                fold=math.sin, latex=r"\sin\left({}\right)")
COS = Primitive("cos", ELEMENTWISE, "cos", (lambda ns, g, ans, x: -g * ns.sin(x),), reads="x",
                fold=math.cos, latex=r"\cos\left({}\right)")
TAN = Primitive("tan", ELEMENTWISE, "tan", (lambda ns, g, ans, x: g * (1 + ans * ans),), reads="ans",
                fold=math.tan, latex=r"\tan\left({}\right)")
ASIN = Primitive("asin", ELEMENTWISE, "arcsin", (lambda ns, g, ans, x: g / ns.sqrt(1 - x * x),), reads="x",
                 fold=math.asin, latex=r"\arcsin\left({}\right)")
ACOS = Primitive("acos", ELEMENTWISE, "arccos", (lambda ns, g, ans, x: -g / ns.sqrt(1 - x * x),), reads="x",
                 fold=math.acos, latex=r"\arccos\left({}\right)")
ATAN = Primitive("atan", ELEMENTWISE, "arctan", (lambda ns, g, ans, x: g / (1 + x * x),), reads="x",
                 fold=math.atan, latex=r"\arctan\left({}\right)")
SINH = Primitive("sinh", ELEMENTWISE, "sinh", (lambda ns, g, ans, x: g * ns.cosh(x),), reads="x",
                 fold=math.sinh, latex=r"\sinh\left({}\right)")
COSH = Primitive("cosh", ELEMENTWISE, "cosh", (lambda ns, g, ans, x: g * ns.sinh(x),), reads="x",
                 fold=math.cosh, latex=r"\cosh\left({}\right)")
TANH = Primitive("tanh", ELEMENTWISE, "tanh", (lambda ns, g, ans, x: g * (1 - ans * ans),), reads="ans",
                 fold=math.tanh, latex=r"\tanh\left({}\right)")
ABS = Primitive("abs", ELEMENTWISE, "abs", (lambda ns, g, ans, x: g * ns.sign(x),), reads="x",
                fold=abs, latex=r"\left|{}\right|", aliases=("abs_",))
# 1/(1+exp(-x)) saturates cleanly to 0 and 1 in floating point; a primitive for speed and naming.
SIGMOID = Primitive("sigmoid", ELEMENTWISE, lambda x: 1.0 / (1.0 + B.xp.exp(-x)), (
    lambda ns, g, ans, x: g * ans * (1 - ans),
), reads="ans", fold=lambda v: 1 / (1 + math.exp(-v)), latex=r"\sigma\left({}\right)",
    also=("σ",))  # σ: as courses write the sigmoid
RELU = Primitive("relu", ELEMENTWISE, lambda x: B.xp.maximum(x, 0), (lambda ns, g, ans, x: g * ns.gt(x, 0),),
                 reads="x", fold=lambda v: max(v, 0.0))
SOFTPLUS = Primitive("softplus", ELEMENTWISE, lambda x: B.xp.logaddexp(0, x), (  # log(1 + e^x) without overflow
    lambda ns, g, ans, x: g * ns.sigmoid(x),
), reads="x", fold=lambda v: math.log1p(math.exp(v)))
SIGN = Primitive("sign", ELEMENTWISE, "sign", (piecewise_constant,), reads="",
                 fold=lambda v: float((v > 0) - (v < 0)))
FLOOR = Primitive("floor", ELEMENTWISE, "floor", (piecewise_constant,), reads="", fold=math.floor)
CEIL = Primitive("ceil", ELEMENTWISE, "ceil", (piecewise_constant,), reads="", fold=math.ceil)
ROUND = Primitive("round", ELEMENTWISE, "round", (piecewise_constant,), reads="", aliases=("round_",))

# Comparisons and logic: no rules, so no gradient.
LT = Primitive("lt", COMPARISON, _as_float(operator.lt), None, fold=operator.lt, text="<", latex="<")
LE = Primitive("le", COMPARISON, _as_float(operator.le), None, fold=operator.le, text="<=", latex=r"\le")
GT = Primitive("gt", COMPARISON, _as_float(operator.gt), None, fold=operator.gt, text=">", latex=">")
GE = Primitive("ge", COMPARISON, _as_float(operator.ge), None, fold=operator.ge, text=">=", latex=r"\ge")
EQ = Primitive("eq", COMPARISON, _as_float(operator.eq), None, fold=operator.eq, text="==", latex="=")
NE = Primitive("ne", COMPARISON, _as_float(operator.ne), None, fold=operator.ne, text="!=", latex=r"\ne")
AND = Primitive("logical_and", LOGIC, _as_float(lambda x, y: B.xp.logical_and(x != 0, y != 0)), None,
                fold=lambda a, b: a != 0 and b != 0, text="and", latex=r"\land")
OR = Primitive("logical_or", LOGIC, _as_float(lambda x, y: B.xp.logical_or(x != 0, y != 0)), None,
               fold=lambda a, b: a != 0 or b != 0, text="or", latex=r"\lor")
NOT = Primitive("logical_not", LOGIC, _as_float(lambda x: x == 0), None, inputs="x", text="not", latex=r"\lnot")

# Reductions: params (axis, keepdims).
SUM = Primitive("sum", REDUCTION, lambda x, axis, keepdims: B.xp.sum(x, axis=axis, keepdims=keepdims), (
    lambda ns, g, ans, x, axis, keepdims: expand(ns, g, x, axis, keepdims),
), reads="", grad_fn=_reduction_name("Sum"), latex=r"\sum")
MEAN = Primitive("mean", REDUCTION, lambda x, axis, keepdims: B.xp.mean(x, axis=axis, keepdims=keepdims), (
    lambda ns, g, ans, x, axis, keepdims: expand(ns, g, x, axis, keepdims) / count(x, axis),
), reads="", grad_fn=_reduction_name("Mean"))
PROD = Primitive("prod", REDUCTION, lambda x, axis, keepdims: B.xp.prod(x, axis=axis, keepdims=keepdims),
                 (prod_vjp,), reads="x ans", grad_fn=_reduction_name("Prod"))
MAX = Primitive("max", REDUCTION, lambda x, axis, keepdims: B.xp.max(x, axis=axis, keepdims=keepdims),
                (extremum_vjp,), reads="x ans", grad_fn=_reduction_name("Max", "0", "1"))
MIN = Primitive("min", REDUCTION, lambda x, axis, keepdims: B.xp.min(x, axis=axis, keepdims=keepdims),
                (extremum_vjp,), reads="x ans", grad_fn=_reduction_name("Min", "0", "1"))
NORM = Primitive("norm", REDUCTION, _norm, (norm_vjp,), reads="x ans", grad_fn="LinalgVectorNormBackward0",
                builtin=None)  # its builtin takes ord= too (program/builtins.py)
LOGSUMEXP = Primitive("logsumexp", REDUCTION, _logsumexp, (
    lambda ns, g, ans, x, axis, keepdims: expand(ns, g, x, axis, keepdims) * ns.exp(x - expand(ns, ans, x, axis,
                                                                                              keepdims)),
), reads="x ans", grad_fn="LogsumexpBackward0")
SOFTMAX = Primitive("softmax", ALONG_AXIS, _softmax, (
    lambda ns, g, ans, x, axis: ans * (g - ns.sum(g * ans, axis, True)),
), reads="x ans", batching=OWN_BATCH)

# Shapes and indexing.
RESHAPE = Primitive("reshape", SHAPE, lambda x, shape: B.xp.reshape(x, shape), (
    lambda ns, g, ans, x, shape: ns.reshape(g, x.shape),
), reads="", params=("shape",), grad_fn="ViewBackward0", batching=OWN_BATCH)
TRANSPOSE = Primitive("transpose", SHAPE, lambda x, axes: B.xp.transpose(x, axes), (
    lambda ns, g, ans, x, axes: ns.transpose(g, inverse_permutation(axes, x.ndim)),
), reads="", params=("axes",), batching=OWN_BATCH,
    grad_fn=lambda n: "PermuteBackward0" if n.params[0] is None else "TransposeBackward0")
BROADCAST_TO = Primitive("broadcast_to", SHAPE, lambda x, shape: B.xp.broadcast_to(x, shape), (
    lambda ns, g, ans, x, shape: ns.sum_to(g, x.shape),
), reads="", params=("shape",), grad_fn="ExpandBackward0", batching=OWN_BATCH)
SUM_TO = Primitive("sum_to", SHAPE, _sum_to, (
    lambda ns, g, ans, x, shape: ns.broadcast_to(g, x.shape),
), reads="", params=("shape",), grad_fn="SumBackward1", batching=OWN_BATCH)
INDEX = Primitive("index", SHAPE, lambda x, key: x[key], (index_vjp,), reads="", params=("key",),
                  grad_fn=_index_name, batching=OWN_BATCH)
SCATTER = Primitive("scatter", SHAPE, _scatter, (
    lambda ns, g, ans, x, key, shape: ns.index(g, key),
), reads="", params=("key", "shape"), grad_fn="IndexPutBackward0", batching=OWN_BATCH)
STACK = Primitive("stack", SHAPE, _stack, EachInput(lambda ns, g, ans, i: ns.index(g, (i,))), reads="xs ans",
                  inputs="*xs", batching=OWN_BATCH)

# Linear algebra.
MATMUL = Primitive("matmul", LINEAR_ALGEBRA, operator.matmul, (matmul_vjp(0), matmul_vjp(1)), reads="x y",
                   inputs="x y", check=matmul_shape, operator="@", dunder="matmul",
                   grad_fn=lambda n: _MATMUL_NAMES.get((n.inputs[0].ndim, n.inputs[1].ndim), "UnsafeViewBackward0"),
                   batching=OWN_BATCH)
TRACE = Primitive("trace", LINEAR_ALGEBRA, lambda x: B.xp.trace(x, axis1=-2, axis2=-1), (trace_vjp,), reads="",
                  check=_matrix, batching=OWN_BATCH, builtin="sum of the diagonal")
# d det(X) = det(X) tr(X^-1 dX); d X^-1 = -X^-1 dX X^-1.
DET = Primitive("det", LINEAR_ALGEBRA, lambda x: B.xp.linalg.det(x), (det_vjp,), reads="x ans", check=_square,
                grad_fn="LinalgDetBackward0", batching=OWN_BATCH, builtin="determinant")
INV = Primitive("inv", LINEAR_ALGEBRA, lambda x: B.xp.linalg.inv(x), (
    lambda ns, g, ans, x: -(swap(ns, ans) @ g @ swap(ns, ans)),
), reads="x ans", check=_square, grad_fn="LinalgInvExBackward0", batching=OWN_BATCH,
    builtin="matrix inverse")


# --- Statements and indexing (issue 25): a % b, a // b, and writing into a tensor (y[0] = 5) ---------

class Indices(tuple):
    """An array index inside a key (x[[0, 2]], a mask's entries): hashable as a key's parts must be (symbolic
    interns nodes by them), an integer array to the library, even when empty (a mask that picks nothing)."""

    __slots__ = ()

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        return B.host.asarray(tuple(self), dtype=B.host.intp)


class Row(int):
    """The row index of an unpacking (`u, v = W`): an int to every library, named as PyTorch's unbind."""

    __slots__ = ()


def _index_put(x: Any, value: Any, key: tuple) -> Any:
    out = B.xp.array(x, copy=True)
    out[key] = value
    return out


# Python's and PyTorch's remainder (the divisor's sign); d/db = -floor(a/b), as PyTorch's RemainderBackward0.
REMAINDER = Primitive("remainder", BROADCASTING, "remainder", (
    lambda ns, g, ans, x, y: g,
    lambda ns, g, ans, x, y: -g * ns.floor(x / y),
), reads="a b", inputs="a b", operator="%", dunder="mod", fold=lambda a, b: a % b, builtin=None,
    grad_fn=lambda n: "RemainderBackward0" if _is_literal(n.inputs[1]) else "RemainderBackward1")  # x % 2, x % y
# Integer-valued, gradient zero: the numbers of torch.div(a, b, rounding_mode='floor') (PyTorch's `//` operator
# refuses backward: 'derivative for aten::floor_divide is not implemented'), its result a constant here.
FLOOR_DIVIDE = Primitive("floor_divide", BROADCASTING, "floor_divide", None, inputs="a b", operator="//",
                         dunder="floordiv", fold=lambda a, b: a // b, builtin=None)
# y[key] = value as a new tensor: the gradient reaches the value written, and y only where it was not written.
INDEX_PUT = Primitive("index_put", SHAPE, _index_put, (
    lambda ns, g, ans, x, v, key: ns.index_put(g, ns.zeros_like(ns.index(g, key)), key),
    lambda ns, g, ans, x, v, key: ns.sum_to(ns.index(g, key), v.shape),
), reads="", inputs="x value", params=("key",), batching=OWN_BATCH,
    grad_fn=lambda n: "IndexPutBackward0" if any(isinstance(k, tuple) for k in n.params[0]) else "CopySlices")


# --- Functions of issue 25: the names NumPy and PyTorch users write (one block, kept apart for merging) ----
# Kinds whose members carry parameters of their own; their builtins are written in program/builtins.py.
STATISTIC = Kind("statistic", inputs="x", params=("axis", "keepdims", "ddof"), defaults=(None, False, 0),
                 batching=OWN_BATCH)
LOSS = Kind("loss", inputs="x y", params=("reduction",))
# Integer positions in the working dtype, with no gradient (PyTorch: int64, no grad_fn).
POSITION = Kind("position", inputs="x", params=("axis",), batching=OWN_BATCH)


def _erf(x: Any) -> Any:
    """math.erf entry by entry (correctly rounded, as SciPy's): NumPy has none, and CuPy's is in cupyx.scipy,
    which gradcalc does not require, so on a device the values make a trip to the host and back."""
    entries = B.host.vectorize(math.erf, otypes=[B.dtype])(B.to_host(x))
    return entries[()] if B.xp is B.host else B.asarray(entries)


_SQRT_HALF = 1 / math.sqrt(2)
_NORMAL_DENSITY = 1 / math.sqrt(2 * math.pi)


def _gelu(x: Any) -> Any:
    return 0.5 * x * (1 + _erf(x * _SQRT_HALF))


def _reduce_losses(losses: Any, reduction: str) -> Any:
    if reduction == "none":
        return losses
    return B.xp.sum(losses) if reduction == "sum" else B.xp.mean(losses)


def _cross_entropy(z: Any, p: Any, reduction: str, indices: bool) -> Any:
    """PyTorch's cross_entropy over the last axis (classes) of (C,) or (N, C) scores; p: probabilities."""
    return _reduce_losses(-B.xp.sum(p * (z - _logsumexp(z, -1, True)), axis=-1), reduction)


def _loss_gradient(ns: Any, g: Any, losses_shape: tuple[int, ...], reduction: str) -> Any:
    """The output gradient as a gradient of each loss: spread over the losses for 'mean' and 'sum'."""
    if reduction == "none":
        return g
    return g / math.prod(losses_shape) if reduction == "mean" else g


def _cross_entropy_scores(ns: Any, g: Any, ans: Any, z: Any, p: Any, reduction: str, indices: bool) -> Any:
    per = _loss_gradient(ns, g, z.shape[:-1], reduction)
    if reduction == "none":
        per = ns.reshape(per, per.shape + (1,))
    if indices:  # one-hot rows sum to 1: softmax(z) - p, as the gradient is written
        return per * (ns.softmax(z, z.ndim - 1) - p)
    return per * (ns.softmax(z, z.ndim - 1) * ns.sum(p, z.ndim - 1, True) - p)


def _cross_entropy_targets(ns: Any, g: Any, ans: Any, z: Any, p: Any, reduction: str, indices: bool) -> Any:
    per = _loss_gradient(ns, g, z.shape[:-1], reduction)
    if reduction == "none":
        per = ns.reshape(per, per.shape + (1,))
    return -per * ns.log_softmax(z, z.ndim - 1)


def _mse_vjp(sign: float) -> Callable[..., Any]:
    def rule(ns: Any, g: Any, ans: Any, x: Any, y: Any, reduction: str) -> Any:
        return _loss_gradient(ns, g, x.shape, reduction) * (2.0 * sign) * (x - y)

    return rule


def _logdet(x: Any, absolute: bool) -> Any:
    sign, logabs = B.xp.linalg.slogdet(x)
    if absolute:
        return logabs
    return B.xp.where(sign > 0, logabs, B.xp.where(sign == 0, -B.xp.inf, B.xp.nan))  # log of a negative: NaN


def _cholesky(x: Any) -> Any:
    """The factor of (A + Aᵀ)/2, A itself where A is symmetric: a factorization reads one triangle, so a finite
    difference of one entry (gradcheck's) would see half of the symmetric gradient the rule gives, or none."""
    try:
        return B.xp.linalg.cholesky(0.5 * x + 0.5 * B.xp.swapaxes(x, -1, -2))
    except B.host.linalg.LinAlgError:  # NumPy's (CuPy raises NumPy's too, where it checks at all)
        raise ValueProblem("cholesky: the matrix is not positive definite",
                           "cholesky needs a symmetric positive definite matrix, e.g. A @ A.T + eye(n)") from None


def _solve_shapes(prim: Primitive, a: tuple[int, ...], b: tuple[int, ...]) -> None:
    if len(a) != 2 or a[0] != a[1]:
        raise ValueProblem(f"solve needs a square matrix first, got shape {a}", "solve(A, b) solves A x = b")
    if len(b) not in (1, 2) or b[0] != a[0]:
        raise ShapeError(f"solve(A, b): b of shape {b} does not match A of shape {a}",
                         f"b must be a vector of length {a[0]} or a matrix with {a[0]} rows")


def _argextremum(fn: str) -> Callable[..., Any]:
    return lambda x, axis: getattr(B.xp, fn)(x, axis=axis).astype(B.dtype)


# Elementwise functions of one argument.
EXPM1 = Primitive("expm1", ELEMENTWISE, "expm1", (lambda ns, g, ans, x: g * (ans + 1),), reads="ans",
                  fold=math.expm1)
EXP2 = Primitive("exp2", ELEMENTWISE, "exp2", (lambda ns, g, ans, x: g * ans * math.log(2),), reads="ans",
                 fold=lambda v: 2.0**v)
RSQRT = Primitive("rsqrt", ELEMENTWISE, lambda x: 1 / B.xp.sqrt(x), (
    lambda ns, g, ans, x: -0.5 * g * ans * ans * ans,
), reads="ans", fold=lambda v: 1 / math.sqrt(v), latex=r"\frac{{1}}{{\sqrt{{{}}}}}")
ERF = Primitive("erf", ELEMENTWISE, _erf, (
    lambda ns, g, ans, x: g * (2 / math.sqrt(math.pi)) * ns.exp(-x * x),
), reads="x", fold=math.erf, latex=r"\operatorname{{erf}}\left({}\right)")
# The exact (erf) form, PyTorch's default; d gelu = Φ(x) + x φ(x).
GELU = Primitive("gelu", ELEMENTWISE, _gelu, (
    lambda ns, g, ans, x: g * (0.5 * (1 + ns.erf(x * _SQRT_HALF)) + _NORMAL_DENSITY * x * ns.exp(-0.5 * x * x)),
), reads="x", fold=lambda v: 0.5 * v * (1 + math.erf(v * _SQRT_HALF)), builtin=None)  # approximate=: builtins.py
SILU = Primitive("silu", ELEMENTWISE, lambda x: x / (1.0 + B.xp.exp(-x)), (
    lambda ns, g, ans, x: g * ns.sigmoid(x) * (1 + x * (1 - ns.sigmoid(x))),
), reads="x", fold=lambda v: v / (1 + math.exp(-v)))
# With a parameter each (PyTorch's alpha and negative_slope): their builtins pass it.
ELU = Primitive("elu", ELEMENTWISE, lambda x, alpha: B.xp.where(x > 0, x, alpha * B.xp.expm1(B.xp.minimum(x, 0))), (
    lambda ns, g, ans, x, alpha: g * ns.where(ns.gt(x, 0), 1, ans + alpha),  # alpha·e^x = ans + alpha below 0
), reads="x ans", params=("alpha",), builtin=None)
LEAKY_RELU = Primitive("leaky_relu", ELEMENTWISE, lambda x, slope: B.xp.where(x > 0, x, slope * x), (
    lambda ns, g, ans, x, slope: g * ns.where(ns.gt(x, 0), 1, slope),
), reads="x", params=("negative_slope",), grad_fn="LeakyReluBackward0", builtin=None)

# Statistics: NumPy's ddof (0 by default: the population variance); program/builtins.py refuses correction=.
VAR = Primitive("var", STATISTIC, lambda x, axis, keepdims, ddof: B.xp.var(x, axis=axis, keepdims=keepdims,
                                                                            ddof=ddof), (
    lambda ns, g, ans, x, axis, keepdims, ddof: expand(ns, g, x, axis, keepdims) * (x - ns.mean(x, axis, True))
    * (2.0 / (count(x, axis) - ddof)),
), reads="x", builtin=None)
STD = Primitive("std", STATISTIC, lambda x, axis, keepdims, ddof: B.xp.std(x, axis=axis, keepdims=keepdims,
                                                                            ddof=ddof), (
    lambda ns, g, ans, x, axis, keepdims, ddof: expand(ns, g, x, axis, keepdims) * (x - ns.mean(x, axis, True))
    / ((count(x, axis) - ddof) * expand(ns, ans, x, axis, keepdims)),
), reads="x ans", builtin=None)

# norm(x, ord=1) and ord=inf: vector norms of every entry or along axes (ord=2 is NORM), PyTorch's node for all.
VECTOR_NORM = Kind("vector norm", inputs="x", params=("axis", "keepdims", "ord"), batching=OWN_BATCH)
NORM_ORD = Primitive("norm_ord", VECTOR_NORM, lambda x, axis, keepdims, order: (
    B.xp.sum if order == 1 else B.xp.max)(B.xp.abs(x), axis=axis, keepdims=keepdims), (
    lambda ns, g, ans, x, axis, keepdims, order: expand(ns, g, x, axis, keepdims) * ns.sign(x) if order == 1
    else extremum_vjp(ns, g, ans, ns.abs(x), axis, keepdims) * ns.sign(x),  # ties share, as amax's
), reads="x ans", grad_fn="LinalgVectorNormBackward0", builtin=None)

# Shapes: squeeze and unsqueeze are reshapes under PyTorch's names (params: the new shape, the axis given).
SQUEEZE = Primitive("squeeze", SHAPE, lambda x, shape, axis: B.xp.reshape(x, shape), (
    lambda ns, g, ans, x, shape, axis: ns.reshape(g, x.shape),
), reads="", params=("shape", "axis"), batching=OWN_BATCH, builtin=None,
    grad_fn=lambda n: "SqueezeBackward0" if n.params[1] is None else (
        "SqueezeBackward2" if isinstance(n.params[1], tuple) else "SqueezeBackward1"))
UNSQUEEZE = Primitive("unsqueeze", SHAPE, lambda x, shape, axis: B.xp.reshape(x, shape), (
    lambda ns, g, ans, x, shape, axis: ns.reshape(g, x.shape),
), reads="", params=("shape", "axis"), batching=OWN_BATCH, builtin=None)
FLIP = Primitive("flip", SHAPE, lambda x, axes: B.xp.flip(x, axis=axes), (
    lambda ns, g, ans, x, axes: ns.flip(g, axes),
), reads="", params=("axes",), batching=OWN_BATCH, builtin=None)
CONCATENATE = Primitive("concatenate", SHAPE, lambda *args: B.xp.concatenate(args[:-1], axis=args[-1]),
                        EachPart(), reads="", inputs="*xs", params=("axis",), grad_fn="CatBackward0",
                        batching=OWN_BATCH, builtin=None)
# stack([a, b], axis=1): the tensor literal's stack (STACK) along another axis, under PyTorch's name for both.
STACK_AXIS = Primitive("stack_axis", SHAPE, lambda *args: B.xp.stack(args[:-1], axis=args[-1]), EachLayer(),
                       reads="", inputs="*xs", params=("axis",), grad_fn="StackBackward0", batching=OWN_BATCH,
                       builtin=None)
CUMSUM = Primitive("cumsum", ALONG_AXIS, lambda x, axis: B.xp.cumsum(x, axis=axis), (
    lambda ns, g, ans, x, axis: ns.flip(ns.cumsum(ns.flip(g, (axis,)), axis), (axis,)),
), reads="", batching=OWN_BATCH, builtin=None)
CUMPROD = Primitive("cumprod", ALONG_AXIS, lambda x, axis: B.xp.cumprod(x, axis=axis), (cumprod_vjp,),
                    reads="x ans", batching=OWN_BATCH, builtin=None)
ARGMAX = Primitive("argmax", POSITION, _argextremum("argmax"), None, builtin=None)
ARGMIN = Primitive("argmin", POSITION, _argextremum("argmin"), None, builtin=None)

# Losses.
LOG_SOFTMAX = Primitive("log_softmax", ALONG_AXIS, lambda x, axis: x - _logsumexp(x, axis, True), (
    lambda ns, g, ans, x, axis: g - ns.exp(ans) * ns.sum(g, axis, True),
), reads="ans", grad_fn="LogSoftmaxBackward0", batching=OWN_BATCH, builtin=None)
# Targets as probabilities (class indices become one-hot rows in program/builtins.py; `indices` names the node).
CROSS_ENTROPY = Primitive("cross_entropy", LOSS, _cross_entropy, (
    _cross_entropy_scores, _cross_entropy_targets,
), reads="x y", params=("reduction", "indices"), batching=OWN_BATCH, builtin=None,
    grad_fn=lambda n: "NllLossBackward0" if n.params[1] else (
        "DivBackward1" if n.params[0] == "mean" else "NegBackward0"))
MSE_LOSS = Primitive("mse_loss", LOSS, lambda x, y, reduction: _reduce_losses((x - y) ** 2, reduction), (
    _mse_vjp(1.0), _mse_vjp(-1.0),
), reads="x y", batching=OWN_BATCH, grad_fn="MseLossBackward0", builtin=None)

# Linear algebra. einsum's spec is explicit ("ij,j->i"), each letter once per operand (program/builtins.py).
EINSUM = Primitive("einsum", LINEAR_ALGEBRA, lambda *args: B.xp.einsum(args[-1], *args[:-1]), EachOperand(),
                   reads="xs", inputs="*xs", params=("spec",), batching=OWN_BATCH, builtin=None)
SOLVE = Primitive("solve", LINEAR_ALGEBRA, lambda a, b: B.xp.linalg.solve(a, b), (
    lambda ns, g, ans, a, b: solve_matrix_vjp(ns, ns.solve(swap(ns, a), g), ans),
    lambda ns, g, ans, a, b: ns.solve(swap(ns, a), g),
), reads="a ans", inputs="a b", check=_solve_shapes, grad_fn="LinalgSolveExBackward0", batching=OWN_BATCH,
    builtin="x with A x = b (b a vector or a matrix of columns)")


def _logdet_vjp(ns: Any, g: Any, ans: Any, x: Any, absolute: bool) -> Any:
    """d log|det X| = X^-T; logdet's NaN (det < 0) has gradient zero there, as PyTorch's where() gives it."""
    if not absolute:
        sign, _ = B.xp.linalg.slogdet(x.value if isinstance(x, Node) else x)
        g = g * B.xp.asarray(sign >= 0, dtype=B.dtype)
    return ns.reshape(g, g.shape + (1, 1)) * swap(ns, ns.inv(x))


# log det X (NaN where det < 0, as PyTorch's logdet), or log |det X| (slogdet's second value): d = X^-T.
LOGDET = Primitive("logdet", LINEAR_ALGEBRA, _logdet, (_logdet_vjp,), reads="x", params=("absolute",), check=_square,
                   batching=OWN_BATCH, builtin=None,  # torch.logdet is a where() around slogdet
                   grad_fn=lambda n: "LinalgSlogdetBackward0" if n.params[0] else "WhereBackward0")
CHOLESKY = Primitive("cholesky", LINEAR_ALGEBRA, _cholesky, (cholesky_vjp,), reads="ans", check=_square,
                     grad_fn="LinalgCholeskyExBackward0", batching=OWN_BATCH,
                     builtin="lower-triangular L with L L^T = A (A symmetric positive definite)")

# Every record above, in the order written: the one list every table is made from.
PRIMITIVES: dict[str, Primitive] = {p.name: p for p in list(globals().values()) if isinstance(p, Primitive)}
RULES.update((p, p.vjps) for p in PRIMITIVES.values() if p.differentiable)


def _bind(xp: Any) -> None:
    """Point the primitives that are one library function at `xp`'s own."""
    for prim in PRIMITIVES.values():
        if prim.library:
            prim.forward = getattr(xp, prim.library)


B.on_switch(_bind)
