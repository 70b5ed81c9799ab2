"""`gradcalc graph` and `gradcalc explain`: the graph as the tutorials draw it, and the chain rule as a sum over paths.

Every expected number comes from the SPEC's seeds, a closed form, finite differences or autograd (`run.grad`),
never from the function under test; the expected structure (nodes, edges, paths) is derived from the program text.
"""

from __future__ import annotations

import io
import json
import math
import re
import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from itertools import product
from typing import Any

import numpy as np
import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    NEURON,
    NEURON_TENSOR,
    SAMPLES,
    assert_bad_input,
    assert_no_traceback,
    examples,
    json_ok,
    run_cli,
    strict_json,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import gradcalc
from gradcalc.cli import drawing, render
from gradcalc.engine import graphview
from gradcalc.language.parser import DEFAULT_MAX_DEPTH, raise_recursion_limit

# gradcalc raises the recursion limit on its first run; do it now, so that Hypothesis does not see it change.
raise_recursion_limit(DEFAULT_MAX_DEPTH)

DOUBLING = str(SAMPLES / "doubling.eq")
HAS_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot is not installed")

# --- the toy network (SPEC, seed example 1), by hand ------------------------------------------------------------

TOY = {"a": 2.0, "w1": 3.0, "w2": -1.0, "w3": 0.5, "w4": 4.0}
TOY_VALUES = {**TOY, "b": 6.0, "c": -2.0, "d": -5.0, "L": 15.0}
# ∂L/∂node: the SPEC's numbers (∂L/∂b = -w3, ∂L/∂c = -w4 by the chain rule)
TOY_GRADS = {"L": 1.0, "d": -1.0, "b": -0.5, "c": -4.0, "w1": -1.0, "w2": -8.0, "w3": -6.0, "w4": 2.0, "a": 2.5}
TOY_GRAD_FNS = {"L": "RsubBackward1", "d": "AddBackward0", "b": "MulBackward0", "c": "MulBackward0",
                **{leaf: "AccumulateGrad" for leaf in TOY}}
# (user, input): (∂user/∂input as an expression, its value)
TOY_EDGES = {
    ("L", "d"): ("-1", -1.0),
    ("d", "b"): ("w3", 0.5),
    ("d", "c"): ("w4", 4.0),
    ("d", "w3"): ("b", 6.0),
    ("d", "w4"): ("c", -2.0),
    ("b", "w1"): ("a", 2.0),
    ("b", "a"): ("w1", 3.0),
    ("c", "w2"): ("a", 2.0),
    ("c", "a"): ("w2", -1.0),
}


def toy_run() -> Any:
    return gradcalc.parse_program((SAMPLES / "neuron.eq").read_text()).run({}, keep_values=True)


def run_of(text: str, values: dict[str, Any] | None = None) -> Any:
    return gradcalc.parse_program(text).run(values or {}, keep_values=True)


def tree_text(view: Any) -> str:
    console = Console(width=400, file=io.StringIO(), record=True, color_system=None, soft_wrap=False)
    console.print(render.graph_tree(view))
    return "\n".join(line.rstrip() for line in console.export_text().splitlines())


def shows_node(line: str, name: str, value: float) -> bool:
    """Whether a tree line shows the node `name = value` (not an edge label that mentions it)."""
    return re.search(rf"(^|  |── ){re.escape(name)} = {value:g}( |$)", line) is not None


def edges_by_name(view: Any) -> dict[tuple[str, str], Any]:
    return {(view.nodes[e.source].label, view.nodes[e.target].label): e for e in view.edges}


# --- graph: the toy network ---------------------------------------------------------------------------------------

def test_toy_view_has_the_seeds_nodes_values_gradients_and_grad_fns() -> None:
    view = toy_run().graph("L")
    labels = [n.label for n in view.nodes]
    assert sorted(labels) == sorted(TOY_VALUES), labels
    assert view.nodes[0].label == "L" and view.nodes[0].kind == "output"
    for node in view.nodes:
        assert float(node.value) == pytest.approx(TOY_VALUES[node.label]), node.label
        assert node.grad is not None and float(node.grad) == pytest.approx(TOY_GRADS[node.label]), node.label
        assert node.grad_fn == TOY_GRAD_FNS[node.label], node.label
        assert node.shape == ()
        expected_kind = "output" if node.label == "L" else "leaf" if node.label in TOY else "computed"
        assert node.kind == expected_kind, node.label


def test_toy_view_edges_are_the_local_partial_derivatives() -> None:
    view = toy_run().graph("L")
    edges = edges_by_name(view)
    assert len(view.edges) == len(TOY_EDGES), [(k, e.text) for k, e in edges.items()]
    assert set(edges) == set(TOY_EDGES)
    for key, (text, value) in TOY_EDGES.items():
        edge = edges[key]
        assert edge.text == text, (key, edge.text)
        assert float(edge.value) == pytest.approx(value), key
        assert not edge.detached


def test_toy_view_gradients_agree_with_autograd() -> None:
    run = toy_run()
    view = run.graph("L")
    grads = run.grad(of="L", wrt=list(TOY) + ["b", "c", "d"]).grads
    for node in view.nodes[1:]:
        assert float(node.grad) == pytest.approx(float(grads[node.label])), node.label


def test_graph_tree_shows_every_edge_label_value_and_gradient() -> None:
    result = run_cli("graph", NEURON)
    assert result.exit_code == EXIT_OK, result.output
    assert_no_traceback(result)
    text = result.stdout
    for (user, child), (expression, value) in TOY_EDGES.items():
        number = f"{value:g}"
        label = f"∂{user}/∂{child} = {expression}" + ("" if expression == number else f" = {number}")
        assert label in text, (label, text)
    for name, value in TOY_VALUES.items():
        assert sum(shows_node(line, name, value) for line in text.splitlines()) == 1, (name, text)
    for name, grad in TOY_GRADS.items():
        if name != "L":
            assert f"∂L/∂{name} = {grad:g}" in text, (name, text)
    for name in ("RsubBackward1", "AddBackward0", "MulBackward0", "AccumulateGrad"):
        assert name in text


def test_graph_tree_marks_leaves_and_draws_a_shared_node_once() -> None:
    text = run_cli("graph", NEURON).stdout
    lines = text.strip().splitlines()
    assert len(lines) == 10, text  # 9 nodes, and `a` referenced a second time
    for leaf, value in TOY.items():
        full = [line for line in lines if shows_node(line, leaf, value)]
        assert len(full) == 1 and f" {leaf} = {value:g} (leaf)" in full[0], (leaf, text)
    for computed in ("L", "b", "c", "d"):
        line = next(line for line in lines if shows_node(line, computed, TOY_VALUES[computed]))
        assert "(leaf)" not in line, line
    # `a` is an input of both b and c: drawn once in full, then referenced
    assert sum(shows_node(line, "a", 2) for line in lines) == 1, text
    references = [line for line in lines if "(drawn above)" in line]
    assert len(references) == 1 and re.search(r"\ba \(drawn above\)", references[0]), text
    assert "∂c/∂a = w2 = -1" in references[0] or "∂b/∂a = w1 = 3" in references[0], references



def test_a_number_is_of_no_loop_iteration() -> None:
    """A number written in the program is one constant node, made once: the graph gives it no iteration
    even when it is first used inside a loop (here as a function's argument)."""
    program = "f(q) = q * w\nw = 0.5\ny = 0\nfor i in range(2) {\n  y = y + f(3)\n}"
    nodes = json_ok("graph", "-e", program, "--all")["nodes"]  # q = 3 is a constant: drawn with --all
    (q,) = [node for node in nodes if node["name"] == "q"]
    assert q["value"] == 3.0 and q["origin"] == [], q
    (output,) = [node for node in nodes if node["kind"] == "output"]
    assert output["origin"] == ["iteration 1 of the for loop at line 4"], output


