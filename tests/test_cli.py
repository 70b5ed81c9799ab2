"""The command line against the SPEC: the seeds' examples as golden tests, the JSON documents, the options.

Every expected number comes from the SPEC or from a closed form, never from gradcalc itself.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import math
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    MEAN,
    NEURON,
    NEURON_TENSOR,
    REPO,
    SAMPLES,
    assert_no_traceback,
    json_error,
    json_ok,
    run_cli,
    strict_json,
)

import gradcalc
from gradcalc.cli.app import app

NEURON_TEXT = "a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\nb = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d\n"


def neuron_closed_forms(a: float, w1: float, w2: float, w3: float, w4: float) -> tuple[float, dict[str, float]]:
    """L and its gradient for the toy network, by hand (SPEC, seed example 1)."""
    b, c = w1 * a, w2 * a
    L = 10 - (w3 * b + w4 * c)
    return L, {"a": -(w3 * w1 + w4 * w2), "w1": -w3 * a, "w2": -w4 * a, "w3": -b, "w4": -c}


def table_rows(text: str) -> dict[str, list[str]]:
    """The rows of a Rich table printed without borders: first word -> the rest of the words."""
    rows: dict[str, list[str]] = {}
    for line in text.splitlines():
        words = line.split()
        if words:
            rows.setdefault(words[0], words[1:])
    return rows


# --- seed example 1: the toy network ---------------------------------------------------------------

def test_seed1_grad_json_golden() -> None:
    doc = json_ok("grad", NEURON)
    assert doc["of"] == "L"
    assert doc["value"] == 15
    assert doc["grad"] == {"a": 2.5, "w1": -1, "w2": -8, "w3": -6, "w4": 2}


def test_seed1_default_wrt_is_every_leaf_in_program_order() -> None:
    doc = json_ok("grad", NEURON)
    assert list(doc["grad"]) == ["a", "w1", "w2", "w3", "w4"]


def test_seed1_grad_json_has_the_documented_keys() -> None:
    doc = json_ok("grad", NEURON)
    assert {"of", "value", "grad"} <= set(doc)
    assert isinstance(doc["grad"], dict)


def test_seed1_wrt_intermediate() -> None:
    doc = json_ok("grad", NEURON, "--wrt", "d")
    assert doc["grad"] == {"d": -1}
    assert doc["value"] == 15


def test_seed1_wrt_order_and_names() -> None:
    doc = json_ok("grad", NEURON, "--wrt", "w1,a", "--wrt", "d")
    assert list(doc["grad"]) == ["w1", "a", "d"]
    assert doc["grad"] == {"w1": -1, "a": 2.5, "d": -1}


def test_seed1_of_intermediate() -> None:
    doc = json_ok("grad", NEURON, "--of", "d")
    _, grads = neuron_closed_forms(2, 3, -1, 0.5, 4)
    assert doc["of"] == "d"
    assert doc["value"] == -5  # d = 0.5*6 + 4*(-2)
    assert doc["grad"] == {name: -g for name, g in grads.items()}  # L = 10 - d


def test_seed1_human_output() -> None:
    result = run_cli("grad", NEURON)
    assert result.exit_code == EXIT_OK, result.stderr
    assert_no_traceback(result)
    out = result.stdout
    assert "∂L/∂" in out
    assert "15" in out
    rows = table_rows(out)
    expected = {"a": ("2", "2.5"), "w1": ("3", "-1"), "w2": ("-1", "-8"), "w3": ("0.5", "-6"), "w4": ("4", "2")}
    for name, (value, grad) in expected.items():
        assert name in rows, out
        assert rows[name][-1] == grad, f"row {name}: {rows[name]}"
        assert value in rows[name][:-1], f"row {name}: {rows[name]}"


def test_seed1_human_output_has_no_escape_codes() -> None:
    result = run_cli("grad", NEURON)
    assert "\x1b[" not in result.stdout


def test_tables_show_nan_and_infinity_and_brackets_as_they_are() -> None:
    """Text in a table is not Rich markup: '[nan, 2]' was read as a style tag and printed as nothing."""
    values = table_rows(run_cli("eval", "-e", "x = [-1.0, 4.0]; y = sqrt(x)").stdout)
    assert " ".join(values["y"]).replace(" ", "").startswith("2[nan,2]"), values
    grads = run_cli("grad", "-e", "x = [1.0, 2.0]; L = sum(x) / 0")
    assert "[inf, inf]" in grads.stdout, grads.stdout
    claim = run_cli("check", "-e", "x = 2; y = x^2", "--claim", "dy/dx = [b]4[/b]")
    assert "dy/dx = [b]4[/b]" in claim.stdout, claim.stdout


def test_seed1_eval_json_shape() -> None:
    doc = json_ok("eval", NEURON)
    assert "values" in doc
    assert doc["values"] == {"a": 2, "w1": 3, "w2": -1, "w3": 0.5, "w4": 4, "b": 6, "c": -2, "d": -5, "L": 15}


def test_seed1_eval_human_output() -> None:
    result = run_cli("eval", NEURON)
    assert result.exit_code == EXIT_OK, result.stderr
    rows = table_rows(result.stdout)
    for name, value in {"a": "2", "w3": "0.5", "b": "6", "c": "-2", "d": "-5", "L": "15"}.items():
        assert name in rows, result.stdout
        assert value in rows[name], f"row {name}: {rows[name]}"


def test_set_changes_gradients_to_the_closed_forms() -> None:
    doc = json_ok("grad", NEURON, "--set", "a=3")
    L, grads = neuron_closed_forms(3, 3, -1, 0.5, 4)
    assert doc["value"] == pytest.approx(L)
    assert doc["grad"] == pytest.approx(grads)


def test_several_sets() -> None:
    doc = json_ok("grad", NEURON, "--set", "a=3", "--set", "w1=2", "--set", "w4=-0.25")
    L, grads = neuron_closed_forms(3, 2, -1, 0.5, -0.25)
    assert doc["value"] == pytest.approx(L)
    assert doc["grad"] == pytest.approx(grads)


def test_set_constant_expression_value() -> None:
    doc = json_ok("grad", NEURON, "--set", "a=2^3 - sqrt(4)")
    L, grads = neuron_closed_forms(6, 3, -1, 0.5, 4)
    assert doc["value"] == pytest.approx(L)
    assert doc["grad"] == pytest.approx(grads)


# --- seed example 2: the same network with 3×3 tensors --------------------------------------------

def tensor_leaves(*extra: str) -> dict[str, np.ndarray]:
    values = json_ok("eval", NEURON_TENSOR, *extra)["values"]
    return {name: np.array(values[name], dtype=float) for name in ("a", "w1", "w2", "w3", "w4")}


def tensor_closed_forms(v: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    a, w1, w2, w3, w4 = (v[k] for k in ("a", "w1", "w2", "w3", "w4"))
    return {"a": -(w3 * w1 + w4 * w2), "w1": -w3 * a, "w2": -w4 * a, "w3": -w1 * a, "w4": -w2 * a}


def test_seed2_without_vector_is_an_error_offering_both_ways_out() -> None:
    result = run_cli("grad", NEURON_TENSOR)
    assert result.exit_code == EXIT_BAD_INPUT
    assert_no_traceback(result)
    assert "--vector" in result.stderr
    assert "sum" in result.stderr
    assert "scalar" in result.stderr


def test_seed2_without_vector_json_error() -> None:
    body = json_error(run_cli("grad", NEURON_TENSOR, "--json"))
    text = body["message"] + " " + body.get("hint", "")
    assert "--vector" in text and "sum" in text


def test_seed2_vector_ones_gives_the_closed_forms() -> None:
    leaves = tensor_leaves()
    doc = json_ok("grad", NEURON_TENSOR, "--vector", "ones")
    expected = tensor_closed_forms(leaves)
    assert list(doc["grad"]) == ["a", "w1", "w2", "w3", "w4"]
    for name, want in expected.items():
        got = np.array(doc["grad"][name])
        assert got.shape == (3, 3), name
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)
    d = leaves["w3"] * leaves["w1"] * leaves["a"] + leaves["w4"] * leaves["w2"] * leaves["a"]
    np.testing.assert_allclose(np.array(doc["value"]), 10 - d, rtol=1e-12)


def test_seed2_leaves_are_really_random_tensors() -> None:
    leaves = tensor_leaves()
    for name, value in leaves.items():
        assert value.shape == (3, 3), name
        assert len(set(value.ravel().tolist())) == 9, name
    assert not np.allclose(leaves["w1"], leaves["w2"])


def test_seed2_vector_array_scales_each_entry() -> None:
    leaves = tensor_leaves()
    v = np.arange(1.0, 10.0).reshape(3, 3)
    doc = json_ok("grad", NEURON_TENSOR, "--vector", json.dumps(v.tolist()))
    for name, want in tensor_closed_forms(leaves).items():
        np.testing.assert_allclose(np.array(doc["grad"][name]), v * want, rtol=1e-12, atol=1e-12, err_msg=name)


def test_seed2_sum_instead_of_vector() -> None:
    text = (SAMPLES / "neuron_tensor.eq").read_text(encoding="utf-8").replace("L = 10 - d", "L = sum(10 - d)")
    assert "L = sum(10 - d)" in text
    values = json_ok("eval", "-e", text)["values"]
    leaves = {name: np.array(values[name]) for name in ("a", "w1", "w2", "w3", "w4")}
    doc = json_ok("grad", "-e", text)
    for name, want in tensor_closed_forms(leaves).items():
        np.testing.assert_allclose(np.array(doc["grad"][name]), want, rtol=1e-12, atol=1e-12, err_msg=name)


def test_seed2_same_seed_same_values_other_seed_other_values() -> None:
    first, again = tensor_leaves(), tensor_leaves()
    other = tensor_leaves("--seed", "1")
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
        assert not np.allclose(first[name], other[name]), name


# --- seed example 3: mean ----------------------------------------------------------------------------

def test_seed3_mean() -> None:
    doc = json_ok("grad", MEAN)
    assert doc["of"] == "out"
    assert doc["value"] == 27
    assert doc["grad"] == {"x": [[4.5, 4.5], [4.5, 4.5]]}


def test_seed3_human_output() -> None:
    result = run_cli("grad", MEAN)
    assert result.exit_code == EXIT_OK, result.stderr
    assert "27" in result.stdout
    assert "4.5" in result.stdout
    assert "∂out/∂" in result.stdout


def test_seed3_eval_shapes() -> None:
    values = json_ok("eval", MEAN)["values"]
    assert values["x"] == [[1, 1], [1, 1]]
    assert values["y"] == [[3, 3], [3, 3]]
    assert values["z"] == [[27, 27], [27, 27]]
    assert values["out"] == 27
    result = run_cli("eval", MEAN)
    assert any(shape in result.stdout for shape in ("2×2", "2x2", "(2, 2)")), result.stdout


# --- seed example 4: a dynamic graph -------------------------------------------------------------------

SEED4 = "x = [-0.9618, -3.3220, -0.6637]\ny = x * 2\nwhile norm(y) < 1000 { y = y * 2 }\n"


def test_seed4_while_loop_vjp() -> None:
    doc = json_ok("grad", "-e", SEED4, "--of", "y", "--wrt", "x", "--vector", "[0.1, 1.0, 0.0001]")
    assert doc["grad"]["x"] == pytest.approx([51.2, 512, 0.0512], rel=1e-12)
    assert doc["value"] == pytest.approx([-0.9618 * 512, -3.3220 * 512, -0.6637 * 512], rel=1e-12)


def test_seed4_human_output_numbers() -> None:
    result = run_cli("grad", "-e", SEED4, "--of", "y", "--wrt", "x", "--vector", "[0.1, 1.0, 0.0001]")
    assert result.exit_code == EXIT_OK, result.stderr
    for number in ("51.2", "512", "0.0512"):
        assert number in result.stdout


# --- seed example 5: detach and no_grad ------------------------------------------------------------------

def test_seed5_detach_stops_the_gradient() -> None:
    doc = json_ok("grad", "-e", "x = 3\ny = detach(x) * x", "--wrt", "x")
    assert doc["value"] == 9
    assert doc["grad"]["x"] == 3  # d/dx (c * x) with c = 3 held constant; not 2x = 6


def test_seed5_no_grad_stops_the_gradient() -> None:
    doc = json_ok("grad", "-e", "x = 3\nno_grad { z = x * x }\ny = z + 5 * x", "--of", "y", "--wrt", "x")
    assert doc["value"] == 24
    assert doc["grad"]["x"] == 5  # only the recorded 5*x path


# --- JSON strictness ---------------------------------------------------------------------------------------

def test_json_nan_and_infinities_are_strings() -> None:
    doc = json_ok("eval", "-e", "p = 1/0\nn = -1/0\nq = log(0 - 1)")
    assert doc["values"] == {"p": "Infinity", "n": "-Infinity", "q": "NaN"}


def test_json_nan_inside_a_tensor() -> None:
    doc = json_ok("eval", "-e", "x = [1, 0, -1]\ny = x / 0")
    assert doc["values"]["y"] == ["Infinity", "NaN", "-Infinity"]


def test_json_grad_with_nan_value() -> None:
    doc = json_ok("grad", "-e", "x = 0 - 1\ny = sqrt(x)", "--wrt", "x")
    assert doc["value"] == "NaN"
    assert doc["grad"]["x"] == "NaN"


def test_json_infinite_gradient() -> None:
    doc = json_ok("grad", "-e", "x = 0\ny = sqrt(x)", "--wrt", "x")
    assert doc["value"] == 0
    assert doc["grad"]["x"] == "Infinity"


EXTREME_PROGRAMS = [
    "x = 1; L = x * 1e309",  # an infinite literal
    "x = 1; L = x * 1e309 - x * 1e309",  # inf - inf: NaN
    "x = [1, 2]; L = sum(x * -1e309)",
    "x = 2; L = 1/(x*1e-320)",  # a subnormal literal, raised to -1 by the quotient rule
    "x = 2; L = (x*1e200)^-2 + (1e-300*x)^3",
    "x = 5e-324; L = 1/x",
    "x = 2; L = x*1" + "0" * 400,  # an integer past the floats, written out
    "x = 0.5; L = x^1e308",
    "y = -1; w = eye(0); x = y",  # an empty matrix
    "y = -1; w = zeros(0, 3); x = y * w[0:0, 0:1]",
]
EXTREME_COMMANDS = [["eval"], ["grad"], ["diff"], ["diff", "--latex"], ["diff", "--order", "2"], ["graph"],
                    ["graph", "--json"], ["explain", "--wrt", "x"], ["jacobian", "--wrt", "x"], ["gradcheck"]]


@pytest.mark.parametrize("program", EXTREME_PROGRAMS)
def test_numbers_at_the_ends_of_the_floats_are_never_an_internal_error(program: str) -> None:
    """Infinite and subnormal literals, integers past the floats and empty tensors are ordinary input:
    each command answers (exit 0 or 1) or refuses them (exit 2), never exit 3 (they were, in diff, graph
    and explain: OverflowError and ValueError in the printing of derivatives)."""
    for command, dtype in ((c, d) for c in EXTREME_COMMANDS for d in ([], ["--dtype", "float32"])):
        result = run_cli(*command, "-e", program, *dtype)
        assert result.exit_code in (0, 1, 2), (command, dtype, result.output)
        assert "internal error" not in result.output and "Traceback" not in result.output, (command, result.output)


def test_json_is_one_line_document_on_stdout_only() -> None:
    result = run_cli("grad", NEURON, "--json")
    assert result.exit_code == EXIT_OK
    assert result.stderr == ""
    assert result.stdout.endswith("\n")
    strict_json(result.stdout)


def test_json_keeps_unicode_names() -> None:
    doc = json_ok("grad", "-e", "θ = 2\ny = θ^3")
    assert doc["grad"] == {"θ": 12}


def reference_json(array: np.ndarray) -> Any:
    """What the JSON of an array must be: nested lists of Python floats, NaN and infinities as strings."""
    def plain(x: Any) -> Any:
        if isinstance(x, list):
            return [plain(v) for v in x]
        x = float(x)
        return "NaN" if math.isnan(x) else x if math.isfinite(x) else "Infinity" if x > 0 else "-Infinity"

    return plain(array.tolist())


BLOCK = 1 << 13  # the entries JSON arrays are written in at a time: the shapes below go around it


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 3), (0, 3), (3, 0), (20_000,), (BLOCK,), (BLOCK + 1,),
                                   (100, 300), (2, BLOCK), (1, 20_000), (2, 10_000, 2), (3, 1, BLOCK + 1)])
@pytest.mark.parametrize("kind", ["float64", "float32", "nonfinite", "bool"])
def test_json_arrays_written_in_blocks_are_the_same_text(shape: tuple[int, ...], kind: str) -> None:
    """Arrays are written a block of rows at a time: the text is json.dumps of the whole nested lists."""
    from gradcalc.cli import jsonout
    from gradcalc.engine import backend as B

    array = np.random.default_rng(len(shape) + sum(shape)).standard_normal(shape)
    if kind == "float32":
        array = array.astype(np.float32)
    elif kind == "nonfinite" and array.size:
        array.flat[::7] = np.nan
        array.flat[1::11] = np.inf
        array.flat[2::13] = -np.inf
    elif kind == "bool":
        array = array > 0
    doc = {"of": "y", "value": B.to_json(array), "names": ["θ", 2], "empty": {}, "none": []}
    out = io.StringIO()
    jsonout.write(doc, out)
    expected = {"of": "y", "value": reference_json(array.astype(np.float64) if kind == "bool" else array),
                "names": ["θ", 2], "empty": {}, "none": []}
    assert out.getvalue() == json.dumps(expected, allow_nan=False, ensure_ascii=False) + "\n"


class Sink:
    """A stream that keeps only the length and a hash of what it was given."""

    def __init__(self) -> None:
        self.size, self.hash = 0, hashlib.sha256()

    def write(self, text: str) -> int:
        self.size += len(text)
        self.hash.update(text.encode("utf-8"))
        return len(text)


@pytest.mark.slow
def test_json_of_a_large_jacobian_streams_in_about_its_own_size() -> None:
    """--json of a 10^8-entry Jacobian needed over 6 GB: nested lists of floats, then the text whole."""
    from gradcalc.cli import jsonout

    n = 450  # small enough to trace quickly: the lists took 5 times the array, a block takes a fixed 1 MiB
    result = gradcalc.parse_program(f"x = ones({n}); y = x*2").run({}).jacobian(of="y", wrt=["x"])
    expected = json.dumps({"of": "y", "wrt": "x", "shape": [n, n], "jacobian": (2 * np.eye(n)).tolist(),
                           "mode": result.mode}) + "\n"
    sink = Sink()
    tracemalloc.start()
    try:
        jsonout.write(jsonout.jacobian_doc(result), sink)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sink.size == len(expected) and sink.hash.hexdigest() == hashlib.sha256(expected.encode()).hexdigest()
    array_bytes = n * n * 8
    assert peak < array_bytes, f"peak {peak / 2**20:.1f} MiB for an array of {array_bytes / 2**20:.1f} MiB"


# --- --set, --values -----------------------------------------------------------------------------------------

def test_set_json_array() -> None:
    doc = json_ok("grad", "-e", "x = [0, 0, 0]\ny = sum(x^2)", "--set", "x=[1,2,3]")
    assert doc["value"] == 14
    assert doc["grad"]["x"] == [2, 4, 6]


def test_set_nested_array_changes_the_shape() -> None:
    doc = json_ok("eval", "-e", "x = [0, 0]\ny = x * 2", "--set", "x=[[1, 2], [3, 4]]")
    assert doc["values"]["y"] == [[2, 4], [6, 8]]


def test_set_random_constant_expression() -> None:
    program = "w = ones(2)\ny = sum(w * w)"
    values = json_ok("eval", "-e", program, "--set", "w=randn(3,3)")["values"]
    w = np.array(values["w"])
    assert w.shape == (3, 3)
    assert len(set(w.ravel().tolist())) == 9
    assert values["y"] == pytest.approx(float((w * w).sum()))
    doc = json_ok("grad", "-e", program, "--set", "w=randn(3,3)")
    np.testing.assert_allclose(np.array(doc["grad"]["w"]), 2 * w, rtol=1e-12)


def test_free_variable_given_by_set() -> None:
    doc = json_ok("grad", "-e", "y = x^2 * sin(x)", "--set", "x=2")
    x = 2.0
    assert doc["value"] == pytest.approx(x**2 * math.sin(x), rel=1e-12)
    assert doc["grad"] == {"x": pytest.approx(2 * x * math.sin(x) + x**2 * math.cos(x), rel=1e-12)}


def test_free_variable_human_output() -> None:
    result = run_cli("grad", "-e", "y = x^2 * sin(x)", "--set", "x=2")
    assert result.exit_code == EXIT_OK, result.stderr
    assert "∂y/∂" in result.stdout
    assert "1.9726" in result.stdout  # 4 sin 2 + 4 cos 2 = 1.97260...


def test_values_json_file(tmp_path) -> None:
    path = tmp_path / "values.json"
    path.write_text(json.dumps({"a": 3, "w1": 2}), encoding="utf-8")
    doc = json_ok("grad", NEURON, "--values", path)
    L, grads = neuron_closed_forms(3, 2, -1, 0.5, 4)
    assert doc["value"] == pytest.approx(L)
    assert doc["grad"] == pytest.approx(grads)


def test_values_npz_file(tmp_path) -> None:
    path = tmp_path / "values.npz"
    np.savez(path, a=np.float64(3), w4=np.float64(-0.25))
    doc = json_ok("grad", NEURON, "--values", path)
    L, grads = neuron_closed_forms(3, 3, -1, 0.5, -0.25)
    assert doc["value"] == pytest.approx(L)
    assert doc["grad"] == pytest.approx(grads)


def test_values_npz_tensor(tmp_path) -> None:
    path = tmp_path / "values.npz"
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    np.savez(path, x=x)
    doc = json_ok("grad", "-e", "x = zeros(2, 2)\ny = sum(exp(x))", "--values", path)
    np.testing.assert_allclose(np.array(doc["grad"]["x"]), np.exp(x), rtol=1e-12)
    assert doc["value"] == pytest.approx(float(np.exp(x).sum()), rel=1e-12)


def test_set_overrides_values_file(tmp_path) -> None:
    path = tmp_path / "values.json"
    path.write_text(json.dumps({"a": 3}), encoding="utf-8")
    doc = json_ok("grad", NEURON, "--values", path, "--set", "a=5")
    L, grads = neuron_closed_forms(5, 3, -1, 0.5, 4)
    assert doc["value"] == pytest.approx(L)
    assert doc["grad"] == pytest.approx(grads)


# --- program sources: FILE, -e, - -----------------------------------------------------------------------------

def test_inline_expression() -> None:
    doc = json_ok("grad", "-e", NEURON_TEXT)
    assert doc["value"] == 15
    assert doc["grad"] == {"a": 2.5, "w1": -1, "w2": -8, "w3": -6, "w4": 2}


def test_long_option_expr() -> None:
    doc = json_ok("eval", "--expr", "x = 2; y = x^10")
    assert doc["values"] == {"x": 2, "y": 1024}


def test_stdin() -> None:
    doc = json_ok("grad", "-", input=NEURON_TEXT)
    assert doc["value"] == 15
    assert doc["grad"]["a"] == 2.5


def test_stdin_eval() -> None:
    doc = json_ok("eval", "-", input="a = 2\nb = a * 3\n")
    assert doc["values"] == {"a": 2, "b": 6}


def test_of_defaults_to_last_assigned_variable() -> None:
    doc = json_ok("grad", "-e", "x = 2\ny = x * 3\nz = x * 5\ny = y + 1")
    assert doc["of"] == "y"  # y was assigned last, though z was first assigned later
    assert doc["value"] == 7
    assert doc["grad"] == {"x": 3}


def test_of_picks_another_output() -> None:
    doc = json_ok("grad", "-e", "x = 2\ny = x * 3\nz = x^2", "--of", "y")
    assert doc["of"] == "y"
    assert doc["grad"] == {"x": 3}


def test_compound_assignment_and_reassignment() -> None:
    doc = json_ok("grad", "-e", "x = 3\ny = x\ny *= x\ny += 2 * x", "--wrt", "x")
    assert doc["value"] == 15
    assert doc["grad"]["x"] == 2 * 3 + 2


def test_user_function() -> None:
    doc = json_ok("grad", "-e", "sq(z) = z * z\nx = 3\ny = sq(x) + sq(2 * x)")
    assert doc["value"] == 45
    assert doc["grad"] == {"x": 2 * 3 + 8 * 3}


def test_power_precedence() -> None:
    values = json_ok("eval", "-e", "x = 3\na = -x^2\nb = 2^3^2\nc = 2**3")["values"]
    assert values["a"] == -9
    assert values["b"] == 512
    assert values["c"] == 8


# --- dtype -----------------------------------------------------------------------------------------------

def test_dtype_float32_rounds_values() -> None:
    doc = json_ok("eval", "-e", "x = 0.1\ny = 1/3", "--dtype", "float32")
    assert doc["values"]["x"] == float(np.float32(0.1))
    assert doc["values"]["y"] == float(np.float32(1) / np.float32(3))
    assert doc["values"]["x"] != 0.1


def test_dtype_float64_is_the_default() -> None:
    doc = json_ok("eval", "-e", "x = 0.1\ny = 1/3")
    assert doc["values"] == {"x": 0.1, "y": 1 / 3}
    assert json_ok("eval", "-e", "x = 0.1\ny = 1/3", "--dtype", "float64") == doc


def test_dtype_float32_gradient() -> None:
    doc = json_ok("grad", NEURON, "--dtype", "float32")
    assert doc["value"] == 15
    assert doc["grad"] == {"a": 2.5, "w1": -1, "w2": -8, "w3": -6, "w4": 2}


# --- load() next to the program --------------------------------------------------------------------------------

@pytest.fixture
def data_folder(tmp_path):
    folder = tmp_path / "prog"
    folder.mkdir()
    np.save(folder / "x.npy", np.array([1.0, -2.0, 3.0]))
    np.savez(folder / "pair.npz", w=np.array([[1.0, 2.0], [3.0, 4.0]]), v=np.array([5.0, 6.0]))
    np.savez(folder / "single.npz", only=np.array([7.0, 8.0]))
    (folder / "m.csv").write_text("1,2\n3,4\n", encoding="utf-8")
    (folder / "h.csv").write_text("p,q\n0.5,1.5\n2.5,3.5\n", encoding="utf-8")
    (folder / "j.json").write_text("[[1, 2], [3, 4]]", encoding="utf-8")
    return folder


def test_load_npy(data_folder) -> None:
    program = data_folder / "p.eq"
    program.write_text('x = load("x.npy")\ny = sum(x * x)\n', encoding="utf-8")
    doc = json_ok("grad", program)
    assert doc["value"] == 14
    assert doc["grad"] == {"x": [2, -4, 6]}


def test_load_npz_member(data_folder) -> None:
    program = data_folder / "p.eq"
    program.write_text('w = load("pair.npz", "w")\nv = load("pair.npz", "v")\ny = sum(w @ v)\n', encoding="utf-8")
    doc = json_ok("grad", program)
    w, v = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([5.0, 6.0])
    assert doc["value"] == float((w @ v).sum())
    np.testing.assert_allclose(np.array(doc["grad"]["w"]), np.outer(np.ones(2), v))
    np.testing.assert_allclose(np.array(doc["grad"]["v"]), w.sum(axis=0))


def test_load_npz_with_one_member(data_folder) -> None:
    program = data_folder / "p.eq"
    program.write_text('s = load("single.npz")\n', encoding="utf-8")
    assert json_ok("eval", program)["values"]["s"] == [7, 8]


def test_load_csv_and_json(data_folder) -> None:
    program = data_folder / "p.eq"
    program.write_text('m = load("m.csv")\nh = load("h.csv")\nj = load("j.json")\ny = sum(m * j)\n',
                       encoding="utf-8")
    values = json_ok("eval", program)["values"]
    assert values["m"] == [[1, 2], [3, 4]]
    assert values["h"] == [[0.5, 1.5], [2.5, 3.5]]
    assert values["j"] == [[1, 2], [3, 4]]
    assert values["y"] == 30


def test_load_is_relative_to_the_program_not_the_cwd(data_folder, tmp_path, monkeypatch) -> None:
    program = data_folder / "p.eq"
    program.write_text('x = load("x.npy")\ny = sum(x)\n', encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert json_ok("eval", program)["values"]["y"] == 2


def test_load_from_inline_program_reads_the_current_folder(data_folder, monkeypatch) -> None:
    monkeypatch.chdir(data_folder)
    assert json_ok("eval", "-e", 'x = load("x.npy")')["values"]["x"] == [1, -2, 3]
    assert json_ok("eval", "-", input='x = load("x.npy")\n')["values"]["x"] == [1, -2, 3]


def test_loaded_value_is_a_leaf_that_set_replaces(data_folder) -> None:
    program = data_folder / "p.eq"
    program.write_text('x = load("x.npy")\ny = sum(x * x)\n', encoding="utf-8")
    doc = json_ok("grad", program, "--set", "x=[1, 1]")
    assert doc["value"] == 2
    assert doc["grad"] == {"x": [2, 2]}


# --- version, help, exit codes, python -m ---------------------------------------------------------------------

@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    """`gradcalc X.Y.Z` and exit 0, as the installed package's metadata says (one source: __version__)."""
    result = run_cli(flag)
    assert result.exit_code == EXIT_OK
    assert result.stdout == f"gradcalc {importlib.metadata.version('gradcalc')}\n"
    assert result.stdout == f"gradcalc {gradcalc.__version__}\n"
    assert result.stderr == ""


