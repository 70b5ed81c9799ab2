"""`gradcalc minimize` (#22): gradient descent on an MLP against PyTorch eager, and the whole command's time.

    python bench/bench_minimize.py                          # full run (a minute or two)
    python bench/bench_minimize.py --torch-python PATH      # PyTorch's side run by that interpreter
    python bench/bench_minimize.py --quick                  # fewer repeats

Workloads (float64, medians of repeats, the machine's cores):
- mlp: 100 steps of gradient descent (lr 0.1) on a 784-256-10 MLP, relu then softmax cross-entropy, a batch of
  256 examples (random, seeded): `tools.minimize.minimize` in-process (each step one run of the program and
  one backward pass) and, for reference, the plain loop over the API (`program.run(values)` + `run.grad`);
  PyTorch eager the same loop (`loss.backward()`, `p -= lr*p.grad` under no_grad) in a child process of its
  own interpreter (--torch-python, default this one). Each side runs with 2 threads and with 1 (gradcalc: a
  child process per BLAS thread count, OPENBLAS/OMP/MKL_NUM_THREADS), the faster counting: on a loaded
  2-core machine two BLAS threads can be several times slower than one. Both start from the same weights and
  must end at the same loss. Target: gradcalc ≤ 1.0× PyTorch's time.
- toy: the whole command `gradcalc minimize -e TOY --steps 1000` in a subprocess (start-up included), TOY the
  tutorial's neuron with a squared loss. Target: under 1 s.

Markdown report on standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchkit as bk
import numpy as np

STEPS, LR = 100, 0.1
MLP = """const X = load("mlp.npz", "X")
const Y = load("mlp.npz", "Y")
W1 = load("mlp.npz", "W1"); b1 = load("mlp.npz", "b1")
W2 = load("mlp.npz", "W2"); b2 = load("mlp.npz", "b2")
h = relu(X @ W1 + b1)
p = softmax(h @ W2 + b2)
L = -sum(Y * log(p)) / 256
"""
TOY = "a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4; b = w1*a; c = w2*a; d = w3*b + w4*c; L = (1 - d)^2"

TORCH_CHILD = r"""
import json, statistics, sys, time
import numpy as np
import torch
data = np.load(sys.argv[1]); steps, lr, repeats = int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
X, Y = torch.tensor(data["X"]), torch.tensor(data["Y"])

def train():
    params = [torch.tensor(data[k], requires_grad=True) for k in ("W1", "b1", "W2", "b2")]
    W1, b1, W2, b2 = params
    for _ in range(steps):
        p = torch.softmax(torch.relu(X @ W1 + b1) @ W2 + b2, dim=-1)
        loss = -torch.sum(Y * torch.log(p)) / 256
        loss.backward()
        with torch.no_grad():
            for q in params:
                q -= lr * q.grad
                q.grad = None
    p = torch.softmax(torch.relu(X @ W1 + b1) @ W2 + b2, dim=-1)
    return float(-torch.sum(Y * torch.log(p)) / 256)

out = {"version": torch.__version__}
for threads in (2, 1):
    torch.set_num_threads(threads)
    train()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter(); out["loss"] = train(); times.append(time.perf_counter() - start)
    out[f"time_{threads}"] = statistics.median(times)
out["time"] = min(out["time_2"], out["time_1"])
print("RESULT " + json.dumps(out))
"""


def make_data(folder: Path) -> Path:
    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, 784)) * 0.5
    Y = np.eye(10)[rng.integers(0, 10, 256)]
    path = folder / "mlp.npz"
    np.savez(path, X=X, Y=Y, W1=rng.standard_normal((784, 256)) * np.sqrt(2 / 784), b1=np.zeros(256),
             W2=rng.standard_normal((256, 10)) * np.sqrt(2 / 256), b2=np.zeros(10))
    (folder / "mlp.eq").write_text(MLP, encoding="utf-8")
    return path


def gradcalc_mlp(folder: Path, repeats: int) -> dict[str, Any]:
    import gradcalc
    from gradcalc.tools import minimize as M

    program = gradcalc.load(str(folder / "mlp.eq"))
    settings = M.Settings(method="gd", lr=LR, steps=STEPS)
    found: dict[str, Any] = {}
    times = []
    for _ in range(repeats + 1):  # the first a warm-up
        start = time.perf_counter()
        result = M.minimize(program, {}, {}, "L", None, settings)
        times.append(time.perf_counter() - start)
    found["minimize"], found["loss"] = bk.med(times[1:]), result.loss

    def api_loop() -> float:
        run = program.run()
        names = ["W1", "b1", "W2", "b2"]
        values = {name: run.value(name) for name in names}
        pinned = {name: run.value(name) for name in ("X", "Y")}
        for _ in range(STEPS):
            grads = program.run({**pinned, **values}).grad("L", names, retain_graph=False).grads
            values = {name: values[name] - LR * grads[name] for name in names}
        return float(program.run({**pinned, **values}).value("L"))

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        found["api_loss"] = api_loop()
        times.append(time.perf_counter() - start)
    found["api_loop"] = bk.med(times)
    return found


def gradcalc_child(folder: Path, repeats: int, threads: int) -> dict[str, Any]:
    """gradcalc_mlp in a process whose BLAS has `threads` threads (set before NumPy loads)."""
    env = {**os.environ, **{k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    done = subprocess.run([sys.executable, __file__, "--child", str(folder), str(repeats)], capture_output=True,
                          text=True, check=False, env=env)
    found = bk.read_result(done.stdout)
    if found is None:
        raise SystemExit(f"gradcalc's child failed: {done.stderr[-2000:]}")
    return found


def toy_command(repeats: int, *args: str) -> tuple[float, float]:
    """The median wall and CPU time of `gradcalc ARGS` in a subprocess: start-up, the steps, the table. The
    modules' bytecode is cached, as an installed gradcalc's is (pip compiles it): under PYTHONDONTWRITEBYTECODE
    (set on the development machines) every run compiled all of gradcalc again, ~0.3 s CPU of the 1.4 s
    measured at first. CPU time is the child's user + system: what the load of a shared machine inflates least."""
    env = bk.child_environment()
    with tempfile.TemporaryDirectory() as cache:
        env["PYTHONPYCACHEPREFIX"] = cache
        command = [sys.executable, "-m", "gradcalc", *args]
        subprocess.run(command, capture_output=True, text=True, check=True, cwd=bk.REPO, env=env)  # writes it
        walls, cpus = [], []
        for _ in range(repeats):
            before = os.times()
            start = time.perf_counter()
            subprocess.run(command, capture_output=True, text=True, check=True, cwd=bk.REPO, env=env)
            walls.append(time.perf_counter() - start)
            after = os.times()
            cpus.append(after.children_user + after.children_system - before.children_user - before.children_system)
    return bk.med(walls), bk.med(cpus)


