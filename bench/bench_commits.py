"""A refactor costs nothing: start-up and engine workloads, base commit against current tree, interleaved.

    python bench/bench_commits.py                        # base: b47a4bf (before #18's layout), current: this tree
    python bench/bench_commits.py --base-commit HEAD~5   # another base (a temporary worktree)
    python bench/bench_commits.py --repeats 5            # fewer repeats

Each measurement is one subprocess, `PYTHONPATH=TREE python ...`, run from a temporary folder so the
current directory cannot shadow PYTHONPATH, with .pyc caches in a prefix folder there (both sides alike).
After one warm-up per side and workload, the repeats alternate which side goes first. Workloads:

- start-up: `python -m gradcalc grad neuron.eq --json`, the whole process;
- chain: `y = sin(y)*0.999 + 0.01*y*y` × 10^4 through the Python API, parse + run + grad, timed inside;
- hessian: `sum(x^4) + sum(x[:-1]*x[1:])` at n = 100, run + hessian, timed inside (median of 5 in-process);
- check: `gradcalc check homework.eq answers.txt --json`, the whole process.

Times are CPU seconds (user + system; a whole process's from getrusage, in-process ones from
process_time), not wall clock: on a shared machine another job's load changes the wall clock of
both sides by more than the difference measured, and CPU time much less.

Both sides must agree (the chain's gradient, the Hessian's sum, a command's exit status), else exit 1.
Markdown report on standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchkit import REPO, base_against_current, child_environment, log, worktree

DEFAULT_BASE_COMMIT = "b47a4bf"  # the last commit before #18 moved the modules into folders

CHAIN = """
import sys, time
from gradcalc import Program
text = "y = 0.5\\n" + "y = sin(y)*0.999 + 0.01*y*y\\n" * int(sys.argv[1])
t0 = time.process_time()
program = Program(text)
t1 = time.process_time()
run = program.run()
t2 = time.process_time()
g = run.grad(of="y", wrt=["y"])
t3 = time.process_time()
print(t3 - t0, t1 - t0, t2 - t1, t3 - t2, repr(float(g.grads["y"])))
"""

HESSIAN = """
import time
import numpy as np
from gradcalc import Program
program = Program("x = randn(100)\\nL = sum(x^4) + sum(x[:-1]*x[1:])")
x = np.linspace(-1, 1, 100)
times = []
for _ in range(5):
    t0 = time.process_time()
    h = program.run({"x": x}).hessian("L", ["x"])
    times.append(time.process_time() - t0)
print(sorted(times)[2], repr(float(np.asarray(h.blocks[0][0]).sum())))
"""


def workloads(samples: Path) -> dict[str, tuple[list[str], bool]]:
    """name -> (arguments after `python`, whether the wall clock is the measure; else the first number printed)."""
    return {
        "start-up": (["-m", "gradcalc", "grad", str(samples / "neuron.eq"), "--json"], True),
        "chain 10^4": (["-c", CHAIN, "10000"], False),
        "hessian n=100": (["-c", HESSIAN], False),
        "check": (["-m", "gradcalc", "check", str(samples / "homework.eq"), str(samples / "answers.txt"), "--json"],
                  True),
    }


def run_once(python: str, tree: Path, cwd: Path, args: list[str], wall: bool) -> tuple[float, str]:
    """One measurement: (seconds, what the run printed to compare with the other side)."""
    env = child_environment(PYTHONPATH=str(tree), PYTHONPYCACHEPREFIX=str(cwd / "pycache" / tree.name))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([python, *args], cwd=cwd, env=env, capture_output=True, text=True, check=False,
                          timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    elapsed = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    if done.returncode not in (0, 1):  # check exits 1 when some claim is wrong: that is its answer
        sys.exit(f"{tree}: {args[:3]} exited {done.returncode}:\n{done.stderr[-2000:]}")
    if wall:  # the JSON itself may differ between commits (a new field): the exit status may not
        return elapsed, f"exit status {done.returncode}"
    first, *rest = done.stdout.split()
    return float(first), " ".join(rest[-1:])


def main() -> None:
    """Measure both trees on every workload and print the report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-commit", default=DEFAULT_BASE_COMMIT, help=f"default {DEFAULT_BASE_COMMIT}")
    parser.add_argument("--current", default=str(REPO), help="the current tree (default: this repository)")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per side and workload (default 9)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gradcalc-bench-commits-"))
    try:
        with worktree(args.base_commit, root / "base") as base:
            measure({"base": base, "current": Path(args.current).resolve()}, root, args.repeats)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(trees: dict[str, Path], cwd: Path, repeats: int) -> None:
    """Warm up, check that both sides agree, time the repeats interleaved, print the Markdown table."""
    load_before = os.getloadavg()[0]
    works = workloads(trees["current"] / "samples")
    times: dict[str, dict[str, list[float]]] = {name: {side: [] for side in trees} for name in works}
    for name, (command, wall) in works.items():
        outputs = {side: run_once(sys.executable, tree, cwd, command, wall)[1] for side, tree in trees.items()}
        if len(set(outputs.values())) != 1:
            sys.exit(f"{name}: the sides disagree:\n" + "\n".join(f"{s}: {o[:500]}" for s, o in outputs.items()))
        for repeat in range(repeats):
            order = list(trees) if repeat % 2 == 0 else list(trees)[::-1]
            for side in order:
                seconds, _ = run_once(sys.executable, trees[side], cwd, command, wall)
                times[name][side].append(seconds)
            log(f"{name} {repeat + 1}/{repeats}: " + ", ".join(f"{s} {times[name][s][-1]:.3f}" for s in trees))
    base_against_current("## Base against current", trees, works, times, repeats, load_before)

if __name__ == "__main__":
    main()
