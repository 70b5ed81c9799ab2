"""Syntax tree to executed program: compile each statement to a closure, then run them.

Compiling first lets every static mistake (an unknown function, a wrong number
of arguments, a name never given a value) be reported before anything runs,
and makes loops cheap: a loop body is compiled once and run many times.
Running builds the computation graph as it goes (PyTorch's dynamic graph):
only the executed path is recorded.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import backend as B
from . import graph, ops
from . import syntax as S
from .builtins import BUILTINS, CONSTANTS, RANDOM, Builtin, Context, as_int
from .errors import (
    ArgumentError,
    GradcalcError,
    GradcalcSyntaxError,
    LimitExceeded,
    NameNotFound,
    Pos,
    ShapeError,
    UsageError,
    ValueProblem,
    did_you_mean,
)
from .graph import Node, constant, leaf

Frame = dict[str, Node]
Eval = Callable[[Frame], Node]
Exec = Callable[[Frame], Any]  # returns a _Returned to unwind a function, else None

DEFAULT_MAX_ITERATIONS = 1_000_000
DEFAULT_MAX_RECURSION = 200

_BINARY: dict[str, Callable[[Any, Any], Node]] = {
    "+": ops.add, "-": ops.sub, "*": ops.mul, "/": ops.div, "@": ops.matmul, "^": ops.power,
}
_COMPARE: dict[str, Callable[[Any, Any], Node]] = {
    "<": ops.lt, "<=": ops.le, ">": ops.gt, ">=": ops.ge, "==": ops.eq, "!=": ops.ne,
}
_AUGMENTED = {"+=": "+", "-=": "-", "*=": "*", "/=": "/"}


@dataclass
class Limits:
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_recursion: int = DEFAULT_MAX_RECURSION
    max_depth: int = 200


@dataclass
class Loop:
    """How often one loop statement ran (summed over every time it was reached)."""

    line: int
    kind: str
    iterations: int = 0
    column: int = 0


@dataclass
class State:
    """What a run accumulates besides variables: leaves, the last name assigned, loop counts."""

    leaves: dict[str, Node] = field(default_factory=dict)
    last_assigned: str | None = None
    assigned_at: dict[str, Pos] = field(default_factory=dict)  # where each name got its final value
    loops: dict[Pos, Loop] = field(default_factory=dict)  # by the loop keyword's place: two may share a line
    call_depth: int = 0


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Node) -> None:
        self.value = value


@dataclass
class Function:
    name: str
    params: list[str]
    body: list[Exec]
    pos: Pos
    reads_globals: bool = False  # reads a program variable, itself or through the functions it calls
    callees: set[str] = field(default_factory=set)


def _close_over_calls(functions: dict[str, Function]) -> None:
    """A function that calls one reading program variables reads them too (a fixpoint over calls)."""
    changed = True
    while changed:
        changed = False
        for function in functions.values():
            if not function.reads_globals and any(functions[c].reads_globals for c in function.callees):
                function.reads_globals = changed = True


def _calls_random(expr: S.Expr) -> bool:
    return any(isinstance(node, S.Call) and node.name in RANDOM for node in S.walk(expr))


def _has_return(body: list[S.Stmt]) -> bool:
    """Whether a `return` is anywhere in the block, its branches and loops included."""
    stack = list(body)
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, S.Return):
            return True
        if isinstance(stmt, (S.While, S.For, S.NoGrad)):
            stack.extend(stmt.body)
        elif isinstance(stmt, S.If):
            stack.extend([*stmt.body, *stmt.orelse])
    return False


def assigned_names(body: list[S.Stmt]) -> dict[str, list[S.Assign]]:
    """Every top-level (non-function) assignment, by name, in source order."""
    found: dict[str, list[S.Assign]] = {}
    stack = list(reversed(body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, S.Assign):
            found.setdefault(stmt.name, []).append(stmt)
        elif isinstance(stmt, (S.While, S.NoGrad)):
            stack.extend(reversed(stmt.body))
        elif isinstance(stmt, S.If):
            stack.extend(reversed(stmt.orelse))
            stack.extend(reversed(stmt.body))
        elif isinstance(stmt, S.For):
            found.setdefault(stmt.var, [])
            stack.extend(reversed(stmt.body))
    return found


class Compiler:
    """Compiles a module for one run: constants are made in the run's dtype and device."""

    def __init__(self, module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
                 state: State) -> None:
        self.context = context
        self.limits = limits
        self.state = state
        self.inputs = inputs
        self.assigned = assigned_names(module.body)
        self.leaf_names: set[str] = set()  # names with a leaf statement, found while compiling
        self.reads = 0  # variables read so far: an assignment that reads none defines a leaf
        self.free_read: set[str] = set()  # inputs read that the program never assigns
        self.functions: dict[str, Function] = {}
        self.function_defs = {stmt.name: stmt for stmt in module.body if isinstance(stmt, S.FuncDef)}
        self.local: set[str] | None = None  # a function's parameters and locals while compiling its body
        self.callees: set[str] = set()  # functions called by the function being compiled
        self.depth = 0
        self.globals_frame: Frame = {}  # the run's top-level variables, which function bodies read
        self.numbers: dict[float, Eval] = {}

    # --- statements ---------------------------------------------------------------------------

    def module(self, module: S.Module) -> list[Exec]:
        for stmt in self.function_defs.values():
            if stmt.name in BUILTINS and not stmt.override:
                raise NameNotFound(f"'{stmt.name}' is a builtin function",
                                   f"to replace it on purpose write `override {stmt.name}(...) = ...`; "
                                   f"or give yours another name, such as '{stmt.name}2'", stmt.pos)
            if stmt.override and stmt.name not in BUILTINS:
                raise NameNotFound(f"'override' needs a builtin to replace, and '{stmt.name}' is none",
                                   f"remove 'override': define {stmt.name}(...) = ... as it is", stmt.pos)
            if stmt.name in self.assigned:
                raise NameNotFound(f"'{stmt.name}' is both a function and a variable",
                                   "give them different names", stmt.pos)
            self.functions[stmt.name] = Function(stmt.name, stmt.params, [], stmt.pos)
        for stmt in self.function_defs.values():
            self.function(stmt)
        _close_over_calls(self.functions)
        # Claims (check statements) are judged by `gradcalc check` after the run, not run themselves.
        program = self.block([stmt for stmt in module.body if not isinstance(stmt, (S.FuncDef, S.Claim))])
        self.check_inputs()
        return program

    def check_inputs(self) -> None:
        """--set names must be leaves or free variables of the program."""
        for name in self.inputs:
            if name in self.free_read or name in self.leaf_names:
                continue
            if name in self.assigned:
                first = self.assigned[name][0] if self.assigned[name] else None
                raise UsageError(f"cannot set '{name}': it is computed from other variables, not a leaf",
                                 "set the leaves it is computed from instead: " + ", ".join(sorted(self.leaf_names)),
                                 first.pos if first else None)
            hint = did_you_mean(name, list(self.assigned) + list(self.free_read))
            raise UsageError(f"the program has no variable '{name}'", hint or "check the name")

    def block(self, body: list[S.Stmt]) -> list[Exec]:
        return [self.statement(stmt) for stmt in body]

    def statement(self, stmt: S.Stmt) -> Exec:
        try:
            return self._STATEMENTS[type(stmt)](self, stmt)
        except GradcalcError as exc:
            raise exc.at(stmt.pos) from None

    def stmt_funcdef(self, stmt: S.FuncDef) -> Exec:
        raise GradcalcSyntaxError(f"function '{stmt.name}' is defined inside a block",
                                  "define functions at the top level of the program", stmt.pos)

    def stmt_claim(self, stmt: S.Claim) -> Exec:
        raise GradcalcSyntaxError("a check statement inside a block or function",
                                  "write check statements at the top level: they are judged after the program runs",
                                  stmt.pos)

    def function(self, stmt: S.FuncDef) -> None:
        self.local = set(stmt.params)
        reads_before, self.callees = self.reads, set()
        try:
            body = self.block(stmt.body)
        finally:
            self.local = None
        function = self.functions[stmt.name]
        function.reads_globals = self.reads > reads_before
        function.callees = self.callees
        if not _has_return(stmt.body):  # a path that ends without one is an error when it runs
            raise GradcalcSyntaxError(f"function '{stmt.name}' never returns a value",
                                      "end its block with `return <expression>`", stmt.pos)
        self.functions[stmt.name].body = body

    def stmt_return(self, stmt: S.Return) -> Exec:
        if self.local is None:
            raise GradcalcSyntaxError("'return' outside a function",
                                      "return belongs in a function block: f(x) { ...; return x }", stmt.pos)
        value = self.expr(stmt.value)
        return lambda frame: _Returned(value(frame))

    def stmt_assign(self, stmt: S.Assign) -> Exec:
        name = stmt.name
        if stmt.op != "=":
            target = S.Name(name, stmt.pos)
            value_expr: S.Expr = S.Binary(_AUGMENTED[stmt.op], target, stmt.value, stmt.pos)
        else:
            value_expr = stmt.value
        if self.local is not None:
            self.local.add(name)
            value = self.expr(value_expr)

            def assign_local(frame: Frame) -> None:
                node = value(frame)
                if node.name is None:
                    node.name = name  # named: never freed as a temporary
                frame[name] = node

            return assign_local
        state = self.state
        reads_before = self.reads
        value = self.expr(value_expr)
        if stmt.op == "=" and self.reads == reads_before:
            self.leaf_names.add(name)
            return self._leaf_statement(name, stmt, value)
        pos = stmt.pos
        assigned_at = state.assigned_at

        def assign(frame: Frame) -> None:
            node = value(frame)
            if node.name is None:
                node.name = name
            frame[name] = node
            state.last_assigned = name
            assigned_at[name] = pos

        return assign

    def _leaf_statement(self, name: str, stmt: S.Assign, compiled: Eval) -> Exec:
        state = self.state
        given = name in self.inputs
        pos = stmt.pos
        # A --set leaf keeps the random stream aligned: its own draws are still made.
        value = compiled if not given or _calls_random(stmt.value) else None

        def define_leaf(frame: Frame) -> None:
            computed = value(frame) if value is not None else None
            node = leaf(self.inputs[name] if given else computed.value, name)  # type: ignore[union-attr]
            state.leaves[name] = node
            frame[name] = node
            state.last_assigned = name
            state.assigned_at[name] = pos

        return define_leaf

    def stmt_while(self, stmt: S.While) -> Exec:
        cond = self.condition(stmt.cond, "while")
        body = self.block(stmt.body)
        loop = self.state.loops.setdefault(stmt.pos, Loop(stmt.pos.line, "while", column=stmt.pos.column))
        limit = self.limits.max_iterations
        pos = stmt.pos
        label = f"while loop at line {pos.line}"

        def run_while(frame: Frame) -> Any:
            count = 0
            outer = graph.context
            try:
                while cond(frame):
                    count += 1
                    if count > limit:
                        count -= 1
                        raise LimitExceeded(f"the while loop at line {pos.line} ran past {limit:,} iterations",
                                            "check that its condition becomes false, or raise --max-iterations",
                                            pos)
                    graph.context = (outer, "loop", label, count)  # the graph view groups iterations
                    result = _run_block(body, frame)
                    if result is not None:
                        return result
                    graph.context = outer
            finally:
                graph.context = outer
                loop.iterations += count
            return None

        return run_while

    def stmt_for(self, stmt: S.For) -> Exec:
        call = stmt.iterable
        if not isinstance(call, S.Call) or call.name != "range" or call.keywords or not 1 <= len(call.args) <= 3:
            raise GradcalcSyntaxError("a for loop runs over range(n), range(a, b) or range(a, b, step)",
                                      "for i in range(10) { ... }", stmt.iterable.pos)
        bounds = [self.expr(arg) for arg in call.args]
        if self.local is not None:
            self.local.add(stmt.var)
        body = self.block(stmt.body)
        loop = self.state.loops.setdefault(stmt.pos, Loop(stmt.pos.line, "for", column=stmt.pos.column))
        limit = self.limits.max_iterations
        var, pos = stmt.var, stmt.pos
        bounds_pos = call.pos
        label = f"for loop at line {pos.line}"

        def run_for(frame: Frame) -> Any:
            try:
                numbers = [as_int(bound(frame), "a range bound") for bound in bounds]
            except GradcalcError as exc:
                raise exc.at(bounds_pos) from None
            if len(numbers) == 3 and numbers[2] == 0:
                raise ValueProblem("range's step cannot be 0", "use a positive or negative step", pos)
            steps = range(*numbers)
            count = max(0, -((steps.start - steps.stop) // steps.step))  # len() overflows past 2^63
            if count > limit:
                raise LimitExceeded(f"the for loop at line {pos.line} would run {count:,} iterations, "
                                    f"past the limit of {limit:,}", "raise --max-iterations", pos)
            outer = graph.context
            try:
                for i in steps:
                    loop.iterations += 1
                    graph.context = (outer, "loop", label, i)
                    frame[var] = leaf(B.scalar(i), var, requires_grad=False)  # a plain number, not differentiated
                    result = _run_block(body, frame)
                    if result is not None:
                        return result
            finally:
                graph.context = outer
            return None

        return run_for

    def stmt_if(self, stmt: S.If) -> Exec:
        cond = self.condition(stmt.cond, "if")
        body = self.block(stmt.body)
        orelse = self.block(stmt.orelse)

        def run_if(frame: Frame) -> Any:
            return _run_block(body if cond(frame) else orelse, frame)

        return run_if

    def stmt_nograd(self, stmt: S.NoGrad) -> Exec:
        body = self.block(stmt.body)

        def run_no_grad(frame: Frame) -> Any:
            previous, graph.recording = graph.recording, False
            try:
                return _run_block(body, frame)
            finally:
                graph.recording = previous

        return run_no_grad

    def condition(self, expr: S.Expr, keyword: str) -> Callable[[Frame], bool]:
        value = self.expr(expr)
        pos = expr.pos

        def test(frame: Frame) -> bool:
            host = graph.host_value(value(frame))
            if host.shape != ():
                raise ValueProblem(
                    f"the {keyword} condition is a tensor of shape {host.shape}, not a single true/false value",
                    "use all(...) or any(...) to combine its entries, or where(cond, a, b) for elementwise choice",
                    pos,
                )
            number = float(host)
            if math.isnan(number):
                raise ValueProblem(f"the {keyword} condition is NaN", "check the values it compares", pos)
            return number != 0

        return test

    # --- expressions --------------------------------------------------------------------------

    def expr(self, expr: S.Expr) -> Eval:
        self.depth += 1
        try:  # the depth comes back down on errors too: a claim that fails to compile leaves the next alone
            if self.depth > self.limits.max_depth:
                raise LimitExceeded(f"expression nested more than {self.limits.max_depth} deep",
                                    "split it into several statements, or raise the limit with --max-depth",
                                    expr.pos)
            return self._EXPRESSIONS[type(expr)](self, expr)
        finally:
            self.depth -= 1

    def expr_number(self, expr: S.Number) -> Eval:
        evaluate = self.numbers.get(expr.value)
        if evaluate is None:  # one constant node per distinct number: compiling is a dict lookup
            node = constant(expr.value)
            evaluate = self.numbers[expr.value] = lambda frame: node
        return evaluate

    def expr_string(self, expr: S.String) -> Eval:
        raise GradcalcSyntaxError("quoted text is only allowed as a file name in load(\"...\")",
                                  "remove the quotes", expr.pos)

    def expr_name(self, expr: S.Name) -> Eval:
        name, pos = expr.name, expr.pos
        local = self.local
        if local is not None and name in local:
            def read_local(frame: Frame) -> Node:
                try:
                    return frame[name]
                except KeyError:
                    raise NameNotFound(f"'{name}' is used before it is assigned", "assign it earlier in the function",
                                       pos) from None
            return read_local
        if name in self.assigned or name in self.inputs:
            self.reads += 1
            if name not in self.assigned:
                self.free_read.add(name)
            first = self.assigned.get(name)
            state_frame = self.globals_frame

            def read(frame: Frame) -> Node:
                try:
                    return frame[name] if local is None else state_frame[name]
                except KeyError:
                    where = f" (it is first assigned at line {first[0].pos.line})" if first else ""
                    raise NameNotFound(f"'{name}' is used before it is assigned{where}",
                                       "move its assignment above this line", pos) from None
            return read
        if name in CONSTANTS:
            node = constant(CONSTANTS[name])
            return lambda frame: node
        if name in BUILTINS or name in self.functions:
            raise NameNotFound(f"'{name}' is a function, not a value", f"call it: {name}(...)", pos)
        known = set(self.assigned) | set(CONSTANTS) | (local or set())
        hint = did_you_mean(name, known)
        raise NameNotFound(
            f"'{name}' is used but never given a value",
            (hint + " " if hint else "") + f"assign it in the program (`{name} = ...`) or pass --set {name}=VALUE",
            pos,
        )

    def expr_tensor(self, expr: S.Tensor) -> Eval:
        try:
            literal = _literal(expr)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None
        if literal is not None:
            node = constant(literal)
            return lambda frame: node
        if not expr.items:
            node = constant(B.xp.zeros((0,), dtype=B.dtype))
            return lambda frame: node
        items = [self.expr(item) for item in expr.items]
        pos = expr.pos

        def stack(frame: Frame) -> Node:
            values = [item(frame) for item in items]
            shapes = {v.shape for v in values}
            if len(shapes) > 1:
                listed = " and ".join(str(s) for s in sorted(shapes, key=len))
                raise ShapeError(f"the entries of this tensor have different shapes: {listed}",
                                 "every row of a tensor literal needs the same shape", pos)
            return ops.stack(*values)

        return stack

    def expr_unary(self, expr: S.Unary) -> Eval:
        operand = self.expr(expr.operand)
        if expr.op == "+":
            return operand
        if isinstance(expr.operand, S.Number):
            node = constant(-expr.operand.value)  # a negative literal is a constant, not a NegBackward
            return lambda frame: node
        pos = expr.pos

        def negate(frame: Frame) -> Node:
            try:
                return ops.neg(operand(frame))
            except GradcalcError as exc:
                raise exc.at(pos) from None

        return negate

    def expr_binary(self, expr: S.Binary) -> Eval:
        right = expr.right
        if (expr.op == "^" and isinstance(right, S.Name) and right.name == "T" and right.name not in self.assigned
                and right.name not in self.inputs and right.name not in (self.local or ())):
            x = expr.left.name if isinstance(expr.left, S.Name) else "x"
            raise NameNotFound("'^T' is not a transpose here: T is no variable",
                               f"for a transpose write {x}.T or transpose({x})", right.pos)
        # Flatten a left-leaning chain (a + b - c + d): no recursion per term, however long.
        steps: list[tuple[Callable[[Any, Any], Node], S.Expr, Pos]] = []
        node: S.Expr = expr
        while isinstance(node, S.Binary) and node.op != "^":
            fn = _BINARY[node.op] if node.op != S.JUXTAPOSED else _juxtaposed(node.left, node.right)
            steps.append((fn, node.right, node.pos))
            node = node.left
        if not steps:  # a power: right-associative, not flattened
            steps.append((_BINARY["^"], expr.right, expr.pos))
            node = expr.left
        first = self.expr(node)
        compiled = [(fn, self.expr(right), pos) for fn, right, pos in reversed(steps)]
        if len(compiled) == 1:
            fn, right, pos = compiled[0]

            def binary(frame: Frame) -> Node:
                try:
                    return fn(first(frame), right(frame))
                except GradcalcError as exc:
                    raise exc.at(pos) from None

            return binary

        def chain(frame: Frame) -> Node:
            total = first(frame)
            for fn, right, pos in compiled:
                try:
                    total = fn(total, right(frame))
                except GradcalcError as exc:
                    raise exc.at(pos) from None
            return total

        return chain

    def expr_compare(self, expr: S.Compare) -> Eval:
        operands = [self.expr(operand) for operand in expr.operands]
        fns = [_COMPARE[op] for op in expr.ops]
        pos = expr.pos

        def compare(frame: Frame) -> Node:
            try:
                left = operands[0](frame)
                result: Node | None = None
                for fn, operand in zip(fns, operands[1:]):
                    right = operand(frame)
                    step = fn(left, right)
                    result = step if result is None else ops.logical_and(result, step)
                    left = right
                return result  # type: ignore[return-value]
            except GradcalcError as exc:
                raise exc.at(pos) from None

        return compare

    def expr_boolop(self, expr: S.BoolOp) -> Eval:
        left, right = self.expr(expr.left), self.expr(expr.right)
        is_and = expr.op == "and"
        combine = ops.logical_and if is_and else ops.logical_or
        pos = expr.pos

        def boolean(frame: Frame) -> Node:
            first = left(frame)
            if first.value.shape == ():  # short-circuit on a scalar, as Python does
                truth = bool(first.value != 0)
                if truth != is_and:
                    return constant(float(truth))
                return ops.ne(right(frame), 0)
            try:
                return combine(first, right(frame))
            except GradcalcError as exc:
                raise exc.at(pos) from None

        return boolean

    def expr_not(self, expr: S.Not) -> Eval:
        operand = self.expr(expr.operand)
        return lambda frame: ops.logical_not(operand(frame))

    def expr_attribute(self, expr: S.Attribute) -> Eval:
        if expr.name != "T":
            raise NameNotFound(f"unknown attribute '.{expr.name}'", "the only attribute is .T (transpose)", expr.pos)
        target = self.expr(expr.target)
        return lambda frame: ops.transpose(target(frame), None)

    def expr_slice(self, expr: S.Slice) -> Eval:
        raise GradcalcSyntaxError("a slice (a:b) is only allowed inside [ ]", "x[1:3]", expr.pos)

    def expr_index(self, expr: S.Index) -> Eval:
        target = self.expr(expr.target)
        parts: list[Callable[[Frame], int | slice]] = []
        for sub in expr.subscripts:
            if isinstance(sub, S.Slice):
                bounds = [self.expr(b) if b is not None else None for b in (sub.start, sub.stop, sub.step)]
                parts.append(_slice_maker(bounds))
            else:
                value = self.expr(sub)
                parts.append(lambda frame, value=value: as_int(value(frame), "an index"))
        pos = expr.pos

        def index(frame: Frame) -> Node:
            x = target(frame)
            try:
                key = tuple(part(frame) for part in parts)
                return ops.checked_index(x, key)
            except GradcalcError as exc:
                raise exc.at(pos) from None

        return index

    def expr_call(self, expr: S.Call) -> Eval:
        if expr.name in self.functions:
            return self._user_call(expr)
        builtin = BUILTINS.get(expr.name)
        if builtin is None:
            if expr.name == "range":
                raise GradcalcSyntaxError("range(...) is only allowed in a for loop", "for i in range(10) { ... }",
                                          expr.pos)
            if expr.name in self.assigned or expr.name in CONSTANTS:
                raise NameNotFound(f"'{expr.name}' is a variable, not a function",
                                   f"to multiply, write {expr.name}*(...)", expr.pos)
            hint = did_you_mean(expr.name, list(BUILTINS) + list(self.functions))
            raise NameNotFound(f"unknown function '{expr.name}'",
                               hint or "see the list of builtins with gradcalc --help", expr.pos)
        return self._builtin_call(builtin, expr)

    def _builtin_call(self, builtin: Builtin, expr: S.Call) -> Eval:
        if builtin.name == "load":
            return self._load_call(builtin, expr)
        args = self._bind(builtin, expr)
        fn, pos = builtin.fn, expr.pos
        context = self.context
        if builtin.needs_context:
            def call_with_context(frame: Frame) -> Node:
                values = [arg(frame) for arg in args]
                try:
                    return fn(context, *values)
                except GradcalcError as exc:
                    raise exc.at(pos) from None
            return call_with_context
        if len(args) == 1:
            (arg,) = args

            def call1(frame: Frame) -> Node:
                try:
                    return fn(arg(frame))
                except GradcalcError as exc:
                    raise exc.at(pos) from None
            return call1

        # max(a, b) reads b as an axis, as NumPy does: when that fails, point to maximum(a, b)
        also = _max_hint(builtin) if len(expr.args) > 1 else ""

        def call(frame: Frame) -> Node:
            values = [arg(frame) if arg is not None else None for arg in args]
            try:
                return fn(*values)
            except GradcalcError as exc:
                if also and "axis" in exc.message:
                    exc.hint = (exc.hint or "") + also
                raise exc.at(pos) from None

        return call

    def _bind(self, builtin: Builtin, expr: S.Call) -> list[Eval | None]:
        """Match positional and keyword arguments to the builtin's parameters."""
        params = builtin.params
        def usage() -> str:
            return f"usage: {builtin.signature()}"

        if builtin.variadic:
            if expr.keywords:
                raise ArgumentError(f"{builtin.name} takes no keyword arguments", usage(), expr.keywords[0].pos)
            if len(expr.args) < builtin.required:
                raise ArgumentError(f"{builtin.name} needs at least {builtin.required} argument"
                                    f"{'s' if builtin.required != 1 else ''}", usage(), expr.pos)
            return [self.expr(arg) for arg in expr.args]
        if not expr.keywords and builtin.required <= len(expr.args) <= len(params):  # the usual call: f(x, y)
            return [self.expr(arg) for arg in expr.args]
        if len(expr.args) > len(params):
            raise ArgumentError(f"{builtin.name} takes at most {len(params)} argument{'s' if len(params) > 1 else ''}, "
                                f"got {len(expr.args)}", usage() + _max_hint(builtin), expr.pos)
        slots: list[S.Expr | None] = list(expr.args) + [None] * (len(params) - len(expr.args))
        for keyword in expr.keywords:
            if keyword.name not in params:
                numpy_name = {"dim": "axis", "keepdim": "keepdims"}.get(keyword.name)
                hint = f"gradcalc uses NumPy's names: {numpy_name}= (PyTorch's {keyword.name}=)" \
                    if numpy_name in params else did_you_mean(keyword.name, params)
                raise ArgumentError(f"{builtin.name} has no parameter '{keyword.name}'", hint or usage(), keyword.pos)
            i = params.index(keyword.name)
            if slots[i] is not None:
                raise ArgumentError(f"{builtin.name} got '{keyword.name}' twice", usage(), keyword.pos)
            slots[i] = keyword.value
        missing = [p for p, slot in zip(params[: builtin.required], slots) if slot is None]
        if missing:
            raise ArgumentError(f"{builtin.name} is missing its argument '{missing[0]}'", usage(), expr.pos)
        while slots and slots[-1] is None:
            slots.pop()
        return [self.expr(slot) if slot is not None else None for slot in slots]

    def _load_call(self, builtin: Builtin, expr: S.Call) -> Eval:
        strings = [arg for arg in expr.args] + [k.value for k in expr.keywords]
        if not 1 <= len(strings) <= 2 or not all(isinstance(s, S.String) for s in strings):
            raise ArgumentError('load takes a quoted file name (and for .npz an array name)',
                                'load("x.npy") or load("data.npz", "w")', expr.pos)
        texts = [s.value for s in strings]  # type: ignore[attr-defined]
        context, pos = self.context, expr.pos

        def load(frame: Frame) -> Node:
            try:
                return builtin.fn(context, *texts)
            except GradcalcError as exc:
                raise exc.at(pos) from None

        return load

    def _user_call(self, expr: S.Call) -> Eval:
        function = self.functions[expr.name]
        if self.local is not None:
            self.callees.add(expr.name)
        elif function.reads_globals:
            self.reads += 1  # `y = f(3)` where f reads a variable: y is computed, not a leaf
        if expr.keywords:
            raise ArgumentError(f"{expr.name} takes no keyword arguments", "pass its arguments in order",
                                expr.keywords[0].pos)
        if len(expr.args) != len(function.params):
            raise ArgumentError(
                f"{expr.name} takes {len(function.params)} argument{'s' if len(function.params) != 1 else ''} "
                f"({', '.join(function.params)}), got {len(expr.args)}",
                f"defined at line {function.pos.line}", expr.pos)
        args = [self.expr(arg) for arg in expr.args]
        state, limit, pos, params = self.state, self.limits.max_recursion, expr.pos, function.params

        def call(frame: Frame) -> Node:
            local: Frame = dict(zip(params, [arg(frame) for arg in args]))
            for param, node in local.items():
                if node.name is None:
                    node.name = param  # a parameter may be read many times: never freed as a temporary
            state.call_depth += 1
            outer = graph.context
            graph.context = (outer, "call", f"{expr.name}(…) called at line {pos.line}", state.call_depth)
            try:
                if state.call_depth > limit:
                    raise LimitExceeded(f"function calls nested more than {limit} deep (recursion in '{expr.name}'?)",
                                        "check the recursion stops, or raise --max-recursion", pos)
                for run in function.body:
                    result = run(local)
                    if result is not None:
                        return result.value
            finally:
                state.call_depth -= 1
                graph.context = outer
            raise NameNotFound(f"function '{expr.name}' ended without returning a value",
                               "make every path through it end in `return ...`", function.pos)

        return call


Compiler._EXPRESSIONS = {  # type: ignore[attr-defined]
    kind: getattr(Compiler, f"expr_{kind.__name__.lower()}")
    for kind in (S.Number, S.String, S.Name, S.Tensor, S.Unary, S.Binary, S.Compare, S.BoolOp, S.Not, S.Call,
                 S.Slice, S.Index, S.Attribute)
}
Compiler._STATEMENTS = {  # type: ignore[attr-defined]
    kind: getattr(Compiler, f"stmt_{kind.__name__.lower()}")
    for kind in (S.Assign, S.FuncDef, S.Return, S.Claim, S.While, S.If, S.For, S.NoGrad)
}


def _juxtaposed(left: S.Expr, right: S.Expr) -> Callable[[Node, Node], Node]:
    """Math's product of factors written side by side in a claim: a scalar scales; a matrix and a matrix
    or a vector multiply as matrices (W x, Xᵀ Y); two vectors multiply elementwise, except that δ xᵀ
    (a column by a row) is their outer product and xᵀ y their dot product."""
    row = isinstance(right, S.Attribute) and right.name == "T"
    dot = isinstance(left, S.Attribute) and left.name == "T"

    def product(x: Node, y: Node) -> Node:
        if x.ndim == 0 or y.ndim == 0:
            return ops.mul(x, y)
        if x.ndim == 1 and y.ndim == 1 and row == dot:
            return ops.mul(x, y)
        if x.ndim == 1 and y.ndim == 1 and row:
            return BUILTINS["outer"].fn(x, y)
        return ops.matmul(x, y)

    return product


def _run_block(body: list[Exec], frame: Frame) -> Any:
    """Run a block's statements; a `return` inside stops it and is handed up."""
    for run in body:
        result = run(frame)
        if result is not None:
            return result
    return None


def _max_hint(builtin: Builtin) -> str:
    if builtin.name in ("max", "min"):
        return f"; for the elementwise {'larger' if builtin.name == 'max' else 'smaller'} of two values use " \
               f"{'maximum' if builtin.name == 'max' else 'minimum'}(a, b)"
    return ""


def _slice_maker(bounds: list[Eval | None]) -> Callable[[Frame], slice]:
    def make(frame: Frame) -> slice:
        values = [as_int(b(frame), "a slice bound") if b is not None else None for b in bounds]
        if values[2] == 0:
            raise ValueProblem("a slice step cannot be 0", "use a positive or negative step")
        return slice(*values)

    return make


def _literal(expr: S.Tensor) -> Any:
    """A tensor literal of plain numbers as nested lists, or None if it holds expressions."""
    def convert(item: S.Expr) -> Any:
        if isinstance(item, S.Number):
            return item.value
        if isinstance(item, S.Unary) and isinstance(item.operand, S.Number):
            return -item.operand.value if item.op == "-" else item.operand.value
        if isinstance(item, S.Tensor):
            inner = [convert(i) for i in item.items]
            return None if any(v is None for v in inner) else inner
        return None

    values = [convert(item) for item in expr.items]
    if not values or any(v is None for v in values):
        return None
    try:
        return B.asarray(values)
    except ValueError:
        return None  # ragged: the stacking path reports the shapes


# --- running ----------------------------------------------------------------------------------

@dataclass
class Executed:
    frame: Frame
    state: State
    compiler: Compiler  # compiles expressions that read this run's variables (a claim's right side)
    tape: list[Node]  # the nodes recorded that require grad, in creation order (graph.tape)


def execute(module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
            keep_values: bool = False) -> Executed:
    """Compile and run a program; inputs are already arrays in the working dtype.

    keep_values keeps every intermediate's value (the graph view shows them all).
    """
    state = State()
    compiler = Compiler(module, inputs, context, limits, state)
    frame: Frame = {}
    compiler.globals_frame = frame
    # Free variables given by --set: leaves that exist before the first statement.
    for name, value in inputs.items():
        if name not in compiler.assigned:
            node = leaf(value, name)
            state.leaves[name] = node
            frame[name] = node
    program = compiler.module(module)
    graph.recording = True
    graph.context = None
    graph.release_temporaries = not keep_values
    graph.tape = tape = []
    try:
        with B.errstate():
            for run in program:
                run(frame)
    finally:
        graph.release_temporaries = False
        graph.tape = None
    return Executed(frame, state, compiler, tape)


def free_names(module: S.Module) -> list[str]:
    """Names a program reads but never assigns (its inputs), in order of first use."""
    assigned = set(assigned_names(module.body))
    local: set[str] = set()
    expressions: list[S.Expr] = []
    stack: list[S.Stmt] = list(reversed(module.body))
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, S.FuncDef):
            local.update(stmt.params)
            local.update(assigned_names(stmt.body))  # a function's locals, in its branches and loops too
            local.add(stmt.name)
        for attr in ("value", "cond", "iterable"):
            if isinstance(getattr(stmt, attr, None), S.Expr):
                expressions.append(getattr(stmt, attr))
        for attr in ("orelse", "body"):
            stack.extend(reversed(getattr(stmt, attr, [])))
    found: dict[str, None] = {}
    for expr in expressions:
        for node in S.walk(expr):
            if isinstance(node, S.Name) and node.name not in assigned and node.name not in local \
                    and node.name not in CONSTANTS and node.name not in BUILTINS:
                found.setdefault(node.name, None)
    return list(found)


def make_context(folder: str, seed: int, allow_read: tuple[str, ...]) -> Context:
    return Context(B.Random(seed), os.path.abspath(folder), tuple(os.path.abspath(p) for p in allow_read))
