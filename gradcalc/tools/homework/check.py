"""gradcalc check: judge claimed derivatives and values against autograd, and say what is wrong.

A number is compared at the program's values, to the digits it was written
with (0.39 is right for 0.3932); an infinite or NaN value only with the same.
An expression must be an identity: it is compared there and at a few seeded
random points nearby, where the program runs again with its leaves moved,
wherever the derivative is finite there; a claim compared only with infinities
is not confirmed. Nothing is simplified symbolically, so judging cannot hang.
"""

from __future__ import annotations

import functools
import itertools
import math
import operator
import os
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...engine import autodiff, graph, ops, symbolic
from ...engine import backend as B
from ...engine.graph import Node
from ...engine.symbolic import TooLong, is_distribution, operations
from ...errors import (
    GradcalcError,
    LimitExceeded,
    NameNotFound,
    Pos,
    ShapeError,
    Source,
    did_you_mean,
    error_json,
    error_text,
    line_starts,
    pos_at,
)
from ...files import DEFAULT_MAX_FILE_SIZE, entry_problem
from ...language import parser
from ...language import syntax as S
from ...program.api import Run, differentiable_inputs, tolerance
from ...program.builtins import BUILTINS, CONSTANTS
from ...program.notation.reading import (  # the readers too, where the CLI and the tests call them
    Claims,
    Unreadable,
    answers,  # noqa: F401
    claims_of_program,  # noqa: F401
    parse_claim_option,  # noqa: F401
    read_claims,
)
from ...program.notation.resolving import finish

if TYPE_CHECKING:
    from .rubric import Answer

POINTS = 4  # nearby points where an expression claim must hold too
SPREAD = 0.2  # a leaf moves by up to 20% of its size (by up to 0.5 where it is 0): signs and domains hold
ZERO_SPREAD = 0.5
NICE_POWER = 1e6  # a power of ten up to this names a slip of units (1000 for ms and s); 1e30 names none
PATHS_TRIED = 10  # the missing-path diagnosis tries subsets of up to this many chain-rule paths
SEARCHED = 10  # the graph's diagnoses try up to this many masks (relus) and divisors along the path
SHORT_TEXT = 60  # a diagnosis quotes the program's expressions up to this long (a local derivative, a term)
SHOWN_LEAVES = 5  # leaves listed where a claim fails at a nearby point
HELD_TRIED = 8  # a claim right only here is tried nearby with each of up to this many scalar leaves held fixed
REPORTED_ENTRIES = 10_000  # grading sends back values up to this size: the parent grows by the class, not its data
# A wrong claim is shown the correct derivative as diff prints it, if it is read from at most this many
# operations: reading costs about 0.1 ms an operation, so a wrong answer costs about what a right one does
# (a loop of 5,000 steps has some 25,000: 2 s, and its text is 5,000 lines no one reads in feedback).
DERIVATIVE_BUDGET = 2000


@dataclass
class Tolerance:
    """How close is equal: rtol/atol for exact claims; numbers get the digits they were written with."""

    rtol: float
    atol: float
    given: bool = False  # --rtol/--atol given: they replace the rule of written digits

    @classmethod
    def for_dtype(cls, dtype: str, rtol: float | None = None, atol: float | None = None) -> Tolerance:
        loose = dtype == "float32"
        return cls(tolerance("--rtol", rtol) if rtol is not None else (1e-4 if loose else 1e-6),
                   tolerance("--atol", atol) if atol is not None else (1e-6 if loose else 1e-9),
                   rtol is not None or atol is not None)

    def close(self, got: Any, want: Any) -> Any:
        """Elementwise: got equals want (NaN equals NaN; infinities equal themselves)."""
        if got.ndim == 0 and want.ndim == 0 and got.dtype == want.dtype == B.host.float64:  # most claims: 70 µs
            # a call of NumPy's isclose on two numbers, the same test in Python well under one
            g, w = float(got), float(want)
            if g == w or (math.isnan(g) and math.isnan(w)):
                return B.host.bool_(True)
            return B.host.bool_(math.isfinite(g) and math.isfinite(w) and abs(g - w) <= self.atol + self.rtol * abs(w))
        return B.host.isclose(got, want, rtol=self.rtol, atol=self.atol, equal_nan=True)


@dataclass(frozen=True)
class Diagnosis:
    """A known mistake found in a claim: its entry's code, its summary, and what it says of this claim."""

    code: str  # the entry's stable code in DIAGNOSES
    summary: str  # the short form the grading table and the note column show ("sign error")
    detail: str = ""  # the rest, about this claim ("the claim is the negative of ∂L/∂w1")

    @property
    def text(self) -> str:
        return f"{self.summary}: {self.detail}" if self.detail else self.summary


@dataclass
class Verdict:
    """One claim judged."""

    claim: str  # as written
    of: str
    wrt: str | None  # None: a claim about the value of `of`
    line: int | None
    status: str  # "right", "wrong", or "invalid" (it could not be judged: an unknown name, a bad shape)
    kind: str = "expression"  # or "number"
    expected: Any = None  # the correct value at the program's values
    got: Any = None  # the claim's value there
    note: str = ""  # how it was judged: "right to 2 significant digits", "holds at 4 nearby points"
    diagnosis: str = ""  # what is wrong, where a known mistake fits
    derivative: str = ""  # the correct derivative as an expression (gradcalc diff)
    error: dict[str, Any] | None = None  # why an invalid claim could not be judged (the JSON error body)
    error_message: str = ""  # the same for people, with the line and a caret
    wrt2: str | None = None  # a second derivative's other variable (∂²of/∂wrt∂wrt2)
    elided: dict[str, tuple[int, ...]] = field(default_factory=dict)  # grading: "got"/"expected" not kept
    diagnosis_code: str | None = None  # the diagnosis's stable code in DIAGNOSES ("sign", "missing_path"), if any
    diagnosis_summary: str = ""  # its short form: the grading table's and the note column's
    question: str | None = None  # with a key's questions: the one this claim answers (None: not asked)
    points: float | None = None  # what it scored (None: not scored: not asked, or answered again below)
    working: Working | None = None  # a derivation's lines checked one against the next (None: one line)

    @property
    def passed(self) -> bool:
        return self.status == "right"

    def diagnose(self, found: Diagnosis | None) -> None:
        """Record a diagnosis (None: no known mistake fits)."""
        if found is not None:
            self.diagnosis, self.diagnosis_code, self.diagnosis_summary = found.text, found.code, found.summary

    @property
    def label(self) -> str:
        return _derivative_label(self.of, self.wrt, self.wrt2)


@dataclass
class Step:
    """One line of a derivation: where it was written, and whether it follows from the line before."""

    number: int  # its place in the derivation, from 1
    text: str  # as written
    line: int  # where it was written: its line and column in the file (or in --claim's text)
    column: int
    status: str = "unchecked"  # "follows" (line 1: "first"), "broken", "invalid", or "unchecked" (after a break)
    right: bool | None = None  # whether it equals the true value (None: not judged)


@dataclass
class Working:
    """A claim's derivation judged line by line: how far it got, and the first line that does not follow."""

    steps: list[Step]
    filename: str = ""  # where it was written (its file, or --claim)
    follow: int = 0  # the lines that follow, from line 1, before the first break (all of them where none breaks)
    broken: int | None = None  # the first line that does not follow from the one before (or cannot be judged)
    rule: str | None = None  # what went wrong there, where a known mistake fits (WORKING_RULES' codes)
    reason: str = ""  # the same for people: "the product rule drops the term x^2*cos(x)"
    summary: str = ""  # the reason without any expression of the answer (what --reveal verdict shows)

    @property
    def lines(self) -> int:
        return len(self.steps)

    def text(self, reveal: bool = True) -> str:
        """'lines 1-2 follow; line 3 (hw.txt:7) does not follow from line 2: the product rule drops …'."""
        if self.broken is None:
            return f"lines 1-{self.lines} follow"
        follow = f"lines 1-{self.follow} follow; " if self.follow > 1 else ""
        step = self.steps[self.broken - 1]
        where = f"line {self.broken} ({self.filename}:{step.line})" if self.filename else f"line {self.broken}"
        if step.status == "invalid":
            return f"{follow}{where} cannot be judged" + (f": {self.reason}" if self.reason else "")
        said = self.reason if reveal else self.summary
        return f"{follow}{where} does not follow from line {self.broken - 1}" + (f": {said}" if said else "")


# The rules a broken line of a derivation is said to misapply (JSON "rule"), besides DIAGNOSES' codes, which
# name it where the line before is right and the Judge finds the mistake in the broken line itself.
WORKING_RULES = {
    "sign": "a sign error: the line is the negative of the line before",
    "product_rule": "the product rule drops a term",
    "quotient_rule": "the quotient rule drops a term",
    "sum_rule": "the sum rule drops a term",
    "dropped_term": "a term of the line before (or of the derivative) is dropped",
    "chain_rule": "the chain rule's inner derivative is missing: the line before is the line times it",
    "dropped_factor": "a factor of the line before is dropped",
    "power_rule": "a wrong power: the line is the line before times a power of the variable",
    "factor": "a constant factor off: the line is a constant times the line before",
    "invalid": "the line cannot be judged: it does not parse, names no variable of the program, or fails",
}


@dataclass
class Report:
    """A set of claims judged (one submission): verdicts, the first wrong node, or why it was not judged."""

    name: str
    verdicts: list[Verdict] = field(default_factory=list)
    first_wrong: str | None = None  # the wrong claim nearest the output, where several nodes are claimed
    error: dict[str, Any] | None = None  # the submission could not be judged at all
    error_message: str = ""
    answers: list[Answer] = field(default_factory=list)  # with a key's questions (rubric.score): one each
    score: float | None = None  # the points scored, with a key's questions; else None
    max_score: float | None = None

    @property
    def right(self) -> int:
        return sum(v.passed for v in self.verdicts)

    @property
    def derivations(self) -> tuple[int, int]:
        """Its derivations' lines that follow before each one's first break, and their lines: (follow, lines)."""
        worked = [v.working for v in self.verdicts if v.working is not None]
        return sum(w.follow for w in worked), sum(w.lines for w in worked)

    @property
    def passed(self) -> bool:
        """All right: every question full marks (with a key's questions), else every claim right."""
        if self.max_score is not None:
            return self.error is None and all(answer.status == "right" for answer in self.answers)
        return self.error is None and bool(self.verdicts) and self.right == len(self.verdicts)

    def compact(self, limit: int = REPORTED_ENTRIES) -> Report:
        """The report as grading keeps it: a value of more than `limit` entries by its shape only."""
        for verdict in self.verdicts:
            for key in ("expected", "got"):
                value = getattr(verdict, key)
                if value is not None and value.size > limit:
                    verdict.elided[key] = tuple(value.shape)
                    setattr(verdict, key, None)
        return self

    def first_problem(self) -> str:
        """One line for the grading table: with a key's questions, the first question not scored in full."""
        if self.error is not None:
            line, column = self.error.get("line"), self.error.get("column")
            return (f"line {line}, column {column}: " if line else "") + self.error["message"]
        chosen: Verdict | None
        if self.answers:
            answer = next((a for a in self.answers if a.status != "right"), None)
            if answer is None or answer.verdict is None:
                return f"{answer.question.label} not answered" if answer is not None else ""
            chosen = self.verdicts[answer.verdict]
        elif not self.verdicts:
            return "no claims found"
        else:
            chosen = next((v for v in self.verdicts if v.label == self.first_wrong), None) or \
                next((v for v in self.verdicts if not v.passed), None)
        if chosen is None:
            return ""
        if chosen.status == "invalid":
            return f"{chosen.claim}: {chosen.error['message'] if chosen.error else 'invalid'}"
        return f"{chosen.label} wrong" + (f": {chosen.diagnosis_summary}" if chosen.diagnosis_code else "")


def failed_report(name: str, error: GradcalcError) -> Report:
    return Report(name, error=error_json(error)["error"], error_message=error_text(error))


# --- judging ----------------------------------------------------------------------------------

