"""Batch mode: one program at many points (`--at POINTS`, `Program.run_batch`), as `jax.vmap` runs it.

The points are read and run a chunk at a time, so an endless producer on standard input works
in bounded memory. In a chunk, the points that give the same names with the same shapes form a
group, and a group of `values` or `grad` runs through the program at once (Program.run_stacked:
each given leaf a stack of the group's values, engine/batching.py's `Batched`, and every primitive
its batched function; points that take different paths run in groups that took the same one). A
group where some point fails runs again point by point, so that each point gets its own result or
error. Jacobians, Hessians, JVPs and HVPs run batched too, as `jax.vmap(jax.jacrev(f))` does: one
batched forward pass, then one batched reverse pass per seed (an output entry, an input entry), each
seed the same at every point. `diff` runs batched as well: the derivatives' graphs are built once for
the group (with create_graph, every value a stack) and read as expressions once per set of points that
read the same (symbolic.py reads a few values besides the graph: the constants it prints, whether a
leaf holds distributions; see _described), each point then given its own value.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import math
import os
import re
import select
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

from ..engine import autodiff, batching
from ..engine import backend as B
from ..engine.graph import Node, constant, leaf
from ..errors import GradcalcError, InternalError, LimitExceeded, Pos, Source, UsageError, did_you_mean
from ..files import DEFAULT_MAX_FILE_SIZE
from ..language import syntax as S
from .checker import check
from .interpreter import Limits, execute, make_context

# api's Program and Run, which import this module (an import back would be a cycle): Program.run_stacked
# hands its Run class in, and results are made as the class of what a run gave (api.Gradients).
Program = Any
Run = Any

CHUNK = 4096  # points read, run and written together: the memory a stream takes is bounded by it
METHODS = ("values", "grad", "jacobian", "hessian", "jvp", "hvp", "diff")  # the Run methods a batch computes
RUN_OPTIONS = ("seed", "dtype", "device", "max_elements", "max_iterations", "max_recursion", "allow_read",
               "max_file_size")


class _Pause:
    """read_points' mark between records where standard input has paused: run_chunks runs what it holds."""


PAUSE: Any = _Pause()


@dataclass
class Point:
    """One point's outcome: its index (0-based, in the order given), its values, and the result of the Run
    method (`values`: {name: value}; else what the method returns), or the error that stopped it. `read`:
    the record it was read from, where a value is a constant expression (an error in it points there)."""

    index: int
    values: Mapping[str, Any]
    result: Any = None
    error: GradcalcError | None = None
    read: Record | None = dataclasses.field(default=None, repr=False, compare=False)


def run_batch(program: Program, points: Iterable[Mapping[str, Any] | GradcalcError], method: str = "values",
              arguments: Mapping[str, Any] | None = None, *, ignore_extra: bool = False, chunk_size: int = CHUNK,
              **options: Any) -> Iterator[Point]:
    """Each point's Point, in order, a chunk at a time (see Program.run_batch)."""
    for chunk in run_chunks(program, points, method, arguments, ignore_extra=ignore_extra, chunk_size=chunk_size,
                            **options):
        yield from chunk


def run_chunks(program: Program, points: Iterable[Mapping[str, Any] | GradcalcError], method: str = "values",
               arguments: Mapping[str, Any] | None = None, *, ignore_extra: bool = False, chunk_size: int = CHUNK,
               **options: Any) -> Iterator[list[Point]]:
    """The points run a chunk at a time (the CLI writes each chunk as it is done); an unreadable record is
    given as its GradcalcError, and becomes its point's error."""
    if method not in METHODS:
        raise UsageError(f"run_batch: unknown method '{method}'", f"use one of: {', '.join(METHODS)}")
    unknown = [name for name in options if name not in RUN_OPTIONS]
    if unknown:
        raise UsageError(f"run_batch: unknown option '{unknown[0]}'", f"the options are: {', '.join(RUN_OPTIONS)}")
    if chunk_size < 1:
        raise UsageError(f"run_batch: chunk_size must be 1 or more, not {chunk_size}", "use the default, 4096")
    arguments = dict(arguments or {})
    program.check_arguments(method, arguments)  # an option wrong at every point: one error, before any runs
    settable = _settable(program)
    chunk: list[Point] = []
    index = 0
    for given in points:
        if given is PAUSE:  # the producer is slower than the runs: what has come is run now
            if chunk:
                yield _run_chunk(program, chunk, method, arguments, options)
                chunk = []
            continue
        chunk.append(_point(index, given, settable, ignore_extra))
        index += 1
        if len(chunk) == chunk_size:
            yield _run_chunk(program, chunk, method, arguments, options)
            chunk = []
    if chunk:
        yield _run_chunk(program, chunk, method, arguments, options)


