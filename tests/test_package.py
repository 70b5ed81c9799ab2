"""The installed wheel works outside the checkout: the grammar and the samples ship inside the package."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_runs_outside_the_checkout(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    build = subprocess.run(
        check=False, args=[sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheels.glob("gradcalc-*.whl")
    target = tmp_path / "site"
    install = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)]
    subprocess.run(install, check=True, capture_output=True, timeout=300)
    assert (target / "gradcalc" / "language" / "gradcalc.lark").is_file()
    assert (target / "gradcalc" / "language" / "lalr_tables.json").is_file()  # else each process builds them
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    program = elsewhere / "net.eq"
    program.write_text((ROOT / "samples" / "neuron.eq").read_text(encoding="utf-8"), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(target)}
    result = subprocess.run([sys.executable, "-m", "gradcalc", "grad", "net.eq", "--json"], check=False,
                            cwd=elsewhere, capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["grad"] == {"a": 2.5, "w1": -1.0, "w2": -8.0, "w3": -6.0, "w4": 2.0}
    located = subprocess.run([sys.executable, "-c", "import gradcalc; print(gradcalc.__file__)"], check=False,
                             cwd=elsewhere, capture_output=True, text=True, env=env, timeout=60)
    assert located.stdout.strip().startswith(str(target))  # the wheel's copy, not the checkout's
    # The samples ship in the wheel: `gradcalc examples` copies them, and the docs' first command runs on them.
    assert (target / "gradcalc" / "samples" / "neuron.eq").is_file()
    copied = subprocess.run([sys.executable, "-m", "gradcalc", "examples", "mine"], check=False, cwd=elsewhere,
                            capture_output=True, text=True, env=env, timeout=120)
    assert copied.returncode == 0, copied.stderr
    shipped = sorted(p.relative_to(ROOT / "samples").as_posix() for p in (ROOT / "samples").rglob("*") if p.is_file())
    assert sorted(p.relative_to(elsewhere / "mine").as_posix() for p in (elsewhere / "mine").rglob("*")
                  if p.is_file()) == shipped
    assert "try: gradcalc grad mine/neuron.eq" in copied.stdout
    result = subprocess.run([sys.executable, "-m", "gradcalc", "grad", "mine/neuron.eq", "--json"], check=False,
                            cwd=elsewhere, capture_output=True, text=True, env=env, timeout=120)
    assert json.loads(result.stdout)["grad"]["a"] == 2.5, result.stderr
    graded = subprocess.run([sys.executable, "-m", "gradcalc", "check", "mine/neuron.eq", "mine/submissions",
                             "--json"], check=False, cwd=elsewhere, capture_output=True, text=True, env=env,
                            timeout=120)
    assert json.loads(graded.stdout)["totals"]["submissions"] == 5, graded.stderr


def test_grad_json_loads_only_what_it_needs() -> None:
    """Start-up is imports (#2 (a)): `grad --json` loads neither Rich nor the modules of other commands."""
    probe = ("import sys\nfrom gradcalc.cli.app import main\n"
             "sys.argv = ['gradcalc', 'grad', 'samples/neuron.eq', '--json']\n"
             "try:\n    main()\nexcept SystemExit:\n    pass\nprint(' '.join(sorted(sys.modules)), file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", probe], check=False, cwd=ROOT, capture_output=True, text=True,
                            timeout=60)
    assert json.loads(result.stdout)["value"] == 15
    loaded = set(result.stderr.split())
    for module in ("engine.symbolic", "tools.homework.check", "tools.gradcheck", "tools.homework.grading",
                   "engine.graphview", "cli.render", "program.notation.latex", "cli.drawing"):
        assert f"gradcalc.{module}" not in loaded
    assert "rich" not in loaded
