"""#21's parser and start-up targets: base commit against current tree, interleaved (CPU time, medians).

    python bench/bench_parse.py                         # base: 3e34b7d (before the parser's tables), 5 repeats
    python bench/bench_parse.py --base-commit HEAD~3 --repeats 9 --sizes 10000
    python bench/bench_parse.py --torch-path /opt/torchlib   # where `import torch` is found, if not installed

Workloads, each one subprocess per side and repeat (bench_commits.py's `run_once`: PYTHONPATH=TREE, .pyc caches
in a prefix folder, CPU seconds of the child), sides alternating which goes first:

- floor: `python -c "import numpy, typer"`, the floor for a Typer command over NumPy;
- start-up: `python -m gradcalc grad neuron.eq --json`, the whole process;
- chain N: `y = sin(y)*0.999 + 0.01*y*y` × N through the API: parse (`Program(text)`), build (`run()`) and
  backward (`grad`), timed inside with process_time;
- distinct shapes: 10^4 statements of random expressions of many shapes (seeded), parse / build / backward
  as for the chain (the parser replays only a shape met before: this is the cost where none repeats);
- command on the chain: `python -m gradcalc grad chain.eq --json` at N = 10^4, the whole process, against
  a PyTorch script doing the same loop (import, the chain, backward, one thread) where torch imports.

Targets: parse ≤ build + backward per statement; start-up ≤ 1.2× the floor; the command ≤ 0.15× PyTorch's script.
Markdown on standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_commits import CHAIN, run_once  # the chain script: parse, build, backward of n statements
from benchkit import REPO, base_against_current, child_environment, log, med, worktree

# A program whose statements are random expressions of many shapes (seeded): the parser replays a statement
# only when its shape was met before, so this is its cost on programs that do not repeat themselves.
DISTINCT = """
import random, sys, time
from gradcalc import Program
random.seed(3)
def expr(d, names):
    if d == 0 or random.random() < 0.25:
        return random.choice(names + ["2", "0.5"])
    k = random.random()
    if k < 0.5:
        return f"{expr(d - 1, names)} {random.choice('+-*')} {expr(d - 1, names)}"
    if k < 0.7:
        return f"{random.choice(['sin', 'exp', 'tanh', 'cos'])}({expr(d - 1, names)})"
    if k < 0.85:
        return f"({expr(d - 1, names)})^2"
    return f"-{expr(d - 1, names)}"
n = int(sys.argv[1])
lines = ["x = 0.1", "w = 0.2", "v0 = 0.3", "v1 = 0.4"]
lines += [f"v{i} = 0.001*({expr(4, ['x', 'w', f'v{i - 1}', f'v{i - 2}'])})" for i in range(2, n + 2)]
text = "\\n".join(lines)
t0 = time.process_time()
program = Program(text)
t1 = time.process_time()
run = program.run()
t2 = time.process_time()
g = run.grad(of=f"v{n + 1}", wrt=["x", "w"])
t3 = time.process_time()
print(t3 - t0, t1 - t0, t2 - t1, t3 - t2, repr(float(g.grads["x"])))
"""

DEFAULT_BASE_COMMIT = "3e34b7d"  # the last commit before the parser ran Lark's tables as plain data
LINE = "y = sin(y)*0.999 + 0.01*y*y"

TORCH_LOOP = """
import sys
import torch
torch.set_num_threads(1)
y0 = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
y = y0
for _ in range(int(sys.argv[1])):
    y = torch.sin(y) * 0.999 + 0.01 * y * y
