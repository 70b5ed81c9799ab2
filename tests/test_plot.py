"""`gradcalc plot` (#22): the data drawn equals closed forms, finite differences and `grad`; the pictures are
valid files of the expected size; the text plot fits the terminal; bad input exits 2."""

from __future__ import annotations

import json
import struct
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from helpers import NEURON, assert_bad_input, json_ok, run_cli
from terminal import run_in_terminal

try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False

needs_matplotlib = pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="-o needs Matplotlib: pip install 'gradcalc[plot]'")
try:
    import plotext  # noqa: F401
    HAVE_PLOTEXT = True
except ImportError:
    HAVE_PLOTEXT = False
needs_plotext = pytest.mark.skipif(not HAVE_PLOTEXT, reason="the text plot needs plotext: pip install "
                                   "'gradcalc[plot]'")
X2SIN = "y = x^2*sin(x)"


def _numbers(values: list[object]) -> np.ndarray:
    return np.array([np.nan if v == "NaN" else -np.inf if v == "-Infinity" else np.inf if v == "Infinity" else v
                     for v in values], dtype=float)


def test_a_curve_is_the_closed_form_and_its_derivatives_at_each_point() -> None:
    doc = json_ok("plot", "-e", X2SIN, "--wrt", "x", "--range", "-3:3", "--order", "2")
    assert (doc["of"], doc["wrt"]) == ("y", "x")
    x = np.array(doc["x"])
    assert len(x) == 201 and x[0] == -3 and x[-1] == 3 and np.allclose(np.diff(x), 0.03)
    # By hand: y' = 2x sin x + x² cos x; y'' = 2 sin x + 4x cos x − x² sin x.
    assert np.allclose(doc["y"], x**2 * np.sin(x), rtol=1e-12, atol=1e-12)
    assert np.allclose(doc["dy"], 2 * x * np.sin(x) + x**2 * np.cos(x), rtol=1e-12, atol=1e-12)
    assert np.allclose(doc["d2y"], 2 * np.sin(x) + 4 * x * np.cos(x) - x**2 * np.sin(x), rtol=1e-12, atol=1e-12)


def test_order_1_draws_no_second_derivative_and_the_tangent_is_the_line_at_the_point() -> None:
    doc = json_ok("plot", "-e", X2SIN, "--wrt", "x", "--range", "0:2", "--points", "5", "--tangent", "1.5")
    assert "d2y" not in doc and doc["x"] == [0, 0.5, 1, 1.5, 2]
    assert doc["tangent"]["at"] == 1.5
    assert doc["tangent"]["value"] == pytest.approx(2.25 * np.sin(1.5), rel=1e-12)
    assert doc["tangent"]["slope"] == pytest.approx(3 * np.sin(1.5) + 2.25 * np.cos(1.5), rel=1e-12)


def test_a_random_program_agrees_with_finite_differences() -> None:
    rng = np.random.default_rng(7)
    a, b, c = rng.uniform(0.5, 2, 3)
    program = f"a = {a}; b = {b}; h = tanh(a*t + b); y = exp(-{c}*t^2) * h + log(1 + t^2)"
    doc = json_ok("plot", "-e", program, "--wrt", "t", "--range", "-2:2", "--points", "41", "--order", "2", "--of", "y")

    def f(t: np.ndarray) -> np.ndarray:
        return np.exp(-c * t**2) * np.tanh(a * t + b) + np.log(1 + t**2)

    t, eps = np.array(doc["x"]), 1e-4
    assert np.allclose(doc["y"], f(t), rtol=1e-12)
    assert np.allclose(doc["dy"], (f(t + eps) - f(t - eps)) / (2 * eps), rtol=1e-6, atol=1e-7)
    assert np.allclose(doc["d2y"], (f(t + eps) - 2 * f(t) + f(t - eps)) / eps**2, rtol=1e-4, atol=1e-5)


def test_the_other_leaves_keep_their_values_or_set_ones() -> None:
    doc = json_ok("plot", "-e", "a = 2; y = a*x^2", "--wrt", "x", "--range", "-1:1", "--points", "3",
                  "--set", "a=5")
    assert doc["y"] == [5, 0, 5] and doc["dy"] == [-10, 0, 10]


def test_nan_points_are_gaps_not_errors() -> None:
    doc = json_ok("plot", "-e", "y = log(x)", "--wrt", "x", "--range", "-1:1", "--points", "5", "--order", "2")
    y, dy, d2y = _numbers(doc["y"]), _numbers(doc["dy"]), _numbers(doc["d2y"])
    assert np.isnan(y[:2]).all() and y[2] == -np.inf  # log(−1), log(−0.5); log(0)
    assert np.isnan(dy[:3]).all() and np.isnan(d2y[:3]).all()  # no derivative where there is no value
    assert list(dy[3:]) == [2, 1] and list(d2y[3:]) == [-4, -1]


