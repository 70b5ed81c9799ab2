"""Feedback in the program's words (#20 item 6): derivatives printed in the program's intermediates.

`check`'s "correct:" line (and its JSON "derivative") is written in the leaves or in the program's
named intermediates, whichever reads shorter (`--in-terms-of`, as diff's); a kept node's gradient is
written in place where it cancels (softmax cross-entropy with p kept is p - Y); a leaf that holds
distributions sums to 1, and the text says so where it relies on it. Every printed expression is fed
back to gradcalc with the program's values at random points and compared with central differences
of whole runs (independent of the derivative code); the exact texts were written by hand.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from helpers import SAMPLES, central_difference, json_ok, run_cli, strict_json

import gradcalc

EXIT_WRONG = 1

SIGMOID_NET = ("x = 0.5; y = 1; w1 = 0.3; w2 = -0.7\nh = sigmoid(w1*x)\np = sigmoid(w2*h)\n"
               "L = -(y*log(p) + (1 - y)*log(1 - p))\n")
SOFTMAX_CE = "z = [1.0, 2.0, 0.5]; Y = [0, 1, 0]\np = softmax(z)\nL = -sum(Y*log(p))\n"
SOFTMAX_BATCH = ("z = [[1.0, 2.0, 0.5], [0.1, 0.2, 0.3]]; Y = [[0, 1, 0], [0.5, 0.25, 0.25]]; N = 2\n"
                 "p = softmax(z)\nL = -sum(Y*log(p))/N\n")
SIGMOID_BCE = ("X = [[1.0, 2], [0.5, -1], [2, 0]]; w = [0.3, -0.2]; b = 0.1; y = [1, 0, 1]\n"
               "p = sigmoid(X @ w + b)\nL = -mean(y*log(p) + (1 - y)*log(1 - p))\n")
MSE = "x = [0.3, 0.1, 2]; w = [0.5, 0.2, 1]; y = [0.2, 0.1, 1]\np = w*x\nL = mean((p - y)^2)\n"
TANH = "x = 0.3; w = 0.5\nh = tanh(w*x)\nL = h\n"
SIGMOID = "x = 0.3; w = 0.5\nh = sigmoid(w*x)\nL = h\n"
MLP = ("X = [[1.0, 2], [3, 4], [5, 6]]; W1 = [[0.5, -1], [2, 1]]; b1 = [0.1, 0.2]; W2 = [0.3, -0.4]\n"
       "H = tanh(X @ W1 + b1)\ns = H @ W2\nY = [1, 0, 1]\np = sigmoid(s)\nL = -sum(Y*log(p) + (1 - Y)*log(1 - p))\n")
SOFTMAX_MLP = ("X = [[1.0, 2], [3, -1]]; W = [[0.5, -1, 0.2], [2, 1, -0.3]]; Y = [[0, 0, 1], [1, 0, 0]]\n"
               "z = X @ W\np = softmax(z)\nL = -mean(sum(Y*log(p), axis=1))\n")


def _sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


PROGRAMS = {
    "neuron.eq": lambda: _sample("neuron.eq"),
    "homework.eq": lambda: _sample("homework.eq"),
    "mean.eq": lambda: _sample("mean.eq"),
    "sigmoid net": lambda: SIGMOID_NET,
    "softmax CE": lambda: SOFTMAX_CE,
    "softmax CE, a batch over N": lambda: SOFTMAX_BATCH,
    "sigmoid BCE": lambda: SIGMOID_BCE,
    "MSE": lambda: MSE,
    "tanh": lambda: TANH,
    "MLP": lambda: MLP,
    "softmax MLP": lambda: SOFTMAX_MLP,
}
OUTPUT = {"mean.eq": "out"}


# --- every printed form equals the derivative -----------------------------------------------------


def _is_distribution(value: np.ndarray) -> bool:
    return value.ndim >= 1 and value.shape[-1] >= 2 and bool((value >= 0).all()) and \
        bool(np.allclose(value.sum(axis=-1), 1))


def _points(run: Any, count: int, seed: int) -> Iterator[dict[str, np.ndarray]]:
    """The program's values, then random points near them: distributions stay distributions."""
    random = np.random.default_rng(seed)
    base = {name: np.asarray(node.value, dtype=float) for name, node in run.leaves.items()}
    yield base
    for _ in range(count):
        point = {}
        for name, value in base.items():
            if _is_distribution(value):
                moved = random.dirichlet(np.ones(value.shape[-1]), size=value.shape[:-1])
            else:
                moved = value + random.uniform(-0.5, 0.5, value.shape) * np.maximum(np.abs(value), 0.2)
            point[name] = moved.reshape(value.shape)
        yield point


