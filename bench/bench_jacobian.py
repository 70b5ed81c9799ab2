"""Jacobian and Hessian benchmark: gradcalc against PyTorch (CPU, float64, 2 threads), in one run.

    python bench/bench_jacobian.py            # full run (about 2 minutes on 2 cores)
    python bench/bench_jacobian.py --quick    # smoke run: small sizes, few repeats
    python bench/bench_jacobian.py --profile  # cProfile of the slowest gradcalc case instead
    python bench/bench_jacobian.py --profile --case 'Hessian n=500'  # ... of another case

(j) the Jacobian of `y = tanh(W @ x + b)` with respect to x (W n×n, x and b of size n; n = 100 and
    1000): gradcalc `run.jacobian(of="y", wrt=["x"], mode=...)` for mode = auto, rev and fwd, timed
    alone (on a run made just before, outside the timing) and together with the run that precedes
    it; against `torch.func.jacrev(f)(x)` with f(x) = tanh(W @ x + b).
(h) the Hessian of `L = sum(x^4) + sum(x[:-1] * x[1:])` with respect to x (n = 100 and 500):
    gradcalc `run.hessian(of="L", wrt=["x"])`, alone and with its run; against
    `torch.autograd.functional.hessian(f, x, vectorize=True)`, and `vectorize=False` (a Python loop of
    VJPs) as a diagnostic. The reference is PyTorch's best of the two.

The inputs are seeded NumPy draws, made the same way on both sides (PyTorch gets them through
`torch.from_numpy`). Before any timing, one child process computes every result on both sides and
checks that they agree with each other and with the closed form. Every timed workload runs in its own
child process (this file, re-invoked with --child), one side at a time, so one side's imports and
garbage never weigh on the other's timing; this process imports only the standard library. The whole
set runs in two rounds, sides in alternating order. Times are medians over repeats (minima shown too);
ratios compare numbers from the same run. Around each child the CPU time that other processes took is
measured (/proc/stat): on 2 CPUs, PyTorch's 2-thread calls stall whenever another process holds a CPU.
The report is Markdown on standard output, progress goes to standard error, and the raw numbers are
written as JSON to bench/out/jacobian.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import statistics
import sys
import time
from typing import Any

import benchkit
from benchkit import REPO, log, med, ratio_text, verdict

JAC_PROGRAM = "W = 0\nx = 0\nb = 0\ny = tanh(W @ x + b)"
HESS_PROGRAM = "x = 0\nL = sum(x^4) + sum(x[:-1] * x[1:])"
MODES = ("auto", "rev", "fwd")
TORCH_HESS = ("vectorize=True", "vectorize=False")
# PyTorch times measured earlier on this machine, printed next to this run's for scale.
ANCHORS = {("jac", 100): 0.85e-3, ("jac", 1000): 40e-3, ("hess", 100): 0.96e-3, ("hess", 500): 2.4e-3}
TOLERANCE = 1e-10  # max |difference| allowed, relative to max(1, max |closed form|)


# --- inputs (the same on both sides) -----------------------------------------------------------

def jac_inputs(n: int) -> tuple[Any, Any, Any]:
    """W (n×n, scaled by 1/√n so that tanh stays off saturation), x and b: standard normals, seed n."""
    import numpy

    rng = numpy.random.default_rng(n)
    W = rng.standard_normal((n, n)) / math.sqrt(n)
    return W, rng.standard_normal(n), rng.standard_normal(n)


def hess_inputs(n: int) -> Any:
    import numpy

    return numpy.random.default_rng(n).standard_normal(n)


def fingerprint(*arrays: Any) -> float:
    return float(sum(float(a.sum()) for a in arrays))


def jac_closed_form(W: Any, x: Any, b: Any) -> Any:
    import numpy

    return (1 - numpy.tanh(W @ x + b) ** 2)[:, None] * W


def hess_closed_form(x: Any) -> Any:
    import numpy

    off = numpy.ones(len(x) - 1)
    return numpy.diag(12 * x * x) + numpy.diag(off, 1) + numpy.diag(off, -1)


def torch_jac_function(torch: Any, n: int) -> tuple[Any, Any]:
    W, x, b = (torch.from_numpy(a) for a in jac_inputs(n))
    return (lambda v: torch.tanh(W @ v + b)), x


def torch_hess_function(torch: Any, n: int) -> tuple[Any, Any]:
    return (lambda v: (v**4).sum() + (v[:-1] * v[1:]).sum()), torch.from_numpy(hess_inputs(n))


def repeats(one_pass: float, budget: float, low: int, high: int) -> int:
    """As many repeats as fit the time budget, within [low, high]."""
    return max(low, min(high, int(budget / max(one_pass, 1e-9))))


# --- child workloads (each runs in a fresh process) ---------------------------------------------

def child_check(jac_sizes: list[int], hess_sizes: list[int], with_torch: bool) -> dict[str, Any]:
    """Every result once, on both sides in this one process (untimed): max |difference|."""
    import numpy

    import gradcalc

    torch = benchkit.import_torch() if with_torch else None
    out: dict[str, Any] = {"jac": {}, "hess": {}}
    for n in jac_sizes:
        W, x, b = jac_inputs(n)
        exact = jac_closed_form(W, x, b)
        run = gradcalc.parse_program(JAC_PROGRAM).run(values={"W": W, "x": x, "b": b})
        found = {mode: run.jacobian(of="y", wrt=["x"], mode=mode) for mode in MODES}
        item: dict[str, Any] = {"scale": float(max(1.0, numpy.abs(exact).max())), "auto_mode": found["auto"].mode,
                                "shape": list(found["auto"].blocks[0].shape)}
        reference = exact
        if torch is not None:
            f, xt = torch_jac_function(torch, n)
            reference = torch.func.jacrev(f)(xt).numpy()
            item["torch_vs_exact"] = float(numpy.abs(reference - exact).max())
        for mode, result in found.items():
            item[f"{mode}_vs_exact"] = float(numpy.abs(result.blocks[0] - exact).max())
            item[f"{mode}_vs_torch"] = float(numpy.abs(result.blocks[0] - reference).max()) if torch else None
        out["jac"][str(n)] = item
        log(f"    check jacobian n={n}: " + ", ".join(f"{k} {v:.1e}" for k, v in item.items()
                                                      if k.endswith(("_exact", "_torch")) and v is not None))
    for n in hess_sizes:
        x = hess_inputs(n)
        exact = hess_closed_form(x)
        block = gradcalc.parse_program(HESS_PROGRAM).run(values={"x": x}).hessian(of="L", wrt=["x"]).blocks[0][0]
        item = {"scale": float(max(1.0, numpy.abs(exact).max())), "shape": list(block.shape),
                "gradcalc_vs_exact": float(numpy.abs(block - exact).max())}
        if torch is not None:
            f, xt = torch_hess_function(torch, n)
            for label in TORCH_HESS:
                got = torch.autograd.functional.hessian(f, xt, vectorize=label == "vectorize=True").numpy()
                item[f"torch {label}_vs_exact"] = float(numpy.abs(got - exact).max())
                item[f"gradcalc_vs_torch {label}"] = float(numpy.abs(block - got).max())
        out["hess"][str(n)] = item
        log(f"    check hessian n={n}: " + ", ".join(f"{k} {v:.1e}" for k, v in item.items()
                                                     if "_vs_" in k))
    return out


def child_jac_gradcalc(n: int, budget: float, low: int, high: int) -> dict[str, Any]:
    import gradcalc

    W, x, b = jac_inputs(n)
    values = {"W": W, "x": x, "b": b}
    t0 = time.perf_counter()
    program = gradcalc.parse_program(JAC_PROGRAM)
    parse = time.perf_counter() - t0

    def once(mode: str) -> tuple[float, float, str]:
        t0 = time.perf_counter()
        run = program.run(values=values)
        t1 = time.perf_counter()
        result = run.jacobian(of="y", wrt=["x"], mode=mode)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, result.mode

    warm = {mode: once(mode) for mode in MODES}  # warm-up: lazy imports, caches; sizes the repeats
    reps = repeats(sum(r + j for r, j, _ in warm.values()), budget, low, high)
    out: dict[str, Any] = {"parse": [parse], "reps": reps, "auto_mode": warm["auto"][2],
                           "fingerprint": fingerprint(W, x, b), "version": gradcalc.__version__}
    times: dict[str, dict[str, list[float]]] = {mode: {"run": [], "jac": []} for mode in MODES}
    gc.collect()
    for rep in range(reps):  # modes interleaved, order alternating, so drift reaches each alike
        for mode in MODES if rep % 2 == 0 else reversed(MODES):
            run_s, jac_s, _ = once(mode)
            times[mode]["run"].append(run_s)
            times[mode]["jac"].append(jac_s)
    out["times"] = times
    log(f"    gradcalc jacobian n={n}: " + ", ".join(
        f"{mode} {fmt_time(statistics.median(t['jac']))}" for mode, t in times.items()) + f" ({reps} repeats)")
    return out


def child_jac_torch(n: int, budget: float, low: int, high: int) -> dict[str, Any]:
    torch = benchkit.import_torch()
    f, xt = torch_jac_function(torch, n)

    def once() -> float:
        t0 = time.perf_counter()
        torch.func.jacrev(f)(xt)
        return time.perf_counter() - t0

    warm = [once(), once()]
    reps = repeats(warm[-1], budget, low, high)
    gc.collect()
    times = [once() for _ in range(reps)]
    log(f"    PyTorch  jacrev   n={n}: {fmt_time(statistics.median(times))} ({reps} repeats)")
    return {"jacrev": times, "reps": reps, "fingerprint": fingerprint(*jac_inputs(n)), "version": torch.__version__,
            "threads": torch.get_num_threads()}


def child_hess_gradcalc(n: int, budget: float, low: int, high: int) -> dict[str, Any]:
    import gradcalc

    x = hess_inputs(n)
    program = gradcalc.parse_program(HESS_PROGRAM)

    def once() -> tuple[float, float]:
        t0 = time.perf_counter()
        run = program.run(values={"x": x})
        t1 = time.perf_counter()
        run.hessian(of="L", wrt=["x"])
        return t1 - t0, time.perf_counter() - t1

    warm = [once(), once()]
    reps = repeats(sum(warm[-1]), budget, low, high)
    runs, hess = [], []
    gc.collect()
    for _ in range(reps):
        run_s, hess_s = once()
        runs.append(run_s)
        hess.append(hess_s)
    log(f"    gradcalc hessian  n={n}: {fmt_time(statistics.median(hess))} ({reps} repeats)")
    return {"run": runs, "hess": hess, "reps": reps, "fingerprint": fingerprint(x)}


def child_hess_torch(n: int, budget: float, low: int, high: int) -> dict[str, Any]:
    torch = benchkit.import_torch()
    f, xt = torch_hess_function(torch, n)

    def once(label: str) -> float:
        t0 = time.perf_counter()
        torch.autograd.functional.hessian(f, xt, vectorize=label == "vectorize=True")
        return time.perf_counter() - t0

    for label in TORCH_HESS:
        once(label)
    reps = repeats(sum(once(label) for label in TORCH_HESS), budget, low, high)
    times: dict[str, list[float]] = {label: [] for label in TORCH_HESS}
    gc.collect()
    for rep in range(reps):
        for label in TORCH_HESS if rep % 2 == 0 else reversed(TORCH_HESS):
            times[label].append(once(label))
    log(f"    PyTorch  hessian  n={n}: " + ", ".join(
        f"{label} {fmt_time(statistics.median(t))}" for label, t in times.items()) + f" ({reps} repeats)")
    return {"times": times, "reps": reps, "fingerprint": fingerprint(hess_inputs(n))}


def run_child(*args: Any, timeout: float = 600) -> dict[str, Any]:
    """Run a workload in a fresh process; adds `others_cores`: how many CPUs other processes kept
    busy on average meanwhile (machine busy time minus the child's own CPU time, ÷ wall time)."""
    command = benchkit.child_command(__file__, *args)
    watch = benchkit.CpuWatch()
    done = benchkit.start_child(command, timeout)
    _, _, others = watch.stop()
    result = benchkit.child_result(command, done)
    if others is not None:
        result["others_cores"] = [others]
    return result


def child_main(args: list[str]) -> None:
    kind, rest = args[0], args[1:]
    if kind == "check":
        sizes = json.loads(rest[0])
        result = child_check(sizes["jac"], sizes["hess"], rest[1] == "1")
    elif kind == "profile-time":
        result = child_profile_time(rest[0], int(rest[1]), rest[2])
    elif kind == "profile-run":
        result = child_profile_run(rest[0], int(rest[1]), rest[2], float(rest[3]))
    else:
        workloads = {"jac-gradcalc": child_jac_gradcalc, "jac-torch": child_jac_torch,
                     "hess-gradcalc": child_hess_gradcalc, "hess-torch": child_hess_torch}
        if kind not in workloads:
            raise SystemExit(f"unknown child {kind}")
        result = workloads[kind](int(rest[0]), float(rest[1]), int(rest[2]), int(rest[3]))
    benchkit.emit_result(result)


# --- report -------------------------------------------------------------------------------------

def fmt_time(seconds: float | None) -> str:
    """Times in this report: ms to 2 decimals, µs to none."""
    return benchkit.fmt_time(seconds, digits=2)


def side_name(key: str) -> str:
    """The names used in the check's keys, in words."""
    if key in MODES:
        return f"gradcalc mode={key}"
    if key.startswith("torch "):
        return f"PyTorch hessian {key.removeprefix('torch ')}"
    return {"gradcalc": "gradcalc", "torch": "PyTorch jacrev", "exact": "closed form"}[key]


def check_rows(check: dict[str, Any]) -> tuple[list[str], bool]:
    lines = ["| case | compared | max \\|difference\\| | agree |", "|---|---|---|---|"]
    all_ok = True
    for section, label in (("jac", "Jacobian"), ("hess", "Hessian")):
        for n, item in check.get(section, {}).items():
            for key, value in item.items():
                if "_vs_" not in key or value is None:
                    continue
                ok = value <= TOLERANCE * item["scale"]
                all_ok &= ok
                a, b = key.split("_vs_")
                lines.append(f"| {label} n={n} | {side_name(a)} vs {side_name(b)} | {value:.1e} "
                             f"| {'yes' if ok else '**NO**'} |")
    return lines, all_ok


def report(results: dict[str, Any]) -> tuple[str, bool]:
    env = results["env"]
    timed = [side for section in ("jac", "hess") for item in results.get(section, {}).values()
             for side in item.values()]
    others = [v for side in timed for v in side.get("others_cores", [])]
    others_text = (f"other processes kept {statistics.mean(others):.2f} of the {env['cpus']} CPUs busy on average "
                   f"during the timed children (most in one child: {max(others):.2f})") if others else \
        "other processes' CPU use not measured (no /proc/stat)"
    lines = [
        f"### Jacobian and Hessian benchmark — {'quick smoke run' if env['quick'] else 'full run'}, {env['date']}",
        "",
        f"gradcalc {env['gradcalc']} (`{env['commit']}`), PyTorch "
        + (f"{env['torch']} (CPU, float64, {env['torch_threads']} threads)" if env["torch"] else "not used")
        + f", NumPy {env['numpy']}, Python {env['python']}, "
        f"{env['cpus']} CPUs ({env['machine']}), load average {env['load_before']} before and "
        f"{env.get('load_after', '?')} after ({env.get('wall_s', '?')} s); {others_text}. Times are medians over "
        f"all repeats of {env['rounds']} round(s), each side alone in its own processes. Ratio = gradcalc ÷ "
        "PyTorch's best, both from this run; in brackets each side's minimum ÷ the other's lowest "
        "minimum (less sensitive to other processes, see below); \"met\" judges the medians.",
        "",
        "| # | measure | gradcalc | PyTorch (best) | ratio (of minima) | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    details: list[str] = []
    torch_lines: list[str] = []

    def row(key: str, measure: str, values: list[float], refs: dict[str, list[float]] | None) -> None:
        """refs: PyTorch's variants; the best by median for the ratio, the lowest minimum for the other."""
        value = med(values)
        ref = min(refs.items(), key=lambda kv: med(kv[1])) if refs else None
        ratio = value / med(ref[1]) if ref else None
        ratio_min = min(values) / min(min(v) for v in refs.values()) if refs else None
        met = verdict(ratio, 1.0)
        if ref and verdict(ratio_min, 1.0) != met:
            met += f" (minima: {verdict(ratio_min, 1.0).strip('*')})"
        reference = f"{fmt_time(med(ref[1]))} ({ref[0]})" if ref else "n/a"
        shown = f"{ratio_text(ratio)} ({ratio_text(ratio_min)})" if ref else "n/a"
        lines.append(f"| {key} | {measure} | {fmt_time(value)} | {reference} | {shown} | ≤ 1.0× | {met} |")

    def series(workload: str, side: str, what: str, values: list[float], reps: int, got: dict[str, Any]) -> None:
        busy = got.get("others_cores")
        details.append(f"| {workload} | {side} | {what} | {fmt_time(med(values))} | {fmt_time(min(values))} "
                       f"| {reps} | {statistics.mean(busy) if busy else math.nan:.2f} |")

    for n, item in results.get("jac", {}).items():
        g, t = item["gradcalc"], item.get("torch")
        ref = {"jacrev": t["jacrev"]} if t else None
        for mode in MODES:
            times = g["times"][mode]
            shown = f"auto (→ {g['auto_mode']})" if mode == "auto" else mode
            row(f"j{n}{mode[0]}", f"Jacobian n={n}, mode={shown}: the jacobian call alone", times["jac"], ref)
            row(f"j{n}{mode[0]}+", f"Jacobian n={n}, mode={shown}: run + jacobian",
                [r + j for r, j in zip(times["run"], times["jac"])], ref)
            series(f"Jacobian n={n}", "gradcalc", f"jacobian mode={mode}", times["jac"], g["total_reps"], g)
        series(f"Jacobian n={n}", "gradcalc", "program.run(values=...), all modes' repeats",
               [v for m in MODES for v in g["times"][m]["run"]], len(MODES) * g["total_reps"], g)
        series(f"Jacobian n={n}", "gradcalc", "parse (once per child process)", g["parse"], len(g["parse"]), g)
        if t:
            series(f"Jacobian n={n}", "PyTorch", "jacrev", t["jacrev"], t["total_reps"], t)
            anchor = ANCHORS.get(("jac", int(n)))
            if anchor:
                torch_lines.append(f"jacrev n={n}: {fmt_time(med(t['jacrev']))}, min {fmt_time(min(t['jacrev']))} "
                                   f"(anchor {fmt_time(anchor)})")
    for n, item in results.get("hess", {}).items():
        g, t = item["gradcalc"], item.get("torch")
        ref = {f"hessian {label}": v for label, v in t["times"].items()} if t else None
        row(f"h{n}", f"Hessian n={n}: the hessian call alone", g["hess"], ref)
        row(f"h{n}+", f"Hessian n={n}: run + hessian", [r + h for r, h in zip(g["run"], g["hess"])], ref)
        series(f"Hessian n={n}", "gradcalc", "hessian", g["hess"], g["total_reps"], g)
        series(f"Hessian n={n}", "gradcalc", "program.run(values=...)", g["run"], g["total_reps"], g)
        if t:
            for label, values in t["times"].items():
                series(f"Hessian n={n}", "PyTorch", f"hessian {label}", values, t["total_reps"], t)
            anchor = ANCHORS.get(("hess", int(n)))
            vt, vf = t["times"]["vectorize=True"], t["times"]["vectorize=False"]
            if anchor:
                torch_lines.append(f"hessian vectorize=True n={n}: {fmt_time(med(vt))}, min {fmt_time(min(vt))} "
                                   f"(anchor {fmt_time(anchor)})")
            torch_lines.append(f"hessian n={n}, vectorize=False ÷ vectorize=True: {med(vf) / med(vt):.2f} "
                               f"(minima {min(vf) / min(vt):.2f})")

    out = lines + ["", "Every series; \"others\" = CPUs kept busy by other processes while its child ran (mean over "
                   "rounds):", "", "| workload | side | what | median | min | repeats | others |",
                   "|---|---|---|---|---|---|---|", *details]
    if torch_lines:
        out += ["", "PyTorch next to the anchors measured earlier on this machine (for scale, not a target): "
                + "; ".join(torch_lines) + "."]
    out += ["", "With 2 threads on 2 CPUs, a PyTorch call stalls (about 20–100 ms, an OpenMP thread waiting for a "
            "core) whenever another process holds one of the CPUs; with 1 thread it does not. When \"others\" is "
            "well above 0, PyTorch's medians are inflated, the ratios of medians flatter gradcalc, and the ratios "
            "of minima are the better guide. No `gc.collect()` runs between repeats (only before each timed "
            "loop): it was measured to slow the next sub-millisecond call of either side (PyTorch's jacrev at "
            "n=100 about 3×)."]
    ok = True
    if "check" in results:
        check_lines, ok = check_rows(results["check"])
        out += ["", f"Agreement, checked before timing in one process holding both sides (tolerance "
                f"{TOLERANCE:.0e} × max(1, max \\|closed form\\|)): " + ("all agree." if ok else "**SOME DIFFER**."),
                "", *check_lines]
    out += ["", "Inputs: W = standard normals ÷ √n, x, b = standard normals (NumPy `default_rng(n)`), Hessian x = "
            "standard normals (`default_rng(n)`); the same arrays on both sides (fingerprints compared: "
            + ("equal" if results.get("same_inputs", True) else "**DIFFERENT**") + "). "
            "\"alone\" times the call on a run made just before it (a fresh run each repeat, outside that timing); "
            "\"run +\" adds that `program.run(values=...)` (input conversion, forward values, graph), which "
            "PyTorch's calls do inside (they evaluate f). Parsing is excluded."]
    return "\n".join(out) + "\n", ok


# --- profile ------------------------------------------------------------------------------------

def profile_cases(quick: bool) -> list[tuple[str, str, int, str]]:
    """(label, section, n, mode) of every gradcalc case, in the order --profile times them."""
    jac_sizes, hess_sizes = sizes(quick)
    return [(f"Jacobian n={n}, mode={mode}", "jac", n, mode) for n in jac_sizes for mode in MODES] + \
           [(f"Hessian n={n}", "hess", n, "") for n in hess_sizes]


def case_callables(section: str, n: int, mode: str) -> tuple[Any, Any]:
    """make() -> a fresh run of the case's program; call(run) -> the derivative being measured."""
    import gradcalc

    if section == "jac":
        W, x, b = jac_inputs(n)
        program, values = gradcalc.parse_program(JAC_PROGRAM), {"W": W, "x": x, "b": b}
        return (lambda: program.run(values=values)), (lambda run: run.jacobian(of="y", wrt=["x"], mode=mode))
    program, values = gradcalc.parse_program(HESS_PROGRAM), {"x": hess_inputs(n)}
    return (lambda: program.run(values=values)), (lambda run: run.hessian(of="L", wrt=["x"]))


def child_profile_time(section: str, n: int, mode: str) -> dict[str, Any]:
    """The call alone, after a warm-up: median of 3 (each on a fresh run), as in the timings."""
    make, call = case_callables(section, n, mode)
    call(make())
    gc.collect()
    times = []
    for _ in range(3):
        run = make()
        t0 = time.perf_counter()
        call(run)
        times.append(time.perf_counter() - t0)
    return {"seconds": statistics.median(times)}


def child_profile_run(section: str, n: int, mode: str, seconds: float) -> dict[str, Any]:
    """cProfile of the call (several calls for short cases, each on a fresh run made outside the
    profiler), in a fresh process after one warm-up, as in the timings: the table and the buckets."""
    import cProfile
    import pstats

    make, call = case_callables(section, n, mode)
    call(make())
    gc.collect()
    calls = max(1, min(200, int(0.5 / seconds)))  # short cases: several calls, so that the profile is not noise
    prof = cProfile.Profile()
    for _ in range(calls):
        run = make()
        prof.enable()
        call(run)
        prof.disable()

    stats = pstats.Stats(prof)
    total = sum(v[2] for v in stats.stats.values())  # type: ignore[attr-defined]
    buckets: dict[str, float] = {}
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        if filename == "~" and "_operator." in name:
            bucket = "`operator.mul` etc. (NumPy array arithmetic, when called on arrays)"
        elif filename == "~":
            bucket = "NumPy C functions and methods" if "numpy" in name else "other built-ins (Python's C functions)"
        elif str(REPO / "gradcalc") in filename:
            bucket = "gradcalc's Python code (graph building, rule dispatch; includes NumPy operators it calls)"
        elif f"{os.sep}numpy{os.sep}" in filename:
            bucket = "NumPy's Python wrappers"
        else:
            bucket = "other Python code"
        buckets[bucket] = buckets.get(bucket, 0.0) + tottime
    folders = [str(REPO) + os.sep] + sorted(  # the repository's, the standard library's and site-packages' folder
        {os.path.dirname(os.path.dirname(m.__file__ or "")) + os.sep for m in (argparse, json)}, key=len, reverse=True)

    def where(filename: str, line: int, name: str) -> str:
        if filename == "~":
            return name
        for folder in folders:
            filename = filename.replace(folder, "")
        return f"{filename}:{line}({name})"

    top = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:10]  # type: ignore[attr-defined]
    table = [f"{'ncalls':>9} {'tottime':>10} {'percall':>10} {'cumtime':>10}  function"]
    for (filename, line, name), (primitive, count, tottime, cumtime, _) in top:
        ncalls = str(count) if count == primitive else f"{count}/{primitive}"
        table.append(f"{ncalls:>9} {fmt_time(tottime):>10} {fmt_time(tottime / count):>10} "
                     f"{fmt_time(cumtime):>10}  {where(filename, line, name)}")
    text = "\n".join(table)
    return {"calls": calls, "total": total, "table": text, "buckets": buckets}


def profile(quick: bool, case: str | None) -> None:
    """Time every gradcalc case (each in its own process, as in the timings), then cProfile the
    slowest one's call (or the slowest whose label contains `case`) in a fresh process."""
    timed = []
    for label, section, n, mode in profile_cases(quick):
        seconds = run_child("profile-time", section, n, mode or "-")["seconds"]
        timed.append((seconds, label, section, n, mode))
        log(f"    {label}: {fmt_time(seconds)}")
    chosen = [c for c in timed if case is None or case.lower() in c[1].lower()]
    if not chosen:
        raise SystemExit(f"no case matches {case!r}: " + "; ".join(c[1] for c in timed))
    seconds, label, section, n, mode = max(chosen, key=lambda c: c[0])
    got = run_child("profile-run", section, n, mode or "-", seconds)
    calls, total, text, buckets = got["calls"], got["total"], got["table"], got["buckets"]

    print(f"### cProfile of the slowest gradcalc case{f' matching {case!r}' if case else ''} — "
          f"{'quick' if quick else 'full'} sizes, "
          f"{time.strftime('%Y-%m-%d %H:%M')}\n")
    print("Each case in its own process, after a warm-up: the call alone (on a run made before it), median of 3: "
          + "; ".join(f"{lbl} {fmt_time(s)}" for s, lbl, *_ in timed) + ".\n")
    print(f"#### {label}: top 10 by tottime, {calls} call(s) of {fmt_time(seconds)} unprofiled "
          f"({fmt_time(total)} profiled in all)\n")
    print("```\n" + text + "\n```\n")
    print("Own time (tottime) by kind of code:\n")
    print("| code | tottime | share |\n|---|---|---|")
    for bucket, value in sorted(buckets.items(), key=lambda kv: -kv[1]):
        print(f"| {bucket} | {fmt_time(value)} | {value / total:.0%} |")
    print("\ncProfile sees only Python functions and C functions called as such: NumPy's ufuncs and array "
          "operators (`a @ b`, `a * b`, `np.tanh(a)`) are not profiled entries, so their time counts in the "
          "tottime of the Python function that called them. A line with few calls and a large tottime is "
          "array work; many calls with a small time each is interpreter overhead.")


# --- main ---------------------------------------------------------------------------------------

def sizes(quick: bool) -> tuple[list[int], list[int]]:
    return ([100, 300], [100, 200]) if quick else ([100, 1000], [100, 500])


def merge(into: dict[str, Any], got: dict[str, Any]) -> None:
    """Append a round's lists of times to the earlier rounds' (recursively); keep the rest."""
    for key, value in got.items():
        if isinstance(value, list):
            into.setdefault(key, []).extend(value)
        elif isinstance(value, dict):
            merge(into.setdefault(key, {}), value)
        elif key == "reps":
            into["total_reps"] = into.get("total_reps", 0) + value
        else:
            into[key] = value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repeats")
    parser.add_argument("--profile", action="store_true",
                        help="print a cProfile table of the slowest gradcalc case instead of benchmarking")
    parser.add_argument("--case", help="with --profile: the slowest case whose label contains this text, "
                        "e.g. 'Hessian n=500' or 'mode=fwd'")
    parser.add_argument("--only", default="j,h", help="sections to run: j (Jacobian), h (Hessian); default j,h")
    benchkit.add_torch_options(parser, "jacobian.json")
    args = benchkit.parse_args_or_run_child(parser, child_main)
    if args.profile:
        profile(args.quick, args.case)
        return

    have_torch = benchkit.find_torch(args.no_torch)
    sections = set(args.only.split(","))
    quick = args.quick
    rounds = 1 if quick else 2
    # (time budget per child in seconds, fewest repeats, most repeats), warm-up excluded
    plan = (0.3, 3, 20) if quick else (2.0, 5, 300)
    started = time.perf_counter()
    results: dict[str, Any] = {"env": {**benchkit.torch_environment(quick, have_torch), "rounds": rounds}}
    jac_sizes, hess_sizes = sizes(quick)
    jac_sizes = jac_sizes if "j" in sections else []
    hess_sizes = hess_sizes if "h" in sections else []

    log("agreement check (both sides in one process, untimed)")
    results["check"] = run_child("check", json.dumps({"jac": jac_sizes, "hess": hess_sizes}), int(have_torch))

    work = [("jac", n) for n in jac_sizes] + [("hess", n) for n in hess_sizes]
    sides = ["gradcalc", "torch"] if have_torch else ["gradcalc"]
    for round_ in range(rounds):
        log(f"round {round_ + 1} of {rounds}")
        for section, n in work:
            for side in sides if round_ % 2 == 0 else reversed(sides):
                got = run_child(f"{section}-{side}", n, *plan)
                merge(results.setdefault(section, {}).setdefault(str(n), {}).setdefault(side, {}), got)
    results["same_inputs"] = all(len({side["fingerprint"] for side in item.values()}) == 1
                                 for section in ("jac", "hess") for item in results.get(section, {}).values())

    benchkit.save_results(results, started, args.json_out)
    text, agree = report(results)
    print(text)
    log(f"done in {results['env']['wall_s']:.0f} s" + (f"; raw numbers in {args.json_out}" if args.json_out else ""))
    if not agree or not results["same_inputs"]:
        log("the results or the inputs differ between the sides: see the report")
        sys.exit(1)


if __name__ == "__main__":
    main()
