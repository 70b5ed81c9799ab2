"""Juxtaposition: a claim's tokens as answers are written (2x, sin x, W x), read into the language's.

The language parses claims strictly; this reader, given to it in `NOTATION`, puts in the `*` of
a product written side by side and the brackets of a call written without them, before the parser
sees the tokens. `check` statements in programs are read with it too.
"""

from __future__ import annotations

from collections.abc import Callable

from ...engine import ops
from ...engine.graph import Node
from ...errors import GradcalcSyntaxError
from ...language import syntax as S
from ...language.lalr import Token
from ...language.parser import CLOSING, OPENING, Dialect, token_pos
from ..builtins import BUILTINS

_OPERAND_ENDS = frozenset({"NUMBER", "NAME", "RPAR", "RSQB", "SUPERSCRIPT", "TRANSPOSE"})
_OPERAND_STARTS = frozenset({"NAME", "LPAR", "ROOT", "LSQB"})
_CLAIM_ENDS = frozenset({"_NL", "SEMICOLON", "COMMA", "RBRACE"})


def _one_group(tokens: list[Token]) -> bool:
    """The tokens are one bracketed group: ( ... ) with the first bracket closed by the last."""
    depth = 0
    for i, token in enumerate(tokens):
        depth += 1 if token.type in OPENING else -1 if token.type in CLOSING else 0
        if depth == 0:
            return i == len(tokens) - 1 and i > 0
    return False


def _start(token: Token) -> int:
    """Where a token starts in the text (the lexer gives every token its place)."""
    return token.start_pos or 0


def _attached(previous: Token, token: Token) -> bool:
    """Whether token follows previous with no space between them."""
    return _start(token) == _start(previous) + len(previous)


def _number_multiplies(previous: Token, token: Token) -> bool:
    """A number after a bracket, (x - 3)2x, or after a space, cos(u) 2x, is a factor; not one after a number
    (2 3 may be 2.3 or 23) nor one written tight after a power or a transpose (x²2)."""
    if previous.type == "NUMBER":
        return False
    return previous.type in CLOSING or not _attached(previous, token)


def is_function(name: str) -> bool:
    """Whether a name is a builtin function (claims read sin x as sin(x), and latex.py its powers)."""
    return name in BUILTINS


