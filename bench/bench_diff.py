"""Symbolic derivatives: gradcalc `run.diff` against SymPy's `diff` + `cse`, in one run.

    python bench/bench_diff.py                  # full run (about 2-3 minutes on 2 cores)
    python bench/bench_diff.py --quick          # smoke run: small sizes, few repeats (~30 s)
    python bench/bench_diff.py --no-sympy       # leave SymPy out even if installed
    python bench/bench_diff.py --sympy-timeout 120 --sympy-all   # longer cap; try every N on SymPy
    python bench/bench_diff.py --profile        # cProfile of gradcalc's diff of the 2,000-statement chain
    python bench/bench_diff.py --profile --case sum-200         # ... of another case
    python bench/bench_diff.py --steps          # diff --steps on a 50-statement program (#23: under 1 s)

(d1) chain: `x = 0.5; y = x` then `y = sin(y)*0.999 + 0.01*y*y` N times (N = 500, 1000, 2000):
     ∂y/∂x. gradcalc: parse (`gradcalc.parse_program`), run (`Program.run()`) and diff
     (`run.diff(of="y", wrt=["x"])`) timed apart; the output's size (characters of the derivative's
     text plus every shared subexpression's text, names and `=` not counted), per statement: constant
     when the output is linear in the program. The digits of the names t1, t2, ... grow with log N,
     so the size is also given with every name counted as one character.
(d2) sum of products: 40 leaves a1..a20, b1..b20 (seeded values in [-2, 2]) and
     `L = a3*b7*a12 + ...`, T terms of 2-4 distinct factors each (seed 0; T = 50, 100, 200, each a
     prefix of the 200): ∂L/∂ every leaf (40 derivatives), time and total output size.
(d3) SymPy, where installed: the same expressions built with SymPy's operators (the chain by the
     same Python loop on `sympy.Symbol('x')`, the sum as `Add(*[Mul(*factors)])`), then
     `sympy.diff` and `sympy.cse` of the result (all 40 derivatives in one `cse` call for the sum),
     sizes by `sstr(..., full_prec=False)` of the cse output (right-hand sides plus results, the same
     count as gradcalc's). Each SymPy case runs in its own child process capped at --sympy-timeout
     seconds (default 60) and 4 GiB of address space; a case over the cap reads "timed out" with the
     step it was in. SymPy's diff walks the expression as a tree, so the chain costs it exponential
     time in N: once a chain size times out, larger ones are not tried (--sympy-all tries them).
     A diagnostic series at small N (2-10) shows the growth, with gradcalc at the same N.

Correctness: every printed gradcalc derivative is evaluated by gradcalc itself (a program of the
leaves' values, the `tK = ...` lines and the derivative) and compared with `run.grad` and with the
derivative's own value; SymPy's cse output is evaluated at the same leaves and compared with gradcalc.

Every workload runs in a fresh child process (this file, re-invoked with --child), gradcalc and
SymPy alternating, so one side's imports, caches and garbage never weigh on the other; this process
imports only the standard library. gradcalc: one untimed warm-up pass, then repeats of
parse + run + diff (medians). SymPy: its cache is cleared before every repeat (a warm cache would
return the previous repeat's results); as many repeats as fit a third of the cap, at most 3.
The report is Markdown on standard output, progress goes to standard error, raw numbers to
bench/out/diff.json (--json-out PATH, '' for none). Ratios are gradcalc ÷ SymPy, from this run.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import benchkit
from benchkit import REPO, fmt_time, log, med

CHAIN_STEP = "y = sin(y)*0.999 + 0.01*y*y"
CHAIN_X = 0.5
TARGET_SECONDS = 2.0
LINEAR_LIMIT = 1.25  # size per statement at the largest N ÷ at the smallest (names' digits grow a little)
TOLERANCE = 1e-9  # relative difference allowed between two evaluations of the same derivative
SYMPY_MEMORY = 4 << 30
NAME = re.compile(r"\bt\d+\b")


# --- the workloads (the same on both sides) -----------------------------------------------------

def chain_program(n: int) -> str:
    return f"x = {CHAIN_X!r}\ny = x\n" + f"{CHAIN_STEP}\n" * n


def sum_leaves() -> dict[str, float]:
    rng = random.Random(1)
    names = [f"a{i}" for i in range(1, 21)] + [f"b{i}" for i in range(1, 21)]
    return {name: round(rng.uniform(-2.0, 2.0), 3) or 0.5 for name in names}


def sum_terms(count: int) -> list[list[str]]:
    """The first `count` of one seeded stream of 200 terms: 2-4 distinct leaves each."""
    rng = random.Random(0)
    names = list(sum_leaves())
    terms = [rng.sample(names, rng.randint(2, 4)) for _ in range(max(count, 200))]
    return terms[:count]


def sum_program(count: int) -> str:
    leaves = "".join(f"{name} = {value!r}\n" for name, value in sum_leaves().items())
    return leaves + "L = " + " + ".join("*".join(term) for term in sum_terms(count)) + "\n"


def leaves_of(kind: str) -> dict[str, float]:
    return {"x": CHAIN_X} if kind == "chain" else sum_leaves()


def relative(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-300) if b else abs(a)


# --- child workloads (each runs in a fresh process) ---------------------------------------------

def child_gradcalc(kind: str, size: int, reps: int) -> dict[str, Any]:
    import gradcalc

    text = chain_program(size) if kind == "chain" else sum_program(size)
    of, wrt = ("y", ["x"]) if kind == "chain" else ("L", None)

    def once() -> tuple[float, float, float, Any, list[Any]]:
        gc.collect()
        t0 = time.perf_counter()
        program = gradcalc.parse_program(text)
        t1 = time.perf_counter()
        run = program.run()
        t2 = time.perf_counter()
        results = run.diff(of=of, wrt=wrt)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, run, results

    once()  # warm-up: lazy imports, the grammar
    times: dict[str, list[float]] = {"parse": [], "run": [], "diff": []}
    for _ in range(reps):
        parse, run_s, diff, run, results = once()
        times["parse"].append(parse)
        times["run"].append(run_s)
        times["diff"].append(diff)
    size_chars = sum(len(d.text) + sum(len(w[1]) for w in d.where) for d in results)
    size_names_as_one = sum(len(NAME.sub("t", d.text)) + sum(len(NAME.sub("t", w[1])) for w in d.where)
                            for d in results)
    # correctness (untimed): the printed text, evaluated by gradcalc, against run.grad and .value
    grads = run.grad(of=of, wrt=wrt).grads
    leaves = "".join(f"{name} = {value!r}\n" for name, value in leaves_of(kind).items())
    printed_err = value_err = 0.0
    values: dict[str, float] = {}
    for d in results:
        (name,) = d.wrt
        expected = float(grads[name])
        source = leaves + "".join(f"{w[0]} = {w[1]}\n" for w in d.where) + f"d__ = {d.text}\n"
        printed = float(gradcalc.parse_program(source).run().value("d__"))
        printed_err = max(printed_err, relative(printed, expected))
        value_err = max(value_err, relative(float(d.value), expected))
        values[name] = expected
    log(f"    gradcalc {kind} {size}: diff {fmt_time(statistics.median(times['diff']))}, "
        f"{size_chars:,} chars, printed vs grad {printed_err:.1e} ({reps} repeats)")
    return {"times": times, "reps": reps, "size": size_chars, "size_names_as_one": size_names_as_one,
            "shared": sum(len(d.where) for d in results), "derivatives": len(results),
            "program_chars": len(text), "printed_vs_grad": printed_err, "value_vs_grad": value_err,
            "evaluable": all(d.evaluable for d in results), "values": values, "version": gradcalc.__version__}


def sympy_chain(sympy: Any, n: int) -> tuple[Any, list[Any]]:
    x = sympy.Symbol("x")
    y = x
    for _ in range(n):
        y = sympy.sin(y) * 0.999 + 0.01 * y * y
    return y, [x]


def sympy_sum(sympy: Any, count: int) -> tuple[Any, list[Any]]:
    symbols = {name: sympy.Symbol(name) for name in sum_leaves()}
    total = sympy.Add(*[sympy.Mul(*[symbols[name] for name in term]) for term in sum_terms(count)])
    return total, list(symbols.values())


def child_sympy(kind: str, size: int, budget: float, progress: str) -> dict[str, Any]:
    """Build, diff and cse, repeated while a third of the budget lasts (at most 3 times). Each step's
    start and end is appended to the file `progress`, so a parent that kills us knows where we were."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (SYMPY_MEMORY, SYMPY_MEMORY))
    sys.setrecursionlimit(1_000_000)  # the chain nests N deep; SymPy recurses several frames a level
    threading.stack_size(1 << 30)
    out: dict[str, Any] = {}

    def mark(text: str) -> None:
        with open(progress, "a", encoding="utf-8") as handle:
            handle.write(text + "\n")

    def work() -> None:
        import sympy
        from sympy.core.cache import clear_cache

        out["version"] = sympy.__version__
        times: dict[str, list[float]] = {"build": [], "diff": [], "cse": []}
        start = time.perf_counter()
        while True:
            clear_cache()
            gc.collect()
            mark("build")
            t0 = time.perf_counter()
            expr, wrt = (sympy_chain if kind == "chain" else sympy_sum)(sympy, size)
            t1 = time.perf_counter()
            mark(f"diff {t1 - t0}")
            derivatives = [sympy.diff(expr, symbol) for symbol in wrt]
            t2 = time.perf_counter()
            mark(f"cse {t2 - t1}")
            replacements, reduced = sympy.cse(derivatives)
            t3 = time.perf_counter()
            mark(f"done {t3 - t2}")
            for key, value in zip(times, (t1 - t0, t2 - t1, t3 - t2)):
                times[key].append(value)
            elapsed = time.perf_counter() - start
            if len(times["diff"]) >= 3 or elapsed + (t3 - t0) > budget / 3:
                break
        # sizes and values (untimed)
        show = lambda e: sympy.sstr(e, full_prec=False)  # 0.999 rather than 0.999000000000000
        out["size"] = sum(len(show(e)) for _, e in replacements) + sum(len(show(e)) for e in reduced)
        out["shared"] = len(replacements)
        joint = out["size"]
        if len(derivatives) > 1:  # diagnostic: cse of each derivative alone, as gradcalc shares
            alone = [sympy.cse(d) for d in derivatives]
            out["size_one_at_a_time"] = sum(sum(len(show(e)) for _, e in r) + sum(len(show(e)) for e in s)
                                            for r, s in alone)
        point = {sympy.Symbol(name): sympy.Float(value) for name, value in leaves_of(kind).items()}
        for symbol, e in replacements:
            point[symbol] = e.xreplace(point).evalf()
        out["values"] = {str(symbol): float(e.xreplace(point).evalf()) for symbol, e in zip(wrt, reduced)}
        out["times"], out["reps"], out["joint_size"] = times, len(times["diff"]), joint

    def guarded() -> None:
        try:
            work()
        except (RecursionError, MemoryError) as exc:
            out["error"] = type(exc).__name__

    thread = threading.Thread(target=guarded)
    thread.start()
    thread.join()
    return out


