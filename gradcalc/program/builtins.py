"""The language's builtin functions: names, signatures, and how each maps onto ops."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from ..engine import autodiff, graph, ops
from ..engine import backend as B
from ..engine.graph import Node, apply, constant, host_value, leaf
from ..engine.primitives import PRIMITIVES, REDUCTION, broadcast_shape
from ..errors import ArgumentError, FileProblem, GradcalcError, ShapeError, ValueProblem, did_you_mean
from ..files import DEFAULT_MAX_FILE_SIZE, Outside, describe, open_regular, read_bounded


class Context:
    """What builtins may need from the run: the random generator and where files may be read.

    folder None: no file may be read (a claim is judged with such a context).
    """

    __slots__ = ("allowed", "folder", "max_file_size", "random")

    def __init__(self, random: B.Random, folder: str | None, allowed: tuple[str, ...],
                 max_file_size: int = DEFAULT_MAX_FILE_SIZE) -> None:
        self.random = random
        self.folder = folder
        self.allowed = allowed
        self.max_file_size = max_file_size


class Builtin:
    __slots__ = ("fn", "name", "needs_context", "params", "parts", "quoted", "required", "summary", "variadic")

    def __init__(self, name: str, fn: Callable[..., Node], params: tuple[str, ...], required: int, summary: str,
                 needs_context: bool = False, quoted: frozenset[str] = frozenset(),
                 parts: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.fn = fn
        self.params = params  # parameter names; "*name" takes the rest
        self.required = required  # how many leading parameters must be given
        self.summary = summary
        self.needs_context = needs_context
        self.quoted = quoted  # parameters that take quoted text (reduction='sum'), not values
        self.parts = parts  # parameters that take a list of tensors (cat([a, b])), item by item
        self.variadic = any(p.startswith("*") for p in params)

    def named(self, count: int) -> tuple[str, ...]:
        """The parameter each of `count` arguments in order goes to ("*name" takes the rest)."""
        if self.variadic and count > len(self.params):
            return self.params + (self.params[-1],) * (count - len(self.params))
        return self.params[:count]

    def signature(self) -> str:
        shown = [p if i < self.required or p.startswith("*") else f"{p}=…" for i, p in enumerate(self.params)]
        return f"{self.name}({', '.join(shown)})"


def as_int(value: Node | int, what: str) -> int:
    """A whole number from a scalar node (sizes, axes, indices, counts)."""
    return value if isinstance(value, int) else _whole(host_value(value), what)


def _whole(host: Any, what: str) -> int:
    if host.shape != () or not math.isfinite(float(host)) or float(host) != int(float(host)):
        raise ArgumentError(f"{what} must be a whole number, got {_describe(host)}", "write an integer such as 0 or 2")
    return int(float(host))


def _describe(host: Any) -> str:
    return f"a tensor of shape {host.shape}" if host.shape else f"{float(host):g}"


def as_axis(value: Node | None, x: Node) -> int | tuple[int, ...] | None:
    if value is None:
        return None
    host = host_value(value)
    axes = [_whole(v, "axis") for v in host.reshape(-1)] if host.shape else [_whole(host, "axis")]
    for a in axes:
        if not -max(x.ndim, 1) <= a < max(x.ndim, 1) or x.ndim == 0:
            raise ValueProblem(f"axis {a} is out of range for a tensor of shape {x.shape}",
                               f"use an axis from 0 to {x.ndim - 1}" if x.ndim
                               else "a scalar has no axes: leave axis out")
    normalized = tuple(a % x.ndim for a in axes)
    if len(set(normalized)) != len(normalized):
        raise ValueProblem(f"axis {axes} repeats an axis", "name each axis once")
    return normalized if host.shape else normalized[0]


def _sizes(values: tuple[Node, ...], what: str) -> tuple[int, ...]:
    """Whole numbers given as separate arguments or as one list."""
    if len(values) == 1:
        host = host_value(values[0])
        return tuple(_whole(v, what) for v in host) if host.ndim == 1 else (_whole(host, what),)
    return tuple(as_int(v, what) for v in values)


def as_shape(values: tuple[Node, ...], what: str) -> tuple[int, ...]:
    """Sizes given as `f(2, 3)` or `f([2, 3])`."""
    shape = _sizes(values, f"{what} size")
    if any(n < 0 for n in shape):
        raise ValueProblem(f"{what} sizes must not be negative, got {shape}", "give sizes of 0 or more")
    B.check_size(shape, what)  # the message shows the shape
    return shape


def _reduction(op: Callable[..., Node]) -> Callable[..., Node]:
    def reduce(x: Node, axis: Node | None = None, keepdims: Node | None = None) -> Node:
        keep = bool(as_int(keepdims, "keepdims")) if keepdims is not None else False
        if op is ops.max or op is ops.min:
            if x.value.size == 0:
                raise ValueProblem(f"{op.__name__} of an empty tensor", "it has no largest or smallest entry")
        axes = as_axis(axis, x)
        if x.value.size == 0 and axes is not None:  # sum(zeros(0, n), axis=0) has n entries from none
            summed = {axes} if isinstance(axes, int) else set(axes)
            B.check_size(tuple(1 if i in summed else n for i, n in enumerate(x.shape) if keep or i not in summed),
                         f"the result of {op.__name__}")
        return op(x, axes, keep)

    return reduce


def _dot(x: Node, y: Node) -> Node:
    if x.ndim == 0 or y.ndim == 0:
        return ops.mul(x, y)
    if x.ndim > 2 or y.ndim > 2:
        raise ArgumentError("dot takes vectors or matrices", "use '@' (matmul) for stacks of matrices")
    return ops.matmul(x, y)


def _outer(x: Node, y: Node) -> Node:
    return ops.mul(ops.reshape(x, (-1, 1)), ops.reshape(y, (1, -1)))


def _diag(x: Node) -> Node:
    """NumPy's diag: a vector on a matrix's diagonal, or a matrix's diagonal as a vector."""
    if x.ndim == 1:
        n = x.shape[0]
        return ops.mul(ops.reshape(x, (n, 1)), _eye(constant(n)))
    if x.ndim == 2:
        n = min(x.shape)
        square = x if x.shape[0] == x.shape[1] else ops.index(x, (slice(0, n), slice(0, n)))
        return ops.sum(ops.mul(square, _eye(constant(n))), 1, False)
    raise ArgumentError(f"diag takes a vector or a matrix, not a tensor of shape {tuple(x.shape)}",
                        "diag(v) puts v on a diagonal; diag(A) reads A's diagonal")