@dataclass
class _Sample:
    """Both sides of a claim at one point: the program's values, or a nearby point."""

    run: Run
    got: Any
    want: Any
    problem: str = ""  # why the claim has no value to compare here (it fails there, or has another shape)

    @property
    def clean(self) -> bool:
        """Both sides finite and of fitting shapes: a point a diagnosis can use."""
        return not self.problem and bool(B.host.isfinite(self.got).all() and B.host.isfinite(self.want).all())


@dataclass
class _Case:
    """What a detector in DIAGNOSES looks at: the claim, and its value against the truth.

    A shape detector gets got and want at the program's values; a value detector the samples (the program's
    values, and for an expression the nearby points) and how a candidate value is matched there."""

    claim: S.Claim
    samples: list[_Sample] = field(default_factory=list)
    matches: Callable[[Any, _Sample], bool] = lambda value, sample: False
    several_points: bool = False  # an expression, compared at several points (a number at one only)
    matches_sum: Callable[[Any, _Sample], bool] = lambda value, sample: False  # for sums over chain-rule paths
    got: Any = None
    want: Any = None
    paths: Diagnosis | bool | None = None  # the chain-rule paths' diagnosis, once worked out (False: none)

    @property
    def label(self) -> str:
        return _label(self.claim)


# Where a mask's local derivative is left out: each primitive's inputs that it selects, and its mask as written
# (the inputs' texts given): relu's 1[z > 0], abs's sign(x), maximum's 1[a > b], where's 1[c ≠ 0], clip's.
_MASKS: dict[str, dict[int, Callable[[list[str]], str]]] = {
    "relu": {0: lambda t: f"1[{t[0]} > 0]"},
    "abs": {0: lambda t: f"sign({t[0]})"},
    "maximum": {0: lambda t: f"1[{t[0]} > {t[1]}]", 1: lambda t: f"1[{t[1]} > {t[0]}]"},
    "minimum": {0: lambda t: f"1[{t[0]} < {t[1]}]", 1: lambda t: f"1[{t[1]} < {t[0]}]"},
    "where": {1: lambda t: f"1[{t[0]} ≠ 0]", 2: lambda t: f"1[{t[0]} = 0]"},
    "clip": {0: lambda t: f"1[{t[1]} ≤ {t[0]} ≤ {t[2]}]"},
}


@dataclass
class _Surroundings:
    """The key's graph between a claim's variable and its output at one run, for the detectors that recompute
    the gradient with one piece changed: a mask taken as 1, a term of the output left out, a divisor.

    Each change is linear in the backward pass, so the gradient so changed is the truth plus the change
    carried from where it is made down to the variable: one partial backward pass, not a new graph."""

    run: Run
    output: Node
    target: Node
    seed: Any  # the output's starting gradient: 1, or ones for a tensor output (the gradient of its sum)
    between: list[Node]  # every node on a path from the variable to the output, oldest first: both included
    _found: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, run: Run, of: str, wrt: str) -> _Surroundings | None:
        output, target = run.node(of), run.node(wrt, prefer_leaf=True)
        if not target.requires_grad or operations(output, {}, DERIVATIVE_BUDGET) > DERIVATIVE_BUDGET:
            return None
        above = differentiable_inputs(output) | {output}
        if target not in above:
            return None
        reached = {target}
        for node in sorted(above, key=operator.attrgetter("seq")):  # creation order: inputs first
            if node is not target and any(parent in reached for parent in node.inputs):
                reached.add(node)
        between = sorted(reached, key=operator.attrgetter("seq"))
        with B.using(run.device, run.dtype, run.max_elements):
            seed = autodiff.seed_for(output, "ones" if output.shape else None)
        return cls(run, output, target, seed, between)

    def once(self, key: str, make: Callable[[], Any]) -> Any:
        """make(), made once for this point (its results are the same for every claim: grading reuses them)."""
        if key not in self._found:
            with B.using(self.run.device, self.run.dtype, self.run.max_elements), B.errstate():
                self._found[key] = make()
        return self._found[key]

    def _adjoint(self, node: Node) -> Any:
        """∂output/∂node for a masking node: the gradient reaching it from every use (one backward pass for all
        the masks; kept for them only, not for every node: a graph of big tensors would hold them all)."""
        return self.once("adjoints", lambda: autodiff.backward(
            self.output, self.seed, list(dict.fromkeys(n for n, _ in self.masks().values()))))[node]

    def _pulled(self, node: Node, seed: Any) -> Any:
        """A gradient `seed` at node carried down to the variable, on the host."""
        with B.using(self.run.device, self.run.dtype, self.run.max_elements), B.errstate():
            found = autodiff.backward(node, seed, [self.target]).get(self.target)
            return B.to_host(found if found is not None else autodiff.zeros_like(self.target))

    def _index(self, node: Node) -> int:
        return self.once("index", lambda: {n: i for i, n in enumerate(self.between)})[node]

    def masks(self) -> dict[str, tuple[Node, int]]:
        """The masking nodes on the path and which input each masks (by a key the same at every point)."""
        def make() -> dict[str, tuple[Node, int]]:
            found = {}
            for node in self.between:
                selected = _MASKS.get(node.op.name, {}) if node.op is not None else {}
                for i in selected:
                    if node.inputs[i] in self._index_set() and node.op.vjps[i] is not None:  # type: ignore[union-attr]
                        found[f"{self._index(node)} {i}"] = node, i
            return dict(list(found.items())[:SEARCHED])
        return self.once("masks", make)

    def _index_set(self) -> set[Node]:
        return self.once("set", lambda: set(self.between))

    def unmasked(self, want: Any, node: Node, i: int) -> Any:
        """The gradient with node's local derivative for input i taken as 1: the truth plus g - rule(g)."""
        def make() -> Any:
            op, parent, g = node.op, node.inputs[i], self._adjoint(node)
            assert op is not None
            masked = _rule(node, i)(ops.numeric, g, node.value, *[p.value for p in node.inputs], *node.params)
            passed = g
            if op.broadcasts:
                masked, passed = (ops.numeric.sum_to(v, parent.shape) if v.shape != parent.shape else v
                                  for v in (masked, passed))
            return self._pulled(parent, passed - masked)
        return want + self.once(f"unmasked {self._index(node)} {i}", make)  # the same for every claim

    def terms(self) -> dict[str, tuple[Node, Any]]:
        """The output's terms, where it is a sum (through unnamed +, - and negation), that depend on the
        variable: each with the gradient reaching it through the sum (-1 for a term subtracted)."""
        def make() -> dict[str, tuple[Node, Any]]:
            found, stack = {}, [(self.output, self.seed)]
            on_path = self._index_set()
            while stack:
                node, g = stack.pop()
                if node not in on_path:
                    continue
                op = node.op
                if op is None or op.name not in ("add", "sub", "neg") or (node is not self.output and node.name):
                    found[str(self._index(node))] = node, g
                    continue
                for i, parent in enumerate(node.inputs):
                    part = _rule(node, i)(ops.numeric, g, node.value, *[p.value for p in node.inputs])
                    stack.append((parent, ops.numeric.sum_to(part, parent.shape) if part.shape != parent.shape
                                  else part))
            return found
        return self.once("terms", make)

    def without(self, want: Any, term: Node, seed: Any) -> Any:
        """The gradient with one term of the output left out."""
        return want - self.once(f"term {self._index(term)}", lambda: self._pulled(term, seed))

    def divisors(self) -> dict[str, tuple[Node, int, float]]:
        """What the gradient is divided by on its way down, on every path (a mean over n, a division by N, a
        product with 1/N): each node, its input on the path, and the divisor's value here."""
        def make() -> dict[str, tuple[Node, int, float]]:
            on_path = self._index_set()
            found = {}
            tried = 0  # each try walks the graph: at most SEARCHED of them, in a graph of DERIVATIVE_BUDGET nodes
            for node in self.between:
                op = node.op
                if op is None or op.name not in ("mean", "div", "mul"):
                    continue
                i = 0 if node.inputs[0] in on_path else 1
                size = None
                if op.name == "mean":
                    size = node.inputs[0].value.size / max(1, node.value.size)
                elif len(node.inputs) == 2 and node.inputs[1 - i] not in on_path and node.inputs[1 - i].shape == ():
                    by, other = node.inputs[1 - i], float(node.inputs[1 - i].value)
                    if op.name == "div" and i == 0:
                        size = other
                    elif op.name == "mul" and other and (_is_reciprocal(by) or (not by.requires_grad and _nice(other))):
                        size = 1 / other  # (1/N)*sum(...), 0.25*sum(...); not a variable's value (w*h: a factor h)
                if size is None or not math.isfinite(size) or abs(size) <= 1:
                    continue
                tried += 1
                if self._on_every_path(node):
                    found[str(self._index(node))] = node, i, size
                if tried >= SEARCHED:
                    break
            return found
        return self.once("divisors", make)

    def _on_every_path(self, node: Node) -> bool:
        """Whether every path from the output down to the variable passes through node."""
        on_path, seen, stack = self._index_set(), {node}, [self.output]
        while stack:
            current = stack.pop()
            if current is self.target:
                return False
            if current in seen:
                continue
            seen.add(current)
            stack.extend(parent for parent in current.inputs if parent in on_path)
        return True

    def text(self, node: Node, expand: bool = False) -> str:
        """A node as the program names it, or its expression in the program's names (NAME = ... with expand)."""
        symbols = self.once("symbols", lambda: {**{n: name for name, n in self.run.leaves.items()},
                                                 **{n: name for name, n in self.run.frame.items()}})
        name = symbols.get(node)
        if name is not None and not expand:
            return name
        others = {n: s for n, s in symbols.items() if n is not node}
        with B.using(self.run.device, self.run.dtype, self.run.max_elements), B.errstate():
            text = symbolic.text_of(node, others, set(self.run.frame))
        if len(text) > SHORT_TEXT:
            text = text[:SHORT_TEXT - 1] + "…"
        return f"{name} = {text}" if name is not None else text

    def mask_text(self, node: Node, i: int) -> str:
        assert node.op is not None
        return _MASKS[node.op.name][i]([self.text(parent) for parent in node.inputs])

    def gradient_text(self, term: Node, seed: Any) -> str:
        """The gradient a term gives the variable, as diff prints it ('' where that is long)."""
        return self.once(f"term text {self._index(term)}", lambda: self._gradient_text(term, seed))

    def _gradient_text(self, term: Node, seed: Any) -> str:
        symbols = {**{n: name for name, n in self.run.leaves.items()},
                   **{n: name for name, n in self.run.frame.items() if n is not term}}
        wrt = symbols.get(self.target, "")
        try:
            with B.using(self.run.device, self.run.dtype, self.run.max_elements), B.errstate():
                found = autodiff.backward(term, graph.constant(seed), [self.target], create_graph=True)
                gradient = found.get(self.target)
                if gradient is None or operations(gradient, symbols, DERIVATIVE_BUDGET) > DERIVATIVE_BUDGET:
                    return ""
                described = symbolic.describe("", (wrt,), gradient, symbols, set(self.run.frame))
        except GradcalcError:
            return ""
        return described.text if not described.where and len(described.text) <= SHORT_TEXT else ""


