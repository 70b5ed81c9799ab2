"""A derivative step by step, one named rule at a time, as a course writes it (diff --steps).

The program's statements are read as expressions (symbolic.read). A derivation starts from an
unevaluated derivative, `diff(u, x)` (printed d/dx[u] for people), and each step applies one rule
to every unevaluated derivative in the line: the sum rule to d/dx[f + g], the product rule to
d/dx[f*g], a function's derivative times the chain rule's d/dx[inner] to d/dx[sin(u)]. Every line
is built through the same simplifying constructors as `diff`, so each equals the one before. A
function's derivative is its primitive's own rule (primitives.py), read back as an expression.

With several statements on the way from the output to the variable, each statement is
differentiated with respect to its inputs (partial derivatives: its other inputs held fixed),
then the chain rule joins them, over the paths `explain` lists, and the last line is `diff`'s.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from ..errors import LimitExceeded, UsageError
from . import autodiff, graph, symbolic
from . import backend as B
from .graph import Node
from .primitives import BROADCASTING, ELEMENTWISE, PRIMITIVES, REDUCTION
from .symbolic import Add, Algebra, Call, Expr, LatexPrinter, Mul, Num, Pow, Printer, Sym

# The rule vocabulary, by name: what each step's "rule" says (a function's derivative is
# "derivative of sin", the chain rule names its inner function). Checkers of students' working
# import this table to name the rule a line misapplied.
RULES: dict[str, str] = {
    "constant rule": "d/dx[c] = 0 for c that does not depend on x",
    "variable rule": "d/dx[x] = 1",
    "sum rule": "d/dx[f + g] = d/dx[f] + d/dx[g]",
    "difference rule": "d/dx[f - g] = d/dx[f] - d/dx[g]",
    "constant multiple rule": "d/dx[c*f] = c*d/dx[f]",
    "power rule": "d/dx[u^n] = n*u^(n - 1)*d/dx[u]",
    "exponential rule": "d/dx[a^u] = a^u*log(a)*d/dx[u]",
    "logarithmic differentiation": "d/dx[u^v] = u^v*(d/dx[v]*log(u) + v*d/dx[u]/u)",
    "product rule": "d/dx[f*g] = d/dx[f]*g + f*d/dx[g]",
    "quotient rule": "d/dx[f/g] = (d/dx[f]*g - f*d/dx[g])/g^2",
    "chain rule": "d/dx[f(u)] = f'(u)*d/dx[u] (inner u named); for statements, the sum over paths",
    "derivative of": "a builtin's own derivative (derivative of sin: cos), from its rule in primitives.py",
    "matrix product rule": "d/dx[A @ B] = d/dx[A] @ B + A @ d/dx[B]",
    "sum over an axis": "d/dx[sum(u)] = sum(d/dx[u]), along the same axes",
    "mean": "d/dx[mean(u)] = mean(d/dx[u]), along the same axes",
    "softmax": "d/dx[s] = s*(d/dx[u] - sum(s*d/dx[u], axis, keepdims=1)) for s = softmax(u)",
    "Jacobi's formula": "d/dx[det(A)] = det(A)*trace(inv(A) @ d/dx[A])",
    "linearity": "a linear operation (reshape, transpose, indexing) applied to the derivative",
    "piecewise constant": "a comparison, sign, floor, ceil or round: derivative 0",
    "substitute": "the intermediates written out in the variables",
    "simplify": "the same value, written shorter",
}

_DIFF = "diff"  # the unevaluated derivative d/dx[u]: gradcalc's builtin diff(u, x) evaluates it by autodiff
_LINEAR = frozenset({"reshape", "transpose", "broadcast_to", "index", "stack", "sum_to", "trace"})
INLINE_LIMIT = 2_000  # diff's shared parts are written in place in the last line up to this many characters
_PATH_NAMES = 6  # a chain rule's paths are listed by name up to this many
# A derivation stops past this many characters of its lines: each line restates the whole expression, so
# 150 nested sin's make 5.8 million characters (22 s); diff without --steps gives the answer at any size.
TEXT_LIMIT = 300_000


class NoRule(UsageError):
    """A builtin --steps has no rule for: said plainly (diff itself still differentiates it)."""


@dataclass
class Step:
    """One line of a derivation: `before` = `after` by `rule` (texts in gradcalc syntax, `diff(u, x)`
    for an unevaluated derivative), with the forms people read: d/dx[u] and LaTeX."""

    rule: str
    before: str
    after: str
    shown_before: str
    shown_after: str
    latex_before: str
    latex: str
    part: str  # which derivative this derivation finds: "dy/dx", "∂b/∂a", or "chain rule"


@dataclass
class Steps:
    """The derivation of d(of)/d(wrt): its steps, grouped by part in order, and diff's answer it ends on."""

    of: str
    wrt: str
    steps: list[Step] = field(default_factory=list)
    definitions: dict[str, str] = field(default_factory=dict)  # each differentiated statement, by variable
    where: list[tuple[str, str, str]] = field(default_factory=list)  # diff's shared parts the last line names