def test_the_package_version_is_read_from_one_place() -> None:
    """pyproject.toml takes the version from gradcalc/__init__.py: the wheel and --version cannot disagree."""
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["hatch"]["version"]["path"] == "gradcalc/__init__.py"


def command_names() -> list[str]:
    names = [c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands]
    return sorted(n for n in names if n)


def test_eval_and_grad_are_commands() -> None:
    assert {"eval", "grad"} <= set(command_names())


@pytest.mark.parametrize("name", command_names())
def test_every_command_has_help_with_examples(name: str) -> None:
    result = run_cli(name, "--help")
    assert result.exit_code == EXIT_OK, result.stderr
    assert "Examples" in result.stdout
    assert f"gradcalc {name}" in result.stdout
    shared = ("--json",) if name in ("doctor", "examples") else \
        ("--json", "--set", "--values", "--seed", "--dtype", "--device")
    for option in shared:  # doctor and examples run no program: they take only --json
        assert option in result.stdout, option


@pytest.mark.parametrize("name", command_names())
def test_every_command_is_in_the_docs_table(name: str) -> None:
    commands = (REPO / "docs" / "commands.md").read_text(encoding="utf-8")
    assert f"| `gradcalc {name}" in commands


def test_top_level_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.exit_code == EXIT_OK
    for name in command_names():
        assert name in result.stdout


