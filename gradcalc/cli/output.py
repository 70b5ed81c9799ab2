"""Where a command's result, warnings and errors go: the one place that reads --json.

A command makes one `Output` and hands it what it has: a result as a JSON document and a view, a
warning, an error. With --json the document goes to standard output and an error to standard
error as one JSON document; without it the view is shown (Rich, imported only then) and errors
and warnings are lines of text.
"""

import io
import sys
from collections.abc import Callable
from typing import Any

import typer

from ..errors import GradcalcError, Interrupted, error_json, error_text


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
    from rich.console import Console

    from .render import Inert

    shown = Inert(view)
    # markup=False: values and claims are shown as they are; '[nan, 2]' is not a style tag.
    if sys.stdout.isatty():
        Console(soft_wrap=False, markup=False).print(shown)
        return
    # Piped: no width to fit (a wide matrix stays whole) and no padding at line ends, so output diffs cleanly.
    console = Console(soft_wrap=False, width=100_000, record=True, file=io.StringIO(), markup=False)
    console.print(shown)
    sys.stdout.write("\n".join(line.rstrip() for line in console.export_text().splitlines()) + "\n")