def _settable(program: Program) -> set[str]:
    """The names a point may give: the program's leaves and constants, and the names it reads but never assigns."""
    checker = check(program.module, (), program.max_depth) if not program.checked \
        else next(iter(program.checked.values()))
    read = {node.name for node in S.code(program.module.body) if isinstance(node, S.Name)}
    read.update(*(function.reads for function in checker.functions.values()))
    leaves = {name for name, stmts in checker.assigned.items() if any(checker.is_leaf(s) for s in stmts)}
    return leaves | (read - set(checker.assigned))


def _point(index: int, given: Mapping[str, Any] | GradcalcError, settable: set[str], ignore_extra: bool) -> Point:
    """A point with its values as host arrays, or the error that keeps it from running."""
    if isinstance(given, GradcalcError):
        return Point(index, {}, error=given)
    if not isinstance(given, Mapping):
        return Point(index, {}, error=UsageError(f"point {index}: not an object of leaf values",
                                                 'give each point as {"x": 1.5, "W": [[1, 2], [3, 4]]}'))
    values: dict[str, Any] = {}
    for name, value in given.items():
        if name not in settable:
            if ignore_extra:
                continue
            hint = did_you_mean(str(name), settable) or f"its leaves are: {', '.join(sorted(settable))}"
            return Point(index, given, error=_about(given, name, UsageError(
                f"point {index}: the program has no leaf '{name}'", hint + " (--ignore-extra skips other keys)")))
        if value.__class__ is float or value.__class__ is int:  # the usual case, kept a number: stacked at once
            values[name] = float(value)
            continue
        try:
            host = B.to_host(B.asarray(value)) if not isinstance(value, str) else value
        except (GradcalcError, ValueError, TypeError):
            return Point(index, given, error=_about(given, name, UsageError(
                f"point {index}: '{name}' is not a number or a rectangular array of numbers",
                "give a number or nested lists such as [[1, 2], [3, 4]]")))
        values[name] = host
    expressions = any(isinstance(value, str) for value in values.values())
    return Point(index, values, read=given if expressions and isinstance(given, Record) else None)


def _about(given: Mapping[str, Any], key: str, error: GradcalcError) -> GradcalcError:
    """An error about a point's key, placed where the file has it (a point from read_points)."""
    if isinstance(given, Record):
        return error.at(given.place(key)).within(given.source)
    return error


def _run_chunk(program: Program, chunk: list[Point], method: str, arguments: dict[str, Any],
               options: dict[str, Any]) -> list[Point]:
    groups: dict[Any, list[Point]] = {}
    for point in chunk:
        if point.error is None:
            # Strings (constant expressions) are evaluated per point: such a point has a group of its own.
            key = tuple((name, () if v.__class__ is float else v.shape if not isinstance(v, str) else id(point))
                        for name, v in point.values.items())
            groups.setdefault(key, []).append(point)
    for group in groups.values():
        _run_group(program, group, method, arguments, options)
    return chunk


def _run_group(program: Program, group: list[Point], method: str, arguments: dict[str, Any],
               options: dict[str, Any]) -> None:
    if len(group) == 1 or any(isinstance(v, str) for v in group[0].values.values()):
        for point in group:
            _run_one(program, point, method, arguments, options)
        return
    try:
        _run_batched(program, group, method, arguments, options)
    except LimitExceeded:  # the group's results together are too large (a Jacobian per point): halves
        half = len(group) // 2
        _run_group(program, group[:half], method, arguments, options)
        _run_group(program, group[half:], method, arguments, options)
    except Exception:  # some point's error (or a bug): one by one, so that each point gets its own
        for point in group:
            _run_one(program, point, method, arguments, options)


