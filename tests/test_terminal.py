"""On a real terminal (a pseudo-terminal of 60 to 200 columns), no table cuts a number, a claim, a verdict or a
score: what does not fit wraps, folds or moves below the table (#19)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from helpers import json_ok, run_cli, strict_json
from terminal import run_in_terminal

from gradcalc.engine import backend as B

# 80 columns, the terminal the issue was found on, in every run; the other widths in the full run (-m slow).
WIDTHS = [pytest.param(60, marks=pytest.mark.slow), 80, pytest.param(120, marks=pytest.mark.slow),
          pytest.param(200, marks=pytest.mark.slow)]

# A two-layer network: its matrices' rows are wider than 80 columns once value and gradient sit side by side.
TWO_LAYER = ("W1 = randn(4, 6); x = randn(6); b1 = zeros(4); h = tanh(W1 @ x + b1); "
             "W2 = randn(3, 4); b2 = zeros(3); y = W2 @ h + b2; L = sum(y^2) / 2")


def numbers(value: Any) -> list[str]:
    """Every entry of a JSON value as the tables write it."""
    if isinstance(value, list):
        return [text for item in value for text in numbers(item)]
    return [B.format_number(float(value))]


def assert_whole(screen: str, texts: list[str], width: int) -> None:
    """Each text is on the screen whole (a number not glued to more digits), no line is wider than the
    terminal, and nothing was cut with '…'."""
    assert "…" not in screen, screen
    assert max(map(len, screen.splitlines())) <= width, screen
    for text in texts:
        pattern = (r"(?<![\d.])" if text[0].isdigit() else r"(?<![\w.-])") + re.escape(text) + r"(?![\d])"
        assert re.search(pattern, screen), f"{text!r} is not on the {width}-column screen whole:\n{screen}"


@pytest.mark.parametrize("width", WIDTHS)
def test_grad_of_a_two_layer_network_keeps_every_number_whole(width: int) -> None:
    """At 80 columns the matrices' entries were cut mid-digit ('-0.…') and the variable column vanished."""
    shown = run_in_terminal("grad", "-e", TWO_LAYER, columns=width)
    assert shown.status == 0, shown.stderr
    doc = json_ok("grad", "-e", TWO_LAYER)
    values = json_ok("eval", "-e", TWO_LAYER)["values"]
    texts = [text for name, g in doc["grad"].items() for text in (*numbers(g), *numbers(values[name]))]
    assert_whole(shown.screen, texts + list(doc["grad"]), width)
    header = next(line for line in shown.screen.splitlines() if line.startswith("variable"))
    assert "shape" in header and "∂L/∂variable" in header
    if width <= 120:  # the matrices moved below the table (the table is 150 columns wide), each under its name
        assert "(below)" in shown.screen and "\n∂L/∂W1\n" in shown.screen and "\nW1\n" in shown.screen
    else:
        assert "(below)" not in shown.screen


@pytest.mark.parametrize("width", WIDTHS)
def test_eval_keeps_every_number_whole(width: int) -> None:
    shown = run_in_terminal("eval", "-e", TWO_LAYER, columns=width)
    values = json_ok("eval", "-e", TWO_LAYER)["values"]
    assert_whole(shown.screen, [t for v in values.values() for t in numbers(v)] + ["TanhBackward0"], width)


@pytest.mark.parametrize("width", WIDTHS)
def test_jacobian_and_hessian_fold_their_columns(width: int) -> None:
    """A labelled matrix wider than the terminal is folded into blocks of columns, each with the row labels."""
    jacobian = run_in_terminal("jacobian", "-e", TWO_LAYER, "--of", "y", "--wrt", "x", columns=width)
    doc = json_ok("jacobian", "-e", TWO_LAYER, "--of", "y", "--wrt", "x")
    assert_whole(jacobian.screen, numbers(doc["jacobian"]) + [f"x[{j}]" for j in range(6)], width)
    hessian = run_in_terminal("hessian", "-e", TWO_LAYER, "--wrt", "x", columns=width)
    doc = json_ok("hessian", "-e", TWO_LAYER, "--wrt", "x")
    assert_whole(hessian.screen, numbers(doc["hessian"]), width)
    rows = re.findall(r"^x\[0\] ", hessian.screen, re.MULTILINE)
    assert len(rows) == (1 if width >= 80 else 2), hessian.screen  # one row label per block of columns