def _transpose(x: Node, first: Node | None = None, second: Node | None = None) -> Node:
    if first is None and second is None:
        return ops.transpose(x, None)
    if first is None or second is None:
        raise ArgumentError("transpose takes no axes or two axes to swap", "transpose(x) or transpose(x, 0, 1)")
    i, j = as_axis(first, x), as_axis(second, x)
    axes = list(range(x.ndim))
    axes[i], axes[j] = axes[j], axes[i]  # type: ignore[index]
    return ops.transpose(x, tuple(axes))


def _reshape(x: Node, *sizes: Node) -> Node:
    if not sizes:
        raise ArgumentError("reshape needs the new shape", "reshape(x, 2, 3) or reshape(x, [2, 3])")
    shape = _sizes(sizes, "reshape size")
    known = math.prod(n for n in shape if n != -1)
    size = x.value.size
    if shape.count(-1) > 1 or any(n < -1 for n in shape) or (
        size != known if -1 not in shape else (known == 0 or size % known)
    ):
        raise ValueProblem(f"cannot reshape a tensor of shape {x.shape} ({size} elements) to {shape}",
                           "the sizes must multiply to the same number of elements (one size may be -1)")
    B.check_size(shape, "reshape")  # reshape(zeros(0), 0, 1e20): no elements, but a size past the limit
    return ops.reshape(x, shape)


def _softmax(x: Node, axis: Node | None = None) -> Node:
    if x.ndim == 0:
        return ops.softmax(ops.reshape(x, (1,)), 0)[0]
    resolved = as_axis(axis, x) if axis is not None else x.ndim - 1
    if isinstance(resolved, tuple):
        raise ArgumentError("softmax takes one axis", "softmax(x, axis=1)")
    return ops.softmax(x, resolved)


def _detach(x: Node) -> Node:
    # Named for the graph view, which shows where detach cut the graph.
    return leaf(x.value, f"detach({x.name})" if x.name else "detach(…)", requires_grad=False)


def _all(x: Node) -> Node:
    return constant(float(bool(B.to_host(x.value != 0).all())))


def _any(x: Node) -> Node:
    return constant(float(bool(B.to_host(x.value != 0).any())))


# Constructors make constants (a leaf when assigned to a name).
def _filled(value: float, what: str) -> Callable[..., Node]:
    def make(*sizes: Node) -> Node:
        return constant(B.xp.full(as_shape(sizes, what), value, dtype=B.dtype))

    return make


def _full(*args: Node) -> Node:
    if len(args) < 2:
        raise ArgumentError("full needs sizes and then the fill value", "full(2, 3, 7.5)")
    fill = host_value(args[-1])
    if fill.shape != ():
        raise ArgumentError("full's last argument is the fill value and must be a number", "full(2, 3, 7.5)")
    return constant(B.xp.full(as_shape(args[:-1], "full"), float(fill), dtype=B.dtype))


