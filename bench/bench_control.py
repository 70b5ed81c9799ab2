"""Control flow: a 100,000-iteration loop vs PyTorch eager's Python loop, and vs straight-line code.

    python bench/bench_control.py [--quick]

Targets (issue 3): the loop evaluates and differentiates in at most 0.5x PyTorch eager's time,
and costs no more per op than the same chain written out as statements (parsing excluded).
"""

from __future__ import annotations

import gc
import statistics
import sys
import time

import benchkit

import gradcalc
from gradcalc.program.api import Program

QUICK = "--quick" in sys.argv
N = 10_000 if QUICK else 100_000
REPEATS = 3 if QUICK else 5
OPS_PER_STEP = 5  # sin, *, *, *, +
LOOP = f"y = 0.5\nfor i in range({N}) {{ y = sin(y)*0.999 + 0.01*y*y }}\n"
STRAIGHT = "y = 0.5\n" + "y = sin(y)*0.999 + 0.01*y*y\n" * N


def median_time(fn) -> float:
    times = []
    for _ in range(REPEATS):
        gc.collect()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def gradcalc_run(program: Program) -> float:
    result = program.run().grad(of="y", wrt=["y"])
    return float(result.grads["y"])


def torch_loop() -> float:
    import torch

    return float(benchkit.torch_chain(torch, N).grad)


def main() -> None:
    loop, straight = gradcalc.parse_program(LOOP), gradcalc.parse_program(STRAIGHT)
    expected = gradcalc_run(loop)
    assert abs(gradcalc_run(straight) - expected) <= 1e-12 * max(1.0, abs(expected))
    t_loop = median_time(lambda: gradcalc_run(loop))
    t_straight = median_time(lambda: gradcalc_run(straight))
    rows = [("gradcalc for-loop (run + grad)", t_loop), ("gradcalc straight-line (run + grad, no parse)", t_straight)]
    try:
        import torch

        torch.set_num_threads(2)
        assert abs(torch_loop() - expected) <= 1e-9 * max(1.0, abs(expected))
        rows.append(("PyTorch eager Python loop (build + backward)", median_time(torch_loop)))
    except ImportError:
        torch = None
    ops = N * OPS_PER_STEP
    print(f"## Control flow ({time.strftime('%Y-%m-%d')}, N = {N:,} iterations, median of {REPEATS})\n")
    print("| what | total | per op |")
    print("| --- | ---: | ---: |")
    for name, seconds in rows:
        print(f"| {name} | {seconds:.3f} s | {1e6 * seconds / ops:.2f} µs |")
    print()
    print(f"- loop / straight-line per op: {t_loop / t_straight:.2f} (target ≤ 1.0)")
    if torch is not None:
        print(f"- loop / PyTorch eager: {t_loop / rows[-1][1]:.2f} (target ≤ 0.5)")


if __name__ == "__main__":
    main()