def _textbook(expr: Add) -> Add:
    """A sum with its terms that hold unevaluated derivatives in the order of what they differentiate:
    d/dx[x^2]*sin(x) + x^2*d/dx[sin(x)], as the product x^2*sin(x) is written (the rest stay in place)."""
    slots = [i for i, (term, _) in enumerate(expr.terms) if _differentiated(term) is not None]
    if len(slots) < 2:
        return expr
    try:
        ordered = sorted((expr.terms[i] for i in slots), key=lambda tc: _differentiated(tc[0]).order)  # type: ignore[union-attr]
    except TypeError:  # orders of unlike kinds: the canonical order stands
        return expr
    terms = list(expr.terms)
    for i, term in zip(slots, ordered):
        terms[i] = term
    return Add(expr.constant, tuple(terms))


def _differentiated(term: Expr) -> Expr | None:
    """What the first unevaluated derivative among a term's factors differentiates."""
    for factor in term.factors if isinstance(term, Mul) else (term,):
        if isinstance(factor, Call) and factor.fn == _DIFF:
            return factor.args[0]
    return None


class _StepPrinter(Printer):
    """gradcalc text with an unevaluated derivative shown d/dx[u] (`shown`), or as diff(u, x)."""

    def __init__(self, decimal: bool, shown: bool) -> None:
        super().__init__({}, decimal=decimal)
        self.shown = shown

    def _common_factors(self, expr: Add) -> Mul | None:
        return None  # x*sin(x) + x stays a sum: the rule a step applies to it is the sum rule

    def _sum(self, expr: Add) -> str:
        return super()._sum(_textbook(expr))

    def _call(self, expr: Call) -> tuple[str, int]:
        if expr.fn == _DIFF and self.shown:
            return f"d/d{self.show(expr.args[1], 9)}[{self.show(expr.args[0], 0)}]", 9
        return super()._call(expr)


class _StepLatex(LatexPrinter):
    def __init__(self, decimal: bool) -> None:
        super().__init__({}, decimal=decimal)

    def _common_factors(self, expr: Add) -> Mul | None:
        return None

    def _sum(self, expr: Add) -> str:
        return super()._sum(_textbook(expr))

    def _call(self, expr: Call) -> tuple[str, int]:
        if expr.fn == _DIFF:
            return rf"\frac{{d}}{{d{self.show(expr.args[1], 9)}}}\left[{self.show(expr.args[0], 0)}\right]", 9
        return super()._call(expr)


