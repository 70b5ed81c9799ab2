"""Grading a class with questions and points: scores, --reveal, gradebooks (CSV, Gradescope, feedback), the
class's mistakes and the exit rule, on a course folder written here (every expected number by hand)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, EXIT_WRONG, NEURON, run_cli, strict_json

# The toy network: ∂L/∂w1 = -w3·a = -1, ∂L/∂a = -(w3·w1 + w4·w2) = 2.5, ∂L/∂d = -1, L = 10 - (3 - 8) = 15.
KEY = """a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4
b = w1*a
c = w2*a
d = w3*b + w4*c
L = 10 - d
check dL/dw1 points 2
check dL/da points 2
check dL/dd
check L
"""
RIGHT = {"w1": "dL/dw1 = -w3*a", "a": "dL/da = -(w3*w1 + w4*w2)", "d": "dL/dd = -1", "L": "L = 15"}
MODEL = "a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\nb = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d\n"



def _answers(**replaced: str | None) -> str:
    lines = [replaced.get(key, text) for key, text in RIGHT.items()]
    return "\n".join(line for line in lines if line is not None) + "\n"


def course() -> dict[str, tuple[str, int]]:
    """40 submissions: 9 all right (3 with a claim not asked), 1 answering ∂L/∂w1 twice (the last right),
    8 with a sign error on ∂L/∂w1, 7 leaving out a path on ∂L/∂a, 6 answering neither ∂L/∂a nor L, 4 with
    ∂L/∂a unreadable, 3 model files all right, 2 model files that do not parse."""
    files: dict[str, tuple[str, int]] = {}
    for i in range(9):
        extra = "dL/dw2 = 7\n" if i < 3 else ""  # not asked: judged (wrong), never scored
        files[f"perfect{i}.txt"] = (_answers() + extra, 6)
    files["twice.txt"] = ("dL/dw1 = 1\n" + _answers(), 6)
    for i in range(8):
        files[f"sign{i}.txt"] = (_answers(w1="dL/dw1 = w3*a"), 4)
    for i in range(7):
        files[f"path{i}.txt"] = (_answers(a="dL/da = -w3*w1"), 4)
    for i in range(6):
        files[f"missing{i}.txt"] = (_answers(a=None, L=None), 3)
    for i in range(4):
        files[f"garbled{i}.txt"] = (_answers(a="dL/da = -(w3*w1 + w4*w2"), 4)
    for i in range(3):
        files[f"model{i}.eq"] = (MODEL + "".join(f"check {text}\n" for text in RIGHT.values()), 6)
    for i in range(2):
        files[f"broken{i}.eq"] = (MODEL + "L = 10 - d)\ncheck dL/dd = -1\n", 0)
    return files


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("course")
    (root / "key.eq").write_text(KEY, encoding="utf-8")
    subs = root / "subs"
    subs.mkdir()
    for name, (text, _) in course().items():
        (subs / name).write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def graded(folder: Path) -> dict:
    result = run_cli("check", folder / "key.eq", folder / "subs", "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    return strict_json(result.stdout)


def test_each_submission_scores_what_was_written_by_hand(graded: dict) -> None:
    expected = {name: score for name, (_, score) in course().items()}
    assert len(expected) == 40
    assert {s["submission"]: s["score"] for s in graded["submissions"]} == expected
    assert {s["max_score"] for s in graded["submissions"]} == {6}
    assert graded["totals"]["passed"] == 9 + 1 + 3 and graded["totals"]["not_judged"] == 2
    assert graded["totals"]["failed"] == 8 + 7 + 6 + 4
    assert graded["totals"]["mean_score"] == round((13 * 6 + 8 * 4 + 7 * 4 + 6 * 3 + 4 * 4) / 40, 4)


def test_questions_missing_invalid_twice_and_not_asked(graded: dict) -> None:
    by_name = {s["submission"]: s for s in graded["submissions"]}
    statuses = {q["question"]: (q["status"], q["points"]) for q in by_name["missing0.txt"]["questions"]}
    assert statuses == {"∂L/∂w1": ("right", 2), "∂L/∂a": ("missing", 0), "∂L/∂d": ("right", 1), "L": ("missing", 0)}
    garbled = {q["question"]: q["status"] for q in by_name["garbled0.txt"]["questions"]}
    assert garbled["∂L/∂a"] == "invalid"  # the unreadable line's left side says which question it answers
    twice = by_name["twice.txt"]["results"]
    assert [(r["claim"], r["status"], r["points"]) for r in twice[:2]] == [
        ("dL/dw1 = 1", "wrong", None), ("dL/dw1 = -w3*a", "right", 2)]  # the last answer counts
    extra = next(r for r in by_name["perfect0.txt"]["results"] if r["claim"] == "dL/dw2 = 7")
    assert extra["status"] == "wrong" and "question" not in extra and "points" not in extra
    assert by_name["perfect0.txt"]["passed"] is True  # full marks, the wrong claim not asked notwithstanding
    assert by_name["broken0.eq"]["score"] == 0 and by_name["broken0.eq"]["error"]["message"] == "unmatched ')'"


def test_the_class_report_counts_each_mistake(graded: dict) -> None:
    lines = [(m["count"], m["question"], m["kind"]) for m in graded["mistakes"]]
    assert lines == [(8, "∂L/∂w1", "sign"), (7, "∂L/∂a", "missing_path"), (6, "∂L/∂a", "missing"),
                     (6, "L", "missing"), (4, "∂L/∂a", "invalid")]
    assert {m["of"] for m in graded["mistakes"]} == {38}
    assert "L → d → c → a" in graded["mistakes"][1]["text"]
    tallies = {q["question"]: (q["right"], q["wrong"], q["invalid"], q["missing"], q["not_judged"])
               for q in graded["questions"]}
    assert tallies["∂L/∂a"] == (13 + 8, 7, 4, 6, 2)
    assert tallies["∂L/∂w1"] == (13 + 7 + 6 + 4, 8, 0, 0, 2)


def test_the_table_shows_scores_and_the_class_report(folder: Path) -> None:
    result = run_cli("check", folder / "key.eq", folder / "subs")
    assert result.exit_code == EXIT_WRONG
    rows = {line.split()[0]: line.split()[1] for line in result.stdout.splitlines() if line[:1].isalpha()}
    assert rows["sign0.txt"] == "4/6" and rows["broken1.eq"] == "0/6" and rows["perfect3.txt"] == "6/6"
    assert "40 submissions: 13 full marks, 25 with points lost, 2 not judged" in result.stdout
    assert "8 of 38  ∂L/∂w1    sign error: the claim is the negative of ∂L/∂w1" in result.stdout


def test_csv_gradebook_cells(folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "grades.csv"
    result = run_cli("check", folder / "key.eq", folder / "subs", "--format", "csv", "-o", out)
    assert result.exit_code == EXIT_WRONG
    assert "full marks" in result.stdout  # the table still on standard output
    rows = list(csv.reader(io.StringIO(out.read_text(encoding="utf-8"))))
    assert rows[0] == ["student", "dL/dw1", "dL/da", "dL/dd", "L", "total"]
    cells = {row[0]: row[1:] for row in rows[1:]}
    assert len(cells) == 40
    assert cells["perfect0"] == ["2", "2", "1", "1", "6"]
    assert cells["sign0"] == ["0", "2", "1", "1", "4"]
    assert cells["path0"] == ["2", "0", "1", "1", "4"]
    assert cells["missing0"] == ["2", "0", "1", "0", "3"]
    assert cells["garbled0"] == ["2", "0", "1", "1", "4"]
    assert cells["broken0"] == ["0", "0", "0", "0", "0"]
    assert cells["model0"] == ["2", "2", "1", "1", "6"]
    stdout = run_cli("check", folder / "key.eq", folder / "subs", "--format", "csv")  # no -o: standard output
    assert stdout.stdout == out.read_text(encoding="utf-8")


def test_csv_without_questions_counts_claims(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text(MODEL, encoding="utf-8")
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "x.txt").write_text("dL/dd = -1\ndL/dw1 = 1\n", encoding="utf-8")
    (tmp_path / "s" / "=y.txt").write_text("dL/dd = -1\n", encoding="utf-8")
    result = run_cli("check", key, tmp_path / "s", "--format", "csv")
    assert result.stdout == "student,right,claims\n'=y,1,1\nx,1,2\n"  # a name is never a spreadsheet formula


def test_gradescope_results_for_one_submission(folder: Path, tmp_path: Path) -> None:
    submission = tmp_path / "submission"
    submission.mkdir()
    (submission / "answers.txt").write_text(_answers(w1="dL/dw1 = w3*a"), encoding="utf-8")
    results = tmp_path / "results" / "results.json"
    results.parent.mkdir()
    run = run_cli("check", folder / "key.eq", submission, "--format", "gradescope", "-o", results)
    assert run.exit_code == EXIT_WRONG
    doc = json.loads(results.read_text(encoding="utf-8"))
    assert doc["score"] == 4 and doc["output"].startswith("Score: 4 of 6")
    assert [(t["name"], t["score"], t["max_score"], t["status"]) for t in doc["tests"]] == [
        ("∂L/∂w1", 0, 2, "failed"), ("∂L/∂a", 2, 2, "passed"), ("∂L/∂d", 1, 1, "passed"), ("L", 1, 1, "passed")]
    assert "sign error" in doc["tests"][0]["output"] and "correct: ∂L/∂w1 = " in doc["tests"][0]["output"]
    assert all(t["visibility"] == "visible" for t in doc["tests"])
    (submission / "notes.txt").write_text("dL/dd = -1\n", encoding="utf-8")
    two = run_cli("check", folder / "key.eq", submission, "--format", "gradescope")
    assert two.exit_code == EXIT_BAD_INPUT and "one submission's results.json" in two.stderr


def test_gradescope_for_a_submission_that_does_not_parse(folder: Path) -> None:
    run = run_cli("check", folder / "key.eq", folder / "subs" / "broken0.eq", "--format", "gradescope")
    assert run.exit_code == EXIT_WRONG
    doc = json.loads(run.stdout)
    assert doc["score"] == 0 and doc["output"].startswith("Not judged (score 0 of 6): line 6, column 11: unmatched ')'")
    assert [t["status"] for t in doc["tests"]] == ["failed"] * 4


def test_feedback_files_say_what_is_revealed(folder: Path, tmp_path: Path) -> None:
    texts = {}
    for level in ("verdict", "answer", "all"):
        out = tmp_path / level
        assert run_cli("check", folder / "key.eq", folder / "subs", "--feedback", out, "--reveal", level).exit_code \
            == EXIT_WRONG
        assert len(list(out.glob("*.md"))) == 40
        texts[level] = (out / "path0.md").read_text(encoding="utf-8")
    verdict, answer, everything = texts["verdict"], texts["answer"], texts["all"]
    assert "Score: 4 of 6" in verdict and "| ∂L/∂a | 0 of 2 | wrong |" in verdict
    assert "leaves out L → d → c → a" in verdict
    assert "2.5" not in verdict and "(4 here)" not in verdict  # neither the value nor a path's
    assert "correct value: `2.5`" in answer and "correct: " not in answer.replace("correct value", "")
    assert "correct: `∂L/∂a = " in everything


def test_reveal_none_and_verdict_in_json(folder: Path) -> None:
    for level in ("none", "verdict"):
        doc = strict_json(run_cli("check", folder / "key.eq", folder / "subs" / "path0.txt", "--json",
                                  "--reveal", level).stdout)
        wrong = next(r for r in doc["results"] if r["status"] == "wrong")
        assert wrong["expected"] is None and "derivative" not in wrong
        assert ("diagnosis" in wrong) is (level == "verdict")
    full = strict_json(run_cli("check", folder / "key.eq", folder / "subs" / "path0.txt", "--json").stdout)
    wrong = next(r for r in full["results"] if r["status"] == "wrong")
    assert wrong["expected"] == 2.5 and wrong["derivative"]


def test_one_submission_with_questions_scores_and_exits_by_full_marks(folder: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra.txt"
    extra.write_text(_answers() + "dL/dw2 = 7\n", encoding="utf-8")  # a wrong claim not asked
    result = run_cli("check", folder / "key.eq", extra)
    assert result.exit_code == EXIT_OK and "score 6 of 6" in result.stdout
    short = tmp_path / "short.txt"
    short.write_text("dL/dd = -1\n", encoding="utf-8")
    result = run_cli("check", folder / "key.eq", short)
    assert result.exit_code == EXIT_WRONG and "score 1 of 6" in result.stdout and "– missing" in result.stdout


@pytest.mark.parametrize(("question", "message"), [
    ("check dL/dw9 points 2", "the question asks about 'w9', which the key does not have"),
    ("check dL/dw1\ncheck ∂L/∂w1 points 3", "∂L/∂w1 is asked twice (lines 6 and 7)"),
    ("check dL/dw1 marks 2", "'marks' after a question"),
    ("check dL/dw1 points 0", "a question worth 0 points"),
])
def test_a_bad_question_in_the_key_is_bad_input(tmp_path: Path, question: str, message: str) -> None:
    key = tmp_path / "key.eq"
    key.write_text(MODEL + question + "\n", encoding="utf-8")
    answers = tmp_path / "a.txt"
    answers.write_text("dL/dd = -1\n", encoding="utf-8")
    result = run_cli("check", key, answers, "--json")
    assert result.exit_code == EXIT_BAD_INPUT
    assert message in strict_json(result.stderr)["error"]["message"]


def test_points_stays_a_name_programs_may_use(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text("points = 3\nL = points^2\ncheck dL/dpoints points 2\ncheck L points 0.5\n", encoding="utf-8")
    answers = tmp_path / "a.txt"
    answers.write_text("dL/dpoints = 2*points\nL = 8\n", encoding="utf-8")
    doc = strict_json(run_cli("check", key, answers, "--json").stdout)
    assert (doc["score"], doc["max_score"]) == (2, 2.5)
    assert strict_json(run_cli("grad", key, "--json").stdout)["grad"] == {"points": 6.0}


def test_options_that_would_share_standard_output_are_refused(folder: Path) -> None:
    result = run_cli("check", folder / "key.eq", folder / "subs", "--json", "--format", "csv")
    assert result.exit_code == EXIT_BAD_INPUT and "-o FILE" in result.stderr
    result = run_cli("check", folder / "key.eq", folder / "subs", "-o", "grades.txt")
    assert result.exit_code == EXIT_BAD_INPUT and "--format csv" in result.stderr


def test_a_student_s_slip_is_1_and_a_missing_answers_file_2(folder: Path, tmp_path: Path) -> None:
    """One rule for checking and grading: 1 for the student's work, 2 where the command cannot do its job."""
    broken = folder / "subs" / "broken0.eq"
    assert run_cli("check", folder / "key.eq", broken).exit_code == EXIT_WRONG
    assert run_cli("check", folder / "key.eq", tmp_path / "nowhere.txt").exit_code == EXIT_BAD_INPUT
    empty = tmp_path / "empty.txt"
    empty.write_text("# no answer\n", encoding="utf-8")
    for key in (folder / "key.eq", folder / "subs" / "model0.eq"):  # with questions, and without (a plain model)
        assert run_cli("check", key, empty).exit_code == EXIT_WRONG
    all_right = tmp_path / "class"
    all_right.mkdir()
    (all_right / "x.txt").write_text(_answers(), encoding="utf-8")
    (all_right / "y.txt").write_text(_answers(), encoding="utf-8")
    assert run_cli("check", folder / "key.eq", all_right).exit_code == EXIT_OK


