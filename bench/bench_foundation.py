"""Foundation benchmark: gradcalc against PyTorch eager (CPU, float64, 2 threads), in one run.

    python bench/bench_foundation.py            # full run (a few minutes on 2 cores)
    python bench/bench_foundation.py --quick    # smoke run: small sizes, few repeats
    python bench/bench_foundation.py --profile  # cProfile of the chain and the 10^7 case instead

(a) start-up: wall time of whole processes: `gradcalc grad samples/neuron.eq --json`, the bare
    dependency import line, and a PyTorch script computing the same toy network's gradients;
    plus `python -X importtime` of the gradcalc command (top imports by cumulative time).
(b) a straight-line chain `y = sin(y)*0.999 + 0.01*y*y` repeated N times (5 elementary ops a
    statement): parse, build (checks + run, i.e. `Program.run()`) and backward, against PyTorch
    eager running the same Python loop on a 0-d float64 tensor and calling backward().
(c) `L = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)` over 10^7 elements, value and gradient.

Every workload runs in its own child process (this file, re-invoked with --child), so that one
side's imports and garbage never weigh on the other's timing or memory; this process imports only
the standard library. Times are medians over repeats; ratios compare numbers from the same run.
The report is Markdown on standard output (paste it into bench/RESULTS.md); progress goes to
standard error; the raw numbers are written as JSON to bench/out/foundation.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import benchkit
from benchkit import REPO, log, med, ratio_text, verdict

CHAIN_LINE = "y = sin(y)*0.999 + 0.01*y*y"
OPS_PER_STATEMENT = 5  # sin, mul (by 0.999), mul (0.01*y), mul (by y), add
BIG_PROGRAM = "x = 0\nL = sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)"

TORCH_TOY_SCRIPT = """
import torch
torch.set_num_threads(2)
def leaf(v):
    return torch.tensor(float(v), dtype=torch.float64, requires_grad=True)
a, w1, w2, w3, w4 = leaf(2), leaf(3), leaf(-1), leaf(0.5), leaf(4)
b = w1 * a
c = w2 * a
d = w3 * b + w4 * c
d.retain_grad()
L = 10 - d
L.backward()
print({"L": L.item(), "a": a.grad.item(), "w1": w1.grad.item(), "w2": w2.grad.item(),
       "w3": w3.grad.item(), "w4": w4.grad.item(), "d": d.grad.item()})