def _eye(n: Node, m: Node | None = None) -> Node:
    rows = as_int(n, "eye size")
    cols = as_int(m, "eye size") if m is not None else rows
    shape = as_shape((constant(rows), constant(cols)), "eye")
    return constant(B.xp.eye(*shape, dtype=B.dtype))


def _number(node: Node, what: str) -> float:
    host = host_value(node)
    if host.shape != ():
        raise ArgumentError(f"{what} must be a number, got a tensor of shape {host.shape}", "")
    return float(host)


def _arange(first: Node, stop: Node | None = None, step: Node | None = None) -> Node:
    start, end = (0.0, _number(first, "arange stop")) if stop is None else (
        _number(first, "arange start"), _number(stop, "arange stop"))
    stride = 1.0 if step is None else _number(step, "arange step")
    if stride == 0 or not all(math.isfinite(v) for v in (start, end, stride)):
        raise ValueProblem("arange needs finite bounds and a non-zero step", "arange(5) or arange(0, 1, 0.1)")
    count = max(0, math.ceil((end - start) / stride))
    B.check_size((count,), "arange")
    return constant(B.xp.arange(start, end, stride, dtype=B.dtype))


def _linspace(start: Node, stop: Node, num: Node | None = None) -> Node:
    count = 50 if num is None else as_int(num, "linspace count")
    shape = as_shape((constant(count),), "linspace")
    return constant(B.xp.linspace(_number(start, "linspace start"), _number(stop, "linspace stop"), shape[0],
                                  dtype=B.dtype))


def _randn(context: Context, *sizes: Node) -> Node:
    return constant(context.random.normal(as_shape(sizes, "randn")))


def _rand(context: Context, *sizes: Node) -> Node:
    return constant(context.random.uniform(as_shape(sizes, "rand")))


def _load(context: Context, path: str, member: str | None = None) -> Node:
    if context.folder is None:
        raise FileProblem(f"load('{path}'): a claim cannot read files",
                          "write the claimed value or expression itself; only the program loads data")
    roots = (context.folder, *context.allowed)
    try:
        handle = open_regular(os.path.join(context.folder, path), roots)
    except Outside as exc:
        raise FileProblem(
            f"load('{path}') reads outside the program's folder ({context.folder})",
            f"move the file next to the program, or allow its folder with --allow-read {os.path.dirname(exc.real)}",
        ) from None
    except FileProblem as exc:
        raise FileProblem(f"load('{path}'): {exc.message}", "check the file name; paths are relative to the program"
                          ) from None
    kind = os.path.splitext(path)[1].lower()
    if member is not None and kind not in (".npz", ".csv"):
        raise FileProblem(f"load('{path}', '{member}'): a name picks an array of an .npz file or a column of a "
                          f".csv file, and this is a {kind or 'file without an extension'}",
                          f'load the whole file: load("{path}")')
    with handle:
        try:
            if member is not None and kind == ".csv":
                data = _csv_column(handle, path, member, context.max_file_size)
            else:
                data = B.load_file(handle, path, member, path, context.max_file_size)
        except GradcalcError:
            raise
        except Exception as exc:  # NumPy's, zipfile's and json's many ways to say the file is malformed
            raise FileProblem(f"load('{path}'): cannot read it: {describe(exc)}",
                              "check that the file holds numbers") from None
    if data.size == 0:
        raise FileProblem(f"load('{path}'): the file holds no numbers", "check the file's contents")
    return constant(B.asarray(data))


def _csv_column(handle: Any, path: str, column: str, max_size: int) -> Any:
    """One column of a CSV file, picked by the name its header row gives it (a vector, one entry a row)."""
    import io

    raw = read_bounded(handle, max_size, path)
    first = next((line for line in raw.decode("utf-8-sig").splitlines() if line.strip()), "")
    header = [cell.strip().strip("\"'").strip() for cell in first.split(",")]
    if all(_is_number(cell) for cell in header):
        raise FileProblem(f"load('{path}', '{column}'): the file has no header row naming its columns",
                          f"add a first line of names ({', '.join(f'x{i + 1}' for i in range(min(len(header), 3)))}"
                          f"{', ...' if len(header) > 3 else ''}), or take a column by its place: "
                          f'load("{path}")[:, 0]')
    if column not in header:
        hint = did_you_mean(column, header)
        raise FileProblem(f"load('{path}', '{column}'): the file has no column '{column}'",
                          (hint + " " if hint else "") + "its columns are: " + ", ".join(header))
    rows = B.load_file(io.BytesIO(raw), path, None, path, max_size)
    return rows.reshape(-1, len(header))[:, header.index(column)]  # a file of one row reads as a vector


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


DIFF_ENTRIES = 256  # diff(u, x) of a tensor takes a backward pass per entry: a bound on that work


