"""Where a NaN comes from (issue #23 item 5): the line, column, pass, operation and remedy of each trap, as a
warning on standard error and "warnings" in the JSON; nothing on finite programs; --no-anomaly."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import EXIT_OK, SAMPLES, examples, json_ok, run_cli
from hypothesis import HealthCheck, given, settings
from strategies import scalar_cases

import gradcalc
from gradcalc.program import anomaly

WHERE_TRAP = "a = 0; y = where(a > 0, sqrt(a), 0)"


def warnings_of(*args: str) -> list[dict]:
    doc = json_ok(*args)
    return doc.get("warnings", [])


def test_the_where_trap_is_found_in_the_backward_pass() -> None:
    result = run_cli("grad", "-e", WHERE_TRAP)
    assert result.exit_code == EXIT_OK  # a warning, not an error
    assert "nan" in result.stdout
    (line,) = [text for text in result.stderr.splitlines() if text.startswith("warning:")]
    assert line.startswith("warning: <expr>:1:25: NaN first made in the backward pass by sqrt(…)")
    assert "double-where" in line and "where(a > 0, sqrt(where(a > 0, a, 1)), 0)" in line
    (found,) = warnings_of("grad", "-e", WHERE_TRAP)
    assert (found["pass"], found["line"], found["column"], found["operation"]) == ("backward", 1, 25, "sqrt(…)")
    assert found["inputs"] == ["a = 0"] and found["gradient"] == "0" and found["wrt"] == "a"
    assert found["value"] == "NaN"


def test_the_double_where_trick_has_no_warning() -> None:
    fixed = "a = 0; y = where(a > 0, sqrt(where(a > 0, a, 1)), 0)"
    assert json_ok("grad", "-e", fixed)["grad"] == {"a": 0.0}
    assert run_cli("grad", "-e", fixed).stderr == ""


def test_sqrt_of_a_negative_number_is_found_in_the_forward_pass() -> None:
    (found,) = warnings_of("grad", "-e", "x = 1; y = sqrt(x - 2)")
    assert (found["pass"], found["line"], found["column"], found["operation"]) == ("forward", 1, 12, "sqrt(…)")
    assert found["inputs"] == ["-1"] and found["value"] == "NaN"
    assert "negative" in found["hint"]


def test_log_of_0_on_a_later_line() -> None:
    program = "x = 2\nz = x - 2\ny = 3 * log(z)\nL = y + 1\n"
    (found,) = warnings_of("eval", "-e", program)
    assert (found["pass"], found["line"], found["column"], found["operation"]) == ("forward", 3, 9, "log(…)")
    assert found["statement"] == "y = 3 * log(z)" and found["inputs"] == ["z = 0"]
    assert found["value"] == "-inf" and "log(x + 1e-12)" in found["hint"]


def test_zero_over_zero_in_a_norm() -> None:
    (found,) = warnings_of("grad", "-e", "x = [0, 0]; u = x / norm(x); L = sum(u)")
    assert (found["pass"], found["column"], found["operation"]) == ("forward", 19, "'/'")
    assert found["inputs"] == ["x = [0, 0]", "0"] and "0/0" in found["hint"]
    (found,) = warnings_of("grad", "-e", "x = [0, 0]; y = sqrt(sum(x^2))")
    assert (found["pass"], found["column"], found["operation"]) == ("backward", 17, "sqrt(…)")
    assert "norm(x)" in found["hint"] and found["gradient"] == "1"


def test_an_operator_inside_a_chain_is_pointed_at() -> None:
    # The interpreter runs a + b/c*d as one loop: the division is still named by its own column.
    (found,) = warnings_of("eval", "-e", "b = 1; c = 0; d = 2; y = 1 + b/c*d")
    assert (found["column"], found["operation"], found["inputs"]) == (31, "'/'", ["b = 1", "c = 0"])
    assert found["value"] == "inf"


def test_inside_a_function_body() -> None:
    program = "f(t) {\n    return log(t - 1)\n}\nx = 1\ny = f(x)\n"
    (found,) = warnings_of("eval", "-e", program)
    assert (found["line"], found["column"], found["operation"]) == (2, 12, "log(…)")


def test_a_power_below_1_at_0_in_the_backward_pass() -> None:
    (found,) = warnings_of("grad", "-e", "x = 0; y = x^0.5")
    assert (found["pass"], found["operation"], found["value"]) == ("backward", "'^'", "inf")


def test_a_vector_output_seeded_by_a_json_array() -> None:
    (found,) = warnings_of("grad", "-e", "x = [0, 1]; y = where(x > 0, sqrt(x), 0)", "--vector", "[1, 2]")
    assert (found["pass"], found["column"], found["operation"]) == ("backward", 30, "sqrt(…)")
    assert found["gradient"] == "[0, 2]" and "double-where" in found["hint"]  # the entry where g is 0


def test_a_nan_given_as_input_is_not_reported() -> None:
    # The inputs were not finite: nothing started inside the program.
    result = run_cli("grad", "-e", "y = 2*x", "--set", "x=nan")
    assert "nan" in result.stdout and result.stderr == ""


def test_no_anomaly_silences_it() -> None:
    result = run_cli("grad", "-e", WHERE_TRAP, "--no-anomaly")
    assert result.exit_code == EXIT_OK and result.stderr == ""
    assert "warnings" not in json_ok("grad", "-e", WHERE_TRAP, "--no-anomaly")


def test_hvp_and_taylor_warn_too() -> None:
    (found,) = warnings_of("hvp", "-e", "x = [0, 1]; L = sum(where(x > 0, sqrt(x), 0))", "--wrt", "x", "--vector",
                           "ones")
    assert found["pass"] == "backward" and found["operation"] == "sqrt(…)"
    (found,) = warnings_of("taylor", "-e", "z = x - 1; y = log(z)", "--wrt", "x", "--at", "1", "--order", "1")
    assert found["operation"] == "log(…)"


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.eq")))
def test_no_warning_on_the_samples(sample: str) -> None:
    result = run_cli("grad", str(SAMPLES / sample), "--vector", "ones")  # doubling.eq: a vector output
    assert result.exit_code == EXIT_OK, result.output
    assert "warning" not in result.stderr


@settings(max_examples=examples(30), deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(scalar_cases(powers=True))
def test_no_warning_on_random_finite_programs(case: tuple[str, list[str], list[dict[str, float]]]) -> None:
    program, names, points = case
    run = gradcalc.parse_program(program).run(points[0])
    grads = run.grad("f", names, retain_graph=True).grads
    assert all(math.isfinite(float(g)) for g in grads.values())
    assert anomaly.forward(run) == [] and anomaly.backward(run, "f", names, grads) == []
    # The locating rerun (what runs when something is not finite) computes the same values, and finds nothing.
    located = anomaly._rerun(run)
    assert located.found == []
    assert float(located.globals["f"].value) == float(run.value("f"))


def test_the_locating_rerun_notes_every_recorded_node() -> None:
    run = gradcalc.parse_program("x = 0.5; y = x*sin(x) + exp(x)/2").run({})
    located = anomaly._rerun(run)
    recorded = [node for node in located.made_by if node.op is not None]
    # '*', sin, '+', exp and '/', counted by hand
    assert sorted({located.made_by[node].pos.column for node in recorded}) == [15, 16, 23, 25, 31]
    assert np.isfinite(float(located.globals["y"].value))


@pytest.mark.parametrize("args", [
    ["jacobian", "--of", "y", "--wrt", "x"],
    ["hessian", "--of", "L", "--wrt", "x"],
    ["jvp", "--of", "y", "--wrt", "x", "--tangent", "ones"],
])
def test_jacobians_hessians_and_jvp_say_where_a_value_s_nan_started(args: list[str]) -> None:
    """sqrt of -1 on line 2, column 5: the value's NaN, named by the commands that trace no derivative's yet."""
    program = "x = [1, -1]\ny = sqrt(x)\nL = sum(y)"
    doc = json_ok(args[0], "-e", program, *args[1:])
    (warning,) = doc["warnings"]
    assert (warning["pass"], warning["line"], warning["column"], warning["operation"]) == \
        ("forward", 2, 5, "sqrt(…)"), warning
    finite = json_ok(args[0], "-e", program.replace("-1", "4"), *args[1:])
    assert "warnings" not in finite, finite
    quiet = json_ok(args[0], "-e", program, *args[1:], "--no-anomaly")
    assert "warnings" not in quiet, quiet
