"""Questions and points: a key's `check dL/dW1 points 2` statements, each submission scored against them,
what a graded report reveals (--reveal), and the class's mistakes.

A question is answered by a claim about the same derivative (or value): ∂L/∂w_1 answers ∂L/∂w1 where the
program has w1, and ∂²L/∂a∂b answers ∂²L/∂b∂a. Scoring is all or nothing within a question: a right answer
earns its points; a wrong, invalid or missing one earns 0. Answered twice, the last answer counts (a
student's correction below an attempt), and both are judged and shown. A claim that answers no question is
judged and shown, never scored.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ...errors import GradcalcError, GradcalcSyntaxError, NameNotFound, Source, did_you_mean
from ...language import parser
from ...language import syntax as S
from ...program.notation.juxtaposition import NOTATION
from ...program.notation.resolving import unsubscripted
from .check import Report, Verdict, _derivative_label

REVEAL_LEVELS = ("none", "verdict", "answer", "all")  # each shows what the one before does, and more
# Diagnoses whose details name no value of the derivative (a path's value aside, taken out below): shown whole
# at --reveal verdict. Any other (only_here, last_digit, not_finite, a code added later) shows its summary only;
# so do missing_term and missing_local_factor, whose details write a part of the correct expression.
_VALUE_FREE = {"transposed", "sign", "factor", "missing_path", "all_paths_missing", "double_counted_path",
               "not_summed", "not_averaged", "shape", "upside_down", "transpose_slip", "missing_divisor",
               "missing_mask", "held_constant"}
_GENERIC = {"exact_integer": "an integer claims an exact value"}  # a summary that names the value itself
_PATH_VALUE = re.compile(r" \([^()]* here\)")  # a chain-rule path's value in a path diagnosis: "(4 here)"


@dataclass(frozen=True)
class Question:
    """One question of a key: the derivative (or value) asked, and its points."""

    of: str
    wrt: str | None
    wrt2: str | None
    points: float
    line: int

    @property
    def label(self) -> str:
        return _derivative_label(self.of, self.wrt, self.wrt2)

    @property
    def key(self) -> tuple[str, ...]:
        return _key(self.of, self.wrt, self.wrt2)


@dataclass
class Answer:
    """A question in one submission: right, wrong, invalid, missing (not answered) or not_judged."""

    question: Question
    status: str
    score: float
    verdict: int | None = None  # the index of the claim that counts in the report's verdicts


def _key(of: str, wrt: str | None, wrt2: str | None) -> tuple[str, ...]:
    """What a question and a claim share when one answers the other (∂²L/∂a∂b is ∂²L/∂b∂a)."""
    return (of,) if wrt is None else (of, wrt) if wrt2 is None else (of, *sorted((wrt, wrt2)))


def questions(module: S.Module, variables: dict[str, Any], source: Source) -> list[Question]:
    """The key's questions, each about names the key has, each asked once (GradcalcError where not)."""
    found: list[Question] = []
    seen: dict[tuple[str, ...], Question] = {}
    known = list(variables)
    for stmt in module.body:  # the checker keeps check statements at the top level
        if not isinstance(stmt, S.Question):
            continue
        for name in (stmt.of, stmt.wrt, stmt.wrt2):
            if name is not None and unsubscripted(name, variables) not in variables:
                raise NameNotFound(f"the question asks about '{name}', which the key does not have",
                                   did_you_mean(name, known) or "its variables are: " + ", ".join(known[:12]),
                                   stmt.pos).within(source)
        of, wrt, wrt2 = (None if n is None else unsubscripted(n, variables) for n in (stmt.of, stmt.wrt, stmt.wrt2))
        assert of is not None
        question = Question(of, wrt, wrt2, stmt.points, stmt.pos.line)
        if question.key in seen:
            raise GradcalcSyntaxError(f"{question.label} is asked twice (lines {seen[question.key].line} and "
                                      f"{question.line})", "ask each question once, with all its points",
                                      stmt.pos).within(source)
        seen[question.key] = question
        found.append(question)
    return found


def score(report: Report, asked: list[Question], variables: dict[str, Any]) -> Report:
    """Score a judged report against the key's questions (none: the report is left as it was)."""
    if not asked:
        return report
    index = {question.key: i for i, question in enumerate(asked)}
    counted: dict[int, int] = {}  # question → the verdict that counts: the last answer
    for position, verdict in enumerate(report.verdicts):
        key = claim_key(verdict, variables)
        found = None if key is None else index.get(key)
        if found is not None:
            verdict.question = asked[found].label
            counted[found] = position
    report.answers = []
    for i, question in enumerate(asked):
        if report.error is not None:
            report.answers.append(Answer(question, "not_judged", 0))
        elif i not in counted:
            report.answers.append(Answer(question, "missing", 0))
        else:
            verdict = report.verdicts[counted[i]]
            verdict.points = question.points if verdict.passed else 0
            report.answers.append(Answer(question, verdict.status, verdict.points, counted[i]))
    report.score = sum(answer.score for answer in report.answers)
    report.max_score = sum(question.points for question in asked)
    return report


def claim_key(verdict: Verdict, variables: dict[str, Any]) -> tuple[str, ...] | None:
    """The question a claim answers, as a key: for a line that does not parse, what its left side asks."""
    of, wrt, wrt2 = verdict.of, verdict.wrt, verdict.wrt2
    if not of:
        asked = _asked(verdict.claim)
        if asked is None:
            return None
        of, wrt, wrt2 = asked.of, asked.wrt, asked.wrt2
    return _key(*(None if n is None else unsubscripted(n, variables) for n in (of, wrt, wrt2)))  # type: ignore[arg-type]


