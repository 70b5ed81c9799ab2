"""The README and the pages of docs/ are true: every `$ gradcalc ...` example is the real output of the current
code, every Python session runs as written, every link leads somewhere, and the README's front door works.

`python tests/test_docs.py --update` rewrites the examples of every page from the code.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
INDEX = DOCS / "README.md"
PAGES = [README, *sorted(DOCS.glob("*.md"))]

# A console block: one command and what it prints. A block after `<!-- in a new folder -->` runs in an empty
# folder of its own (a command that writes files: `gradcalc examples`); every other in the repository's folder.
FRESH = "<!-- in a new folder -->\n"
BLOCK = re.compile(r"(" + re.escape(FRESH) + r")?```console\n\$ (gradcalc [^\n]*)\n(.*?)```", re.DOTALL)


def name(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def run_example(command: str, fresh: bool = False) -> str:
    """Run one example as a user would, from the repository's folder (or an empty one): stdout and stderr."""
    args = shlex.split(command)
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "100",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    if "|" in args:  # `gradcalc ... | python -m json.tool` style pipelines are not used; keep it simple
        raise ValueError(f"pipelines are not supported in the docs' examples: {command}")
    with tempfile.TemporaryDirectory() as empty:
        result = subprocess.run([sys.executable, "-m", "gradcalc", *args[1:]], check=False,
                                cwd=empty if fresh else ROOT, capture_output=True, text=True, env=env, timeout=120)
    return result.stdout + result.stderr


def examples(page: Path) -> list[tuple[str, str, bool]]:
    """(command, what the page shows, whether it runs in a new folder) for each console block of the page."""
    return [(command, shown, bool(fresh)) for fresh, command, shown in BLOCK.findall(page.read_text(encoding="utf-8"))]


ALL = [(page, *example) for page in PAGES for example in examples(page)]


def test_readme_has_examples() -> None:
    commands = [command for command, _, _ in examples(README)]
    assert "gradcalc grad samples/neuron.eq" in commands


def test_the_tutorial_walks_the_toy_network() -> None:
    """Values, gradients, the chain rule, the graph, a formula and a checked answer, on samples/neuron.eq."""
    commands = [command.split()[1] for command, _, _ in examples(DOCS / "tutorial.md")
                if "samples/neuron.eq" in command]
    for step in ("eval", "grad", "explain", "graph", "diff", "check"):
        assert step in commands, step


@pytest.mark.parametrize(("page", "command", "shown", "fresh"), ALL,
                         ids=[f"{name(page)}: {command}" for page, command, _, _ in ALL])
def test_example_is_real_output(page: Path, command: str, shown: str, fresh: bool) -> None:
    assert run_example(command, fresh).rstrip() == shown.rstrip(), f"{name(page)}: the output of `{command}` is " \
        "stale: run python tests/test_docs.py --update"


# --- the Python sessions: every `>>>` line runs, and prints what the page says it prints ---------------------------

SESSION = re.compile(r"```pycon\n(.*?)```", re.DOTALL)
SESSIONS = [(page, number) for page in PAGES for number in range(len(SESSION.findall(page.read_text("utf-8"))))]


@pytest.mark.parametrize(("page", "number"), SESSIONS, ids=[f"{name(p)} session {n + 1}" for p, n in SESSIONS])
def test_python_session_is_true(page: Path, number: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import doctest

    text = SESSION.findall(page.read_text(encoding="utf-8"))[number]
    monkeypatch.chdir(ROOT)  # the session opens samples/ as a reader in this folder would
    test = doctest.DocTestParser().get_doctest(text, {}, f"{name(page)} session {number + 1}", str(page), 0)
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    failures: list[str] = []
    runner.run(test, out=failures.append)
    assert runner.failures == 0 and test.examples, "".join(failures)


def test_the_python_api_page_has_a_session() -> None:
    assert "run.grad(" in "".join(SESSION.findall((DOCS / "python-api.md").read_text(encoding="utf-8")))


# --- links: every relative link leads to a file, and its #anchor to a heading there ---------------------------------

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def prose(page: Path) -> str:
    """The page without its code blocks and inline code (a `# comment` is no heading, `x[0](...)` no link)."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", page.read_text(encoding="utf-8")))


def anchors(page: Path) -> set[str]:
    """The page's headings as GitHub links to them: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", FENCE.sub("", page.read_text(encoding="utf-8")), re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def links(page: Path) -> list[str]:
    return [target for target in LINK.findall(prose(page)) if not re.match(r"[a-z]+:", target)]


@pytest.mark.parametrize("page", PAGES, ids=name)
def test_every_link_leads_somewhere(page: Path) -> None:
    for target in links(page):
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.is_file(), f"{name(page)}: {target} is no file"
        if anchor:
            assert anchor in anchors(linked), f"{name(page)}: {target}: no heading #{anchor} in {linked.name}"


def test_the_docs_are_listed_in_order_in_the_index_and_the_readme() -> None:
    """docs/README.md lists every page; the README lists the same pages in the same order."""
    pages = {page.name for page in DOCS.glob("*.md")} - {INDEX.name}
    listed = [target for target in links(INDEX) if target.endswith(".md") and "/" not in target]
    assert sorted(listed) == sorted(pages), listed
    assert listed[0] == "tutorial.md"
    readme = [target.removeprefix("docs/") for target in links(README) if re.fullmatch(r"docs/[\w-]+\.md", target)]
    assert [page for page in dict.fromkeys(readme) if page != INDEX.name] == listed
    assert "docs/README.md" in links(README)


def test_each_page_leads_to_the_next() -> None:
    """A page ends with links to the one before and the one after it, in the index's order."""
    order = [target for target in links(INDEX) if target.endswith(".md") and "/" not in target]
    for number, page in enumerate(order):
        footer = (DOCS / page).read_text(encoding="utf-8").rstrip().rsplit("\n", 1)[-1]
        expected = ([f"Previous: ({order[number - 1]})"] if number else []) + ["(README.md)"] + \
            ([f"Next: ({order[number + 1]})"] if number + 1 < len(order) else [])
        assert re.sub(r"\[[^\]]*\]", "", footer).split(" · ") == expected, (page, footer)


def test_the_readme_is_a_front_door() -> None:
    """A page or two: what gradcalc is, the quick start, an example, the links; the reference is in docs/."""
    assert len(README.read_text(encoding="utf-8").splitlines()) < 160
    assert len(examples(README)) == 1


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
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        text = BLOCK.sub(lambda m: f"{m.group(1) or ''}```console\n$ {m.group(2)}\n"
                                   f"{run_example(m.group(2), bool(m.group(1))).rstrip()}\n```", text)
        page.write_text(text, encoding="utf-8")


if __name__ == "__main__" and "--update" in sys.argv:
    update()