class _Deriver:
    """Applies one level of rules to each unevaluated derivative of a line, naming the rules it used."""

    def __init__(self, algebra: Algebra) -> None:
        self.algebra = algebra
        self.local: dict[tuple, list[Expr]] = {}  # a primitive's partials, in placeholders, by call signature
        self.depends: dict[tuple[int, str], bool] = {}

    def d(self, u: Expr, var: Sym) -> Expr:
        """d/dvar[u], unevaluated (zero where u does not depend on var: nothing to write)."""
        if not self._depends(u, var.name):
            return self.algebra.broadcast(self.algebra.num(0.0), u.shape)
        if u is var:
            return self.algebra.num(1.0)
        return self.algebra.call(_DIFF, (u, var), (), u.shape)

    def _depends(self, u: Expr, name: str) -> bool:
        key = (id(u), name)
        found = self.depends.get(key)
        if found is None:
            found = self.depends[key] = name in symbolic._symbols_in(u)
        return found

    def step(self, line: Expr, rules: list[str]) -> Expr:
        """The line with one rule applied to each unevaluated derivative in it."""
        def rule(expr: Expr) -> Expr | None:
            if isinstance(expr, Call) and expr.fn == _DIFF:
                return self.rule(expr.args[0], expr.args[1], rules)  # type: ignore[arg-type]
            return None

        return _rebuilt(line, self.algebra, rule)

    def rule(self, u: Expr, var: Sym, rules: list[str]) -> Expr:
        """d/dvar[u] by the one rule u's outermost operation calls for, its inner derivatives left unevaluated."""
        a, d = self.algebra, self.d
        if not self._depends(u, var.name):
            _note(rules, "constant rule")
            return a.broadcast(a.num(0.0), u.shape)
        if u is var:
            _note(rules, "variable rule")
            return a.num(1.0)
        if isinstance(u, Add):
            moving = [(t, c) for t, c in u.terms if self._depends(t, var.name)]
            _note(rules, "difference rule" if any(c < 0 for _, c in moving) else "sum rule")
            if any(abs(c) != 1 for _, c in moving):
                _note(rules, "constant multiple rule")
            if len(moving) < len(u.terms) or u.constant:
                _note(rules, "constant rule")
            return a.broadcast(a.add(*(a.mul(a.num(c), d(t, var)) for t, c in moving)), u.shape)
        if isinstance(u, Mul):
            return a.broadcast(self._product(u, var, rules), u.shape)
        if isinstance(u, Pow):
            return a.broadcast(self._power(u, var, rules), u.shape)
        if isinstance(u, Call):
            return a.broadcast(self._call(u, var, rules), u.shape)
        raise NoRule(f"--steps has no rule for {type(u).__name__}", "drop --steps for the derivative itself")

    def _product(self, u: Mul, var: Sym, rules: list[str]) -> Expr:
        a, d = self.algebra, self.d
        moving = [f for f in u.factors if self._depends(f, var.name)]
        fixed = [f for f in u.factors if not self._depends(f, var.name)]
        if u.coefficient != 1 or fixed:
            _note(rules, "constant multiple rule")
            scale = a.mul(a.num(u.coefficient), *fixed)
            if len(moving) == 1:
                return a.mul(scale, d(moving[0], var))
            return a.mul(scale, d(a.mul(*moving), var))
        over = [f for f in moving if not _reciprocal(f)]
        under = [a.pow(f.base, a.num(-f.exponent.value)) for f in moving if _reciprocal(f)]  # type: ignore[attr-defined]
        if over and under:
            _note(rules, "quotient rule")
            top, bottom = a.mul(*over), a.mul(*under)
            return a.mul(a.add(a.mul(d(top, var), bottom), a.neg(a.mul(top, d(bottom, var)))),
                         a.pow(bottom, a.num(-2.0)))
        _note(rules, "product rule")
        return a.add(*(a.mul(d(f, var), *moving[:i], *moving[i + 1:]) for i, f in enumerate(moving)))

    def _power(self, u: Pow, var: Sym, rules: list[str]) -> Expr:
        a, d = self.algebra, self.d
        base, exponent = u.base, u.exponent
        if not self._depends(exponent, var.name):
            _note(rules, "power rule")
            self._chain(base, var, rules)
            return a.mul(exponent, a.pow(base, a.add(exponent, a.num(-1.0))), d(base, var))
        if not self._depends(base, var.name):
            _note(rules, "exponential rule")
            self._chain(exponent, var, rules)
            return a.mul(u, a.call("log", (base,), (), base.shape), d(exponent, var))
        _note(rules, "logarithmic differentiation")
        return a.mul(u, a.add(a.mul(d(exponent, var), a.call("log", (base,), (), base.shape)),
                              a.mul(exponent, d(base, var), a.pow(base, a.num(-1.0)))))

    def _chain(self, inner: Expr, var: Sym, rules: list[str]) -> None:
        if inner is not var:
            _note(rules, f"chain rule, inner u = {_StepPrinter(False, True).top(inner)}")

    def _call(self, u: Call, var: Sym, rules: list[str]) -> Expr:
        a, d = self.algebra, self.d
        fn = u.fn
        prim = PRIMITIVES.get(fn)
        if prim is None or fn == _DIFF:
            raise NoRule(f"--steps has no rule for {fn}()", "drop --steps for the derivative itself")
        if not prim.differentiable or prim.vjps is None:
            _note(rules, "piecewise constant")
            return a.num(0.0)
        if fn == "matmul":
            _note(rules, "matrix product rule")
            left, right = u.args
            return a.add(*(a.call("matmul", (d(left, var), right), (), u.shape)
                           for _ in [0] if self._depends(left, var.name)),
                         *(a.call("matmul", (left, d(right, var)), (), u.shape)
                           for _ in [0] if self._depends(right, var.name)))
        if fn in ("sum", "mean"):
            _note(rules, "sum over an axis" if fn == "sum" else "mean")
            return a.call(fn, (d(u.args[0], var),), u.params, u.shape)
        if fn == "softmax":
            _note(rules, "softmax")
            inner = d(u.args[0], var)
            axis = u.params[0]
            along = a.call("sum", (a.mul(u, inner),), ((axis,) if isinstance(axis, int) else axis, True),
                           _kept(u.shape, axis))
            self._chain(u.args[0], var, rules)
            return a.mul(u, a.add(inner, a.neg(along)))
        if fn in ("det", "inv"):
            return self._matrix_function(u, var, rules)
        if fn in _LINEAR:
            _note(rules, "linearity")
            return a.call(fn, tuple(d(x, var) for x in u.args), u.params, u.shape)
        if prim.kind in (ELEMENTWISE, BROADCASTING) or prim.kind is REDUCTION:
            partials = self._partials(u)
            _note(rules, f"derivative of {fn}")
            terms = []
            for x, partial in zip(u.args, partials):
                if partial is None or not self._depends(x, var.name):
                    continue
                self._chain(x, var, rules)
                terms.append(a.mul(partial, d(x, var)))
            if prim.kind is REDUCTION:  # J·v of a reduction: the partials times the inner derivative, reduced
                return a.call("sum", (a.add(*terms),), u.params, u.shape) if terms else a.num(0.0)
            return a.add(*terms)
        raise NoRule(f"--steps has no rule for {fn}() yet", "drop --steps for the derivative itself")

    def _matrix_function(self, u: Call, var: Sym, rules: list[str]) -> Expr:
        """det and inv of one square matrix, by a scalar: Jacobi's formula, and -inv(A) @ d/dx[A] @ inv(A)."""
        a, (matrix,) = self.algebra, u.args
        if len(matrix.shape) != 2:  # a stack of matrices needs the rule per matrix
            raise NoRule(f"--steps has no rule for {u.fn}() of a stack of matrices yet",
                         "drop --steps for the derivative itself")
        inverse = a.call("inv", (matrix,), (), matrix.shape)
        inner = self.d(matrix, var)
        if u.fn == "det":
            _note(rules, "Jacobi's formula")
            return a.mul(u, a.call("trace", (a.call("matmul", (inverse, inner), (), matrix.shape),), (), ()))
        _note(rules, "derivative of inv")
        product = a.call("matmul", (a.call("matmul", (inverse, inner), (), matrix.shape), inverse), (), u.shape)
        return a.neg(product)

    def _partials(self, u: Call) -> list[Expr | None]:
        """∂u/∂(each argument), elementwise, from the primitive's own rule with a seed of ones."""
        prim = PRIMITIVES[u.fn]
        elementwise = prim.kind is not REDUCTION
        shapes = tuple(u.shape if elementwise else x.shape for x in u.args)
        key = (u.fn, shapes, symbolic._hashable(u.params))
        found = self.local.get(key)
        if found is None:
            found = self.local[key] = _read_rule(prim, shapes, u.params, u.shape, self.algebra)
        names = {self.algebra.sym(f"__u{i}", shape): x for i, (x, shape) in enumerate(zip(u.args, shapes))}
        return [None if p is None else _substitute(p, names, self.algebra) for p in found]


