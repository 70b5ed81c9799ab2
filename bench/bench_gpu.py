"""GPU benchmark (issue #8): gradcalc on CuPy against gradcalc on NumPy and PyTorch (CPU and CUDA).

    python bench/bench_gpu.py             # every workload on every device found
    python bench/bench_gpu.py --quick     # small sizes, for a smoke run on a CPU-only machine
    python bench/bench_gpu.py --profile   # where gradcalc's on-device time goes (cProfile, 10^7 elementwise)

Workloads, value and gradient of each:
  elementwise 10^7 and 10^8: L = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)
  MLP: batch 4096, 1024-1024-10, tanh, softmax cross-entropy; gradient with respect to every weight

gradcalc on the GPU is timed twice: from the host (NumPy arrays in, NumPy gradients out, what the
CLI and the API's default do: the copies over PCIe are part of the time) and on the device (CuPy
arrays in, gradients left there with host=False, as the PyTorch CUDA side keeps its tensors).

Each (workload, side) runs in this process after one warm-up call (CUDA kernels compile on first
use); times are medians of repeats, with the device synchronised before the clock stops. The
report is Markdown on standard output, with the device's name and the date, for bench/RESULTS.md.
A side that is missing (no CuPy, no CUDA, no PyTorch) reads n/a.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import time
from collections.abc import Callable
from typing import Any

import benchkit

ELEMENTWISE = "L = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)"
MLP = """
h = tanh(X @ W1 + b1)
z = h @ W2 + b2
L = mean(logsumexp(z, axis=1) - sum(z * Y, axis=1))
"""


def _timed(fn: Callable[[], Any], sync: Callable[[], None], repeats: int) -> float:
    fn()
    sync()  # warm-up: kernels compiled, memory pools filled
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _inputs(workload: str, size: int) -> dict[str, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    if workload == "elementwise":
        return {"x": rng.standard_normal(size)}
    batch, width, classes = size, 1024, 10
    labels = rng.integers(0, classes, batch)
    return {"X": rng.standard_normal((batch, width)), "Y": np.eye(classes)[labels],
            "W1": rng.standard_normal((width, width)) / 32, "b1": np.zeros(width),
            "W2": rng.standard_normal((width, classes)) / 32, "b2": np.zeros(classes)}


def gradcalc_side(workload: str, size: int, device: str, repeats: int, resident: bool = False,
                  profile: bool = False) -> float | None:
    import gradcalc
    from gradcalc.engine import backend as B

    try:
        B.use(device)
    except gradcalc.GradcalcError:
        return None
    text = ELEMENTWISE if workload == "elementwise" else MLP
    values = _inputs(workload, size)
    program = gradcalc.parse_program(("x = 0\n" if workload == "elementwise" else "") + text)
    wrt = ["x"] if workload == "elementwise" else ["W1", "b1", "W2", "b2"]
    free = {name: B.xp.asarray(value) if resident else value for name, value in values.items()}

    def once() -> None:
        run = program.run(free, device=device, max_elements=10**9)
        run.grad("L", wrt, retain_graph=False, host=not resident)

    def sync() -> None:
        if device == "gpu":
            B.xp.cuda.Stream.null.synchronize()

    try:
        if profile:
            import cProfile
            import pstats

            once()
            sync()
            with cProfile.Profile() as profiler:
                for _ in range(repeats):
                    once()
                    sync()
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
            return None
        return _timed(once, sync, repeats)
    finally:
        B.use("cpu")


def torch_side(workload: str, size: int, device: str, repeats: int) -> float | None:
    try:
        import torch
    except ImportError:
        return None
    if device == "cuda" and not torch.cuda.is_available():
        return None
    values = {k: torch.tensor(v, dtype=torch.float64, device=device) for k, v in _inputs(workload, size).items()}

    def once() -> None:
        if workload == "elementwise":
            x = values["x"].clone().requires_grad_()
            L = (torch.tanh(x) * x + torch.exp(-x * x) - 0.5 * x * x * x).sum()
            L.backward()
            return
        params = {k: values[k].clone().requires_grad_() for k in ("W1", "b1", "W2", "b2")}
        h = torch.tanh(values["X"] @ params["W1"] + params["b1"])
        z = h @ params["W2"] + params["b2"]
        L = (torch.logsumexp(z, dim=1) - (z * values["Y"]).sum(dim=1)).mean()
        L.backward()

    return _timed(once, (torch.cuda.synchronize if device == "cuda" else lambda: None), repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--profile", action="store_true", help="profile gradcalc on the device instead")
    args = parser.parse_args()
    if args.profile:
        gradcalc_side("elementwise", 10**7, "gpu", 5, resident=True, profile=True)
        return
    # 10^3 elements: launch-bound, so per-operation overhead shows
    cases = [("elementwise", 10**5, 3), ("mlp", 256, 3)] if args.quick else \
        [("elementwise", 10**3, 20), ("elementwise", 10**7, 5), ("elementwise", 10**8, 3), ("mlp", 4096, 5)]
    device_name = "no GPU"
    try:
        import cupy

        device_name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    except Exception:  # no CuPy, or no device
        pass
    print(f"# GPU benchmark, {datetime.date.today()}, {device_name}, git {benchkit.git_describe()}, "
          f"load {benchkit.loadavg()}\n")
    print("| workload | gradcalc CPU | gradcalc GPU from host | gradcalc GPU on device | PyTorch CPU | PyTorch CUDA "
          "| on device ÷ CPU | on device ÷ PyTorch CUDA |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for workload, size, repeats in cases:
        benchkit.log(f"{workload} {size:,}")
        cpu = gradcalc_side(workload, size, "cpu", repeats)
        from_host = gradcalc_side(workload, size, "gpu", repeats)
        gpu = gradcalc_side(workload, size, "gpu", repeats, resident=True)
        torch_cpu = torch_side(workload, size, "cpu", repeats)
        torch_cuda = torch_side(workload, size, "cuda", repeats)
        label = f"{workload} {size:,}" if workload == "elementwise" else f"MLP batch {size:,}, 1024-1024-10"
        print(f"| {label} | {benchkit.fmt_time(cpu)} | {benchkit.fmt_time(from_host)} | {benchkit.fmt_time(gpu)} | "
              f"{benchkit.fmt_time(torch_cpu)} | "
              f"{benchkit.fmt_time(torch_cuda)} | {benchkit.ratio_text(gpu / cpu if gpu and cpu else None)} | "
              f"{benchkit.ratio_text(gpu / torch_cuda if gpu and torch_cuda else None)} |")


if __name__ == "__main__":
    main()
