"""The notations students write (#20), each judged through `gradcalc check` against a program whose
derivative is known by hand: read as meant where it is right, wrong where it is wrong, and an error that
shows both readings where readers split on it. Also LaTeX check lines in a model, and Jupyter notebooks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, EXIT_WRONG, run_cli, strict_json

from gradcalc.program.notation.reading import read_claims


def judged(program: str, *claims: str, count: int | None = None) -> list[dict[str, Any]]:
    """Each claim's verdict (JSON) against the program (count: how many claims the texts hold, if not one each)."""
    args = [a for claim in claims for a in ("--claim", claim)]
    result = run_cli("check", "-e", program, *args, "--json")
    assert result.exit_code in (EXIT_OK, EXIT_WRONG, EXIT_BAD_INPUT), result.output
    verdicts: list[dict[str, Any]] = strict_json(result.stdout)["results"]
    assert len(verdicts) == (len(claims) if count is None else count), verdicts
    return verdicts


def statuses(program: str, *claims: str) -> list[str]:
    return [verdict["status"] for verdict in judged(program, *claims)]


def error(program: str, claim: str) -> str:
    """The message of a claim that cannot be judged."""
    (verdict,) = judged(program, claim)
    assert verdict["status"] == "invalid", verdict
    message: str = verdict["error"]["message"]
    return message


# y = sin(x² + 1)³: dy/dx = 3 sin(x² + 1)² cos(x² + 1) · 2x.
CHAIN = "x = 0.7; y = sin(x^2 + 1)^3"
# y = (x² + 1)/(x - 3): dy/dx = [(x - 3)·2x - (x² + 1)]/(x - 3)² (the quotient rule).
QUOTIENT = "x = 0.7; y = (x^2 + 1)/(x - 3)"


@pytest.mark.parametrize(("claim", "status"), [
    ("dy/dx = 3sin(x^2 + 1)^2 cos(x^2 + 1) 2x", "right"),  # a number after a space
    ("dy/dx = 3sin(x^2 + 1)^2 cos(x^2 + 1)2x", "right"),  # ... and after a bracket
    ("dy/dx = 3sin(x^2 + 1)^2 cos(x^2 + 1) 3x", "wrong"),
    ("dy/dx = 2x 3sin(x^2 + 1)^2 cos(x^2 + 1)", "right"),
])
def test_a_number_after_a_bracket_or_a_space_multiplies(claim: str, status: str) -> None:
    assert statuses(CHAIN, claim) == [status]


def test_the_readme_s_quotient_rule_is_read_as_written() -> None:
    assert statuses(QUOTIENT, "dy/dx = [(x - 3)2x - (x² + 1)]/(x - 3)²", "dy/dx = [(x - 3)2x + (x² + 1)]/(x - 3)²",
                    "dy/dx = ((x - 3) 2x - (x^2 + 1))/(x - 3)^2") == ["right", "wrong", "right"]


@pytest.mark.parametrize(("claim", "message"), [
    ("dy/dx = 1/(x + 1)2", "'/(x+1)2' is ambiguous: is '2' in the denominator or not?"),  # as 1/2x
    ("dy/dx = 2 3", "missing operator before '3'"),  # 2.3? 23? not a product
    ("dy/dx = x²2", "missing operator before '2'"),  # a number written tight after a power
])
def test_a_number_where_readers_split_stays_an_error(claim: str, message: str) -> None:
    assert error(CHAIN, claim) == message


# y = 3 ln x + ln(x + 1): dy/dx = 3/x + 1/(x + 1) = (4x + 3)/(x(x + 1)).
LOGS = "x = 0.7; y = 3*log(x) + log(x + 1)"


def test_a_bracketed_denominator_that_starts_with_a_name_is_a_product() -> None:
    assert statuses(LOGS, "dy/dx = (4x + 3)/(x(x + 1))", r"dy/dx = \frac{4x+3}{x(x+1)}",
                    r"\frac{dy}{dx} = \frac{4x + 3}{x (x + 1)}", "dy/dx = (4x + 3)/(x(x + 2))",
                    r"dy/dx = \frac{4x+3}{x(x+2)}") == ["right", "right", "right", "wrong", "wrong"]
    # Without the brackets readers split on it, as before.
    assert error(LOGS, "dy/dx = (4x + 3)/x(x + 1)").startswith("'/x(...)' is ambiguous")


