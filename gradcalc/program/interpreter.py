"""The evaluator: runs a checked program's statements, recording the graph as it goes.

Running builds the computation graph as it goes (PyTorch's dynamic graph): only
the executed path is recorded. Nothing is compiled first: a straight-line program
is read once, so a compile step would cost as much again as the run (it did: 2.2 of
5.1 µs an operation). What may run never or many times (function bodies, loops,
branches) is checked before the run by checker.py, so every static mistake (an
unknown function, a wrong number of arguments, a name never given a value) is still
reported; a straight-line statement's mistakes are found as it runs.
"""

from __future__ import annotations

import math
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..engine import backend as B
from ..engine import graph, ops
from ..engine.graph import Node, constant, leaf
from ..engine.primitives import Indices, Row
from ..errors import (
    ArgumentError,
    GradcalcError,
    LimitExceeded,
    NameNotFound,
    Pos,
    ShapeError,
    ValueProblem,
)
from ..files import DEFAULT_MAX_FILE_SIZE
from ..language import syntax as S
from .builtins import BUILTINS, CONSTANTS, RANDOM, Builtin, Context, as_int
from .checker import (
    NEW_AXIS,
    Checker,
    Function,
    bind_arguments,
    bind_user_arguments,
    check,
    check_attribute,
    check_user_call,
    deeper,
    load_names,
    max_hint,
    misplaced,
    range_bounds,
)
from .notation.juxtaposition import juxtaposed

Frame = dict[str, Node]

DEFAULT_MAX_ITERATIONS = 1_000_000
DEFAULT_MAX_RECURSION = 200

_BINARY: dict[str, Callable[[Any, Any], Node]] = {
    "+": ops.add, "-": ops.sub, "*": ops.mul, "/": ops.div, "@": ops.matmul, "^": ops.power,
    "%": ops.remainder, "//": ops.floor_divide,
}
_COMPARE: dict[str, Callable[[Any, Any], Node]] = {
    "<": ops.lt, "<=": ops.le, ">": ops.gt, ">=": ops.ge, "==": ops.eq, "!=": ops.ne,
}
_AUGMENTED = {"+=": "+", "-=": "-", "*=": "*", "/=": "/", "**=": "^", "^=": "^", "%=": "%", "//=": "//"}


# Plain classes, not dataclasses: every command imports this module, and making a dataclass costs about
# half a millisecond of start-up (#21).
class Limits:
    # The defaults, as class attributes too (Limits.max_iterations), as the dataclass had them.
    max_iterations = DEFAULT_MAX_ITERATIONS
    max_recursion = DEFAULT_MAX_RECURSION
    max_depth = 200

    def __init__(self, max_iterations: int = DEFAULT_MAX_ITERATIONS, max_recursion: int = DEFAULT_MAX_RECURSION,
                 max_depth: int = 200) -> None:
        self.max_iterations = max_iterations
        self.max_recursion = max_recursion
        self.max_depth = max_depth


class Loop:
    """How often one loop statement ran (summed over every time it was reached)."""

    __slots__ = ("column", "iterations", "kind", "line")

    def __init__(self, line: int, kind: str, iterations: int = 0, column: int = 0) -> None:
        self.line = line
        self.kind = kind
        self.iterations = iterations
        self.column = column

    def __repr__(self) -> str:
        return f"Loop({self.line}, {self.kind!r}, iterations={self.iterations}, column={self.column})"


class State:
    """What a run accumulates besides variables: leaves, the last name assigned, loop counts."""

    __slots__ = ("call_depth", "constants", "final", "last_assigned", "leaves", "loops", "made")

    def __init__(self, leaves: dict[str, Node] | None = None, constants: dict[str, Node] | None = None,
                 made: list[Node] | None = None, last_assigned: str | None = None,
                 final: dict[str, S.Assign] | None = None, loops: dict[Pos, Loop] | None = None,
                 call_depth: int = 0) -> None:
        self.leaves = {} if leaves is None else leaves  # what is differentiated by default (not constants)
        self.constants = {} if constants is None else constants  # `const N = 4`: data, requires_grad=False
        self.made = [] if made is None else made  # every leaf made, those a name no longer holds too
        self.last_assigned = last_assigned
        # The statement that gave each name its final value (kept, not its place: a place is not otherwise
        # read while running, and a reference to it cost a cache miss a statement).
        self.final = {} if final is None else final
        self.loops = {} if loops is None else loops  # by the loop keyword's place: two may share a line
        self.call_depth = call_depth

    def add_leaf(self, name: str, node: Node) -> None:
        self.leaves[name] = node
        self.made.append(node)