def _asked(text: str) -> S.Question | None:
    """What an unreadable claim's left side asks (dL/dW1 of `dL/dW1 = (p - y`), if it reads as a question."""
    left = re.split(r"[=≈]", text, maxsplit=1)[0].strip()
    left = left[len("check"):].strip() if left.startswith("check ") else left
    try:
        body = parser.parse("check " + left, dialect=NOTATION).body
    except GradcalcError:
        return None
    return body[0] if len(body) == 1 and isinstance(body[0], S.Question) else None


def diagnosis_shown(verdict: Verdict, level: str) -> str:
    """The diagnosis as --reveal lets it be read: at `verdict`, without a value of the derivative."""
    if level == "none" or not verdict.diagnosis:
        return ""
    if level in ("answer", "all"):
        return verdict.diagnosis
    code = verdict.diagnosis_code or ""
    if code in _GENERIC:
        return _GENERIC[code]
    if code not in _VALUE_FREE:
        return verdict.diagnosis_summary
    return _PATH_VALUE.sub("", verdict.diagnosis)


def revealed(report: Report, level: str) -> Report:
    """A copy of the report with only what --reveal shows: none (right or wrong, and points), verdict (and
    the diagnosis and how it was judged), answer (and the correct value), all (and the correct expression)."""
    if level == "all":
        return report
    verdicts = []
    for verdict in report.verdicts:
        shown = dataclasses.replace(verdict, derivative="", elided=dict(verdict.elided))
        shown.diagnosis = diagnosis_shown(verdict, level)
        if level == "none":
            shown.note, shown.diagnosis_code, shown.diagnosis_summary = "", None, ""
        elif shown.diagnosis_code in _GENERIC:
            shown.diagnosis_summary = _GENERIC[shown.diagnosis_code]
        if level in ("none", "verdict"):
            shown.expected = None
            shown.elided.pop("expected", None)
            if verdict.working is not None and verdict.working.rule != "invalid":  # a term dropped names the answer's
                said = verdict.working.summary if level == "verdict" else ""
                shown.working = dataclasses.replace(verdict.working, reason=said, summary=said,
                                                    rule=verdict.working.rule if level == "verdict" else None)
            if verdict.status == "wrong":
                shown.note = ""  # why no expression is shown: nothing of the answer is shown here
        verdicts.append(shown)
    return dataclasses.replace(report, verdicts=verdicts)


@dataclass
class Mistake:
    """One line of the class report: how many submissions made one mistake on one question."""

    question: str
    kind: str  # a diagnosis code, or "wrong" (no known mistake fits), "invalid", "missing"
    text: str  # the diagnosis as revealed, or what the kind means
    count: int
    submissions: list[str]


_KINDS = {"wrong": "wrong, and no known mistake fits", "invalid": "could not be judged",
          "missing": "not answered"}


def mistakes(reports: list[Report], asked: list[Question], level: str) -> list[Mistake]:
    """The class's mistakes, per question (or claim), most common first; a submission counts once per line.

    Diagnoses are as --reveal shows them; at `none`, only wrong, invalid and missing are counted."""
    found: dict[tuple[str, str, str], list[str]] = {}
    order = {question.label: i for i, question in enumerate(asked)}
    for report in reports:
        if report.error is not None:
            continue
        seen: set[tuple[str, str, str]] = set()
        if asked:
            counted = [(a.question.label, a.status, report.verdicts[a.verdict] if a.verdict is not None else None)
                       for a in report.answers if a.status != "right"]
        else:
            counted = [(_label(v), v.status, v) for v in report.verdicts if not v.passed]
        for label, status, verdict in counted:
            text = diagnosis_shown(verdict, level) if verdict is not None and status == "wrong" else ""
            kind = (verdict.diagnosis_code if text and verdict is not None and verdict.diagnosis_code else status)
            line = (label, kind or status, text or _KINDS.get(status, status))
            if line not in seen:
                seen.add(line)
                found.setdefault(line, []).append(report.name)
        for label, _, _ in counted:  # without questions: in the order the class first claims them
            order.setdefault(label, len(order))
    lines = [Mistake(label, kind, text, len(names), names) for (label, kind, text), names in found.items()]
    return sorted(lines, key=lambda m: (-m.count, order.get(m.question, 0), m.kind, m.text))


def _label(verdict: Verdict) -> str:
    """A claim's derivative as a label; for a line that does not parse, what its left side asks, if it says."""
    if verdict.of:
        return verdict.label
    asked = _asked(verdict.claim)
    return _derivative_label(asked.of, asked.wrt, asked.wrt2) if asked is not None else verdict.claim


def judged(reports: list[Report]) -> int:
    """How many submissions were judged (the class report's "of")."""
    return sum(report.error is None for report in reports)


def tally(reports: list[Report], asked: list[Question]) -> list[dict[str, Any]]:
    """Per question: how many right, wrong, invalid, missing and not judged, and the mean score."""
    rows = []
    for i, question in enumerate(asked):
        counts = Counter(report.answers[i].status for report in reports if report.answers)
        total = sum(report.answers[i].score for report in reports if report.answers)
        rows.append({"question": question.label, "points": question.points,
                     **{status: counts.get(status, 0) for status in ("right", "wrong", "invalid", "missing",
                                                                     "not_judged")},
                     "mean": round(total / len(reports), 4) if reports else 0})
    return rows
