"""The one error family of gradcalc: every bad input becomes a GradcalcError."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


@dataclass(frozen=True)
class Source:
    """A program's text and where it came from, for error messages."""

    text: str
    filename: str = "<expr>"

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


class UsageError(GradcalcError):
    """A bad option: an unknown --of, a --set of a computed variable, a missing --vector."""

    kind = "UsageError"


def did_you_mean(name: str, candidates: object) -> str:
    """A 'did you mean' suffix for a misspelt name, or an empty string."""
    import difflib

    cutoff = 0.5 if len(name) <= 3 else 0.6  # w5 is close to w4
    close = difflib.get_close_matches(name, sorted(set(map(str, candidates))), n=1, cutoff=cutoff)
    return f"did you mean '{close[0]}'?" if close else ""
