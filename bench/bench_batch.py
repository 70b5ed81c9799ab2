"""Batch mode (#21 item 1): the 2-link arm's value and gradient at many points, against JAX.

    python bench/bench_batch.py                      # full run (a few minutes): needs JAX (--jax-python)
    python bench/bench_batch.py --quick              # smoke run: fewer repeats, 10^5 streamed points
    python bench/bench_batch.py --jax-python PATH    # the interpreter that has jax (default: this one)

Targets (issue #21): 10^4 points of the arm's forward kinematics (3 scalar parameters l1, t1, t2) from a
JSON Lines file, value and gradient per point, the whole command ≤ 0.3× a JAX script doing the same from
the same file; in-process batched ≤ 1.5× `jax.jit(jax.vmap(jax.grad(f)))`; 10^6 points streamed from
standard input in bounded memory (peak RSS).

- Whole command: `gradcalc grad samples/arm.eq --at POINTS --wrt l1,t1,t2 --json` against a script that
  imports JAX, reads the same file, runs `jit(vmap(value_and_grad(f)))` and writes the same JSON Lines
  (both to a file). Sides alternate, after one untimed run of each; medians of wall time.
- In process (a child each): `Program.run_stacked({"l1": ..., "t1": ..., "t2": ...}, "grad")` on arrays
  against `jit(vmap(grad(f)))` (compiled first, `block_until_ready`), medians of repeated calls; and
  `Program.run_batch` on the 10^4 records, the per-point path's form (dicts in, a result per point out).
- Streaming: a generator process writes N lines into `gradcalc grad ... --at - --json`, whose output
  goes to /dev/null; peak RSS of the gradcalc process (`/usr/bin/time`-free: resource.getrusage of a
  child that only waits for it), for 10^5 and 10^6 points: bounded memory is the same peak for both.

Markdown report on standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchkit
from benchkit import REPO, fmt_time, log, med, ratio_text, verdict

ARM = REPO / "samples" / "arm.eq"
JAX_SCRIPT = r'''
import json, sys
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)

def f(l1, t1, t2):
    l2 = 0.8
    x = l1 * jnp.cos(t1) + l2 * jnp.cos(t1 + t2)
    y = l1 * jnp.sin(t1) + l2 * jnp.sin(t1 + t2)
    return (x - 1) ** 2 + (y - 0.5) ** 2

points = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
l1 = jnp.array([p.get("l1", 1.0) for p in points])
t1 = jnp.array([p.get("t1", 0.3) for p in points])
t2 = jnp.array([p.get("t2", 0.5) for p in points])
value, grads = jax.jit(jax.vmap(jax.value_and_grad(f, argnums=(0, 1, 2))))(l1, t1, t2)
value, grads = value.tolist(), [g.tolist() for g in grads]
out = sys.stdout
for i, v in enumerate(value):
    out.write(json.dumps({"index": i, "of": "L", "value": v,
                          "grad": {"l1": grads[0][i], "t1": grads[1][i], "t2": grads[2][i]}}) + "\n")
'''

IN_PROCESS = r'''
import json, sys, time, statistics
import numpy as np
sys.path.insert(0, sys.argv[1])
import gradcalc
n, repeats, jax_python = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
l1, t1, t2 = 1 + 0.1 * rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)
program = gradcalc.load(sys.argv[5])
stacks = {"l1": l1, "t1": t1, "t2": t2}
program.run_stacked(stacks, "grad", {"wrt": ["l1", "t1", "t2"]})
times = []
for _ in range(repeats):
    start = time.perf_counter()
    found = program.run_stacked(stacks, "grad", {"wrt": ["l1", "t1", "t2"]})
    times.append(time.perf_counter() - start)
records_time = None
if sys.argv[6] == "1":  # the record form once a run: a diagnostic
    records = [{"l1": float(a), "t1": float(b), "t2": float(c)} for a, b, c in zip(l1, t1, t2)]
    start = time.perf_counter()
    results = list(program.run_batch(records, "grad", {"wrt": ["l1", "t1", "t2"]}))
    records_time = time.perf_counter() - start
    assert all(r.error is None for r in results)
print(json.dumps({"stacked": statistics.median(times), "records": records_time,
                  "check": [float(found.value[7]), float(found.grads["t1"][7])]}))
'''

JAX_IN_PROCESS = r'''
import json, sys, time, statistics
import numpy as np
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
n, repeats = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
l1, t1, t2 = (jnp.asarray(a) for a in (1 + 0.1 * rng.normal(size=n), rng.normal(size=n), rng.normal(size=n)))
def f(l1, t1, t2):
    l2 = 0.8
    x = l1 * jnp.cos(t1) + l2 * jnp.cos(t1 + t2)
    y = l1 * jnp.sin(t1) + l2 * jnp.sin(t1 + t2)
    return (x - 1) ** 2 + (y - 0.5) ** 2
g = jax.jit(jax.vmap(jax.value_and_grad(f, argnums=(0, 1, 2))))
jax.block_until_ready(g(l1, t1, t2))
times = []
for _ in range(repeats):
    start = time.perf_counter()
    value, grads = jax.block_until_ready(g(l1, t1, t2))
    times.append(time.perf_counter() - start)
print(json.dumps({"time": statistics.median(times), "check": [float(value[7]), float(grads[1][7])]}))
'''

DERIVATIVES = r'''
import json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import gradcalc
n, side = int(sys.argv[2]), sys.argv[4]
program = gradcalc.parse_program(open(sys.argv[3]).read() + "\np = [x, y]\n")
rng = np.random.default_rng(0)
records = [{"l1": float(a), "t1": float(b), "t2": float(c)}
           for a, b, c in zip(1 + 0.1 * rng.normal(size=n), rng.normal(size=n), rng.normal(size=n))]
wrt = ["l1", "t1", "t2"]
out = {}
for method, arguments in [("jacobian", {"of": "p", "wrt": wrt}), ("hessian", {"of": "L", "wrt": wrt}),
                          ("hvp", {"of": "L", "wrt": "t1", "vector": "1"})]:
    start = time.perf_counter()
    if side == "batched":
        results = [point.result for point in program.run_batch(records, method, arguments)]
    else:  # what --at did before: each point its own run
        results = [getattr(program.run(record), method)(**arguments) for record in records]
    out[method] = time.perf_counter() - start
    out[method + "_check"] = float(np.asarray(results[7].blocks[1] if method == "jacobian" else
                                              results[7].hvp if method == "hvp" else
                                              results[7].blocks[1][2]).ravel()[0])
print(json.dumps(out))
'''

DIFFS = r'''
import hashlib, json, sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
import gradcalc
n, side = int(sys.argv[2]), sys.argv[4]
program = gradcalc.parse_program(open(sys.argv[3]).read())
rng = np.random.default_rng(0)
records = [{"l1": float(a), "t1": float(b), "t2": float(c)}
           for a, b, c in zip(1 + 0.1 * rng.normal(size=n), rng.normal(size=n), rng.normal(size=n))]
arguments = {"wrt": ["l1", "t1", "t2"]}
start = time.perf_counter()
if side == "batched":
    results = [point.result for point in program.run_batch(records, "diff", arguments)]
else:  # what --at did before: each point its own run and its own reading of the expressions
    results = [program.run(record).diff(**arguments) for record in records]
seconds = time.perf_counter() - start
texts = hashlib.sha256(repr([[(d.text, d.latex, d.where, d.given) for d in found] for found in results]).encode())
print(json.dumps({"diff": seconds, "texts": texts.hexdigest(), "check": float(results[7][1].value)}))
'''

LAYER = r'''
import json, sys, time, statistics
import numpy as np
sys.path.insert(0, sys.argv[1])
import gradcalc
from gradcalc.engine import batching
n, width = int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(0)
W = rng.normal(size=(width, width)) / width ** 0.5
text = f"const W = {W.tolist()}\nx = zeros({width})\nh = tanh(W @ x)\nL = sum(h^2)\n"
program = gradcalc.parse_program(text)
stacks = {"x": rng.normal(size=(n, width))}
program.run_stacked(stacks, "grad")
times = []
for _ in range(int(sys.argv[4])):
    start = time.perf_counter()
    found = program.run_stacked(stacks, "grad")
    times.append(time.perf_counter() - start)
stack = batching.Batched(stacks["x"])
products, before = [], []
for _ in range(int(sys.argv[4])):  # the product, and one pass reading it as the run does; then the form of before
    start = time.perf_counter()
    np.tanh(batching._matmul(W, stack).stack)
    products.append(time.perf_counter() - start)
    start = time.perf_counter()
    np.tanh(np.moveaxis(W @ stack.stack.T, -1, 0))  # matrix @ stackᵀ, the batch axis last in memory
    before.append(time.perf_counter() - start)
print(json.dumps({"run": statistics.median(times), "matmul": statistics.median(products),
                  "before": statistics.median(before), "check": float(found.grads["x"][7][0])}))
'''

GENERATOR = r'''
import sys, random
random.seed(0)
n = int(sys.argv[1])
write = sys.stdout.write
for i in range(n):
    write('{"l1": %r, "t1": %r, "t2": %r}\n' % (1 + random.gauss(0, 0.1), random.gauss(0, 1), random.gauss(0, 1)))
'''

WAIT_RSS = r'''
import resource, subprocess, sys
generator = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE)
with open("/dev/null", "w") as sink:
    gradcalc = subprocess.run(sys.argv[3:], stdin=generator.stdout, stdout=sink)
generator.wait()
print(gradcalc.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
'''


def gradcalc_command(points: str) -> list[str]:
    return [sys.executable, "-m", "gradcalc", "grad", str(ARM), "--at", points, "--wrt", "l1,t1,t2", "--json"]


def write_points(path: Path, n: int) -> None:
    import random

    random.seed(1)
    with open(path, "w") as handle:
        for _ in range(n):
            handle.write(json.dumps({"l1": 1 + random.gauss(0, 0.1), "t1": random.gauss(0, 1),
                                     "t2": random.gauss(0, 1)}) + "\n")


def environment() -> dict[str, str]:
    """This one, with the worktree first and compiled modules kept (as an installed package has them)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def timed(command: list[str], out: Path) -> float:
    env = environment()
    start = time.perf_counter()
    with open(out, "w") as handle:
        subprocess.run(command, stdout=handle, check=True, env=env, cwd=REPO)
    return time.perf_counter() - start


