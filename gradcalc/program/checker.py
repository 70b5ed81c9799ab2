"""What is checked before a program runs: its functions, its blocks, the names it reads and --set.

Nothing is compiled: a straight-line statement is checked as it runs (the interpreter asks this
module to describe the mistake). What may run never, or many times (function bodies, loops,
branches), is checked here first, so a mistake in a branch not taken is still reported and a loop
body's names and calls are checked once. What the check finds depends on the syntax tree, the names
given by --set and --max-depth only, so one `Checker` can serve every run of those.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from functools import cached_property
from typing import Any

from ..errors import (
    ArgumentError,
    GradcalcError,
    GradcalcSyntaxError,
    LimitExceeded,
    NameNotFound,
    Pos,
    UsageError,
    did_you_mean,
)
from ..language import syntax as S
from .builtins import BUILTINS, CONSTANTS, Builtin

NEW_AXIS = ("None", "newaxis")  # x[None], x[newaxis]: a new axis of length 1, where no variable has the name

# What nests without brackets (the parser bounds brackets): each level counts toward --max-depth.
_NESTING = (S.Unary, S.Not, S.BoolOp, S.Attribute, S.Index)


class Function:
    """A function the program defines, as the checker found it (a plain class: a dataclass costs start-up, #21)."""

    __slots__ = ("body", "callees", "defaults", "local", "name", "params", "pos", "reads", "reads_globals")

    def __init__(self, name: str, params: list[str], body: list[S.Stmt], pos: Pos, local: set[str],
                 defaults: dict[str, S.Expr] | None = None) -> None:
        self.name = name
        self.params = params
        self.body = body
        self.pos = pos
        self.local = local  # its parameters and every name it assigns: local throughout its body, as in Python
        self.defaults = {} if defaults is None else defaults  # f(x, y=2): computed at each call
        self.reads: set[str] = set()  # the names its body reads that are not its own
        self.reads_globals = False  # reads a program variable, itself or through the functions it calls
        self.callees: set[str] = set()


def check(module: S.Module, inputs: Collection[str], max_depth: int) -> Checker:
    """The program checked before it runs, for runs given the --set names `inputs` (in their order)."""
    checker = Checker(module, inputs, max_depth)
    checker.check()
    return checker


class Checker:
    """The pass before the run, and what it found: the functions, each loop, whether a for loop's body
    reads its variable, and which top-level assignments make leaves.

    The interpreter reads these, and asks it about a name or call that a straight-line statement gets
    wrong as it runs (those are not checked ahead: a program that runs as written never needs it).
    """

    def __init__(self, module: S.Module, inputs: Collection[str], max_depth: int) -> None:
        self.module = module
        self.inputs = dict.fromkeys(inputs)  # the --set names, in order (not their values: it may outlive a run)
        self.max_depth = max_depth
        self.functions: dict[str, Function] = {}
        self.loops: dict[Pos, str] = {}  # every loop statement, by its keyword's place: "for" or "while"
        self.loop_reads: dict[Pos, bool] = {}  # for each for loop: whether its body may read its variable
        # By id of a syntax node, which is kept too: an id is reused once its node is freed.
        self.leaf_statements: dict[int, tuple[S.Assign, bool]] = {}  # whether an assignment reads no variable
        self.constants: dict[str, S.Const] = {}  # the `const` declarations, by name
        self.unpacked: set[int] = set()  # by id: the calls whose values `u, v = f(x)` unpacks (the nodes are kept)

    @cached_property
    def assigned(self) -> dict[str, list[S.Assign]]:
        """The program's top-level assignments by name: made when first needed (a mistake, a function,
        a --set), which a straight-line program that runs as written never has."""
        return assigned_names(self.module.body)

    def check(self) -> None:
        """Define the functions and check every block, function body and --set name before anything runs."""
        defs: list[S.FuncDef] = []
        blocks: list[S.Stmt] = []  # top-level statements with a block; the others are checked as they run
        for stmt in self.module.body:
            if type(stmt) is S.FuncDef:
                defs.append(stmt)
            elif type(stmt) is S.Const:
                self.constants.setdefault(stmt.name, stmt)  # the first: any other is an error
            elif type(stmt) not in (S.Assign, S.Claim, S.Question):
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
            self.functions[stmt.name] = Function(stmt.name, stmt.params, stmt.body, stmt.pos, local,
                                                 stmt.defaults)
        _check_jumps(self.module.body, False)  # before "never returns": f(x) { break } is a misplaced break
        for stmt in defs:
            function = self.functions[stmt.name]
            try:
                for param, default in stmt.defaults.items():  # over the program's top-level names
                    for node in S.walk(default):
                        if isinstance(node, S.Name) and node.name in stmt.params and not self.defined(node.name, None):
                            raise NameNotFound(f"the default of '{param}' reads the parameter '{node.name}'",
                                               "a default is computed over the program's top-level variables, not "
                                               "the other parameters: compute it inside the function", node.pos)
                    self.check_expr(default, None)
                self.check_block(stmt.body, function)
            except GradcalcError as exc:
                raise exc.at(stmt.pos) from None
            if not any(isinstance(inner, S.Return) for inner in S.statements(stmt.body)):
                # a path that ends without one is an error when it runs
                raise GradcalcSyntaxError(f"function '{stmt.name}' never returns a value",
                                          "end its block with `return <expression>`", stmt.pos)
            for node in [*S.code(stmt.body), *(n for d in stmt.defaults.values() for n in S.walk(d))]:
                if isinstance(node, S.Name) and node.name not in function.local:
                    function.reads.add(node.name)
                elif isinstance(node, S.Call) and node.name in self.functions:
                    function.callees.add(node.name)
            function.reads_globals = any(self.variable(name) for name in function.reads)
        _close_over_calls(self.functions)
        if self.constants:
            self.check_constants()
        self.check_block(blocks, None)
        if self.inputs:
            self.check_inputs()

    def check_constants(self) -> None:
        """A constant is assigned once, by its declaration, and its value reads only other constants."""
        for name, declared in self.constants.items():
            line = declared.pos.line
            for stmt in self.assigned[name]:
                if stmt is declared:
                    continue
                if (stmt.pos.line, stmt.pos.column) < (line, declared.pos.column):
                    raise GradcalcSyntaxError(f"'{name}' is declared a constant after it is assigned at line "
                                              f"{stmt.pos.line}", "a constant is declared where it is first "
                                              f"assigned: remove the assignment at line {stmt.pos.line}, or "
                                              "remove `const`", declared.pos)
                if isinstance(stmt, S.Const):
                    raise GradcalcSyntaxError(f"'{name}' is a constant (declared at line {line}) and cannot be "
                                              "declared again", "a constant is declared once: delete this "
                                              "declaration, or give its value another name", stmt.pos)
                raise GradcalcSyntaxError(f"'{name}' is a constant (declared at line {line}) and cannot be assigned "
                                          f"again", f"remove `const` at line {line} to make '{name}' a variable, or "
                                          "give this value another name", stmt.pos)
            for node in S.walk(declared.value):
                if isinstance(node, S.Name) and self.variable(node.name) and node.name not in self.constants:
                    raise GradcalcSyntaxError(f"the constant '{name}' is computed from the variable '{node.name}'",
                                              "a constant is data: numbers, load(...) and other constants; declare "
                                              f"'{node.name}' a constant too, or remove `const` to make '{name}' "
                                              "a variable", node.pos)
        for inner in S.statements(self.module.body):
            if isinstance(inner, S.For) and inner.var in self.constants:
                raise GradcalcSyntaxError(f"'{inner.var}' is a constant (declared at line "
                                          f"{self.constants[inner.var].pos.line}) and cannot be a loop variable",
                                          "give the loop variable another name", inner.pos)

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
        """A top-level `name = ...` that reads no variable (nor a function that does) defines a leaf; a
        constant is data, which --set may replace as it does a leaf."""
        known = self.leaf_statements.get(id(stmt))
        if known is not None and known[0] is stmt:
            return known[1]
        leaf = type(stmt) is S.Const or (stmt.op == "=" and type(stmt) is not S.IndexAssign and not any(
            (isinstance(node, S.Name) and self.variable(node.name))
            or (isinstance(node, S.Call) and node.name in self.functions and self.functions[node.name].reads_globals)
            for node in S.walk(stmt.value)))
        self.leaf_statements[id(stmt)] = (stmt, leaf)
        return leaf

    def check_block(self, body: list[S.Stmt], function: Function | None) -> None:
        """A block's mistakes that need no values: unknown names and functions, arguments, misplaced statements."""
        for stmt in S.statements(body):  # nested blocks too: each statement checks only its own expressions
            try:
                if isinstance(stmt, S.Const):
                    raise GradcalcSyntaxError(f"the constant '{stmt.name}' is declared inside a "
                                              f"{'function' if function is not None else 'block'}",
                                              "declare constants at the top level of the program, outside any "
                                              "block or function", stmt.pos)
                if isinstance(stmt, S.IndexAssign):
                    self.check_written(stmt, function)
                    self.check_expr(stmt.target, function)
                    self.check_expr(stmt.value, function)
                elif isinstance(stmt, S.Assign):
                    if stmt.op != "=":
                        self.check_expr(S.Name(stmt.name, stmt.pos), function)
                    self.check_expr(stmt.value, function)
                elif isinstance(stmt, S.Unpack):
                    if isinstance(stmt.value, S.Call):
                        self.check_unpacked(stmt, stmt.value)
                        self.unpacked.add(id(stmt.value))
                elif isinstance(stmt, S.Return):
                    if function is None:
                        raise GradcalcSyntaxError("'return' outside a function",
                                                  "return belongs in a function block: f(x) { ...; return x }",
                                                  stmt.pos)
                    for value in (stmt.value.items if isinstance(stmt.value, S.Tuple) else [stmt.value]):
                        self.check_expr(value, function)
                elif isinstance(stmt, (S.While, S.If)):
                    self.check_expr(stmt.cond, function)
                    if isinstance(stmt, S.While):
                        self.loops[stmt.pos] = "while"
                elif isinstance(stmt, S.For):
                    for bound in range_bounds(stmt):
                        self.check_expr(bound, function)
                    # Whether its body may read the loop variable (a function it calls might).
                    self.loop_reads[stmt.pos] = any(
                        (isinstance(node, S.Name) and node.name == stmt.var)
                        or (isinstance(node, S.Call) and node.name in self.functions)
                        for node in S.code(stmt.body))
                    self.loops[stmt.pos] = "for"
                elif isinstance(stmt, S.FuncDef):
                    raise GradcalcSyntaxError(f"function '{stmt.name}' is defined inside a block",
                                              "define functions at the top level of the program", stmt.pos)
                elif isinstance(stmt, (S.Claim, S.Question)):
                    raise GradcalcSyntaxError(
                        "a check statement inside a block or function",
                        "write check statements at the top level: they are judged after the program runs", stmt.pos)
            except GradcalcError as exc:
                raise exc.at(stmt.pos) from None

    def check_written(self, stmt: S.IndexAssign, function: Function | None) -> None:
        """`y[0] = 5` writes into a y that has a value: assigned another way, a parameter, or given by --set."""
        name = stmt.name
        if function is not None:
            has_value = name in function.params or any(
                type(s) is not S.IndexAssign for s in assigned_names(function.body).get(name, []))
        else:
            has_value = name in self.inputs or any(type(s) is not S.IndexAssign for s in self.assigned.get(name, []))
        if not has_value:
            raise NameNotFound(f"'{name}' is written into but never given a value",
                               f"make it first, such as `{name} = zeros(3)`, then write its entries", stmt.pos)

    def check_unpacked(self, stmt: S.Unpack, call: S.Call) -> None:
        """`u, v = f(x)`: where f returns several values, it returns as many as there are names."""
        function = self.functions.get(call.name)
        if function is None:
            return  # a builtin's value: a tensor unpacked by rows, as the run checks
        for inner in S.statements(function.body):
            if isinstance(inner, S.Return) and isinstance(inner.value, S.Tuple) and \
                    len(inner.value.items) != len(stmt.parts):
                given = len(inner.value.items)
                raise ArgumentError(f"{len(stmt.parts)} names to unpack, but {call.name} returns {given} "
                                    f"values at line {inner.pos.line}", "give as many names as it returns values",
                                    call.pos)

    def check_expr(self, expr: S.Expr, function: Function | None, depth: int = 0) -> None:
        """An expression's mistakes that need no values: the checks the run makes as it goes, made ahead
        (`depth`: the unbracketed nesting the expression starts at)."""
        stack: list[tuple[Any, int]] = [(expr, depth)]
        while stack:
            node, depth = stack.pop()
            kind = type(node)
            if kind in _NESTING or (kind is S.Binary and node.op == "^"):
                depth = deeper(node, depth, self.max_depth)
            children: list[Any]
            if kind is S.Name:
                if not self.defined(node.name, function):
                    raise self.unknown_name(node, function)
                continue
            if kind is S.Number:
                continue
            if kind is S.Call:
                children = list(self.call_operands(node))
                if node.name in self.functions and id(node) not in self.unpacked:
                    self.check_single(node)
            elif kind is S.Index:
                children = [node.target]
                for sub in node.subscripts:
                    if type(sub) is S.Ellipsis_ or (type(sub) is S.Name and sub.name in NEW_AXIS
                                                   and not self.defined(sub.name, function)):
                        continue  # x[..., 0], x[None]
                    children.extend([sub.start, sub.stop, sub.step] if type(sub) is S.Slice else [sub])
            elif kind is S.Conditional:
                depth = deeper(node, depth, self.max_depth)
                children = [node.cond, node.then, node.orelse]
            elif kind is S.Binary:
                if node.op == "^":
                    self.check_transpose(node, function)
                children = [node.left, node.right]
            elif kind is S.Attribute:
                check_attribute(node)
                children = [node.target]
            elif kind is S.String or kind is S.Slice or kind is S.Ellipsis_ or kind is S.Tuple:
                raise misplaced(node)
            elif kind is S.Unary or kind is S.Not:
                children = [node.operand]
            elif kind is S.BoolOp:
                children = [node.left, node.right]
            elif kind is S.Compare:
                children = node.operands
            else:
                children = node.items
            stack.extend((child, depth) for child in children if child is not None)

    def check_single(self, call: S.Call) -> None:
        """A call used as one value of a function that returns several at every return is a mistake."""
        returns = [inner for inner in S.statements(self.functions[call.name].body) if isinstance(inner, S.Return)]
        if returns and all(isinstance(r.value, S.Tuple) for r in returns):
            given = len(returns[0].value.items)  # type: ignore[attr-defined]
            raise ArgumentError(f"{call.name}(...) returns {given} values, used here as one",
                                f"unpack them first: {', '.join('uvwxyz'[:given]) if given <= 6 else 'u, v, ...'} "
                                f"= {call.name}(...)", call.pos)

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

    def call_operands(self, expr: S.Call) -> Sequence[S.Expr | None]:
        """The expressions a call evaluates, its callee and arguments checked (a load's file names are none)."""
        function = self.functions.get(expr.name)
        if function is not None:
            check_user_call(function, expr)
            return expr.args
        builtin = self.builtin(expr)
        if builtin.name == "load":
            load_names(expr)
            return []
        operands = bind_arguments(builtin, expr)
        if builtin.quoted:  # quoted text where the builtin takes it (reduction='sum') is no value to check
            return [None if isinstance(arg, S.String) and name in builtin.quoted else arg
                    for name, arg in zip(builtin.named(len(operands)), operands, strict=True)]
        return operands

    def builtin(self, expr: S.Call) -> Builtin:
        """The builtin a call names; an unknown name, range() or a variable called is a mistake."""
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


def _check_jumps(body: list[S.Stmt], in_loop: bool) -> None:
    """`break` and `continue` belong in a loop's block (not in a function's outside one)."""
    for stmt in body:
        if isinstance(stmt, S.Jump) and not in_loop:
            raise GradcalcSyntaxError(f"'{stmt.kind}' outside a loop",
                                      f"{stmt.kind} belongs in a for or while loop's block", stmt.pos)
        if isinstance(stmt, S.FuncDef):
            _check_jumps(stmt.body, False)
        elif isinstance(stmt, (S.For, S.While)):
            _check_jumps(stmt.body, True)
        elif isinstance(stmt, S.If):
            _check_jumps(stmt.body, in_loop)
            _check_jumps(stmt.orelse, in_loop)
        elif isinstance(stmt, S.NoGrad):
            _check_jumps(stmt.body, in_loop)


def _close_over_calls(functions: dict[str, Function]) -> None:
    """A function that calls one reading program variables reads them too (a fixpoint over calls)."""
    changed = True
    while changed:
        changed = False
        for function in functions.values():
            if not function.reads_globals and any(functions[c].reads_globals for c in function.callees):
                function.reads_globals = changed = True


def assigned_names(body: list[S.Stmt]) -> dict[str, list[S.Assign]]:
    """Every top-level (non-function) assignment, by name, in source order."""
    found: dict[str, list[S.Assign]] = {}
    for stmt in S.statements(body):
        if isinstance(stmt, S.Assign):
            found.setdefault(stmt.name, []).append(stmt)
        elif isinstance(stmt, S.For):
            found.setdefault(stmt.var, [])
    return found


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
    nodes = list(S.code(module.body, functions=True))
    new_axes = {id(sub) for node in nodes if isinstance(node, S.Index) for sub in node.subscripts
                if isinstance(sub, S.Name) and sub.name in NEW_AXIS}  # x[None]: no input
    for node in nodes:
        if isinstance(node, S.Name) and node.name not in assigned and node.name not in local \
                and node.name not in CONSTANTS and node.name not in BUILTINS and id(node) not in new_axes:
            found.setdefault(node.name, None)
    return list(found)


# --- the checks a statement's run and the pass before it share ---------------------------------

def deeper(expr: S.Expr, depth: int, max_depth: int) -> int:
    """One level more of unbracketed nesting, within --max-depth."""
    depth += 1
    if depth > max_depth:
        raise LimitExceeded(f"expression nested more than {max_depth} deep",
                            "split it into several statements, or raise the limit with --max-depth", expr.pos)
    return depth


def check_attribute(expr: S.Attribute) -> None:
    if expr.name != "T":
        raise NameNotFound(f"unknown attribute '.{expr.name}'", "the only attribute is .T (transpose)", expr.pos)


def misplaced(expr: S.Expr) -> GradcalcError:
    """Quoted text or a slice where neither belongs."""
    if isinstance(expr, S.String):
        return GradcalcSyntaxError("quoted text is only allowed where a function takes it: load's file name, "
                                   "reduction='sum', ord='fro', approximate='tanh', einsum's subscripts",
                                   "remove the quotes", expr.pos)
    return GradcalcSyntaxError("a slice (a:b) is only allowed inside [ ]", "x[1:3]", expr.pos)


def range_bounds(stmt: S.For) -> list[S.Expr]:
    call = stmt.iterable
    if not isinstance(call, S.Call) or call.name != "range" or call.keywords or not 1 <= len(call.args) <= 3:
        raise GradcalcSyntaxError("a for loop runs over range(n), range(a, b) or range(a, b, step)",
                                  "for i in range(10) { ... }", stmt.iterable.pos)
    return call.args


def check_user_call(function: Function, expr: S.Call) -> None:
    if not expr.keywords and len(expr.args) == len(function.params):
        return  # the usual call: f(x, y)
    bind_user_arguments(function, expr)


def bind_user_arguments(function: Function, expr: S.Call) -> list[tuple[S.Expr, bool]]:
    """Each parameter's expression and whether it is the default: the arguments in order, then by name."""
    params, defaults = function.params, function.defaults
    if not expr.keywords and len(expr.args) == len(params):
        return [(arg, False) for arg in expr.args]
    required = len(params) - len(defaults)
    takes = f"{len(params)} argument{'s' if len(params) != 1 else ''}" if not defaults else \
        f"{required} to {len(params)} arguments"
    signature = ", ".join(f"{p}={'…'}" if p in defaults else p for p in params)
    if len(expr.args) > len(params):
        raise ArgumentError(f"{expr.name} takes {takes} ({signature}), got {len(expr.args)}",
                            f"defined at line {function.pos.line}", expr.pos)
    slots: list[S.Expr | None] = [*expr.args, *[None] * (len(params) - len(expr.args))]
    for keyword in expr.keywords:
        if keyword.name not in params:
            hint = did_you_mean(keyword.name, params)
            raise ArgumentError(f"{expr.name} has no parameter '{keyword.name}'",
                                hint or f"its parameters: {signature}", keyword.pos)
        i = params.index(keyword.name)
        if slots[i] is not None:
            raise ArgumentError(f"{expr.name} got '{keyword.name}' twice", f"its parameters: {signature}",
                                keyword.pos)
        slots[i] = keyword.value
    bound: list[tuple[S.Expr, bool]] = []
    for param, slot in zip(params, slots):
        if slot is not None:
            bound.append((slot, False))
        elif param in defaults:
            bound.append((defaults[param], True))
        else:
            raise ArgumentError(f"{expr.name} takes {takes} ({signature}), got {len(expr.args) + len(expr.keywords)}",
                                f"'{param}' has no default; defined at line {function.pos.line}", expr.pos)
    return bound


def load_names(expr: S.Call) -> list[str]:
    """load's quoted file name (and for .npz its array name)."""
    strings = [*expr.args, *(k.value for k in expr.keywords)]
    names = [s.value for s in strings if isinstance(s, S.String)]
    if not 1 <= len(strings) <= 2 or len(names) != len(strings):
        raise ArgumentError('load takes a quoted file name (and for .npz an array name)',
                            'load("x.npy") or load("data.npz", "w")', expr.pos)
    return names


def bind_arguments(builtin: Builtin, expr: S.Call) -> Sequence[S.Expr | None]:
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
                            f"got {len(expr.args)}", usage() + max_hint(builtin), expr.pos)
    slots: list[S.Expr | None] = list(expr.args) + [None] * (len(params) - len(expr.args))
    for keyword in expr.keywords:
        if keyword.name not in params:
            numpy_name = {"dim": "axis", "keepdim": "keepdims", "correction": "ddof", "unbiased": "ddof",
                          "p": "ord"}.get(keyword.name)
            hint = f"gradcalc uses NumPy's names: {numpy_name}= (PyTorch's {keyword.name}=)" \
                if numpy_name in params else did_you_mean(keyword.name, params)
            if numpy_name == "ddof" and hint:  # the defaults differ: say so rather than let one pass for the other
                hint += "; ddof is 0 unless given (NumPy's population variance), where PyTorch's correction is 1: " \
                        "write ddof=1 for PyTorch's"
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


def max_hint(builtin: Builtin) -> str:
    """max(a, b) reads b as an axis, as NumPy does: point to maximum(a, b)."""
    if builtin.name in ("max", "min"):
        return f"; for the elementwise {'larger' if builtin.name == 'max' else 'smaller'} of two values use " \
               f"{'maximum' if builtin.name == 'max' else 'minimum'}(a, b)"
    return ""
