"""`const N = 4`: a name the program treats as data, and load()'s column names.

A constant is PyTorch's requires_grad=False: no default --wrt, no gradient when asked (an error that says
so), never moved at check's nearby points, still replaced by --set. Expected values are worked by hand:
y = N*x² at x = 2, N = 4 is 16 with ∂y/∂x = 2·N·x = 16 (32 at N = 8); softmax cross-entropy averaged over
N rows has ∂L/∂scores = (p - Y)/N, computed below with NumPy from its definition.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import EXIT_OK, EXIT_WRONG, json_error, json_ok, located_error, run_cli, strict_json

import gradcalc
from gradcalc.errors import GradcalcError
from gradcalc.tools.homework.check import DIAGNOSES, Judge

SQUARE = "x = 2; const N = 4\ny = N*x^2\n"
SQUARE_PLAIN = "x = 2; N = 4\ny = N*x^2\n"

SCORES = [[2.0, 1.0, 0.1], [0.5, 2.5, 0.3], [1.2, 0.2, 3.0], [0.1, 0.4, 0.9]]
LABELS = [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0]]


def softmax_program(declare: str = "") -> str:
    """Softmax cross-entropy averaged over a batch of 4 (N a constant when declare is 'const ')."""
    return (f"scores = {SCORES}\nY = {LABELS}\n{declare}N = 4\n"
            "p = softmax(scores)\nL = -sum(Y * log(p)) / N\n")


def softmax_gradient() -> Any:
    """(p - Y)/N from the definition of softmax, by NumPy."""
    scores = np.array(SCORES)
    p = np.exp(scores) / np.exp(scores).sum(axis=1, keepdims=True)
    return (p - np.array(LABELS)) / 4


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def verdict_of(program: Path, claim: str, code: int) -> dict[str, Any]:
    result = run_cli("check", program, "--claim", claim, "--json")
    assert result.exit_code == code, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    return verdict


# --- the declaration --------------------------------------------------------------------------

def test_a_constant_runs_and_is_no_default_wrt() -> None:
    doc = json_ok("grad", "-e", SQUARE)
    assert doc == {"of": "y", "value": 16.0, "grad": {"x": 16.0}}
    # The same program without const: the same document, with N's gradient x² = 4 beside x's.
    assert json_ok("grad", "-e", SQUARE_PLAIN) == {"of": "y", "value": 16.0, "grad": {"x": 16.0, "N": 4.0}}


@pytest.mark.parametrize("command", ["jacobian", "hessian", "gradcheck"])
def test_other_commands_leave_constants_out_by_default(command: str) -> None:
    result = run_cli(command, "-e", SQUARE)
    assert result.exit_code == EXIT_OK, result.output
    assert "N" not in result.stdout.replace("ᵀ", ""), result.stdout


def test_eval_says_a_constant_is_one() -> None:
    result = run_cli("eval", "-e", SQUARE)
    assert result.exit_code == EXIT_OK, result.output
    row = next(line for line in result.stdout.splitlines() if line.startswith("N "))
    assert row.split()[-1] == "constant", result.stdout


def test_set_replaces_a_constant() -> None:
    assert json_ok("grad", "-e", SQUARE, "--set", "N=8") == {"of": "y", "value": 32.0, "grad": {"x": 32.0}}


@pytest.mark.parametrize("command", ["grad", "jacobian", "hessian", "diff", "explain", "gradcheck"])
def test_an_explicit_wrt_constant_is_refused_with_the_fix(command: str) -> None:
    """PyTorch's torch.autograd.grad refuses a tensor that does not require grad: so does gradcalc."""
    error = located_error(run_cli(command, "-e", SQUARE, "--wrt", "N"), line=1, column=14)
    assert "'N' is a constant" in error.message and "no gradient" in error.message, error.text
    assert "remove `const`" in error.hint, error.text


def test_diff_names_a_constant() -> None:
    result = run_cli("diff", "-e", SQUARE)
    assert result.exit_code == EXIT_OK, result.output
    assert result.stdout.splitlines()[0] == "∂y/∂x = 2*N*x", result.stdout


