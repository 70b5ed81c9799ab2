"""`gradcalc export`: a program as a readable Python module that computes its value and gradient.

The run's graph says which primitive made each value from which others; each primitive's evaluation is
written with NumPy's functions and Python's operators, and so is each derivative rule (written against a
namespace `ns`, rules.py). Both are run here on `Code` values instead of arrays: a Code is an expression's
source text (a tree of calls and operators) together with its value at the program's point, which NumPy
hands it back through its dispatch protocols (`__array_ufunc__`, `__array_function__`), so that shapes,
axes and broadcasting are those of the run. The primitives' own evaluations and rules are the source: no
second table says how to write `sigmoid` or its derivative. What an evaluation or a rule computes from a
value's *numbers* (prod's rule looks for zeros) cannot be written straight-line: a Code refuses to become a
number, and the primitive is refused by name.

A function's statements are the program's: each variable assigned is one line under its name (a name
assigned again gets a suffix, so the backward pass can still read the first), and an expression used more
than once (an intermediate a rule reads) gets a line of its own (`t1`). Loops are unrolled and functions
inlined, as the run recorded them. A decision the run made on a value computed from the leaves (a branch,
a loop's count, an index) holds only at those values: NumPy and PyTorch modules assert it, JAX's (traced,
under jit) cannot, and the program is refused.
"""

from __future__ import annotations

import io
import itertools
import keyword
import math
import operator
import os
import textwrap
import tokenize
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .. import __version__
from ..engine import graph
from ..engine.backend import numpy as np  # the host array library: the run it writes out is on the CPU
from ..engine.graph import Literal, Node, Primitive
from ..engine.primitives import PRIMITIVES, Indices
from ..errors import GradcalcError, Pos
from ..language import syntax as S
from ..program.api import Run
from . import perturb

TARGETS = ("numpy", "torch", "jax")
LINE_LENGTH = 88  # ruff's and black's default: the module passes an unconfigured `ruff check`


# torch functions whose numbers are axes or conditions, written as Python numbers (swapaxes(A, -1, -2), not tensors)
_PLAIN_NUMBERS = frozenset({"torch.where", "torch.swapaxes", "torch.moveaxis", "torch.transpose"})


class NotExportable(GradcalcError):
    """A program, or a primitive in it, that export cannot write as straight-line code."""

    kind = "NotExportable"


class _Unwritable(Exception):
    """Raised inside a traced evaluation or rule that needs a value's numbers (internal: becomes NotExportable)."""


# --- Code: an expression's source and its value at the program's point ------------------------------

_ATOM, _PRIMARY, _POWER, _UNARY, _TERM, _ARITH, _COMPARE = 16, 15, 13, 12, 11, 10, 5
_BINARY = {"+": _ARITH, "-": _ARITH, "*": _TERM, "/": _TERM, "//": _TERM, "%": _TERM, "@": _TERM, "**": _POWER}
_COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
                "!=": operator.ne}
_OPERATIONS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
    "%": operator.mod, "@": operator.matmul, "**": operator.pow, **_COMPARISONS}
_sequence = iter(range(1 << 62)).__next__  # creation order: a topological order of the codes


class Code:
    """An expression: its kind ('name', 'const', 'call', 'binary', 'unary', 'compare', 'index', 'method',
    'attr'), its parts, and its value at the program's point (what shapes and broadcasting are read from)."""

    __slots__ = ("anchor", "kind", "parts", "seq", "value")
    __array_priority__ = 1000

    def __init__(self, kind: str, parts: tuple, value: Any, anchor: str | None = None) -> None:
        self.kind = kind
        self.parts = parts
        self.value = value
        self.anchor = anchor  # a name to give it a line of its own under (a program variable, a gradient)
        self.seq = _sequence()

    # What the rules read: shapes, never numbers.
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.value))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def dtype(self) -> Any:
        return np.asarray(self.value).dtype

    @property
    def T(self) -> Code:  # NumPy's name
        return _attribute(self, "T", np.transpose(self.value))

    def astype(self, dtype: Any) -> Code:
        if self.kind == "const":
            return self
        return Code("method", (self, "astype", (dtype,)), np.asarray(self.value).astype(dtype))

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _Unwritable("it reads the values' numbers")

    __bool__ = __float__ = __int__ = __index__ = __iter__ = __len__ = __array__ = _refuse
    __hash__ = object.__hash__

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Code:
        if method != "__call__" or "out" in kwargs or not _public(ufunc):
            raise _Unwritable(f"np.{ufunc.__name__}.{method}")
        with np.errstate(all="ignore"):
            value = ufunc(*_values(inputs), **_values(kwargs))
        return Code("call", (f"np.{ufunc.__name__}", tuple(inputs), kwargs), value)

    def __array_function__(self, func: Any, types: Any, args: tuple, kwargs: dict) -> Code:
        path = _path(func)
        if func is np.where and isinstance(args[0], Code) and args[0].kind == "const":
            chosen = _lift(args[1] if args[0].parts[0] else args[2])  # a condition known when written
            shape = np.broadcast_shapes(*(np.shape(_values(a)) for a in args))
            if chosen.shape == shape:
                return chosen
        if path in _REDUCTIONS and kwargs.get("axis", 0) is None and kwargs.get("keepdims"):
            kwargs = {**kwargs, "axis": tuple(range(np.ndim(_values(args[0]))))}  # PyTorch wants the axes
        if func in (np.reshape, np.broadcast_to) and isinstance(args[0], Code) and \
                args[0].shape == tuple(args[1] if len(args) > 1 else kwargs.get("shape", ())):
            return args[0]  # to the shape it has
        if func is np.reshape and isinstance(args[0], Code) and args[0].kind == "call" and \
                args[0].parts[0] == "np.sum" and args[0].parts[2].get("keepdims") is True:
            x, axis = args[0].parts[1][0], args[0].parts[2].get("axis")
            dropped = np.sum(_values(x), axis=axis)
            if tuple(args[1]) == np.shape(dropped):  # sum_to's reshape drops the kept axes: sum without them
                axis = axis[0] if isinstance(axis, tuple) and len(axis) == 1 else axis
                return Code("call", ("np.sum", (x,), {"axis": axis}), dropped)
        if func is np.transpose:  # x.T for a matrix, its axes written out otherwise (as PyTorch wants them)
            x, axes = args[0], (args[1] if len(args) > 1 else kwargs.get("axes"))
            axes = tuple(reversed(range(x.ndim))) if axes is None else tuple(a % x.ndim for a in axes)
            if axes == (1, 0):
                return x.T
            args, kwargs = (x, axes), {}
        with np.errstate(all="ignore"):
            value = func(*_values(args), **_values(kwargs))
        if not isinstance(value, (np.ndarray, np.generic)):  # slogdet's pair: not one expression
            raise _Unwritable(f"{path} returns {type(value).__name__}")
        return Code("call", (path, tuple(args), kwargs), value)

    def __getitem__(self, key: Any) -> Code:
        key = key if isinstance(key, tuple) else (key,)
        return Code("index", (self, key), np.asarray(self.value)[_values(key)])