class Judge:
    """Judges claims against one run of the key program (kept with its nearby runs for many submissions).

    The run must keep its values (Program.run(keep_values=True)): explaining a
    wrong answer walks the graph.
    """

    def __init__(self, run: Run, tolerance: Tolerance | None = None, points: int = POINTS, seed: int = 0,
                 terms: str = "shortest") -> None:
        self.run = run
        self.terms = terms  # how a correct derivative is written: leaves, intermediates or shortest (diff's)
        self.tolerance = tolerance or Tolerance.for_dtype(run.dtype)  # the run's, whatever the engine's now
        self.points = points
        self.seed = seed
        self._nearby: dict[str, list[Run]] = {}
        self._held: dict[tuple[str, tuple[str, ...]], list[Run]] = {}  # nearby runs with some leaves held fixed
        self._gradients: dict[tuple[int, str], dict[str, Any]] = {}
        self._jacobians: dict[tuple[int, str, str], Any] = {}
        self._paths: dict[tuple[int, str, str], list[tuple[str, Any]] | None] = {}
        self._derivatives: dict[tuple[str, str], tuple[str, str]] = {}  # (text, why there is none)
        self._surroundings: dict[tuple[int, str, str], _Surroundings | None] = {}
        self._functions = frozenset({*BUILTINS, *run.interpreter.functions})  # what a claim may call

    def report(self, name: str, *groups: tuple[Claims, Source]) -> Report:
        """Judge each group of claims (claims and the source they were written in) as one submission."""
        judged = [self._judged(claim, source) if isinstance(claim, S.Claim) else (_unreadable(claim), None)
                  for claims, source in groups for claim in claims]
        for verdict, finished in judged:  # a wrong derivative is shown with the right one
            if verdict.status == "wrong" and finished is not None and finished.wrt is not None:
                # the finished names (w1 for a claim written with w_1): the verdict keeps them as written
                verdict.derivative, why = self._derivative(finished.of, finished.wrt, finished.wrt2)
                verdict.note = verdict.note or why
        return Report(name, [verdict for verdict, _ in judged], self._first_wrong(judged))

    def verdict(self, claim: S.Claim, source: Source) -> Verdict:
        """One claim as written (the verdict reports it so), finished against the program's names by the
        notation, then judged; invalid where either fails. The claim given is not changed."""
        return self._judged(claim, source)[0]

    def _judged(self, claim: S.Claim, source: Source) -> tuple[Verdict, S.Claim | None]:
        """The verdict, and the claim finished against the program's names (None where that failed)."""
        verdict = Verdict(claim.text, claim.of, claim.wrt, claim.pos.line if source.filename != "--claim" else None,
                          "wrong", "number" if _is_constant(claim.claimed) else "expression", wrt2=claim.wrt2)
        finished = None
        try:
            finished = finish(claim, self.run.frame, self._functions, source.text, self.run.interpreter)
            verdict.kind = "number" if _is_constant(finished.claimed) else "expression"  # [0.3, 0.1]^T is a number
            self._check_names(finished)
            self._judge(finished, source, verdict)
        except (GradcalcError, RecursionError) as caught:
            # Too deep: placed at the line that is (the answer's), not at the claim's first line.
            exc = caught if isinstance(caught, GradcalcError) else \
                self._too_deep().at(Pos(*_written(claim.claimed, source.text)[1:]))
            exc.at(claim.pos).within(source)
            verdict.status, verdict.error, verdict.error_message = "invalid", error_json(exc)["error"], error_text(exc)
        if claim.working and finished is not None and verdict.status != "invalid":
            verdict.working = self._working(claim, finished, source)
        return verdict, finished

    def _too_deep(self) -> LimitExceeded:
        """A line nested past what Python's stack allows, which --max-depth sets (a long + - * chain is no nesting)."""
        limit = self.run.program.max_depth
        return LimitExceeded(f"this line nests too deeply to judge at --max-depth {limit}",
                             "write it with fewer nested parts, or raise the limit with --max-depth")

    def _check_names(self, claim: S.Claim) -> None:
        frame = self.run.frame
        known = list(frame)
        for name in (claim.of, claim.wrt, claim.wrt2):  # what is differentiated, and by what: variables only
            if name is not None and name not in frame and name in CONSTANTS:
                raise NameNotFound(f"'{name}' is a constant ({B.format_number(CONSTANTS[name])}), not a variable "
                                   "of the program: a claim is about a variable's value or derivative",
                                   "name one of its variables: " + ", ".join(known[:12]), claim.pos)
        for name in (claim.wrt, claim.wrt2):
            if name is not None and name in self.run.constants:  # data, as requires_grad=False is in PyTorch
                raise NameNotFound(f"'{name}' is a constant of the program (declared `const`): it has no derivative",
                                   "claim derivatives with respect to its variables: "
                                   + ", ".join(list(self.run.leaves)[:12]), claim.pos)
        for name, pos in [(claim.of, claim.pos), (claim.wrt, claim.pos), (claim.wrt2, claim.pos)] + \
                [(n.name, n.pos) for n in S.walk(claim.claimed) if isinstance(n, S.Name)]:
            if name is not None and name not in frame and name not in CONSTANTS:
                raise NameNotFound(f"the claim names '{name}', which the program does not have",
                                   did_you_mean(name, known) or "its variables are: " + ", ".join(known[:12]), pos)

    def _judge(self, claim: S.Claim, source: Source, verdict: Verdict) -> None:
        base = self.run
        try:
            got = base.evaluate(claim.claimed, source)
        except ShapeError as exc:  # W (…) where Wᵀ (…) is meant may not even multiply: wrong, if turning W fixes it
            if not self._judge_unshaped(claim, verdict):  # else wrong all the same: its shapes do not combine
                verdict.expected = self._truth(base, claim, -1)
                verdict.diagnose(_entry("shape").found(exc.message, summary="the claim's shapes do not fit"))
            return
        want = self._truth(base, claim, got.ndim)
        verdict.expected, verdict.got = want, got
        if not _broadcasts(got.shape, want.shape):
            verdict.diagnose(self._shape_diagnosis(claim, got, want))
            return
        if verdict.kind == "number":
            self._judge_number(claim, verdict, got, want)
            return
        samples = [_Sample(base, got, want)]
        exact = self.tolerance.close(got, want)
        if not exact.all():
            samples += [s for s in self._nearby_samples(claim, source, got.ndim) if s.clean]
            verdict.diagnose(_finite_against_not(got, want, exact, _label(claim)) or
                             self._diagnose(claim, samples, self._exact_match, several_points=True) or
                             _not_matched(got, want, exact, _label(claim)))
            return
        # Right here. Nearby, it must agree wherever the truth is finite: a claim that is NaN, infinite or
        # fails where the truth is a number is wrong there (else 4 + 0*exp(1e6*(x - 2)^2) would pass at x = 2,
        # every nearby point skipped). Where the truth is not finite nothing is compared.
        compared = 0
        confirmed = B.host.isfinite(want)  # entries compared with a finite value somewhere
        for sample in self._nearby_samples(claim, source, got.ndim):
            agrees = self._agrees_nearby(sample)
            if agrees is False:
                verdict.diagnose(self._held_constant(claim, source, got.ndim) or self._only_here(claim, sample))
                return
            if agrees:
                compared += 1
                confirmed = confirmed | B.host.isfinite(sample.want)
        if self.points and not confirmed.all():
            # Compared only as infinities (or NaN): inf = inf says nothing of which expression it is.
            where = f" at {int((~confirmed).sum())} of {confirmed.size} entries" if confirmed.ndim else ""
            verdict.diagnose(_entry("not_confirmed").found(
                f"{_label(claim)} is not finite{where} at the program's values ({_short(want)}) nor at any nearby "
                f"point, so the claim was compared there only with infinities or NaN, which any expression infinite "
                f"there matches"))
            return
        verdict.status = "right"
        verdict.note = (f"holds at the program's values and at {compared} nearby point{'s' * (compared != 1)}"
                        if compared else "checked at the program's values only" + (
                            " (--points 0)" if self.points == 0 else ": no nearby point could be used"))

    def _agrees_nearby(self, sample: _Sample) -> bool | None:
        """Whether the claim equals the truth at a nearby point wherever the truth is finite there
        (None: it is finite nowhere there, so nothing could be compared)."""
        want = sample.want
        finite = B.host.isfinite(want)
        if not finite.any():
            return None
        if sample.problem:
            return False
        got = B.host.broadcast_to(sample.got, want.shape)
        if finite.all():  # most points: compared whole, so a scalar takes close()'s fast path, not NumPy's isclose
            return bool(self.tolerance.close(got, want).all())
        return bool(self.tolerance.close(got[finite], want[finite]).all())

    def _judge_number(self, claim: S.Claim, verdict: Verdict, got: Any, want: Any) -> None:
        units = None if self.tolerance.given else _units(claim.claimed)
        exact = self.tolerance.close(got, want)
        if exact.all():  # an infinite value equals only the same infinity, NaN only NaN (written inf, nan)
            verdict.status = "right"
            return
        finite_claim = _finite_against_not(got, want, exact, _label(claim))
        if finite_claim is not None:  # a number is never right for an infinite or undefined value, to any digits
            verdict.diagnose(finite_claim)
            return
        if units is not None:
            rounded, truncated = _to_digits(got, want, units)
            if (exact | rounded | truncated).all():
                digits = _significant_digits(claim.claimed)
                verdict.status = "right"
                how = "truncated" if (truncated & ~rounded & ~exact).any() else "rounded"
                verdict.note = (f"{how} to {digits} significant digit{'s' * (digits != 1)}" if digits else
                                f"{how} to the digits written") + f" (the value is {_short(want)})"
                return

        coarse = units is not None and _significant_digits(claim.claimed) == 1

        def matches(value: Any, sample: _Sample) -> bool:
            """A candidate value (the negative, a multiple), to the digits written."""
            close = self.tolerance.close(sample.got, value)
            if units is not None:
                rounded, truncated = _to_digits(sample.got, value, units)
                close = close | rounded | truncated
            return bool(close.all())

        def matches_sum(value: Any, sample: _Sample) -> bool:
            """A sum over some paths: rounded only, and not to one digit, which fits too many sums to tell one."""
            close = self.tolerance.close(sample.got, value)
            if units is not None and not coarse:
                close = close | _to_digits(sample.got, value, units)[0]
            return bool(close.all())

        samples = [_Sample(self.run, got, want)]
        verdict.diagnose(self._diagnose(claim, samples, matches, several_points=False, matches_sum=matches_sum)
                         or _not_matched(got, want, exact, _label(claim)) or _last_digit(got, want, units))

    def _exact_match(self, value: Any, sample: _Sample) -> bool:
        return bool(self.tolerance.close(sample.got, value).all())

    # --- the truth at a point -------------------------------------------------------------------

    def _truth(self, run: Run, claim: S.Claim, rank: int) -> Any:
        """The correct value of what the claim claims at this run (rank: the claimed value's ndim).

        For a tensor output y, a claim of the Jacobian's rank (y.shape + x.shape) is
        about the Jacobian; any other about the gradient of sum(y), which is what
        PyTorch's y.backward(torch.ones_like(y)) leaves in x.grad.
        """
        if claim.wrt is None:
            return run.value(claim.of)
        if claim.wrt2 is not None:  # ∂²of/∂wrt∂wrt2: the Hessian's block
            key3 = (id(run), claim.of, f"{claim.wrt}\0{claim.wrt2}")
            if key3 not in self._jacobians:
                self._jacobians[key3] = run.hessian(claim.of, [claim.wrt, claim.wrt2]).blocks[0][-1]
            return self._jacobians[key3]
        output_rank = len(run.node(claim.of).shape)
        if output_rank and rank == output_rank + len(run.node(claim.wrt, prefer_leaf=True).shape):
            key = (id(run), claim.of, claim.wrt)
            if key not in self._jacobians:
                self._jacobians[key] = run.jacobian(claim.of, [claim.wrt]).blocks[0]
            return self._jacobians[key]
        return self._every_gradient(run, claim.of)[claim.wrt]

    def _every_gradient(self, run: Run, of: str) -> dict[str, Any]:
        """∂of/∂name for every leaf and variable at this run (of sum(of) for a tensor), in one backward pass."""
        key = (id(run), of)
        if key not in self._gradients:
            names = [name for name in dict.fromkeys([*run.leaves, *run.frame]) if name not in run.constants]
            self._gradients[key] = run.grad(of, names, "ones" if run.node(of).shape else None).grads
        return self._gradients[key]

    def _nearby_runs(self, of: str) -> list[Run]:
        """The program run at seeded points near its values: every leaf moved, or, where that fails
        (a leaf used as a count or a size), only the leaves `of` depends on differentiably."""
        if of not in self._nearby:
            leaves = list(self.run.leaves)
            runs = self._moved(leaves)
            if len(runs) * 2 < self.points:
                connected = self.run.connected_leaves(of)
                if connected != leaves:
                    runs = self._moved(connected)
            self._nearby[of] = runs
        return self._nearby[of]

    def _moved(self, names: list[str]) -> list[Run]:
        random = B.Random(self.seed)
        runs = []
        for _ in range(self.points):
            changes = {}
            for name in names:
                value = self.run.leaves[name].value
                step = 2 * random.uniform(value.shape) - 1
                if _is_distribution(value):  # a one-hot target, probabilities: moved within the distributions
                    moved = value * (1 + SPREAD * step)
                    changes[name] = moved / moved.sum(axis=-1, keepdims=True)
                else:
                    changes[name] = value + step * (SPREAD * B.xp.abs(value) + ZERO_SPREAD * (value == 0))
            try:
                runs.append(self.run.rerun(changes))
            except GradcalcError:
                continue  # the program fails there (a count that must be whole, a domain): another point
        return runs

    def _nearby_samples(self, claim: S.Claim, source: Source, rank: int,
                        runs: list[Run] | None = None) -> list[_Sample]:
        """Both sides at each nearby point (or at `runs`) where the truth exists (rank: the claim's ndim at the
        program's values); where the claim fails there, or has another shape, its sample says why."""
        samples = []
        for run in self._nearby_runs(claim.of) if runs is None else runs:
            got, problem = None, ""
            try:
                got = run.evaluate(claim.claimed, source)
            except GradcalcError as exc:
                problem = f"the claim cannot be evaluated ({exc.message})"
            try:
                want = self._truth(run, claim, rank if got is None else got.ndim)
            except GradcalcError:
                continue  # the key has no derivative there: nothing to compare with
            if got is not None and not _broadcasts(got.shape, want.shape):
                problem = f"the claim has shape {_shape(got.shape)}"
            samples.append(_Sample(run, got, want, problem))
        return samples

    # --- explaining a wrong answer --------------------------------------------------------------

    def _held_constant(self, claim: S.Claim, source: Source, rank: int) -> Diagnosis | None:
        """A claim right here and wrong nearby that holds nearby with some leaves held at their values: those
        are constants to the student (a batch size, a label), which the program could declare `const`.
        Tried holding each scalar leaf alone, then every integer scalar, then every leaf the claim does not name."""
        leaves = self.run.leaves
        variables = {claim.of, claim.wrt, claim.wrt2}  # what is differentiated, and by what, is no constant
        named = {node.name for node in S.walk(claim.claimed) if isinstance(node, S.Name)} | variables
        scalars = sorted((name for name, node in leaves.items() if node.value.shape == () and name not in variables),
                         key=lambda name: name in named)  # those the claim does not name first
        tried = [[name] for name in scalars[:HELD_TRIED]]
        tried.append([name for name in scalars if float(leaves[name].value).is_integer()])
        tried.append([name for name in leaves if name not in named])
        for held in dict.fromkeys(tuple(names) for names in tried if 0 < len(names) < len(leaves)):
            runs = self._held.get((claim.of, held))
            if runs is None:
                runs = self._moved([name for name in leaves if name not in held])
                if len(runs) * 2 < self.points:
                    runs = self._moved([name for name in self.run.connected_leaves(claim.of) if name not in held])
                self._held[claim.of, held] = runs
            agreed = [self._agrees_nearby(sample) for sample in self._nearby_samples(claim, source, rank, runs)]
            if any(agreed) and False not in agreed:
                declared = " and ".join(f"`const {name} = {_short(B.to_host(leaves[name].value))}`" for name in held)
                listed = held[0] if len(held) == 1 else ", ".join(held[:-1]) + " and " + held[-1]
                one = len(held) == 1
                return _entry("held_constant").found(
                    f"held at {'its value' if one else 'their values'}, the claim holds at every nearby point. If "
                    f"{listed} {'is' if one else 'are'} data (a batch size, a label), declare {declared}; if a "
                    f"variable, the claim wrote {'its value' if one else 'their values'} where the name belongs",
                    summary=f"right if {listed} {'is a constant' if len(held) == 1 else 'are constants'}")
        return None

    def _only_here(self, claim: S.Claim, sample: _Sample) -> Diagnosis:
        moved = [(name, node.value) for name, node in sample.run.leaves.items() if node.value.shape == ()]
        where = ", ".join(f"{name} = {float(value):.3g}" for name, value in moved[:SHOWN_LEAVES])
        where += ", …" if len(moved) > SHOWN_LEAVES else ""
        gives = sample.problem or f"the claim gives {_short(sample.got)}"
        return _entry("only_here").found(f"it is not an identity. Nearby, at {where or 'moved leaves'}, "
                                         f"{gives} but {_label(claim)} = {_short(sample.want)}")

    def _shape_diagnosis(self, claim: S.Claim, got: Any, want: Any) -> Diagnosis | None:
        """What is wrong with a claim of a shape that does not fit: the first entry of DIAGNOSES that says."""
        case = _Case(claim, got=got, want=want)
        return next((found for entry in DIAGNOSES if entry.shape is not None
                     and (found := entry.shape(self, case)) is not None), None)

    def _diagnose(self, claim: S.Claim, samples: list[_Sample], matches: Callable[[Any, _Sample], bool],
                  several_points: bool, matches_sum: Callable[[Any, _Sample], bool] | None = None
                  ) -> Diagnosis | None:
        """What is wrong with a claim of the right shape and the wrong value: the first entry of DIAGNOSES
        whose mistake, made on the truth, gives the claim at every sample."""
        case = _Case(claim, samples, matches, several_points, matches_sum or matches)
        return next((found for entry in DIAGNOSES if entry.value is not None
                     and (found := entry.value(self, case)) is not None), None)

    # The detectors DIAGNOSES names, in its order: a Diagnosis where the mistake fits, else None.

    def _transposed_shape(self, case: _Case) -> Diagnosis | None:
        got, want = case.got, case.want
        if got.ndim == 2 and got.shape == want.shape[::-1] and self.tolerance.close(got.T, want).all():
            return _entry("transposed").found(f"the claim is the transpose of {case.label}")
        return None

    def _not_summed(self, case: _Case) -> Diagnosis | None:
        return self._per_example(case, "not_summed", "summed", "a value broadcast over a batch gets the sum of "
                                 "the batch's gradients")

    def _not_averaged(self, case: _Case) -> Diagnosis | None:
        return self._per_example(case, "not_averaged", "averaged", "the loss is a mean over the batch, so a value "
                                 "broadcast over it gets the mean of the batch's gradients")

    def _per_example(self, case: _Case, code: str, how: str, why: str) -> Diagnosis | None:
        """One gradient per example where the batch's sum (or mean) is meant: reduced, the claim is right."""
        got, want = case.got, case.want
        axes = _summed_axes(got.shape, want.shape)
        reduced = (got.sum if how == "summed" else got.mean)(axis=axes) if axes else None
        if reduced is not None and self.tolerance.close(reduced.reshape(want.shape), want).all():
            listed = ", ".join(map(str, axes))
            return _entry(code).found(f"{how} over axis {listed} the claim is {case.label} ({why}), but as "
                                      f"written it has shape {_shape(got.shape)}")
        return None

    def _misshapen(self, case: _Case) -> Diagnosis:
        return _entry("shape").found(summary=f"the claim has shape {_shape(case.got.shape)} but {case.label} has "
                                             f"shape {_shape(case.want.shape)}")

    def _transposed(self, case: _Case) -> Diagnosis | None:
        first = case.samples[0]
        square = first.want.ndim == 2 and first.want.shape[0] == first.want.shape[1]
        if square and first.got.shape == first.want.shape and all(case.matches(s.want.T, s) for s in case.samples):
            return _entry("transposed").found(f"the claim is the transpose of {case.label}")
        return None

    def _sign(self, case: _Case) -> Diagnosis | None:
        if all(case.matches(-s.want, s) for s in case.samples) and any(B.host.any(s.want != 0) for s in case.samples):
            return _entry("sign").found(f"the claim is the negative of {case.label}")
        return None

    def _factor(self, case: _Case) -> Diagnosis | None:
        factor = _factor(case.samples[0])
        if factor is not None and ((case.several_points and len(case.samples) > 1) or _nice(factor)) \
                and all(case.matches(factor * s.want, s) for s in case.samples):
            return _entry("factor").found(f"the claim is {_ratio(factor)} × {case.label}")
        return None

    def _path(self, case: _Case, code: str) -> Diagnosis | None:
        """The chain-rule paths' diagnosis (worked out once for the three entries), if it is `code`'s."""
        if case.paths is None:
            claim = case.claim
            case.paths = (self._path_diagnosis(claim, case.samples, case.matches_sum)
                          if claim.wrt is not None and claim.wrt2 is None and case.samples[0].want.shape == ()
                          else None) or False
        return case.paths if isinstance(case.paths, Diagnosis) and case.paths.code == code else None

    def _judge_unshaped(self, claim: S.Claim, verdict: Verdict) -> bool:
        """A claim whose shapes do not fit, but would with a matrix transposed: wrong, with that diagnosis."""
        if claim.wrt is None:
            return False
        for slip, (fixed,) in self._turned_values(claim, [self.run]):
            try:
                want = self._truth(self.run, claim, fixed.ndim)
            except GradcalcError:
                continue
            if fixed.shape == want.shape and self.tolerance.close(fixed, want).all():
                verdict.expected = want
                verdict.diagnose(_entry("transpose_slip").found(f"{slip} the shapes fit and the claim is "
                                                                f"{_label(claim)}"))
                return True
        return False

    def _transpose_slip(self, case: _Case) -> Diagnosis | None:
        """W x where Wᵀ x is meant (backpropagation's usual slip): the claim with one matrix turned is right."""
        claim, samples = case.claim, case.samples
        for slip, values in self._turned_values(claim, [s.run for s in samples]):
            if all(v.shape == s.want.shape and case.matches(s.want, _Sample(s.run, v, s.want))
                   for v, s in zip(values, samples)):
                return _entry("transpose_slip").found(f"{slip} the claim is {case.label}")
        return None

    def _turned_values(self, claim: S.Claim, runs: list[Run]) -> Iterator[tuple[str, list[Any]]]:
        """For each matrix the claim names, turned everywhere and then (where it appears more than once) at
        each place alone: what the slip was ('with Xᵀ for X'), and the claim's value at each run so turned."""
        source = Source(claim.text, "<claim>")
        for name in _matrices(claim.claimed, self.run):
            for slip, turned in _turnings(claim.claimed, name):
                try:
                    yield slip, [run.evaluate(turned, source) for run in runs]
                except GradcalcError:
                    continue

    def _upside_down(self, case: _Case) -> Diagnosis | None:
        """dw1/dL where dL/dw1 is meant: the claim is the derivative the other way up."""
        claim = case.claim
        if claim.wrt is None or claim.wrt2 is not None or claim.wrt == claim.of \
                or claim.of not in self.run.leaves or claim.wrt in self.run.leaves:
            return None
        turned = S.Claim(claim.wrt, claim.of, claim.claimed, claim.pos)
        try:
            if all(case.matches(self._truth(s.run, turned, s.got.ndim), s) for s in case.samples):
                return _entry("upside_down").found(f"the claim is {_label(turned)}; the output goes on top, "
                                                   f"d{claim.wrt}/d{claim.of}")
        except GradcalcError:
            pass
        return None

    def _path_diagnosis(self, claim: S.Claim, samples: list[_Sample],
                        matches: Callable[[Any, _Sample], bool]) -> Diagnosis | None:
        assert claim.wrt is not None
        found = [self._path_values(s.run, claim.of, claim.wrt) for s in samples]
        per_sample = [paths for paths in found if paths is not None]
        if len(per_sample) < len(found) or not per_sample[0]:
            return None
        names = [name for name, _ in per_sample[0]]
        if len(names) < 2 or any([n for n, _ in p] != names for p in per_sample):
            return None  # one path (its double is a factor of 2), or paths differing between points (a branch)
        for weights in _weightings(len(names)):
            if all(matches(sum((w * v for w, (_, v) in zip(weights, paths)), 0.0), s)
                   for s, paths in zip(samples, per_sample)):
                return _path_story(claim, names, weights, per_sample[0])
        return None

    def _path_values(self, run: Run, of: str, wrt: str) -> list[tuple[str, Any]] | None:
        """Each chain-rule path from of to wrt (its text, its product here), or None past PATHS_TRIED,
        or where the program's graph has more than DERIVATIVE_BUDGET operations (the graph view that
        explain builds costs some 0.5 ms a variable: a loop of 10,000 steps took 6 s)."""
        key = (id(run), of, wrt)
        if key not in self._paths:
            found: list[tuple[str, Any]] | None = None
            try:
                if operations(run.node(of), {}, DERIVATIVE_BUDGET) > DERIVATIVE_BUDGET:
                    raise TooLong(DERIVATIVE_BUDGET)
                explanation, view = run.explain(of, wrt, PATHS_TRIED)
                if explanation.paths and len(explanation.paths) <= PATHS_TRIED:
                    found = [(" → ".join([of, *(view.nodes[e.target].label for e in path.edges)]), path.value)
                             for path in explanation.paths]
                    if any(v is None for _, v in found):
                        found = None
            except GradcalcError:
                found = None
            self._paths[key] = found
        return self._paths[key]

    # --- mistakes found in the key's graph: the gradient recomputed with one piece changed ---------------

    def _surrounding(self, run: Run, claim: S.Claim) -> _Surroundings | None:
        """The graph between the claim's variable and its output at this run (None: a value or second-order
        claim, a variable the output does not depend on, or a graph past DERIVATIVE_BUDGET operations)."""
        if claim.wrt is None or claim.wrt2 is not None:
            return None
        key = (id(run), claim.of, claim.wrt)
        if key not in self._surroundings:
            self._surroundings[key] = _Surroundings.of(run, claim.of, claim.wrt)
        return self._surroundings[key]

    def _fitting(self, case: _Case, offer: Callable[[_Surroundings, Any], list[tuple[str, Callable[[], Any]]]]
                 ) -> tuple[_Surroundings, str] | None:
        """The first of the values that `offer` makes of a point's graph and the truth there (each with a key,
        the same at every point, and a function that computes it) that the claim equals at every sample
        (a number rounded, not to one digit: as for a sum over paths, one digit fits too many to tell one)."""
        around = [self._surrounding(s.run, case.claim) for s in case.samples]
        if not all(a is not None and a.target.shape == s.want.shape for a, s in zip(around, case.samples)):
            return None  # a value claim, a Jacobian, a graph too large to search
        found = [a for a in around if a is not None]
        try:
            offered = [offer(a, s.want) for a, s in zip(found, case.samples)]
        except (GradcalcError, ValueError, ArithmeticError):  # a rule that fails at a point: no such mistake found
            return None
        if len({tuple(key for key, _ in o) for o in offered}) != 1:
            return None  # the graph differs between the points (a branch taken): nothing to compare
        for i, (key, _) in enumerate(offered[0]):
            try:
                if all(case.matches_sum(o[i][1](), s) for o, s in zip(offered, case.samples)):
                    return found[0], key
            except (GradcalcError, ValueError, ArithmeticError):  # a rule that fails off its path: not this one
                continue
        return None

    def _missing_divisor(self, case: _Case) -> Diagnosis | None:
        """N × the gradient, where the loss is a mean over N or the program divides by N: the 1/N forgotten."""
        found = self._fitting(case, lambda around, want: [
            (key, functools.partial(operator.mul, want, size)) for key, (_, _, size) in around.divisors().items()])
        if found is None:
            return None
        around, key = found
        node, i, size = around.divisors()[key]
        times = B.format_number(size)
        op = node.op.name  # type: ignore[union-attr]
        if op == "mean":
            why = f"{case.claim.of} is a mean over {times} entries ({around.text(node)}): divide by {times}"
        else:
            other = around.text(node.inputs[1 - i])
            value = times if op == "div" else _ratio(1 / size)
            written = other if other == value else f"{other} (= {value})"
            why = f"the program {'divides' if op == 'div' else 'multiplies'} by {written}, and the claim does not"
        return _entry("missing_divisor").found(f"the claim is {times} × {case.label}: {why}")

    def _missing_mask(self, case: _Case) -> Diagnosis | None:
        """(W2ᵀδ) where (W2ᵀδ) ⊙ 1[z > 0] is meant: the gradient with one relu's (abs's, max's, where's)
        local derivative taken as 1."""
        found = self._fitting(case, lambda around, want: [
            (key, functools.partial(around.unmasked, want, node, i)) for key, (node, i) in around.masks().items()])
        if found is None:
            return None
        around, key = found
        node, i = around.masks()[key]
        op = node.op.name  # type: ignore[union-attr]
        return _entry("missing_mask").found(
            f"the claim is {case.label} with the local derivative {around.mask_text(node, i)} of "
            f"{around.text(node, expand=True)} taken as 1",
            summary=None if op == "relu" else f"a missing mask of {op}")

    def _missing_term(self, case: _Case) -> Diagnosis | None:
        """The gradient of an output that is a sum of terms (data + reg·sum(W²)) with one term's left out."""
        found = self._fitting(case, lambda around, want: [
            (key, functools.partial(around.without, want, term, seed))
            for key, (term, seed) in around.terms().items()] if len(around.terms()) > 1 else [])
        if found is None:
            return None
        around, key = found
        term, seed = around.terms()[key]
        gradient = around.gradient_text(term, seed)
        return _entry("missing_term").found(f"the claim leaves out the gradient of {around.text(term)}" +
                                            (f" ({gradient})" if gradient else "") + f" in {case.label}")

    def _missing_local_factor(self, case: _Case) -> Diagnosis | None:
        """∂L/∂z where ∂L/∂h = ∂L/∂z · ∂z/∂h is meant: the gradient of a variable between the output and the
        claim's, the last steps' local derivative left out."""
        claim = case.claim
        if claim.wrt is None or case.samples[0].want.shape != self.run.node(claim.wrt, prefer_leaf=True).shape:
            return None  # a value claim, a Jacobian: not a gradient
        for name in self._between_names(case.samples[0].run, claim):
            values = [self._every_gradient(s.run, claim.of).get(name) for s in case.samples]
            if all(v is not None and _broadcasts(v.shape, s.want.shape) and case.matches_sum(v, s)
                   for v, s in zip(values, case.samples)) and any(B.host.any(v != 0) for v in values):
                return self._local_factor_story(claim, name)
        return None

    def _missing_local_factor_shape(self, case: _Case) -> Diagnosis | None:
        """The same, where the claim has the intermediate's shape, not the variable's: ∂L/∂S for ∂L/∂H."""
        claim = case.claim
        if claim.wrt is None or case.want.shape != self.run.node(claim.wrt, prefer_leaf=True).shape:
            return None
        for name in self._between_names(self.run, claim):
            value = self._every_gradient(self.run, claim.of)[name]
            if value.shape == case.got.shape and B.host.any(value != 0) and self.tolerance.close(case.got, value).all():
                return self._local_factor_story(claim, name)
        return None

    def _between_names(self, run: Run, claim: S.Claim) -> list[str]:
        """The program's variables on a path from the claim's variable to its output, nearest the variable
        first (their gradients are at hand: _every_gradient)."""
        around = self._surrounding(run, claim)
        if around is None:
            return []

        def make() -> list[str]:
            named = {node: name for name, node in run.frame.items() if node.op is not None}
            return [named[node] for node in around.between if node in named and node is not around.output
                    and node is not around.target and named[node] != claim.wrt]  # x = 2*x: not ∂x/∂x
        return around.once("names", make)

    def _local_factor_story(self, claim: S.Claim, name: str) -> Diagnosis:
        assert claim.wrt is not None
        local = f"∂{name}/∂{claim.wrt}"
        if self.run.node(name).shape == ():  # a scalar's local derivative prints as diff prints it: ∂z/∂h = w
            try:
                (found,) = self.run.diff(name, [claim.wrt], budget=DERIVATIVE_BUDGET)
                if not found.where and len(found.text) <= SHORT_TEXT:
                    local += f" = {found.text}"
            except GradcalcError:
                pass
        around = self._surrounding(self.run, claim)
        step = f" ({around.text(self.run.node(name), expand=True)})" if around is not None and "=" not in local else ""
        return _entry("missing_local_factor").found(f"the claim is ∂{claim.of}/∂{name}{step}: the local derivative "
                                                    f"{local} is missing")

    # --- a derivation, line by line -------------------------------------------------------------------

    def _working(self, claim: S.Claim, finished: S.Claim, source: Source) -> Working:
        """Each line of the claim's derivation against the line before, as an identity: where both are
        expressions, at the program's values and at the nearby points; where one is a number, at the program's
        values to its digits. The first line that does not follow is named, with the rule it misapplies where
        one fits. The last line is the claim itself, judged as any claim is (this adds to the verdict only)."""
        runs = [self.run, *self._nearby_runs(finished.of)]
        starts = line_starts(source.text)
        working = Working([Step(number, *_written(expr, source.text, starts)) for number, expr in
                           enumerate(claim.working, 1)], source.filename)
        truth = _Line(None, [])
        lines: list[_Line] = []
        for step, expr in zip(working.steps, claim.working):
            try:
                line = self._line(finished, expr, source, runs)
            except (GradcalcError, RecursionError) as caught:
                step.status = "invalid"
                reason = (caught if isinstance(caught, GradcalcError) else self._too_deep()).message
                working.broken, working.rule, working.reason, working.summary = step.number, "invalid", reason, reason
                return working
            if not truth.values:
                truth.values = [self._truth_or_skip(run, finished, line.values[0].ndim) for run in runs]
            step.right = self._same(line, truth)
            lines.append(line)
            if len(lines) == 1:
                step.status, working.follow = "first", 1
            elif self._same(lines[-2], line):
                step.status, working.follow = "follows", step.number
            else:
                step.status, working.broken = "broken", step.number
                prev_right = bool(working.steps[step.number - 2].right)
                with B.errstate():  # a factor tried where a value is 0 divides by it: inf, never a warning
                    found = self._broken_step(finished, lines[-2], line, truth, prev_right, runs, source,
                                              step.number)
                if found is not None:
                    working.rule, working.reason, working.summary = found
                return working
        return working

    def _line(self, claim: S.Claim, expr: S.Expr, source: Source, runs: list[Run]) -> _Line:
        """A derivation's line read against the program (as the claim it belongs to is) and its values at the
        program's values and the nearby runs (None where it fails there); GradcalcError where it cannot be."""
        line = S.Claim(claim.of, claim.wrt, expr, claim.pos, claim.text, claim.wrt2)
        done = finish(line, self.run.frame, self._functions, source.text, self.run.interpreter).claimed
        self._check_names(S.Claim(claim.of, claim.wrt, done, expr.pos, claim.text, claim.wrt2))
        values: list[Any] = [self.run.evaluate(done, source)]
        number = _is_constant(done)
        for run in runs[1:]:
            if number:  # a number is compared at the program's values only
                break
            try:
                values.append(run.evaluate(done, source))
            except GradcalcError:
                values.append(None)
        return _Line(done, values, None if self.tolerance.given or not number else _units(done), number, expr)

    def _truth_or_skip(self, run: Run, claim: S.Claim, rank: int) -> Any:
        try:
            return self._truth(run, claim, rank)
        except GradcalcError:
            return _SKIP  # the key has no derivative there: nothing to compare with

    def _same(self, a: _Line, b: _Line) -> bool:
        """Whether two lines are equal: at the program's values to a number's digits, and for expressions at
        every nearby point where either has a value (one failing where the other does not differs)."""
        if a.number or b.number:
            return self._same_here(a, b)
        for x, y in zip(a.values, b.values):
            if x is _SKIP or y is _SKIP or (x is None and y is None):
                continue
            if x is None or y is None:
                return False
            try:
                if not self._close(x, y):
                    return False
            except ValueError:  # shapes that do not broadcast
                return False
        return True

    def _same_here(self, a: _Line, b: _Line) -> bool:
        x, y = a.values[0], b.values[0]
        if x is None or y is None or x is _SKIP or y is _SKIP:
            return x is _SKIP or y is _SKIP
        try:
            x, y = B.host.broadcast_arrays(x, y)
        except ValueError:
            return False
        close = self.tolerance.close(x, y)
        for line, got, want in ((a, x, y), (b, y, x)):
            if line.units is not None:
                rounded, truncated = _to_digits(got, want, line.units)
                close = close | rounded | truncated
        return bool(close.all())

    def _broken_step(self, claim: S.Claim, prev: _Line, cur: _Line, truth: _Line, prev_right: bool,
                     runs: list[Run], source: Source, number: int) -> tuple[str, str, str] | None:
        """What a line that does not follow from the one before did (its rule's code, the reason, the reason
        without expressions), where a known slip fits: a sign; a term of the line before (or of the true
        derivative, where the line before is right) dropped; a factor dropped (the chain rule's inner derivative);
        a power of the variable or a constant factor off; else, where the line before is right, the Judge's
        diagnosis of the line as a claim."""
        points = [i for i in range(min(len(prev.values), len(cur.values)))
                  if _finite(prev.values[i]) and _finite(cur.values[i])]
        if not points or points[0] != 0:
            return None
        before = number - 1

        def fits(wanted: Callable[[], list[Any]]) -> bool:
            """Whether the line is, at every point, what `wanted` makes (one value per point)."""
            try:
                return all(self._close(cur.values[i], want) for i, want in zip(points, wanted(), strict=True))
            except (ValueError, TypeError, ArithmeticError):
                return False

        prev_values = [prev.values[i] for i in points]
        if any(B.host.any(v != 0) for v in prev_values) and fits(lambda: [-v for v in prev_values]):
            return "sign", f"a sign error: line {number} is the negative of line {before}", "a sign error"
        pieces = self._pieces(claim, prev, prev_right, source, [runs[i] for i in points])
        for sign, text, values in pieces.terms:
            if fits(functools.partial(lambda s, vs: [p - s * v for p, v in zip(prev_values, vs)], sign, values)):
                rule, name = self._term_rule(claim, [runs[i] for i in points], [sign * v for v in values])
                said = f"{'-' if sign < 0 else ''}{text}"
                return (rule, f"{name} drops the term {said}", f"{name} drops a term") if name else \
                    (rule, f"line {number} drops the term {said}", "a term dropped")
        inner: list[list[Any]] | None = None
        for text, values in pieces.factors:
            if fits(functools.partial(lambda vs: [p / v for p, v in zip(prev_values, vs)], values)):
                if inner is None:
                    inner = self._inner_derivatives(claim, [runs[i] for i in points])
                if any(all(self._close(v, d) for v, d in zip(values, derivative)) for derivative in inner):
                    return ("chain_rule", f"the chain rule's inner derivative {text} is missing",
                            "the chain rule's inner derivative is missing")
                return "dropped_factor", f"line {number} drops the factor {text}", "a factor dropped"
        if claim.wrt is not None and self.run.node(claim.wrt, prefer_leaf=True).shape == ():
            wrt = claim.wrt
            xs = [B.to_host(runs[i].node(wrt, prefer_leaf=True).value) for i in points]
            for power in (1, -1, 2, -2):
                if fits(functools.partial(lambda k: [p * x ** k for p, x in zip(prev_values, xs)], power)):
                    times = f"{wrt}^{abs(power)}" if abs(power) > 1 else wrt
                    said = f"{times} × line {before}" if power > 0 else f"line {before} divided by {times}"
                    return "power_rule", f"a wrong power: line {number} is {said}", "a wrong power"
        ratio = _factor(_Sample(self.run, cur.values[0], prev.values[0]))
        if ratio is not None and (len(points) > 1 or _nice(ratio)) and fits(lambda: [ratio * v for v in prev_values]):
            return "factor", f"a factor off: line {number} is {_ratio(ratio)} × line {before}", "a factor off"
        if prev_right and cur.expr is not None:
            judged = Verdict("", claim.of, claim.wrt, None, "wrong", wrt2=claim.wrt2)
            try:
                self._judge(S.Claim(claim.of, claim.wrt, cur.expr, claim.pos, claim.text, claim.wrt2), source, judged)
            except GradcalcError:
                return None
            if judged.diagnosis_code is not None:
                return judged.diagnosis_code, judged.diagnosis, judged.diagnosis_summary
        return None

    def _close(self, got: Any, want: Any) -> bool:
        got, want = B.host.broadcast_arrays(got, want)
        return bool(self.tolerance.close(got, want).all())

    def _pieces(self, claim: S.Claim, prev: _Line, prev_right: bool, source: Source, runs: list[Run]) -> _Pieces:
        """The terms and factors a broken line may have dropped, with their values at the runs: the true
        derivative's (as diff writes it), where the line before is right, then the line before's own."""
        found = _Pieces([], [])
        written: list[tuple[S.Expr, Source, bool]] = []  # each expression, where it was written, and whether
        # its parts are read against the program first (the student's line is; diff's text is the program's)
        if prev_right and claim.wrt is not None:
            text = self._derivative(claim.of, claim.wrt, claim.wrt2)[0]
            if text and "\n" not in text:
                try:
                    written.append((parser.parse_expression(text), Source(text, "<derivative>"), False))
                except GradcalcError:
                    pass
        if prev.written is not None:
            written.append((prev.written, source, True))
        for expr, where, read in written:
            terms = _terms(expr)[:PIECES_TRIED]
            for sign, term in terms:
                values = self._values(term, where, runs, claim if read else None)
                if values is not None and len(terms) > 1:
                    found.terms.append((sign, _written(term, where.text)[0], values))
            for _, term in terms[:1] if len(terms) == 1 else []:  # a product's factors: the chain rule's
                factors = _factors(term)[:FACTORS_TRIED]
                evaluated = [(f, self._values(f, where, runs, claim if read else None)) for f in factors]
                for size in range(1, len(factors)):
                    for chosen in itertools.combinations(evaluated, size):
                        if any(values is None for _, values in chosen):
                            continue
                        product = [functools.reduce(operator.mul, parts) for parts in
                                   zip(*[values for _, values in chosen if values is not None])]
                        if any(B.host.all(B.host.abs(p - 1) < 1e-12) for p in product[:1]):
                            continue
                        found.factors.append((_product_text([f for f, _ in chosen], where.text), product))
        return found

    def _values(self, expr: S.Expr, source: Source, runs: list[Run], claim: S.Claim | None = None
                ) -> list[Any] | None:
        """An expression's values at the runs (read against the program first, as a part of `claim`'s line),
        or None where it fails at one or is 0 at all."""
        try:
            if claim is not None:
                expr = finish(S.Claim(claim.of, claim.wrt, expr, claim.pos, claim.text, claim.wrt2), self.run.frame,
                              self._functions, source.text, self.run.interpreter).claimed
            values = [run.evaluate(expr, source) for run in runs]
        except (GradcalcError, RecursionError):
            return None
        return values if any(B.host.any(v != 0) for v in values) else None

    def _term_rule(self, claim: S.Claim, runs: list[Run], dropped: list[Any]) -> tuple[str, str]:
        """Which rule a dropped term belongs to (its code, and its name for the message; '' where none is
        known): a summand's whole gradient is the sum rule's; else the product or quotient rule's, where the
        path from the variable to the output multiplies (or divides) two things that depend on it."""
        around = [self._surrounding(run, claim) for run in runs]
        if any(a is None for a in around):
            return "dropped_term", ""
        found = [a for a in around if a is not None]
        terms = found[0].terms()
        if len(terms) > 1:
            for key in terms:
                try:
                    if all(self._close(-a.without(0.0, *a.terms()[key]), d) for a, d in zip(found, dropped)):
                        return "sum_rule", "the sum rule"
                except (KeyError, ValueError):
                    continue
        on_path = set(found[0].between)
        both = [n.op.name for n in found[0].between if n.op is not None and n.op.name in ("mul", "div", "matmul")
                and sum(parent in on_path for parent in n.inputs) == 2]
        if "div" in both:
            return "quotient_rule", "the quotient rule"
        if both:
            return "product_rule", "the product rule"
        return "dropped_term", ""

    def _inner_derivatives(self, claim: S.Claim, runs: list[Run]) -> list[list[Any]]:
        """Where the path from the variable to the output applies a function to something computed from it
        (sin(x²), σ(w·x)), that inner thing's derivative at each run: what the chain rule multiplies by."""
        around = [self._surrounding(run, claim) for run in runs]
        found = [a for a in around if a is not None]
        if len(found) < len(around) or len({len(a.between) for a in found}) != 1:
            return []  # a graph too large to search, or one that branches differently at another point
        first, inner = found[0], []
        on_path = set(first.between)
        for index, node in enumerate(first.between):
            if node.op is None or node.op.name in _ARITHMETIC:
                continue
            for i, parent in enumerate(node.inputs):
                if parent not in on_path or parent is first.target:
                    continue
                values = []
                for each in found:
                    inside = each.between[index].inputs[i]
                    with B.using(each.run.device, each.run.dtype, each.run.max_elements):
                        seed = autodiff.seed_for(inside, "ones" if inside.shape else None)
                    values.append(each._pulled(inside, seed))
                inner.append(values)
        return inner[:SEARCHED]

    def derivative(self, of: str, wrt: str, wrt2: str | None = None) -> str:
        """The correct derivative as gradcalc diff --in-terms-of TERMS prints it ('' where diff cannot:
        a vector output, or one past DERIVATIVE_BUDGET operations)."""
        return self._derivative(of, wrt, wrt2)[0]

    def _derivative(self, of: str, wrt: str, wrt2: str | None = None) -> tuple[str, str]:
        """The derivative's text, or '' and why not where it is too long to show (else '').

        By default in the program's words where they are shorter: (p - y)*h, not the leaves'
        (sigmoid(w2*t1) - y)*t1 where t1 = sigmoid(w1*x)."""
        key = (of, wrt if wrt2 is None else f"{wrt}\0{wrt2}")
        if key not in self._derivatives:
            why = ""
            terms = {"shortest": {"shortest": True}, "intermediates": {"intermediates": True}}.get(self.terms, {})
            try:
                if wrt2 is None:
                    (found,) = self.run.diff(of, [wrt], budget=DERIVATIVE_BUDGET, **terms)
                else:  # diff's second order: each pair of the names given, in order; ours is the pair (wrt, wrt2)
                    found = self.run.diff(of, list(dict.fromkeys([wrt, wrt2])), order=2,
                                          budget=DERIVATIVE_BUDGET, **terms)[1 if wrt2 != wrt else 0]
                text = found.text + "".join(f"\n  {'where' if i == 0 else '     '} {name} = {body}"
                                            for i, (name, body, _) in enumerate(found.where))
                text += "".join(f"\n  given {given}, as at the program's values" for given in found.given)
            except TooLong as exc:
                text, why = "", exc.message
            except GradcalcError:
                text = ""
            self._derivatives[key] = text, why
        return self._derivatives[key]

    def _first_wrong(self, judged: list[tuple[Verdict, S.Claim | None]]) -> str | None:
        """The wrong claim nearest the output whose error reaches other wrong claims below it, if any
        (judged: each verdict with its claim finished against the program's names).

        Backpropagation carries ∂L/∂d into ∂L/∂b and ∂L/∂w1: when all three are
        wrong, d is where to look first.
        """
        finished = {id(v): c for v, c in judged if v.status == "wrong" and c is not None and c.wrt is not None
                    and c.wrt2 is None}
        wrong = [v for v, _ in judged if id(v) in finished]
        nodes = {v.label: self.run.node(finished[id(v)].wrt, prefer_leaf=True) for v in wrong}  # type: ignore[arg-type]
        for verdict in sorted(wrong, key=lambda v: -nodes[v.label].seq):  # nearest the output first
            below = differentiable_inputs(nodes[verdict.label])
            if any(nodes[other.label] in below for other in wrong if other is not verdict):
                return verdict.label
        return None