def test_graph_json_is_strict_with_the_documented_keys_and_the_seeds_numbers() -> None:
    doc = json_ok("graph", NEURON)
    assert {"nodes", "edges"} <= set(doc), doc.keys()
    assert doc["of"] == "L"
    by_id = {}
    for node in doc["nodes"]:
        assert {"id", "name", "grad_fn", "shape", "value", "grad", "is_leaf", "kind", "origin"} <= set(node), node
        by_id[node["id"]] = node
        name = node["name"]
        assert node["value"] == pytest.approx(TOY_VALUES[name]), name
        assert node["grad"] == pytest.approx(TOY_GRADS[name]), name
        assert node["grad_fn"] == TOY_GRAD_FNS[name], name
        assert node["is_leaf"] is (name in TOY), name
        assert node["shape"] == []
    assert sorted(n["name"] for n in doc["nodes"]) == sorted(TOY_VALUES)
    found = {}
    for edge in doc["edges"]:
        assert {"from", "to", "derivative", "value", "detached"} <= set(edge), edge
        found[(by_id[edge["from"]]["name"], by_id[edge["to"]]["name"])] = (edge["derivative"], edge["value"])
        assert edge["detached"] is False
    assert set(found) == set(TOY_EDGES)
    for key, (text, value) in TOY_EDGES.items():
        assert found[key][0] == text and found[key][1] == pytest.approx(value), key


def test_graph_json_of_a_tensor_program_has_values_shapes_and_no_scalar_gradients() -> None:
    doc = json_ok("graph", NEURON_TENSOR)
    values = json_ok("eval", NEURON_TENSOR)["values"]  # another command's values for the same program
    names = sorted(n["name"] for n in doc["nodes"])
    assert names == sorted(["L", "d", "b", "c", "w1", "w2", "w3", "w4", "a"])
    for node in doc["nodes"]:
        assert node["shape"] == [3, 3], node["name"]
        np.testing.assert_allclose(np.array(node["value"]), np.array(values[node["name"]]), rtol=1e-12)
        assert node["grad"] is None, node  # L is not a scalar: no gradient without a vector
    assert len(doc["edges"]) == len(TOY_EDGES)
    for edge in doc["edges"]:
        assert edge["value"] is None and edge["derivative"], edge  # a linear map, not a number


def test_graph_of_picks_an_intermediate_output() -> None:
    doc = json_ok("graph", NEURON, "--of", "b")
    assert sorted(n["name"] for n in doc["nodes"]) == ["a", "b", "w1"]
    grads = {n["name"]: n["grad"] for n in doc["nodes"]}
    assert grads["w1"] == pytest.approx(TOY["a"]) and grads["a"] == pytest.approx(TOY["w1"])


# --- detach and no_grad -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "cut", "grad_x"), [
    ("x = 3; y = x * detach(x)", None, 3.0),  # ∂(x·detach(x))/∂x = detach(x) = 3, as in PyTorch
    ("x = 3; no_grad { z = x * 2 }; y = x * z", "z", 6.0),  # z is a constant to autograd: ∂y/∂x = z = 6
])
def test_detach_and_no_grad_cuts_are_shown(text: str, cut: str | None, grad_x: float) -> None:
    run = run_of(text)
    view = run.graph("y")
    detached = [n for n in view.nodes if n.kind == "detached"]
    assert len(detached) == 1, [(n.label, n.kind) for n in view.nodes]
    node = detached[0]
    if cut is not None:
        assert node.label == cut
    assert node.grad is None and float(node.value) == pytest.approx(3.0 if cut is None else 6.0)
    into = [e for e in view.edges if e.target == node.id]
    assert len(into) == 1 and into[0].detached and into[0].value is None
    x = next(n for n in view.nodes if n.label == "x")
    assert x.kind == "leaf" and float(x.grad) == pytest.approx(grad_x)
    assert float(run.grad(of="y", wrt=["x"]).grads["x"]) == pytest.approx(grad_x)
    live = [e for e in view.edges if not e.detached]
    assert len(live) == 1 and float(live[0].value) == pytest.approx(grad_x)

    tree = run_cli("graph", "-e", text, "--all")  # cut values are drawn with --all (hidden by default)
    assert tree.exit_code == EXIT_OK, tree.output
    assert "cut from the graph" in tree.stdout, tree.stdout
    cut_line = next(line for line in tree.stdout.splitlines() if "cut from the graph" in line)
    assert "detached" in cut_line

    doc = json_ok("graph", "-e", text, "--all")
    kinds = {n["id"]: n["kind"] for n in doc["nodes"]}
    cut_edges = [e for e in doc["edges"] if e["detached"]]
    assert len(cut_edges) == 1 and kinds[cut_edges[0]["to"]] == "detached"

    dot_text = drawing.dot(view)
    assert re.search(rf"n0 -> n{node.id} \[[^\n]*style=dashed", dot_text), dot_text
    assert "n0 -.->" in drawing.mermaid(view)


# --- loops: the doubling seed -------------------------------------------------------------------------------------

def doubling_iterations() -> int:
    """Seed example 4 by hand: how often `y = y * 2` runs before norm(y) reaches 1000."""
    y = np.array([-0.9618, -3.3220, -0.6637]) * 2
    count = 0
    while np.linalg.norm(y) < 1000:
        y = y * 2
        count += 1
    return count


def test_doubling_view_has_one_node_per_iteration() -> None:
    iterations = doubling_iterations()
    assert iterations == 8
    view = run_of((SAMPLES / "doubling.eq").read_text()).graph("y")
    ys = [n for n in view.nodes if n.label == "y"]
    assert len(ys) == iterations + 1  # y = x * 2, then one per iteration
    assert [n.label for n in view.nodes].count("x") == 1
    looped = [n for n in ys if n.origin]
    assert len(looped) == iterations
    assert all("while loop" in n.origin[-1] for n in looped), [n.origin for n in looped]
    assert sorted(int(re.search(r"iteration (\d+)", n.origin[-1])[1]) for n in looped) == \
        list(range(1, iterations + 1))
    for node in ys:
        assert node.grad_fn == "MulBackward0" and node.shape == (3,)


def test_doubling_tree_collapses_the_y_nodes_and_mentions_the_loop() -> None:
    iterations = doubling_iterations()
    result = run_cli("graph", DOUBLING, "--of", "y", "--detail", "full")  # y's values, to count its nodes
    assert result.exit_code == EXIT_OK, result.output
    text = result.stdout
    lines = text.strip().splitlines()
    collapsed = [line for line in lines if re.search(r"… \d+ more 'y' nodes", line)]
    assert len(collapsed) == 1, text
    skipped = int(re.search(r"… (\d+) more", collapsed[0])[1])
    assert skipped > 0
    assert "while loop" in collapsed[0], collapsed[0]
    shown = [line for line in lines if re.search(r"(^|\s)y = \[", line)]
    assert len(shown) + skipped == iterations + 1, text
    assert len(lines) < iterations + 3, text
    assert "x = [" in text and "(leaf)" in next(line for line in lines if "x = [" in line)
    assert "while loop" in text


# --- a collapsed chain still labels each edge with its own derivative ---------------------------------------------

CHAIN_STEP = "y = sin(y)*0.999 + 0.01*y*y"


def chain_program(steps: int) -> str:
    return "y = 0.5\n" + f"{CHAIN_STEP}\n" * steps


