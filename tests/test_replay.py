"""Runs that replay (program/replay.py): a program run again with new values replays its recorded primitives.

Every replayed run is compared with the same program interpreted afresh (a new Program, which never
replays), value and gradients; programs whose values decide something are never replayed.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import scalar_cases

from gradcalc.errors import GradcalcError
from gradcalc.program.api import Program
from gradcalc.program.replay import Recording


def _results(program: Program, values: dict, of: str, **options) -> tuple[dict, dict, set]:
    run = program.run(values, **options)
    result = run.grad(of=of)  # before the values are read: grad needs no node of a replayed run
    grads = {k: np.asarray(v) for k, v in result.grads.items()}
    return {name: np.asarray(run.value(name)) for name in run.names}, {"": result.value, **grads}, result.no_path


def _same(got: dict, want: dict) -> None:
    """The same names, numbers, shapes and dtypes, exactly."""
    assert got.keys() == want.keys()
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value)
        assert (got[name].shape, got[name].dtype) == (value.shape, value.dtype), name


def _replayed(text: str, points: list[dict], of: str, **options) -> Program:
    """Run `text` at every point with one Program (replaying from the third run) and check each run against a
    fresh Program's interpretation; returns the Program."""
    program = Program(text)
    for values in points:
        got_values, got_grads, got_missing = _results(program, values, of, **options)
        want_values, want_grads, want_missing = _results(Program(text), values, of, **options)
        _same(got_values, want_values)
        _same(got_grads, want_grads)
        assert got_missing == want_missing
    _passes_run_as_written(program, points[-1], **options)
    return program


def _passes_run_as_written(program: Program, values: dict, **options) -> None:
    """Each written pass runs on a replay's values without failing: grad's own pass, which a failure falls back to,
    would hide a pass that cannot run."""
    run = program.run(values, **options)
    if run.replayed is not None and run.replayed.values is not None:
        for entry in run.replayed.recording.backwards.values():
            if isinstance(entry, tuple) and entry:
                entry[2](run.replayed.values)


@pytest.fixture
def at_once(monkeypatch):
    """Recordings written out as functions, forward and backward, from their first replay."""
    from gradcalc.program import replay

    monkeypatch.setattr(replay, "COMPILE_AFTER", 0)


def _compiled_passes(program: Program) -> list:
    return [entry for recording in _recordings(program) if isinstance(recording, Recording)
            for entry in recording.backwards.values() if isinstance(entry, tuple) and entry]


def _recordings(program: Program) -> list:
    return list(program.replays.values())


@settings(max_examples=40, deadline=None)
@given(scalar_cases())
def test_random_scalar_programs_replay_as_they_interpret(case: tuple) -> None:
    text, names, points = case
    program_text = "".join(f"{name} = 0.25\n" for name in names) + text
    extra = [{name: value + 0.5 for name, value in point.items()} for point in points]
    program = _replayed(program_text, [*points, *extra], "f")
    assert any(isinstance(entry, Recording) for entry in _recordings(program))


@settings(max_examples=40, deadline=None)
@given(scalar_cases(powers=True))
def test_random_scalar_programs_replay_their_written_passes_as_they_interpret(case: tuple) -> None:
    """The forward and grad's pass written out from the first replay: the same numbers as the interpreter's."""
    from gradcalc.program import replay

    text, names, points = case
    program_text = "".join(f"{name} = 0.25\n" for name in names) + "k = 0.5\n" + text + "\ng = f * k - f"
    extra = [{name: value - 0.75 for name, value in point.items()} for point in points]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(replay, "COMPILE_AFTER", 0)
        program = _replayed(program_text, [*points, *extra, *points], "g")
    assert _compiled_passes(program)


def test_toy_network_replayed_gradients_by_hand() -> None:
    program = Program("a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4\nb = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d")
    for a, w1 in [(2.0, 3.0), (1.0, 2.0), (-3.0, 0.5), (4.0, -2.0)]:
        run = program.run({"a": a, "w1": w1})
        grads = run.grad(of="L").grads
        # L = 10 - (w3*w1*a + w4*w2*a), with w2 = -1, w3 = 0.5, w4 = 4
        assert float(run.value("L")) == 10 - (0.5 * w1 * a + 4 * -1 * a)
        assert float(grads["a"]) == -(0.5 * w1 + 4 * -1)
        assert float(grads["w1"]) == -0.5 * a
        assert float(grads["w4"]) == -(-1 * a)
    assert isinstance(_recordings(program)[0], Recording)


