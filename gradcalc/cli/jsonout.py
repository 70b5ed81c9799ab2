"""JSON documents, built from plain dicts and written with the standard library (never through Rich)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..engine import backend as B
from ..errors import error_json
from ..inert import inert_json
from ..program.api import Gradients, Run
from .symbols import unicode_stream

if TYPE_CHECKING:  # only their types: the grad and eval paths do not load the checking or symbolic modules
    from ..engine.symbolic import Derivative
    from ..program.batch import Point
    from ..program.results import Curvature, Hessians, Jacobians, Tangents, Taylor
    from ..tools.gradcheck import GradCheck
    from ..tools.homework.check import Report, Verdict, Working
    from ..tools.homework.rubric import Mistake, Question


def values_doc(run: Run) -> dict[str, Any]:
    return {"values": {name: B.to_json(node.value) for name, node in run.frame.items()}}


def point_docs(points: list[Point], method: str) -> list[dict[str, Any]]:
    """`--at`: each point's document (point_doc's). Where every result is a number (`grad` of scalar leaves,
    `eval` of a scalar program), the numbers are converted a column at a time, not one by one (a third of
    a 10^4-point command)."""
    done = [point for point in points if point.error is None]
    if method not in ("values", "grad") or not done:
        return [point_doc(point, method) for point in points]
    first = done[0].result
    names = list(first) if method == "values" else list(first.grads)
    columns: dict[str, list[Any]] = {}
    for name in ["", *names] if method == "grad" else names:
        column = [(p.result.value if not name else p.result.grads[name]) if method == "grad" else
                  p.result.get(name) for p in done]
        if any(getattr(value, "shape", None) != () for value in column):
            return [point_doc(point, method) for point in points]
        numbers = B.to_host(column)  # on the host already: one array of the column
        columns[name] = [item for start in range(0, len(numbers), B.JSON_BLOCK)
                         for item in B.to_json(numbers[start:start + B.JSON_BLOCK])]
    if any((list(p.result) if method == "values" else list(p.result.grads)) != names for p in done):
        return [point_doc(point, method) for point in points]
    docs: list[dict[str, Any]] = []
    row = 0
    for point in points:
        if point.error is not None:
            docs.append(point_doc(point, method))
            continue
        if method == "values":
            docs.append({"index": point.index, "values": {name: columns[name][row] for name in names}})
        else:
            result = point.result
            doc = {"index": point.index, "of": result.of, "value": columns[""][row],
                   "grad": {name: columns[name][row] for name in names}}
            if result.no_path:
                doc["no_path"] = sorted(result.no_path)
            docs.append(doc)
        row += 1
    return docs


def point_doc(point: Point, method: str) -> dict[str, Any]:
    """`--at`: one point's document, the one the command prints for one run, led by the point's index; or
    its error, the body every command's error has."""
    if point.error is not None:
        return {"index": point.index, **error_json(point.error)}
    result = point.result
    doc = {"values": {name: B.to_json(value) for name, value in result.items()}} if method == "values" else \
        grad_doc(result) if method == "grad" else jacobian_doc(result) if method == "jacobian" else \
        hessian_doc(result) if method == "hessian" else jvp_doc(result) if method == "jvp" else \
        hvp_doc(result) if method == "hvp" else diff_doc(result, [])
    return {"index": point.index, **doc}


def grad_doc(result: Gradients) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "of": result.of,
        "value": B.to_json(result.value),
        "grad": {name: B.to_json(g) for name, g in result.grads.items()},
    }
    if result.no_path:
        doc["no_path"] = sorted(result.no_path)
    return doc


def jacobian_doc(result: Jacobians) -> dict[str, Any]:
    """One --wrt: the SPEC's {of, wrt, shape, jacobian}; several: one such block each."""
    blocks = [{"wrt": name, "shape": list(block.shape), "jacobian": B.to_json(block)}
              for name, block in zip(result.wrt, result.blocks)]
    if len(blocks) == 1:
        return {"of": result.of, **blocks[0], "mode": result.mode}
    return {"of": result.of, "wrt": result.wrt, "mode": result.mode, "blocks": blocks}


def hessian_doc(result: Hessians) -> dict[str, Any]:
    """One --wrt: the SPEC's {of, wrt, shape, hessian}; several: the block Hessian, block by block."""
    if len(result.wrt) == 1:
        block = result.blocks[0][0]
        return {"of": result.of, "wrt": result.wrt[0], "shape": list(block.shape), "hessian": B.to_json(block),
                "value": B.to_json(result.value)}
    blocks = [{"wrt": [first, second], "shape": list(result.blocks[i][j].shape),
               "hessian": B.to_json(result.blocks[i][j])}
              for i, first in enumerate(result.wrt) for j, second in enumerate(result.wrt)]
    return {"of": result.of, "wrt": result.wrt, "value": B.to_json(result.value), "blocks": blocks}