_REDUCTIONS = {"np.sum", "np.mean", "np.max", "np.min", "np.prod", "np.var", "np.std"}


def _public(ufunc: Any) -> bool:
    """Whether NumPy's namespace has the ufunc under its name (np.exp, not an internal one)."""
    return getattr(np, ufunc.__name__, None) is ufunc


def _attribute(base: Code, name: str, value: Any) -> Code:
    return Code("attr", (base, name), value)


def _values(item: Any) -> Any:
    """The values at the program's point of codes, inside tuples, lists and dicts."""
    if isinstance(item, Code):
        return item.value
    if type(item) in (tuple, list):
        return type(item)(_values(part) for part in item)
    if isinstance(item, dict):
        return {key: _values(value) for key, value in item.items()}
    return item


def _path(func: Any) -> str:
    """NumPy's public name for a function (np.sum, np.linalg.inv), or _Unwritable."""
    name = getattr(func, "__name__", "")
    if getattr(np, name, None) is func:
        return f"np.{name}"
    if getattr(np.linalg, name, None) is func:
        return f"np.linalg.{name}"
    raise _Unwritable(f"{getattr(func, '__module__', '?')}.{name}")


def const(number: Any) -> Code:
    """A number written as such."""
    number = number.item() if isinstance(number, np.generic) else number
    return Code("const", (number,), np.float64(number))


def _lift(x: Any) -> Code:
    if isinstance(x, Code):
        return x
    if isinstance(x, (int, float, np.generic)) or (isinstance(x, np.ndarray) and x.shape == ()):
        return const(x.item() if isinstance(x, (np.ndarray, np.generic)) else x)
    if isinstance(x, np.ndarray):
        return Code("array", (), x)
    raise _Unwritable(f"a {type(x).__name__} operand")


def _is(code: Code, number: float) -> bool:
    return code.kind == "const" and code.parts[0] == number and not isinstance(code.parts[0], bool)


def _binary(op: str, x: Any, y: Any) -> Code:
    a, b = _lift(x), _lift(y)
    if op not in ("@", "**"):  # an operator broadcasts by itself: np.broadcast_to(g, s) * y is g * y
        shape = np.broadcast_shapes(a.shape, b.shape)
        a, b = _unbroadcast(a, b.shape, shape), _unbroadcast(b, a.shape, shape)
    # What a rule's seed of 1 makes: g * y is y, and -g is -1 (a scalar seed: shapes are unchanged).
    if op == "*" and _is(a, 1) and b.shape == np.broadcast_shapes(a.shape, b.shape):
        return b
    if op in ("*", "/", "**") and _is(b, 1) and a.shape == np.broadcast_shapes(a.shape, b.shape):
        return a
    if op == "*" and (_is(a, -1) or _is(b, -1)) and a.kind != b.kind:  # -1 * c is -c
        other = b if _is(a, -1) else a
        if other.shape == np.broadcast_shapes(a.shape, b.shape):
            return _unary("-", other)
    with np.errstate(all="ignore"):
        value = _OPERATIONS[op](a.value, b.value)
    if a.kind == "const" and b.kind == "const" and np.isfinite(value):
        return const(float(value))
    if op == "!=" and _is(b, 0) and a.kind == "method" and a.parts[1] == "astype" and \
            a.parts[0].kind == "compare":
        return a.parts[0]  # (x > 0).astype(float) != 0 is x > 0
    return Code("compare" if op in _COMPARISONS else "binary", (op, a, b), value)


def _unbroadcast(code: Code, other: tuple[int, ...], shape: tuple[int, ...]) -> Code:
    """What np.broadcast_to(x, shape) stands for, where the operator's own broadcasting gives the shape."""
    if code.kind == "call" and code.parts[0] == "np.broadcast_to" and isinstance(code.parts[1][0], Code):
        inner = code.parts[1][0]
        if np.broadcast_shapes(inner.shape, other) == shape:
            return inner
    return code


def _unary(op: str, x: Code) -> Code:
    if x.kind == "const" and op == "-":
        return const(-x.parts[0])
    if x.kind == "unary" and op == "-" and x.parts[0] == "-":
        return x.parts[1]
    return Code("unary", (op, x), -x.value if op == "-" else ~np.asarray(x.value))


def _operators() -> None:
    for op in _BINARY:
        name = {"+": "add", "-": "sub", "*": "mul", "/": "truediv", "//": "floordiv", "%": "mod", "@": "matmul",
                "**": "pow"}[op]
        setattr(Code, f"__{name}__", lambda self, other, op=op: _binary(op, self, other))
        setattr(Code, f"__r{name}__", lambda self, other, op=op: _binary(op, other, self))
    for op, name in (("<", "lt"), ("<=", "le"), (">", "gt"), (">=", "ge"), ("==", "eq"), ("!=", "ne")):
        setattr(Code, f"__{name}__", lambda self, other, op=op: _binary(op, self, other))
    for op, name in (("-", "neg"), ("~", "invert")):
        setattr(Code, f"__{name}__", lambda self, op=op: _unary(op, self))


_operators()


# --- The namespace the rules run against: each primitive's evaluation, on codes ---------------------

def _gradient_scatter(g: Any, key: tuple, shape: tuple[int, ...]) -> Code:
    """index's rule (and scatter's evaluation): zeros with g added at key, through the module's helper."""
    g = _lift(g)
    return Code("call", ("_scatter", (g, _Key(key), tuple(shape)), {}),
                PRIMITIVES["scatter"].forward(g.value, key, shape))