class Juxtaposition:
    """In a claim's expression, as answers are written: 2x, 3x², 2sin(x)cos(x), (σ(z) − y)x multiply.

    Programs stay strict; a claim is what a student writes. A juxtaposition right after
    the operand of / or ^ is an error, since readers split on it: 1/2x is 1/(2x) to some,
    x/2 to others, and e^2x is e^(2x) in most notes; with a space (x^2 cos(x), 1/2 x), or
    a bracket after a power (x^2(x + 1)), the operand has ended and the product is of the whole.
    A function without brackets takes the product that follows, as in print: sin 2x cos x is
    sin(2x)·cos(x), sin x + 1 is sin(x) + 1. A variable before a bracket, e^x(1 + x), is
    parsed as a call: resolving.py makes it a product.
    """

    def __init__(self, depth: int, file: bool) -> None:
        self.depth = depth  # the bracket depth of the claim
        self.file = file  # a claims file: a new claim follows each separator
        self.expression = False  # past the claim's = or ≈
        self.ended = False  # a check statement in a program is over
        self.previous: Token | None = None
        self.earlier: Token | None = None  # the token before the previous one: W.T (x) is no call of T
        self.divided: dict[int, list[Token]] = {}  # by depth: a / or ^ and its operand's tokens so far
        self.calls: list[list] = []  # the open calls without brackets: [depth, tokens of the argument, power]
        self.power: list[Token] | None = None  # a function's ², ^2 waiting for its argument
        self.powered: list[tuple[int, list[Token]]] = []  # sin²(...): the ² to put after the ')' at a depth

    def feed(self, token: Token, depth: int) -> list[Token]:
        """Take the next token (at bracket depth `depth`); return the tokens to emit in its place.

        A function's power, sin²x, tanh^2(x), is the power of its value: the ² waits until the
        argument is read and follows it, sin(x)², as the parser reads it.
        """
        kind = token.type
        if self.expression and self.power is not None:
            power = self.power
            if power[-1].type == "POW_OP" and kind == "NUMBER":  # sin^2: the exponent
                power.append(token)
                return []
            self.power = None
            if power[-1].type != "POW_OP" and kind == "LPAR":  # sin²(x): after its ')'
                self.powered.append((depth, power))
                return self._feed(token, depth)
            if power[-1].type != "POW_OP" and kind in ("NAME", "NUMBER", "ROOT"):  # sin² x: after the call closes
                emitted = self._feed(token, depth)
                self.calls[-1][2] = power
                return emitted
            return [t for written in [*power, token] for t in self._feed(written, depth)]  # not a function's power
        if (self.expression and kind in ("SUPERSCRIPT", "POW_OP") and self.previous is not None
                and self.previous.type == "NAME" and is_function(str(self.previous))):
            self.power = [token]
            return []
        emitted = self._feed(token, depth)
        if kind == "RPAR" and self.powered and self.powered[-1][0] == depth - 1:
            emitted += self.powered.pop()[1]
            self.previous = emitted[-1]
        return emitted

    def _feed(self, token: Token, depth: int) -> list[Token]:
        kind = token.type
        inserted = self._close_calls(token, depth)
        if depth == self.depth and kind in _CLAIM_ENDS:
            self.expression, self.ended = False, not self.file
            return [*inserted, token]
        if depth == self.depth and kind in ("EQUALS", "APPROX"):  # the claim's =, or a derivation's next line
            self.expression, self.previous, self.divided = True, None, {}
            return [*inserted, token]
        if not self.expression:
            return [*inserted, token]
        earlier, previous, self.previous = self.earlier, self.previous, token
        self.earlier = previous
        if inserted:
            previous = inserted[-1]  # a call just closed: its ')' comes before this token
        if (previous is not None and previous.type == "NAME" and kind in ("NAME", "NUMBER", "ROOT")
                and is_function(str(previous))):  # sin x, sin 2x: a call whose argument follows
            self.calls.append([depth, [], []])
            inserted.append(_made("LPAR", "(", token))
        elif (previous is not None and previous.type in _OPERAND_ENDS and (kind in _OPERAND_STARTS or (
                kind == "NUMBER" and _number_multiplies(previous, token)))
              and not (previous.type == "NAME" and kind in ("LPAR", "LSQB") and _attached(previous, token)
                       and (earlier is None or earlier.type != "DOT"))
              and not (previous.type == "NAME" and kind == "LPAR" and is_function(str(previous)))):
            # f(x) is a call and x[0] an index; W.T (x), x (1 + x), V [1, 2], 2[x + 1] and (a)[b] are products
            split = self.divided.get(depth)
            if split is not None and (_start(previous) + len(previous) < _start(token) or (
                    split[0].type == "POW_OP" and (kind == "LPAR" or _one_group(split[1:])))):
                # x^2 cos(x), 1/2 x, x^2(x + 1), x^(2)y (LaTeX's x^{2}y): a space or a bracket ends the exponent
                split = None
                del self.divided[depth]
            if split is not None:
                operator, operand = split[0], "".join(split[1:])
                part = "denominator" if operator.type == "MUL_OP" else "exponent"
                raise GradcalcSyntaxError(
                    f"'{operator}{operand}{token}' is ambiguous: is '{token}' in the {part} or not?",
                    f"write {operator}({operand}*{token}...) if it is, or {operator}{operand}*{token} if it is not",
                    token_pos(token))
            inserted.append(_made("MUL_OP", S.JUXTAPOSED, token))
        for call in self.calls:
            call[1].append(token)
        for tokens in self.divided.values():
            tokens.extend(inserted)
            tokens.append(token)
        if kind == "POW_OP" or (kind == "MUL_OP" and token in ("/", "÷")):
            self.divided[depth] = [token]
        elif (kind in ("MUL_OP", "COMP_OP") or (kind == "ADD_OP" and previous is not None
                                                 and previous.type in _OPERAND_ENDS)) or kind in CLOSING:
            self.divided.pop(depth, None)  # the operand is complete (a binary operator, or its bracket closed)
        return [*inserted, token]

    def _close_calls(self, token: Token | None, depth: int) -> list[Token]:
        """The ')' of each open call without brackets whose argument this token ends (None: the end)."""
        closed: list[Token] = []
        while self.calls:
            call_depth, argument, power = self.calls[-1]
            if token is not None and depth == call_depth and argument:
                kind = token.type
                binary_sign = kind == "ADD_OP" and argument[-1].type in _OPERAND_ENDS
                if not (binary_sign or kind in ("MUL_OP", "COMP_OP", "EQUALS", "APPROX") or kind in _CLAIM_ENDS
                        or kind in CLOSING or (kind == "NAME" and (is_function(str(token)) or str(token) == "e"))):
                    # sin 2x cos x, tan t e^-t: the next function, or e (of e^...), starts the next factor
                    break  # sin 2x: the argument goes on
            elif token is not None and depth >= call_depth:
                break  # inside the argument's own brackets, or its first token
            self.calls.pop()
            closed.append(_made("RPAR", ")", token if token is not None else argument[-1]))
            closed += power  # sin² x: sin(x)²
        if closed and self.previous is not None:
            self.previous = closed[-1]
        return closed

    def finish(self) -> list[Token]:
        """The ')' of the calls without brackets still open at the end of the text."""
        if self.power is not None:  # sin² at the very end: as written, for the parser to reject
            power, self.power = self.power, None
            return [t for written in power for t in self._feed(written, self.depth)] + self._close_calls(None, 0)
        return self._close_calls(None, 0)


def _made(kind: str, value: str, at: Token) -> Token:
    """A token the claims' reading puts in (a '*', or the brackets of sin x), placed at `at`."""
    return Token._future_new(kind, value, at.start_pos, at.line, at.column)


NOTATION = Dialect(is_function, Juxtaposition)  # the language as people write claims, with gradcalc's builtins


def juxtaposed(left: S.Expr, right: S.Expr) -> Callable[[Node, Node], Node]:
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