def _read_rule(prim: Any, shapes: tuple, params: tuple, out_shape: tuple, algebra: Algebra) -> list[Any]:
    """A primitive's derivative by each input, read from its rule run on placeholder inputs __u0, __u1..."""
    with graph.recording_as(True), B.errstate():
        inputs = [graph.leaf(B.xp.full(shape, 0.5, dtype=B.dtype) if shape else B.scalar(0.5)) for shape in shapes]
        output = graph.apply(prim, tuple(inputs), params)
        seed = B.xp.ones(out_shape, dtype=B.dtype) if out_shape else B.scalar(1.0)
        found = autodiff.backward(output, graph.constant(seed), inputs, create_graph=True)
    names = {node: f"__u{i}" for i, node in enumerate(inputs)}
    partials: list[Any] = []
    for node in inputs:
        gradient = found.get(node)
        if gradient is None:
            partials.append(None)
        elif isinstance(gradient, Node):
            (expr,) = symbolic.read([gradient], names, algebra)
            partials.append(expr)
        else:
            partials.append(algebra.const(gradient))
    return partials


def _substitute(expr: Expr, names: dict[Expr, Expr], algebra: Algebra) -> Expr:
    """expr with symbols replaced, rebuilt through the algebra (so it simplifies)."""
    return _rebuilt(expr, algebra, names.get)