def _write_into(x: Any, value: Any, key: tuple) -> Code:
    """index_put's evaluation (y[key] = value as a new tensor) and its rule's: through the module's helper
    (NumPy, PyTorch: a copy written into) or JAX's x.at[key].set(value)."""
    x, value = _lift(x), _lift(value)
    return Code("call", ("_index_put", (x, value, _Key(key)), {}),
                PRIMITIVES["index_put"].forward(x.value, value.value, key))


class _Key:
    """An index key as a call's argument (np.s_[0, 1:])."""

    __slots__ = ("key",)

    def __init__(self, key: tuple) -> None:
        self.key = key


class _Writer:
    """`ns` for the rules: every primitive by its names, evaluated on codes (NumPy dispatches to them)."""

    def __init__(self) -> None:
        self.table: dict[str, Callable[..., Any]] = {}
        for prim in PRIMITIVES.values():
            for name in prim.names:
                self.table[name] = _evaluation(prim)
        self.table.update(
            scatter=_gradient_scatter,
            index_put=_write_into,
            eye=lambda n, m: Code("call", ("np.eye", (n, m), {}), np.eye(n, m)),
            zeros_like=lambda x: Code("call", ("np.zeros_like", (_lift(x),), {}), np.zeros(np.shape(_values(x)))),
        )

    def __getattr__(self, name: str) -> Callable[..., Any]:
        try:
            return self.table[name]
        except KeyError:
            raise _Unwritable(f"ns.{name}") from None


def _evaluation(prim: Primitive) -> Callable[..., Any]:
    """The primitive's own evaluation, on codes: its NumPy calls come back as codes."""
    if prim.name == "scatter":
        return _gradient_scatter
    if prim.name == "index_put":
        return _write_into
    wanted = len(prim.params)
    forward = prim.forward

    def evaluate(*args: Any) -> Any:
        if prim.defaults and prim.n_inputs is not None and len(args) - prim.n_inputs < wanted:
            missing = wanted - (len(args) - prim.n_inputs)
            args = (*args, *prim.defaults[len(prim.defaults) - missing:])
        if not any(isinstance(a, Code) for a in args):
            raise _Unwritable(f"{prim.name} of numbers only")
        try:
            result = forward(*args)
        except _Unwritable:
            raise
        except GradcalcError:
            raise
        except Exception as exc:  # a host function (math.erf entry by entry), or a library error on a Code
            raise _Unwritable(f"{type(exc).__name__}: {exc}") from None
        if not isinstance(result, Code):
            raise _Unwritable(f"{prim.name} made a {type(result).__name__}")
        return result

    return evaluate


WRITER = _Writer()


# --- Rendering: codes as source text in one library's dialect ---------------------------------------

class Dialect:
    """How one library writes what NumPy writes: its module's name and the functions it names otherwise."""

    def __init__(self, name: str, prefix: str, renamed: dict[str, str], tensor_numbers: bool,
                 keywords: dict[tuple[str, str], str] | None = None) -> None:
        self.name = name
        self.prefix = prefix
        self.renamed = renamed
        self.keywords = keywords or {}  # (function, NumPy's keyword) → the library's
        self.tensor_numbers = tensor_numbers  # PyTorch's functions take tensors, not Python numbers

    def function(self, path: str) -> str:
        if path.startswith("_"):
            return path
        path = self.renamed.get(path, path)
        return self.prefix + path[2:] if path.startswith("np.") else path

    def dtype(self, dtype: Any) -> str:
        return f"{self.prefix}.{np.dtype(dtype).name}"

    def array(self, value: Any) -> str:
        """An array literal, laid out to fit the line: a row a line, a long row over several."""
        data = _layout(value.tolist(), 0)
        if self.name == "torch":
            return f"torch.tensor({data}, dtype=torch.float64)"
        return f"{self.prefix}.array({data})"

    def indices(self, entries: Sequence[int]) -> str:
        if self.name == "jax":  # JAX reads a list as several indices: an array is one index
            return f"jnp.array({list(entries)})"
        return repr(list(entries))


NUMPY = Dialect("numpy", "np", {}, False)
JAX = Dialect("jax", "jnp", {}, False)
TORCH = Dialect("torch", "torch", {"np.max": "torch.amax", "np.min": "torch.amin", "np.transpose": "torch.permute"},
                True, {("torch.var", "ddof"): "correction", ("torch.std", "ddof"): "correction",
                       ("torch.flip", "axis"): "dims", ("torch.trace", "axis1"): "dim1",
                       ("torch.trace", "axis2"): "dim2"})
DIALECTS = {"numpy": NUMPY, "torch": TORCH, "jax": JAX}


def _number(value: Any) -> str:
    if isinstance(value, bool):
        return repr(value)
    if isinstance(value, int):
        return repr(value)
    number = float(value)
    if math.isnan(number):
        return "float('nan')"
    if math.isinf(number):
        return "float('inf')" if number > 0 else "-float('inf')"
    return repr(number)


def _layout(item: Any, indent: int) -> str:
    """Nested lists of numbers as source at `indent`: on one line if it fits (a module-level constant's
    name takes ~16 columns), else a part a line, numbers wrapped."""
    flat = _number_list(item)
    if indent + len(flat) <= LINE_LENGTH - 24 or not isinstance(item, list):
        return flat
    pad = " " * (indent + 4)
    if item and not isinstance(item[0], list):
        lines = textwrap.wrap(", ".join(_number(x) for x in item), LINE_LENGTH - len(pad) - 1)
        return "[\n" + "".join(f"{pad}{line}\n" for line in lines[:-1]) + f"{pad}{lines[-1]},\n" + \
            " " * indent + "]"
    return "[\n" + "".join(f"{pad}{_layout(part, indent + 4)},\n" for part in item) + " " * indent + "]"


def _number_list(item: Any) -> str:
    if isinstance(item, list):
        return "[" + ", ".join(_number_list(part) for part in item) + "]"
    return _number(item)


