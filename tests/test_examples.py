"""`gradcalc examples [DIR]` copies the samples where an installed gradcalc's user can run the docs' commands.

(That the samples ship in the wheel, and the command works from it, is tests/test_package.py's slow test.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import EXIT_BAD_INPUT, EXIT_OK, REPO, SAMPLES, run_cli, strict_json

from gradcalc.cli import examples


def shipped() -> dict[str, bytes]:
    """The repository's samples, as the wheel carries them: relative path → content."""
    return {p.relative_to(SAMPLES).as_posix(): p.read_bytes() for p in sorted(SAMPLES.rglob("*")) if p.is_file()}


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_samples_found_are_the_repository_s() -> None:
    # An editable install (a checkout) finds the repository's samples; an installed wheel, as CI's is, its own copy.
    found = examples.samples_dir()
    assert found in (Path(examples.__file__).resolve().parent.parent / "samples", SAMPLES)
    assert tree(found) == shipped()
    assert {"neuron.eq", "mlp.eq", "homework.eq", "answers.txt", "submissions/alice.txt"} <= set(shipped())


def test_examples_writes_every_sample_and_says_what_to_try(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = run_cli("examples", "mine")
    assert result.exit_code == EXIT_OK, result.stderr
    assert tree(tmp_path / "mine") == shipped()
    lines = result.stdout.splitlines()
    assert lines[0] == f"wrote {len(shipped())} files into mine:"
    assert [line.strip() for line in lines[1:len(shipped()) + 1]] == list(shipped())
    assert lines[-1] == "try: gradcalc grad mine/neuron.eq" and result.stderr == ""


def test_the_first_command_runs_on_what_was_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli("examples").exit_code == EXIT_OK  # the default folder
    assert (tmp_path / "gradcalc-examples" / "neuron.eq").is_file()
    doc = strict_json(run_cli("grad", "gradcalc-examples/neuron.eq", "--json").stdout)
    assert doc["value"] == 15 and doc["grad"]["a"] == 2.5
    graded = run_cli("check", "gradcalc-examples/neuron.eq", "gradcalc-examples/submissions", "--json")
    assert strict_json(graded.stdout)["totals"]["submissions"] == 5


def test_examples_into_samples_makes_the_docs_commands_run_as_written(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run_cli("examples", "samples").exit_code == EXIT_OK
    ours = run_cli("check", "samples/homework.eq")
    monkeypatch.chdir(REPO)
    assert ours.stdout == run_cli("check", "samples/homework.eq").stdout


def test_an_empty_folder_is_written_into(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    assert run_cli("examples", tmp_path / "empty").exit_code == EXIT_OK
    assert tree(tmp_path / "empty") == shipped()


def test_a_folder_that_is_not_empty_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "neuron.eq").write_text("my own work\n", encoding="utf-8")
    result = run_cli("examples", folder)
    assert result.exit_code == EXIT_BAD_INPUT and result.stdout == ""
    message, hint = result.stderr.splitlines()
    assert message == f"error: {folder} already exists and is not empty: gradcalc examples does not write over files"
    assert hint == "  hint: give a new folder (gradcalc examples DIR), or remove this one"
    assert tree(folder) == {"neuron.eq": b"my own work\n"}


def test_a_file_in_the_way_is_refused(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("x", encoding="utf-8")
    result = run_cli("examples", tmp_path / "taken")
    assert result.exit_code == EXIT_BAD_INPUT
    assert "exists and is not a folder" in result.stderr and "hint: " in result.stderr


def test_standard_output_is_no_folder() -> None:
    result = run_cli("examples", "-")
    assert result.exit_code == EXIT_BAD_INPUT and "needs a folder" in result.stderr


def test_json(tmp_path: Path) -> None:
    doc = strict_json(run_cli("examples", tmp_path / "new", "--json").stdout)
    assert doc == {"dir": str(tmp_path / "new"), "files": list(shipped()),
                   "try": f"gradcalc grad {tmp_path / 'new' / 'neuron.eq'}"}
    refused = run_cli("examples", tmp_path / "new", "--json")
    assert refused.exit_code == EXIT_BAD_INPUT and refused.stdout == ""
    assert strict_json(refused.stderr)["error"]["type"] == "UsageError"


def test_a_folder_that_cannot_be_written_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root writes anywhere")
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    result = run_cli("examples", locked / "inside")
    assert result.exit_code == EXIT_BAD_INPUT and "cannot write" in result.stderr, result.stderr


def test_a_folder_with_a_space_is_quoted_in_the_command_to_try(tmp_path: Path) -> None:
    result = run_cli("examples", tmp_path / "my examples")
    assert result.stdout.splitlines()[-1] == f"try: gradcalc grad '{tmp_path}/my examples/neuron.eq'"


def test_in_a_process() -> None:
    """As a shell runs it (the command is registered however main() picks the command it builds)."""
    result = subprocess.run([sys.executable, "-m", "gradcalc", "examples", "--json", str(REPO / "samples")],
                            cwd=REPO, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == EXIT_BAD_INPUT  # samples/ is not empty: the checkout's own are never written over
    assert json.loads(result.stderr)["error"]["message"].endswith("does not write over files")
