"""`gradcalc graph` on a real network stays readable: --detail, --focus, --depth, --expand, --all, --direction,
--dpi and --size, on the two-layer network samples/mlp.eq and the toy network samples/neuron.eq.

Expected node sets are counted by hand from the programs' text; summaries are checked against NumPy.
"""

from __future__ import annotations

import re
import shutil
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import EXIT_OK, NEURON, SAMPLES, assert_bad_input, json_ok, run_cli
from terminal import run_in_terminal

import gradcalc

MLP = str(SAMPLES / "mlp.eq")
PARAMETERS = ("W1", "b1", "W2", "b2")
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")


def names(doc: dict[str, Any]) -> Counter[str]:
    return Counter(node["name"] for node in doc["nodes"])


def edges(doc: dict[str, Any]) -> set[tuple[str, str]]:
    name = {node["id"]: node["name"] for node in doc["nodes"]}
    return {(name[e["from"]], name[e["to"]]) for e in doc["edges"]}


# --- what each option keeps, counted by hand --------------------------------------------------------------------

# mlp.eq: h = relu(X @ W1 + b1); s = h @ W2 + b2; L = xent(s, Y), xent's local z; constants X, Y, N.
MLP_EDGES = {("L", "s"), ("s", "h"), ("s", "W2"), ("s", "b2"), ("h", "W1"), ("h", "b1")}


@pytest.mark.parametrize(("args", "expected"), [
    ((), {"L": 1, "s": 1, "h": 1, "W1": 1, "b1": 1, "W2": 1, "b2": 1}),  # xent one node, constants hidden
    (("--all",), {"L": 1, "s": 1, "h": 1, "W1": 1, "b1": 1, "W2": 1, "b2": 1, "X": 1, "Y": 1, "N": 1}),
    (("--expand", "xent"), {"L": 1, "z": 1, "s": 1, "h": 1, "W1": 1, "b1": 1, "W2": 1, "b2": 1}),
    (("--expand", "xent", "--all"), {"L": 1, "z": 1, "s": 1, "h": 1, "W1": 1, "b1": 1, "W2": 1, "b2": 1,
                                     "X": 1, "Y": 1, "N": 1}),
    (("--focus", "W1"), {"L": 1, "s": 1, "h": 1, "W1": 1}),
    (("--focus", "W1", "--focus", "b2"), {"L": 1, "s": 1, "h": 1, "W1": 1, "b2": 1}),
    (("--focus", "W2,b2"), {"L": 1, "s": 1, "W2": 1, "b2": 1}),
    (("--depth", "1"), {"L": 1, "s": 1, "…": 1}),
    (("--depth", "2"), {"L": 1, "s": 1, "h": 1, "W2": 1, "b2": 1, "…": 1}),
    (("--depth", "3"), {"L": 1, "s": 1, "h": 1, "W1": 1, "b1": 1, "W2": 1, "b2": 1}),  # nothing deeper
    (("--expand", "xent", "--depth", "2"), {"L": 1, "z": 1, "s": 1, "…": 1}),
    (("--focus", "b1", "--depth", "2"), {"L": 1, "s": 1, "h": 1, "…": 1}),
])
def test_mlp_node_counts(args: tuple[str, ...], expected: dict[str, int]) -> None:
    assert names(json_ok("graph", MLP, *args)) == Counter(expected)


@pytest.mark.parametrize(("args", "expected"), [
    ((), {"L", "d", "b", "c", "a", "w1", "w2", "w3", "w4"}),
    (("--depth", "1"), {"L", "d", "…"}),
    (("--depth", "2"), {"L", "d", "b", "c", "w3", "w4", "…"}),
    (("--focus", "a"), {"L", "d", "b", "c", "a"}),
    (("--focus", "w1"), {"L", "d", "b", "w1"}),
    (("--focus", "L"), {"L"}),
])
def test_toy_network_node_counts(args: tuple[str, ...], expected: set[str]) -> None:
    doc = json_ok("graph", NEURON, *args)
    assert names(doc) == Counter(expected)


def test_the_default_shows_every_parameter_and_hides_the_data() -> None:
    doc = json_ok("graph", MLP)
    assert edges(doc) == MLP_EDGES
    assert doc["hidden_nodes"] == 3  # X, Y and N
    assert doc["options"] == {"detail": "summary", "focus": [], "depth": None, "expand": [], "all": False,
                              "direction": "TB"}
    (output,) = [n for n in doc["nodes"] if n["kind"] == "output"]
    assert output["call"] == "xent(…) called at line 17"  # L is what the call returned: the call is drawn as it
    assert all(n["call"] is None for n in doc["nodes"] if n["name"] != "L")
    expanded = json_ok("graph", MLP, "--expand", "xent")
    assert all(n["call"] is None for n in expanded["nodes"])
    note = "(3 constants or cut values not drawn, as no gradient reaches them: --all draws them)"
    assert run_cli("graph", MLP).stdout.splitlines()[-1] == note
    assert "not drawn" not in run_cli("graph", MLP, "--all").stdout
    assert ("L", "z") in edges(expanded) and ("z", "s") in edges(expanded)


