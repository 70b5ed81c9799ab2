"""Grading in bulk: `gradcalc check samples/neuron.eq FOLDER --jobs 2 --json` on 1,000 generated submissions.

    python bench/bench_check.py                 # full run: 1,000 submissions, median of 3 (about 1-2 minutes)
    python bench/bench_check.py --quick         # smoke run: 200 submissions, 1 repeat
    python bench/bench_check.py --count 5000    # another number of submissions
    python bench/bench_check.py --keep DIR      # write the submissions to DIR and leave them there
    python bench/bench_check.py --profile       # cProfile of the in-process path (Judge + judge_file)
    python bench/bench_check.py --derivation    # #23: judging a 10-line derivation in-process (seconds)

Target (issue: grading throughput): grading 1,000 generated submissions against the toy network
finishes in under 30 s on the 2-core machine with --jobs 2; report submissions per second.
Target (#20): with a rubric (the key's `check dL/dw1 points 2` questions, RUBRIC) and the class's
mistakes, 1,000 submissions in under 5 s with --jobs 2, and judging one submission in-process near 1 ms.
Each run is timed with both keys: the plain one (samples/neuron.eq) and the same network with questions.

The submissions (seeded, --seed) are a mix as a class hands them in: answers files of 5-7 claims
(one per line, dL/dw1 or ∂L/∂w1, comments and blank lines), model files (.eq: the network and
5-7 `check` statements) and files with a syntax error on one line (in an answers file that claim alone
is invalid; a model with one is not judged). Claims are numbers (some written
with decimals, judged to the digits written), expressions, and wrong answers of the known kinds: sign
errors, a missing chain-rule path, right only at the program's values (4*a for w4*a), a factor off,
a wrongly rounded number, an unknown variable. Every claim's verdict is known when it is written,
so the totals in the command's JSON are checked against the generator's before any time is reported.

What is timed is the whole command as a teacher runs it, in a subprocess from the repository's root
(the console script next to this interpreter): start-up, the key run, worker processes, judging and
the JSON on standard output (captured, not printed). --jobs 2 and --jobs 1 alternate over the
repeats after one untimed warm-up run; times are medians. Diagnostics: the same command on a folder
of one submission (the fixed cost: start-up, key, workers), and the in-process path in a child process
(`Judge` on the key's run, `judge_file` for each submission, no workers): the judging work alone.

Target (#23): judging a 10-line derivation (a claim and its working, each line checked against the
one before) under 50 ms in-process: `--derivation` times it on a key of its own, fresh judge and warm.

Markdown report on standard output, progress on standard error, raw numbers in bench/out/check.json
(--json-out PATH, '' for none).
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchkit
from benchkit import REPO, fmt_time, log, med

KEY = "samples/neuron.eq"
TARGET_S = 30.0
RUBRIC_TARGET_S = 5.0  # #20: with questions and the class's mistakes
TARGET_JOBS = 2

# The toy network (samples/neuron.eq): a = 2, w1 = 3, w2 = -1, w3 = 0.5, w4 = 4; b = 6, c = -2, d = -5, L = 15.
MODEL = """a = 2; w1 = 3; w2 = -1; w3 = 0.5; w4 = 4
b = w1*a
c = w2*a
d = w3*b + w4*c
L = 10 - d
"""

# For each claimed quantity: right answers, and wrong ones by kind. The key's gradients are
# ∂L/∂d = -1, ∂L/∂b = -w3, ∂L/∂c = -w4, ∂L/∂w1 = -w3*a, ∂L/∂w2 = -w4*a, ∂L/∂w3 = -b, ∂L/∂w4 = -c,
# ∂L/∂a = -(w3*w1 + w4*w2) = 2.5 (two chain-rule paths, -1.5 through b and 4 through c), L = 15.
CLAIMS: dict[str, dict[str, list[str]]] = {
    "d": {"right": ["-1", "-1.0"], "sign": ["1"], "factor": ["-2"]},
    "b": {"right": ["-w3", "-0.5", "-0.50"], "sign": ["w3", "0.5"], "point": ["-0.25*a"], "factor": ["-2*w3"]},
    "c": {"right": ["-w4", "-4"], "sign": ["w4"], "point": ["-2*a"]},
    "w1": {"right": ["-w3*a", "-a*w3", "-1", "-1.00"], "sign": ["w3*a", "1"], "point": ["-0.5*a", "-w3*2"],
           "factor": ["-2*w3*a"]},
    "w2": {"right": ["-w4*a", "-8", "-8.0", "-a*w4"], "sign": ["w4*a"], "point": ["-4*a"], "factor": ["-w4"]},
    "w3": {"right": ["-b", "-w1*a", "-6"], "sign": ["b", "6"], "point": ["-3*a"]},
    "w4": {"right": ["-c", "-w2*a", "2", "2.0"], "sign": ["c", "-2"], "point": ["a"], "factor": ["-2*c"]},
    "a": {"right": ["-(w3*w1 + w4*w2)", "-w3*w1 - w4*w2", "2.5", "2.50"], "sign": ["w3*w1 + w4*w2", "-2.5"],
          "path": ["-w3*w1", "-w4*w2", "-1.5", "4"], "point": ["1.25*a"], "rounding": ["2.4", "2.6"]},
    "L": {"right": ["15", "10 - d", "15.0"], "sign": ["-15"], "factor": ["30"]},
}
# The rubric key's questions and points (written after MODEL into the benchmark's folder).
RUBRIC = {"w1": 2, "a": 2, "d": 1, "L": 1, "w4": 1}
UNKNOWN = ["dL/dw5 = 1", "dL/da = w5*a", "dL/dx = 0"]  # a name the program does not have: an invalid claim
BROKEN = ["dL/dw1 = -1/2a", "dL/da = -(w3*w1 + w4*w2", "dL/dw2 = -w4 *", "dL/dw3 == -b", "dL/dw4 = -c)",
          "dL/db = -w3 +* 1"]


def _left(of: str) -> str:
    return "L" if of == "L" else f"dL/d{of}"


def submission(rng: random.Random) -> tuple[str, str, dict[str, Any]]:
    """One submission: (file suffix, text, what judging it must give)."""
    kind = rng.choices(["answers", "model", "broken"], weights=[68, 22, 10])[0]
    strong = rng.random() < 0.4  # a student who gets everything right
    targets = rng.sample(list(CLAIMS), rng.randint(5, 7))
    lines, right = [], 0
    for of in targets:
        forms = CLAIMS[of]
        if strong or rng.random() < 0.7:
            claimed, ok = rng.choice(forms["right"]), True
        else:
            claimed, ok = rng.choice(forms[rng.choice([k for k in forms if k != "right"])]), False
        left = _left(of)
        if of != "L" and rng.random() < 0.2:
            left = f"∂L/∂{of}"
        lines.append(f"{left} = {claimed}")
        right += ok
    if not strong and rng.random() < 0.03:
        lines[rng.randrange(len(lines))] = rng.choice(UNKNOWN)
        right = None  # recounted below
    if right is None:
        right = sum(_is_right(line) for line in lines)
    if kind == "broken":
        lines[rng.randrange(len(lines))] = rng.choice(BROKEN)
    if rng.random() < 0.3:
        lines.insert(rng.randrange(len(lines) + 1), "# " + rng.choice(["by hand", "chain rule", "check later"]))
    if rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines) + 1), "")
    broken_model = kind == "broken" and rng.random() < 0.3
    if kind == "model" or broken_model:
        text = MODEL + "\n" + "".join(f"check {line}\n" if line and not line.startswith("#") else f"{line}\n"
                                      for line in lines)
        suffix = ".eq"
    else:
        text = "\n".join(lines) + "\n"
        suffix = ".txt"
    if kind == "broken":  # the broken line of an answers file is an invalid claim; a broken model is not judged
        right = sum(_is_right(line) for line in lines)
    judged = kind != "broken" or not broken_model
    last = {_asked(line): line for line in lines if line and not line.startswith("#")}  # the last answer counts
    score = sum(points for of, points in RUBRIC.items() if of in last and _is_right(last[of])) if judged else 0
    expect = {"judged": judged, "claims": len(targets), "right": right, "score": score}
    return suffix, text, expect


def _asked(line: str) -> str:
    """The quantity a line claims (w1 of dL/dw1 = ..., ∂L/∂w1 = ...; L), as the rubric's keys name it."""
    left = line.split("=", 1)[0].strip()
    return "L" if left == "L" else left.replace("∂L/∂", "").replace("dL/d", "")