def _printed_value(program: str, derivative: Any, point: dict[str, np.ndarray]) -> np.ndarray:
    """The printed text (and its where parts) appended to the program, run at the point: intermediates
    such as p and h take the program's own values there."""
    lines = [program, *(f"{name} = {body}" for name, body, _ in derivative.where), f"D_ = {derivative.text}"]
    run = gradcalc.parse_program("\n".join(lines)).run(point)
    return np.asarray(run.value("D_"), dtype=float)


def _fd(program: Any, point: dict[str, np.ndarray], of: str, name: str) -> np.ndarray:
    def objective(moved: np.ndarray) -> float:
        return float(program.run({**point, name: moved}).value(of))

    return central_difference(objective, point[name])


@pytest.mark.parametrize("terms", ["leaves", "intermediates", "shortest"])
@pytest.mark.parametrize("case", sorted(PROGRAMS))
def test_every_printed_form_equals_the_derivative_at_random_points(case: str, terms: str) -> None:
    text = PROGRAMS[case]()
    of = OUTPUT.get(case, "L")
    program = gradcalc.parse_program(text)
    run = program.run()
    names = list(run.leaves)
    options = {"intermediates": {"intermediates": True}, "shortest": {"shortest": True}}.get(terms, {})
    derivatives = run.diff(of, names, **options)
    for point in _points(run, 3, seed=len(case)):
        for name, derivative in zip(names, derivatives):
            expected = _fd(program, point, of, name)
            got = np.broadcast_to(_printed_value(text, derivative, point), expected.shape)
            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6,
                                       err_msg=f"{case}, ∂{of}/∂{name} = {derivative.text} {derivative.where}")


# --- diff: the program's own words ---------------------------------------------------------------


def diff_doc(program: str, *args: str) -> dict[str, Any]:
    return json_ok("diff", "-e", program, *args, "--json")


def test_softmax_cross_entropy_with_p_kept_is_p_minus_y() -> None:
    doc = diff_doc(SOFTMAX_CE, "--wrt", "z", "--keep", "p")
    assert doc["derivative"] == "p - Y"
    assert doc["where"] == {}
    assert doc["given"] == ["sum(Y) = 1"]
    text = run_cli("diff", "-e", SOFTMAX_CE, "--wrt", "z", "--keep", "p").stdout
    assert text.splitlines()[:2] == ["∂L/∂z = p - Y", "  given sum(Y) = 1, as at the program's values"]


def test_softmax_cross_entropy_in_the_leaves_and_over_a_batch() -> None:
    assert diff_doc(SOFTMAX_CE, "--wrt", "z")["derivative"] == "softmax(z, axis=0) - Y"
    batch = diff_doc(SOFTMAX_BATCH, "--wrt", "z", "--keep", "p")
    assert (batch["derivative"], batch["given"]) == ("(p - Y)/N", ["sum(Y, axis=1) = 1"])
    assert diff_doc(SOFTMAX_BATCH, "--wrt", "z")["derivative"] == "(softmax(z, axis=1) - Y)/N"


def test_targets_that_do_not_sum_to_one_keep_the_sum() -> None:
    """With Y = [0.5, 1, 0] the derivative is p*sum(Y) - Y (as PyTorch's fused rule computes it), not p - Y."""
    program = SOFTMAX_CE.replace("Y = [0, 1, 0]", "Y = [0.5, 1, 0]")
    doc = diff_doc(program, "--wrt", "z", "--keep", "p")
    assert doc["derivative"] == "p*sum(Y, axis=0, keepdims=1) - Y"
    assert "given" not in doc
    z = np.array([1.0, 2.0, 0.5])
    p = np.exp(z) / np.exp(z).sum()
    np.testing.assert_allclose(doc["value"], p * 1.5 - [0.5, 1, 0], rtol=1e-12)