def test_a_bracketed_exponent_that_starts_with_a_name_is_a_product() -> None:
    """e^(x(1 + x)) is e to the product; e^x(1 + x), without the bracket, is e^x times (1 + x)."""
    program = "x = 0.7; y = exp(x*(1 + x))"  # dy/dx = e^(x(1 + x))·(1 + 2x)
    assert statuses(program, "dy/dx = e^(x(1 + x))(1 + 2x)", "dy/dx = e^{x(1+x)}(1+2x)",
                    "dy/dx = e^(x(1 + x))") == ["right", "right", "wrong"]
    assert statuses("x = 0.7; y = x*exp(x)", "dy/dx = e^x(1 + x)") == ["right"]


def test_negative_scientific_notation_keeps_the_digits_written() -> None:
    program = "x = 0.7; y = -0.15312*x"  # dy/dx = -0.15312
    verdicts = judged(program, r"dy/dx = -1.53 \times 10^{-1}", "dy/dx = -1.53×10⁻¹", "dy/dx = -1.5 × 10^-1",
                      "dy/dx = -1.54×10⁻¹", r"dy/dx = 1.53 \times 10^{-1}", "dy/dx = -1.53×10⁻²")
    assert [v["status"] for v in verdicts] == ["right", "right", "right", "wrong", "wrong", "wrong"]
    assert verdicts[0]["note"] == "rounded to 3 significant digits (the value is -0.15312)"
    assert verdicts[2]["note"] == "rounded to 2 significant digits (the value is -0.15312)"
    assert verdicts[3]["diagnosis_code"] == "last_digit"
    assert verdicts[4]["diagnosis_code"] == "sign"
    assert statuses("x = 0.7; y = -0.0222*x", "dy/dx = -2.22×10⁻²", "dy/dx = -2.2×10⁻²") == ["right", "right"]


def test_square_brackets_group_after_a_slash_and_around_a_comparison() -> None:
    # Binary cross-entropy: dL/dp = -y/p + (1 - y)/(1 - p) = (p - y)/(p(1 - p)).
    entropy = "p = 0.3; y = 1; L = -(y*log(p) + (1 - y)*log(1 - p))"
    assert statuses(entropy, "dL/dp = (p - y)/[p(1 - p)]", "dL/dp = (p - y)/[p(1 + p)]") == ["right", "wrong"]
    # ReLU: dL/dz = 1 where z > 0, else 0, written as an indicator.
    relu = "z = [0.5, -1, 2]; L = sum(relu(z))"
    assert statuses(relu, "dL/dz = 1[z > 0]", "dL/dz = [z > 0]", "dL/dz = 1[z < 0]") == ["right", "right", "wrong"]
    (vector,) = judged(relu, "dL/dz = [z]")  # one name in brackets stays a vector of one row
    assert (vector["status"], vector["got"]) == ("wrong", [[0.5, -1, 2]])


# L = w²: ∂L/∂w = 2w.
SQUARE = "w = 0.5; L = w^2"


def test_mathcal_and_nabla_name_the_output_and_the_gradient() -> None:
    assert statuses(SQUARE, r"\frac{\partial \mathcal{L}}{\partial w} = 2w", r"\nabla_{w} \mathcal{L} = 2w",
                    r"\nabla_w L = 2 w", r"$\nabla_{w} L = w$") == ["right", "right", "right", "wrong"]
    assert error(SQUARE, r"\nabla L = 2w") == "a gradient \\nabla needs what it is taken by, as a subscript"


def test_an_aligned_derivation_is_judged_by_its_last_line() -> None:
    derivation = r"\begin{aligned} \frac{\partial L}{\partial w} &= 2w \cdot 1 \\ &= 2w \end{aligned}"
    slip = r"\begin{aligned} \frac{\partial L}{\partial w} &= 2w \\ &= w \end{aligned}"
    mended = r"\begin{align*} \frac{\partial L}{\partial w} &= 3w - w \\ &\approx 2w \end{align*}"  # a wrong step
    going_on = r"\begin{aligned} \frac{\partial L}{\partial w} &= w \\ &\quad + w \end{aligned}"  # a line goes on
    assert statuses(SQUARE, derivation, slip, mended, going_on) == ["right", "wrong", "right", "right"]
    two = judged("w = 0.5; b = 2; L = w^2 + 3*b", r"\begin{align} \frac{\partial L}{\partial w} &= 2w \\ "
                 r"\frac{\partial L}{\partial b} &= 2 \end{align}", count=2)
    assert [(v["wrt"], v["status"]) for v in two] == [("w", "right"), ("b", "wrong")]


