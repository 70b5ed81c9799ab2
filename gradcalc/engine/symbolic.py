"""Derivatives as expressions: the differentiable backward pass, read back as algebra.

`diff` runs the same derivative rules as `grad`, recording graph nodes
(autodiff.backward with create_graph). This module turns that graph into an
expression over the program's leaves (or named intermediates), simplifies it as
it builds it, names subexpressions used more than once (`where t1 = ...`) so
the text stays linear in the program, and prints gradcalc syntax or LaTeX.

Simplification is local and deterministic, never a search: constructors fold
numbers, drop identities (x*1, x+0, x*0, x^1), collect like terms and powers of
one base, and order terms and factors canonically. It cannot hang.
"""

from __future__ import annotations

import functools
import itertools
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard, cast

from ..errors import LimitExceeded
from . import backend as B
from .graph import Node
from .primitives import COMPARISON, ELEMENTWISE, LOGIC, PRIMITIVES, REDUCTION


class Expr:
    """An interned expression: structurally equal expressions are the same object."""

    __slots__ = ("order", "shape")
    shape: tuple[int, ...]
    order: tuple


class Num(Expr):
    __slots__ = ("value",)

    def __init__(self, value: float) -> None:
        self.value = value


class Const(Expr):
    """A tensor constant (a literal in the program or a matrix a rule made)."""

    __slots__ = ("array",)

    def __init__(self, array: Any) -> None:
        self.array = array


class Sym(Expr):
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Add(Expr):
    __slots__ = ("constant", "terms")

    def __init__(self, constant: float, terms: tuple[tuple[Expr, float], ...]) -> None:
        self.constant = constant
        self.terms = terms


class Mul(Expr):
    __slots__ = ("coefficient", "factors")

    def __init__(self, coefficient: float, factors: tuple[Expr, ...]) -> None:
        self.coefficient = coefficient
        self.factors = factors


class Pow(Expr):
    __slots__ = ("base", "exponent")

    def __init__(self, base: Expr, exponent: Expr) -> None:
        self.base = base
        self.exponent = exponent


class Call(Expr):
    __slots__ = ("args", "fn", "params")

    def __init__(self, fn: str, args: tuple[Expr, ...], params: tuple) -> None:
        self.fn = fn
        self.args = args
        self.params = params


# From the records (primitives.py): what folds a number (sin(0) is 0), how comparisons and logic are
# written, and which calls are reductions (their axis is printed with them).
_FOLD = {p.name: p.fold for p in PRIMITIVES.values() if p.fold is not None}
_COMPARE = {p.name: p for p in PRIMITIVES.values() if p.kind is COMPARISON}
_LOGIC = {p.name: p for p in PRIMITIVES.values() if p.kind is LOGIC}
_REDUCTIONS = {p.name: p for p in PRIMITIVES.values() if p.kind is REDUCTION}
_LATEX_FUNCTIONS = {p.name: p.latex for p in PRIMITIVES.values() if p.kind is ELEMENTWISE and p.latex}