class Renderer:
    """Codes as text: names for the codes that have lines of their own, the rest written inline."""

    def __init__(self, dialect: Dialect, names: dict[int, str], constants: Callable[[Any], str]) -> None:
        self.dialect = dialect
        self.names = names  # id(code) → its variable
        self.constant = constants  # an array that is no program value: a module-level constant's name

    def text(self, code: Code, inline: bool = False) -> str:
        return self._render(code, inline)[0]

    def _render(self, code: Code, inline: bool = False) -> tuple[str, int]:
        name = self.names.get(id(code))
        if name is not None and not inline:
            return name, _ATOM
        kind, parts = code.kind, code.parts
        if kind == "name":
            return parts[0], _ATOM
        if kind == "const":
            text = _number(parts[0])
            return text, (_UNARY if text.startswith("-") else _ATOM)
        if kind == "array":
            return self.constant(code.value), _ATOM
        if kind == "binary":
            op, a, b = parts
            level = _BINARY[op]
            if op == "**":
                left = self._operand(a, level + 1)
                right = self._operand(b, _UNARY)
            else:
                left = self._operand(a, level)
                right = self._operand(b, level + 1)
            return f"{left} {op} {right}", level
        if kind == "compare":
            op, a, b = parts
            return f"{self._operand(a, _COMPARE + 1)} {op} {self._operand(b, _COMPARE + 1)}", _COMPARE
        if kind == "unary":
            op, a = parts
            return f"{op}{self._operand(a, _POWER)}", _UNARY
        if kind == "index":
            base, key = parts
            return f"{self._operand(base, _PRIMARY)}[{self._key(key)}]", _PRIMARY
        if kind == "attr":
            base, attr = parts
            return f"{self._operand(base, _PRIMARY)}.{attr}", _PRIMARY
        if kind == "method":
            base, method, args = parts
            if method == "astype" and self.dialect.name != "torch":  # np.float64(x > 0): a Python bool's too
                return f"{self.dialect.dtype(args[0])}({self._render(base)[0]})", _PRIMARY
            if method == "astype":
                method = "to"
            return f"{self._operand(base, _PRIMARY)}.{method}({', '.join(self._argument(a) for a in args)})", _PRIMARY
        if kind == "call":
            path, args, kwargs = parts
            if path == "_index_put" and self.dialect.name == "jax":  # JAX's arrays are written by .at[]
                x, value, key = args
                return (f"{self._operand(x, _PRIMARY)}.at[{self._key(key.key)}].set({self._render(value)[0]})",
                        _PRIMARY)
            if path == "_stop":  # the value, with no gradient through it
                if self.dialect.name == "torch":
                    return f"{self._operand(args[0], _PRIMARY)}.detach()", _PRIMARY
                return f"jax.lax.stop_gradient({self._render(args[0])[0]})", _PRIMARY
            function = self.dialect.function(path)
            written = [self._argument(a, function) for a in args]
            kwargs = {key: (value[0] if key == "axis" and isinstance(value, tuple) and len(value) == 1 and
                            (function, key) not in self.dialect.keywords else value)
                      for key, value in kwargs.items()}  # axis=1, not axis=(1,) (torch.flip's dims stay a tuple)
            written += [f"{self.dialect.keywords.get((function, key), key)}={self._argument(value)}"
                        for key, value in kwargs.items()
                        if not (key == "axis" and value is None) and not (key == "keepdims" and value is False)]
            if function == "torch.trace":  # PyTorch's trace takes a matrix: the diagonal's sum, as NumPy's
                return f"torch.diagonal({', '.join(written)}).sum(-1)", _PRIMARY
            return f"{function}({', '.join(written)})", _PRIMARY
        raise AssertionError(kind)

    def _operand(self, code: Code, level: int) -> str:
        text, own = self._render(code)
        return text if own >= level else f"({text})"

    def _argument(self, item: Any, function: str = "") -> str:
        """An argument as source; torch's functions take tensors for numbers, but not where they are axes."""
        if isinstance(item, Code):
            if item.kind == "const" and self.dialect.tensor_numbers and function.startswith("torch.") \
                    and function not in _PLAIN_NUMBERS:
                return f"torch.tensor({_number(float(item.parts[0]))})"
            return self._render(item)[0]
        if isinstance(item, _Key):
            if self.dialect.name != "torch":
                return f"{self.dialect.prefix}.s_[{self._key(item.key)}]"
            return "(" + "".join(f"{self._python_key_part(part)}, " for part in item.key).rstrip(" ") + ")"
        if isinstance(item, (list, tuple)):
            inner = [self._argument(part) if not isinstance(part, Code) else self._argument(part, function)
                     for part in item]
            if isinstance(item, list) or (function and all(isinstance(p, Code) for p in item)):
                return "[" + ", ".join(inner) + "]"
            return "(" + ", ".join(inner) + ("," if len(inner) == 1 else "") + ")"
        if isinstance(item, (np.dtype, type)):
            return self.dialect.dtype(item)
        if isinstance(item, np.ndarray):
            return self.constant(item)
        if isinstance(item, (int, float, np.generic)) and not isinstance(item, bool):
            if self.dialect.tensor_numbers and function.startswith("torch.") and function not in _PLAIN_NUMBERS:
                return f"torch.tensor({_number(float(item))})"
            return _number(item)
        return repr(item)

    def _python_key_part(self, part: Any) -> str:
        """A key's part as a Python value, where PyTorch has no np.s_: slice(1, None), not 1:."""
        if isinstance(part, slice):
            return f"slice({part.start}, {part.stop}" + ("" if part.step is None else f", {part.step}") + ")"
        if part is Ellipsis:
            return "..."
        if isinstance(part, Indices):
            return f"torch.tensor({[int(i) for i in part]})"
        return "None" if part is None else str(int(part))

    def _key(self, key: tuple) -> str:
        parts = []
        for part in key:
            if isinstance(part, slice):
                start = "" if part.start is None else str(part.start)
                stop = "" if part.stop is None else str(part.stop)
                parts.append(f"{start}:{stop}" + ("" if part.step is None else f":{part.step}"))
            elif part is Ellipsis:
                parts.append("...")
            elif part is None:
                parts.append("None")
            elif isinstance(part, Indices):
                parts.append(self.dialect.indices([int(i) for i in part]))
            elif isinstance(part, Code):
                parts.append(self._render(part)[0])
            else:
                parts.append(str(int(part)))
        return ", ".join(parts)


# --- The program: its graph as codes, forward and backward -------------------------------------------

_RESERVED = {"np", "jnp", "jax", "torch", "f", "value_and_grad", "grads", "value", "float", "_scatter", "_index_put",
             "PATH"}


def parameter(name: str) -> str:
    """A leaf's name as f's parameter: its own, unless Python or the module has it (`lambda`, `f`, `np`)."""
    if name.isidentifier() and not keyword.iskeyword(name) and name not in _RESERVED:
        return name
    return f"{name}_" if f"{name}_".isidentifier() else "leaf"