def toy_in_process(repeats: int) -> float:
    """1,000 steps of the toy in-process: minimize's share of the command."""
    import gradcalc
    from gradcalc.tools import minimize as M

    program = gradcalc.parse_program(TOY)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        M.minimize(program, {}, {}, None, None, M.Settings(steps=1000))
        times.append(time.perf_counter() - start)
    return bk.med(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--torch-python", default=sys.executable)
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("FOLDER", "REPEATS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        bk.emit_result(gradcalc_mlp(Path(args.child[0]), int(args.child[1])))
        return
    repeats = 3 if args.quick else 5
    print(f"date {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, commit {bk.git_describe()}, "
          f"load {bk.loadavg()}\n")
    with tempfile.TemporaryDirectory() as where:
        folder = Path(where)
        data = make_data(folder)
        bk.log("gradcalc: MLP")
        by_threads = {threads: gradcalc_child(folder, repeats, threads) for threads in (2, 1)}
        ours = {key: min(found[key] for found in by_threads.values()) for key in ("minimize", "api_loop")}
        ours.update(loss=by_threads[1]["loss"], api_loss=by_threads[1]["api_loss"],
                    threads={t: {k: found[k] for k in ("minimize", "api_loop")} for t, found in by_threads.items()})
        torch: dict[str, Any] | None = None
        if not args.no_torch:
            bk.log("PyTorch: MLP")
            done = subprocess.run([args.torch_python, "-c", TORCH_CHILD, str(data), str(STEPS), str(LR),
                                   str(repeats)], capture_output=True, text=True, check=False)
            torch = bk.read_result(done.stdout)
            if torch is None:
                bk.log(f"PyTorch's child failed: {done.stderr[-2000:]}")
    bk.log("gradcalc: toy command")
    toy = toy_command(repeats, "minimize", "-e", TOY, "--steps", "1000")
    start_up = toy_command(repeats, "eval", "-e", TOY)
    steps_only = toy_in_process(repeats)
    print("| workload | gradcalc | PyTorch eager | ratio | target met |")
    print("| --- | --- | --- | --- | --- |")
    reference = torch["time"] if torch else None
    for label, key in (("`minimize` (tools.minimize), 100 GD steps, 784-256-10 MLP, batch 256", "minimize"),
                       ("plain loop over the API (run + grad), the same", "api_loop")):
        ratio = ours[key] / reference if reference else None
        print(f"| {label} | {bk.fmt_time(ours[key])} | {bk.fmt_time(reference)} | {bk.ratio_text(ratio)} | "
              f"{bk.verdict(ratio, 1.0)} |")
    print(f"| whole command `gradcalc minimize -e TOY --steps 1000`, wall (CPU) | {bk.fmt_time(toy[0])} "
          f"({bk.fmt_time(toy[1])}) | | | {'**yes**' if toy[0] < 1 else 'no'} (< 1 s) |")
    print(f"| of which: `gradcalc eval -e TOY` (start-up and a run), wall (CPU) | {bk.fmt_time(start_up[0])} "
          f"({bk.fmt_time(start_up[1])}) | | | |")
    print(f"| of which: the 1,000 steps in-process | {bk.fmt_time(steps_only)} | | | |")
    print()
    print(f"gradcalc `minimize`: 2 threads {bk.fmt_time(ours['threads'][2]['minimize'])}, 1 thread "
          f"{bk.fmt_time(ours['threads'][1]['minimize'])}; the API loop: 2 threads "
          f"{bk.fmt_time(ours['threads'][2]['api_loop'])}, 1 thread {bk.fmt_time(ours['threads'][1]['api_loop'])}\n")
    print(f"final loss: gradcalc {ours['loss']:.12g}, API loop {ours['api_loss']:.12g}"
          + (f", PyTorch {torch['loss']:.12g} ({torch['version']}; 2 threads {bk.fmt_time(torch['time_2'])}, "
             f"1 thread {bk.fmt_time(torch['time_1'])})" if torch else ""))
    print(json.dumps({"ours": ours, "torch": torch, "toy": toy, "start_up": start_up, "steps_only": steps_only}),
          file=sys.stderr)


if __name__ == "__main__":
    main()
