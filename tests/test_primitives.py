"""One record per primitive (engine/primitives.py): every record is complete, every table is made from the
records, and what a record says its rules read is what they read.

The rules themselves are checked against finite differences in test_rules.py, at the points of its CASES;
the checks here reuse those points.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np
import pytest
from helpers import json_ok
from test_rules import CASES, Case

from gradcalc.engine import backend as B
from gradcalc.engine import batching, graph, ops, primitives, rules, symbolic
from gradcalc.engine.autodiff import backward
from gradcalc.engine.graph import ELEMENTWISE_BATCH, OWN_BATCH, REDUCTION_BATCH, UNBATCHED, Node, Primitive, leaf
from gradcalc.engine.primitives import COMPARISON, ELEMENTWISE, LOGIC, POSITION, PRIMITIVES, REDUCTION
from gradcalc.program.builtins import BUILTINS

DIFFERENTIABLE = [name for name, prim in PRIMITIVES.items() if prim.differentiable]
# The comparisons and logic, which test_rules does not check (they have no rules): points to evaluate them at.
NO_GRADIENT = {
    name: [Case("matrix and row", getattr(ops, name), (np.array([[0.0, 0.5, 2.0], [-1.0, 0.5, 0.0]]),
                                                        np.array([0.5, 0.5, 0.0])))]
    if prim.n_inputs == 2 else [Case("vector", getattr(ops, name), (np.array([0.0, 0.5, -2.0]),))]
    for name, prim in PRIMITIVES.items() if not prim.differentiable
}
# argmax and argmin take an axis (None: over every entry).
NO_GRADIENT |= {name: [Case("matrix, axis 1", lambda x, f=getattr(ops, name): f(x, 1), (np.array([[0.0, 2.0, 1.0],
                                                                                               [3.0, -1.0, 0.5]]),)),
                       Case("every entry", lambda x, f=getattr(ops, name): f(x, None), (np.array([[0.0, 2.0],
                                                                                                [3.0, -1.0]]),))]
                for name in ("argmax", "argmin")}
POINTS = {**CASES, **NO_GRADIENT}


def _value(array: np.ndarray) -> Any:
    return array[()] if array.ndim == 0 else array


def _recorded(case: Case) -> Node:
    """The case's node, evaluated as a run evaluates (B.errstate): NO_GRADIENT's row has zeros, and 1 // 0 is
    inf and 0 // 0 NaN, values, not NumPy's RuntimeWarnings."""
    wants = case.wants or (True,) * len(case.inputs)
    with B.errstate():
        return case.build(*(leaf(_value(np.asarray(a, dtype=np.float64)), requires_grad=w)
                            for a, w in zip(case.inputs, wants, strict=True)))


# --- every record is complete -----------------------------------------------------------------------

@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_a_record_has_a_rule_per_input_reads_batching_and_a_grad_fn(name: str) -> None:
    prim = PRIMITIVES[name]
    if prim.differentiable:
        assert rules.RULES[prim] is prim.vjps, f"{name}: its rules are not the ones its record declares"
        each = [prim.vjps[i] for i in range(prim.n_inputs or 3)]  # any number of inputs: look at three
        assert all(rule is None or callable(rule) for rule in each) and any(each), name
        if prim.n_inputs is not None:
            assert len(prim.vjps) == prim.n_inputs, f"{name}: {len(prim.vjps)} rules, {prim.n_inputs} inputs"
            reads = prim.reads_inputs
            assert reads is None or reads <= set(range(prim.n_inputs)), f"{name} reads inputs it has not: {reads}"
            assert prim.frees_inputs == (reads is not None and len(reads) < prim.n_inputs), name
    else:
        # comparisons, logic, positions and floor division (integer-valued): no gradient, as in PyTorch
        assert (prim.kind in (COMPARISON, LOGIC, POSITION) or name == "floor_divide") and prim not in rules.RULES, \
            f"{name} has no rule"
    assert prim.batching in (ELEMENTWISE_BATCH, REDUCTION_BATCH, OWN_BATCH, UNBATCHED), f"{name}: batching?"
    if prim.batching == OWN_BATCH:
        assert prim in batching._OWN, f"{name}'s record says batching.py has its batched form; it has none"
    assert name in POINTS, f"{name} has no points to be checked at: add a CASES entry in test_rules.py"
    for case in POINTS[name]:
        out = _recorded(case)
        assert out.op is prim, f"{case.label} records {out.op}, not {name}"
        if prim.differentiable:
            assert re.fullmatch(r"[A-Z][A-Za-z0-9]*Backward[0-9]|CopySlices", out.grad_fn or ""), \
                f"{name}: {out.grad_fn!r}"  # CopySlices: PyTorch's y[0] = v
        else:
            assert out.grad_fn is None and not out.requires_grad, name  # as PyTorch's comparisons