def chain_values(steps: int) -> list[float]:
    values = [0.5]
    for _ in range(steps):
        y = values[-1]
        values.append(math.sin(y) * 0.999 + 0.01 * y * y)
    return values


def test_collapsed_chain_edges_carry_their_own_local_derivatives() -> None:
    steps = 12
    view = run_of(chain_program(steps)).graph("y")
    text = tree_text(view)
    ys = chain_values(steps)
    shown = re.findall(r"∂y/∂y = [^=]+ = ([-\d.e+]+)  y = ([-\d.e+]+)", text)
    assert len(shown) >= 4, text
    for value, target in shown:
        y = float(target)
        # ∂(sin(y)*0.999 + 0.01*y*y)/∂y at the input y
        assert float(value) == pytest.approx(0.999 * math.cos(y) + 0.02 * y, rel=1e-4), (value, target, text)
    # the values themselves are the chain's, by hand
    for _, target in shown:
        assert min(abs(float(target) - v) for v in ys) < 1e-5, target


@pytest.mark.slow
def test_ten_thousand_node_graph_renders_collapsed_tree_and_full_dot_quickly() -> None:
    steps = graphview.VIEW_LIMIT - 1  # the largest graph drawn node by node: 10,000 nodes with the leaf
    assert steps == 9_999
    run = run_of(chain_program(steps))
    start = time.process_time()  # CPU time: the work done, whatever else the machine (or a parallel run) is doing
    view = graphview.build(run, "y")
    text = tree_text(view)
    dot_text = drawing.dot(view)
    elapsed = time.process_time() - start
    print(f"10,000-node graph: build + tree + dot in {elapsed:.2f} s of CPU")
    assert elapsed < 6.0, f"took {elapsed:.2f} s"
    assert len(view.nodes) == steps + 1 and len(view.edges) == steps
    lines = text.splitlines()
    assert len(lines) < 20, text
    skipped = int(re.search(r"… (\d+) more 'y' nodes", text)[1])
    assert skipped + sum(bool(re.search(r"(^|\s)y = ", line)) for line in lines) == steps + 1, text
    assert "y = 0.5 (leaf)" in text
    assert float(re.search(r"^y = ([-\d.e+]+)", text)[1]) == pytest.approx(chain_values(steps)[-1], rel=1e-4)
    declared = set(re.findall(r"^  (n\d+) \[label=", dot_text, re.M))
    arrows = re.findall(r"^  (n\d+) -> (n\d+) \[", dot_text, re.M)
    assert len(declared) == steps + 1
    assert len(arrows) == steps and all(a in declared and b in declared for a, b in arrows)


# --- past VIEW_LIMIT nodes: every format bounded ---------------------------------------------------------------

def decay_loop(iterations: int) -> str:
    """y_k = 0.999·y_(k-1) + x from y = 0.5: one node per iteration, all named y (the last is L)."""
    return f"y = 0.5; x = 1; for i in range({iterations}) {{ y = y * 0.999 + x }}; L = y"


