"""`hvp --at` and `diff --at`: batched, each point gets what its own run gives, bad points alone fail."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from helpers import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import scalar_cases
from test_batch import ARM, branching_cases

import gradcalc
from gradcalc.program import batch

# H·v where x, v come from each point: L = sum(exp(x)) + x0²·x1, so H = diag(exp(x)) + [[2·x1, 2·x0], [2·x0, 0]].
CURVED = "x = [1, 2]; v = [0.5, -1]; L = sum(exp(x)) + x[0]^2 * x[1]"


def _hand_hvp(x: Sequence[float], v: Sequence[float]) -> np.ndarray:
    hessian = np.diag(np.exp(x)) + np.array([[2 * x[1], 2 * x[0]], [2 * x[0], 0]])
    return hessian @ np.asarray(v, dtype=float)


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _counting(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Each call of batch.`name` noted (its point's index, or the point read at), the call made as before."""
    calls: list[int] = []
    original = getattr(batch, name)
    index = 1 if name == "_run_one" else 2

    def counted(*args: object) -> object:
        point = args[index]
        calls.append(point if isinstance(point, int) else point.index)  # type: ignore[attr-defined]
        return original(*args)

    monkeypatch.setattr(batch, name, counted)
    return calls


def test_hvp_at_points_is_the_hessian_times_v_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    alone = _counting(monkeypatch, "_run_one")
    points: list[dict[str, Any]] = [{"x": [0.1, 0.2], "v": [1, 0]}, {"x": [0.3, -0.4], "v": [0, 1]},
                                    {"x": [1, 1], "v": [2, -3]},
              {"x": [-1, 0.5]}]  # the last: v keeps the program's value, so is a group of its own
    found = list(gradcalc.parse_program(CURVED.replace("; ", "\n")).run_batch(points, "hvp",
                                                                              {"of": "L", "wrt": "x", "vector": "v"}))
    assert alone == [3]  # the three that give x and v ran as one batch; the fourth is alone in its group
    for point, result in zip(points, found):
        assert result.error is None, result.error
        v = point.get("v", [0.5, -1])
        np.testing.assert_allclose(result.result.hvp, _hand_hvp(point["x"], v), rtol=1e-12)
        np.testing.assert_allclose(result.result.vector, v)
        x0, x1 = point["x"]
        np.testing.assert_allclose(result.result.value, np.exp(x0) + np.exp(x1) + x0 * x0 * x1, rtol=1e-12)


def test_hvp_at_on_the_command_line_json_table_and_bad_points() -> None:
    points = ('{"x": [0.1, 0.2], "v": [1, 0]}\n{"x": [0.3, -0.4], "v": [0, 1]}\n{"x": [1, 2, 3]}\n'
              '{"x": [1, 1], "w": 2}\nnot json\n{"x": [1, 1], "v": [2, -3]}\n')
    result = run_cli("hvp", "-e", CURVED, "--wrt", "x", "--vector", "v", "--at", "-", "--json", input=points)
    assert result.exit_code == 2, result.stderr
    docs = _lines(result.stdout)
    assert [doc["index"] for doc in docs] == [0, 1, 2, 3, 4, 5]
    cases: list[tuple[int, list[float], list[float]]] = [(0, [0.1, 0.2], [1, 0]), (1, [0.3, -0.4], [0, 1]),
                                                         (5, [1, 1], [2, -3])]
    for i, x, v in cases:
        assert (docs[i]["of"], docs[i]["wrt"], docs[i]["shape"], docs[i]["vector"]) == ("L", "x", [2], v)
        np.testing.assert_allclose(docs[i]["hvp"], _hand_hvp(x, v), rtol=1e-12)
        alone = json.loads(run_cli("hvp", "-e", CURVED, "--wrt", "x", "--vector", "v", "--set", f"x={x}",
                                   "--set", f"v={v}", "--json").stdout)
        assert docs[i] == {"index": i, **alone}  # the document a run at that point prints
    assert docs[2]["error"]["message"] == "--vector has shape (2,) but 'x' has shape (3,)"
    assert docs[3]["error"]["message"] == "point 3: the program has no leaf 'w'"
    assert docs[4]["error"]["line"] == 5 and "not JSON" in docs[4]["error"]["message"]

    table = run_cli("hvp", "-e", CURVED, "--wrt", "x", "--vector", "[1, 0]", "--at", "-", input='{"x": [0, 0]}\n')
    assert table.exit_code == 0, table.stderr
    # L = e^0 + e^0 = 2; H = diag(1, 1) at 0
    assert table.stdout.split() == ["#", "x", "L", "H·v", "(x)", "0", "[0,", "0]", "2", "[1,", "0]"], table.stdout


