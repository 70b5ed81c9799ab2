"""Batch mode (--at, Program.run_batch): a batch gives what each point's own run gives, bad points alone fail."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys

import numpy as np
import pytest
from helpers import REPO, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import expressions, scalar_cases

import gradcalc
from gradcalc.language.parser import DEFAULT_MAX_DEPTH, raise_recursion_limit
from gradcalc.program import batch

raise_recursion_limit(DEFAULT_MAX_DEPTH)  # before Hypothesis runs, so it does not see the limit change

ARM = """l1 = 1
l2 = 0.8
t1 = 0.3
t2 = 0.5
x = l1*cos(t1) + l2*cos(t1 + t2)
y = l1*sin(t1) + l2*sin(t1 + t2)
L = (x - 1)^2 + (y - 0.5)^2
"""

# Each: a program, and points whose paths through it differ where it branches or loops on a value.
PROGRAMS = {
    "broadcasting": ("x = [1, 2, 3]; s = 2; L = sum((x*s - 1)^2) + s^3", [{"x": [0.5, -1, 2], "s": 0.3},
                                                                           {"x": [1, 1, 1], "s": -2}]),
    "reductions": ("W = [[1, 2], [3, 4]]; L = sum(max(W, axis=0)) + mean(W^2) + logsumexp(W)",
                   [{"W": [[0.1, 2], [3, -4]]}, {"W": [[5, 2], [1, 0.5]]}]),
    "matmul": ("W = [[1, 2], [3, 4]]; v = [1, -1]; h = tanh(W @ v); L = sum(h * (v @ W))",
               [{"W": [[0.1, 0.2], [0.3, 0.4]], "v": [2, 1]}, {"v": [-1, 0.5]}]),
    "indexing": ("x = [1, 2, 3, 4]; L = x[0]*x[-1] + sum(x[1:3]^2) + x[::2] @ x[1::2]",
                 [{"x": [1, 0, 2, 3]}, {"x": [-1, 2, 0.5, 1]}]),
    "if on a value": ("x = 1; if x > 0 { y = x^2 } else { y = -x^3 }; L = y + x", [{"x": 2}, {"x": -1}, {"x": 3}]),
    "while on a value": ("x = 1; y = x; while y < 10 { y = y * 2 + x }; L = y", [{"x": 1}, {"x": 3}, {"x": 0.5}]),
    "functions": ("f(a, b) { return a*sin(b) + b }\nx = 1; w = 2; L = f(x, w)^2 + f(w, x)",
                  [{"x": 0.5, "w": -1}, {"x": 2}]),
    "index from a value": ("x = [1, 2, 3]; k = 0; L = x[k]^2 + sum(x[k:]) * k", [{"k": 0}, {"k": 2}, {"k": 1}]),
    "for and const": ("const n = 3\nx = [1, 2, 3]; t = 0; for i in range(n) { t = t + x[i]^2 }; L = t * x[0]",
                      [{"x": [1, 2, 3]}, {"x": [0.5, -1, 2]}]),
}


def _program(text: str) -> gradcalc.Program:
    return gradcalc.parse_program(text.replace("; ", "\n"))


def _equal(a: object, b: object) -> None:
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_batch_equals_each_point_run_alone(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    text, points = PROGRAMS[name]
    program = _program(text)
    points = points * 3  # groups of more than one point (a point alone runs unbatched)
    alone: list[object] = []
    run = gradcalc.Program.run
    monkeypatch.setattr(gradcalc.Program, "run", lambda self, *a, **k: (alone.append(a), run(self, *a, **k))[1])
    wrt = next(iter(points[0]))  # a leaf every point gives
    grads = list(program.run_batch(points, "grad"))
    values = list(program.run_batch(points, "values"))
    hessians = list(program.run_batch(points, "hessian"))
    jacobians = list(program.run_batch(points, "jacobian", {"of": "L"}))
    forward = list(program.run_batch(points, "jacobian", {"of": "L", "mode": "fwd"}))
    tangents = list(program.run_batch(points, "jvp", {"of": "L", "wrt": wrt, "tangent": "ones"}))
    curvature = list(program.run_batch(points, "hvp", {"of": "L", "wrt": wrt, "vector": "ones"}))
    assert alone == []  # every group went through as a batch: none fell back to a run per point
    monkeypatch.undo()
    for i, point in enumerate(points):
        alone = _program(text).run(point)
        assert grads[i].index == i and grads[i].error is None, grads[i].error
        expected = alone.grad()
        _equal(grads[i].result.value, expected.value)
        assert list(grads[i].result.grads) == list(expected.grads)
        for leaf, gradient in expected.grads.items():
            _equal(grads[i].result.grads[leaf], gradient)
        for variable, value in alone.values().items():
            _equal(values[i].result[variable], value)
        for got, want in zip(hessians[i].result.blocks, alone.hessian().blocks):
            for a, b in zip(got, want):
                _equal(a, b)
        for got_jacobian in (jacobians[i].result, forward[i].result):
            assert got_jacobian.wrt == alone.jacobian("L").wrt
            for a, b in zip(got_jacobian.blocks, alone.jacobian("L").blocks, strict=True):
                assert np.shape(a) == np.shape(b)
                _equal(a, b)
        _equal(tangents[i].result.jvp, alone.jvp("L", wrt, "ones").jvp)
        _equal(curvature[i].result.hvp, alone.hvp("L", wrt, "ones").hvp)
        hessian = alone.hessian()
        assert hessians[i].result.wrt == hessian.wrt
        _equal(hessians[i].result.value, hessian.value)


def test_a_straight_line_program_runs_as_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    alone: list[int] = []
    monkeypatch.setattr(batch, "_run_one", lambda program, point, *rest: alone.append(point.index))
    rng = np.random.default_rng(1)
    points = [{"t1": float(a), "t2": float(b)} for a, b in rng.normal(size=(50, 2))]
    results = list(_program(ARM).run_batch(points, "grad", {"wrt": ["t1", "t2"]}))
    assert alone == []
    for point, result in zip(points, results):  # the closed form, differentiated by hand
        t1, t2 = point["t1"], point["t2"]
        x, y = np.cos(t1) + 0.8 * np.cos(t1 + t2), np.sin(t1) + 0.8 * np.sin(t1 + t2)
        dx, dy = 2 * (x - 1), 2 * (y - 0.5)
        _equal(result.result.value, (x - 1) ** 2 + (y - 0.5) ** 2)
        _equal(result.result.grads["t1"], dx * -y + dy * x)
        _equal(result.result.grads["t2"], dx * -0.8 * np.sin(t1 + t2) + dy * 0.8 * np.cos(t1 + t2))


def test_points_that_branch_apart_run_in_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    alone: list[int] = []
    original = batch._run_one
    monkeypatch.setattr(batch, "_run_one", lambda program, point, *rest: (alone.append(point.index),
                                                                           original(program, point, *rest)))
    text = "x = 1\nif x > 0 { y = x^2 } else { y = -x }\nL = y"
    points = [{"x": v} for v in (1, -1, 2, -2, 3, -3)]
    results = list(_program(text).run_batch(points, "grad"))
    assert alone == []  # two groups of three, each batched
    assert [float(r.result.grads["x"]) for r in results] == [2, -1, 4, -1, 6, -1]


@settings(max_examples=30, deadline=None)
@given(scalar_cases())
def test_random_programs_batched_equal_per_point(case: tuple[str, list[str], list[dict[str, float]]]) -> None:
    text, names, points = case
    program = gradcalc.parse_program(text, "<case>")
    for got, point in zip(program.run_batch(points * 2, "grad", {"wrt": names}), points * 2):
        try:
            expected = gradcalc.parse_program(text).run(point).grad(wrt=names)
        except gradcalc.GradcalcError as error:
            assert got.error is not None and got.error.message == error.message
            continue
        assert got.error is None, got.error
        np.testing.assert_allclose(float(got.result.value), float(expected.value), rtol=1e-9, equal_nan=True)
        for name in names:
            np.testing.assert_allclose(float(got.result.grads[name]), float(expected.grads[name]), rtol=1e-9,
                                       atol=1e-12, equal_nan=True)


@st.composite
def branching_cases(draw: object) -> tuple[str, list[dict[str, float]]]:
    """A program over x, y, W that branches and loops on values, with its reductions and matrix products, and
    points of it (x and y scalars, W a 2×2 matrix) whose paths differ."""
    e = lambda: draw(expressions(["x", "y"], depth=2))  # type: ignore[operator]
    text = (f"x = 0.5\ny = -0.3\nW = [[1, 0.5], [-0.5, 2]]\nv = [x, y]\nf = {e()}\n"
            f"if f > {draw(st.sampled_from(['0', '0.5', 'x']))} {{ g = sum(tanh(W @ v) * f) }} "  # type: ignore[operator]
            f"else {{ g = mean(W^2) * ({e()}) }}\n"
            "n = 0\nwhile n < 3 and g < 2 { g = g + abs(x) + 0.5; n = n + 1 }\nL = g + max(W @ v)\n")
    coordinate = st.floats(-1.5, 1.5, allow_nan=False).map(lambda v: round(v, 2))
    points = [{"x": draw(coordinate), "y": draw(coordinate), **({"W": [[draw(coordinate), 1], [0, draw(coordinate)]]}  # type: ignore[operator]
                                                                 if draw(st.booleans()) else {})}  # type: ignore[operator]
              for _ in range(6)]
    return text, points


@settings(max_examples=25, deadline=None)
@given(branching_cases())
def test_random_branching_programs_batched_equal_per_point(case: tuple[str, list[dict[str, float]]]) -> None:
    text, points = case
    program = gradcalc.parse_program(text)
    for got, point in zip(program.run_batch(points, "grad"), points):
        try:
            expected = gradcalc.parse_program(text).run(point).grad()
        except gradcalc.GradcalcError as error:
            assert got.error is not None and got.error.message == error.message
            continue
        assert got.error is None, got.error
        np.testing.assert_allclose(got.result.value, expected.value, rtol=1e-9, equal_nan=True)
        for name, gradient in expected.grads.items():
            np.testing.assert_allclose(got.result.grads[name], gradient, rtol=1e-9, atol=1e-12, equal_nan=True)


@settings(max_examples=15, deadline=None)
@given(branching_cases())
def test_random_programs_jacobians_and_hessians_batched_equal_per_point(
        case: tuple[str, list[dict[str, float]]]) -> None:
    text, points = case
    program = gradcalc.parse_program(text)
    hessians = list(program.run_batch(points, "hessian"))
    jacobians = list(program.run_batch(points, "jacobian", {"of": "v", "wrt": ["x", "W"]}))
    for hessian, jacobian, point in zip(hessians, jacobians, points):
        alone = gradcalc.parse_program(text)
        try:
            expected = alone.run(point).hessian()
        except gradcalc.GradcalcError as error:
            assert hessian.error is not None and hessian.error.message == error.message
            continue
        assert hessian.error is None and jacobian.error is None, hessian.error or jacobian.error
        for got_row, row in zip(hessian.result.blocks, expected.blocks, strict=True):
            for got, block in zip(got_row, row, strict=True):
                np.testing.assert_allclose(got, block, rtol=1e-9, atol=1e-12, equal_nan=True)
        for got, block in zip(jacobian.result.blocks, alone.run(point).jacobian("v", ["x", "W"]).blocks, strict=True):
            np.testing.assert_allclose(got, block, rtol=1e-9, atol=1e-12, equal_nan=True)


def test_the_arm_s_jacobian_and_hessian_in_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    alone: list[int] = []
    monkeypatch.setattr(batch, "_run_one", lambda program, point, *rest: alone.append(point.index))
    rng = np.random.default_rng(2)
    points = [{"t1": float(a), "t2": float(b)} for a, b in rng.normal(size=(40, 2))]
    program = _program(ARM + "p = [x, y]\n")
    jacobians = list(program.run_batch(points, "jacobian", {"of": "p", "wrt": ["t1", "t2"], "mode": "rev"}))
    hessians = list(program.run_batch(points, "hessian", {"of": "L", "wrt": ["t2"]}))
    assert alone == []
    for point, jacobian, hessian in zip(points, jacobians, hessians):  # differentiated by hand
        t1, t2 = point["t1"], point["t2"]
        x, y = np.cos(t1) + 0.8 * np.cos(t1 + t2), np.sin(t1) + 0.8 * np.sin(t1 + t2)
        _equal(jacobian.result.blocks[0], [-y, x])  # ∂(x, y)/∂t1
        _equal(jacobian.result.blocks[1], [-0.8 * np.sin(t1 + t2), 0.8 * np.cos(t1 + t2)])
        # L = (x-1)² + (y-0.5)²; ∂x/∂t2 = -0.8 s, ∂y/∂t2 = 0.8 c, ∂²x/∂t2² = -0.8 c, ∂²y/∂t2² = -0.8 s
        s, c = np.sin(t1 + t2), np.cos(t1 + t2)
        second = 2 * (0.64 * s * s + (x - 1) * -0.8 * c + 0.64 * c * c + (y - 0.5) * -0.8 * s)
        _equal(hessian.result.blocks[0][0], second)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_bad_points_fail_alone_with_their_index(tmp_path: object) -> None:
    points = '{"x": 2}\n{"x": "nope"}\nnot json\n\n{"x": [1, 2]}\n{"x": 3}\n[3]\n'
    result = run_cli("grad", "-e", "x = 1; L = x^2", "--at", "-", "--json", input=points)
    assert result.exit_code == 2, result.stderr
    docs = _lines(result.stdout)
    assert [doc["index"] for doc in docs] == [0, 1, 2, 3, 4, 5]  # the blank line is no point
    assert docs[5]["error"]["message"] == "not a JSON object" and docs[5]["error"]["line"] == 7
    assert docs[0]["grad"] == {"x": 4.0} and docs[4]["grad"] == {"x": 6.0}
    assert "nope" in docs[1]["error"]["message"]  # read as a constant expression: an unknown name
    assert docs[2]["error"]["line"] == 3 and "not JSON" in docs[2]["error"]["message"]
    assert "scalar" in docs[3]["error"]["message"]  # a point of another shape: L = x^2 is a vector there


@pytest.mark.parametrize("command", [("grad",), ("hvp", "--wrt", "w", "--vector", "1")])
def test_a_point_s_unreadable_value_is_shown_in_its_row_not_a_crash(command: tuple[str, ...]) -> None:
    """The table shows what each point gave: a value that is no array of numbers is shown as the JSON it was."""
    points = '{"w": 2}\n{"w": [1, "a"]}\n{"w": [[1], [2, 3]]}\n{"w": {"k": 1}}\n'
    result = run_cli(*command, "-e", "w = 1; L = w^3", "--at", "-", input=points)
    assert result.exit_code == 2, result.stderr  # bad points, not a bug (3)
    rows = result.stdout.splitlines()[1:]
    assert rows[0].split()[:2] == ["0", "2"] and rows[0].split()[-1] == "12"  # grad: 3w² = 12; hvp: 6w·1 = 12
    for row, shown in zip(rows[1:], ['[1, "a"]', "[[1], [2, 3]]", '{"k": 1}']):
        assert shown in row and "'w' is not a number or a rectangular array of numbers" in row, row


def test_csv_and_unknown_keys() -> None:
    csv_points = "t1,t2,zz\n0,0,1\n"
    result = run_cli("eval", "-e", ARM.replace("\n", "; "), "--at", "-", "--json", input=csv_points)
    assert result.exit_code == 2
    assert "no leaf 'zz'" in _lines(result.stdout)[0]["error"]["message"]
    result = run_cli("eval", "-e", ARM.replace("\n", "; "), "--at", "-", "--json", "--ignore-extra",
                     input=csv_points + "1.5707963267948966,0,\n")
    assert result.exit_code == 0, result.stdout
    docs = _lines(result.stdout)
    _equal(docs[0]["values"]["x"], 1.8)  # t1 = t2 = 0: the arm lies along x
    _equal(docs[1]["values"]["y"], 1.8)
    _equal(docs[1]["values"]["x"], 0)


def test_csv_file_and_table(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "points.csv")
    with open(path, "w") as handle:
        handle.write("x\n1\n-2\n")
    result = run_cli("grad", "-e", "x = 1; L = x^3", "--at", path)
    assert result.exit_code == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows[0] == ["#", "x", "L", "∂L/∂x"]
    assert rows[1:] == [["0", "1", "1", "3"], ["1", "-2", "-8", "12"]]


def test_stdin_streams_each_point_before_the_input_ends() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    process = subprocess.Popen([sys.executable, "-m", "gradcalc", "grad", "-e", "x = 1; L = x^2", "--at", "-",
                                "--json"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, cwd=str(REPO))
    assert process.stdin is not None and process.stdout is not None
    try:
        for value in (1, 2, 3):
            process.stdin.write(f'{{"x": {value}}}\n'.encode())
            process.stdin.flush()
            ready, _, _ = select.select([process.stdout], [], [], 30)
            assert ready, "no answer while the input is still open"
            doc = json.loads(process.stdout.readline())
            assert doc["grad"] == {"x": 2.0 * value}
    finally:
        process.stdin.close()
        process.wait(30)
    assert process.returncode == 0


def test_run_batch_reads_a_generator_in_chunks() -> None:
    made: list[int] = []

    def points():  # an endless producer: only what is asked for is made
        i = 0
        while True:
            made.append(i)
            yield {"x": float(i)}
            i += 1

    results = gradcalc.parse_program("x = 1\nL = 3*x^2").run_batch(points(), "grad", chunk_size=4)
    first = [next(results) for _ in range(5)]
    assert [float(p.result.grads["x"]) for p in first] == [0, 6, 12, 18, 24]
    assert len(made) <= 8


def test_run_stacked_takes_columns_and_gives_them_back_in_order() -> None:
    program = gradcalc.parse_program("x = 1\nif x > 0 { y = x^2 } else { y = -x }\nL = y")
    found = program.run_stacked({"x": [1.0, -1.0, 2.0, -3.0]}, "grad")
    np.testing.assert_array_equal(found.value, [1, 1, 4, 3])
    np.testing.assert_array_equal(found.grads["x"], [2, -1, 4, -1])
    values = program.run_stacked({"x": [3.0, -2.0]})
    np.testing.assert_array_equal(values["y"], [9, 2])


def test_run_stacked_differentiates_det_at_each_point() -> None:
    program = gradcalc.parse_program("A = [[1, 2], [3, 4]]\nL = det(A)")
    found = program.run_stacked({"A": [[[1.0, 2.0], [3.0, 4.0]], [[2.0, 0.0], [0.0, 5.0]]]}, "grad")
    np.testing.assert_allclose(found.value, [-2, 10])
    np.testing.assert_allclose(found.grads["A"], [[[4, -3], [-2, 1]], [[5, 0], [0, 2]]])  # det(A)·A⁻ᵀ


def test_run_stacked_raises_a_point_s_error() -> None:
    program = gradcalc.parse_program("x = 1\nL = sum(x)")
    with pytest.raises(gradcalc.GradcalcError, match="leading axis"):
        program.run_stacked({"x": 2.0})
    with pytest.raises(gradcalc.GradcalcError, match="unknown method 'taylor'"):
        program.run_stacked({"x": [1.0, 2.0]}, "taylor")


def test_json_lines_are_each_point_s_own_document() -> None:
    points = '{"x": 4}\n{"x": -1}\n{"x": 0}\n{"x": "zz"}\n{"x": 9}\n'
    result = run_cli("grad", "-e", "x = 1; w = 2; L = w*sqrt(x)", "--at", "-", "--json", input=points)
    docs = _lines(result.stdout)
    for doc, x in zip(docs, [4, -1, 0, None, 9]):
        if x is None:
            assert "zz" in doc["error"]["message"]
            continue
        alone = json.loads(run_cli("grad", "-e", "x = 1; w = 2; L = w*sqrt(x)", "--set", f"x={x}", "--json").stdout)
        assert ("warnings" in alone) == (x in (-1, 0)), alone  # where a NaN started: single runs only
        alone.pop("warnings", None)
        assert doc == {"index": doc["index"], **alone}  # NaN and Infinity written as one run writes them
    assert docs[1]["value"] == "NaN" and docs[2]["grad"]["x"] == "Infinity"


def test_a_batch_runs_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """--device gpu over the fake device (tests/fakedevice.py): a NumPy call outside the backend would fail."""
    import fakedevice

    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    text = "x = [1, 2]; w = 2; if w > 0 { y = sum(x * w)^2 } else { y = sum(x) }; L = y + x[0]"
    points = '{"w": 1, "x": [0.5, 1]}\n{"w": 3}\n{"w": -1}\n{"w": "q"}\n{"w": 2, "x": [1, 2]}\n'
    for command in ("grad", "eval"):
        cpu = run_cli(command, "-e", text, "--at", "-", "--json", input=points)
        gpu = run_cli(command, "-e", text, "--at", "-", "--json", "--device", "gpu", input=points)
        assert (gpu.exit_code, gpu.stdout) == (cpu.exit_code, cpu.stdout), gpu.stderr
    assert _lines(gpu.stdout)[1]["values"]["y"] == 81.0  # (3 + 6)^2
    found = gradcalc.parse_program(text.replace("; ", "\n")).run_stacked(
        {"w": [1.0, 3.0, -1.0, 2.0]}, "grad", device="gpu")
    np.testing.assert_array_equal(found.grads["w"], [2 * 3 * 3, 2 * 9 * 3, 0, 2 * 6 * 3])


def test_an_overlong_line_is_its_point_s_error_and_never_held_whole(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "points.jsonl")
    with open(path, "w") as handle:
        handle.write('{"x": 2}\n{"x": [' + "1, " * 400_000 + '1]}\n{"x": 3}\n')
    result = run_cli("grad", "-e", "x = 1; L = x^2", "--at", path, "--json", "--max-file-size", "100K")
    docs = _lines(result.stdout)
    assert [doc.get("grad") for doc in docs] == [{"x": 4.0}, None, {"x": 6.0}]
    assert "longer than 102,400 bytes" in docs[1]["error"]["message"] and docs[1]["error"]["line"] == 2


def test_branches_that_assign_different_variables() -> None:
    text = "x = 1\nif x > 0 { y = x^2 } else { z = -x }\nL = x"
    with pytest.raises(gradcalc.GradcalcError, match="different variables"):
        gradcalc.parse_program(text).run_stacked({"x": [1.0, -1.0]})
    points = list(gradcalc.parse_program(text).run_batch([{"x": 1.0}, {"x": -1.0}, {"x": 2.0}]))
    assert [sorted(p.result) for p in points] == [["L", "x", "y"], ["L", "x", "z"], ["L", "x", "y"]]
    assert float(points[1].result["z"]) == 1.0


def test_set_values_are_every_point_s_default() -> None:
    result = run_cli("grad", "-e", "a = 1; x = 1; L = a*x^2", "--set", "a=3", "--at", "-", "--wrt", "x", "--json",
                     input='{"x": 1}\n{"x": 2, "a": 1}\n{"x": 1, "b": 0}\n')
    docs = _lines(result.stdout)
    assert [doc.get("grad") for doc in docs] == [{"x": 6.0}, {"x": 4.0}, None]
    assert (docs[2]["error"]["line"], docs[2]["error"]["column"]) == (3, 10)  # where "b" is


def test_a_file_of_json_arrays_is_not_read_as_csv() -> None:
    result = run_cli("grad", "-e", "x = 1; L = x^2", "--at", "-", "--json", input="[1, 2]\n")
    assert result.exit_code == 2 and _lines(result.stdout)[0]["error"]["message"] == "not a JSON object"


def test_a_missing_points_file_stops_the_command() -> None:
    result = run_cli("grad", "-e", "x = 1; L = x^2", "--at", "no-such-points.jsonl")
    assert result.exit_code == 2 and result.stdout == ""
    assert "--at no-such-points.jsonl: cannot read it" in result.stderr


def test_plot_s_second_derivative_runs_as_one_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    from gradcalc.tools import plot

    alone: list[object] = []  # a point run on its own (run_batch's per-point path)
    monkeypatch.setattr(gradcalc.Program, "run_batch", lambda self, *a, **k: alone.append(a))
    found = plot.curve(gradcalc.parse_program("x = 1\ny = x^2 * sin(x)"), {}, {}, "y", "x", (-3.0, 3.0), 25, order=2)
    assert alone == []
    x = np.linspace(-3, 3, 25)  # (x² sin x)'' = 2 sin x + 4x cos x - x² sin x
    _equal(found.d2y, 2 * np.sin(x) + 4 * x * np.cos(x) - x * x * np.sin(x))
    _equal(found.dy, 2 * x * np.sin(x) + x * x * np.cos(x))


def test_a_batch_of_jacobians_too_large_together_runs_in_smaller_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    original = batch._run_batched
    monkeypatch.setattr(batch, "_run_batched", lambda program, group, *rest: (sizes.append(len(group)),
                                                                              original(program, group, *rest)))
    points = [{"x": [float(i), 1.0, 2.0, 3.0]} for i in range(8)]  # 8 points' 4×4 Jacobians: 128 entries
    found = list(_program("x = [1, 2, 3, 4]; y = x^2").run_batch(points, "jacobian", max_elements=40))
    assert sizes == [8, 4, 2, 2, 4, 2, 2]  # halved until a batch's blocks fit (2·16 ≤ 40)
    for i, point in enumerate(found):
        assert point.error is None, point.error
        _equal(point.result.blocks[0], np.diag([2.0 * i, 2, 4, 6]))  # ∂(x²)/∂x = diag(2x)
