"""The program's syntax tree: what parser.py builds, the checker checks and the interpreter runs."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar

from ..errors import Pos

# The operator of a product written side by side in a claim (2x, W x, δ xᵀ): INVISIBLE TIMES, as
# Unicode writes an implied product. Programs never have it; the interpreter gives it math's meaning.
JUXTAPOSED = "\u2062"


class _Node:
    """Equality and a repr field by field, as dataclasses give; plain classes import faster.

    (23 slotted dataclasses took 6.6 ms to create, a twelfth of gradcalc's start-up of its own.)
    """

    __slots__: tuple[str, ...] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value
    at: tuple[int, int, int]  # the place: a Pos, or the (line, column, width) a replayed statement leaves (see pos)

    def __eq__(self, other: Any) -> bool:
        return type(self) is type(other) and all(getattr(self, s) == getattr(other, s) for s in self._fields())

    def __repr__(self) -> str:
        fields = ("pos" if s == "at" else s for s in self._fields())
        return f"{type(self).__name__}({', '.join(f'{s}={getattr(self, s)!r}' for s in fields)})"

    @property
    def pos(self) -> Pos:
        """The node's place (line, column, width), named. The parser's replays leave a plain tuple: making a
        Pos costs twice a tuple, and eleven of them were a tenth of a chain statement's parse (#21)."""
        at = self.at
        if type(at) is not Pos:
            self.at = at = Pos._make(at)  # type: ignore[misc]  # `at` is a slot of each class with a place
        return at

    @pos.setter
    def pos(self, pos: Pos) -> None:
        self.at = pos  # type: ignore[misc]  # (as above)

    def _fields(self) -> tuple[str, ...]:
        """The slots of the class and of those it extends (Const extends Assign)."""
        return tuple(s for kind in reversed(type(self).__mro__) for s in getattr(kind, "__slots__", ()))


class Expr(_Node):
    """An expression; every kind has a `pos` for error messages."""

    __slots__ = ()


class Number(Expr):
    __slots__ = ("value", "text", "at")

    def __init__(self, value: float, text: str, pos: Pos) -> None:
        self.value = value
        self.text = text
        self.at = pos


class String(Expr):
    __slots__ = ("value", "at")

    def __init__(self, value: str, pos: Pos) -> None:
        self.value = value
        self.at = pos


class Name(Expr):
    __slots__ = ("name", "at")

    def __init__(self, name: str, pos: Pos) -> None:
        self.name = name
        self.at = pos


class Tensor(Expr):
    __slots__ = ("items", "at")

    def __init__(self, items: list[Expr], pos: Pos) -> None:
        self.items = items
        self.at = pos


class Unary(Expr):
    __slots__ = ("op", "operand", "at")

    def __init__(self, op: str, operand: Expr, pos: Pos) -> None:
        self.op = op  # "-" or "+"
        self.operand = operand
        self.at = pos


class Binary(Expr):
    __slots__ = ("op", "left", "right", "at")

    def __init__(self, op: str, left: Expr, right: Expr, pos: Pos) -> None:
        self.op = op  # + - * / @ ^  ("**" is stored as "^")
        self.left = left
        self.right = right
        self.at = pos


class Compare(Expr):
    __slots__ = ("ops", "operands", "at")

    def __init__(self, ops: list[str], operands: list[Expr], pos: Pos) -> None:
        self.ops = ops
        self.operands = operands
        self.at = pos


class BoolOp(Expr):
    __slots__ = ("op", "left", "right", "at")

    def __init__(self, op: str, left: Expr, right: Expr, pos: Pos) -> None:
        self.op = op  # "and" or "or"
        self.left = left
        self.right = right
        self.at = pos


class Not(Expr):
    __slots__ = ("operand", "at")

    def __init__(self, operand: Expr, pos: Pos) -> None:
        self.operand = operand
        self.at = pos


class Keyword(_Node):
    __slots__ = ("name", "value", "at")

    def __init__(self, name: str, value: Expr, pos: Pos) -> None:
        self.name = name
        self.value = value
        self.at = pos


class Call(Expr):
    __slots__ = ("name", "args", "keywords", "at")

    def __init__(self, name: str, args: list[Expr], keywords: list[Keyword], pos: Pos) -> None:
        self.name = name
        self.args = args
        self.keywords = keywords
        self.at = pos


class Slice(Expr):
    __slots__ = ("start", "stop", "step", "at")

    def __init__(self, start: Expr | None, stop: Expr | None, step: Expr | None, pos: Pos) -> None:
        self.start = start
        self.stop = stop
        self.step = step
        self.at = pos


class Index(Expr):
    __slots__ = ("target", "subscripts", "at")

    def __init__(self, target: Expr, subscripts: list[Expr], pos: Pos) -> None:
        self.target = target
        self.subscripts = subscripts
        self.at = pos


class Attribute(Expr):
    __slots__ = ("target", "name", "at")

    def __init__(self, target: Expr, name: str, pos: Pos) -> None:
        self.target = target
        self.name = name
        self.at = pos


class Conditional(Expr):
    """`a if cond else b`: one of two values by a single true/false condition (Python's; where() is elementwise)."""

    __slots__ = ("cond", "then", "orelse", "at")

    def __init__(self, cond: Expr, then: Expr, orelse: Expr, pos: Pos) -> None:
        self.cond = cond
        self.then = then
        self.orelse = orelse
        self.at = pos


class Ellipsis_(Expr):
    """`...` in a subscript: every dimension not indexed otherwise (x[..., 0])."""

    __slots__ = ("at",)

    def __init__(self, pos: Pos) -> None:
        self.at = pos


class Tuple(Expr):
    """`x, y` after return or on the right of `a, b = ...`: several values, never one expression's operand."""

    __slots__ = ("items", "at")

    def __init__(self, items: list[Expr], pos: Pos) -> None:
        self.items = items
        self.at = pos


class Stmt(_Node):
    """A statement. Each kind names the fields that are program code, which the walkers below read
    and nothing else: the expressions it evaluates and the blocks of statements it holds."""

    __slots__ = ()
    expressions: ClassVar[tuple[str, ...]]  # fields holding an Expr, in source order
    blocks: ClassVar[tuple[str, ...]]  # fields holding a list[Stmt], in source order


class Assign(Stmt):
    __slots__ = ("name", "op", "value", "at")
    expressions: ClassVar[tuple[str, ...]] = ("value",)
    blocks = ()

    def __init__(self, name: str, op: str, value: Expr, pos: Pos) -> None:
        self.name = name
        self.op = op  # "=", "+=", "-=", "*=", "/="
        self.value = value
        self.at = pos


class Const(Assign):
    """`const N = 4`: a top-level assignment whose value the program treats as data (PyTorch's
    requires_grad=False). An Assign too, so what reads assignments (names assigned, --set) reads it."""

    __slots__ = ()
    expressions = ("value",)
    blocks = ()

    def __init__(self, name: str, value: Expr, pos: Pos) -> None:
        super().__init__(name, "=", value, pos)


class IndexAssign(Assign):
    """`y[0] = 5`: a new value of y with those entries written (PyTorch's in-place write, as a graph records
    it). An Assign of y too, so what reads assignments sees y assigned here; never a leaf."""

    __slots__ = ("target",)
    expressions = ("target", "value")
    blocks = ()

    def __init__(self, target: Index, op: str, value: Expr, pos: Pos) -> None:
        assert isinstance(target.target, Name)
        super().__init__(target.target.name, op, value, pos)
        self.target = target


class Unpack(Stmt):
    """`a, b = 1, 2` or `u, v = f(x)`: each name's own assignment in `parts` (for what reads assignments),
    every right side computed before any name is assigned; `value` is the one expression of the second form
    (the values a function of the program returns, or a tensor's rows)."""

    __slots__ = ("parts", "value", "at")
    expressions = ()  # the parts hold the expressions
    blocks = ("parts",)

    def __init__(self, parts: list[Assign], value: Expr | None, pos: Pos) -> None:
        self.parts = parts
        self.value = value
        self.at = pos


class Jump(Stmt):
    """`break` or `continue` in a loop."""

    __slots__ = ("kind", "at")
    expressions = ()
    blocks = ()

    def __init__(self, kind: str, pos: Pos) -> None:
        self.kind = kind
        self.at = pos


class FuncDef(Stmt):
    __slots__ = ("name", "params", "body", "at", "override", "defaults")
    expressions = ()
    blocks = ("body",)

    def __init__(self, name: str, params: list[str], body: list[Stmt], pos: Pos, override: bool = False,
                 defaults: dict[str, Expr] | None = None) -> None:
        self.name = name
        self.params = params
        self.body = body
        self.at = pos
        self.override = override  # `override sigmoid(z) = ...` replaces a builtin on purpose
        self.defaults = defaults or {}  # f(x, y=2): the trailing parameters' defaults, computed at each call


class Return(Stmt):
    __slots__ = ("value", "at")
    expressions = ("value",)
    blocks = ()

    def __init__(self, value: Expr, pos: Pos) -> None:
        self.value = value
        self.at = pos


class Claim(Stmt):
    """`dL/dw1 = -w3*a` (of="L", wrt="w1") or `L = 15` (wrt=None): what `gradcalc check` judges."""

    __slots__ = ("of", "wrt", "claimed", "at", "text", "wrt2", "working")
    expressions = ()  # `claimed` is what the judge compares, never code the program runs
    blocks = ()

    def __init__(self, of: str, wrt: str | None, claimed: Expr, pos: Pos, text: str = "",
                 wrt2: str | None = None, working: list[Expr] | None = None) -> None:
        self.of = of
        self.wrt = wrt
        self.claimed = claimed
        self.at = pos
        self.text = text  # the claim as written, filled in by the parser
        self.wrt2 = wrt2  # a second derivative ∂²of/∂wrt∂wrt2 (wrt2 == wrt for ∂²of/∂wrt²), else None
        # A derivation (dy/dx = A, then lines `= B`, `= C`): its lines first to last, each with its place; the
        # last is `claimed`. Empty for a claim of one line.
        self.working: list[Expr] = working or []


class Question(Stmt):
    """`check dL/dW1 points 2` in a key: a derivative (or value) asked, and what it is worth when grading."""

    __slots__ = ("of", "wrt", "wrt2", "points", "at")
    expressions = ()
    blocks = ()

    def __init__(self, of: str, wrt: str | None, wrt2: str | None, points: float, pos: Pos) -> None:
        self.of = of
        self.wrt = wrt  # None: the value of `of` is asked
        self.wrt2 = wrt2  # a second derivative's other variable, as in Claim
        self.points = points
        self.at = pos


class While(Stmt):
    __slots__ = ("cond", "body", "at")
    expressions = ("cond",)
    blocks = ("body",)

    def __init__(self, cond: Expr, body: list[Stmt], pos: Pos) -> None:
        self.cond = cond
        self.body = body
        self.at = pos


class If(Stmt):
    __slots__ = ("cond", "body", "orelse", "at")
    expressions = ("cond",)
    blocks = ("body", "orelse")

    def __init__(self, cond: Expr, body: list[Stmt], orelse: list[Stmt], pos: Pos) -> None:
        self.cond = cond
        self.body = body
        self.orelse = orelse
        self.at = pos


class For(Stmt):
    __slots__ = ("var", "iterable", "body", "at")
    expressions = ("iterable",)
    blocks = ("body",)

    def __init__(self, var: str, iterable: Expr, body: list[Stmt], pos: Pos) -> None:
        self.var = var
        self.iterable = iterable
        self.body = body
        self.at = pos


class NoGrad(Stmt):
    __slots__ = ("body", "at")
    expressions = ()
    blocks = ("body",)

    def __init__(self, body: list[Stmt], pos: Pos) -> None:
        self.body = body
        self.at = pos


class Module(_Node):
    __slots__ = ("body",)

    def __init__(self, body: list[Stmt] | None = None) -> None:
        self.body = body if body is not None else []


def walk(expr: Expr) -> Iterator[Expr | Keyword]:
    """Every node of an expression, the expression first (iterative: no recursion limit)."""
    stack: list[Expr | Keyword] = [expr]
    while stack:
        node = stack.pop()
        yield node
        for slot in type(node).__slots__:
            child = getattr(node, slot)
            if isinstance(child, list):
                stack.extend(c for c in reversed(child) if isinstance(c, (Expr, Keyword)))
            elif isinstance(child, (Expr, Keyword)):
                stack.append(child)


def statements(body: list[Stmt], functions: bool = False) -> Iterator[Stmt]:
    """Every statement of a block and of the blocks nested in it, in source order (iterative: no
    recursion limit). Function bodies are entered only with `functions`: their code runs when called."""
    blocks = [iter(body)]  # the blocks being read, innermost last
    while blocks:
        for stmt in blocks[-1]:
            yield stmt
            kind = type(stmt)
            if kind.blocks and (functions or kind is not FuncDef):
                blocks.append(iter([inner for field in kind.blocks for inner in getattr(stmt, field)]))
                break
        else:
            blocks.pop()


def code(body: list[Stmt], functions: bool = False) -> Iterator[Expr | Keyword]:
    """Every expression node of the program code in a block, in source order: `walk` over what
    `statements` finds (a claim's side is no program code)."""
    for stmt in statements(body, functions):
        for field in type(stmt).expressions:
            yield from walk(getattr(stmt, field))
