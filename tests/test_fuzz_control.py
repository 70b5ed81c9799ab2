"""Fuzzing control flow and functions.

1. Token soups rich in `while if else for in range { } return no_grad override` and newlines: the parser
   returns a syntax tree or raises GradcalcError, nothing else; the CLI (`gradcalc eval -e TEXT`) exits 0 or 2,
   never with a traceback or an internal error.
2. Valid random programs with loops, ifs and functions: an independent Python interpreter of the same program
   gives the value, how many loop iterations ran, and central finite differences; gradcalc's value and
   gradient must match them. Points where a branch or a loop's trip count changes within the step are skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, examples, run_cli, strict_json
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import gradcalc
from gradcalc.errors import GradcalcError
from gradcalc.language.parser import DEFAULT_MAX_DEPTH, parse, raise_recursion_limit

# gradcalc raises Python's recursion limit on first use; do it now, not inside a Hypothesis test (which warns).
raise_recursion_limit(DEFAULT_MAX_DEPTH)


def fast(count: int) -> settings:
    """A fixed number of examples (a tenth of it under --hypothesis-profile=quick) and no deadline (the first
    example builds the parser)."""
    return settings(max_examples=examples(count), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# --- token soups -----------------------------------------------------------------------------------------------

CONTROL = ["while", "if", "else", "for", "in", "range", "{", "}", "return", "no_grad", "override", "detach",
           "all", "any", "and", "or", "not", "\n", "\n", ";"]
NAMES = ["x", "y", "i", "f", "g", "sigmoid", "exp", "sum", "norm", "t"]
NUMBERS = ["0", "1", "2", "3", "0.5", "1e3"]
OPERATORS = ["=", "+=", "*=", "+", "-", "*", "/", "^", "<", ">", "<=", "==", "!=", "(", ")", "[", "]", ",", ":"]
JUNK = ["$", "!", "&", "|", "#", "\\\n", "'", '"', "é", "∂"]
SOUP_TOKENS = CONTROL + NAMES + NUMBERS + OPERATORS + JUNK

token_soup = st.lists(
    st.tuples(st.sampled_from(SOUP_TOKENS), st.sampled_from(["", " ", " ", "\n"])), max_size=45,
).map(lambda pairs: "".join(token + gap for token, gap in pairs))

# Lines that are each close to valid: their random arrangement often parses and runs, so the soup reaches the
# builder's control flow (unbalanced blocks, return at top level, else after a loop, recursion, ...).
LINES = [
    "x = 1", "y = x * 2", "x = [1, 2]", "i = 0", "y += 1", "t = y - 3",
    "while y < 10 {", "while 1 {", "while x {", "while i < 3 and x[i] > 0 {", "if x > 0 {", "if y {",
    "} else {", "} else if y > 1 {", "else {", "for i in range(3) {", "for i in range(y) {", "for i in x {",
    "}", "}}", "{", "return y", "return", "no_grad {", "f(a) = a * 2", "f(a, b) { t = a + b", "g(a) = g(a)",
    "f(a) { return a }", "override sigmoid(z) = z", "sigmoid(z) = z", "override mine(z) = z", "y = f(x)",
    "y = f(x, x)", "y = g(1)", "y = detach(x) * x", "y = sigmoid(y)", "i = i + 1", "y = y * 2", "x = x + 1",
    "if all(x > 0) {", "if any(x < 0) { y = 1 }", "y = log(0 - 1)", "if 0/0 { y = 1 }",
]

line_soup = st.lists(st.sampled_from(LINES), max_size=12).flatmap(
    lambda lines: st.sampled_from(["\n", "; ", " "]).map(lambda sep: sep.join(lines)))

soups = st.one_of(token_soup, line_soup)


@pytest.mark.slow
@fast(500)
@given(soups)
def test_parser_returns_a_tree_or_a_gradcalc_error(text: str) -> None:
    try:
        parse(text)
    except GradcalcError as error:
        assert error.message, repr(text)
        assert error.pos is None or (error.pos.line >= 1 and error.pos.column >= 1), (repr(text), error.pos)


CLI_LIMITS = ("--max-iterations", "1000", "--max-elements", "100000")


@fast(200)
@given(soups, st.booleans())
def test_cli_exits_0_or_2_without_traceback(text: str, json_mode: bool) -> None:
    args = ("eval", "-e", text, *CLI_LIMITS, *(("--json",) if json_mode else ()))
    result = run_cli(*args)
    shown = f"program: {text!r}\nexit {result.exit_code}\nstdout: {result.stdout[-1000:]}\n" \
            f"stderr: {result.stderr[-2000:]}"
    assert result.exit_code in (EXIT_OK, EXIT_BAD_INPUT), shown
    assert "Traceback" not in result.output, shown
    assert "internal error" not in result.output, shown
    if result.exit_code == EXIT_BAD_INPUT:
        assert result.stdout == "", shown
        if json_mode:
            assert set(strict_json(result.stderr)["error"]) >= {"type", "message", "line", "column"}, shown
        else:
            assert result.stderr.startswith("error:"), shown
    elif json_mode:
        assert isinstance(strict_json(result.stdout), dict), shown


# --- valid random programs and an independent interpreter of them -----------------------------------------------

class Skip(Exception):
    """The mirror interpreter met a value it will not compare (overflow, a non-finite number)."""


@dataclass
class Trace:
    """What one run of the mirror saw: every condition's outcome, the smallest margin of a data-dependent
    comparison, and how many loop iterations ran."""

    outcomes: list[bool] = field(default_factory=list)
    margin: float = math.inf
    iterations: int = 0


class Expr:
    def render(self) -> str:
        raise NotImplementedError

    def eval(self, env: dict[str, float], program: Program, trace: Trace) -> float:
        raise NotImplementedError


@dataclass
class Var(Expr):
    name: str

    def render(self) -> str:
        return self.name

    def eval(self, env: dict[str, float], program: Program, trace: Trace) -> float:
        return env[self.name]


@dataclass
class Const(Expr):
    value: float

    def render(self) -> str:
        return repr(self.value) if self.value >= 0 else f"({self.value!r})"

    def eval(self, env: dict[str, float], program: Program, trace: Trace) -> float:
        return self.value


@dataclass
class Bin(Expr):
    op: str
    left: Expr
    right: Expr

    def render(self) -> str:
        if self.op == "/":  # a denominator that stays in [0.5, 2.5]
            return f"({self.left.render()} / (1.5 + sin({self.right.render()})))"
        return f"({self.left.render()} {self.op} {self.right.render()})"

    def eval(self, env: dict[str, float], program: Program, trace: Trace) -> float:
        a = self.left.eval(env, program, trace)
        b = self.right.eval(env, program, trace)
        if self.op == "+":
            return a + b
        if self.op == "-":
            return a - b
        if self.op == "*":
            return a * b
        return a / (1.5 + math.sin(b))


FUNCTIONS = {
    "sin": math.sin,
    "cos": math.cos,
    "tanh": math.tanh,
    "sigmoid": lambda z: 1 / (1 + math.exp(-z)) if z >= 0 else math.exp(z) / (1 + math.exp(z)),
    "softplus": lambda z: max(z, 0.0) + math.log1p(math.exp(-abs(z))),
    "square": lambda z: z * z,
    "neg": lambda z: -z,
    "hypot1": lambda z: math.sqrt(1 + z * z),
}


@dataclass
class Fn(Expr):
    name: str
    arg: Expr

    def render(self) -> str:
        inner = self.arg.render()
        if self.name == "square":
            return f"({inner})^2"
        if self.name == "neg":
            return f"(-{inner})"
        if self.name == "hypot1":
            return f"sqrt(1 + ({inner})^2)"  # the argument once: it may call a function that runs a loop
        return f"{self.name}({inner})"

    def eval(self, env: dict[str, float], program: Program, trace: Trace) -> float:
        return FUNCTIONS[self.name](self.arg.eval(env, program, trace))


@dataclass
class Call(Expr):
    name: str
    args: list[Expr]

    def render(self) -> str:
        return f"{self.name}({', '.join(a.render() for a in self.args)})"

    def eval(self, env: dict[str, float], program: Program, trace: Trace) -> float:
        return program.call(self.name, [a.eval(env, program, trace) for a in self.args], trace)


class Cond:
    def render(self) -> str:
        raise NotImplementedError

    def test(self, env: dict[str, float], program: Program, trace: Trace) -> bool:
        raise NotImplementedError


@dataclass
class Cmp(Cond):
    left: Expr
    op: str
    right: float
    data: bool = True  # a comparison of computed values (a loop counter's is exact and does not count)

    def render(self) -> str:
        return f"{self.left.render()} {self.op} {self.right!r}"

    def test(self, env: dict[str, float], program: Program, trace: Trace) -> bool:
        a = self.left.eval(env, program, trace)
        if self.data:
            trace.margin = min(trace.margin, abs(a - self.right))
        return {"<": a < self.right, "<=": a <= self.right, ">": a > self.right, ">=": a >= self.right}[self.op]


@dataclass
class BoolOp(Cond):
    op: str
    left: Cond
    right: Cond

    def render(self) -> str:
        return f"({self.left.render()} {self.op} {self.right.render()})"

    def test(self, env: dict[str, float], program: Program, trace: Trace) -> bool:
        first = self.left.test(env, program, trace)
        if self.op == "and":
            return first and self.right.test(env, program, trace)
        return first or self.right.test(env, program, trace)


@dataclass
class Not(Cond):
    operand: Cond

    def render(self) -> str:
        return f"not ({self.operand.render()})"

    def test(self, env: dict[str, float], program: Program, trace: Trace) -> bool:
        return not self.operand.test(env, program, trace)


class Stmt:
    def lines(self, indent: str) -> list[str]:
        raise NotImplementedError

    def run(self, env: dict[str, float], program: Program, trace: Trace) -> float | None:
        """Execute; a number means a `return` unwinds the function."""
        raise NotImplementedError


def run_block(body: list[Stmt], env: dict[str, float], program: Program, trace: Trace) -> float | None:
    for stmt in body:
        returned = stmt.run(env, program, trace)
        if returned is not None:
            return returned
    return None


def block_lines(body: list[Stmt], indent: str) -> list[str]:
    return [line for stmt in body for line in stmt.lines(indent + "    ")]


@dataclass
class Assign(Stmt):
    name: str
    op: str  # = += -= *=
    value: Expr

    def lines(self, indent: str) -> list[str]:
        return [f"{indent}{self.name} {self.op} {self.value.render()}"]

    def run(self, env: dict[str, float], program: Program, trace: Trace) -> float | None:
        value = self.value.eval(env, program, trace)
        old = env.get(self.name, 0.0)
        env[self.name] = {"=": value, "+=": old + value, "-=": old - value, "*=": old * value}[self.op]
        if not math.isfinite(env[self.name]) or abs(env[self.name]) > 1e8:
            raise Skip
        return None


@dataclass
class If(Stmt):
    branches: list[tuple[Cond, list[Stmt]]]
    orelse: list[Stmt] | None
    newline_before_else: bool = False

    def lines(self, indent: str) -> list[str]:
        out: list[str] = []
        for k, (cond, body) in enumerate(self.branches):
            head = f"if {cond.render()} {{"
            if k == 0:
                out.append(indent + head)
            elif self.newline_before_else:
                out += [indent + "}", f"{indent}else {head}"]
            else:
                out.append(f"{indent}}} else {head}")
            out += block_lines(body, indent)
        if self.orelse is not None:
            out += [indent + "}", indent + "else {"] if self.newline_before_else else [indent + "} else {"]
            out += block_lines(self.orelse, indent)
        out.append(indent + "}")
        return out

    def run(self, env: dict[str, float], program: Program, trace: Trace) -> float | None:
        for cond, body in self.branches:
            taken = cond.test(env, program, trace)
            trace.outcomes.append(taken)
            if taken:
                return run_block(body, env, program, trace)
        return run_block(self.orelse, env, program, trace) if self.orelse is not None else None


@dataclass
class For(Stmt):
    var: str
    bounds: tuple[int, ...]
    body: list[Stmt]

    def lines(self, indent: str) -> list[str]:
        return [f"{indent}for {self.var} in range({', '.join(map(str, self.bounds))}) {{",
                *block_lines(self.body, indent), indent + "}"]

    def run(self, env: dict[str, float], program: Program, trace: Trace) -> float | None:
        for i in range(*self.bounds):
            trace.iterations += 1
            env[self.var] = float(i)
            returned = run_block(self.body, env, program, trace)
            if returned is not None:
                return returned
        return None


@dataclass
class While(Stmt):
    counter: str
    most: int
    cond: Cond | None
    body: list[Stmt]

    def lines(self, indent: str) -> list[str]:
        cond = f"{self.counter} < {self.most}" + (f" and {self.cond.render()}" if self.cond else "")
        return [f"{indent}{self.counter} = 0", f"{indent}while {cond} {{", *block_lines(self.body, indent),
                f"{indent}    {self.counter} = {self.counter} + 1", indent + "}"]

    def run(self, env: dict[str, float], program: Program, trace: Trace) -> float | None:
        env[self.counter] = 0.0
        while True:
            going = env[self.counter] < self.most and (self.cond is None or self.cond.test(env, program, trace))
            trace.outcomes.append(going)
            if not going:
                return None
            trace.iterations += 1
            returned = run_block(self.body, env, program, trace)
            if returned is not None:
                return returned
            env[self.counter] += 1


@dataclass
class Return(Stmt):
    value: Expr

    def lines(self, indent: str) -> list[str]:
        return [f"{indent}return {self.value.render()}"]

    def run(self, env: dict[str, float], program: Program, trace: Trace) -> float | None:
        return self.value.eval(env, program, trace)


@dataclass
class Function:
    name: str
    params: list[str]
    body: list[Stmt]  # a math-style function is one Return
    math_style: bool

    def lines(self) -> list[str]:
        head = f"{self.name}({', '.join(self.params)})"
        if self.math_style:
            assert isinstance(self.body[0], Return)
            return [f"{head} = {self.body[0].value.render()}"]
        return [f"{head} {{", *block_lines(self.body, ""), "}"]


@dataclass
class Program:
    functions: list[Function]
    body: list[Stmt]
    output: Expr

    def text(self) -> str:
        lines = [line for f in self.functions for line in f.lines()]
        lines += [line for stmt in self.body for line in stmt.lines("")]
        lines.append(f"out = {self.output.render()}")
        return "\n".join(lines) + "\n"

    def call(self, name: str, args: list[float], trace: Trace) -> float:
        function = next(f for f in self.functions if f.name == name)
        returned = run_block(function.body, dict(zip(function.params, args)), self, trace)
        assert returned is not None, "every generated function ends in a return"
        return returned

    def evaluate(self, x1: float, x2: float) -> tuple[float, Trace]:
        trace = Trace()
        env = {"x1": x1, "x2": x2}
        run_block(self.body, env, self, trace)
        value = self.output.eval(env, self, trace)
        if not math.isfinite(value) or abs(value) > 1e8:
            raise Skip
        return value, trace


# --- the generator -------------------------------------------------------------------------------------------------

@dataclass
class Scope:
    """Names an expression may read, names a statement may reassign, and fresh-name counters."""

    readable: list[str]
    writable: list[str]
    functions: list[Function]
    counter: list[int]  # shared, so every loop variable and counter name is unique in the program

    def fresh(self, prefix: str) -> str:
        self.counter[0] += 1
        return f"{prefix}{self.counter[0]}"

    def inner(self, extra: list[str]) -> Scope:
        return Scope(self.readable + extra, list(self.writable), self.functions, self.counter)


CONSTANTS = [0.5, 1.5, 2.0, 0.25, -0.75, 3.0]


@st.composite
def expressions(draw: Any, scope: Scope, depth: int = 2) -> Expr:
    kinds = ["var", "var", "const"] + (["bin", "bin", "fn", "fn", "call"] if depth > 0 else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "var":
        return Var(draw(st.sampled_from(scope.readable)))
    if kind == "const":
        return Const(draw(st.sampled_from(CONSTANTS)))
    if kind == "bin":
        op = draw(st.sampled_from(["+", "-", "*", "/"]))
        return Bin(op, draw(expressions(scope, depth - 1)), draw(expressions(scope, depth - 1)))
    if kind == "call" and scope.functions:
        function = draw(st.sampled_from(scope.functions))
        return Call(function.name, [draw(expressions(scope, depth - 1)) for _ in function.params])
    return Fn(draw(st.sampled_from(sorted(FUNCTIONS))), draw(expressions(scope, depth - 1)))


@st.composite
def conditions(draw: Any, scope: Scope, depth: int = 1) -> Cond:
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp"] + (["and", "or", "not"] if depth > 0 else [])))
    if kind == "cmp":
        # a computed value, never a bare loop variable or counter: those are exact numbers
        left = draw(expressions(scope, 2).filter(lambda e: not isinstance(e, Const)))
        return Cmp(left, draw(st.sampled_from(["<", ">", "<=", ">="])), draw(st.sampled_from([-0.5, 0.0, 0.3, 1.0])))
    if kind == "not":
        return Not(draw(conditions(scope, depth - 1)))
    return BoolOp(kind, draw(conditions(scope, depth - 1)), draw(conditions(scope, depth - 1)))


@st.composite
def statements(draw: Any, scope: Scope, depth: int, top: bool) -> list[Stmt]:
    """A block. New names are made only at the top of a scope, so every name read is assigned on every path."""
    body: list[Stmt] = []
    for _ in range(draw(st.integers(1, 3))):
        kinds = ["assign", "assign"] + (["if", "for", "while"] if depth > 0 else [])
        kind = draw(st.sampled_from(kinds))
        if kind == "assign" or not scope.writable:
            fresh = top and (not scope.writable or draw(st.booleans()))
            name = scope.fresh("v") if fresh else draw(st.sampled_from(scope.writable))
            op = "=" if fresh else draw(st.sampled_from(["=", "=", "+=", "-=", "*="]))
            value = draw(expressions(scope))
            if op == "*=":  # keep products bounded
                value = Fn("tanh", value)
            body.append(Assign(name, op, value))
            if fresh:
                scope.readable.append(name)
                scope.writable.append(name)
        elif kind == "if":
            branches = [(draw(conditions(scope)), draw(statements(scope.inner([]), depth - 1, False)))
                        for _ in range(draw(st.integers(1, 3)))]
            orelse = draw(st.one_of(st.none(), statements(scope.inner([]), depth - 1, False)))
            body.append(If(branches, orelse, draw(st.booleans())))
        elif kind == "for":
            var = scope.fresh("i")
            bounds = draw(st.sampled_from([(0,), (1,), (3,), (1, 4), (4, 0, -2), (0, 5, 2)]))
            body.append(For(var, bounds, draw(statements(scope.inner([var]), depth - 1, False))))
        else:
            counter = scope.fresh("k")
            cond = draw(st.one_of(st.none(), conditions(scope)))
            body.append(While(counter, draw(st.integers(1, 3)), cond,
                              draw(statements(scope.inner([counter]), depth - 1, False))))
    return body


@st.composite
def functions(draw: Any) -> list[Function]:
    made: list[Function] = []
    for k in range(draw(st.integers(0, 2))):
        params = ["p", "q", "r"][: draw(st.integers(1, 3))]
        scope = Scope(list(params), [], list(made), [100 * (k + 1)])  # may call the functions made before it
        if draw(st.booleans()):
            made.append(Function(f"fn{k}", params, [Return(draw(expressions(scope)))], True))
            continue
        local = Scope(list(params), list(params), list(made), scope.counter)
        body = [Assign(local.fresh("t"), "=", draw(expressions(local)))]
        local.readable.append(body[0].name)  # type: ignore[attr-defined]
        local.writable.append(body[0].name)  # type: ignore[attr-defined]
        body += draw(statements(local, 1, True))
        if draw(st.booleans()):  # an early return inside an if
            body.append(If([(draw(conditions(local)), [Return(draw(expressions(local)))])], None))
        body.append(Return(draw(expressions(local))))
        made.append(Function(f"fn{k}", params, body, False))
    return made


@st.composite
def programs(draw: Any) -> Program:
    made = draw(functions())
    scope = Scope(["x1", "x2"], [], made, [0])
    body = draw(statements(scope, 2, True))
    terms: list[Expr] = [Bin("*", Var("x1"), Var("x2"))]
    terms += [Bin("*", Const(draw(st.sampled_from([0.5, 1.0, -1.5]))), Var(name)) for name in scope.writable]
    output = terms[0]
    for term in terms[1:]:
        output = Bin("+", output, term)
    return Program(made, body, output)


points = st.floats(min_value=-2.0, max_value=2.0, allow_nan=False).map(lambda v: round(v, 3))
H = 1e-6


@pytest.mark.slow
@fast(120)
@given(programs(), points, points)
def test_random_programs_match_an_independent_interpreter_and_finite_differences(
        program: Program, x1: float, x2: float) -> None:
    text = program.text()
    try:
        value, trace = program.evaluate(x1, x2)
        sides = {(dx, dy): program.evaluate(x1 + dx, x2 + dy)
                 for dx, dy in [(H, 0), (-H, 0), (0, H), (0, -H)]}
    except (Skip, OverflowError):
        assume(False)
        return
    # the same branches and trip counts on every side of the step, and no comparison within rounding of a switch
    assume(trace.margin > 1e-7)
    assume(all(side.outcomes == trace.outcomes for _, side in sides.values()))
    expected = np.array([(sides[(H, 0)][0] - sides[(-H, 0)][0]) / (2 * H),
                         (sides[(0, H)][0] - sides[(0, -H)][0]) / (2 * H)])

    try:
        run = gradcalc.parse_program(text).run({"x1": x1, "x2": x2})
        result = run.grad(of="out", wrt=["x1", "x2"])
    except GradcalcError as error:
        raise AssertionError(f"a valid program was refused: {error.kind}: {error.message} "
                             f"at {error.pos}\n{text}") from None
    where = f"\nprogram:\n{text}at x1={x1}, x2={x2}"
    assert math.isclose(float(result.value), value, rel_tol=1e-9, abs_tol=1e-9), f"{result.value} != {value}{where}"
    assert sum(loop.iterations for loop in run.loops) == trace.iterations, f"{run.loops} != {trace.iterations}{where}"
    got = np.array([float(result.grads["x1"]), float(result.grads["x2"])])
    scale = max(1.0, float(np.max(np.abs(expected))), abs(value))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6 * scale, err_msg=where)