class Algebra:
    """Smart constructors over one intern table: every result is simplified and shared."""

    def __init__(self) -> None:
        self.table: dict[tuple, Expr] = {}
        self.counter = itertools.count()
        self._tidying = False  # in tidy(): sums and products try distributing (small expressions only)
        self._expanding = False  # add() tries distributing its products once, not recursively
        self.defined: dict[str, Node] = {}  # each symbol's graph node, where known: what sums to one reads
        self.given: dict[str, str] = {}  # what the expression was simplified on (sum(Y) = 1), by symbol

    def _intern(self, key: tuple, make: Any, shape: tuple[int, ...], order: tuple) -> Expr:
        found = self.table.get(key)
        if found is None:
            found = make()
            found.shape, found.order = shape, (*order, next(self.counter))  # creation order breaks ties
            self.table[key] = found
        return found

    def num(self, value: float) -> Expr:
        value = float(value)
        if value == 0:
            value = 0.0  # one zero, not -0.0
        return self._intern(("n", value), lambda: Num(value), (), (0, value))

    def const(self, array: Any) -> Expr:
        host = B.to_host(array)
        if host.ndim == 0:
            return self.num(float(host))
        flat = host.reshape(-1)
        if flat.size and bool((flat == flat[0]).all()):
            return self.broadcast(self.num(float(flat[0])), tuple(host.shape))
        return self._intern(("c", host.tobytes(), host.shape), lambda: Const(host), tuple(host.shape), (4,))

    def sym(self, name: str, shape: tuple[int, ...]) -> Expr:
        return self._intern(("s", name), lambda: Sym(name), shape, (1, name))

    def broadcast(self, value: Expr, shape: tuple[int, ...]) -> Expr:
        """value broadcast to shape: elementwise algebra broadcasts by itself."""
        if value.shape == shape:
            return value
        return self.call("broadcast_to", (value,), (shape,), shape)

    # --- sums and products --------------------------------------------------------------------

    def add(self, *items: Expr) -> Expr:
        constant = 0.0
        collected: dict[Expr, float] = {}
        shape: tuple[int, ...] = ()
        for outer in items:
            item = _unbroadcast(outer)
            shape = _broadcast(shape, outer.shape)
            if isinstance(item, Num):
                constant += item.value
            elif isinstance(item, Add):
                constant += item.constant
                for term, coefficient in item.terms:
                    collected[term] = collected.get(term, 0.0) + coefficient
            else:
                term, coefficient = self._split(item)
                collected[term] = collected.get(term, 0.0) + coefficient
        terms = tuple(sorted(((t, c) for t, c in collected.items() if c != 0), key=lambda tc: tc[0].order))
        if not terms:
            return self.broadcast(self.num(constant), shape)
        if constant == 0 and len(terms) == 1:
            return self.broadcast(self.mul(self.num(terms[0][1]), terms[0][0]), shape)
        natural: tuple[int, ...] = ()  # the terms' own shape; anything larger is an explicit broadcast
        for term, _ in terms:
            natural = _broadcast(natural, term.shape)
        key = ("+", constant, tuple((id(t), c) for t, c in terms))
        total = self._intern(key, lambda: Add(constant, terms), natural, (3, *terms[0][0].order[:2]))
        expandable = [(t, c) for t, c in terms if isinstance(t, Mul) and any(isinstance(f, Add) for f in t.factors)] \
            if self._tidying and not self._expanding else []
        if expandable and _size(total) < _SIZE_CAP:
            # -y*(1 - p) - p*(y - 1) is p - y: products over sums, distributed, may cancel across terms.
            # A product with two sums (-y*(1 - t3)*(1 - t1)) is tried over each: the one that meets.
            best, size = total, _size(total)
            choices = [[f for f in t.factors if isinstance(f, Add)][:2] for t, _ in expandable]
            for sums in itertools.islice(itertools.product(*choices), _DISTRIBUTE_CHOICES):
                if not _products_meet(expandable, sums, terms):
                    continue
                self._expanding = True
                try:
                    expanded = self.add(self.num(constant), *(self.mul(self.num(c), t) for t, c in terms
                                                              if (t, c) not in expandable),
                                        *(self.mul(self.num(c), self._distribute(t, total_of))
                                          for (t, c), total_of in zip(expandable, sums)))
                finally:
                    self._expanding = False
                if _size(expanded) < size:
                    best, size = expanded, _size(expanded)
            if best is not total:
                return self.broadcast(best, shape)
        return self.broadcast(total, shape)

    def _split(self, item: Expr) -> tuple[Expr, float]:
        """A term as (its non-numeric part, its coefficient)."""
        if isinstance(item, Mul):
            rest = item.factors[0] if len(item.factors) == 1 else self._product(1.0, item.factors, item.shape)
            return rest, item.coefficient
        return item, 1.0

    def mul(self, *items: Expr) -> Expr:
        coefficient = 1.0
        powers: dict[Expr, list[Expr]] = {}
        shape: tuple[int, ...] = ()
        for outer in items:
            item = _unbroadcast(outer)
            shape = _broadcast(shape, outer.shape)
            if isinstance(item, Num):
                coefficient *= item.value
            elif isinstance(item, Mul):
                coefficient *= item.coefficient
                for factor in item.factors:
                    base, exponent = _as_power(factor, self)
                    powers.setdefault(base, []).append(exponent)
            else:
                base, exponent = _as_power(item, self)
                powers.setdefault(base, []).append(exponent)
        if coefficient == 0:
            return self.broadcast(self.num(0.0), shape)
        factors: list[Expr] = []
        for base, exponents in powers.items():
            # unbroadcast: x*ones(3)/ones(3)*... leaves ones(3), which elementwise algebra needs no more than 1
            factor = _unbroadcast(self.pow(base, self.add(*exponents) if len(exponents) > 1 else exponents[0]))
            if isinstance(factor, Num):
                coefficient *= factor.value
            elif isinstance(factor, Mul):  # (2*x)^2 distributed
                coefficient *= factor.coefficient
                factors.extend(factor.factors)
            else:
                factors.append(factor)
        if not factors:
            return self.broadcast(self.num(coefficient), shape)
        if coefficient == 1 and len(factors) == 1:
            return self.broadcast(factors[0], shape)
        if len(factors) == 1 and isinstance(factors[0], Add):  # 2*(x - w) is 2*x - 2*w: like terms then meet
            total = factors[0]
            return self.broadcast(self.add(self.num(coefficient * total.constant),
                                           *(self.mul(self.num(coefficient * c), t) for t, c in total.terms)), shape)
        natural: tuple[int, ...] = ()  # the factors' own shape; anything larger is an explicit broadcast
        for factor in factors:
            natural = _broadcast(natural, factor.shape)
        product = self._product(coefficient, factors, natural)
        return self.broadcast(self._smaller_distributed(product) if self._tidying else product, shape)

    def tidy(self, expr: Expr) -> Expr:
        """A small expression rebuilt with products distributed over sums where that shrinks it.

        Building a derivative meets its factors one at a time; only the whole shows that
        p*(-y/p - (y - 1)/(1 - p))*(1 - p) is p - y. Large expressions (a long chain's) are left
        as they are: distributing them is costly and rarely shortens them.
        """
        if _size(expr) >= _SIZE_CAP or not _has_product_of_sum(expr):
            return expr
        self._tidying = True
        try:
            return self._rebuild(expr, {})
        finally:
            self._tidying = False

    def _rebuild(self, expr: Expr, memo: dict[int, Expr]) -> Expr:
        done = memo.get(id(expr))
        if done is not None:
            return done
        if isinstance(expr, Add):
            out = self.add(self.num(expr.constant),
                           *(self.mul(self.num(c), self._rebuild(t, memo)) for t, c in expr.terms))
        elif isinstance(expr, Mul):
            out = self.mul(self.num(expr.coefficient), *(self._rebuild(f, memo) for f in expr.factors))
        elif isinstance(expr, Pow):
            out = self.pow(self._rebuild(expr.base, memo), self._rebuild(expr.exponent, memo))
        elif isinstance(expr, Call):
            out = self.call(expr.fn, tuple(self._rebuild(a, memo) for a in expr.args), expr.params, expr.shape)
        else:
            out = expr
        memo[id(expr)] = out
        return out

    def _distribute(self, product: Mul, total: Add) -> Expr:
        """c*a*(x + y) as c*a*x + c*a*y."""
        others = [f for f in product.factors if f is not total]
        c = product.coefficient
        return self.add(self.mul(self.num(c * total.constant), *others),
                        *(self.mul(self.num(c * k), term, *others) for term, k in total.terms))

    def _smaller_distributed(self, product: Mul) -> Expr:
        """The product distributed over one of its sums where that comes out smaller, else itself.

        Factors then cancel and like terms meet: p*(-y/p - (y - 1)/(1 - p))*(1 - p) is p - y.
        Only small expressions are tried, so the cost stays bounded however large the derivative.
        """
        # Only where a factor outside a sum meets one inside its terms can anything cancel.
        sums = [f for f in product.factors if isinstance(f, Add) and len(f.terms) <= _DISTRIBUTE_TERMS][:2]
        sums = [total for total in sums if _bases(product) - {total} & {b for term, _ in total.terms
                                                                       for b in _bases(term)}]
        if not sums:
            return product
        size = _size(product)
        if size >= _SIZE_CAP:
            return product
        best: Expr = product
        for total in sums:
            candidate = self._distribute(product, total)
            if _size(candidate) < size:
                best, size = candidate, _size(candidate)
        return best

    def _product(self, coefficient: float, factors: Iterable[Expr], shape: tuple[int, ...]) -> Mul:
        ordered = tuple(sorted(factors, key=lambda f: f.order))
        key = ("*", coefficient, tuple(id(f) for f in ordered))
        return cast(Mul, self._intern(key, lambda: Mul(coefficient, ordered), shape, ordered[0].order))

    def pow(self, base: Expr, exponent: Expr) -> Expr:
        if isinstance(exponent, Num):
            e = exponent.value
            if e == 0:
                return self.broadcast(self.num(1.0), base.shape)
            if e == 1:
                return base
            if isinstance(base, Num):
                folded = _fold(lambda: base.value ** e)
                if folded is not None:
                    return self.num(folded)
            if isinstance(base, Pow) and isinstance(base.exponent, Num) and float(e).is_integer():
                return self.pow(base.base, self.num(base.exponent.value * e))
            if isinstance(base, Mul) and float(e).is_integer():
                scale = _fold(lambda: base.coefficient ** e)  # (1e-320*x)^-1: 1e320 overflows; kept as a power
                if scale is not None:
                    return self.mul(self.num(scale), *(self.pow(f, exponent) for f in base.factors))
        key = ("^", id(base), id(exponent))
        return self._intern(key, lambda: Pow(base, exponent), _broadcast(base.shape, exponent.shape), base.order)

    def neg(self, value: Expr) -> Expr:
        return self.mul(self.num(-1.0), value)

    def _sums_to_one(self, value: Expr, axis: Any) -> bool:
        """Whether value sums to 1 along the axis: a softmax along it (always), or a leaf holding
        distributions along its last axis (one-hot targets, probabilities), as check moves them.

        A leaf's sums are 1 only at the values it has (and check's nearby points): the condition is
        recorded in `given`, to be printed with the expression. This makes ∂/∂z of -sum(Y*log(softmax(z)))
        p - Y, as PyTorch's fused rule gives it for targets that sum to 1 (in general it is p*sum(Y) - Y).
        """
        along = _only_axis(axis, len(value.shape))
        if along is None:
            return False
        node = self.defined.get(value.name) if isinstance(value, Sym) else None
        if isinstance(value, Call) and value.fn == "softmax":
            return _only_axis(value.params[0], len(value.shape)) == along
        if node is None:
            return False
        if node.op is not None:
            return node.op.name == "softmax" and _only_axis(node.params[0], node.ndim) == along
        if along != node.ndim - 1 or not is_distribution(B.to_host(node.value)):
            return False
        name = cast(Sym, value).name
        self.given[name] = f"sum({name}{f', axis={along}' if node.ndim > 1 else ''}) = 1"
        return True

    # --- everything else ----------------------------------------------------------------------

    def call(self, fn: str, args: tuple[Expr, ...], params: tuple, shape: tuple[int, ...]) -> Expr:
        fold = _FOLD.get(fn)
        if fold is not None and all(isinstance(a, Num) for a in args):
            values = [a.value for a in args if isinstance(a, Num)]
            folded = _fold(lambda: fold(*values))
            if folded is not None:
                return self.num(folded)
        if fn in _LOGIC and len(args) == 2 and any(isinstance(a, Num) for a in args):
            known = next(a for a in args if isinstance(a, Num))
            if (known.value == 0) == (fn == "logical_and"):  # (0 and c) is 0, (1 or c) is 1
                return self.num(float(fn == "logical_or"))
        if fn == "where" and isinstance(args[0], Num):
            return self.broadcast(args[1] if args[0].value else args[2], shape)
        if fn == "where" and args[1] is args[2]:
            return args[1]
        if fn == "broadcast_to" and isinstance(args[0], Call) and args[0].fn == "broadcast_to":
            args = args[0].args
        if fn in _FOLD_SHAPES and (arrays := _constants(args)) is not None:  # a mask's scatter of ones: a literal
            return self.const(PRIMITIVES[fn].forward(*arrays, *params))
        if fn == "sum" and self._sums_to_one(args[0], params[0]):  # softmax's backward meets sum(p) and sum(Y)
            return self.broadcast(self.num(1.0), shape)
        if fn == "matmul" or (fn in ("sum", "mean", "sum_to") and isinstance(_unbroadcast(args[0]), Add)):
            scaled = [_scaled(a, self) for a in args]
            scale = math.prod(c for c, _ in scaled)
            if scale != 1:  # X.T @ (1/3*(p - y)) is 1/3*X.T @ (p - y), sum(2*x - 2*y) is 2*sum(x - y): linear
                return self.mul(self.num(scale), self.call(fn, tuple(e for _, e in scaled), params, shape))
        # Linear: sum(-t) = -sum(t), sum(t/N) = sum(t)/N for a scalar N, and so for a broadcast's unbroadcasting sum.
        if fn in ("sum", "mean", "sum_to") and isinstance(args[0], Mul) and \
                (args[0].coefficient != 1 or any(f.shape == () for f in args[0].factors)):
            inner = args[0]
            scalars = [f for f in inner.factors if f.shape == ()]
            others = [f for f in inner.factors if f.shape != ()]
            if others:
                rest = others[0] if len(others) == 1 else self._product(1.0, others, inner.shape)
                rest = self.broadcast(rest, inner.shape)
                return self.mul(self.num(inner.coefficient), *scalars, self.call(fn, (rest,), params, shape))
        key = ("f", fn, tuple(id(a) for a in args), _hashable(params))
        return self._intern(key, lambda: Call(fn, args, params), shape, (2, fn, *(args[0].order[:2] if args else ())))


_DENOMINATORS = 100  # 2/3, 5/12, 1/99: a mean's 1/n and its multiples
_DECIMAL_DENOMINATORS = frozenset({5, 10, 20, 25, 50, 100})
_DISTRIBUTE_TERMS = 6  # a product over a longer sum is left alone: distributing it rarely shrinks it
_INLINE_TRIES = 256  # kept nodes' gradients tried written in place, nearest the output first
_DISTRIBUTE_CHOICES = 8  # ways of distributing a sum's products tried (each over one of its first two sums)
_SIZE_CAP = 64  # larger expressions are not tried: distributing is for the small derivatives of exercises


def _only_axis(axis: Any, ndim: int) -> int | None:
    """The one axis a reduction's axis parameter names (None: all of them, one where ndim is 1), as 0..ndim-1."""
    if isinstance(axis, (tuple, list)):
        axis = axis[0] if len(axis) == 1 else None
        if axis is None:
            return None
    if axis is None:
        return 0 if ndim == 1 else None
    return int(axis) % ndim if ndim else None


def is_distribution(value: Any) -> bool:
    """Whether a value holds probability distributions along its last axis (a one-hot target, soft labels)."""
    if value.ndim == 0 or value.shape[-1] < 2 or not bool((value >= 0).all()):
        return False
    return bool(B.host.abs(value.sum(axis=-1) - 1).max() <= 1e-6)


def _has_product_of_sum(expr: Expr) -> bool:
    """Whether some product in the expression has a sum among its factors: the only thing tidy() changes."""
    stack, seen = [expr], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Mul) and any(isinstance(f, Add) for f in node.factors):
            return True
        stack.extend(_children(node))
    return False


def _base(factor: Expr) -> Expr:
    return factor.base if isinstance(factor, Pow) else factor


def _bases(term: Expr) -> frozenset[Expr]:
    return frozenset(_base(f) for f in (term.factors if isinstance(term, Mul) else (term,)))


def _products_meet(expandable: list[tuple[Mul, float]], sums: Sequence[Add],
                   terms: tuple[tuple[Expr, float], ...]) -> bool:
    """Whether distributing these products, each over its sum, could make like terms: two of the products
    they give share their factors, or one shares them with a term already there (-y*(1 - p) - p*(y - 1):
    y*p twice)."""
    seen = {_bases(t) for t, c in terms if (t, c) not in expandable}
    for (product, _), total in zip(expandable, sums):
        outside = _bases(product) - {total}
        made = {outside | _bases(term) for term, _ in total.terms}
        if made & seen:
            return True
        seen |= made
    return False