def jvp_doc(result: Tangents) -> dict[str, Any]:
    return {"of": result.of, "wrt": result.wrt, "shape": list(result.jvp.shape), "value": B.to_json(result.value),
            "tangent": B.to_json(result.tangent), "jvp": B.to_json(result.jvp)}


def diff_doc(results: list[Derivative], placeholders: list[str]) -> dict[str, Any]:
    """One derivative: the SPEC's {of, wrt, derivative, latex}; several: one such entry each."""
    entries = []
    for result in results:
        entry: dict[str, Any] = {
            "of": result.of,
            "wrt": result.wrt[0] if len(result.wrt) == 1 else list(result.wrt),
            "derivative": result.text,
            "latex": result.latex,
            "where": {name: text for name, text, _ in result.where},
            "evaluable": result.evaluable,
        }
        if result.given:  # sum(Y) = 1: true of the values, and the text relies on it
            entry["given"] = list(result.given)
        if not placeholders:
            entry["value"] = B.to_json(result.value)
        entries.append(entry)
    if len(entries) == 1:
        return entries[0]
    return {"of": results[0].of, "derivatives": entries}


def explain_doc(explanation: Any, view: Any) -> dict[str, Any]:
    """Paths (or groups), their products, the sum, and autograd's gradient.

    A path count past 2^53 - 1 is a string of its digits: a JSON number that large loses its
    last digits in JavaScript and jq (doubles), as protobuf's JSON writes 64-bit integers.
    """
    from ..engine.graphview import EXACT_COUNTS

    def number(value: Any) -> Any:
        return None if value is None else B.to_json(value)

    def count(paths: int) -> int | str:
        return paths if paths <= EXACT_COUNTS else str(paths)

    return {
        "of": explanation.of,
        "wrt": explanation.wrt,
        "count": count(explanation.count),
        "paths": [{"nodes": [view.nodes[0].label] + [view.nodes[e.target].label for e in path.edges],
                   "factors": [e.text for e in path.edges], "values": [number(e.value) for e in path.edges],
                   "product": number(path.value)} for path in explanation.paths],
        "groups": [{"via": view.nodes[edge.source].label, "adjoint": number(adjoint), "factor": edge.text,
                    "value": number(edge.value), "paths": count(through)}
                   for edge, adjoint, through in explanation.groups],
        "sum": number(explanation.total),
        "gradient": number(explanation.gradient),
        "agrees": explanation.total is not None and explanation.gradient is not None
        and B.close(explanation.total, explanation.gradient),
    }


def verdict_doc(verdict: Verdict) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "claim": verdict.claim,
        "passed": verdict.passed,
        "expected": None if verdict.expected is None else B.to_json(verdict.expected),
        "got": None if verdict.got is None else B.to_json(verdict.got),
        "status": verdict.status,
        "kind": verdict.kind,
        "of": verdict.of,
        "wrt": verdict.wrt if verdict.wrt2 is None else [verdict.wrt, verdict.wrt2],
        "line": verdict.line,
    }
    for key in ("note", "diagnosis", "diagnosis_code", "derivative", "error", "question"):
        if getattr(verdict, key):
            doc[key] = getattr(verdict, key)
    if verdict.question is not None:
        doc["points"] = verdict.points  # null: answered again below, so not the one scored
    for key, shape in verdict.elided.items():  # grading keeps no large value: its shape says what it was
        doc[f"{key}_shape"] = list(shape)
    if verdict.working is not None:
        doc["working"] = working_doc(verdict.working)
    return doc


def working_doc(working: Working) -> dict[str, Any]:
    """A derivation judged line by line: how far it got, the first line that does not follow and why."""
    return {"lines": working.lines, "follow": working.follow, "broken": working.broken, "rule": working.rule,
            "reason": working.reason or None, "text": working.text(),
            "steps": [{"line": step.number, "text": step.text, "at": {"line": step.line, "column": step.column},
                       "status": step.status, "right": step.right} for step in working.steps]}


def check_doc(report: Report) -> dict[str, Any]:
    """The SPEC's {passed, results: [{claim, passed, expected, got}]}, with status and diagnosis added;
    with a key's questions, the score, its maximum, and each question's points and status."""
    doc: dict[str, Any] = {"passed": report.passed, "results": [verdict_doc(v) for v in report.verdicts],
                           "right": report.right, "total": len(report.verdicts)}
    if report.first_wrong:
        doc["first_wrong"] = report.first_wrong
    if report.max_score is not None:
        doc["score"], doc["max_score"] = report.score, report.max_score
        doc["questions"] = [{"question": a.question.label, "status": a.status, "points": a.score,
                             "max_points": a.question.points} for a in report.answers]
    return doc


