"""diff --steps: every step equal to the next (both read back and run by gradcalc), the rules named, diff's end."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
from helpers import EXIT_OK, examples, located_error, run_cli
from hypothesis import HealthCheck, assume, given, settings
from strategies import expressions
from terminal import run_in_terminal

from gradcalc.engine.steps import RULES
from gradcalc.errors import GradcalcError
from gradcalc.program.api import parse_program

# (program, --wrt, the rules a course names for it, written by hand)
TEXTBOOK = [
    ("y = x^2*sin(x)", "x", ["product rule", "power rule", "derivative of sin"]),
    ("y = 3*x^4 - 2*x + 7", "x", ["difference rule", "constant multiple rule", "power rule", "constant rule"]),
    ("y = sin(x^2)", "x", ["derivative of sin", "chain rule, inner u = x^2", "power rule"]),
    ("y = exp(cos(3*x))", "x", ["derivative of exp", "chain rule, inner u = cos(3*x)", "derivative of cos",
                                "chain rule, inner u = 3*x", "constant multiple rule"]),
    ("y = (x^2 + 1)/(x*sin(x))", "x", ["quotient rule", "product rule", "sum rule", "derivative of sin"]),
    ("y = x*exp(x)/(1 + x^2)", "x", ["quotient rule", "product rule", "derivative of exp", "sum rule"]),
    ("y = log(x^2 + 1) + sqrt(x)", "x", ["sum rule", "derivative of log", "chain rule, inner u = x^2 + 1",
                                         "power rule"]),
    ("y = tanh(2*x)*sigmoid(x)", "x", ["product rule", "derivative of tanh", "derivative of sigmoid"]),
    ("y = 2^x + x^x", "x", ["exponential rule", "logarithmic differentiation"]),
    ("y = atan(x) + asin(x/2)", "x", ["derivative of atan", "derivative of asin", "chain rule, inner u = 1/2*x"]),
    ("y = sinh(x)*cosh(x^2)", "x", ["product rule", "derivative of sinh", "derivative of cosh"]),
    ("y = relu(x - 0.2)^2 + relu(3*x)", "x", ["derivative of relu", "power rule"]),
    ("y = cos(x)/x^3", "x", ["quotient rule", "derivative of cos", "power rule"]),
    ("y = exp(x)*log(x)*x", "x", ["product rule", "derivative of exp", "derivative of log"]),
    ("W = [[1, 2], [3, 4]]; y = sum(softmax(W @ [x, x^2])*[1, 2])", "x",
     ["sum over an axis", "softmax", "matrix product rule", "linearity"]),
    ("y = mean([x, 2*x, x^2]) + sum([x, 3]*x)", "x", ["mean", "sum over an axis", "linearity"]),
    ("W = [[1, 0.5], [2, 1]]; y = sum(W @ [sin(x), x])", "x", ["matrix product rule", "derivative of sin"]),
    ("a = x^2; b = sin(a); y = a*b", "x", ["power rule", "derivative of sin", "constant multiple rule",
                                           "chain rule: 2 paths, y → a → x, y → b → a → x", "substitute"]),
    ("x = 0.9; w = 0.4; h = tanh(w*x + 1); L = (h - 0.5)^2", "w", ["derivative of tanh", "power rule",
                                                          "chain rule: 1 path, L → h → w"]),
    ("u = 3*x; v = exp(u) + u^2; y = log(v)/(u*v)", "x", ["quotient rule", "derivative of exp",
                                                         "chain rule: 2 paths"]),
    ("y = det([[x, 1], [2, x^2]])", "x", ["Jacobi's formula", "linearity", "power rule"]),
    ("y = det([[x, 1], [2, x^2]] @ [[1, x], [0, 2]])", "x", ["Jacobi's formula", "matrix product rule"]),
    ("W = [[2, 1], [1, 3]]; y = log(det(W + sin(x)*[[1, 0], [0, 2]]))", "x",
     ["derivative of log", "Jacobi's formula", "derivative of sin"]),
    ("y = sum(inv([[x, 1], [2, x^2 + 1]]))", "x", ["sum over an axis", "derivative of inv", "linearity"]),
    ("a = sin(x); y = sum(inv([[a, 1], [1, 2]]) @ [1, 2])*det([[a, x], [1, 2]])", "x",
     ["derivative of inv", "Jacobi's formula", "product rule", "chain rule: 2 paths"]),
    # Tensor intermediates are written out: their partials by a matrix (d/dA[A @ A]) are no line of a derivation.
    ("A = [[x, 1], [0, x^2]]; B = A @ A; y = sum(B)", "x", ["sum over an axis", "matrix product rule",
                                                            "power rule"]),
]

_NOT_NAMES = re.compile(r"[A-Za-z_]\w*(?=\()|(?<=[,(] )axis|keepdims")


def _names(text: str) -> set[str]:
    """The variables a step's text reads (not its function names or keyword arguments)."""
    return set(re.findall(r"[A-Za-z_]\w*", _NOT_NAMES.sub("", text)))