def _is_right(line: str) -> bool:
    left, _, claimed = line.partition(" = ")
    of = "L" if left == "L" else left.replace("∂L/∂", "").replace("dL/d", "")
    return of in CLAIMS and claimed in CLAIMS[of]["right"]


def generate(folder: Path, count: int, seed: int) -> tuple[dict[str, int], dict[str, Any]]:
    """Write `count` submissions to folder; return the totals `gradcalc check --json` must report, with the
    plain key and with the rubric key."""
    rng = random.Random(seed)
    totals = {"submissions": count, "passed": 0, "failed": 0, "not_judged": 0, "timed_out": 0,
              "claims_right": 0, "claims_total": 0}
    rubric: dict[str, Any] = {**totals}
    scores = []
    kinds = {".txt": 0, ".eq": 0}
    full = sum(RUBRIC.values())
    for index in range(count):
        suffix, text, expect = submission(rng)
        (folder / f"s{index:05d}{suffix}").write_text(text, encoding="utf-8")
        kinds[suffix] += 1
        scores.append(expect["score"])
        if not expect["judged"]:
            totals["not_judged"] += 1
            rubric["not_judged"] += 1
            continue
        for counts in (totals, rubric):
            counts["claims_total"] += expect["claims"]
            counts["claims_right"] += expect["right"]
        totals["passed" if expect["right"] == expect["claims"] else "failed"] += 1
        rubric["passed" if expect["score"] == full else "failed"] += 1
    rubric["max_score"] = full
    rubric["mean_score"] = round(sum(scores) / count, 4)
    log(f"generated {count} submissions in {folder}: {kinds['.txt']} answers files, {kinds['.eq']} models; "
        f"expected {totals}; with the rubric {rubric}")
    return totals, rubric


