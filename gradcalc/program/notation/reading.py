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
from ...errors import FileProblem, GradcalcError, Pos, Source
from ...files import DEFAULT_MAX_FILE_SIZE, read_text
from ...language import parser
from ...language import syntax as S
from ..builtins import Context
from .juxtaposition import NOTATION

_CHECK_STATEMENT = re.compile(r"(^|;)\s*check\b", re.MULTILINE)
_PRIME = re.compile(r"(?<=\w)['′](?=\()")  # f'(x), σ'(z): Lagrange's prime before a call's bracket
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
    for claim in found:  # and places (each node once: a derivation's last line is its claimed)
        for node in {id(node): node for line in [claim.claimed, *claim.working]
                     for node in [claim, *S.walk(line)]}.values():
            node.pos = read.place(node.pos, text)
    return found


def claims_of_program(module: S.Module) -> list[S.Claim]:
    """A program's own check statements."""
    return [stmt for stmt in module.body if isinstance(stmt, S.Claim)]


_CHECK_LINE = re.compile(r"^[ \t]*check\b")


def model_claims(text: str, source: Source) -> list[S.Claim | Unreadable]:
    """A model's check statements, in order; GradcalcError where the program does not parse. A check line
    in LaTeX (check \\frac{\\partial L}{\\partial w} = ...) is read as an answers file's line is: where it
    does not parse, that claim is invalid, not the model."""
    lines = text.split("\n")
    spans = {}  # each check line: the index past its last line (its derivation's `= ...` lines are its own)
    for number, line in enumerate(lines):
        if _CHECK_LINE.match(line):
            end = number + 1
            while end < len(lines) and _continues(lines[end]):
                end += 1
            spans[number] = end
    latex = {number for number, end in spans.items() if any("\\" in line for line in lines[number:end])}
    blank = {index for number in latex for index in range(number, spans[number])}
    signed = {index for number, end in spans.items() if number not in latex for index in range(number, end)
              if signs(lines[index]) != lines[index]}
    program = "\n".join("" if n in blank else signs(line) if n in signed else line for n, line in enumerate(lines))
    found: list[S.Claim | Unreadable] = list(claims_of_program(parser.parse(program, dialect=NOTATION)))
    if signed:  # each claim's text as written (f'(x), not the fʹ(x) parsed)
        parser.with_claim_texts([claim for claim in found if isinstance(claim, S.Claim)], text)
    for number in sorted(latex):
        for claim in _line_claims("\n".join(lines[number:spans[number]]), number + 1, source):
            if isinstance(claim, Unreadable):
                claim.text = claim.text.removeprefix("check").lstrip()  # as a check statement's claim is shown
            found.append(claim)
    return sorted(found, key=lambda claim: claim.pos.line if isinstance(claim, S.Claim) else claim.line or 0)


def read_claims(path: str, limit: int = DEFAULT_MAX_FILE_SIZE, roots: tuple[str, ...] | None = None
                ) -> tuple[Claims, Source]:
    """A submission's claims: a model file's check statements, or an answers file's lines.

    A file is a model when it ends in .eq, or parses as a program with check
    statements; anything else is an answers file (one claim per line). With roots (a submission
    in a class's folder), it must be a regular file inside them; it is read to at most `limit` bytes.
    """
    text = read_text(path, limit, roots)
    source = Source(text, "<stdin>" if path == "-" else path)
    if path.endswith(".ipynb"):
        return notebook_claims(text, source.filename)
    try:
        if path.endswith(".eq"):
            return model_claims(text, source), source
        claims: Claims = []
        if _CHECK_STATEMENT.search(text):  # perhaps a model: parse it as one (answers files need not pay that)
            try:
                claims = model_claims(text, source)
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
    units: list[tuple[int, list[str]]] = []  # a claim's line and its derivation's lines (`= ...`) below it
    for number, line in enumerate(text.split("\n"), 1):
        if line.strip() and not line.lstrip().startswith("#"):
            if _continues(line) and units:
                units[-1][1].append(line)
            else:
                units.append((number, [line]))
        elif units:
            units[-1][1].append("")  # a blank line or a comment keeps the lines' places
    for number, lines in units:
        found += _line_claims("\n".join(lines).rstrip("\n"), number, source)
    return found


def _continues(line: str) -> bool:
    """Whether a line goes on with the claim above it: a derivation's next line, `= ...` (or `≈ ...`)."""
    return line.lstrip().startswith(("=", "≈", "&=", "\\approx"))


def _line_claims(line: str, number: int, source: Source) -> list[S.Claim | Unreadable]:
    """The claims of one line of a file (number: its line), or the line as unreadable."""
    try:
        return list(parse_claims("\n" * (number - 1) + line))  # padded: places stay the file's
    except GradcalcError as exc:
        if isinstance(exc, parser.DerivationError) and source.filename == "--claim":
            raise exc.within(source) from None  # an option's layout is the command line's slip (2), not an answer's
        written = line if "'" in line or '"' in line else line.split("#", 1)[0]  # without its comment
        return [Unreadable(" ".join(written.split()), number if source.filename != "--claim" else None,
                           exc.within(source))]


def parse_claim_option(text: str) -> tuple[Claims, Source]:
    """The claims of a --claim option (several may be separated by ';' or ',')."""
    source = Source(text, "--claim")
    return answers(text, source), source


def claim_context(seed: int, text: str) -> Context:
    """A claim's reach: no file may be read, and its random draws depend on its own text and the seed only."""
    return Context(B.Random(seed * 2**32 + zlib.crc32(text.encode("utf-8", "surrogatepass"))), None, ())