@pytest.mark.parametrize(("claim", "message"), [
    (r"\begin{aligned} \frac{\partial L}{\partial w} &= 2w \\ &= 2w", "\\begin{aligned} is never ended"),
    (r"\begin{aligned} \\ \end{aligned}", "\\begin{aligned} holds no claim"),
    (r"\begin{align*} 2w \\ &= 2w \end{align*}", "a derivation's first line has no '='"),
    (r"\nabla_{w} = 2w", "a gradient is read as \\nabla_{w} L: one name as the subscript, one after it"),
])
def test_a_derivation_or_a_gradient_that_cannot_be_read_says_so(claim: str, message: str) -> None:
    assert error(SQUARE, claim) == message


def test_prose_around_math_is_read_past() -> None:
    assert statuses(SQUARE, r"The gradient is $\frac{\partial L}{\partial w} = 2w$.",
                    r"so $\frac{\partial L}{\partial w} = w$, as shown", "dL/dw = $2w$") == ["right", "wrong", "right"]
    both = judged(SQUARE, r"We get $\frac{\partial L}{\partial w} = 2w$ and $L = 0.25$, where $w$ is the weight.",
                  count=2)
    assert [(v["of"], v["wrt"], v["status"]) for v in both] == [("L", "w", "right"), ("L", None, "right")]


def test_a_prime_is_the_derivative_of_a_builtin_at_its_argument() -> None:
    sigmoid = "z = [0.5, -1, 2]; L = sum(sigmoid(z))"  # dL/dz = σ(z)(1 - σ(z))
    assert statuses(sigmoid, "dL/dz = σ'(z)", "dL/dz = sigmoid′(z)", r"dL/dz = \sigma'(z)",
                    r"dL/dz = \sigma^{\prime}(z)", "dL/dz = tanh'(z)", "dL/dz = 2σ'(z)") == \
        ["right", "right", "right", "right", "wrong", "wrong"]
    # tanh' = 1 - tanh²; relu' is the mask, so d/dz relu(z)·z = relu'(z)·z + relu(z).
    assert statuses("z = [0.5, -1, 2]; L = sum(tanh(2*z))", "dL/dz = 2tanh'(2z)", "dL/dz = tanh'(2z)") == \
        ["right", "wrong"]
    assert statuses("z = [0.5, -1, 2]; L = sum(relu(z)*z)", "dL/dz = relu'(z) ∘ z + relu(z)",
                    "dL/dz = relu'(z) + relu(z)") == ["right", "wrong"]
    assert statuses("x = 0.7; y = sin(x^2)", "dy/dx = sin'(x^2) 2x", "dy/dx = cos(x^2) 2x") == ["right", "right"]


@pytest.mark.parametrize(("claim", "message"), [
    ("dL/dz = p'(z)", "'p'(...)': 'p' is not a function, so it has no derivative to take"),
    ("dL/dz = h'(z)", "'h'(...)': a prime is read for a function of one parameter written as one expression, "
                      "h(t) = ..."),  # a body of statements may branch on its argument
    ("dL/dz = k'(z)", "'k'(...)': a prime is read for a function of one parameter written as one expression, "
                      "k(t) = ..."),
    ("dL/dz = σ'(z, 1)", "'σ'(...)' takes one argument: a function of one variable's derivative"),
    ("dL/dz = outer'(z)", "'outer'(...)': outer is not a function of one number, with a derivative"),
    ("dL/dz = randn'(z)", "'randn'(...)': randn is not a function of one number, with a derivative"),
    ("dL/dz = σ' (z)", "unexpected character \"'\""),  # a prime is written against its bracket
])
def test_a_prime_that_names_no_derivative_says_so(claim: str, message: str) -> None:
    program = ("h(t) { if t > 0 { return t }; return 0 }; k(a, b) = a*b; z = [0.5, -1, 2]; p = sigmoid(z); "
               "L = sum(p)")
    assert error(program, claim) == message


