"""Where a command's result, warnings and errors go: the one place that reads --json.

A command makes one `Output` and hands it what it has: a result as a JSON document and a view, a
warning, an error. With --json the document goes to standard output and an error to standard
error as one JSON document; without it the view is shown (Rich, imported only then) and errors
and warnings are lines of text.
"""

import io
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

import typer

from ..errors import GradcalcError, Interrupted, error_json, error_text

if TYPE_CHECKING:  # Rich is imported only when a person reads the output
    from rich.console import Console


class Output:
    """How one command speaks: JSON documents (--json) or text for people."""

    def __init__(self, json: bool) -> None:
        self.json = json

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
        _print(shown)

    def warning(self, text: str) -> None:
        """A warning on standard error; with --json the command puts it in its document instead
        (standard error holds only errors)."""
        if not self.json:
            sys.stderr.write(f"warning: {text}\n")

    def error(self, error: GradcalcError, status: int) -> typer.Exit:
        """An error as one message on standard error, and the exit that ends the command."""
        return self.failed(lambda: error_json(error), lambda: error_text(error) + "\n", status)

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


def _print(view: Any) -> None:
    """A Rich view on standard output, fitted to a terminal or whole when piped."""
    from .render import Inert

    shown = Inert(view)
    if sys.stdout.isatty():
        console(sys.stdout).print(shown)
        return
    # Piped: no width to fit (a wide matrix stays whole) and no padding at line ends, so output diffs cleanly.
    captured = io.StringIO()
    console(captured, width=100_000).print(shown)
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


def console(file: TextIO, width: int | None = None) -> "Console":
    """The one Rich console gradcalc prints through. Colour is Rich's to decide from the environment, as it
    documents: NO_COLOR turns colour off, FORCE_COLOR (non-empty) turns it on even in a pipe, TERM=dumb off."""
    from rich.console import Console

    # markup=False: values and claims are shown as they are; '[nan, 2]' is not a style tag.
    return Console(file=file, width=width, soft_wrap=False, markup=False)