def write_rubric_key(folder: Path) -> Path:
    """The toy network with the rubric's questions: the key of the #20 runs."""
    key = folder / "rubric.eq"
    key.write_text(MODEL + "".join(f"check {_left(of)} points {points}\n" for of, points in RUBRIC.items()),
                   encoding="utf-8")
    return key


# --- the command --------------------------------------------------------------------------------

def gradcalc_command() -> list[str]:
    """The console script installed next to this interpreter (not a pyenv shim), else -m."""
    script = Path(sys.executable).parent / "gradcalc"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "gradcalc"]


@dataclass
class Timing:
    wall: float
    cpu: float  # the command's own CPU time, its workers' included
    others: float | None  # CPUs other processes kept busy meanwhile, on average
    doc: dict[str, Any]


def time_command(folder: Path, jobs: int, key: str | Path = KEY) -> Timing:
    """Wall time of `gradcalc check KEY FOLDER --jobs N --json`, its CPU time, and its JSON document."""
    command = [*gradcalc_command(), "check", str(key), str(folder), "--jobs", str(jobs), "--json"]
    watch = benchkit.CpuWatch()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    wall, own, others = watch.stop()
    if done.returncode not in (0, 1):
        raise RuntimeError(f"exit {done.returncode}: {' '.join(command)}\n{done.stderr[-2000:]}")
    return Timing(wall, own, others, json.loads(done.stdout))


def check_totals(doc: dict[str, Any], expected: dict[str, Any], what: str) -> None:
    if doc["totals"] != expected:
        raise SystemExit(f"{what}: the totals differ from the generator's\n  got      {doc['totals']}\n"
                         f"  expected {expected}")


# --- the in-process path (child) ----------------------------------------------------------------

