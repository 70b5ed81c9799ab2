"""Gradebooks from graded reports: a CSV (one row per student), Gradescope's results.json, Markdown feedback.

Each is built from reports already passed through rubric.revealed, so what --reveal hides is in none of them.
A student is named by the submission's name without its extension (alice.txt: alice).
"""

from __future__ import annotations

import csv
import io
import os
from typing import Any

from ...engine import backend as B
from ...errors import UsageError
from ...inert import inert, inert_lines
from .check import Report, Verdict
from .rubric import Question

_STATUS_WORDS = {"right": "right", "wrong": "wrong", "invalid": "invalid (could not be judged)",
                 "missing": "not answered", "not_judged": "not judged"}


def student(name: str) -> str:
    """The student's id: the submission's name without its extension (A/hw.txt: A/hw)."""
    return os.path.splitext(name)[0]


def number(points: float | None) -> str:
    """Points as a gradebook shows them: 2, 0.5."""
    if points is None:
        return ""
    return str(int(points)) if float(points).is_integer() else f"{points:g}"


def _ascii_label(question: Question) -> str:
    """A question's column: dL/dW1, d2L/dw2, d2L/da db, L (plain ASCII for any spreadsheet)."""
    if question.wrt is None:
        return question.of
    if question.wrt2 is None:
        return f"d{question.of}/d{question.wrt}"
    return (f"d2{question.of}/d{question.wrt}2" if question.wrt2 == question.wrt
            else f"d2{question.of}/d{question.wrt} d{question.wrt2}")


def _cell(text: str) -> str:
    """A name as a cell a spreadsheet will not run: =, +, -, @ at the start would make it a formula."""
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def csv_text(reports: list[Report], asked: list[Question]) -> str:
    """One row per student: with questions, one column per question and the total; without, claims right."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    worked = any(report.derivations[1] for report in reports)  # a last column only where derivations were handed in
    working = ["working"] if worked else []
    if asked:
        writer.writerow(["student", *(_ascii_label(q) for q in asked), "total", *working])
        for report in reports:
            writer.writerow([_cell(student(report.name)), *(number(a.score) for a in report.answers),
                             number(report.score), *_working_cell(report, worked)])
    else:
        writer.writerow(["student", "right", "claims", *working])
        for report in reports:
            writer.writerow([_cell(student(report.name)), report.right, len(report.verdicts),
                             *_working_cell(report, worked)])
    return out.getvalue()


def _working_cell(report: Report, worked: bool) -> list[str]:
    """The lines of a student's derivations that follow before each one's first break (empty: none handed in)."""
    if not worked:
        return []
    follow, lines = report.derivations
    return [str(follow) if lines else ""]


def _parts(verdict: Verdict) -> list[tuple[str, str]]:
    """What a (revealed) verdict says, part by part: the claim, why it is wrong, the correct answer."""
    parts = [("claim", verdict.claim), ("verdict", verdict.status)]
    if verdict.line is not None:
        parts.insert(1, ("line", str(verdict.line)))
    if verdict.status == "invalid" and verdict.error:
        parts.append(("could not be judged", verdict.error["message"]))
        if verdict.error.get("hint"):
            parts.append(("hint", verdict.error["hint"]))
    if verdict.diagnosis:
        parts.append(("diagnosis", verdict.diagnosis))
    if verdict.note and verdict.status != "invalid":
        parts.append(("note", verdict.note))
    if verdict.status == "wrong" and verdict.expected is not None:
        parts.append(("correct value", B.format_value(verdict.expected)))
    if verdict.derivative:
        parts.append(("correct", f"{verdict.label} = {verdict.derivative}"))
    if verdict.working is not None:
        parts.append(("working", verdict.working.text()))
    return parts


def verdict_lines(verdict: Verdict) -> list[str]:
    return [f"{key}: {value}" for key, value in _parts(verdict)]


def _summary(report: Report) -> str:
    if report.error is not None:
        scored = f" (score 0 of {number(report.max_score)})" if report.max_score is not None else ""
        return f"Not judged{scored}: {report.first_problem()}"
    if report.max_score is not None:
        return f"Score: {number(report.score)} of {number(report.max_score)}"
    return f"{report.right} of {len(report.verdicts)} claims right"


def gradescope_doc(report: Report, asked: list[Question]) -> dict[str, Any]:
    """Gradescope's autograder results.json for one submission: a test per question (or per claim)."""
    tests: list[dict[str, Any]] = []
    if asked:
        for answer in report.answers:
            verdict = report.verdicts[answer.verdict] if answer.verdict is not None else None
            output = "\n".join(verdict_lines(verdict)) if verdict is not None else _STATUS_WORDS[answer.status]
            tests.append({"name": answer.question.label, "score": answer.score, "max_score": answer.question.points,
                          "status": "passed" if answer.status == "right" else "failed", "output": output,
                          "visibility": "visible"})
        total = report.score or 0
    else:
        for verdict in report.verdicts:
            tests.append({"name": verdict.label or verdict.claim, "score": int(verdict.passed), "max_score": 1,
                          "status": "passed" if verdict.passed else "failed",
                          "output": "\n".join(verdict_lines(verdict)), "visibility": "visible"})
        total = report.right
    output = _summary(report) + (f"\n\n{report.error_message}" if report.error is not None else "")
    extra = [v for v in report.verdicts if asked and v.question is None]
    if extra:
        output += "\n\nNot asked, so not scored:\n" + "\n".join(f"- {v.claim}: {v.status}" for v in extra)
    return {"score": total, "output": output, "visibility": "visible", "tests": tests}