class _Returned:
    __slots__ = ("value",)

    def __init__(self, value: Node | tuple[Node, ...]) -> None:
        self.value = value  # a tuple for `return x, y`


class _Jump:
    """What a block hands up at `break` or `continue`: its loop stops, or goes on to the next iteration."""

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        self.kind = kind


_BREAK, _CONTINUE = _Jump("break"), _Jump("continue")
_Ran = _Returned | _Jump | None  # what a block hands up


def _calls_random(expr: S.Expr) -> bool:
    return any(isinstance(node, S.Call) and node.name in RANDOM for node in S.walk(expr))


# For each checker (a program with some --set names), the leaf statements those names replace, checked,
# by id (kept with the statement): whether each draws random numbers. Found by the first run, not by each.
_SET_LEAVES: weakref.WeakKeyDictionary[Checker, dict[int, tuple[S.Stmt, bool]]] = weakref.WeakKeyDictionary()


class Interpreter:
    """Runs a checked program straight from its syntax tree, recording the graph as it goes.

    What the checker found (the functions, the loops, which assignments make leaves) it reads; a
    straight-line statement's mistakes are found as it runs, and the checker describes them.
    """

    def __init__(self, module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
                 state: State, checker: Checker | None = None) -> None:
        """`checker`: the module checked for these inputs' names and limits.max_depth; else it is checked here."""
        self.checker = checker if checker is not None else check(module, inputs, limits.max_depth)
        self.context = context
        self.limits = limits
        self.state = state
        self.inputs = inputs
        self.functions = self.checker.functions
        self.set_leaves = _SET_LEAVES.setdefault(self.checker, {})
        self.function: Function | None = None  # the function whose body is running
        self.globals: Frame = {}  # the run's top-level variables, which function bodies read
        self.numbers: dict[Any, Node] = {}  # one constant node per distinct number written
        # By id of a syntax node, which is kept too: an id is reused once its node is freed (a claim's).
        self.literals: dict[int, tuple[S.Tensor, Node]] = {}  # a tensor literal's constant
        self.depth = 0  # unbracketed nesting (the parser bounds brackets)
        self.masks: set[int] = set()  # by id: the leaves made of a comparison's value, masks still (kept by the run)

    # --- the run: statements ------------------------------------------------------------------

    def run(self, body: list[S.Stmt], frame: Frame) -> _Ran:
        """Run a block's statements; a `return`, `break` or `continue` inside stops it and is handed up."""
        for stmt in body:
            try:
                if type(stmt) is S.Assign:
                    self.assign(stmt, frame)
                    continue
                result = _STATEMENTS[type(stmt)](self, stmt, frame)
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
            if _is_boolean_literal(expr, frame):
                self.masks.add(id(node))  # the literal's constant, kept by the run (self.literals)
            frame[name] = node
            return
        state = self.state
        if name in self.inputs and self.checker.is_leaf(stmt):
            # A --set leaf keeps the random stream aligned: its own draws are still made.
            known = self.set_leaves.get(id(stmt))
            if known is None or known[0] is not stmt:
                self.checker.check_expr(expr, None, self.depth)
                known = self.set_leaves[id(stmt)] = (stmt, _calls_random(expr))
            if known[1]:
                self.value(expr, frame)
            node = self.leaf_of(self.inputs[name], name, expr)
            state.add_leaf(name, node)
        else:
            node = self.value(expr, frame)
            # A result that requires grad came from a variable: only the others may be leaves.
            if not node.requires_grad and self.checker.is_leaf(stmt):
                node = self.leaf_of(node.value, name, expr)
                state.add_leaf(name, node)
            elif node.name is None:
                node.name = name
        frame[name] = node
        state.last_assigned = name
        state.final[name] = stmt

    def leaf_of(self, value: Any, name: str, expr: S.Expr) -> Node:
        """The leaf a top-level value computed from no variable becomes; a mask (m = [1, 0] > 0) stays one."""
        made = leaf(value, name)
        if type(expr) in _MASKING or _is_boolean_literal(expr, self.globals):
            self.masks.add(id(made))
        return made

    def bind(self, stmt: S.Assign, node: Node, frame: Frame) -> None:
        """Give `stmt`'s name the value computed for it (an unpacking's part): `assign` without the computing."""
        name = stmt.name
        if self.function is None:
            state = self.state
            if name in self.inputs and self.checker.is_leaf(stmt):
                node = self.leaf_of(self.inputs[name], name, stmt.value)
                state.add_leaf(name, node)
            elif not node.requires_grad and self.checker.is_leaf(stmt):
                node = self.leaf_of(node.value, name, stmt.value)
                state.add_leaf(name, node)
            state.last_assigned = name
            state.final[name] = stmt
        if node.name is None:
            node.name = name
        frame[name] = node

    def stmt_unpack(self, stmt: S.Unpack, frame: Frame) -> None:
        """`a, b = 1, 2` or `u, v = f(x)`: every value computed before any name is assigned (a, b = b, a swaps)."""
        count, value = len(stmt.parts), stmt.value
        if value is not None:
            function = self.functions.get(value.name) if isinstance(value, S.Call) else None
            result = self.user_call(function, value, frame, count) \
                if function is not None and isinstance(value, S.Call) else self.value(value, frame)
            values = result if isinstance(result, tuple) else _rows(result, count, value.pos)
        else:
            values = tuple(self.value(part.value, frame) for part in stmt.parts)
        for part, node in zip(stmt.parts, values):
            self.bind(part, node, frame)

    def stmt_indexassign(self, stmt: S.IndexAssign, frame: Frame) -> None:
        """`y[key] = value`: y becomes a new value with those entries written (PyTorch's CopySlices, functionally:
        the gradient reaches the value written, and the old y only where it was not overwritten)."""
        name, index = stmt.name, stmt.target
        if self.function is not None and name not in frame and name not in self.function.local:
            raise ValueProblem(f"a function cannot write into the program's variable '{name}'",
                               f"copy it first (y = {name}), or return the new value and assign it outside",
                               stmt.pos)
        target = self.value(index.target, frame)
        try:
            key = self.key(index, target, frame)
            value = self.value(stmt.value, frame)
            if stmt.op != "=":  # y[0] += x: the entries read, then written
                value = _BINARY[_AUGMENTED[stmt.op]](ops.index(target, key), value)
            written = B.xp.broadcast_to(B.xp.zeros((), dtype=B.dtype), target.shape)[key].shape
            if value.shape != written:
                try:
                    fits = B.broadcast_shapes(value.shape, written) == written
                except ValueError:
                    fits = False
                if not fits:
                    raise ShapeError(f"cannot write a value of shape {value.shape} into entries of shape {written}",
                                     "the value must have the shape of what the index picks, or broadcast to it")
            node = ops.index_put(target, value, key)
        except GradcalcError as exc:
            raise exc.at(index.pos) from None
        node.name = name
        frame[name] = node
        if self.function is None:
            self.state.last_assigned = name
            self.state.final[name] = stmt

    def stmt_jump(self, stmt: S.Jump, frame: Frame) -> _Jump:
        return _BREAK if stmt.kind == "break" else _CONTINUE

    def stmt_const(self, stmt: S.Const, frame: Frame) -> None:
        """`const N = 4`: a leaf that does not require grad (the checker saw it reads only constants)."""
        name = stmt.name
        if name in self.inputs:  # --set N=8: the program's value, not a literal, so it may be replaced
            self.checker.check_expr(stmt.value, None, self.depth)
            if _calls_random(stmt.value):
                self.value(stmt.value, frame)
            value = self.inputs[name]
        else:
            computed = self.value(stmt.value, frame)
            if computed.requires_grad:  # a function that reads a variable
                raise ValueProblem(f"the constant '{name}' depends on the program's variables",
                                   "a constant is data: compute it from numbers, load(...) and other constants, or "
                                   f"remove `const` to make '{name}' a variable", stmt.pos)
            value = computed.value
        node = leaf(value, name, requires_grad=False)
        state = self.state
        state.constants[name] = node
        frame[name] = node
        state.last_assigned = name
        state.final[name] = stmt

    def stmt_return(self, stmt: S.Return, frame: Frame) -> _Returned:
        value = stmt.value
        if type(value) is S.Tuple:  # return x, y
            return _Returned(tuple(self.value(item, frame) for item in value.items))
        return _Returned(self.value(value, frame))

    def stmt_skipped(self, stmt: S.Stmt, frame: Frame) -> None:
        """A function definition or a check statement: nothing to run (checked and defined beforehand)."""

    def stmt_while(self, stmt: S.While, frame: Frame) -> _Ran:
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
                    if result is not None and result is not _CONTINUE:
                        if result is _BREAK:
                            break
                        return result
                    iteration.pause()  # the condition belongs to the loop's context
        finally:
            loop.iterations += count
        return None

    def stmt_for(self, stmt: S.For, frame: Frame) -> _Ran:
        loop = self.state.loops[stmt.pos]
        limit = self.limits.max_iterations
        pos = stmt.pos
        try:
            numbers = [as_int(self.value(bound, frame), "a range bound") for bound in range_bounds(stmt)]
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
        var, read = stmt.var, self.checker.loop_reads[pos]
        done = 0
        try:
            with graph.scope("loop", label) as iteration:
                for i in steps:
                    done += 1
                    iteration.step(i)
                    if read:  # a number, not differentiated; made each time only for a body that reads it
                        frame[var] = leaf(B.scalar(i), var, requires_grad=False)
                    result = self.run(stmt.body, frame)
                    if result is not None and result is not _CONTINUE:
                        if result is _BREAK:
                            break
                        return result
        finally:
            loop.iterations += done
        if done and not read:
            frame[var] = leaf(B.scalar(steps[done - 1]), var, requires_grad=False)  # its last value, as Python
        return None

    def stmt_if(self, stmt: S.If, frame: Frame) -> _Ran:
        return self.run(stmt.body if self.condition(stmt.cond, frame, "if") else stmt.orelse, frame)

    def stmt_nograd(self, stmt: S.NoGrad, frame: Frame) -> _Ran:
        with graph.no_grad():
            return self.run(stmt.body, frame)

    def condition(self, expr: S.Expr, frame: Frame, keyword: str) -> bool:
        host = graph.host_value(self.value(expr, frame))
        if host.shape != ():
            where = "where(cond, a, b) for elementwise choice" if keyword != "if-else" else \
                "where(cond, a, b) to choose entry by entry (a if c else b picks by one true/false value)"
            raise ValueProblem(
                f"the {keyword} condition is a tensor of shape {host.shape}, not a single true/false value",
                f"use all(...) or any(...) to combine its entries, or {where}",
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
        if type(expr) is S.Name:
            node = frame.get(expr.name)
            return node if node is not None else self.read_missing(expr, frame)
        if type(expr) is S.Number:
            node = self.numbers.get(expr.value)
            return node if node is not None else self.number(expr.value)
        if type(expr) is not S.Binary or expr.op == "^":
            return _EXPRESSIONS[type(expr)](self, expr, frame)
        # Left-associative operators: a chain such as a + b - c is a loop, not recursion, however long.
        steps: list[S.Binary] = []
        while type(expr) is S.Binary and expr.op != "^":
            steps.append(expr)
            expr = expr.left
        total = self.value(expr, frame)
        steps.reverse()
        for step in steps:
            y = self.value(step.right, frame)
            try:
                total = (_BINARY.get(step.op) or juxtaposed(step.left, step.right))(total, y)
            except GradcalcError as exc:
                raise exc.at(step.pos) from None
        return total

    def nested(self, expr: S.Expr, operand: S.Expr, frame: Frame) -> Node:
        """`operand`'s node, a level below `expr`: what nests without brackets counts toward --max-depth."""
        depth = self.depth
        self.depth = deeper(expr, depth, self.limits.max_depth)
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
        if self.checker.variable(name):
            first = self.checker.assigned.get(name)
            where = f" (it is first assigned at line {first[0].pos.line})" if first else ""
            raise NameNotFound(f"'{name}' is used before it is assigned{where}",
                               "move its assignment above this line", expr.pos)
        if name in CONSTANTS:
            return self.number(CONSTANTS[name])
        raise self.checker.unknown_name(expr, function)

    def expr_string(self, expr: S.String, frame: Frame) -> Node:
        raise misplaced(expr)

    expr_slice = expr_ellipsis_ = expr_tuple = expr_string

    def expr_conditional(self, expr: S.Conditional, frame: Frame) -> Node:
        """`a if c else b`: only the branch taken runs and is recorded, as Python's (and an if statement's)."""
        chosen = expr.then if self.condition(expr.cond, frame, "if-else") else expr.orelse
        return self.nested(expr, chosen, frame)

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
        self.checker.check_transpose(expr, self.function)
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
        assert result is not None  # the parser makes a comparison of two operands or more
        return result

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
        check_attribute(expr)
        return ops.transpose(self.nested(expr, expr.target, frame), None)

    def expr_index(self, expr: S.Index, frame: Frame) -> Node:
        try:
            x = self.nested(expr, expr.target, frame)
            return ops.index(x, self.key(expr, x, frame))
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def key(self, expr: S.Index, x: Node, frame: Frame) -> tuple:
        """What x[...] picks as the array library reads it, checked against x's shape: numbers, slices, None (a
        new axis), `...` (written out as the slices it stands for) and array indices (Indices): a tensor of
        whole numbers, or a mask made by a comparison (the entries where it is true)."""
        shape = x.shape
        subs = expr.subscripts
        if sum(type(sub) is S.Ellipsis_ for sub in subs) > 1:
            raise ValueProblem("an index can have only one '...'", "keep one '...'")
        key: list[Any] = []
        axis = 0  # the dimension of x the next subscript indexes
        masks = 0  # the masks met so far
        for i, sub in enumerate(subs):
            kind = type(sub)
            if kind is S.Ellipsis_:  # every dimension the subscripts after it do not index
                after = sum(1 for s in subs[i + 1:] if not _is_new_axis(s, frame))
                spanned = max(0, len(shape) - axis - after)
                key.extend([slice(None)] * spanned)
                axis += spanned
                continue
            if _is_new_axis(sub, frame):
                key.append(None)
                continue
            if axis >= len(shape):
                taken = sum(1 for s in subs if not _is_new_axis(s, frame) and type(s) is not S.Ellipsis_)
                masked = " (a mask indexes as many dimensions as it has)" if masks else ""
                raise ValueProblem(f"too many indices ({taken}) for a tensor of shape {shape}",
                                   f"it has {len(shape)} dimension{'s' if len(shape) != 1 else ''}{masked}")
            if type(sub) is S.Slice:
                key.append(self.slice(expr, sub, frame))
                axis += 1
                continue
            node = self.nested(expr, sub, frame)
            if node.shape == ():
                k = as_int(node, "an index")
                if not -shape[axis] <= k < shape[axis]:
                    raise ValueProblem(f"index {k} is out of range for dimension {axis} of size {shape[axis]}",
                                       f"use an index from 0 to {shape[axis] - 1} (or negative, from the end)",
                                       sub.pos)
                key.append(k)
                axis += 1
            elif _is_mask(node) or id(node) in self.masks or _is_boolean_literal(sub, frame):
                key.extend(_mask_indices(node, shape, axis, sub.pos))
                axis += node.ndim
                masks += 1
            else:
                key.append(_whole_indices(node, shape, axis, sub.pos))
                axis += 1
        return tuple(key)

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
        args: Sequence[S.Expr | None] = expr.args  # the usual call, sin(x): its arguments in order, nothing to bind
        if expr.keywords or not builtin.required <= len(args) <= len(builtin.params):
            args = bind_arguments(builtin, expr)
        values: list[Any]
        if builtin.quoted or builtin.parts:  # quoted text (reduction='sum') and lists of tensors (cat([a, b]))
            values = [self.argument(builtin, name, arg, frame)
                      for name, arg in zip(builtin.named(len(args)), args, strict=True)]
        elif len(args) == 1 and (only := args[0]) is not None:
            values = [self.value(only, frame)]  # no list comprehension (a call of its own)
        else:
            values = [self.value(arg, frame) if arg is not None else None for arg in args]
        try:
            return builtin.fn(*values)
        except GradcalcError as exc:
            # max(a, b) reads b as an axis, as NumPy does: when that fails, point to maximum(a, b)
            if len(expr.args) > 1 and "axis" in exc.message and max_hint(builtin):
                exc.hint = (exc.hint or "") + max_hint(builtin)
            raise exc.at(expr.pos) from None

    def argument(self, builtin: Builtin, name: str, arg: S.Expr | None, frame: Frame) -> Any:
        """One argument of a builtin that takes quoted text or a list of tensors: as the text, the tensors
        one by one, or a value."""
        if arg is None:
            return None
        if type(arg) is S.String and name in builtin.quoted:
            return arg.value
        if type(arg) is S.Tensor and name in builtin.parts:
            return tuple(self.value(item, frame) for item in arg.items)
        return self.value(arg, frame)

    def special_call(self, expr: S.Call, frame: Frame) -> Node:
        """A call of the program's own function, of a builtin that needs the run (randn, load), or a mistake."""
        function = self.functions.get(expr.name)
        if function is not None:
            return self.user_call(function, expr, frame)
        builtin = self.checker.builtin(expr)  # raises for an unknown name
        if builtin.name == "load":
            values: list[Any] = load_names(expr)
        else:
            values = [self.value(arg, frame) if arg is not None else None for arg in bind_arguments(builtin, expr)]
        try:
            return builtin.fn(self.context, *values)
        except GradcalcError as exc:
            raise exc.at(expr.pos) from None

    def user_call(self, function: Function, expr: S.Call, frame: Frame, unpacked: int = 0) -> Any:
        """The value of a call of the program's function; `unpacked`: the number of names its values go to
        (u, v = f(x)), else 0, where it must return one value."""
        check_user_call(function, expr)
        state, limit, pos = self.state, self.limits.max_recursion, expr.pos
        # counted before the arguments: a default is computed inside the call (f(a, b=f(1)) recurses there)
        state.call_depth += 1
        caller, depth = self.function, self.depth
        try:
            if state.call_depth > limit:
                raise LimitExceeded(f"function calls nested more than {limit} deep (recursion in '{expr.name}'?)",
                                    "check the recursion stops, or raise --max-recursion", pos)
            local: Frame = {}
            for param, (arg, default) in zip(function.params, bind_user_arguments(function, expr)):
                # a default is computed at each call, over the program's top-level variables
                local[param] = self.value(arg, self.globals if default else frame)
            for param, node in local.items():
                if node.name is None:
                    node.name = param  # a parameter may be read many times: never freed as a temporary
            self.function, self.depth = function, 0
            with graph.scope("call", f"{expr.name}(…) called at line {pos.line}", state.call_depth):
                result = self.run(function.body, local)
        finally:
            state.call_depth -= 1
            self.function, self.depth = caller, depth
        if not isinstance(result, _Returned):
            raise NameNotFound(f"function '{expr.name}' ended without returning a value",
                               "make every path through it end in `return ...`", function.pos)
        value = result.value
        given = len(value) if isinstance(value, tuple) else 1
        if unpacked and isinstance(value, tuple) and given != unpacked:
            raise ValueProblem(f"{unpacked} names to unpack, but {expr.name}(...) returned {given} "
                               f"value{'s' if given != 1 else ''}", "give as many names as it returns values",
                               expr.pos)
        if not unpacked and isinstance(value, tuple):
            raise ValueProblem(f"{expr.name}(...) returns {given} values, used here as one",
                               f"unpack them first: {', '.join('uvwxyz'[:given]) if given <= 6 else 'u, v, ...'} "
                               f"= {expr.name}(...)", expr.pos)
        return value


_STATEMENTS: dict[type, Callable[[Interpreter, Any, Frame], _Ran]] = {
    S.Unpack: Interpreter.stmt_unpack, S.IndexAssign: Interpreter.stmt_indexassign, S.Jump: Interpreter.stmt_jump,
    S.Return: Interpreter.stmt_return, S.Const: Interpreter.stmt_const, S.While: Interpreter.stmt_while,
    S.For: Interpreter.stmt_for,
    S.If: Interpreter.stmt_if, S.NoGrad: Interpreter.stmt_nograd,
    S.FuncDef: Interpreter.stmt_skipped, S.Claim: Interpreter.stmt_skipped, S.Question: Interpreter.stmt_skipped,
}
_EXPRESSIONS: dict[type, Callable[[Interpreter, Any, Frame], Node]] = {
    kind: getattr(Interpreter, f"expr_{kind.__name__.lower()}")
    for kind in (S.String, S.Tensor, S.Unary, S.Binary, S.Compare, S.BoolOp, S.Not, S.Call, S.Slice, S.Index,
                 S.Attribute, S.Conditional, S.Ellipsis_, S.Tuple)
}


# --- indexing by arrays and masks ----------------------------------------------------------------

def _is_new_axis(sub: S.Expr, frame: Frame) -> bool:
    """x[None], x[newaxis]: a new axis of length 1 (unless the program has a variable of that name)."""
    return type(sub) is S.Name and sub.name in NEW_AXIS and sub.name not in frame


def _rows(node: Node, count: int, pos: Pos) -> tuple[Node, ...]:
    """`a, b = x`: a tensor unpacked along its first axis, as Python iterates a NumPy array."""
    shape = node.shape
    if not shape or shape[0] != count:
        got = "a single number" if not shape else f"a tensor of shape {shape}, {shape[0]} along its first axis"
        raise ValueProblem(f"{count} names to unpack, but the value is {got}",
                           "unpack a tensor with as many rows as names, or a function's values (return x, y)", pos)
    return tuple(ops.index(node, (Row(i),)) for i in range(count))


_MASKING = (S.Compare, S.BoolOp, S.Not)  # what writes a mask: m = [1, 0] > 0 is one, as a leaf too


def _is_mask(node: Node) -> bool:
    """A mask is what a comparison or a logic operation made (PyTorch's bool tensors): x[x > 0]."""
    op = node.op
    return op is not None and op.kind.name in ("comparison", "logic")


def _is_boolean_literal(expr: S.Expr, frame: Frame) -> bool:
    """[True, False, True]: a list written only of True and False is a mask, as PyTorch and NumPy read it
    (not the positions 1, 0, 1), unless the program has a variable of that name."""
    if type(expr) is not S.Tensor or not expr.items:
        return False
    return all(_is_boolean_literal(item, frame) if type(item) is S.Tensor else
               type(item) is S.Name and item.name in ("True", "False") and item.name not in frame
               for item in expr.items)


def _mask_indices(mask: Node, shape: tuple[int, ...], axis: int, pos: Pos) -> list[Indices]:
    """The entries a mask picks, as one array index for each dimension it covers."""
    covered = shape[axis:axis + mask.ndim]
    if tuple(mask.shape) != covered:
        raise ShapeError(f"a mask of shape {mask.shape} for dimensions of shape {covered}",
                         "a mask has the shape of what it indexes: x[x > 0] (or of x's first dimensions)", pos)
    host = graph.host_value(mask)
    _check_picked(int(B.host.count_nonzero(host)), shape, axis, mask.ndim, pos)
    return [Indices(picked.tolist()) for picked in host.nonzero()]


def _whole_indices(node: Node, shape: tuple[int, ...], axis: int, pos: Pos) -> Indices:
    """A tensor of whole numbers as an array index into `axis` (x[[0, 2]], eye(4)[labels]), checked in range."""
    host = B.host.asarray(graph.host_value(node))
    if axis >= len(shape):
        raise ValueProblem(f"too many indices for a tensor of shape {shape}",
                           f"it has {len(shape)} dimension{'s' if len(shape) != 1 else ''}", pos)
    _check_picked(host.size, shape, axis, 1, pos)
    # checked over the whole array at once: a Python loop takes seconds over 10^7 entries
    flat = host.reshape(-1)
    bad = ~B.host.isfinite(flat) | (flat != B.host.trunc(flat))
    if bad.any():
        v = float(flat[bad.argmax()])
        raise ArgumentError(f"an index array holds {v:g}, not a whole number",
                            "index with whole numbers (x[[0, 2]]), or with a comparison for a mask (x[x > 0])", pos)
    size = shape[axis]
    outside = (flat < -size) | (flat >= size)
    if outside.any():
        v = float(flat[outside.argmax()])
        raise ValueProblem(f"index {v:.0f} is out of range for dimension {axis} of size {size}",
                           f"use indices from 0 to {size - 1} (or negative, from the end)", pos)

    def nest(values: Any) -> Any:
        return tuple(nest(v) for v in values) if values and isinstance(values[0], list) else tuple(values)

    listed = host.astype(B.host.intp).tolist()
    return Indices(nest(listed) if host.ndim > 1 else listed)


def _check_picked(count: int, shape: tuple[int, ...], axis: int, spanned: int, pos: Pos) -> None:
    """Refuse, before listing them, more picked entries than --max-elements allows (what x[index] would hold)."""
    try:
        B.check_size((count, *shape[axis + spanned:]), "the entries this index picks")
    except GradcalcError as exc:
        raise exc.at(pos) from None


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

class Executed:
    __slots__ = ("frame", "interpreter", "state", "tape")

    def __init__(self, frame: Frame, state: State, interpreter: Interpreter, tape: list[Node]) -> None:
        self.frame = frame
        self.state = state
        self.interpreter = interpreter  # evaluates expressions over this run's variables (a claim's right side)
        self.tape = tape  # the nodes recorded that require grad, in creation order (graph.tape)


def execute(module: S.Module, inputs: Mapping[str, Any], context: Context, limits: Limits,
            keep_values: bool = False, checker: Checker | None = None,
            interpreter_class: type[Interpreter] = Interpreter) -> Executed:
    """Check and run a program; inputs are already arrays in the working dtype.

    keep_values keeps every intermediate's value (the graph view shows them all). `checker`, the
    module already checked for these inputs' names and limits.max_depth, spares checking it again.
    `interpreter_class`: the interpreter (anomaly.Locating notes where each value was made).
    """
    if checker is None:
        checker = check(module, inputs, limits.max_depth)
    state = State(loops={pos: Loop(pos.line, kind, column=pos.column) for pos, kind in checker.loops.items()})
    interpreter = interpreter_class(module, inputs, context, limits, state, checker)
    frame = interpreter.globals
    # Free variables given by --set: leaves that exist before the first statement.
    for name, value in inputs.items():
        if name not in checker.assigned:
            node = leaf(value, name)
            state.add_leaf(name, node)
            frame[name] = node
    with graph.building(release=not keep_values) as tape, B.errstate():
        interpreter.run(module.body, frame)
    return Executed(frame, state, interpreter, tape)


def make_context(folder: str, seed: int, allow_read: tuple[str, ...], max_file_size: int = DEFAULT_MAX_FILE_SIZE
                 ) -> Context:
    return Context(B.Random(seed), os.path.abspath(folder), tuple(os.path.abspath(p) for p in allow_read),
                   max_file_size)
