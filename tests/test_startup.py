"""Start-up is imports (#21): `grad --json` on a program that parses loads neither Lark nor Rich.

Lark is imported only to explain a syntax error (or to build the parse tables again when the grammar
changed); the tables it built ship as data (language/lalr_tables.json). Each probe runs the command
in a fresh interpreter, as a user's shell does, and lists the modules it loaded.
"""

from __future__ import annotations

import json
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