def test_the_gradients_are_the_same_whatever_is_drawn() -> None:
    """Hiding and collapsing change the picture, never a number: each node's ∂L/∂node is grad's."""
    grads = json_ok("grad", MLP)["grad"]
    for args in ((), ("--expand", "xent", "--all"), ("--focus", "b1"), ("--depth", "2")):
        for node in json_ok("graph", MLP, *args)["nodes"]:
            if node["name"] in grads:
                assert np.allclose(node["grad"], grads[node["name"]]), (args, node["name"])


def test_the_python_api_still_draws_every_node() -> None:
    run = gradcalc.parse_program(Path(MLP).read_text(encoding="utf-8")).run(keep_values=True)
    assert sorted(v.label for v in run.graph().nodes) == sorted(["L", "z", "s", "h", "W1", "b1", "W2", "b2",
                                                                  "X", "Y", "N"])


# --- a call drawn as one node -----------------------------------------------------------------------------------

def test_a_call_is_one_node_with_the_whole_call_s_derivative_on_its_edges() -> None:
    """u = t + 1 with t = x², called at a = 2: ∂u/∂a = 2a = 4 through the hidden t; ∂y/∂u = 3."""
    program = "f(x) { t = x * x; u = t + 1; return u }\na = 2\ny = 3 * f(a)"
    doc = json_ok("graph", "-e", program)
    assert names(doc) == Counter(["y", "u", "a"])
    by_id = {n["id"]: n["name"] for n in doc["nodes"]}
    values = {(by_id[e["from"]], by_id[e["to"]]): e["value"] for e in doc["edges"]}
    assert values == {("y", "u"): 3.0, ("u", "a"): 4.0}
    opened = json_ok("graph", "-e", program, "--expand", "f")
    by_id = {n["id"]: n["name"] for n in opened["nodes"]}
    values = {(by_id[e["from"]], by_id[e["to"]]): e["value"] for e in opened["edges"]}
    assert values == {("y", "u"): 3.0, ("u", "t"): 1.0, ("t", "a"): 4.0}


def test_an_unnamed_result_is_labelled_by_its_function_and_each_call_is_its_own_node() -> None:
    program = "sq(x) { t = x * x; return t * 1 }\na = 2; b = 3\ny = sq(a) + 2 * sq(b)"
    doc = json_ok("graph", "-e", program)
    assert names(doc) == Counter({"y": 1, "sq(…)": 2, "a": 1, "b": 1})
    by_id = {n["id"]: n for n in doc["nodes"]}
    into = {(by_id[e["from"]]["name"], by_id[e["to"]]["name"], e["value"]) for e in doc["edges"]}
    assert into == {("y", "sq(…)", 1.0), ("y", "sq(…)", 2.0), ("sq(…)", "a", 4.0), ("sq(…)", "b", 6.0)}
    assert names(json_ok("graph", "-e", program, "--expand", "sq")) == Counter({"y": 1, "t": 2, "a": 1, "b": 1})


# --- --focus keeps exactly explain's paths ----------------------------------------------------------------------

@pytest.mark.parametrize(("program", "args", "variables"), [
    (NEURON, (), ("a", "w1", "w2", "w3", "w4", "b", "c", "d")),
    (MLP, ("--expand", "xent"), ("W1", "b1", "W2", "b2", "h", "s")),  # (explain names no function's local)
])
def test_focus_keeps_the_nodes_and_edges_of_explain_s_paths(program: str, args: tuple[str, ...],
                                                             variables: tuple[str, ...]) -> None:
    for name in variables:
        paths = json_ok("explain", program, "--wrt", name)["paths"]
        assert paths, name
        on_paths = {node for path in paths for node in path["nodes"]}
        steps = {(path["nodes"][i], path["nodes"][i + 1]) for path in paths for i in range(len(path["nodes"]) - 1)}
        doc = json_ok("graph", program, *args, "--focus", name)
        assert set(names(doc)) == on_paths, name
        assert edges(doc) == steps, name


# --- --depth ----------------------------------------------------------------------------------------------------

