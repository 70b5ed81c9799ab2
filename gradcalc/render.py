"""Views for people: small pure functions that return Rich renderables (or error text)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from . import backend as B
from .api import Gradients, Run
from .errors import GradcalcError
from .graph import Node


def shape_text(shape: tuple[int, ...]) -> str:
    return "scalar" if shape == () else "×".join(str(n) for n in shape)


def _kind(run: Run, name: str, node: Node) -> str:
    """leaf, constant, or the grad_fn that made the value (PyTorch's names)."""
    if run.leaves.get(name) is node:
        return "leaf"
    return node.grad_fn or ("constant" if not node.requires_grad else "leaf")


def _table(*columns: tuple[str, str]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for title, justify in columns:
        table.add_column(title, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    return table


def _loop_notes(run: Run) -> list[Text]:
    """How often each loop ran (the graph holds every iteration's operations)."""
    lines = [loop.line for loop in run.loops]
    notes = []
    for loop in run.loops:
        where = f"line {loop.line}" + (f", column {loop.column}" if lines.count(loop.line) > 1 else "")
        notes.append(Text(f"the {loop.kind} loop at {where} ran {loop.iterations:,} time"
                          f"{'s' if loop.iterations != 1 else ''}", style="dim"))
    return notes


def values_view(run: Run, full: bool = False) -> RenderableType:
    """`eval`: every variable's value, shape and how it was made."""
    table = _table(("variable", "left"), ("shape", "left"), ("value", "right"), ("made by", "left"))
    for name, node in run.frame.items():
        table.add_row(name, shape_text(node.value.shape), B.format_value(node.value, full), _kind(run, name, node))
    return Group(table, *_loop_notes(run))


def grad_view(run: Run, result: Gradients, full: bool = False) -> RenderableType:
    """`grad`: the output's value, then each variable's value and gradient."""
    of = result.of
    indent = "\n" + " " * (len(of) + 3)  # continuation lines of a tensor line up after "L = "
    heading = Text.assemble((of, "bold"), " = ", B.format_value(result.value, full).replace("\n", indent))
    if result.value.shape:
        heading.append(f"   (shape {shape_text(result.value.shape)})", style="dim")
    column = f"vᵀ·∂{of}/∂variable" if result.vector is not None else f"∂{of}/∂variable"
    table = _table(("variable", "left"), ("shape", "left"), ("value", "right"), (column, "right"))
    for name, g in result.grads.items():
        node = run.node(name, prefer_leaf=True)
        shown = B.format_value(g, full)
        if name in result.no_path:
            shown += f"  (no path from {of})"
        table.add_row(name, shape_text(node.value.shape), B.format_value(node.value, full), shown)
    return Group(heading, Text(""), table, *_loop_notes(run))


def error_text(error: GradcalcError) -> str:
    """One message: where, what, the offending line with a caret, and how to fix it."""
    source = error.source
    where = source.filename if source is not None else ""
    pos = error.pos
    if pos is not None:
        where = f"{where}:{pos.line}:{pos.column}" if where else f"line {pos.line}, column {pos.column}"
    lines = [f"error: {where}: {error.message}" if where else f"error: {error.message}"]
    if pos is not None and source is not None:
        code = source.line(pos.line).expandtabs(1)
        if code:
            gutter = f"{pos.line:>4} | "
            lines.append(gutter + code)
            lines.append(" " * (len(gutter) - 2) + "| " + " " * (pos.column - 1) + "^" * max(1, pos.width))
    if error.hint:
        lines.append(f"  hint: {error.hint}")
    return "\n".join(lines)


def error_json(error: GradcalcError) -> dict[str, Any]:
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
