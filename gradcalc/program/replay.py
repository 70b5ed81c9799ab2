"""Runs that replay: a straight-line program's primitives, recorded once, evaluated again for new values.

A program run again and again with new leaf values (a fit, a sweep, gradcheck's perturbations through the
API) need not walk its syntax tree each time: the run's graph says which primitive made each value from
which others, with which parameters. `Recording` keeps that, in creation order; its `replay` evaluates the
same primitives on the new values (freeing the temporaries the interpreter frees) and gives a `Replayed`:
the values alone. Its nodes (the same names, tape and freed values a run would have made) are made only
when something asks for them; `Run.grad` asks for none: its pass, written out from the recording's graph
as one function of the values (autodiff.compiled_backward), runs the same rules in the same order.

Only a run whose every node follows from the inputs' values by the primitives alone may be replayed:
`replayable` refuses, from the syntax, any program where a value decides something (a branch, a loop's
length, an index, an axis, a shape, a random draw, a file read, a constant computed from a --set
constant). Program.run keys a recording by the given names, their shapes and the run's options, and
interprets whenever a replay fails: the interpreter then raises the error with its place, or runs; so
does grad's own pass whenever the written one fails (a singular matrix's rule).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..engine import autodiff, graph
from ..engine import backend as B
from ..engine.graph import Node, Released, new_node
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

    __slots__ = ("backwards", "compiled", "constants", "final", "frame", "frees", "last_assigned", "leaves",
                 "made", "positions", "replays", "steps")

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
        last_use: dict[int, int] = {}
        for k, node in enumerate(order):
            name = node.name
            if node.op is not None:
                steps.append((node.op, tuple(index[id(x)] for x in node.inputs), node.params, node.requires_grad,
                              name, node.origin))
                last_use.update((index[id(x)], k) for x in node.inputs)
            elif name is not None and name in inputs and node.value is inputs[name]:
                steps.append((_INPUT, name, node.requires_grad))
            else:  # made the same way, from the same numbers, by every run: shared (never freed: no op)
                steps.append((_SAME, node))
        # The temporaries this run freed as it went (no rule reads them: graph.release_unneeded), which every
        # run with these shapes frees: a replay frees each after its last use.
        frees: dict[int, list[int]] = {}
        for i, node in enumerate(order):
            if node.op is not None and node.value.__class__ is Released:
                frees.setdefault(last_use.get(i, i), []).append(i)
        self.steps = steps
        self.frees = {k: tuple(freed) for k, freed in frees.items()}
        self.compiled: Callable[[Mapping[str, Any]], list[Any]] | None = None  # written once it has paid
        self.replays = 0
        # grad's passes by (of, wrt): counted, then Replayed._backward's (names, output, function, targets) or ()
        self.backwards: dict[tuple, Any] = {}
        self.frame = [(name, index[id(node)]) for name, node in executed.frame.items()]
        self.positions = dict(self.frame)  # each variable's step
        self.leaves = [(name, index[id(node)]) for name, node in state.leaves.items()]
        self.constants = [(name, index[id(node)]) for name, node in state.constants.items()]
        self.made = [index[id(node)] for node in state.made]
        self.final = state.final
        self.last_assigned = state.last_assigned

    def replay(self, inputs: Mapping[str, Any], checker: Checker) -> Replayed | None:
        """The run with these inputs (the same names and shapes as the recorded one's), or None where a
        primitive fails on these values: the caller interprets the program then, which says where."""
        self.replays += 1
        if self.replays > COMPILE_AFTER and self.compiled is None and len(self.steps) <= COMPILED_STEPS:
            self.compiled = _compiled(self.steps, self.frees)
        try:
            if self.compiled is not None:
                values = self.compiled(inputs)  # (under B.errstate: see _compiled)
            else:  # the first few replays, and a long recording's: grad's own pass will want the nodes
                with B.errstate():
                    return Replayed(self, None, checker, _nodes(self, inputs, None))
        except Exception:  # NumPy's errors for these values: the interpreter words them, with their place
            return None
        return Replayed(self, values, checker)


COMPILED_STEPS = 5_000  # a longer run is replayed by the loop: its function would take long to compile
# Writing and compiling the function costs about eight replays of a small program by the loop: a recording
# replayed that often is written out, so a program run only a few times never pays for it. So for grad's pass.
COMPILE_AFTER = 8
BACKWARD_KEYS = 16  # grad's passes (by of and wrt) compiled for one recording at most


def _compiled(steps: list[tuple], frees: Mapping[int, tuple[int, ...]]) -> Callable[[Mapping[str, Any]], list[Any]]:
    """The steps as one straight-line function of the inputs, returning every step's value in order: what the
    loop in `replay` does, without looking up each step's kind and fields (a third of a small replay's time)."""
    namespace: dict[str, Any] = {"Released": Released}
    lines = ["def replayed(inputs):"]
    for i, step in enumerate(steps):
        op = step[0]
        if op is _SAME:
            namespace[f"k{i}"] = step[1].value
            lines.append(f"    v{i} = k{i}")
        elif op is _INPUT:
            namespace[f"k{i}"] = step[1]
            lines.append(f"    v{i} = inputs[k{i}]")
        else:
            inputs, params = step[1], step[2]
            namespace[f"f{i}"] = op.forward
            namespace.update((f"p{i}_{j}", param) for j, param in enumerate(params))
            arguments = [*(f"v{j}" for j in inputs), *(f"p{i}_{j}" for j in range(len(params)))]
            lines.append(f"    v{i} = f{i}({', '.join(arguments)})")
            lines.extend(f"    v{j} = Released(v{j})" for j in frees.get(i, ()))
    lines.append(f"    return [{', '.join(f'v{i}' for i in range(len(steps)))}]")
    exec("\n".join(lines), namespace)  # the recording's own code: written from its steps, not from input
    # NumPy's errstate as a decorator: set around each call for less than half a `with` block's cost.
    compiled: Callable[[Mapping[str, Any]], list[Any]] = B.errstate()(namespace["replayed"])
    return compiled


def _nodes(recording: Recording, inputs: Mapping[str, Any], values: list[Any] | None) -> tuple[list[Node], list[Node]]:
    """The recording's nodes and tape, as the interpreter makes them (the same names, tape and freed values): of
    the values given, or computed here, freeing what the run freed (a primitive's error propagates)."""
    nodes: list[Node] = []
    add = nodes.append
    frees = recording.frees
    # The recording state of a run (history too: a claim being judged may be what asks for the nodes).
    with graph.building(release=False) as tape, graph.recording_as(True, history=True):
        for k, step in enumerate(recording.steps):
            op = step[0]
            if op is _SAME:
                add(step[1])
            elif op is _INPUT:
                add(new_node(inputs[step[1]], None, (), (), step[2], step[1]))
            else:
                args = tuple([nodes[i] for i in step[1]])
                value = op.forward(*[x.value for x in args], *step[2]) if values is None else values[k]
                node = new_node(value, op, args, step[2], step[3], step[4])
                if step[5] is not None:
                    node.origin = step[5]
                add(node)
                if values is None and k in frees:
                    for i in frees[k]:
                        nodes[i].value = Released(nodes[i].value)
    return nodes, tape


class Replayed:
    """A replayed run's values, one a step: all grad's compiled pass needs; its nodes are made on first need.
    A replay not written out (the first few, a long recording's) makes its nodes as it goes, as the
    interpreter does, and has no values apart: grad's own pass will want the nodes, and one loop costs less
    than two."""

    __slots__ = ("checker", "executed", "nodes", "recording", "tape", "values")

    def __init__(self, recording: Recording, values: list[Any] | None, checker: Checker,
                 nodes: tuple[list[Node], list[Node]] | None = None) -> None:
        self.recording = recording
        self.values = values
        self.checker = checker
        self.nodes: list[Node] | None = nodes[0] if nodes else None
        self.tape: list[Node] | None = nodes[1] if nodes else None
        self.executed: Executed | None = None

    def made(self, module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits) -> Executed:
        """The run's nodes and state, as the interpreter would have made them (same names, tape, freed values)."""
        if self.executed is not None:
            return self.executed
        recording = self.recording
        if self.nodes is None or self.tape is None:
            self.nodes, self.tape = _nodes(recording, inputs, self.values)
        nodes = self.nodes
        state = State(leaves={name: nodes[i] for name, i in recording.leaves},
                      constants={name: nodes[i] for name, i in recording.constants},
                      made=[nodes[i] for i in recording.made], last_assigned=recording.last_assigned,
                      final=dict(recording.final))
        interpreter = Interpreter(module, inputs, context, limits, state, self.checker)
        frame = interpreter.globals
        for name, i in recording.frame:
            frame[name] = nodes[i]
        self.executed = Executed(frame, state, interpreter, self.tape)
        return self.executed

    def value(self, name: str) -> Any:
        """A variable's value, read without making a node; None where the run has no such variable (or its
        values were made with its nodes)."""
        i = self.recording.positions.get(name)
        return None if i is None or self.values is None else self.values[i]

    def gradients(self, of: str | None, wrt: Sequence[str] | None, made: Callable[[], Executed]
                  ) -> tuple[str, list[str], Any, list[Any], set[str]] | None:
        """Run.grad's output name, --wrt names, output value, gradients (zeros where no path leads) and names
        with no path, by a pass compiled from the recording; None where grad's own pass is to run (the first
        few times, a long recording, an error to word)."""
        recording = self.recording
        of = of or recording.last_assigned
        if of is None:
            return None  # grad's error: no variable assigned
        key = (of, None if wrt is None else tuple(wrt))
        backwards = recording.backwards
        compiled: Any = backwards.get(key)
        if compiled is None:
            if len(backwards) >= BACKWARD_KEYS or len(recording.steps) > COMPILED_STEPS:
                return None  # grad's own pass, as for a run interpreted
            compiled = 0
        if compiled.__class__ is int:  # passes so far: the pass is written out once it has paid
            if compiled < COMPILE_AFTER:
                backwards[key] = compiled + 1
                return None
            compiled = backwards[key] = self._backward(of, wrt, made())
        if not compiled:  # () : grad's own pass raises, or needs what the written one lacks
            return None
        names, output, function, targets = compiled
        values = self.values
        if values is None:  # a replay not written out (counted, as its pass may be written now)
            return None
        try:
            found = function(values)  # (under B.errstate: see autodiff.compiled_backward)
        except Exception:  # a rule's error at these values: grad's own pass words it
            return None
        no_path: set[str] = set()
        for i, gradient in enumerate(found):
            if gradient is None:  # as grad: zeros of the variable's shape
                no_path.add(names[i])
                found[i] = B.xp.zeros(values[targets[i]].shape, dtype=B.dtype)
        return of, names, values[output], found, no_path

    def _backward(self, of: str, wrt: Sequence[str] | None, executed: Executed) -> tuple:
        """(names, the output's step, grad's pass written as a function of the values, the targets' steps) for
        `of` by `wrt`, as Run.grad selects them; () where grad would raise or needs more than a scalar's seed."""
        recording, nodes = self.recording, self.nodes
        assert nodes is not None  # made by made()
        positions = recording.positions
        leaves = dict(recording.leaves)
        names = list(wrt) if wrt else list(leaves)
        if of not in positions or not names or any(
                name in executed.state.constants or (name not in leaves and name not in positions) for name in names):
            return ()
        output = nodes[positions[of]]
        if output.value.shape != ():  # a vector's product, or seed_for's error
            return ()
        places = [leaves[name] if name in leaves else positions[name] for name in names]
        index = {node: i for i, node in enumerate(nodes)}
        function = autodiff.compiled_backward(output, [nodes[i] for i in places], executed.tape, executed.state.made,
                                              index)
        return names, positions[of], function, places