@needs_plotext
def test_a_text_plot_of_a_gap_draws_the_rest() -> None:
    result = run_cli("plot", "-e", "y = sqrt(x)", "--wrt", "x", "--range", "-1:1")
    assert result.exit_code == 0, result.stderr
    assert "∂y/∂x" in result.stdout


def test_the_contour_grid_is_grad_at_each_point() -> None:
    doc = json_ok("plot", NEURON, "--wrt", "w1,w2", "--range", "-2:2", "--range", "-1:3", "--points", "5")
    assert doc["wrt"] == ["w1", "w2"] and doc["x"] == [-2, -1, 0, 1, 2] and doc["y"] == [-1, 0, 1, 2, 3]
    for i, w2 in enumerate(doc["y"]):
        for j, w1 in enumerate(doc["x"]):
            point = json_ok("grad", NEURON, "--set", f"w1={w1}", "--set", f"w2={w2}", "--wrt", "w1,w2") \
                if (i + j) % 6 == 0 else None  # a sample of the grid: each is a command of its own
            # By hand: L = 10 − (w3·w1·a + w4·w2·a) = 10 − w1 − 8·w2.
            assert doc["z"][i][j] == 10 - w1 - 8 * w2
            assert (doc["grad"]["w1"][i][j], doc["grad"]["w2"][i][j]) == (-1, -8)
            if point is not None:
                assert point["value"] == doc["z"][i][j]
                assert point["grad"] == {"w1": doc["grad"]["w1"][i][j], "w2": doc["grad"]["w2"][i][j]}


def test_a_nonlinear_contour_is_its_gradient_by_hand() -> None:
    doc = json_ok("plot", "-e", "x = 0; y = 0; L = (1 - x)^2 + 100*(y - x^2)^2", "--wrt", "x,y", "--range", "-2:2",
                  "--points", "9")
    x, y = np.meshgrid(doc["x"], doc["y"])
    assert np.allclose(doc["z"], (1 - x)**2 + 100 * (y - x**2)**2)
    assert np.allclose(doc["grad"]["x"], -2 * (1 - x) - 400 * x * (y - x**2))
    assert np.allclose(doc["grad"]["y"], 200 * (y - x**2))


def test_without_a_range_a_leaf_goes_3_either_side_of_its_value() -> None:
    doc = json_ok("plot", NEURON, "--wrt", "w1", "--points", "3")
    assert doc["x"] == [0, 3, 6] and doc["y"] == [18, 15, 12]  # L = 10 − w1 − 8·w2, w2 = −1


@needs_matplotlib
def test_svg_and_png_files_of_the_expected_size(tmp_path: Path) -> None:
    svg, png = tmp_path / "y.svg", tmp_path / "c.png"
    result = run_cli("plot", "-e", X2SIN, "--wrt", "x", "--range", "-3:3", "--order", "2", "--tangent", "1.5",
                     "-o", str(svg))
    assert result.exit_code == 0 and result.stdout == "", result.stderr
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg") and root.get("width") == "460.8pt" and root.get("height") == "345.6pt"
    assert "tangent" in svg.read_text(encoding="utf-8")  # the legend's words are named in the SVG's ids
    assert 'id="QuadContourSet_' not in svg.read_text(encoding="utf-8")  # a curve: no contours
    result = run_cli("plot", NEURON, "--wrt", "w1,w2", "-o", str(png))
    assert result.exit_code == 0, result.stderr
    header = png.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", header[16:24]) == (640, 480)  # 6.4 × 4.8 in at 100 dpi


@needs_matplotlib
def test_json_and_a_file_together(tmp_path: Path) -> None:
    png = tmp_path / "y.png"
    doc = json_ok("plot", "-e", X2SIN, "--wrt", "x", "--range", "-1:1", "--points", "3", "-o", str(png))
    assert doc["y"] == pytest.approx([-np.sin(1), 0, np.sin(1)])
    assert png.read_bytes()[:4] == b"\x89PNG"


@needs_plotext
def test_a_terminal_plot_fits_80_columns_and_names_each_line() -> None:
    shown = run_in_terminal("plot", "-e", X2SIN, "--wrt", "x", "--range", "-3:3", "--order", "2", "--tangent", "1.5")
    assert shown.status == 0, shown.stderr
    lines = shown.screen.rstrip("\n").split("\n")
    assert 12 <= len(lines) <= 40
    assert max(len(line) for line in lines) <= 80
    for name in ("y", "∂y/∂x", "∂²y/∂x²", "tangent at x = 1.5"):
        assert name in shown.screen


@needs_plotext
def test_a_terminal_contour_names_its_levels() -> None:
    shown = run_in_terminal("plot", NEURON, "--wrt", "w1,w2", "--range", "-2:2")
    assert shown.status == 0, shown.stderr
    assert max(len(line) for line in shown.screen.split("\n")) <= 80
    assert "L = " in shown.screen and "w1" in shown.screen and "w2" in shown.screen
    assert "↓" in shown.screen  # ∇L = (−1, −8): mostly down the screen