def counting_text_of(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the local derivatives worked out as expressions: the per-edge work of a view."""
    calls = [0]
    real = graphview.symbolic.text_of

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(graphview.symbolic, "text_of", counted)
    return calls


def test_a_loop_past_the_view_limit_is_collapsed_in_every_format(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 10^6-iteration loop took 27 s and 2.7 GB for --format dot: every iteration got a node and an edge."""
    n = 20_000
    assert n > graphview.VIEW_LIMIT
    run = run_of(decay_loop(n))
    calls = counting_text_of(monkeypatch)
    view = graphview.build(run, "L")
    # N + 2 nodes: the leaf y, x, and one per iteration (the last is L); drawn: L, one summary, x, and the
    # run's last SAME_RUN + 1 nodes (iterations 2, 1, 0 and the leaf): N - 4 nodes collapsed
    assert not view.complete and view.total == n + 2
    assert len(view.nodes) == 7 and calls[0] <= 2 * len(view.nodes), (len(view.nodes), calls[0])
    [summary] = [v for v in view.nodes if v.kind == "collapsed"]
    assert summary.label == "y" and summary.count == n - 4
    ys = {int(re.search(r"iteration (\d+)", v.origin[-1])[1]): v for v in view.nodes
          if v.label == "y" and v.kind == "computed"}
    assert sorted(ys) == [0, 1, 2]
    for k, node in ys.items():  # y_k = 0.5·0.999^(k+1) + (1 - 0.999^(k+1))/0.001; ∂L/∂y_k = 0.999^(N-1-k)
        assert float(node.value) == pytest.approx(0.5 * 0.999 ** (k + 1) + (1 - 0.999 ** (k + 1)) / 0.001, rel=1e-12)
        assert float(node.grad) == pytest.approx(0.999 ** (n - 1 - k), rel=1e-9)
    [x] = [v for v in view.nodes if v.label == "x"]
    assert float(x.grad) == pytest.approx((1 - 0.999 ** n) / 0.001, rel=1e-9)
    assert {(view.nodes[e.source].label, view.nodes[e.target].label, float(e.value)) for e in view.edges} == \
        {("L", "y", 0.999), ("L", "x", 1.0), ("y", "y", 0.999), ("y", "x", 1.0)}
    dot_text = drawing.dot(view)
    declared = set(re.findall(r"^  (n\d+) \[label=", dot_text, re.M))
    arrows = re.findall(r"^  (n\d+) -> (n\d+) \[", dot_text, re.M)
    assert len(declared) == 7 and len(arrows) == len(view.edges) == 9
    assert all(a in declared and b in declared for a, b in arrows)
    assert f"… {n - 4} more 'y' nodes like these" in dot_text
    mermaid_text = drawing.mermaid(view)
    assert mermaid_text.count("-->") == 9 and f"… {n - 4} more 'y' nodes" in mermaid_text
    tree = tree_text(view)
    assert len(tree.splitlines()) < 12, tree
    assert f"… {n - 4} more 'y' nodes like these (for loop at line 1): the graph has {n + 2:,} nodes" in tree
    assert "y = 0.5 (leaf)" in tree
    doc = strict_json(json_text(drawing.view_json(view)))
    assert doc["total_nodes"] == n + 2 and len(doc["nodes"]) == 7 and len(doc["edges"]) == 9
    [collapsed] = [node for node in doc["nodes"] if node["kind"] == "collapsed"]
    assert collapsed["count"] == n - 4 and collapsed["value"] is None and collapsed["name"] == "y"


def json_text(doc: Any) -> str:
    from gradcalc.cli import jsonout

    out = io.StringIO()
    jsonout.write(doc, out)
    return out.getvalue()


def test_graph_json_past_the_view_limit_from_the_command_line() -> None:
    n = 12_000
    doc = json_ok("graph", "-e", decay_loop(n))
    assert doc["total_nodes"] == n + 2 and len(doc["nodes"]) == 7
    assert sum(node.get("count", 0) for node in doc["nodes"]) == n - 4


def test_a_graph_without_runs_is_cut_after_the_limit_with_a_summary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two names in turn (no run of one variable): the nodes past the limit become one summary node."""
    n, limit = 200, 30  # (30: the tree draws 40 levels deep, so the summary is in it too)
    run = run_of(f"y = 0.5; x = 1; for i in range({n}) {{ z = y * 0.5 + x; y = z + 1 }}; L = y")
    calls = counting_text_of(monkeypatch)
    view = graphview.build(run, "L", limit=limit)
    assert not view.complete and view.total == 2 * n + 2  # the leaves y and x, and z and y per iteration
    assert len(view.nodes) == limit and calls[0] <= 2 * limit
    rest = view.nodes[-1]
    assert rest.kind == "omitted" and rest.count == 2 * n + 2 - (limit - 1)
    assert not any(v.kind == "collapsed" for v in view.nodes)
    into = [e for e in view.edges if e.target == rest.id]
    assert into and all(e.text == "…" and e.value is None for e in into)
    for v in view.nodes[:-1]:  # z_k and y_k (k < N-1): ∂L/∂ = 0.5^(N-1-k); x: the sum of all those for z
        if v.label in ("y", "z") and v.origin:
            k = int(re.search(r"iteration (\d+)", v.origin[-1])[1])
            assert float(v.grad) == pytest.approx(0.5 ** (n - 1 - k), rel=1e-12), (v.label, k)
    dot_text = drawing.dot(view)
    assert len(re.findall(r"^  (n\d+) \[label=", dot_text, re.M)) == limit
    assert f"… {rest.count:,} more nodes" in dot_text and f"the graph has {2 * n + 2:,}" in dot_text
    doc = strict_json(json_text(drawing.view_json(view)))
    assert doc["nodes"][-1]["kind"] == "omitted" and doc["nodes"][-1]["count"] == rest.count
    tree = tree_text(view)
    assert tree.count(f"… {rest.count:,} more nodes not drawn") == 1, tree
    assert f"the graph has {2 * n + 2:,} nodes" in tree


def test_explain_refuses_a_graph_past_the_view_limit() -> None:
    """Explaining a 10^6-iteration loop worked out every edge; now it says why not, at once."""
    result = run_cli("explain", "-e", decay_loop(12_000), "--wrt", "x", "--json")
    assert_bad_input(result)
    error = strict_json(result.stderr)["error"]
    assert "has 12,002 nodes" in error["message"] and "up to 10,000" in error["message"], error
    assert "gradcalc grad" in error["hint"]


@pytest.mark.parametrize("asked", ["1001", "100000000"])
def test_max_paths_has_a_ceiling(asked: str) -> None:
    """--max-paths 100000000 on a program of 4M paths listed every one (over 120 s): now a usage error."""
    result = run_cli("explain", NEURON, "--wrt", "a", "--max-paths", asked, "--json")
    assert_bad_input(result)
    assert "--max-paths must be from 1 to 1,000" in strict_json(result.stderr)["error"]["message"]
    assert json_ok("explain", NEURON, "--wrt", "a", "--max-paths", "1000")["count"] == 2


@pytest.mark.parametrize("ceiling_passed", [True, False])
def test_explain_groups_paths_too_long_to_list_in_all(monkeypatch: pytest.MonkeyPatch, ceiling_passed: bool) -> None:
    """16 paths (under --max-paths), each 29 steps long: 464 steps in all; listed up to the steps ceiling only.

    (The real ceiling, 100,000 steps, is lowered here to keep the test small: 1,000 paths of 10,000 steps
    each were listed, a hundred million steps.)
    """
    program = diamond_chain(4) + "h = h*1.001\n" * 20
    steps = 2 ** 4 * (20 + 2 * 4 + 1)  # the h chain, two steps per diamond, and h_0 → x
    monkeypatch.setattr(graphview, "STEPS_CEILING", steps - 1 if ceiling_passed else steps)
    doc = json_ok("explain", "-e", program, "--of", "h", "--wrt", "x")
    assert doc["count"] == 2 ** 4 and doc["agrees"] is True
    human = run_cli("explain", "-e", program, "--of", "h", "--wrt", "x").stdout
    if ceiling_passed:
        assert doc["paths"] == [] and len(doc["groups"]) == 1 and doc["groups"][0]["paths"] == 2 ** 4
        assert f"they would take {steps:,} steps, more than {steps - 1:,}" in human, human
    else:
        assert len(doc["paths"]) == 2 ** 4 and doc["groups"] == []
        assert sum(len(path["factors"]) for path in doc["paths"]) == steps
        assert "steps" not in human, human


def test_the_ceilings() -> None:
    assert graphview.PATHS_CEILING == 1_000 and graphview.STEPS_CEILING == 100_000
    assert graphview.VIEW_LIMIT == 10_000


class CountingChildren(dict):
    gets = 0

    def get(self, *args: Any) -> Any:
        CountingChildren.gets += 1
        return super().get(*args)


def test_listing_paths_follows_only_edges_that_reach_the_variable() -> None:
    """One path to c, 2^16 elsewhere: listing walked all 2^16 before finding the one."""
    run = run_of(diamond_chain(16) + "c = 2\nL = h*c")
    view = run.graph("L")
    view.children = CountingChildren(view.children)
    CountingChildren.gets = 0
    explanation = graphview.explain(view, run.node("c", prefer_leaf=True), "c")
    assert explanation.count == 1 and len(explanation.paths) == 1
    assert [view.nodes[e.target].label for e in explanation.paths[0].edges] == ["c"]
    assert float(explanation.total) == pytest.approx(float(run.value("h")), rel=1e-12)  # ∂(h·c)/∂c = h
    assert CountingChildren.gets <= 3 * len(view.nodes), CountingChildren.gets


# --- path counts past 2^53: exact in JSON, readable in text ---------------------------------------------------------

def test_path_counts_past_2_to_the_53_are_exact_strings_in_json() -> None:
    """A 91-digit count was a JSON number: JavaScript and jq keep only its first 17 digits."""
    below = json_ok("explain", "-e", diamond_chain(52), "--of", "h", "--wrt", "x")
    assert below["count"] == 2 ** 52 and below["groups"][0]["paths"] == 2 ** 52
    above = json_ok("explain", "-e", diamond_chain(53), "--of", "h", "--wrt", "x")
    assert above["count"] == "9007199254740992" == str(2 ** 53)
    assert above["groups"][0]["paths"] == str(2 ** 53)
    big = json_ok("explain", "-e", diamond_chain(300), "--of", "h", "--wrt", "x")
    assert big["count"] == str(2 ** 300) and len(big["count"]) == 91


def test_path_counts_past_2_to_the_53_read_as_powers_of_ten() -> None:
    text = run_cli("explain", "-e", diamond_chain(52), "--of", "h", "--wrt", "x").stdout
    assert "4,503,599,627,370,496 paths from h to x" in text, text
    text = run_cli("explain", "-e", diamond_chain(300), "--of", "h", "--wrt", "x").stdout
    assert "2.04e90 paths from h to x" in text and "(2.04e90 paths)" in text, text  # 2^300 = 2.037...e90


@pytest.mark.parametrize(("count", "shown"), [
    (2 ** 53 - 1, "9,007,199,254,740,991"), (2 ** 53, "9.01e15"), (10 ** 20 - 1, "1.00e20"),
    (123_450 * 10 ** 20, "1.23e25"), (123_500 * 10 ** 20, "1.24e25"), (2 ** 1100, "1.36e331"),
])
def test_count_text(count: int, shown: str) -> None:
    assert render.count_text(count) == shown


# --- DOT ----------------------------------------------------------------------------------------------------------

def parse_dot(text: str) -> tuple[dict[str, dict[str, str]], list[tuple[str, str, dict[str, str]]]]:
    """A small DOT reader for what gradcalc writes: balanced braces, statements, quoted attributes."""
    skeleton, strings, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            j, chars = i + 1, []
            while text[j] != '"':
                if text[j] == "\\":
                    chars.append(text[j:j + 2])
                    j += 2
                    continue
                assert text[j] != "\n", "a newline inside a quoted DOT string"
                chars.append(text[j])
                j += 1
            strings.append("".join(chars))
            skeleton.append(f"@{len(strings) - 1}@")
            i = j + 1
            continue
        skeleton.append(ch)
        i += 1
    body = "".join(skeleton)
    depth = 0
    for ch in body:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        assert depth >= 0, "unbalanced braces"
    assert depth == 0, "unbalanced braces"
    match = re.fullmatch(r"\s*digraph\s+\w+\s*\{(.*)\}\s*", body, re.S)
    assert match, body[:200]

    def attributes(spec: str) -> dict[str, str]:
        found = {}
        for key, value in re.findall(r"(\w+)\s*=\s*(@\d+@|[\w.#]+)", spec):
            found[key] = strings[int(value[1:-1])] if value.startswith("@") else value
        return found

    nodes: dict[str, dict[str, str]] = {}
    edges: list[tuple[str, str, dict[str, str]]] = []
    for statement in (s.strip() for s in match[1].split(";")):
        if not statement:
            continue
        if m := re.fullmatch(r"(\w+)\s*->\s*(\w+)\s*\[(.*)\]", statement, re.S):
            edges.append((m[1], m[2], attributes(m[3])))
        elif m := re.fullmatch(r"(\w+)\s*\[(.*)\]", statement, re.S):
            if m[1] not in ("node", "edge", "graph"):
                assert m[1] not in nodes, f"{m[1]} declared twice"
                nodes[m[1]] = attributes(m[2])
        else:
            assert re.fullmatch(r"\w+\s*=\s*\w+", statement), f"not a DOT statement: {statement!r}"
    for source, target, _ in edges:
        assert source in nodes and target in nodes, f"edge {source} -> {target} has an undeclared end"
    return nodes, edges


def graphviz_json(text: str) -> dict[str, Any]:
    done = subprocess.run(["dot", "-Tjson"], input=text.encode(), capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert not done.stderr.strip(), done.stderr.decode()  # no syntax warnings either
    return json.loads(done.stdout)


def unescape(label: str) -> list[str]:
    return label.replace('\\"', '"').replace("\\\\", "\\").split("\\n")


def test_toy_dot_is_valid_and_carries_the_seeds_labels() -> None:
    result = run_cli("graph", NEURON, "--format", "dot")
    assert result.exit_code == EXIT_OK, result.output
    nodes, edges = parse_dot(result.stdout)
    names = {key: unescape(attrs["label"])[0].split(" = ")[0] for key, attrs in nodes.items()}
    assert sorted(names.values()) == sorted(TOY_VALUES)
    for key, attrs in nodes.items():
        lines = unescape(attrs["label"])
        name = names[key]
        assert lines[0] == f"{name} = {TOY_VALUES[name]:g}"
        assert TOY_GRAD_FNS[name] in lines
        assert f"∂L/∂{name} = {TOY_GRADS[name]:g}" in lines
    labels = {(names[s], names[t]): attrs["label"] for s, t, attrs in edges}
    assert set(labels) == set(TOY_EDGES)
    for (user, child), (expression, value) in TOY_EDGES.items():
        assert labels[(user, child)].startswith(f"∂{user}/∂{child} = {expression}"), labels[(user, child)]
        assert labels[(user, child)].endswith(f"{value:g}")
    if HAS_DOT:
        parsed = graphviz_json(result.stdout)
        assert len(parsed["objects"]) == len(TOY_VALUES) and len(parsed["edges"]) == len(TOY_EDGES)


DOT_PROGRAMS = [
    (SAMPLES / "neuron.eq").read_text(),
    (SAMPLES / "neuron_tensor.eq").read_text(),
    (SAMPLES / "doubling.eq").read_text(),
    "x = 3; no_grad { z = x * 2 }; y = x * detach(z) + z * x",
    "θ = 0.3; φ = sin(θ) * θ; L = φ * φ + exp(-θ)",
    "f(z) = z * z + 1; x = [1, 2, 3]; s = f(x); L = sum(s * x)",
    "x = 2; for i in range(4) { x = x * 1.5 + i }",
]


@pytest.mark.parametrize("text", DOT_PROGRAMS)
def test_dot_is_valid_for_varied_programs(text: str) -> None:
    run = run_of(text)
    view = run.graph(None)
    dot_text = drawing.dot(view)
    nodes, edges = parse_dot(dot_text)
    assert len(nodes) == len(view.nodes) and len(edges) == len(view.edges)
    pairs = sorted((f"n{e.source}", f"n{e.target}") for e in view.edges)
    assert sorted((s, t) for s, t, _ in edges) == pairs
    for node in view.nodes:
        assert unescape(nodes[f"n{node.id}"]["label"])[0].startswith(node.label)
    if HAS_DOT:
        parsed = graphviz_json(dot_text)
        assert len(parsed["objects"]) == len(view.nodes)
        assert len(parsed.get("edges", [])) == len(view.edges)
        drawn = sorted((f"n{e['tail']}", f"n{e['head']}") for e in parsed.get("edges", []))
        names = {o["_gvid"]: o["name"] for o in parsed["objects"]}
        assert sorted((names[int(s[1:])], names[int(t[1:])]) for s, t in drawn) == pairs


def test_dot_output_file_matches_stdout(tmp_path: Any) -> None:
    target = tmp_path / "neuron.dot"
    written = run_cli("graph", NEURON, "--format", "dot", "-o", target)
    assert written.exit_code == EXIT_OK and written.stdout == "", written.output
    assert target.read_text(encoding="utf-8") == run_cli("graph", NEURON, "--format", "dot").stdout


# --- Mermaid ------------------------------------------------------------------------------------------------------

TOY_MERMAID = """\
graph TD
  n0["L = 15<br/>RsubBackward1<br/>∂L/∂L = 1"]
  n1["d = -5<br/>AddBackward0<br/>∂L/∂d = -1"]
  n2["w3 = 0.5<br/>AccumulateGrad<br/>∂L/∂w3 = -6"]
  n3["b = 6<br/>MulBackward0<br/>∂L/∂b = -0.5"]
  n4["w4 = 4<br/>AccumulateGrad<br/>∂L/∂w4 = 2"]
  n5["c = -2<br/>MulBackward0<br/>∂L/∂c = -4"]
  n6["w1 = 3<br/>AccumulateGrad<br/>∂L/∂w1 = -1"]
  n7["a = 2<br/>AccumulateGrad<br/>∂L/∂a = 2.5"]
  n8["w2 = -1<br/>AccumulateGrad<br/>∂L/∂w2 = -8"]
  n0 -->|"∂L/∂d = -1"| n1
  n1 -->|"∂d/∂w3 = b = 6"| n2
  n1 -->|"∂d/∂b = w3 = 0.5"| n3
  n1 -->|"∂d/∂w4 = c = -2"| n4
  n1 -->|"∂d/∂c = w4 = 4"| n5
  n3 -->|"∂b/∂w1 = a = 2"| n6
  n3 -->|"∂b/∂a = w1 = 3"| n7
  n5 -->|"∂c/∂a = w2 = -1"| n7
  n5 -->|"∂c/∂w2 = a = 2"| n8
"""


def test_toy_mermaid_golden() -> None:
    result = run_cli("graph", NEURON, "--format", "mermaid")
    assert result.exit_code == EXIT_OK, result.output
    assert result.stdout == TOY_MERMAID


def test_mermaid_escapes_markup_in_labels() -> None:
    view = run_of("x = 0.5; y = where(x < 1, x * 2, x)").graph("y")
    text = drawing.mermaid(view)
    assert "#lt;" in text, text  # the edge's derivative mentions x < 1
    for line in text.splitlines()[1:]:
        label = re.fullmatch(r'\s*n\d+\["(.*)"\]|\s*n\d+ -\.?->\.?\|"(.*)"\| n\d+', line)
        assert label, line
        inner = label[1] if label[1] is not None else label[2]
        assert '"' not in inner and "<" not in inner.replace("<br/>", "") and ">" not in inner.replace("<br/>", "")
    edge = next(line for line in text.splitlines() if "-->" in line)
    assert edge.endswith("= 2\"| n1"), edge  # ∂(2x)/∂x on the taken branch


# --- pictures through Graphviz ------------------------------------------------------------------------------------

@needs_dot
def test_svg_is_written_to_a_file(tmp_path: Any) -> None:
    target = tmp_path / "neuron.svg"
    result = run_cli("graph", NEURON, "--format", "svg", "-o", target)
    assert result.exit_code == EXIT_OK, result.output
    root = ET.fromstring(target.read_bytes())
    assert root.tag.endswith("svg")
    text = " ".join(t.strip() for t in root.itertext())
    for (user, child), (expression, _) in TOY_EDGES.items():
        assert f"∂{user}/∂{child} = {expression}" in text, (user, child)
    assert "a = 2" in text and "∂L/∂a = 2.5" in text
    groups = [g.get("class") for g in root.iter() if g.tag.endswith("}g")]
    assert groups.count("node") == len(TOY_VALUES) and groups.count("edge") == len(TOY_EDGES)


@needs_dot
def test_png_goes_to_a_file_or_a_pipe(tmp_path: Any) -> None:
    """A PNG to standard output that is not a terminal (as here) is written; on a terminal it is refused
    (tests/test_shell.py)."""
    target = tmp_path / "neuron.png"
    written = run_cli("graph", NEURON, "--format", "png", "-o", target)
    assert written.exit_code == EXIT_OK, written.output
    assert target.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    piped = run_cli("graph", NEURON, "--format", "png")
    assert piped.exit_code == EXIT_OK and piped.stdout.startswith("\ufffdPNG"), piped.output  # bytes, read as text


@pytest.mark.parametrize("kind", ["svg", "png"])
def test_missing_graphviz_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Any, kind: str) -> None:
    monkeypatch.setattr(shutil, "which", lambda *args, **kwargs: None)
    target = tmp_path / f"graph.{kind}"
    result = run_cli("graph", NEURON, "--format", kind, "-o", target)
    assert_bad_input(result)
    assert "Graphviz" in result.stderr and "install" in result.stderr, result.stderr
    assert "graphviz" in result.stderr.lower().split("install", 1)[1], result.stderr
    assert not target.exists()


def test_tree_format_refuses_an_output_file(tmp_path: Any) -> None:
    assert_bad_input(run_cli("graph", NEURON, "-o", tmp_path / "tree.txt"))


# --- explain: the chain rule on the toy network -------------------------------------------------------------------

def test_explain_toy_a_lists_the_seeds_two_paths_and_their_sum() -> None:
    explanation, view = toy_run().explain("L", "a", None)
    assert explanation.count == 2 and not explanation.groups
    routes = {tuple([view.nodes[0].label] + [view.nodes[e.target].label for e in p.edges]): p
              for p in explanation.paths}
    assert set(routes) == {("L", "d", "b", "a"), ("L", "d", "c", "a")}
    # -1 · w3 · w1 and -1 · w4 · w2
    assert float(routes[("L", "d", "b", "a")].value) == pytest.approx(-1 * 0.5 * 3)
    assert float(routes[("L", "d", "c", "a")].value) == pytest.approx(-1 * 4 * -1)
    assert [e.text for e in routes[("L", "d", "b", "a")].edges] == ["-1", "w3", "w1"]
    assert [e.text for e in routes[("L", "d", "c", "a")].edges] == ["-1", "w4", "w2"]
    assert float(explanation.total) == pytest.approx(2.5)
    assert float(explanation.gradient) == pytest.approx(2.5)


def test_explain_toy_a_on_the_command_line() -> None:
    result = run_cli("explain", NEURON, "--of", "L", "--wrt", "a")
    assert result.exit_code == EXIT_OK, result.output
    text = result.stdout
    assert "2 paths from L to a" in text
    assert "L → d → b → a" in text and "L → d → c → a" in text
    assert "= -1 · 0.5 · 3 = -1.5" in text and "= -1 · 4 · -1 = 4" in text
    assert "-1.5 + 4 = 2.5" in text
    assert "equals ∂L/∂a = 2.5" in text and "≠" not in text


def test_explain_of_a_weight_matrix_shows_autograd_s_value_without_claiming_a_mismatch() -> None:
    """Tensor edges are maps (g ↦ outer(...)): no path product to compare, so no '≠' (it read as a failure);
    autograd's matrix is shown with its rows lined up."""
    result = run_cli("explain", "-e", "x = [1.0, 2.0]; W = [[0.1, 0.2], [0.3, 0.4]]; h = tanh(W @ x); L = sum(h^2)",
                     "--wrt", "W")
    assert result.exit_code == EXIT_OK, result.output
    lines = result.stdout.splitlines()
    assert "≠" not in result.stdout
    first = next(i for i, line in enumerate(lines) if line.startswith("  from autograd: ∂L/∂W = [["))
    assert lines[first + 1].index("[") == lines[first].index("[[") + 1  # the second row under the first


@pytest.mark.parametrize(("wrt", "route", "expected"), [
    ("w1", ["L", "d", "b", "w1"], -0.5 * 2),  # -w3·a
    ("w2", ["L", "d", "c", "w2"], -4 * 2),  # -w4·a
    ("w3", ["L", "d", "w3"], -6),  # -b
    ("w4", ["L", "d", "w4"], 2),  # -c
    ("d", ["L", "d"], -1),
])
def test_explain_toy_single_paths(wrt: str, route: list[str], expected: float) -> None:
    doc = json_ok("explain", NEURON, "--of", "L", "--wrt", wrt)
    assert doc["count"] == 1 and len(doc["paths"]) == 1 and doc["groups"] == []
    assert doc["paths"][0]["nodes"] == route
    assert doc["paths"][0]["product"] == pytest.approx(expected)
    assert math.prod(doc["paths"][0]["values"]) == pytest.approx(expected)
    assert doc["sum"] == pytest.approx(expected) and doc["gradient"] == pytest.approx(expected)
    assert doc["agrees"] is True


def test_explain_json_is_strict_with_the_documented_keys() -> None:
    result = run_cli("explain", NEURON, "--of", "L", "--wrt", "a", "--json")
    assert result.exit_code == EXIT_OK, result.output
    doc = strict_json(result.stdout)
    assert {"of", "wrt", "count", "paths", "groups", "sum", "gradient", "agrees"} <= set(doc), doc.keys()
    assert doc["of"] == "L" and doc["wrt"] == "a" and doc["count"] == 2
    for path in doc["paths"]:
        assert {"nodes", "factors", "values", "product"} <= set(path), path
        assert len(path["factors"]) == len(path["values"]) == len(path["nodes"]) - 1
    assert sorted(p["product"] for p in doc["paths"]) == pytest.approx([-1.5, 4.0])
    assert doc["sum"] == pytest.approx(2.5) and doc["gradient"] == pytest.approx(2.5) and doc["agrees"] is True


def test_explain_of_a_tensor_loop_output_follows_every_iteration() -> None:
    doc = json_ok("explain", DOUBLING, "--of", "y", "--wrt", "x")
    iterations = doubling_iterations()
    assert doc["count"] == 1
    assert doc["paths"][0]["nodes"] == ["y"] * (iterations + 1) + ["x"]
    assert doc["sum"] is None and doc["gradient"] is None  # a vector output has no scalar gradient


# --- explain with no path -----------------------------------------------------------------------------------------

def test_explain_with_no_path_through_a_detach_says_so() -> None:
    text = "x = 3; z = detach(x); y = z * 2"
    assert float(run_of(text).grad(of="y", wrt=["x"]).grads["x"]) == 0.0
    result = run_cli("explain", "-e", text, "--wrt", "x")
    assert result.exit_code == EXIT_OK, result.output
    assert "no path from y to x" in result.stdout, result.stdout
    assert "∂y/∂x = 0" in result.stdout, result.stdout
    doc = json_ok("explain", "-e", text, "--wrt", "x")
    assert doc["count"] == 0 and doc["paths"] == [] and doc["groups"] == [] and doc["sum"] == 0
    assert doc["wrt"] == "x", doc


def test_explain_with_no_path_to_an_unused_leaf_says_so() -> None:
    text = "x = 3; u = 2; y = x * 2"
    grad = run_cli("grad", "-e", text, "--wrt", "u", "--json")  # autograd: no path, gradient 0
    assert strict_json(grad.stdout)["grad"]["u"] == 0
    result = run_cli("explain", "-e", text, "--wrt", "u")
    assert result.exit_code == EXIT_OK, result.output
    assert "no path from y to u" in result.stdout, result.stdout


def test_explain_with_no_path_to_a_no_grad_value_says_so() -> None:
    text = "x = 3; no_grad { z = x * 2 }; y = x * z"
    result = run_cli("explain", "-e", text, "--wrt", "z")
    assert result.exit_code == EXIT_OK, result.output
    assert "no path from y to z" in result.stdout, result.stdout
    doc = json_ok("explain", "-e", text, "--wrt", "z")
    assert doc["count"] == 0 and doc["sum"] == 0 and doc["wrt"] == "z"


def test_explain_of_a_variable_with_respect_to_itself() -> None:
    doc = json_ok("explain", "-e", "x = 3", "--wrt", "x")
    assert doc["count"] == 1 and doc["sum"] == 1 and doc["gradient"] == 1  # ∂x/∂x = 1: the empty path
    result = run_cli("explain", "-e", "x = 3", "--wrt", "x")
    assert result.exit_code == EXIT_OK, result.output
    for line in result.stdout.splitlines():
        assert line.strip() != "=", f"an empty formula line {line!r}:\n{result.stdout}"
        assert " =  = " not in line, result.stdout


def test_explain_unknown_variable_is_bad_input() -> None:
    assert_bad_input(run_cli("explain", NEURON, "--of", "L", "--wrt", "nope"))


# --- explain past --max-paths: grouped, closed forms --------------------------------------------------------------

def accumulate_chain(steps: int) -> str:
    """h_0 = 2x, h_k = h_{k-1}·x + h_{k-1}: h_n = 2x(x+1)^n; paths from h_n to x: n + 1."""
    return "x = 0.01\nh = 2*x\n" + "h = h*x + h\n" * steps


def test_explain_groups_paths_past_the_limit_with_closed_forms() -> None:
    steps, x = 30, 0.01
    run = run_of(accumulate_chain(steps))
    explanation, _ = run.explain("h", "x", None)
    assert explanation.count == steps + 1
    assert not explanation.paths and len(explanation.groups) == steps + 1
    expected = 2 * (x + 1) ** steps + 2 * steps * x * (x + 1) ** (steps - 1)
    assert float(explanation.total) == pytest.approx(expected, rel=1e-12)
    assert float(run.grad(of="h", wrt=["x"]).grads["x"]) == pytest.approx(expected, rel=1e-12)
    # each group: ∂h_n/∂h_k = (x+1)^(n-k), ∂h_k/∂x = h_{k-1} = 2x(x+1)^(k-1) (and ∂h_0/∂x = 2)
    adjoints = sorted(float(g) for _, g, _ in explanation.groups)
    assert adjoints == pytest.approx(sorted((x + 1) ** j for j in range(steps + 1)), rel=1e-12)
    factors = sorted(float(e.value) for e, _, _ in explanation.groups)
    assert factors == pytest.approx(sorted([2.0] + [2 * x * (x + 1) ** (k - 1) for k in range(1, steps + 1)]),
                                    rel=1e-12)
    assert all(through == 1 for _, _, through in explanation.groups)
    assert sum(float(g) * float(e.value) for e, g, _ in explanation.groups) == pytest.approx(expected, rel=1e-12)


def diamond_chain(steps: int) -> str:
    """h_k = sin(h_{k-1})·cos(h_{k-1}) through two named halves: 2^n paths from h_n to x."""
    return "x = 0.3\nh = sin(x)\n" + "a = sin(h); b = cos(h); h = a*b\n" * steps


def diamond_gradient(steps: int, x: float = 0.3) -> tuple[float, float]:
    """dh_n/dx = cos(x)·Π cos(2h_{k-1}), and ∂h_n/∂h_0."""
    h, through = math.sin(x), 1.0
    for _ in range(steps):
        through *= math.cos(2 * h)
        h = math.sin(h) * math.cos(h)
    return math.cos(x) * through, through


def test_explain_diamond_chain_groups_its_exponentially_many_paths() -> None:
    steps = 10
    expected, through = diamond_gradient(steps)
    doc = json_ok("explain", "-e", diamond_chain(steps), "--of", "h", "--wrt", "x", "--max-paths", "1000")
    assert doc["count"] == 2 ** steps
    assert doc["paths"] == [] and len(doc["groups"]) == 1
    group = doc["groups"][0]
    assert group["via"] == "h" and group["paths"] == 2 ** steps
    assert group["adjoint"] == pytest.approx(through, rel=1e-10)
    assert group["value"] == pytest.approx(math.cos(0.3), rel=1e-12) and group["factor"] == "cos(x)"
    assert doc["sum"] == pytest.approx(expected, rel=1e-10) and doc["gradient"] == pytest.approx(expected, rel=1e-10)
    assert doc["agrees"] is True
    human = run_cli("explain", "-e", diamond_chain(steps), "--of", "h", "--wrt", "x", "--max-paths", "1000")
    assert human.exit_code == EXIT_OK, human.output
    assert f"{2 ** steps:,} paths from h to x" in human.stdout and "grouped" in human.stdout
    assert "equals" in human.stdout and "≠" not in human.stdout


def test_explain_diamond_chain_lists_every_path_under_a_larger_limit() -> None:
    steps = 8
    expected, _ = diamond_gradient(steps)
    doc = json_ok("explain", "-e", diamond_chain(steps), "--of", "h", "--wrt", "x", "--max-paths", "1000")
    assert doc["count"] == 2 ** steps and len(doc["paths"]) == 2 ** steps and doc["groups"] == []
    routes = {tuple(p["nodes"]) for p in doc["paths"]}
    assert routes == {("h", *[n for half in halves for n in (half, "h")], "x")
                      for halves in product("ab", repeat=steps)}
    assert math.fsum(p["product"] for p in doc["paths"]) == pytest.approx(expected, rel=1e-10)
    for path in doc["paths"]:
        assert math.prod(path["values"]) == pytest.approx(path["product"], rel=1e-12)
    assert doc["sum"] == pytest.approx(expected, rel=1e-10) and doc["agrees"] is True


SHARED = "x = 0.5; u = x*x; p = u*u + x; q = p*3; L = p + q"
# L → p → x, L → p → u → x, L → q → p → x, L → q → p → u → x
SHARED_ROUTES = {("L", "p", "x"), ("L", "p", "u", "x"), ("L", "q", "p", "x"), ("L", "q", "p", "u", "x")}


def test_explain_counts_paths_through_a_shared_intermediate() -> None:
    # L = 4·p with p = x^4 + x: ∂L/∂x = 4·(4x^3 + 1) = 6 at x = 0.5
    listed = json_ok("explain", "-e", SHARED, "--wrt", "x")
    assert {tuple(p["nodes"]) for p in listed["paths"]} == SHARED_ROUTES
    assert listed["count"] == len(SHARED_ROUTES), listed
    assert listed["sum"] == pytest.approx(6.0) and listed["gradient"] == pytest.approx(6.0)
    human = run_cli("explain", "-e", SHARED, "--wrt", "x")
    assert f"{len(SHARED_ROUTES)} paths from L to x" in human.stdout, human.stdout


def test_explain_groups_count_every_path_through_each_user() -> None:
    grouped = json_ok("explain", "-e", SHARED, "--wrt", "x", "--max-paths", "1")
    assert grouped["paths"] == [], grouped
    through = {g["via"]: g["paths"] for g in grouped["groups"]}
    assert through == {"p": 2, "u": 2}, grouped  # L→p, L→q→p reach both p and (through p) u
    assert grouped["count"] == len(SHARED_ROUTES), grouped
    # ∂L/∂p · ∂p/∂x = 4 · 1 and ∂L/∂u · ∂u/∂x = 4·2u · 2x = 4 · 0.5 · 1
    values = {g["via"]: (g["adjoint"], g["value"]) for g in grouped["groups"]}
    assert values["p"] == pytest.approx((4.0, 1.0)) and values["u"] == pytest.approx((2.0, 1.0))
    assert grouped["sum"] == pytest.approx(6.0)


def test_max_paths_must_be_positive() -> None:
    result = run_cli("explain", NEURON, "--wrt", "a", "--max-paths", "0")
    assert result.exit_code == EXIT_BAD_INPUT, result.output


# --- property: path sums equal autograd and finite differences on random programs --------------------------------

OPS = [
    ("{0} * {1}", 2), ("{0} + {1}", 2), ("{0} - 0.5*{1}", 2), ("sin({0}) * {1}", 2), ("tanh({0} * {1})", 2),
    ("{0} * {1} * 0.5 + {2}", 3), ("cos({0})", 1), ("exp(-{0}*{0})", 1), ("{0}*{0} + {0}", 1),
]


@st.composite
def programs(draw: Any) -> tuple[str, dict[str, float], dict[str, set[str]]]:
    """A scalar program whose named intermediates feed several later statements; and its dependencies."""
    leaves = [f"x{i}" for i in range(draw(st.integers(1, 3)))]
    values = {name: draw(st.sampled_from([-1.3, -0.9, -0.4, 0.25, 0.6, 0.8, 1.1, 1.4])) for name in leaves}
    lines = [f"{name} = {value}" for name, value in values.items()]
    deps: dict[str, set[str]] = {}
    names = list(leaves)
    for k in range(draw(st.integers(2, 7))):
        template, arity = draw(st.sampled_from([op for op in OPS if op[1] <= len(names)]))
        operands = draw(st.lists(st.sampled_from(names), min_size=arity, max_size=arity, unique=True))
        name = f"v{k}"
        lines.append(f"{name} = " + template.format(*operands))
        deps[name] = set(operands)
        names.append(name)
    final = draw(st.lists(st.sampled_from(names), min_size=min(2, len(names)), max_size=min(3, len(names)),
                          unique=True))
    lines.append("L = " + " + ".join(f"{n} * {n}" if i == 0 else n for i, n in enumerate(final)))
    deps["L"] = set(final)
    return "\n".join(lines), values, deps


def count_paths(deps: dict[str, set[str]], start: str, goal: str) -> int:
    if start == goal:
        return 1
    return sum(count_paths(deps, d, goal) for d in deps.get(start, ()))


def all_routes(deps: dict[str, set[str]], start: str, goal: str) -> set[tuple[str, ...]]:
    if start == goal:
        return {(goal,)}
    return {(start, *rest) for d in deps.get(start, ()) for rest in all_routes(deps, d, goal)}


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_path_sums_equal_autograd_and_finite_differences(case: tuple[str, dict[str, float], dict[str, set[str]]]) \
        -> None:
    text, values, deps = case
    program = gradcalc.parse_program(text)
    run = program.run({}, keep_values=True)
    value = float(run.value("L"))
    assert math.isfinite(value)
    targets = [n for n in [*values, *deps] if n != "L" and count_paths(deps, "L", n) > 0]
    grads = run.grad(of="L", wrt=targets).grads
    for name in targets:
        count = count_paths(deps, "L", name)
        for limit in (24, 1):
            explanation, view = run.explain("L", name, limit)
            assert explanation.count == count, (text, name)
            assert float(explanation.total) == pytest.approx(float(grads[name]), rel=1e-9, abs=1e-12), (text, name)
            if count <= limit:
                routes = {tuple([view.nodes[0].label] + [view.nodes[e.target].label for e in p.edges])
                          for p in explanation.paths}
                assert routes == all_routes(deps, "L", name), (text, name)
            else:  # grouped by the users of `name`: every path goes through exactly one of them
                assert sum(through for _, _, through in explanation.groups) == count, (text, name)
                assert {view.nodes[e.source].label for e, _, _ in explanation.groups} == \
                    {user for user, inputs in deps.items() if name in inputs and count_paths(deps, "L", user)}
        if name in values:  # a leaf: central differences on a fresh run
            h = 1e-6
            up = float(program.run({name: values[name] + h}).value("L"))
            down = float(program.run({name: values[name] - h}).value("L"))
            fd = (up - down) / (2 * h)
            assert float(explanation.total) == pytest.approx(fd, rel=1e-5, abs=1e-5 * max(1.0, abs(value))), \
                (text, name)


@pytest.mark.parametrize("wrt", [["--wrt", "d", "--wrt", "a"], ["--wrt", "d,a"]])
def test_explain_takes_one_variable_and_says_so(wrt: list[str]) -> None:
    """A second --wrt was dropped silently, and 'd,a' was read as one name."""
    result = run_cli("explain", NEURON, *wrt, "--json")
    assert result.exit_code == 2
    assert strict_json(result.stderr)["error"]["message"] == "explain takes one variable, got 2: d, a"


def test_a_node_drawn_above_is_drawn_above() -> None:
    """Each "(drawn above)" comes after the line that draws its node in full (a sibling's was drawn below)."""
    out = run_cli("graph", "-e", "a = 1; b = 2; c = a*b; d = a + b; e = c*d; f = c + d; g = e*f; h = g + a").stdout
    lines = out.splitlines()
    for k, line in enumerate(lines):
        if "(drawn above)" in line:
            name = line.split("(drawn above)")[0].split()[-1]
            assert any(re.search(rf"\b{name} = ", earlier) for earlier in lines[:k]), (name, out)
    assert sum(" a = 1 (leaf)" in line for line in lines) == 1, out


def test_explain_writes_a_negative_path_with_a_minus_and_one_path_once() -> None:
    two = run_cli("explain", "-e", "x = 1.2; a = sin(x); b = x^2; L = a - b", "--wrt", "x").stdout
    assert "sum over the paths: 0.362358 - 2.4 = -2.03764" in two, two
    one = run_cli("explain", "-e", "x = 1.2; L = x^3", "--wrt", "x").stdout
    assert "= 4.32 = 4.32" not in one and "sum over" not in one and "    = 4.32" in one, one