def test_graph_draws_a_constant_without_a_gradient() -> None:
    assert "N" not in {node["name"] for node in json_ok("graph", "-e", SQUARE)["nodes"]}  # hidden unless --all
    doc = json_ok("graph", "-e", SQUARE, "--all")
    nodes = {node["name"]: node for node in doc["nodes"]}
    assert nodes["N"]["kind"] == "constant" and nodes["N"]["grad"] is None and nodes["N"]["is_leaf"], nodes
    assert nodes["x"]["kind"] == "leaf" and nodes["x"]["grad"] == 16.0, nodes
    (edge,) = [e for e in doc["edges"] if e["to"] == nodes["N"]["id"]]
    assert edge["detached"] is True and edge["derivative"] == "constant", edge


def test_python_api_keeps_constants_apart() -> None:
    run = gradcalc.parse_program(SQUARE).run()
    assert list(run.leaves) == ["x"] and list(run.constants) == ["N"]
    assert run.grad().grads == {"x": 16.0}
    assert not run.constants["N"].requires_grad
    with pytest.raises(GradcalcError, match="constant"):
        run.grad(wrt=["N"])


def test_a_constant_may_be_a_tensor_and_computed_from_constants() -> None:
    program = "const Y = [[0, 1, 0]]\nconst M = 2*sum(Y)\nw = [1, 2, 3]\nL = sum(w * Y) * M\n"
    doc = json_ok("grad", "-e", program)
    assert doc == {"of": "L", "value": 4.0, "grad": {"w": [0.0, 2.0, 0.0]}}  # M = 2; L = 2·M; ∂L/∂w = Y·M


@pytest.mark.parametrize(("program", "line", "column", "words"), [
    ("const N = 4\nN = 5\ny = N\n", 2, 1, "cannot be assigned again"),
    ("const N = 4\nN += 1\ny = N\n", 2, 1, "cannot be assigned again"),
    ("const N = 4\nif N > 1 { N = 2 }\ny = N\n", 2, 12, "cannot be assigned again"),
    ("const N = 4\nconst N = 5\ny = N\n", 2, 7, "cannot be declared again"),
    ("N = 4\nconst N = 5\ny = N\n", 2, 7, "declared a constant after it is assigned at line 1"),
    ("const N = 4\nfor N in range(2) { y = 1 }\n", 2, 1, "cannot be a loop variable"),
    ("w = 2\nconst M = 3*w\ny = M\n", 2, 13, "computed from the variable 'w'"),
    ("if 1 > 0 { const K = 2 }\ny = 1\n", 1, 18, "declared inside a block"),
    ("f(a) { const K = 2; return a*K }\ny = f(1)\n", 1, 14, "declared inside a function"),
    ("const N += 1\n", 1, 9, "declared with '=', not '+='"),
    ("const = 3\ny = 1\n", 1, 1, "'const' is a keyword and cannot be a variable's name"),
])
def test_constant_mistakes_are_located(tmp_path: Path, program: str, line: int, column: int, words: str) -> None:
    path = write(tmp_path / "p.eq", program)
    for command in ("grad", "eval", "check"):
        error = located_error(run_cli(command, path), file=str(path), line=line, column=column)
        assert words in error.message, error.text


def test_a_constant_that_reads_a_variable_through_a_function_is_refused() -> None:
    body = json_error(run_cli("eval", "-e", "w = 2\nf() = w*2\nconst M = f()\ny = M\n", "--json"))
    assert body["line"] == 3 and "depends on the program's variables" in body["message"], body


# --- check ---------------------------------------------------------------------------------------

def test_a_declared_constant_is_not_moved_nearby() -> None:
    run = gradcalc.parse_program(softmax_program("const ")).run(keep_values=True)
    nearby = Judge(run)._nearby_runs("L")
    assert len(nearby) == 4
    assert all(float(r.value("N")) == 4 for r in nearby)
    assert all(not np.allclose(r.value("scores"), SCORES) for r in nearby)  # the variables are


def test_a_claim_with_the_batch_size_written_is_right_when_it_is_a_constant(tmp_path: Path) -> None:
    program = write(tmp_path / "key.eq", softmax_program("const "))
    for claim in ("dL/dscores = (p - Y)/4", "dL/dscores = (p - Y)/N"):
        verdict = verdict_of(program, claim, EXIT_OK)
        assert verdict["status"] == "right" and verdict["note"].endswith("4 nearby points"), verdict
        np.testing.assert_allclose(verdict["expected"], softmax_gradient(), rtol=1e-12)