TENSOR_PROGRAMS = [
    # broadcasting, reductions with literal axes, matmul, literal indexing and slices, .T, a function, no_grad
    ("W = [[1, 2], [3, 4], [5, 6]]\nx = [0.5, -1]\nb = 0.1\nh = tanh(W @ x + b)\nL = sum(h * h) + mean(W, 0)[1]",
     lambda rng: {"W": rng.normal(size=(3, 2)), "x": rng.normal(size=2), "b": float(rng.normal())}),
    ("x = [1, 2, 3, 4]\nf(u) = u * sigmoid(u)\ny = f(x[1:]) - x[0]\nno_grad { s = sum(x) }\nL = sum(y^2) / s + max(x)",
     lambda rng: {"x": rng.uniform(0.5, 2, size=4)}),
    ("A = [[2, 1], [1, 3]]\nv = [1, 1]\nL = v @ inv(A) @ v + sum(A.T * A, 1)[0] + logsumexp(v)",
     lambda rng: {"A": np.eye(2) * 3 + rng.normal(size=(2, 2)) * 0.3, "v": rng.normal(size=2)}),
]


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("text, draw", TENSOR_PROGRAMS)
def test_tensor_programs_replay_as_they_interpret(text: str, draw, compiled: bool, monkeypatch) -> None:
    """Replayed by a function written from the recording (at once, here), and by the loop that long recordings
    and the first replays take."""
    from gradcalc.program import replay

    monkeypatch.setattr(replay, "COMPILE_AFTER", 0)
    if not compiled:
        monkeypatch.setattr(replay, "COMPILED_STEPS", 0)
    rng = np.random.default_rng(7)
    program = _replayed(text, [draw(rng) for _ in range(5)], "L")
    recordings = [entry for entry in _recordings(program) if isinstance(entry, Recording)]
    assert recordings and all((entry.compiled is not None) == compiled for entry in recordings)
    assert bool(_compiled_passes(program)) == compiled  # a long recording's grad is grad's own pass


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_replayed_runs_in_either_dtype_as_they_interpret(dtype: str, at_once) -> None:
    text = "W = [[1, 2], [3, 4], [5, 6]]\nx = [0.5, -1]\nh = exp(W @ x) / 3\nL = sum(h * h * x[0]) - 2 * mean(h)"
    rng = np.random.default_rng(3)
    points = [{"W": rng.normal(size=(3, 2)), "x": rng.normal(size=2)} for _ in range(4)]
    assert _compiled_passes(_replayed(text, points, "L", dtype=dtype))


def test_a_replayed_run_makes_its_nodes_when_asked_as_the_interpreter_makes_them(at_once) -> None:
    """grad makes no node; the values, names, tape and the temporaries freed (exp's input, which its rule does
    not read) are then the interpreter's."""
    from gradcalc.engine.graph import Released

    text = "W = [[1, 2], [3, 4]]\nx = [0.5, -1]\nh = exp(W @ x + 1) * 2\nL = sum(h * x) + sum(W * W)"
    program = Program(text)
    for scale in (1.0, 2.0, 3.0, 4.0):  # the first replay's nodes are what grad's pass is written from
        run = program.run({"x": [0.5 * scale, -1.0]})
        run.grad(of="L")
    assert run.replayed is not None and run.replayed.nodes is None  # grad made no node
    fresh = Program(text).run({"x": [2.0, -1.0]})
    assert list(run.frame) == list(fresh.frame) and list(run.leaves) == list(fresh.leaves)
    shown = [[(node.op and node.op.name, node.name, node.requires_grad, node.value.__class__ is Released,
               node.value.shape) for node in tape] for tape in (run.tape, fresh.tape)]
    assert shown[0] == shown[1] and any(freed for *_, freed, _ in shown[0])
    for mine, theirs in zip(run.tape, fresh.tape):
        if mine.value.__class__ is not Released:
            np.testing.assert_array_equal(mine.value, theirs.value)
    _same({"H": run.hessian(of="L", wrt=["x"]).blocks[0][0]}, {"H": fresh.hessian(of="L", wrt=["x"]).blocks[0][0]})


VALUE_DEPENDENT = [
    ("x = 1\nif x > 0 { y = x * 2 } else { y = -x * 3 }\nL = y", [{"x": 1.0}, {"x": 2.0}, {"x": -1.0}, {"x": -2.0}]),
    ("x = 1\nwhile x < 10 { x = x * 2 }\nL = x", [{"x": 1.0}, {"x": 3.0}, {"x": 0.5}, {"x": 20.0}]),
    ("v = [1, 2, 3]\nk = 0\nL = v[k] * sum(v)", [{"k": 0.0}, {"k": 1.0}, {"k": 2.0}, {"k": 0.0}]),
    ("v = [[1, 2], [3, 4]]\nk = 0\nL = sum(sum(v, k) * [1, 2])", [{"k": 0.0}, {"k": 1.0}, {"k": 1.0}]),
    ("x = 2\nL = x * all(x > 1)", [{"x": 2.0}, {"x": 3.0}, {"x": 0.0}]),
    ("const N = 2\nx = 1.5\nL = sum(ones(N) * x)", [{"N": 2.0}, {"N": 3.0}, {"N": 4.0}]),
]


