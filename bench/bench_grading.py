"""Grading speed, base tree against current tree: `gradcalc check KEY FOLDER --jobs J --json`, interleaved.

    python bench/bench_grading.py                          # base: commit 533e107, current: this repository
    python bench/bench_grading.py --base-commit HEAD~3     # another base commit (a temporary worktree)
    python bench/bench_grading.py --repeats 3 --jobs 2     # fewer repeats
    python bench/bench_grading.py --base DIR --current DIR --python /tmp/venv/bin/python

Two workloads, each a seeded class of "ordinary" submissions written into a temporary folder (deleted
at the end): COUNT submissions against samples/neuron.eq (the toy network), and COUNT/5 against a
tiny two-layer tensor network (W1 2x3, tanh, W2 2x2, sum loss). About 70% are answers files (.txt,
one claim per line: numbers and expressions, some wrong, some that do not parse), 30% model files
(.eq with `check` statements); about half are all right.

Each side runs as a subprocess, `PYTHONPATH=TREE PYTHON -m gradcalc check ...`, from the temporary
folder (so the current directory cannot shadow PYTHONPATH), with .pyc caches in a prefix folder there
(both trees alike, and nothing written into them); which gradcalc each side imports is checked first.
After one untimed warm-up run per side and workload, the repeats alternate the order of the sides
(base first, then current first, ...). Only the command is timed: wall clock around subprocess.run.
Every run's JSON totals must equal the other side's (and per submission, claims right / total), else
the script stops with exit status 1; a difference from the generator's own count is a warning.

Markdown report on standard output, progress on standard error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import benchkit
from benchkit import REPO, describe_tree, log, med, worktree

DEFAULT_PYTHON = sys.executable
DEFAULT_BASE_COMMIT = "533e107"  # before #17 (untrusted files)
SIDES = ("base", "current")

# --- the keys and the claims students write -----------------------------------------------------

# samples/neuron.eq: a = 2, w1 = 3, w2 = -1, w3 = 0.5, w4 = 4; b = 6, c = -2, d = -5, L = 15.
# For each quantity: right answers, then wrong ones (sign errors, a missing chain-rule path, right only
# at the program's values, a factor off, wrongly rounded numbers).
NEURON_CLAIMS: dict[str, tuple[list[str], list[str]]] = {
    "d": (["-1", "-1.0"], ["1", "-2"]),
    "b": (["-w3", "-0.5"], ["w3", "-0.25*a", "0.5"]),
    "c": (["-w4", "-4"], ["w4", "-2*a"]),
    "w1": (["-w3*a", "-a*w3", "-1"], ["w3*a", "-0.5*a", "1"]),
    "w2": (["-w4*a", "-8", "-8.0"], ["w4*a", "-4*a", "-w4"]),
    "w3": (["-b", "-w1*a", "-6"], ["b", "-3*a", "6"]),
    "w4": (["-c", "-w2*a", "2"], ["c", "a", "-2"]),
    "a": (["-(w3*w1 + w4*w2)", "-w3*w1 - w4*w2", "2.5", "2.50"], ["-w3*w1", "-w4*w2", "-2.5", "2.4", "4"]),
    "L": (["15", "10 - d"], ["-15", "30"]),
}
NEURON_BROKEN = ["dL/dw1 = -1/2a", "dL/da = -(w3*w1 + w4*w2", "dL/dw2 = -w4 *", "dL/dw4 = -c)", "dL/dw3 == -b",
                 "dL/dw5 = 1"]

TENSOR_KEY = """# A tiny two-layer network: x (3) -> W1 (2x3), tanh -> W2 (2x2) -> sum.
x = [0.5, -1, 2]
W1 = [[0.2, -0.4, 0.1], [0.3, 0.5, -0.6]]
b1 = [0.1, -0.2]
W2 = [[0.7, -0.8], [0.5, 0.9]]
z = W1 @ x + b1
h = tanh(z)
y = W2 @ h
L = sum(y)
"""
# Its gradients: dL/dW1 = [[0.335433, -0.670866, 1.34173], [0.0056906, -0.0113812, 0.0227624]],
# dL/dW2 = [[0.664037, -0.941376], [0.664037, -0.941376]], dL/db1 = dL/dz = [0.670866, 0.0113812],
# dL/dh = [1.2, 0.1], dL/dx = [0.137588, -0.262656, 0.0602579], dL/dy = [1, 1]; L = 0.702707.
TENSOR_CLAIMS: dict[str, tuple[list[str], list[str]]] = {
    "W1": (["outer((1 - h^2) * (W2.T @ ones(2)), x)", "((1 - h^2) * sum(W2, axis=0)) xᵀ",
            "[[0.3354, -0.6709, 1.342], [0.00569, -0.01138, 0.02276]]",
            "[[0.335, -0.671, 1.34], [0.0057, -0.0114, 0.0228]]"],
           ["outer(W2.T @ ones(2), x)", "outer(x, (1 - h^2) * (W2.T @ ones(2)))",
            "-outer((1 - h^2) * (W2.T @ ones(2)), x)", "(1 - h^2) xᵀ",
            "[[0.34, -0.67, 1.3], [0.006, -0.01, 0.03]]"]),
    "W2": (["outer(ones(2), h)", "ones(2) hᵀ", "[[0.664, -0.941], [0.664, -0.941]]", "[0.664, -0.941]"],
           ["outer(h, ones(2))", "-outer(ones(2), h)", "[[0.664, 0.664], [-0.941, -0.941]]"]),
    "b1": (["(1 - h^2) * sum(W2, axis=0)", "(1 - h²) ⊙ (W2ᵀ ones(2))", "[0.6709, 0.01138]"],
           ["sum(W2, axis=0)", "1 - h^2", "[0.67, 0.012]"]),
    "z": (["(1 - h^2) ⊙ sum(W2, axis=0)"], ["sum(W2, axis=0)", "-(1 - h^2) * sum(W2, axis=0)"]),
    "h": (["W2ᵀ ones(2)", "sum(W2, axis=0)", "[1.2, 0.1]"], ["W2 ones(2)", "sum(W2, axis=1)", "[-0.1, 1.4]"]),
    "x": (["W1ᵀ((1 - h²) ⊙ (W2ᵀ ones(2)))", "W1.T @ ((1 - h^2) * sum(W2, axis=0))", "[0.1376, -0.2627, 0.06026]"],
          ["W1 @ ((1 - h^2) * sum(W2, axis=0))", "W1.T @ sum(W2, axis=0)"]),
    "y": (["ones(2)", "1"], ["0", "2"]),
    "L": (["0.7027", "sum(W2 @ h)"], ["0.72", "sum(h)"]),
}
TENSOR_BROKEN = ["dL/dW1 = ((1 - h^2) * sum(W2, axis=0) xᵀ", "dL/dW2 = ones(2) hᵀ)",
                 "dL/db1 = (1 - h^2) * * sum(W2, axis=0)", "dL/dW = 1", "dL/dx = W1.T @@ h"]

COMMENTS = ["# by hand", "# chain rule, backwards", "# checked twice", "# not sure about this one"]


@dataclass
class Workload:
    """One row of the report: a key and the class of submissions graded against it."""

    name: str
    key_text: str
    claims: dict[str, tuple[list[str], list[str]]]
    broken: list[str]
    count: int
    seed: int
    key: Path = field(default_factory=Path)
    folder: Path = field(default_factory=Path)
    expected: dict[str, int] = field(default_factory=dict)  # the generator's count
    graded: dict[str, int] = field(default_factory=dict)  # the JSON totals (both sides, every run)


# --- the generator ------------------------------------------------------------------------------

def claim_line(of: str, value: str, rng: random.Random) -> str:
    """One claim as students write it: `L = ...` for the value, else dL/dX or ∂L/∂X."""
    if of == "L":
        return f"L = {value}"
    return f"∂L/∂{of} = {value}" if rng.random() < 0.2 else f"dL/d{of} = {value}"


def submission(work: Workload, rng: random.Random) -> tuple[str, str, int, int]:
    """One ordinary submission: (file suffix, text, claims right, claims in all)."""
    model = rng.random() < 0.3
    strong = rng.random() < 0.45  # a student who gets everything right
    targets = rng.sample(sorted(work.claims), rng.randint(4, min(7, len(work.claims))))
    lines: list[str] = []
    right: list[bool] = []
    for of in targets:
        good, bad = work.claims[of]
        ok = strong or rng.random() < 0.75
        lines.append(claim_line(of, rng.choice(good if ok else bad), rng))
        right.append(ok)
    if not model and not strong and rng.random() < 0.3:  # one claim that cannot be judged (invalid)
        spot = rng.randrange(len(lines))
        lines[spot], right[spot] = rng.choice(work.broken), False
    text_lines = [f"check {line}" for line in lines] if model else list(lines)
    if rng.random() < 0.3:
        text_lines.insert(rng.randrange(len(text_lines) + 1), rng.choice(COMMENTS))
    if model:
        return ".eq", work.key_text + "\n" + "\n".join(text_lines) + "\n", sum(right), len(right)
    return ".txt", "\n".join(text_lines) + "\n", sum(right), len(right)


def generate(work: Workload, root: Path) -> None:
    """Write the workload's key and submissions under `root`; record the totals the JSON should show."""
    work.key = root / f"{work.name}.eq"
    work.key.write_text(work.key_text, encoding="utf-8")
    work.folder = root / work.name
    work.folder.mkdir()
    rng = random.Random(work.seed)
    totals = dict.fromkeys(("submissions", "passed", "failed", "not_judged", "timed_out", "claims_right",
                            "claims_total"), 0)
    models = 0
    for index in range(work.count):
        suffix, text, right, total = submission(work, rng)
        (work.folder / f"s{index:05d}{suffix}").write_text(text, encoding="utf-8")
        models += suffix == ".eq"
        totals["submissions"] += 1
        totals["passed" if right == total else "failed"] += 1
        totals["claims_right"] += right
        totals["claims_total"] += total
    work.expected = totals
    log(f"{work.name}: {work.count} submissions ({work.count - models} answers files, {models} models), "
        f"{totals['passed']} all right by construction")


