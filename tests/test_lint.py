"""The code is lint-clean and type-checks with the project's ruff and mypy configurations (pyproject.toml).

So the README's test command, which CI runs, runs the linter and the type checker too.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing() -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "gradcalc", "tests", "bench"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_finds_nothing() -> None:
    # The flags are pyproject's [tool.mypy]: every function annotated, every body checked, no unused ignore.
    command = [sys.executable, "-m", "mypy", "--no-incremental", "--cache-dir", os.devnull]  # writes nothing
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_no_merge_conflict_markers_are_left() -> None:
    """A merge's markers in a Markdown page pass every other test (they are text): look for them."""
    markers = ("<" * 7 + " ", "=" * 7 + "\n", ">" * 7 + " ")
    found = []
    for folder, suffixes in (("gradcalc", (".py", ".lark")), ("docs", (".md",)), ("tests", (".py",)),
                             ("bench", (".py", ".md")), ("samples", (".eq", ".txt"))):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in suffixes:
                lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
                found += [f"{path.relative_to(ROOT)}:{n}" for n, line in enumerate(lines, 1)
                          if line.startswith(markers)]
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines(keepends=True)
    found += [f"README.md:{n}" for n, line in enumerate(readme, 1) if line.startswith(markers)]
    assert not found, found