y.backward()
print(float(y0.grad))
"""


def torch_seconds(torch_path: str | None, cwd: Path, n: int) -> float | None:
    """CPU seconds of the PyTorch loop script as one process, or None where torch does not import."""
    env = child_environment()
    if torch_path:
        env["PYTHONPATH"] = torch_path
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run([sys.executable, "-c", TORCH_LOOP, str(n)], cwd=cwd, env=env, capture_output=True,
                          text=True, check=False, timeout=600)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        return None
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-commit", default=DEFAULT_BASE_COMMIT, help=f"default {DEFAULT_BASE_COMMIT}")
    parser.add_argument("--current", default=str(REPO), help="the current tree (default: this repository)")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per side and workload (default 5)")
    parser.add_argument("--sizes", default="10000,100000", help="chain lengths (default 10000,100000)")
    parser.add_argument("--torch-path", help="a folder to put on PYTHONPATH for the PyTorch script")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gradcalc-bench-parse-"))
    try:
        with worktree(args.base_commit, root / "base") as base:
            measure({"base": base, "current": Path(args.current).resolve()}, root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def measure(trees: dict[str, Path], cwd: Path, args: argparse.Namespace) -> None:
    load_before = os.getloadavg()[0]
    sizes = [int(s) for s in args.sizes.split(",")]
    chain_file = cwd / "chain.eq"
    chain_file.write_text("y = 0.5\n" + f"{LINE}\n" * 10_000, encoding="utf-8")
    samples = trees["current"] / "samples"
    works: dict[str, tuple[list[str], bool]] = {
        "floor": (["-c", "import numpy, typer"], True),
        "start-up": (["-m", "gradcalc", "grad", str(samples / "neuron.eq"), "--json"], True),
        "command on the chain 10^4": (["-m", "gradcalc", "grad", str(chain_file), "--json"], True),
        **{f"chain {n:,}": (["-c", CHAIN, str(n)], False) for n in sizes},
        "distinct shapes 10,000": (["-c", DISTINCT, "10000"], False),
    }
    times: dict[str, dict[str, list[float]]] = {name: {side: [] for side in trees} for name in works}
    parts: dict[str, dict[str, list[list[float]]]] = {name: {side: [] for side in trees} for name in works}
    torch_times: list[float] = []
    for name, (command, wall) in works.items():
        for tree in trees.values():  # warm-up: .pyc files, the disk cache
            run_once(sys.executable, tree, cwd, command, wall)
        for repeat in range(args.repeats):
            for side in list(trees) if repeat % 2 == 0 else list(trees)[::-1]:
                if wall:
                    seconds, _ = run_once(sys.executable, trees[side], cwd, command, wall)
                else:  # the chain and the distinct shapes print total, parse, build, backward, then the gradient
                    env = child_environment(PYTHONPATH=str(trees[side]),
                                            PYTHONPYCACHEPREFIX=str(cwd / "pycache" / trees[side].name))
                    done = subprocess.run([sys.executable, *command], cwd=cwd, env=env, capture_output=True,
                                          text=True, check=True, timeout=900)
                    numbers = [float(x) for x in done.stdout.split()[:4]]
                    seconds = numbers[0]
                    parts[name][side].append(numbers[1:])
                times[name][side].append(seconds)
            if name.startswith("command"):
                measured = torch_seconds(args.torch_path, cwd, 10_000)
                if measured is not None:
                    torch_times.append(measured)
            log(f"{name} {repeat + 1}/{args.repeats}: " + ", ".join(f"{s} {times[name][s][-1]:.3f}" for s in trees))
    report(trees, works, times, parts, torch_times, sizes, args.repeats, load_before)


def report(trees: dict[str, Path], works: dict[str, tuple[list[str], bool]], times: dict[str, dict[str, list[float]]],
           parts: dict[str, dict[str, list[list[float]]]], torch_times: list[float], sizes: list[int], repeats: int,
           load_before: float) -> None:
    base_against_current("### Parser and start-up, base against current", trees, works, times, repeats,
                         load_before)
    print("\n| measure | base | current | target |")
    print("| --- | ---: | ---: | --- |")
    ratio = {side: med(times["start-up"][side]) / med(times["floor"][side]) for side in trees}
    print(f"| start-up ÷ floor | {ratio['base']:.2f}× | {ratio['current']:.2f}× | ≤ 1.2× |")
    for n in sizes:
        cells = []
        for side in trees:  # base, then current
            parse, build, backward = (med([p[i] for p in parts[f"chain {n:,}"][side]]) for i in range(3))
            cells.append(f"{parse / n * 1e6:.1f} / {build / n * 1e6:.1f} / {backward / n * 1e6:.1f} µs "
                         f"(parse {parse / (build + backward):.2f}× build + backward)")
        print(f"| chain {n:,}: parse / build / backward a statement | {cells[0]} | {cells[1]} | parse ≤ 1× |")
    cells = []
    for side in trees:
        parse, build, backward = (med([p[i] for p in parts["distinct shapes 10,000"][side]]) for i in range(3))
        cells.append(f"{parse / 1e4 * 1e6:.1f} / {build / 1e4 * 1e6:.1f} / {backward / 1e4 * 1e6:.1f} µs "
                     f"(parse {parse / (build + backward):.2f}× build + backward)")
    print(f"| distinct shapes 10,000: parse / build / backward a statement | {cells[0]} | {cells[1]} | — |")
    if torch_times:
        t = med(torch_times)
        cells = [f"{med(times['command on the chain 10^4'][side]) / t:.2f}× ({t * 1e3:.0f} ms)" for side in trees]
        print(f"| command on the chain 10^4 ÷ PyTorch loop script | {cells[0]} | {cells[1]} | ≤ 0.15× |")


if __name__ == "__main__":
    main()