def _value(source: str, point: dict, part: str, text: str) -> np.ndarray:
    """A step's text run by gradcalc: in the program (its variables as it computes them), or, for a
    statement's partial derivative ∂b/∂a, with the statement's inputs as independent values."""
    if part.startswith("∂"):
        base = parse_program(source).run(dict(point))
        given = {name: base.value(name) for name in _names(text) if name in base.names}
        return parse_program(f"s_ = {text}").run(given).value("s_")
    return parse_program(f"{source}\ns_ = {text}").run(dict(point)).value("s_")


def _steps(source: str, wrt: str, *extra: str) -> dict:
    result = run_cli("diff", "-e", source, "--wrt", wrt, "--steps", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize(("source", "wrt", "rules"), TEXTBOOK, ids=[case[0] for case in TEXTBOOK])
def test_each_step_equals_the_next_and_names_its_rules(source: str, wrt: str, rules: list[str]) -> None:
    program = f"{wrt} = 0.7; {source}" if not source.startswith(f"{wrt} =") and f"{wrt} = " not in source \
        else source
    doc = _steps(program, wrt)
    steps = doc["steps"]
    named = " | ".join(step["rule"] for step in steps)
    for rule in rules:
        assert rule in named, f"{rule!r} not among {named}"
    for step in steps:
        for rule in re.split(r"; ", step["rule"]):
            assert rule.split(":")[0].split(",")[0].removeprefix("derivative of ").strip() in RULES or \
                rule.startswith(("derivative of ", "substitute")), rule
    rng = np.random.default_rng(len(source))
    for _ in range(3):
        point = {wrt: np.float64(rng.uniform(0.3, 1.3))}
        for step in steps:
            before = _value(program, point, step["part"], step["before"])
            after = _value(program, point, step["part"], step["after"])
            np.testing.assert_allclose(after, before, rtol=1e-9, atol=1e-12,
                                       err_msg=f"{step['before']} = {step['after']} ({step['rule']})")
    # The last line is diff's answer (its shared parts, `where t1 = ...`, written in place).
    if doc["where"]:
        assert not _names(steps[-1]["after"]) & set(doc["where"])
    else:
        assert steps[-1]["after"] == doc["derivative"]
    plain = json.loads(run_cli("diff", "-e", program, "--wrt", wrt, "--json").stdout)
    assert doc["derivative"] == plain["derivative"] and doc["value"] == plain["value"]


def test_a_derivation_reads_as_a_course_writes_it() -> None:
    shown = run_cli("diff", "-e", "y = x^2*sin(x)", "--steps")
    assert shown.exit_code == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "dy/dx, y = x^2*sin(x)"
    assert lines[1] == "  d/dx[x^2*sin(x)]"
    assert lines[2].split() == ["=", "d/dx[x^2]*sin(x)", "+", "x^2*d/dx[sin(x)]", "(product", "rule)"]
    assert lines[3].split() == ["=", "x^2*cos(x)", "+", "2*x*sin(x)", "(derivative", "of", "sin;", "power", "rule)"]


def test_exact_numbers_and_decimal() -> None:
    exact = _steps("x = 1; y = x^3/3 + x/2", "x")
    assert exact["steps"][-1]["after"] == "x^2 + 1/2"
    assert any("1/3*diff(x^3, x)" in step["after"] for step in exact["steps"])
    decimal = _steps("x = 1; y = x^3/3 + x/2", "x", "--decimal")
    assert decimal["steps"][-1]["after"] == "x^2 + 0.5"


def test_latex_is_one_aligned_block_with_the_rules() -> None:
    result = run_cli("diff", "-e", "x = 0.5; a = x^2; b = sin(a); y = a*b", "--wrt", "x", "--steps", "--latex")
    assert result.exit_code == 0, result.stderr
    text = result.stdout.strip()
    assert text.startswith(r"\begin{aligned}") and text.endswith(r"\end{aligned}")
    depth = 0
    for c in re.sub(r"\\[{}]", "", text):
        depth += {"{": 1, "}": -1}.get(c, 0)
        assert depth >= 0
    assert depth == 0
    rows = text.split("\n")[1:-1]
    assert rows[0] == r"\frac{\partial a}{\partial x} &= \frac{d}{dx}\left[x^{2}\right] \\"
    assert rows[1] == r"&= 2 x && \text{(power rule)} \\"
    assert r"\text{(substitute a = x\^{}2, b = sin(a); simplify)}" in rows[-1]


def test_json_shape() -> None:
    doc = _steps("x = 2; y = x^3", "x")
    assert set(doc) == {"of", "wrt", "derivative", "latex", "where", "evaluable", "value", "steps", "definitions"}
    assert doc["steps"] == [{"part": "dy/dx", "rule": "power rule", "before": "diff(x^3, x)", "after": "3*x^2",
                             "latex": "3 x^{2}"}]
    assert doc["value"] == 12 and doc["definitions"] == {"y": "x^3"}


def test_an_output_that_does_not_depend_on_the_variable() -> None:
    doc = _steps("x = 2; w = 3; y = w^2", "x")
    assert doc["steps"] == [{"part": "dy/dx", "rule": "constant rule", "before": "diff(y, x)", "after": "0",
                             "latex": "0"}]


@pytest.mark.parametrize(("args", "message"), [
    (["--order", "2"], "--steps and --order do not combine"),
    (["--keep", "a"], "--steps and --keep do not combine"),
    (["--wrt", "x,w"], "--steps follows one derivative"),
])
def test_refused_combinations(args: list[str], message: str) -> None:
    result = run_cli("diff", "-e", "x = 1; w = 2; a = x*w; y = a^2", "--steps", *args)
    assert result.exit_code == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_a_tensor_variable_is_refused_with_a_way_out() -> None:
    result = run_cli("diff", "-e", "x = [1, 2]; y = sum(x^2)", "--wrt", "x", "--steps")
    assert result.exit_code == 2 and "scalar variable; 'x' has shape (2,)" in result.stderr
    several = run_cli("diff", "-e", "x = 1; w = 2; y = x*w", "--steps")
    assert several.exit_code == 2 and "name one with --wrt (one of: x, w)" in several.stderr


def test_a_derivation_too_long_to_read_stops_with_a_located_error() -> None:
    # each line restates the whole expression: 150 nested sin's made 81,000 lines (6.5 MB) in 22 s
    nested = "x"
    for _ in range(150):
        nested = f"sin({nested})"
    result = run_cli("diff", "-e", f"x = 0.5\ny = {nested}", "--wrt", "x", "--steps")
    error = located_error(result, file="<expr>", line=2, column=1)
    assert "the steps grew past 300,000 characters" in error.message, error.message
    assert "diff without it" in error.hint
    assert run_cli("diff", "-e", f"x = 0.5\ny = {nested}", "--wrt", "x").exit_code == EXIT_OK


def test_fifty_nested_functions_still_step() -> None:
    nested = "x"
    for _ in range(50):
        nested = f"sin({nested})"
    doc = _steps(f"x = 0.5; y = {nested}", "x")
    assert doc["steps"][0]["rule"].startswith("derivative of sin")  # the outer sin first
    assert "diff" not in doc["steps"][-1]["after"]  # the last line has no derivative left


def test_diff_builtin_evaluates_an_unevaluated_derivative() -> None:
    run = parse_program("x = 2; a = diff(x^3, x); b = diff([x, x^2, 5], x); c = diff(sin(x), x)").run({})
    assert run.value("a") == 12
    np.testing.assert_array_equal(run.value("b"), [1, 4, 0])
    assert run.value("c") == pytest.approx(np.cos(2.0), rel=1e-15)
    refused = run_cli("eval", "-e", "x = [1, 2]; y = diff(x^2, x)")
    assert refused.exit_code == 2 and "differentiates by a scalar variable" in refused.stderr


def test_eighty_columns_wrap_and_cut_nothing() -> None:
    source = "x = 0.3; y = sin(x^2 + 3*x)*exp(cos(x)) / (1 + x^2*tanh(x) + sigmoid(2*x)*log(1 + x^4))"
    doc = _steps(source, "x")
    shown = run_in_terminal("diff", "-e", source, "--wrt", "x", "--steps", columns=80)
    assert shown.status == 0, shown.stderr
    lines = shown.screen.splitlines()
    assert all(len(line) <= 80 for line in lines)
    flat = re.sub(r"\s+", "", shown.screen)
    for step in doc["steps"]:
        assert re.sub(r"\s+", "", step["rule"]) in flat
    assert re.sub(r"\s+", "", doc["steps"][-1]["after"]) in flat


def test_a_gradient_through_diff_is_the_second_derivative() -> None:
    # d/dx sum(d/dx [x^3, x^2]) = d/dx (3x^2 + 2x) = 6x + 2: 14 at x = 2
    result = run_cli("grad", "-e", "x = 2; z = sum(diff([x^3, x^2], x))", "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["grad"]["x"] == 14


def test_claims_cannot_use_diff_and_say_why() -> None:
    result = run_cli("check", "-e", "x = 2; y = x^3", "--claim", "dy/dx = diff(y, x)")
    assert result.exit_code == 1
    assert "diff(u, x) needs the program's graph" in result.stdout


def test_a_builtin_without_a_rule_is_named() -> None:
    result = run_cli("diff", "-e", "x = 1; y = logdet([[x + 2, 1], [2, x + 3]])", "--steps")
    assert result.exit_code == 2 and "--steps has no rule for logdet() yet" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("source", ["x = 1; A = [[x, 1], [2, x^2]]; y = det(A)",
                                    "x = 1; A = [[x, 1], [2, x^2]]; y = sum(inv(A))"])
def test_det_and_inv_of_a_matrix_statement_step_through_it_written_out(source: str) -> None:
    """A matrix made by its own statement is written out in the lines (its partial by a matrix is no line)."""
    doc = _steps(source, "x")
    assert doc["steps"][0]["before"].startswith(("diff(det([[x, 1], [2, x^2]])", "diff(sum(inv([[x, 1], [2, x^2]]"))
    point = {"x": 1.3}
    for step in doc["steps"]:
        assert _value(source, point, step["part"], step["after"]) == pytest.approx(
            _value(source, point, step["part"], step["before"]), rel=1e-9)


def test_jacobi_s_formula_reads_as_written() -> None:
    doc = _steps("x = 0.8; y = det([[x, 1], [2, x^2]])", "x")
    first = doc["steps"][0]
    assert first["rule"] == "Jacobi's formula"
    assert first["after"] == "det([[x, 1], [2, x^2]])*trace(inv([[x, 1], [2, x^2]]) @ diff([[x, 1], [2, x^2]], x))"
    assert doc["value"] == pytest.approx(3 * 0.8**2, rel=1e-12)  # det = x^3 - 2


def test_a_long_program_keeps_diffs_shared_parts_named() -> None:
    # 50 statements that each use the one before twice: written in place, the answer would double per statement.
    lines = ["x = 0.5", "a1 = sin(x) + x^2"] + \
        [f"a{k} = tanh(a{k - 1})*0.9 + 0.05*a{k - 1}^2 + 0.01*x*a{k - 1}" for k in range(2, 49)] + ["y = a48^2"]
    source = "\n".join(lines)
    doc = _steps(source, "x")
    assert doc["where"] and doc["steps"][-1]["after"] == doc["derivative"]
    parts = [step["part"] for step in doc["steps"]]
    assert parts[0] == "∂a1/∂x" and parts.count("chain rule") == 49 + 1  # a line a statement, then the answer
    chain = [step for step in doc["steps"] if step["part"] == "chain rule"]
    assert chain[0]["rule"] == "chain rule: 48 paths, joined statement by statement"
    assert [step["before"] for step in chain[:2]] == ["diff(a1, x)", "diff(a2, x)"]
    assert chain[-1]["before"] == "diff(y, x)" and chain[-1]["rule"] == "substitute the 48 statements above; simplify"
    point = {"x": np.float64(0.8)}
    for step in chain[:-1]:  # diff(a7, x) = ... + diff(a6, x)*(...): each evaluated in the program
        np.testing.assert_allclose(_value(source, point, "chain rule", step["after"]),
                                   _value(source, point, "chain rule", step["before"]), rtol=1e-9)
    shown = run_cli("diff", "-e", source, "--wrt", "x", "--steps").stdout
    assert "\n  where t1 = " in shown


def test_by_an_intermediate_the_last_step_writes_it_out() -> None:
    doc = _steps("x = 1; a = x^2; y = sin(a)", "a")
    assert [(step["rule"], step["after"]) for step in doc["steps"]] == [
        ("derivative of sin", "cos(a)"), ("substitute a = x^2; simplify", "cos(x^2)")]
    assert doc["derivative"] == "cos(x^2)"


def test_a_reassigned_variable_is_read_through_not_confused_with_the_leaf() -> None:
    # x = x^2 + 1 makes a second x: the steps are in the leaf x alone, as diff's answer is.
    doc = _steps("x = 2; x = x^2 + 1; y = sin(x)", "x")
    assert {step["part"] for step in doc["steps"]} == {"dy/dx"}
    assert doc["steps"][0]["before"] == "diff(sin(x^2 + 1), x)"
    assert doc["steps"][-1]["after"] == doc["derivative"] == "2*x*cos(x^2 + 1)"


def test_a_tensor_intermediate_has_no_partial_of_its_own() -> None:
    """`B = A @ A` by the matrix A was printed as `1 @ A + A @ 1`: no statement's partial by a tensor is shown."""
    doc = _steps("A = [[x, 1], [0, x^2]]; B = A @ A; h = sum(B); y = h^2", "x")
    parts = {step["part"] for step in doc["steps"]}
    assert not any(part.startswith(("∂B/", "∂A/", "∂h/∂B")) for part in parts), parts
    assert not any("1 @ A" in step["after"] for step in doc["steps"])


def test_steps_through_a_branch_say_they_follow_the_path_taken() -> None:
    """As diff's: the derivative of x^2 is not y's on the other branch, so the path is named."""
    result = run_cli("diff", "-e", "x = 2; y = x^2 if x > 1 else sin(x)", "--steps")
    assert result.exit_code == 0, result.stderr
    assert "= 2*x" in result.stdout and "along the path this run executed" in result.stdout


def test_a_shared_part_written_in_place_takes_no_brackets_it_does_not_need() -> None:
    """diff's `where t1 = exp(x) + 1` put back in place: log(exp(x) + 1), not log((exp(x) + 1)); a power
    needs none inside a difference (1 - tanh(x^2)^2); the line still equals the one before (TEXTBOOK's check)."""
    source = "y = log(exp(x) + 1)*sin(exp(x) + 1) + tanh(x^2)^2*(1 - tanh(x^2)^2)"
    step = _steps(source, "x")["steps"][-1]
    last = step["after"]
    assert "((" not in last and "(tanh(x^2)^2)" not in last, last
    assert "log(exp(x) + 1)" in last and "1 - tanh(x^2)^2" in last, last
    point = {"x": 0.3}
    assert _value(source, point, step["part"], last) == pytest.approx(
        _value(source, point, step["part"], step["before"]), rel=1e-12)


def _doubled(text: str) -> str | None:
    """The first bracket pair that only wraps another, ((a + b)) or {(a + b)} (LaTeX's \\left( \\right) read as
    ( ), \\frac's and a superscript's braces as braces), with what surrounds it; None where there is none."""
    plain = text.replace(r"\left(", "(").replace(r"\right)", ")").replace(r"\left[", "[").replace(r"\right]", "]")
    opened: list[int] = []
    pairs: dict[int, int] = {}
    for i, c in enumerate(plain):
        if c in "({[":
            opened.append(i)
        elif c in ")}]" and opened:
            pairs[opened.pop()] = i
    found = next((i for i, j in pairs.items() if plain[i] + plain[i + 1] in ("((", "{(") and pairs.get(i + 1) == j - 1),
                 None)
    return None if found is None else plain[max(0, found - 20):pairs[found] + 20]


def test_the_last_line_brackets_a_shared_part_only_where_its_place_needs_it() -> None:
    """diff's t1 = (x + 1/2)^2 + 1 put back in place in LaTeX: the printer brackets it as any operand there, so
    no \\left(\\left(...\\right)\\right) in log's argument, and none in \\frac's denominator."""
    last = _steps("a = tanh(x); y = -(2 + a)*log((x + 0.5)^2 + 1)", "x")["steps"][-1]
    assert last["rule"] == "substitute a = tanh(x); simplify"
    assert r"\log\left(\left(x + \frac{1}{2}\right)^{2} + 1\right)" in last["latex"], last["latex"]
    assert r"}{\left(x + \frac{1}{2}\right)^{2} + 1}" in last["latex"], last["latex"]
    assert _doubled(last["latex"]) is None and _doubled(last["after"]) is None, last


def test_a_numerator_alone_takes_no_brackets_in_latex() -> None:
    """\\frac sets its numerator apart as it does its denominator: the quotient rule's (f'g - fg')/g^2 is
    \\frac{f'g - fg'}{g^{2}}, not \\frac{\\left(f'g - fg'\\right)}{g^{2}}."""
    first = _steps("y = (x - 2)/(x^2 + 1)", "x")["steps"][0]
    assert first["rule"] == "quotient rule"
    assert first["latex"] == (r"\frac{\frac{d}{dx}\left[x - 2\right] \left(x^{2} + 1\right)"
                              r" - \frac{d}{dx}\left[x^{2} + 1\right] \left(x - 2\right)}"
                              r"{\left(x^{2} + 1\right)^{2}}"), first


@given(expressions(["x"], depth=2), expressions(["x", "a0"], depth=2), expressions(["x", "a0", "a1"]))
@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_random_programs_steps_never_double_a_bracket(first: str, second: str, output: str) -> None:
    """Statements used more than once become diff's shared parts, which the last line writes in place: no line,
    in any of its forms, has a pair of brackets that only wraps another."""
    source = f"x = 0.7; a0 = {first}; a1 = {second}; y = {output} + sin({output})*{output}"
    try:
        found, _ = parse_program(source).run({}).steps("y", "x")
    except GradcalcError:  # a program the strategy made that does not run here, or steps too long to read
        assume(False)
    for step in found.steps:
        for form in (step.after, step.shown_after, step.latex):
            assert _doubled(form) is None, (source, step.rule, _doubled(form))