# --- the diagnoses ------------------------------------------------------------------------------

_Detector = Callable[[Judge, _Case], "Diagnosis | None"]


@dataclass(frozen=True)
class Entry:
    """A known mistake: a stable code (the JSON's diagnosis_code), the summary the grading table shows, what
    mistake it names (the list in docs/json.md), and its detectors: for a claim of the wrong shape, or of the right
    shape and the wrong value. An entry without one is found where the judging finds it (only_here, …)."""

    code: str
    summary: str  # '…' where it is the claim's own (a shape, an integer)
    names: str
    shape: _Detector | None = None
    value: _Detector | None = None

    def found(self, detail: str = "", summary: str | None = None) -> Diagnosis:
        return Diagnosis(self.code, self.summary if summary is None else summary, detail)


# In order: the first entry whose detector fits says what is wrong (a claim both transposed and negated is
# 'transposed'; one that leaves out a path is not also called a factor off where that happens to fit).
DIAGNOSES: list[Entry] = [
    Entry("transposed", "transposed", "the transpose of the derivative: a matrix turned over",
          shape=Judge._transposed_shape, value=Judge._transposed),
    Entry("sign", "sign error", "the negative of the derivative", value=Judge._sign),
    Entry("missing_divisor", "a forgotten 1/N", "N × the derivative, where the output is a mean over N entries or "
          "the program divides by N (or multiplies by 1/N) on every path: before 'factor', which it names better",
          value=Judge._missing_divisor),
    Entry("factor", "a factor off", "a constant multiple of the derivative (2, 1/2, 1000: a slip of a factor or "
          "of units; any factor for an expression)", value=Judge._factor),
    Entry("missing_path", "a missing chain-rule path", "the sum over the chain-rule paths from the output to the "
          "variable with one or more left out (summary 'missing chain-rule paths' for several)",
          value=lambda judge, case: judge._path(case, "missing_path")),
    Entry("all_paths_missing", "the claim leaves out every chain-rule path", "0 where the output depends on the "
          "variable through several chain-rule paths",
          value=lambda judge, case: judge._path(case, "all_paths_missing")),
    Entry("double_counted_path", "a chain-rule path counted twice", "the sum over the chain-rule paths with one "
          "added twice", value=lambda judge, case: judge._path(case, "double_counted_path")),
    Entry("not_summed", "not summed", "a batch's gradients one per example, where the value is broadcast over "
          "the batch and its gradient is their sum", shape=Judge._not_summed),
    Entry("not_averaged", "not averaged", "a batch's gradients one per example, where the loss is a mean over the "
          "batch and the gradient is their mean", shape=Judge._not_averaged),
    Entry("upside_down", "upside down", "the derivative the other way up: dw1/dL where dL/dw1 is meant",
          value=Judge._upside_down),
    Entry("transpose_slip", "a transpose slip", "one matrix written W where Wᵀ is meant (or Wᵀ for W), everywhere "
          "or at one of its places: turned, the claim is right", value=Judge._transpose_slip),
    Entry("missing_mask", "a missing ReLU mask", "the derivative with the local derivative of one relu on the path "
          "taken as 1 (its mask 1[z > 0] left out; or abs's sign, maximum's, minimum's, where's or clip's "
          "selection: summary 'a missing mask of abs')", value=Judge._missing_mask),
    Entry("missing_term", "a missing term", "the derivative of an output that is a sum of terms (data + "
          "reg·sum(W²)) with one term's gradient left out", value=Judge._missing_term),
    Entry("missing_local_factor", "a missing local factor", "∂L/∂z for a variable z between the output and the "
          "variable h, where ∂L/∂h = ∂L/∂z · ∂z/∂h is meant: the last steps' local derivative left out",
          shape=Judge._missing_local_factor_shape, value=Judge._missing_local_factor),
    Entry("shape", "the claim has shape … but … has shape …", "a value of a shape the derivative does not have, "
          "or shapes in the claim that do not combine (summary 'the claim's shapes do not fit'), and none of the "
          "mistakes above", shape=Judge._misshapen),
    Entry("not_finite", "the true value is infinite (or not a number)", "a claim that is not the infinity or NaN "
          "the value is at the program's values (no finite number is, to any digits)"),
    Entry("only_here", "right at the program's values only", "an expression equal to the derivative at the "
          "program's values but not at a nearby point: not an identity"),
    Entry("held_constant", "right if … is a constant", "an expression right at the program's values and wrong "
          "nearby, but right there with some leaves held at their values (a batch size, a label): declared `const`, "
          "they would be"),
    Entry("not_confirmed", "not confirmed", "an expression compared only with infinities or NaN (the derivative "
          "is finite nowhere it was compared), which any expression infinite there matches"),
    Entry("last_digit", "off in the last digit written", "a number a few units off in its last digit (the "
          "diagnosis gives the value to the digits written)"),
    Entry("exact_integer", "an integer means exactly …; the value is …", "an integer near a value that is not "
          "one: an integer claims the exact value (807. or 8.07e2 say it is rounded)"),
]
_BY_CODE = {entry.code: entry for entry in DIAGNOSES}