def _run_one(program: Program, point: Point, method: str, arguments: dict[str, Any],
             options: dict[str, Any]) -> None:
    """A point run as a command runs it: the per-point path, and the reference the batched one is held to."""
    # A value given as text is a constant expression: an error in it is about this point's key, not --set's.
    labels = {name: f"point {point.index}, key '{name}'" for name, value in point.values.items()
              if isinstance(value, str)}
    try:
        run = program.run(point.values, labels=labels, **options)
        if method == "grad":
            point.result = run.grad(**arguments, retain_graph=False)
        else:
            point.result = getattr(run, method)(**arguments)
    except GradcalcError as error:
        point.error = _about_value(point, labels, error) if labels else error
    except RecursionError:
        point.error = GradcalcError("the program nests too deeply to evaluate",
                                    "split deep expressions into several statements").within(program.source)
    except MemoryError:
        from ..errors import out_of_memory

        point.error = out_of_memory()
    except Exception as exc:  # a bug in gradcalc: this point's error (exit 3), never the other points'
        point.error = InternalError(f"internal error: {type(exc).__name__}: {exc}",
                                    "this is a bug in gradcalc; please report it with the program that caused it")


def _about_value(point: Point, labels: dict[str, str], error: GradcalcError) -> GradcalcError:
    """An error in a point's constant expression (its source is the value, named by the label) says which
    point and key it is about, and points into the points file where the value is written."""
    named = error.source.filename if error.source is not None else None
    key = next((name for name, label in labels.items() if label == named), None)
    if key is None:  # the program's own error at this point
        return error
    if not error.message.startswith(labels[key]):
        error.message = f"{labels[key]}: {error.message}"
    if point.read is not None:
        error.pos = point.read.value_place(key, error.pos)
        error.source = point.read.source
    return error


def _run_batched(program: Program, group: list[Point], method: str, arguments: dict[str, Any],
                 options: dict[str, Any]) -> None:
    """The whole group through the program at once (Program.run_stacked); each point's result unstacked."""
    found = program.run_stacked({name: [p.values[name] for p in group] for name in group[0].values}, method,
                                arguments, **options)
    make = found.__class__  # api.Gradients, which this module cannot import (api imports it)
    for i, point in enumerate(group):
        point.result = found[i] if method == "diff" else \
            {name: stack[i, ...] for name, stack in found.items()} if isinstance(found, dict) else \
            make(found.of, found.value[i, ...], {name: g[i, ...] for name, g in found.grads.items()},
                 set(found.no_path), found.vector) if method == "grad" else \
            _mapped(lambda stack: stack[i, ...], found)  # noqa: B023  (used at once)


# --- Points as columns: one pass through the program (Program.run_stacked) ------------------------------

def run_stacked(program: Program, run_class: type, stacks: Mapping[str, Any], method: str,
                arguments: Mapping[str, Any] | None, options: dict[str, Any]) -> Any:
    """Program.run_stacked: the points through the program at once, in groups where their paths differ."""
    if method not in METHODS:
        raise UsageError(f"run_stacked: unknown method '{method}'", f"use one of: {', '.join(METHODS)}")
    arrays: dict[str, Any] = {}
    for name, value in stacks.items():
        try:
            arrays[name] = B.to_host(B.asarray(value))
        except (GradcalcError, ValueError, TypeError):
            raise UsageError(f"run_stacked: '{name}' is not numbers stacked along a first axis",
                             "give an array, or nested lists, of one shape per point") from None
    counts = {array.shape[0] if array.ndim else -1 for array in arrays.values()}
    if len(counts) != 1 or -1 in counts:
        raise UsageError("run_stacked: every value needs the same leading axis, one entry per point",
                         "stack each leaf's values at the points along a first axis")
    count = counts.pop()
    parts = _parts(program, run_class, arrays, count, method, dict(arguments or {}), options)
    if method == "diff":  # a list per point (the expressions of points on different paths differ)
        each: list[Any] = [None] * count
        for at, found in parts:
            for k, i in enumerate(at):
                each[i] = found[k]
        return each
    return parts[0][1] if len(parts) == 1 else _gathered(parts, count)


def _parts(program: Program, run_class: type, arrays: dict[str, Any], count: int, method: str,
           arguments: dict[str, Any], options: dict[str, Any]) -> list[tuple[list[int], Any]]:
    """The points in one pass, or in groups that took the same path (by where they part: batching.Divergent),
    or one by one (an operation with no batching rule): each group's points (their indices) and result."""
    try:
        return [(list(range(count)), _stacked(program, run_class, arrays, count, method, arguments, options))]
    except batching.Divergent as split:
        groups: dict[Any, list[int]] = {}
        for i, key in enumerate(split.keys):
            groups.setdefault(key, []).append(i)
        return [([at[k] for k in inner], found) for at in groups.values()
                for inner, found in _parts(program, run_class, {name: array[at] for name, array in arrays.items()},
                                           len(at), method, arguments, options)]
    except batching.Unbatchable:
        return [([i], _stacked(program, run_class, {name: array[i:i + 1] for name, array in arrays.items()}, 1,
                               method, arguments, options)) for i in range(count)]


