"""Where a command's result, warnings and errors go: the one place that reads --json.

A command makes one `Output` and hands it what it has: a result as a JSON document and a view, a
warning, an error. With --json the document goes to standard output and an error to standard
error as one JSON document; without it the view is shown (Rich, imported only then) and errors
and warnings are lines of text.

Where the output's encoding lacks the product's symbols (cp1252, ASCII, a C locale), they are
written as ASCII equivalents from one table: see symbols.py.
"""

import io
import re
import sys
from collections.abc import Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, TextIO

import typer

from ..errors import GradcalcError, Interrupted, error_json, error_text
from .symbols import plain_symbols

if TYPE_CHECKING:  # Rich is imported only when a person reads the output
    from rich.console import Console


class Color(str, Enum):
    """--color: auto (Rich decides from the terminal, NO_COLOR and FORCE_COLOR), always, never."""

    auto = "auto"
    always = "always"
    never = "never"


class Output:
    """How one command speaks: JSON documents (--json) or text for people (coloured as --color says)."""

    def __init__(self, json: bool, color: Color = Color.auto) -> None:
        self.json = json
        self.color = color

    def result(self, doc: Callable[[], dict[str, Any]], view: Callable[[], Any]) -> None:
        """The command's result on standard output: doc() with --json, else view().

        A view is a Rich renderable, or text written as it is (a graph's dot, doctor's lines), or
        None when it wrote its output itself (a picture to a file).
        """
        if self.json:
            from .jsonout import write

            write(doc(), sys.stdout)
            return
        shown = view()
        if shown is None:
            return
        if isinstance(shown, str):
            sys.stdout.write(shown)
            return
        _print(shown, self.color)

    def warning(self, text: str) -> None:
        """A warning on standard error; with --json the command puts it in its document instead
        (standard error holds only errors)."""
        if not self.json:
            sys.stderr.write(f"warning: {text}\n")

    def error(self, error: GradcalcError, status: int) -> typer.Exit:
        """An error as one message on standard error, and the exit that ends the command."""
        return self.failed(lambda: error_json(error), lambda: error_text(error, plain_symbols(sys.stderr)) + "\n",
                           status)

    def interrupted(self) -> typer.Exit:
        """Ctrl-C: "interrupted" as Unix tools say it (no "error:"), an Interrupted error with --json; status 130."""
        return self.failed(lambda: error_json(Interrupted("interrupted")), lambda: "interrupted\n", 130)

    def failed(self, doc: Callable[[], dict[str, Any]], text: Callable[[], str], status: int) -> typer.Exit:
        """A failure on standard error: the JSON error document doc() with --json, else text()."""
        if self.json:
            from .jsonout import write

            write(doc(), sys.stderr)
        else:
            sys.stderr.write(text())
        return typer.Exit(status)


def _print(view: Any, color: Color = Color.auto) -> None:
    """A Rich view on standard output, fitted to a terminal or whole when piped."""
    from .render import Inert, translated

    translate = plain_symbols(sys.stdout)
    if translate is not None:  # before Rich lays the view out, so that columns are as wide as what is written
        view = translated(view, translate)
    shown = Inert(view)
    if sys.stdout.isatty():
        console(sys.stdout, color=color).print(shown)
        return
    # Piped: no width to fit (a wide matrix stays whole) and no padding at line ends, so output diffs cleanly.
    captured = _Captured(sys.stdout)
    console(captured, width=100_000, color=color).print(shown)
    sys.stdout.write("".join(_trimmed(line) for line in captured.getvalue().splitlines(True)))


# A line's end: padding, and with FORCE_COLOR the style codes around it (Rich pads inside a cell's style).
_LINE_END = re.compile(r"(?: |\x1b\[[0-9;]*m)*$")


def _trimmed(line: str) -> str:
    """The line without the spaces at its end; style codes there are kept (they close what the line opened)."""
    text = line.rstrip("\n")
    if "\x1b" not in text:  # no colour (most pipes): the spaces alone
        return text.rstrip(" ") + line[len(text):]
    end = _LINE_END.search(text)
    assert end is not None  # the pattern matches the empty string at the end
    return text[:end.start()] + end.group().replace(" ", "") + line[len(text):]


class _Captured(io.StringIO):
    """Text bound for a stream, held until it is trimmed; Rich reads the stream's encoding from it, and
    draws trees with ASCII guides (+--, `--) where the stream is not UTF-8, as it would writing there."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self._encoding = getattr(stream, "encoding", None)

    @property
    def encoding(self) -> Any:  # type: ignore[override]  # StringIO's is None, and read-only
        return self._encoding


def console(file: TextIO, width: int | None = None, color: Color = Color.auto) -> "Console":
    """The one Rich console gradcalc prints through. With --color auto, colour is Rich's to decide from the
    environment, as it documents: NO_COLOR turns colour off, FORCE_COLOR (non-empty) turns it on even in a
    pipe, TERM=dumb off. --color always and never win over all of them; never writes no escape code at all."""
    from rich.console import Console

    options: dict[str, Any] = {}
    if color is Color.always:  # colour in a pipe, on a dumb terminal and despite NO_COLOR: the flag says so
        options = {"force_terminal": True, "no_color": False, "color_system": "standard"}
    elif color is Color.never:  # neither colour nor bold: what a pipe gets, even under FORCE_COLOR
        options = {"no_color": True, "color_system": None}
    # markup=False: values and claims are shown as they are; '[nan, 2]' is not a style tag.
    return Console(file=file, width=width, soft_wrap=False, markup=False, **options)
