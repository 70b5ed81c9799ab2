"""The graph as text for other tools: Graphviz DOT and Mermaid, and pictures through Graphviz."""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from ..engine import backend as B
from ..engine.graphview import SUMMARIES, View, ViewEdge, ViewNode
from ..errors import GradcalcError, UsageError

EDGE_CHARS = 40  # a tensor edge's expression is cut to this many characters unless --detail full
DPI = 96  # Graphviz's own default for PNG, said out loud: --size counts pixels at it


def node_lines(view: View, node: ViewNode) -> list[str]:
    """What a node's box says: name and value, grad_fn, shape, ∂output/∂node (or what a summary stands for).

    --detail (view.options.values) picks how much of a value: none, a tensor's shape, its shape and
    summary (min, max, norm: scalars in full), or the value itself.
    """
    if node.kind == "collapsed":
        return [f"… {node.count} more '{node.label}' nodes like these", f"({run_note(node)})"]
    if node.kind == "omitted":
        why = node.note or f"the graph has {view.total:,} nodes, too many to draw each"
        return [f"… {node.count:,} more nodes", f"not drawn: {why}"]
    mode = view.options.values
    tensor = node.shape != ()
    whole = mode != "none" and (not tensor or mode == "full")
    lines = [f"{node.label} = {B.format_value(node.value, threshold=6)}" if whole else node.label]
    lines.append(node.grad_fn or ("detached: no gradient" if node.kind == "detached" else "constant"))
    if tensor and mode != "none":
        lines.append("shape " + "×".join(map(str, node.shape)))
    if tensor and mode == "summary":
        lines.append(summary_text(node.value))
    if node.grad is not None and mode != "none" and (not tensor or mode in ("summary", "full")):
        grad = summary_text(node.grad) if tensor and mode == "summary" else B.format_value(node.grad, threshold=6)
        lines.append(f"∂{view.of}/∂{node.label}{':' if tensor and mode == 'summary' else ' ='} {grad}")
    if node.call:
        lines.append(f"{node.call}: one node (--expand {node.call.split('(', 1)[0]})")
    elif node.origin:
        lines.append(node.origin[-1])
    return [line.replace("\n", " ") for line in lines]


def summary(value: Any) -> dict[str, float]:
    """A tensor in three numbers: its least and greatest entries and its (Frobenius) norm."""
    host = B.to_host(value).astype(float)
    return {"min": float(host.min()), "max": float(host.max()), "norm": float((host * host).sum() ** 0.5)} \
        if host.size else {"min": 0.0, "max": 0.0, "norm": 0.0}


def summary_text(value: Any) -> str:
    """min, max and norm, with four significant digits: for people, next to a shape."""
    found = summary(value)
    return "  ".join(f"{key} {found[key]:.4g}" for key in ("min", "max", "norm"))


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
    expression = edge.text
    if view.options.values != "full" and len(expression) > EDGE_CHARS:  # a tensor's vjp: its start says enough
        expression = expression[:EDGE_CHARS - 1].rstrip() + "…"
    text = f"∂{source}/∂{target} = {expression}"
    if edge.value is not None and view.options.values != "none" and \
            B.format_number(float(edge.value)) != edge.text:
        text += f" = {B.format_number(float(edge.value))}"
    return text


def _to_omitted(view: View, edge: ViewEdge) -> bool:
    """An edge into the summary of the nodes past VIEW_LIMIT: no derivative was worked out for it."""
    return view.nodes[edge.target].kind == "omitted"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def dot(view: View) -> str:
    """Graphviz DOT, output at the top (or the left: --direction LR) as in the tutorials' figures."""
    lines = ["digraph gradcalc {", f"  rankdir={view.options.direction};",
             '  node [shape=box, style="rounded", fontname="Helvetica"];',
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
    lines = ["graph TD" if view.options.direction == "TB" else "graph LR"]
    for node in view.nodes:
        label = "<br/>".join(_mermaid_text(line) for line in node_lines(view, node))
        lines.append(f'  n{node.id}["{label}"]')
    for edge in view.edges:
        arrow = "-.->" if edge.detached or _to_omitted(view, edge) else "-->"
        lines.append(f'  n{edge.source} {arrow}|"{_mermaid_text(edge_text(view, edge))}"| n{edge.target}')
    return "\n".join(lines) + "\n"


def picture(view: View, kind: str, dpi: int | None = None, size: tuple[int, int] | None = None) -> bytes:
    """SVG or PNG bytes, drawn by Graphviz's dot program; a PNG at dpi, shrunk to fit size (pixels) if given."""
    program = shutil.which("dot")
    if program is None:
        raise UsageError(
            f"--format {kind} needs Graphviz's dot program, which is not installed",
            "install Graphviz (apt-get install graphviz, brew install graphviz, or graphviz.org), "
            "or print the graph's text with --format dot or --format mermaid",
        )
    try:
        scale = [f"-Gdpi={dpi or DPI}"] if kind == "png" else []
        if size is not None:  # Graphviz's size is in inches: shrinks the picture to fit, never grows it
            scale.append(f"-Gsize={size[0] / (dpi or DPI):.4f},{size[1] / (dpi or DPI):.4f}")
        done = subprocess.run([program, f"-T{kind}", *scale], input=dot(view).encode("utf-8"), capture_output=True,
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
    options = view.options
    doc["options"] = {"detail": options.values, "focus": list(options.focus), "depth": options.depth,
                      "expand": None if options.expand is None else list(options.expand), "all": options.everything,
                      "direction": options.direction}
    doc["hidden_nodes"] = view.hidden
    return doc


def _node_json(n: ViewNode) -> dict[str, Any]:
    if n.kind in SUMMARIES:
        return {"id": n.id, "name": n.label, "grad_fn": None, "shape": list(n.shape), "value": None, "grad": None,
                "is_leaf": False, "kind": n.kind, "origin": n.origin, "count": n.count, "call": None,
                "summary": None, "grad_summary": None, "note": n.note}
    tensor = n.shape != ()
    return {"id": n.id, "name": n.label, "grad_fn": n.grad_fn, "shape": list(n.shape),
            "value": B.to_json(n.value), "grad": None if n.grad is None else B.to_json(n.grad),
            "is_leaf": n.kind in ("leaf", "detached", "constant") and n.node.op is None, "kind": n.kind,
            "origin": n.origin, "call": n.call, "summary": _summary_json(n.value) if tensor else None,
            "grad_summary": _summary_json(n.grad) if tensor and n.grad is not None else None}


def _summary_json(value: Any) -> dict[str, Any]:
    return {key: B.to_json(number) for key, number in summary(value).items()}