def _entry(code: str) -> Entry:
    return _BY_CODE[code]


_ARITHMETIC = frozenset({"add", "sub", "neg", "mul", "div", "matmul", "sum", "mean"})  # no inner function
_SKIP = object()  # a derivation's truth at a nearby point where the key has none: nothing is compared there
PIECES_TRIED = 12  # a broken line is tried with each of up to this many terms of the line before dropped
FACTORS_TRIED = 6  # and a one-term line with each product of up to this many of its factors dropped


@dataclass
class _Line:
    """A derivation's line read against the program: its values at the program's values and then at each nearby
    run (None where it fails there; a number at the program's values only), and a number's last digit."""

    expr: S.Expr | None  # as the program reads it
    values: list[Any]
    units: Any = None
    number: bool = False
    written: S.Expr | None = None  # as written (its parts' texts are the student's: σ'(z), not its expansion)


@dataclass
class _Pieces:
    """What a broken line may have dropped: terms (sign, text, values at the runs) and factors (text, values)."""

    terms: list[tuple[int, str, list[Any]]]
    factors: list[tuple[str, list[Any]]]


def _finite(value: Any) -> bool:
    return value is not None and value is not _SKIP and bool(B.host.isfinite(value).all())


def _terms(expr: S.Expr) -> list[tuple[int, S.Expr]]:
    """The terms of a sum as written, each with its sign: a - (b + c) is +a, -b, -c."""
    found: list[tuple[int, S.Expr]] = []
    stack: list[tuple[int, S.Expr]] = [(1, expr)]
    while stack:
        sign, node = stack.pop()
        if isinstance(node, S.Binary) and node.op in ("+", "-"):
            stack += [(sign if node.op == "+" else -sign, node.right), (sign, node.left)]
        elif isinstance(node, S.Unary) and node.op in ("+", "-"):
            stack.append((sign if node.op == "+" else -sign, node.operand))
        else:
            found.append((sign, node))
    return found