def _stacked(program: Program, run_class: type, arrays: dict[str, Any], count: int, method: str,
             arguments: dict[str, Any], options: dict[str, Any]) -> Any:
    """run_stacked's one pass (batching.Divergent where the points' paths differ); one point runs unbatched."""
    if count == 1:  # no batch to carry: the run every command makes
        run = program.run({name: array[0] for name, array in arrays.items()}, **options)
        if method == "values":
            return {name: value[None] for name, value in run.values().items()}
        if method == "diff":
            return [run.diff(**arguments)]
        if method != "grad":
            return _mapped(lambda value: B.to_host(value)[None], getattr(run, method)(**arguments))
        found = run.grad(**arguments, retain_graph=False)
        return found.__class__(found.of, found.value[None], {name: g[None] for name, g in found.grads.items()},
                               found.no_path, found.vector)
    settings: dict[str, Any] = dict(
        seed=0, dtype="float64", device="cpu", max_elements=B.DEFAULT_MAX_ELEMENTS,
        max_iterations=Limits.max_iterations, max_recursion=Limits.max_recursion, allow_read=(),
        max_file_size=DEFAULT_MAX_FILE_SIZE, keep_values=False) | options
    B.use(settings["device"], settings["dtype"], settings["max_elements"])
    inputs = {name: batching.Batched(B.asarray(array)) for name, array in arrays.items()}
    context = make_context(program.folder, settings["seed"], tuple(settings["allow_read"]), settings["max_file_size"])
    limits = Limits(settings["max_iterations"], settings["max_recursion"], program.max_depth)
    try:
        with batching.primal_batching(), B.errstate():
            names = frozenset(inputs)
            executed = execute(program.module, inputs, context, limits, False, program.checked.get(names))
            program.checked[names] = executed.interpreter.checker
            run = run_class(program, executed, inputs, settings)
            if method == "values":
                return {name: batching.unstack(node.value, count) for name, node in run.frame.items()}
            if method == "diff":
                with _put_off_reading() as readings:
                    run.diff(**arguments)
            elif method != "grad":
                with _over_points(count):
                    return _mapped(lambda value: batching.unstack(value, count), getattr(run, method)(**arguments))
            else:
                found = run.grad(**arguments, retain_graph=False, host=False)
                return found.__class__(found.of, batching.unstack(found.value, count),
                                       {name: batching.unstack(g, count) for name, g in found.grads.items()},
                                       found.no_path, found.vector)
        with B.errstate():  # out of the batching: each reading is a point's, as its own run would read it
            return _described(readings, count)
    except GradcalcError as exc:
        raise exc.within(program.source) from None


@dataclass
class _Reading:
    """A derivative's reading as an expression (symbolic.describe or .shortest, as Run.diff called it), put off
    until the graph's values are one point's."""

    read: Any
    args: tuple
    keywords: dict[str, Any]

    @property
    def node(self) -> Node:
        return self.args[2]

    @property
    def adjoints(self) -> dict[Node, str]:
        """The gradients of kept intermediates it names (dL_dd), read as expressions of their own."""
        return (self.args[5] if len(self.args) > 5 else self.keywords.get("adjoints")) or {}

    @property
    def names(self) -> set[str]:
        """What its symbols print as: the leaves', constants' and kept intermediates' names, and dL_dd's."""
        return {*self.args[3].values(), *self.adjoints.values()}

    @property
    def roots(self) -> list[Node]:
        return [self.node, *self.adjoints]

    def __call__(self) -> Any:
        return self.read(*self.args, **self.keywords)


@contextlib.contextmanager
def _put_off_reading() -> Iterator[list[_Reading]]:
    """Within the block, Run.diff's readings of its derivatives are put off (into the list given): its graph
    holds every point's values at once, and a reading is of one point's."""
    from ..engine import symbolic

    readings: list[_Reading] = []
    saved = symbolic.describe, symbolic.shortest

    def put_off(read: Any) -> Any:
        return lambda *args, **keywords: readings.append(_Reading(read, args, keywords))

    symbolic.describe, symbolic.shortest = put_off(symbolic.describe), put_off(symbolic.shortest)
    try:
        yield readings
    finally:
        symbolic.describe, symbolic.shortest = saved


_WORD = re.compile(r"[A-Za-z_]\w*")