def grading_doc(reports: list[Report], asked: Sequence[Question] = (), mistakes: Sequence[Mistake] = (),
                reveal: str = "all") -> dict[str, Any]:
    """One check document per submission, the totals, the questions' tallies and the class's mistakes."""
    from ..tools.homework.rubric import judged, tally

    submissions = []
    for report in reports:
        doc = {"submission": report.name, **check_doc(report), "first_problem": report.first_problem() or None}
        follow, lines = report.derivations
        if lines:
            doc["working"] = {"follow": follow, "lines": lines}
        if report.error is not None:
            doc["error"] = report.error
        submissions.append(doc)
    totals = grading_totals(reports)
    result: dict[str, Any] = {"passed": totals["passed"] == totals["submissions"], "submissions": submissions,
                              "totals": totals, "reveal": reveal}
    if asked:
        result["questions"] = tally(reports, list(asked))
    result["mistakes"] = [{"question": m.question, "kind": m.kind, "text": m.text, "count": m.count,
                           "of": judged(reports), "submissions": m.submissions} for m in mistakes]
    return result


def grading_totals(reports: list[Report]) -> dict[str, Any]:
    totals: dict[str, Any] = {
        "submissions": len(reports),
        "passed": sum(r.passed for r in reports),
        "failed": sum(not r.passed and r.error is None for r in reports),
        "not_judged": sum(r.error is not None for r in reports),
        "timed_out": sum(r.error is not None and r.error.get("type") == "TimeoutError" for r in reports),
        "claims_right": sum(r.right for r in reports),
        "claims_total": sum(len(r.verdicts) for r in reports),
    }
    if reports and reports[0].max_score is not None:
        totals["max_score"] = reports[0].max_score
        totals["mean_score"] = round(sum(r.score or 0 for r in reports) / len(reports), 4)
    return totals


def gradcheck_doc(result: GradCheck, warning: str | None = None) -> dict[str, Any]:
    doc = {
        "of": result.of, "order": result.order, "mode": result.mode, "eps": result.eps, "rtol": result.rtol,
        "atol": result.atol, "passed": result.passed,
        "results": [{"wrt": c.label, "shape": list(c.autograd.shape), "passed": c.passed,
                     "max_abs_error": B.to_json(c.max_abs), "max_abs_at": list(c.abs_at),
                     "max_rel_error": B.to_json(c.max_rel), "max_rel_at": list(c.rel_at),
                     "worst_at": list(c.worst_at), "elements": c.elements, "checked": c.checked,
                     **({"sampled": [list(at) for at in c.sampled]} if c.sampled is not None else {}),
                     "autograd": B.to_json(c.autograd), "numeric": B.to_json(c.numeric)}
                    for c in result.comparisons],
    }
    if warning:
        doc["warning"] = warning
    return doc


def write(doc: dict[str, Any], stream: TextIO) -> None:
    """Strict RFC 8259 JSON: allow_nan=False proves no NaN slipped through as a bare token.

    The text is what json.dumps(doc) gives, with each array (a backend.JsonArray) as nested
    lists; arrays are written block by block as they are converted, never whole. Characters that
    JSON may leave raw but a terminal obeys (DEL, C1, bidi overrides) are written as \\u escapes:
    a document piped to a screen cannot drive it, and parses to the same strings.

    On a stream that is not UTF-8 (cp1252, ASCII, a C locale) every character past ASCII is a \\u
    escape (ensure_ascii): the document is valid in any encoding and parses to the same data; on
    UTF-8 the characters are written as they are.
    """
    ascii_only = not unicode_stream(stream)
    try:  # a document of small values (most: backend.to_json gives lists up to a block) in one call
        stream.write(inert_json(json.dumps(doc, allow_nan=False, ensure_ascii=ascii_only, default=_streamed)))
    except _Large:
        for piece in _pieces(doc, ascii_only):
            stream.write(inert_json(piece))  # each piece holds whole strings: escaping it alone is exact
    stream.write("\n")


def write_lines(docs: list[dict[str, Any]], stream: TextIO) -> None:
    """JSON Lines: each document as write() writes it, all in one write (a write and an encoder a document
    cost half of a 10^4-point batch)."""
    encoder = json.JSONEncoder(allow_nan=False, ensure_ascii=not unicode_stream(stream), default=_streamed)
    lines = []
    for doc in docs:
        try:
            lines.append(encoder.encode(doc))
        except _Large:  # an array written block by block, as write() does
            lines.append("".join(_pieces(doc, encoder.ensure_ascii)))
    stream.write(inert_json("\n".join(lines) + "\n") if lines else "")


class _Large(Exception):
    """The document holds an array large enough to be written block by block."""