def test_a_prime_of_the_program_s_own_function_is_its_derivative_there() -> None:
    # y = f(x) + Σ g(z), f(t) = a t² + sin t, g(t) = relu(t)·t: dy/dx = 2a x + cos x, dy/dz = relu'(z) z + relu(z).
    program = ("a = 3; f(t) = a*t^2 + sin(t); g(t) = relu(t)*t; x = 0.7; z = [0.5, -1, 2]; y = f(x) + sum(g(z)); "
               "t = 1")  # a variable t: the derivative's own parameter is another name
    assert statuses(program, "dy/dx = f'(x)", "dy/dx = f′(x) + 0t", "dy/dx = f'(2x)", "dy/dz = g'(z)",
                    "dy/dz = g'(z) z") == ["right", "right", "wrong", "right", "wrong"]
    # a is moved at the nearby points: f' reads it, as f does (held at 3, the claim would hold)
    (moved,) = judged(program, "dy/dx = 6x + cos(x)")
    assert (moved["status"], moved["diagnosis_code"]) == ("wrong", "held_constant")


def test_circle_is_elementwise_and_otimes_the_outer_product() -> None:
    # h = tanh(W x), L = Σ h²: dL/dW = (2h ⊙ (1 - h²)) xᵀ, dL/dx = Wᵀ (2h ⊙ (1 - h²)).
    layer = "W = [[1, 2], [3, 4]]; x = [0.5, -1]; h = tanh(W @ x); L = sum(h^2)"
    assert statuses(layer, "dL/dW = (2h ∘ (1 - h^2)) ⊗ x", r"dL/dW = (2h \circ (1 - h^2)) \otimes x",
                    "dL/dx = Wᵀ(2h ∘ (1 - h²))") == ["right", "right", "right"]
    (turned,) = judged(layer, "dL/dW = x ⊗ (2h ∘ (1 - h^2))")
    assert (turned["status"], turned["diagnosis_code"]) == ("wrong", "transposed")


