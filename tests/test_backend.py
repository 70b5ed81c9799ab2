"""The backend contract: every command runs through gradcalc/engine/backend.py, so --device gpu gives CPU's answers.

Without a GPU the device is tests/fakedevice.py, a CuPy stand-in whose arrays refuse NumPy outside the
backend; with CuPy and a CUDA device the same tests also run on the real thing (marked gpu).
"""

from __future__ import annotations

import ast
import sys
import types
from collections.abc import Iterator
from pathlib import Path

import fakedevice
import numpy as np
import pytest
from helpers import EXIT_BAD_INPUT, MEAN, NEURON, NEURON_TENSOR, REPO, SAMPLES, run_cli, strict_json

from gradcalc.engine import backend as B

DOUBLING = str(SAMPLES / "doubling.eq")


def _real_gpu() -> bool:
    try:
        import cupy
    except ImportError:
        return False
    try:
        return bool(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # CuPy raises its own CUDA errors when there is no driver
        return False


@pytest.fixture(params=["fake", pytest.param("real", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not _real_gpu(), reason="needs CuPy and a CUDA device")])])
def gpu(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """--device gpu on the fake device (always) or on CuPy (when a GPU is present)."""
    if request.param == "fake":
        monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
        # The fake holds no CUDA context, so grading workers may fork (a spawned one could not import it).
        monkeypatch.setattr("gradcalc.tools.homework.grading.GPU_START_METHOD", "fork")
    yield request.param
    B.use("cpu")


COMMANDS = [
    ("eval", NEURON),
    ("eval", NEURON_TENSOR),
    ("grad", NEURON),
    ("grad", NEURON, "--wrt", "d,w1"),
    ("grad", NEURON_TENSOR, "--vector", "ones"),
    ("grad", MEAN),
    ("grad", DOUBLING, "--of", "y", "--vector", "[0.1, 1.0, 0.0001]"),
    ("grad", "-e", "W = randn(4, 3); x = rand(3); y = exp(W @ x) / sum(exp(W @ x)); L = -log(y[1]) + norm(W) / 10"),
    ("grad", "-e", "A = [[4, 1], [1, 3]]; b = [1, 2]; x = inv(A) @ b; L = sum(x^2) + det(A) + trace(A @ A)"),
    ("grad", "-e", "x = linspace(-1, 1, 5); y = where(x > 0, x^2, sin(x)); L = max(y) + mean(exp(y), axis=0)"),
    ("grad", "-e", "x = [1.5, 2.5]; i = 0; while i < 3 { x = x * tanh(x); i += 1 }; L = sum(x)"),
    ("grad", "-e", "f(t) = sigmoid(t) * t; x = [0.5, -1]; L = sum(f(x)) + sum(detach(x) * x)"),
    ("jacobian", DOUBLING, "--of", "y", "--wrt", "x"),
    ("jacobian", "-e", "W = randn(3, 4); b = zeros(3); x = ones(4); y = tanh(W @ x + b)", "--wrt", "x,W",
     "--mode", "fwd"),
    ("hessian", "-e", "x = [1, 2, 3]; L = sum(x^4) + sum(x[:-1] * x[1:])", "--wrt", "x"),
    ("jvp", DOUBLING, "--of", "y", "--wrt", "x", "--tangent", "[1, 0, 0]"),
    ("diff", NEURON, "--wrt", "a"),
    ("diff", "-e", "x = 0.3; y = x^2 * sin(x)", "--order", "2"),
    ("graph", NEURON),
    ("explain", NEURON, "--wrt", "a"),
    ("check", str(SAMPLES / "homework.eq")),
    ("check", NEURON, str(SAMPLES / "submissions")),
    ("gradcheck", NEURON),
    ("gradcheck", NEURON_TENSOR, "--wrt", "a"),
]


@pytest.mark.parametrize("args", COMMANDS, ids=[" ".join(c)[-60:] for c in COMMANDS])
def test_gpu_json_is_the_cpu_json(gpu: str, args: tuple[str, ...]) -> None:
    cpu = run_cli(*args, "--json")
    device = run_cli(*args, "--json", "--device", "gpu")
    assert "Traceback" not in device.output and "internal error" not in device.output, device.output[-3000:]
    assert device.exit_code == cpu.exit_code, device.output[-3000:]
    if gpu == "fake":  # the same NumPy arithmetic: the very same numbers
        assert device.stdout == cpu.stdout
    else:  # another library's kernels: equal to rounding
        np.testing.assert_allclose(_numbers(strict_json(device.stdout)), _numbers(strict_json(cpu.stdout)),
                                   rtol=1e-9, atol=1e-12)


def _numbers(doc: object) -> list[float]:
    """Every number in a JSON document, in order."""
    if isinstance(doc, dict):
        return [n for key in sorted(doc) for n in _numbers(doc[key])]
    if isinstance(doc, list):
        return [n for item in doc for n in _numbers(item)]
    return [float(doc)] if isinstance(doc, (int, float)) and not isinstance(doc, bool) else []


@pytest.mark.parametrize("args", [("grad", NEURON), ("check", str(SAMPLES / "homework.eq")), ("gradcheck", NEURON)])
def test_gpu_tables_are_the_cpu_tables(gpu: str, args: tuple[str, ...]) -> None:
    assert run_cli(*args, "--device", "gpu").stdout == run_cli(*args).stdout


def test_gpu_float32_is_the_cpu_float32(gpu: str) -> None:
    args = ("grad", NEURON_TENSOR, "--vector", "ones", "--dtype", "float32", "--json")
    cpu, device = strict_json(run_cli(*args).stdout), strict_json(run_cli(*args, "--device", "gpu").stdout)
    np.testing.assert_allclose(_numbers(device), _numbers(cpu), rtol=1e-6)
    float64 = strict_json(run_cli("grad", NEURON_TENSOR, "--vector", "ones", "--json").stdout)
    assert _numbers(cpu) != _numbers(float64)  # float32 really ran in float32


def test_gpu_random_numbers_are_the_cpu_random_numbers(gpu: str) -> None:
    """A seed gives the same randn/rand values on both devices: drawn on the host, then moved."""
    program = ("-e", "x = randn(5); y = rand(2, 3); z = randn(2)")
    for seed in ("0", "7"):
        cpu = strict_json(run_cli("eval", *program, "--seed", seed, "--json").stdout)["values"]
        device = strict_json(run_cli("eval", *program, "--seed", seed, "--device", "gpu", "--json").stdout)["values"]
        np.testing.assert_allclose(_numbers(device), _numbers(cpu), rtol=0, atol=0)


def test_library_primitives_follow_the_device(gpu: str) -> None:
    """sin, exp, arctan2, ... call the library in use directly: on the GPU, the device's own functions."""
    from gradcalc.engine import batching, ops

    def bound() -> list:  # forward, the first-order namespace (an alias too), the batched namespace
        return [ops.SIN.forward, ops.numeric.atan, ops.numeric.abs_, batching.namespace.exp]

    host = np.array([0.5, -2.0])
    B.use("gpu")
    for fn in bound():
        with pytest.raises(TypeError):  # CuPy's functions (and the fake's) refuse a host array
            fn(host)
    with pytest.raises(TypeError):
        ops.ATAN2.forward(host, host)
    B.use("cpu")
    for fn, expected in zip(bound(), [np.sin, np.arctan, np.abs, np.exp]):
        np.testing.assert_array_equal(fn(host), expected(host))


def test_gpu_values_stay_on_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """Values are device arrays through the run and backward; only results come back to the host."""
    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    import gradcalc

    try:
        run = gradcalc.load(NEURON_TENSOR).run(device="gpu")
        assert all(isinstance(node.value, fakedevice.FakeDeviceArray) for node in run.frame.values())
        result = run.grad("L", vector="ones")
        assert all(type(g) is np.ndarray for g in result.grads.values())
        kept = run.grad("L", vector="ones", host=False)  # the caller goes on computing on the device
        assert all(type(g) is fakedevice.FakeDeviceArray for g in kept.grads.values())
        for name, gradient in kept.grads.items():
            np.testing.assert_array_equal(B.to_host(gradient), result.grads[name])
    finally:
        B.use("cpu")


def test_gpu_forward_and_backward_copy_nothing_between_host_and_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """With inputs on the device, a run and its gradient queue kernels only: no copy, which would wait for them.

    Numbers written in the program (`axis=1`, `0.5`, `-1`) are read on the host, never fetched back.
    """
    cupy = fakedevice.make_module()
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    import gradcalc

    program = gradcalc.parse_program("""
        h = tanh(X @ W + b)
        z = 0.5 * reshape(h, 2, 3).T - 1
        L = mean(logsumexp(z, axis=1) - sum(z * Y, axis=-1)) + sum(ones(3, 2) * h)
    """)
    rng = np.random.default_rng(0)
    inputs = {"X": rng.standard_normal((3, 4)), "W": rng.standard_normal((4, 2)), "b": rng.standard_normal(2),
              "Y": np.eye(2)[[0, 1, 1]]}
    on_device = {name: cupy.asarray(value) for name, value in inputs.items()}
    try:
        fakedevice.transfers.update(to_host=0, to_device=0)
        kept = program.run(on_device, device="gpu").grad("L", ["W", "b"], retain_graph=False, host=False)
        assert fakedevice.transfers == {"to_host": 0, "to_device": 0}
        expected = program.run(inputs).grad("L", ["W", "b"])  # the CPU's numbers
        for name in ("W", "b"):
            np.testing.assert_allclose(kept.grads[name].get(), expected.grads[name], rtol=1e-12)
    finally:
        B.use("cpu")


# --- the fake device is strict: what it refuses, CuPy refuses ---------------------------------------------------

def test_fake_device_refuses_numpy_outside_the_backend() -> None:
    cupy = fakedevice.make_module()
    value = cupy.asarray(np.arange(3.0))
    with pytest.raises(TypeError):
        np.asarray(value)
    with pytest.raises(TypeError):
        np.sum(value)
    with pytest.raises(TypeError):
        value + np.ones(3)
    assert isinstance(value.sum(), fakedevice.FakeDeviceArray)  # reductions stay on the device, 0-d
    assert isinstance(value[0], fakedevice.FakeDeviceArray)
    np.testing.assert_array_equal(cupy.asnumpy(value * 2), [0.0, 2.0, 4.0])


def test_the_contract_test_catches_a_numpy_call_outside_the_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plant the bug the contract guards against (a rule calling NumPy directly): the fake GPU run fails."""
    from gradcalc.engine import ops

    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    primitive = ops.PRIMITIVES["tanh"]
    monkeypatch.setattr(primitive, "vjps", (lambda ns, g, ans, x: g * (1 - np.asarray(ans) ** 2),))
    try:
        assert run_cli("grad", "-e", "x = 0.5; y = tanh(x)").exit_code == 0  # NumPy arrays: the bug hides on the CPU
        result = run_cli("grad", "-e", "x = 0.5; y = tanh(x)", "--device", "gpu")
        assert result.exit_code != 0 and "internal error" in result.output
    finally:
        B.use("cpu")


def test_only_the_backend_imports_numpy_or_cupy() -> None:
    offenders = []
    for path in sorted((REPO / "gradcalc").rglob("*.py")):
        if path.relative_to(REPO / "gradcalc").as_posix() == "engine/backend.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in ("numpy", "cupy")]
    assert offenders == []


# --- without CuPy, or without a device ----------------------------------------------------------------------------

def _device_module(count: object) -> types.ModuleType:
    module = fakedevice.make_module()

    def device_count() -> int:
        if isinstance(count, Exception):
            raise count
        return count  # type: ignore[return-value]

    module.cuda.runtime.getDeviceCount = device_count  # type: ignore[attr-defined]
    return module


@pytest.mark.parametrize("json_mode", [False, True])
def test_without_cupy_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, json_mode: bool) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)  # `import cupy` raises ImportError
    result = run_cli("grad", NEURON, "--device", "gpu", *(("--json",) if json_mode else ()))
    assert result.exit_code == EXIT_BAD_INPUT
    assert "Traceback" not in result.output
    if json_mode:
        error = strict_json(result.stderr)["error"]
        assert "CuPy" in error["message"] and "gradcalc[gpu]" in error["hint"]
    else:
        assert "needs CuPy, which is not installed" in result.stderr
        assert "pip install 'gradcalc[gpu]'" in result.stderr


@pytest.mark.parametrize(("count", "expected"), [
    (0, "no CUDA device found"),
    (RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected"), "cannot reach a CUDA device"),
])
def test_without_a_device_gpu_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, count: object,
                                               expected: str) -> None:
    monkeypatch.setitem(sys.modules, "cupy", _device_module(count))
    for command in (("eval", NEURON), ("check", str(SAMPLES / "homework.eq")), ("gradcheck", NEURON)):
        result = run_cli(*command, "--device", "gpu")
        assert result.exit_code == EXIT_BAD_INPUT, result.output
        assert expected in result.stderr and "--device cpu" in result.stderr
        assert "Traceback" not in result.output


def test_doctor_reports_the_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    without = strict_json(run_cli("doctor", "--json").stdout)["devices"]
    assert [d["device"] for d in without] == ["cpu", "gpu"]
    assert without[0]["available"] is True and without[1]["available"] is False
    assert "gradcalc[gpu]" in without[1]["hint"]
    monkeypatch.setitem(sys.modules, "cupy", fakedevice.make_module())
    with_gpu = strict_json(run_cli("doctor", "--json").stdout)["devices"]
    assert with_gpu[1] == {"device": "gpu", "available": True, "library": "CuPy 0.0-fake",
                           "detail": "Fake GPU (16 GiB)"}
    text = run_cli("doctor").stdout
    assert "gpu  available: CuPy 0.0-fake, Fake GPU (16 GiB)" in text


def test_gpu_extra_installs_cupy_for_cuda_12() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert any(dep.startswith("cupy-cuda12x") for dep in project["optional-dependencies"]["gpu"])
    assert not any("cupy" in dep for dep in project["dependencies"])


def test_fakedevice_module_is_only_for_tests() -> None:
    assert not (Path(B.__file__).parent / "fakedevice.py").exists()


# --- memory reuse ---------------------------------------------------------------------------------------------

def test_freed_memory_is_kept_for_reuse_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    """On Linux with glibc, large temporaries are reused instead of being mapped afresh (see keep_freed_memory)."""
    import platform

    if not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc only")
    assert B.keep_freed_memory() is True
    monkeypatch.setenv("GRADCALC_KEEP_MEMORY", "0")
    assert B.keep_freed_memory() is False


def test_a_broken_cupy_install_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """CuPy present but failing to import (a CUDA library missing) is exit 2 saying so, not an internal error."""
    (tmp_path / "cupy.py").write_text("raise RuntimeError('libcublas.so.12: cannot open shared object file')\n",
                                      encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    result = run_cli("grad", NEURON, "--device", "gpu")
    assert result.exit_code == EXIT_BAD_INPUT, result.output
    assert "CuPy is installed but cannot be loaded" in result.stderr and "libcublas" in result.stderr
    doctor = strict_json(run_cli("doctor", "--json").stdout)["devices"][1]
    assert doctor["available"] is False and "cannot be loaded" in doctor["detail"]


# --- engine state travels with a run (#18, part 5) ---------------------------------------------------------------

STATE_PROGRAM = """
W = [[0.3, -1.2], [0.7, 0.4]]
x = [0.5, -1.5]
f(z) = tanh(z) * z
for i in range(2) { x = x + 0.1 * f(W @ x) }
no_grad { s = sum(x) }
h = exp(W @ x) / 3
L = sum(h * h) + log(1 + exp(x[0])) + s
"""


def _engine_state() -> tuple:
    from gradcalc.engine import graph

    return B.state(), B.xp, B.dtype, graph.state()


def _derivatives(run: object) -> list:
    """Every number grad, jacobian and hessian give for the program above, in one list."""
    grad = run.grad("L", ["W", "x"])  # type: ignore[attr-defined]
    jacobian = run.jacobian("h", ["W", "x"])  # type: ignore[attr-defined]
    hessian = run.hessian("L", ["x"])  # type: ignore[attr-defined]
    return [grad.value, grad.grads["W"], grad.grads["x"], *jacobian.blocks, hessian.blocks[0][0]]


def test_float32_and_float64_runs_interleave_in_one_process() -> None:
    """Each run computes in its own dtype, whichever ran last, and gives what a fresh run of its dtype gives."""
    import gradcalc

    program = gradcalc.parse_program(STATE_PROGRAM)
    runs = {"float64": program.run(), "float32": program.run(dtype="float32")}
    assert B.dtype_name() == "float32"  # Program.run selects its dtype for what follows, as before
    got: dict[str, list] = {"float64": [], "float32": []}
    for step in range(3):  # grad, jacobian and hessian calls alternating between the two runs
        for name in (("float64", "float32") if step % 2 == 0 else ("float32", "float64")):
            run = runs[name]
            got[name].append(run.grad("L", ["W", "x"]).grads["x"])
            got[name].append(run.jacobian("h", ["x"]).blocks[0])
            got[name].append(run.hessian("L", ["W"]).blocks[0][0])
            got[name].append(run.value("L"))
    interleaved = {name: _derivatives(run) for name, run in runs.items()}
    for name in ("float64", "float32"):
        fresh = program.run(dtype=name)
        fresh_values = _derivatives(fresh)
        alone = [fresh.grad("L", ["W", "x"]).grads["x"], fresh.jacobian("h", ["x"]).blocks[0],
                 fresh.hessian("L", ["W"]).blocks[0][0], fresh.value("L")]
        for value in [*interleaved[name], *got[name]]:
            assert np.asarray(value).dtype == np.dtype(name)
        for value, expected in zip(interleaved[name], fresh_values):
            np.testing.assert_array_equal(value, expected)
        for i, value in enumerate(got[name]):
            np.testing.assert_array_equal(value, alone[i % 4])
    for single, double in zip(interleaved["float32"], interleaved["float64"]):  # the same numbers, to float32
        np.testing.assert_allclose(single, double, rtol=2e-5, atol=1e-6)


def test_the_judge_and_gradcheck_take_their_tolerances_from_the_run_not_the_engine() -> None:
    import gradcalc
    from gradcalc.tools.gradcheck import gradcheck
    from gradcalc.tools.homework.check import Judge

    program = gradcalc.parse_program(STATE_PROGRAM)
    single = program.run(dtype="float32", keep_values=True)
    double = program.run(keep_values=True)  # the engine is now in float64
    assert Judge(single).tolerance.rtol > Judge(double).tolerance.rtol  # float32's looser default
    assert gradcheck(single, "L").eps > gradcheck(double, "L").eps  # 1e-3 and 1e-6, as PyTorch's


def test_no_run_method_leaves_the_engine_state_changed() -> None:
    """Every Run method enters its run's device, dtype and limit and puts back the caller's, error or not."""
    import gradcalc
    from gradcalc.errors import GradcalcError
    from gradcalc.errors import Source as ErrorSource
    from gradcalc.language.parser import parse_expression

    run = gradcalc.parse_program(STATE_PROGRAM).run(dtype="float32", max_elements=10**6, keep_values=True)
    B.use("cpu", "float64", 12_345)  # the caller's state: different in dtype and limit
    before = _engine_state()
    calls = {
        "value": lambda: run.value("L"),
        "values": run.values,
        "grad": lambda: run.grad("L"),
        "grad create_graph": lambda: run.grad("L", ["x"], create_graph=True),
        "jacobian rev": lambda: run.jacobian("h", ["x"], mode="rev"),
        "jacobian fwd": lambda: run.jacobian("h", ["x"], mode="fwd"),
        "hessian": lambda: run.hessian("L", ["x", "W"]),
        "jvp": lambda: run.jvp("h", "x", "ones"),
        "diff": lambda: run.diff("L", ["x", "W"]),
        "graph": lambda: run.graph("L"),
        "explain": lambda: run.explain("L", "W"),
        "evaluate": lambda: run.evaluate(parse_expression("sum(h) * 2"), ErrorSource("sum(h) * 2", "<claim>")),
        "rerun": lambda: run.rerun({"x": [1.0, 2.0]}),
    }
    for name, call in calls.items():
        result = call()
        assert _engine_state() == before, name
        if name in ("value", "grad"):
            value = result if name == "value" else result.value
            assert np.asarray(value).dtype == np.float32, name  # computed in the run's dtype, not the caller's
    for failing in (lambda: run.hessian("h"), lambda: run.grad("nothing"), lambda: run.jvp("h", "x", "[1, 2, 3]")):
        with pytest.raises(GradcalcError):
            failing()
        assert _engine_state() == before


def test_using_switches_for_a_block_and_back() -> None:
    with B.using("cpu", "float32", 100):
        assert B.state() == ("cpu", "float32", 100)
        with pytest.raises(Exception, match="more than the limit"):
            B.check_size((101,), "x")
        with B.using("cpu", "float64", 7):
            assert B.dtype is np.float64 and B.max_elements == 7
        assert B.state() == ("cpu", "float32", 100)
    assert B.state() == ("cpu", "float64", B.DEFAULT_MAX_ELEMENTS)
    with pytest.raises(ZeroDivisionError), B.using("cpu", "float32"):
        1 / 0  # noqa: B018
    assert B.state() == ("cpu", "float64", B.DEFAULT_MAX_ELEMENTS)


def test_cpu_and_gpu_runs_interleave(gpu: str) -> None:
    """A GPU run and a CPU run of one program, called in turn: each on its own device, the same numbers."""
    import gradcalc

    program = gradcalc.parse_program(STATE_PROGRAM)
    on_gpu = program.run(device="gpu")
    on_cpu = program.run()
    assert B.device == "cpu"
    for _ in range(2):
        kept = on_gpu.grad("L", ["W", "x"], host=False)
        assert B.device == "cpu" and B.xp is np  # the caller's device is back
        assert not isinstance(kept.grads["W"], np.ndarray)  # the gradient stayed on the device
        for got, expected in zip(_derivatives(on_gpu), _derivatives(on_cpu)):
            assert type(got) is np.ndarray or np.isscalar(got)
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-14)
        with B.using("gpu"):
            np.testing.assert_allclose(B.to_host(kept.grads["W"]), on_cpu.grad("L", ["W"]).grads["W"], rtol=1e-12)
            assert B.device == "gpu"
        assert B.device == "cpu"
