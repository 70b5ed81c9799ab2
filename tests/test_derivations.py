"""Derivations checked line by line (#23 item 2): a claim and its working, lines that start with `=`.

Each line is judged against the line before as an identity; the first that breaks is named, with the rule it
misapplies where one fits; the last line is the answer, judged as a claim of one line is. Every expected value
below is worked by hand: at x = 0.7, for y = x²·sin x, dy/dx = 2x·sin x + x²·cos x = 0.901905 + 0.374773.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import (
    EXIT_BAD_INPUT,
    EXIT_OK,
    EXIT_WRONG,
    SAMPLES,
    assert_no_traceback,
    examples,
    json_error,
    located_error,
    run_cli,
    strict_json,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gradcalc.errors import Source
from gradcalc.language import syntax as S
from gradcalc.program.api import Program
from gradcalc.program.notation.reading import answers, parse_claims
from gradcalc.tools.homework.check import Judge, Verdict, parse_claim_option

PRODUCT = "x = 0.7; y = x^2*sin(x)"  # dy/dx = 2x sin x + x² cos x
CHAIN = "x = 0.7; y = sin(x^2)"  # dy/dx = 2x cos(x²)
POWER = "x = 0.7; y = x^3"  # dy/dx = 3x²
SUM = "x = 0.7; y = x^3 + sin(x)"  # dy/dx = 3x² + cos x
QUOTIENT = "x = 0.7; y = x^2/(x + 1)"  # dy/dx = 2x/(x + 1) - x²/(x + 1)²
STEPS = "x = 0.7; u = x^2; y = sin(u)"  # dy/dx = cos(u)·2x, through an intermediate

# Four lines, each equal to the one before: rewritings of 2x sin x + x² cos x.
RIGHT = ["2x sin(x) + x^2 cos(x)", "x (2 sin(x) + x cos(x))", "x^2 cos(x) + sin(x) 2x", "2 x sin x + x x cos x"]
WRONG = "2x sin(x)"  # the product rule's x² cos x dropped


def judged(program: str, claim: str) -> Verdict:
    """The one verdict of a --claim (several lines joined by new lines), against the program."""
    run = Program(program).run({}, keep_values=True)
    (verdict,) = Judge(run).report("test", parse_claim_option(claim)).verdicts
    return verdict


def derivation(lines: list[str]) -> str:
    return "dy/dx = " + "\n      = ".join(lines)


# --- reading -----------------------------------------------------------------------------------------

def test_a_claims_lines_are_kept_with_their_places() -> None:
    (claim,) = parse_claims("dy/dx = 2x sin(x) + x^2 cos(x)\n      = x (2 sin(x) + x cos(x))\n= 3")
    assert [type(line).__name__ for line in claim.working] == ["Binary", "Binary", "Number"]
    assert claim.claimed is claim.working[-1]  # the last line is what is claimed
    assert isinstance(claim.claimed, S.Number) and claim.claimed.pos == (3, 3, 1)
    assert claim.working[1].pos.line == 2


def test_a_claim_of_one_line_has_no_working() -> None:
    (claim,) = parse_claims("dy/dx = 2x sin(x) + x^2 cos(x)")
    assert claim.working == []


def test_a_derivation_on_one_line_and_several_claims() -> None:
    first, second = parse_claims("dy/dx = 2x = 2*x; dL/dw = 3\n= 4")
    assert len(first.working) == 2 and first.claimed.pos == (1, 15, 1)  # a product is placed at its operator
    assert (second.of, second.wrt, len(second.working)) == ("L", "w", 2)


def test_an_answers_file_that_falls_back_line_by_line_keeps_a_derivation_whole() -> None:
    """One bad claim elsewhere makes the file read line by line: a derivation's = lines stay with their claim."""
    text = "dy/dx = 2x\n= 2*x\ndL/dw = )\n"
    found = answers(text, Source(text, "hw.txt"))
    assert [type(item).__name__ for item in found] == ["Claim", "Unreadable"]
    assert len(found[0].working) == 2  # type: ignore[union-attr]


# --- the line that breaks -----------------------------------------------------------------------------

def test_a_derivation_whose_lines_all_follow() -> None:
    verdict = judged(PRODUCT, derivation(RIGHT))
    assert verdict.status == "right"
    working = verdict.working
    assert working is not None
    assert (working.lines, working.follow, working.broken, working.rule) == (4, 4, None, None)
    assert [step.status for step in working.steps] == ["first", "follows", "follows", "follows"]
    assert all(step.right for step in working.steps)
    assert working.text() == "lines 1-4 follow"