@pytest.mark.parametrize("width", WIDTHS)
def test_gradcheck_keeps_errors_indices_and_verdicts_whole(width: int) -> None:
    shown = run_in_terminal("gradcheck", "-e", TWO_LAYER, columns=width)
    doc = json_ok("gradcheck", "-e", TWO_LAYER)
    texts = [f"{r['max_abs_error']:.2e}" for r in doc["results"]] + [f"{r['max_rel_error']:.2e}" for r in
                                                                      doc["results"]]
    assert_whole(shown.screen, texts, width)
    assert shown.screen.count("✓ pass") == len(doc["results"])


@pytest.mark.parametrize("width", WIDTHS)
def test_check_keeps_claims_verdicts_and_values_whole(width: int) -> None:
    shown = run_in_terminal("check", "samples/homework.eq", columns=width)
    assert shown.status == 1, shown.stderr
    claims = ["dL/dd = -1", "dL/db = -w3", "dL/dw1 = -w3*a", "dL/dw2 = -4*a", "dL/da = -w3*w1"]
    assert_whole(shown.screen, ["-0.5", "-1.5", "2.5", "-8"], width)
    table = shown.screen.split("\n\n")[0]
    for claim in claims:  # on one line of the table each
        assert claim in table, table
    assert table.count("✓ right") == 3 and table.count("✗ wrong") == 2, table


@pytest.mark.parametrize("width", WIDTHS)
def test_grading_keeps_names_and_scores_whole(width: int) -> None:
    shown = run_in_terminal("check", "samples/neuron.eq", "samples/submissions/", columns=width)
    doc = strict_json(run_cli("check", "samples/neuron.eq", "samples/submissions/", "--json").stdout)
    scores = [f"{s['right']}/{s['total']}" for s in doc["submissions"] if not s.get("error")]
    assert_whole(shown.screen, scores, width)
    for submission in doc["submissions"]:
        assert submission["submission"].split("/")[-1] in shown.screen, shown.screen


def test_a_derivation_wraps_its_claim_and_keeps_its_verdict_and_values_whole() -> None:
    shown = run_in_terminal("check", "samples/derivation.eq", columns=80)
    assert shown.status == 1, shown.stderr
    table = shown.screen.split("\n\n")[0]
    assert "✗ wrong" in table and "0.901905" in table and "1.27668" in table, table
    assert "…" not in table, table


@pytest.mark.parametrize("width", [80, pytest.param(120, marks=pytest.mark.slow)])
def test_points_with_errors_keep_every_number_and_every_error_whole(width: int) -> None:
    """At 80 columns a point's error took the width and the numbers' columns vanished ('…'); now the errors
    wrap beside the numbers, or follow the table, each under its point's index."""
    args = ("grad", "samples/arm.eq", "--at", "samples/arm_points_bad.jsonl")
    shown = run_in_terminal(*args, columns=width)
    assert shown.status == 2, shown.stderr
    docs = [json.loads(line) for line in run_cli(*args, "--json").stdout.splitlines()]
    texts = [*numbers(docs[0]["value"]), *(t for g in docs[0]["grad"].values() for t in numbers(g)), "0.5", "1.2"]
    assert_whole(shown.screen, texts, width)
    words = " ".join(shown.screen.split())  # each error's words in order, wherever its lines broke
    for doc in docs[1:]:
        error = doc["error"]
        assert " ".join(f"{error['file']}:{error['line']}:{error['column']}: {error['message']}".split()) in words


def test_a_point_s_values_moved_below_the_table_say_which_point_they_are() -> None:
    program = "w = [1.5, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]; L = sum(w^3)"
    points = "--at", "samples/arm_points.jsonl"  # any points: none gives w
    shown = run_in_terminal("grad", "-e", program, "--wrt", "w", "--ignore-extra", *points, columns=80)
    assert shown.status == 0, shown.stderr
    for index in range(3):  # [6.75, 12, 27, ...]: 3w², too wide beside w at 80 columns
        assert f"\n∂L/∂w  (#{index})\n  [6.75,   12," in shown.screen, shown.screen