@pytest.mark.parametrize("name", [name for name, prim in PRIMITIVES.items() if prim.fold is not None])
def test_a_fold_computes_what_the_primitive_computes(name: str) -> None:
    """symbolic folds f(number) with the record's fold: it agrees with the evaluation, and where it gives no
    finite number (log(0)), symbolic keeps the call and the evaluation gives none either."""
    prim = PRIMITIVES[name]
    points = [(0.3,), (0.7,), (0.0,), (-0.5,), (2.0,)] if prim.n_inputs == 1 else \
        [(0.3, 0.7), (0.7, 0.7), (0.0, 0.7), (0.7, 0.0), (-0.5, 2.0)]
    fold = prim.fold
    assert fold is not None
    for point in points:
        with np.errstate(all="ignore"):
            expected = float(prim.forward(*(np.float64(v) for v in point)))
        folded = symbolic._fold(lambda: fold(*point))  # noqa: B023  (called at once)
        if folded is None:
            assert not math.isfinite(expected), (name, point)
        else:
            assert math.isclose(folded, expected, rel_tol=1e-14, abs_tol=1e-300), (name, point, folded, expected)


@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_symbolic_prints_a_primitive_as_its_record_says(name: str) -> None:
    prim = PRIMITIVES[name]
    algebra = symbolic.Algebra()
    args = tuple(algebra.sym(s, ()) for s in ("x", "y", "z")[:prim.n_inputs or 2])
    params: tuple = prim.defaults
    if prim.kind is ELEMENTWISE and not prim.operator:  # an operator (-x) is the algebra's to print
        call = algebra.call(name, args, (), ())
        text, latex = symbolic.Printer({}).top(call), symbolic.LatexPrinter({}).top(call)
        assert text == f"{name}(x)"
        assert name in BUILTINS or prim.builtin is None, f"diff would print {text}, which is no builtin"
        assert latex == (prim.latex.format("x") if prim.latex else rf"\operatorname{{{name}}}\left(x\right)")
    elif prim.kind in (COMPARISON, LOGIC):
        assert prim.text and prim.latex, f"{name}: how is it written?"
        text = symbolic.Printer({}).top(algebra.call(name, args, (), ()))
        assert text == (f"{prim.text} x" if prim.n_inputs == 1 else f"x {prim.text} y")
    elif prim.kind is REDUCTION:
        assert name in symbolic._REDUCTIONS
        text = symbolic.Printer({}).top(algebra.call(name, args, (0, *params[1:]), ()))
        assert text == f"{name}(x, axis=0)"


# --- every table is made from the records -----------------------------------------------------------

def test_the_records_are_the_primitives() -> None:
    records = [value for value in vars(primitives).values() if isinstance(value, Primitive)]
    assert len({id(r) for r in records}) == len(PRIMITIVES), "two records share a name"
    assert ops.PRIMITIVES is PRIMITIVES
    for variable, record in vars(primitives).items():
        if isinstance(record, Primitive):
            assert getattr(ops, variable) is record, variable  # ops.EXP
    assert set(rules.RULES) == {prim for prim in PRIMITIVES.values() if prim.differentiable}


@pytest.mark.parametrize("name", list(PRIMITIVES))
def test_every_namespace_has_each_record_under_each_of_its_names(name: str) -> None:
    prim = PRIMITIVES[name]
    recording = ops.RECORDING[name]
    for alias in prim.names:
        assert getattr(ops, alias) is recording and recording.__name__ == name, alias
        assert getattr(ops.numeric, alias) is getattr(ops.numeric, name), alias
        assert getattr(batching.namespace, alias) is getattr(batching.namespace, name), alias
    batched = getattr(batching.namespace, name)
    if prim.batching == UNBATCHED:
        assert batched is getattr(ops.numeric, name)
    elif prim.batching == OWN_BATCH:
        assert batched is batching._OWN[prim]
    else:
        assert batched is not getattr(ops.numeric, name), f"{name}: batching's table left it unbatched"
    if prim.dunder:
        assert getattr(Node, f"__{prim.dunder}__") is recording  # no call between the operator and the recorder
    # The same value from the record, the recording function, numeric and the batched namespace.
    for case in POINTS[name]:
        out = _recorded(case)
        values = [node.value for node in out.inputs]
        with B.errstate():  # as _recorded
            expected = prim.forward(*values, *out.params)
            np.testing.assert_array_equal(out.value, expected, err_msg=f"{name} [{case.label}]")
            np.testing.assert_array_equal(getattr(ops.numeric, name)(*values, *out.params), expected)
            np.testing.assert_array_equal(batched(*values, *out.params), expected)


@pytest.mark.parametrize("name", [name for name, prim in PRIMITIVES.items() if prim.builtin is not None])
def test_a_builtin_record_is_a_builtin_under_each_of_its_language_names(name: str) -> None:
    prim = PRIMITIVES[name]
    for called in (name, *prim.also):
        builtin = BUILTINS[called]
        assert builtin.params == (*prim.inputs.split(), *prim.params), called
        assert builtin.required == prim.n_inputs and builtin.summary == prim.builtin, called
        if prim.kind is not REDUCTION:  # a reduction's builtin reads its axis and keepdims first
            assert builtin.fn is ops.RECORDING[name], called