def _diff(u: Node, x: Node) -> Node:
    """d/dx[u] for a scalar variable x: diff --steps's unevaluated derivative, as SymPy spells it.

    Each entry is a differentiable backward pass (create_graph), so a gradient through diff() is right
    too. It needs the program's graph: a claim, judged without one, cannot use it."""
    if x.shape != ():
        raise ArgumentError(f"diff(u, x) differentiates by a scalar variable; this x has shape {x.shape}",
                            "name one scalar variable, as in diff(x^2*sin(x), x)")
    if not graph.recording or not graph.history:
        raise ArgumentError("diff(u, x) needs the program's graph, and it is not recorded here",
                            "use diff() in a program's statements; write the derivative itself in an answer")
    if not x.requires_grad:
        raise ArgumentError("diff(u, x): x must be a variable (a value given to the program or computed from one)",
                            "name a variable, as in diff(x^2, x)")
    size = math.prod(u.shape)
    if size > DIFF_ENTRIES:
        raise ArgumentError(f"diff(u, x) of a tensor of {size:,} entries: more than {DIFF_ENTRIES} backward passes",
                            "differentiate a sum or one entry of it, or use `gradcalc jacobian`")
    if u.shape == ():
        return _entry_derivative(u, x, B.scalar(1.0))
    total: Node = constant(B.xp.zeros(u.shape, dtype=B.dtype))
    for i in range(size):  # each entry's derivative, placed at its index
        hot = B.xp.zeros(size, dtype=B.dtype)
        hot[i] = 1.0
        hot = B.xp.reshape(hot, u.shape)
        total = ops.add(total, ops.mul(constant(hot), _entry_derivative(u, x, hot)))
    return total


def _entry_derivative(u: Node, x: Node, seed: Any) -> Node:
    # A rule that reads one gradient twice (stack's, an index each) must find its value.
    with graph.keeping_temporaries():
        found = autodiff.backward(u, constant(seed), [x], create_graph=True).get(x)
    return constant(B.scalar(0.0)) if found is None else constant(found)


# Reciprocal functions, as answers write derivatives (d tan x = sec²x dx): compositions, no rules of their own.
_RECIPROCALS: dict[str, Callable[[Node], Node]] = {
    "sec": lambda x: ops.div(1.0, ops.cos(x)), "csc": lambda x: ops.div(1.0, ops.sin(x)),
    "cot": lambda x: ops.div(1.0, ops.tan(x)), "sech": lambda x: ops.div(1.0, ops.cosh(x)),
    "csch": lambda x: ops.div(1.0, ops.sinh(x)), "coth": lambda x: ops.div(1.0, ops.tanh(x)),
}



# --- Issue 25's functions: NumPy's and PyTorch's names (kept apart for merging) -------------------

def _text(value: Any, what: str, choices: tuple[str, ...]) -> str:
    """A parameter given as quoted text, one of `choices`."""
    listed = ", ".join(f"'{c}'" for c in choices)
    if not isinstance(value, str):
        raise ArgumentError(f"{what} is quoted text, one of {listed}", f"{what}='{choices[0]}'")
    if value not in choices:
        hint = did_you_mean(value, list(choices))
        raise ArgumentError(f"{what} '{value}' is not one of {listed}", hint or f"{what}='{choices[0]}'")
    return value


def _one_axis(axis: Node | None, x: Node, what: str) -> int | None:
    resolved = as_axis(axis, x)
    if isinstance(resolved, tuple):
        raise ArgumentError(f"{what} takes one axis, not a list", f"{what}(x, axis=0)")
    return resolved


def _slope(value: Node | None, default: float, what: str) -> float:
    return default if value is None else _number(value, what)


def _square(x: Node) -> Node:
    return ops.power(x, constant(2.0))  # PowBackward0, as torch.square


def _gelu(x: Node, approximate: Any = None) -> Node:
    if approximate is None or _text(approximate, "approximate", ("none", "tanh")) == "none":
        return ops.gelu(x)
    # PyTorch's tanh form, 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))), made of the operations it names
    inner = ops.mul(ops.add(x, ops.mul(constant(0.044715), ops.power(x, constant(3.0)))),
                    constant(math.sqrt(2 / math.pi)))
    return ops.mul(ops.mul(constant(0.5), x), ops.add(constant(1.0), ops.tanh(inner)))


def _elu(x: Node, alpha: Node | None = None) -> Node:
    return ops.elu(x, _slope(alpha, 1.0, "alpha"))


def _leaky_relu(x: Node, negative_slope: Node | None = None) -> Node:
    return ops.leaky_relu(x, _slope(negative_slope, 0.01, "negative_slope"))