@pytest.mark.parametrize("position", [2, 3, 4])
def test_one_broken_line_is_named_at_each_position(position: int) -> None:
    lines = [*RIGHT[:position - 1], WRONG, *RIGHT[position:]]
    verdict = judged(PRODUCT, derivation(lines))
    working = verdict.working
    assert working is not None
    assert (working.broken, working.follow) == (position, position - 1)
    assert working.steps[position - 1].status == "broken"
    assert working.steps[position - 2].right and not working.steps[position - 1].right
    assert working.rule == "product_rule"
    assert working.reason == "the product rule drops the term x^2*cos(x)"
    assert f"line {position} (--claim:{position}) does not follow from line {position - 1}" in working.text()
    # the final answer is judged as a claim of one line is: wrong only where the last line is the broken one
    assert verdict.status == ("wrong" if position == 4 else "right")


def test_a_wrong_first_line_breaks_at_the_second() -> None:
    """Line 1 is not the derivative; the right line 2 does not follow from it, and line 1 is marked wrong."""
    working = judged(PRODUCT, derivation([WRONG, *RIGHT[1:]])).working
    assert working is not None
    assert (working.broken, working.follow) == (2, 1)
    assert working.steps[0].right is False and working.steps[1].right is True


def test_a_broken_line_with_a_right_final_answer_keeps_the_answers_verdict() -> None:
    """Losing no points for a broken step: the answer is judged alone, and the break is reported beside it."""
    verdict = judged(PRODUCT, derivation([RIGHT[0], WRONG, RIGHT[2]]))
    alone = judged(PRODUCT, f"dy/dx = {RIGHT[2]}")
    assert (verdict.status, verdict.note, verdict.got) == (alone.status, alone.note, alone.got) == \
        ("right", "holds at the program's values and at 4 nearby points", pytest.approx(1.276677434))
    assert verdict.working is not None and verdict.working.broken == 2


def test_a_wrong_final_answer_keeps_its_diagnosis() -> None:
    """The last line's verdict and diagnosis are those of the same claim written on one line."""
    verdict = judged(SUM, "dy/dx = 3x^2 + cos(x)\n= 3x^2 - cos(x)\n= -(3x^2 + cos(x))")
    alone = judged(SUM, "dy/dx = -(3x^2 + cos(x))")
    assert (verdict.status, verdict.diagnosis_code, verdict.diagnosis) == \
        (alone.status, alone.diagnosis_code, alone.diagnosis) == ("wrong", "sign", "sign error: the claim is the "
                                                                   "negative of ∂y/∂x")


# Each: the key, the derivation, the rule's code, and its reason (written by hand).
RULES = [
    (PRODUCT, "x^2 cos(x) + 2x sin(x) = 2x sin(x)", "product_rule", "the product rule drops the term x^2*cos(x)"),
    (CHAIN, "cos(x^2) 2x = cos(x^2)", "chain_rule", "the chain rule's inner derivative 2*x is missing"),
    (STEPS, "cos(u) 2x = cos(u)", "chain_rule", "the chain rule's inner derivative 2*x is missing"),
    (CHAIN, "2x cos(x^2) = -2x cos(x^2)", "sign", "a sign error: line 2 is the negative of line 1"),
    (POWER, "3x^2 = 3x^3", "power_rule", "a wrong power: line 2 is x × line 1"),
    (POWER, "3x^2 = 3x", "power_rule", "a wrong power: line 2 is line 1 divided by x"),
    (POWER, "3x^2 = x^2", "dropped_factor", "line 2 drops the factor 3"),
    (SUM, "3x^2 + cos(x) = 3x^2", "sum_rule", "the sum rule drops the term cos(x)"),
    (QUOTIENT, "2x/(x + 1) - x^2/(x + 1)^2 = 2x/(x + 1)", "quotient_rule",
     "the quotient rule drops the term -x^2/(x + 1)^2"),
    (PRODUCT, "2x sin(x) + x^2 cos(x) = 2(2x sin(x) + x^2 cos(x))", "factor", "a factor off: line 2 is 2 × line 1"),
]


@pytest.mark.parametrize(("program", "lines", "rule", "reason"), RULES, ids=[r[2] + ":" + r[1] for r in RULES])
def test_the_rule_misapplied_is_named(program: str, lines: str, rule: str, reason: str) -> None:
    working = judged(program, "dy/dx = " + lines).working
    assert working is not None
    assert (working.broken, working.rule, working.reason) == (2, rule, reason)