def _factors(expr: S.Expr) -> list[S.Expr]:
    """The factors of a product as written: 2*x*cos(x^2) is 2, x, cos(x^2) (side by side too: 2x cos(x²))."""
    found: list[S.Expr] = []
    stack = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, S.Binary) and node.op in ("*", S.JUXTAPOSED):
            stack += [node.right, node.left]
        else:
            found.append(node)
    return found


def _product_text(factors: list[S.Expr], text: str) -> str:
    """Factors as one product's text: 2*x (a sum in brackets)."""
    parts = [_written(f, text)[0] for f in factors]
    return "*".join(f"({p})" if len(factors) > 1 and len(_terms(f)) > 1 else p for f, p in zip(factors, parts))


def _written(expr: S.Expr, text: str, starts: list[int] | None = None) -> tuple[str, int, int]:
    """An expression as written in text (its brackets around it too), and the line and column it starts at
    (starts: line_starts(text), where the caller has it)."""
    starts = line_starts(text) if starts is None else starts

    def offset(pos: Any, end: bool = False) -> int:
        return min(starts[min(pos.line, len(starts)) - 1] + pos.column - 1 + (pos.width if end else 0), len(text))

    nodes = [node for node in S.walk(expr) if isinstance(node, S.Expr)]
    begin = min(offset(node.pos) for node in nodes)
    end = max(offset(node.pos, end=True) for node in nodes)
    while begin > 0 and text[begin - 1] in "([{ \t":  # its opening brackets (and what a node's place leaves out)
        begin -= 1
    depth = sum(text.count(c, begin, end) for c in "([{") - sum(text.count(c, begin, end) for c in ")]}")
    while depth > 0 and end < len(text):
        if text[end] in ")]}":
            depth -= 1
        elif not text[end].isspace():
            break
        end += 1
    while depth < 0 and begin < end and text[begin] in "([{ \t":  # brackets of the line's own, not this one's
        depth += text[begin] in "([{"
        begin += 1
    written = text[begin:end]
    shown = " ".join(written.split())
    at = pos_at(text, begin + len(written) - len(written.lstrip()))
    return shown, at.line, at.column