def test_symbolic_tables_are_the_records() -> None:
    assert symbolic._FOLD == {name: p.fold for name, p in PRIMITIVES.items() if p.fold is not None}
    assert set(symbolic._COMPARE) == {name for name, p in PRIMITIVES.items() if p.kind is COMPARISON}
    assert set(symbolic._LOGIC) == {name for name, p in PRIMITIVES.items() if p.kind is LOGIC}
    assert set(symbolic._REDUCTIONS) == {name for name, p in PRIMITIVES.items() if p.kind is REDUCTION}


# --- what a record says its rules read is what they read ---------------------------------------------

def _gradients_with(case: Case, release: bool, create_graph: bool) -> list[np.ndarray]:
    """The case's gradients when the primitive's inputs and output are unnamed temporaries, as in a program:
    with release, the forward pass frees each one that no rule is declared to read (as the builder does)."""
    wants = case.wants or (True,) * len(case.inputs)
    with graph.building(release):
        leaves = [leaf(_value(np.asarray(a, dtype=np.float64)), requires_grad=w)
                  for a, w in zip(case.inputs, wants, strict=True)]
        out = case.build(*(ops.add(x, 0.0) for x in leaves))  # its inputs: temporaries of a rule that reads none
        final = ops.add(out, 0.0)  # its output: read by a rule that reads nothing
    targets = [x for x, w in zip(leaves, wants, strict=True) if w]
    seed = np.random.default_rng(5).standard_normal(np.shape(final.value))
    found = backward(final, graph.constant(_value(seed)) if create_graph else _value(seed), targets,
                     create_graph=create_graph)
    return [np.asarray(found[t].value if create_graph else found[t]) if t in found else np.zeros(np.shape(t.value))
            for t in targets]


def check_reads(prim: Primitive, cases: list[Case]) -> None:
    """Gradients with temporaries freed equal those with nothing freed; a rule reading a freed value fails."""
    for case in cases:
        for create_graph in (False, True):
            kept = _gradients_with(case, release=False, create_graph=create_graph)
            freed = _gradients_with(case, release=True, create_graph=create_graph)
            for k, f in zip(kept, freed, strict=True):
                np.testing.assert_array_equal(f, k, err_msg=f"{prim.name} [{case.label}]")


@pytest.mark.parametrize("name", DIFFERENTIABLE)
def test_a_record_reads_what_its_rules_read(name: str) -> None:
    check_reads(PRIMITIVES[name], CASES[name])


def test_a_record_that_hides_a_read_fails_the_reads_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check above can fail: a record claiming its rule reads less than it does is caught."""
    monkeypatch.setattr(ops.EXP, "reads_output", False)  # exp's rule is g * ans
    with pytest.raises(TypeError, match="Released"):
        check_reads(ops.EXP, CASES["exp"])
    monkeypatch.setattr(ops.SIN, "reads_inputs", frozenset())  # sin's rule is g * cos(x)
    monkeypatch.setattr(ops.SIN, "frees_inputs", True)
    with pytest.raises(TypeError, match="Released"):
        check_reads(ops.SIN, CASES["sin"])


def test_the_reads_check_frees_values() -> None:
    """The check is not vacuous: in the case of a matrix, sum's input is freed and exp's output is kept."""
    with graph.building(True):
        x = leaf(np.ones((2, 3)))
        temporary = ops.add(x, 0.0)
        total = ops.sum(temporary)
        kept = ops.exp(ops.add(x, 0.0))
        ops.add(kept, 0.0)
    assert isinstance(temporary.value, graph.Released) and not isinstance(total.value, graph.Released)
    assert not isinstance(kept.value, graph.Released)


# --- log1p: the builtin added by its record alone -----------------------------------------------------

def test_log1p_is_exact_near_zero_and_its_gradient_is_one_over_one_plus_x() -> None:
    values = np.array([1e-10, 0.5, -0.5, 3.0])
    x = leaf(values)
    y = ops.log1p(x)
    # At 1e-10, log(1 + x) keeps only 7 of its digits: log1p is x - x²/2 to the last bit.
    np.testing.assert_array_equal(y.value[0], 1e-10 - 5e-21)
    np.testing.assert_allclose(y.value[1:], np.log(1 + values[1:]), rtol=1e-15)
    (grad,) = backward(ops.sum(y), np.float64(1.0), [x]).values()
    np.testing.assert_allclose(grad, 1 / (1 + values), rtol=1e-15)
    assert y.grad_fn == "Log1PBackward0"  # PyTorch's name


def test_log1p_through_the_command_line() -> None:
    doc = json_ok("grad", "-e", "x = 0.5; y = log1p(x)")
    assert doc["value"] == pytest.approx(math.log1p(0.5), rel=1e-15)
    assert doc["grad"]["x"] == pytest.approx(1 / 1.5, rel=1e-15)
    diff = json_ok("diff", "-e", "x = 0.5; y = log1p(x)")
    assert diff["derivative"] == "1/(x + 1)" and diff["value"] == pytest.approx(1 / 1.5, rel=1e-15)
    second = json_ok("diff", "-e", "x = 0.5; y = log1p(x^2)")
    assert second["derivative"] == "2*x/(x^2 + 1)"
    assert json_ok("eval", "-e", "y = log1p(0.5)")["values"]["y"] == pytest.approx(math.log1p(0.5), rel=1e-15)
