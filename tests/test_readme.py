"""Every `$ gradcalc ...` example in README.md is the real output of the current code.

`python tests/test_readme.py --update` rewrites the examples from the code.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BLOCK = re.compile(r"```console\n\$ (gradcalc [^\n]*)\n(.*?)```", re.DOTALL)


def run_example(command: str) -> str:
    """Run one README command from the repository root, as a user would (stdout and stderr)."""
    args = shlex.split(command)
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100"}
    shell_input = None
    if "|" in args:  # `gradcalc ... | python -m json.tool` style pipelines are not used; keep it simple
        raise ValueError(f"pipelines are not supported in README examples: {command}")
    result = subprocess.run([sys.executable, "-m", "gradcalc", *args[1:]], check=False, cwd=ROOT,
                            capture_output=True, text=True, env=env, input=shell_input, timeout=120)
    return result.stdout + result.stderr


def examples() -> list[tuple[str, str]]:
    return BLOCK.findall(README.read_text(encoding="utf-8"))


def test_readme_has_examples() -> None:
    commands = [command for command, _ in examples()]
    assert "gradcalc grad samples/neuron.eq" in commands


@pytest.mark.parametrize(("command", "shown"), examples(), ids=[c for c, _ in examples()])
def test_readme_example_is_real_output(command: str, shown: str) -> None:
    assert run_example(command).rstrip() == shown.rstrip(), f"README output of `{command}` is stale: run " \
        "python tests/test_readme.py --update"


def update() -> None:
    text = README.read_text(encoding="utf-8")
    text = BLOCK.sub(lambda m: f"```console\n$ {m.group(1)}\n{run_example(m.group(1)).rstrip()}\n```", text)
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__" and "--update" in sys.argv:
    update()
