"""Reading claims: an answers file, a --claim, or a model's check statements, into the language's claims.

Text in gradcalc's notation is parsed with `NOTATION`; LaTeX (or a fraction written as one character)
is made gradcalc text first, and every place is put back where it was written in the LaTeX.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from ...engine import backend as B
from ...errors import GradcalcError, Source
from ...files import DEFAULT_MAX_FILE_SIZE, read_text
from ...language import parser
from ...language import syntax as S
from ..builtins import Context
from .juxtaposition import NOTATION

_CHECK_STATEMENT = re.compile(r"(^|;)\s*check\b", re.MULTILINE)
_PRIME = re.compile(r"(?<=\w)['′](?=\s*\()")  # f'(x), σ'(z): Lagrange's prime before a call's bracket
_RIGHT_SIDE = re.compile(r"(?<=[=≈]).*")  # after a line's first = or ≈: f'(x) = ... is no claim (write df/dx)
PRIME = "ʹ"  # what the prime becomes: a modifier letter, so that f' is one name, fʹ, that resolving.py reads


def signs(text: str) -> str:
    """The text with the signs the language does not lex written as signs it does, each in one character so
    that every place stays: f'(x) as fʹ(x), ∘ (elementwise) and ⊗ (outer: resolving.py tells it by the
    character written) as ⊙."""
    if "'" in text or "′" in text:  # in a claim's right side only: y' = ... keeps the parser's hint (write dy/dx)
        text = _RIGHT_SIDE.sub(lambda right: _PRIME.sub(PRIME, right.group()), text)
    return text.replace("∘", "⊙").replace("⊗", "⊙") if "∘" in text or "⊗" in text else text


@dataclass
class Unreadable:
    """A line of an answers file (or a --claim) that does not parse: judged invalid, the others still judged."""

    text: str
    line: int | None
    error: GradcalcError


Claims = Sequence[S.Claim | Unreadable]  # a submission's claims, in order, the unreadable lines among them


def parse_claims(text: str, max_depth: int = parser.DEFAULT_MAX_DEPTH) -> list[S.Claim]:
    """Parse a file of claims (one per line, `#` comments), such as a student's answers, in
    gradcalc's notation or in LaTeX (`\\frac{\\partial L}{\\partial w} = ...`, see latex.py)."""
    from . import latex  # only answers files and --claim need it: not imported at start-up

    if not latex.looks_like_latex(text):
        readable = signs(text)
        return parser.parse_claims(readable, max_depth, NOTATION,
                                   None if readable is text else lambda begin, end: text[begin:end])
    read = latex.from_latex(text)
    try:
        # Texts as written, in the LaTeX.
        found = parser.parse_claims(signs(read.text), max_depth, NOTATION,
                                    lambda begin, end: text[read.origin[begin]:read.origin[end - 1] + 1])
    except GradcalcError as error:
        if error.pos is not None:
            error.pos = read.place(error.pos, text)
        raise
    for claim in found:  # and places
        for node in [claim, *S.walk(claim.claimed)]:
            node.pos = read.place(node.pos, text)
    return found


def claims_of_program(module: S.Module) -> list[S.Claim]:
    """A program's own check statements."""
    return [stmt for stmt in module.body if isinstance(stmt, S.Claim)]


def read_claims(path: str, limit: int = DEFAULT_MAX_FILE_SIZE, roots: tuple[str, ...] | None = None
                ) -> tuple[Claims, Source]:
    """A submission's claims: a model file's check statements, or an answers file's lines.

    A file is a model when it ends in .eq, or parses as a program with check
    statements; anything else is an answers file (one claim per line). With roots (a submission
    in a class's folder), it must be a regular file inside them; it is read to at most `limit` bytes.
    """
    text = read_text(path, limit, roots)
    source = Source(text, "<stdin>" if path == "-" else path)
    try:
        if path.endswith(".eq"):
            return claims_of_program(parser.parse(text, dialect=NOTATION)), source
        claims: list[S.Claim] = []
        if _CHECK_STATEMENT.search(text):  # perhaps a model: parse it as one (answers files need not pay that)
            try:
                claims = claims_of_program(parser.parse(text, dialect=NOTATION))
            except GradcalcError:
                pass
        if claims:
            return claims, source
    except GradcalcError as exc:
        raise exc.within(source) from None
    return answers(text, source), source  # not a model: an answers file


def answers(text: str, source: Source) -> list[S.Claim | Unreadable]:
    """The claims of an answers file; where it does not parse, line by line, so that one
    claim's slip costs that claim only (a claim spanning lines then reads as broken)."""
    try:
        return list(parse_claims(text))
    except GradcalcError:
        pass
    found: list[S.Claim | Unreadable] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            found += parse_claims("\n" * (number - 1) + line)  # padded: places stay the file's
        except GradcalcError as exc:
            written = line if "'" in line or '"' in line else line.split("#", 1)[0]  # without its comment
            found.append(Unreadable(" ".join(written.split()), number if source.filename != "--claim" else None,
                                    exc.within(source)))
    return found


def parse_claim_option(text: str) -> tuple[Claims, Source]:
    """The claims of a --claim option (several may be separated by ';' or ',')."""
    source = Source(text, "--claim")
    return answers(text, source), source


def claim_context(seed: int, text: str) -> Context:
    """A claim's reach: no file may be read, and its random draws depend on its own text and the seed only."""
    return Context(B.Random(seed * 2**32 + zlib.crc32(text.encode("utf-8", "surrogatepass"))), None, ())