def test_a_break_no_rule_explains_is_named_without_one() -> None:
    working = judged(PRODUCT, "dy/dx = 2x sin(x) + x^2 cos(x) = cos(x) + 1").working
    assert working is not None
    assert (working.broken, working.rule, working.reason) == (2, None, "")
    assert working.text() == "line 2 (--claim:1) does not follow from line 1"


def test_a_number_follows_to_the_digits_written() -> None:
    """x cos x + sin x at 0.7 is 1.17961: 1.18 follows (rounded), 1.19 does not; and back to an expression."""
    assert judged("x = 0.7; y = sin(x)*x", "dy/dx = x cos(x) + sin(x) = 1.18").working.broken is None  # type: ignore[union-attr]
    assert judged("x = 0.7; y = sin(x)*x", "dy/dx = x cos(x) + sin(x) = 1.19").working.broken == 2  # type: ignore[union-attr]
    assert judged("x = 0.7; y = sin(x)*x", "dy/dx = 1.18 = x cos(x) + sin(x)").working.broken is None  # type: ignore[union-attr]


def test_a_line_that_is_right_here_only_does_not_follow() -> None:
    """2x sin x + x² cos x and 1.276677 x/0.7 agree at x = 0.7 only: the lines are compared nearby too."""
    working = judged(PRODUCT, "dy/dx = 2x sin(x) + x^2 cos(x) = 1.2766774339021667 x/0.7").working
    assert working is not None and working.broken == 2


def test_a_line_naming_an_unknown_variable_cannot_be_judged() -> None:
    working = judged(PRODUCT, "dy/dx = 2x sin(x) + x^2 cos(x) = 2q\n= 2x sin(x) + x^2 cos(x)").working
    assert working is not None
    assert (working.broken, working.rule, working.steps[1].status) == (2, "invalid", "invalid")
    assert "'q'" in working.reason and working.text().startswith("line 2 (--claim:1) cannot be judged")


# 3,000 factors: a chain, which a program runs as a loop (y = x*x*...*x), so a derivation's line no deeper.
LONG_PRODUCT = "3*x*x" + "*1" * 2_998  # 3x² at every x


@pytest.mark.parametrize("lines", [["3x^2", LONG_PRODUCT], [LONG_PRODUCT, "3x^2"], ["3x^2", LONG_PRODUCT, "3 x x"]],
                         ids=["last", "first", "between"])
def test_a_line_of_3000_factors_is_judged(tmp_path: Path, lines: list[str]) -> None:
    """It said "nests too deeply" at the check line, whichever line was long."""
    model = tmp_path / "hw.eq"
    model.write_text(f"x = 0.7\ny = x^3\ncheck {derivation(lines)}\n")
    result = run_cli("check", model, "--json")
    assert result.exit_code == EXIT_OK, result.output[:2000]
    (found,) = strict_json(result.stdout)["results"]
    assert found["status"] == "right" and found["got"] == pytest.approx(3 * 0.7**2)
    assert (found["working"]["follow"], found["working"]["broken"]) == (len(lines), None)
    assert all(step["right"] for step in found["working"]["steps"])


# 3,000 divisions, which a claim's reading still walks a level a division: deeper than --max-depth 200 allows.
DEEP = "3x^2" + "/1" * 3_000