def test_hvp_at_a_constant_vector_and_ones() -> None:
    text = "x = [1, 2, 3]\nL = sum(x^4) + sum(x[:-1] * x[1:])"  # H = diag(12x²) + the off-diagonal ones
    program = gradcalc.parse_program(text)
    points: list[dict[str, Any]] = [{"x": [1, 2, 3]}, {"x": [0, -1, 0.5]}]
    for vector, v in [("[1, 0, 0]", [1, 0, 0]), ("ones", [1, 1, 1]), ("2", [2, 2, 2])]:
        for point, result in zip(points, program.run_batch(points, "hvp", {"of": "L", "wrt": "x", "vector": vector})):
            x = np.asarray(point["x"], dtype=float)
            hessian = np.diag(12 * x * x) + np.diag([1.0, 1.0], 1) + np.diag([1.0, 1.0], -1)
            np.testing.assert_allclose(result.result.hvp, hessian @ v, rtol=1e-12)


@settings(max_examples=25, deadline=None)
@given(scalar_cases(), st.lists(st.lists(st.floats(-1, 1).map(lambda f: round(f, 2)), min_size=3, max_size=3),
                                 min_size=4, max_size=4))
def test_random_programs_hvp_batched_equals_hvp_hessian_and_differences(
        case: tuple[str, list[str], list[dict[str, float]]], directions: list[list[float]]) -> None:
    """The scalars x, y, z as entries of a vector p: H·v a matrix product, v from each point."""
    body, _, drawn = case
    text = f"p = [0.1, 0.2, 0.3]\nv = [1, 0, 0]\nx = p[0]\ny = p[1]\nz = p[2]\n{body}\n"
    points = [{"p": [point.get(name, 0.3) for name in "xyz"], "v": v} for point in drawn * 2
              for v in directions[:2]]
    found = list(gradcalc.parse_program(text).run_batch(points, "hvp", {"of": "f", "wrt": "p", "vector": "v"}))
    for point, result in zip(points, found):
        run = gradcalc.parse_program(text).run(point)
        assert result.error is None, result.error
        np.testing.assert_allclose(result.result.hvp, run.hvp("f", "p", "v").hvp, rtol=1e-9, atol=1e-12)
        hessian = run.hessian("f", ["p"]).blocks[0][0]
        np.testing.assert_allclose(result.result.hvp, hessian @ point["v"], rtol=1e-9, atol=1e-12)
        eps = 1e-5
        p, v = np.asarray(point["p"]), np.asarray(point["v"])
        moved = [gradcalc.parse_program(text).run({"p": p + s * eps * v}).grad("f", ["p"]).grads["p"] for s in (1, -1)]
        scale = 1 + np.abs(moved[0]).max() + np.abs(result.result.hvp).max()
        np.testing.assert_allclose(result.result.hvp, (moved[0] - moved[1]) / (2 * eps), rtol=1e-4, atol=1e-5 * scale)


def _same_derivatives(got: list, expected: list) -> None:
    """Every field as the point's own diff gives it: the text exactly, the value to rounding."""
    assert len(got) == len(expected)
    for a, b in zip(got, expected):
        assert (a.of, a.wrt, a.text, a.latex, a.where, a.evaluable, a.given) == \
            (b.of, b.wrt, b.text, b.latex, b.where, b.evaluable, b.given)
        np.testing.assert_allclose(np.asarray(a.value, dtype=float), np.asarray(b.value, dtype=float), rtol=1e-9,
                                   atol=1e-12, equal_nan=True)


@settings(max_examples=15, deadline=None)
@given(branching_cases())
def test_random_branching_programs_diff_batched_equals_per_point(case: tuple[str, list[dict[str, float]]]) -> None:
    text, points = case
    program = gradcalc.parse_program(text)
    for arguments in ({}, {"wrt": ["x", "y"], "order": 2}, {"wrt": ["W"], "shortest": True},
                      {"wrt": ["x", "y"], "intermediates": True}, {"wrt": ["x"], "keep": ["f"]}):
        for got, point in zip(program.run_batch(points, "diff", arguments), points):
            try:
                expected = gradcalc.parse_program(text).run(point).diff(**arguments)
            except gradcalc.GradcalcError as error:
                assert got.error is not None and got.error.message == error.message
                continue
            assert got.error is None, got.error
            _same_derivatives(got.result, expected)