def _code(text: str) -> str:
    """Text as Markdown code, whatever backticks it holds."""
    if "\n" in text:  # a matrix, a derivative with its `where` lines: a block
        return "\n\n  ```\n" + "".join(f"  {line}\n" for line in text.split("\n")) + "  ```"
    fence = "``" if "`" in text else "`"
    return f"{fence} {text} {fence}" if fence == "``" else f"`{text}`"


def feedback_markdown(report: Report, asked: list[Question]) -> str:
    """One student's feedback: the score, each question (or claim) and what was revealed of it."""
    # What a student wrote is made inert: a teacher may `cat` the file (an escape sequence would run in the terminal)
    lines = [f"# Feedback: {inert(student(report.name))}", "", _summary(report), ""]
    if report.error is not None:
        return "\n".join([*lines, "```", inert_lines(report.error_message.rstrip()), "```", ""])
    if asked:
        lines += ["| question | points | verdict |", "|---|---|---|"]
        lines += [f"| {inert(a.question.label)} | {number(a.score)} of {number(a.question.points)} | "
                  f"{_STATUS_WORDS[a.status]} |" for a in report.answers]
        lines.append("")
    for verdict in report.verdicts:
        heading = verdict.question or verdict.label or "claim"
        if asked and verdict.question is None:
            heading += " (not asked: not scored)"
        elif asked and verdict.points is None:
            heading += " (answered again below: not scored)"
        lines += [f"## {inert(heading)}: {verdict.status}", ""]
        lines += [f"- {key}: " + (_code(safe) if key in ("claim", "correct", "correct value") else safe)
                  for key, value in _parts(verdict) if key != "verdict"
                  for safe in [inert(value) if key == "claim" else inert_lines(value)]]
        lines.append("")
    return "\n".join(lines)


def feedback_files(reports: list[Report], asked: list[Question]) -> dict[str, str]:
    """Each student's feedback file's name (in one folder, never below it) and its text."""
    files: dict[str, str] = {}
    for report in reports:
        base = student(report.name).replace("\\", "/").replace("/", "__").lstrip("._") or "submission"
        name, n = f"{base}.md", 1
        while name in files:  # two names made one by the flattening (a/b and a__b): both kept
            n += 1
            name = f"{base}-{n}.md"
        files[name] = feedback_markdown(report, asked)
    return files


def write_folder(folder: str, files: dict[str, str]) -> None:
    """Write each file into folder (made if missing), replacing a file of the same name, never a link's target."""
    try:
        os.makedirs(folder, exist_ok=True)
        for name, text in files.items():
            final = os.path.join(folder, name)
            partial = os.path.join(folder, f".{name}.partial")
            handle = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(handle, "w", encoding="utf-8") as stream:
                stream.write(text)
            os.replace(partial, final)  # a link named so is replaced by the file, its target untouched
    except OSError as exc:
        raise UsageError(f"cannot write into {folder}: {exc.strerror}",
                         "name a folder that can be made or written") from None