def _clamp(x: Node, low: Node | None = None, high: Node | None = None) -> Node:
    if low is None and high is None:
        raise ArgumentError("clamp needs min or max (or both)", "clamp(x, min=0) or clamp(x, -1, 1)")
    return ops.clip(x, constant(-math.inf) if low is None else low, constant(math.inf) if high is None else high)


def _statistic(op: Callable[..., Node]) -> Callable[..., Node]:
    def statistic(x: Node, axis: Node | None = None, keepdims: Node | None = None,
                  ddof: Node | None = None) -> Node:
        keep = bool(as_int(keepdims, "keepdims")) if keepdims is not None else False
        axes = as_axis(axis, x)
        degrees = 0 if ddof is None else as_int(ddof, "ddof")
        taken = math.prod(x.shape) if axes is None else math.prod(
            x.shape[a] for a in (axes if isinstance(axes, tuple) else (axes,)))
        if not 0 <= degrees < taken:
            raise ValueProblem(f"{op.__name__} with ddof={degrees} of {taken} entr{'y' if taken == 1 else 'ies'}",
                               "ddof must be at least 0 and less than the number of entries (ddof=1: the "
                               "sample estimate)")
        return op(x, axes, keep, degrees)

    return statistic


def _squeeze(x: Node, axis: Node | None = None) -> Node:
    if axis is None:
        return ops.squeeze(x, tuple(n for n in x.shape if n != 1), None)
    axes = as_axis(axis, x)
    dropped: tuple[int, ...] = axes if isinstance(axes, tuple) else (axes,) if axes is not None else ()
    for a in dropped:
        if x.shape[a] != 1:
            raise ValueProblem(f"squeeze: axis {a} has size {x.shape[a]}, not 1 (shape {x.shape})",
                               "only axes of size 1 can be removed; squeeze(x) removes every one")
    return ops.squeeze(x, tuple(n for i, n in enumerate(x.shape) if i not in dropped), axes)


def _unsqueeze(x: Node, axis: Node) -> Node:
    position = as_int(axis, "axis")
    if not -x.ndim - 1 <= position <= x.ndim:
        raise ValueProblem(f"axis {position} is out of range for adding an axis to shape {x.shape}",
                           f"use an axis from 0 to {x.ndim} (or negative, from the end)")
    position %= x.ndim + 1
    return ops.unsqueeze(x, x.shape[:position] + (1,) + x.shape[position:], position)


def _flatten(x: Node) -> Node:
    return ops.reshape(x, (math.prod(x.shape),))


def _flip(x: Node, axis: Node | None = None) -> Node:
    if x.ndim == 0:
        return x
    axes = as_axis(axis, x)
    return ops.flip(x, tuple(range(x.ndim)) if axes is None else axes if isinstance(axes, tuple) else (axes,))


def _parts(value: Any, what: str) -> tuple[Node, ...]:
    """A list of tensors: [a, b] item by item, or a tensor's entries along its first axis."""
    if isinstance(value, tuple):
        parts = value
    elif value.ndim == 0:
        raise ArgumentError(f"{what} takes a list of tensors, got a number", f"{what}([a, b])")
    else:
        parts = tuple(ops.index(value, (i,)) for i in range(value.shape[0]))
    if not parts:
        raise ArgumentError(f"{what} needs at least one tensor", f"{what}([a, b])")
    return parts


def _concatenate(xs: Any, axis: Node | None = None) -> Node:
    parts = _parts(xs, "concatenate")
    first = parts[0]
    if any(p.ndim == 0 for p in parts):
        raise ValueProblem("concatenate joins tensors along an axis, and a number has none",
                           "stack([a, b]) makes a vector of numbers")
    position = 0 if axis is None else _one_axis(axis, first, "concatenate")
    assert position is not None
    for p in parts[1:]:
        if p.ndim != first.ndim or any(m != n for i, (m, n) in enumerate(zip(p.shape, first.shape, strict=True))
                                       if i != position):
            raise ShapeError(f"concatenate along axis {position}: shapes {first.shape} and {p.shape} differ on "
                             "another axis", "every shape must match except along the axis joined")
    B.check_size(first.shape[:position] + (sum(p.shape[position] for p in parts),) + first.shape[position + 1:],
                 "the result of concatenate")
    return apply(ops.CONCATENATE, tuple(parts), (position,))


def _stack_along(xs: Any, axis: Node | None = None) -> Node:
    parts = _parts(xs, "stack")
    if any(p.shape != parts[0].shape for p in parts):
        shapes = sorted({p.shape for p in parts})
        raise ShapeError(f"stack needs tensors of one shape, got {' and '.join(map(str, shapes))}",
                         "concatenate([a, b]) joins tensors of different lengths")
    stacked = ops.stack(*parts)
    if axis is None:
        return stacked
    position = _one_axis(axis, stacked, "stack")  # an axis of the result: one more than each part has
    if not position:
        return stacked
    return apply(ops.STACK_AXIS, parts, (position,))


