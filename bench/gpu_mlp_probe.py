"""Where the MLP's GPU time goes: gradcalc's forward and backward against the same CuPy and PyTorch calls.

    python bench/gpu_mlp_probe.py     # on a machine with CuPy, PyTorch and a CUDA device

Medians over 30 calls (cupyx.profiler.benchmark) of the host time and the GPU time (CUDA events on the
default stream, which PyTorch's kernels also use): the raw GEMMs, gradcalc's forward run alone, forward
plus backward, and the same in PyTorch. Host time well above GPU time means launch or Python overhead.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import bench_gpu
import cupy
import torch
from cupyx.profiler import benchmark

import gradcalc
from gradcalc.engine import backend as B

WRT = ["W1", "b1", "W2", "b2"]


def torch_step(values: dict[str, Any], backward: bool) -> None:
    params = {k: values[k].clone().requires_grad_(backward) for k in WRT}
    h = torch.tanh(values["X"] @ params["W1"] + params["b1"])
    z = h @ params["W2"] + params["b2"]
    loss = (torch.logsumexp(z, dim=1) - (z * values["Y"]).sum(dim=1)).mean()
    if backward:
        loss.backward()


def main() -> None:
    B.use("gpu")
    host = bench_gpu._inputs("mlp", 4096)
    dev = {k: cupy.asarray(v) for k, v in host.items()}
    tdev = {k: torch.as_tensor(v, device="cuda") for k, v in host.items()}
    program = gradcalc.parse_program(bench_gpu.MLP)
    rows: dict[str, Callable[[], Any]] = {
        "CuPy X @ W1": lambda: dev["X"] @ dev["W1"],
        "PyTorch X @ W1": lambda: tdev["X"] @ tdev["W1"],
        "CuPy X.T @ X": lambda: dev["X"].T @ dev["X"],
        "PyTorch X.T @ X": lambda: tdev["X"].T @ tdev["X"],
        "gradcalc forward": lambda: program.run(dev, device="gpu"),
        "PyTorch forward": lambda: torch_step(tdev, False),
        "gradcalc forward+backward": lambda: program.run(dev, device="gpu").grad("L", WRT, retain_graph=False,
                                                                               host=False),
        "PyTorch forward+backward": lambda: torch_step(tdev, True),
    }
    print(f"{'':28} {'host ms':>8} {'GPU ms':>8}")
    for name, fn in rows.items():
        result = benchmark(fn, n_repeat=30, n_warmup=3)
        print(f"{name:28} {statistics.median(result.cpu_times) * 1e3:8.3f} "
              f"{statistics.median(result.gpu_times[0]) * 1e3:8.3f}")


if __name__ == "__main__":
    main()
