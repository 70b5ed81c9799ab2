"""Resolving: a claim as written, finished against the names of the program it is about.

What a claim's notation means can depend on the program: x(1 + x) is a product where x is a
variable and a call where x is a function, ab is a·b where the program has a and b but no ab,
w_1 is w1 where it has w1. `finish` reads a claim so, before it is judged, and makes a new
claim: the one given is left as it was parsed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Set
from operator import is_
from typing import TYPE_CHECKING, Any

from ...errors import GradcalcError, GradcalcSyntaxError, Pos
from ...language import syntax as S
from ..builtins import BUILTINS, CONSTANTS
from .reading import PRIME

if TYPE_CHECKING:
    from ..checker import Function
    from ..interpreter import Interpreter


def finish(claim: S.Claim, variables: Mapping[str, Any], functions: Set[str], text: str,
           interpreter: Interpreter | None = None) -> S.Claim:
    """The claim as the program reads it (`variables`: its variables; `functions`: builtins and its own;
    `text`: what the claim was written in; `interpreter`: the program's, which runs its functions for their
    primes, f'(x)). GradcalcSyntaxError where the notation is ambiguous there."""
    return S.Claim(unsubscripted(claim.of, variables), _unsubscripted(claim.wrt, variables),
                   _juxtaposed_calls(claim.claimed, variables, functions, text, interpreter), claim.pos, claim.text,
                   _unsubscripted(claim.wrt2, variables))


def unsubscripted(name: str, variables: Mapping[str, Any]) -> str:
    """w_1 as w1 where the program has w1 and no w_1: a subscript as it is typed."""
    if name in variables or name.replace("_", "") not in variables:
        return name
    return name.replace("_", "")


def _unsubscripted(name: str | None, variables: Mapping[str, Any]) -> str | None:
    return None if name is None else unsubscripted(name, variables)


# Tuples for the tests every node meets: `A | B` makes a new union object each time it is evaluated.
_PARTS = (S.Expr, S.Keyword)  # what a node's slots hold that fix reads
_NAME_OR_CALL = (S.Name, S.Call)
_OUTER = ("⊗", "\\otimes")  # the outer product's signs: the parser reads ⊗ as ⊙ (reading.signs), and this tells it
_CHAINED = ("+", "-", "*", "@")  # the operators fix reads nothing of in a long chain: it walks it as a loop
_GROUPED = (S.Binary, S.Unary, S.Compare)  # what one expression in square brackets groups: not a vector


def _juxtaposed_calls(expr: S.Expr, variables: Mapping[str, Any], functions: Set[str], text: str,
                      interpreter: Interpreter | None) -> S.Expr:
    """A variable before a bracket in a claim is a product, as answers write it: x(1 + x) is x·(1 + x),
    e^x(1 + x) is e^x·(1 + x), and 1/x(1 + x) is ambiguous. Calls of functions stay calls. A name
    the program does not have is its name without underscores (w_1 for w1) if it has that, or else,
    if it is its variables side by side in one way only (ab), their product; a power written right
    after it is the last factor's (xy² is x·y², as printed), and so is a call (xsin(x) is x·sin(x)).
    The expression given is not changed: a node whose parts change is made anew."""
    def product(call: S.Call) -> tuple[S.Expr, S.Expr] | None:
        if call.keywords or len(call.args) != 1:
            return None
        if call.name in variables:
            return S.Name(call.name, call.pos), fix(call.args[0])
        names = None if call.name in functions else _split_name(call.name, variables)
        if names is not None:  # xy(x + y)
            return _product(names, call.pos), fix(call.args[0])
        return None

    def factors(node: S.Expr) -> list[S.Expr] | None:
        """The factors of a name or a call that is variables side by side (xy, xy(1 + x), xsin(x)), or None."""
        if isinstance(node, S.Name) and unsubscripted(node.name, variables) not in variables:
            names = _split_name(node.name, variables)
            return [S.Name(name, node.pos) for name in names] if names else None
        if isinstance(node, S.Call) and (node.name in variables or node.name not in functions):
            # x(1 + x) (a variable σ too, though σ is also the sigmoid); then xsin(x), a function's call after
            # variables; then xy(x + y), variables alone
            split = None if node.name in variables else _split_call(node.name, variables, functions)
            if split is not None:
                names, function = split
                return [*(S.Name(name, node.pos) for name in names),
                        S.Call(function, [fix(a) for a in node.args], [fix(k) for k in node.keywords], node.pos)]
            if (parts := product(node)) is not None:
                return [parts[0], parts[1]]
        return None

    lines = text.splitlines()

    def line_from(at: Pos, shift: int = 0) -> str:
        """The line's text from the place's column (moved by shift), as written."""
        line = lines[at.line - 1] if 0 < at.line <= len(lines) else ""
        return line[at.column - 1 + shift:] if at.column - 1 + shift >= 0 else ""

    def written_at(at: Pos, signs: tuple[str, ...]) -> bool:
        """Whether one of the signs is written at the place (no copy of the line: a claim has many)."""
        return 0 < at.line <= len(lines) and lines[at.line - 1].startswith(signs, at.column - 1)

    outer_written = any(sign in text for sign in _OUTER)

    def spaced(call: S.Call) -> bool:
        """Whether a call's argument follows its name after a space (σ x, read as a function's), not a bracket."""
        return line_from(_start(call.args[0]), -1).startswith(" ")

    def bare_denominator(division: S.Binary) -> bool:
        """Whether a division was written a/b, its denominator without brackets (not \\frac, not /(...))."""
        after = line_from(division.pos)
        return after.startswith("/") and not after[1:].lstrip().startswith("(")

    def grouped(operation: S.Binary) -> bool:
        """Whether the right operand of a / or ^ was written in brackets (/(x(1 + x)), ^{...}, \\frac{}{})."""
        after = line_from(operation.pos)
        if after.startswith(("\\frac", "\\dfrac", "\\tfrac")):
            return True
        operator = re.match(r"\*\*|[/÷^]", after)
        return operator is not None and after[operator.end():].lstrip()[:1] in ("(", "{", "[")

    def chained(node: Any) -> bool:
        """Whether node is a link of a left-leaning chain (+ - * @) that fix only walks into, whatever its left side."""
        return isinstance(node, S.Binary) and node.op in _CHAINED and not (node.op == "*" and (
            (outer_written and written_at(node.pos, _OUTER)) or _scientific(node) is not None))

    def fix(node: Any) -> Any:
        if isinstance(node, S.Call) and node.name.endswith(PRIME):  # σ'(z): the function's derivative there
            return _derivative_at(node, [fix(a) for a in node.args], variables, functions, interpreter)
        if outer_written and isinstance(node, S.Binary) and node.op == "*" and written_at(node.pos, _OUTER):
            return S.Call("outer", [fix(node.left), fix(node.right)], [], node.pos)  # a ⊗ b: the outer product
        if isinstance(node, S.Call) and node.name == "sqrt" and len(node.args) == 1 and line_from(node.pos)[:1] == "√":
            inner = node.args[0]  # √x(1 + y²): readers split on it, as on 1/2x
            if isinstance(inner, S.Call) and inner.name in variables and len(inner.args) == 1:
                raise GradcalcSyntaxError(
                    f"'√{inner.name}(...)' is ambiguous: is the bracket under the root or not?",
                    f"write √({inner.name}*(...)) if it is, or √{inner.name} (...) (a space) if it is not", node.pos)
        if isinstance(node, S.Binary) and node.op == "/" and bare_denominator(node):  # -(x - μ)/σ^2 f: ends at f
            power, denominator = None, node.right
            if isinstance(denominator, S.Binary) and denominator.op == "^" and isinstance(denominator.left, S.Call) \
                    and _before(denominator, denominator.left):
                power, denominator = denominator, denominator.left
            if isinstance(denominator, S.Call) and denominator.name in variables and len(denominator.args) == 1 \
                    and spaced(denominator):
                base: S.Expr = S.Name(denominator.name, denominator.pos)
                if power is not None:
                    base = S.Binary("^", base, fix(power.right), power.pos)
                return S.Binary(S.JUXTAPOSED, S.Binary("/", fix(node.left), base, node.pos),
                                fix(denominator.args[0]), node.pos)
        if chained(node) and chained(node.left):
            spine = []  # a long sum or product, a + b - c + ..., x*x*...*x: down its left side without recursion
            while chained(node) and chained(node.left):
                spine.append(node)
                node = node.left
            below = fix(node)
            for link in reversed(spine):
                right = fix(link.right)
                below = link if below is link.left and right is link.right else \
                    S.Binary(link.op, below, right, link.pos)
            return below
        if (number := _scientific(node)) is not None:
            return number
        if isinstance(node, S.Tensor) and len(node.items) == 1 and not isinstance(node.items[0], S.Tensor):
            inner = fix(node.items[0])  # [(x - 3)(2x) - (x^2 + 1)]/(x - 3)^2, /[p(1 - p)], 1[z > 0]: brackets
            if isinstance(inner, _GROUPED):  # that group an operation, not a vector of one entry
                return inner
            return node if inner is node.items[0] else S.Tensor([inner], node.pos)
        if isinstance(node, S.Tensor):  # a literal's rows are rows: [[x + 1], [y]] stays a column
            return S.Tensor([S.Tensor([fix(i) for i in row.items], row.pos) if isinstance(row, S.Tensor)
                             else fix(row) for row in node.items], node.pos)
        if isinstance(node, S.Binary) and node.op == S.JUXTAPOSED:  # 3f (x): the program's function f, called
            last = node.left
            while isinstance(last, S.Binary) and last.op == S.JUXTAPOSED:
                last = last.right
            if isinstance(last, S.Name) and last.name in functions and last.name not in variables:
                call = S.Call(last.name, [node.right], [], last.pos)
                return fix(_with_last_factor(node.left, call))
        if isinstance(node, S.Binary) and node.op == "^" and "T" not in variables:  # Xᵀ written X^T
            if isinstance(node.right, S.Name) and node.right.name == "T":
                return S.Attribute(fix(node.left), "T", node.right.pos)
            exponent = node.right
            if isinstance(exponent, S.Call) and exponent.name == "T" and len(exponent.args) == 1 \
                    and not exponent.keywords:
                return S.Binary(S.JUXTAPOSED, S.Attribute(fix(node.left), "T", exponent.pos), fix(exponent.args[0]),
                                exponent.pos)  # W^T (δ): the bracket after T is a factor
        powered = node.left if isinstance(node, S.Binary) and node.op == "^" else None
        if isinstance(powered, S.Call) and powered.name in variables and len(powered.args) == 1 \
                and _before(node, powered):
            # σ^2 x, σ² x: read as a function's power (sin² x), but σ is the program's variable: σ²·x
            return S.Binary(S.JUXTAPOSED, S.Binary("^", S.Name(powered.name, powered.pos), fix(node.right), node.pos),
                            fix(powered.args[0]), node.pos)
        if isinstance(node, S.Binary) and node.op == "^" and (parts := factors(node.left)) is not None:
            name = node.left
            written_after = isinstance(name, S.Call) or (
                name.pos.line == node.pos.line and name.pos.column + name.pos.width == node.pos.column)
            if written_after:  # xy^2, xy²: y's power; (xy)^2 is the whole product's
                parts[-1] = S.Binary("^", parts[-1], fix(node.right), node.pos)
                return _product(parts, node.pos)
            return S.Binary("^", _product(parts, node.pos), fix(node.right), node.pos)
        if isinstance(node, S.Name) and unsubscripted(node.name, variables) != node.name:
            return S.Name(unsubscripted(node.name, variables), node.pos)
        if isinstance(node, _NAME_OR_CALL) and (parts := factors(node)) is not None:
            return _product(parts, node.pos)  # ab is a·b where a and b are variables and ab is not; x(1 + x)
        if isinstance(node, S.Binary) and node.op in ("^", "/"):
            right = node.right
            negated = isinstance(right, S.Unary) and right.op == "-"  # e^-x(1 + x)
            called = right.operand if isinstance(right, S.Unary) and negated else right
            if isinstance(called, S.Call) and called.name in variables and not grouped(node) \
                    and (split := product(called)) is not None:
                variable, factor = split
                exponent = S.Unary("-", variable, right.pos) if negated else variable
                if node.op == "/":
                    raise GradcalcSyntaxError(
                        f"'/{called.name}(...)' is ambiguous: is the bracket in the denominator or not?",
                        f"write /({called.name}*(...)) if it is, or /{called.name}*(...) if it is not", called.pos)
                return S.Binary(S.JUXTAPOSED, S.Binary("^", fix(node.left), exponent, node.pos), factor, node.pos)
        return _with_parts_fixed(node, fix)

    finished: S.Expr = fix(expr)
    return finished




def _derivative_at(call: S.Call, args: list[S.Expr], variables: Mapping[str, Any], functions: Set[str],
                   interpreter: Interpreter | None) -> S.Expr:
    """σ'(z), tanh'(z), relu'(z), f'(x): the derivative of a function of one argument, a builtin or the
    program's, as the engine's own rules give it (read back by the symbolic module, as `gradcalc diff` prints
    it), at the argument written."""
    name = call.name[:-len(PRIME)]
    written = f"{name}'(...)"
    if name in variables or name not in functions:
        raise GradcalcSyntaxError(f"'{written}': '{name}' is not a function, so it has no derivative to take",
                                  f"write the derivative as d{name}/dx = ... (what it is of and by)", call.pos)
    if len(args) != 1 or call.keywords:
        raise GradcalcSyntaxError(f"'{written}' takes one argument: a function of one variable's derivative",
                                  f"write {name}'(z)", call.pos)
    own = interpreter.functions.get(name) if interpreter is not None else None
    if own is not None and interpreter is not None:
        parameter, derivative = _own_derivative(own, variables, interpreter, call)
        return _substituted(derivative, args[0], call.pos, parameter)
    if name not in BUILTINS:
        raise GradcalcSyntaxError(f"'{written}': the derivative of the program's own function '{name}' is not read "
                                  "here", f"write it out: the derivative of {name}'s body", call.pos)
    body = _derivative_of(name)
    if body is None:
        raise GradcalcSyntaxError(f"'{written}': {name} is not a function of one number, with a derivative",
                                  "write the derivative out", call.pos)
    return _substituted(body, args[0], call.pos)


_PARAMETER = "t"  # the parameter of a builtin's derivative, as the symbolic module prints it


@functools.cache
def _derivative_of(name: str) -> S.Expr | None:
    """A builtin's derivative as an expression in _PARAMETER: the engine's rule, read back as algebra."""
    from ...engine import autodiff, graph, symbolic
    from ...engine import backend as B
    from ...language import parser

    builtin = BUILTINS[name]
    if builtin.needs_context or not builtin.required <= 1 <= len(builtin.params):  # randn, load, where: not f(x)
        return None
    try:
        with graph.recording_as(True, history=True), B.errstate():
            t = graph.leaf(B.scalar(0.5), _PARAMETER)
            value = builtin.fn(t)
            if not isinstance(value, graph.Node) or value.shape != () or not value.requires_grad:
                return None
            gradient = autodiff.backward(value, graph.constant(B.scalar(1.0)), [t], create_graph=True).get(t)
            if not isinstance(gradient, graph.Node):
                return None
            found = symbolic.describe(name, (_PARAMETER,), gradient, {t: _PARAMETER}, {_PARAMETER})
    except (GradcalcError, TypeError, ValueError):  # a builtin that does not take one scalar
        return None
    if found.where:
        return None
    return parser.parse_expression(found.text)


def _own_derivative(function: Function, variables: Mapping[str, Any], interpreter: Interpreter, call: S.Call
                    ) -> tuple[str, S.Expr]:
    """The derivative of the program's function of one parameter, f(t) = ..., as a parameter's name (one the
    program does not use) and an expression in it and the program's variables: its body run on a leaf and
    differentiated by the engine, read back."""
    from ...engine import autodiff, graph, symbolic
    from ...engine import backend as B
    from ...language import parser

    written = f"{function.name}'(...)"
    if len(function.params) != 1 or len(function.body) != 1 or not isinstance(function.body[0], S.Return):
        # a body of statements may branch on its argument: its derivative here would be one branch's only
        raise GradcalcSyntaxError(f"'{written}': a prime is read for a function of one parameter written as one "
                                  f"expression, {function.name}(t) = ...", "write the derivative out", call.pos)
    parameter = _PARAMETER
    while parameter in variables:
        parameter += "_"
    try:
        with graph.recording_as(True, history=True), B.errstate():
            t = graph.leaf(B.scalar(0.5), parameter)
            value = interpreter.evaluate(S.Call(function.name, [S.Name(parameter, call.pos)], [], call.pos),
                                         {**variables, parameter: t})
            gradient = autodiff.backward(value, graph.constant(B.scalar(1.0)), [t], create_graph=True).get(t) \
                if value.shape == () and value.requires_grad else None
            if not isinstance(gradient, graph.Node):  # constant in its argument, or not a number's function
                gradient = graph.constant(B.scalar(0.0))
            symbols = {node: name for name, node in variables.items()}
            symbols[t] = parameter
            found = symbolic.describe(function.name, (parameter,), gradient, symbols, {*variables, parameter})
    except GradcalcError as exc:
        raise GradcalcSyntaxError(f"'{written}': {function.name} could not be differentiated ({exc.message})",
                                  "write the derivative out", call.pos) from None
    if found.where or not found.evaluable:
        raise GradcalcSyntaxError(f"'{written}': {function.name}'s derivative is too long to read here",
                                  "write the derivative out", call.pos)
    return parameter, parser.parse_expression(found.text)


def _substituted(body: Any, argument: S.Expr, pos: Pos, parameter: str = _PARAMETER) -> Any:
    """The derivative's expression at the argument: each parameter replaced by it, every node placed at pos."""
    if isinstance(body, S.Name) and body.name == parameter:
        return argument
    copy = object.__new__(type(body))
    for slot in body.__slots__:
        value = getattr(body, slot)
        if isinstance(value, _PARTS):
            value = _substituted(value, argument, pos, parameter)
        elif type(value) is list:
            value = [_substituted(v, argument, pos, parameter) if isinstance(v, _PARTS) else v for v in value]
        setattr(copy, slot, pos if slot == "at" else value)
    return copy


def _with_parts_fixed(node: Any, fix: Any) -> Any:
    """The node with fix applied to each of its parts: itself where none changes, else a new node."""
    copy = None
    for slot in node.__slots__:
        value = getattr(node, slot)
        if isinstance(value, _PARTS):
            new = fix(value)
        elif type(value) is list:
            new = [fix(v) if isinstance(v, _PARTS) else v for v in value]
            if all(map(is_, new, value)):
                continue
        else:
            continue
        if new is not value:
            if copy is None:
                copy = object.__new__(type(node))
                for name in node.__slots__:
                    setattr(copy, name, getattr(node, name))
            setattr(copy, slot, new)
    return node if copy is None else copy


def _with_last_factor(product: S.Expr, factor: S.Expr) -> S.Expr:
    """A product written side by side (a b c) with its last factor replaced: a new product, the old one kept."""
    if isinstance(product, S.Binary) and product.op == S.JUXTAPOSED:
        return S.Binary(S.JUXTAPOSED, product.left, _with_last_factor(product.right, factor), product.pos)
    return factor


def _scientific(node: Any) -> S.Number | S.Unary | None:
    """8.07×10², 8.07 \\times 10^{-3}, -2.22×10⁻²: a number in scientific notation, with the digits written
    (as 8.07e2, -2.22e-2)."""
    if not (isinstance(node, S.Binary) and node.op == "*"):
        return None
    mantissa = node.left
    negative = isinstance(mantissa, S.Unary) and mantissa.op == "-"  # -1.53×10⁻¹ is -(1.53×10⁻¹)
    if isinstance(mantissa, S.Unary) and negative:
        mantissa = mantissa.operand
    if not (isinstance(mantissa, S.Number) and "e" not in mantissa.text.lower()):
        return None
    power = node.right
    if not (isinstance(power, S.Binary) and power.op == "^" and isinstance(power.left, S.Number)
            and power.left.text == "10"):
        return None
    exponent, sign = power.right, ""
    if isinstance(exponent, S.Unary):
        sign, exponent = exponent.op, exponent.operand
    if not (isinstance(exponent, S.Number) and exponent.text.isdigit()):
        return None
    text = f"{mantissa.text}e{sign}{exponent.text}"
    number = S.Number(float(text), text, mantissa.pos)
    return S.Unary("-", number, node.left.pos) if negative else number


def _start(expr: S.Expr) -> Pos:
    """Where an expression's text starts (a Binary's own place is its operator's)."""
    while True:
        if isinstance(expr, S.Binary | S.BoolOp):
            expr = expr.left
        elif isinstance(expr, S.Compare):
            expr = expr.operands[0]
        elif isinstance(expr, S.Index | S.Attribute):
            expr = expr.target
        else:
            return expr.pos


def _before(power: S.Binary, call: S.Call) -> bool:
    """Whether the power was written before the call's argument (sin² x), not after its bracket (x(1 + x)²)."""
    argument = _start(call.args[0])
    return (power.pos.line, power.pos.column) < (argument.line, argument.column)


def _product(factors: list[Any], pos: Pos) -> S.Expr:
    """The product of factors (names as strings, or expressions), left to right."""
    terms = [S.Name(f, pos) if isinstance(f, str) else f for f in factors]
    total = terms[0]
    for term in terms[1:]:
        total = S.Binary(S.JUXTAPOSED, total, term, pos)
    return total


def _split_call(name: str, variables: Mapping[str, Any], functions: Set[str]) -> tuple[list[str], str] | None:
    """xsin as (['x'], 'sin'): variables side by side, then a function (a builtin or the program's), one way only."""
    ways = []
    for function in functions:
        head = name[:-len(function)]
        if name.endswith(function) and head:
            names = [head] if head in variables else _split_name(head, variables)
            if names is not None:
                ways.append((names, function))
    return ways[0] if len(ways) == 1 else None


def _split_name(name: str, variables: Mapping[str, Any]) -> list[str] | None:
    """The one way to write `name` as two or more of the variables (or π, e) side by side, or None."""
    known = [v for v in [*variables, *CONSTANTS] if v]
    ways: list[list[list[str]]] = [[] for _ in range(len(name))] + [[[]]]  # the splits of name[i:], at most 2
    for i in range(len(name) - 1, -1, -1):
        for word in known:
            if name.startswith(word, i):
                ways[i] += [[word, *rest] for rest in ways[i + len(word)]][:2 - len(ways[i])]
    return ways[0][0] if len(ways[0]) == 1 and len(ways[0][0]) > 1 else None