def _unreadable(item: Unreadable) -> Verdict:
    return Verdict(item.text, "", None, item.line, "invalid", error=error_json(item.error)["error"],
                   error_message=error_text(item.error))


def _summed_axes(shape: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...]:
    """The axes to sum so that `shape` becomes `target` (as broadcasting's gradient does), or () if none can."""
    if len(shape) < len(target) or not _broadcasts(target, shape):
        return ()
    return B.summed_axes(shape, target)


def _weightings(count: int) -> Iterator[tuple[int, ...]]:
    """Ways a student's sum can differ from the chain rule's: paths left out (fewest first), then one counted twice."""
    for missing in range(1, count + 1):
        for left_out in itertools.combinations(range(count), missing):
            yield tuple(0 if i in left_out else 1 for i in range(count))
    for twice in range(count):
        yield tuple(2 if i == twice else 1 for i in range(count))


def _path_story(claim: S.Claim, names: list[str], weights: tuple[int, ...],
                paths: list[tuple[str, Any]]) -> Diagnosis:
    label = _label(claim)
    values = {name: value for name, value in paths}
    missing = [n for n, w in zip(names, weights) if w == 0]
    doubled = [n for n, w in zip(names, weights) if w == 2]
    if doubled:
        return _entry("double_counted_path").found(f"{doubled[0]} ({_short(values[doubled[0]])} here) "
                                                   f"is added twice to {label}")
    if len(missing) == len(names):
        return _entry("all_paths_missing").found(f"{claim.of} depends on {claim.wrt} through {len(names)} "
                                                 f"path{'s' * (len(names) != 1)}, starting with {names[0]}")
    listed = "; ".join(f"{n} ({_short(values[n])} here)" for n in missing)
    if len(missing) == 1:
        return _entry("missing_path").found(f"{label} is the sum over {len(names)} paths, and the claim leaves out "
                                            f"{listed}")
    return _entry("missing_path").found(f"{label} is the sum over {len(names)} paths, and the claim leaves out "
                                        f"{len(missing)}: {listed}", summary="missing chain-rule paths")


def _factor(sample: _Sample) -> float | None:
    """got / want where want is not 0, when that ratio is one number."""
    want = B.host.broadcast_to(sample.want, sample.want.shape)
    got = B.host.broadcast_to(sample.got, want.shape)
    nonzero = want != 0
    if not nonzero.any():
        return None
    ratios = got[nonzero] / want[nonzero]
    ratio = float(ratios.flat[0])
    if not math.isfinite(ratio) or abs(ratio - 1) < 1e-9 or ratio == 0:
        return None
    return ratio


def _nice(factor: float) -> bool:
    """2, 1/2, 10, 1/10, -3 ...: factors that name a slip (one point cannot tell a factor from any wrong number)."""
    for value in (abs(factor), 1 / abs(factor)):
        if not math.isfinite(value):  # 1/2.5e-309 overflows: no nice factor that far out
            continue
        whole = round(value)
        if 2 <= whole <= 10 and abs(value - whole) < 1e-9 * whole:
            return True
        if 1 < value <= NICE_POWER and abs(math.log10(value) - round(math.log10(value))) < 1e-9:
            return True
    return False


def _ratio(factor: float) -> str:
    """1/2, 1/1000 for small factors, else the number (1e-308, not 1 over a 309-digit integer)."""
    inverse = 1 / factor
    if abs(factor) < 1 and abs(inverse) <= NICE_POWER and abs(inverse - round(inverse)) < 1e-9:
        return f"{'-' if factor < 0 else ''}1/{abs(round(inverse))}"
    return B.format_number(factor)


def _to_digits(got: Any, want: Any, units: Any) -> tuple[Any, Any]:
    """Elementwise: got is want rounded, or truncated, to the last digit written (units > 0 only)."""
    error = B.host.abs(got - want)
    written = (units > 0) & B.host.isfinite(got) & B.host.isfinite(want)  # inf is no number rounded: inf - x <= inf
    rounded = written & (error <= 0.5 * units * (1 + 1e-9) + 1e-12 * B.host.abs(want))
    short = B.host.abs(want) - B.host.abs(got)  # truncation cuts toward zero, by less than one unit
    truncated = written & (got * want >= 0) & (short >= 0) & (short < units * (1 - 1e-9))
    return rounded, truncated


