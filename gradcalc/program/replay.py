"""Runs that replay: a straight-line program's primitives, recorded once, evaluated again for new values.

A program run again and again with new leaf values (a fit, a sweep, gradcheck's perturbations through the
API) need not walk its syntax tree each time: the run's graph says which primitive made each value from
which others, with which parameters. `record` keeps that, in creation order; `replay` evaluates the same
primitives on the new values and makes the nodes a run would have made (same names, same tape, same
freeing of temporaries), so a replayed run is a Run like any other.

Only a run whose every node follows from the inputs' values by the primitives alone may be replayed:
`replayable` refuses, from the syntax, any program where a value decides something (a branch, a loop's
length, an index, an axis, a shape, a random draw, a file read, a constant computed from a --set
constant). Program.run keys a recording by the given names, their shapes and the run's options, and
interprets whenever a replay fails: the interpreter then raises the error with its place, or runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..engine import backend as B
from ..engine import graph
from ..engine.graph import Node, new_node
from ..language import syntax as S
from .builtins import CONSTANTS, RANDOM
from .checker import Checker
from .interpreter import Context, Executed, Interpreter, Limits, State

# Builtins that make a value from their arguments' values (a shape, a count, a truth, a file, a draw), or
# cut a value from its history: what they make is a constant of the run, which a replay would keep.
_DECIDING = frozenset({"all", "any", "arange", "linspace", "ones", "zeros", "full", "eye", "load", "detach",
                       *RANDOM})
# Builtins whose arguments after the first are parameters read as numbers (an axis, a shape, an order).
_PARAMETRIC = frozenset({"sum", "mean", "max", "min", "prod", "logsumexp", "norm", "softmax", "transpose",
                         "reshape"})
_STRAIGHT = (S.Assign, S.FuncDef, S.Return, S.NoGrad, S.Claim, S.Question)  # Const is an Assign


def _literal(expr: S.Expr | None) -> bool:
    """A number written as such (or nothing): a parameter that cannot change between runs."""
    if expr is None or type(expr) is S.Number:
        return True
    if type(expr) is S.Unary:
        return _literal(expr.operand)
    return type(expr) is S.Name and expr.name in CONSTANTS


def _straight(expr: S.Expr, checker: Checker) -> bool:
    """Whether an expression's values decide nothing: every parameter written as a number."""
    for node in S.walk(expr):
        kind = type(node)
        if kind in (S.Compare, S.BoolOp, S.Not, S.String):
            return False
        if kind is S.Index:
            for sub in node.subscripts:  # type: ignore[union-attr]
                parts = (sub.start, sub.stop, sub.step) if type(sub) is S.Slice else (sub,)
                if not all(_literal(part) for part in parts):
                    return False
        elif kind is S.Call:
            name = node.name  # type: ignore[union-attr]
            if name in checker.functions:
                continue  # its body is checked as the program's code is
            if name in _DECIDING or any(not _literal(k.value) for k in node.keywords):  # type: ignore[union-attr]
                return False
            if name in _PARAMETRIC and not all(_literal(a) for a in node.args[1:]):  # type: ignore[union-attr]
                return False
    return True


def replayable(module: S.Module, checker: Checker) -> bool:
    """Whether every run of the program with the checker's --set names makes the same primitives in the same
    order, whatever the values: no branch, loop, computed index or parameter, draw, file, or --set constant."""
    if any(name in checker.constants for name in checker.inputs):  # constants computed from it are data
        return False
    for stmt in S.statements(module.body, functions=True):
        if not isinstance(stmt, _STRAIGHT):
            return False
        if isinstance(stmt, (S.Claim, S.Question)):
            continue  # judged after the run, over its variables: not part of it
        for field in type(stmt).expressions:
            if not _straight(getattr(stmt, field), checker):
                return False
    return True


_INPUT, _SAME = 0, 1  # a step's kind, besides a primitive: a --set value's leaf, a node kept as it is