# --- running a side ------------------------------------------------------------------------------

@dataclass
class Side:
    """A code tree and how to run gradcalc from it."""

    name: str
    tree: Path
    python: str
    cwd: Path
    pycache: Path

    def env(self) -> dict[str, str]:
        """The environment of every command: this tree first on sys.path, .pyc files under the prefix."""
        return benchkit.child_environment(PYTHONPATH=str(self.tree), PYTHONPYCACHEPREFIX=str(self.pycache),
                                          PYTHONSAFEPATH="1")

    def module_file(self) -> Path:
        """The gradcalc/__init__.py this side imports (checked to lie in its tree)."""
        done = subprocess.run([self.python, "-c", "import gradcalc; print(gradcalc.__file__)"], cwd=self.cwd,
                              env=self.env(), capture_output=True, text=True, check=True)
        path = Path(done.stdout.strip()).resolve()
        if not path.is_relative_to(self.tree.resolve()):
            raise SystemExit(f"{self.name}: PYTHONPATH={self.tree} imports {path}, not the tree's gradcalc")
        return path

    def grade(self, work: Workload, jobs: int) -> tuple[float, dict[str, Any]]:
        """Wall time of `gradcalc check KEY FOLDER --jobs J --json`, and its JSON document."""
        command = [self.python, "-m", "gradcalc", "check", str(work.key), str(work.folder), "--jobs", str(jobs),
                   "--json"]
        env = self.env()
        start = time.perf_counter()
        done = subprocess.run(command, cwd=self.cwd, env=env, capture_output=True, text=True, timeout=1800,
                              check=False)
        wall = time.perf_counter() - start
        try:
            doc = json.loads(done.stdout)
        except json.JSONDecodeError:
            doc = None
        if not isinstance(doc, dict) or "totals" not in doc:  # no output, or an error document
            raise SystemExit(f"{self.name}, {work.name}: exit {done.returncode}, no grading JSON\n"
                             f"{done.stdout[-1000:]}{done.stderr[-2000:]}")
        return wall, doc


