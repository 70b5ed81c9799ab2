"""Helpers shared by the benchmark scripts in this folder (standard library only).

Each script is run as `python bench/<name>.py`, which puts this folder on sys.path, so the scripts
and the child processes they start (the same file, re-invoked with --child) import it as `benchkit`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULT_PREFIX = "RESULT "


# --- progress and numbers -----------------------------------------------------------------------

def log(message: str) -> None:
    """Progress on standard error (standard output is the report, or a child's result)."""
    print(message, file=sys.stderr, flush=True)


def med(values: list[float]) -> float:
    """The median."""
    return statistics.median(values)


def base_against_current(title: str, trees: dict[str, Path], works: Any, times: dict[str, dict[str, list[float]]],
                         repeats: int, load_before: float) -> None:
    """The A/B table bench_commits and bench_parse print: each workload's median CPU time on both sides."""
    print(f"{title} — {time.strftime('%Y-%m-%d %H:%M')}\n")
    print(f"base {describe_tree(trees['base'])}, current {describe_tree(trees['current'])}; CPU time, median of "
          f"{repeats}, sides interleaved; {os.cpu_count()} CPUs, load average {load_before:.2f} before, "
          f"{os.getloadavg()[0]:.2f} after.\n")
    print("| workload | base (CPU ms) | current (CPU ms) | current / base |")
    print("| --- | ---: | ---: | ---: |")
    for name in works:
        b, c = med(times[name]["base"]), med(times[name]["current"])
        print(f"| {name} | {b * 1e3:.1f} | {c * 1e3:.1f} | {c / b:.2f} |")


def fmt_time(seconds: float | None, digits: int = 1, micro_digits: int = 0) -> str:
    """Seconds in s, ms (`digits` decimals) or µs (`micro_digits` decimals); None reads "n/a"."""
    if seconds is None:
        return "n/a"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.{digits}f} ms"
    return f"{seconds * 1e6:.{micro_digits}f} µs"


def ratio_text(ratio: float | None) -> str:
    """A ratio as `1.23×` (`0.0035×` below 0.1, so small ones keep two digits), or "n/a"."""
    if ratio is None:
        return "n/a"
    return f"{ratio:.2f}×" if ratio >= 0.1 else f"{ratio:.2g}×"


def verdict(ratio: float | None, target: float, strict: bool = False) -> str:
    """Whether the ratio meets the target (≤, or < when strict): "**yes**", "no" or "n/a"."""
    if ratio is None:
        return "n/a"
    ok = ratio < target if strict else ratio <= target
    return "**yes**" if ok else "no"


# --- environment --------------------------------------------------------------------------------

def dist_version(name: str) -> str | None:
    """The installed distribution's version, or None."""
    try:
        from importlib.metadata import version

        return version(name)
    except Exception:
        return None


def git_describe() -> str:
    """`git describe --always --dirty` of the repository, or "?"."""
    return subprocess.run(["git", "describe", "--always", "--dirty"], cwd=REPO, capture_output=True, text=True,
                          check=False).stdout.strip() or "?"


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, or "?" where the platform has none."""
    try:
        return " ".join(f"{v:.2f}" for v in os.getloadavg())
    except OSError:
        return "?"


def torch_environment(quick: bool, have_torch: bool) -> dict[str, Any]:
    """The run's setting for a gradcalc-against-PyTorch report (PyTorch runs with 2 threads)."""
    return {"quick": quick, "date": time.strftime("%Y-%m-%d %H:%M"), "gradcalc": dist_version("gradcalc"),
            "commit": git_describe(), "torch": dist_version("torch") if have_torch else None, "torch_threads": 2,
            "numpy": dist_version("numpy"), "python": platform.python_version(), "cpus": os.cpu_count(),
            "machine": platform.machine(), "load_before": loadavg()}