def child_main(argv: list[str]) -> None:
    """--child inprocess FOLDER KEY [profile]: Judge + judge_file (and, with questions in the key, the scores
    and the class's mistakes) over every submission, in this process."""
    kind, folder, key, *rest = argv
    if kind != "inprocess":
        raise SystemExit(f"unknown child {kind}")
    os.chdir(REPO)
    started = time.perf_counter()
    from gradcalc.cli import jsonout
    from gradcalc.program.api import load
    from gradcalc.tools.homework import check as C
    from gradcalc.tools.homework import rubric

    imported = time.perf_counter()
    program = load(key)
    run = program.run(keep_values=True)
    judge = C.Judge(run)
    asked = rubric.questions(program.module, run.frame, program.source)
    items = C.submissions([folder])
    keyed = time.perf_counter()

    def judge_all() -> list[Any]:
        reports = [rubric.score(C.judge_file(judge, item.path, item.name, (item.root,)), asked, run.frame)
                   for item in items]
        rubric.mistakes(reports, asked, "all")
        return reports

    if rest and rest[0] == "profile":
        import cProfile
        import io
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        reports = judge_all()
        profiler.disable()
        for order in ("tottime", "cumulative"):
            buffer = io.StringIO()
            pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(order).print_stats(20)
            print(f"### top 20 by {order}\n\n```\n{buffer.getvalue().strip()}\n```\n", file=sys.stderr)
    else:
        reports = judge_all()
    done = time.perf_counter()
    benchkit.emit_result({"import_s": imported - started, "key_s": keyed - imported, "judge_s": done - keyed,
                          "count": len(items), "totals": jsonout.grading_totals(reports)})


# --- main ---------------------------------------------------------------------------------------

# #23: a key, and a derivation of 10 lines that all follow (and the same with its last line broken: the product
# rule's term dropped, which the diagnosis names), as a student writes one.
DERIVATION_KEY = "x = 0.7\ny = x^2*sin(x)\n"
DERIVATION = """dy/dx = 2x sin(x) + x^2 cos(x)
= x(2 sin(x) + x cos(x))
= 2x sin(x) + x x cos(x)
= x^2 cos(x) + 2x sin(x)
= x (x cos(x) + 2 sin(x))
= x^2 cos(x) + x sin(x) + x sin(x)
= sin(x) 2x + cos(x) x^2
= x (2 sin x + x cos x)
= 2 x sin(x) + x^2 cos(x)
= x^2 cos(x) + 2x sin(x)"""
TARGET_DERIVATION_S = 0.050


def bench_derivation(repeats: int) -> None:
    """Judge the 10-line derivation in-process: with a fresh Judge each time (the key's nearby runs made
    anew) and with one warm Judge (a grader's case); right, and with its last line broken. Wall-clock and
    CPU time: on the shared machine the load multiplies the first, and the target is judged on the second."""
    from gradcalc.program.api import Program
    from gradcalc.tools.homework.check import Judge, parse_claim_option

    run = Program(DERIVATION_KEY).run({}, keep_values=True)
    broken = DERIVATION.rsplit("\n", 1)[0] + "\n= 2x sin(x)"
    rows = []
    for name, text, follow in (("all 10 lines follow", DERIVATION, 10), ("line 10 broken", broken, 9)):
        claims = parse_claim_option(text)
        warm = Judge(run)
        times: dict[str, list[tuple[float, float]]] = {"fresh judge": [], "warm judge": []}
        for _ in range(repeats):
            for kind, taken in times.items():
                judge = Judge(run) if kind == "fresh judge" else warm
                wall, cpu = time.perf_counter(), time.process_time()
                verdict = judge.report("bench", claims).verdicts[0]
                taken.append((time.perf_counter() - wall, time.process_time() - cpu))
                working = verdict.working
                if working is None or working.lines != 10 or working.follow != follow:  # what is timed is right
                    raise SystemExit(f"the derivation was misjudged: {working}")
        rows.append((name, *[(med([w for w, _ in times[k]]), med([c for _, c in times[k]])) for k in times]))
    print(f"## #23 derivations (`python bench/bench_check.py --derivation`), {time.strftime('%Y-%m-%d %H:%M')}, "
          f"median of {repeats}, load {benchkit.loadavg()}\n")
    print("| derivation | fresh judge: wall / CPU | warm judge: wall / CPU | target (CPU) |\n| --- | --- | --- | --- |")
    for name, (fresh_wall, fresh_cpu), (warm_wall, warm_cpu) in rows:
        met = max(fresh_cpu, warm_cpu) < TARGET_DERIVATION_S
        print(f"| {name} | {fmt_time(fresh_wall)} / {fmt_time(fresh_cpu)} | {fmt_time(warm_wall)} / "
              f"{fmt_time(warm_cpu)} | < {fmt_time(TARGET_DERIVATION_S)}: {'met' if met else 'NOT met'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 submissions, 1 repeat")
    parser.add_argument("--count", type=int, default=None, help="submissions to generate (default 1,000)")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs per --jobs (default 3)")
    parser.add_argument("--seed", type=int, default=0, help="the generator's seed")
    parser.add_argument("--keep", default="", help="write the submissions to this folder and keep them")
    parser.add_argument("--profile", action="store_true", help="cProfile of the in-process path instead of timings")
    parser.add_argument("--json-out", default=str(REPO / "bench" / "out" / "check.json"),
                        help="where to write the raw numbers ('' for nowhere)")
    parser.add_argument("--derivation", action="store_true", help="#23: time judging a 10-line derivation")
    args = benchkit.parse_args_or_run_child(parser, child_main)
    if args.derivation:
        bench_derivation(args.repeats or 30)
        return
    count = args.count or (200 if args.quick else 1000)
    repeats = args.repeats or (1 if args.quick else 3)
    started = time.perf_counter()

    base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gradcalc-bench-check-"))
    folder, one = base / "submissions", base / "one"
    for path in (folder, one):
        if path.exists():
            shutil.rmtree(path)
        path.mkdir(parents=True)
    try:
        expected = generate(folder, count, args.seed)
        first = sorted(folder.iterdir())[0]
        shutil.copy(first, one / first.name)
        if args.profile:
            log("profiling the in-process path (Judge + judge_file) ...")
            result = benchkit.run_child(__file__, "inprocess", folder, KEY, "profile", timeout=1800)
            check_totals(result, expected[0], "in-process")
            print(f"in-process: key {fmt_time(result['key_s'])}, judging {fmt_time(result['judge_s'])} "
                  f"for {result['count']} submissions (under cProfile; the tables are on standard error)")
            return
        report(args, base, folder, one, expected, count, repeats, started)
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)