@pytest.mark.parametrize("text, points", VALUE_DEPENDENT)
def test_runs_whose_values_decide_are_interpreted(text: str, points: list[dict]) -> None:
    """The path, an index, an axis, a shape or a truth depends on a value: never replayed, and every run is right."""
    program = Program(text)
    for values in points:
        run = program.run(values)
        assert float(run.value("L")) == float(Program(text).run(values).value("L"))
    assert all(entry is False or entry == 1 for entry in _recordings(program))


def test_the_branch_each_value_takes() -> None:
    """Hand-computed: a replay of the first path would give 2x for every x."""
    program = Program("x = 1\nif x > 0 { y = x * 2 } else { y = -x * 3 }\nL = y")
    assert [float(program.run({"x": x}).value("L")) for x in (1.0, 2.0, -1.0, 3.0, -2.0)] == [2, 4, 3, 6, 6]


def test_a_failing_replay_falls_back_to_the_interpreter() -> None:
    """inv of a singular matrix fails in the replay: the interpreter's error, with its line, is raised."""
    program = Program("A = [[2, 0], [0, 2]]\nx = 1\nL = sum(inv(A)) * x")
    for scale in (1.0, 2.0, 3.0):
        assert float(program.run({"A": [[scale, 0], [0, scale]]}).value("L")) == pytest.approx(2 / scale)
    assert isinstance(_recordings(program)[0], Recording)
    with pytest.raises(GradcalcError) as caught:
        program.run({"A": [[1.0, 2.0], [2.0, 4.0]]})
    assert "singular" in caught.value.message and caught.value.pos is not None and caught.value.pos.line == 3
    assert float(program.run({"A": [[4.0, 0], [0, 4.0]]}).value("L")) == pytest.approx(0.5)


def test_a_new_shape_is_interpreted_then_recorded_apart() -> None:
    program = Program("x = [1, 2]\nL = sum(x * x)")
    for x in ([1.0, 2.0], [3.0, 4.0], [1.0, 1.0], [1.0, 2.0, 3.0], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0]):
        run = program.run({"x": x})
        assert float(run.value("L")) == sum(v * v for v in x)
        np.testing.assert_array_equal(run.grad(of="L").grads["x"], [2 * v for v in x])
    assert sum(isinstance(entry, Recording) for entry in _recordings(program)) == 2


def test_replayed_runs_survive_a_spent_backward() -> None:
    """retain_graph=False frees a run's intermediates: the recording's shared nodes must not be among them."""
    program = Program("x = [1, 2, 3]\nW = [[1, 0, 1], [0, 1, 1]]\nL = sum(tanh(W @ x) * 2)")
    for _ in range(4):
        run = program.run({"x": [0.5, -0.5, 1.0]})
        grad = run.grad(of="L", retain_graph=False).grads["x"]
        w = np.array([[1, 0, 1], [0, 1, 1]])
        expected = w.T @ (2 * (1 - np.tanh(w @ [0.5, -0.5, 1.0]) ** 2))
        np.testing.assert_allclose(grad, expected, rtol=1e-15)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(-3, 3, allow_nan=False), min_size=4, max_size=4))
def test_replayed_gradient_matches_finite_differences(xs: list[float]) -> None:
    program = Program("x = 0\ny = 0\nf = sin(x) * exp(y) + x * y^2")
    for x, y in zip(xs, reversed(xs)):
        grads = program.run({"x": x, "y": y}).grad(of="f").grads
        h = 1e-6
        f = lambda a, b: np.sin(a) * np.exp(b) + a * b * b
        assert float(grads["x"]) == pytest.approx((f(x + h, y) - f(x - h, y)) / (2 * h), rel=1e-6, abs=1e-6)
        assert float(grads["y"]) == pytest.approx((f(x, y + h) - f(x, y - h)) / (2 * h), rel=1e-6, abs=1e-6)


