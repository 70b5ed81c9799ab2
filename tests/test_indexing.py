"""Indexing as NumPy and PyTorch write it, and writing into a tensor (y[0] = 5), with their derivatives.

x[[0, 2]], eye(4)[labels], x[x > 0], x[..., 0], x[None]: each a gather whose gradient scatters back (adding where
an entry is picked twice, as PyTorch's IndexBackward0). y[k] = v is PyTorch's in-place write on the graph: the
gradient reaches v, and the old y only where it was not overwritten. Expected values are worked by hand or by
central differences; the optional cross-check against PyTorch runs where torch is installed.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from helpers import EXIT_OK, central_difference, located_error, run_cli

import gradcalc


def run(text: str, values: dict[str, Any] | None = None) -> Any:
    return gradcalc.parse_program(text).run(dict(values or {}))


def write(tmp_path: Any, text: str) -> str:
    path = tmp_path / "prog.eq"
    path.write_text(text, encoding="utf-8")
    return str(path)


def made_by(text: str, name: str) -> str:
    """The grad_fn of a variable's node (what eval's `made by` column shows)."""
    return str(run(text).node(name).grad_fn)


def difference(text: str, of: str, name: str, point: np.ndarray) -> np.ndarray:
    def value(at: np.ndarray) -> float:
        return float(np.sum(run(text, {name: at}).value(of)))

    return central_difference(value, point, relative=False)


# --- reading --------------------------------------------------------------------------------------------

def test_an_integer_array_picks_entries_and_adds_gradients_back() -> None:
    result = run("x = [1., 2, 3, 4]\ny = sum(x[[0, 2, 2]]^2)").grad(of="y", wrt=["x"])
    assert float(result.value) == 1 + 9 + 9
    assert result.grads["x"].tolist() == [2.0, 0.0, 12.0, 0.0]  # 2x once at 0, twice at 2


def test_one_hot_targets_from_labels() -> None:
    values = run("const labels = [2, 0, 1]\nY = eye(3)[labels]").values()
    assert values["Y"].tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]


def test_a_two_dimensional_index_array_gives_its_shape() -> None:
    values = run("x = [10., 20, 30]\ny = x[[[0, 1], [2, 2]]]").values()
    assert values["y"].tolist() == [[10, 20], [30, 30]]


def test_a_mask_picks_where_it_is_true() -> None:
    text = "x = [1., -2, 3, -4]\nm = x > 0\np = x[m]\ny = sum(p^2) + sum(x[x < 0])"
    result = run(text).grad(of="y", wrt=["x"])
    assert run(text).values()["p"].tolist() == [1.0, 3.0]  # the shape depends on the values
    assert result.grads["x"].tolist() == [2.0, 1.0, 6.0, 1.0]  # 2x where positive, 1 where negative


def test_a_mask_of_numbers_only_is_still_a_mask() -> None:
    """m = [1, 0, 1] > 0 reads no variable (a leaf), and is a mask still: x[m] is x[[0, 2]], not x[[1, 0, 1]]."""
    result = run("x = [1., -2, 3]\nm = [1., 0, 1] > 0\ny = sum(x[m])").grad(of="y", wrt=["x"])
    assert float(result.value) == 4.0 and result.grads["x"].tolist() == [1.0, 0.0, 1.0]


def test_a_list_of_true_and_false_is_a_mask() -> None:
    """x[[True, False, True]] is a mask, as PyTorch and NumPy read it: x[[0, 2]], not the positions 1, 0, 1."""
    result = run("x = [1., -2, 3]\ny = sum(x[[True, False, True]]^2)").grad(of="y", wrt=["x"])
    assert float(result.value) == 10.0 and result.grads["x"].tolist() == [2.0, 0.0, 6.0]  # 1 + 9; 2x where picked
    named = run("x = [1., -2, 3]\nm = [False, True, True]\ny = sum(x[m])").grad(of="y", wrt=["x"])
    assert float(named.value) == 1.0 and named.grads["x"].tolist() == [0.0, 1.0, 1.0]  # -2 + 3
    rows = run("m = [[1., 2], [3, 4]]\ny = m[[[True, False], [False, True]]]").values()
    assert rows["y"].tolist() == [1.0, 4.0]
    local = run("f(x) {\n  m = [True, False, True]\n  return sum(x[m])\n}\ny = f([1., -2, 3])").values()
    assert float(local["y"]) == 4.0  # 1 + 3
    written = run("x = [1., 2, 3]\ny = x * 1\ny[[False, True, True]] = 0").values()
    assert written["y"].tolist() == [1.0, 0.0, 0.0]


def test_a_mask_that_picks_nothing_is_empty_with_no_gradient() -> None:
    result = run("x = [1., 2]\ny = sum(x[x > 5]) + 0*sum(x)").grad(of="y", wrt=["x"])
    assert float(result.value) == 0.0 and result.grads["x"].tolist() == [0.0, 0.0]


def test_a_matrix_mask_flattens() -> None:
    values = run("m = [[1., -1], [-2, 3]]\ny = m[m > 0]").values()
    assert values["y"].tolist() == [1.0, 3.0]


def test_a_mask_of_the_first_dimensions_picks_rows() -> None:
    values = run("m = [[1., 2], [3, 4], [5, 6]]\ny = m[[1, 0, 1] > 0]").values()
    assert values["y"].tolist() == [[1, 2], [5, 6]]


def test_ellipsis_and_new_axes() -> None:
    text = "t = reshape([1., 2, 3, 4, 5, 6, 7, 8], [2, 2, 2])\na = t[..., 0]\nb = t[0, ...]\nc = t[None]\n" \
           "v = [1., 2]\nd = v[:, None] * v[None, :]\ne = v[newaxis]"
    values = run(text).values()
    assert values["a"].tolist() == [[1, 3], [5, 7]]
    assert values["b"].tolist() == [[1, 2], [3, 4]]
    assert values["c"].shape == (1, 2, 2, 2)
    assert values["d"].tolist() == [[1, 2], [2, 4]]  # an outer product by broadcasting
    assert values["e"].shape == (1, 2)


def test_gradients_of_every_form_match_finite_differences() -> None:
    text = ("x = [0.5, -1.2, 2.0, 0.3]\nW = reshape(x, [2, 2])\n"
            "y = sum(x[[3, 0, 3]] * [1., 2, 3]) + sum(sin(x[x > 0])) + sum(W[..., 1]^2) + sum(W[None, 0]^3)")
    point = np.array([0.5, -1.2, 2.0, 0.3])
    got = run(text).grad(of="y", wrt=["x"]).grads["x"]
    np.testing.assert_allclose(got, difference(text, "y", "x", point), rtol=1e-6, atol=1e-8)


def test_second_derivatives_through_an_array_index() -> None:
    result = run("x = [1., 2, 3]\ny = sum(x[[0, 0, 2]]^3)").hessian(of="y", wrt=["x"])
    block = np.asarray(result.blocks[0][0])
    # y = 2x0³ + x2³: the Hessian is diag(12 x0, 0, 6 x2)
    np.testing.assert_allclose(block, np.diag([12.0, 0.0, 18.0]))


@pytest.mark.parametrize(("text", "name", "grad_fn"), [
    ("x = [1., 2, 3]\ny = x[[0, 2]] * x[0]", "y", "MulBackward0"),
    ("x = [1., 2, 3]\ny = x[[0, 2]]", "y", "IndexBackward0"),
    ("x = [1., 2, 3]\ny = x[x > 1]", "y", "IndexBackward0"),
    ("m = [[1., 2], [3, 4]]\ny = m[..., 0]", "y", "SelectBackward0"),
    ("x = [1., 2, 3]\ny = x[None]", "y", "UnsqueezeBackward0"),
    ("x = [1., 2, 3]\ny = x[1:]", "y", "SliceBackward0"),
    ("m = [[1., 2], [3, 4]]\ny, z = m", "y", "UnbindBackward0"),  # torch iterates a tensor by unbind()
    ("x = [1., 2, 3]\ny = x * 2\ny[0] = 5", "y", "CopySlices"),
    ("x = [1., 2, 3]\ny = x * 2\ny[[0, 2]] = 5", "y", "IndexPutBackward0"),
])
def test_grad_fn_names_are_pytorchs(text: str, name: str, grad_fn: str) -> None:
    assert made_by(text, name) == grad_fn


INDEXED = "x = [1., -2, 3]\nw = 2\ny = x * w\ny[[0, 2]] = w^2\nz = sum(y[y > 0]) + sum(x[[1, 1]]) + x[None][0, 0]\n"


@pytest.mark.parametrize("command", [["eval"], ["grad"], ["diff", "--wrt", "w"], ["graph"], ["explain", "--wrt", "x"],
                                     ["jacobian", "--of", "y"], ["hessian", "--wrt", "w"], ["diff", "--latex"]])
def test_every_command_runs_indexing_and_writes(tmp_path: Any, command: list[str]) -> None:
    out = run_cli(command[0], write(tmp_path, INDEXED), *command[1:])
    assert out.exit_code == EXIT_OK, out.stderr


def test_explain_shows_the_write_as_index_put(tmp_path: Any) -> None:
    out = run_cli("explain", write(tmp_path, INDEXED), "--wrt", "x")
    assert "index_put(g, [[0, 2]], 0)" in out.stdout  # the overwritten entries get no gradient
    # z = 2w² + x1·2 + x0: ∂z/∂x = [1, 2, 0] (y[1] = -2w < 0 is masked out; y[0], y[2] overwritten)
    assert "[1, 2, 0]" in out.stdout


def test_diff_writes_the_scattered_gradient_as_a_literal(tmp_path: Any) -> None:
    out = run_cli("diff", write(tmp_path, "x = [1., 2, 3]\ny = sum(x[[0, 2]]) * 2"), "--wrt", "x")
    assert out.exit_code == EXIT_OK, out.stderr
    assert "[2, 0, 2]" in out.stdout


def test_batch_mode_runs_array_indices_and_masks(tmp_path: Any) -> None:
    path = write(tmp_path, "x = [1., -2, 3]\nw = 2\ny = x * w\ny[[0, 2]] = w^2\nz = sum(y[y > 0]) + sum(x[[1, 1]])\n")
    out = run_cli("grad", path, "--of", "z", "--at", "-", "--json", input='{"w": 1}\n{"w": 3}\n')
    assert out.exit_code == EXIT_OK, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.strip()]
    text = "\n".join(rows)
    # w = 1: y = [1, -2, 1], z = 2 - 4; w = 3: y = [9, -6, 9], z = 18 - 4. dz/dw = 4w (y[0], y[2] = w²)
    assert '"value": -2.0' in text and '"value": 14.0' in text
    assert '"w": 4.0' in text and '"w": 12.0' in text


# --- writing: y[k] = v ------------------------------------------------------------------------------------

def test_the_gradient_reaches_what_was_written_not_what_was_overwritten() -> None:
    text = "x = [1., 2, 3]\nw = 5\ny = x * 2\ny[1] = w^2\nL = sum(y * [1., 10, 100])"
    result = run(text).grad(of="L", wrt=["x", "w"])
    assert run(text).values()["y"].tolist() == [2.0, 25.0, 6.0]
    assert result.grads["x"].tolist() == [2.0, 0.0, 200.0]  # x[1]'s old value was overwritten
    assert float(result.grads["w"]) == 10 * 2 * 5  # 10 · d(w²)/dw


def test_augmented_writes_read_then_write() -> None:
    text = "x = [1., 2, 3]\ny = x^2\ny[0] += x[2]\ny[1:] *= 3\nL = sum(y)"
    # y = [x0² + x2, 3x1², 3x2²]; L' = [2x0, 6x1, 1 + 6x2]
    result = run(text).grad(of="L", wrt=["x"])
    assert result.grads["x"].tolist() == [2.0, 12.0, 19.0]


def test_masked_writes_are_relu() -> None:
    text = "x = [1., -2, 3]\ny = x * 1\ny[y < 0] = 0\nL = sum(y * [1., 2, 3])"
    result = run(text).grad(of="L", wrt=["x"])
    assert result.grads["x"].tolist() == [1.0, 0.0, 3.0]


def test_writes_into_a_function_local_and_a_batch_of_rows() -> None:
    text = "f(v) {\n  out = v * 1\n  out[0] = 0\n  return out\n}\nm = [[1., 2], [3, 4]]\nm[[0, 1], 1] = [7., 8]\n" \
           "y = f([5., 6])"
    values = run(text).values()
    assert values["m"].tolist() == [[1, 7], [3, 8]] and values["y"].tolist() == [0, 6]


def test_filling_a_tensor_in_a_loop() -> None:
    """y = zeros(3); for i { y[i] = i*x }: the common way to build a tensor entry by entry."""
    text = "x = 2\ny = zeros(3)\nfor i in range(3) { y[i] = i * x }\nL = sum(y * [1, 10, 100])"
    result = run(text).grad(of="L", wrt=["x", "y"])
    assert float(result.value) == 0 * 1 + 2 * 10 + 4 * 100
    assert float(result.grads["x"]) == 0 + 10 + 200
    assert result.grads["y"].tolist() == [0.0, 0.0, 0.0]  # every entry of the zeros was overwritten


def test_writes_match_finite_differences() -> None:
    text = "x = [0.5, -1.0, 2.0]\ny = exp(x)\ny[[2, 0]] = x[0] * x[1:]\ny[1] -= x[2]^2\nL = sum(y^2)"
    got = run(text).grad(of="L", wrt=["x"]).grads["x"]
    np.testing.assert_allclose(got, difference(text, "L", "x", np.array([0.5, -1.0, 2.0])), rtol=1e-6)


def test_writes_have_second_derivatives() -> None:
    result = run("x = [1., 2]\ny = x * 1\ny[0] = x[1]^3\nL = sum(y)").hessian(of="L", wrt=["x"])
    block = np.asarray(result.blocks[0][0])
    np.testing.assert_allclose(block, [[0.0, 0.0], [0.0, 12.0]])  # L = x1³ + x1


# --- misuse -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "line", "column", "words"), [
    ("x = [1., 2]\ny = x[[0, 5]]\n", 2, 7, "index 5 is out of range"),
    ("x = [1., 2]\ny = x[[0.5]]\n", 2, 7, "not a whole number"),
    ("x = [1., 2]\ny = x[[1, 0, 1] > 0]\n", 2, 17, "a mask of shape (3,)"),
    ("x = [1., 2]\ny = x[[True, False, True]]\n", 2, 7, "a mask of shape (3,)"),
    ("x = [1., 2]\ny = x[..., ...]\n", 2, 6, "only one '...'"),
    ("x = [1., 2]\ny = x[0, 1]\n", 2, 6, "too many indices"),
    ("x = [1., 2]\nx[2] = 1\n", 2, 3, "index 2 is out of range"),
    ("x = [1., 2]\nx[0] = [1., 2]\n", 2, 2, "cannot write a value of shape (2,)"),
    ("q[0] = 1\n", 1, 1, "'q' is written into but never given a value"),
    ("y = ...\n", 1, 5, ""),
])
def test_misuse_is_a_located_error(tmp_path: Any, text: str, line: int, column: int, words: str) -> None:
    path = write(tmp_path, text)
    error = located_error(run_cli("eval", path), file=path, line=line, column=column)
    assert words in error.message, error.message
    assert error.hint


def test_an_index_picking_more_than_max_elements_is_refused_where_written(tmp_path: Any) -> None:
    # 2000 rows of 1000 entries each: 2,000,000 entries, past a limit of 1,000,000, refused before they are listed
    path = write(tmp_path, "x = zeros(3, 1000)\ni = zeros(2000)\ny = x[i]\n")
    error = located_error(run_cli("eval", path, "--max-elements", "1000000"), file=path, line=3, column=7)
    assert "2,000,000 elements" in error.message and "1,000,000" in error.message, error.message
    assert "--max-elements" in error.hint


def test_index_checks_name_the_first_bad_entry() -> None:
    text = "x = [1., 2, 3]\ny = x[[[0, 1], [2, {}]]]\n"
    assert run(text.format("-3")).values()["y"].tolist() == [[1.0, 2.0], [3.0, 1.0]]  # -3 is the first entry
    for bad, words in (("3", "index 3 is out of range for dimension 0 of size 3"), ("-4", "index -4 is out of range"),
                       ("1.5", "holds 1.5, not a whole number"), ("nan", "holds nan, not a whole number")):
        with pytest.raises(gradcalc.GradcalcError, match=words):
            run(text.format(bad))


# --- against PyTorch (optional) ---------------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_indexing_and_writes_agree_with_pytorch(seed: int) -> None:
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(2, 5)), int(rng.integers(2, 5))
    x = rng.standard_normal((n, m))
    rows = rng.integers(0, n, 3).tolist()
    text = (f"x = {x.tolist()}\ny = x * 2\ny[{rows[0]}] = x[{rows[1]}]^2\n"
            f"L = sum(y[y > 0]^2) + sum(x[{rows}]) + sum(x[..., 0]) + sum(x[None] * 3)")
    result = run(text).grad(of="L", wrt=["x"])
    t = torch.tensor(x, requires_grad=True)
    y = t * 2
    y[rows[0]] = t[rows[1]] ** 2
    loss = (y[y > 0] ** 2).sum() + t[rows].sum() + t[..., 0].sum() + (t[None] * 3).sum()
    loss.backward()
    np.testing.assert_allclose(float(result.value), loss.item(), rtol=1e-10)
    np.testing.assert_allclose(result.grads["x"], t.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_more_new_axes_than_numpy_allows_says_so_not_out_of_range() -> None:
    """x[None, …] 64 times: NumPy's limit is 64 dimensions; the hint is about the None, not about 0..size-1."""
    result = run_cli("eval", "-e", "x = [1., 2, 3]; y = x[" + ", ".join(["None"] * 64) + "]")
    error = located_error(result, line=1, column=22)
    assert "more dimensions than NumPy allows" in error.message and "None" in error.hint, result.stderr