class _Names:
    """Python names for the program's variables: each once (a name assigned again gets _1, _2), none a keyword."""

    def __init__(self, taken: Iterable[str], program: Iterable[str]) -> None:
        self.taken = set(taken) | _RESERVED
        self.program = set(program)  # the program's own names: a temporary takes none of them
        self.temporaries = 0

    def fresh(self, wanted: str | None) -> str:
        if wanted is None:
            while True:
                self.temporaries += 1
                name = f"t{self.temporaries}"
                if name not in self.taken and name not in self.program:
                    break
        else:
            base = wanted if wanted.isidentifier() and not keyword.iskeyword(wanted) else f"{wanted}_"
            if not base.isidentifier():
                base = "v"
            name, n = base, 0
            while name in self.taken:
                n += 1
                name = f"{base}_{n}"
        self.taken.add(name)
        return name


class Export:
    """A run written out: its leaves (parameters), constants, forward codes, decisions and gradients."""

    def __init__(self, run: Run, decisions: list[Node], of: str, wrt: list[str], to: str) -> None:
        self.run = run
        self.of = of
        self.wrt = wrt
        self.to = to
        output = run.node(of)
        self.output = output
        roots = [output, *decisions]
        order = _reached(roots)
        self.leaves = dict(run.state.leaves)  # every leaf is a parameter: f's signature is the program's
        leaf_ids = {id(node): name for name, node in self.leaves.items()}
        self.constants: dict[int, str] = {}  # id(code) → the module-level name of a constant's code
        self.codes: dict[int, Code] = {}
        constant_ids = {id(node): name for name, node in run.state.constants.items()}
        for name, node in self.leaves.items():
            self.codes[id(node)] = Code("name", (parameter(name),), node.value)
        for node in order:
            if id(node) in self.codes:
                continue
            if node.op is None:
                self.codes[id(node)] = self._constant(node, constant_ids.get(id(node)))
                continue
            inputs = [self.codes[id(x)] for x in node.inputs]
            try:
                code = _lift(_evaluation(node.op)(*inputs, *node.params))
            except _Unwritable as exc:
                raise _refused(node.op, "its evaluation", exc) from None
            if to != "numpy" and not node.requires_grad and any(x.requires_grad for x in node.inputs) and \
                    _truth(code) is None:  # no_grad, //, argmax: no gradient flows back, as in gradcalc
                code = Code("call", ("_stop", (code,), {}), code.value)
            if node.name is not None and id(node) not in leaf_ids:
                code = _anchored(code, node.name)
            self.codes[id(node)] = code
        self.value = self.codes[id(output)]
        self.forward_end = _sequence()  # codes made after this are the backward pass's
        self.guards = [(self.codes[id(node)], graph.host_value(node)) for node in decisions]
        self.gradients = self._backward(order) if to == "numpy" else {}

    def _constant(self, node: Node, name: str | None) -> Code:
        value = node.value
        if isinstance(node, Literal) or (value.shape == () and name is None):
            return const(node.number if isinstance(node, Literal) else value.item())
        label = name or (node.name.upper() if node.name else "C")
        code = Code("name", (label,), value)
        self.constants[id(code)] = label  # named when the module is written
        return code

    def _backward(self, order: list[Node]) -> dict[str, Code]:
        """Each --wrt leaf's gradient as codes: the rules, newest node first, as autodiff.backward runs them."""
        targets = {id(self.leaves[name]) for name in self.wrt}
        relevant: set[int] = set(targets)
        for node in order:  # the nodes a target leads to: only their rules run
            if node.op is not None and node.requires_grad and any(id(x) in relevant for x in node.inputs):
                relevant.add(id(node))
        grads: dict[int, Code] = {id(self.output): const(1.0)}
        for node in reversed(order):
            g = grads.pop(id(node), None) if id(node) not in targets else grads.get(id(node))
            if g is None or node.op is None:
                continue
            if node.name is not None:
                g = self._gradient_named(g, node.name)
            op = node.op
            ans = self.codes[id(node)]
            args = [*[self.codes[id(x)] for x in node.inputs], *node.params]
            for i, parent in enumerate(node.inputs):
                rule = op.vjps[i] if op.differentiable else None
                if rule is None or id(parent) not in relevant:
                    continue
                try:
                    contribution = _lift(rule(WRITER, g, ans, *args))
                    if op.broadcasts and contribution.shape != parent.value.shape:
                        contribution = WRITER.sum_to(contribution, parent.value.shape)
                except _Unwritable as exc:
                    raise _refused(op, "its derivative rule", exc) from None
                total = grads.get(id(parent))
                grads[id(parent)] = contribution if total is None else _binary("+", total, contribution)
        result = {}
        for name in self.wrt:
            node = self.leaves[name]
            g = grads.get(id(node))
            if g is None:  # no path: zero, of the leaf's shape (as grad says)
                g = Code("call", ("np.zeros_like", (self.codes[id(node)],), {}), np.zeros_like(node.value))
            result[name] = self._gradient_named(g, name)
        return result

    def _gradient_named(self, g: Code, name: str) -> Code:
        """A gradient under g_NAME; one that is a value of the forward pass (a·sin(b)'s for a) keeps that."""
        return _anchored(g, f"g_{name}") if g.seq > self.forward_end else g


def _anchored(code: Code, name: str) -> Code:
    """The code under a variable of its own; a name or a number needs none (a copy under it would be noise)."""
    if code.kind in ("name", "const") or code.anchor is not None:
        return code
    code.anchor = name
    return code


def _reached(roots: list[Node]) -> list[Node]:
    """Every node the roots are computed from, in creation order."""
    found: dict[int, Node] = {}
    stack = list(roots)
    while stack:
        node = stack.pop()
        if id(node) not in found:
            found[id(node)] = node
            stack.extend(node.inputs)
    return sorted(found.values(), key=lambda n: n.seq)


def _refused(prim: Primitive, what: str, exc: _Unwritable) -> NotExportable:
    other = "; --to torch and --to jax differentiate it themselves" if what == "its derivative rule" else ""
    return NotExportable(f"export cannot write {prim.name}: {what} is not straight-line array code ({exc})",
                         f"gradcalc grad computes it{other}; docs/commands.md (Exporting) lists what export "
                         "refuses")


# --- Statements: a function body from its roots ------------------------------------------------------