# Programs whose derivatives read some values besides the graph: each point must read as it does alone.
READ_VALUES: dict[str, tuple[str, list[Any]]] = {
    # x/x folds to 1, but its derivative is NaN where x is 0 or infinite: the text is that value.
    "a folded number": ("x = 1\nL = x/x + x", [1, 0, 2, float("inf"), -1, 0]),
    # -sum(Y*log(softmax(z))) reads softmax(z) - Y where Y sums to 1, and otherwise the general form.
    "sum to one": ("z = [1, 2, 3]\nY = [0, 1, 0]\nL = -sum(Y * log(softmax(z)))",
                   [{"z": [1, 2, 3], "Y": [0, 1, 0]}, {"z": [0, 0, 1], "Y": [0.5, 0.5, 0]},
                    {"z": [1, 1, 1], "Y": [1, 1, 0]}, {"z": [2, 1, 1], "Y": [0, 0, 1]}]),
    "branches": ("x = 1\nif x > 0 { y = x^2 } else { y = -x^3 }\nL = y + x", [1, -1, 2, -2, 0.5, 0]),
    "a max's mask": ("W = [[1, 2], [3, 4]]\nL = sum(max(W, axis=0)) * sum(W)",
                     [{"W": [[1, 2], [3, 4]]}, {"W": [[5, 2], [1, 4]]}, {"W": [[9, 9], [1, 1]]}]),
}


@pytest.mark.parametrize("name", list(READ_VALUES))
def test_diff_at_reads_what_each_point_reads_alone(name: str) -> None:
    text, given_points = READ_VALUES[name]
    points = [point if isinstance(point, dict) else {"x": point} for point in given_points]
    for shortest in (False, True):
        found = list(gradcalc.parse_program(text).run_batch(points * 2, "diff", {"shortest": shortest}))
        for got, point in zip(found, points * 2):
            assert got.error is None, got.error
            _same_derivatives(got.result, gradcalc.parse_program(text).run(point).diff(shortest=shortest))
    texts = [got.result[0].text for got in found]
    if name == "a folded number":  # ∂(x/x + x)/∂x: 1, NaN at 0 and ∞
        assert texts[:4] == ["1", "nan", "1", "nan"]
    if name == "sum to one":
        assert texts[0] == texts[1] == texts[3] != texts[2]  # [1, 1, 0] sums to 2


