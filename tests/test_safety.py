"""Untrusted files stay harmless (issue #17): teachers run gradcalc on files their students wrote.

A class of hostile submissions is graded by the real command: links out of the folder, devices, named
pipes, sockets, oversized files, escape sequences in names and claims, claims that try to read the
gradebook or take all the memory. Each is reported once, with the right status; no byte of a secret
reaches the output; no control character reaches a terminal; the JSON stays one strict document. The
limits (--max-elements, --max-file-size, --max-memory, --timeout) are each a clear error (exit 2) that
names its flag, never an internal error (exit 3). Every expected verdict and number is worked out by
hand from samples/neuron.eq (a = 2, w1 = 3, w2 = -1, w3 = 0.5, w4 = 4: ∂L/∂w1 = -w3·a = -1,
∂L/∂a = -(w3·w1 + w4·w2) = 2.5, ∂L/∂w4 = -c = 2), never copied from gradcalc's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from helpers import (
    ENV,
    EXIT_BAD_INPUT,
    EXIT_BUG,
    EXIT_OK,
    EXIT_WRONG,
    NEURON,
    REPO,
    CliResult,
    assert_bad_input,
    assert_no_traceback,
    examples,
    json_error,
    run_cli,
    strict_json,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numpy.lib import format as npy

from gradcalc.language.parser import DEFAULT_MAX_DEPTH, raise_recursion_limit

raise_recursion_limit(DEFAULT_MAX_DEPTH)  # before Hypothesis runs, so it does not see the limit change

LINUX = sys.platform.startswith("linux")
EXIT_INTERRUPTED, EXIT_BROKEN_PIPE = 130, 141

# What must never reach a terminal: C0 controls but newline and tab, DEL, C1 (ESC is C0), and the bidi
# marks, embeddings, overrides and isolates (Trojan Source), and the zero-width characters (invisible).
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")


def test_a_zero_width_character_is_shown_and_the_caret_stays_under_it() -> None:
    """A zero-width space pasted into a line: written as \\u200b, with the caret under it (invisible, the caret
    seemed one place off)."""
    result = run_cli("grad", "-e", "y = 1 +\u200b 2")
    assert result.exit_code == 2
    text = result.output
    no_control(text, "the error")
    shown = next(line for line in text.splitlines() if line.lstrip().startswith("1 |"))
    caret = next(line for line in text.splitlines() if "^" in line)
    assert shown.index("\\u200b") == caret.index("^"), text
    assert caret.count("^") == len("\\u200b"), text


# --- shared helpers -----------------------------------------------------------------------------------------

def no_control(text: str, where: str) -> None:
    found = CONTROL.search(text)
    assert found is None, (f"{where} holds the control character {found.group()!r} at {found.start()}: "
                           f"...{text[max(0, found.start() - 80):found.start() + 80]!r}...")


def no_secret(texts: list[str], secrets: list[str]) -> None:
    for secret in secrets:
        for text in texts:
            assert secret not in text, f"the secret {secret!r} leaked into the output:\n{text[-3000:]}"


def process_env(**extra: str) -> dict[str, str]:
    env = {**os.environ, **{k: v for k, v in ENV.items() if v is not None}, **extra}
    for key, value in ENV.items():
        if value is None:
            env.pop(key, None)
    return env


def gradcalc(*args: object, env: dict[str, str] | None = None, timeout: float = 60,
             cwd: Path | str = REPO) -> subprocess.CompletedProcess[str]:
    """The real command in a process of its own: `python -m gradcalc ARGS` (the console script's entry)."""
    return subprocess.run([sys.executable, "-m", "gradcalc", *map(str, args)], cwd=cwd, env=env or process_env(),
                          capture_output=True, text=True, encoding="utf-8", timeout=timeout, check=False)


def as_result(done: subprocess.CompletedProcess[str]) -> CliResult:
    return CliResult(done.returncode, done.stdout, done.stderr)


def one_json_error(stderr: str) -> dict[str, Any]:
    """stderr is exactly one JSON document {"error": {...}}; its body."""
    doc = strict_json(stderr)
    assert isinstance(doc, dict) and list(doc) == ["error"], stderr
    assert isinstance(doc["error"], dict) and doc["error"].get("message"), stderr
    return doc["error"]


def says(body: dict[str, Any]) -> str:
    return f"{body.get('message', '')} {body.get('hint', '')}"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def key_folder(root: Path, extra: str = "") -> tuple[Path, str]:
    """samples/neuron.eq copied into root/key, with a gradebook next to it: (the key, the gradebook's marker)."""
    folder = root / "key"
    folder.mkdir(parents=True, exist_ok=True)
    key = folder / "neuron.eq"
    key.write_text(Path(NEURON).read_text(encoding="utf-8") + extra, encoding="utf-8")
    marker = f"GRADEBOOK-{uuid.uuid4().hex}"
    write(folder / "grades.csv", f"{marker}\n{GRADEBOOK_NUMBER}\n")  # a header row, then a grade
    return key, marker


GRADEBOOK_NUMBER = "86420.1357"  # shown to 6 digits in a table: 86420.1
GRADEBOOK_SECRETS = [GRADEBOOK_NUMBER, "86420.1"]


def passwd_line() -> str:
    """The first line of /etc/passwd (root's), as the file holds it."""
    try:
        first = Path("/etc/passwd").read_text(encoding="utf-8", errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return "root:x:0:0"
    return first if len(first) >= 10 else "root:x:0:0"


SUMMARY = re.compile(r"^(\d+) submissions?: (\d+) all right, (\d+) with wrong or invalid claims?, (\d+) not judged; "
                     r"(\d+) of (\d+) claims? right$", re.MULTILINE)


def table_rows(stdout: str) -> list[str]:
    """The grading table's rows: the lines after its header, up to the first blank line."""
    lines = stdout.splitlines()
    assert lines and lines[0].split()[:3] == ["submission", "claims", "result"], stdout[:2000]
    rows = []
    for line in lines[1:]:
        if not line.strip():
            break
        rows.append(line)
    return rows


# --- 1. a hostile class ----------------------------------------------------------------------------------

ESC_NAME = "\x1b[2J\x1b[H zed.txt"
FORGED_NAME = "frank.txt 6\u22156 all right\nx.txt"  # a newline, and a second line that looks like a row
PIPE_NAME = "pipe\u202e.txt"
BIG_NAME = "big\x1b[31m.txt"
HOG = ("dL/dw1 = sum(" + " + ".join(["ones(4000, 4000)"] * 6) + ")\n")  # 128 MB each, under --max-elements

# name: (kind, right, total, statuses of the claims (judged) or words of the reason (not judged))
Expected = tuple[str, int, int, tuple[str, ...]]


def hostile_class(root: Path, outside: Path, gradebook: Path) -> dict[str, Expected]:
    """Write the class into root; what each submission should get."""
    root.mkdir(parents=True)
    expected: dict[str, Expected] = {}

    def answers(name: str, text: str, kind: str, right: int, total: int, statuses: tuple[str, ...]) -> None:
        write(root / name, text)
        expected[name] = (kind, right, total, statuses)

    def refused(name: str, *why: str) -> None:
        expected[name] = ("not_judged", 0, 0, why)

    answers("alice.txt", "dL/dw1 = -1\ndL/da = 2.5\ndL/dw1 = -w3*a\n", "passed", 3, 3, ("right",) * 3)
    answers("bob.txt", "dL/da = -w3*w1\n", "failed", 0, 1, ("wrong",))
    answers("carol.txt", 'dL/dw1 = load("grades.csv")\ndL/dw1 = load("../key/grades.csv")\n'
            f'dL/dw1 = sum(load("{gradebook}"))\ndL/dw1 = load("/etc/passwd")\n', "failed", 0, 4, ("invalid",) * 4)
    answers(ESC_NAME, "dL/dw1 = -1\n", "passed", 1, 1, ("right",))
    answers(FORGED_NAME, "dL/dw1 = 1\n", "failed", 0, 1, ("wrong",))
    answers("osc.txt", 'dL/dw4 = 2\ndL/dw1 = -1 \x1b]0;pwned\x07\ndL/da = load("\u202etxt.csv")\n', "failed", 1, 3,
            ("right", "invalid", "invalid"))
    answers("model.eq", "# a model: its statements are ignored, its check statements judged against the key\n"
            'a = 100; w1 = 1; w2 = 1; w3 = 1; w4 = 1\nsecret = load("../key/grades.csv")\n'
            "b = w1*a\nc = w2*a\nd = w3*b + w4*c\nL = 10 - d\n"
            "check dL/dw1 = -w3*a\ncheck dL/da = -w3*w1\n", "failed", 1, 2, ("right", "wrong"))
    answers("rand.txt", "dL/dw1 = sum(randn(3))\n", "failed", 0, 1, ("wrong",))
    answers("hog.txt", HOG, "not_judged", 0, 0, ("--max-memory",))  # or invalid: see the test
    (root / "passwd.txt").symlink_to("/etc/passwd")
    refused("passwd.txt", "outside the folder")
    (root / "environ.txt").symlink_to("/proc/self/environ")
    refused("environ.txt", "outside the folder")
    (root / "zero.txt").symlink_to("/dev/zero")
    refused("zero.txt", "outside the folder|device")
    (root / "elsewhere").symlink_to(outside, target_is_directory=True)
    refused("elsewhere", "outside the folder")
    os.mkfifo(root / PIPE_NAME)
    refused(PIPE_NAME, "named pipe")
    big = "dL/dw1 = -1\n" + "# padding to 2 KB\n" * 120
    assert len(big.encode()) > 2000
    write(root / BIG_NAME, big)
    refused(BIG_NAME, "larger than", "--max-file-size")
    here = Path.cwd()
    os.chdir(root)  # a socket's path is short this way
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind("sock.txt")
    finally:
        os.chdir(here)
    refused("sock.txt", "socket")
    return expected


def expected_totals(expected: dict[str, Expected]) -> dict[str, int]:
    kinds = [kind for kind, *_ in expected.values()]
    return {"submissions": len(expected), "passed": kinds.count("passed"), "failed": kinds.count("failed"),
            "not_judged": kinds.count("not_judged"), "timed_out": 0,
            "claims_right": sum(right for _, right, _, _ in expected.values()),
            "claims_total": sum(total for _, _, total, _ in expected.values())}


def assert_reason(why: tuple[str, ...], text: str, name: str) -> None:
    for word in why:
        assert any(w in text for w in word.split("|")), f"{name!r}: the reason should name {word!r}: {text!r}"


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, Any]:
    outside = tmp_path / "outside"
    write(outside / "stolen.txt", "dL/dw1 = -1\n")
    key, marker = key_folder(tmp_path)
    folder = tmp_path / "class"
    expected = hostile_class(folder, outside, key.parent / "grades.csv")
    env_marker = f"ENVSECRET-{uuid.uuid4().hex}"
    return {"key": key, "folder": folder, "expected": expected,
            "secrets": [marker, *GRADEBOOK_SECRETS, env_marker, passwd_line()],
            "env": process_env(GRADCALC_TEST_SECRET=env_marker)}


GRADE_LIMITS = ("--jobs", "2", "--max-file-size", "1K", "--max-memory", "300M")


def grade_hostile(hostile: dict[str, Any], *flags: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Grade the hostile class: it exits 1 (some submission is not all right), with no traceback or secret."""
    start = time.monotonic()
    done = gradcalc("check", hostile["key"], hostile["folder"], *GRADE_LIMITS, *flags, env=hostile["env"])
    elapsed = time.monotonic() - start
    assert done.returncode == EXIT_WRONG, f"exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert_no_traceback(as_result(done))
    no_secret([done.stdout, done.stderr], hostile["secrets"])
    return done, elapsed


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="FIFOs, sockets, /proc and RLIMIT_DATA: Linux")
def test_a_hostile_class_graded_as_json(hostile: dict[str, Any]) -> None:
    """Each submission once, with its status and reason; exact totals; no secret; strict JSON, real names."""
    expected: dict[str, Expected] = hostile["expected"]
    done, elapsed = grade_hostile(hostile, "--json")
    assert done.stderr == "" or one_json_error(done.stderr), done.stderr
    # the raw JSON text holds no control or bidi character either: only escapes of them
    no_control(done.stdout.rstrip("\n"), "the JSON on stdout")
    doc = strict_json(done.stdout)
    names = [s["submission"] for s in doc["submissions"]]
    assert sorted(names) == sorted(expected), f"each submission exactly once, by its real name: {names!r}"
    assert len(names) == len(set(names))
    assert not any(name.startswith("elsewhere" + os.sep) for name in names), "a link to a folder outside was walked"
    hog_invalid = False
    for sub in doc["submissions"]:
        name = sub["submission"]
        kind, right, total, detail = expected[name]
        if name == "hog.txt":  # contained: not judged for memory, or its claim invalid for memory
            assert sub["passed"] is False, sub
            if "error" not in sub:
                hog_invalid = True
                assert [r["status"] for r in sub["results"]] == ["invalid"], sub
                assert_reason(("memory",), says(sub["results"][0]["error"]), name)
            else:
                assert_reason(("out of memory", "--max-memory"), says(sub["error"]), name)
            continue
        assert (sub["right"], sub["total"]) == (right, total), (name, sub)
        assert sub["passed"] is (kind == "passed"), (name, sub)
        if kind == "not_judged":
            assert "error" in sub and sub["results"] == [], (name, sub)
            assert_reason(detail, says(sub["error"]), name)
            assert sub["first_problem"], sub
        else:
            assert "error" not in sub, (name, sub)
            assert [r["status"] for r in sub["results"]] == list(detail), (name, sub)
    if hog_invalid:
        expected = {**expected, "hog.txt": ("failed", 0, 1, ("invalid",))}
    assert doc["totals"] == expected_totals(expected), doc["totals"]
    assert doc["passed"] is False
    carol = next(s for s in doc["submissions"] if s["submission"] == "carol.txt")
    for result in carol["results"]:  # the gradebook's claims are refused for what they are: reading a file
        assert result["expected"] is None or result["got"] is None, result
    assert elapsed < 60, f"grading the hostile class took {elapsed:.1f} s"


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="FIFOs, sockets, /proc and RLIMIT_DATA: Linux")
def test_a_hostile_class_graded_as_text(hostile: dict[str, Any]) -> None:
    """One row per submission (a newline in a name forges none), no control character, no secret."""
    expected: dict[str, Expected] = hostile["expected"]
    done, elapsed = grade_hostile(hostile, "-v")
    no_control(done.stdout, "stdout")
    no_control(done.stderr, "stderr")
    rows = table_rows(done.stdout)
    assert len(rows) == len(expected), "one row per submission:\n" + "\n".join(rows)
    assert not any(row.startswith("x.txt") for row in rows), "a newline in a name forged a row"

    def row_of(name: str, mark: str) -> str:
        found = [row for row in rows if mark in row]
        assert len(found) == 1, f"{name!r}: one row holding {mark!r} expected:\n" + "\n".join(rows)
        return found[0]

    marks = {ESC_NAME: "zed.txt", FORGED_NAME: "frank.txt", PIPE_NAME: "pipe", BIG_NAME: "big"}
    for name, (kind, right, total, detail) in expected.items():
        row = row_of(name, marks.get(name, name))
        if name == "hog.txt":
            assert "memory" in row, row
        elif kind == "passed":
            assert f"{right}/{total}" in row and "all right" in row, row
        elif kind == "failed":
            assert f"{right}/{total}" in row and "all right" not in row.split(f"{right}/{total}", 1)[1], row
        else:
            assert_reason(detail, row, name)
    assert "[2J" in row_of(ESC_NAME, "zed.txt"), "the name is shown (escaped), not dropped"
    summary = SUMMARY.search(done.stdout)
    assert summary, done.stdout[-1500:]
    totals = expected_totals(expected)
    counts = [int(n) for n in summary.groups()]
    assert counts[0] == totals["submissions"] and counts[1] == totals["passed"], summary.group()
    # the hog is not judged, or judged with one invalid claim
    assert (counts[2], counts[3], counts[4]) in ((totals["failed"], totals["not_judged"], totals["claims_right"]),
                                                 (totals["failed"] + 1, totals["not_judged"] - 1,
                                                  totals["claims_right"])), summary.group()
    assert counts[5] in (totals["claims_total"], totals["claims_total"] + 1), summary.group()
    assert elapsed < 60, f"grading the hostile class took {elapsed:.1f} s"


def test_claims_cannot_load_files_when_checking_one_file_either(tmp_path: Path) -> None:
    """--claim and an answers file next to the gradebook: the claim is invalid, the grade never shown."""
    key, marker = key_folder(tmp_path)
    answers = write(key.parent / "answers.txt", 'dL/dw1 = sum(load("grades.csv"))\ndL/dw1 = -1\n')
    for args in (("--claim", 'dL/dw1 = sum(load("grades.csv"))'), (answers,)):
        result = run_cli("check", key, *args, "--json")
        assert result.exit_code == EXIT_WRONG, result.output  # an invalid claim: the student's, so 1
        assert strict_json(result.stdout)["results"][0]["status"] == "invalid"
        assert "load" in one_json_error(result.stderr)["message"]
        text = run_cli("check", key, *args)
        assert text.exit_code == EXIT_WRONG
        no_secret([result.stdout, result.stderr, text.stdout, text.stderr], [marker, *GRADEBOOK_SECRETS])


def test_a_device_given_by_name_is_refused_and_the_rest_graded(tmp_path: Path) -> None:
    """/dev/zero given as a submission: not judged, 'a device', nothing read; the other file graded."""
    ok = write(tmp_path / "ok.txt", "dL/dw1 = -w3*a\n")
    start = time.monotonic()
    result = run_cli("check", NEURON, "/dev/zero", ok, "--json")
    assert time.monotonic() - start < 20
    assert result.exit_code == EXIT_WRONG, result.output
    doc = strict_json(result.stdout)
    by_name = {Path(s["submission"]).name: s for s in doc["submissions"]}
    assert set(by_name) == {"zero", "ok.txt"}, list(by_name)
    assert "device" in by_name["zero"]["error"]["message"], by_name["zero"]
    assert by_name["ok.txt"]["passed"] is True
    assert doc["totals"] == {"submissions": 2, "passed": 1, "failed": 0, "not_judged": 1, "timed_out": 0,
                             "claims_right": 1, "claims_total": 1}


def test_randn_in_a_claim_is_judged_the_same_with_one_job_or_two(tmp_path: Path) -> None:
    """The same claim with randn gets the same verdict whichever worker judges it, and in whatever order."""
    folder = tmp_path / "class"
    write(folder / "r1.txt", "dL/dw1 = sum(randn(3))\n")
    write(folder / "r2.txt", "dL/dw1 = sum(randn(3))\n")
    write(folder / "r3.txt", "dL/da = -(w3*w1 + w4*w2) + 0*sum(randn(2))\n")  # 0·(finite) = 0: right
    write(folder / "r4.txt", "dL/dw1 = -1\n")
    write(folder / "r5.txt", "dL/dw1 = sum(randn(3))\n")
    one = run_cli("check", NEURON, folder, "--jobs", "1", "--json")
    two = run_cli("check", NEURON, folder, "--jobs", "2", "--json")
    assert one.exit_code == two.exit_code == EXIT_WRONG, (one.output, two.output)
    first, second = strict_json(one.stdout), strict_json(two.stdout)
    assert first == second
    subs = {s["submission"]: s for s in first["submissions"]}
    assert [subs[n]["passed"] for n in ("r1.txt", "r2.txt", "r3.txt", "r4.txt", "r5.txt")] == \
        [False, False, True, True, False]
    assert subs["r1.txt"]["results"] == subs["r2.txt"]["results"] == subs["r5.txt"]["results"]


# --- 2. every allocation route, just under and just over --max-elements -------------------------------------

def refused_for(result: CliResult, flag: str) -> dict[str, Any]:
    """Exit 2 (never 3), one JSON error naming the flag."""
    assert result.exit_code != EXIT_BUG, result.output
    body = json_error(result)
    assert flag in says(body), body
    return body


ELEMENT_ROUTES = {
    # id: (program under the limit, program over it, s under it, by hand)
    "stacked-literal": ("x = ones(300); y = [x, x, x]; s = sum(y)", "x = ones(400); y = [x, x, x]; s = sum(y)", 900),
    "sum-of-empty": ("z = sum(zeros(0, 1000), axis=0); s = sum(z + 1)",
                     "z = sum(zeros(0, 1001), axis=0); s = sum(z + 1)", 1000),
    "ones": ("y = ones(25, 40); s = sum(y)", "y = ones(7, 143); s = sum(y)", 1000),
    "broadcasting": ("y = ones(25, 1) + ones(1, 40); s = sum(y)", "y = ones(7, 1) + ones(1, 143); s = sum(y)", 2000),
    "matrix-product": ("y = ones(25, 1) @ ones(1, 40); s = sum(y)", "y = ones(7, 1) @ ones(1, 143); s = sum(y)", 1000),
}


@pytest.mark.parametrize(("under", "over", "total"), list(ELEMENT_ROUTES.values()), ids=list(ELEMENT_ROUTES))
def test_max_elements_on_each_route(under: str, over: str, total: int) -> None:
    ok = run_cli("eval", "-e", under, "--max-elements", "1000", "--json")
    assert ok.exit_code == EXIT_OK, ok.output
    assert strict_json(ok.stdout)["values"]["s"] == total
    refused_for(run_cli("eval", "-e", over, "--max-elements", "1000", "--json"), "--max-elements")
    text = run_cli("eval", "-e", over, "--max-elements", "1000")
    assert_bad_input(text)
    assert "--max-elements" in text.stderr


@pytest.mark.parametrize(("count", "fine"), [(1000, True), (1001, False)])
def test_max_elements_on_a_loaded_npy(tmp_path: Path, count: int, fine: bool) -> None:
    np.save(tmp_path / "x.npy", np.arange(count, dtype=np.float64))
    program = write(tmp_path / "p.eq", 'x = load("x.npy")\ns = sum(x)\n')
    result = run_cli("grad", program, "--of", "s", "--wrt", "x", "--max-elements", "1000", "--json")
    if fine:
        assert result.exit_code == EXIT_OK, result.output
        assert strict_json(result.stdout)["value"] == count * (count - 1) / 2
    else:
        refused_for(result, "--max-elements")


def _npy_header(handle: Any, shape: tuple[int, ...]) -> None:
    npy.write_array_header_1_0(handle, {"descr": "<f8", "fortran_order": False, "shape": shape})


def test_an_npy_header_promising_a_billion_elements_is_refused_before_its_data(tmp_path: Path) -> None:
    """A tiny file whose header says 10^9 numbers: a limit error at once, not 'cut short', not 8 GB."""
    with open(tmp_path / "huge.npy", "wb") as handle:
        _npy_header(handle, (10**9,))
        handle.write(bytes(64))
    program = write(tmp_path / "p.eq", 'x = load("huge.npy")\ns = sum(x)\n')
    start = time.monotonic()
    body = refused_for(run_cli("eval", program, "--max-elements", "1000", "--json"), "--max-elements")
    assert time.monotonic() - start < 5
    assert body["line"] == 1, body
    refused_for(run_cli("eval", program, "--json"), "--max-elements")  # the default limit (10^8) too


def test_an_npz_member_is_read_only_as_far_as_its_header_promises(tmp_path: Path) -> None:
    """A zip-bomb-like .npz: a member whose header promises 10 numbers, then ~96 MB of zeros (compressed
    to ~0.4 MB). Only the 10 are read: the run fits in --max-memory 50M and is quick."""
    with zipfile.ZipFile(tmp_path / "bomb.npz", "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive, \
            archive.open("w.npy", "w", force_zip64=True) as member:
        _npy_header(member, (10,))
        member.write(np.arange(10, dtype="<f8").tobytes())
        chunk = bytes(2**20)
        for _ in range(96):
            member.write(chunk)
    assert (tmp_path / "bomb.npz").stat().st_size < 2 * 2**20
    program = write(tmp_path / "p.eq", 'w = load("bomb.npz")\ns = sum(w * w)\n')
    start = time.monotonic()
    result = run_cli("grad", program, "--of", "s", "--wrt", "w", "--max-memory", "50M", "--json")
    elapsed = time.monotonic() - start
    assert result.exit_code == EXIT_OK, result.output
    doc = strict_json(result.stdout)
    assert doc["value"] == sum(k * k for k in range(10)) == 285
    assert doc["grad"]["w"] == [2.0 * k for k in range(10)]
    assert elapsed < 10, f"took {elapsed:.1f} s: was the whole member inflated?"
    # a member whose header promises more than the limit is refused before its data
    with zipfile.ZipFile(tmp_path / "many.npz", "w", compression=zipfile.ZIP_DEFLATED) as archive, \
            archive.open("w.npy", "w") as member:
        _npy_header(member, (1001,))
        member.write(bytes(8 * 10))
    many = write(tmp_path / "q.eq", 'w = load("many.npz")\ns = sum(w)\n')
    refused_for(run_cli("eval", many, "--max-elements", "1000", "--json"), "--max-elements")


def test_a_csv_over_max_file_size_is_refused(tmp_path: Path) -> None:
    """300 entries of '0.25,' are 1,500 bytes: over --max-file-size 1K; 200 of them (999 bytes) are not."""
    write(tmp_path / "big.csv", ",".join(["0.25"] * 300) + "\n")
    write(tmp_path / "small.csv", ",".join(["0.25"] * 200))
    assert (tmp_path / "big.csv").stat().st_size > 1024 >= (tmp_path / "small.csv").stat().st_size
    big = write(tmp_path / "big.eq", 'x = load("big.csv")\ns = sum(x)\n')
    small = write(tmp_path / "small.eq", 'x = load("small.csv")\ns = sum(x)\n')
    ok = run_cli("eval", small, "--max-file-size", "1K", "--json")
    assert ok.exit_code == EXIT_OK, ok.output
    assert strict_json(ok.stdout)["values"]["s"] == 50
    refused_for(run_cli("eval", big, "--max-file-size", "1K", "--json"), "--max-file-size")
    text = run_cli("eval", big, "--max-file-size", "1K")
    assert_bad_input(text)
    assert "--max-file-size" in text.stderr


def test_a_jacobian_s_batched_intermediate_counts_against_max_elements() -> None:
    """y = x·S with S = sum(ones(300)·x0) = 300·x0: each of the 5 seeds carries a 300-entry intermediate (1,500)."""
    program = "x = ones(5); y = x * sum(ones(300) * x[0])"
    refused_for(run_cli("jacobian", "-e", program, "--wrt", "x", "--max-elements", "1000", "--json"), "--max-elements")
    ok = run_cli("jacobian", "-e", program, "--wrt", "x", "--max-elements", "2000", "--json")
    assert ok.exit_code == EXIT_OK, ok.output
    # ∂y_i/∂x_j = δ_ij·S + x_i·300·δ_j0 at x = 1: 300 on the diagonal, plus 300 down the first column
    want = 300 * np.eye(5)
    want[:, 0] += 300
    assert strict_json(ok.stdout)["jacobian"] == want.tolist()


# --- 3. --max-memory --------------------------------------------------------------------------------------------

MEMORY_HOG = "x = ones(4000, 4000); " + "; ".join(f"y{k} = {'x' if k == 0 else f'y{k - 1}'} + 1" for k in range(8)) \
    + "; s = sum(y7)"  # 9 tensors of 16M entries (128 MB each): 1.15 GB, each under --max-elements


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="RLIMIT_DATA is enforced on Linux only")
def test_max_memory_stops_a_program_that_holds_many_tensors() -> None:
    text = gradcalc("eval", "-e", MEMORY_HOG, "--max-memory", "300M")
    assert_bad_input(as_result(text))
    assert "out of memory" in text.stderr and "--max-memory" in text.stderr, text.stderr
    no_control(text.stderr, "stderr")
    as_json = gradcalc("eval", "-e", MEMORY_HOG, "--max-memory", "300M", "--json")
    assert as_json.returncode == EXIT_BAD_INPUT and as_json.stdout == "", as_json
    body = one_json_error(as_json.stderr)
    assert "out of memory" in body["message"] and "--max-memory" in says(body), body


def test_max_memory_leaves_a_program_under_it_alone() -> None:
    """s = 2; y = sum(ones(2000, 2000)·s + 1): 4M entries, 32 MB a tensor; y = 3·4M, ∂y/∂s = 4M."""
    result = run_cli("grad", "-e", "s = 2; x = ones(2000, 2000) * s; y = sum(x + 1)", "--wrt", "s",
                     "--max-memory", "300M", "--json")
    assert result.exit_code == EXIT_OK, result.output
    doc = strict_json(result.stdout)
    assert (doc["value"], doc["grad"]["s"]) == (12_000_000, 4_000_000)


# --- 4. --timeout --------------------------------------------------------------------------------------------------

EXPONENTIAL = "f(n) { if n > 0 { return f(n-1) + f(n-1) } else { return 1 } }; y = f(x)"


@pytest.mark.slow
def test_timeout_stops_a_runaway_program_quickly() -> None:
    """2^40 calls: stopped at 1 s, exit 2 within ~3 s (4 s allowed for a start-up on a busy machine)."""
    start = time.monotonic()
    done = gradcalc("grad", "-e", EXPONENTIAL, "--set", "x=40", "--timeout", "1")
    elapsed = time.monotonic() - start
    assert_bad_input(as_result(done))
    assert "timed out" in done.stderr and "--timeout" in done.stderr, done.stderr
    assert elapsed < 4, f"took {elapsed:.1f} s"


# 2^18 calls: tens of seconds, so that a --timeout that does not work fails the test instead of hanging it
SLOW = "x = 2; f(n) { if n > 0 { return f(n-1) + f(n-1) } else { return x } }; y = f(18)"
ENDLESS = SLOW.replace("f(18)", "f(40)")  # in a process of its own, which the test kills
COMMANDS = {
    "eval": ("eval",),
    "grad": ("grad",),
    "jacobian": ("jacobian", "--of", "y", "--wrt", "x"),
    "hessian": ("hessian", "--of", "y", "--wrt", "x"),
    "jvp": ("jvp", "--of", "y", "--wrt", "x", "--tangent", "1"),
    "diff": ("diff", "--of", "y", "--wrt", "x"),
    "graph": ("graph",),
    "explain": ("explain", "--of", "y", "--wrt", "x"),
    "check": ("check", "--claim", "dy/dx = 1"),
    "gradcheck": ("gradcheck",),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_timeout_holds_for_every_command(command: str) -> None:
    name, *extra = COMMANDS[command]
    start = time.monotonic()
    result = run_cli(name, "-e", SLOW, *extra, "--timeout", "0.3", "--json")
    elapsed = time.monotonic() - start
    body = refused_for(result, "--timeout")
    assert "timed out" in body["message"], body
    assert elapsed < 3, f"{command} took {elapsed:.1f} s"


@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "-inf"])
def test_timeout_must_be_a_positive_finite_number(value: str) -> None:
    result = run_cli("eval", "-e", "y = 1", "--timeout", value, "--json")
    refused_for(result, "--timeout")
    text = run_cli("eval", "-e", "y = 1", "--timeout", value)
    assert_bad_input(text)
    assert "--timeout" in text.stderr


@pytest.mark.parametrize("flag", ["--max-memory", "--max-file-size"])
@pytest.mark.parametrize("value", ["nan", "inf", "0", "-1", "0K", "lots"])
def test_sizes_must_be_positive_and_finite(flag: str, value: str) -> None:
    refused_for(run_cli("eval", "-e", "y = 1", flag, value, "--json"), flag)


@pytest.mark.slow
def test_grading_timeout_kills_a_submission_that_calls_an_expensive_key_function(tmp_path: Path) -> None:
    """The key defines g(n) = g(n-1) + g(n-1) (2^n calls); a claim calling g(20) runs for a minute: killed at 0.5 s."""
    key, _ = key_folder(tmp_path, "g(n) { if n > 0 { return g(n-1) + g(n-1) } else { return 0 } }\n")
    folder = tmp_path / "class"
    write(folder / "a_slow.txt", "dL/dw1 = -w3*a + g(20)\n")
    write(folder / "b_fine.txt", "dL/dw1 = -w3*a + g(3)\ndL/da = 2.5\n")  # g(3) = 0
    write(folder / "c_wrong.txt", "dL/dw1 = 1\n")
    start = time.monotonic()
    result = run_cli("check", key, folder, "--timeout", "0.5", "--jobs", "2", "--json")
    elapsed = time.monotonic() - start
    assert result.exit_code == EXIT_WRONG, result.output
    doc = strict_json(result.stdout)
    slow, fine, wrong = doc["submissions"]
    assert slow["submission"] == "a_slow.txt" and slow["passed"] is False, slow
    assert "timed out" in slow["error"]["message"], slow
    assert (fine["passed"], fine["right"], fine["total"]) == (True, 2, 2), fine
    assert (wrong["passed"], wrong["right"], wrong["total"]) == (False, 0, 1), wrong
    assert doc["totals"] == {"submissions": 3, "passed": 1, "failed": 1, "not_judged": 1, "timed_out": 1,
                             "claims_right": 2, "claims_total": 3}
    assert elapsed < 8, f"took {elapsed:.1f} s: the slow submission was not cut off"
    text = run_cli("check", key, folder, "--timeout", "0.5", "--jobs", "2")
    assert text.exit_code == EXIT_WRONG
    (row,) = [line for line in table_rows(text.stdout) if line.startswith("a_slow.txt")]
    assert "timed out" in row, row


# --- 5. submission names ---------------------------------------------------------------------------------------------

def test_same_folder_names_in_different_places_are_told_apart(tmp_path: Path) -> None:
    """x/A/hw.txt and y/A/hw.txt: two names, each of its own file; neither is just 'A/hw.txt'."""
    write(tmp_path / "x" / "A" / "hw.txt", "dL/dw1 = -1\n")
    write(tmp_path / "y" / "A" / "hw.txt", "dL/dw1 = 1\n")
    result = run_cli("check", NEURON, tmp_path / "x" / "A", tmp_path / "y" / "A", "--json")
    assert result.exit_code == EXIT_WRONG, result.output
    doc = strict_json(result.stdout)
    names = {s["submission"]: s["passed"] for s in doc["submissions"]}
    assert len(names) == 2, names
    right = next(name for name, passed in names.items() if passed)
    wrong = next(name for name, passed in names.items() if not passed)
    assert Path(right).parts[-3:] == ("x", "A", "hw.txt"), names
    assert Path(wrong).parts[-3:] == ("y", "A", "hw.txt"), names
    text = run_cli("check", NEURON, tmp_path / "x" / "A", tmp_path / "y" / "A")
    assert len(table_rows(text.stdout)) == 2, text.stdout


def test_the_same_file_given_twice_is_graded_once(tmp_path: Path) -> None:
    folder = tmp_path / "class"
    alice = write(folder / "alice.txt", "dL/dw1 = -1\n")
    write(folder / "bob.txt", "dL/dw1 = 1\n")
    twice = run_cli("check", NEURON, alice, alice, "--json")
    assert twice.exit_code == EXIT_OK, twice.output
    doc = strict_json(twice.stdout)
    assert len(doc["submissions"]) == 1 and doc["totals"]["submissions"] == 1, doc
    again = run_cli("check", NEURON, folder, alice, folder / ".." / "class" / "alice.txt", "--json")
    assert again.exit_code == EXIT_WRONG, again.output  # bob's claim is wrong
    doc = strict_json(again.stdout)
    graded = [Path(s["submission"]).name for s in doc["submissions"]]
    assert sorted(graded) == ["alice.txt", "bob.txt"], graded
    assert doc["totals"]["submissions"] == 2 and doc["totals"]["claims_total"] == 2, doc["totals"]


# --- 6. --json errors are one JSON document, whatever stops the run --------------------------------------------------

def test_deep_recursion_with_json_is_one_json_document() -> None:
    """Recursion far past Python's own stack, allowed by --max-recursion: a clear error (or the answer), as JSON."""
    program = "f(n) { if n > 0 { return f(n-1) * 1 } else { return x } }; x = 2; y = f(k)"
    done = gradcalc("grad", "-e", program, "--set", "k=50000", "--wrt", "x", "--max-recursion", "100000", "--json")
    assert done.returncode in (EXIT_OK, EXIT_BAD_INPUT), f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert_no_traceback(as_result(done))
    if done.returncode == EXIT_OK:
        assert strict_json(done.stdout)["grad"] == {"x": 1.0}
    else:
        assert done.stdout == ""
        one_json_error(done.stderr)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)  # a shell without job control starts background jobs ignoring it


def _start(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gradcalc", *args], cwd=REPO, env=process_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, encoding="utf-8",
                            preexec_fn=_default_sigint)  # noqa: PLW1509


@pytest.mark.slow
@pytest.mark.skipif(not LINUX, reason="reads /proc to know the program is running")
def test_ctrl_c_with_json_is_one_json_document() -> None:
    process = _start("eval", "-e", ENDLESS, "--json")
    # start-up takes ~0.5 s of CPU: past 1.2 s it is running the program
    out, err = _interrupt(process, lambda: _cpu_seconds(process.pid) >= 1.2)
    assert process.returncode == EXIT_INTERRUPTED, err
    assert out == ""
    body = one_json_error(err)
    assert "interrupted" in body["message"], body


def _interrupt(process: subprocess.Popen[str], ready: Callable[[], bool]) -> tuple[str, str]:
    """Ctrl-C the running command once `ready()` holds; its output. It is killed if it outlives the test."""
    try:
        deadline = time.monotonic() + 30
        while not ready() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.001)
        assert process.poll() is None, process.communicate()
        process.send_signal(signal.SIGINT)
        return process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def _numpy_mapped(pid: int) -> bool:
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return True  # gone already: communicate() tells how