def _agrees(text: str, value: float) -> bool:
    """A number as printed is the value to the precision printed (half a unit of its last digit)."""
    mantissa, _, exponent = text.lower().partition("e")
    decimals = len(mantissa.partition(".")[2])
    return abs(float(text) - value) <= 0.5 * 10.0 ** (int(exponent or 0) - decimals) * (1 + 1e-9)


@pytest.mark.parametrize(("leaves", "width"), [pytest.param(8, 60, marks=pytest.mark.slow), (14, 80)])
def test_many_scalar_columns_fold_into_groups_each_with_the_point_index(leaves: int, width: int,
                                                                         tmp_path: Any) -> None:
    """Scalars only, so nothing can move below the table: at 60 columns 8 leaves' values and gradients were
    cut to '-0…' and '∂…'; now the columns fold into groups, each repeating #, every number whole."""
    names = [f"x{i}" for i in range(1, leaves + 1)]
    program = "; ".join(f"{name} = {i}.5" for i, name in enumerate(names)) + "; L = " + \
        " + ".join(f"{name}^2*sin({name})" for name in names)
    points = [{name: round(-2.71828 + 0.61803 * i - 0.3 * k, 5) for i, name in enumerate(names)} for k in range(3)]
    path = tmp_path / "points.jsonl"
    path.write_text("".join(json.dumps(point) + "\n" for point in points), encoding="utf-8")
    shown = run_in_terminal("grad", "-e", program, "--at", str(path), columns=width)
    assert shown.status == 0, shown.stderr
    docs = [strict_json(line) for line in run_cli("grad", "-e", program, "--at", str(path), "--json").stdout.split(
        "\n") if line]
    expected = {(str(k), name): value for k, point in enumerate(points) for name, value in point.items()}
    for k, doc in enumerate(docs):
        expected[(str(k), "L")] = doc["value"]
        expected.update({(str(k), f"∂L/∂{name}"): g for name, g in doc["grad"].items()})
    assert "…" not in shown.screen, shown.screen
    assert max(map(len, shown.screen.splitlines())) <= width, shown.screen
    found: dict[tuple[str, str], str] = {}
    groups = [group.splitlines() for group in shown.screen.strip("\n").split("\n\n")]
    assert len(groups) > 1, shown.screen  # folded: the table is far wider than the terminal
    for header, *rows in groups:
        titles = header.split()
        assert titles[0] == "#" and len(rows) == len(points), shown.screen
        for row in rows:
            index, *cells = row.split()
            assert len(cells) == len(titles) - 1, row  # every cell there, none empty or broken over two
            for title, text in zip(titles[1:], cells):
                assert (index, title) not in found, f"{title} of #{index} shown twice:\n{shown.screen}"
                found[(index, title)] = text
    assert set(found) == set(expected), shown.screen
    for key, text in found.items():
        assert _agrees(text, expected[key]), f"#{key[0]} {key[1]}: {text} is not {expected[key]!r}"


@pytest.mark.parametrize("width", [pytest.param(60, marks=pytest.mark.slow), 80])
def test_a_column_wider_than_the_terminal_wraps_between_words(width: int) -> None:
    """diff --at: a derivative's expression and value, wider than the terminal alone, was cut ('= 1.…'); now
    its column is a group of its own whose text wraps between words, each value whole."""
    args = ("diff", "samples/arm.eq", "--at", "samples/arm_points.jsonl")
    shown = run_in_terminal(*args, columns=width)
    assert shown.status == 0, shown.stderr
    docs = [strict_json(line) for line in run_cli(*args, "--json").stdout.splitlines()]
    values = [B.format_number(float(d["value"])) for doc in docs for d in doc["derivatives"]]
    assert_whole(shown.screen, values, width)
    assert all(f"= {value}" in " ".join(shown.screen.split()) for value in values), shown.screen