def _rebuilt(expr: Expr, algebra: Algebra, replace: Callable[[Expr], Expr | None]) -> Expr:
    """expr rebuilt bottom-up through the algebra (so it simplifies), each part `replace` answers for replaced."""
    memo: dict[int, Expr] = {}
    a = algebra

    def walk(e: Expr) -> Expr:
        done = memo.get(id(e))
        if done is not None:
            return done
        out = replace(e)
        if out is not None:
            pass
        elif isinstance(e, Add):
            out = a.add(a.num(e.constant), *(a.mul(a.num(c), walk(t)) for t, c in e.terms))
        elif isinstance(e, Mul):
            out = a.mul(a.num(e.coefficient), *(walk(f) for f in e.factors))
        elif isinstance(e, Pow):
            out = a.pow(walk(e.base), walk(e.exponent))
        elif isinstance(e, Call) and e.fn == "broadcast_to":
            out = a.broadcast(walk(e.args[0]), e.params[0])
        elif isinstance(e, Call):
            out = a.call(e.fn, tuple(walk(x) for x in e.args), e.params, e.shape)
        else:
            out = e
        memo[id(e)] = out
        return out

    return walk(expr)


def _kept(shape: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    axes = {(axis if isinstance(axis, int) else axis[0]) % len(shape)} if shape else set()
    return tuple(1 if i in axes else n for i, n in enumerate(shape))


def _reciprocal(factor: Expr) -> bool:
    return isinstance(factor, Pow) and isinstance(factor.exponent, Num) and factor.exponent.value < 0


def _note(rules: list[str], rule: str) -> None:
    if rule not in rules:
        rules.append(rule)


def _has_diff(expr: Expr) -> bool:
    stack, seen = [expr], set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Call) and item.fn == _DIFF:
            return True
        stack.extend(symbolic._children(item))
    return False


class _Writer:
    """Prints lines three ways: gradcalc syntax, d/dx[u] for people, LaTeX."""

    def __init__(self, decimal: bool) -> None:
        self.text = _StepPrinter(decimal, shown=False)
        self.shown = _StepPrinter(decimal, shown=True)
        self.latex = _StepLatex(decimal)

        self.printed: dict[tuple[int, int], str] = {}  # a step's after is the next step's before: printed once
        self.length = 0  # characters of the lines written so far (gradcalc syntax), bounded by TEXT_LIMIT
        self.count = 0  # the steps written so far

    def step(self, rule: str, before: Expr, after: Expr, part: str) -> Step:
        after_text = self._top(0, after)
        self.length += len(after_text)
        self.count += 1
        if self.length > TEXT_LIMIT:  # checked before the other two forms are printed: they cost as much again
            raise LimitExceeded(f"the steps grew past {TEXT_LIMIT:,} characters ({self.count:,} steps so far, the "
                                f"last {len(after_text):,} characters long): too long to read as a derivation",
                                "drop --steps: diff without it gives the derivative, at any size")
        text, shown, latex = (self._top(i, before) for i in range(3))
        return Step(rule, text, after_text, shown, self._top(1, after), latex, self._top(2, after), part)

    def _top(self, printer: int, expr: Expr) -> str:
        key = (printer, id(expr))  # interned: one object per expression, alive as long as the algebra
        found = self.printed.get(key)
        if found is None:
            found = self.printed[key] = (self.text, self.shown, self.latex)[printer].top(expr)
        return found


def derivation(u: Expr, var: Sym, deriver: _Deriver, writer: _Writer, part: str,
               limit: int = 1_000) -> tuple[list[Step], Expr]:
    """The steps from d/dvar[u] to an expression without derivatives, and that expression."""
    algebra = deriver.algebra
    line = algebra.call(_DIFF, (u, var), (), u.shape)
    steps: list[Step] = []
    for _ in range(limit):
        if not _has_diff(line):
            break
        rules: list[str] = []
        after = deriver.step(line, rules)
        steps.append(writer.step("; ".join(rules), line, after, part))
        line = after
    tidy = algebra.tidy(line)
    if tidy is not line and writer._top(0, tidy) != writer._top(0, line):
        steps.append(writer.step("simplify", line, tidy, part))
        line = tidy
    return steps, line