def child_main(args: list[str]) -> None:
    kind, side, rest = args[0], args[1], args[2:]
    if side == "gradcalc":
        result = child_gradcalc(kind, int(rest[0]), int(rest[1]))
    else:
        result = child_sympy(kind, int(rest[0]), float(rest[1]), rest[2])
    benchkit.emit_result(result)


def run_child(*args: Any, timeout: float) -> dict[str, Any]:
    """A workload in a fresh process; on timeout, {"timed_out": step it was in, "steps": finished}."""
    with tempfile.NamedTemporaryFile("r", suffix=".progress", encoding="utf-8") as progress:
        command = benchkit.child_command(__file__, *args)
        if args[1] == "sympy":
            command.append(progress.name)
        with tempfile.TemporaryFile("w+", encoding="utf-8") as stdout:
            child = subprocess.Popen(command, cwd=REPO, stdout=stdout, text=True)
            try:
                child.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                child.kill()  # our own child, by its id
                child.wait()
                steps = progress.read().split()
                finished = {name: float(seconds) for name, seconds in
                            zip(["build", "diff", "cse"], [s for s in steps if s[0].isdigit()])}
                words = [s for s in steps if not s[0].isdigit()]
                where = words[-1] if words else "start-up"
                where = "the sizes, the values or a further repeat" if where == "done" else where
                return {"timed_out": where, "steps": finished, "cap": timeout}
            stdout.seek(0)
            text = stdout.read()
    result = benchkit.read_result(text) if child.returncode == 0 else None
    if result is None:
        return {"failed": f"exit status {child.returncode}", "tail": text[-1000:]}
    return result


