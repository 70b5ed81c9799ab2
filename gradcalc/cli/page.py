"""`gradcalc graph --format html`: one self-contained page that plays the backward pass.

The page is made from the graph view (engine/graphview.py) alone, as the tree and the other formats
are: the same nodes with the same ids, the boxes' lines and the edges' labels from drawing.py, the
steps of the backward pass from graphview.backward_steps and each node's paths from graphview.explain,
the function `gradcalc explain` prints. Numbers are written here, as the terminal writes them
(six significant digits), so the page shows what the commands print. The template, its script and
style, and the layout library live in gradcalc/cli/page/ (package data).
"""

from __future__ import annotations

import io
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

from ..engine import backend as B
from ..engine import graphview
from ..engine.graphview import SUMMARIES, View, ViewNode
from ..errors import LimitExceeded
from . import drawing

if TYPE_CHECKING:
    from ..program.api import Run

# Paths are listed for every node of a view up to this size: explain walks the graph once per node.
PATHS_LIMIT = 400


def html(view: View, run: Run | None = None) -> bytes:
    """The page: the template with its script, style, layout library and the graph as JSON inlined."""
    if run is not None:
        locate(view, run)
    folder = resources.files(__package__).joinpath("page")
    parts = {name: folder.joinpath(name).read_text(encoding="utf-8")
             for name in ("page.html", "page.css", "page.js", "dagre.min.js")}
    page = parts["page.html"]
    # One pass over the template's markers: what replaces one is never searched for the next.
    for marker, text in (("/*STYLE*/", parts["page.css"]), ("/*DAGRE*/", parts["dagre.min.js"]),
                         ("/*SCRIPT*/", parts["page.js"]), ("/*DATA*/", data_json(view)),
                         ("<!--TITLE-->", _html_text(f"∂{view.of}: the graph of {view.of}, step by step"))):
        before, found, after = page.partition(marker)
        if not found:
            raise AssertionError(f"page.html has no {marker}")
        page = before + text + after
    return page.encode("utf-8")


def data_json(view: View) -> str:
    """The page's data, safe inside <script type="application/json">: no '<', '>' or '&' (escaped as \\u003c ...),
    so no name or value from a student's file can close the script element or open another."""
    text = json.dumps(page_doc(view), ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


def _html_text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def page_doc(view: View) -> dict[str, Any]:
    """What the page draws: the view's nodes and edges by id, with their text, the steps and the paths."""
    steps = graphview.backward_steps(view)
    order = {step.node: i for i, step in enumerate(steps)}
    paths = len(view.nodes) <= PATHS_LIMIT and view.complete and bool(steps)
    return {
        "of": view.of,
        "total": view.total,
        "complete": view.complete,
        "nodes": [_node(view, node, order.get(node.id), paths) for node in view.nodes],
        "edges": [{"from": e.source, "to": e.target, "derivative": e.text, "label": drawing.edge_text(view, e),
                   "value": _number(e.value), "detached": e.detached} for e in view.edges],
        "steps": [{"node": s.node, "terms": [{"from": e.source, "local": e.text, "local_value": _number(e.value),
                                              "upstream": _value(g), "product": _number(p)} for e, g, p in s.terms],
                   "total": _number(s.total), "grad": _value(s.gradient),
                   "agrees": s.total is not None and bool(B.close(s.total, s.gradient))} for s in steps],
    }


def _node(view: View, node: ViewNode, step: int | None, paths: bool) -> dict[str, Any]:
    summary = node.kind in SUMMARIES
    doc: dict[str, Any] = {
        "id": node.id, "name": node.label, "kind": node.kind, "grad_fn": node.grad_fn, "shape": list(node.shape),
        "origin": node.origin, "count": node.count, "box": drawing.node_lines(view, node),
        "value": None if summary or node.value is None else _value(node.value),
        "grad": None if node.grad is None else _value(node.grad),
        "line": node.line, "statement": node.statement, "step": step,
    }
    if paths and node.grad is not None:
        doc["paths"] = _paths(view, node)
    return doc


def _paths(view: View, node: ViewNode) -> dict[str, Any] | None:
    """`gradcalc explain --wrt NODE`'s text as the terminal shows it, and its paths' routes (for highlighting)."""
    from .output import Color, console
    from .render import Inert, explain_view

    try:
        found = graphview.explain(view, node.node, node.label)
    except LimitExceeded:
        return None
    text = io.StringIO()
    console(text, width=100_000, color=Color.never).print(Inert(explain_view(found, view)))
    return {"count": found.count, "text": "\n".join(line.rstrip() for line in text.getvalue().splitlines()),
            "routes": [[0, *(e.target for e in p.edges)] for p in found.paths],
            "via": [e.source for e, _, _ in found.groups]}


def _number(value: Any) -> str | None:
    return None if value is None else B.format_number(float(value))


def _value(value: Any) -> str | None:
    return None if value is None else B.format_value(value)


def locate(view: View, run: Run) -> None:
    """Each named node's statement and line (ViewNode.line, .statement), where the program says which.

    A name assigned by one statement was made by it (in every loop iteration); a name assigned by
    several, by the last one run when the node is the name's final value, else by one of those that
    make a leaf (for a leaf) or a computed value (for the others), which are listed where there are several.
    """
    from ..language import syntax as S

    program = run.program
    assigned: dict[str, list[S.Assign]] = {}
    for stmt in S.statements(program.module.body, functions=True):
        if isinstance(stmt, S.Assign):
            assigned.setdefault(stmt.name, []).append(stmt)
    final = run.state.final
    checker = run.interpreter.checker
    inputs = run.inputs
    for node in view.nodes:
        name = node.node.name
        if node.kind in SUMMARIES or name is None:
            continue
        if node.kind == "leaf" and name in inputs and run.state.leaves.get(name) is node.node:
            node.statement = f"given by --set {name}=..."
            continue
        stmts = assigned.get(name, [])
        if run.frame.get(name) is node.node and name in final:
            stmts = [final[name]]
        else:  # a leaf comes from a statement that reads no variable, a computed value from one that does
            made_leaf = node.node.op is None
            stmts = [s for s in stmts if checker.is_leaf(s) == made_leaf] or stmts
        texts = [_statement(program.source.line(s.pos.line), s.pos.column) for s in stmts]
        if len(stmts) == 1:
            node.line, node.statement = stmts[0].pos.line, texts[0]
        elif stmts:
            node.statement = "one of: " + "; ".join(f"{t} (line {s.pos.line})" for s, t in zip(stmts, texts))


def _statement(line: str, column: int) -> str:
    """The statement that starts at `column` of `line`: up to the next ';', '#' or closing bracket of its block,
    outside its own brackets and quotes."""
    depth, quote = 0, ""
    text = line[column - 1:]
    for i, char in enumerate(text):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}" and depth:
            depth -= 1
        elif char in ";#)]}" and not depth:  # the statement's end, or the end of the block it is the last of
            return text[:i].strip()
    return text.strip()