def report(args: argparse.Namespace, base: Path, folder: Path, one: Path,
           expecting: tuple[dict[str, int], dict[str, Any]], count: int, repeats: int, started: float) -> None:
    expected, with_rubric = expecting
    key = write_rubric_key(base)
    env = {"date": time.strftime("%Y-%m-%d %H:%M"), "gradcalc": benchkit.dist_version("gradcalc"),
           "commit": benchkit.git_describe(), "python": sys.version.split()[0], "cpus": os.cpu_count(),
           "load_before": benchkit.loadavg(), "count": count, "repeats": repeats, "seed": args.seed}
    log(f"warm-up run (--jobs {TARGET_JOBS}) ...")
    check_totals(time_command(folder, TARGET_JOBS).doc, expected, "warm-up")
    runs: dict[int, list[Timing]] = {2: [], 1: []}
    rubric_runs: dict[int, list[Timing]] = {2: [], 1: []}
    for round_ in range(repeats):  # the plain key and the rubric key in turn: the same load for both
        for jobs in (2, 1) if round_ % 2 == 0 else (1, 2):
            for with_key, want, into, what in ((KEY, expected, runs, ""), (key, with_rubric, rubric_runs, "rubric, ")):
                timing = time_command(folder, jobs, with_key)
                check_totals(timing.doc, want, f"{what}--jobs {jobs}")
                if with_key == key and not timing.doc["mistakes"]:
                    raise SystemExit("the rubric run has no class report")
                timing.doc = {}
                into[jobs].append(timing)
                others = "?" if timing.others is None else f"{timing.others:.2f}"
                log(f"  {what}--jobs {jobs}: {timing.wall:.2f} s wall, {timing.cpu:.2f} s CPU, others {others} CPUs")
    fixed = [time_command(one, TARGET_JOBS).wall for _ in range(3)]
    log("in-process path (Judge + judge_file, one process) ...")
    inproc = benchkit.run_child(__file__, "inprocess", folder, KEY, timeout=1800)
    check_totals(inproc, expected, "in-process")
    inproc_rubric = benchkit.run_child(__file__, "inprocess", folder, key, timeout=1800)
    check_totals(inproc_rubric, with_rubric, "in-process with the rubric")

    times = {jobs: [t.wall for t in ts] for jobs, ts in runs.items()}
    medians = {jobs: med(ts) for jobs, ts in times.items()}
    print(f"## Grading throughput — {env['date']}, {count:,} submissions, median of {repeats}\n")
    print(f"gradcalc {env['gradcalc']} ({env['commit']}), Python {env['python']}, {env['cpus']} CPUs, "
          f"load average before {env['load_before']}, after {benchkit.loadavg()}.\n")
    print(f"`gradcalc check {KEY} FOLDER --jobs N --json`, whole command in a subprocess:\n")
    print("| --jobs | wall (median) | min | max | submissions/s | per submission | CPU (median) | others |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for jobs in (2, 1):
        wall = medians[jobs]
        busy = [t.others for t in runs[jobs] if t.others is not None]
        print(f"| {jobs} | {fmt_time(wall)} | {fmt_time(min(times[jobs]))} | {fmt_time(max(times[jobs]))} | "
              f"{count / wall:,.0f} | {fmt_time(wall / count)} | {fmt_time(med([t.cpu for t in runs[jobs]]))} | "
              f"{', '.join(f'{b:.2f}' for b in busy) or 'n/a'} |")
    met = medians[TARGET_JOBS] < TARGET_S * count / 1000
    print()
    print(f"- target: {count:,} submissions in < {TARGET_S * count / 1000:g} s with --jobs {TARGET_JOBS}: "
          f"{'**yes**' if met else 'no'} ({fmt_time(medians[TARGET_JOBS])})")
    print(f"- --jobs 1 / --jobs 2: {medians[1] / medians[2]:.2f}× (\"others\": CPUs that other processes kept busy "
          "during each run, from /proc/stat; with both CPUs taken, --jobs 2 cannot gain)")
    print(f"- fixed cost (the same command on a folder of 1 submission): {fmt_time(med(fixed))}")
    per = inproc["judge_s"] / inproc["count"]
    print(f"- in-process judging (one process, no workers): {fmt_time(inproc['judge_s'])} for {inproc['count']:,} "
          f"submissions, {fmt_time(per)} each ({1 / per:,.0f}/s); key run {fmt_time(inproc['key_s'])}, "
          f"imports {fmt_time(inproc['import_s'])}")
    rubric_medians = {jobs: med([t.wall for t in ts]) for jobs, ts in rubric_runs.items()}
    print(f"- #20, with the rubric ({len(RUBRIC)} questions, {sum(RUBRIC.values())} points) and the class's mistakes: "
          + ", ".join(f"--jobs {jobs} {fmt_time(rubric_medians[jobs])} (min {fmt_time(min(t.wall for t in ts))}; "
                      f"others {', '.join(f'{t.others:.2f}' for t in ts if t.others is not None) or 'n/a'})"
                      for jobs, ts in rubric_runs.items())
          + f"; target < {RUBRIC_TARGET_S * count / 1000:g} s with --jobs {TARGET_JOBS}: "
          + ("**yes**" if rubric_medians[TARGET_JOBS] < RUBRIC_TARGET_S * count / 1000 else "no"))
    per_rubric = inproc_rubric["judge_s"] / inproc_rubric["count"]
    print(f"- #20, in-process with the rubric (judging, scoring, the class's mistakes): "
          f"{fmt_time(inproc_rubric['judge_s'])} for {inproc_rubric['count']:,}, {fmt_time(per_rubric)} each; "
          f"mean score {with_rubric['mean_score']} of {with_rubric['max_score']}, {with_rubric['passed']} full marks")
    t = expected
    print(f"- totals (JSON = generated, checked on every run): {t['submissions']:,} submissions, "
          f"{t['passed']} all right, {t['failed']} with wrong or invalid claims, {t['not_judged']} not judged "
          f"(models with a syntax error), {t['timed_out']} timed out; "
          f"{t['claims_right']:,} of {t['claims_total']:,} claims right")
    results = {"env": env, "expected": expected, "times": {str(k): v for k, v in times.items()},
               "cpu": {str(k): [t.cpu for t in ts] for k, ts in runs.items()},
               "others": {str(k): [t.others for t in ts] for k, ts in runs.items()},
               "medians": {str(k): v for k, v in medians.items()}, "fixed": fixed, "inprocess": inproc,
               "met": met,
               "rubric": {"expected": with_rubric, "medians": {str(k): v for k, v in rubric_medians.items()},
                          "times": {str(k): [t.wall for t in ts] for k, ts in rubric_runs.items()},
                          "inprocess": inproc_rubric}}
    benchkit.save_results(results, started, args.json_out)


if __name__ == "__main__":
    main()
