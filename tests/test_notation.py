"""The claim notation is one layer: the language knows none of it, the notation reads and finishes a claim
before it is judged, and judging changes nothing of the claim it was given."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from gradcalc.errors import GradcalcError, GradcalcSyntaxError, Pos, Source
from gradcalc.language import parser as P
from gradcalc.language import syntax as S
from gradcalc.program.api import Program
from gradcalc.program.notation.juxtaposition import NOTATION
from gradcalc.program.notation.reading import answers, claims_of_program, parse_claims
from gradcalc.program.notation.resolving import finish
from gradcalc.tools.homework import check as C

PACKAGE = Path(P.__file__).resolve().parent.parent

KEY = ("x = 0.7; a = 2; w1 = 3; σ = 0.5; μ = 0.1; f(t) = t^2; W = [[1.0, 2], [3, 4]]; δ = [1.0, -1]\n"
       "v = W @ δ; y = x^2*sin(x) + a*x + w1*σ^2 + f(x); L = sum(v * δ) + y\n")

# Each of the notation's readings, and two of its errors: judged, none may change the claim it was given.
CLAIMS = [
    "dy/dx = 2x sin(x) + x^2 cos(x) + a + 2x",  # side by side, a function's call, 2x
    "dy/dx = x(1 + x)",  # a variable before a bracket: a product
    "dy/dx = e^-x(1 + x)",  # ... after a power
    "dy/da = x + 0 + 0 + 0 + 0",  # a long sum, walked down its left side
    "dy/dx = [2x + 1]",  # brackets that group
    "dL/dW = [[1, 2], [x + 1, 4]]",  # a literal's rows
    "dy/dx = 3f (x)",  # the program's function, called
    "dL/dδ = W^T δ + δ^T(δ)",  # X^T as a transpose; a bracket after T a factor
    "dy/dσ = σ² x + 2w_1 σ",  # a variable written as a function's power; w_1 for w1
    "dy/dx = xa^2 + ax",  # names side by side
    "dy/dx = -(x - μ)/σ^2 f(x)",  # a bare denominator ends at a spaced call
    "dy/dx = 8.07×10^-1",  # scientific notation
    "dy/dw_1 = σ^2",  # the derivative's own names
    "dy/dx = -8.07×10⁻¹ + tanh'(x) (x + 1)/(x(x + 1))",  # negative scientific notation; a prime; a bracketed /
    "dL/dδ = δ ⊗ δ ∘ 1[δ > 0] 2",  # the outer product, elementwise, an indicator, a number after a bracket
    "dy/dx = 1/x(1 + x)",  # ambiguous: the notation's error
    "dy/dx = √x(1 + a)",  # ambiguous too
]


def dump(claim: S.Claim) -> tuple[Any, ...]:
    """Everything about a claim: its fields and nodes by value, and which node objects hold them."""
    return repr(claim), claim.text, [(id(node), repr(node)) for node in S.walk(claim.claimed)]


@pytest.fixture(scope="module")
def judge() -> C.Judge:
    return C.Judge(Program(KEY).run(keep_values=True))


def test_judging_leaves_the_claim_unchanged(judge: C.Judge) -> None:
    source = Source("\n".join(CLAIMS), "answers.txt")
    claims = answers(source.text, source)
    assert all(isinstance(claim, S.Claim) for claim in claims)
    before = [dump(claim) for claim in claims if isinstance(claim, S.Claim)]
    report = judge.report("notation", (claims, source))
    assert [dump(claim) for claim in claims if isinstance(claim, S.Claim)] == before
    assert [v.status for v in report.verdicts][-2:] == ["invalid", "invalid"]  # the two ambiguous ones
    assert report.verdicts[0].status == "right", report.verdicts[0]  # and the notation was read
    latex = r"\frac{\partial y}{\partial x} = 2 x \sin\left(x\right) + x^{2} \cos(x) + a + 2 x"
    (claim,) = parse_claims(latex)
    before = [dump(claim)]
    assert judge.report("latex", ([claim], Source(latex, "latex.txt"))).verdicts[0].status == "right"
    assert [dump(claim)] == before


def test_a_model_s_check_statements_are_not_changed_by_judging_them(judge: C.Judge) -> None:
    model = Program(KEY + "check dy/dx = 2x sin(x) + x^2 cos(x) + a + 2x\ncheck dy/dσ = σ² x + 2w_1 σ\n")
    before = repr(model.module)
    report = judge.report("model", (claims_of_program(model.module), model.source))
    assert [v.status for v in report.verdicts] == ["right", "wrong"]
    assert repr(model.module) == before


def test_the_notation_raises_its_errors_and_the_judge_reports_them_where_they_are(judge: C.Judge) -> None:
    text = "dy/dx = 2x\ndy/dx = 1/x(1 + x)"
    (_, claim) = parse_claims(text)
    with pytest.raises(GradcalcSyntaxError) as raised:
        finish(claim, judge.run.frame, {"sin"}, text)
    assert raised.value.message.startswith("'/x(...)' is ambiguous")
    assert (raised.value.pos.line, raised.value.pos.column) == (2, 11)
    source = Source(text, "answers.txt")
    right, invalid = judge.report("x", (answers(text, source), source)).verdicts
    assert (right.status, invalid.status, invalid.line) == ("wrong", "invalid", 2)
    assert invalid.error is not None
    assert (invalid.error["line"], invalid.error["column"], invalid.error["type"]) == (2, 11, "SyntaxError")


def test_the_language_alone_reads_claims_strictly() -> None:
    """Without the notation, 2x and sin x are the syntax errors a program's would be."""
    text = "x = 2; y = x^2\ncheck dy/dx = 2x"
    with pytest.raises(GradcalcError, match="missing operator"):
        P.parse(text)
    (claim,) = claims_of_program(P.parse(text, dialect=NOTATION))
    assert claim.text == "dy/dx = 2x"
    product = claim.claimed
    assert isinstance(product, S.Binary) and product.op == S.JUXTAPOSED
    assert (product.left, product.right) == (S.Number(2.0, "2", Pos(2, 15, 1)), S.Name("x", Pos(2, 16, 1)))
    with pytest.raises(GradcalcError, match="missing operator"):
        P.parse_claims("dy/dx = sin x")


def _imports(path: Path) -> list[str]:
    """The gradcalc modules a file imports, at its top or inside its functions."""
    found = []
    package = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            found += [module] if node.module else [f"{module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
    return [name for name in found if name.startswith("gradcalc")]


def test_the_language_imports_nothing_above_it() -> None:
    """language/ is built on errors.py alone: no builtin, no notation, not even lazily (it had both)."""
    for path in sorted((PACKAGE / "language").glob("*.py")):
        outside = [name for name in _imports(path)
                   if not name.startswith(("gradcalc.language", "gradcalc.errors"))]
        assert outside == [], (path.name, outside)