def test_a_softmax_summed_along_its_axis_is_one_whatever_its_values() -> None:
    doc = diff_doc("z = [1.0, 2.0, 0.5]; w = 3; L = w*sum(softmax(z))", "--wrt", "w")
    assert (doc["derivative"], doc.get("given")) == ("1", None)


@pytest.mark.parametrize(("program", "wrt", "options", "expected"), [
    (SIGMOID_NET, "w2", ("--in-terms-of", "intermediates"), "(p - y)*h"),      # sigmoid + BCE cancel
    (SIGMOID_NET, "w2", ("--keep", "p,h"), "(p - y)*h"),
    (TANH, "w", ("--keep", "h"), "x*(1 - h^2)"),                                 # tanh' from h
    (SIGMOID, "w", ("--keep", "h"), "h*x*(1 - h)"),                              # sigmoid' from h
    (SIGMOID_BCE, "w", ("--keep", "p"), "1/3*(X.T @ (p - y))"),           # the mean's 1/3 in front
    (MSE, "w", ("--in-terms-of", "shortest"), "2/3*x*(p - y)"),
    # in the leaves: -y*(1 - t3)*t2 - t3*(y - 1)*t2 distributed over (1 - t3) and (y - 1), not over t2
    (SIGMOID_NET, "w1", ("--in-terms-of", "leaves"), "(sigmoid(w2*t1) - y)*w2*x*t1*t2"),
])
def test_the_programs_names_where_kept(program: str, wrt: str, options: tuple[str, ...], expected: str) -> None:
    assert diff_doc(program, "--wrt", wrt, *options)["derivative"] == expected


def test_a_kept_gradient_that_cancels_nothing_keeps_its_name() -> None:
    """dL_dd*(w1*w3 + w2*w4) is the chain rule as the tutorial reads it: -1 written in place cancels nothing."""
    doc = json_ok("diff", str(SAMPLES / "neuron.eq"), "--wrt", "a", "--keep", "d", "--json")
    assert (doc["derivative"], doc["where"]) == ("dL_dd*(w1*w3 + w2*w4)", {"dL_dd": "-1"})
    doc = json_ok("diff", "-e", SIGMOID_NET, "--wrt", "w1", "--in-terms-of", "intermediates", "--json")
    assert (doc["derivative"], doc["where"]) == ("dL_dh*h*x*(1 - h)", {"dL_dh": "(p - y)*w2"})


def test_shortest_picks_the_leaves_where_they_are_shorter() -> None:
    doc = json_ok("diff", str(SAMPLES / "neuron.eq"), "--wrt", "a", "--in-terms-of", "shortest", "--json")
    assert (doc["derivative"], doc["where"]) == ("-w1*w3 - w2*w4", {})
    doc = json_ok("diff", str(SAMPLES / "neuron.eq"), "--wrt", "w3", "--in-terms-of", "shortest", "--json")
    assert (doc["derivative"], doc["where"]) == ("-b", {})  # b = w1*a: shorter than -a*w1


# --- check: the "correct:" line -------------------------------------------------------------------


def check_doc(program: str, *claims: str, options: tuple[str, ...] = ()) -> dict[str, Any]:
    args = [arg for claim in claims for arg in ("--claim", claim)]
    result = run_cli("check", "-e", program, *args, *options, "--json")
    assert result.exit_code == EXIT_WRONG, result.stdout + result.stderr
    return strict_json(result.stdout)


def correct_lines(program: str, *claims: str, options: tuple[str, ...] = ()) -> list[str]:
    args = [arg for claim in claims for arg in ("--claim", claim)]
    result = run_cli("check", "-e", program, *args, *options)
    assert result.exit_code == EXIT_WRONG, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("  correct: "):
            found.append(line)
            found += [more for more in lines[i + 1:] if re.match(r"    (where|given| {5}\S)", more)]
    return found