def test_parsed_programs_are_kept_by_their_text() -> None:
    """The same text is parsed once; another text (one character changed) is parsed anew, and so is the first
    text's file after it changes; the cache keeps a bounded number of texts."""
    from gradcalc.program import api

    text = "x = 3\nL = x * x  # kept"
    first, second = Program(text), Program(text)
    assert first.module is second.module
    changed = Program(text.replace("3", "4"))
    assert changed.module is not first.module
    assert float(changed.run().value("L")) == 16 and float(first.run().value("L")) == 9
    for i in range(api.PARSED_COUNT + 1):
        Program(f"x = {i}\nL = x  # filler")
    assert len(api._PARSED) <= api.PARSED_COUNT
    assert Program(text).module is not first.module  # pushed out by newer texts, parsed again


def test_a_changed_file_is_parsed_again(tmp_path) -> None:
    path = tmp_path / "p.eq"
    path.write_text("w = 2\nL = w^3\n")
    program = Program.from_file(str(path))
    assert float(program.run().grad(of="L").grads["w"]) == 12
    path.write_text("w = 2\nL = w^2\n")
    assert float(Program.from_file(str(path)).run().grad(of="L").grads["w"]) == 4


def test_a_set_leaf_that_draws_keeps_the_stream_aligned_on_every_run() -> None:
    """`x = randn(3)` given by --set still makes its draws, on the first run and on the ones after (whose checks
    of the statement are remembered): y is the program's own y every time."""
    text = "x = randn(3)\ny = randn(3)\nL = sum(x * y)"
    y = np.asarray(Program(text).run().value("y"))
    program = Program(text)
    for chosen in ([1.0, 2.0, 3.0], [0.0, 1.0, 0.0], [2.0, 2.0, 2.0], [1.0, 1.0, 1.0]):
        run = program.run({"x": chosen})
        np.testing.assert_array_equal(run.value("y"), y)
        assert float(run.value("L")) == pytest.approx(float(np.dot(chosen, y)), rel=1e-15)


def test_a_program_keeps_a_bounded_number_of_recordings(monkeypatch) -> None:
    from gradcalc.program import api

    monkeypatch.setattr(api, "REPLAY_KEYS", 3)
    program = Program("x = [1]\nL = sum(x * x)")
    for size in range(1, 8):
        for _ in range(3):
            assert float(program.run({"x": [2.0] * size}).value("L")) == 4 * size
    assert len(program.replays) <= 3


def _error(method, **arguments) -> tuple:
    """What method(**arguments) raises: its kind, message, hint and place."""
    with pytest.raises(GradcalcError) as caught:
        method(**arguments)
    error = caught.value
    return type(error), error.message, error.hint, error.pos and (error.pos.line, error.pos.column)


def test_grad_s_errors_on_replayed_runs_are_the_interpreter_s(at_once) -> None:
    """A rule that fails at these values (logdet's inverse of a singular matrix), an unknown output, a constant
    or unknown --wrt, a vector output without --vector: the same error, place and hint as a fresh run's."""
    text = "A = [[2, 0], [0, 2]]\nconst c = 2\nw = 2\nv = [1, 2] * w\nL = w*w*c + logdet(A)"
    program = Program(text)
    for scale in (1.0, 2.0, 3.0, 4.0):
        run = program.run({"A": [[scale, 0.0], [0.0, scale]]})
        assert float(run.grad(of="L").grads["w"]) == 8.0  # 2*w*c
    singular, regular = {"A": [[1.0, 2.0], [2.0, 4.0]]}, {"A": [[5.0, 0.0], [0.0, 5.0]]}
    calls = [(singular, {"of": "L"}), (regular, {"of": "nope"}), (regular, {"of": "L", "wrt": ["c"]}),
             (regular, {"of": "L", "wrt": ["u"]}), (regular, {"of": "v"}), (singular, {"of": "v"})]
    for values, arguments in calls:
        for _ in range(2):  # the second time, a pass written for these names would run if there were one
            assert _error(program.run(values).grad, **arguments) == _error(Program(text).run(values).grad, **arguments)
    assert _error(program.run(regular).value, name="nope") == _error(Program(text).run(regular).value, name="nope")
    message = "the derivative of logdet needs the inverse of a singular matrix"
    assert _error(program.run(singular).grad, of="L")[1] == message
    assert float(program.run({"A": [[3.0, 0.0], [0.0, 3.0]]}).grad(of="L").grads["w"]) == 8.0  # and on it goes


