"""Errors under --at: a point's own error names that point (never an option it did not use), and an error of
the command itself is reported once, before any point runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import assert_bad_input, located_error, run_cli

import gradcalc

PROGRAM = "x = 1; y = 2; L = x*y"


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def _points(tmp_path: Path, text: str) -> str:
    path = tmp_path / "points.jsonl"
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_a_point_s_bad_value_is_named_by_its_point_and_key_in_the_points_file(tmp_path: Path) -> None:
    points = _points(tmp_path, '{"x": 1}\n{"x": "abc"}\n{"x": "1 +"}\n{"y": 3}\n')
    result = run_cli("grad", "-e", PROGRAM, "--at", points, "--json")
    assert result.exit_code == 2, result.stderr
    docs = _lines(result.stdout)
    assert [doc.get("grad") for doc in docs] == [{"x": 2.0, "y": 1.0}, None, None, {"x": 3.0, "y": 1.0}]
    unknown, cut = docs[1]["error"], docs[2]["error"]
    assert unknown["message"] == "point 1, key 'x': the value uses the variable 'abc'"
    # {"x": "abc"}: the a of abc is column 8 of line 2; {"x": "1 +"}: the expression ends at column 11 of line 3
    assert (unknown["file"], unknown["line"], unknown["column"]) == (points, 2, 8)
    assert cut["message"] == "point 2, key 'x': the program ends in the middle of a statement"
    assert (cut["file"], cut["line"], cut["column"]) == (points, 3, 11)
    assert "--set" not in result.stdout

    table = run_cli("grad", "-e", PROGRAM, "--at", points)
    assert table.exit_code == 2 and "--set" not in table.stdout
    rows = table.stdout.splitlines()
    assert f"{points}:2:8: point 1, key 'x': the value uses the variable 'abc'" in rows[2], table.stdout
    assert f"{points}:3:11: point 2, key 'x': the program ends in the middle" in rows[3], table.stdout


def test_a_value_written_with_escapes_is_placed_at_its_key(tmp_path: Path) -> None:
    """Where the value's text is not on the line as it is read (a JSON escape), the error points at the key."""
    points = _points(tmp_path, '{"y": 1, "x": "1 \\u002b"}\n')
    doc = _lines(run_cli("grad", "-e", PROGRAM, "--at", points, "--json").stdout)[0]["error"]
    assert doc["message"] == "point 0, key 'x': the program ends in the middle of a statement"
    assert (doc["file"], doc["line"], doc["column"]) == (points, 1, 10)


def test_run_batch_names_the_point_and_key() -> None:
    program = gradcalc.parse_program(PROGRAM.replace("; ", "\n"))
    first, second = program.run_batch([{"x": "2*pi"}, {"y": "q + 1"}], "grad")
    assert first.error is None and float(first.result.grads["y"]) == 2 * 3.141592653589793
    assert second.error is not None and second.error.message == "point 1, key 'y': the value uses the variable 'q'"


def test_set_keeps_its_own_label() -> None:
    error = located_error(run_cli("grad", "-e", PROGRAM, "--set", "x=abc"), line=1, column=1)
    assert error.file == "--set x" and error.message == "--set x: the value uses the variable 'abc'"
    error = located_error(run_cli("grad", "-e", PROGRAM, "--set", "x=abc", "--at", "-", input='{"y": 1}\n'))
    assert error.file == "--set x"  # every point's default, read before any point: --set's own error


# Each: a command's options that are wrong whatever a point gives (the program: x, y, the constant c, L).
COMMAND_ERRORS = {
    "--wrt unknown": ("grad", "--wrt", "z"),
    "--wrt near a name": ("grad", "--wrt", "xx"),
    "--of unknown": ("grad", "--of", "q"),
    "--wrt a constant": ("grad", "--wrt", "c"),
    "jacobian --wrt": ("jacobian", "--wrt", "x,zz"),
    "hessian --of": ("hessian", "--of", "LL"),
    "jvp --wrt": ("jvp", "--wrt", "q", "--tangent", "1"),
    "jvp --tangent": ("jvp", "--wrt", "x", "--tangent", "1 +"),
    "hvp --vector": ("hvp", "--wrt", "x", "--vector", "zz"),
    "grad --vector": ("grad", "--vector", "[1, [2]]"),
    "diff --keep": ("diff", "--wrt", "x", "--keep", "yy"),
    "diff --order": ("diff", "--wrt", "x,y,x", "--order", "2"),
}
CONSTANT_PROGRAM = "const c = 2\nx = 1\ny = 2\nL = c*x*y"


@pytest.mark.parametrize("command", COMMAND_ERRORS.values(), ids=list(COMMAND_ERRORS))
def test_an_option_wrong_at_every_point_is_reported_once_as_without_at(command: tuple[str, ...]) -> None:
    points = '{"x": 1}\n{"x": 2, "y": 3}\n'
    for json_flag in ((), ("--json",)):
        alone = run_cli(*command, "-e", CONSTANT_PROGRAM, *json_flag)
        batch = run_cli(*command, "-e", CONSTANT_PROGRAM, "--at", "-", *json_flag, input=points)
        assert_bad_input(alone)
        assert_bad_input(batch)  # exit 2, nothing on stdout: no point ran
        assert batch.stderr == alone.stderr


def test_a_name_some_points_do_not_assign_is_those_points_error() -> None:
    """A variable assigned in one branch exists at the points that take it: not an option error."""
    result = run_cli("grad", "-e", "x = 1; if x > 0 { y = x^2 } else { z = -x }", "--of", "y", "--at", "-",
                     "--json", input='{"x": 3}\n{"x": -1}\n')
    assert result.exit_code == 2
    docs = _lines(result.stdout)
    assert docs[0]["grad"] == {"x": 6.0}
    assert docs[1]["error"]["message"] == "the program has no variable 'y'"


def test_a_direction_named_by_a_variable_is_each_point_s() -> None:
    """--vector v names a variable, which a point may give, and a branch may leave unassigned."""
    result = run_cli("hvp", "-e", "x = 1; if x > 0 { v = 2 }; L = x^3", "--wrt", "x", "--vector", "v", "--at", "-",
                     "--json", input='{"x": 2, "v": 3}\n{"x": 1}\n{"x": -1}\n')
    assert result.exit_code == 2
    docs = _lines(result.stdout)
    assert [doc.get("hvp") for doc in docs] == [36.0, 12.0, None]  # 6x·v: 6·2·3, 6·1·2
    assert docs[2]["error"]["message"] == "--vector: the value uses the variable 'v'"


def test_run_batch_raises_an_argument_wrong_at_every_point_before_reading_any() -> None:
    read: list[int] = []

    def points() -> Iterator[dict[str, float]]:
        read.append(0)
        yield {"x": 1.0}

    program = gradcalc.parse_program("const c = 2\nx = 1\nL = c*x")
    with pytest.raises(gradcalc.GradcalcError, match="the program has no variable 'z'"):
        next(program.run_batch(points(), "grad", {"wrt": ["x", "z"]}))
    with pytest.raises(gradcalc.GradcalcError, match="unknown mode 'sideways'"):
        next(program.run_batch(points(), "jacobian", {"mode": "sideways"}))
    assert read == []
