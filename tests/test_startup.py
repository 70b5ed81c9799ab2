"""Start-up is imports (#21): `grad --json` on a program that parses loads neither Lark nor Rich.

Lark is imported only to explain a syntax error (or to build the parse tables again when the grammar
changed); the tables it built ship as data (language/lalr_tables.json). Each probe runs the command
in a fresh interpreter, as a user's shell does, and lists the modules it loaded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, SAMPLES

_PROBE = ("import sys\nfrom gradcalc.cli.app import main\n"
          "sys.argv = ['gradcalc', *sys.argv[1:]]\n"
          "try:\n    main()\nexcept SystemExit as stop:\n    code = stop.code\n"
          "print(code, ' '.join(sorted(sys.modules)), file=sys.stderr)")


def loaded_by(*args: str, cwd: Path = REPO) -> tuple[str, int, set[str]]:
    """What the command printed, its exit status and the modules it loaded, run in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], check=False, cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    last = done.stderr.strip().splitlines()[-1].split()  # the probe's line comes last
    return done.stdout, int(last[0]), set(last[1:])


def test_grad_json_imports_neither_lark_nor_rich() -> None:
    out, status, modules = loaded_by("grad", str(SAMPLES / "neuron.eq"), "--json")
    assert status == 0
    assert json.loads(out)["grad"] == {"a": 2.5, "w1": -1.0, "w2": -8.0, "w3": -6.0, "w4": 2.0}
    assert "gradcalc.language.lalr" in modules  # the probe sees the parser's modules: it can see Lark's
    assert not {m for m in modules if m == "lark" or m.startswith(("lark.", "rich"))}


@pytest.mark.slow
def test_a_program_with_a_check_statement_imports_no_lark(tmp_path: Path) -> None:
    """Claims in a program are read by the notation's reader, through the same tables."""
    program = (SAMPLES / "neuron.eq").read_text(encoding="utf-8") + "\ncheck dL/dw4 = 2\n"
    path = tmp_path / "checked.eq"
    path.write_text(program, encoding="utf-8")
    out, status, modules = loaded_by("grad", str(path), "--json")
    assert status == 0, out
    assert "lark" not in modules


@pytest.mark.slow
def test_a_syntax_error_is_explained_by_lark(tmp_path: Path) -> None:
    path = tmp_path / "bad.eq"
    path.write_text("a = 2\nL = a 2\n", encoding="utf-8")
    _, status, modules = loaded_by("grad", str(path), "--json")
    assert status == 2
    assert "lark" in modules  # the error's words come from Lark's parser, loaded for it alone


def test_a_finite_run_loads_no_nan_locator() -> None:
    """Where a NaN started is looked for only when something is not finite: the locator is no start-up cost."""
    _, status, modules = loaded_by("grad", str(SAMPLES / "neuron.eq"), "--json")
    assert status == 0 and "gradcalc.program.anomaly" not in modules
    _, status, modules = loaded_by("grad", "-e", "x = 1; y = sqrt(x - 2)", "--json")
    assert status == 0 and "gradcalc.program.anomaly" in modules


def test_grad_loads_no_plotting_library() -> None:
    """plotext and Matplotlib are `plot`'s (and `minimize --plot`'s) alone: no other command pays to import them."""
    _, status, modules = loaded_by("grad", str(SAMPLES / "neuron.eq"))
    assert status == 0
    assert not {m for m in modules if m.split(".")[0] in ("plotext", "matplotlib") or m == "gradcalc.cli.charts"}
    _, status, modules = loaded_by("plot", str(SAMPLES / "neuron.eq"), "--wrt", "w1", "--points", "3", "--json")
    assert status == 0 and not {m for m in modules if m.split(".")[0] in ("plotext", "matplotlib")}  # the data


# What grad's start-up stopped loading (#21): each was loaded, by grad itself, before it was made lazy.
_LAZY = {
    "dataclasses": "no dataclass is made on grad's path (the other commands' results are in program.results)",
    "fractions": "Taylor coefficients only", "decimal": "fractions' own import",
    "shlex": "`gradcalc examples` only",
    "gradcalc.program.notation.reading": "the claims' reader: check statements and --claim only",
    "gradcalc.program.results": "jacobian, hessian, jvp, hvp and taylor's results",
}


def test_grad_json_loads_none_of_what_other_commands_need() -> None:
    out, status, modules = loaded_by("grad", str(SAMPLES / "neuron.eq"), "--json")
    assert status == 0 and json.loads(out)["value"] == 15
    assert not {name: why for name, why in _LAZY.items() if name in modules}


@pytest.mark.slow
def test_the_commands_that_need_them_still_load_them() -> None:
    """The probe sees what a command made lazy when another command needs it."""
    out, status, modules = loaded_by("jacobian", "-e", "x = [1, 2]; y = x^2", "--wrt", "x", "--json")
    assert status == 0 and json.loads(out)["jacobian"] == [[2.0, 0.0], [0.0, 4.0]]
    assert {"gradcalc.program.results", "dataclasses"} <= modules
    out, status, modules = loaded_by("taylor", "-e", "x = 0; y = exp(x)", "--order", "3", "--json")
    assert status == 0 and json.loads(out)["polynomial"] == "1 + x + 1/2*x^2 + 1/6*x^3" and "fractions" in modules


_BUILT = ("import sys\nfrom gradcalc.cli.app import app, main\n"
          "callbacks = {c.name: c.callback for c in app.registered_commands}\n"
          "sys.argv = ['gradcalc', *sys.argv[1:]]\n"
          "try:\n    main()\nexcept SystemExit:\n    pass\n"
          "print(' '.join(sorted(n for n, c in callbacks.items() if '__signature__' in vars(c))), file=sys.stderr)")


def built_by(*args: str) -> tuple[str, set[str]]:
    """What `gradcalc ARGS` printed and the commands whose Click command Typer built, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", _BUILT, *args], check=False, cwd=REPO, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "COLUMNS": "120"})
    return done.stdout, set(done.stderr.strip().splitlines()[-1].split())


def test_a_run_builds_only_the_command_it_names() -> None:
    """Typer reads a command's signature to build it (~0.5 ms of options each): a run builds its own alone."""
    out, built = built_by("grad", str(SAMPLES / "neuron.eq"), "--json")
    assert json.loads(out)["value"] == 15
    assert built == {"grad"}


@pytest.mark.slow
def test_the_top_level_help_still_builds_and_lists_every_command() -> None:
    from gradcalc.cli.app import app

    names = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    out, built = built_by("--help")
    assert {"eval", "grad", "check", "doctor", "examples"} <= names
    assert names - {"doctor", "examples"} == built  # those two are plain functions, built as Typer made them
    assert all(f" {name} " in out for name in names), out


def test_a_run_leaves_the_collection_at_exit_nothing_to_scan() -> None:
    """Python collects at exit: with NumPy loaded that scan cost more than parsing a program. main() freezes what
    the process made (the OS frees it), and the scan finds nothing left to look at."""
    probe = ("import gc, sys\nfrom gradcalc.cli.app import main\n"
             "sys.argv = ['gradcalc', *sys.argv[1:]]\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\n"
             "print(gc.get_freeze_count(), len(gc.get_objects()), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", probe, "grad", str(SAMPLES / "neuron.eq"), "--json"], check=False,
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert json.loads(done.stdout)["value"] == 15
    frozen, left = map(int, done.stderr.split()[-2:])
    assert frozen > 10_000 and left < 100