def same_output(ours: Path, theirs: Path) -> None:
    """Both sides computed the same numbers (so neither is timed doing less)."""
    for a, b in zip(open(ours), open(theirs)):
        x, y = json.loads(a), json.loads(b)
        assert abs(x["value"] - y["value"]) < 1e-9 and all(abs(x["grad"][k] - y["grad"][k]) < 1e-9 for k in y["grad"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--jax-python", default=sys.executable, help="an interpreter with jax installed")
    parser.add_argument("--points", type=int, default=10_000)
    parser.add_argument("--stream", type=int, default=1_000_000, help="points streamed (0: no streaming)")
    parser.add_argument("--only", choices=["all", "arm", "derivatives", "diff", "matmul"], default="all",
                        help="one part: the arm against JAX, Jacobians, Hessians and H·v batched against per "
                        "point, diff's expressions batched against per point, or the batched matrix product "
                        "against its form before")
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    stream = min(args.stream, 100_000) if args.quick else args.stream
    print(f"## Batch mode (#21 item 1) — {time.strftime('%Y-%m-%d %H:%M')} (`{benchkit.git_describe()}`, "
          f"load {benchkit.loadavg()})\n")
    if args.only in ("all", "derivatives"):
        derivatives(args.points, 1 if args.quick else 3)
    if args.only in ("all", "diff"):
        diffs(args.points, 1 if args.quick else 3)
    if args.only in ("all", "matmul"):
        matmul(args.points, repeats)
    if args.only in ("all", "arm"):
        arm(args, repeats, stream)


def _batched_and_alone(what: str, script: str, points: int, rounds: int) -> dict[str, list[dict[str, Any]]]:
    """The script's JSON document from a child a side ("batched", "alone") and round, the arm at `points` points."""
    env = environment()
    found: dict[str, list[dict[str, Any]]] = {"batched": [], "alone": []}
    for i in range(rounds):
        for side, runs in found.items():
            log(f"{what}, {side}, round {i + 1} of {rounds}")
            runs.append(json.loads(subprocess.run(
                [sys.executable, "-c", script, str(REPO), str(points), str(ARM), side], capture_output=True,
                text=True, check=True, env=env).stdout))
    return found


def derivatives(points: int, rounds: int) -> None:
    """`--at` Jacobians and Hessians of the arm (3 parameters) batched, against each point run alone (the path
    they took before): a child a side and round, alternating."""
    found = _batched_and_alone("Jacobians and Hessians", DERIVATIVES, points, rounds)
    print("| measure | batched | per point | ratio |")
    print("| --- | --- | --- | --- |")
    for method, what in [("jacobian", "Jacobian of (x, y) by l1, t1, t2"), ("hessian", "Hessian of L by l1, t1, t2"),
                         ("hvp", "H·v of L by t1 (`hvp --vector 1`)")]:
        for a, b in zip(found["batched"], found["alone"]):
            assert abs(a[method + "_check"] - b[method + "_check"]) < 1e-9
        batched, alone = (med([r[method] for r in found[side]]) for side in ("batched", "alone"))
        ratios = med([a[method] / b[method] for a, b in zip(found["batched"], found["alone"])])
        print(f"| {what}, {points:,} points (`run_batch`, as `--at` runs them) | {fmt_time(batched)} | "
              f"{fmt_time(alone)} | {ratio_text(ratios)} |")
    print()


def diffs(points: int, rounds: int) -> None:
    """`diff --at` of the arm by l1, t1, t2: batched (the graphs built once, the expressions read once) against
    each point run and read alone (the path it took before); the texts must be the same on both sides."""
    found = _batched_and_alone("diff", DIFFS, points, rounds)
    for a, b in zip(found["batched"], found["alone"]):
        assert a["texts"] == b["texts"] and abs(a["check"] - b["check"]) < 1e-12, (a, b)
    with tempfile.TemporaryDirectory() as folder:  # the whole command, as a user runs it
        path = Path(folder) / "points.jsonl"
        write_points(path, points)
        command = [sys.executable, "-m", "gradcalc", "diff", str(ARM), "--at", str(path), "--wrt", "l1,t1,t2",
                   "--json"]
        log("diff, the whole command")
        whole = med([timed(command, Path(folder) / "out.jsonl") for _ in range(rounds)])
    batched, alone = (med([r["diff"] for r in found[side]]) for side in ("batched", "alone"))
    ratios = med([a["diff"] / b["diff"] for a, b in zip(found["batched"], found["alone"])])
    print("| measure | batched | per point | ratio |")
    print("| --- | --- | --- | --- |")
    print(f"| `diff` of L by l1, t1, t2, {points:,} points (`run_batch`, as `--at` runs them; the same texts) | "
          f"{fmt_time(batched)} | {fmt_time(alone)} | {ratio_text(ratios)} |")
    print(f"| the whole command `gradcalc diff samples/arm.eq --at POINTS --wrt l1,t1,t2 --json` | "
          f"{fmt_time(whole)} | | |")
    print()


def matmul(points: int, repeats: int) -> None:
    """A layer `h = tanh(W @ x)` (W a constant, x given per point): the batched product against the form it had
    before (matrix @ stackᵀ, its result strided), and the whole batched run."""
    env = environment()
    print("| width | `W @ x` batched, then tanh | the form before (M @ stackᵀ) | ratio | whole `run_stacked` grad |")
    print("| --- | --- | --- | --- | --- |")
    for width in (16, 64):
        log(f"matrix product, width {width}")
        found = json.loads(subprocess.run([sys.executable, "-c", LAYER, str(REPO), str(points), str(width),
                                           str(3 * repeats)], capture_output=True, text=True, check=True,
                                          env=env).stdout)
        print(f"| {width} ({points:,} points) | {fmt_time(found['matmul'])} | {fmt_time(found['before'])} | "
              f"{ratio_text(found['matmul'] / found['before'])} | {fmt_time(found['run'])} |")
    print()


def arm(args: argparse.Namespace, repeats: int, stream: int) -> None:
    """The arm's value and gradient at many points against JAX: the whole command, in process, streamed."""
    with tempfile.TemporaryDirectory() as folder:
        points = Path(folder) / "points.jsonl"
        write_points(points, args.points)
        script = Path(folder) / "arm_jax.py"
        script.write_text(JAX_SCRIPT)
        ours_out, theirs_out = Path(folder) / "ours.jsonl", Path(folder) / "theirs.jsonl"
        ours_cmd, theirs_cmd = gradcalc_command(str(points)), [args.jax_python, str(script), str(points)]
        timed(ours_cmd, ours_out), timed(theirs_cmd, theirs_out)  # warm-up (modules compiled), outputs compared
        same_output(ours_out, theirs_out)
        ours, theirs = [], []
        for i in range(repeats):
            log(f"whole command, round {i + 1} of {repeats}")
            ours.append(timed(ours_cmd, ours_out))
            theirs.append(timed(theirs_cmd, theirs_out))
        whole = med(ours) / med(theirs)

        log("in process")
        env = environment()
        rounds: list[tuple[float, float, float]] = []
        for i in range(repeats):  # the sides alternate, a child each, so both see the same load
            log(f"in process, round {i + 1} of {repeats}")
            mine = json.loads(subprocess.run([sys.executable, "-c", IN_PROCESS, str(REPO), str(args.points), "31",
                                              args.jax_python, str(ARM), "1" if i == 0 else "0"],
                                             capture_output=True, text=True, check=True, env=env).stdout)
            jax = json.loads(subprocess.run([args.jax_python, "-c", JAX_IN_PROCESS, str(args.points), "31"],
                                            capture_output=True, text=True, check=True, env=env).stdout)
            assert abs(mine["check"][0] - jax["check"][0]) < 1e-9 and abs(mine["check"][1] - jax["check"][1]) < 1e-9
            rounds.append((mine["stacked"], jax["time"], mine["records"]))
        stacked_time, jax_time = med([r[0] for r in rounds]), med([r[1] for r in rounds])
        records_time = med([r[2] for r in rounds if r[2] is not None])
        stacked = med([r[0] / r[1] for r in rounds])

        peaks = {}
        for n in sorted({min(stream, 100_000), stream} - {0}):
            log(f"streaming {n:,} points from standard input")
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", WAIT_RSS, GENERATOR, str(n), *gradcalc_command("-")],
                                  capture_output=True, text=True, check=True, env=env, cwd=REPO)
            status, peak = done.stdout.split()
            assert status == "0", done
            peaks[n] = (int(peak) / 1024, time.perf_counter() - start)

    print("| measure | gradcalc | JAX | ratio | target | met |")
    print("| --- | --- | --- | --- | --- | --- |")
    print(f"| {args.points:,} points from a JSON Lines file, whole command (value + gradient, JSON Lines out) | "
          f"{fmt_time(med(ours))} | {fmt_time(med(theirs))} | {ratio_text(whole)} | ≤ 0.3× | {verdict(whole, 0.3)} |")
    print(f"| in process, `run_stacked` vs `jit(vmap(value_and_grad))`, {args.points:,} points (ratio: median of "
          f"the rounds' ratios) | {fmt_time(stacked_time)} | {fmt_time(jax_time, micro_digits=0)} | "
          f"{ratio_text(stacked)} | ≤ 1.5× | {verdict(stacked, 1.5)} |")
    print(f"| in process, `run_batch` on {args.points:,} records (a result object per point) | "
          f"{fmt_time(records_time)} | | {ratio_text(records_time / jax_time)} | | |")
    for n, (peak, seconds) in peaks.items():
        print(f"| {n:,} points streamed from standard input: peak RSS, wall time | {peak:.0f} MiB, "
              f"{fmt_time(seconds)} | | | bounded | |")
    print(f"\nWhole-command runs (s): gradcalc {', '.join(f'{t:.2f}' for t in ours)}; "
          f"JAX {', '.join(f'{t:.2f}' for t in theirs)}. In-process rounds (ms, gradcalc / JAX): "
          f"{', '.join(f'{a * 1e3:.1f} / {b * 1e3:.1f}' for a, b, _ in rounds)}.")
    _ = resource  # the streaming child reads it


if __name__ == "__main__":
    main()