def _cumulative(op: Callable[..., Node]) -> Callable[..., Node]:
    def cumulative(x: Node, axis: Node | None = None) -> Node:
        if axis is None:  # NumPy's default: over the flattened entries
            return op(_flatten(x), 0)
        return op(x, _one_axis(axis, x, op.__name__))

    return cumulative


def _position(op: Callable[..., Node]) -> Callable[..., Node]:
    def position(x: Node, axis: Node | None = None) -> Node:
        if x.value.size == 0:
            raise ValueProblem(f"{op.__name__} of an empty tensor", "it has no largest or smallest entry")
        return op(x, None if axis is None else _one_axis(axis, x, op.__name__))

    return position


def _like(value: float) -> Callable[[Node], Node]:
    return lambda x: constant(B.xp.full(x.shape, value, dtype=B.dtype))


def _len(x: Node) -> Node:
    if x.ndim == 0:
        raise ValueProblem("len of a number", "len(x) is the size of x's first axis; a number has no axes")
    return constant(float(x.shape[0]))


def _shape(x: Node) -> Node:
    return constant(B.xp.asarray([float(n) for n in x.shape], dtype=B.dtype).reshape(len(x.shape)))


def _log_softmax(x: Node, axis: Node | None = None) -> Node:
    if x.ndim == 0:
        return ops.log_softmax(ops.reshape(x, (1,)), 0)[0]
    resolved = _one_axis(axis, x, "log_softmax") if axis is not None else x.ndim - 1
    return ops.log_softmax(x, resolved)


REDUCTIONS = ("mean", "sum", "none")


def _cross_entropy(scores: Node, target: Node, reduction: Any = None) -> Node:
    how = "mean" if reduction is None else _text(reduction, "reduction", REDUCTIONS)
    if scores.ndim not in (1, 2):
        raise ValueProblem(f"cross_entropy takes scores of shape (C,) or (N, C), got {scores.shape}",
                           "one row of class scores per example; reshape to (N, C)")
    classes = scores.shape[-1]
    if target.shape == scores.shape:
        return ops.cross_entropy(scores, target, how, False)
    if target.shape != scores.shape[:-1]:
        raise ShapeError(f"cross_entropy: target of shape {target.shape} for scores of shape {scores.shape}",
                         f"give class indices of shape {scores.shape[:-1]} or probabilities of shape "
                         f"{scores.shape}")
    labels = B.host.asarray(host_value(target))  # a batch of points: one set of labels, or split by them
    if not ((labels == labels.round()) & (labels >= 0) & (labels < classes)).all():
        raise ValueProblem(f"cross_entropy: class indices must be whole numbers from 0 to {classes - 1}",
                           "check the labels, e.g. with eval; probabilities need the scores' shape")
    one_hot = B.xp.eye(classes, dtype=B.dtype)[B.asarray(labels).astype(int)]
    return ops.cross_entropy(scores, constant(one_hot), how, True)


def _mse_loss(x: Node, y: Node, reduction: Any = None) -> Node:
    how = "mean" if reduction is None else _text(reduction, "reduction", REDUCTIONS)
    if x.shape != y.shape:
        shape = broadcast_shape(ops.MSE_LOSS, x.shape, y.shape)
        x, y = (v if v.shape == shape else ops.broadcast_to(v, shape) for v in (x, y))
    return ops.mse_loss(x, y, how)


def _norm(x: Node, axis: Node | None = None, keepdims: Node | None = None, order: Any = None) -> Node:
    keep = bool(as_int(keepdims, "keepdims")) if keepdims is not None else False
    axes = as_axis(axis, x)
    if isinstance(order, str):
        _text(order, "ord", ("fro",))
        if x.ndim != 2 and not (isinstance(axes, tuple) and len(axes) == 2):
            raise ValueProblem(f"ord='fro' is a matrix norm, and x has shape {x.shape}",
                               "give a matrix (or axis=[0, 1]); for a vector leave ord out")
        return ops.norm(x, axes, keep)
    power = 2.0 if order is None else _number(order, "ord")
    if power not in (1.0, 2.0, math.inf):
        raise ArgumentError(f"ord={power:g} is not supported", "ord=1, ord=2 (the default), ord=inf or ord='fro'")
    if order is not None and axes is None and x.ndim == 2:
        raise ArgumentError(f"norm of a matrix with ord={power:g}: NumPy's is a matrix norm, which gradcalc does "
                            "not compute", "give axis= for vector norms of rows or columns, norm(flatten(x), "
                            "ord=...) for all entries, or ord='fro'")
    if power == 2.0:
        return ops.norm(x, axes, keep)
    if power == math.inf and x.value.size == 0:
        raise ValueProblem("norm(x, ord=inf) of an empty tensor", "it has no largest entry")
    return ops.norm_ord(x, axes, keep, 1 if power == 1.0 else math.inf)