def add_torch_options(parser: argparse.ArgumentParser, json_name: str) -> None:
    """The options every gradcalc-against-PyTorch script ends with: --no-torch, and --json-out
    (default bench/out/`json_name`)."""
    parser.add_argument("--no-torch", action="store_true", help="leave PyTorch out even if it is installed")
    parser.add_argument("--json-out", default=str(REPO / "bench" / "out" / json_name),
                        help="where to write the raw numbers ('' for nowhere)")


def find_torch(no_torch: bool) -> bool:
    """Whether PyTorch is to be used: importable and not left out (said on standard error when not)."""
    import importlib.util

    have_torch = not no_torch and importlib.util.find_spec("torch") is not None
    if not have_torch:
        log("PyTorch is not importable: the PyTorch column is skipped.")
    return have_torch


def import_torch(threads: int = 2) -> Any:
    """PyTorch, set to `threads` intra-op threads (imported only when called: children only)."""
    import torch

    torch.set_num_threads(threads)
    return torch


def torch_chain(torch: Any, n: int) -> Any:
    """The chain of (b) in PyTorch eager, y = sin(y)*0.999 + 0.01*y*y n times from a leaf 0.5, and its
    backward; returns the leaf (its .grad holds ∂y/∂y₀)."""
    y0 = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    y = y0
    for _ in range(n):
        y = torch.sin(y) * 0.999 + 0.01 * y * y
    y.backward()
    return y0


def save_results(results: dict[str, Any], started: float, json_out: str) -> None:
    """Record the wall time since `started` and the load average in results["env"], then write the
    results as JSON to `json_out` (nowhere when it is empty)."""
    results["env"]["wall_s"] = round(time.perf_counter() - started, 1)
    results["env"]["load_after"] = loadavg()
    if json_out:
        write_json(Path(json_out), results)