class Recording:
    """A run's nodes as steps, in creation order: each a --set leaf, a node kept (a number, a program leaf),
    or (primitive, input steps, params, requires_grad, name, origin); with where the run's names pointed."""

    __slots__ = ("compiled", "constants", "final", "frame", "last_assigned", "leaves", "made", "replays", "steps")

    def __init__(self, executed: Executed, inputs: Mapping[str, Any]) -> None:
        state = executed.state
        roots = [*executed.frame.values(), *state.leaves.values(), *state.constants.values(), *state.made,
                 *executed.tape]
        seen: dict[int, Node] = {}
        stack = roots
        while stack:
            node = stack.pop()
            if id(node) not in seen:
                seen[id(node)] = node
                stack.extend(node.inputs)
        order = sorted(seen.values(), key=lambda node: node.seq)  # creation order: a topological order
        index = {id(node): i for i, node in enumerate(order)}
        steps: list[tuple] = []
        for node in order:
            name = node.name
            if node.op is not None:
                steps.append((node.op, tuple(index[id(x)] for x in node.inputs), node.params, node.requires_grad,
                              name, node.origin))
            elif name is not None and name in inputs and node.value is inputs[name]:
                steps.append((_INPUT, name, node.requires_grad))
            else:  # made the same way, from the same numbers, by every run: shared (never freed: no op)
                steps.append((_SAME, node))
        self.steps = steps
        self.compiled: Callable[[Mapping[str, Any]], list[Node]] | None = None  # written once it has paid
        self.replays = 0
        self.frame = [(name, index[id(node)]) for name, node in executed.frame.items()]
        self.leaves = [(name, index[id(node)]) for name, node in state.leaves.items()]
        self.constants = [(name, index[id(node)]) for name, node in state.constants.items()]
        self.made = [index[id(node)] for node in state.made]
        self.final = state.final
        self.last_assigned = state.last_assigned


COMPILED_STEPS = 5_000  # a longer run is replayed by the loop: its function would take long to compile
# Writing and compiling the function costs about eight replays of a small program by the loop: a recording
# replayed that often is written out, so a program run only a few times never pays for it.
COMPILE_AFTER = 8


def _compiled(steps: list[tuple]) -> Callable[[Mapping[str, Any]], list[Node]]:
    """The steps as one straight-line function of the inputs, returning every node in order: what the loop
    in `replay` does, without looking up each step's kind and fields (a third of a small replay's time)."""
    namespace: dict[str, Any] = {"new_node": new_node}
    lines = ["def replayed(inputs):"]
    for i, step in enumerate(steps):
        op = step[0]
        if op is _SAME:
            namespace[f"k{i}"] = step[1]
            lines.append(f"    n{i} = k{i}")
        elif op is _INPUT:
            namespace[f"k{i}"] = step[1]
            lines.append(f"    n{i} = new_node(inputs[k{i}], None, (), (), {step[2]}, k{i})")
        else:
            _, inputs, params, requires_grad, name, origin = step
            namespace.update({f"f{i}": op.forward, f"o{i}": op, f"p{i}": params, f"k{i}": name})
            values = "".join(f"n{j}.value, " for j in inputs) + (f"*p{i}" if params else "")
            made = "".join(f"n{j}, " for j in inputs)
            lines.append(f"    n{i} = new_node(f{i}({values}), o{i}, ({made}), p{i}, {requires_grad}, k{i})")
            if origin is not None:
                namespace[f"c{i}"] = origin
                lines.append(f"    n{i}.origin = c{i}")
    lines.append(f"    return [{', '.join(f'n{i}' for i in range(len(steps)))}]")
    exec("\n".join(lines), namespace)  # the recording's own code: written from its steps, not from input
    compiled: Callable[[Mapping[str, Any]], list[Node]] = namespace["replayed"]
    return compiled


def replay(recording: Recording, module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
           checker: Checker) -> Executed | None:
    """The run with these inputs (the same names and shapes as the recorded one's), or None where a
    primitive fails on these values: the caller interprets the program then, which says where."""
    made: list[Node] = []
    add = made.append
    recording.replays += 1
    if recording.replays > COMPILE_AFTER and recording.compiled is None and len(recording.steps) <= COMPILED_STEPS:
        recording.compiled = _compiled(recording.steps)
    try:
        with graph.building(release=True) as tape, B.errstate():
            if recording.compiled is not None:
                made = recording.compiled(inputs)
            else:
                for step in recording.steps:
                    op = step[0]
                    if op is _SAME:
                        add(step[1])
                    elif op is _INPUT:
                        add(new_node(inputs[step[1]], None, (), (), step[2], step[1]))
                    else:
                        args = tuple([made[i] for i in step[1]])
                        params = step[2]
                        node = new_node(op.forward(*[x.value for x in args], *params), op, args, params, step[3],
                                        step[4])
                        if step[5] is not None:
                            node.origin = step[5]
                        add(node)
    except Exception:  # NumPy's errors for these values: the interpreter words them, with their place
        return None
    state = State(leaves={name: made[i] for name, i in recording.leaves},
                  constants={name: made[i] for name, i in recording.constants},
                  made=[made[i] for i in recording.made], last_assigned=recording.last_assigned,
                  final=dict(recording.final))
    interpreter = Interpreter(module, inputs, context, limits, state, checker)
    frame = interpreter.globals
    for name, i in recording.frame:
        frame[name] = made[i]
    return Executed(frame, state, interpreter, tape)