def _last_digit(got: Any, want: Any, units: Any) -> Diagnosis | None:
    """A number a few units off in its last digit: say what the value is to the digits written."""
    if units is None or got.shape != () or want.shape != ():
        return None
    unit, value = float(units), float(want)
    if unit == 0 and math.isfinite(value) and abs(float(got) - value) < 0.5 and abs(value) >= 10:  # 807 for 806.858
        return _entry("exact_integer").found(summary=(
            f"an integer means exactly {B.format_number(float(got))}; the value is {B.format_number(value)} "
            f"(to say it is rounded, write {B.format_number(float(got))}. or {_scientific_text(float(got))})"))
    if not unit > 0:
        return None
    if not math.isfinite(value) or abs(float(got) - value) > 3 * unit:
        return None
    places = round(-math.log10(unit))
    rounded = round(value / unit) * unit
    if rounded == 0:  # -1e30 for -1: the value has no digit there, so every digit written is off, not the last
        return None
    if 0 < places <= 15:
        shown = f"{value:.{places}f}"
    elif places <= 0 and rounded < 1e15:
        shown = f"{rounded:g}"
    else:  # 1.6e-300, not 300 zeros: the digits written, in scientific notation
        shown = f"{rounded:.{max(1, math.floor(math.log10(abs(rounded))) + places + 1)}g}"
    return _entry("last_digit").found(f"to the digits written, the value is {shown}")


def _finite_against_not(got: Any, want: Any, exact: Any, label: str) -> Diagnosis | None:
    """Where the value is infinite or NaN and the claim a finite number: say so (no digits make that right)."""
    want = B.host.broadcast_to(want, exact.shape)
    finite = B.host.broadcast_to(B.host.isfinite(got), exact.shape)
    return _not_finite_story(~B.host.isfinite(want) & finite & ~exact, want, label)


def _not_matched(got: Any, want: Any, exact: Any, label: str) -> Diagnosis | None:
    """Where the value is infinite or NaN and the claim is not that same value (-inf for inf, inf for nan)."""
    want = B.host.broadcast_to(want, exact.shape)
    return _not_finite_story(~B.host.isfinite(want) & ~exact, want, label)


def _not_finite_story(missed: Any, want: Any, label: str) -> Diagnosis | None:
    if not missed.any():
        return None
    nan = bool(B.host.isnan(want[missed]).any())
    infinite = bool(B.host.isinf(want[missed]).any())
    kind = "infinite or not a number" if nan and infinite else "not a number (NaN)" if nan else "infinite"
    where = f" at {int(missed.sum())} of {missed.size} entries" if want.ndim else ""
    matched_by = "nan (a NaN) and an infinity by the same infinity" if nan and infinite else \
        "nan" if nan else "an infinite claim of the same sign (inf or -inf)"
    return _entry("not_finite").found(f"{label} = {_short(want)} at the program's values, and only {matched_by} "
                                      f"matches it", summary=f"the true value is {kind}{where}")


def _is_reciprocal(node: Node) -> bool:
    """1/N, as a program writes it."""
    return node.op is not None and node.op.name == "div" and not node.inputs[0].requires_grad \
        and node.inputs[0].shape == () and float(node.inputs[0].value) == 1


def _rule(node: Node, i: int) -> Callable[..., Any]:
    """node's backward rule for its input i (the engine's; a masking or summing node has one)."""
    assert node.op is not None
    rule = node.op.vjps[i]
    assert rule is not None
    return rule


def _scientific_text(whole: float) -> str:
    """807 as 8.07e2: its digits, in scientific notation."""
    digits = str(abs(int(whole))).rstrip("0") or "0"
    exponent = len(str(abs(int(whole)))) - 1
    mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{'-' if whole < 0 else ''}{mantissa}e{exponent}"


def _units(expr: S.Expr) -> Any:
    """The unit of the last digit written for each entry of a literal (0 for an exact integer), or None."""
    if isinstance(expr, S.Number):
        mantissa, _, exponent = expr.text.lower().partition("e")
        if "." not in mantissa and not exponent:
            return B.host.asarray(0.0)  # 15 means 15
        decimals = len(mantissa.partition(".")[2])
        unit = float(f"1e{int(exponent or 0) - decimals}")  # 1e400 is inf, not an OverflowError
        return B.host.asarray(unit) if math.isfinite(expr.value) and unit < math.inf else None
    if isinstance(expr, S.Unary):
        return _units(expr.operand)
    if isinstance(expr, S.Attribute) and expr.name == "T":  # a literal's transpose: its digits, turned
        units = _units(expr.target)
        return None if units is None else units.T
    if isinstance(expr, S.Tensor) and expr.items:
        items = [_units(item) for item in expr.items]
        if any(item is None for item in items) or len({item.shape for item in items}) != 1:
            return None
        return B.host.stack(items)
    return None


def _significant_digits(expr: S.Expr) -> int:
    """Significant digits of a scalar literal (0.39 has 2); 0 for a tensor."""
    while isinstance(expr, S.Unary):
        expr = expr.operand
    if not isinstance(expr, S.Number):
        return 0
    mantissa = expr.text.lower().partition("e")[0].replace(".", "").lstrip("0")
    return max(1, len(mantissa))


def _is_constant(expr: S.Expr) -> bool:
    return not any(isinstance(node, S.Name) and node.name not in CONSTANTS for node in S.walk(expr))


def _broadcasts(shape: tuple[int, ...], target: tuple[int, ...]) -> bool:
    """Whether a value of `shape` broadcasts to `target` unchanged in shape."""
    try:
        return B.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _label(claim: S.Claim) -> str:
    return _derivative_label(claim.of, claim.wrt, claim.wrt2)


def _derivative_label(of: str, wrt: str | None, wrt2: str | None) -> str:
    """L, ∂L/∂w, ∂²L/∂w², ∂²L/∂a∂b."""
    if wrt is None:
        return of
    if wrt2 is None:
        return f"∂{of}/∂{wrt}"
    return f"∂²{of}/∂{wrt}²" if wrt2 == wrt else f"∂²{of}/∂{wrt}∂{wrt2}"


def _is_distribution(value: Any) -> bool:
    """Whether a leaf holds probability distributions along its last axis (a one-hot target, soft labels).

    Answers rely on it: ∂/∂z of -sum(t*log(softmax(z))) is softmax(z) - t only where t sums to 1,
    so such a leaf is moved to other distributions on the same support, not off them."""
    return is_distribution(B.to_host(value))  # the same test as diff's, which writes sum(t) as 1 for such a t


def _shape(shape: tuple[int, ...]) -> str:
    """As Python and the shape errors write it: (), (4,), (3, 2)."""
    return str(tuple(int(n) for n in shape))


def _short(value: Any) -> str:
    return B.format_value(value).replace("\n", " ")


def _matrices(expr: S.Expr, run: Run) -> list[str]:
    """The program's matrices (2-D variables) an expression names."""
    return sorted({n.name for n in S.walk(expr) if isinstance(n, S.Name) and n.name in run.frame
                   and run.value(n.name).ndim == 2})


_ORDINALS = ("first", "second", "third", "fourth", "fifth")


def _turnings(expr: S.Expr, name: str) -> Iterator[tuple[str, S.Expr]]:
    """The claim with the matrix `name` turned everywhere, then, where it appears more than once, at each place
    alone (X(Xw - y) where Xᵀ(Xw - y) is meant): what each says of the slip, and the expression."""
    everywhere, written = _turned(expr, name)
    slip = f"with {name} for {name}ᵀ" if any(written) else f"with {name}ᵀ for {name}"
    yield slip, everywhere
    if len(written) < 2:
        return
    for place, transposed in enumerate(written):
        ordinal = _ORDINALS[place] if place < len(_ORDINALS) else f"number {place + 1}"
        slip = f"with {name} for {name}ᵀ" if transposed else f"with {name}ᵀ for {name}"
        yield f"{slip} (the {ordinal} of its {len(written)} appearances)", _turned(expr, name, place)[0]


def _turned(expr: S.Expr, name: str, place: int | None = None) -> tuple[S.Expr, list[bool]]:
    """A copy of expr with the matrix `name` transposed where it appears (W as Wᵀ, and Wᵀ as W), or only at
    its `place`-th appearance; and, for each appearance in order, whether it was written transposed."""
    written: list[bool] = []

    def turn(node: Any) -> Any:
        if isinstance(node, S.Attribute) and node.name == "T" and isinstance(node.target, S.Name) \
                and node.target.name == name:
            written.append(True)
            return node.target if place is None or place == len(written) - 1 else node
        if isinstance(node, S.Name) and node.name == name:
            written.append(False)
            return S.Attribute(node, "T", node.pos) if place is None or place == len(written) - 1 else node
        if not isinstance(node, S.Expr | S.Keyword):
            return node
        copy = object.__new__(type(node))
        for slot in node.__slots__:
            value = getattr(node, slot)
            setattr(copy, slot, [turn(v) for v in value] if isinstance(value, list) else turn(value))
        return copy

    turned: S.Expr = turn(expr)
    return turned, written


def judge_file(judge: Judge, path: str, name: str | None = None, roots: tuple[str, ...] | None = None) -> Report:
    name = name or path
    try:
        claims, source = read_claims(path, judge.run.options.get("max_file_size", DEFAULT_MAX_FILE_SIZE), roots)
    except GradcalcError as exc:
        return failed_report(name, exc)
    return judge.report(name, (claims, source))


class JudgeMaker:
    """The key's judge for grading workers: inherited as is by forked workers, rebuilt by spawned ones."""

    def __init__(self, judge: Judge) -> None:
        run = judge.run
        self.program, self.inputs, self.options = run.program, run.inputs, run.options
        self.tolerance, self.points, self.seed, self.terms = judge.tolerance, judge.points, judge.seed, judge.terms
        self.judge: Judge | None = judge

    def __call__(self) -> Judge:
        if self.judge is None:
            run = self.program.run(self.inputs, **self.options)
            self.judge = Judge(run, self.tolerance, self.points, self.seed, self.terms)
        return self.judge

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "judge": None}  # a spawned worker runs the key itself


@dataclass
class Submission:
    """One submission to grade: its name in the report, its path, the folder it must stay in, or why not."""

    name: str
    path: str
    root: str
    problem: str | None = None  # a link out of the folder, a device, a FIFO: reported, never read


def submissions(paths: list[str]) -> list[Submission]:
    """Each submission: files as given, folders walked (hidden files skipped), sorted, each named once.

    A folder's files are named from inside it, or, where several paths are given, with the folder's
    own name first (A/hw.txt, B/hw.txt); where two names would still be the same, both are named by
    their whole paths. Links are followed only inside the folder; links out of it, links to folders,
    devices, named pipes and sockets are listed with the reason, never read. A file given twice is
    one submission."""
    found: list[Submission] = []
    for path in paths:
        base = path if len(paths) == 1 else os.path.dirname(os.path.normpath(path))
        if not os.path.isdir(path) or (os.path.islink(path) and len(paths) > 1):
            root = os.path.dirname(path) or os.curdir
            found.append(Submission(path, path, root, entry_problem(path, root)))
            continue
        inside: list[str] = []
        for folder, dirs, files in os.walk(path):
            links = [d for d in dirs if not d.startswith(".") and os.path.islink(os.path.join(folder, d))]
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in links)
            inside.extend(os.path.join(folder, f) for f in [*files, *links] if not f.startswith("."))
        found.extend(Submission(os.path.relpath(f, base), f, path, entry_problem(f, path)) for f in sorted(inside))
    unique: dict[str, Submission] = {}
    for item in found:  # the same file given twice (a.txt a.txt, or a folder and a file in it) is one
        unique.setdefault(os.path.abspath(item.path), item)
    items = list(unique.values())
    counts = Counter(item.name for item in items)
    for item in items:
        if counts[item.name] > 1:  # x/A/hw.txt and y/A/hw.txt: both would be A/hw.txt
            item.name = os.path.normpath(item.path)
    return items