def write_json(path: Path, data: Any) -> None:
    """Write `data` as indented JSON, making the folder if need be."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


# --- child processes ----------------------------------------------------------------------------

def parse_args_or_run_child(parser: argparse.ArgumentParser,
                            child_main: Callable[[list[str]], None]) -> argparse.Namespace:
    """Add the hidden --child option and parse the command line: the parsed arguments, or, with
    --child, run `child_main` on what follows it and exit (status 0) without returning."""
    parser.add_argument("--child", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args.child)
        sys.exit(0)
    return args


def child_command(script: str | Path, *args: Any) -> list[str]:
    """The command that re-invokes `script` (with this interpreter) as a child running `args`."""
    return [sys.executable, str(Path(script).resolve()), "--child", *map(str, args)]


def emit_result(result: dict[str, Any]) -> None:
    """In a child: hand the result to the parent, as one line on standard output."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def read_result(stdout: str) -> dict[str, Any] | None:
    """In the parent: the result in a child's standard output (its last result line), or None."""
    lines = [line for line in stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    return json.loads(lines[-1][len(RESULT_PREFIX):]) if lines else None


def start_child(command: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run a child command from the repository's root, capturing its standard output."""
    return subprocess.run(command, cwd=REPO, stdout=subprocess.PIPE, text=True, timeout=timeout, check=False)


def child_result(command: list[str], done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The result of a finished child; RuntimeError if it failed or gave none."""
    result = read_result(done.stdout) if done.returncode == 0 else None
    if result is None:
        raise RuntimeError(f"child failed ({done.returncode}): {shlex.join(command)}\n{done.stdout[-2000:]}")
    return result


def run_child(script: str | Path, *args: Any, timeout: float) -> dict[str, Any]:
    """Run a workload of `script` in a fresh process and return its result; RuntimeError if it fails."""
    command = child_command(script, *args)
    return child_result(command, start_child(command, timeout))


# --- how busy the machine was -------------------------------------------------------------------

def busy_cpu_seconds() -> float | None:
    """CPU time spent busy by the whole machine since boot, all cores (Linux /proc/stat), else None."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds() -> float:
    """CPU time of the child processes waited for so far (a command and the workers it waited for)."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuWatch:
    """Started before a child runs; `stop()` gives wall time, the children's CPU time, and how many
    CPUs other processes kept busy meanwhile (machine busy time minus the children's, ÷ wall), or None."""

    def __init__(self) -> None:
        self.busy, self.own, self.start = busy_cpu_seconds(), children_cpu_seconds(), time.perf_counter()

    def stop(self) -> tuple[float, float, float | None]:
        busy, own, wall = busy_cpu_seconds(), children_cpu_seconds(), time.perf_counter() - self.start
        others = None if self.busy is None or busy is None else max(0.0, (busy - self.busy) - (own - self.own)) / wall
        return wall, own - self.own, others



# --- other trees ------------------------------------------------------------------------------------

def describe_tree(tree: Path) -> str:
    """The tree's commit (`git describe --always --dirty`), or "?"."""
    done = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=tree, capture_output=True, text=True,
                          check=False)
    return done.stdout.strip() or "?"


@contextlib.contextmanager
def worktree(commit: str, where: Path) -> Iterator[Path]:
    """A temporary git worktree of this repository at `commit`, removed afterwards."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", "--quiet", str(where), commit], check=True)
    try:
        yield where.resolve()
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(where)], check=False)


def alternating_rounds(sides: dict[str, Callable[[], dict[str, float]]],
                       count: int) -> list[dict[str, dict[str, float]]]:
    """Each side's measurements ({workload: seconds}) once a round, the order reversed every other round (a shared
    machine drifts); each round's numbers logged as they come."""
    rounds: list[dict[str, dict[str, float]]] = []
    for index in range(count):
        order = list(sides) if index % 2 == 0 else list(reversed(sides))
        rounds.append({side: sides[side]() for side in order})
        log(f"round {index + 1}: " + json.dumps(rounds[-1]))
    return rounds


def ratio_table(rounds: list[dict[str, dict[str, float]]], mine: str, first: str = "measure",
                label: Callable[[str], str] = str) -> None:
    """A Markdown table of `mine`'s workloads against every other side that measured them: medians, and the
    median of the rounds' ratios with the ratios themselves."""
    def us(seconds: float) -> str:
        return f"{seconds * 1e6:.1f} µs"

    print(f"| {first} | {mine} | reference | ratio (median of rounds) | rounds' ratios |")
    print("| --- | --- | --- | --- | --- |")
    for key in rounds[0][mine]:
        values = [r[mine][key] for r in rounds]
        others = [(side, [r[side][key] for r in rounds]) for side in rounds[0]
                  if side != mine and key in rounds[0][side]]
        if not others:
            print(f"| {label(key)} | {us(statistics.median(values))} | | | |")
        for side, theirs in others:
            ratios = [m / t for m, t in zip(values, theirs, strict=True)]
            print(f"| {label(key)} | {us(statistics.median(values))} | {side} {us(statistics.median(theirs))} | "
                  f"{statistics.median(ratios):.2f}× | {', '.join(f'{r:.2f}' for r in ratios)} |")


# A child script's timer: `best(f, calls)`, the fastest mean of 5 batches of calls after a warm-up.
TIMER = """
import time
def best(f, calls):
    for _ in range(calls // 5 + 1): f()
    times = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls): f()
        times.append((time.perf_counter() - start) / calls)
    return min(times)
"""


def child_json(python: str, code: str, env: dict[str, str], timeout: float = 900) -> dict[str, Any]:
    """Run `python -c code` in the repository; the JSON document on its last line of output."""
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env, cwd=REPO, check=True,
                          timeout=timeout)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def child_environment(**extra: str) -> dict[str, str]:
    """This process's environment for a measured child, with `extra`: bytecode written and read as an installed
    gradcalc's is (pip compiles it). Under PYTHONDONTWRITEBYTECODE, set on the development machines, every run
    compiled its modules again, gradcalc's and NumPy's alike under a PYTHONPYCACHEPREFIX: a third of a start-up."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONDONTWRITEBYTECODE", "PYTHONHOME")}
    env.update(extra)
    return env
