"""The graph as text for other tools: Graphviz DOT and Mermaid, and pictures through Graphviz."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from ..engine import backend as B
from ..engine.graphview import SUMMARIES, View, ViewEdge, ViewNode
from ..errors import GradcalcError, UsageError


def node_lines(view: View, node: ViewNode) -> list[str]:
    """What a node's box says: name and value, grad_fn, shape, ∂output/∂node (or what a summary stands for)."""
    if node.kind == "collapsed":
        return [f"… {node.count} more '{node.label}' nodes like these", f"({run_note(node)})"]
    if node.kind == "omitted":
        return [f"… {node.count:,} more nodes", f"not drawn: the graph has {view.total:,} nodes, too many to draw each"]
    value = B.format_value(node.value, threshold=6).replace("\n", " ")
    lines = [f"{node.label} = {value}" if node.shape == () or node.value.size <= 6 else node.label]
    lines.append(node.grad_fn or ("detached: no gradient" if node.kind == "detached" else "constant"))
    if node.shape:
        lines.append("shape " + "×".join(map(str, node.shape)))
    if node.grad is not None:
        lines.append(f"∂{view.of}/∂{node.label} = {B.format_value(node.grad, threshold=6)}".replace("\n", " "))
    if node.origin:
        lines.append(node.origin[-1])
    return lines


def run_note(node: ViewNode) -> str:
    """Where a run of one variable comes from: its loop, or straight-line statements."""
    return node.origin[-1].split(" of the ", 1)[-1] if node.origin else "straight-line statements"


def edge_text(view: View, edge: ViewEdge) -> str:
    """∂user/∂input = expression = number (the tutorial's edge label)."""
    if edge.detached:
        return edge.text  # "detached", or "constant" into a constant
    if _to_omitted(view, edge):
        return "…"
    source, target = view.nodes[edge.source].label, view.nodes[edge.target].label
    text = f"∂{source}/∂{target} = {edge.text}"
    if edge.value is not None and B.format_number(float(edge.value)) != edge.text:
        text += f" = {B.format_number(float(edge.value))}"
    return text


def _to_omitted(view: View, edge: ViewEdge) -> bool:
    """An edge into the summary of the nodes past VIEW_LIMIT: no derivative was worked out for it."""
    return view.nodes[edge.target].kind == "omitted"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def dot(view: View) -> str:
    """Graphviz DOT, output at the top as in the tutorials' figures."""
    lines = ["digraph gradcalc {", "  rankdir=TB;", '  node [shape=box, style="rounded", fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=10];']
    for node in view.nodes:
        style = {"leaf": ', style="rounded,filled", fillcolor="#e8f0fe"', "detached": ', style="rounded,dashed"',
                 "output": ', style="rounded,bold"', "collapsed": ', style="rounded,dotted"',
                 "omitted": ', style="rounded,dotted"'}.get(node.kind, "")
        label = "\\n".join(_quote(line) for line in node_lines(view, node))
        lines.append(f'  n{node.id} [label="{label}"{style}];')
    for edge in view.edges:
        dashed = ", style=dashed" if edge.detached else ", style=dotted" if _to_omitted(view, edge) else ""
        lines.append(f'  n{edge.source} -> n{edge.target} [label="{_quote(edge_text(view, edge))}"{dashed}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;")


def mermaid(view: View) -> str:
    """A Mermaid flowchart, top-down from the output."""
    lines = ["graph TD"]
    for node in view.nodes:
        label = "<br/>".join(_mermaid_text(line) for line in node_lines(view, node))
        lines.append(f'  n{node.id}["{label}"]')
    for edge in view.edges:
        arrow = "-.->" if edge.detached or _to_omitted(view, edge) else "-->"
        lines.append(f'  n{edge.source} {arrow}|"{_mermaid_text(edge_text(view, edge))}"| n{edge.target}')
    return "\n".join(lines) + "\n"


def picture(view: View, kind: str) -> bytes:
    """SVG or PNG bytes, drawn by Graphviz's dot program."""
    program = shutil.which("dot")
    if program is None:
        raise UsageError(
            f"--format {kind} needs Graphviz's dot program, which is not installed",
            "install Graphviz (apt-get install graphviz, brew install graphviz, or graphviz.org), "
            "or print the graph's text with --format dot or --format mermaid",
        )
    try:
        done = subprocess.run([program, f"-T{kind}"], input=dot(view).encode("utf-8"), capture_output=True,
                              timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GradcalcError(f"Graphviz's dot failed: {exc}", "try --format dot and draw it yourself") from None
    if done.returncode != 0:
        raise GradcalcError(f"Graphviz's dot failed: {done.stderr.decode(errors='replace').strip()[:300]}",
                            "try --format dot and draw it yourself")
    return done.stdout


def view_json(view: View) -> dict[str, Any]:
    """The SPEC's {"nodes": [...], "edges": [...]}; past VIEW_LIMIT nodes, summaries and "total_nodes" too."""
    doc: dict[str, Any] = {
        "of": view.of,
        "nodes": [_node_json(n) for n in view.nodes],
        "edges": [{"from": e.source, "to": e.target, "derivative": e.text,
                   "value": None if e.value is None else B.to_json(e.value), "detached": e.detached}
                  for e in view.edges],
    }
    if not view.complete:
        doc["total_nodes"] = view.total
    return doc


def _node_json(n: ViewNode) -> dict[str, Any]:
    if n.kind in SUMMARIES:
        return {"id": n.id, "name": n.label, "grad_fn": None, "shape": list(n.shape), "value": None, "grad": None,
                "is_leaf": False, "kind": n.kind, "origin": n.origin, "count": n.count}
    return {"id": n.id, "name": n.label, "grad_fn": n.grad_fn, "shape": list(n.shape),
            "value": B.to_json(n.value), "grad": None if n.grad is None else B.to_json(n.grad),
            "is_leaf": n.kind in ("leaf", "detached", "constant") and n.node.op is None, "kind": n.kind,
            "origin": n.origin}