def test_short_help_option() -> None:
    result = run_cli("grad", "-h")
    assert result.exit_code == EXIT_OK
    assert "Examples" in result.stdout


def test_exit_code_zero_and_two() -> None:
    assert run_cli("eval", "-e", "y = 1").exit_code == EXIT_OK
    assert run_cli("eval", "-e", "y = 1 +").exit_code == EXIT_BAD_INPUT
    assert run_cli("grad", "-e", "y = 1 +").exit_code == EXIT_BAD_INPUT


def test_python_dash_m_runs_the_cli() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gradcalc", "grad", "samples/neuron.eq", "--wrt", "a", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = strict_json(proc.stdout)
    assert doc["grad"] == {"a": 2.5}
    proc = subprocess.run([sys.executable, "-m", "gradcalc", "eval", "-e", "y = 2 x"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "<expr>:1:7:" in proc.stderr


def test_typographic_operators_in_programs() -> None:
    """y = x·3 − x÷2 × 4 is y = x*3 - x/2*4 (precedence as ASCII): 2 at x = 2, dy/dx = 3 - 2 = 1."""
    doc = json_ok("grad", "-e", "x = 2; y = x·3 − x÷2 × 4; z = −x", "--of", "y")
    assert doc["value"] == 2.0 and doc["grad"]["x"] == 1.0
    values = json_ok("eval", "-e", "x = 2; z = −x^2")["values"]
    assert values["z"] == -4.0  # unary minus binds looser than ^, as with '-'


@pytest.mark.parametrize(("written", "ascii_"), [
    ("y = x² + x⁻¹ + √x + (x + 1)³ – 2⋅x", "y = x^2 + x^-1 + sqrt(x) + (x + 1)^3 - 2*x"),
    ("y = −x² + √(x + 1)⁻²", "y = -x^2 + sqrt(x + 1)^-2"),  # -x² is -(x²); √a⁻² is √(a⁻²), as √a^-2
    ("y = 2^x¹⁰ / x¹²", "y = 2^x^10 / x^12"),
    ("w₁ = 1.5; w₂ = 2; y = w1*x + w₂*x^2 + π", "w1 = 1.5; w2 = 2; y = w1*x + w2*x^2 + pi"),
    ("y = 2∙x ∗ x", "y = 2*x * x"),
])
def test_notation_from_notes_is_the_ascii_program(written: str, ascii_: str) -> None:
    """Superscript powers, √, subscript digits in names, π, ⋅ and – (en dash): the same program as in ASCII."""
    typed = json_ok("grad", "-e", f"x = 1.3; {written}", "--of", "y")
    plain = json_ok("grad", "-e", f"x = 1.3; {ascii_}", "--of", "y")
    assert typed == plain
    assert set(typed["grad"]) >= {"x"}


def test_names_with_combining_accents_are_names_and_compose() -> None:
    """x̄ (x and a combining macron) is a name; ŷ typed as y and a combining circumflex is the ŷ of one code point."""
    doc = json_ok("grad", "-e", "x\u0304 = 3; y\u0302 = 2; L = x\u0304^2 * \u0177")
    assert doc["value"] == 18.0
    assert doc["grad"] == {"x\u0304": 12.0, "\u0177": 9.0}
    missing = run_cli("grad", "-e", "x = 3; L = x\u0304^2", "--json")
    assert "'x\u0304' is used but never given a value" in json_error(missing)["message"]


def test_superscript_power_against_closed_form() -> None:
    """d/dx (x³ + x⁻²) = 3x² - 2x⁻³, at x = 1.5."""
    doc = json_ok("grad", "-e", "x = 1.5; y = x³ + x⁻²")
    assert doc["value"] == pytest.approx(1.5**3 + 1.5**-2, rel=1e-15)
    assert doc["grad"]["x"] == pytest.approx(3 * 1.5**2 - 2 * 1.5**-3, rel=1e-15)


@pytest.mark.parametrize(("program", "message", "hint"), [
    ("x = 3; y = x²y", "missing operator before 'y'", "write 'x²*y' to multiply"),
    ("x = 3; y = x⁻", "unexpected character '⁻'", "remove it"),
    ("x = 3; y = ²", "unexpected '²'", "expected an expression"),
])
def test_notation_from_notes_errors(program: str, message: str, hint: str) -> None:
    result = run_cli("eval", "-e", program, "--json")
    assert result.exit_code == EXIT_BAD_INPUT
    error = strict_json(result.stderr)["error"]
    assert error["message"] == message and error["hint"].startswith(hint), error


# --- the process: only the named command is built; a closed pipe is not an error --------------------------------

def _process(*args: str, stdout: int | None = subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gradcalc", *args], cwd=REPO, stdout=stdout,
                          stderr=subprocess.PIPE, text=True, timeout=60, check=False)


@pytest.mark.slow
def test_top_level_help_lists_every_command_and_a_typo_gets_a_suggestion() -> None:
    """main() builds only the command it runs; the top level and a mistyped name still see all of them."""
    listed = _process("--help").stdout
    for name in ("eval", "grad", "jacobian", "hessian", "jvp", "diff", "graph", "explain", "check", "gradcheck",
                 "doctor"):
        assert name in listed, name
    from gradcalc.program.builtins import BUILTINS

    words = set(listed.split())  # an unknown function's error says the builtins are listed here: they are
    assert "functions:" in words and all(name in words or f"{name};" in words for name in BUILTINS), listed
    typo = _process("grd", "samples/neuron.eq")
    assert typo.returncode == 2 and "hint: did you mean 'grad'?" in typo.stderr
    own = _process("grad", "--help").stdout
    assert "gradcalc grad [OPTIONS]" in own and "--wrt" in own


@pytest.mark.slow
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly() -> None:
    """`gradcalc ... | head`: 141 (as a shell reports SIGPIPE), no traceback, no 'internal error'."""
    process = subprocess.Popen([sys.executable, "-m", "gradcalc", "eval", "-e", "x = randn(300, 300)", "--full"],
                               cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first byte
    stderr = process.stderr.read()
    assert process.wait(timeout=60) == 141
    assert stderr == ""


@pytest.mark.parametrize(("name", "value", "derivative"), [
    ("sec", lambda x: 1 / math.cos(x), lambda x: math.sin(x) / math.cos(x) ** 2),
    ("csc", lambda x: 1 / math.sin(x), lambda x: -math.cos(x) / math.sin(x) ** 2),
    ("cot", lambda x: 1 / math.tan(x), lambda x: -1 / math.sin(x) ** 2),
    ("sech", lambda x: 1 / math.cosh(x), lambda x: -math.tanh(x) / math.cosh(x)),
    ("csch", lambda x: 1 / math.sinh(x), lambda x: -math.cosh(x) / math.sinh(x) ** 2),
    ("coth", lambda x: 1 / math.tanh(x), lambda x: -1 / math.sinh(x) ** 2),
    ("σ", lambda x: 1 / (1 + math.exp(-x)), lambda x: math.exp(-x) / (1 + math.exp(-x)) ** 2),
])
def test_reciprocal_functions_and_sigma_against_closed_forms(name: str, value: Callable[[float], float],
                                                             derivative: Callable[[float], float]) -> None:
    """sec … coth and σ, as derivatives are written in answers (sec²x, sech²x, σ(z)(1 - σ(z)))."""
    for x in (0.4, -1.3):
        doc = json_ok("grad", "-e", f"x = {x}; y = {name}(x)")
        assert doc["value"] == pytest.approx(value(x), rel=1e-13)
        assert doc["grad"]["x"] == pytest.approx(derivative(x), rel=1e-12)


def test_pow_is_power_against_closed_forms() -> None:
    """pow(x, y), NumPy's and PyTorch's name for x^y: value and both partial derivatives."""
    for x, y in ((1.7, 2.5), (0.3, -1.2)):
        doc = json_ok("grad", "-e", f"x = {x}; y = {y}; z = pow(x, y)")
        assert doc["value"] == pytest.approx(x**y, rel=1e-14)
        assert doc["grad"]["x"] == pytest.approx(y * x ** (y - 1), rel=1e-13)
        assert doc["grad"]["y"] == pytest.approx(x**y * math.log(x), rel=1e-13)


def test_an_80_column_terminal_keeps_every_claim_verdict_and_number_whole() -> None:
    """The note column wraps to fit; claims, verdicts and values are never cut (they were '✓ …', '-0…')."""
    from rich.console import Console

    from gradcalc.cli.jsonout import grading_totals
    from gradcalc.cli.render import Inert, check_view, grading_view
    from gradcalc.tools.homework import check as C

    program = gradcalc.load(str(SAMPLES / "homework.eq"))
    judge = C.Judge(program.run(keep_values=True))
    report = judge.report("hw", (C.claims_of_program(program.module), program.source))
    reports = [judge.report(name, C.read_claims(str(SAMPLES / "submissions" / name)))
               for name in ("alice.txt", "bob.txt", "dave.txt")]
    for view in (check_view(report), grading_view(reports, grading_totals(reports), False)):
        out = io.StringIO()
        Console(file=out, width=80, color_system=None, markup=False, soft_wrap=False).print(Inert(view))
        text = out.getvalue()
        assert "…" not in text, text
        assert max(len(line) for line in text.splitlines()) <= 80, text
        if "verdict" in text.splitlines()[0]:  # the check table (the grading one has no verdict column)
            for claim in ("dL/dd = -1", "dL/db = -w3", "dL/dw1 = -w3*a", "dL/dw2 = -4*a", "dL/da = -w3*w1"):
                assert claim in text, text
            assert text.count("✓ right") == 3 and text.count("✗ wrong") >= 2, text


def test_an_80_column_terminal_keeps_a_gradient_column() -> None:
    """A table of matrices does not wrap its last column away: grad's gradients stay on screen at 80 columns."""
    from rich.console import Console

    from gradcalc.cli.render import Inert, grad_view

    run = gradcalc.parse_program("W1 = randn(3, 6); x = randn(6); h = tanh(W1 @ x); W2 = randn(2, 3); "
                                 "L = sum(W2 @ h)").run()
    result = run.grad("L", ["W1", "W2"])
    out = io.StringIO()
    Console(file=out, width=80, color_system=None, markup=False, soft_wrap=False).print(Inert(grad_view(run, result)))
    assert "∂L/∂variable" in out.getvalue(), out.getvalue()