def test_diff_at_is_read_once_for_a_path(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = _counting(monkeypatch, "_read_at")
    alone = _counting(monkeypatch, "_run_one")
    rng = np.random.default_rng(3)
    points = [{"t1": float(a), "t2": float(b)} for a, b in rng.normal(size=(60, 2))]
    found = list(gradcalc.parse_program(ARM).run_batch(points, "diff", {"wrt": ["t2"]}))
    assert (reads, alone) == ([0], [])  # one batched pass, one reading of the expression
    for point, result in zip(points, found):  # ∂L/∂t2 = 2(x - 1)·(-0.8 sin(t1 + t2)) + 2(y - 0.5)·0.8 cos(t1 + t2)
        t1, t2 = point["t1"], point["t2"]
        x, y = np.cos(t1) + 0.8 * np.cos(t1 + t2), np.sin(t1) + 0.8 * np.sin(t1 + t2)
        expected = 2 * (x - 1) * -0.8 * np.sin(t1 + t2) + 2 * (y - 0.5) * 0.8 * np.cos(t1 + t2)
        np.testing.assert_allclose(result.result[0].value, expected, rtol=1e-12, atol=1e-14)
    assert {result.result[0].text for result in found} == {found[0].result[0].text}


def test_diff_at_on_the_command_line_prints_each_point_s_document() -> None:
    text = "x = 1; if x > 0 { y = x^2 } else { y = sin(x) }; L = y * x"
    points = '{"x": 2}\n{"x": -1}\n{"x": [1, 2]}\n{"x": 0.5}\n{"q": 1}\n{"x": -3}\n'
    result = run_cli("diff", "-e", text, "--at", "-", "--json", input=points)
    assert result.exit_code == 2, result.stderr
    docs = _lines(result.stdout)
    for i, x in [(0, 2), (1, -1), (3, 0.5), (5, -3)]:
        alone = json.loads(run_cli("diff", "-e", text, "--set", f"x={x}", "--json").stdout)
        assert docs[i] == {"index": i, **alone}
    assert docs[0]["derivative"] == "3*x^2" and docs[0]["value"] == 12.0  # (x^2·x)' at 2
    assert docs[1]["derivative"] == "x*cos(x) + sin(x)"  # (sin(x)·x)'
    assert "not a single true/false" in docs[2]["error"]["message"]  # x a vector: the if's condition is too
    assert docs[4]["error"]["message"] == "point 4: the program has no leaf 'q'"
    for flags, shown in [([], "1/2*x"), (["--decimal"], "0.5*x")]:  # --decimal, as a run at one point takes it
        table = run_cli("diff", "-e", "x = 1; L = x^2/4", "--at", "-", *flags, input='{"x": 0.5}\n')
        assert table.stdout.split() == ["#", "x", "∂L/∂x", "0", "0.5", shown, "=", "0.25"], table.stdout


def test_diff_at_s_table_says_what_the_shared_parts_it_names_are() -> None:
    """Each point's expression names shared parts (t3, ...): the table is followed by their definitions, as diff
    writes them; one that only some points' expressions have says which (it printed none, t3 undefined)."""
    result = run_cli("diff", "samples/arm.eq", "--wrt", "t1", "--at", "samples/arm_points.jsonl")
    assert result.exit_code == 0, result.stderr
    assert "l2*t3*t6" in result.stdout
    assert "  where t3 = cos(t1 + t2)\n        t4 = 2*(l1*cos(t1) + l2*t3 - 1)\n        t5 = sin(t1 + t2)\n" \
           "        t6 = 2*l1*sin(t1) + 2*l2*t5 - 1\n" in result.stdout, result.stdout
    text = "x = 1; y = exp(x) if x > 0 else sin(x^2); L = y*sin(y) + y^2*cos(y)"
    result = run_cli("diff", "-e", text, "--at", "-", input='{"x": 1}\n{"x": -1}\n{"x": 2}\n')
    assert result.exit_code == 0, result.stderr
    # y' (3·cos(y)·y - y²·sin(y) + sin(y)), y = sin(x²) at #1 only: t1 and t2 = sin(t1)
    assert "t3" not in result.stdout
    assert result.stdout.endswith("\n\n  where t1 = sin(x^2)   (#1)\n        t2 = sin(t1)   (#1)\n"), result.stdout


def test_diff_at_s_shared_parts_have_one_name_across_its_columns() -> None:
    """Each derivative names its shared parts on its own (diff's ∂L/∂l2 has t3 = sin(t1 + t2), its ∂L/∂t1 has
    t3 = cos(t1 + t2)); the table lists them once under all its columns, so there one name is one part, and one
    part has one name: every column's expression, with the parts written in, still is diff's at one point."""
    import re

    result = run_cli("diff", "samples/arm.eq", "--at", "samples/arm_points.jsonl")
    assert result.exit_code == 0, result.stderr
    table, where = result.stdout.split("\n\n  where ")
    parts: dict[str, str] = {}
    for line in ("  where " + where).splitlines():
        name, body = line.split("where ")[-1].strip().split(" = ")
        assert name not in parts and body not in parts.values(), result.stdout  # one meaning, one name
        parts[name] = body

    def written_in(text: str) -> str:  # the parts written in place, innermost last
        while (found := re.search(r"\bt([3-9]|\d\d)\b", text)) is not None:
            text = text[:found.start()] + f"({parts[found[0]]})" + text[found.end():]
        return text

    alone = run_cli("diff", "samples/arm.eq", "--set", "t1=0", "--set", "t2=0", "--json")
    for derivative in json.loads(alone.stdout)["derivatives"]:
        own = written_in_own(derivative)
        row = next(line for line in table.splitlines() if line.startswith("0 "))
        cells = [re.split(r"\s{2,}", chunk.strip())[-1] for chunk in re.split(r" = [-0-9.e]+", row)]
        assert any(written_in(cell) == own for cell in cells), (own, row)  # (the row: #, t1, t2, then cells)


def written_in_own(derivative: dict) -> str:
    """diff --json's derivative with its own shared parts written in place, as the table test writes the table's."""
    import re

    text, parts = derivative["derivative"], derivative.get("where", {})
    while (found := re.search(r"\bt([3-9]|\d\d)\b", text)) is not None:
        text = text[:found.start()] + f"({parts[found[0]]})" + text[found.end():]
    return text


def test_hvp_and_diff_at_run_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """--device gpu over the fake device (tests/fakedevice.py): a NumPy call outside the backend would fail."""
    import sys

    import fakedevice

    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    text = "x = [1, 2]; w = 2; if w > 0 { y = sum(x * w)^2 } else { y = sum(exp(x)) }; L = y + x[0]^3"
    points = '{"w": 1, "x": [0.5, 1]}\n{"w": 3}\n{"w": -1}\n{"w": "q"}\n{"w": 2, "x": [1, 2]}\n'
    found = {}
    for command in (["hvp", "--wrt", "x", "--vector", "[1, -1]"], ["diff", "--wrt", "w,x"]):
        cpu = run_cli(*command, "-e", text, "--at", "-", "--json", input=points)
        gpu = run_cli(*command, "-e", text, "--at", "-", "--json", "--device", "gpu", input=points)
        assert (gpu.exit_code, gpu.stdout) == (cpu.exit_code, cpu.stdout), gpu.stderr
        assert gpu.exit_code == 2 and "error" in _lines(gpu.stdout)[3]
        found[command[0]] = _lines(gpu.stdout)[1]
    # w = 3, x = [1, 2]: L = (3·sum(x))² + x0³; H = 18·ones + diag(6·x0, 0), times [1, -1]: [6, 0]; ∂L/∂w = 2w·sum(x)²
    assert found["hvp"]["hvp"] == [6.0, 0.0] and found["diff"]["derivatives"][0]["value"] == 54.0