def _described(readings: list[_Reading], count: int) -> list[list[Any]]:
    """Each point's derivatives (symbolic.Derivative), each read once for the points that read it the same.

    Besides the graph (the same at every point of a path), a reading reads of the values: the numbers of
    the constants it prints (a mask from max's rule, a constant folded from a leaf), whether a leaf holds
    distributions (sum(Y) = 1, on which softmax's derivative simplifies), and, of a derivative that folds
    to a number, its value (NaN where it is 0/0 stays NaN). Points that agree on all of it read the same:
    the reading is made at the first of them, and each point is given its own value."""
    from ..engine.symbolic import is_distribution

    nodes: set[Node] = set()
    pending = [root for reading in readings for root in reading.roots]
    while pending:
        node = pending.pop()
        if node not in nodes:
            nodes.add(node)
            pending.extend(node.inputs)
    stacks = {node: B.to_host(node.value.stack) for node in nodes if isinstance(node.value, batching.Batched)}
    symbols = set().union(*(reading.args[3] for reading in readings))
    read = [[is_distribution(row) for row in stack] if node in symbols else [row.tobytes() for row in stack]
            for node, stack in stacks.items() if node.op is None and (node.ndim or node not in symbols)]
    groups: dict[Any, list[int]] = {}
    for i, key in enumerate(zip(*read) if read else [()] * count):
        groups.setdefault(key, []).append(i)
    values = [batching.unstack(reading.node.value, count) for reading in readings]
    each: list[list[Any]] = [[None] * len(readings) for _ in range(count)]
    for at in groups.values():
        for j, derivative in enumerate(_read_at(readings, stacks, at[0])):
            for share, found in _by_value(readings[j], derivative, values[j], at, stacks):
                for i in share:
                    each[i][j] = _valued(found, values[j][i, ...])
    return each


def _by_value(reading: _Reading, derivative: Any, values: Any, at: list[int], stacks: dict[Node, Any]
              ) -> Iterator[tuple[list[int], Any]]:
    """The points `at` (all read as `derivative`, at the first of them) with the reading that is theirs: all of
    them, unless it folded to a number (no symbol in its text), which is read again where the value differs
    (x/x reads 1, but NaN where x = 0, as autograd computed it)."""
    while at:
        words = _WORD.findall(" ".join([derivative.text, *(body for _, body, _ in derivative.where)]))
        first = values[at[0]].tobytes()
        share = at if reading.names & set(words) else [i for i in at if values[i].tobytes() == first]
        yield share, derivative
        done = set(share)
        at = [i for i in at if i not in done]
        if at:
            derivative = _read_at([reading], stacks, at[0])[0]


def _valued(derivative: Any, value: Any) -> Any:
    """The derivative with a point's value: dataclasses.replace without its checks of every field (a fifth
    of the time of a batch of 10^4 points' diff)."""
    found = object.__new__(type(derivative))
    found.__dict__.update(vars(derivative), value=value)
    return found


def _read_at(readings: list[_Reading], stacks: dict[Node, Any], i: int) -> list[Any]:
    """The readings made with every batched node holding point i's value, as its own run's graph would."""
    saved = {node: node.value for node in stacks}
    try:
        for node, stack in stacks.items():
            node.value = stack[i, ...]
        return [reading() for reading in readings]
    finally:
        for node, value in saved.items():
            node.value = value


def _gathered(parts: list[tuple[list[int], Any]], count: int) -> Any:
    """run_stacked's groups' results put back in the points' order."""
    first = parts[0][1]
    if not isinstance(first, dict) and not hasattr(first, "grads"):  # a Jacobian's, a Hessian's, J·v, H·v
        def joined(*columns: Any) -> Any:
            if any(column.shape[1:] != columns[0].shape[1:] for column in columns):
                raise UsageError("the points' results differ in shape between their paths",
                                 "use run_batch, which gives each point its own results")
            out = B.to_host(columns[0])[:1].repeat(count, axis=0)  # every row is written below
            for (at, _), column in zip(parts, columns):
                out[at] = B.to_host(column)
            return out

        return _mapped(joined, *(part for _, part in parts))
    columns = first if isinstance(first, dict) else {"": first.value, **first.grads}
    for _, part in parts:
        if list(part if isinstance(part, dict) else part.grads) != [name for name in columns if name]:
            raise UsageError("the points' runs assign different variables (their branches differ)",
                             "use run_batch, which gives each point its own results")

    def gather(name: str) -> Any:
        out = None
        for at, part in parts:
            column = (part if isinstance(part, dict) else {"": part.value, **part.grads}).get(name)
            if column is None or (out is not None and column.shape[1:] != out.shape[1:]):
                raise UsageError(f"the points' '{name or 'output'}' differ in shape between their paths",
                                 "use run_batch, which gives each point its own results")
            if out is None:
                out = B.to_host(column)[:1].repeat(count, axis=0)  # every row is written below
            out[at] = B.to_host(column)
        return out

    gathered = {name: gather(name) for name in columns}
    if isinstance(first, dict):
        return gathered
    value = gathered.pop("")
    return first.__class__(first.of, value, gathered, set().union(*(part.no_path for _, part in parts)),
                           first.vector)


