"""Syntax tree to executed program: an interpreter that walks the tree and records the graph.

Running builds the computation graph as it goes (PyTorch's dynamic graph): only
the executed path is recorded. Nothing is compiled first: a straight-line program
is read once, so a compile step would cost as much again as the run (it did: 2.2 of
5.1 µs an operation). What may run never or many times (function bodies, loops,
branches) is checked before the run, so every static mistake (an unknown function,
a wrong number of arguments, a name never given a value) is still reported.
"""

from __future__ import annotations

import math
import os
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..engine import backend as B
from ..engine import graph, ops
from ..engine.graph import Node, constant, leaf
from ..errors import (
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
from ..files import DEFAULT_MAX_FILE_SIZE
from ..language import syntax as S
from .builtins import BUILTINS, CONSTANTS, RANDOM, Builtin, Context, as_int

Frame = dict[str, Node]

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
    made: list[Node] = field(default_factory=list)  # every leaf made, those a name no longer holds too
    last_assigned: str | None = None
    # The statement that gave each name its final value (kept, not its place: a place is not otherwise
    # read while running, and a reference to it cost a cache miss a statement).
    final: dict[str, S.Assign] = field(default_factory=dict)
    loops: dict[Pos, Loop] = field(default_factory=dict)  # by the loop keyword's place: two may share a line
    call_depth: int = 0

    def add_leaf(self, name: str, node: Node) -> None:
        self.leaves[name] = node
        self.made.append(node)


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Node) -> None:
        self.value = value


@dataclass
class Function:
    name: str
    params: list[str]
    body: list[S.Stmt]
    pos: Pos
    local: set[str]  # its parameters and every name it assigns: local throughout its body, as in Python
    reads: set[str] = field(default_factory=set)  # the names its body reads that are not its own
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


def assigned_names(body: list[S.Stmt]) -> dict[str, list[S.Assign]]:
    """Every top-level (non-function) assignment, by name, in source order."""
    found: dict[str, list[S.Assign]] = {}
    for stmt in S.statements(body):
        if isinstance(stmt, S.Assign):
            found.setdefault(stmt.name, []).append(stmt)
        elif isinstance(stmt, S.For):
            found.setdefault(stmt.var, [])
    return found


