"""`gradcalc check`'s diagnoses of a network's usual slips: a forgotten 1/N, a missing ReLU mask, a missing
regularisation term, a missing local factor, shapes that do not combine, a transpose slip at one of a matrix's
places; and a wrong claim written with a subscript (w_1).

The network: X (4×2) → Z1 = X W1 + b1 → H = relu(Z1) → S = H W2 + b2 → P = softmax(S), and
L = -sum(Y log P)/N + reg·sum(W1²), with N = 4 examples. Its gradients are written out below by hand, as a
textbook backpropagates them (NumPy only multiplies), and each wrong claim is checked against the mistake made on
those, so each claim is known to make exactly its mistake without asking gradcalc.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import EXIT_WRONG, assert_no_traceback, run_cli, strict_json

from gradcalc.tools.homework import check as C

X = np.array([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.5], [2.0, 1.0]])
Y = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
W1 = np.array([[0.5, -0.3, 0.8], [0.2, 0.7, -0.4]])
B1 = np.array([0.1, -0.2, 0.05])
W2 = np.array([[0.6, -0.5], [-0.2, 0.3], [0.4, 0.9]])
B2 = np.array([0.0, 0.1])
N, REG = 4, 0.1

NET = ("X = [[1.0, 2.0], [0.5, -1.0], [-1.5, 0.5], [2.0, 1.0]]; Y = [[1, 0], [0, 1], [1, 0], [0, 1]]; "
       "W1 = [[0.5, -0.3, 0.8], [0.2, 0.7, -0.4]]; b1 = [0.1, -0.2, 0.05]; "
       "W2 = [[0.6, -0.5], [-0.2, 0.3], [0.4, 0.9]]; b2 = [0.0, 0.1]; N = 4; reg = 0.1; "
       "Z1 = X @ W1 + b1; H = relu(Z1); S = H @ W2 + b2; P = softmax(S); "
       "data = -sum(Y*log(P))/N; L = data + reg*sum(W1^2)")
# The same network with its loss a mean over the 4 examples (no N in the program).
MEAN_NET = NET.replace("data = -sum(Y*log(P))/N", "data = mean(-sum(Y*log(P), axis=1))")
# A scalar neuron: z = w·h + b, p = σ(z), binary cross-entropy; ∂L/∂z = p - y, ∂L/∂h = (p - y)·w.
NEURON = "h = 0.5; w = 1.5; b = -0.2; y = 1; z = w*h + b; p = sigmoid(z); L = -(y*log(p) + (1 - y)*log(1 - p))"
# Least squares: ∂L/∂w = Xᵀ(Xw - y)/n.
LSQ = "X = [[1.0, 2], [0.5, -1], [2, 0], [-1, 1]]; w = [0.3, -0.2]; y = [1.0, 0, 1, 0]; n = 4; " \
      "L = sum((X @ w - y)^2)/(2*n)"

MASKED = "((P - Y)/N W2ᵀ) ⊙ (Z1 > 0)"  # ∂L/∂Z1, as written in a claim


def by_hand() -> dict[str, np.ndarray]:
    """The network's values and gradients, backpropagated by hand."""
    z1 = X @ W1 + B1
    h = np.maximum(z1, 0)
    s = h @ W2 + B2
    e = np.exp(s - s.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    d_s = (p - Y) / N  # softmax cross-entropy, summed over the examples and divided by N
    d_h = d_s @ W2.T
    d_z1 = d_h * (z1 > 0)
    return {"Z1": z1, "H": h, "P": p, "S": d_s, "W2": h.T @ d_s, "H_grad": d_h, "Z1_grad": d_z1,
            "W1": X.T @ d_z1 + 2 * REG * W1, "b1": d_z1.sum(axis=0), "b2": d_s.sum(axis=0)}


G = by_hand()


def judged(program: str, *claims: str) -> tuple[int, list[dict[str, Any]]]:
    """`gradcalc check -e PROGRAM --claim ... --json`: the exit status and the verdicts."""
    result = run_cli("check", "-e", program, *[a for c in claims for a in ("--claim", c)], "--json")
    assert_no_traceback(result)
    return result.exit_code, strict_json(result.stdout)["results"]


def one(program: str, claim: str) -> dict[str, Any]:
    (verdict,) = judged(program, claim)[1]
    return verdict


# Each claim makes exactly one mistake: its value, worked out by hand from the gradients above, and the
# diagnosis's code and words.
MISTAKES = [
    pytest.param(NET, "dL/dS = P - Y", N * G["S"], "missing_divisor", "a forgotten 1/N: the claim is 4 × ∂L/∂S: "
                 "the program divides by N (= 4), and the claim does not", id="1/N: dL/dS"),
    pytest.param(NET, "dL/dW2 = Hᵀ(P - Y)", N * G["W2"], "missing_divisor", "a forgotten 1/N: the claim is 4 × ∂L/∂W2",
                 id="1/N: dL/dW2"),
    pytest.param(MEAN_NET, "dL/dS = P - Y", N * G["S"], "missing_divisor", "a forgotten 1/N: the claim is 4 × ∂L/∂S: "
                 "L is a mean over 4 entries", id="1/N: a mean"),
    pytest.param(NET, "dL/dZ1 = (P - Y)/N W2ᵀ", G["H_grad"], "missing_mask", "a missing ReLU mask: the claim is "
                 "∂L/∂Z1 with the local derivative 1[Z1 > 0] of H = relu(Z1) taken as 1", id="mask: dL/dZ1"),
    pytest.param(NET, "dL/dW1 = Xᵀ((P - Y)/N W2ᵀ) + 2 reg W1", X.T @ G["H_grad"] + 2 * REG * W1, "missing_mask",
                 "a missing ReLU mask: the claim is ∂L/∂W1 with the local derivative 1[Z1 > 0]", id="mask: dL/dW1"),
    pytest.param(NET, "dL/db1 = sum((P - Y)/N W2ᵀ, axis=0)", G["H_grad"].sum(axis=0), "missing_mask",
                 "a missing ReLU mask", id="mask: dL/db1"),
    pytest.param(NET, f"dL/dW1 = Xᵀ({MASKED})", X.T @ G["Z1_grad"], "missing_term", "a missing term: the claim "
                 "leaves out the gradient of reg*sum(W1^2) (2*W1*reg) in ∂L/∂W1", id="term: the regulariser"),
    pytest.param(NET, "dL/dW1 = 2 reg W1", 2 * REG * W1, "missing_term", "a missing term: the claim leaves out the "
                 "gradient of data (X.T @ ((Z1 > 0)*(((P - Y)/N) @ W2.T))) in ∂L/∂W1", id="term: the data"),
    pytest.param(NET, "dL/dH = (P - Y)/N", G["S"], "missing_local_factor", "a missing local factor: the claim is "
                 "∂L/∂S (S = b2 + H @ W2): the local derivative ∂S/∂H is missing", id="local factor: a layer"),
    pytest.param(NEURON, "dL/dh = p - y", None, "missing_local_factor", "a missing local factor: the claim is "
                 "∂L/∂z: the local derivative ∂z/∂h = w is missing", id="local factor: a neuron"),
    pytest.param(NET, f"dL/dW1 = X({MASKED})", None, "shape", "the claim's shapes do not fit: matrix product of "
                 "shapes (4, 2) and (4, 3)", id="shapes that do not combine"),
    pytest.param(LSQ, "dL/dw = X(Xw - y)/n", None, "transpose_slip", "a transpose slip: with Xᵀ for X (the first "
                 "of its 2 appearances) the shapes fit and the claim is ∂L/∂w", id="slip: X twice"),
]


@pytest.mark.parametrize(("program", "claim", "value", "code", "text"), MISTAKES)
def test_each_mistake_gets_its_diagnosis(program: str, claim: str, value: Any, code: str, text: str) -> None:
    verdict = one(program, claim)
    assert verdict["status"] == "wrong", verdict
    assert verdict["diagnosis_code"] == code, verdict
    assert verdict["diagnosis"].startswith(text), verdict
    if value is not None:  # the claim makes exactly this mistake: its value is the hand-made one
        np.testing.assert_allclose(verdict["got"], value, rtol=1e-9, atol=1e-12)


# The right answers, and the same answers wrong in another way (a sign, a factor of 2, a term halved, a
# transposed layer): neither gets the mistake's diagnosis.
RIGHT_AND_OTHERWISE_WRONG = [
    (NET, "dL/dS = (P - Y)/N", "dL/dS = 2(P - Y)/N", G["S"], "missing_divisor"),
    (MEAN_NET, "dL/dS = (P - Y)/4", "dL/dS = (P - Y)/2", G["S"], "missing_divisor"),
    (NET, f"dL/dZ1 = {MASKED}", f"dL/dZ1 = -{MASKED}", G["Z1_grad"], "missing_mask"),
    (NET, f"dL/dW1 = Xᵀ({MASKED}) + 2 reg W1", f"dL/dW1 = Xᵀ({MASKED}) + reg W1", G["W1"], "missing_term"),
    (NET, f"dL/db1 = sum({MASKED}, axis=0)", f"dL/db1 = sum({MASKED}, axis=0)/2", G["b1"], "missing_mask"),
    (NET, "dL/dH = (P - Y)/N W2ᵀ", "dL/dH = (P - Y) W2ᵀ/N + 1", G["H_grad"], "missing_local_factor"),
    (NET, "dL/dH = (P - Y)/N W2ᵀ", "dL/dH = P - Y", G["H_grad"], "missing_local_factor"),  # 4 × ∂L/∂S: a shape
    (NET, "dL/db2 = sum((P - Y)/N, axis=0)", "dL/db2 = sum(P - Y, axis=0)/2", G["b2"], "missing_divisor"),
    # 2h(p - y) is ∂L/∂z = p - y at h = 0.5 only: no identity, so no missing local factor (p = σ(0.55), y = 1)
    (NEURON, "dL/dh = (p - y)w", "dL/dh = 2h(p - y)", (1 / (1 + np.exp(-0.55)) - 1) * 1.5, "missing_local_factor"),
]


@pytest.mark.parametrize(("program", "right", "wrong", "value", "code"), RIGHT_AND_OTHERWISE_WRONG)
def test_a_right_claim_and_another_mistake_do_not_get_the_diagnosis(program: str, right: str, wrong: str,
                                                                    value: Any, code: str) -> None:
    code_, (good, bad) = judged(program, right, wrong)
    assert code_ == EXIT_WRONG
    assert good["status"] == "right" and "diagnosis_code" not in good, good
    np.testing.assert_allclose(good["expected"], value, rtol=1e-9, atol=1e-12)  # the gradient by hand
    assert bad["status"] == "wrong" and bad.get("diagnosis_code") != code, bad


def test_the_network_s_hand_gradients_are_what_check_calls_right() -> None:
    """Every layer's textbook answer is right, so the claims above are wrong only by their mistakes."""
    status, verdicts = judged(NET, "dL/dS = (P - Y)/N", "dL/dW2 = Hᵀ(P - Y)/N", "dL/db2 = sum((P - Y)/N, axis=0)",
                              "dL/dH = (P - Y)/N W2ᵀ", f"dL/dZ1 = {MASKED}", f"dL/dW1 = Xᵀ({MASKED}) + 2 reg W1",
                              f"dL/db1 = sum({MASKED}, axis=0)")
    assert status == 0 and [v["status"] for v in verdicts] == ["right"] * 7, verdicts
    for verdict, key in zip(verdicts, ["S", "W2", "b2", "H_grad", "Z1_grad", "W1", "b1"]):
        np.testing.assert_allclose(verdict["expected"], G[key], rtol=1e-9, atol=1e-12)


def test_a_mask_of_abs_and_of_maximum_are_named_as_such() -> None:
    """L = Σ|x·w - 2|/3 + Σ max(w, 0.2)/4 at w = (0.5, 0.1, -0.3): every x·w - 2 < 0, so ∂L/∂w = -x/3 + 1[w > 0.2]/4."""
    program = ("x = [1.0, -2, 3]; w = [0.5, 0.1, -0.3]; N = 3; e = x*w - 2; "
               "L = sum(abs(e))/N + 0.25*sum(maximum(w, 0.2))")
    _, (right, no_sign, no_max) = judged(program, "dL/dw = -x/N + (w > 0.2)/4", "dL/dw = x/N + (w > 0.2)/4",
                                         "dL/dw = -x/N + 1/4")
    assert right["status"] == "right", right
    np.testing.assert_allclose(right["expected"], [-1 / 3 + 0.25, 2 / 3, -1], rtol=1e-12)
    assert no_sign["diagnosis_code"] == no_max["diagnosis_code"] == "missing_mask", (no_sign, no_max)
    assert no_sign["diagnosis"] == ("a missing mask of abs: the claim is ∂L/∂w with the local derivative sign(e) of "
                                    "abs(e) taken as 1"), no_sign
    assert no_max["diagnosis"].startswith("a missing mask of maximum: the claim is ∂L/∂w with the local derivative "
                                          "1[w > 0.2]"), no_max


def test_a_factor_that_is_a_variable_s_value_is_no_forgotten_1_over_n() -> None:
    """∂L/∂w = (p - y)·h with h = 0.5: p - y is 2 × that, but h is a variable, not a 1/N: a missing local factor."""
    verdict = one(NEURON, "dL/dw = p - y")
    assert verdict["diagnosis_code"] == "missing_local_factor", verdict
    assert verdict["diagnosis"].endswith("the local derivative ∂z/∂w = h is missing"), verdict


def test_a_number_n_times_the_value_is_a_forgotten_1_over_n() -> None:
    """∂L/∂b2 = Σ(P - Y)/N over the examples, column by column; the sum without /N, to 3 digits, is 4 × it."""
    written = ", ".join(f"{v:.3f}" for v in N * G["b2"])
    verdict = one(NET, f"dL/db2 = [{written}]")
    assert verdict["status"] == "wrong" and verdict["diagnosis_code"] == "missing_divisor", verdict


def test_shapes_that_do_not_combine_are_wrong_not_invalid() -> None:
    """Exit 1 (a wrong claim), not 2 (a claim that cannot be judged), with the shapes named."""
    status, (verdict,) = judged(LSQ, "dL/dw = X(w - y)/n")
    assert status == EXIT_WRONG
    assert verdict["status"] == "wrong" and verdict["diagnosis_code"] == "shape", verdict
    assert verdict["diagnosis"] == "the claim's shapes do not fit: shapes (2,) and (4,) do not broadcast in '-'"
    # the correct value is still given: Xᵀ(Xw - y)/n, by hand
    x, w, y = np.array([[1.0, 2], [0.5, -1], [2, 0], [-1, 1]]), np.array([0.3, -0.2]), np.array([1.0, 0, 1, 0])
    np.testing.assert_allclose(verdict["expected"], x.T @ (x @ w - y) / 4, rtol=1e-12)
    assert verdict["got"] is None


@pytest.mark.parametrize(("claim", "place"), [
    ("dL/dw = X(Xw - y)/n", "with Xᵀ for X (the first of its 2 appearances)"),
    ("dL/dw = Xᵀ(Xᵀw - y)/n", "with X for Xᵀ (the second of its 2 appearances)"),
    ("dL/dw = X(Xᵀ(Xw - y))/n", ""),  # one too many: turning one place does not make it right
])
def test_a_transpose_slip_at_one_of_a_matrix_s_places(claim: str, place: str) -> None:
    verdict = one(LSQ, claim)
    assert verdict["status"] == "wrong", verdict
    if place:
        assert verdict["diagnosis"].startswith(f"a transpose slip: {place}"), verdict
    else:
        assert verdict.get("diagnosis_code") != "transpose_slip", verdict


def test_a_wrong_claim_written_with_a_subscript_is_judged() -> None:
    """dL/dw_1 names w1: wrong (exit 1) with the correct derivative, not 'no variable w_1' (exit 2)."""
    program = "w1 = 3; x = 2; b = w1*x; L = b^2"  # ∂L/∂w1 = 2·b·x = 2·w1·x² = 24; ∂L/∂b = 2b = 12
    status, (wrong, right, also_wrong) = judged(program, "dL/dw_1 = 3", "dL/dw_1 = 2w_1 x^2", "dL/db = 3")
    assert status == EXIT_WRONG
    assert right["status"] == "right" and right["expected"] == 24, right
    assert wrong["status"] == "wrong" and wrong["expected"] == 24 and wrong["derivative"], wrong
    assert wrong["derivative"].replace(" ", "") in ("2*w1*x^2", "2*x^2*w1", "2*w1*x*x", "2*b*x"), wrong
    assert also_wrong["status"] == "wrong" and also_wrong["expected"] == 12, also_wrong


def test_the_new_codes_sit_where_their_mistake_wins() -> None:
    """A forgotten 1/N is found before 'a factor off'; the graph's diagnoses after every earlier one."""
    codes = [entry.code for entry in C.DIAGNOSES]
    assert codes.index("missing_divisor") < codes.index("factor")
    assert codes.index("transpose_slip") < codes.index("missing_mask") < codes.index("missing_term") \
        < codes.index("missing_local_factor") < codes.index("shape")
