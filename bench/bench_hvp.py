"""Hessian-vector product benchmark (#23): `hvp` against one gradient, and its growth in n.

    python bench/bench_hvp.py            # n = 10^4, 10^5, 10^6 (about a minute on 2 cores)
    python bench/bench_hvp.py --quick    # n = 10^4, 10^5

The program is (c)'s of bench_foundation, `L = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)`, x standard
normals (seed 0). Each n: the program is run once (outside the timing); then one gradient
(`run.grad(of="L", wrt=["x"])`), H·v as gradcalc computes it (`run.hvp`: reverse over reverse,
∇(vᵀ∇L), two backward passes) and, as a diagnostic, forward over reverse (`autodiff.jvp` of the
recorded gradient, three passes), each the median of 5 repeats on the same run; and the whole of
what a command pays, the run plus one gradient against the run plus hvp. The result is checked against the closed form
of H·v (H is diagonal here). Target: hvp at n = 10^6 within 4x one gradient; the time per element
roughly flat in n (linear).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy

import gradcalc
from gradcalc.engine import autodiff
from gradcalc.engine import backend as B
from gradcalc.engine.graph import constant

PROGRAM = "x = 0\nL = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)"


def closed_form(x: numpy.ndarray, v: numpy.ndarray) -> numpy.ndarray:
    """d²/dx² of tanh(x)·x + exp(-x²) - x³/2, elementwise, times v."""
    t = numpy.tanh(x)
    s = 1 - t * t
    return (2 * s - 2 * x * t * s + (4 * x * x - 2) * numpy.exp(-x * x) - 3 * x) * v


def timed(work, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def forward_over_reverse(run, v: numpy.ndarray) -> numpy.ndarray:
    output, target = run.node("L"), run.wrt_node("x")
    with B.using(run.device, run.dtype, run.max_elements):
        first = autodiff.backward(output, constant(B.xp.ones((), dtype=B.dtype)), [target], create_graph=True)[target]
        return autodiff.jvp(first, target, v)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    sizes = (10**4, 10**5) if parser.parse_args().quick else (10**4, 10**5, 10**6)
    program = gradcalc.parse_program(PROGRAM)
    print("| n | one gradient | hvp | ratio | run + gradient | run + hvp | ratio | fwd over rev (diagnostic) "
          "| hvp per element |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for n in sizes:
        print(measure(program, n), flush=True)
    print(f"\n(load average {open('/proc/loadavg').read().split()[0]})", file=sys.stderr)


def measure(program, n: int) -> str:
    """One row of the table, for size n."""
    rng = numpy.random.default_rng(0)
    x, v = rng.standard_normal(n), rng.standard_normal(n)
    run = program.run({"x": x})
    result = run.hvp("L", "x", v).hvp
    error = numpy.max(numpy.abs(result - closed_form(x, v)))
    assert error < 1e-9 * max(1.0, numpy.max(numpy.abs(result))), f"hvp differs from the closed form by {error}"
    grad = timed(lambda: run.grad(of="L", wrt=["x"]))
    hvp = timed(lambda: run.hvp("L", "x", v))
    fr = timed(lambda: forward_over_reverse(run, v))
    whole_grad = timed(lambda: program.run({"x": x}).grad(of="L", wrt=["x"]), 3)
    whole_hvp = timed(lambda: program.run({"x": x}).hvp("L", "x", v), 3)
    return (f"| {n:,} | {grad * 1e3:.1f} ms | {hvp * 1e3:.1f} ms | {hvp / grad:.2f}x | {whole_grad * 1e3:.1f} ms "
            f"| {whole_hvp * 1e3:.1f} ms | {whole_hvp / whole_grad:.2f}x | {fr * 1e3:.1f} ms "
            f"| {hvp / n * 1e9:.0f} ns |")


if __name__ == "__main__":
    main()