# A Markdown line read for claims: one whose claim is a derivative (prose and a model's own equations are not).
_DERIVATIVE_HEAD = re.compile(r"∂|\\partial|\\nabla|(?<![^\W\d])d[^\W\d]?\w*\s*/\s*d|\\frac\s*\{\s*(?:\\mathrm\{)?d")
_RELATION = re.compile(r"=|≈|\\\\approx")
_MARKER = re.compile(r"^[ \t]*(?:>[ \t]*)*(?:[-*+][ \t]+|\d+[.)][ \t]+)?(?:check[ \t]+)?")  # >, - or 1., check
_CHECK_CLAIM = re.compile(r"^[ \t]*check[ \t]+[^\s=(]")  # check dL/dw = ...; not Python's check = ..., check(...)


def notebook_claims(text: str, filename: str) -> tuple[Claims, Source]:
    """A Jupyter notebook's claims (nbformat 4, JSON): `check` lines in its code cells, and in its Markdown
    cells each line (or $$...$$ block) that claims a derivative, in gradcalc's notation or in LaTeX, with
    prose around its $...$, with its derivation's lines (`= ...`) below it. The notebook is read as text
    with a line `# cell N (kind)` before each cell's lines, and places are in that text: line 1 of cell 3
    is the line after `# cell 3`. Each line (or block) is read on its own, so that one slip costs that
    claim only."""
    listing: list[str] = []  # the notebook as text, for messages
    found: list[S.Claim | Unreadable] = []
    units: list[tuple[int, str]] = []  # (the line it starts on, its text) for each line or block read
    for number, (kind, lines) in enumerate(_cells(text, filename), 1):
        listing.append(f"# cell {number} ({kind})")
        first = len(listing) + 1  # the cell's first line
        listing += lines
        kept = _code_claims(lines) if kind == "code" else _markdown_claims(lines) if kind == "markdown" else []
        for a, b, marker in kept:
            end = b
            while end < len(lines) and _continues(lines[end]):  # a derivation's next lines (= ...) below its claim
                end += 1
            units.append((first + a, " " * marker + "\n".join(lines[a:end])[marker:]))
    source = Source("\n".join(listing), filename)
    for line, unit in units:
        found += _line_claims(unit, line, source)
    return found, source


def _cells(text: str, filename: str) -> list[tuple[str, list[str]]]:
    """A notebook's cells, each its kind and its lines; GradcalcError (not judged) where it is no notebook."""
    import json  # only notebooks need it

    def malformed(what: str, pos: Pos | None = None) -> GradcalcError:
        return FileProblem(f"not a Jupyter notebook gradcalc reads: {what}",
                           "save it from Jupyter (File > Save) as a .ipynb file of nbformat 4, or submit the "
                           "answers as a text file", pos).within(Source(text, filename))

    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as exc:
        raise malformed(f"its JSON does not parse ({exc.msg})", Pos(exc.lineno, exc.colno)) from None
    except (ValueError, RecursionError):  # nested past Python's limit
        raise malformed("its JSON does not parse") from None
    if not isinstance(notebook, dict):
        raise malformed("it is JSON, but not a notebook's object")
    if notebook.get("nbformat") != 4:
        raise malformed(f"its nbformat is {notebook.get('nbformat')!r}, not 4")
    if not isinstance(notebook.get("cells"), list):
        raise malformed("it has no list of cells")
    cells = []
    for number, cell in enumerate(notebook["cells"], 1):
        body = cell.get("source") if isinstance(cell, dict) else None
        if isinstance(body, list) and all(isinstance(part, str) for part in body):
            body = "".join(body)
        if not isinstance(body, str) or not isinstance(cell.get("cell_type"), str):
            raise malformed(f"cell {number} has no cell_type and text source")
        cells.append((cell["cell_type"], body.replace("\r\n", "\n").split("\n")))
    return cells


def _code_claims(lines: list[str]) -> list[tuple[int, int, int]]:
    """The check lines of a code cell: (its index, the index after it, 0: nothing before the claim to blank)."""
    return [(index, index + 1, 0) for index, line in enumerate(lines) if _CHECK_CLAIM.match(line)]


def _markdown_claims(lines: list[str]) -> list[tuple[int, int, int]]:
    """The lines of a Markdown cell that claim a derivative, as (first, past the last, the length of a list's or
    a quote's marker before it, blanked); a $$...$$ block whole, where it claims one."""
    from .latex import MATH  # only notebooks need it

    def claims(text: str) -> bool:
        return bool(_DERIVATIVE_HEAD.search(text) and _RELATION.search(text))

    kept: list[tuple[int, int, int]] = []
    block = -1  # the first line of an open $$ block
    for index, line in enumerate(lines):
        if block >= 0 or line.count("$$") % 2:
            if block < 0:
                block = index
            elif line.count("$$") % 2:  # the block closes
                if claims("\n".join(lines[block:index + 1])):
                    kept.append((block, index + 1, 0))
                block = -1
            continue
        marker = _MARKER.match(line)
        start = marker.end() if marker else 0
        if "$" in line or "\\(" in line:  # prose with math: where the math claims a derivative
            if any(claims(math.group()) for math in MATH.finditer(line)):
                kept.append((index, index + 1, start))
        elif _DERIVATIVE_HEAD.match(line, start) and _RELATION.search(line):
            kept.append((index, index + 1, start))
    return kept