""".strip()


# --- memory probes ----------------------------------------------------------------------------

def _status_kib(key: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as handle:
            for line in handle:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _maxrss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # bytes on macOS, KiB on Linux


class PeakRSS:
    """Growth of the resident set's high-water mark over a block of work, in KiB.

    On Linux the high-water mark (VmHWM) is reset first (`echo 5 > /proc/self/clear_refs`), so the
    result is peak RSS during the block minus RSS at its start. Elsewhere it is the growth of
    ru_maxrss, which reads 0 if an earlier peak was higher. Memory freed earlier but still resident
    (Python's arenas, malloc's heap) can be reused without showing up: treat it as a lower bound.
    """

    def __enter__(self) -> PeakRSS:
        gc.collect()
        self.exact = False
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as handle:
                handle.write("5")
            self.exact = True
        except OSError:
            pass
        rss = _status_kib("VmRSS")
        self.start = rss if self.exact and rss is not None else _maxrss_kib()
        return self

    def __exit__(self, *exc: object) -> None:
        hwm = _status_kib("VmHWM") if self.exact else None
        self.kib = (hwm if hwm is not None else _maxrss_kib()) - self.start


# --- child workloads (each runs in a fresh process) ---------------------------------------------

def chain_text(n: int) -> str:
    return "y = 0.5\n" + (CHAIN_LINE + "\n") * n


def child_chain_gradcalc(n: int, reps: int, parse_reps: int, direct_reps: int, trace: bool) -> dict[str, Any]:
    import gradcalc
    from gradcalc.language.parser import parse
    from gradcalc.program.api import Program

    text = chain_text(n)
    out: dict[str, Any] = {"version": getattr(gradcalc, "__version__", "?")}
    # parse = the Program(text) constructor: what the CLI and the API pay (parser.parse(text) plus
    # whatever the API wraps around it, such as pausing the cyclic GC); the direct call separately.
    parse_times, direct_times = [], []
    for _ in range(parse_reps):
        gc.collect()
        t0 = time.perf_counter()
        program = Program(text)
        parse_times.append(time.perf_counter() - t0)
    for _ in range(direct_reps):
        gc.collect()
        t0 = time.perf_counter()
        module = parse(text)
        direct_times.append(time.perf_counter() - t0)
        del module
    out["parse"], out["parse_direct"] = parse_times, direct_times
    log(f"    gradcalc N={n:,}: parse {statistics.median(parse_times):.2f} s (Program), "
        f"{statistics.median(direct_times) if direct_times else float('nan'):.2f} s (parser.parse)")

    build, back, rss = [], [], []
    for _ in range(reps):
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            run = program.run()
            t1 = time.perf_counter()
            result = run.grad(of="y", wrt=["y"], retain_graph=False)
            t2 = time.perf_counter()
        build.append(t1 - t0)
        back.append(t2 - t1)
        rss.append(mem.kib)
        out["value"], out["grad"] = float(result.value), float(result.grads["y"])
        del run, result
        log(f"    gradcalc N={n:,}: build {t1 - t0:.2f} s, backward {t2 - t1:.3f} s")
    out.update(build=build, backward=back, rss_kib=rss)

    # Diagnostic: the same with Python's cyclic garbage collector switched off.
    build_nogc, back_nogc = [], []
    for _ in range(reps):
        gc.collect()
        gc.disable()
        try:
            t0 = time.perf_counter()
            run = program.run()
            t1 = time.perf_counter()
            run.grad(of="y", wrt=["y"])
            t2 = time.perf_counter()
        finally:
            gc.enable()
        build_nogc.append(t1 - t0)
        back_nogc.append(t2 - t1)
        del run
    out.update(build_nogc=build_nogc, backward_nogc=back_nogc)
    gc.collect()

    if trace:
        import tracemalloc

        tracemalloc.start()
        run = program.run()
        out["tracemalloc_build"], out["tracemalloc_build_peak"] = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        run.grad(of="y", wrt=["y"])
        out["tracemalloc_backward_peak"] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        del run
    return out


def _malloc_in_use() -> int | None:
    """Bytes malloc has handed out and not had back (glibc mallinfo2, all arenas), or None."""
    try:
        import ctypes

        class MallInfo2(ctypes.Structure):
            _fields_ = [(name, ctypes.c_size_t) for name in
                        ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
                         "fordblks", "keepcost")]

        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
        mallinfo2.restype = MallInfo2
        info = mallinfo2()
        return int(info.uordblks + info.hblkhd)
    except (OSError, AttributeError):
        return None


def child_chain_torch(n: int, reps: int) -> dict[str, Any]:
    torch = benchkit.import_torch()
    build, back, rss = [], [], []
    out: dict[str, Any] = {"version": torch.__version__, "threads": torch.get_num_threads()}
    for _ in range(reps):
        y0 = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        with PeakRSS() as mem:
            t0 = time.perf_counter()
            y = y0
            for _ in range(n):
                y = torch.sin(y) * 0.999 + 0.01 * y * y
            t1 = time.perf_counter()
            y.backward()
            t2 = time.perf_counter()
        build.append(t1 - t0)
        back.append(t2 - t1)
        rss.append(mem.kib)
        out["value"], out["grad"] = y.item(), y0.grad.item()
        del y, y0
    out.update(build=build, backward=back, rss_kib=rss)
    # Memory pass: C++ heap in use (malloc) when the graph is complete, i.e. at the end of the build.
    y0 = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
    gc.collect()
    before = _malloc_in_use()
    y = y0
    for _ in range(n):
        y = torch.sin(y) * 0.999 + 0.01 * y * y
    after = _malloc_in_use()
    y.backward()
    out["malloc_build"] = after - before if before is not None and after is not None else None
    log(f"    PyTorch  N={n:,}: build {statistics.median(build):.3f} s, backward {statistics.median(back):.3f} s")
    return out


def _big_x(size: int) -> Any:
    import numpy

    return numpy.random.default_rng(0).standard_normal(size)


def child_big_time(side: str, size: int, reps: int, warmup: bool) -> dict[str, Any]:
    """One side alone in its process: running PyTorch in the same process was measured to slow
    NumPy's later work 1.5-3× (even after a pause), so the sides never share a process."""
    import numpy

    x = _big_x(size)
    if side == "gradcalc":
        from gradcalc.program.api import Program

        program = Program(BIG_PROGRAM)

        def once() -> tuple[float, float, Any, Any]:
            t0 = time.perf_counter()
            run = program.run(values={"x": x})
            t1 = time.perf_counter()
            result = run.grad(of="L", wrt=["x"], retain_graph=False)
            t2 = time.perf_counter()
            return t1 - t0, t2 - t1, float(result.value), result.grads["x"]
    else:
        torch = benchkit.import_torch(1 if side == "torch_1thread" else 2)
        xt = torch.from_numpy(x).requires_grad_(True)

        def once() -> tuple[float, float, Any, Any]:
            xt.grad = None
            t0 = time.perf_counter()
            loss = (torch.tanh(xt) * xt + torch.exp(-xt * xt) - 0.5 * xt * xt * xt).sum()
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            return t1 - t0, t2 - t1, loss.item(), xt.grad.numpy()

    if warmup:
        once()
    out: dict[str, Any] = {"value": [], "backward": []}
    for _ in range(reps):
        gc.collect()
        forward, backward, value, grad = once()
        out["value"].append(forward)
        out["backward"].append(backward)
        log(f"    {side:13s} 10^{len(str(size)) - 1}: value {forward:.3f} s, gradient {backward:.3f} s")
    # A fingerprint of the answer for the agreement check: L, and the gradient at 1,000 spread indices.
    out["L"] = value
    out["grad_sample"] = numpy.asarray(grad)[:: max(1, size // 1000)].tolist()
    return out


def child_big_mem(side: str, size: int, work: bool) -> dict[str, Any]:
    """Only imports and x (baseline), or that plus one value-and-gradient; reports ru_maxrss.

    The work child also reports what is live once the value is computed (the saved intermediates):
    tracemalloc for gradcalc, glibc malloc bytes in use for PyTorch; both read after ru_maxrss-neutral
    bookkeeping (tracemalloc tracks a few dozen large blocks here).
    """
    x = _big_x(size)
    out: dict[str, Any] = {}
    if side == "gradcalc":
        import tracemalloc

        from gradcalc.program.api import Program

        program = Program(BIG_PROGRAM)
        if work:
            tracemalloc.start()
            run = program.run(values={"x": x})
            out["after_value"], out["peak_value"] = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            result = run.grad(of="L", wrt=["x"], retain_graph=False)
            out["peak_gradient"] = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
            assert result.grads["x"].shape == x.shape
    else:
        torch = benchkit.import_torch()
        xt = torch.from_numpy(x).requires_grad_(True)
        if work:
            before = _malloc_in_use()
            loss = (torch.tanh(xt) * xt + torch.exp(-xt * xt) - 0.5 * xt * xt * xt).sum()
            after = _malloc_in_use()
            loss.backward()
            out["after_value"] = after - before if before is not None and after is not None else None
            assert xt.grad.shape == xt.shape
    out["maxrss_kib"] = _maxrss_kib()
    return out


def run_child(*args: Any, timeout: float = 900) -> dict[str, Any]:
    """A workload of this file in a fresh process (see child_main); RuntimeError if it fails."""
    return benchkit.run_child(__file__, *args, timeout=timeout)


def child_main(args: list[str]) -> None:
    kind, rest = args[0], args[1:]
    if kind == "chain-gradcalc":
        result = child_chain_gradcalc(int(rest[0]), int(rest[1]), int(rest[2]), int(rest[3]), rest[4] == "1")
    elif kind == "chain-torch":
        result = child_chain_torch(int(rest[0]), int(rest[1]))
    elif kind == "big-time":
        result = child_big_time(rest[0], int(rest[1]), int(rest[2]), rest[3] == "1")
    elif kind == "big-mem":
        result = child_big_mem(rest[0], int(rest[1]), rest[2] == "1")
    else:
        raise SystemExit(f"unknown child {kind}")
    benchkit.emit_result(result)


# --- (a) start-up -------------------------------------------------------------------------------

def gradcalc_command() -> list[str]:
    """The console script installed next to this interpreter (not a pyenv shim), else -m."""
    script = Path(sys.executable).parent / "gradcalc"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "gradcalc"]


def startup_env() -> dict[str, str]:
    """Every command starts with warm bytecode caches, as an installed wheel would: .pyc files go to
    bench/out/pycache (PYTHONPYCACHEPREFIX), even where PYTHONDONTWRITEBYTECODE is set."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(REPO / "bench" / "out" / "pycache")
    return env


def bench_startup(reps: int, have_torch: bool) -> dict[str, Any]:
    grad_args = ["grad", "samples/neuron.eq", "--json"]
    commands = {
        "gradcalc": [*gradcalc_command(), *grad_args],
        "gradcalc_m": [sys.executable, "-m", "gradcalc", *grad_args],
        "imports": [sys.executable, "-c", "import numpy, lark, typer, rich"],
    }
    if have_torch:
        commands["torch"] = [sys.executable, "-c", TORCH_TOY_SCRIPT]
    times: dict[str, list[float]] = {name: [] for name in commands}
    env = startup_env()
    for command in commands.values():  # warm-up: disk cache, .pyc files, Lark's grammar cache
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(command)} failed:\n{done.stderr[-2000:]}")
    for rep in range(reps):
        for name, command in (commands.items() if rep % 2 == 0 else reversed(commands.items())):
            t0 = time.perf_counter()
            subprocess.run(command, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           check=True)
            times[name].append(time.perf_counter() - t0)
    log("    " + ", ".join(f"{name} {statistics.median(t):.3f} s" for name, t in times.items()))
    return {"commands": {name: shlex.join(c) for name, c in commands.items()}, "times": times,
            "importtime": import_times(3)}


def import_times(reps: int) -> list[dict[str, Any]]:
    """`python -X importtime -m gradcalc grad samples/neuron.eq --json`: median per module, in µs."""
    samples: dict[str, list[tuple[int, int]]] = {}
    for _ in range(reps):
        done = subprocess.run([sys.executable, "-X", "importtime", "-m", "gradcalc", "grad", "samples/neuron.eq",
                               "--json"], cwd=REPO, env=startup_env(), capture_output=True, text=True,
                              check=True)
        for line in done.stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, cumulative_us, name = line[len("import time:"):].split("|")
            samples.setdefault(name.rstrip(), []).append((int(self_us), int(cumulative_us)))
    rows = [{"module": name, "self_us": statistics.median(s for s, _ in v),
             "cumulative_us": statistics.median(c for _, c in v)} for name, v in samples.items()]
    return sorted(rows, key=lambda r: r["cumulative_us"], reverse=True)


# --- report -------------------------------------------------------------------------------------

def fmt_time(seconds: float | None) -> str:
    """Times in this report: ms to 1 decimal, µs to 2."""
    return benchkit.fmt_time(seconds, digits=1, micro_digits=2)


def fmt_mib(kib: float | None) -> str:
    return "n/a" if kib is None else f"{kib / 1024:.1f} MiB"


def report(results: dict[str, Any]) -> str:
    env = results["env"]
    lines = [
        f"### Foundation benchmark — {'quick smoke run' if env['quick'] else 'full run'}, {env['date']}",
        "",
        f"gradcalc {env['gradcalc']} (`{env['commit']}`), PyTorch {env['torch'] or '(not used)'} "
        f"(CPU, float64, {env['torch_threads']} threads), NumPy {env['numpy']}, Python {env['python']}, "
        f"{env['cpus']} CPUs ({env['machine']}), load average {env['load_before']} before and "
        f"{env.get('load_after', '?')} after ({env.get('wall_s', '?')} s). Times are medians over repeats; "
        f"each ratio compares numbers from this run (gradcalc ÷ the other).",
        "",
        "| # | measure | gradcalc | reference | ratio | target | met |",
        "|---|---|---|---|---|---|---|",
    ]
    rows: list[tuple[str, ...]] = []
    details: list[str] = []

    startup = results.get("startup")
    if startup:
        t = {name: med(v) for name, v in startup["times"].items()}
        r1 = t["gradcalc"] / t["imports"]
        rows.append(("a1", "start-up, whole process: `gradcalc grad samples/neuron.eq --json` vs "
                     "`python -c \"import numpy, lark, typer, rich\"`",
                     fmt_time(t["gradcalc"]), fmt_time(t["imports"]), ratio_text(r1), "≤ 1.3×", verdict(r1, 1.3)))
        r2 = t["gradcalc"] / t["torch"] if "torch" in t else None
        rows.append(("a2", "start-up vs a PyTorch script computing the toy network's gradients",
                     fmt_time(t["gradcalc"]), fmt_time(t["torch"]) if "torch" in t else "n/a", ratio_text(r2),
                     "< 0.2×", verdict(r2, 0.2, strict=True)))
        details += ["", f"**(a) start-up** — {len(startup['times']['gradcalc'])} runs each, after one warm-up run "
                    "(median / min, seconds):", "", "| command | median | min |", "|---|---|---|"]
        for name, command in startup["commands"].items():
            shown = command if len(command) < 100 else command[:60] + " … (toy network, L.backward())'"
            details.append(f"| `{shown}` | {med(startup['times'][name]):.3f} | {min(startup['times'][name]):.3f} |")
        details += ["", "`python -X importtime -m gradcalc grad samples/neuron.eq --json`, top 15 by cumulative "
                    "time (median of 3 runs):", "", "| module | cumulative ms | self ms |", "|---|---|---|"]
        for row in startup["importtime"][:15]:
            details.append(f"| `{row['module'].strip()}` | {row['cumulative_us'] / 1e3:.1f} "
                           f"| {row['self_us'] / 1e3:.1f} |")

    chain = results.get("chain")
    if chain:
        details += ["", f"**(b) chain** `{CHAIN_LINE}` × N (first line `y = 0.5`), {OPS_PER_STATEMENT} ops a "
                    "statement; parse = the `Program(text)` constructor (what the CLI and API pay: "
                    "`parser.parse(text)` plus what the API wraps around it), and `parser.parse(text)` called "
                    "directly as a diagnostic; build = `Program.run()` (checks + run); "
                    "backward = `run.grad(of=\"y\", wrt=[\"y\"])` (∂y/∂ the leaf y); PyTorch: the same Python loop "
                    "on a 0-d float64 tensor, then `backward()`. Per op = time ÷ 5N. \"gc off\": the same repeats "
                    "again with Python's cyclic garbage collector disabled (diagnostic only).", "",
                    "| N | gradcalc parse | build | backward | `parser.parse` direct | build, gc off "
                    "| backward, gc off | PyTorch build | PyTorch backward | gradcalc per op (build+backward) "
                    "| PyTorch per op | repeats (parse/direct/build, PyTorch) |",
                    "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        mem_details = ["", "Memory of the chain:", "",
                       "| N | gradcalc graph after build (tracemalloc) | gradcalc peak during build | gradcalc peak "
                       "during backward (graph included) | gradcalc RSS growth | PyTorch graph after build (malloc "
                       "in use) | PyTorch RSS growth | graph bytes per op, gradcalc / PyTorch |",
                       "|---|---|---|---|---|---|---|---|"]
        per_stmt: dict[int, dict[str, float]] = {}
        notes = []
        for key, item in sorted(chain.items(), key=lambda kv: int(kv[0])):
            n = int(key)
            ops = OPS_PER_STATEMENT * n
            g, tt = item["gradcalc"], item.get("torch")
            parse, build, back = med(g["parse"]), med(g["build"]), med(g["backward"])
            g_op = (build + back) / ops
            g_stmt = (parse + build + back) / n
            t_build = med(tt["build"]) if tt else None
            t_back = med(tt["backward"]) if tt else None
            t_op = (t_build + t_back) / ops if tt else None
            t_stmt = (t_build + t_back) / n if tt else None
            per_stmt[n] = {"parse": parse / n, "build": build / n, "backward": back / n,
                           "torch": t_stmt if t_stmt else float("nan")}
            na = "n/a"
            details.append(
                f"| {n:,} | {fmt_time(parse)} | {fmt_time(build)} | {fmt_time(back)} "
                f"| {fmt_time(med(g['parse_direct'])) if g['parse_direct'] else na} "
                f"| {fmt_time(med(g['build_nogc']))} | {fmt_time(med(g['backward_nogc']))} "
                f"| {fmt_time(t_build) if tt else na} | {fmt_time(t_back) if tt else na} | {fmt_time(g_op)} "
                f"| {fmt_time(t_op) if tt else na} | {len(g['parse'])}/{len(g['parse_direct'])}/{len(g['build'])}, "
                f"{len(tt['build']) if tt else 0} |")
            r_op = g_op / t_op if tt else None
            rows.append((f"b{n // 1000}k", f"chain N={n:,}: build+backward per elementary op vs PyTorch eager per op",
                         fmt_time(g_op), fmt_time(t_op) if tt else na, ratio_text(r_op), "≤ 0.25×",
                         verdict(r_op, 0.25)))
            r_stmt = g_stmt / t_stmt if t_stmt else None
            rows.append((f"b{n // 1000}k", f"chain N={n:,}: parse+build+backward per statement vs PyTorch per step",
                         fmt_time(g_stmt), fmt_time(t_stmt) if t_stmt else na, ratio_text(r_stmt), "≤ 1.5×",
                         verdict(r_stmt, 1.5)))
            g_graph, g_peak = g.get("tracemalloc_build"), g.get("tracemalloc_build_peak")
            g_back_peak = g.get("tracemalloc_backward_peak")
            t_graph = tt.get("malloc_build") if tt else None
            r_mem = g_graph / t_graph if g_graph and t_graph else None
            rows.append((f"b{n // 1000}k", f"chain N={n:,}: memory of the recorded graph at the end of the build "
                         "(live bytes: tracemalloc for gradcalc, malloc in use for PyTorch's C++ graph)",
                         fmt_mib(g_graph / 1024) if g_graph else na, fmt_mib(t_graph / 1024) if t_graph else na,
                         ratio_text(r_mem), "—", "—"))
            mem_details.append(
                f"| {n:,} | {fmt_mib(g_graph / 1024) if g_graph else na} | {fmt_mib(g_peak / 1024) if g_peak else na} "
                f"| {fmt_mib(g_back_peak / 1024) if g_back_peak else na} "
                f"| {fmt_mib(g['rss_kib'][0])} | {fmt_mib(t_graph / 1024) if t_graph else na} "
                f"| {fmt_mib(tt['rss_kib'][0]) if tt else na} "
                f"| {(g_graph or math.nan) / ops:.0f} / {(t_graph or math.nan) / ops:.0f} |")
            if tt:
                agree = abs(g["grad"] - tt["grad"]) <= 1e-9 * abs(tt["grad"])
                notes.append(f"N={n:,}: " + ("agree" if agree else f"DIFFER ({g['grad']!r} vs {tt['grad']!r})"))
        ns = sorted(per_stmt)
        if len(ns) >= 2:
            lo, hi = ns[0], ns[-1]
            growth = {k: per_stmt[hi][k] / per_stmt[lo][k] for k in ("parse", "build", "backward", "torch")}
            rows.append(("b lin", f"linearity: time per statement at N={hi:,} ÷ at N={lo:,} (1.0 = linear); "
                         "gradcalc parse / build / backward, PyTorch build+backward",
                         " / ".join(f"{growth[k]:.2f}" for k in ("parse", "build", "backward")),
                         f"{growth['torch']:.2f}" if growth["torch"] == growth["torch"] else "n/a", "—", "≤ 1.25",
                         verdict(max(growth["parse"], growth["build"], growth["backward"]), 1.25)))
        details += ["", "Per statement (µs): " + "; ".join(
            f"N={n:,}: parse {per_stmt[n]['parse'] * 1e6:.1f}, build {per_stmt[n]['build'] * 1e6:.1f}, "
            f"backward {per_stmt[n]['backward'] * 1e6:.1f}, PyTorch build+backward {per_stmt[n]['torch'] * 1e6:.1f}"
            for n in ns) + "."]
        if notes:
            details.append("∂y/∂y₀, gradcalc vs PyTorch: " + ", ".join(notes) + ".")
        details += mem_details
        details += ["", "Graph memory: gradcalc = `tracemalloc` bytes live right after `run()` (the recorded graph, "
                    "the frame; Python objects and NumPy buffers), and the peaks during "
                    "`run()` and during `grad()` (`tracemalloc.reset_peak()` between), in a separate untimed pass; "
                    "PyTorch = glibc `mallinfo2` bytes in use after "
                    "the build loop minus before it (its graph lives in C++, invisible to tracemalloc). RSS growth = "
                    "peak resident set during build+backward minus RSS at its start (VmHWM reset through "
                    "/proc/self/clear_refs), first timed repeat; a lower bound, since memory freed earlier and still "
                    "resident is reused unseen."]

    big = results.get("big")
    if big:
        size = big["size"]
        g = big["time"]["gradcalc"]
        g_total = med([a + b for a, b in zip(g["value"], g["backward"], strict=True)])
        tt = big["time"].get("torch")
        t_total = med([a + b for a, b in zip(tt["value"], tt["backward"], strict=True)]) if tt else None
        r = g_total / t_total if tt else None
        label = f"10^{len(str(size)) - 1}"
        rows.append(("c1", f"`sum(tanh(x)*x + exp(-x*x) - 0.5*x*x*x)`, x = {label} elements: value + gradient time",
                     fmt_time(g_total), fmt_time(t_total) if tt else "n/a", ratio_text(r), "≤ 1.0×", verdict(r, 1.0)))
        t1 = big["time"].get("torch_1thread")
        if t1:
            t1_total = med([a + b for a, b in zip(t1["value"], t1["backward"], strict=True)])
            rows.append(("c1'", "same, against PyTorch with 1 thread (diagnostic)", fmt_time(g_total),
                         fmt_time(t1_total), ratio_text(g_total / t1_total), "—", "—"))
        mem = big["mem"]
        g_mem = mem["gradcalc"]["work"] - mem["gradcalc"]["base"]
        t_mem = mem["torch"]["work"] - mem["torch"]["base"] if "torch" in mem else None
        rm = g_mem / t_mem if t_mem else None
        rows.append(("c2", f"same, peak memory: ru_maxrss(child doing it) − ru_maxrss(child only importing and "
                     f"allocating x) ({label} float64 = {size * 8 / 2**20:.0f} MiB)",
                     fmt_mib(g_mem), fmt_mib(t_mem), ratio_text(rm), "≤ 1.0×", verdict(rm, 1.0)))
        details += ["", f"**(c) {label} elements** — x = standard normals (seed 0), the same array on each side; "
                    f"each side alone in its own processes ({big['rounds']} round(s) of 3 repeats"
                    + (", each process after a warm-up" if big["warmup"] else "") + "; PyTorch 1 thread: one "
                    "round):", "", "| side | value (forward) | gradient (backward) | total | repeats |",
                    "|---|---|---|---|---|"]
        for name, label_ in (("gradcalc", "gradcalc"), ("torch", "PyTorch, 2 threads"),
                             ("torch_1thread", "PyTorch, 1 thread")):
            side = big["time"].get(name)
            if side:
                total = med([a + b for a, b in zip(side["value"], side["backward"], strict=True)])
                details.append(f"| {label_} | {fmt_time(med(side['value']))} | {fmt_time(med(side['backward']))} "
                               f"| {fmt_time(total)} | {len(side['value'])} |")
        if tt:
            dv = abs(g["L"] - tt["L"]) / max(abs(tt["L"]), 1e-300)
            dg = max(abs(a - b) for a, b in zip(g["grad_sample"], tt["grad_sample"], strict=True))
            details.append(f"\nAgreement with PyTorch: |ΔL|/|L| = {dv:.1e}; max |Δ∂L/∂x| over "
                           f"{len(g['grad_sample'])} sampled elements = {dg:.1e}.")
        details.append("Memory children, ru_maxrss: " + "; ".join(
            f"{side} baseline {fmt_mib(v['base'])}, work {fmt_mib(v['work'])}" for side, v in mem.items()) + ".")
        x_bytes = size * 8
        live = []
        for side, v in mem.items():
            text = f"{side} {v['after_value'] / 2**20:.0f} MiB ({v['after_value'] / x_bytes:.1f}× x)" \
                if v.get("after_value") else f"{side} n/a"
            if v.get("peak_value"):
                text += (f", peak {v['peak_value'] / 2**20:.0f} MiB during the value and "
                         f"{v['peak_gradient'] / 2**20:.0f} MiB during the gradient")
            live.append(text)
        details.append("Live once the value is computed (saved for the backward pass; tracemalloc for gradcalc, "
                       "malloc bytes in use for PyTorch): " + "; ".join(live) + ".")

    for row in rows:
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines + details) + "\n"


# --- profiles -----------------------------------------------------------------------------------

def profile(quick: bool) -> None:
    import cProfile
    import io
    import pstats

    from gradcalc.program.api import Program

    def show(title: str, prof: cProfile.Profile) -> None:
        stream = io.StringIO()
        pstats.Stats(prof, stream=stream).sort_stats("tottime").print_stats(12)
        text = stream.getvalue().replace(str(REPO) + os.sep, "")
        for folder in sorted({os.path.dirname(os.path.dirname(m.__file__ or "")) for m in (argparse, json)}):
            text = text.replace(folder + os.sep, "")  # the standard library's and site-packages' folder
        print(f"\n#### cProfile: {title} (top by tottime)\n\n```\n{text[text.find('   ncalls'):].rstrip()}\n```")

    Program(chain_text(10)).run().grad(of="y", wrt=["y"])  # warm-up: lazy imports, caches
    n = 1000 if quick else 10_000
    program = Program(chain_text(n))
    prof = cProfile.Profile()
    prof.enable()
    run = program.run()
    prof.disable()
    show(f"chain N={n:,} build (Program.run())", prof)
    prof = cProfile.Profile()
    prof.enable()
    run.grad(of="y", wrt=["y"])
    prof.disable()
    show(f"chain N={n:,} backward (run.grad)", prof)
    del run
    prof = cProfile.Profile()
    prof.enable()
    Program(chain_text(n))
    prof.disable()
    show(f"chain N={n:,} parse (Program(text))", prof)

    size = 10**6 if quick else 10**7
    x = _big_x(size)
    program = Program(BIG_PROGRAM)
    program.run(values={"x": x}).grad(of="L", wrt=["x"], retain_graph=False)  # warm-up
    prof = cProfile.Profile()
    prof.enable()
    program.run(values={"x": x}).grad(of="L", wrt=["x"], retain_graph=False)
    prof.disable()
    show(f"10^{len(str(size)) - 1} elements, value + gradient", prof)


# --- main ---------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke run: small sizes, few repeats")
    parser.add_argument("--profile", action="store_true", help="print cProfile tables instead of benchmarking")
    parser.add_argument("--only", default="a,b,c", help="sections to run, e.g. --only b,c (default a,b,c)")
    benchkit.add_torch_options(parser, "foundation.json")
    args = benchkit.parse_args_or_run_child(parser, child_main)
    if args.profile:
        profile(args.quick)
        return

    have_torch = benchkit.find_torch(args.no_torch)
    sections = set(args.only.split(","))
    quick = args.quick
    started = time.perf_counter()
    results: dict[str, Any] = {"env": benchkit.torch_environment(quick, have_torch)}

    if "a" in sections:
        log("(a) start-up")
        results["startup"] = bench_startup(3 if quick else 15, have_torch)

    if "b" in sections:
        # (N, gradcalc run+grad repeats, Program(text) repeats, direct parser.parse repeats, tracemalloc pass,
        #  PyTorch repeats)
        plan = [(1_000, 2, 2, 1, True, 3), (10_000, 1, 1, 1, True, 2)] if quick else \
               [(10_000, 3, 3, 2, True, 5), (100_000, 2, 2, 1, True, 3)]
        results["chain"] = {}
        for n, reps, parse_reps, direct_reps, trace, torch_reps in plan:
            log(f"(b) chain N={n:,}")
            item = {"gradcalc": run_child("chain-gradcalc", n, reps, parse_reps, direct_reps, int(trace))}
            if have_torch:
                item["torch"] = run_child("chain-torch", n, torch_reps)
            results["chain"][str(n)] = item

    if "c" in sections:
        size = 10**6 if quick else 10**7
        log(f"(c) sum over {size:,} elements")
        big: dict[str, Any] = {"size": size, "warmup": not quick}
        # Each side in its own processes; two rounds, so drift on a shared machine reaches every side.
        sides = ["gradcalc", "torch", "torch_1thread"] if have_torch else ["gradcalc"]
        rounds, reps = (1, 3) if quick else (2, 3)
        big["rounds"], big["time"] = rounds, {}
        for round_ in range(rounds):
            for side in sides:
                if side == "torch_1thread" and round_ > 0:
                    continue  # a diagnostic: one round is enough
                got = run_child("big-time", side, size, reps, int(not quick))
                into = big["time"].setdefault(side, {"value": [], "backward": []})
                into["value"] += got["value"]
                into["backward"] += got["backward"]
                into["L"], into["grad_sample"] = got["L"], got["grad_sample"]
        big["mem"] = {}
        for side in ["gradcalc", "torch"] if have_torch else ["gradcalc"]:
            base = run_child("big-mem", side, size, 0)
            work = run_child("big-mem", side, size, 1)
            big["mem"][side] = {"base": base["maxrss_kib"], "work": work.pop("maxrss_kib"), **work}
        results["big"] = big

    benchkit.save_results(results, started, args.json_out)
    print(report(results))
    log(f"done in {results['env']['wall_s']:.0f} s" + (f"; raw numbers in {args.json_out}" if args.json_out else ""))


if __name__ == "__main__":
    main()