def _frontier(node: Node, named: dict[Node, str]) -> set[Node]:
    """The named nodes a node is computed from directly (through unnamed operations only)."""
    found: set[Node] = set()
    stack, seen = list(node.inputs), set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current in named:
            found.add(current)
        elif current.op is not None:
            stack.extend(current.inputs)
    return found


def _atomic(text: str) -> bool:
    """Whether text reads as one operand without parentheses: a name, a number, or one call f(...)."""
    if re.fullmatch(r"[\w.]+", text):
        return True
    head = re.match(r"\w+\(", text)
    if not head:
        return False
    depth = 0
    for i, c in enumerate(text):
        depth += {"(": 1, ")": -1}.get(c, 0)
        if depth == 0 and i >= head.end() - 1:
            return i == len(text) - 1
    return False


def derive(of: str, wrt: str, output: Node, target: Node, symbols: dict[Node, str], answer: Any,
           decimal: bool = False) -> Steps:
    """The derivation of d(of)/d(wrt): `symbols` names leaves, constants and the program's intermediates;
    `answer` is diff's symbolic.Derivative, the last line (its shared parts in place where they fit)."""
    if target.shape != ():
        raise UsageError(f"--steps differentiates by a scalar variable; '{wrt}' has shape {tuple(target.shape)}",
                         "drop --steps for its gradient, or differentiate by a scalar variable")
    # A tensor intermediate is written out, not named: its partial d/dA[…] by a matrix is no line a course
    # writes (nor gradcalc syntax), while d/dx of the written-out tensor is (the matrix product rule on it).
    named = {node: name for node, name in symbols.items()
             if node is not output and (node.op is None or node.shape == ())}
    named[target] = wrt
    inputs: dict[Node, set[Node]] = {}
    order: list[Node] = []  # the statements on a path to the target, inputs first
    on_path: dict[Node, bool] = {target: True}
    stack: list[tuple[Node, bool]] = [(output, False)]
    while stack:  # post-order over the named nodes: each statement after those it reads
        node, ready = stack.pop()
        if node in on_path and not ready:
            continue
        if ready:
            reached = {m for m in inputs[node] if on_path.get(m)}
            inputs[node] = reached
            on_path[node] = bool(reached)
            if reached:
                order.append(node)
            continue
        inputs[node] = _frontier(node, named) if node.op is not None else set()
        stack.append((node, True))
        stack.extend((m, False) for m in inputs[node] if m not in on_path)
    algebra = symbolic._algebra(symbols)
    writer = _Writer(decimal)
    result = Steps(of, wrt)
    # diff's shared parts (`where t1 = ...`) written in place, in one line, where it stays short enough.
    in_place = answer.in_place(INLINE_LIMIT) if answer.where and answer.in_place is not None else None
    answer_text, answer_latex = in_place or (answer.text, answer.latex)
    if in_place is None:
        result.where = answer.where
    name_of = {**named, output: of}
    if output is target or not on_path.get(output):
        zero_or_one = algebra.num(1.0 if output is target else 0.0)
        start = algebra.call(_DIFF, (algebra.sym(of, tuple(output.shape)), algebra.sym(wrt, ())), (), ())
        result.steps.append(writer.step("variable rule" if output is target else "constant rule",
                                        start, zero_or_one, f"d{of}/d{wrt}"))
        return result
    locals_: dict[tuple[Node, Node], Expr] = {}
    deriver = _Deriver(algebra)
    single = len(order) == 1
    for node in order:
        without = {n: name for n, name in named.items() if n is not node}
        (expr,) = symbolic.read([node], without, algebra)
        result.definitions[name_of[node]] = writer.text.top(expr)
        for source in sorted(inputs[node], key=lambda n: n.seq):
            part = f"d{of}/d{wrt}" if single else f"∂{name_of[node]}/∂{name_of[source]}"
            var = cast(Sym, algebra.sym(name_of[source], tuple(source.shape)))
            steps, found = derivation(expr, var, deriver, writer, part)
            result.steps += steps
            locals_[(node, source)] = found
    final: Expr
    if single:
        final = locals_[(output, target)]
    else:
        final = _chain(of, wrt, output, target, order, inputs, locals_, name_of, algebra, writer, result)
    last = writer._top(0, final)
    if last != answer_text:
        written = [n for n in order if n is not output]
        if target.op is not None:  # --wrt an intermediate: diff writes it out in the leaves too
            (expr,) = symbolic.read([target], {n: name for n, name in named.items() if n is not target}, algebra)
            result.definitions[wrt] = writer._top(0, expr)
            written.insert(0, target)
        rule = "simplify" if not written else "substitute " + (", ".join(
            f"{name_of[n]} = {result.definitions[name_of[n]]}" for n in written) if len(written) <= _PATH_NAMES
            else f"the {len(written)} statements above") + "; simplify"
        result.steps.append(Step(rule, last, answer_text, writer._top(1, final), answer_text,
                                 writer._top(2, final), answer_latex, result.steps[-1].part))
    return result