def _slogdet(x: Node) -> Node:
    logabs = ops.logdet(x, True)  # checks the shape first
    return ops.stack(ops.sign(constant(ops.det(x).value)), logabs)


def _einsum(subscripts: Any, *operands: Node) -> Node:
    """NumPy's einsum for letters: each operand's letters once each, an explicit or implicit output."""
    usage = "einsum('ij,jk->ik', A, B): a letter per axis, operands separated by commas"
    if not isinstance(subscripts, str):
        raise ArgumentError("einsum's first argument is its subscripts, in quotes", usage)
    spec = subscripts.replace(" ", "")
    inputs, arrow, output = spec.partition("->")
    letters = inputs.split(",")
    if "." in spec:
        raise ArgumentError("einsum's ... (ellipsis) is not supported", "name every axis with a letter")
    if not all((part.isalpha() and part.isascii()) or part == "" for part in [*letters, output]):
        raise ArgumentError(f"einsum subscripts '{subscripts}' are not letters", usage)
    if len(letters) != len(operands):
        raise ArgumentError(f"einsum subscripts '{subscripts}' name {len(letters)} operand"
                            f"{'s' if len(letters) != 1 else ''}, got {len(operands)}", usage)
    sizes: dict[str, int] = {}
    for part, x in zip(letters, operands, strict=True):
        if len(part) != x.ndim:
            raise ShapeError(f"einsum: '{part}' names {len(part)} axes for a tensor of shape {x.shape}",
                             "one letter per axis")
        if len(set(part)) != len(part):
            raise ArgumentError(f"einsum: '{part}' repeats a letter (a diagonal), which is not supported",
                                "use diag(x) or trace(x) for diagonals")
        for c, n in zip(part, x.shape, strict=True):
            if sizes.setdefault(c, n) != n:
                raise ShapeError(f"einsum: '{c}' is {sizes[c]} long in one operand and {n} in another",
                                 "a letter's axes must have one size")
    if not arrow:  # NumPy's implicit output: the letters used once, in alphabetical order
        output = "".join(sorted(c for c in sizes if inputs.count(c) == 1))
    if len(set(output)) != len(output) or any(c not in sizes for c in output):
        raise ArgumentError(f"einsum output '{output}' must name input letters, each once", usage)
    B.check_size(tuple(sizes[c] for c in output), "the result of einsum")
    return apply(ops.EINSUM, operands, (",".join(letters) + "->" + output,))


def _functions(add: Callable[..., None]) -> None:
    """Issue 25's builtins that are more than their record (keywords, defaults, composites)."""
    add("square", _square, "x", 1, "elementwise x^2")
    add("gelu", _gelu, "x approximate", 1, "x Φ(x), Φ the normal CDF (approximate='tanh': PyTorch's tanh form)",
        quoted="approximate")
    add("elu", _elu, "x alpha", 1, "x above 0, alpha·(e^x - 1) below (alpha=1)")
    add("leaky_relu", _leaky_relu, "x negative_slope", 1, "x above 0, negative_slope·x below (0.01)")
    add("clamp", _clamp, "x min max", 1, "x limited to [min, max] (PyTorch's name for clip; either may be left out)")
    add("var", _statistic(ops.var), "x axis keepdims ddof", 1, "variance, ddof=0 (NumPy's; ddof=1: sample)")
    add("std", _statistic(ops.std), "x axis keepdims ddof", 1, "standard deviation, ddof=0 (NumPy's; ddof=1: sample)")
    add("squeeze", _squeeze, "x axis", 1, "without axes of size 1 (all, or the axis given)")
    add("unsqueeze", _unsqueeze, "x axis", 2, "with a new axis of size 1 at axis")
    add("expand_dims", _unsqueeze, "x axis", 2, "with a new axis of size 1 at axis (NumPy's name for unsqueeze)")
    add("flatten", _flatten, "x", 1, "the entries as a vector")
    add("flip", _flip, "x axis", 1, "entries in reverse order along every axis (or axis)")
    for name in ("concatenate", "cat"):
        add(name, _concatenate, "xs axis", 1, "tensors joined along an existing axis: concatenate([a, b], axis=0)",
            parts="xs")
    add("stack", _stack_along, "xs axis", 1, "tensors of one shape stacked along a new axis: stack([a, b])",
        parts="xs")
    add("cumsum", _cumulative(ops.cumsum), "x axis", 1, "cumulative sum along axis (flattened without one)")
    add("cumprod", _cumulative(ops.cumprod), "x axis", 1, "cumulative product along axis (flattened without one)")
    add("argmax", _position(ops.argmax), "x axis", 1, "position of the largest entry (no gradient)")
    add("argmin", _position(ops.argmin), "x axis", 1, "position of the smallest entry (no gradient)")
    add("zeros_like", _like(0.0), "x", 1, "zeros of x's shape")
    add("ones_like", _like(1.0), "x", 1, "ones of x's shape")
    add("len", _len, "x", 1, "the size of the first axis")
    add("shape", _shape, "x", 1, "the sizes of x's axes, as a vector")
    add("log_softmax", _log_softmax, "x axis", 1, "log of softmax over the last axis (or axis)")
    add("cross_entropy", _cross_entropy, "input target reduction", 2,
        "PyTorch's cross_entropy: scores (C,) or (N, C), class indices or probabilities", quoted="reduction")
    add("mse_loss", _mse_loss, "input target reduction", 2, "mean squared error (reduction='mean')",
        quoted="reduction")
    add("norm", _norm, "x axis keepdims ord", 1, "vector norm: ord=2 (default), 1, inf; ord='fro' for a matrix",
        quoted="ord")
    add("matmul", ops.matmul, "a b", 2, "matrix product, a @ b")
    add("einsum", _einsum, "subscripts *operands", 2, "NumPy's einsum: einsum('ij,j->i', A, x)",
        quoted="subscripts")
    add("logdet", lambda x: ops.logdet(x, False), "x", 1, "log det x (NaN where det x < 0)")
    add("slogdet", _slogdet, "x", 1, "[sign of det x, log |det x|]")