def summary(doc: dict[str, Any]) -> tuple[dict[str, int], list[tuple[str, Any, Any, Any]]]:
    """The totals and, per submission, (name, passed, claims right, claims in all)."""
    rows = [(s["submission"], s.get("passed"), s.get("right"), s.get("total")) for s in doc["submissions"]]
    return doc["totals"], rows


def compare(reference: dict[str, Any], doc: dict[str, Any], what: str) -> None:
    """Stop (exit 1) when a run's results differ from the reference run's."""
    (ref_totals, ref_rows), (totals, rows) = summary(reference), summary(doc)
    if ref_totals == totals and ref_rows == rows:
        return
    differing = [(a, b) for a, b in zip(ref_rows, rows) if a != b][:5]
    log(f"{what}: results differ\n  reference totals {ref_totals}\n  this run's totals {totals}")
    for a, b in differing:
        log(f"  {a}  vs  {b}")
    sys.exit(1)


# --- main ---------------------------------------------------------------------------------------

def measure(sides: list[Side], works: list[Workload], jobs: int, repeats: int) -> dict[str, dict[str, list[float]]]:
    """Warm-up and check, then the timed repeats, the sides' order alternating; the times by workload and side."""
    reference: dict[str, dict[str, Any]] = {}
    for work in works:
        for side in sides:
            log(f"warm-up: {work.name}, {side.name} ...")
            _, doc = side.grade(work, jobs)
            if work.name in reference:
                compare(reference[work.name], doc, f"{work.name}: {side.name} against {sides[0].name}")
            else:
                reference[work.name] = doc
        totals = work.graded = reference[work.name]["totals"]
        if totals != work.expected:
            log(f"warning: {work.name}: both sides agree, but not with the generator's count\n"
                f"  JSON      {totals}\n  generator {work.expected}")
    times = {work.name: {side.name: [] for side in sides} for work in works}
    for round_ in range(repeats):
        for index, work in enumerate(works):
            order = sides if (round_ + index) % 2 == 0 else sides[::-1]
            for side in order:
                wall, doc = side.grade(work, jobs)
                compare(reference[work.name], doc, f"{work.name}: {side.name}, repeat {round_ + 1}")
                times[work.name][side.name].append(wall)
                log(f"  repeat {round_ + 1}/{repeats}  {work.name:<8} {side.name:<8} {wall:7.2f} s")
    return times