def _mapped(fn: Any, first: Any, *others: Any) -> Any:
    """A result (Jacobians, Hessians, Tangents, Curvature; several of one kind, walked together) with `fn`
    applied to each of its arrays, the rest (names, the mode) kept."""
    if isinstance(first, (batching.Batched, B.host.ndarray)) or hasattr(first, "__cuda_array_interface__"):
        return fn(first, *others)
    if isinstance(first, list) and first and not isinstance(first[0], str):
        if any(len(other) != len(first) for other in others):
            raise UsageError("the points' results differ between their paths",
                             "use run_batch, which gives each point its own results")
        return [_mapped(fn, *items) for items in zip(first, *others)]
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        return dataclasses.replace(first, **{field.name: _mapped(fn, getattr(first, field.name),
                                                                 *(getattr(other, field.name) for other in others))
                                             for field in dataclasses.fields(first)})
    return first


@contextlib.contextmanager
def _over_points(count: int) -> Iterator[None]:
    """Within a batched run's block, Run.jacobian and Run.hessian take each seed in turn, the same seed at every
    point, and keep the results per point (`Batched`, unstacked by the caller).

    autodiff's own carry all seeds in one pass as a batch axis, which the points hold already here;
    J·v and H·v need nothing of the kind (one seed). What they give the host stays a batch: a
    `Batched` value is kept as it is (_mapped unstacks it), not read as one number."""
    saved = autodiff.jacobian_rev, autodiff.jacobian_fwd, autodiff.hessian, B.to_host
    host = B.to_host
    autodiff.jacobian_rev, autodiff.jacobian_fwd, autodiff.hessian = (
        lambda output, targets: _jacobian_rev(output, targets, count),
        lambda output, targets: _jacobian_fwd(output, targets, count),
        lambda output, targets: _hessian(output, targets, count))
    B.to_host = lambda value: value if isinstance(value, batching.Batched) else host(value)
    try:
        yield
    finally:
        autodiff.jacobian_rev, autodiff.jacobian_fwd, autodiff.hessian, B.to_host = saved


def _seeds(shape: tuple[int, ...]) -> Iterator[Any]:
    """One-hot arrays of a shape, in flat order: the same seed for every point of the batch."""
    for i in range(math.prod(shape)):
        seed = B.xp.zeros(math.prod(shape), dtype=B.dtype)
        seed[i] = 1
        yield B.xp.reshape(seed, shape)


def _room(count: int, head: tuple[int, ...], tail: tuple[int, ...]) -> None:
    """--max-elements for a block of every point's results, before any pass (run_batch then halves the batch)."""
    B.check_size((count, *head, *tail), f"a batch of {count:,} points' derivatives")


def _block(found: list[Any], count: int, head: tuple[int, ...], tail: tuple[int, ...], axis: int) -> Any:
    """A block (count, *head, *tail) from what each seed gave, per point or the same at every point (or None:
    no path), stacked along `axis` of the points' flat seeds (1: the head's, -1: the tail's)."""
    each = [B.xp.zeros((count, *(tail if axis == 1 else head)), dtype=B.dtype) if f is None else
            f.stack if isinstance(f, batching.Batched) else
            B.xp.broadcast_to(f, (count, *(tail if axis == 1 else head))) for f in found]
    if not each:  # a target (or output) with no entries
        return batching.Batched(B.xp.zeros((count, *head, *tail), dtype=B.dtype))
    stacked = B.xp.stack(each, axis=1 if axis == 1 else -1)
    return batching.Batched(B.xp.reshape(stacked, (count, *head, *tail)))


def _jacobian_rev(output: Node, targets: Sequence[Node], count: int) -> list[Any]:
    """Each ∂output/∂target at every point: one batched reverse pass per output entry."""
    for target in targets:
        _room(count, tuple(output.shape), tuple(target.shape))
    rows = [autodiff.backward(output, seed, targets) for seed in _seeds(tuple(output.shape))]
    return [_block([row.get(t) for row in rows], count, tuple(output.shape), tuple(t.shape), 1) for t in targets]