def _table() -> dict[str, Builtin]:
    table: dict[str, Builtin] = {}

    def add(name: str, fn: Callable[..., Node], params: str, required: int, summary: str,
            context: bool = False, quoted: str = "", parts: str = "") -> None:
        table[name] = Builtin(name, fn, tuple(p for p in params.split() if p), required, summary, context,
                              frozenset(quoted.split()), frozenset(parts.split()))

    for prim in PRIMITIVES.values():  # a primitive called by name: its record says how
        if prim.builtin is not None:
            fn = ops.RECORDING[prim.name]
            for name in (prim.name, *prim.also):
                add(name, _reduction(fn) if prim.kind is REDUCTION else fn, " ".join((prim.inputs, *prim.params)),
                    prim.n_inputs or 0, prim.builtin)
    for name, fn in _RECIPROCALS.items():
        add(name, fn, "x", 1, "elementwise")
    add("dot", _dot, "a b", 2, "dot product (matrix product for matrices)")
    add("outer", _outer, "a b", 2, "outer product")
    add("diag", _diag, "x", 1, "a vector on a diagonal, or a matrix's diagonal")
    add("transpose", _transpose, "x axis1 axis2", 1, "reversed axes, or two axes swapped")
    add("reshape", _reshape, "x *shape", 1, "the same entries in a new shape")
    add("softmax", _softmax, "x axis", 1, "softmax over the last axis (or axis)")
    add("diff", _diff, "u x", 2, "d/dx[u] for a scalar variable x, by autodiff (diff --steps writes it)")
    add("detach", _detach, "x", 1, "the value without its history (no gradient flows through)")
    add("all", _all, "x", 1, "1 if every entry is non-zero, else 0")
    add("any", _any, "x", 1, "1 if some entry is non-zero, else 0")
    add("ones", _filled(1.0, "ones"), "*shape", 0, "a tensor of ones")
    add("zeros", _filled(0.0, "zeros"), "*shape", 0, "a tensor of zeros")
    add("full", _full, "*shape_and_value", 2, "a tensor filled with a value: full(2, 3, 7)")
    add("eye", _eye, "n m", 1, "identity matrix")
    add("arange", _arange, "start stop step", 1, "evenly spaced values: arange(5), arange(0, 1, 0.25)")
    add("linspace", _linspace, "start stop num", 2, "num values from start to stop, inclusive")
    add("randn", _randn, "*shape", 0, "standard normal samples (seeded by --seed)", context=True)
    add("rand", _rand, "*shape", 0, "uniform samples in [0, 1) (seeded by --seed)", context=True)
    add("load", _load, "path member", 1, 'data from .npy, .npz, .csv or .json: load("x.npy")', context=True)
    _functions(add)
    return table


BUILTINS = _table()
RANDOM = frozenset({"randn", "rand"})
# True and False for keepdims=True, as NumPy writes; inf and nan as diff prints infinite and undefined values
CONSTANTS = {"pi": math.pi, "π": math.pi, "e": math.e, "inf": math.inf, "nan": math.nan, "True": 1.0, "False": 0.0}