def test_a_line_too_deep_to_judge_is_named_with_the_limit(tmp_path: Path) -> None:
    """The line that is too deep is the one placed, with --max-depth, which judges it when raised."""
    model = tmp_path / "hw.eq"
    model.write_text(f"x = 0.7\ny = x^3\ncheck dy/dx = 3x^2\n      = {DEEP}\n")
    result = run_cli("check", model)
    assert result.exit_code == EXIT_WRONG, result.output[:2000]  # invalid, as a claim naming no variable is
    assert_no_traceback(result)
    error = result.stderr.splitlines()
    assert error[0] == f"error: {model}:4:9: this line nests too deeply to judge at --max-depth 200", error[0]
    assert error[-1] == "  hint: write it with fewer nested parts, or raise the limit with --max-depth"

    between = tmp_path / "between.eq"
    between.write_text(f"x = 0.7\ny = x^3\ncheck dy/dx = 3x^2\n      = {DEEP}\n      = 3x^2\n")
    (found,) = strict_json(run_cli("check", between, "--json").stdout)["results"]
    assert found["status"] == "right"  # the answer, judged alone
    assert (found["working"]["broken"], found["working"]["rule"]) == (2, "invalid")
    assert found["working"]["reason"] == "this line nests too deeply to judge at --max-depth 200"

    # In a child process: a raised limit stays raised for the rest of the process (Python's recursion limit).
    raised = subprocess.run([sys.executable, "-m", "gradcalc", "check", str(model), "--max-depth", "1000", "--json"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert raised.returncode == EXIT_OK, raised.stderr[-2000:]
    assert strict_json(raised.stdout)["results"][0]["working"]["follow"] == 2


# --- written as answers are: LaTeX, notebooks, check statements ----------------------------------------

def test_latex_aligned_keeps_its_lines() -> None:
    latex = (r"\begin{aligned} \frac{dy}{dx} &= 2x \sin(x) + x^{2} \cos(x) \\ &= x(2 \sin(x) + x \cos(x)) \\"
             r" &= 2x \sin(x) \end{aligned}")
    verdict = judged(PRODUCT, latex)
    working = verdict.working
    assert working is not None
    assert (working.lines, working.broken, working.rule) == (3, 3, "product_rule")
    # each line's text and column as written in the LaTeX
    assert [step.text for step in working.steps] == [r"2x \sin(x) + x^{2} \cos(x)", r"x(2 \sin(x) + x \cos(x))",
                                                      r"2x \sin(x)"]
    assert [step.column for step in working.steps] == [latex.index("2x") + 1, latex.index("x(2") + 1,
                                                        latex.rindex("2x") + 1] and working.steps[0].column == 34
    assert verdict.status == "wrong"


def test_a_notebooks_cells_keep_their_derivations(tmp_path: Path) -> None:
    notebook = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": "check dy/dx = cos(x^2) 2x\n      = cos(x^2)"},
        {"cell_type": "markdown", "metadata": {}, "source": ["Working:\n", "\n", "dy/dx = 2x cos(x^2)\n",
                                                             "= -2x cos(x^2)\n"]},
        {"cell_type": "markdown", "metadata": {}, "source": "$$\\begin{aligned} \\frac{dy}{dx} &= \\cos(x^2) "
                                                            "\\cdot 2x \\\\ &= 2x \\cos(x^2) \\end{aligned}$$"}]}
    path = tmp_path / "hw.ipynb"
    path.write_text(json.dumps(notebook))
    doc = strict_json(run_cli("check", "-e", CHAIN, path, "--json").stdout)
    worked = [(r["line"], r["working"]["broken"], r["working"]["rule"]) for r in doc["results"]]
    # cell 1's check line is line 2 of the notebook as text; cell 2's claim line 7; cell 3's block line 11
    assert worked == [(2, 2, "chain_rule"), (7, 2, "sign"), (11, None, None)]
    assert [step["at"]["line"] for step in doc["results"][0]["working"]["steps"]] == [2, 3]


def test_a_check_statement_carries_its_working(tmp_path: Path) -> None:
    model = tmp_path / "hw.eq"
    model.write_text("x = 0.7\ny = x^2*sin(x)\ncheck dy/dx = x^2 cos(x) + 2x sin(x)\n"
                     "      = 2x sin(x) + x^2 cos(x)\n      = 2x sin(x)\nz = 1\n")
    result = run_cli("check", model)
    assert result.exit_code == EXIT_WRONG
    assert (f"  working: lines 1-2 follow; line 3 ({model}:5) does not follow from line 2: the product rule drops "
            "the term x^2*cos(x)") in result.stdout


def test_a_models_check_lines_keep_primes_and_latex_in_their_working(tmp_path: Path) -> None:
    """In a submission, a check line's = lines are read as it is: σ'(z) is a prime; a LaTeX one stays LaTeX.
    y = σ(z)², so dy/dz = 2σ(z)σ'(z): σ'(z) is the inner derivative the chain rule multiplies by."""
    key = tmp_path / "key.eq"
    key.write_text("z = 0.5\ny = sigmoid(z)^2\n")
    model = tmp_path / "hw.eq"
    model.write_text("z = 0.5\ny = sigmoid(z)^2\ncheck dy/dz = 2σ(z)σ'(z)\n   = 2σ(z) σ'(z)\n"
                     "check \\frac{dy}{dz} = 2\\sigma(z)\\sigma'(z)\n   = 2 \\sigma(z)\n")
    doc = strict_json(run_cli("check", key, model, "--json").stdout)
    first, second = doc["results"]
    assert (first["line"], first["status"], first["working"]["broken"]) == (3, "right", None)
    assert (second["line"], second["working"]["broken"], second["working"]["rule"]) == (5, 2, "chain_rule")
    assert second["working"]["reason"] == "the chain rule's inner derivative \\sigma'(z) is missing"
    assert second["working"]["steps"][1]["at"] == {"line": 6, "column": 6}


