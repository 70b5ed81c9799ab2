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


# --- the Python API session: every `>>>` line runs, and prints what the README says it prints -----------------------

SESSION = re.compile(r"```pycon\n(.*?)```", re.DOTALL)


@pytest.mark.parametrize("number", range(len(SESSION.findall(README.read_text(encoding="utf-8")))))
def test_readme_python_session_is_true(number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import doctest

    text = SESSION.findall(README.read_text(encoding="utf-8"))[number]
    monkeypatch.chdir(ROOT)  # the session opens samples/ as a reader in this folder would
    test = doctest.DocTestParser().get_doctest(text, {}, f"README.md session {number + 1}", str(README), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    failures: list[str] = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0 and test.examples, "".join(failures)


def test_readme_has_a_python_session() -> None:
    assert "run.grad(" in "".join(SESSION.findall(README.read_text(encoding="utf-8")))


# --- the front door: two commands that work on a PEP 668 system, the second the one CI runs -------------------------

def quick_start() -> list[str]:
    text = README.read_text(encoding="utf-8")
    block = re.search(r"## Quick start\n.*?```sh\n(.*?)```", text, re.DOTALL)
    assert block, "no sh block in the Quick start"
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.strip()]


def test_quick_start_is_two_commands_in_a_virtual_environment() -> None:
    """Debian's and Ubuntu's Python refuse `pip install` outside a virtual environment (PEP 668)."""
    install, tests = quick_start()
    for command in (install, tests):
        steps = [step.strip() for step in command.split("&&")]
        assert steps[0] == "python3 -m venv .venv" and steps[1] == ". .venv/bin/activate", command
        assert steps[2].startswith("pip install "), command
    assert install.endswith("pip install . && gradcalc grad samples/neuron.eq")


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run makes its own virtual environment, then runs what the README's second command runs in one."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()[-1]
    _, tests = quick_start()
    assert tests.endswith(" && " + ci), (tests, ci)


def update() -> None:
    text = README.read_text(encoding="utf-8")
    text = BLOCK.sub(lambda m: f"```console\n$ {m.group(1)}\n{run_example(m.group(1)).rstrip()}\n```", text)
    README.write_text(text, encoding="utf-8")


if __name__ == "__main__" and "--update" in sys.argv:
    update()
