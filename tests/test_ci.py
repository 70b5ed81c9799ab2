"""CI runs every test. A plain `pytest` leaves out the tests marked slow (tests/conftest.py), so the command CI
runs (the README's, .ci/run's last line) must ask for them with --full."""

from __future__ import annotations

import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ci_runs_the_slow_tests_too() -> None:
    command = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    words = shlex.split(command.split("&&")[-1])
    assert words[0] == "pytest", command
    assert "--full" in words, f"CI runs `{command}`, which leaves out the tests marked slow: add --full"
