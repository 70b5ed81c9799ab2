"""`gradcalc minimize`: convergence on problems with known answers, Adam's steps by hand, the minibatches, the
JSON document, --save/--values, Ctrl-C, and bad input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, REPO, assert_bad_input, json_ok, run_cli, strict_json

try:
    import scipy  # noqa: F401
    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False

needs_scipy = pytest.mark.skipif(not HAVE_SCIPY, reason="--method lbfgs needs SciPy: pip install 'gradcalc[opt]'")

ROSENBROCK = "x = -1.2; y = 1; L = (1 - x)^2 + 100*(y - x^2)^2"


@pytest.fixture
def least_squares(tmp_path: Path) -> tuple[str, np.ndarray]:
    """A least-squares fit over an .npz, and its closed-form answer (the normal equations, solved here)."""
    rng = np.random.default_rng(7)
    X = rng.normal(size=(30, 3))
    y = X @ np.array([1.5, -2.0, 0.5]) + 0.1 * rng.normal(size=30)
    np.savez(tmp_path / "ls.npz", X=X, y=y)
    program = tmp_path / "ls.eq"
    program.write_text('const X = load("ls.npz", "X")\nconst y = load("ls.npz", "y")\nw = zeros(3)\n'
                       "L = mean((X @ w - y)^2)\n", encoding="utf-8")
    return str(program), np.linalg.solve(X.T @ X, X.T @ y)


@needs_scipy
def test_least_squares_with_lbfgs_reaches_the_closed_form_to_1e_8(least_squares: tuple[str, np.ndarray]) -> None:
    program, exact = least_squares
    doc = json_ok("minimize", program, "--method", "lbfgs", "--tol", "0")
    assert np.abs(np.array(doc["values"]["w"]) - exact).max() < 1e-8
    assert doc["stopped"] in ("converged", "line_search")


def test_least_squares_with_adam_reaches_the_closed_form_to_1e_4(least_squares: tuple[str, np.ndarray]) -> None:
    program, exact = least_squares
    doc = json_ok("minimize", program, "--method", "adam", "--lr", "0.05", "--steps", "1500")
    assert np.abs(np.array(doc["values"]["w"]) - exact).max() < 1e-4
    assert doc["stopped"] == "steps" and doc["steps"] == 1500


def test_lbfgs_without_scipy_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where SciPy is missing (here made to look missing) the error says what to install; exit 2."""
    import builtins

    real = builtins.__import__

    def no_scipy(name: str, *args: object, **kwargs: object) -> object:
        if name.startswith("scipy"):
            raise ImportError(name)
        return real(name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(builtins, "__import__", no_scipy)
    result = run_cli("minimize", "-e", ROSENBROCK, "--method", "lbfgs")
    assert_bad_input(result)
    assert "pip install 'gradcalc[opt]'" in result.stderr


@pytest.mark.parametrize("method", [pytest.param("lbfgs", marks=needs_scipy), "adam"])
def test_rosenbrock_reaches_its_minimum_at_1_1(method: str) -> None:
    extra = ["--lr", "0.02", "--steps", "5000"] if method == "adam" else []
    doc = json_ok("minimize", "-e", ROSENBROCK, "--method", method, *extra)
    assert abs(doc["values"]["x"] - 1) < 1e-4 and abs(doc["values"]["y"] - 1) < 1e-4, doc["values"]


def test_logistic_regression_agrees_with_newtons_method(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    Z = rng.normal(size=(40, 2))
    t = (Z @ np.array([1.0, -1.0]) + 0.5 * rng.normal(size=40) > 0).astype(float)
    np.savez(tmp_path / "lr.npz", Z=Z, t=t)
    (tmp_path / "lr.eq").write_text('const Z = load("lr.npz", "Z")\nconst t = load("lr.npz", "t")\nw = zeros(2)\n'
                                    "b = 0\np = sigmoid(Z @ w + b)\nL = -mean(t*log(p) + (1 - t)*log(1 - p))\n",
                                    encoding="utf-8")
    # Newton's method on the same mean log-loss: the gradient Aᵀ(p − t)/n and the Hessian Aᵀ·diag(p(1 − p))·A/n.
    A = np.hstack([Z, np.ones((40, 1))])
    theta = np.zeros(3)
    for _ in range(30):
        p = 1 / (1 + np.exp(-A @ theta))
        theta -= np.linalg.solve((A.T * (p * (1 - p))) @ A / 40, A.T @ (p - t) / 40)
    doc = json_ok("minimize", str(tmp_path / "lr.eq"), "--method", "momentum", "--lr", "0.5", "--steps", "800")
    assert np.abs(np.array([*doc["values"]["w"], doc["values"]["b"]]) - theta).max() < 1e-6
    assert doc["grad_norm"] < 1e-8


def test_adams_first_three_steps_are_pytorchs_formulas_by_hand() -> None:
    """torch.optim.Adam (lr 0.1, betas 0.9, 0.999, eps 1e-8) on L = w₀² + 3·w₁ from w = (1, 2): ∂L/∂w = (2w₀, 3)."""
    doc = json_ok("minimize", "-e", "w = [1.0, 2.0]; L = w[0]^2 + 3*w[1]", "--method", "adam", "--lr", "0.1",
                  "--steps", "3", "--every", "1")
    w, m, v = np.array([1.0, 2.0]), np.zeros(2), np.zeros(2)
    expected = []
    for t in (1, 2, 3):
        g = np.array([2 * w[0], 3.0])
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        w = w - (0.1 / (1 - 0.9 ** t)) * m / (np.sqrt(v) / np.sqrt(1 - 0.999 ** t) + 1e-8)
        expected.append(w.copy())
    # Step 1 by hand: m̂ = g, v̂ = g², so each entry moves by lr·g/|g| = 0.1 (less eps): w = (0.9, 1.9).
    assert np.allclose(expected[0], [0.9, 1.9], atol=1e-8)
    found = [entry["values"]["w"] for entry in doc["trace"][1:]]
    assert np.allclose(found, expected, rtol=0, atol=1e-14)


def test_gd_and_momentum_steps_by_hand() -> None:
    """L = (w − 1)²: gd from 3 with lr 0.1 moves to 3 − 0.1·4 = 2.6; momentum's second step is
    2.6 − 0.1·(0.9·4 + 3.2) (torch.optim.SGD's buffer: the first gradient, then μ·b + g)."""
    gd = json_ok("minimize", "-e", "w = 3; L = (w - 1)^2", "--lr", "0.1", "--steps", "1")
    assert gd["values"]["w"] == pytest.approx(2.6, abs=1e-12)
    assert gd["loss"] == pytest.approx(1.6**2, abs=1e-12) and gd["grad_norm"] == pytest.approx(3.2, abs=1e-12)
    momentum = json_ok("minimize", "-e", "w = 3; L = (w - 1)^2", "--method", "momentum", "--lr", "0.1",
                       "--steps", "2")
    assert momentum["values"]["w"] == pytest.approx(2.6 - 0.1 * (0.9 * 4 + 3.2), abs=1e-12)


def test_explain_shows_one_step_with_its_numbers() -> None:
    result = run_cli("minimize", "-e", "w = 3; L = (w - 1)^2", "--lr", "0.1", "--steps", "1", "--explain")
    assert result.exit_code == EXIT_OK, result.output
    assert "∂L/∂w = 4" in result.stdout
    assert "w = 3 − 0.1·4 = 2.6" in result.stdout
    doc = json_ok("minimize", "-e", "w = [3, 1]; L = sum((w - 1)^2)", "--method", "adam", "--explain")
    terms = doc["explain"][0]["terms"]
    assert terms["∂L/∂w"] == [4, 0] and terms["w (new)"][1] == 1 and terms["m"] == pytest.approx([0.4, 0])


def test_the_json_trace_shape() -> None:
    doc = json_ok("minimize", "-e", "w = 3; v = -2; L = (w - 1)^2 + v^2", "--steps", "5", "--every", "2")
    assert list(doc) == ["of", "method", "values", "loss", "grad_norm", "steps", "stopped", "trace"]
    assert doc["of"] == "L" and doc["method"] == "gd" and doc["steps"] == 5 and doc["stopped"] == "steps"
    assert [entry["step"] for entry in doc["trace"]] == [0, 1, 2, 3, 4, 5]
    assert [("values" in entry) for entry in doc["trace"]] == [True, False, True, False, True, False]
    assert doc["trace"][0] == {"step": 0, "loss": 8.0, "grad_norm": pytest.approx(np.hypot(4, 4)),
                               "values": {"w": 3.0, "v": -2.0}}
    assert doc["trace"][-1]["loss"] == doc["loss"]
    # gd with lr 0.01 shrinks w − 1 and v by 0.98 a step: after 5 steps, 2·0.98⁵ and −2·0.98⁵.
    assert doc["values"]["w"] == pytest.approx(1 + 2 * 0.98**5) and doc["values"]["v"] == pytest.approx(-2 * 0.98**5)


def test_tol_stops_on_the_gradient_norm_or_the_change_of_the_loss() -> None:
    # lr 0.5 on (w − 1)² lands on the minimum in one step: the gradient is 0, the loss fell by 4.
    doc = json_ok("minimize", "-e", "w = 3; L = (w - 1)^2", "--lr", "0.5", "--tol", "1e-3")
    assert doc["stopped"] == "grad_norm" and doc["steps"] == 1 and doc["values"]["w"] == 1
    # lr 0.25 halves w − 1 each step: L = 4·4⁻ᵏ falls by 12·4⁻ᵏ at step k, 1e-3 or less first at k = 7.
    doc = json_ok("minimize", "-e", "w = 3; L = (w - 1)^2", "--lr", "0.25", "--tol", "1e-3")
    assert doc["stopped"] == "loss_change" and doc["steps"] == 7
    assert doc["grad_norm"] == pytest.approx(4 * 2**-7)


def test_max_time_stops_and_says_so() -> None:
    doc = json_ok("minimize", "-e", "w = 3; L = (w - 1)^2", "--steps", "100000000", "--max-time", "0.3",
                  "--lr", "1e-9")
    assert doc["stopped"] == "max_time" and 0 < doc["steps"] < 100000000


def test_constants_and_data_are_never_parameters(tmp_path: Path) -> None:
    doc = json_ok("minimize", "-e", "const c = 2; a = 5; w = 3; L = (w*c - a)^2", "--data", "a", "--steps", "1")
    assert list(doc["values"]) == ["w"]
    result = run_cli("minimize", "-e", "const c = 2; w = 3; L = (w*c)^2", "--wrt", "c")
    assert_bad_input(result)
    assert "constant" in result.stderr


def test_minibatches_step_over_the_data_in_order(tmp_path: Path) -> None:
    """L = mean((w − X)²) over X = [1, 2, 3, 4] in batches of 2, gd with lr 0.25: each step moves w halfway to the
    batch's mean: 0 → 0.75 (mean 1.5) → 2.125 (mean 3.5), then the second epoch 2.125 → 1.8125 → 2.65625."""
    doc = json_ok("minimize", "-e", "X = [1, 2, 3, 4]; w = 0; L = mean((w - X)^2)", "--data", "X", "--batch-size",
                  "2", "--epochs", "2", "--lr", "0.25", "--every", "1")
    assert doc["stopped"] == "epochs" and doc["steps"] == 4
    assert [entry["values"]["w"] for entry in doc["trace"]] == pytest.approx([0, 0.75, 2.125, 1.8125, 2.65625])
    # The loss returned is the whole data's at the final w.
    assert doc["loss"] == pytest.approx(np.mean((2.65625 - np.array([1, 2, 3, 4])) ** 2))


def test_shuffled_batches_are_seeded(tmp_path: Path) -> None:
    args = ["minimize", "-e", "X = [1, 2, 3, 4, 5, 6]; w = 0; L = mean((w - X)^2)", "--data", "X",
            "--batch-size", "2", "--epochs", "3", "--shuffle", "--lr", "0.1"]
    first, again, other = json_ok(*args), json_ok(*args), json_ok(*args, "--seed", "5")
    assert first["values"] == again["values"]
    assert first["values"] != other["values"]
    plain = json_ok(*args[:-3], "--lr", "0.1")
    assert plain["values"] != first["values"]


@pytest.mark.parametrize("suffix", [".json", ".npz"])
def test_save_then_values_reads_them_back(tmp_path: Path, suffix: str) -> None:
    program = tmp_path / "fit.eq"
    program.write_text("w = [3.0, -1.0]; b = 0.5\nL = sum((w - [1, 2])^2) + (b + 1)^2\n", encoding="utf-8")
    saved = tmp_path / f"values{suffix}"
    doc = json_ok("minimize", str(program), "--steps", "7", "--lr", "0.1", "--save", str(saved))
    assert saved.exists()
    evaluated = json_ok("eval", str(program), "--values", str(saved))["values"]
    assert evaluated["w"] == doc["values"]["w"] and evaluated["b"] == doc["values"]["b"]
    # Starting again from them goes on where it stopped: 7 more steps land where 14 from the start do.
    on = json_ok("minimize", str(program), "--steps", "7", "--lr", "0.1", "--values", str(saved))
    whole = json_ok("minimize", str(program), "--steps", "14", "--lr", "0.1")
    assert on["values"]["w"] == pytest.approx(whole["values"]["w"], abs=1e-14)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc to know the steps have begun")
def test_ctrl_c_prints_and_saves_the_best_values(tmp_path: Path) -> None:
    saved = tmp_path / "best.json"
    process = subprocess.Popen(
        [sys.executable, "-m", "gradcalc", "minimize", "-e", "w = 3; L = (w - 1)^2", "--steps", "100000000",
         "--lr", "1e-7", "--json", "--save", str(saved), "--max-time", "60"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # noqa: PLW1509
    try:
        deadline = time.monotonic() + 60
        while _cpu_seconds(process.pid) < 1.5 and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)  # start-up is ~0.5 s of CPU: past 1.5 s it is stepping
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == EXIT_OK, err
    assert "Traceback" not in err
    doc = strict_json(out)
    assert doc["stopped"] == "interrupted" and doc["steps"] > 0
    # Each step lowers L, so the best values are the last: 1 < w < 3, and the file holds the same.
    assert 1 < doc["values"]["w"] < 3
    assert json.loads(saved.read_text(encoding="utf-8")) == {"w": doc["values"]["w"]}


def test_the_table_fits_80_columns() -> None:
    result = run_cli("minimize", "-e", "W = ones(4, 6); L = sum((W - 2)^2)", "--steps", "3",
                     env={"COLUMNS": "80"})
    assert result.exit_code == EXIT_OK, result.output
    assert all(len(line) <= 80 for line in result.stdout.splitlines())
    assert "L = " in result.stdout and "‖∇L‖" in result.stdout and "--steps reached" in result.stdout


@pytest.mark.parametrize(("args", "said"), [
    (["--method", "sgd2"], "--method"),
    (["--lr", "-1"], "--lr must be a finite number above 0"),
    (["--bounds", "w=1"], "is not NAME=LOW:HIGH"),
    (["--bounds", "w=2:1"], "lower bound"),
    (["--bounds", "q=0:1"], "'q' is not a parameter"),
    (["--betas", "0.9"], "--betas"),
    (["--steps", "0"], "--steps must be 1 or more"),
    (["--batch-size", "2"], "need data to batch"),
    (["--explain", "--steps", "3"], "--explain shows one step"),
    (["--explain", "--method", "lbfgs"], "--explain shows a step of gd, momentum or adam"),
    (["--plot", "loss.txt"], ".svg, .png or .pdf"),
    (["--method", "lbfgs", "--lr", "0.1"], "--lr does not apply to --method lbfgs"),
    (["--tol", "-1"], "--tol must be a finite number, 0 or more"),
    (["--max-time", "0"], "--max-time must be a number of seconds above 0"),
    (["--save", "-"], "--save needs a file name"),
    (["--data", "nope"], "'nope' is not a leaf or a constant"),
])
def test_bad_options_exit_2_with_a_clear_message(args: list[str], said: str) -> None:
    result = run_cli("minimize", "-e", "w = 3; L = (w - 1)^2", *args)
    assert_bad_input(result)
    assert said in result.stderr, result.stderr


def test_a_non_scalar_output_is_refused() -> None:
    result = run_cli("minimize", "-e", "w = [1, 2]; y = w^2", "--steps", "2")
    assert_bad_input(result)
    assert "minimize needs a scalar output" in result.stderr and "sum(" in result.stderr
    result = run_cli("minimize", "-e", "w = [1, 2]; y = w^2", "--json")
    assert result.exit_code == EXIT_BAD_INPUT and "scalar" in strict_json(result.stderr)["error"]["message"]


try:
    import matplotlib  # noqa: F401
    HAVE_MATPLOTLIB = True
except ImportError:
    HAVE_MATPLOTLIB = False

needs_matplotlib = pytest.mark.skipif(not HAVE_MATPLOTLIB, reason="--plot needs Matplotlib: pip install "
                                      "'gradcalc[plot]'")


@needs_matplotlib
def test_plot_draws_the_loss_curve_and_the_path(tmp_path: Path) -> None:
    import struct
    import xml.etree.ElementTree as ET

    svg, png = tmp_path / "loss.svg", tmp_path / "path.png"
    json_ok("minimize", "-e", ROSENBROCK, "--method", "adam", "--lr", "0.05", "--steps", "50", "--plot", str(svg))
    root = ET.parse(svg).getroot()
    assert root.tag.endswith("svg")
    text = svg.read_text(encoding="utf-8")
    assert "step" in text  # the axis labels are drawn as paths, named in comments and ids
    # The path's panel: the loss's contours under it, and its gradient's direction as arrows.
    assert 'id="QuadContourSet_' in text and 'id="Quiver_' in text and "∇L (direction)" in text
    json_ok("minimize", "-e", ROSENBROCK, "--steps", "20", "--lr", "0.001", "--plot", str(png))
    header = png.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", header[16:24])
    assert (width, height) == (1100, 480)  # two panels (x and y are two scalars) at 100 dpi


def test_plot_refuses_an_unknown_format_or_a_missing_matplotlib(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    result = run_cli("minimize", "-e", "w = 3; L = (w - 1)^2", "--plot", str(tmp_path / "loss.txt"))
    assert_bad_input(result)
    assert ".svg, .png or .pdf" in result.stderr
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "matplotlib" else real(name, *args))
    result = run_cli("minimize", "-e", "w = 3; L = (w - 1)^2", "--plot", str(tmp_path / "loss.svg"))
    assert_bad_input(result)
    assert "pip install 'gradcalc[plot]'" in result.stderr
    assert not (tmp_path / "loss.svg").exists()