def _size(expr: Expr, cap: int = _SIZE_CAP) -> int:
    """The number of nodes in an expression written out as a tree, counted up to `cap`."""
    count, stack = 0, [expr]
    while stack and count < cap:
        node = stack.pop()
        count += 1
        if isinstance(node, Add):
            stack.extend(t for t, _ in node.terms)
            count += node.constant != 0
        elif isinstance(node, Mul):
            stack.extend(node.factors)
            count += node.coefficient not in (1.0, -1.0)
        elif isinstance(node, Pow):
            stack += (node.base, node.exponent)
        elif isinstance(node, Call):
            stack.extend(node.args)
    return count


# Indexing with arrays, and writing into a tensor: of constants, a constant (`diff` writes it as a literal).
_FOLD_SHAPES = ("index", "scatter", "index_put")


def _constants(args: tuple[Expr, ...]) -> list[Any] | None:
    """Each argument's array if every one is a number or a tensor constant (broadcast or not), else None."""
    values = []
    for arg in args:
        inner = arg.args[0] if isinstance(arg, Call) and arg.fn == "broadcast_to" else arg
        if isinstance(inner, Num):
            values.append(B.xp.broadcast_to(B.xp.asarray(inner.value, dtype=B.dtype), arg.shape))
        elif isinstance(inner, Const) and inner is arg:
            values.append(B.xp.asarray(inner.array))
        else:
            return None
    return values


def _fold(compute: Any) -> float | None:
    """A folded constant, or None where it would not be a finite number (keep it symbolic)."""
    try:
        value = float(compute())
    except (ValueError, ZeroDivisionError, OverflowError, TypeError):
        return None
    return value if math.isfinite(value) else None


def _hashable(params: tuple) -> tuple:
    return tuple(repr(p) for p in params)