def test_text_and_json_of_a_right_answer_with_working() -> None:
    result = run_cli("check", "-e", CHAIN, "--claim", "dy/dx = cos(x^2) 2x = 2x cos(x^2)")
    assert result.exit_code == EXIT_OK
    assert "\n✓ dy/dx = cos(x^2) 2x = 2x cos(x^2)\n  working: lines 1-2 follow\n" in result.stdout
    doc = strict_json(run_cli("check", "-e", CHAIN, "--claim", "dy/dx = cos(x^2) 2x\n= 2x cos(x)", "--json").stdout)
    (result_doc,) = doc["results"]
    assert result_doc["claim"] == "dy/dx = cos(x^2) 2x = 2x cos(x)"
    working = result_doc["working"]
    assert {k: working[k] for k in ("lines", "follow", "broken", "rule", "reason")} == \
        {"lines": 2, "follow": 1, "broken": 2, "rule": None, "reason": None}
    assert working["steps"] == [
        {"line": 1, "text": "cos(x^2) 2x", "at": {"line": 1, "column": 9}, "status": "first", "right": True},
        {"line": 2, "text": "2x cos(x)", "at": {"line": 2, "column": 3}, "status": "broken", "right": False}]


# --- grading -------------------------------------------------------------------------------------------

@pytest.fixture
def graded(tmp_path: Path) -> Path:
    (tmp_path / "key.eq").write_text("x = 0.7\ny = x^2*sin(x)\ncheck dy/dx points 2\n")
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "ann.txt").write_text("dy/dx = 2x sin(x) + x^2 cos(x)\n= x (2 sin(x) + x cos(x))\n"
                                  "= x^2 cos(x) + 2x sin(x)\n")  # 3 of 3 follow
    (subs / "ben.txt").write_text("dy/dx = 2x sin(x) + x^2 cos(x)\n= x (2 sin(x) + x cos(x))\n= 2x sin(x)\n"
                                  "= x^2 cos(x) + 2x sin(x)\n")  # 2 of 4 follow (line 3 breaks); answer right
    (subs / "cy.txt").write_text("dy/dx = 2x sin(x) + x^2 cos(x)\n")  # no working
    return tmp_path


def test_grading_counts_how_far_each_derivation_got(graded: Path) -> None:
    doc = strict_json(run_cli("check", graded / "key.eq", graded / "subs", "--json").stdout)
    assert [(s["submission"], s.get("working"), s["score"]) for s in doc["submissions"]] == [
        ("ann.txt", {"follow": 3, "lines": 3}, 2), ("ben.txt", {"follow": 2, "lines": 4}, 2), ("cy.txt", None, 2)]
    table = run_cli("check", graded / "key.eq", graded / "subs").stdout
    assert "submission  score  working  result" in table
    assert "ben.txt       2/2      2/4  full marks" in table and "cy.txt        2/2        –  full marks" in table


def test_the_csv_gains_a_working_column_only_where_derivations_were_handed_in(graded: Path) -> None:
    csv = run_cli("check", graded / "key.eq", graded / "subs", "--format", "csv").stdout
    assert csv == "student,dy/dx,total,working\nann,2,2,3\nben,2,2,2\ncy,2,2,\n"
    (graded / "subs" / "ann.txt").write_text("dy/dx = 2x sin(x) + x^2 cos(x)\n")
    (graded / "subs" / "ben.txt").unlink()
    csv = run_cli("check", graded / "key.eq", graded / "subs", "--format", "csv").stdout
    assert csv == "student,dy/dx,total\nann,2,2\ncy,2,2\n"  # the shape as before


def test_reveal_verdict_names_the_rule_without_the_term(graded: Path) -> None:
    (graded / "subs" / "ben.txt").write_text("dy/dx = 2x sin(x) + x^2 cos(x)\n= 2x sin(x)\n")
    shown = run_cli("check", graded / "key.eq", graded / "subs" / "ben.txt", "--reveal", "verdict").stdout
    assert "does not follow from line 1: the product rule drops a term" in shown
    assert "x^2*cos(x)" not in shown
    everything = run_cli("check", graded / "key.eq", graded / "subs" / "ben.txt").stdout
    assert "the product rule drops the term x^2*cos(x)" in everything
    nothing = strict_json(run_cli("check", graded / "key.eq", graded / "subs" / "ben.txt", "--reveal", "none",
                                  "--json").stdout)["results"][0]["working"]
    assert (nothing["broken"], nothing["rule"], nothing["reason"]) == (2, None, None)
    assert nothing["text"].endswith("does not follow from line 1")


