"""The pass before the run (checker.py) and the one walker over statement blocks every pass uses (syntax.py)."""

from __future__ import annotations

import numpy as np
import pytest

import gradcalc
from gradcalc.errors import NameNotFound, UsageError
from gradcalc.language import syntax as S
from gradcalc.language.parser import parse
from gradcalc.program.builtins import Context
from gradcalc.program.checker import Checker, check, free_names
from gradcalc.program.interpreter import Limits, execute, make_context

NESTED = """\
f(u) {
  if u > 0 { return u } else { return -u }
}
x = 1
while x < 3 {
  x = x + 1
  if x > 2 { y = f(x) } else { no_grad { y = x } }
}
for i in range(2) { z = y * i }
check dz/dx = 2*claimed_only
L = z + 1
"""


def _reference(body: list[S.Stmt], functions: bool) -> list[S.Stmt]:
    """The walk spelled out kind by kind, recursively: what statements() must find, in this order."""
    found: list[S.Stmt] = []
    for stmt in body:
        found.append(stmt)
        if isinstance(stmt, S.If):
            found += _reference(stmt.body, functions) + _reference(stmt.orelse, functions)
        elif isinstance(stmt, (S.While, S.For, S.NoGrad)) or (isinstance(stmt, S.FuncDef) and functions):
            found += _reference(stmt.body, functions)
    return found


@pytest.mark.parametrize("functions", [False, True])
def test_statements_finds_every_nested_statement_in_source_order(functions: bool) -> None:
    body = parse(NESTED).body
    walked = list(S.statements(body, functions))
    assert [id(s) for s in walked] == [id(s) for s in _reference(body, functions)]
    lines = [s.pos.line for s in walked]
    assert lines == sorted(lines)  # source order: each statement starts on a line of its own here
    returns = [s for s in walked if isinstance(s, S.Return)]
    assert len(returns) == (2 if functions else 0)  # a function's body only when asked for


def test_a_claims_side_is_no_program_code() -> None:
    names = {node.name for node in S.code(parse(NESTED).body, functions=True) if isinstance(node, S.Name)}
    assert names == {"u", "x", "y", "i", "z"}  # not claimed_only, which only the check statement reads
    assert "claimed_only" not in free_names(parse(NESTED))


def test_every_statement_kind_declares_its_program_code_among_its_fields() -> None:
    kinds = S.Stmt.__subclasses__()
    assert {k.__name__ for k in kinds} >= {"Assign", "FuncDef", "Return", "Claim", "While", "If", "For", "NoGrad"}
    for kind in kinds:
        assert set(kind.expressions) <= set(kind.__slots__), kind
        assert set(kind.blocks) <= set(kind.__slots__), kind
        assert not set(kind.expressions) & set(kind.blocks), kind
    assert S.Claim.expressions == () and S.Claim.blocks == ()


def test_the_walk_has_no_recursion_limit() -> None:
    depth = 5000
    stmt: S.Stmt = S.Assign("x", "=", S.Number(1.0, "1", S.Pos(1, 1)), S.Pos(1, 1))
    for _ in range(depth):
        stmt = S.NoGrad([stmt], S.Pos(1, 1))
    assert len(list(S.statements([stmt]))) == depth + 1
    assert len(list(S.code([stmt]))) == 1


def _context() -> Context:
    return make_context(".", 0, ())


def test_a_checker_depends_on_the_set_names_not_their_values() -> None:
    module = parse("w = 2\nb = w + 1\nL = w * b\n")
    checker = check(module, ("w",), 200)
    assert list(checker.inputs) == ["w"]
    for value in (3.0, -1.0):
        executed = execute(module, {"w": np.float64(value)}, _context(), Limits(), checker=checker)
        assert float(executed.frame["L"].value) == value * (value + 1)
        assert list(executed.state.leaves) == ["w"]


def test_a_reused_checker_gives_each_run_its_own_loop_counts() -> None:
    module = parse("x = 0\nfor i in range(3) { x = x + 1 }\nwhile x < 5 { x = x + 1 }\n")
    checker = check(module, (), 200)
    assert sorted(checker.loops.values()) == ["for", "while"]
    runs = [execute(module, {}, _context(), Limits(), checker=checker) for _ in range(2)]
    for executed in runs:
        assert sorted((loop.kind, loop.iterations) for loop in executed.state.loops.values()) == \
            [("for", 3), ("while", 2)]


def test_the_checker_reports_a_mistake_in_code_that_never_runs_before_anything_runs() -> None:
    module = parse("x = 1\nif x > 2 { y = foo(x) }\n")
    with pytest.raises(NameNotFound, match="unknown function 'foo'"):
        check(module, (), 200)


def test_a_straight_line_statement_is_checked_as_it_runs_the_checker_naming_the_mistake() -> None:
    module = parse("x = 1\ny = x + nope\n")
    checker = check(module, (), 200)  # top-level statements are not walked ahead
    with pytest.raises(NameNotFound, match="'nope' is used but never given a value"):
        execute(module, {}, _context(), Limits(), checker=checker)


def test_leaves_and_functions_are_found_once_per_checker() -> None:
    module = parse("g(t) = t * s\ns = 2\na = 3\nb = g(a)\nc = a * 2\n")
    checker = Checker(module, (), 200)
    checker.check()
    assert checker.functions["g"].reads == {"s"} and checker.functions["g"].reads_globals
    leaves = {name for name, stmts in checker.assigned.items() if any(checker.is_leaf(s) for s in stmts)}
    assert leaves == {"s", "a"}


def test_program_runs_are_unchanged_by_the_split() -> None:
    run = gradcalc.parse_program(NESTED.replace("check dz/dx = 2*claimed_only\n", "")).run()
    assert float(run.value("L")) == 4.0  # x ends at 3, y = f(3) = 3, z = y * 1
    assert [(loop.kind, loop.iterations) for loop in run.loops] == [("while", 2), ("for", 2)]


def test_a_program_checks_once_per_set_of_given_names() -> None:
    program = gradcalc.parse_program("w = 2\nb = 1\nL = sin(w) * b + w\n")
    runs = [program.run({"w": w}) for w in (0.5, 1.5)]
    for w, run in zip((0.5, 1.5), runs):  # the reused check still gives each run its own numbers
        assert float(run.value("L")) == pytest.approx(np.sin(w) + w)
        assert float(run.grad("L", ["w"]).grads["w"]) == pytest.approx(np.cos(w) + 1)
    assert len(program.checked) == 1
    both = program.run({"w": 1.0, "b": 3.0})  # another set of names: its own check (b is given, not a leaf)
    assert len(program.checked) == 2 and float(both.value("L")) == pytest.approx(3 * np.sin(1.0) + 1)
    for _ in range(2):  # an unknown name is refused every time, not only on the first run
        with pytest.raises(UsageError, match="no variable 'nope'"):
            program.run({"nope": 1.0})