@pytest.mark.parametrize(("args", "said"), [
    (["--range", "3:-3"], "LOW must be below HIGH"),
    (["--range", "a:b"], "is not LOW:HIGH"),
    (["--range", "1"], "is not LOW:HIGH"),
    (["--range", "0:inf"], "finite"),
    (["--range", "-1:1", "--range", "0:1", "--range", "0:2"], "3 --range options"),
    (["--points", "1"], "--points 1"),
    (["--tangent", "nan"], "finite"),
    (["-o", "y.txt"], ".svg, .png or .pdf"),
])
def test_bad_requests_exit_2(args: list[str], said: str) -> None:
    result = run_cli("plot", "-e", X2SIN, "--wrt", "x", *args)
    assert_bad_input(result)
    assert said in result.stderr


@pytest.mark.parametrize(("program", "wrt", "said"), [
    (NEURON, "w1,w2,w3", "plot draws one (a curve) or two"),
    (NEURON, "b", "computed by the program"),
    (NEURON, "nope", "no variable 'nope'"),
    ("x = [1, 2]; y = sum(x^2)", "x", "has shape (2,)"),
    ("x = 1; y = [x, x]", "x", "plot draws a scalar output"),
])
def test_bad_leaves_and_outputs_exit_2(program: str, wrt: str, said: str) -> None:
    source = [program] if program == NEURON else ["-e", program]
    result = run_cli("plot", *source, "--wrt", wrt)
    assert_bad_input(result)
    assert said in result.stderr


def test_order_and_tangent_need_one_leaf() -> None:
    result = run_cli("plot", NEURON, "--wrt", "w1,w2", "--order", "2")
    assert_bad_input(result)
    assert "one --wrt variable" in result.stderr


def test_the_program_s_own_mistake_is_reported_not_drawn_as_gaps() -> None:
    result = run_cli("plot", "-e", "y = x + z", "--wrt", "x", "--range", "0:1")
    assert_bad_input(result)
    assert "'z'" in result.stderr


def test_json_is_strict() -> None:
    result = run_cli("plot", "-e", "y = 1/x", "--wrt", "x", "--range", "-1:1", "--points", "3", "--json")
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout, parse_constant=lambda name: pytest.fail(f"bare {name} in JSON"))
    assert doc["y"] == [-1, "Infinity", 1]


def test_without_plotext_the_text_plot_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "plotext" else real(name, *args))
    result = run_cli("plot", "-e", X2SIN, "--wrt", "x")
    assert_bad_input(result)
    assert "pip install 'gradcalc[plot]'" in result.stderr and "--json" in result.stderr
    assert json_ok("plot", "-e", X2SIN, "--wrt", "x", "--points", "2")["x"] == [-3, 3]  # --json needs no plotext


def test_without_matplotlib_a_file_names_the_extra(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "matplotlib" else real(name, *args))
    result = run_cli("plot", "-e", X2SIN, "--wrt", "x", "-o", str(tmp_path / "y.svg"))
    assert_bad_input(result)
    assert "pip install 'gradcalc[plot]'" in result.stderr
    assert not (tmp_path / "y.svg").exists()


@needs_plotext
def test_an_ascii_terminal_gets_ascii_markers_and_arrows() -> None:
    shown = run_in_terminal("plot", NEURON, "--wrt", "w1", "--order", "2", env={"PYTHONIOENCODING": "ascii"})
    assert shown.status == 0, shown.stderr
    assert shown.screen.isascii() and "\\u" not in shown.screen  # no escapes in the drawing: they would skew it
    assert "* L   o dL/dw1   + d^2L/dw1^2" in shown.screen
    shown = run_in_terminal("plot", NEURON, "--wrt", "w1,w2", env={"PYTHONIOENCODING": "ascii"})
    assert shown.status == 0 and shown.screen.isascii() and "v" in shown.screen  # ∇L points down: v


def test_a_range_wider_than_the_largest_float_is_refused_not_sampled_as_nan() -> None:
    result = run_cli("plot", "-e", X2SIN, "--wrt", "x", "--range=-1e308:1e308", "--points", "5", "--json")
    assert_bad_input(result)
    assert "beyond the largest float" in result.stderr


@needs_plotext
def test_a_contour_over_a_subnormal_range_draws_its_arrows() -> None:
    result = run_cli("plot", "-e", "y = x*z", "--wrt", "x,z", "--range", "0:1e-310", "--points", "3")
    assert result.exit_code == 0, result.stderr
    assert "∇y" in result.stdout


@pytest.mark.parametrize(("program", "hint"), [("x = -1e17; y = x", "--range -1.1e+17:-9e+16"),
                                               ("x = 1e400; y = x", "--range")])
def test_a_leaf_too_large_for_its_value_plus_minus_3_asks_for_a_range(program: str, hint: str) -> None:
    result = run_cli("plot", "-e", program, "--wrt", "x", "--points", "3", "--json")
    assert_bad_input(result)
    assert "too large to plot its value ± 3" in result.stderr and hint in result.stderr