def test_a_latex_check_line_in_a_model_is_read_as_a_claim(tmp_path: Path) -> None:
    key = tmp_path / "key.eq"
    key.write_text("w = 0.5\nL = w^2\n", encoding="utf-8")
    model = tmp_path / "model.eq"
    model.write_text("w = 0.5\ncheck dL/dw = 2w\ncheck \\frac{\\partial L}{\\partial w} = 2 w\n"
                     "check \\nabla_{w} \\mathcal{L} = w\ncheck \\frac{\\partial L}{\\partial w} = \\foo\n"
                     "check dL/dw = 2w ∘ 1\n", encoding="utf-8")
    result = run_cli("check", key, model, "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    verdicts = strict_json(result.stdout)["results"]
    assert [(v["line"], v["status"]) for v in verdicts] == [(2, "right"), (3, "right"), (4, "wrong"), (5, "invalid"),
                                                          (6, "right")]
    assert verdicts[3]["claim"] == "\\frac{\\partial L}{\\partial w} = \\foo"
    assert verdicts[3]["error"]["message"] == "unknown LaTeX command '\\foo'"
    assert (verdicts[3]["error"]["line"], verdicts[3]["error"]["column"]) == (5, 39)


def notebook(path: Path, *cells: tuple[str, str]) -> Path:
    """Write a notebook (nbformat 4) of (kind, source) cells; a code cell's source as a list of lines, as Jupyter
    saves it."""
    def cell(kind: str, source: str) -> dict[str, Any]:
        lines = source.splitlines(keepends=True)
        found: dict[str, Any] = {"cell_type": kind, "metadata": {}, "source": lines if kind == "code" else source}
        if kind == "code":
            found.update(execution_count=None, outputs=[])
        return found

    path.write_text(json.dumps({"cells": [cell(k, s) for k, s in cells], "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}), encoding="utf-8")
    return path


NOTEBOOK_KEY = "w = 0.5; b = 2; z = [0.5, -1, 2]; L = w^2 + 3*b + sum(sigmoid(z))"


def test_a_notebook_s_code_and_markdown_cells_are_read_for_claims(tmp_path: Path) -> None:
    path = notebook(
        tmp_path / "hw.ipynb",
        ("markdown", "# Homework 3\nCompute the gradients of $L$ with $w = 0.5$."),  # 1-3: no claim
        ("code", "import numpy as np\ncheck dL/dw = 2w\ncheck = w > 0  # Python\ncheck dL/dz = σ'(z)"),  # 4-8
        ("markdown", "The gradient is $\\frac{\\partial L}{\\partial w} = 2w$.\n"  # 9: cell 3 header; 10
                     "- dL/db = 2\n"  # 11: a list's item
                     "where $w$ is a weight, and dL/dw = 3w is prose\n"  # 12: no claim in its math
                     "$$\n\\begin{aligned}\n\\frac{\\partial L}{\\partial b} &= 3 \\cdot 1 \\\\\n&= 3\n"
                     "\\end{aligned}\n$$\n"  # 13-18: one claim, at its left side (15)
                     "> dL/dw = 2w +"),  # 19: a slip, that claim's alone
    )
    result = run_cli("check", "-e", NOTEBOOK_KEY, path, "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    verdicts = strict_json(result.stdout)["results"]
    assert [(v["line"], v["wrt"], v["status"]) for v in verdicts] == [
        (6, "w", "right"), (8, "z", "right"), (10, "w", "right"), (11, "b", "wrong"), (15, "b", "right"),
        (19, None, "invalid")]
    assert verdicts[5]["error"]["message"] == "the claim ends before its value"
    text = run_cli("check", "-e", NOTEBOOK_KEY, path).output
    assert "  19 | > dL/dw = 2w +" in text  # the notebook as text: each cell after its `# cell N (kind)` line


def test_a_notebook_without_claims_and_malformed_notebooks_are_told(tmp_path: Path) -> None:
    prose = notebook(tmp_path / "prose.ipynb", ("markdown", "No answers here: dL/dw is hard."), ("raw", "dL/dw = 1"))
    claims, source = read_claims(str(prose))  # what the CLI makes of no claim is its own rule, as for a text file
    assert (claims, source.text) == ([], "# cell 1 (markdown)\nNo answers here: dL/dw is hard.\n# cell 2 (raw)\n"
                                         "dL/dw = 1")
    for name, content, message in [
        ("cut.ipynb", '{"cells": [', "its JSON does not parse (Expecting value)"),
        ("old.ipynb", '{"nbformat": 3, "worksheets": []}', "its nbformat is 3, not 4"),
        ("list.ipynb", "[1, 2]", "it is JSON, but not a notebook's object"),
        ("cell.ipynb", '{"nbformat": 4, "cells": [{"cell_type": "code"}]}', "cell 1 has no cell_type and text source"),
    ]:
        path = tmp_path / name
        path.write_text(content, encoding="utf-8")
        result = run_cli("check", "-e", NOTEBOOK_KEY, path, "--json")
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        found = strict_json(result.stderr)["error"]
        assert found["message"] == f"not a Jupyter notebook gradcalc reads: {message}", found
        assert "Traceback" not in result.output


def test_notebooks_are_graded_with_the_class(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    folder.mkdir()
    notebook(folder / "ann.ipynb", ("markdown", "$\\nabla_{w} \\mathcal{L} = 2w$, $\\nabla_b L = 3$"))
    notebook(folder / "bob.ipynb", ("code", "check dL/dw = w\ncheck(b)"), ("markdown", "```\ncheck dL/db = 3\n```"))
    (folder / "cat.ipynb").write_text("not json", encoding="utf-8")
    result = run_cli("check", "-e", NOTEBOOK_KEY, folder)
    assert result.exit_code == EXIT_WRONG, result.output  # not all right: a student's malformed notebook is 1
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in result.stdout.splitlines()[1:4]}
    assert rows["ann.ipynb"] == ["2/2", "all right"], result.stdout
    assert rows["bob.ipynb"][0] == "1/2", result.stdout
    assert rows["cat.ipynb"][0] == "–" and "not a Jupyter notebook" in rows["cat.ipynb"][1], result.stdout
