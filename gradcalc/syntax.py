"""The program's syntax tree: what parser.py builds and builder.py runs."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from .errors import Pos


class Expr:
    """An expression; every kind has a `pos` for error messages."""

    __slots__ = ()
    pos: Pos


@dataclass(slots=True)
class Number(Expr):
    value: float
    text: str
    pos: Pos


@dataclass(slots=True)
class String(Expr):
    value: str
    pos: Pos


@dataclass(slots=True)
class Name(Expr):
    name: str
    pos: Pos


@dataclass(slots=True)
class Tensor(Expr):
    items: list[Expr]
    pos: Pos


@dataclass(slots=True)
class Unary(Expr):
    op: str  # "-" or "+"
    operand: Expr
    pos: Pos


@dataclass(slots=True)
class Binary(Expr):
    op: str  # + - * / @ ^  ("**" is stored as "^")
    left: Expr
    right: Expr
    pos: Pos


@dataclass(slots=True)
class Compare(Expr):
    ops: list[str]
    operands: list[Expr]
    pos: Pos


@dataclass(slots=True)
class BoolOp(Expr):
    op: str  # "and" or "or"
    left: Expr
    right: Expr
    pos: Pos


@dataclass(slots=True)
class Not(Expr):
    operand: Expr
    pos: Pos


@dataclass(slots=True)
class Keyword:
    name: str
    value: Expr
    pos: Pos


@dataclass(slots=True)
class Call(Expr):
    name: str
    args: list[Expr]
    keywords: list[Keyword]
    pos: Pos


@dataclass(slots=True)
class Slice(Expr):
    start: Expr | None
    stop: Expr | None
    step: Expr | None
    pos: Pos


@dataclass(slots=True)
class Index(Expr):
    target: Expr
    subscripts: list[Expr]
    pos: Pos


@dataclass(slots=True)
class Attribute(Expr):
    target: Expr
    name: str
    pos: Pos


class Stmt:
    __slots__ = ()
    pos: Pos


@dataclass(slots=True)
class Assign(Stmt):
    name: str
    op: str  # "=", "+=", "-=", "*=", "/="
    value: Expr
    pos: Pos


@dataclass(slots=True)
class FuncDef(Stmt):
    name: str
    params: list[str]
    body: list[Stmt]
    pos: Pos
    override: bool = False  # `override sigmoid(z) = ...` replaces a builtin on purpose


@dataclass(slots=True)
class Return(Stmt):
    value: Expr
    pos: Pos


@dataclass(slots=True)
class Claim(Stmt):
    """`dL/dw1 = -w3*a` (of="L", wrt="w1") or `L = 15` (wrt=None): what `gradcalc check` judges."""

    of: str
    wrt: str | None
    claimed: Expr  # not `value`: the builder's walks over statements must not read it as program code
    pos: Pos
    text: str = ""  # the claim as written, filled in by the parser


@dataclass(slots=True)
class While(Stmt):
    cond: Expr
    body: list[Stmt]
    pos: Pos


@dataclass(slots=True)
class If(Stmt):
    cond: Expr
    body: list[Stmt]
    orelse: list[Stmt]
    pos: Pos


@dataclass(slots=True)
class For(Stmt):
    var: str
    iterable: Expr
    body: list[Stmt]
    pos: Pos


@dataclass(slots=True)
class NoGrad(Stmt):
    body: list[Stmt]
    pos: Pos


@dataclass(slots=True)
class Module:
    body: list[Stmt] = field(default_factory=list)


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