# --- report -------------------------------------------------------------------------------------

def total(side: dict[str, Any], keys: tuple[str, ...]) -> float:
    """Median of the per-repeat sums (the steps of one repeat belong together)."""
    return med([sum(step) for step in zip(*(side["times"][k] for k in keys))])


def sympy_state(got: dict[str, Any] | None) -> str | None:
    """None when SymPy finished, else why not, in words."""
    if got is None:
        return "not run"
    if "skipped" in got:
        return got["skipped"]
    if "timed_out" in got:
        done = ", ".join(f"{k} {fmt_time(v)}" for k, v in got["steps"].items())
        return f"timed out in {got['timed_out']} (> {got['cap']:.0f} s{'; ' + done if done else ''})"
    if "error" in got:
        return f"failed: {got['error']}"
    if "failed" in got:
        return f"failed: {got['failed']}"
    return None


def agreement(g: dict[str, Any], s: dict[str, Any] | None) -> float | None:
    if s is None or sympy_state(s) is not None:
        return None
    return max(relative(s["values"][name], value) for name, value in g["values"].items())


def report(results: dict[str, Any]) -> tuple[str, bool]:
    env = results["env"]
    unit = {"chain": "statements", "sum": "terms"}
    lines = [
        f"### Symbolic derivative benchmark (`gradcalc diff`) — {'quick smoke run' if env['quick'] else 'full run'}, "
        f"{env['date']}",
        "",
        f"gradcalc {env['gradcalc']} (`{env['commit']}`), SymPy {env['sympy'] or 'not used'}, Python {env['python']}, "
        f"{env['cpus']} CPUs ({env['machine']}), load average {env['load_before']} before and "
        f"{env.get('load_after', '?')} after ({env.get('wall_s', '?')} s). gradcalc times are medians of "
        f"{env['reps']} repeats after a warm-up; SymPy's of as many as fit (column `n`), each case capped at "
        f"{env['sympy_timeout']:.0f} s. Output size = characters of the derivative's text plus every shared "
        "subexpression's text (names and `=` not counted); for SymPy, `sstr(..., full_prec=False)` of cse's "
        "right-hand sides plus its results.",
        "",
        "#### gradcalc",
        "",
        "| case | parse | run | diff | parse + run + diff | < 2 s | output chars | per statement or term "
        "| same, names as 1 char | shared tK | output ÷ program | printed = grad |",
        "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|",
    ]
    all_ok = True
    for case in results["cases"]:
        g = case["gradcalc"]
        full = total(g, ("parse", "run", "diff"))
        fast = full < TARGET_SECONDS
        ok = g["printed_vs_grad"] <= TOLERANCE and g["value_vs_grad"] <= TOLERANCE and g["evaluable"]
        all_ok &= ok
        lines.append(
            f"| {case['kind']} {case['size']:,} {unit[case['kind']]} | {fmt_time(med(g['times']['parse']))} "
            f"| {fmt_time(med(g['times']['run']))} | {fmt_time(med(g['times']['diff']))} | {fmt_time(full)} "
            f"| {'**yes**' if fast else 'no'} | {g['size']:,} | {g['size'] / case['size']:.1f} "
            f"| {g['size_names_as_one'] / case['size']:.1f} | {g['shared']:,} | {g['size'] / g['program_chars']:.2f} "
            f"| {'yes' if ok else '**NO**'} ({max(g['printed_vs_grad'], g['value_vs_grad']):.0e}) |")
    lines.append("")
    for kind in ("chain", "sum"):
        rows = [c for c in results["cases"] if c["kind"] == kind]
        if len(rows) < 2:
            continue
        first, last = rows[0], rows[-1]
        per = [c["gradcalc"]["size"] / c["size"] for c in (first, last)]
        per_one = [c["gradcalc"]["size_names_as_one"] / c["size"] for c in (first, last)]
        growth, growth_one = per[1] / per[0], per_one[1] / per_one[0]
        time_per = [total(c["gradcalc"], ("diff",)) / c["size"] for c in (first, last)]
        lines.append(
            f"- {kind}: output per {unit[kind][:-1]} at {last['size']:,} ÷ at {first['size']:,}: {growth:.2f} "
            f"(names as 1 char: {growth_one:.2f}; target ≤ {LINEAR_LIMIT}: "
            f"{'**linear**' if growth <= LINEAR_LIMIT else 'not linear'}); diff time per {unit[kind][:-1]}: "
            f"{fmt_time(time_per[0])} → {fmt_time(time_per[1])} ({time_per[1] / time_per[0]:.2f}×)")
    if env["sympy"]:
        lines += [
            "",
            "#### SymPy on the same expressions",
            "",
            "| case | SymPy build | diff | cse | diff + cse | n | cse output chars | gradcalc diff ÷ SymPy "
            "diff + cse | gradcalc parse+run+diff ÷ SymPy build+diff+cse | output gradcalc ÷ SymPy "
            "| values agree |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        ]
        for case in results["cases"] + results["small"]:
            g, s = case["gradcalc"], case.get("sympy")
            label = f"{case['kind']} {case['size']:,}" + (" (diagnostic)" if case in results["small"] else "")
            state = sympy_state(s)
            if state is not None:
                bound = ""
                if s is not None and "timed_out" in s:
                    bound = f"< {med(g['times']['diff']) / s['cap']:.1e}× (diff ÷ cap)"
                lines.append(f"| {label} | {state} | | | | | | {bound} | | | |")
                continue
            t = s["times"]
            diff_cse = total(s, ("diff", "cse"))
            err = agreement(g, s)
            agree = err is not None and err <= TOLERANCE
            all_ok &= agree
            one = f" (one at a time: {s['size_one_at_a_time']:,})" if "size_one_at_a_time" in s else ""
            lines.append(
                f"| {label} | {fmt_time(med(t['build']))} | {fmt_time(med(t['diff']))} | {fmt_time(med(t['cse']))} "
                f"| {fmt_time(diff_cse)} | {s['reps']} | {s['size']:,}{one} "
                f"| {med(g['times']['diff']) / diff_cse:.2g}× "
                f"| {total(g, ('parse', 'run', 'diff')) / total(s, ('build', 'diff', 'cse')):.2g}× "
                f"| {g['size'] / s['size']:.2f}× | {'yes' if agree else '**NO**'} ({err:.0e}) |")
        small = [c for c in results["small"] if sympy_state(c.get("sympy")) is None]
        if len(small) >= 2:
            a, b = small[1 if len(small) > 2 else 0], small[-1]
            step = b["size"] - a["size"]
            grow = (total(b["sympy"], ("diff", "cse")) / total(a["sympy"], ("diff", "cse"))) ** (1 / step)
            lines += ["", f"- SymPy's diff + cse on the chain grows {grow:.2f}× per statement from N = {a['size']} "
                          f"to {b['size']} (exponential, as from re-walking each shared subexpression once per use); "
                          f"its cse output: {a['sympy']['size'] / a['size']:.0f} → "
                          f"{b['sympy']['size'] / b['size']:.0f} chars per statement."]
    else:
        lines += ["", "SymPy not installed (or --no-sympy): no comparison columns."]
    lines += ["", f"All checks passed: {'yes' if all_ok else '**NO**'} (relative tolerance {TOLERANCE:g})."]
    return "\n".join(lines), all_ok


# --- main ---------------------------------------------------------------------------------------

def environment(quick: bool, reps: int, sympy: str | None, cap: float) -> dict[str, Any]:
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True,
                                text=True, check=False).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, check=False).stdout.strip()
        commit += "+dirty" if dirty else ""
    except OSError:
        commit = "?"
    return {"quick": quick, "date": time.strftime("%Y-%m-%d %H:%M"), "commit": commit, "reps": reps,
            "gradcalc": "?", "sympy": sympy, "sympy_timeout": cap, "python": platform.python_version(),
            "cpus": os.cpu_count(), "machine": platform.machine(),
            "load_before": benchkit.loadavg()}