def _broadcast(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    return a if a == b else B.broadcast_shapes(a, b)


def _unbroadcast(item: Expr) -> Expr:
    """Elementwise algebra broadcasts by itself: look through broadcast_to (callers keep the shape)."""
    return item.args[0] if isinstance(item, Call) and item.fn == "broadcast_to" else item


def _as_power(item: Expr, algebra: Algebra) -> tuple[Expr, Expr]:
    if isinstance(item, Pow):
        return item.base, item.exponent
    return item, algebra.num(1.0)


# --- from the graph to expressions --------------------------------------------------------

def read(roots: list[Node], symbols: dict[Node, str], algebra: Algebra) -> list[Expr]:
    """The expressions of graph nodes; nodes in `symbols` stay as their names (leaves, kept intermediates)."""
    memo: dict[Node, Expr] = {}
    uses = _uses(roots, symbols)
    keep = set(roots)
    terms: dict[Node, list[Node]] = {}  # a sum's terms, through the sums only it uses (read as one sum)
    for root in roots:
        stack: list[tuple[Node, bool]] = [(root, False)]
        while stack:  # post-order without recursion: deep programs make deep graphs
            node, ready = stack.pop()
            if node in memo:
                continue
            if node in symbols or node.op is None:
                memo[node] = (algebra.sym(symbols[node], tuple(node.shape)) if node in symbols
                              else algebra.const(node.value))
                continue
            if not ready:
                stack.append((node, True))
                parents: Sequence[Node] = node.inputs
                if node.op.name == "add":
                    parents = terms[node] = _terms(node, symbols, uses, keep)
                stack.extend((parent, False) for parent in parents if parent not in memo)
                continue
            if node in terms:
                memo[node] = algebra.add(*(memo[t] for t in terms.pop(node)))
                continue
            memo[node] = _translate(node, [memo[p] for p in node.inputs], algebra)
    return [memo[root] for root in roots]


class TooLong(LimitExceeded):
    """A derivative with more operations than a caller's budget: not read (check's feedback must stay cheap)."""

    def __init__(self, operations: int) -> None:
        super().__init__(f"the derivative is too long to print here ({operations:,} operations); "
                         "gradcalc diff prints it")
        self.operations = operations


def operations(node: Node, symbols: dict[Node, str], budget: int | None = None) -> int:
    """How many operations the expression of a graph node is read from (counted up to budget + 1)."""
    seen: set[Node] = set()
    stack = [node]
    while stack and (budget is None or len(seen) <= budget):
        current = stack.pop()
        if current in seen or current in symbols or current.op is None:
            continue
        seen.add(current)
        stack.extend(current.inputs)
    return len(seen)


def within(node: Node, symbols: dict[Node, str], budget: int | None) -> None:
    """Refuse (TooLong) a derivative past a budget of operations, before anything is read."""
    if budget is not None and operations(node, symbols, budget) > budget:
        raise TooLong(operations(node, symbols))


def _uses(roots: list[Node], symbols: dict[Node, str]) -> dict[Node, int]:
    """How many times each node is an input in the graph below the roots (symbols are not looked into)."""
    uses: dict[Node, int] = {}
    seen: set[Node] = set()
    stack = list(roots)
    while stack:
        node = stack.pop()
        if node in seen or node in symbols or node.op is None:
            continue
        seen.add(node)
        for parent in node.inputs:
            uses[parent] = uses.get(parent, 0) + 1
            stack.append(parent)
    return uses


def _terms(node: Node, symbols: dict[Node, str], uses: dict[Node, int], keep: set[Node]) -> list[Node]:
    """The terms of a sum, left to right, looking through the sums used nowhere else.

    A gradient that many paths reach is accumulated one term at a time, ((a + b) + c) + ...: read
    one addition at a time, each partial sum copies all the terms before it, n² work and memory for
    n terms (a loop of 5,000 steps took 20 s and 0.7 GB). Read as one sum it is n, and the same sum:
    the terms meet in the same order.
    """
    found: list[Node] = []
    stack = list(reversed(node.inputs))
    while stack:
        current = stack.pop()
        if current.op is not None and current.op.name == "add" and uses.get(current) == 1 \
                and current not in symbols and current not in keep:
            stack.extend(reversed(current.inputs))
        else:
            found.append(current)
    return found


def _translate(node: Node, args: list[Expr], algebra: Algebra) -> Expr:
    name, shape, params = node.op.name, tuple(node.shape), node.params  # type: ignore[union-attr]
    if name == "add":
        return algebra.add(*args)
    if name == "sub":
        return algebra.add(args[0], algebra.neg(args[1]))
    if name == "mul":
        return algebra.mul(*args)
    if name == "div":
        return algebra.mul(args[0], algebra.pow(args[1], algebra.num(-1.0)))
    if name == "pow":
        return algebra.pow(*args)
    if name == "neg":
        return algebra.neg(args[0])
    if name == "broadcast_to":
        return algebra.broadcast(args[0], shape)
    if name in ("reshape", "squeeze", "unsqueeze"):  # squeeze and unsqueeze are reshapes by other names
        return _reshape(args[0], shape, algebra)
    if name == "transpose" and len(shape) == 2 and isinstance(args[0], Call) and args[0].fn == "transpose" \
            and len(args[0].shape) == 2:
        return args[0].args[0]  # (Wᵀ)ᵀ is W
    if name == "transpose" and len(shape) == 2 and isinstance(args[0], Call) and args[0].fn == "reshape" \
            and len(args[0].args[0].shape) == 1:
        return _reshape(args[0].args[0], shape, algebra)  # a row made of a vector, turned: a column
    if name == "matmul":
        return _translate_matmul(args[0], args[1], shape, algebra)
    if name == "sum_to" and args[0].shape == shape:
        return args[0]
    return algebra.call(name, tuple(args), params, shape)


def _translate_matmul(left: Expr, right: Expr, shape: tuple[int, ...], algebra: Algebra) -> Expr:
    """left @ right, with what the matmul rule makes for its own sake seen through."""
    # A product with a matrix of one repeated number c and an inner size of 1 is c times the other.
    if _repeated_number(right) and len(right.shape) == 2 and right.shape[0] == 1 and len(left.shape) == 2:
        return algebra.broadcast(algebra.mul(left, _unbroadcast(right)), shape)
    if _repeated_number(left) and len(left.shape) == 2 and left.shape[1] == 1 and len(right.shape) == 2:
        return algebra.broadcast(algebra.mul(_unbroadcast(left), right), shape)
    # c*ones(m, k) @ B sums B's rows; A @ c*ones(k, n) sums A's columns.
    if _repeated_number(left) and len(left.shape) == 2 and len(right.shape) == 2:
        total = algebra.call("sum", (right,), ((0,), True), (1, right.shape[1]))
        return algebra.broadcast(algebra.mul(_unbroadcast(left), total), shape)
    if _repeated_number(right) and len(right.shape) == 2 and len(left.shape) == 2:
        total = algebra.call("sum", (left,), ((1,), True), (left.shape[0], 1))
        return algebra.broadcast(algebra.mul(_unbroadcast(right), total), shape)
    return algebra.call("matmul", (left, right), (), shape)


def _scaled(expr: Expr, algebra: Algebra) -> tuple[float, Expr]:
    """(c, e) with expr = c*e, c the number a product, or every term of a sum, is scaled by."""
    inner = _unbroadcast(expr)
    if isinstance(inner, Mul) and inner.coefficient != 1 and inner.shape == expr.shape:
        return inner.coefficient, algebra.broadcast(algebra.mul(*inner.factors), expr.shape)
    if isinstance(inner, Add) and inner.shape == expr.shape:
        magnitudes = {abs(c) for _, c in inner.terms} | ({abs(inner.constant)} if inner.constant else set())
        if len(magnitudes) == 1 and (common := next(iter(magnitudes))) != 1 and math.isfinite(common) and common:
            return common, algebra.add(algebra.num(inner.constant / common),
                                       *(algebra.mul(algebra.num(c / common), t) for t, c in inner.terms))
    return 1.0, expr


def _reshape(value: Expr, shape: tuple[int, ...], algebra: Algebra) -> Expr:
    """reshape, seeing through what the matmul and reduction rules reshape for their own sake."""
    if value.shape == shape:
        return value
    inner = _unbroadcast(value)
    if inner.shape == ():  # one number in any shape is a broadcast
        return algebra.broadcast(inner, shape)
    if isinstance(value, Call) and value.fn == "reshape":
        return _reshape(value.args[0], shape, algebra)
    if isinstance(value, Call) and value.fn == "matmul" and len(shape) == 1:
        left, right = value.args
        # (A @ v[:, None])[:, 0] is A @ v, and (v[None, :] @ B)[0] is v @ B: undo the rule's promotion.
        if _is_promoted_vector(right, column=True) and len(left.shape) == 2:
            return algebra.call("matmul", (left, right.args[0]), (), shape)
        if _is_promoted_vector(left, column=False) and len(right.shape) == 2:
            return algebra.call("matmul", (left.args[0], right), (), shape)
    return algebra.call("reshape", (value,), (shape,), shape)


def _repeated_number(expr: Expr) -> bool:
    return isinstance(_unbroadcast(expr), Num)


def _outer(expr: Call) -> tuple[Expr, Expr] | None:
    """(a, b) where expr is reshape(a, [n, 1]) @ reshape(b, [1, m]) for vectors a and b (the matmul rule's
    promotion), else None."""
    left, right = expr.args
    if _is_promoted_vector(left, column=True) and _is_promoted_vector(right, column=False):
        return left.args[0], right.args[0]
    return None


def _is_promoted_vector(expr: Expr, column: bool) -> TypeGuard[Call]:
    if not (isinstance(expr, Call) and expr.fn == "reshape" and len(expr.args[0].shape) == 1):
        return False
    return expr.shape == ((expr.args[0].shape[0], 1) if column else (1, expr.args[0].shape[0]))


def shared(roots: list[Expr], taken: set[str]) -> dict[Expr, str]:
    """Names for subexpressions used more than once and worth naming, children first."""
    uses: dict[Expr, int] = {}
    order: list[Expr] = []
    size: dict[Expr, int] = {}
    for root in roots:
        stack: list[tuple[Expr, bool]] = [(root, False)]
        while stack:
            expr, ready = stack.pop()
            if ready:
                size[expr] = 1 + sum(size[c] for c in _children(expr))
                order.append(expr)
                continue
            uses[expr] = uses.get(expr, 0) + 1
            if uses[expr] > 1:
                continue
            stack.append((expr, True))
            stack.extend((c, False) for c in _children(expr))
    names = (f"t{i}" for i in itertools.count(1))
    chosen: dict[Expr, str] = {}
    for expr in order:
        if uses[expr] > 1 and size[expr] >= 4 and expr not in roots:
            name = next(names)
            while name in taken:
                name = next(names)
            chosen[expr] = name
    return chosen


def _children(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, Add):
        return tuple(t for t, _ in expr.terms)
    if isinstance(expr, Mul):
        return expr.factors
    if isinstance(expr, Pow):
        return (expr.base, expr.exponent)
    if isinstance(expr, Call):
        return expr.args
    return ()


# --- printing -------------------------------------------------------------------------------

# Constants derivatives bring in, by name: d/dx e^x has no 2.718281828459045 in it, d/dx 2^x a log(2).
_NAMED = {math.e: ("e", "e"), math.pi: ("pi", r"\pi"), math.log(2): ("log(2)", r"\ln 2"),
          math.log(10): ("log(10)", r"\ln 10"), 1 / math.log(2): ("1/log(2)", r"\frac{1}{\ln 2}"),
          1 / math.log(10): ("1/log(10)", r"\frac{1}{\ln 10}")}


def number(value: float, latex: bool = False) -> str:
    """Exact and short: repr's shortest round-trip digits, without a trailing .0; e, pi, log(2) by name;
    infinities and NaN as the constants inf and nan (1e309 in a program is inf)."""
    if not math.isfinite(value):
        if math.isnan(value):
            return r"\mathrm{NaN}" if latex else "nan"
        return ("-" if value < 0 else "") + (r"\infty" if latex else "inf")
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    named = _NAMED.get(abs(value))
    if named is not None:
        return ("-" if value < 0 else "") + named[latex]
    return repr(value)


def ratio(value: float, decimal: bool = False) -> tuple[int, int] | None:
    """(p, q) where value is exactly the double p/q gives and q is small (1/2, 3/4, 2/3), except q a multiple of 5
    dividing 100 (0.2, 0.1, 0.05, 0.03: decimals as programs write them); with decimal, only where the decimal
    is long (2/3, not 0.5)."""
    if not math.isfinite(value) or value == int(value) or (decimal and len(repr(abs(value))) <= 8):
        return None
    # The continued fraction's convergents p/q (Fraction.limit_denominator does the same, 4x slower).
    target, x = abs(value), abs(value)
    p0, q0, p1, q1 = 0, 1, 1, 0
    while True:
        whole = math.floor(x)
        p0, q0, p1, q1 = p1, q1, whole * p1 + p0, whole * q1 + q0
        if q1 > _DENOMINATORS:
            return None
        if p1 / q1 == target:
            if q1 in _DECIMAL_DENOMINATORS:  # a decimal a program writes: 0.2, not 1/5
                return None
            return (p1 if value > 0 else -p1), q1
        rest = x - whole
        if rest * (_DENOMINATORS + 1) <= 1:  # the next denominator would pass the limit (or 1/rest overflow)
            return None
        x = 1 / rest


def coefficient(value: float, decimal: bool = False) -> str:
    """A number as a factor: 1/2 and 2/3 rather than 0.5 and 0.6666666666666666 (the same doubles), 2*sqrt(2)
    and pi/2 rather than their digits; with decimal, 0.5 (only long decimals as fractions) and digits."""
    return _numeral(value, decimal)[0]


def _numeral(value: float, decimal: bool = False) -> tuple[str, int]:
    """A number's text (as coefficient writes it) and its precedence: 9 for 2, pi, sqrt(2); 2 for 1/2, 2*e, -3."""
    found = ratio(value, decimal)
    if found is not None:
        return f"{found[0]}/{found[1]}", 2
    form = None if decimal or not math.isfinite(value) or value == int(value) else exact(abs(value))
    if form is not None:
        return ("-" if value < 0 else "") + form.text, 2 if value < 0 else form.precedence
    return number(value), 9 if value >= 0 or math.isnan(value) else 2


@dataclass(frozen=True)
class Exact:
    """A number as a rational multiple of a constant a program writes: 2*sqrt(2), pi/2, 1/sqrt(3), 3*log(2)/4."""

    text: str
    latex: str
    precedence: int  # of text: 9 for an atom (sqrt(2), pi), 4 for a power (pi^2), 2 for a product or quotient
    latex_precedence: int


def _irrationals() -> list[tuple[float, str, str, int]]:
    """The constants exact() writes numbers with: (value as gradcalc computes it, text, LaTeX, precedence)."""
    found: list[tuple[float, str, str, int]] = [
        (math.pi, "pi", r"\pi", 9), (math.e, "e", "e", 9), (math.pi ** 2, "pi^2", r"\pi^{2}", 4),
        (math.e ** 2, "e^2", "e^{2}", 4), (math.log(2), "log(2)", r"\ln 2", 9), (math.log(3), "log(3)", r"\ln 3", 9),
        (math.log(10), "log(10)", r"\ln 10", 9), (math.sqrt(math.pi), "sqrt(pi)", r"\sqrt{\pi}", 9),
        (math.sqrt(2 * math.pi), "sqrt(2*pi)", r"\sqrt{2 \pi}", 9)]
    # square roots of the square-free numbers (sqrt(8) is 2*sqrt(2)), cube roots of the cube-free ones
    found += [(math.sqrt(n), f"sqrt({n})", rf"\sqrt{{{n}}}", 9) for n in range(2, 51)
              if all(n % (k * k) for k in range(2, 8))]
    found += [(n ** (1 / 3), f"{n}^(1/3)", rf"\sqrt[3]{{{n}}}", 4) for n in range(2, 11) if n != 8]
    return found


_IRRATIONALS = _irrationals()
_CONSTANT_VALUES = B.host.array([constant for constant, *_ in _IRRATIONALS])
_QS = B.host.arange(1.0, _DENOMINATORS + 1)
_NUMERATORS = 10_000  # 100*sqrt(2), not 7071067811*sqrt(2)/5000000000


@functools.lru_cache(maxsize=4096)
def exact(value: float) -> Exact | None:
    """A positive number written exactly with one constant of _IRRATIONALS: p*K/q or p/(q*K), q at most 100.

    Read back, the text evaluates to the same double, or (where the program computed it in another order)
    to within a few units in the last place. The shortest form wins (sqrt(2), not 2/sqrt(2)); of two as
    short, the one that gives the very double (1/sqrt(2) and sqrt(2)/2 differ in the last bit: each prints
    as the program wrote it)."""
    best: tuple[tuple[int, bool], Exact] | None = None
    # Which constants come near at all, for every denominator at once (array arithmetic): most numbers
    # have none, and looking at each constant in turn cost a millisecond a number.
    with B.errstate():  # 1e308/log(2) overflows: inf is near no integer, and says nothing
        scaled = B.host.concatenate([value / _CONSTANT_VALUES, value * _CONSTANT_VALUES])[:, None] * _QS
        near = B.host.abs(scaled - B.host.rint(scaled)) <= 1e-12 * scaled
    for row in B.host.flatnonzero(near.any(axis=1)).tolist():
        inverse = row >= len(_IRRATIONALS)
        constant, text, latex, precedence = _IRRATIONALS[row % len(_IRRATIONALS)]
        found = _near_ratio(value * constant if inverse else value / constant)
        if found is None:
            continue
        p, q = found
        back = p / (q * constant) if inverse else p * constant / q  # in the order the text is evaluated
        if abs(back - value) > 4 * math.ulp(value):
            continue
        form = _inverse_form(p, q, text, latex) if inverse else _multiple_form(p, q, text, latex, precedence)
        rank = (len(form.text), back != value)
        if best is None or rank < best[0]:
            best = rank, form
    return None if best is None else best[1]


def _multiple_form(p: int, q: int, text: str, latex: str, precedence: int) -> Exact:
    """p*K/q: 2*sqrt(2), sqrt(3)/3, pi."""
    if p == 1 and q == 1:
        return Exact(text, latex, precedence, 9 if precedence == 9 and not latex.startswith(r"\ln") else 2)
    written = text if p == 1 else f"{p}*{text}"
    numerator = latex if p == 1 else f"{p} {latex}"
    if q == 1:
        return Exact(written, numerator, 2, 2)
    return Exact(f"{written}/{q}", rf"\frac{{{numerator}}}{{{q}}}", 2, 2)


def _inverse_form(p: int, q: int, text: str, latex: str) -> Exact:
    """p/(q*K): 1/sqrt(3), 2/(3*pi)."""
    if q == 1:
        return Exact(f"{p}/{text}", rf"\frac{{{p}}}{{{latex}}}", 2, 2)
    return Exact(f"{p}/({q}*{text})", rf"\frac{{{p}}}{{{q} {latex}}}", 2, 2)


def _near_ratio(value: float) -> tuple[int, int] | None:
    """(p, q), q at most 100 and p at most _NUMERATORS, with p/q within a few units in the last place of value."""
    x = value
    p0, q0, p1, q1 = 0, 1, 1, 0
    while True:
        whole = math.floor(x)
        p0, q0, p1, q1 = p1, q1, whole * p1 + p0, whole * q1 + q0
        if q1 > _DENOMINATORS or p1 > _NUMERATORS:
            return None
        if p1 and abs(p1 / q1 - value) <= 4 * math.ulp(value):
            return p1, q1
        rest = x - whole
        if rest * (_DENOMINATORS + 1) <= 1:
            return None
        x = 1 / rest


class Printer:
    """gradcalc syntax: the printed text evaluates back to the same values with `gradcalc eval -e`."""

    def __init__(self, names: dict[Expr, str], pulled: frozenset[str] = frozenset(), decimal: bool = False) -> None:
        self.decimal = decimal  # numbers as decimals (0.5), not fractions (1/2): diff --decimal
        self.names = names
        self.pulled = pulled  # symbols written once in front of a sum they are a factor of every term of

    def top(self, expr: Expr) -> str:
        return self.show(expr, 0)

    def _broadcast(self, value: Expr, shape: tuple[int, ...]) -> str:
        """A value spread over a shape, written so that it evaluates to that shape."""
        ones = f"ones({', '.join(map(str, shape))})"
        if isinstance(value, Num):
            return ones if value.value == 1 else f"{coefficient(value.value, self.decimal)}*{ones}"
        return f"{self.show(value, 2)}*{ones}"

    def show(self, expr: Expr, context: int, named: bool = True) -> str:
        """Text of expr, parenthesised if its precedence is below the context's."""
        if named and expr in self.names:
            return self.names[expr]
        text, precedence = self._text(expr)
        return f"({text})" if precedence < context else text

    def _text(self, expr: Expr) -> tuple[str, int]:
        if isinstance(expr, Num):
            return _numeral(expr.value, self.decimal)
        if isinstance(expr, Sym):
            return expr.name, 9
        if isinstance(expr, Const) and expr.array.size == 0:  # no entries to write: its shape is all there is
            return f"zeros({', '.join(map(str, expr.shape))})", 9
        if isinstance(expr, Const):
            return _literal(B.to_host(expr.array).tolist()), 9
        if isinstance(expr, Add):
            pulled = self._pulled_factor(expr)
            if pulled is not None:  # dL_dd*w1*w3 + dL_dd*w2*w4 is dL_dd*(w1*w3 + w2*w4): the chain rule's shape
                inner = Add(0.0, tuple((_without(t, pulled), c) for t, c in expr.terms))
                return self._factored(self.show(pulled, 3), self.show(inner, 0)), 2
            factored = self._common_factors(expr)
            if factored is not None:  # x*sigmoid(z) - x*y is (sigmoid(z) - y)*x, as the textbook writes it
                return self._product(factored), 2
            common = _common_coefficient(expr)
            if common is not None:  # 2/3*b + 2/3*w*x - 2/3*y is 2/3*(b + w*x - y)
                return self._scaled_sum(common, self._sum(_divided(expr, common))), 2
            return self._sum(expr), 1
        if isinstance(expr, Mul):
            return self._product(expr), 2
        if isinstance(expr, Pow):
            return self._power(expr)
        return self._call(expr)  # type: ignore[arg-type]

    def _number(self, value: float) -> str:
        return coefficient(value, self.decimal)

    def _scaled_sum(self, scale: float, inner: str) -> str:
        return self._factored(coefficient(scale, self.decimal), inner)

    def _factored(self, factor: str, inner: str) -> str:
        return f"{factor}*({inner})"

    def _pulled_factor(self, expr: Add) -> Sym | None:
        """A symbol of `pulled` that is a factor (to the first power) of each of the sum's two or more terms."""
        if not self.pulled or expr.constant or len(expr.terms) < 2:
            return None
        shared: set[Sym] | None = None
        for term, _ in expr.terms:
            factors = {f for f in (term.factors if isinstance(term, Mul) else (term,))
                       if isinstance(f, Sym) and f.name in self.pulled}
            shared = factors if shared is None else shared & factors
            if not shared:
                return None
        return min(shared, key=lambda f: f.name) if shared else None

    def _common_factors(self, expr: Add) -> Mul | None:
        """A sum whose every term has the same factors, as the sum of the rest times them, or None."""
        if expr.constant or len(expr.terms) < 2 or any(t in self.names for t, _ in expr.terms):
            return None
        shared: list[Expr] | None = None
        for term, _ in expr.terms:
            factors = term.factors if isinstance(term, Mul) else (term,)
            shared = [f for f in factors if not isinstance(f, Num)] if shared is None else \
                [f for f in shared if any(f is g for g in factors)]
            if not shared:
                return None
        terms, constant = list(expr.terms), 0.0
        for factor in shared:  # type: ignore[union-attr]
            terms = [(_without(t, factor), c) for t, c in terms]
        rest = []
        for term, c in terms:
            if isinstance(term, Num):
                constant += c * term.value
            elif isinstance(term, Mul) and not term.factors:
                constant += c * term.coefficient
            elif isinstance(term, Add) and term not in self.names:  # (x + 2)*e^x, not ((x + 1) + 1)*e^x
                constant += c * term.constant
                rest += [(t, c * tc) for t, tc in term.terms]
            else:
                rest.append((term, c))
        if not constant and len(rest) == 1 and not isinstance(rest[0][0], (Add, Mul)):  # (x - 1 + 1)*e^x is x*e^x
            return Mul(rest[0][1], (rest[0][0], *shared))  # type: ignore[misc]
        sign = -1.0 if all(c < 0 for _, c in rest) and constant <= 0 else 1.0  # -(a + b)*x, not (-a - b)*x
        inner = Add(sign * constant, tuple((t, sign * c) for t, c in rest))
        return Mul(sign, (inner, *shared))  # type: ignore[misc]

    def _pull_common(self, expr: Mul) -> Mul:
        """x*(2/3*b + 2/3*y) written as 2/3*x*(b + y): a sum's shared coefficient joins the product's."""
        scale, factors = expr.coefficient, []
        for factor in expr.factors:
            common = _common_coefficient(factor) if isinstance(factor, Add) and factor not in self.names else None
            if common is None or not isinstance(factor, Add):
                factors.append(factor)
                continue
            scale *= common
            factors.append(_divided(factor, common))
        return expr if scale == expr.coefficient else Mul(scale, tuple(factors))

    def _sum(self, expr: Add) -> str:
        parts: list[str] = []
        pieces = [(self._term(t, abs(c)), c < 0) for t, c in expr.terms]
        if expr.constant:  # last, unless that would start with a minus: 1 - x^2, not -x^2 + 1
            constant = (self._number(abs(expr.constant)), expr.constant < 0)
            pieces.insert(0 if pieces[0][1] and expr.constant > 0 else len(pieces), constant)
        if pieces[0][1]:  # a plus term first where there is one: x - w, sigmoid(z) - y
            first = next((i for i, (_, negative) in enumerate(pieces) if not negative), 0)
            pieces.insert(0, pieces.pop(first))
        for i, (text, negative) in enumerate(pieces):
            parts.append(("-" if negative else "") + text if i == 0 else (" - " if negative else " + ") + text)
        return "".join(parts)

    def _term(self, term: Expr, scale: float) -> str:
        if scale == 1 or term in self.names:
            body = self.show(term, 2)
            return body if scale == 1 else f"{coefficient(scale, self.decimal)}*{body}"
        factors = term.factors if isinstance(term, Mul) else (term,)
        return self._product(Mul(scale * (term.coefficient if isinstance(term, Mul) else 1), factors))

    def _product(self, expr: Mul) -> str:
        expr = self._pull_common(expr)
        over, under = _fraction(expr)
        sign = "-" if expr.coefficient < 0 else ""
        magnitude = abs(expr.coefficient)
        top = [coefficient(magnitude, self.decimal)] if magnitude != 1 or not over else []
        top += [self.show(f, 2 if i == 0 and not top else 3) for i, f in enumerate(over)]
        text = "*".join(top) if top else "1"
        if under:
            bottom = "*".join(self.show(f, 3) for f in under)
            text += f"/{bottom}" if len(under) == 1 and not isinstance(under[0], Mul) else f"/({bottom})"
        return sign + text

    def _power(self, expr: Pow) -> tuple[str, int]:
        if isinstance(expr.exponent, Num) and expr.exponent.value == 0.5:
            return f"sqrt({self.show(expr.base, 0)})", 9
        if isinstance(expr.exponent, Num) and expr.exponent.value < 0:  # x^-2 reads as 1/x^2
            return self._product(Mul(1.0, (expr,))), 2
        base = self.show(expr.base, 9)
        exponent = self.show(expr.exponent, 9)
        return f"{base}^{exponent}", 4

    def _call(self, expr: Call) -> tuple[str, int]:
        fn, args, params = expr.fn, expr.args, expr.params
        if fn in _COMPARE:
            return f"{self.show(args[0], 2)} {_COMPARE[fn].text} {self.show(args[1], 2)}", 0
        if fn in _LOGIC:  # x and y, not x
            if len(args) == 1:
                return f"{_LOGIC[fn].text} {self.show(args[0], 1)}", 0
            return f" {_LOGIC[fn].text} ".join(self.show(a, 1) for a in args), 0
        if fn == "matmul":
            if (vectors := _outer(expr)) is not None:  # a column times a row: the outer product of two vectors
                return f"outer({self.show(vectors[0], 0)}, {self.show(vectors[1], 0)})", 9
            return f"{self.show(args[0], 3)} @ {self.show(args[1], 3)}", 2
        if fn == "broadcast_to":
            return self._broadcast(args[0], params[0]), 9 if isinstance(args[0], Num) and args[0].value == 1 else 2
        if fn == "index":
            return f"{self.show(args[0], 9)}[{_key(params[0])}]", 9
        if fn == "remainder":
            return f"{self.show(args[0], 3)} % {self.show(args[1], 3)}", 2
        if fn == "floor_divide":
            return f"{self.show(args[0], 3)} // {self.show(args[1], 3)}", 2
        if fn == "index_put":  # y with y[key] = value written: no gradcalc expression says it
            value = args[1]  # a number written into every entry picked: the number (broadcasting says the rest)
            if isinstance(value, Call) and value.fn == "broadcast_to" and isinstance(value.args[0], Num):
                value = value.args[0]
            return f"index_put({self.show(args[0], 0)}, [{_key(params[0])}], {self.show(value, 0)})", 9
        if fn == "transpose":
            axes = params[0]
            if axes is None:
                return f"{self.show(args[0], 9)}.T", 9
            swapped = [i for i, a in enumerate(axes) if a != i]
            if len(axes) == 2:
                return f"{self.show(args[0], 9)}.T", 9
            return f"transpose({self.show(args[0], 0)}, {swapped[0]}, {swapped[-1]})", 9
        if fn == "reshape":
            return f"reshape({self.show(args[0], 0)}, {list(params[0])})", 9
        if fn == "stack":
            return "[" + ", ".join(self.show(a, 0) for a in args) + "]", 9
        if fn == "sum_to":
            return self._sum_to(args[0], params[0]), 9
        if fn == "scatter" and (hot := _one_hot(expr)) is not None:
            literal = _literal(hot)
            value = args[0]
            if isinstance(value, Num) and value.value == 1:
                return literal, 9
            return f"{self.show(value, 3)}*{literal}", 2
        if fn in _REDUCTIONS:
            axis, keepdims = params
            extra = "" if axis is None else f", axis={list(axis) if isinstance(axis, tuple) else axis}"
            extra += ", keepdims=1" if keepdims else ""
            return f"{fn}({self.show(args[0], 0)}{extra})", 9
        if fn == "softmax":
            return f"softmax({self.show(args[0], 0)}, axis={params[0]})", 9
        if fn == "scatter" and any(isinstance(k, tuple) for k in params[0]):  # an array index's, as written
            return f"scatter({self.show(args[0], 0)}, [{_key(params[0])}], {list(params[1])})", 9
        if fn == "einsum":
            return f"einsum({', '.join([repr(params[0])] + [self.show(a, 0) for a in args])})", 9
        if fn in _KEYWORDS:  # issue 25's functions, in the keywords a program writes them with
            shown = [self.show(a, 0) for a in args]
            if fn in ("concatenate", "stack_axis"):
                shown = ["[" + ", ".join(shown) + "]"]
            called = {"stack_axis": "stack", "norm_ord": "norm"}.get(fn, fn)
            return f"{called}({', '.join(shown + keywords(fn, params))})", 9
        inner = ", ".join(self.show(a, 0) for a in args)
        extra = "".join(f", {p!r}" for p in params)
        return f"{fn}({inner}{extra})", 9

    def _sum_to(self, value: Expr, shape: tuple[int, ...]) -> str:
        lead = len(value.shape) - len(shape)
        axes = list(B.summed_axes(value.shape, shape))
        inner = self.show(value, 0)
        if not shape:
            return f"sum({inner})"
        shown = axes[0] if len(axes) == 1 else axes
        if len(axes) == lead:  # only leading axes go (a bias's batch): a plain sum over them
            return f"sum({inner}, axis={shown})"
        if lead == 0:  # only size-1 axes: keepdims gives the shape
            return f"sum({inner}, axis={shown}, keepdims=1)"
        return f"reshape(sum({inner}, axis={axes}, keepdims=1), {list(shape)})"


def _fraction(expr: Mul) -> tuple[list[Expr], list[Any]]:
    over: list[Expr] = []
    under: list[Any] = []
    for factor in expr.factors:
        if isinstance(factor, Pow) and isinstance(factor.exponent, Num) and factor.exponent.value < 0:
            e = -factor.exponent.value
            under.append(factor.base if e == 1 else _Positive(factor.base, e))
        else:
            over.append(factor)
    return over, under


class _Positive(Pow):
    """base^e with e > 0, made only for printing a denominator (never interned)."""

    def __init__(self, base: Expr, exponent: float) -> None:
        super().__init__(base, Num(exponent))
        self.exponent.shape, self.exponent.order = (), (0, exponent)
        self.shape, self.order = base.shape, base.order


# Issue 25's functions whose params a program writes as keywords: each param's name, and its default (not shown).
_KEYWORDS: dict[str, tuple[tuple[str, Any], ...]] = {
    "var": (("axis", None), ("keepdims", False), ("ddof", 0)),
    "std": (("axis", None), ("keepdims", False), ("ddof", 0)),
    "flip": (("axis", None),), "cumsum": (("axis", None),), "cumprod": (("axis", None),),
    "argmax": (("axis", None),), "argmin": (("axis", None),), "log_softmax": (("axis", None),),
    "concatenate": (("axis", 0),), "stack_axis": (("axis", 0),),
    "norm_ord": (("axis", None), ("keepdims", False), ("ord", None)),
    "cross_entropy": (("reduction", "mean"), ("", None)), "mse_loss": (("reduction", "mean"),),
    "logdet": (("", None),),
}


def keywords(fn: str, params: tuple) -> list[str]:
    """`name=value` for each of a call's params that is not its default (those named "" never show)."""
    shown = []
    for (name, default), value in zip(_KEYWORDS[fn], params, strict=True):
        if not name or value == default or (value is False and default is None):
            continue
        if isinstance(value, str):
            text = repr(value)
        elif isinstance(value, tuple):
            text = str(value[0]) if len(value) == 1 else str(list(value))
        else:
            text = str(int(value)) if isinstance(value, bool) else str(value)
        shown.append(f"{name}={text}")
    return shown


def _key(key: tuple) -> str:
    parts = []
    for k in key:
        if isinstance(k, tuple):  # an array index (Indices), as the list it was written as
            parts.append(_literal(list(k)))
        elif isinstance(k, slice):
            text = ("" if k.start is None else str(k.start)) + ":" + ("" if k.stop is None else str(k.stop))
            parts.append(text + (f":{k.step}" if k.step is not None else ""))
        else:
            parts.append(str(k))
    return ", ".join(parts)


def _nest(flat: list[float], shape: tuple[int, ...]) -> Any:
    if len(shape) <= 1:
        return flat
    step = len(flat) // shape[0]
    return [_nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]


def _without(term: Expr, factor: Expr) -> Expr:
    """A term with one factor taken out (for printing): dL_dd*w1*w3 without dL_dd is w1*w3."""
    if term is factor:
        return Num(1.0)
    assert isinstance(term, Mul)
    rest = tuple(f for f in term.factors if f is not factor)
    return rest[0] if len(rest) == 1 and term.coefficient == 1 else Mul(term.coefficient, rest)


def _divided(expr: Add, common: float) -> Add:
    """A sum with its shared coefficient taken out (for printing): 2/3*b + 2/3*y is 2/3 times b + y."""
    return Add(expr.constant / common, tuple((t, c / common) for t, c in expr.terms))


def _common_coefficient(expr: Add) -> float | None:
    """The magnitude all of a sum's terms (and its constant) share, where it is not 1 and is worth
    writing once: a mean's 2/3 on every term of a residual, the 2 of a square's derivative, a pi."""
    magnitudes = {abs(c) for _, c in expr.terms} | ({abs(expr.constant)} if expr.constant else set())
    if len(magnitudes) != 1 or len(expr.terms) + bool(expr.constant) < 2:
        return None
    (common,) = magnitudes
    if not math.isfinite(common) or common == 0:  # inf*x + inf*y: no factor to take out (inf/inf is nan)
        return None
    whole = common == int(common) or ((1 / common).is_integer() and 1 / common <= _DENOMINATORS)  # 2, 1/2
    return common if common != 1 and (whole or ratio(common) is not None or exact(common) is not None) else None


def _one_hot(expr: Call) -> list | None:
    """The nested list of zeros with one 1 where a scalar gradient scatters into a small tensor, or None."""
    args, params = expr.args, expr.params
    if args[0].shape != () or not all(isinstance(k, int) for k in params[0]) or math.prod(params[1]) > 64:
        return None
    hot = [0.0] * math.prod(params[1])
    flat = 0
    for k, n in zip(params[0], params[1]):
        flat = flat * n + k % n
    hot[flat] = 1.0
    return _nest(hot, params[1])


def _literal(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    return number(float(value))


_GREEK = {"α": r"\alpha", "β": r"\beta", "γ": r"\gamma", "δ": r"\delta", "ε": r"\epsilon", "η": r"\eta",
          "θ": r"\theta", "λ": r"\lambda", "μ": r"\mu", "σ": r"\sigma", "τ": r"\tau", "φ": r"\phi", "ω": r"\omega"}


def latex_name(name: str) -> str:
    """w1 -> w_{1}, x_max -> x_{max}, θ -> \\theta."""
    name = "".join(_GREEK.get(c, c) for c in name)
    head = name.rstrip("0123456789")
    if head != name and head.rstrip("_"):  # w1 and w_1 alike: w_{1}
        return f"{head.rstrip('_')}_{{{name[len(head):]}}}"
    if "_" in name.strip("_"):
        head, _, tail = name.partition("_")
        return f"{head}_{{{tail}}}"
    return name


def _axes_under(axes: Sequence[int], keepdims: bool = False) -> str:
    """A reduction's axes as LaTeX writes them under its operator: _{\\text{axis } 1}."""
    kept = r"\text{, kept}" if keepdims else ""
    return rf"_{{\text{{axis{'es' if len(axes) > 1 else ''} }} {', '.join(map(str, axes))}{kept}}}"


def _latex_coefficient(value: float, decimal: bool = False) -> str:
    return _latex_numeral(value, decimal)[0]


def _latex_numeral(value: float, decimal: bool = False) -> tuple[str, int]:
    """A number as LaTeX (\\frac{1}{2}, 2 \\sqrt{2}, \\pi) and its precedence, as _numeral for text."""
    sign = "-" if value < 0 else ""
    found = ratio(abs(value), decimal)
    if found is not None:
        return sign + rf"\frac{{{found[0]}}}{{{found[1]}}}", 2
    form = None if decimal or not math.isfinite(value) or value == int(value) else exact(abs(value))
    if form is not None:
        return sign + form.latex, 2 if value < 0 else form.latex_precedence
    if not math.isfinite(value):  # \infty, -\infty, \mathrm{NaN}
        return number(value, latex=True), 2 if value < 0 else 9
    named = abs(value) in _NAMED and abs(value) not in (math.e, math.pi)  # \ln 2, \frac{1}{\ln 2}: products
    return number(value, latex=True), 2 if value < 0 or named else 9


class LatexPrinter(Printer):
    """The same expressions as LaTeX: fractions, superscripts, subscripted names."""

    def _broadcast(self, value: Expr, shape: tuple[int, ...]) -> str:
        return self.show(value, 0)  # mathematics broadcasts silently

    def show(self, expr: Expr, context: int, named: bool = True) -> str:
        if named and expr in self.names:
            return latex_name(self.names[expr])
        text, precedence = self._text(expr)
        return rf"\left({text}\right)" if precedence < context else text

    def _text(self, expr: Expr) -> tuple[str, int]:
        if isinstance(expr, Num):
            return _latex_numeral(expr.value, self.decimal)
        if isinstance(expr, Const) and expr.array.size == 0:
            return rf"\operatorname{{zeros}}\left({', '.join(map(str, expr.shape))}\right)", 9
        if isinstance(expr, Sym):
            return latex_name(expr.name), 9
        if isinstance(expr, Const):
            return r"\begin{bmatrix}" + _latex_rows(B.to_host(expr.array)) + r"\end{bmatrix}", 9
        return super()._text(expr)

    def _term(self, term: Expr, coefficient: float) -> str:
        factors = term.factors if isinstance(term, Mul) and term not in self.names else (term,)
        scale = term.coefficient if isinstance(term, Mul) and term not in self.names else 1.0
        return self._product(Mul(coefficient * scale, factors))

    def _number(self, value: float) -> str:
        return _latex_coefficient(value, self.decimal)

    def _scaled_sum(self, scale: float, inner: str) -> str:
        return self._factored(_latex_coefficient(scale, self.decimal), inner)

    def _factored(self, factor: str, inner: str) -> str:
        return rf"{factor} \left({inner}\right)"

    def _product(self, expr: Mul) -> str:
        expr = self._pull_common(expr)
        over, under = _fraction(expr)
        magnitude = abs(expr.coefficient)
        sign = "-" if expr.coefficient < 0 else ""
        top = [_latex_coefficient(magnitude, self.decimal)] if magnitude != 1 or not over else []
        lone = not top and len(over) == 1  # a factor alone: a sum's term, or a numerator \frac sets apart
        text = top[0] if top else ""
        shape: tuple[int, ...] | None = None  # of the factors so far, where known (made while printing: not)
        for i, factor in enumerate(over):
            shown = self.show(factor, 3 if not lone else 0 if under else 2)
            own = getattr(factor, "shape", None)
            if shape is not None and own is not None and min(len(shape), len(own)) >= 1 and \
                    max(len(shape), len(own)) >= 2:
                # Side by side, a matrix and a non-scalar read as their matrix product (W x): their
                # elementwise product is written with ⊙, so that the LaTeX reads back as it means.
                text += r" \odot "
            elif text and text[-1].isdigit() and shown[0].isdigit():
                text += r" \cdot "  # 2 \cdot 3, not 23; \ln 2 \cdot 2^{x}
            elif text:
                text += " "
            text += shown
            shape = own if i == 0 else None if shape is None or own is None else _broadcast(shape, own)
        if under:
            # A denominator of one factor needs no brackets: \frac draws the bar.
            below = self.show(under[0], 0) if len(under) == 1 else " ".join(self.show(f, 3) for f in under)
            return sign + rf"\frac{{{text or '1'}}}{{{below}}}"
        return sign + (text or "1")

    def _power(self, expr: Pow) -> tuple[str, int]:
        if isinstance(expr.exponent, Num) and expr.exponent.value == 0.5:
            return rf"\sqrt{{{self.show(expr.base, 0)}}}", 9
        if isinstance(expr.exponent, Num) and expr.exponent.value < 0:
            return self._product(Mul(1.0, (expr,))), 2
        base = self.show(expr.base, 9)
        if isinstance(_unbroadcast(expr.base), (Pow, Call)) and "^" in base and not base.startswith(r"\left("):
            base = rf"\left({base}\right)"  # e^{x} raised again: TeX forbids a double superscript
        return f"{base}^{{{self.show(expr.exponent, 0)}}}", 4

    def _call(self, expr: Call) -> tuple[str, int]:
        fn, args = expr.fn, expr.args
        if fn in _LATEX_FUNCTIONS:
            return _LATEX_FUNCTIONS[fn].format(self.show(args[0], 0)), 9
        if fn == "matmul":
            if (vectors := _outer(expr)) is not None:  # a b^T
                return f"{self.show(vectors[0], 2)} {self.show(vectors[1], 9)}^{{T}}", 2
            return f"{self.show(args[0], 3)} {self.show(args[1], 3)}", 2
        if fn == "transpose" and (expr.params[0] is None or len(expr.params[0]) == 2):
            return f"{self.show(args[0], 9)}^{{T}}", 9
        if fn == "scatter" and (hot := _one_hot(expr)) is not None:  # g times a one-hot matrix, as LaTeX writes it
            matrix = r"\begin{bmatrix}" + _latex_rows(B.host.asarray(hot)) + r"\end{bmatrix}"
            value = args[0]
            if isinstance(value, Num) and value.value == 1:
                return matrix, 9
            return f"{self.show(value, 3)} {matrix}", 2
        if fn in _REDUCTIONS and _REDUCTIONS[fn].latex and expr.params[0] is None:  # \sum x: over everything
            return rf"{_REDUCTIONS[fn].latex} {self.show(args[0], 3)}", 2
        if fn == "sum_to":  # unbroadcasting: a sum over the axes the value was broadcast along
            under = _axes_under(B.summed_axes(args[0].shape, expr.params[0])) if expr.params[0] else ""
            return rf"\sum{under} {self.show(args[0], 3)}", 2
        if fn == "remainder":
            return rf"{self.show(args[0], 3)} \bmod {self.show(args[1], 3)}", 2
        if fn == "floor_divide":
            return rf"\left\lfloor \frac{{{self.show(args[0], 0)}}}{{{self.show(args[1], 0)}}} \right\rfloor", 9
        if fn in _COMPARE:  # 1 where it holds, else 0: Iverson's bracket, so a = b reads as no equation
            symbol = _COMPARE[fn].latex
            return rf"\left[{self.show(args[0], 2)} {symbol} {self.show(args[1], 2)}\right]", 9
        if fn in _LOGIC:
            if len(args) == 1:
                return rf"{_LOGIC[fn].latex} {self.show(args[0], 1)}", 0
            return f" {_LOGIC[fn].latex} ".join(self.show(a, 1) for a in args), 0
        if fn in _REDUCTIONS and expr.params[0] is not None:
            axis, keepdims = expr.params  # the axis is part of what it means: written under the operator
            word = _REDUCTIONS[fn].latex or rf"\operatorname{{{fn}}}"
            under = _axes_under(axis if isinstance(axis, tuple) else (axis,), keepdims)
            return rf"{word}{under} {self.show(args[0], 3)}", 2
        if fn in _KEYWORDS:
            inner = ", ".join([self.show(a, 0) for a in args] + keywords(fn, expr.params))
            word = fn.replace("_", r"\_")
            return rf"\operatorname{{{word}}}\left({inner}\right)", 9
        text, precedence = super()._call(expr)
        name = text.split("(", 1)[0]
        if name.isidentifier() and "(" in text:
            # the parameters too (a reshape's shape, an axis): without them the formula says something else
            inner = ", ".join([self.show(a, 0) for a in args] + [str(list(q)) if isinstance(q, tuple) else str(q)
                                                                 for q in expr.params if q is not None])
            return rf"\operatorname{{{name}}}\left({inner}\right)", 9
        return text, precedence


def _algebra(symbols: dict[Node, str]) -> Algebra:
    """An algebra that knows the graph nodes of the program's symbols (what sums to one reads)."""
    algebra = Algebra()
    algebra.defined = {name: node for node, name in symbols.items()}
    return algebra


def _system(node: Node, symbols: dict[Node, str], adjoints: dict[Node, str]) -> tuple[Expr, dict[str, Expr], Algebra]:
    """A derivative read with the gradients of kept nodes by name, and the definitions of those names it
    uses (and those they use), each simplified: the whole of what diff prints."""
    algebra = _algebra(symbols)
    (expr,) = read([node], {**symbols, **adjoints}, algebra)
    expr = algebra.tidy(expr)
    by_name = {name: adjoint for adjoint, name in adjoints.items()}
    definitions: dict[str, Expr] = {}
    pending = _symbols_in(expr) & set(by_name)
    while pending:
        name = pending.pop()
        if name in definitions:
            continue
        others = {a: n for a, n in adjoints.items() if n != name}
        (definition,) = read([by_name[name]], {**symbols, **others}, algebra)
        definitions[name] = algebra.tidy(definition)
        pending |= (_symbols_in(definitions[name]) & set(by_name)) - set(definitions)
    return expr, definitions, algebra


def _named_adjoints(node: Node, symbols: dict[Node, str], adjoints: dict[Node, str]) \
        -> tuple[dict[Node, str], Expr, dict[str, Expr], Algebra]:
    """The kept nodes' gradients to write by name, and the derivative so read (as _system): all of them,
    except those whose definition cancels against what uses it.

    dL_dd*(w1*w3 + w2*w4) reads as the chain rule, ∂L/∂d times ∂d/∂a, and stays so. But with p kept,
    ∂L/∂z of softmax cross-entropy is p*(dL_dp - sum(dL_dp*p)) with dL_dp = -Y/p, where written in
    place it is p - Y: the symbols cancel. A gradient is written in place where what uses it then has
    fewer symbols than writing its definition in place of its name, unsimplified, would give, and no
    more than it has with the name. Only what uses it is read again, so a long chain of kept nodes
    costs a reading of each, not of all.
    """
    named = dict(adjoints)
    expr, definitions, algebra = _system(node, symbols, named)
    by_name = {name: adjoint for adjoint, name in named.items()}
    names = {user: _symbols_in(found) for user, found in [("", expr), *definitions.items()]}  # what each uses
    for adjoint in sorted(adjoints, key=lambda a: a.seq)[:_INLINE_TRIES]:  # nearest the output first
        name = named[adjoint]
        if name not in definitions:
            continue  # not used
        users = {user: found for user, found in [("", expr), *definitions.items()]
                 if user != name and name in names[user]}
        if any(_size(found) >= _SIZE_CAP for found in users.values()):
            continue  # as tidy(): cancelling is for the small derivatives of exercises, and stays cheap
        body = _occurrences(definitions[name])
        uses = sum(_occurrences(found, name) for found in users.values())
        before = sum(_occurrences(found) for found in users.values())
        unchanged = before + uses * (body - 1)
        without = {a: n for a, n in named.items() if a is not adjoint}
        again = {}
        for user in users:
            others = {a: n for a, n in without.items() if n != user}
            (found,) = read([by_name[user] if user else node], {**symbols, **others}, algebra)
            again[user] = algebra.tidy(found)
        after = sum(_occurrences(found) for found in again.values())
        definition = definitions[name]
        one = isinstance(definition, Num) and definition.value == 1  # L = h: dL_dh*... is 1*...
        if one or (after < unchanged and after <= before):  # w*w as w^2 cancels nothing: what uses it must not grow
            named = without
            del definitions[name]
            names.update({user: _symbols_in(found) for user, found in again.items()})
            expr = again.pop("", expr)
            definitions.update(again)
    used, pending = set(), _symbols_in(expr) & set(definitions)
    while pending:  # a definition only what cancelled used is not written
        name = pending.pop()
        used.add(name)
        pending |= (names[name] & set(definitions)) - used
    return named, expr, {name: d for name, d in definitions.items() if name in used}, algebra


def _occurrences(expr: Expr, name: str | None = None) -> int:
    """How many times symbols (or the symbol of that name) are written in an expression, as a tree."""
    memo: dict[int, int] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:  # post-order, memoised: an interned expression is a graph, its tree may be exponential
        item, ready = stack.pop()
        if id(item) in memo:
            continue
        children = _children(item)
        if ready or not children:
            memo[id(item)] = sum(memo[id(c)] for c in children) + \
                (isinstance(item, Sym) and (name is None or item.name == name))
        else:
            stack.append((item, True))
            stack.extend((c, False) for c in children if id(c) not in memo)
    return memo[id(expr)]


def _symbols_in(expr: Expr) -> set[str]:
    found: set[str] = set()
    stack = [expr]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, Sym):
            found.add(item.name)
        stack.extend(_children(item))
    return found


def _latex_rows(host: Any) -> str:
    rows = host.reshape(host.shape[0], -1) if host.ndim > 1 else host.reshape(1, -1) if host.ndim == 1 else host
    return r" \\ ".join(" & ".join(number(float(v)) for v in row) for row in rows)


# --- the diff command's result ------------------------------------------------------------

@dataclass
class Derivative:
    """One derivative: its text (gradcalc syntax), its LaTeX, shared parts, and its value here."""

    of: str
    wrt: tuple[str, ...]
    text: str
    latex: str
    where: list[tuple[str, str, str]]  # (name, text, latex) of each shared subexpression, in order
    value: Any
    evaluable: bool  # False when a tensor operation has no gradcalc syntax (scatter)
    given: tuple[str, ...] = ()  # what the values make true and the text relies on: sum(Y) = 1
    # (text, LaTeX) with the shared parts written in place, or None past the limit of characters given; None
    # itself where the derivative names gradients (dL_dd), which are no shared parts.
    in_place: Callable[[int], tuple[str, str] | None] | None = field(default=None, repr=False, compare=False)


def _in_place(expr: Expr, decimal: bool, limit: int) -> tuple[str, str] | None:
    """expr printed whole, each shared part in place bracketed as the printers bracket any operand there (only
    where its place needs it), or None where the text is longer than limit (a part used twice in a part used
    twice doubles: the tree is measured first, a node a character at least, so no such text is printed)."""
    size: dict[Expr, int] = {}
    stack: list[tuple[Expr, bool]] = [(expr, False)]
    while stack:
        node, ready = stack.pop()
        if ready:
            size[node] = 1 + sum(size[c] for c in _children(node))
        elif node not in size:
            stack.append((node, True))
            stack.extend((c, False) for c in _children(node) if c not in size)
    if size[expr] > limit:
        return None
    text = Printer({}, decimal=decimal).top(expr)
    return None if len(text) > limit else (text, LatexPrinter({}, decimal=decimal).top(expr))


def _as_computed(expr: Expr, value: Any, algebra: Algebra) -> Expr:
    """A derivative that folded to a constant, as the value autograd computed wherever they differ.

    Folding x/x to 1 and x - x to 0 is right except where x is 0 or infinite, and there autograd's
    value is NaN: printing 1 would say the derivative is 1 where it is undefined (0/0). An expression
    in the variables keeps its form (its value here is printed beside it); a constant is only a value.
    """
    if _symbols_in(expr):
        return expr
    host = B.to_host(value)
    folded = _unbroadcast(expr)
    if isinstance(folded, Num):
        if bool(((host == folded.value) | (B.host.isnan(host) & math.isnan(folded.value))).all()):
            return expr
    elif bool(B.host.isfinite(host).all()):  # a tensor constant: folding makes no NaN of finite numbers
        return expr
    return algebra.const(host)


def text_of(node: Node, symbols: dict[Node, str], taken: set[str]) -> str:
    """Just the gradcalc text of a graph node's expression, shared parts inlined as `where` (the graph view)."""
    algebra = Algebra()
    (expr,) = read([node], symbols, algebra)
    expr = _as_computed(expr, node.value, algebra)
    names = shared([expr], taken)
    printer = Printer(names)
    text = printer.top(expr)
    if names:
        text += "  where " + ", ".join(f"{name} = {printer.show(sub, 0, named=False)}" for sub, name in names.items())
    return text


def describe(of: str, wrt: tuple[str, ...], node: Node, symbols: dict[Node, str], taken: set[str],
             adjoints: dict[Node, str] | None = None, inline: bool = False, decimal: bool = False) -> Derivative:
    """Read a derivative's graph node as a simplified, printable expression.

    `adjoints` names the gradients of kept intermediates (dL_dd for ∂L/∂d): the
    expression then reads ∂L/∂w1 = dL_dd*w3*a, with dL_dd defined after it,
    instead of expanding the chain rule into the leaves, except where written in
    place they cancel (_named_adjoints); `inline` writes them all in place.
    """
    adjoints = {a: name for a, name in (adjoints or {}).items() if a is not node}
    if inline:
        named: dict[Node, str] = {}
        expr, definitions, algebra = _system(node, symbols, named)
    else:
        named, expr, definitions, algebra = _named_adjoints(node, symbols, adjoints)
    expr = _as_computed(expr, node.value, algebra)
    names = shared([expr], taken)
    pulled = frozenset(named.values())  # ∂L/∂a = dL_dd*(...): the kept node's gradient in front
    text_printer, latex_printer = Printer(names, pulled, decimal), LatexPrinter(names, pulled, decimal)
    where = [(name, text_printer.show(sub, 0, named=False), latex_printer.show(sub, 0, named=False))
             for sub, name in names.items()]
    by_name = {name: adjoint for adjoint, name in named.items()}
    order = sorted(definitions, key=lambda n: by_name[n].seq)  # made first = nearer the output: defined first
    where = [(name, Printer({}, decimal=decimal).top(definitions[name]),
              LatexPrinter({}, decimal=decimal).top(definitions[name]))
             for name in order] + where
    text = text_printer.top(expr)
    latex = latex_printer.top(expr)
    where = _written(text, latex, where)
    evaluable = not any(f"{fn}(" in t for fn in ("scatter", "index_put") for t in [text, *(w[1] for w in where)])
    return Derivative(of, wrt, text, latex, where, B.to_host(node.value), evaluable,
                      tuple(algebra.given[name] for name in sorted(algebra.given)),
                      None if definitions else functools.partial(_in_place, expr, decimal))


def shortest(of: str, wrt: tuple[str, ...], node: Node, symbols: dict[Node, str], taken: set[str],
             adjoints: dict[Node, str] | None = None, budget: int | None = None, decimal: bool = False
             ) -> Derivative:
    """The derivative as it reads shortest (weight): in the leaves, in the program's intermediates with
    their gradients named (dL_dd) where they do not cancel, or with them all written in place; the first
    of these on a tie. `symbols` names the intermediates; the leaves' form is left out past the budget."""
    leaves = {n: name for n, name in symbols.items() if n.op is None}
    candidates = []
    try:
        within(node, leaves, budget)
        candidates.append(describe(of, wrt, node, leaves, taken, decimal=decimal))
    except TooLong:
        pass
    if len(leaves) < len(symbols):
        candidates += [describe(of, wrt, node, symbols, taken, adjoints, decimal=decimal),
                       describe(of, wrt, node, symbols, taken, adjoints, inline=True, decimal=decimal)]
    return min(candidates, key=weight)


def _written(text: str, latex: str, where: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """The where parts the text or the LaTeX uses, directly or through others: a shared 1/(1 - p)
    printed as a denominator, /(1 - p), leaves its name unused."""
    used: set[str] = set()
    pending = [(text, latex)]
    while pending:
        plain, typeset = pending.pop()
        words = set(_TOKENS.findall(plain))
        for name, body, body_latex in where:
            if name not in used and (name in words or latex_name(name) in typeset):
                used.add(name)
                pending.append((body, body_latex))
    return [part for part in where if part[0] in used]


def weight(derivative: Derivative) -> int:
    """How long a derivative reads: the names, numbers and operators of its text and its where parts."""
    return sum(len(_TOKENS.findall(text)) + 1 for text in [derivative.text, *(w[1] for w in derivative.where)])


_TOKENS = re.compile(r"[A-Za-z_]\w*|[0-9.]+(?:e[-+]?[0-9]+)?|[-+*/^@<>=!]+")