@pytest.mark.parametrize("when", ["as NumPy loads", 0.2, 0.3])
def test_ctrl_c_during_start_up_prints_no_traceback(when: str | float) -> None:
    """While Python loads NumPy, Lark, Typer and Rich: 'interrupted', status 130. (Not the interpreter's own
    first tens of milliseconds, before any of gradcalc runs: no program can catch a signal there.)"""
    if isinstance(when, str) and not LINUX:
        pytest.skip("reads /proc to see NumPy load")
    process = _start("eval", "-e", ENDLESS)
    if isinstance(when, str):
        out, err = _interrupt(process, lambda: _numpy_mapped(process.pid))
    else:
        time.sleep(when)
        out, err = _interrupt(process, lambda: True)
    assert process.returncode == EXIT_INTERRUPTED, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.strip() == "interrupted", err
    assert out == ""


# --- 7. a closed pipe ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_version_and_help_into_a_closed_pipe_exit_141(args: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte
    try:
        process = subprocess.Popen([sys.executable, "-m", "gradcalc", *args], cwd=REPO, env=process_env(),
                                   stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    _, err = process.communicate(timeout=60)
    assert process.returncode == EXIT_BROKEN_PIPE, err
    assert "Traceback" not in err, err


# --- 8. random submissions ---------------------------------------------------------------------------------------

TOKENS = [t if isinstance(t, bytes) else t.encode("utf-8") for t in (
    "dL/dw1", "dL/da", "∂L/∂w4", "L", " = ", "=", "-", "+", "*", "^", "/", "w3", "a", "w1", "(", ")", "[", "]",
    "((((((((((", "[[[[[[[[[[", ")))))))))", 'load("grades.csv")', 'load("../key/grades.csv")', "load(", '"',
    "'", "1e309", "-1e309", "9" * 400, "0.5", "2.5", "\x1b", "\x1b[2J", "\x1b]0;pwned\x07", "\u202e", "\u2066",
    "\x00", "\x7f", "\x9b", "\r", "\n", ";", ",", "#", "check ", "\\frac{", "}", "randn(3)", "ones(", "ᵀ", "²",
    "√", " ", b"\xff\xfe", "x = 1\n", "σ(",
)]
NAME_STYLES = ["s{}.txt", "\x1b[2Js{}.txt", "s{}\u202e.txt", "s{}\nrow.txt", "s{}\x9b.eq", "s{} all right.txt"]


@st.composite
def random_class(draw: Callable[..., Any]) -> list[tuple[str, bytes]]:
    count = draw(st.integers(3, 6))
    return [(draw(st.sampled_from(NAME_STYLES)).format(i),
             b"".join(draw(st.lists(st.sampled_from(TOKENS), max_size=14)))) for i in range(count)]


@pytest.fixture(scope="module")
def fuzz_key(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    return key_folder(tmp_path_factory.mktemp("fuzzkey"))


@pytest.mark.slow
@settings(max_examples=examples(15), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(submissions=random_class())
def test_random_submissions_never_break_grading(fuzz_key: tuple[Path, str], submissions: list[tuple[str, bytes]],
                                                tmp_path_factory: pytest.TempPathFactory) -> None:
    key, marker = fuzz_key
    folder = tmp_path_factory.mktemp("class")
    for name, data in submissions:
        (folder / name).write_bytes(data)
    shown = "\n".join(f"{name!r}: {data!r}" for name, data in submissions)
    args = ("check", key, folder, "--max-elements", "100000", "--timeout", "5")
    as_json = run_cli(*args, "--json")
    assert as_json.exit_code in (EXIT_OK, EXIT_WRONG), f"exit {as_json.exit_code}\n{as_json.output[-3000:]}\n{shown}"
    assert_no_traceback(as_json)
    doc = strict_json(as_json.stdout)
    assert sorted(s["submission"] for s in doc["submissions"]) == sorted(name for name, _ in submissions), shown
    totals = doc["totals"]
    assert totals["submissions"] == len(submissions)
    assert totals["passed"] + totals["failed"] + totals["not_judged"] == len(submissions), totals
    assert not any("InternalError" in json.dumps(s.get("error") or {}) for s in doc["submissions"]), shown
    text = run_cli(*args, "-v")
    assert text.exit_code == as_json.exit_code, f"{text.output[-3000:]}\n{shown}"
    assert_no_traceback(text)
    no_control(text.stdout, f"stdout for\n{shown}\n")
    no_control(text.stderr, f"stderr for\n{shown}\n")
    no_secret([as_json.stdout, as_json.stderr, text.stdout, text.stderr], [marker, *GRADEBOOK_SECRETS])
    shutil.rmtree(folder, ignore_errors=True)


def test_the_last_guard_escapes_what_a_view_did_not() -> None:
    """render.Inert escapes control and bidi characters that reach it in any renderable, keeping newlines."""
    import io

    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gradcalc.cli.render import Inert

    table = Table()
    table.add_column("name")
    table.add_row("a\x1b]52;c;cGF3bmVk\x07b")
    view = Inert(Text("x\x1b[2J\u202ey\x9bz\nsecond line"))
    for renderable in (view, Inert(table)):
        out = io.StringIO()
        Console(file=out, width=80, force_terminal=True, color_system=None, markup=False).print(renderable)
        text = out.getvalue()
        assert not any(ch in text for ch in "\x1b\x07\u202e\x9b"), repr(text)
    out = io.StringIO()
    Console(file=out, width=80, color_system=None, markup=False).print(view)
    assert out.getvalue() == "x\\x1b[2J\\u202ey\\x9bz\nsecond line\n"


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGXCPU"), reason="RLIMIT_CPU: POSIX")
def test_a_worker_nobody_kills_is_stopped_by_its_cpu_limit() -> None:
    """limits.limit_cpu: the kernel stops a process that runs past its CPU time (grading's backstop)."""
    code = "from gradcalc.program.limits import limit_cpu\nlimit_cpu(0.1)\nwhile True:\n    pass\n"
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60, check=False,
                          env=process_env())
    assert done.returncode == -signal.SIGXCPU, (done.returncode, done.stderr[-500:])
    assert time.monotonic() - start < 30


@pytest.mark.parametrize("args", [("grad", "samples/neuron.eq"), ("check", "samples/homework.eq"),
                                  ("grad", "samples/neuron.eq", "--json")])
def test_an_encoding_without_the_product_s_symbols_is_no_crash(args: tuple[str, ...]) -> None:
    """cp1252 (Windows' redirected output) lacks ∂ and ✓: they are written in ASCII (test_encoding), never exit 3."""
    done = subprocess.run([sys.executable, "-m", "gradcalc", *args], capture_output=True, timeout=60, check=False,
                          cwd=REPO, env=process_env(PYTHONIOENCODING="cp1252"))
    assert done.returncode in (0, 1), done.stderr[-1000:]
    out = done.stdout.decode("cp1252")
    if "--json" in args:
        assert strict_json(out)["grad"]["w1"] == -1.0  # ∂L/∂w1 = -w3·a = -0.5·2
    else:
        assert "dL/d" in out and "\\u2202" not in out and "\\u2713" not in out, out
