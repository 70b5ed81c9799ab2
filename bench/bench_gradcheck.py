"""gradcheck that scales (#21 item 4): batched moves from 10^3 to 10^5 elements, --fast against PyTorch's fast_mode.

    python bench/bench_gradcheck.py                          # full run (about a minute)
    python bench/bench_gradcheck.py --quick                  # smoke run: fewer repeats, no 10^5 command
    python bench/bench_gradcheck.py --torch-python PATH      # PyTorch's side run by that interpreter
    python bench/bench_gradcheck.py --no-torch               # leave PyTorch out

Workloads (float64, medians of repeats, the machine's 2 cores):
- scaling: `x = randn(n); L = sum(x^3*log(abs(x)+1))` for n = 10^3, 10^4, 3·10^4, 10^5: the program's run and
  `gradcheck(run)` in-process (the batched replay), and at 10^3 and 10^4 `gradcheck(run, batch=False)`, a rerun
  per move (what gradcheck did before); the whole command `gradcalc gradcheck -e ... --json` at 10^5 in a
  subprocess (target: under 10 s).
- branch: the same program with a branch on x[0] (`if x[0] > -100 { s = 1 }`): the path depends on x, so every
  move reruns the program; at 10^3 (the fallback's cost).
- fast: `gradcheck(run, fast=True)` at 10^3 elements against `torch.autograd.gradcheck(f, x, fast_mode=True)`
  (f the same function in PyTorch, x float64 requiring grad), and the full `gradcheck` against PyTorch's full
  one; PyTorch runs in a child process (its own interpreter: --torch-python, default this one), with 2 threads
  and with 1, after a warm-up call; the faster of the two is the reference.
  Target: --fast within 10x of PyTorch's fast mode.

Markdown report on standard output, progress on standard error, raw numbers in bench/out/gradcheck.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import benchkit as bk

PROGRAM = "x = randn({n}); L = sum(x^3*log(abs(x)+1))"
BRANCH = "x = randn({n}); if x[0] > -100 {{ s = 1 }}; L = sum(x^3*log(abs(x)+1))"

TORCH_CHILD = r"""
import json, statistics, sys, time
import numpy as np
import torch
n, repeats = int(sys.argv[1]), int(sys.argv[2])
x = torch.tensor(np.random.default_rng(0).standard_normal(n), dtype=torch.float64, requires_grad=True)
f = lambda x: torch.sum(x**3 * torch.log(torch.abs(x) + 1))
out = {"version": torch.__version__}
for threads in (2, 1):  # on a loaded 2-core machine one thread is often the faster: the better counts
    torch.set_num_threads(threads)
    torch.autograd.gradcheck(f, (x,), fast_mode=True)  # warm-up (the first call takes a second)
    for name, fast in (("fast", True), ("full", False)):
        times = []
        for _ in range(repeats if fast else 3):
            start = time.perf_counter()
            assert torch.autograd.gradcheck(f, (x,), fast_mode=fast)
            times.append(time.perf_counter() - start)
        out[f"{name}_{threads}"] = statistics.median(times)
    out["fast"] = min(out.get("fast", 1e9), out[f"fast_{threads}"])
    out["full"] = min(out.get("full", 1e9), out[f"full_{threads}"])