class _Body:
    """A function's lines: a line per code that has a name or is used more than once, in creation order."""

    def __init__(self, dialect: Dialect, names: _Names, module_names: dict[int, str],
                 constant: Callable[[Any], str]) -> None:
        self.names: dict[int, str] = dict(module_names)
        self.renderer = Renderer(dialect, self.names, constant)
        self.namer = names
        self.lines: list[str] = []

    def write(self, roots: Sequence[Code], guards: Sequence[tuple[Code, Any]] = ()) -> None:
        uses: dict[int, int] = {}
        found: dict[int, Code] = {}
        stack = list(roots) + [code for code, _ in guards]
        for code in stack:
            uses[id(code)] = uses.get(id(code), 0) + 1
        while stack:
            code = stack.pop()
            if id(code) in found:
                continue
            found[id(code)] = code
            for part in _children(code):
                uses[id(part)] = uses.get(id(part), 0) + 1
                stack.append(part)
        checks = {id(code): value for code, value in guards}
        for code in sorted(found.values(), key=lambda c: c.seq):
            if id(code) in self.names or code.kind in ("name", "const", "array"):
                pass
            elif code.anchor is not None or uses[id(code)] > 1 or (id(code) in checks and _truth(code) is None):
                name = self.namer.fresh(code.anchor)
                self.lines.append(f"{name} = {self.renderer.text(code, inline=True)}")
                self.names[id(code)] = name
            if id(code) in checks:
                self.lines.append(self._guard(code, checks[id(code)]))

    def _guard(self, code: Code, value: Any) -> str:
        """An assert that the run's decision holds: `assert x > 1` for a branch taken, `not (...)` for one not."""
        value = np.asarray(value)
        message = "PATH"  # the module's constant: the message every guard gives
        truth = _truth(code)
        if truth is not None and value.shape == ():
            condition = self.renderer.text(truth)
            return f"assert {condition}, {message}" if value.item() else f"assert not ({condition}), {message}"
        name = self.renderer.text(code)
        if value.shape == ():
            return f"assert {name} == {_number(value.item())}, {message}"
        if self.renderer.dialect.name == "torch":
            return f"assert torch.equal({name}, {self.renderer.dialect.array(value)}), {message}"
        return f"assert np.array_equal({name}, {NUMPY.array(value)}), {message}"

    def text(self, code: Code) -> str:
        return self.renderer.text(code)


def _truth(code: Code) -> Code | None:
    """The comparison inside a comparison's 0/1 (what a branch reads), or None."""
    if code.kind == "method" and code.parts[1] == "astype" and code.parts[0].kind == "compare" and code.ndim == 0:
        return code.parts[0]
    return None


def _children(code: Code) -> list[Code]:
    found: list[Code] = []

    def visit(item: Any) -> None:
        if isinstance(item, Code):
            found.append(item)
        elif isinstance(item, (tuple, list)):
            for part in item:
                visit(part)
        elif isinstance(item, dict):
            for part in item.values():
                visit(part)
        elif isinstance(item, _Key):
            visit(item.key)

    if code.kind != "name":
        visit(code.parts)
    return found


# --- The module ---------------------------------------------------------------------------------------

_HELPERS = {  # (library, name): a function the module defines where it calls it
    ("numpy", "_scatter"): '''
def _scatter(g, key, shape):
    """Zeros of `shape` with `g` added at `key`: the gradient of reading x[key]."""
    out = np.zeros(shape)
    np.add.at(out, key, g)
    return out
''',
    ("numpy", "_index_put"): '''
def _index_put(x, value, key):
    """A copy of `x` with `value` written at `key`: the program's x[key] = value."""
    out = np.array(x, dtype=np.float64)
    out[key] = value
    return out
''',
    ("torch", "_index_put"): '''
def _index_put(x, value, key):
    """A copy of `x` with `value` written at `key`: the program's x[key] = value."""
    out = x.clone()
    out[key] = value
    return out
''',
}


def helpers(to: str) -> str:
    """Every function a module in `to`'s library may define (what a test runs an expression with)."""
    return "\n".join(definition for (library, _), definition in _HELPERS.items() if library == to)


_IMPORTS = {
    "numpy": "import numpy as np",
    "torch": "import torch",
    "jax": 'import jax\nimport jax.numpy as jnp\n\njax.config.update("jax_enable_x64", True)  # the program\'s float64',
}


def write(run: Run, to: str, of: str | None, wrt: Sequence[str] | None, source_name: str) -> str:
    """The module: f (the program's value of `of`) and value_and_grad (it and its gradients)."""
    if to not in TARGETS:
        raise NotExportable(f"--to {to}: export writes numpy, torch or jax", "pick one of them")
    if run.dtype != "float64":
        raise NotExportable(f"--dtype {run.dtype}: export writes float64 code", "drop --dtype")
    if run.device != "cpu":
        raise NotExportable(f"--device {run.device}: export writes the module from a run on the CPU",
                            "drop --device (the module runs wherever its library does)")
    of = of or run.default_output
    output = run.node(of)
    wrt = list(wrt) if wrt else list(run.state.leaves)
    if not wrt:
        raise NotExportable("the program has no leaves: value_and_grad would have nothing to differentiate by",
                            "give a variable a value without `const` (x = 2) to make it a leaf")
    for name in wrt:
        if name not in run.state.leaves:
            if name in run.state.constants:
                run.wrt_node(name)  # its message: a constant has no gradient
            where = "an intermediate" if name in run.frame else "not a variable of the program"
            raise NotExportable(f"--wrt {name}: {name} is {where}; export differentiates by f's parameters, "
                                "the program's leaves", f"its leaves: {', '.join(run.state.leaves) or 'none'}")
    if output.value.shape != ():
        raise NotExportable(f"--of {of}: {of} has shape {tuple(output.value.shape)}; value_and_grad needs a "
                            "single number", f"export a scalar such as sum({of}) (assign it: L = sum({of}))")
    again, decisions = _decisions(run, to)
    export = Export(again, decisions, of, wrt, to)
    return _module(export, to, source_name)