def _streamed(value: Any) -> Any:
    if isinstance(value, B.JsonArray):
        raise _Large
    raise TypeError(f"{type(value).__name__} is not JSON")


def _pieces(value: Any, ascii_only: bool) -> Iterator[str]:
    """json.dumps(value)'s text in pieces: a document is dicts and lists of plain values and arrays."""
    if isinstance(value, B.JsonArray):
        yield from value.chunks()
    elif isinstance(value, dict):
        if not value:
            yield "{}"
            return
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            key_text = _text(key, ascii_only) if isinstance(key, str) else \
                _text({key: 0}, ascii_only)[1:-4]  # json's own key rules
            yield f"{', ' if i else ''}{key_text}: "
            yield from _pieces(item, ascii_only)
        yield "}"
    elif isinstance(value, (list, tuple)):
        if not value:
            yield "[]"
            return
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ", "
            yield from _pieces(item, ascii_only)
        yield "]"
    else:
        yield _text(value, ascii_only)


def _text(value: Any, ascii_only: bool) -> str:
    return json.dumps(value, allow_nan=False, ensure_ascii=ascii_only)


def minimize_doc(result: Any) -> dict[str, Any]:
    """`minimize --json`: the values found, their loss and gradient norm, why it stopped, and the trace."""

    def number(value: float) -> Any:
        return B.to_json(B.numpy.float64(value))

    doc: dict[str, Any] = {
        "of": result.of, "method": result.method,
        "values": {name: B.to_json(value) for name, value in result.values.items()},
        "loss": number(result.loss), "grad_norm": number(result.grad_norm), "steps": result.steps,
        "stopped": result.stopped,
        "trace": [{"step": entry["step"], "loss": number(entry["loss"]), "grad_norm": number(entry["grad_norm"]),
                   **({"values": {name: B.to_json(value) for name, value in entry["values"].items()}}
                      if "values" in entry else {})} for entry in result.trace],
    }
    if result.explained:
        doc["explain"] = [{"name": shown.name, "rule": shown.rule,
                           "terms": {label: B.to_json(value) for label, value in shown.terms}}
                          for shown in result.explained]
    return doc


def hvp_doc(result: Curvature) -> dict[str, Any]:
    return {"of": result.of, "wrt": result.wrt, "shape": list(result.hvp.shape), "value": B.to_json(result.value),
            "vector": B.to_json(result.vector), "hvp": B.to_json(result.hvp)}


def taylor_doc(result: Taylor, decimal: bool = False) -> dict[str, Any]:
    """The polynomial and one entry per monomial: its powers by variable and its coefficient."""
    return {"of": result.of, "wrt": result.wrt, "at": dict(zip(result.wrt, result.center)), "order": result.order,
            "coefficients": [{"powers": dict(zip(result.wrt, powers)), "coefficient": B.to_json(value)}
                             for powers, value in result.terms],
            "polynomial": result.polynomial(decimal)}


def warned(doc: dict[str, Any], warnings: list[dict[str, Any]]) -> dict[str, Any]:
    """The document with its "warnings" (where a NaN started: program/anomaly.py), when there are any."""
    if warnings:
        doc["warnings"] = warnings
    return doc


def plot_doc(found: Any) -> dict[str, Any]:
    """`plot --json`, the data drawn: a curve's {"of", "wrt", "x", "y", "dy"(, "d2y", "tangent")}, or a contour's
    {"of", "wrt": [A, B], "x", "y", "z", "grad": {A, B}} with z[i][j] at (x[j], y[i])."""
    if isinstance(found.wrt, str):
        doc: dict[str, Any] = {"of": found.of, "wrt": found.wrt, "x": B.to_json(found.x), "y": B.to_json(found.y),
                               "dy": B.to_json(found.dy)}
        if found.d2y is not None:
            doc["d2y"] = B.to_json(found.d2y)
        if found.tangent is not None:
            line = found.tangent
            doc["tangent"] = {"at": line.at, "value": B.to_json(B.numpy.float64(line.value)),
                              "slope": B.to_json(B.numpy.float64(line.slope))}
        return doc
    return {"of": found.of, "wrt": list(found.wrt), "x": B.to_json(found.x), "y": B.to_json(found.y),
            "z": B.to_json(found.z), "grad": {name: B.to_json(g) for name, g in found.grad.items()}}


def steps_doc(found: Any, answer: Derivative, placeholders: list[str]) -> dict[str, Any]:
    """diff's document for the one derivative, with its derivation: each step's rule, before, after and LaTeX."""
    doc = diff_doc([answer], placeholders)
    doc["steps"] = [{"part": step.part, "rule": step.rule, "before": step.before, "after": step.after,
                     "latex": step.latex} for step in found.steps]
    doc["definitions"] = found.definitions
    return doc