def test_depth_summary_counts_what_it_cut() -> None:
    whole = json_ok("graph", MLP, "--expand", "xent", "--all")
    assert len(whole["nodes"]) == 11
    for depth, kept in ((1, 4), (2, 5), (3, 8)):  # L; z, Y, N; s; h, W2, b2; W1, b1, X (breadth first by hand)
        doc = json_ok("graph", MLP, "--expand", "xent", "--all", "--depth", str(depth))
        (summary,) = [n for n in doc["nodes"] if n["kind"] == "omitted"]
        assert summary["count"] == 11 - kept, depth
        assert len(doc["nodes"]) == kept + 1, depth
        assert summary["note"] == f"deeper than --depth {depth}"
        assert all(e["derivative"] == "…" for e in doc["edges"] if e["to"] == summary["id"])
    tree = run_cli("graph", MLP, "--depth", "1")
    assert tree.exit_code == EXIT_OK, tree.output
    assert "… 5 more nodes not drawn: deeper than --depth 1" in tree.stdout, tree.stdout


# --- --detail ---------------------------------------------------------------------------------------------------

def test_summaries_are_numpy_s_min_max_and_norm() -> None:
    doc = json_ok("graph", MLP)
    for node in doc["nodes"]:
        if node["shape"] == []:
            assert node["summary"] is None
            continue
        for key, field in (("value", "summary"), ("grad", "grad_summary")):
            array = np.asarray(node[key], dtype=float)
            assert node[field]["min"] == pytest.approx(array.min(), abs=0, rel=1e-12), node["name"]
            assert node[field]["max"] == pytest.approx(array.max(), abs=0, rel=1e-12), node["name"]
            assert node[field]["norm"] == pytest.approx(np.linalg.norm(array), rel=1e-12), node["name"]
    # ... and the tree says them with four significant digits
    W2 = np.array([[0.3, -0.2, 0.5], [-0.4, 0.6, 0.1], [0.2, 0.2, -0.5], [0.5, -0.3, 0.4], [-0.1, 0.4, 0.2]])
    text = run_cli("graph", MLP).stdout
    line = next(line for line in text.splitlines() if " W2 (leaf)" in line)
    assert f"shape 5×3   min {W2.min():.4g}  max {W2.max():.4g}  norm {np.linalg.norm(W2):.4g}" in line, line


@pytest.mark.parametrize(("detail", "shown", "absent"), [
    ("none", ["W2 (leaf)   AccumulateGrad"], ["shape", "min", "∂L/∂W2", "0.3"]),
    ("shape", ["W2 (leaf)   AccumulateGrad   shape 5×3"], ["min", "∂L/∂W2", "0.3,"]),
    ("summary", ["shape 5×3   min -0.5  max 0.6", "∂L/∂W2: min"], ["0.3,"]),
    ("full", ["W2 = [[ 0.3, -0.2,  0.5]", "shape 5×3", "∂L/∂W2 = [["], ["min -0.5"]),
])
def test_detail_levels_on_a_tensor(detail: str, shown: list[str], absent: list[str]) -> None:
    result = run_cli("graph", MLP, "--detail", detail)
    assert result.exit_code == EXIT_OK, result.output
    line = next(line for line in result.stdout.splitlines() if "∂s/∂W2 = g ↦ h.T @ g  " in line)
    box = line.split("∂s/∂W2 = g ↦ h.T @ g  ", 1)[1]  # what W2's node says
    for text in shown:
        assert text in box, (detail, line)
    for text in absent:
        assert text not in box, (detail, line)


def test_detail_on_scalars_keeps_them_in_full_but_for_none() -> None:
    for detail in ("shape", "summary", "full"):
        text = run_cli("graph", NEURON, "--detail", detail).stdout
        assert "∂b/∂w1 = a = 2  w1 = 3 (leaf)   AccumulateGrad   ∂L/∂w1 = -1" in text, (detail, text)
    text = run_cli("graph", NEURON, "--detail", "none").stdout
    assert "∂b/∂w1 = a  w1 (leaf)   AccumulateGrad\n" in text, text


def test_a_long_tensor_derivative_is_cut_unless_full() -> None:
    short = run_cli("graph", MLP, "--expand", "xent").stdout
    full = run_cli("graph", MLP, "--expand", "xent", "--detail", "full").stdout
    cut, whole = (re.findall(r"∂z/∂s = (.*?)  s ", text)[0] for text in (short, full))
    assert len(cut) == 40 and cut.endswith("…") and whole.startswith(cut[:-1].rstrip()) and len(whole) > 40


# --- the tree at 80 columns, directions, pictures ---------------------------------------------------------------