class Interpreter:
    """Runs a module straight from its syntax tree, recording the graph as it goes.

    Nothing is compiled first: a straight-line program is walked once, and each statement's
    mistakes are found as it runs. What may run never, or many times (function bodies, loops,
    branches), is checked before the run starts, so a mistake in a branch not taken is still
    reported, and a loop body's names and calls are checked once.
    """

    def __init__(self, module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
                 state: State) -> None:
        self.context = context
        self.limits = limits
        self.state = state
        self.inputs = inputs
        self.module = module
        self.functions: dict[str, Function] = {}
        self.function: Function | None = None  # the function whose body is running
        self.globals: Frame = {}  # the run's top-level variables, which function bodies read
        self.numbers: dict[Any, Node] = {}  # one constant node per distinct number written
        # By id of a syntax node, which is kept too: an id is reused once its node is freed (a claim's).
        self.literals: dict[int, tuple[S.Tensor, Node]] = {}  # a tensor literal's constant
        self.leaf_statements: dict[int, tuple[S.Assign, bool]] = {}  # whether an assignment reads no variable
        self.depth = 0  # unbracketed nesting (the parser bounds brackets)
        self.loop_reads: dict[Pos, bool] = {}  # for each for loop: whether its body may read its variable

    @cached_property
    def assigned(self) -> dict[str, list[S.Assign]]:
        """The program's top-level assignments by name: made when first needed (a mistake, a function,
        a --set), which a straight-line program that runs as written never has."""
        return assigned_names(self.module.body)

    # --- before the run: what must be checked whether or not it runs --------------------------

    def prepare(self) -> None:
        """Define the functions and check every block, function body and --set name before anything runs."""
        defs: list[S.FuncDef] = []
        blocks: list[S.Stmt] = []  # top-level statements with a block; the others are checked as they run
        for stmt in self.module.body:
            kind = stmt.__class__
            if kind is S.FuncDef:
                defs.append(stmt)  # type: ignore[arg-type]
            elif kind is not S.Assign and kind is not S.Claim:
                blocks.append(stmt)
        for stmt in defs:
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
            if stmt.name in self.functions:  # functions may be called before their definition: which one?
                raise NameNotFound(f"function '{stmt.name}' is defined twice (first at line "
                                   f"{self.functions[stmt.name].pos.line})", "delete one, or rename it", stmt.pos)
            local = set(stmt.params) | set(assigned_names(stmt.body))
            self.functions[stmt.name] = Function(stmt.name, stmt.params, stmt.body, stmt.pos, local)
        for stmt in defs:
            function = self.functions[stmt.name]
            try:
                self.check_block(stmt.body, function)
            except GradcalcError as exc:
                raise exc.at(stmt.pos) from None
            if not any(isinstance(inner, S.Return) for inner in S.statements(stmt.body)):
                # a path that ends without one is an error when it runs
                raise GradcalcSyntaxError(f"function '{stmt.name}' never returns a value",
                                          "end its block with `return <expression>`", stmt.pos)
            for node in S.code(stmt.body):
                if isinstance(node, S.Name) and node.name not in function.local:
                    function.reads.add(node.name)
                elif isinstance(node, S.Call) and node.name in self.functions:
                    function.callees.add(node.name)
            function.reads_globals = any(self.variable(name) for name in function.reads)
        _close_over_calls(self.functions)
        self.check_block(blocks, None)
        if self.inputs:
            self.check_inputs()

    def check_inputs(self) -> None:
        """--set names must be leaves or free variables of the program."""
        read = {node.name for node in S.code(self.module.body) if isinstance(node, S.Name)}
        read.update(*(function.reads for function in self.functions.values()))  # not their locals
        leaf_names = {name for name, stmts in self.assigned.items() if any(self.is_leaf(s) for s in stmts)}
        for name in self.inputs:
            if name in leaf_names or (name in read and name not in self.assigned):
                continue
            if name in self.assigned:
                first = self.assigned[name][0] if self.assigned[name] else None
                raise UsageError(f"cannot set '{name}': it is computed from other variables, not a leaf",
                                 "set the leaves it is computed from instead: " + ", ".join(sorted(leaf_names)),
                                 first.pos if first else None)
            hint = did_you_mean(name, [*self.assigned, *(n for n in read if n in self.inputs)])
            raise UsageError(f"the program has no variable '{name}'", hint or "check the name")

    def is_leaf(self, stmt: S.Assign) -> bool:
        """A top-level `name = ...` that reads no variable (nor a function that does) defines a leaf."""
        known = self.leaf_statements.get(id(stmt))
        if known is not None and known[0] is stmt:
            return known[1]
        leaf = stmt.op == "=" and not any(
            (isinstance(node, S.Name) and self.variable(node.name))
            or (isinstance(node, S.Call) and node.name in self.functions and self.functions[node.name].reads_globals)
            for node in S.walk(stmt.value))
        self.leaf_statements[id(stmt)] = (stmt, leaf)
        return leaf

    def check_block(self, body: list[S.Stmt], function: Function | None) -> None:
        """A block's mistakes that need no values: unknown names and functions, arguments, misplaced statements."""
        for stmt in S.statements(body):  # nested blocks too: each statement checks only its own expressions
            try:
                if isinstance(stmt, S.Assign):
                    if stmt.op != "=":
                        self.check_expr(S.Name(stmt.name, stmt.pos), function)
                    self.check_expr(stmt.value, function)
                elif isinstance(stmt, S.Return):
                    if function is None:
                        raise GradcalcSyntaxError("'return' outside a function",
                                                  "return belongs in a function block: f(x) { ...; return x }",
                                                  stmt.pos)
                    self.check_expr(stmt.value, function)
                elif isinstance(stmt, (S.While, S.If)):
                    self.check_expr(stmt.cond, function)
                    if isinstance(stmt, S.While):
                        self.state.loops.setdefault(stmt.pos, Loop(stmt.pos.line, "while", column=stmt.pos.column))
                elif isinstance(stmt, S.For):
                    for bound in _range_bounds(stmt):
                        self.check_expr(bound, function)
                    # Whether its body may read the loop variable (a function it calls might).
                    self.loop_reads[stmt.pos] = any(
                        (isinstance(node, S.Name) and node.name == stmt.var)
                        or (isinstance(node, S.Call) and node.name in self.functions)
                        for node in S.code(stmt.body))
                    self.state.loops.setdefault(stmt.pos, Loop(stmt.pos.line, "for", column=stmt.pos.column))
                elif isinstance(stmt, S.FuncDef):
                    raise GradcalcSyntaxError(f"function '{stmt.name}' is defined inside a block",
                                              "define functions at the top level of the program", stmt.pos)
                elif isinstance(stmt, S.Claim):
                    raise GradcalcSyntaxError(
                        "a check statement inside a block or function",
                        "write check statements at the top level: they are judged after the program runs", stmt.pos)
            except GradcalcError as exc:
                raise exc.at(stmt.pos) from None

    def check_expr(self, expr: S.Expr, function: Function | None) -> None:
        """An expression's mistakes that need no values: the checks the walk makes as it goes, made ahead."""
        stack: list[tuple[Any, int]] = [(expr, self.depth)]
        while stack:
            node, depth = stack.pop()
            kind = type(node)
            if kind in _NESTING or (kind is S.Binary and node.op == "^"):
                depth = self.deeper(node, depth)
            children: list[Any]
            if kind is S.Name:
                if not self.defined(node.name, function):
                    raise self.unknown_name(node, function)
                continue
            if kind is S.Number:
                continue
            if kind is S.Call:
                children = self.call_operands(node)
            elif kind is S.Index:
                children = [node.target]
                for sub in node.subscripts:
                    children.extend([sub.start, sub.stop, sub.step] if type(sub) is S.Slice else [sub])
            elif kind is S.Binary:
                if node.op == "^":
                    self.check_transpose(node, function)
                children = [node.left, node.right]
            elif kind is S.Attribute:
                _check_attribute(node)
                children = [node.target]
            elif kind is S.String or kind is S.Slice:
                raise _misplaced(node)
            elif kind is S.Unary or kind is S.Not:
                children = [node.operand]
            elif kind is S.BoolOp:
                children = [node.left, node.right]
            elif kind is S.Compare:
                children = node.operands
            else:
                children = node.items
            stack.extend((child, depth) for child in children if child is not None)

    def deeper(self, expr: S.Expr, depth: int) -> int:
        depth += 1
        if depth > self.limits.max_depth:
            raise LimitExceeded(f"expression nested more than {self.limits.max_depth} deep",
                                "split it into several statements, or raise the limit with --max-depth", expr.pos)
        return depth

    def defined(self, name: str, function: Function | None) -> bool:
        """Whether reading `name` is a variable or a constant (assigned in time or not, which only a run tells)."""
        return (function is not None and name in function.local) or self.variable(name) or name in CONSTANTS

    def variable(self, name: str) -> bool:
        """Whether `name` is one of the program's variables: assigned at its top level, or given by --set."""
        return name in self.assigned or name in self.inputs

    def unknown_name(self, expr: S.Name, function: Function | None) -> GradcalcError:
        name = expr.name
        if name in BUILTINS or name in self.functions:
            return NameNotFound(f"'{name}' is a function, not a value", f"call it: {name}(...)", expr.pos)
        known = set(self.assigned) | set(CONSTANTS) | (function.local if function is not None else set())
        hint = did_you_mean(name, known)
        return NameNotFound(
            f"'{name}' is used but never given a value",
            (hint + " " if hint else "") + f"assign it in the program (`{name} = ...`) or pass --set {name}=VALUE",
            expr.pos,
        )

    def check_transpose(self, expr: S.Binary, function: Function | None) -> None:
        """`W^T` where T is no variable: the user meant a transpose."""
        right = expr.right
        if type(right) is S.Name and right.name == "T" and not (
                self.variable("T") or (function is not None and "T" in function.local)):
            x = expr.left.name if isinstance(expr.left, S.Name) else "x"
            raise NameNotFound("'^T' is not a transpose here: T is no variable",
                               f"for a transpose write {x}.T or transpose({x})", right.pos)

    def call_operands(self, expr: S.Call) -> list[S.Expr | None]:
        """The expressions a call evaluates, its callee and arguments checked (a load's file names are none)."""
        function = self.functions.get(expr.name)
        if function is not None:
            _check_user_call(function, expr)
            return list(expr.args)
        builtin = self.builtin(expr)
        if builtin.name == "load":
            _load_names(expr)
            return []
        return _bind(builtin, expr)

    def builtin(self, expr: S.Call) -> Builtin:
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
        return builtin

    # --- the run: statements ------------------------------------------------------------------

    def run(self, body: list[S.Stmt], frame: Frame) -> _Returned | None:
        """Run a block's statements; a `return` inside stops it and is handed up."""
        for stmt in body:
            try:
                kind = stmt.__class__
                if kind is S.Assign:
                    self.assign(stmt, frame)
                    continue
                result = _STATEMENTS[kind](self, stmt, frame)
            except GradcalcError as exc:
                raise exc.at(stmt.pos) from None
            except RecursionError:
                raise LimitExceeded("this statement nests too deeply to run",
                                    "split it into several statements", stmt.pos) from None
            if result is not None:
                return result
        return None

    def assign(self, stmt: S.Assign, frame: Frame) -> None:
        name = stmt.name
        expr = stmt.value if stmt.op == "=" else \
            S.Binary(_AUGMENTED[stmt.op], S.Name(name, stmt.pos), stmt.value, stmt.pos)
        if self.function is not None:  # a function's local
            node = self.value(expr, frame)
            if node.name is None:
                node.name = name  # named: never freed as a temporary
            frame[name] = node
            return
        state = self.state
        if name in self.inputs and self.is_leaf(stmt):
            # A --set leaf keeps the random stream aligned: its own draws are still made.
            self.check_expr(expr, None)
            if _calls_random(expr):
                self.value(expr, frame)
            node = leaf(self.inputs[name], name)
            state.add_leaf(name, node)
        else:
            node = self.value(expr, frame)
            # A result that requires grad came from a variable: only the others may be leaves.
            if not node.requires_grad and self.is_leaf(stmt):
                node = leaf(node.value, name)
                state.add_leaf(name, node)
            elif node.name is None:
                node.name = name
        frame[name] = node
        state.last_assigned = name
        state.final[name] = stmt

    def stmt_return(self, stmt: S.Return, frame: Frame) -> _Returned:
        return _Returned(self.value(stmt.value, frame))

    def stmt_skipped(self, stmt: S.Stmt, frame: Frame) -> None:
        """A function definition or a check statement: nothing to run (checked and defined beforehand)."""

    def stmt_while(self, stmt: S.While, frame: Frame) -> _Returned | None:
        loop = self.state.loops[stmt.pos]
        limit = self.limits.max_iterations
        pos = stmt.pos
        label = f"while loop at line {pos.line}"
        count = 0
        try:
            with graph.scope("loop", label) as iteration:
                while self.condition(stmt.cond, frame, "while"):
                    count += 1
                    if count > limit:
                        count -= 1
                        raise LimitExceeded(f"the while loop at line {pos.line} ran past {limit:,} iterations",
                                            "check that its condition becomes false, or raise --max-iterations",
                                            pos)
                    iteration.step(count)  # the graph view groups iterations
                    result = self.run(stmt.body, frame)
                    if result is not None:
                        return result
                    iteration.pause()  # the condition belongs to the loop's context
        finally:
            loop.iterations += count
        return None

    def stmt_for(self, stmt: S.For, frame: Frame) -> _Returned | None:
        loop = self.state.loops[stmt.pos]
        limit = self.limits.max_iterations
        pos = stmt.pos
        try:
            numbers = [as_int(self.value(bound, frame), "a range bound") for bound in _range_bounds(stmt)]
        except GradcalcError as exc:
            raise exc.at(stmt.iterable.pos) from None
        if len(numbers) == 3 and numbers[2] == 0:
            raise ValueProblem("range's step cannot be 0", "use a positive or negative step", pos)
        steps = range(*numbers)
        count = max(0, -((steps.start - steps.stop) // steps.step))  # len() overflows past 2^63
        if count > limit:
            raise LimitExceeded(f"the for loop at line {pos.line} would run {count:,} iterations, "
                                f"past the limit of {limit:,}", "raise --max-iterations", pos)
        label = f"for loop at line {pos.line}"
        var, read = stmt.var, self.loop_reads[pos]
        done = 0
        try:
            with graph.scope("loop", label) as iteration:
                for i in steps:
                    done += 1
                    iteration.step(i)
                    if read:  # a number, not differentiated; made each time only for a body that reads it
                        frame[var] = leaf(B.scalar(i), var, requires_grad=False)
                    result = self.run(stmt.body, frame)
                    if result is not None:
                        return result
        finally:
            loop.iterations += done
        if done and not read:
            frame[var] = leaf(B.scalar(steps[done - 1]), var, requires_grad=False)  # its last value, as Python
        return None

    def stmt_if(self, stmt: S.If, frame: Frame) -> _Returned | None:
        return self.run(stmt.body if self.condition(stmt.cond, frame, "if") else stmt.orelse, frame)

    def stmt_nograd(self, stmt: S.NoGrad, frame: Frame) -> _Returned | None:
        with graph.no_grad():
            return self.run(stmt.body, frame)

    def condition(self, expr: S.Expr, frame: Frame, keyword: str) -> bool:
        host = graph.host_value(self.value(expr, frame))
        if host.shape != ():
            raise ValueProblem(
                f"the {keyword} condition is a tensor of shape {host.shape}, not a single true/false value",
                "use all(...) or any(...) to combine its entries, or where(cond, a, b) for elementwise choice",
                expr.pos,
            )
        number = float(host)
        if math.isnan(number):
            raise ValueProblem(f"the {keyword} condition is NaN", "check the values it compares", expr.pos)
        return number != 0

    # --- the run: expressions -----------------------------------------------------------------

    def evaluate(self, expr: S.Expr, frame: Frame) -> Node:
        """An expression's value over a frame of top-level variables (a claim's side, a --set value)."""
        self.depth, self.function = 0, None
        return self.value(expr, frame)

    def value(self, expr: S.Expr, frame: Frame) -> Node:
        """An expression's node. Names, numbers and + - * / @ are walked here, without a call each:
        this is the loop every operation of a program goes through."""
        kind = expr.__class__
        if kind is S.Name:
            node = frame.get(expr.name)  # type: ignore[attr-defined]
            return node if node is not None else self.read_missing(expr, frame)  # type: ignore[arg-type]
        if kind is S.Number:
            node = self.numbers.get(expr.value)  # type: ignore[attr-defined]
            return node if node is not None else self.number(expr.value)  # type: ignore[attr-defined]
        if kind is not S.Binary or expr.op == "^":  # type: ignore[attr-defined]
            return _EXPRESSIONS[kind](self, expr, frame)
        # Left-associative operators: a chain such as a + b - c is a loop, not recursion, however long.
        steps = []
        while kind is S.Binary and expr.op != "^":  # type: ignore[attr-defined]
            steps.append(expr)
            expr = expr.left  # type: ignore[attr-defined]
            kind = expr.__class__
        total = self.value(expr, frame)
        steps.reverse()
        for step in steps:
            y = self.value(step.right, frame)
            try:
                total = (_BINARY.get(step.op) or _juxtaposed(step.left, step.right))(total, y)
            except GradcalcError as exc:
                raise exc.at(step.pos) from None
        return total

    def nested(self, expr: S.Expr, operand: S.Expr, frame: Frame) -> Node:
        """`operand`'s node, a level below `expr`: what nests without brackets counts toward --max-depth."""
        depth = self.depth
        self.depth = self.deeper(expr, depth)
        try:
            return self.value(operand, frame)
        finally:
            self.depth = depth

    def number(self, value: float) -> Node:
        key = value if value else repr(value)  # -0.0 == 0.0, but 1/-0.0 is -inf
        node = self.numbers.get(key)
        if node is None:
            node = self.numbers[key] = constant(value)
            node.origin = None  # made once and shared: no loop iteration's or call's
        return node

    def read_missing(self, expr: S.Name, frame: Frame) -> Node:
        """A name not in the frame: a global read from a function, a constant, or a mistake."""
        name, function = expr.name, self.function
        if function is not None and frame is not self.globals:
            if name in function.local:
                raise NameNotFound(f"'{name}' is used before it is assigned", "assign it earlier in the function",
                                   expr.pos)
            node = self.globals.get(name)
            if node is not None:
                return node
        if self.variable(name):
            first = self.assigned.get(name)
            where = f" (it is first assigned at line {first[0].pos.line})" if first else ""
            raise NameNotFound(f"'{name}' is used before it is assigned{where}",
                               "move its assignment above this line", expr.pos)
        if name in CONSTANTS:
            return self.number(CONSTANTS[name])
        raise self.unknown_name(expr, function)

    def expr_string(self, expr: S.String, frame: Frame) -> Node:
        raise _misplaced(expr)

    expr_slice = expr_string

    def expr_tensor(self, expr: S.Tensor, frame: Frame) -> Node:
        known = self.literals.get(id(expr))
        if known is not None and known[0] is expr:
            return known[1]
        try:
            literal = _literal(expr)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None
        if literal is not None or not expr.items:
            node = constant(literal if literal is not None else B.xp.zeros((0,), dtype=B.dtype))
            node.origin = None  # made once and shared: no loop iteration's or call's
            self.literals[id(expr)] = (expr, node)
            return node
        values = [self.value(item, frame) for item in expr.items]
        shapes = {v.shape for v in values}
        if len(shapes) > 1:
            listed = " and ".join(str(s) for s in sorted(shapes, key=len))
            raise ShapeError(f"the entries of this tensor have different shapes: {listed}",
                             "every row of a tensor literal needs the same shape", expr.pos)
        return ops.stack(*values)

    def expr_unary(self, expr: S.Unary, frame: Frame) -> Node:
        operand = expr.operand
        if operand.__class__ is S.Number:  # a negative literal is a constant, not a NegBackward
            return self.number(-operand.value if expr.op == "-" else operand.value)
        x = self.nested(expr, operand, frame)
        if expr.op == "+":
            return x
        try:
            return ops.neg(x)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def expr_binary(self, expr: S.Binary, frame: Frame) -> Node:
        """A power (right-associative, so never a long chain); `value` walks the other operators."""
        self.check_transpose(expr, self.function)
        x, y = self.nested(expr, expr.left, frame), self.nested(expr, expr.right, frame)
        try:
            return ops.power(x, y)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def expr_compare(self, expr: S.Compare, frame: Frame) -> Node:
        left = self.value(expr.operands[0], frame)
        result: Node | None = None
        for op, operand in zip(expr.ops, expr.operands[1:]):
            right = self.value(operand, frame)
            try:
                step = _COMPARE[op](left, right)
                result = step if result is None else ops.logical_and(result, step)
            except GradcalcError as exc:
                raise exc.at(expr.pos) from None
            left = right
        return result  # type: ignore[return-value]

    def expr_boolop(self, expr: S.BoolOp, frame: Frame) -> Node:
        is_and = expr.op == "and"
        first = self.nested(expr, expr.left, frame)
        if first.value.shape == ():  # short-circuit on a scalar, as Python does
            truth = bool(first.value != 0)
            if truth != is_and:
                return constant(float(truth))
            return ops.ne(self.nested(expr, expr.right, frame), 0)
        second = self.nested(expr, expr.right, frame)
        try:
            return (ops.logical_and if is_and else ops.logical_or)(first, second)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def expr_not(self, expr: S.Not, frame: Frame) -> Node:
        return ops.logical_not(self.nested(expr, expr.operand, frame))

    def expr_attribute(self, expr: S.Attribute, frame: Frame) -> Node:
        _check_attribute(expr)
        return ops.transpose(self.nested(expr, expr.target, frame), None)

    def expr_index(self, expr: S.Index, frame: Frame) -> Node:
        try:
            x = self.nested(expr, expr.target, frame)
            key: list[int | slice] = []
            for sub in expr.subscripts:
                if sub.__class__ is S.Slice:
                    key.append(self.slice(expr, sub, frame))  # type: ignore[arg-type]
                else:
                    key.append(as_int(self.nested(expr, sub, frame), "an index"))
            return ops.checked_index(x, tuple(key))
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def slice(self, index: S.Index, sub: S.Slice, frame: Frame) -> slice:
        bounds = [as_int(self.nested(index, b, frame), "a slice bound") if b is not None else None
                  for b in (sub.start, sub.stop, sub.step)]
        if bounds[2] == 0:
            raise ValueProblem("a slice step cannot be 0", "use a positive or negative step")
        return slice(*bounds)

    def expr_call(self, expr: S.Call, frame: Frame) -> Node:
        builtin = BUILTINS.get(expr.name)
        if builtin is None or builtin.needs_context or expr.name in self.functions:
            return self.special_call(expr, frame)
        args = expr.args  # the usual call, sin(x): its arguments in order, nothing to bind
        if expr.keywords or not builtin.required <= len(args) <= len(builtin.params):
            args = _bind(builtin, expr)  # type: ignore[assignment]
        if len(args) == 1:
            values = [self.value(args[0], frame)]  # no list comprehension (a call of its own)
        else:
            values = [self.value(arg, frame) if arg is not None else None for arg in args]  # type: ignore[misc]
        try:
            return builtin.fn(*values)
        except GradcalcError as exc:
            # max(a, b) reads b as an axis, as NumPy does: when that fails, point to maximum(a, b)
            if len(expr.args) > 1 and "axis" in exc.message and _max_hint(builtin):
                exc.hint = (exc.hint or "") + _max_hint(builtin)
            raise exc.at(expr.pos) from None

    def special_call(self, expr: S.Call, frame: Frame) -> Node:
        """A call of the program's own function, of a builtin that needs the run (randn, load), or a mistake."""
        function = self.functions.get(expr.name)
        if function is not None:
            return self.user_call(function, expr, frame)
        builtin = self.builtin(expr)  # raises for an unknown name
        if builtin.name == "load":
            values: list[Any] = _load_names(expr)
        else:
            values = [self.value(arg, frame) if arg is not None else None for arg in _bind(builtin, expr)]
        try:
            return builtin.fn(self.context, *values)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def user_call(self, function: Function, expr: S.Call, frame: Frame) -> Node:
        _check_user_call(function, expr)
        local: Frame = dict(zip(function.params, [self.value(arg, frame) for arg in expr.args]))
        for param, node in local.items():
            if node.name is None:
                node.name = param  # a parameter may be read many times: never freed as a temporary
        state, limit, pos = self.state, self.limits.max_recursion, expr.pos
        state.call_depth += 1
        caller, depth = self.function, self.depth
        self.function, self.depth = function, 0
        try:
            with graph.scope("call", f"{expr.name}(…) called at line {pos.line}", state.call_depth):
                if state.call_depth > limit:
                    raise LimitExceeded(f"function calls nested more than {limit} deep (recursion in '{expr.name}'?)",
                                        "check the recursion stops, or raise --max-recursion", pos)
                result = self.run(function.body, local)
        finally:
            state.call_depth -= 1
            self.function, self.depth = caller, depth
        if result is None:
            raise NameNotFound(f"function '{expr.name}' ended without returning a value",
                               "make every path through it end in `return ...`", function.pos)
        return result.value


_STATEMENTS: dict[type, Callable[[Interpreter, Any, Frame], _Returned | None]] = {
    S.Return: Interpreter.stmt_return, S.While: Interpreter.stmt_while, S.For: Interpreter.stmt_for,
    S.If: Interpreter.stmt_if, S.NoGrad: Interpreter.stmt_nograd,
    S.FuncDef: Interpreter.stmt_skipped, S.Claim: Interpreter.stmt_skipped,
}
_EXPRESSIONS: dict[type, Callable[[Interpreter, Any, Frame], Node]] = {
    kind: getattr(Interpreter, f"expr_{kind.__name__.lower()}")
    for kind in (S.String, S.Tensor, S.Unary, S.Binary, S.Compare, S.BoolOp, S.Not, S.Call, S.Slice, S.Index,
                 S.Attribute)
}
# What nests without brackets (the parser bounds brackets): each level counts toward --max-depth.
_NESTING = (S.Unary, S.Not, S.BoolOp, S.Attribute, S.Index)


def _check_attribute(expr: S.Attribute) -> None:
    if expr.name != "T":
        raise NameNotFound(f"unknown attribute '.{expr.name}'", "the only attribute is .T (transpose)", expr.pos)


def _misplaced(expr: S.Expr) -> GradcalcError:
    """Quoted text or a slice where neither belongs."""
    if isinstance(expr, S.String):
        return GradcalcSyntaxError("quoted text is only allowed as a file name in load(\"...\")",
                                   "remove the quotes", expr.pos)
    return GradcalcSyntaxError("a slice (a:b) is only allowed inside [ ]", "x[1:3]", expr.pos)


def _range_bounds(stmt: S.For) -> list[S.Expr]:
    call = stmt.iterable
    if not isinstance(call, S.Call) or call.name != "range" or call.keywords or not 1 <= len(call.args) <= 3:
        raise GradcalcSyntaxError("a for loop runs over range(n), range(a, b) or range(a, b, step)",
                                  "for i in range(10) { ... }", stmt.iterable.pos)
    return call.args


def _check_user_call(function: Function, expr: S.Call) -> None:
    if expr.keywords:
        raise ArgumentError(f"{expr.name} takes no keyword arguments", "pass its arguments in order",
                            expr.keywords[0].pos)
    if len(expr.args) != len(function.params):
        raise ArgumentError(
            f"{expr.name} takes {len(function.params)} argument{'s' if len(function.params) != 1 else ''} "
            f"({', '.join(function.params)}), got {len(expr.args)}",
            f"defined at line {function.pos.line}", expr.pos)


def _load_names(expr: S.Call) -> list[str]:
    strings = [arg for arg in expr.args] + [k.value for k in expr.keywords]
    if not 1 <= len(strings) <= 2 or not all(isinstance(s, S.String) for s in strings):
        raise ArgumentError('load takes a quoted file name (and for .npz an array name)',
                            'load("x.npy") or load("data.npz", "w")', expr.pos)
    return [s.value for s in strings]  # type: ignore[attr-defined]


def _bind(builtin: Builtin, expr: S.Call) -> list[S.Expr | None]:
    """Match positional and keyword arguments to the builtin's parameters: the expression for each."""
    params = builtin.params
    if not expr.keywords and builtin.required <= len(expr.args) <= len(params) and not builtin.variadic:
        return expr.args  # the usual call: f(x, y)

    def usage() -> str:
        return f"usage: {builtin.signature()}"

    if builtin.variadic:
        if expr.keywords:
            raise ArgumentError(f"{builtin.name} takes no keyword arguments", usage(), expr.keywords[0].pos)
        if len(expr.args) < builtin.required:
            raise ArgumentError(f"{builtin.name} needs at least {builtin.required} argument"
                                f"{'s' if builtin.required != 1 else ''}", usage(), expr.pos)
        return expr.args
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
    return slots


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


def _max_hint(builtin: Builtin) -> str:
    if builtin.name in ("max", "min"):
        return f"; for the elementwise {'larger' if builtin.name == 'max' else 'smaller'} of two values use " \
               f"{'maximum' if builtin.name == 'max' else 'minimum'}(a, b)"
    return ""


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
    interpreter: Interpreter  # evaluates expressions over this run's variables (a claim's right side)
    tape: list[Node]  # the nodes recorded that require grad, in creation order (graph.tape)


def execute(module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
            keep_values: bool = False) -> Executed:
    """Check and run a program; inputs are already arrays in the working dtype.

    keep_values keeps every intermediate's value (the graph view shows them all).
    """
    state = State()
    interpreter = Interpreter(module, inputs, context, limits, state)
    frame = interpreter.globals
    # Free variables given by --set: leaves that exist before the first statement.
    for name, value in inputs.items():
        if name not in interpreter.assigned:
            node = leaf(value, name)
            state.add_leaf(name, node)
            frame[name] = node
    interpreter.prepare()
    with graph.building(release=not keep_values) as tape, B.errstate():
        interpreter.run(module.body, frame)
    return Executed(frame, state, interpreter, tape)


def free_names(module: S.Module) -> list[str]:
    """Names a program reads but never assigns (its inputs), in order of first use."""
    assigned = set(assigned_names(module.body))
    local: set[str] = set()
    for stmt in module.body:
        if isinstance(stmt, S.FuncDef):
            local.update(stmt.params)
            local.update(assigned_names(stmt.body))  # a function's locals, in its branches and loops too
            local.add(stmt.name)
    found: dict[str, None] = {}
    for node in S.code(module.body, functions=True):
        if isinstance(node, S.Name) and node.name not in assigned and node.name not in local \
                and node.name not in CONSTANTS and node.name not in BUILTINS:
            found.setdefault(node.name, None)
    return list(found)


def make_context(folder: str, seed: int, allow_read: tuple[str, ...], max_file_size: int = DEFAULT_MAX_FILE_SIZE
                 ) -> Context:
    return Context(B.Random(seed), os.path.abspath(folder), tuple(os.path.abspath(p) for p in allow_read),
                   max_file_size)


def claim_context(seed: int, text: str) -> Context:
    """A claim's: no file may be read, and its random draws depend on its own text and the seed only."""
    return Context(B.Random(seed * 2**32 + zlib.crc32(text.encode("utf-8", "surrogatepass"))), None, ())