def test_a_claim_right_if_the_batch_size_were_constant_says_so(tmp_path: Path) -> None:
    program = write(tmp_path / "key.eq", softmax_program())
    verdict = verdict_of(program, "dL/dscores = (p - Y)/4", EXIT_WRONG)
    assert verdict["status"] == "wrong" and verdict["diagnosis_code"] == "held_constant", verdict
    assert verdict["diagnosis"].startswith("right if N is a constant:"), verdict
    assert "declare `const N = 4`" in verdict["diagnosis"], verdict
    np.testing.assert_allclose(verdict["got"], softmax_gradient(), rtol=1e-12)  # right at the program's values
    # A right claim is judged as before, with no search.
    right = verdict_of(program, "dL/dscores = (p - Y)/N", EXIT_OK)
    assert right["status"] == "right" and "diagnosis" not in right, right


def test_a_label_held_fixed_is_found_too() -> None:
    """∂L/∂z of binary cross-entropy is p - y: written p - 1, it is right only with the label y = 1 held."""
    program = "y = 1\nz = 0.5\np = sigmoid(z)\nL = -(y*log(p) + (1 - y)*log(1 - p))\n"
    result = run_cli("check", "-e", program, "--claim", "dL/dz = p - 1", "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["diagnosis_code"] == "held_constant", verdict
    assert verdict["diagnosis"].startswith("right if y is a constant:"), verdict
    assert "declare `const y = 1`" in verdict["diagnosis"], verdict
    declared = run_cli("check", "-e", "const " + program, "--claim", "dL/dz = p - 1", "--json")
    assert declared.exit_code == EXIT_OK, declared.output


def test_a_claim_wrong_whatever_is_held_keeps_only_here() -> None:
    """L = 5*w1 is 15 at w1 = 3 only; no leaf held fixed makes it L = 10 - (w3·w1 + w4·w2)·a."""
    program = "a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\nL = 10 - (w3*w1 + w4*w2)*a\n"
    result = run_cli("check", "-e", program, "--claim", "L = 5*w1", "--json")
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["diagnosis_code"] == "only_here", verdict


def test_a_claim_about_a_constants_derivative_is_invalid(tmp_path: Path) -> None:
    program = write(tmp_path / "key.eq", softmax_program("const "))
    result = run_cli("check", program, "--claim", "dL/dN = 0", "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    (verdict,) = strict_json(result.stdout)["results"]
    assert verdict["status"] == "invalid" and "constant" in verdict["error"]["message"], verdict


def test_held_constant_is_in_the_registry() -> None:
    assert "held_constant" in [entry.code for entry in DIAGNOSES]


# --- load with a column name ------------------------------------------------------------------

def test_load_picks_a_csv_column_by_its_header(tmp_path: Path) -> None:
    write(tmp_path / "data.csv", "x1, x2,y\n1,2,3\n4,5,6\n")
    program = write(tmp_path / "p.eq", 'const X = load("data.csv", "x2")\nw = 3\nL = sum(w * X)\n')
    assert json_ok("grad", program) == {"of": "L", "value": 21.0, "grad": {"w": 7.0}}  # X = [2, 5]
    write(tmp_path / "one.csv", "a,b\n7,8\n")  # one row: still a column of one entry
    program = write(tmp_path / "q.eq", 'v = load("one.csv", "b")\n')
    result = run_cli("eval", program, "--json")
    assert result.exit_code == EXIT_OK, result.output
    assert strict_json(result.stdout)["values"]["v"] == [8.0]


@pytest.mark.parametrize(("csv", "column", "words", "hint"), [
    ("x1,x2,y\n1,2,3\n", "X2", "the file has no column 'X2'", "did you mean 'x2'? its columns are: x1, x2, y"),
    ("x1,x2,y\n1,2,3\n", "z", "the file has no column 'z'", "its columns are: x1, x2, y"),
    ("1,2,3\n4,5,6\n", "x1", "the file has no header row naming its columns", 'load("data.csv")[:, 0]'),
])
def test_load_column_mistakes(tmp_path: Path, csv: str, column: str, words: str, hint: str) -> None:
    write(tmp_path / "data.csv", csv)
    program = write(tmp_path / "p.eq", f'v = load("data.csv", "{column}")\n')
    error = located_error(run_cli("eval", program), line=1, column=5)
    assert words in error.message and hint in error.hint, error.text


def test_a_name_for_a_file_that_has_none_is_refused(tmp_path: Path) -> None:
    write(tmp_path / "x.json", "[1, 2]")
    program = write(tmp_path / "p.eq", 'v = load("x.json", "a")\n')
    error = located_error(run_cli("eval", program), line=1, column=5)
    assert "a column of a .csv file" in error.message, error.text