print("RESULT " + json.dumps(out))
"""


def _timed(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return bk.med(times)


def scaling(quick: bool) -> dict[str, Any]:
    import gradcalc
    from gradcalc.tools.gradcheck import gradcheck

    found: dict[str, Any] = {}
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 30_000, 100_000]
    for n in sizes:
        program = gradcalc.parse_program(PROGRAM.format(n=n))

        def check(program: Any = program, batch: bool = True) -> None:
            result = gradcheck(program.run(), batch=batch)
            assert result.passed and result.batched is batch

        repeats = 3 if quick else (15 if n <= 10_000 else 5)
        row = {"batched": _timed(check, repeats)}
        if n <= 10_000:
            row["per_move"] = _timed(lambda program=program: check(program, batch=False), 1 if n > 1_000 else 3)
        found[str(n)] = row
        bk.log(f"scaling n={n}: {row}")
    branch = gradcalc.parse_program(BRANCH.format(n=1_000))
    found["branch_1000"] = _timed(lambda: gradcheck(branch.run()), 3)
    bk.log(f"branch: {found['branch_1000']}")
    return found


def fast(quick: bool) -> dict[str, Any]:
    import numpy as np

    import gradcalc
    from gradcalc.tools.gradcheck import gradcheck

    x = np.random.default_rng(0).standard_normal(1_000)
    program = gradcalc.parse_program(PROGRAM.format(n=1_000))
    run = program.run({"x": x})
    repeats = 50 if quick else 400
    result = {"fast": _timed(lambda: gradcheck(run, fast=True), repeats),
              "full": _timed(lambda: gradcheck(run), max(3, repeats // 20))}
    bk.log(f"fast: {result}")
    return result


def command(quick: bool) -> float | None:
    if quick:
        return None
    text = PROGRAM.format(n=100_000)
    args = [sys.executable, "-m", "gradcalc", "gradcheck", "-e", text, "--json"]
    times = []
    for _ in range(3):
        start = time.perf_counter()
        done = subprocess.run(args, capture_output=True, text=True, cwd=bk.REPO, check=False)
        times.append(time.perf_counter() - start)
        assert done.returncode == 0 and json.loads(done.stdout)["passed"], done.stderr
    bk.log(f"command 10^5: {times}")
    return bk.med(times)


def torch_side(python: str, quick: bool) -> dict[str, Any] | None:
    done = subprocess.run([python, "-c", TORCH_CHILD, "1000", "50" if quick else "400"], capture_output=True,
                          text=True, check=False, env=os.environ)
    result = bk.read_result(done.stdout)
    if result is None:
        bk.log(f"PyTorch's side failed: {done.stderr[-500:]}")
    return result


def report(results: dict[str, Any]) -> str:
    lines = [f"### #21 gradcheck — {results['date']} (`{results['commit']}`, load {results['load']})", ""]
    lines += ["| n | batched (run + gradcheck) | a rerun per move (before) | speed-up |", "| --- | --- | --- | --- |"]
    for n, row in results["scaling"].items():
        if not n.isdigit():
            continue
        before = row.get("per_move")
        lines.append(f"| {int(n):,} | {bk.fmt_time(row['batched'])} | {bk.fmt_time(before)} | "
                     f"{bk.ratio_text(before / row['batched']) if before else 'n/a'} |")
    branch = results["scaling"]["branch_1000"]
    lines += ["", f"- a branch on x[0] (every move reruns), n = 1,000: {bk.fmt_time(branch)}"]
    if results["command"] is not None:
        lines.append(f"- whole command `gradcalc gradcheck -e ... --json`, n = 100,000: "
                     f"{bk.fmt_time(results['command'])} (target < 10 s)")
    mine, torch = results["fast"], results["torch"]
    if torch:
        lines.append(f"- n = 1,000, `--fast` {bk.fmt_time(mine['fast'], 2)} vs "
                     "`torch.autograd.gradcheck(fast_mode=True)` "
                     f"{bk.fmt_time(torch['fast'], 2)} (torch {torch['version']}): "
                     f"{bk.ratio_text(mine['fast'] / torch['fast'])} (target ≤ 10×); full gradcheck "
                     f"{bk.fmt_time(mine['full'], 2)} vs PyTorch's full {bk.fmt_time(torch['full'], 2)}: "
                     f"{bk.ratio_text(mine['full'] / torch['full'])}")
    else:
        lines.append(f"- n = 1,000, `--fast` {bk.fmt_time(mine['fast'], 2)}, full {bk.fmt_time(mine['full'], 2)} "
                     "(PyTorch: n/a)")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-torch", action="store_true")
    parser.add_argument("--torch-python", default=sys.executable, help="the interpreter that has PyTorch")
    parser.add_argument("--json-out", default=str(bk.REPO / "bench" / "out" / "gradcheck.json"))
    options = parser.parse_args()
    started = time.time()
    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                               "commit": bk.git_describe(), "load": bk.loadavg()}
    results["scaling"] = scaling(options.quick)
    results["fast"] = fast(options.quick)
    results["command"] = command(options.quick)
    results["torch"] = None if options.no_torch else torch_side(options.torch_python, options.quick)
    print(report(results))
    if options.json_out:
        results["wall_s"] = round(time.time() - started, 1)
        bk.write_json(Path(options.json_out), results)


if __name__ == "__main__":
    main()