@pytest.mark.parametrize(("program", "claim", "expected"), [
    (SIGMOID_NET, "dL/dw2 = p - y", "(p - y)*h"),
    (SIGMOID_NET, "dL/dw1 = (p - y)*w2*h", "dL_dh*h*x*(1 - h)\n  where dL_dh = (p - y)*w2"),
    (SOFTMAX_CE, "dL/dz = Y - p", "p - Y\n  given sum(Y) = 1, as at the program's values"),
    (SOFTMAX_BATCH, "dL/dz = p - Y", "(p - Y)/N\n  given sum(Y, axis=1) = 1, as at the program's values"),
    (TANH, "dL/dw = 1 - h^2", "x*(1 - h^2)"),
    (SIGMOID, "dL/dw = h*(1 - h)", "h*x*(1 - h)"),
    (MSE, "dL/dw = (p - y)*x", "2/3*x*(p - y)"),
    (MLP, "dL/dW2 = H @ (p - Y)", "H.T @ (p - Y)"),
    (_sample("neuron.eq"), "dL/dw3 = -a", "-b"),
    (_sample("neuron.eq"), "dL/dw2 = -4*a", "-a*w4"),               # a tie: the leaves
    (_sample("neuron.eq"), "dL/da = -w3*w1", "-w1*w3 - w2*w4"),
])
def test_check_writes_the_correct_derivative_in_the_programs_words(program: str, claim: str,
                                                                   expected: str) -> None:
    (result,) = check_doc(program, claim)["results"]
    assert result["status"] == "wrong"
    assert result["derivative"] == expected


def test_the_correct_line_reads_in_the_programs_words_and_the_leaves_on_request() -> None:
    assert correct_lines(SIGMOID_NET, "dL/dw2 = p - y") == ["  correct: ∂L/∂w2 = (p - y)*h"]
    assert correct_lines(SIGMOID_NET, "dL/dw2 = p - y", options=("--in-terms-of", "leaves")) == [
        "  correct: ∂L/∂w2 = (sigmoid(w2*t1) - y)*t1", "    where t1 = sigmoid(w1*x)"]
    (leaves,) = check_doc(SOFTMAX_CE, "dL/dz = Y - p", options=("--in-terms-of", "leaves"))["results"]
    assert leaves["derivative"] == "softmax(z, axis=0) - Y\n  given sum(Y) = 1, as at the program's values"
    (kept,) = check_doc(SIGMOID_NET, "dL/dw1 = 0", options=("--in-terms-of", "intermediates"))["results"]
    assert kept["derivative"] == "dL_dh*h*x*(1 - h)\n  where dL_dh = (p - y)*w2"


def test_the_correct_derivative_in_the_programs_words_is_right_when_claimed() -> None:
    """What check prints as correct, claimed back, is judged right (at the nearby points too)."""
    for program, claim in ((SIGMOID_NET, "dL/dw2 = p"), (SOFTMAX_BATCH, "dL/dz = p"), (MSE, "dL/dw = 0*x"),
                           (MLP, "dL/dW2 = 0*W2")):
        (result,) = check_doc(program, claim)["results"]
        label = claim.split(" = ")[0]
        first, *rest = result["derivative"].split("\n")
        assert not any(line.strip().startswith("where") for line in rest), result["derivative"]
        result = run_cli("check", "-e", program, "--claim", f"{label} = {first}", "--json")
        assert result.exit_code == 0, result.stdout
        assert strict_json(result.stdout)["results"][0]["status"] == "right"


def test_every_where_part_is_used() -> None:
    """A shared 1/(1 - p) printed as a denominator, /(1 - p), left `where t1 = 1/(1 - p)` unused."""
    run = gradcalc.parse_program(SIGMOID_NET).run()
    for derivative in run.diff("L", ["w1", "w2"], order=2, intermediates=True):
        for name, _, _ in derivative.where:
            texts = [derivative.text, *(body for other, body, _ in derivative.where if other != name)]
            assert any(re.search(rf"\b{name}\b", text) for text in texts), \
                f"{name} is defined but not used: {derivative.text} {derivative.where}"
        assert [name for name, _, _ in derivative.where] == ["t2"]


def test_a_number_scaling_every_term_comes_out_of_sums_and_products() -> None:
    """1/3*sum(p - y) and 1/3*(X.T @ (p - y)), the mean's 1/N in front as the textbook writes it."""
    (bias,) = check_doc(SIGMOID_BCE, "dL/db = sum(p - y)")["results"]
    assert bias["derivative"] == "1/3*sum(p - y)"
    doc = diff_doc("x = [1.0, 2]; y = [0.5, -1]; w = 3; L = w*sum(2*x - 2*y)", "--wrt", "w")
    assert (doc["derivative"], doc["value"]) == ("2*sum(x - y)", 7)