def report(sides: list[Side], works: list[Workload], times: dict[str, dict[str, list[float]]], jobs: int,
           repeats: int, load_before: str) -> None:
    """The Markdown report: setting, the table of medians and ratios, the totals both sides gave."""
    base, current = sides
    print(f"## Grading: base against current — {time.strftime('%Y-%m-%d %H:%M')}\n")
    print(f"`gradcalc check KEY FOLDER --jobs {jobs} --json`, whole command, wall clock, median of {repeats} "
          f"(sides interleaved, after a warm-up run each). base: `{base.tree}` ({describe_tree(base.tree)}); current: "
          f"`{current.tree}` ({describe_tree(current.tree)}); Python `{base.python}`; {os.cpu_count()} CPUs, "
          f"load average before {load_before}, after {benchkit.loadavg()}.\n")
    print("| workload | base median (s) | current median (s) | current / base |")
    print("| --- | ---: | ---: | ---: |")
    for work in works:
        b, c = med(times[work.name][base.name]), med(times[work.name][current.name])
        print(f"| {work.name}: {work.count:,} submissions | {b:.2f} | {c:.2f} | {c / b:.3f} |")
    print()
    for work in works:
        runs = "; ".join(f"{side.name} " + ", ".join(f"{t:.2f}" for t in times[work.name][side.name])
                         for side in sides)
        t = work.graded
        print(f"- {work.name}: every run (s): {runs}. JSON totals (the same on both sides, every run): "
              f"{t['passed']} all right, {t['failed']} with wrong or invalid claims; "
              f"{t['claims_right']:,} of {t['claims_total']:,} claims right.")


def main() -> None:
    """Parse the options, generate the submissions, measure and report; the temporary folder is removed."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", default=None, help="the base tree (default: a temporary worktree of --base-commit)")
    parser.add_argument("--base-commit", default=DEFAULT_BASE_COMMIT,
                        help=f"the base commit when --base is not given (default {DEFAULT_BASE_COMMIT}, "
                        "before the safety work of #17)")
    parser.add_argument("--current", default=str(REPO), help="the current tree (default: this repository)")
    parser.add_argument("--python", default=DEFAULT_PYTHON, help=f"the interpreter of both sides ({DEFAULT_PYTHON})")
    parser.add_argument("--jobs", type=int, default=2, help="gradcalc check --jobs (default 2)")
    parser.add_argument("--count", type=int, default=1000, help="submissions against the toy network (1,000); "
                        "the tensor key gets a fifth as many")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per side and workload (default 5)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="gradcalc-bench-grading-"))
    try:
        if args.base is not None:
            run(args, root)
        else:  # a worktree of the base commit, removed at the end
            with worktree(args.base_commit, root / "base") as base:
                args.base = str(base)
                run(args, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def run(args: argparse.Namespace, root: Path) -> None:
    """Generate the submissions under `root`, measure both sides and report."""
    trees = {"base": Path(args.base).resolve(), "current": Path(args.current).resolve()}
    for name, tree in trees.items():
        if not (tree / "gradcalc" / "__init__.py").is_file():
            raise SystemExit(f"--{name} {tree}: no gradcalc package there")
    neuron_key = (trees["current"] / "samples" / "neuron.eq").read_text(encoding="utf-8")
    if (trees["base"] / "samples" / "neuron.eq").read_text(encoding="utf-8") != neuron_key:
        log("note: samples/neuron.eq differs between the trees; both sides grade against the current one")
    works = [Workload("neuron", neuron_key, NEURON_CLAIMS, NEURON_BROKEN, args.count, args.seed),
             Workload("tensor", TENSOR_KEY, TENSOR_CLAIMS, TENSOR_BROKEN, max(1, args.count // 5), args.seed + 1)]
    load_before = benchkit.loadavg()
    sides = [Side(name, trees[name], args.python, root, root / "pycache") for name in SIDES]
    for side in sides:
        log(f"{side.name}: {side.module_file()}")
    for work in works:
        generate(work, root)
    times = measure(sides, works, args.jobs, args.repeats)
    report(sides, works, times, args.jobs, args.repeats, load_before)


if __name__ == "__main__":
    main()