def test_feedback_never_writes_through_a_link_nor_below_its_folder(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text(KEY, encoding="utf-8")
    for group in ("A", "B"):
        (tmp_path / group).mkdir()
        (tmp_path / group / "hw.txt").write_text(_answers(), encoding="utf-8")
    out = tmp_path / "feedback"
    out.mkdir()
    outside = tmp_path / "outside.md"
    outside.write_text("keep me\n", encoding="utf-8")
    (out / "A__hw.md").symlink_to(outside)
    result = run_cli("check", key, tmp_path / "A", tmp_path / "B", "--feedback", out)
    assert result.exit_code == EXIT_OK, result.output
    assert sorted(p.name for p in out.iterdir()) == ["A__hw.md", "B__hw.md"]  # A/hw.txt: one folder, flattened
    assert not (out / "A__hw.md").is_symlink() and "Score: 6 of 6" in (out / "A__hw.md").read_text(encoding="utf-8")
    assert outside.read_text(encoding="utf-8") == "keep me\n"
    blocked = tmp_path / "file"
    blocked.write_text("", encoding="utf-8")
    refused = run_cli("check", key, tmp_path / "A", tmp_path / "B", "--feedback", blocked / "sub")
    assert refused.exit_code == EXIT_BAD_INPUT and "cannot write into" in refused.stderr


def test_reveal_none_in_the_table_shows_no_diagnosis_nor_answer(folder: Path) -> None:
    result = run_cli("check", folder / "key.eq", folder / "subs" / "path0.txt", "--reveal", "none")
    assert result.exit_code == EXIT_WRONG
    assert "✗ wrong" in result.stdout and "score 4 of 6" in result.stdout
    for hidden in ("chain-rule", "2.5", "correct:"):
        assert hidden not in result.stdout, hidden


def test_a_second_derivative_question_is_answered_in_either_order(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text("a = 2; b = 3\nL = a^2*b^3\ncheck d²L/da db points 3\ncheck d²L/da² points 1\n", encoding="utf-8")
    answers = tmp_path / "a.txt"  # ∂²L/∂b∂a = 6ab² = 108 and ∂²L/∂a² = 2b³ = 54, written by hand
    answers.write_text("d²L/db da = 6*a*b^2\nd²L/da² = 2*b^3\n", encoding="utf-8")
    doc = strict_json(run_cli("check", key, answers, "--json").stdout)
    assert [(q["question"], q["status"], q["points"]) for q in doc["questions"]] == [
        ("∂²L/∂a∂b", "right", 3), ("∂²L/∂a²", "right", 1)]
    answers.write_text("d²L/db da = 6*a*b\n", encoding="utf-8")
    doc = strict_json(run_cli("check", key, answers, "--json").stdout)
    assert [(q["status"], q["points"]) for q in doc["questions"]] == [("wrong", 0), ("missing", 0)]


# --- variants: each student's own numbers -------------------------------------------------------------------------

def _values(variant: Path) -> dict[str, float]:
    """The numbers a variant gives the toy network's leaves, read from its text."""
    line = next(text for text in variant.read_text(encoding="utf-8").splitlines() if text.startswith("a = "))
    return {name: float(value) for name, value in (part.split(" = ") for part in line.split("; "))}


def test_variants_are_seeded_per_student_and_keep_each_number_s_form(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text(KEY, encoding="utf-8")
    roster = tmp_path / "roster.csv"
    roster.write_text("name,student\nAlice A,alice\nBob B,bob\nCarol C,carol\n", encoding="utf-8")
    first, again, other = tmp_path / "v1", tmp_path / "v2", tmp_path / "v3"
    for folder, seed in ((first, "0"), (again, "0"), (other, "1")):
        result = run_cli("variants", key, "--roster", roster, "-o", folder, "--seed", seed)
        assert result.exit_code == EXIT_OK, result.output
    assert sorted(p.name for p in first.iterdir()) == ["alice.eq", "bob.eq", "carol.eq"]
    for name in ("alice.eq", "bob.eq", "carol.eq"):
        assert (first / name).read_text(encoding="utf-8") == (again / name).read_text(encoding="utf-8")
        values = _values(first / name)
        for leaf, written in {"a": 2, "w1": 3, "w2": -1, "w3": 0.5, "w4": 4}.items():
            assert 0.5 * abs(written) - 0.1 <= abs(values[leaf]) <= 1.5 * abs(written) + 1, (leaf, values)
            assert values[leaf] * written > 0  # the sign kept, never 0
        assert all(values[leaf].is_integer() for leaf in ("a", "w1", "w2", "w4"))  # integers stay integers
        assert "check dL/dw1 points 2" in (first / name).read_text(encoding="utf-8")
    assert len({tuple(_values(first / n).values()) for n in ("alice.eq", "bob.eq", "carol.eq")}) > 1
    assert any(_values(first / n) != _values(other / n) for n in ("alice.eq", "bob.eq", "carol.eq"))


def test_each_submission_is_judged_against_its_own_variant(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text(KEY, encoding="utf-8")
    roster = tmp_path / "roster.csv"
    roster.write_text("student\nalice\nbob\n", encoding="utf-8")
    folder = tmp_path / "variants"
    assert run_cli("variants", key, "--roster", roster, "-o", folder).exit_code == EXIT_OK
    subs = tmp_path / "subs"
    subs.mkdir()
    numbers = {}
    for name in ("alice", "bob"):
        v = _values(folder / f"{name}.eq")
        da = -(v["w3"] * v["w1"] + v["w4"] * v["w2"])  # ∂L/∂a by the chain rule, by hand
        loss = 10 - (v["w3"] * v["w1"] * v["a"] + v["w4"] * v["w2"] * v["a"])
        numbers[name] = (da, loss)
        (subs / f"{name}.txt").write_text(f"dL/dw1 = -w3*a\ndL/da = {da!r}\ndL/dd = -1\nL = {loss!r}\n",
                                          encoding="utf-8")
    (subs / "zoe.txt").write_text(_answers(), encoding="utf-8")  # not on the roster: no variant
    doc = strict_json(run_cli("check", key, subs, "--variants", folder, "--json").stdout)
    scores = {s["submission"]: s["score"] for s in doc["submissions"]}
    assert scores == {"alice.txt": 6, "bob.txt": 6, "zoe.txt": 0}
    zoe = next(s for s in doc["submissions"] if s["submission"] == "zoe.txt")
    assert "no variant for zoe.txt" in zoe["error"]["message"]
    if numbers["alice"] != numbers["bob"]:  # alice's numbers are not bob's answers
        (subs / "bob.txt").write_text((subs / "alice.txt").read_text(encoding="utf-8"), encoding="utf-8")
        doc = strict_json(run_cli("check", key, subs / "bob.txt", "--variants", folder, "--json").stdout)
        assert doc["score"] < 6
    plain = strict_json(run_cli("check", key, subs / "alice.txt", "--json").stdout)  # against the key itself
    assert plain["score"] == (6 if numbers["alice"] == (2.5, 15) else 2 + 1)


@pytest.mark.parametrize(("rows", "message"), [
    ("student\n../x\n", "'../x' cannot name a file"),
    ("student\nal\nal\n", "'al' is listed twice"),
    ("student\n", "no students"),
])
def test_a_bad_roster_is_bad_input(tmp_path: Path, rows: str, message: str) -> None:
    key = tmp_path / "key.eq"
    key.write_text(KEY, encoding="utf-8")
    roster = tmp_path / "roster.csv"
    roster.write_text(rows, encoding="utf-8")
    result = run_cli("variants", key, "--roster", roster, "-o", tmp_path / "v", "--json")
    assert result.exit_code == EXIT_BAD_INPUT and message in strict_json(result.stderr)["error"]["message"]


def test_students_named_on_the_command_line(tmp_path: Path) -> None:
    program = "a = 2; w = 3; L = (w*a - 1)^2"
    result = run_cli("variants", "-e", program, "--student", "ann", "--student", "ben", "-o", tmp_path / "v")
    assert result.exit_code == EXIT_OK and sorted(p.name for p in (tmp_path / "v").iterdir()) == ["ann.eq", "ben.eq"]
    none = run_cli("variants", "-e", program, "-o", tmp_path / "w", "--json")
    assert none.exit_code == EXIT_BAD_INPUT and strict_json(none.stderr)["error"]["message"] == "no students given"
    fixed = run_cli("variants", "-e", "x = [1, 2]; L = sum(x^2)", "--student", "ann", "-o", tmp_path / "x", "--json")
    assert fixed.exit_code == EXIT_BAD_INPUT  # no number to vary: said so, nothing written
    assert "no number to vary" in strict_json(fixed.stderr)["error"]["message"] and not (tmp_path / "x").exists()


def test_a_diagnosis_naming_the_value_shows_only_its_summary_below_answer(folder: Path, tmp_path: Path) -> None:
    answers = tmp_path / "close.txt"
    answers.write_text("dL/da = 2.4\n", encoding="utf-8")  # ∂L/∂a = 2.5: off in the last digit
    shown = {}
    for level in ("verdict", "answer"):
        doc = strict_json(run_cli("check", folder / "key.eq", answers, "--json", "--reveal", level).stdout)
        (result,) = doc["results"]
        shown[level] = result
        assert result["diagnosis_code"] == "last_digit"
    assert shown["verdict"]["diagnosis"] == "off in the last digit written"
    assert "2.5" not in json.dumps(shown["verdict"]) and "2.5" in shown["answer"]["diagnosis"]


def test_a_diagnosis_writing_part_of_the_answer_shows_its_summary_at_verdict() -> None:
    """missing_divisor names the program's N only: whole at verdict; missing_term writes the term's gradient."""
    program = "x = 2; N = 4; W = 1.5; reg = 0.1; L = x^2/N + W^3 + reg*W^2"  # ∂L/∂x = x/2; ∂L/∂W = 3W² + 2·reg·W
    claims = ["--claim", "dL/dx = 2x", "--claim", "dL/dW = 3W^2"]
    shown = {level: strict_json(run_cli("check", "-e", program, *claims, "--reveal", level, "--json").stdout)
             for level in ("verdict", "all")}
    divisor, term = shown["verdict"]["results"]
    assert divisor["diagnosis_code"] == "missing_divisor" and "divides by N (= 4)" in divisor["diagnosis"], divisor
    assert term["diagnosis_code"] == "missing_term" and term["diagnosis"] == "a missing term", term
    assert "2*W*reg" in shown["all"]["results"][1]["diagnosis"], shown["all"]


def test_feedback_files_hold_no_escape_sequence_a_student_wrote(tmp_path: Path) -> None:
    """A teacher who `cat`s a feedback file runs no escape sequence: the claim's are shown as \\x1b, \\u202e."""
    subs = tmp_path / "subs"
    subs.mkdir()
    (subs / "mallory.txt").write_text("dL/dw1 = -1 \x1b]0;pwned\x07\ndL/da = \u202e2.5\n", encoding="utf-8")
    out = tmp_path / "feedback"
    run_cli("check", NEURON, subs, "--feedback", out)
    text = (out / "mallory.md").read_text(encoding="utf-8")
    assert not any(char in text for char in "\x1b\x07\u202e"), repr(text)
    assert "\\x1b]0;pwned\\x07" in text and "\\u202e" in text, text