def test_grad_s_other_forms_on_replayed_runs_are_the_interpreter_s(at_once) -> None:
    """A --vector, create_graph, retain_graph=False, host=False, an intermediate and a leaf without a path in
    --wrt: each as a fresh run gives it."""
    text = "x = [1, 2]\nu = 3\nk = 1\nh = tanh(x * u)\nL = sum(h * h)"
    program = Program(text)
    values = {"x": [0.3, -0.2], "u": 1.5}
    for _ in range(4):
        program.run(values).grad(of="L")
    for run, fresh in [(program.run(values), Program(text).run(values)) for _ in range(3)]:
        _same({"g": run.grad(of="h", vector=[1.0, -2.0]).grads["x"]},
              {"g": fresh.grad(of="h", vector=[1.0, -2.0]).grads["x"]})
        both = [r.grad(of="L", wrt=["h", "k", "u"], host=False) for r in (run, fresh)]
        _same(both[0].grads, both[1].grads)
        assert both[0].no_path == both[1].no_path == {"k"}
        graphs = [r.grad(of="L", wrt=["u"], create_graph=True).grads["u"] for r in (run, fresh)]
        assert float(graphs[0].value) == float(graphs[1].value)
        _same(run.grad(of="L", retain_graph=False).grads, fresh.grad(of="L", retain_graph=False).grads)
        assert _error(run.grad, of="L") == _error(fresh.grad, of="L")  # spent


def test_names_given_change_and_each_set_is_recorded_and_replayed_apart(at_once) -> None:
    text = "a = 2; w1 = 3; w2 = -1\nb = w1*a\nL = 10 - w2*b"
    points = [{"a": 1.0}, {"w1": 2.0}, {"a": 1.0, "w1": 2.0}, {}, {"a": 3.0}, {"w1": -1.0}, {"a": 0.5, "w1": 4.0}]
    program = _replayed(text, [*points, *points, *points, *points], "L")
    assert len(_compiled_passes(program)) == 4  # one pass a set of names


def test_nan_warnings_and_limits_on_replayed_runs_are_the_interpreter_s(at_once) -> None:
    """The anomaly report (a NaN made in the forward pass, an infinity in the backward) and --max-elements on a
    Jacobian: the same for a replayed run as for a fresh one."""
    from gradcalc.program import anomaly

    text = "x = [1, 2, 3]\ny = log(x) * x\nL = sum(sqrt(x) * 2) + sum(y)"
    program = Program(text)
    for i in range(4):
        program.run({"x": [1.0 + i, 2.0, 3.0]}, max_elements=8).grad(of="L")
    values = {"x": [0.0, 1.0, 4.0]}  # log(0) is -inf (log(x) has a positive entry too: "inf"); sqrt's slope at 0 too
    reports = []
    for run in (program.run(values, max_elements=8), Program(text).run(values, max_elements=8)):
        result = run.grad(of="L")
        found = anomaly.forward(run) + anomaly.backward(run, "L", ["x"], result.grads)
        reports.append([item.doc("p.eq") for item in found])
        fresh = Program(text).run(values, max_elements=8)
        assert _error(run.jacobian, of="y", wrt=["x"]) == _error(fresh.jacobian, of="y", wrt=["x"])
    assert reports[0] == reports[1]
    assert [(doc["pass"], doc["operation"], doc["line"]) for doc in reports[0]] == [("forward", "log(…)", 2),
                                                                                    ("backward", "sqrt(…)", 3)]


def test_an_array_given_is_checked_against_the_limit_as_a_list_is() -> None:
    """An array of the working dtype is taken as it is (no conversion), but still within --max-elements."""
    program = Program("x = [1]\nL = sum(x * x)")
    given = [np.full(20, 0.5), np.full(20, 0.5).tolist()]
    assert len({_error(program.run, values={"x": x}, max_elements=10) for x in given}) == 1
    message = _error(program.run, values={"x": given[0]}, max_elements=10)[1]
    assert message.startswith("the value would have 20 elements"), message
    for _ in range(4):
        assert float(program.run({"x": given[0]}, max_elements=20).value("L")) == 5.0


def test_replayed_runs_on_the_device_as_on_the_cpu(at_once, monkeypatch) -> None:
    """--device gpu (tests/fakedevice.py's CuPy stand-in, whose arrays refuse NumPy): the written passes run on
    the device's arrays and give the CPU's numbers; the results come back to the host."""
    import sys

    import fakedevice

    from gradcalc.engine import backend as B

    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    text, draw = TENSOR_PROGRAMS[0]
    rng = np.random.default_rng(5)
    program = Program(text)
    try:
        for values in [draw(rng) for _ in range(5)]:
            run = program.run(values, device="gpu")
            got = run.grad(of="L")
            want = Program(text).run(values).grad(of="L")
            _same({"": np.asarray(got.value), **got.grads}, {"": want.value, **want.grads})
            assert float(run.value("L")) == float(want.value)
        assert _compiled_passes(program)
        _passes_run_as_written(program, values, device="gpu")
    finally:
        B.use("cpu")