def test_the_tree_at_80_columns_wraps_and_cuts_nothing() -> None:
    narrow = run_in_terminal("graph", "samples/mlp.eq", columns=80)
    wide = run_in_terminal("graph", "samples/mlp.eq", columns=400)
    assert narrow.status == wide.status == EXIT_OK, narrow.stderr
    assert max(len(line) for line in narrow.screen.splitlines()) <= 80
    assert max(len(line) for line in wide.screen.splitlines()) > 80  # so the narrow one had to wrap

    def words(screen: str) -> list[str]:
        return [w for w in re.split(r"[\s│├└─]+", screen) if w]

    assert words(narrow.screen) == words(wide.screen)


def test_direction_lays_out_dot_and_mermaid() -> None:
    for direction, rankdir, mermaid in (("TB", "TB", "graph TD"), ("LR", "LR", "graph LR")):
        dot = run_cli("graph", NEURON, "--format", "dot", "--direction", direction)
        assert dot.exit_code == EXIT_OK and f"rankdir={rankdir};" in dot.stdout, dot.output
        flow = run_cli("graph", NEURON, "--format", "mermaid", "--direction", direction)
        assert flow.stdout.splitlines()[0] == mermaid, flow.output


def test_the_default_dot_names_every_parameter_and_labels_every_edge() -> None:
    dot = run_cli("graph", MLP, "--format", "dot").stdout
    for name in PARAMETERS:
        assert re.search(rf'\[label="{name}\\n', dot), name
    labels = re.findall(r'n\d+ -> n\d+ \[label="([^"]*)"', dot)
    assert len(labels) == len(MLP_EDGES) and all(re.match(r"∂\w+/∂\w+ = \S", text) for text in labels), labels


def png_size(data: bytes) -> tuple[int, int]:
    """Width and height from a PNG's header (its IHDR chunk comes first)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", data[:16]
    width, height = struct.unpack(">II", data[16:24])
    return width, height


@needs_dot
def test_the_default_png_fits_a_1920_by_1080_screen(tmp_path: Path) -> None:
    target = tmp_path / "mlp.png"
    assert run_cli("graph", MLP, "-o", target).exit_code == EXIT_OK
    width, height = png_size(target.read_bytes())
    assert width <= 1920 and height <= 1080, (width, height)
    everything = tmp_path / "all.png"  # the whole graph in full, as before these options: far wider
    assert run_cli("graph", MLP, "--all", "--expand", "xent", "--detail", "full", "-o", everything).exit_code == 0
    assert png_size(everything.read_bytes())[0] > 1920


@needs_dot
def test_dpi_and_size_scale_the_png(tmp_path: Path) -> None:
    sizes = {}
    for args in ((), ("--dpi", "48"), ("--size", "400x300")):
        target = tmp_path / "neuron.png"
        target.unlink(missing_ok=True)
        assert run_cli("graph", NEURON, *args, "-o", target).exit_code == EXIT_OK
        sizes[args] = png_size(target.read_bytes())
    (w, h), (w48, h48), (w400, h300) = sizes.values()
    assert w > 400 and abs(w48 - w / 2) <= 2 and abs(h48 - h / 2) <= 2, sizes  # half the dots per inch: half
    assert w400 <= 400 and h300 <= 300 and (w400 >= 395 or h300 >= 295), sizes  # scaled down to fit


# --- bad values -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "message"), [
    (("--detail", "bogus"), "--detail"),
    (("--direction", "up"), "--direction"),
    (("--depth", "0"), "--depth"),
    (("--depth", "two"), "--depth"),
    (("--dpi", "0", "--format", "png", "-o", "-"), "--dpi"),
    (("--dpi", "72"), "--dpi sizes a PNG, not the tree"),
    (("--size", "800x600", "--format", "svg"), "--size sizes a PNG, not --format svg"),
    (("--size", "800", "--format", "png", "-o", "-"), "--size 800: expected the width and height in pixels"),
    (("--size", "0x600", "--format", "png", "-o", "-"), "--size 0x600"),
    (("--size", "wide", "--format", "png", "-o", "-"), "--size wide"),
    (("--direction", "LR"), "--direction lays out dot, mermaid, svg and png"),
    (("--focus", "W9"), "--focus W9: no variable W9 in the graph of L"),
    (("--focus", "z"), "no variable z"),  # inside xent: the hint says --expand xent
    (("--focus", "X"), "--focus X: no gradient reaches X"),
    (("--focus", "X", "--all"), "--focus X: no gradient reaches X"),
    (("--focus", "W1", "--focus", "N"), "--focus N: no gradient reaches N"),
    (("--expand", "softmax"), "--expand softmax: the program defines no function softmax"),
])
def test_bad_option_values_exit_2_with_a_message(args: tuple[str, ...], message: str) -> None:
    result = run_cli("graph", MLP, *args)
    assert_bad_input(result)
    assert message in result.stderr, result.stderr
    if args[:2] == ("--focus", "z"):
        assert "--expand xent" in result.stderr, result.stderr