def _jacobian_fwd(output: Node, targets: Sequence[Node], count: int) -> list[Any]:
    """Each ∂output/∂target at every point: one batched JVP per input entry (autodiff's transpose trick: the
    VJP recorded with its cotangent as a leaf is linear in it, and its VJP is J·v)."""
    for target in targets:
        _room(count, tuple(output.shape), tuple(target.shape))
    cotangent = leaf(B.xp.ones(output.shape, dtype=B.dtype), "u")
    linear = autodiff.backward(output, cotangent, targets, create_graph=True)
    blocks = []
    for target in targets:
        transposed = linear.get(target)
        columns = [None if transposed is None or not transposed.requires_grad else
                   autodiff.backward(transposed, seed, [cotangent]).get(cotangent)
                   for seed in _seeds(tuple(target.shape))]
        blocks.append(_block(columns, count, tuple(output.shape), tuple(target.shape), -1))
    return blocks


def _hessian(output: Node, targets: Sequence[Node], count: int) -> list[list[Any]]:
    """The blocks ∂²output/∂a∂b at every point: the gradient recorded, then one reverse pass per entry of a."""
    for a in targets:
        for b in targets:
            _room(count, tuple(a.shape), tuple(b.shape))
    first = autodiff.backward(output, constant(B.xp.ones((), dtype=B.dtype)), targets, create_graph=True)
    rows = []
    for target in targets:
        gradient = first.get(target)
        seconds = [{} if gradient is None or not gradient.requires_grad else
                   autodiff.backward(gradient, seed, targets) for seed in _seeds(tuple(target.shape))]
        rows.append([_block([second.get(other) for second in seconds], count, tuple(target.shape),
                            tuple(other.shape), 1) for other in targets])
    return rows


# --- Reading points: JSON Lines or CSV, from a file or standard input ---------------------------------

def read_points(path: str, stream: IO[bytes] | IO[str] | None = None, chunk_size: int = CHUNK,
                max_line: int = 10 * 2**20) -> Iterator[dict[str, Any] | GradcalcError | _Pause]:
    """Each record of a points file as {name: value}, or the error that makes it unreadable (its point fails).

    JSON Lines (one object a line) unless the first line that is not blank starts with something other
    than `{` (or `[`, a JSON array, which is no point): then it is a CSV file's header of leaf names.
    Blank lines are no points. Standard input (`-`) is read as it arrives: where it pauses, PAUSE says
    so (run_chunks then runs what has come).
    """
    shown = "standard input" if path == "-" else path
    if stream is None:
        try:
            stream = open(path, "rb")
        except OSError as exc:
            from ..files import describe

            raise UsageError(f"--at {path}: cannot read it ({describe(exc)})",
                             "give a JSON Lines or CSV file of points, or '-' for standard input") from None
    header: list[str] | None = None
    kind = ""
    number = 0
    try:
        for lines in _line_chunks(stream, chunk_size, max_line):
            for raw in lines:
                number += 1
                line = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
                line = line.rstrip("\r\n").removeprefix("\ufeff")
                if not line.strip():
                    continue
                if len(line) > max_line:
                    yield _record_error(shown, number, line[:80] + "…", 1,
                                        f"the line is longer than {max_line:,} bytes (--max-file-size)",
                                        "give one point a line, or raise --max-file-size")
                    continue
                if not kind:
                    kind = "json" if line.lstrip()[:1] in ("{", "[") else "csv"  # a JSON array: not a point
                    if kind == "csv":
                        header = [name.strip() for name in next(csv.reader([line]))]
                        if not all(header):
                            yield _record_error(shown, number, line, 1, "the CSV header has an empty column name",
                                                "name each column after a leaf")
                            return
                        continue
                yield _json_record(shown, number, line) if kind == "json" else \
                    _csv_record(shown, number, line, header or [])
            if len(lines) < chunk_size:
                yield PAUSE
    finally:
        if path != "-":
            stream.close()