def _chain(of: str, wrt: str, output: Node, target: Node, order: list[Node], inputs: dict[Node, set[Node]],
           locals_: dict[tuple[Node, Node], Expr], name_of: dict[Node, str], algebra: Algebra,
           writer: _Writer, result: Steps) -> Expr:
    """The chain rule joining the statements' partial derivatives: over the paths, as `explain` lists them,
    where they are few; else statement by statement, d/dx[b] from d/dx of b's inputs (linear in the
    program). Returns the line the intermediates are then written out from."""
    paths: dict[Node, int] = {target: 1}
    for node in order:
        paths[node] = sum(paths[m] for m in inputs[node])
    var = algebra.sym(wrt, ())

    def d(node: Node) -> Expr:
        return algebra.call(_DIFF, (algebra.sym(name_of[node], tuple(node.shape)), var), (), tuple(node.shape))

    count = paths[output]
    if count > _PATH_NAMES:
        for i, node in enumerate(order):
            joined = algebra.add(*(algebra.mul(locals_[(node, m)], algebra.num(1.0) if m is target else d(m))
                                   for m in sorted(inputs[node], key=lambda n: n.seq)))
            rule = f"chain rule: {count:,} paths, joined statement by statement" if i == 0 else "chain rule"
            result.steps.append(writer.step(rule, d(node), joined, "chain rule"))
        return d(output)
    total: dict[Node, Expr] = {target: algebra.num(1.0)}
    for node in order:
        total[node] = algebra.add(*(algebra.mul(locals_[(node, m)], total[m]) for m in inputs[node]))
    found = _paths(output, target, inputs)
    listed = ", ".join(" → ".join(name_of[n] for n in path) for path in found)
    rule = f"chain rule: {count} path{'s' if count > 1 else ''}, {listed}"
    # Each path's product of partials as explain prints it, before the algebra multiplies them out.
    text = " + ".join("*".join(_operand(writer._top(0, locals_[edge])) for edge in itertools.pairwise(path))
                      for path in found)
    latex = " + ".join(r" \cdot ".join(rf"\left({writer._top(2, locals_[edge])}\right)"
                                       for edge in itertools.pairwise(path)) for path in found)
    start = d(output)
    result.steps.append(Step(rule, writer._top(0, start), text, writer._top(1, start), text,
                             writer._top(2, start), latex, "chain rule"))
    joined = total[output]
    if writer._top(0, joined) != text:
        result.steps.append(Step("simplify", text, writer._top(0, joined), text, writer._top(1, joined), latex,
                                 writer._top(2, joined), "chain rule"))
    return joined


def _operand(text: str) -> str:
    return text if _atomic(text) else f"({text})"


def _paths(output: Node, target: Node, inputs: dict[Node, set[Node]]) -> list[list[Node]]:
    """The paths from the output to the target through the statements (at most _PATH_NAMES + 1)."""
    found: list[list[Node]] = []
    stack: list[list[Node]] = [[output]]
    while stack and len(found) <= _PATH_NAMES:
        path = stack.pop()
        if path[-1] is target:
            found.append(path)
            continue
        for m in sorted(inputs.get(path[-1], ()), key=lambda n: -n.seq):
            stack.append([*path, m])
    return found


__all__ = ["RULES", "NoRule", "Step", "Steps", "derivation", "derive"]
