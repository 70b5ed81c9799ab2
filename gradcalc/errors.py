"""The one error family of gradcalc: every bad input becomes a GradcalcError."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple


class Source:
    """A program's text and where it came from, for error messages."""

    # Plain classes, not dataclasses, on the path every command takes: making a dataclass costs about
    # half a millisecond at import, and the 15 of them were a tenth of gradcalc's own start-up (#21).
    __slots__ = ("filename", "text")

    def __init__(self, text: str, filename: str = "<expr>") -> None:
        self.text = text
        self.filename = filename

    def line(self, number: int) -> str:
        lines = self.text.split("\n")  # as the lexer counts lines: \f and \u2028 do not end one
        return lines[number - 1].rstrip("\r") if 0 < number <= len(lines) else ""


class Pos(NamedTuple):
    """A place in a source: 1-based line and column, and how many columns it spans.

    A named tuple: the parser makes one per syntax node, and it is the cheapest record.
    """

    line: int
    column: int
    width: int = 1


def pos_at(text: str, index: int, width: int = 1) -> Pos:
    """The place of the character at text[index]."""
    return Pos(text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1, width)


def line_starts(text: str) -> list[int]:
    """The index where each line of text starts, and the text's length last."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    return starts


class GradcalcError(Exception):
    """A bad input or a bad use: carries a kind, a message, a fix and a place.

    The CLI turns it into one message (or a JSON error) and exit status 2.
    """

    kind = "Error"

    def __init__(self, message: str, hint: str = "", pos: Pos | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.pos = pos
        self.source: Source | None = None  # set where the program's text is known

    def at(self, pos: Pos | None) -> GradcalcError:
        """Attach a place unless the error already has a more precise one."""
        if self.pos is None and pos is not None:
            self.pos = pos
        return self

    def within(self, source: Source) -> GradcalcError:
        """Name the source the place refers to, unless one is named already."""
        if self.source is None:
            self.source = source
        return self

    def __str__(self) -> str:
        return self.message


class GradcalcSyntaxError(GradcalcError):
    kind = "SyntaxError"


class NameNotFound(GradcalcError):
    kind = "NameError"


class ShapeError(GradcalcError):
    kind = "ShapeError"


class ValueProblem(GradcalcError):
    """A value outside an operation's domain: a singular matrix, a bad size, a bad index."""

    kind = "ValueError"


class ArgumentError(GradcalcError):
    """A builtin called with the wrong number or kind of arguments."""

    kind = "ArgumentError"


class FileProblem(GradcalcError):
    kind = "FileError"


class LimitExceeded(GradcalcError):
    kind = "LimitError"


class TimedOut(LimitExceeded):
    """Past --timeout: a command, or one submission while grading (kind TimeoutError, as grading counts it)."""

    kind = "TimeoutError"


class Interrupted(GradcalcError):
    """Ctrl-C (reported only with --json: without it, the word "interrupted", as Unix tools say it)."""

    kind = "Interrupted"


class InternalError(GradcalcError):
    """A bug in gradcalc, reported without a traceback (exit 3)."""

    kind = "InternalError"


class UsageError(GradcalcError):
    """A bad option: an unknown --of, a --set of a computed variable, a missing --vector."""

    kind = "UsageError"


def out_of_memory() -> LimitExceeded:
    """The error for a run past its memory budget (NumPy's MemoryError)."""
    return LimitExceeded("out of memory: the run needs more memory than --max-memory allows",
                         "make the tensors smaller, or raise --max-memory (and --max-elements)")


SHOWN = 120  # the most characters of a line an error shows


def _columns(text: str) -> int:
    """How many columns a terminal gives the text: an accent typed after its letter none, a wide character two."""
    if text.isascii():
        return len(text)
    from unicodedata import combining, east_asian_width

    return sum(0 if combining(c) else 2 if east_asian_width(c) in "WF" else 1 for c in text)


def error_text(error: GradcalcError, written: Callable[[str], str] | None = None) -> str:
    """One message: where, what, the offending line with a caret, and how to fix it. `written` gives text as
    the stream will write it (θ as a backslash escape in cp1252), so the caret stays under its character."""
    from .inert import inert

    def shown(text: str) -> int:  # the columns of a part of the line, as it is written
        return _columns(inert(text) if written is None else written(inert(text)))

    # Each part may quote a file: its name, its text, a claim. Escaped part by part, so no part
    # can add a line, move the cursor or talk to the terminal.
    source = error.source
    where = inert(source.filename) if source is not None else ""
    pos = error.pos
    if pos is not None:
        where = f"{where}:{pos.line}:{pos.column}" if where else f"line {pos.line}, column {pos.column}"
    message = inert(error.message)
    lines = [f"error: {where}: {message}" if where else f"error: {message}"]
    if pos is not None and source is not None:
        code = source.line(pos.line).expandtabs(1)
        if code:
            # a long line (a generated program's, a hostile submission's) is shown as a window around the caret
            start = max(0, min(pos.column - 1 - SHOWN // 2, len(code) - SHOWN))
            before, after = ("..." if start else ""), ("..." if start + SHOWN < len(code) else "")
            marked = code[pos.column - 1:min(pos.column - 1 + max(1, pos.width), start + SHOWN)]
            column = len(before) + shown(code[start:pos.column - 1]) + 1  # the caret's, the line escaped
            width = max(1, shown(marked))
            gutter = f"{pos.line:>4} | "
            lines.append(gutter + before + inert(code[start:start + SHOWN]) + after)
            lines.append(" " * (len(gutter) - 2) + "| " + " " * (column - 1) + "^" * width)
    if error.hint:
        lines.append(f"  hint: {inert(error.hint)}")
    return "\n".join(lines)


def error_json(error: GradcalcError) -> dict[str, Any]:
    """The SPEC's JSON error: {"error": {type, message, line, column}}, plus file and hint."""
    pos = error.pos
    body: dict[str, Any] = {
        "type": error.kind,
        "message": error.message,
        "line": pos.line if pos else None,
        "column": pos.column if pos else None,
    }
    if error.source is not None:
        body["file"] = error.source.filename
    if error.hint:
        body["hint"] = error.hint
    return {"error": body}


def did_you_mean(name: str, candidates: Iterable[object]) -> str:
    """A 'did you mean' suffix for a misspelt name, or an empty string."""
    import difflib

    known = sorted(set(map(str, candidates)))
    same_letters = [c for c in known if c.lower() == name.lower()]  # W1 for w1
    cutoff = 0.5 if len(name) <= 3 else 0.6  # w5 is close to w4
    close = same_letters or difflib.get_close_matches(name, known, n=1, cutoff=cutoff)
    return f"did you mean '{close[0]}'?" if close else ""