def _line_chunks(stream: IO[bytes] | IO[str], size: int, longest: int) -> Iterator[list[Any]]:
    """Lines as they come: up to `size` at once, fewer when the producer is slower than we are. A line
    longer than `longest` is cut there (the reader reports it) and its rest skipped, never held whole."""
    fd: int | None
    try:
        fd = stream.fileno()
    except (OSError, AttributeError, ValueError):  # a StringIO (tests, an in-process caller)
        fd = None
    if fd is None:
        lines: list[Any] = []
        for line in stream:
            lines.append(line)
            if len(lines) >= size:
                yield lines
                lines = []
        if lines:
            yield lines
        return
    pending = b""
    done: list[bytes] = []
    skipping = False  # the rest of a line already cut
    while True:
        data = os.read(fd, 1 << 16)
        if not data:
            break
        if skipping:
            end = data.find(b"\n")
            if end < 0:
                continue
            data, skipping = data[end + 1:], False
        pending += data
        *complete, pending = pending.split(b"\n")
        done.extend(complete)
        if len(pending) > longest:
            done.append(pending[:longest + 1])
            pending, skipping = b"", True
        while len(done) >= size:
            yield done[:size]
            done = done[size:]
        if done and not _more_ready(fd):
            yield done
            done = []
    if pending:
        done.append(pending)
    if done:
        yield done


def _more_ready(fd: int) -> bool:
    """Whether more input is there within a moment (always, for a file): else what came is run now."""
    try:
        return bool(select.select([fd], [], [], 0.002)[0])
    except (OSError, ValueError):  # no select on this kind of file (Windows pipes): read on
        return True


class Record(dict):
    """A point as read from a file: its values, and where it was (errors about it point there)."""

    shown: str
    line: int
    text: str

    @property
    def source(self) -> Source:
        return _source(self.shown, self.line, self.text)

    def place(self, key: str) -> Pos:
        """Where a key is written on the record's line (its first column if not found)."""
        quoted = json.dumps(key)
        at = self.text.find(quoted) if self.text.lstrip().startswith("{") else -1
        return Pos(self.line, at + 1 if at >= 0 else 1, len(quoted) if at >= 0 else 1)

    def value_place(self, key: str, pos: Pos | None) -> Pos:
        """Where a place in a key's string value is on the record's line; the key's place where the value is
        not written there as it reads (a JSON escape) or the place is not on the value's first line."""
        quoted, value = json.dumps(key), self.get(key)
        at = self.text.find(quoted) if isinstance(value, str) else -1
        found = _STRING_VALUE.match(self.text, at + len(quoted)) if at >= 0 else None
        if found is None or pos is None or pos.line != 1 or not self.text.startswith(f'{value}"', found.end()):
            return self.place(key)
        return Pos(self.line, found.end() + pos.column, pos.width)


_STRING_VALUE = re.compile(r'\s*:\s*"')  # between a key and its string value on a JSON line


def _record_error(shown: str, number: int, line: str, column: int, message: str, hint: str) -> GradcalcError:
    return UsageError(message, hint, Pos(number, max(1, column))).within(_source(shown, number, line))


def _source(shown: str, number: int, line: str) -> Source:
    """A record's line as a source whose line `number` it is: an error shows it with a caret."""
    return Source("\n" * (number - 1) + line, shown)


def _record(values: dict[str, Any], shown: str, number: int, line: str) -> Record:
    record = Record(values)
    record.shown, record.line, record.text = shown, number, line  # its Source only for an error: made then
    return record


def _json_record(shown: str, number: int, line: str) -> dict[str, Any] | GradcalcError:
    try:
        record = json.loads(line)
    except ValueError as exc:
        message = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        column = exc.colno if isinstance(exc, json.JSONDecodeError) else 1
        return _record_error(shown, number, line, column, f"not JSON: {message}",
                             'give one JSON object a line, such as {"x": 1.5}')
    if not isinstance(record, dict):
        return _record_error(shown, number, line, 1, "not a JSON object",
                             'give one JSON object of leaf values a line, such as {"x": 1.5}')
    return _record(record, shown, number, line)


def _csv_record(shown: str, number: int, line: str, header: list[str]) -> dict[str, Any] | GradcalcError:
    cells = next(csv.reader([line]))
    if len(cells) != len(header):
        return _record_error(shown, number, line, 1, f"{len(cells)} values for {len(header)} columns",
                             "give one value per column of the header (an empty cell keeps the program's value)")
    record: dict[str, Any] = {}
    for name, text in zip(header, cells):
        cell = text.strip()
        if not cell:
            continue
        try:
            record[name] = float(cell)
        except ValueError:
            return _record_error(shown, number, line, line.find(cell) + 1, f"'{name}': {cell!r} is not a number",
                                 "a CSV column holds numbers (scalar leaves); give arrays in JSON Lines")
    return _record(record, shown, number, line)