def profile(case: str) -> None:
    import cProfile
    import io
    import pstats

    import gradcalc

    kind, size = case.split("-")
    text = chain_program(int(size)) if kind == "chain" else sum_program(int(size))
    of, wrt = ("y", ["x"]) if kind == "chain" else ("L", None)
    gradcalc.parse_program(text).run().diff(of=of, wrt=wrt)  # warm-up
    run = gradcalc.parse_program(text).run()
    profiler = cProfile.Profile()
    profiler.enable()
    run.diff(of=of, wrt=wrt)
    profiler.disable()
    print(f"### cProfile of `run.diff` — {kind} {int(size):,} ({time.strftime('%Y-%m-%d')})\n")
    for order in ("tottime", "cumulative"):
        buffer = io.StringIO()
        pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(order).print_stats(10)
        body = buffer.getvalue().strip().splitlines()
        start = next(i for i, line in enumerate(body) if "function calls" in line)
        print(f"Top 10 by {order}:\n\n```\n" + "\n".join(body[start:]) + "\n```\n")


STEPS_STATEMENTS = 50
STEPS_LIMIT = 1.0  # seconds: #23's target for --steps on a 50-statement program


def steps_program(n: int = STEPS_STATEMENTS) -> str:
    """x, then a chain of n - 1 statements that each read the one before and x (n - 1 paths), then y."""
    return "\n".join(["x = 0.5", "a1 = sin(x) + x^2"] +
                      [f"a{k} = tanh(a{k - 1})*0.9 + 0.05*a{k - 1}^2 + 0.01*x*a{k - 1}" for k in range(2, n - 1)] +
                      [f"y = a{n - 2}^2"]) + "\n"


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes: a loaded machine's wall time is mostly waiting."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def bench_steps(reps: int) -> None:
    """parse + run + Run.steps in-process (wall and CPU, medians after a warm-up), and the whole command."""
    import gradcalc

    text = steps_program()
    walls, cpus = [], []
    for i in range(reps + 1):
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        found, answer = gradcalc.parse_program(text).run().steps("y", "x")
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        if i:  # the first pays the lazy imports: the command's own row below counts them
            walls.append(wall)
            cpus.append(cpu)
    run = gradcalc.parse_program(text).run()
    assert abs(float(run.grad("y", ["x"]).grads["x"]) - float(answer.value)) <= 1e-12 * abs(float(answer.value))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "chain50.eq"
        path.write_text(text)
        command = [sys.executable, "-m", "gradcalc", "diff", str(path), "--wrt", "x", "--steps", "--json"]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        cold, cold_cpu = [], []
        for _ in range(reps):
            c0, u0 = time.perf_counter(), _children_cpu()
            subprocess.run(command, check=True, capture_output=True, env=env)
            cold.append(time.perf_counter() - c0)
            cold_cpu.append(_children_cpu() - u0)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"diff --steps, {STEPS_STATEMENTS} statements ({len(found.steps)} steps), load average {load:.1f}, "
          f"median of {reps}:\n")
    print("| measure | wall | CPU |\n| --- | --- | --- |")
    print(f"| parse + run + steps, in-process | {fmt_time(med(walls))} | {fmt_time(med(cpus))} |")
    print(f"| `gradcalc diff --steps --json`, a fresh process (imports included) | {fmt_time(med(cold))} | "
          f"{fmt_time(med(cold_cpu))} |")
    verdict = "met" if med(cpus) < STEPS_LIMIT else "NOT met"
    print(f"\nTarget (under {STEPS_LIMIT:g} s in-process): {verdict}.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats")
    parser.add_argument("--no-sympy", action="store_true", help="leave SymPy out even if installed")
    parser.add_argument("--sympy-timeout", type=float, default=60.0, help="cap per SymPy case, seconds")
    parser.add_argument("--sympy-all", action="store_true", help="try every chain size on SymPy")
    parser.add_argument("--profile", action="store_true", help="cProfile tables instead of timings")
    parser.add_argument("--case", default="chain-2000", help="the case --profile looks at (chain-N, sum-T)")
    parser.add_argument("--json-out", default=str(REPO / "bench" / "out" / "diff.json"))
    parser.add_argument("--steps", action="store_true", help="diff --steps on a 50-statement program")
    args = benchkit.parse_args_or_run_child(parser, child_main)
    if args.steps:
        bench_steps(3 if args.quick else 5)
        return
    if args.profile:
        profile(args.case)
        return
    quick = args.quick
    chains = (100, 200, 500) if quick else (500, 1000, 2000)
    sums = (50, 100, 200)
    small = (2, 4, 6) if quick else (2, 4, 6, 8, 10)
    reps = 3 if quick else 5
    cap = min(args.sympy_timeout, 20.0) if quick else args.sympy_timeout
    has_sympy = not args.no_sympy and importlib.util.find_spec("sympy") is not None
    sympy_version = None
    if has_sympy:
        sympy_version = subprocess.run([sys.executable, "-c", "import sympy; print(sympy.__version__)"],
                                       capture_output=True, text=True, check=False).stdout.strip() or "?"
    env = environment(quick, reps, sympy_version, cap)
    results: dict[str, Any] = {"env": env, "cases": [], "small": []}
    t0 = time.perf_counter()
    chain_timed_out = False
    plan = [("chain", n, "cases") for n in chains] + [("sum", t, "cases") for t in sums] + \
           [("chain", n, "small") for n in small]
    for kind, size, group in plan:
        log(f"  {kind} {size} ({group})")
        case: dict[str, Any] = {"kind": kind, "size": size}
        case["gradcalc"] = run_child(kind, "gradcalc", size, reps, timeout=600)
        if "failed" in case["gradcalc"] or "timed_out" in case["gradcalc"]:
            raise SystemExit(f"gradcalc {kind} {size} did not finish: {case['gradcalc']}")
        env["gradcalc"] = case["gradcalc"]["version"]
        if has_sympy:
            if kind == "chain" and group == "cases" and chain_timed_out and not args.sympy_all:
                case["sympy"] = {"skipped": "not run: a smaller chain already timed out (--sympy-all runs it)"}
            else:
                case["sympy"] = run_child(kind, "sympy", size, cap, timeout=cap)
                state = sympy_state(case["sympy"])
                done = state or (f"diff + cse {fmt_time(total(case['sympy'], ('diff', 'cse')))}, "
                                 f"{case['sympy']['size']:,} chars")
                log(f"    SymPy    {kind} {size}: {done}")
                if kind == "chain" and group == "cases" and state is not None:
                    chain_timed_out = True
        results[group].append(case)
    env["wall_s"] = round(time.perf_counter() - t0)
    env["load_after"] = benchkit.loadavg()
    text, ok = report(results)
    print(text)
    if args.json_out:
        path = Path(args.json_out)
        benchkit.write_json(path, results)
        log(f"raw numbers: {path}")
    if not ok:
        sys.exit(1)


if __name__ == "__main__":
    main()