def test_feedback_says_how_far_the_working_got(graded: Path, tmp_path: Path) -> None:
    run_cli("check", graded / "key.eq", graded / "subs", "--feedback", tmp_path / "fb")
    text = (tmp_path / "fb" / "ben.md").read_text()
    assert f"- working: lines 1-2 follow; line 3 ({graded / 'subs' / 'ben.txt'}:3) does not follow from line 2: " \
           "the product rule drops the term x^2*cos(x)" in text


# --- bad input ------------------------------------------------------------------------------------------

def test_an_equals_line_with_nothing_before_it_in_claim_exits_2() -> None:
    result = run_cli("check", "-e", CHAIN, "--claim", "dy/dx = 2x cos(x^2); = 2x cos(x^2)")
    error = located_error(result, file="--claim", line=1, column=22)
    assert "has no claim before it" in error.message and "new lines" in error.hint
    body = json_error(run_cli("check", "-e", CHAIN, "--claim", "= 2x", "--json"))
    assert (body["type"], body["line"], body["column"]) == ("SyntaxError", 1, 1)


def test_an_empty_equals_line_in_a_program_exits_2(tmp_path: Path) -> None:
    model = tmp_path / "m.eq"
    model.write_text("x = 0.7\ny = sin(x^2)\ncheck dy/dx = 2x cos(x^2)\n   =\nz = 1\n")
    error = located_error(run_cli("check", model), file=str(model), line=4, column=4, code="   =")
    assert error.message.startswith("an empty '=' line")


def test_in_an_answers_file_a_stray_equals_line_costs_that_claim(tmp_path: Path) -> None:
    """A student's file: the line is invalid (exit 1, its place and caret on stderr), the others are judged."""
    answers_file = tmp_path / "a.txt"
    answers_file.write_text("= 2x cos(x^2)\ndy/dx = 2x cos(x^2)\n= 2 cos(x^2) x\n")
    result = run_cli("check", "-e", CHAIN, answers_file)
    assert result.exit_code == EXIT_WRONG
    assert_no_traceback(result)
    assert result.stderr.startswith(f"error: {answers_file}:1:1: a line that starts with '=' has no claim")
    assert "1 of 2 claims right" in result.stdout


# --- fuzz ----------------------------------------------------------------------------------------------

PIECES = ["dy/dx", " = ", "=", "≈", "\n", "\n= ", ";", ",", "2x", "sin(x)", "x^2", " ", "(", ")", "+", "-", "0.5",
          "&=", "\\\\", "\\frac{dy}{dx}", "\\begin{aligned}", "\\end{aligned}", "check ", "#", "q", "cos x", "1/2x"]


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_derivations_never_give_a_traceback(pieces: list[str]) -> None:
    text = "".join(pieces)
    result = run_cli("check", "-e", PRODUCT, "--claim", text)
    assert_no_traceback(result)
    assert result.exit_code in (EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT), result.stderr


@given(st.lists(st.sampled_from(PIECES), min_size=1, max_size=14))
@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_fuzzed_answers_files_never_give_a_traceback(pieces: list[str]) -> None:
    """Read as an answers file and judged in-process: a GradcalcError is a verdict, never an exception."""
    text = "".join(pieces)
    source = Source(text, "a.txt")
    report = Judge(_RUN).report("fuzz", (answers(text, source), source))
    assert all(v.status in ("right", "wrong", "invalid") for v in report.verdicts)


_RUN = Program(PRODUCT).run({}, keep_values=True)


@pytest.mark.slow
def test_the_working_note_wraps_under_its_text_at_80_columns() -> None:
    """In a real terminal the note's next line starts under its text, not at the margin."""
    from terminal import run_in_terminal

    shown = run_in_terminal("check", str(SAMPLES / "derivation.eq"))
    lines = shown.screen.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("  working: "))
    assert all(len(line) <= 80 for line in lines)
    assert lines[start + 1].startswith(" " * len("  working: ")) and lines[start + 1].strip(), lines[start:start + 2]
    assert "x^2*cos(x)" in " ".join(line.strip() for line in lines[start:start + 3])