def _decisions(run: Run, to: str) -> tuple[Run, list[Node]]:
    """The run again with the host decisions it made on values computed from the leaves (to assert them)."""
    module = run.program.module
    again, seen = perturb.traced(run)
    if seen is None:
        culprit = next(expr for expr in S.code(module.body, functions=True)
                       if isinstance(expr, S.BoolOp) or (isinstance(expr, S.Call) and expr.name in perturb._OFF_GRAPH))
        what = f"{_culprit(culprit)} at line {culprit.pos.line}"
        raise NotExportable(f"export cannot follow {what}: it takes a value out of the graph where no check can "
                            "see it", "write it with where(...) or without it", culprit.pos) \
            .within(run.program.source)
    dirty = {id(leaf) for leaf in again.state.leaves.values()}
    for node in _reached(seen):  # what the leaves' values reach, in one pass (creation order)
        if any(id(x) in dirty for x in node.inputs):
            dirty.add(id(node))
    deciding = [node for node in dict.fromkeys(seen) if id(node) in dirty]  # each once, as they were read
    if deciding and to == "jax":
        pos = _decision_place(module)
        raise NotExportable("the program decides on a value computed from its leaves: jax.jit traces f "
                            "without values, so the path taken cannot be checked",
                            "export --to numpy or --to torch (they assert the path), write the choice with "
                            "where(cond, a, b), or declare what it reads `const` if it is one", pos) \
            .within(run.program.source)
    return again, deciding


def _culprit(expr: S.Expr) -> str:
    if isinstance(expr, S.Call):
        return f"{expr.name}(...)"
    return f"'{getattr(expr, 'op', 'and/or')}'"


def _decision_place(module: S.Module) -> Pos | None:
    """Where the program first decides on a value: an if, a while, a conditional expression, a for's range."""
    for stmt in S.statements(module.body, functions=True):
        if isinstance(stmt, (S.If, S.While)):
            return stmt.cond.pos
        if isinstance(stmt, S.For):
            return stmt.iterable.pos
        for field in type(stmt).expressions:
            for expr in S.walk(getattr(stmt, field)):
                if isinstance(expr, (S.Conditional, S.Index)):
                    return expr.pos
    return None


def _module(export: Export, to: str, source_name: str) -> str:
    dialect = DIALECTS[to]
    run = export.run
    leaves = [parameter(name) for name in export.leaves]
    constants: dict[str, str] = {}  # name → its definition
    module_names: dict[int, str] = {}
    taken = set(run.frame) | set(leaves)
    arrays: dict[int, str] = {}

    def constant(value: Any) -> str:
        if id(value) not in arrays:
            name = f"C{len(arrays) + 1}"
            while name in taken:
                name += "_"
            taken.add(name)
            arrays[id(value)] = name
            constants[name] = _value_source(dialect, value)
        return arrays[id(value)]

    for code in _all_codes(export):
        label = export.constants.get(id(code))
        if label is not None and id(code) not in module_names:
            name = parameter(label)
            name = name if name not in constants and name not in leaves else f"{name}_{len(constants)}"
            module_names[id(code)] = name
            constants[name] = _value_source(dialect, code.value)
    defaults: dict[str, str] = {}
    for name, node in zip(leaves, export.leaves.values(), strict=True):
        value = node.value
        if value.shape == ():
            defaults[name] = _number(value.item())
        else:
            const_name = f"{name.upper()}_VALUE" if f"{name.upper()}_VALUE" not in taken else f"{name}_value"
            constants[const_name] = _value_source(dialect, value)
            defaults[name] = const_name
    signature = ", ".join(f"{name}={defaults[name]}" for name in leaves)

    def body(with_gradients: bool) -> list[str]:
        names = _Names(set(constants) | set(leaves) | set(arrays.values()), run.frame)
        lines: list[str] = []
        if to == "torch":
            lines += [f"{name} = torch.as_tensor({name}, dtype=torch.float64)" for name in leaves]
        writer = _Body(dialect, names, module_names, constant)
        roots = [export.value, *(export.gradients.values() if with_gradients else [])]
        writer.write(roots, export.guards)
        lines += writer.lines
        if with_gradients:
            grads = ", ".join(f"{name!r}: {writer.text(g)}" for name, g in export.gradients.items())
            lines.append(f"return {writer.text(export.value)}, {{{grads}}}")
        else:
            lines.append(f"return {writer.text(export.value)}")
        return lines

    about = (f"f({', '.join(leaves)}) computes {export.of}; value_and_grad(...) returns {export.of} and "
             f"{{name: gradient}} for {', '.join(export.wrt)}. The defaults are the program's values; shapes, "
             "indices and constants are those of the program, written in. Loops are unrolled and functions "
             "inlined as the run went.")
    shown = os.path.basename(source_name) or source_name
    out = [f'"""The value of {export.of} in {shown} and its gradient, written out by gradcalc export.',
           "", *textwrap.wrap(about, LINE_LENGTH, break_on_hyphens=False, break_long_words=False), '"""']
    made = f"gradcalc {__version__} (gradcalc export --to {to})"
    out += [f"# Generated from {source_name} by {made}."] if len(source_name) + len(made) < LINE_LENGTH - 24 else \
        [f"# Generated by {made} from", f"# {source_name}"]
    out += ["", "@IMPORTS@", ""]
    forward = body(False)
    if to == "numpy":
        backward = body(True)
    elif to == "torch":
        backward = _torch_gradients(leaves, export.wrt, export.output.requires_grad)  # wrt: program names
    else:
        backward = _jax_gradients(leaves, export.wrt)
    if export.guards and to != "jax":
        constants["PATH"] = repr("these values take another path than the one gradcalc recorded")
    for name, definition in constants.items():
        out.append(f"{name} = {definition}")
    if constants:
        out += ["", ""]
    text = "\n".join(forward + backward)
    for (library, helper), definition in _HELPERS.items():
        if library == to and f"{helper}(" in text:
            out.append(definition.strip("\n"))
            out += ["", ""]
    out.append("")
    out.append(f"def f({signature}):")
    out.append(f'    """{export.of}, as {shown} computes it."""')
    out += ["    " + line for line in forward]
    out += ["", ""]
    out.append(f"def value_and_grad({signature}):")
    out.append(f'    """{export.of} and its gradient with respect to {", ".join(export.wrt)}, as a dict."""')
    out += ["    " + line for line in backward]
    imports = _IMPORTS[to]
    if to == "numpy" and not any("np." in line for line in out):
        imports = ""  # nothing of NumPy's is called (operators on numbers only)
    out[out.index("@IMPORTS@")] = imports
    return "\n".join(_wrapped(line) for line in _tidy(out)) + "\n"


