"""Text to syntax tree: Lark's LALR tables for gradcalc.lark (beside this module), run without Lark.

lalr.py holds the tables Lark built from the grammar as plain data and runs them; each grammar
alias has one declaration here of the syntax node it makes, a template (NODES) or a method
(_ToSyntax), used as the parser reduces, so no parse tree is built. A text the tables reject is
parsed again by Lark itself (imported only then), whose error becomes a GradcalcSyntaxError with a place and a hint.

The language knows no builtin and no claim notation: a `Dialect` from the layer above
says which names are functions (for hints such as `sum(x)` for `x.sum()`) and reads a
claim's tokens as people write them (`2x sin x`); `PLAIN` has neither.
"""

from __future__ import annotations

import gc
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from functools import lru_cache
from itertools import chain
from typing import TYPE_CHECKING, Any

from ..errors import GradcalcError, GradcalcSyntaxError, Pos, did_you_mean, line_starts, pos_at
from . import lalr
from . import syntax as S
from .lalr import Token, grammar_text

if TYPE_CHECKING:  # Lark is imported only to explain a syntax error
    from lark import Lark
    from lark.exceptions import UnexpectedInput

OPENING = {"LPAR": "(", "LSQB": "[", "LBRACE": "{"}
CLOSING = {"RPAR": "(", "RSQB": "[", "RBRACE": "{"}
_PAIR = {"(": ")", "[": "]", "{": "}"}
_NO_SUCH_FUNCTION = "gradcalc has no function of that name: see the list with gradcalc --help"
_MODULES = {"torch", "np", "numpy", "math", "jnp", "jax", "F", "nn", "tf", "sp", "sympy", "scipy", "cmath"}
_KEYWORDS = {"while", "if", "else", "for", "in", "no_grad", "return", "or", "and", "not", "override", "check",
             "const", "elif", "break", "continue"}
_TOKEN_WORDS = {
    "NAME": "a name",
    "NUMBER": "a number",
    "STRING": "a quoted file name",
    "_NL": "a new line",
    "SEMICOLON": "';'",
    "$END": "the end of the program",
    "EQUALS": "'='",
    "APPROX": "'≈'",
    "AUG_OP": "'+=', '-=', '*=', '/=' or '**='",
    "ELLIPSIS": "'...'",
    "COMP_OP": "a comparison",
    "ADD_OP": "'+' or '-'",
    "MUL_OP": "'*', '/' or '@'",
    "MOD_OP": "'%' or '//'",
    "POW_OP": "'^'",
    "LPAR": "'('",
    "RPAR": "')'",
    "LSQB": "'['",
    "RSQB": "']'",
    "LBRACE": "'{'",
    "RBRACE": "'}'",
    "COMMA": "','",
    "COLON": "':'",
    "DOT": "'.'",
    "PARTIAL": "'∂'",
    "ROOT": "'√'",
    "SUPERSCRIPT": "a power such as ²",
    "TRANSPOSE": "ᵀ",
}


# Operators with another spelling: ** is ^; the typographic signs are their ASCII operators.
_OPERATORS = {"**": "^", "−": "-", "–": "-", "·": "*", "⋅": "*", "∙": "*", "∗": "*", "×": "*", "÷": "/", "⊙": "*"}


class _Operator(dict[str, str]):
    """An operator as written → as the tree stores it (** is ^, the typographic signs their ASCII ones), interned:
    a dict, so that a template reads it in C (`operator[text]`), filled as operators are met."""

    def __missing__(self, op: str) -> str:
        text = str(op)
        found = self[text] = sys.intern(_OPERATORS.get(text, text))
        return found