def _tidy(lines: list[str]) -> list[str]:
    """At most two blank lines in a row, none after the imports' block beyond what PEP 8 asks."""
    out: list[str] = []
    for line in lines:
        if line == "" and len(out) >= 2 and out[-1] == "" and out[-2] == "":
            continue
        out.append(line)
    while out and out[-1] == "":
        out.pop()
    return out


def _torch_gradients(leaves: list[str], wrt: list[str], connected: bool) -> list[str]:
    names = [parameter(name) for name in wrt]
    if not connected:  # the output does not depend on the leaves differentiably: zero, as gradcalc grad says
        lines = [f"{name} = torch.as_tensor({name}, dtype=torch.float64)" for name in names]
        entries = ", ".join(f"{key!r}: torch.zeros_like({name})" for key, name in zip(wrt, names, strict=True))
        return [*lines, f"return f({', '.join(leaves)}), {{{entries}}}"]
    lines = [f"{name} = torch.as_tensor({name}, dtype=torch.float64).detach().requires_grad_()" for name in names]
    lines.append(f"value = f({', '.join(leaves)})")
    leaves_tuple = f"({names[0]},)" if len(names) == 1 else f"({', '.join(names)})"
    lines.append(f"grads = torch.autograd.grad(value, {leaves_tuple}, allow_unused=True, materialize_grads=True)")
    entries = ", ".join(f"{name!r}: grads[{i}]" for i, name in enumerate(wrt))
    lines.append(f"return value.detach(), {{{entries}}}")
    return lines


def _jax_gradients(leaves: list[str], wrt: list[str]) -> list[str]:
    numbers = tuple(leaves.index(parameter(name)) for name in wrt)
    lines = [f"value, grads = jax.value_and_grad(f, argnums={numbers!r})({', '.join(leaves)})"]
    entries = ", ".join(f"{name!r}: grads[{i}]" for i, name in enumerate(wrt))
    lines.append(f"return value, {{{entries}}}")
    return lines


def _value_source(dialect: Dialect, value: Any) -> str:
    value = np.asarray(value)
    if value.shape == ():
        return _number(value.item())
    return dialect.array(value)


def _all_codes(export: Export) -> list[Code]:
    stack = [export.value, *export.gradients.values(), *(code for code, _ in export.guards)]
    found: dict[int, Code] = {}
    while stack:
        code = stack.pop()
        if id(code) not in found:
            found[id(code)] = code
            stack.extend(_children(code))
    return sorted(found.values(), key=lambda c: c.seq)


# --- Long lines: broken inside brackets ---------------------------------------------------------------

def _wrapped(line: str, limit: int = LINE_LENGTH) -> str:
    """A line longer than `limit` broken after commas and before operators, inside brackets (a statement's
    value put in brackets first), continuation lines indented one level more."""
    if len(line) <= limit or "\n" in line:
        return line
    indent = line[: len(line) - len(line.lstrip())]
    stripped = line.strip()
    for prefix in ("return ", ):
        if stripped.startswith(prefix):
            head, value = prefix, stripped[len(prefix):]
            break
    else:
        head, sep, value = stripped.partition(" = ")
        if not sep or not head.isidentifier():
            return line
        head += " = "
    cuts = _cuts(value)
    if cuts is None:
        return line
    inner = indent + "    "
    rows: list[str] = []
    for depth in sorted({d for _, d in cuts}):  # the shallowest breaks that make every row fit
        rows = _filled(value, [at for at, d in cuts if d <= depth], limit - len(inner))
        if all(len(row) <= limit - len(inner) for row in rows):
            break
    return f"{indent}{head}(\n" + "\n".join(inner + row for row in rows) + f"\n{indent})"


def _filled(text: str, cuts: list[int], width: int) -> list[str]:
    """The text in rows of at most `width` where the cuts allow: as much on a row as fits."""
    pieces = [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)]) if b > a]
    rows: list[str] = []
    current = ""
    for piece in pieces:
        if current and len(current) + len(piece.rstrip()) > width:
            rows.append(current.rstrip())
            current = piece.lstrip()
        else:
            current += piece
    rows.append(current.rstrip())
    return rows


def _cuts(text: str) -> list[tuple[int, int]] | None:
    """Where a line may break, with the brackets' depth there: after a comma, before a binary operator."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError):
        return None
    cuts: list[tuple[int, int]] = []
    previous = None
    depth = 0
    for token in tokens:
        if token.type in (tokenize.NEWLINE, tokenize.ENDMARKER, tokenize.NL):
            continue
        start = token.start[1]
        if previous is not None and previous.type == tokenize.OP and previous.string == "," and \
                token.string not in (")", "]"):
            cuts.append((start, depth))
        elif token.type == tokenize.OP and token.string in ("+", "-", "*", "/", "@") and previous is not None \
                and (previous.type in (tokenize.NAME, tokenize.NUMBER) or previous.string in (")", "]")):
            cuts.append((start, depth))
        if token.string in ("(", "[", "{"):
            depth += 1
        elif token.string in (")", "]", "}"):
            depth -= 1
        previous = token
    return cuts


# --- Which primitives export: each record's evaluation and rules, written at a point -----------------

def writable(prim: Primitive, inputs: Sequence[Any], params: Sequence[Any]) -> str | None:
    """Why the primitive cannot be written at these inputs (arrays) and params, or None if it can."""
    codes = [Code("name", (f"x{i}",), np.asarray(value)) for i, value in enumerate(inputs)]
    try:
        ans = _lift(_evaluation(prim)(*codes, *params))
        if prim.differentiable:
            for i in range(len(codes)):
                rule = prim.vjps[i]
                if rule is not None:
                    _lift(rule(WRITER, Code("name", ("g",), np.ones(ans.shape)), ans, *codes, *params))
    except _Unwritable as exc:
        return str(exc)
    except GradcalcError as exc:
        return exc.message
    return None


def written(prim: Primitive, inputs: Sequence[Any], params: Sequence[Any], to: str) -> str:
    """The primitive's evaluation as one expression of x0, x1, ... in `to`'s dialect (what a test runs)."""
    codes = [Code("name", (f"x{i}",), np.asarray(value)) for i, value in enumerate(inputs)]
    arrays: dict[int, str] = {}

    def constant(value: Any) -> str:
        return arrays.setdefault(id(value), DIALECTS[to].array(value))

    return Renderer(DIALECTS[to], {}, constant).text(_lift(_evaluation(prim)(*codes, *params)))