_operator = _Operator()
_SUPERSCRIPTS = str.maketrans("⁺⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "+-0123456789")


_new_pos = tuple.__new__  # a Pos without NamedTuple's Python-level __new__: one per token, it shows
_new = object.__new__  # a node whose __init__ only keeps its arguments, made without calling it


def token_pos(token: Token) -> Pos:
    return _new_pos(Pos, (token.line or 1, token.column or 1, len(token) or 1))


if TYPE_CHECKING:  # for the checker only: a Protocol class costs start-up time, and nothing tests it at run time
    from typing import Protocol

    class ClaimReader(Protocol):
        """Reads one claim's tokens (or a claims file's) as they come, and says what the parser gets instead."""

        ended: bool  # a check statement's claim is over: the program's own tokens follow

        def feed(self, token: Token, depth: int) -> list[Token]:
            """The tokens to give the parser in place of `token`, met at bracket depth `depth`."""

        def finish(self) -> list[Token]:
            """The tokens still owed at the end of the text."""


class Dialect:
    """What the layer above adds to the language: which names are functions, and how claims are written.

    A plain class, not a NamedTuple (whose class costs half a millisecond of start-up); made once per
    dialect, it is compared by identity, as the parsers' caches key on it.
    """

    __slots__ = ("claim_reader", "is_function")

    def __init__(self, is_function: Callable[[str], bool],
                 claim_reader: Callable[[int, bool], ClaimReader] | None = None) -> None:
        self.is_function = is_function
        self.claim_reader = claim_reader  # (bracket depth, a claims file) → a claim's reader


PLAIN = Dialect(lambda name: False)  # the language alone: no builtins, claims in its strict syntax


class _Brackets:
    """Post-lexer: newlines inside () and [] do not end a statement, nor before `else`.

    It also reports unbalanced brackets with the place of the culprit.
    """

    always_accept = ("_NL",)
    joins = frozenset({"ELSE", "ELIF"})  # after a new line, these go on with the statement before

    def __init__(self, max_depth: int, claims: bool = False,
                 reader: Callable[[int, bool], ClaimReader] | None = None) -> None:
        self.max_depth = max_depth
        self.claims = claims  # a file of claims: every line is one
        self.reader = reader  # the dialect's reader of claims, if it has one
        self.open: list[Token] = []  # the brackets open where the parser stopped (for its error message)

    def plain(self, kinds: tuple[str, ...]) -> tuple[int, int, tuple[int, ...]] | None:
        """Whether a statement of these kinds, cut at its first separator, is what the chunks would give: its ( and
        [ closed in order, and no check (its claim is the dialect's to read). If so, how many blocks' { it closes
        that were open before it, how much deeper than those its brackets go, and where its own open { are."""
        stack: list[tuple[str, int]] = []
        closes = deepest = 0
        for k, kind in enumerate(kinds):
            if kind in OPENING:
                stack.append((OPENING[kind], k))
                deepest = max(deepest, len(stack) - closes)
            elif kind in CLOSING:
                if not stack and kind == "RBRACE":
                    closes += 1
                elif not stack or stack.pop()[0] != CLOSING[kind]:
                    return None
            elif kind == "CHECK":
                return None
        if any(bracket != "{" for bracket, _ in stack):
            return None
        return closes, deepest, tuple(k for _, k in stack)

    def stretch(self, kinds: tuple[str, ...], i: int) -> int:
        """Where the statements from kinds[i] end at a separator outside ( and [ (and not before `else`, nor in a
        check's claim before a line that starts with `=`, its derivation's next line); the end of the text where
        a bracket is closed that was not open."""
        depth, n, m, checking = 0, len(kinds), i, False
        while m < n:
            kind = kinds[m]
            m += 1
            if kind in ("LPAR", "LSQB"):
                depth += 1
            elif kind in ("RPAR", "RSQB"):
                depth -= 1
                if depth < 0:
                    return n
            elif kind == "CHECK":
                checking = True
            elif depth == 0 and kind == "SEMICOLON":
                return m
            elif depth == 0 and kind == "_NL":
                while m < n and kinds[m] == "_NL":
                    m += 1
                if m == n or not (kinds[m] in self.joins or (checking and kinds[m] in _CLAIM_EQ)):
                    return m
        return n

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        """The tokens the parser reads (Lark's interface for a post-lexer)."""
        for chunk in self.chunks(stream):
            yield from chunk

    def chunks(self, stream: Iterable[Token], opened: Iterable[Token] = (), final: bool = True
               ) -> Iterator[list[Token]]:
        """The tokens the parser reads, in lists that end where a statement ends outside any bracket
        (lalr.Parser reads a program a statement at a time); before an error, what came before it. `opened`:
        the blocks' { open before the stream; `final`: the stream ends the text (a bracket left open is wrong)."""
        chunk: list[Token] = []
        stack: list[Token] = list(opened)
        self.open = stack
        pending_newline: Token | None = None
        reader = self.reader
        claim = reader(0, True) if self.claims and reader is not None else None
        claims = self.claims
        special = {"_NL", "CHECK", "SEMICOLON", *OPENING, *CLOSING}  # the tokens this looks at; others pass
        if self.claims:  # a derivation's `=` lines: see _derivation_line
            special |= _DERIVATION_TOKENS
        checking = False  # in a check statement (whose claim may go on in lines that start with `=`)
        previous = ""  # the kind of the last token at bracket depth 0 in a claim: "" at a claim's start
        equals = 0  # the claim's `=` so far: from the second on, each starts a line of its derivation
        sign = Token("EQUALS", "=")  # the last of them
        try:
            for token in stream:
                kind = token.type
                if kind not in special and pending_newline is None and claim is None and not checking \
                        and not claims:
                    chunk.append(token)
                    continue
                if kind == "_NL":
                    if not stack or stack[-1] == "{":
                        pending_newline = pending_newline or token
                    continue
                if (self.claims or checking) and not stack:
                    ends = pending_newline is not None or kind in _CLAIM_SEPARATORS
                    if kind in _CLAIM_EQ:
                        if previous == "" or previous in _CLAIM_EQ:
                            raise _derivation_error(previous, token)
                        pending_newline, ends = None, False  # a line that starts with `=` goes on with the claim above
                        equals, sign = equals + 1, token
                    elif previous in _CLAIM_EQ and ends and equals > 1:
                        raise _derivation_error(previous, sign, empty=True)
                    previous, equals = ("", 0) if kind in _CLAIM_SEPARATORS else (kind, 0 if ends else equals)
                    checking = checking and not ends
                if kind == "CHECK":
                    checking, previous = True, ""
                if pending_newline is not None:
                    if kind not in self.joins:
                        if claim is not None:
                            chunk.extend(claim.feed(pending_newline, len(stack)))
                            if claim.ended:  # a check statement ends at its line's end: the next may be another
                                claim = None
                        else:
                            chunk.append(pending_newline)
                        if not stack:  # a statement ends here
                            yield chunk
                            chunk = []
                    pending_newline = None
                emitted = None
                if claim is not None:
                    emitted = claim.feed(token, len(stack))
                    if claim.ended:
                        claim = None
                elif kind == "CHECK" and reader is not None:
                    claim = reader(len(stack), False)
                if kind in OPENING:
                    if len(stack) >= self.max_depth:
                        raise GradcalcSyntaxError(
                            f"brackets nested more than {self.max_depth} deep",
                            "simplify the expression, or raise the limit with --max-depth",
                            token_pos(token),
                        )
                    stack.append(token)
                elif kind in CLOSING:
                    if not stack:
                        raise GradcalcSyntaxError(
                            f"unmatched '{token}'", "remove it, or add the opening bracket it closes", token_pos(token)
                        )
                    opener = stack[-1]  # still open while this error is raised: _unclosed reads the stack
                    if str(opener) != CLOSING[kind]:
                        raise GradcalcSyntaxError(
                            f"'{token}' does not match '{opener}' opened at line {opener.line}, column {opener.column}",
                            f"close it with '{_PAIR[str(opener)]}'",
                            token_pos(token),
                        )
                    stack.pop()
                if emitted is None:
                    chunk.append(token)
                else:
                    chunk.extend(emitted)
                if kind == "SEMICOLON" and not stack:
                    yield chunk
                    chunk = []
            if stack and final:
                opener = stack[-1]
                raise GradcalcSyntaxError(
                    f"'{opener}' is never closed",
                    f"add the matching '{_PAIR[str(opener)]}'",
                    token_pos(opener),
                )
            if (self.claims or checking) and previous in _CLAIM_EQ and equals > 1:
                raise _derivation_error(previous, sign, empty=True)
            if claim is not None:
                chunk.extend(claim.finish())
            if pending_newline is not None:
                chunk.append(pending_newline)

        except GradcalcSyntaxError:
            yield chunk  # read first: the parser's own error there comes before this one, as it would token by token
            raise
        except Exception:  # the lexer's, at a character nothing matches (Lark's UnexpectedCharacters: not imported)
            # as above: a statement's tokens (a bracket's) wait here until it ends, and its line's end with them
            if pending_newline is not None and claim is None:
                chunk.append(pending_newline)
            yield chunk
            raise
        yield chunk

_CLAIM_EQ = frozenset({"EQUALS", "APPROX"})
_CLAIM_SEPARATORS = frozenset({"SEMICOLON", "COMMA"})
_DERIVATION_TOKENS = _CLAIM_EQ | _CLAIM_SEPARATORS


class DerivationError(GradcalcSyntaxError):
    """A derivation's `=` line that has no claim above it, or nothing after its `=`: a slip of its layout."""


def _derivation_error(previous: str, token: Token, empty: bool = False) -> GradcalcSyntaxError:
    """A derivation's `=` line with no claim above it, or (empty, token: its `=`) with nothing after its `=`."""
    if empty:
        return DerivationError("an empty '=' line: a derivation's line needs an expression after its '='",
                               "write the line's expression after '=', or delete the line", token_pos(token))
    if previous:
        return DerivationError(f"'{token}' twice: a derivation's line has one '=' before its expression",
                               "write the expression between them, or delete one", token_pos(token))
    return DerivationError(f"a line that starts with '{token}' has no claim before it to continue",
                           "write the claim first (dy/dx = ...), then its derivation's lines (= ...) below "
                           "it; in --claim, separate the lines by new lines or write them on one line "
                           "(dy/dx = ... = ...), not by ';'", token_pos(token))


def _python_statement(word: str) -> str | None:
    """The hint for a Python statement written in a program (def f(x):, import numpy), or None."""
    if word == "def":
        return "define a function as f(x) = x^2, or as a block: f(x) { y = x^2; return y }"
    if word in ("import", "from"):
        return "remove it: gradcalc imports nothing, and NumPy's functions (exp, sum, ...) are builtins"
    return None


def _order(tokens: tuple[Token, ...]) -> None:
    """The order of ², ^2 in a derivative's notation: only 2 (second derivatives) is known."""
    written = "".join(str(t) for t in tokens)
    if written.translate(_SUPERSCRIPTS).lstrip("^").lstrip("*") not in ("2", "2.0"):
        raise GradcalcSyntaxError(f"a derivative of order {written.translate(_SUPERSCRIPTS).lstrip('^*')}",
                                  "claims are about first and second derivatives: dL/dw, d²L/dw², ∂²L/∂a∂b",
                                  token_pos(tokens[0]))


def _worked(claim: S.Claim, working: tuple[Token | S.Expr, ...]) -> S.Claim:
    """A claim with its derivation's further lines (`= expr` each): the last is what it claims."""
    lines = [part for part in working if isinstance(part, S.Expr)]
    if lines:
        claim.working = [claim.claimed, *lines]
        claim.claimed = lines[-1]
    return claim


def _statements(children: list) -> list[S.Stmt]:
    return [child for child in children if isinstance(child, S.Stmt)]


class _ToSyntax:
    """One method per grammar alias that NODES does not declare (those that check what they are given, or make
    more than one node); each takes the rule's children and returns a syntax node.

    Names and operators are interned: one string object for all the `y`s of a program, as Python's
    compiler does, so the builder's lookups compare pointers and touch no new memory (a statement's
    own strings were a cache miss each: 3 % of the chain's build).
    """

    def start(self, *children: object) -> S.Module:
        return S.Module(_statements(list(children)))

    def block(self, brace: Token, *children: object) -> list[S.Stmt]:
        return _statements(list(children))

    def unpack(self, *children: object) -> S.Unpack:
        """`a, b = 1, 2` (a value for each name), or `u, v = f(x)` (one value unpacked: a function's values, or
        a tensor's rows)."""
        split = next(i for i, c in enumerate(children) if isinstance(c, Token) and c.type == "EQUALS")
        names, values = children[:split], [c for c in children[split + 1:] if isinstance(c, S.Expr)]
        seen: set[str] = set()
        for name in names:
            if str(name) in seen:
                raise GradcalcSyntaxError(f"'{name}' is assigned twice in one statement",
                                          "give each value its own name", token_pos(name))  # type: ignore[arg-type]
            seen.add(str(name))
        first = token_pos(names[0])  # type: ignore[arg-type]
        if len(values) == 1:  # u, v = f(x): the values a function returns, or a tensor's rows (a, b = x)
            value = values[0]
            parts = [S.Assign(sys.intern(str(n)), "=", value, token_pos(n)) for n in names]  # type: ignore[arg-type]
            return S.Unpack(parts, value, first)
        if len(values) != len(names):
            raise GradcalcSyntaxError(
                f"{len(names)} names but {len(values)} values to unpack",
                "give one value for each name (a, b = 1, 2), or one value to unpack (u, v = f(x))",
                values[min(len(names), len(values) - 1)].pos)
        parts = [S.Assign(sys.intern(str(n)), "=", v, token_pos(n))  # type: ignore[arg-type]
                 for n, v in zip(names, values)]
        return S.Unpack(parts, None, first)

    def params(self, *params: tuple[Token, S.Expr | None]) -> tuple[list[str], dict[str, S.Expr]]:
        seen: set[str] = set()
        defaults: dict[str, S.Expr] = {}
        for name, default in params:
            if str(name) in seen:
                raise GradcalcSyntaxError(f"parameter '{name}' appears twice", "give each parameter its own name",
                                          token_pos(name))
            seen.add(str(name))
            if default is not None:
                defaults[str(name)] = default
            elif defaults:
                raise GradcalcSyntaxError(f"parameter '{name}' without a default follows one with a default",
                                          f"give '{name}' a default too, or move it before "
                                          f"'{next(iter(defaults))}'", token_pos(name))
        return [str(name) for name, _ in params], defaults

    def param(self, name: Token, _eq: Token | None, default: S.Expr | None) -> tuple[Token, S.Expr | None]:
        return name, default

    def funcdef(self, override: Token | None, name: Token, params: tuple[list[str], dict[str, S.Expr]] | None,
                _eq: Token, body: S.Expr) -> S.FuncDef:
        names, defaults = params or ([], {})
        return S.FuncDef(str(name), names, [S.Return(body, body.pos)], token_pos(name), override is not None,
                         defaults)

    def funcblock(self, override: Token | None, name: Token, params: tuple[list[str], dict[str, S.Expr]] | None,
                  body: list[S.Stmt]) -> S.FuncDef:
        names, defaults = params or ([], {})
        return S.FuncDef(str(name), names, body, token_pos(name), override is not None, defaults)

    def if_stmt(self, keyword: Token, cond: S.Expr, body: list[S.Stmt], *rest: object) -> S.If:
        """`rest`: nothing, `else` and its if or block, or an elif (an If already)."""
        orelse = rest[-1] if rest else []
        if isinstance(orelse, S.If):
            orelse = [orelse]
        return S.If(cond, body, orelse, token_pos(keyword))  # type: ignore[arg-type]

    elif_stmt = if_stmt

    def return_stmt(self, keyword: Token, value: S.Expr, *more: S.Expr) -> S.Return:
        if more:  # return x, y
            value = S.Tuple([value, *more], value.pos)
        return S.Return(value, token_pos(keyword))

    def claims(self, *children: object) -> list[S.Claim]:
        return [child for child in children if isinstance(child, S.Claim)]

    def check_stmt(self, keyword: Token, claim: S.Claim | S.Question) -> S.Claim | S.Question:
        return claim

    def question(self, asked: S.Claim, word: Token | None, number: Token | None) -> S.Question:
        points: float = 1
        if word is not None and number is not None:
            if str(word) != "points":
                raise GradcalcSyntaxError(f"'{word}' after a question: only `points N` may follow what is asked",
                                          f"write `points {number}` after what is asked (check dL/dw1 points 2)",
                                          token_pos(word))
            points = float(str(number))
            if not 0 < points < float("inf"):  # 0, or 1e999: no number of points
                raise GradcalcSyntaxError(f"a question worth {number} points", "give it a positive number of points",
                                          token_pos(number))
            points = int(points) if points.is_integer() else points
        return S.Question(asked.of, asked.wrt, asked.wrt2, points, asked.pos)

    def asked_value(self, name: Token) -> S.Claim:
        return S.Claim(str(name), None, S.Number(0.0, "0", token_pos(name)), token_pos(name))

    def asked_derivative(self, top: Token, op: Token, bottom: Token) -> S.Claim:
        return self._derivative_claim(top, op, bottom, S.Number(0.0, "0", token_pos(op)))

    def asked_second(self, head: tuple[str, Pos], op: Token, names: tuple[str, str, Token]) -> S.Claim:
        return self._second_claim(head, op, names, S.Number(0.0, "0", token_pos(op)))

    def value_claim(self, name: Token, _eq: Token, claimed: S.Expr, *working: Token | S.Expr) -> S.Claim:
        return _worked(S.Claim(str(name), None, claimed, token_pos(name)), working)

    def derivative_claim(self, top: Token, op: Token, bottom: Token, _eq: Token, claimed: S.Expr,
                         *working: Token | S.Expr) -> S.Claim:
        return _worked(self._derivative_claim(top, op, bottom, claimed), working)

    def _derivative_claim(self, top: Token, op: Token, bottom: Token, claimed: S.Expr) -> S.Claim:
        if _OPERATORS.get(str(op), str(op)) != "/":
            raise GradcalcSyntaxError(f"a claim's left side is a derivative such as dL/dw1, not '{op}'",
                                      "write dL/dw1 = ... (or ∂L/∂w1 = ...), or L = ... to claim a value",
                                      token_pos(op))
        start = token_pos(top)
        end = token_pos(bottom)
        width = end.column + end.width - start.column if end.line == start.line else start.width
        of, wrt = self._variable(top), self._variable(bottom)
        if top.type != "PARTIAL_NAME" and of[:1] == "2" and of[1:2].isalpha():  # d2y/dx2: no name starts with 2
            if not (bottom.type != "PARTIAL_NAME" and wrt.endswith("2") and len(wrt) > 1):
                raise GradcalcSyntaxError(f"'{top}' is a second derivative, but '{bottom}' is not of second order",
                                          "write d2y/dx2 (or d²y/dx², ∂²y/∂a∂b)", token_pos(bottom))
            return S.Claim(of[1:], wrt[:-1], claimed, Pos(start.line, start.column, width), wrt2=wrt[:-1])
        return S.Claim(of, wrt, claimed, Pos(start.line, start.column, width))

    def second_claim(self, head: tuple[str, Pos], op: Token, names: tuple[str, str, Token], _eq: Token,
                     claimed: S.Expr, *working: Token | S.Expr) -> S.Claim:
        return _worked(self._second_claim(head, op, names, claimed), working)

    def _second_claim(self, head: tuple[str, Pos], op: Token, names: tuple[str, str, Token],
                      claimed: S.Expr) -> S.Claim:
        if _OPERATORS.get(str(op), str(op)) != "/":
            raise GradcalcSyntaxError(f"a claim's left side is a derivative such as d²L/dw², not '{op}'",
                                      "write d²L/dw² = ... (or ∂²L/∂a∂b = ...)", token_pos(op))
        of, start = head
        wrt, wrt2, last = names
        end = token_pos(last)
        width = end.column + end.width - start.column if end.line == start.line else 1
        return S.Claim(of, wrt, claimed, Pos(start.line, start.column, width), wrt2=wrt2)

    def dname2(self, *tokens: Token) -> tuple[str, Pos]:
        """∂²L, ∂^2 L, d²y, d^2 y: the output of a second derivative."""
        if tokens[0].type == "NAME" and str(tokens[0]) != "d":
            raise GradcalcSyntaxError(f"'{tokens[0]}' is not a derivative's d", "write d²y/dx² or ∂²y/∂x²",
                                      token_pos(tokens[0]))
        _order(tokens[1:-1])
        return str(tokens[-1]), token_pos(tokens[0])

    def wrt2(self, *tokens: Token) -> tuple[str, str, Token]:
        """∂w², ∂a∂b, dx², dx^2, dx dy: the two variables of a second derivative."""
        if tokens[0].type == "PARTIAL":
            first, rest = str(tokens[1]), tokens[2:]
        else:
            first, rest = self._variable(tokens[0]), tokens[1:]
        if rest[0].type == "PARTIAL":
            return first, str(rest[1]), rest[1]
        if rest[0].type == "NAME":
            return first, self._variable(rest[0]), rest[0]
        _order(rest)
        return first, first, rest[-1]

    def dname(self, *tokens: Token) -> Token:
        return tokens[-1] if len(tokens) == 1 else Token("PARTIAL_NAME", str(tokens[-1]), tokens[0].start_pos,
                                                         tokens[0].line, tokens[0].column)

    @staticmethod
    def _variable(token: Token) -> str:
        """∂L names L; dL names L (a derivative's d belongs to the notation, not the name)."""
        if token.type == "PARTIAL_NAME":
            return str(token)
        if len(token) < 2 or not token.startswith("d"):
            raise GradcalcSyntaxError(f"'{token}' is not a derivative's part",
                                      "write the derivative as dL/dw1 or ∂L/∂w1", token_pos(token))
        return str(token)[1:]

    def compare(self, first: S.Expr, *rest: object) -> S.Compare:
        ops = [str(t) for t in rest[0::2]]
        operands = [first, *rest[1::2]]
        return S.Compare(ops, operands, token_pos(rest[0]))  # type: ignore[arg-type]

    def superscript(self, base: S.Expr, power: Token) -> S.Binary:
        """x² as x^2, x⁻¹ as x^-1."""
        pos = token_pos(power)
        text = str(power).translate(_SUPERSCRIPTS)
        exponent: S.Expr = S.Number(float(text.lstrip("+-")), text.lstrip("+-"), pos)
        if text[0] in "+-":
            exponent = S.Unary(text[0], exponent, pos)
        return S.Binary("^", base, exponent, pos)
def _call(name: str, args: list | None, pos: Pos) -> S.Call:
    """f(x, k=2): a call, its positional arguments (which come first) apart from its keywords."""
    if not args or S.Keyword not in map(type, args):  # the common case, checked in C; made as a replay makes nodes
        call = _new(S.Call)
        call.name, call.args, call.keywords, call.at = name, args or [], [], pos
        return call
    seen_keyword = False
    for item in args:
        if isinstance(item, S.Keyword):
            seen_keyword = True
        elif seen_keyword:
            raise GradcalcSyntaxError(
                "a positional argument follows a keyword argument",
                "put positional arguments first, as in sum(x, axis=0)",
                item.pos,
            )
    return S.Call(name, [a for a in args if not isinstance(a, S.Keyword)],
                  [a for a in args if isinstance(a, S.Keyword)], pos)


# Each alias whose node is one expression of its children (the others are _ToSyntax's methods): a syntax class
# and its arguments, or an expression. The tables' loop writes it in place where it reduces the rule, reading a
# replayed statement's tokens where the lexer left them; Lark's transformer calls it as a method. `{k}` is
# child k, `{k.text}` a token child's text, `{k.name}` its text interned, `{k.pos}` its place (lalr._filled),
# `{*}` every child; they read NODE_NAMES.
NODES: dict[str, lalr.Template] = {
    "value": "{0}",
    "assign": ("Assign", "{0.name}", "{1.name}", "{2}", "{0.pos}"),
    "index_assign": ("IndexAssign", "Index(Name({0.name}, {0.pos}), {2}, {1.pos})", "{3.name}", "{4}", "{0.pos}"),
    "jump": ("Jump", "{0.text}", "{0.pos}"),
    "const_stmt": ("Const", "{1.name}", "{3}", "{1.pos}"),
    "while_stmt": ("While", "{1}", "{2}", "{0.pos}"),
    "for_stmt": ("For", "{1.name}", "{3}", "{4}", "{0.pos}"),
    "no_grad": ("NoGrad", "{1}", "{0.pos}"),
    "conditional": ("Conditional", "{2}", "{0}", "{4}", "{1.pos}"),
    "boolop": ("BoolOp", "{1.text}", "{0}", "{2}", "{1.pos}"),
    "not_": ("Not", "{1}", "{0.pos}"),
    "binop": ("Binary", "operator[{1.text}]", "{0}", "{2}", "{1.pos}"),
    "unary": ("Unary", "operator[{0.text}]", "{1}", "{0.pos}"),
    "root": ("Call", "'sqrt'", "[{1}]", "[]", "{0.pos}"),
    "index": ("Index", "{0}", "{2}", "{1.pos}"),
    "subscripts": "[{*}]",
    "slice": ("Slice", "{0}", "{2}", "{4}", "{1.pos}"),
    "ellipsis": ("Ellipsis_", "{0.pos}"),
    "attribute": ("Attribute", "{0}", "{1.name}", "{1.pos}"),
    "transposed": ("Attribute", "{0}", "'T'", "{1.pos}"),  # Wᵀ, as notes write it, is W.T
    "number": ("Number", "float({0.text})", "{0.text}", "{0.pos}"),
    "string": ("String", "{0.text}[1:-1]", "{0.pos}"),
    "name": ("Name", "{0.name}", "{0.pos}"),
    "call": "call({0.name}, {1}, {0.pos})",
    "args": "[{*}]",
    "keyword": ("Keyword", "{0.name}", "{2}", "{0.pos}"),
    "tensor": ("Tensor", "{1} or []", "{0.pos}"),
    "items": "[{*}]",
}
NODE_NAMES: dict[str, Any] = {
    **{name: getattr(S, name) for name in ("Assign", "IndexAssign", "Index", "Name", "Jump", "Const", "While", "For",
                                           "NoGrad", "Conditional", "BoolOp", "Not", "Binary", "Unary", "Call",
                                           "Slice", "Ellipsis_", "Attribute", "Number", "String", "Keyword", "Tensor")},
    "operator": _operator, "call": _call, "intern": sys.intern, "token_pos": token_pos,
}

DEFAULT_MAX_DEPTH = 200


@lru_cache(maxsize=8)
def _parser(start: str, max_depth: int, dialect: Dialect = PLAIN) -> Lark:
    """Lark's own parser of the grammar: it explains a text the tables reject, and is the tests' reference."""
    from lark import Lark, Transformer, v_args

    from .reference import LarkLexer

    # _ToSyntax's methods and NODES as Lark's transformer calls them (v_args wraps only a class's own methods)
    methods = {name: value for name, value in vars(_ToSyntax).items() if not name.startswith("__")}
    methods.update({name: lalr.template_method(template, NODE_NAMES) for name, template in NODES.items()})
    LarkSyntax = v_args(inline=True)(type("LarkSyntax", (Transformer,), methods))

    # cache=True stores the analysed grammar in the temp folder: an error's explanation is a load, not a build.
    return Lark(
        grammar_text(),
        parser="lalr",
        start=start,
        lexer=LarkLexer,
        postlex=_Brackets(max_depth, claims=start == "claims", reader=dialect.claim_reader),
        transformer=LarkSyntax(),
        maybe_placeholders=True,
        cache=True,
    )


_Rejected = lalr.Rejected


class _Fast:
    """The grammar's tables (lalr.py) run on the text: lexer, the brackets' post-lexer, the LALR loop."""

    def __init__(self, start: str, max_depth: int, dialect: Dialect) -> None:
        self.start = start
        self.lexer = lalr.lexer()
        self.postlexer = _Brackets(max_depth, claims=start == "claims", reader=dialect.claim_reader)
        self.parser = lalr.Parser(lalr.tables(), start, _ToSyntax(), NODES, NODE_NAMES)

    def parse(self, text: str) -> Any:
        try:
            if self.start == "start":
                return self.parser.program(*self.lexer.cut(text), self.postlexer)
            return self.parser.parse(chain(self.postlexer.chunks(self.lexer.lex(text)), ([lalr.END_TOKEN],)))
        except lalr.BadCharacter:
            raise _Rejected from None


@lru_cache(maxsize=8)
def _fast(start: str, max_depth: int, dialect: Dialect = PLAIN) -> _Fast:
    return _Fast(start, max_depth, dialect)


def parse(text: str, max_depth: int = DEFAULT_MAX_DEPTH, dialect: Dialect = PLAIN) -> S.Module:
    """Parse a whole program. Raises GradcalcSyntaxError with a place and a hint."""
    module: S.Module = _parse(text, "start", max_depth, dialect)
    claims = [stmt for stmt in module.body if isinstance(stmt, S.Claim)]
    if claims:
        with_claim_texts(claims, text)
    return module


def parse_expression(text: str, max_depth: int = DEFAULT_MAX_DEPTH, dialect: Dialect = PLAIN) -> S.Expr:
    """Parse one expression on its own (a --set or --vector value)."""
    try:
        expr: S.Expr = _parse(text.strip(), "value", max_depth, dialect)
    except GradcalcSyntaxError as error:
        if "SEMICOLON" in str(error.message).upper() or "';'" in error.message or "new line" in error.message:
            error.hint = "a value is one expression: a number, a JSON array, or one such as randn(3, 3)"
        raise
    return expr


def parse_claims(text: str, max_depth: int = DEFAULT_MAX_DEPTH, dialect: Dialect = PLAIN,
                 written: Callable[[int, int], str] | None = None) -> list[S.Claim]:
    """Parse a file of claims (one per line, `#` comments), each with its text (see with_claim_texts)."""
    found: list[S.Claim] = _parse(text, "claims", max_depth, dialect)
    return with_claim_texts(found, text, written)


def with_claim_texts(claims: list[S.Claim], text: str,
                     written: Callable[[int, int], str] | None = None) -> list[S.Claim]:
    """Fill in each claim's text as written: from its start to its expression's last token and brackets
    (`written` gives the text written for a span of `text`, where text was made from it: LaTeX)."""
    starts = line_starts(text)

    def offset(line: int, column: int) -> int:
        return starts[min(line, len(starts)) - 1] + column - 1

    for claim in claims:
        begin = offset(claim.pos.line, claim.pos.column)
        end = max(offset(node.pos.line, node.pos.column + node.pos.width)
                  for node in S.walk(claim.claimed) if isinstance(node, S.Expr))
        depth = sum(text.count(c, begin, end) for c in "([") - sum(text.count(c, begin, end) for c in ")]")
        while depth > 0 and end < len(text):  # the closing brackets after the last token
            if text[end] in ")]":
                depth -= 1
            elif not text[end].isspace():
                break
            end += 1
        claim.text = " ".join((text[begin:end] if written is None else written(begin, end)).split())
    return claims


def _parse(text: str, start: str, max_depth: int, dialect: Dialect = PLAIN) -> Any:
    # A syntax tree has no cycles: the cyclic collector would only rescan its nodes as they are made
    # (a third of the time on a 10^4-statement program).
    collecting = gc.isenabled()
    gc.disable()
    explained = text  # what Lark reads to explain the error
    try:
        return _fast(start, max_depth, dialect).parse(text)
    except _Rejected as rejected:
        if rejected.args and rejected.args[0]:
            # The lines before the rejected statement parsed: as blanks, with every line and column kept, Lark
            # reads them in no time (it took 36 s to explain an error at statement 99,991 of 10^5).
            at = rejected.args[0]
            explained = re.sub("[^\n]", " ", text[:at]) + text[at:]
    finally:
        if collecting:
            gc.enable()
    from lark.exceptions import UnexpectedInput, VisitError

    try:
        return _parser(start, max_depth, dialect).parse(explained)  # raises Lark's error for the text
    except VisitError as exc:  # an error raised by a Transformer method
        if isinstance(exc.orig_exc, GradcalcError):
            raise exc.orig_exc from None
        raise
    except UnexpectedInput as exc:
        opened = _unclosed(exc, _parser(start, max_depth, dialect).options.postlex)
        raise (opened or _explain(exc, text, start, dialect.is_function)) from None


def _unclosed(exc: UnexpectedInput, brackets: Any) -> GradcalcSyntaxError | None:
    """A bracket left open on an earlier line is the likelier mistake than the token the parser met."""
    stack = getattr(brackets, "open", [])
    token = getattr(exc, "token", None)
    # in a block's { }, a new line ends a statement as outside brackets: an error on a later line is its own
    if not stack or str(stack[-1]) == "{" or token is None or not token.line or token.line <= (stack[-1].line or 0):
        return None
    opener = stack[-1]
    return GradcalcSyntaxError(
        f"'{opener}' opened here is still open at line {token.line}",
        f"close it with '{_PAIR[str(opener)]}' on line {opener.line} (inside brackets, a new line does not end "
        "a statement)",
        token_pos(opener))


def _expected_words(expected: set[str]) -> str:
    """What could come next, in words: a short list, or the kind of thing when the list is long."""
    words = sorted({_TOKEN_WORDS.get(e, f"'{e.lower()}'" if e.isalpha() else e)
                    for e in expected if not e.startswith("__")})
    if len(words) > 6:
        if {"NAME", "NUMBER"} <= expected:
            return "an expression (a number, a name, a bracket or a function call)"
        if "MUL_OP" in expected:
            return "an operator, or the end of the statement"
        return ""
    return ", ".join(words[:-1]) + (" or " if len(words) > 1 else "") + words[-1] if words else ""


_CLAIM_FORM = "write it as dL/dw1 = <expression>, ∂L/∂w1 = <expression>, or L = <value> for a value"


def _explain(exc: UnexpectedInput, text: str, start: str = "start",
             is_function: Callable[[str], bool] = PLAIN.is_function) -> GradcalcSyntaxError:
    """Turn Lark's error into a message a student can act on (`start`: what the text is, as in the grammar;
    `is_function`: the dialect's, for hints that name a function)."""
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    line = exc.line if exc.line and exc.line > 0 else max(1, text.count("\n") + 1)
    column = exc.column if exc.column and exc.column > 0 else 1
    if isinstance(exc, UnexpectedCharacters):
        at = len(text) if exc.pos_in_stream is None else exc.pos_in_stream  # the lexer always says where
        char = text[at] if at < len(text) else "?"
        hint = "remove it"
        after_operand = at > 0 and (text[at - 1].isalnum() or text[at - 1] in "_)]")
        if char == "'" and after_operand and start == "claims":  # y' = 2x, f'(x): Lagrange's prime
            hint = "write the derivative with what it is of and by: dy/dx = ..."
        elif char == "'" and after_operand:  # x': MATLAB's transpose
            name = re.search(r"[^\W\d]\w*$", text[:at])
            x = name.group() if name is not None else "x"
            hint = f"for a transpose write {x}.T or transpose({x}); text in quotes is only a load() file name"
        elif char in "\"'":
            hint = "close the quoted text on the same line"
        elif char == "!":
            hint = "use 'not' for negation and '!=' for 'not equal'"
        elif char == "&":
            hint = "use 'and'"
        elif char == "|":
            hint = "write abs(x) for |x|, and 'or' for a logical or"
        elif char.isspace() or char in "\u200b\u200c\u200d\u2060":  # a no-break, thin or zero-width space
            hint = "replace it with a plain space (text pasted from a PDF or a word processor may hold such spaces)"
        return GradcalcSyntaxError(f"unexpected character {char!r}", hint, Pos(line, column, 1))
    if isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        words = _expected_words(set(getattr(exc, "expected", set())))
        lines = text.splitlines() or [""]
        return GradcalcSyntaxError(
            "the claim ends before its value" if start == "claims" else "the program ends in the middle of a statement",
            f"expected {words}" if words else "finish the last statement",
            Pos(len(lines), len(lines[-1]) + 1, 1),
        )
    assert isinstance(exc, UnexpectedToken)
    token = exc.token
    pos = token_pos(token)
    expected = set(exc.expected)
    words = _expected_words(expected)
    if token.type == "_NL":
        return GradcalcSyntaxError(
            "the line ends in the middle of an expression",
            "finish it on this line, or wrap it in ( ) to go on over several lines",
            Pos(pos.line, pos.column, 1),
        )
    comma = re.search(r"(\d+),$", text[:token.start_pos or 0]) if token.type == "NUMBER" else None
    if start == "claims" and comma is not None:  # 2,5
        return GradcalcSyntaxError(f"'{comma.group(1)},{token}': a comma separates claims",
                                   f"write the decimal point as a dot: {comma.group(1)}.{token}", pos)
    right_side = re.search(r"[=≈][^\n;,]*$", text[:token.start_pos or 0])  # after its =: a derivation's next = fits
    if start == "claims" and not right_side and ("EQUALS" in expected or {"NAME", "PARTIAL"} <= expected):
        where = "where a claim starts" if "EQUALS" not in expected and "CHECK" in expected else "in a claim's left side"
        return GradcalcSyntaxError(f"unexpected '{token}' {where}", _CLAIM_FORM, pos)
    before = text[: token.start_pos].rstrip(" \t") if token.start_pos is not None else ""
    dotted = re.search(r"([^\W\d][\w.]*)\.([^\W\d]\w*)$", before) if token.type == "LPAR" else None
    if dotted is not None:  # torch.sin(x), x.sum(): Python habits
        owner, method = dotted.groups()
        known = is_function(method)
        if owner.split(".")[0] in _MODULES:
            return GradcalcSyntaxError(f"'{owner}.{method}(...)': gradcalc's functions have no module prefix",
                                       f"write {method}(...)" if known else _NO_SUCH_FUNCTION, pos)
        empty = text[token.start_pos + 1:].lstrip().startswith(")")
        hint = f"write {method}({owner}{'' if empty else ', ...'})" if known else _NO_SUCH_FUNCTION
        if method == "t":  # PyTorch's W.t()
            hint = f"for a transpose write {owner}.T or transpose({owner})"
        return GradcalcSyntaxError(f"'{owner}.{method}(...)' is a method call: gradcalc has functions, not methods",
                                   hint, pos)
    powered = re.search(r"([^\W\d]\w*)\s*(\^\s*\d+|[⁰¹²³⁴⁵⁶⁷⁸⁹]+)$", before) if token.type == "LPAR" else None
    if powered is not None and is_function(powered.group(1)):  # sin^2(x), sin²(x): notes' notation
        function, power = powered.group(1), powered.group(2).replace(" ", "")
        return GradcalcSyntaxError(f"'{function}{power}(...)': a power of a function's value goes after its call",
                                   f"write {function}(...){power}", pos)
    if token.type in ("NAME", "NUMBER", "ROOT") and before and is_function(re.split(r"[\W]", before)[-1]):
        function = re.split(r"[\W]", before)[-1]
        return GradcalcSyntaxError(f"'{function} {token}': a function's argument goes in brackets",
                                   f"write {function}({token})", pos)
    if token.type in ("NAME", "NUMBER", "LPAR") and before and (before[-1].isalnum() or before[-1] in "_)]."):
        operand = re.search(r"(?:\d+\.?\d*|\.\d+|[^\W\d]\w*|[)\]])$", before)
        prev = operand.group() if operand is not None else before.split()[-1]
        rest = before[:len(before) - len(prev)].rstrip(" \t")
        statement_start = prev.isidentifier() and (rest == "" or rest.endswith((";", "{", "}", "\n")))
        if statement_start and (python := _python_statement(prev)) is not None:
            return GradcalcSyntaxError(f"'{prev}' is Python, not gradcalc", python,
                                       pos_at(text, len(before) - len(prev), len(prev)))
        keyword = did_you_mean(prev, sorted(_KEYWORDS)) if statement_start and prev not in _KEYWORDS else ""
        return GradcalcSyntaxError(
            f"missing operator before '{token}'",
            keyword or (f"write '{prev}*{token}' to multiply" if token.type != "LPAR" else "write '*' to multiply"),
            pos,
        )
    if start == "claims" and token.type in ("EQUALS", "APPROX") and re.search(
            r"(?:d|∂)(?:²|\^\s*2|2)\s*[^\W\d]\w*\s*/\s*(?:d|∂)[^\W\d]\w*$", before):  # d²f/dxdz
        return GradcalcSyntaxError("a second derivative's bottom is read as one name",
                                   "write the two variables apart: d²f/dx dz, or ∂²f/∂x∂z", pos)
    if token.type == "APPROX" and start != "claims":
        assigning = re.search(r"(?:^|[;{}\n])\s*[^\W\d]\w*\s*$", before)  # y ≈ 2 (x ≈ 2 after `y =` compares)
        use = "compare with '=='" if "COMP_OP" in expected or not assigning else "assign with '='"
        return GradcalcSyntaxError("unexpected '≈'", f"{use} (≈ is for claims: check dL/dw1 ≈ 0.39)", pos)
    if token.type == "EQUALS":
        # After a condition (if x = 1 {): a claim's derivation lets `expr =` reduce, so the state may be past x.
        if "COMP_OP" in expected or "MUL_OP" in expected or (start != "claims" and "LBRACE" in expected):
            return GradcalcSyntaxError("'=' inside an expression", "use '==' to compare; '=' only assigns", pos)
    if token.type in ("EQUALS", "AUG_OP"):
        declared = re.search(r"(?:^|[;{}\n])\s*const\s+([^\W\d]\w*)\s*$", before)
        if declared is not None and token.type == "AUG_OP":  # const N += 1
            return GradcalcSyntaxError(f"a constant is declared with '=', not '{token}'",
                                       f"write `const {declared.group(1)} = ...`: a constant keeps the value it "
                                       "is declared with", pos)
        written = re.search(r"(?:^|[;{}\n])\s*([^\W\d]\w*)\s*$", before)
        if written is not None and written.group(1) in _KEYWORDS:  # const = 3, check = 1
            spelled = written.group(1)
            return GradcalcSyntaxError(f"'{spelled}' is a keyword and cannot be a variable's name",
                                       f"give the variable another name, such as '{spelled}_'",
                                       pos_at(text, written.start(1), len(spelled)))
    if token.type in ("EQUALS", "AUG_OP") and "EQUALS" not in expected:
        return GradcalcSyntaxError(f"cannot assign with '{token}' here",
                                   "only a plain name can be assigned: `y = ...`", pos)
    names = re.search(r"[^\W\d]\w*\s*,\s*(?:[^\W\d]\w*\s*,?\s*)*$", before) if token.type == "AUG_OP" else None
    if names is not None:  # a, b += 1, 2
        each = "; ".join(f"{name} {token} ..." for name in re.findall(r"[^\W\d]\w*", names.group()))
        return GradcalcSyntaxError(f"several names are assigned with '=', not '{token}'",
                                   f"write each on its own: {each}", pos)
    if token.type == "ELIF" and not re.match(r"\s*=(?!=)", text[(token.start_pos or 0) + len(token):]):
        return GradcalcSyntaxError("'elif' without 'if'", "put it after an if block's closing '}': "
                                   "if a { ... } elif b { ... }", pos)
    if token.type != "NAME" and str(token) in _KEYWORDS and token.type != "ELSE":
        return GradcalcSyntaxError(f"'{token}' is a keyword and cannot be used here",
                                   f"expected {words}" if words else "a keyword cannot be a variable's name", pos)
    if token.type == "ELSE":
        return GradcalcSyntaxError("'else' without 'if'", "put it on the line of the if block's closing '}'", pos)
    if {"NAME", "WHILE", "IF"} <= expected and token.type != "NAME":  # where a statement starts
        return GradcalcSyntaxError(
            f"a statement cannot start with '{token}'",
            "a statement is an assignment `y = ...`, a function `f(x) = ...`, or if / while / for / no_grad",
            pos,
        )
    if "EQUALS" in expected and token.type != "NAME":
        return GradcalcSyntaxError(
            f"unexpected '{token}': a statement must assign a name",
            "write it as `y = <expression>` (a statement is an assignment, a function or a block)",
            pos,
        )
    return GradcalcSyntaxError(f"unexpected '{token}'",
                               f"expected {words}" if words else "check the syntax just before it", pos)


def raise_recursion_limit(max_depth: int) -> None:
    """Evaluation recurses once per nesting level: make room for the configured depth."""
    needed = 20 * max_depth + 2000
    if sys.getrecursionlimit() < needed:
        sys.setrecursionlimit(needed)
