"""`gradcalc examples [DIR]`: the sample programs, answers and submissions, copied where a user can run them.

The docs' commands read `samples/neuron.eq`, `samples/submissions/`, ...: a checkout has them, an
installed gradcalc (a wheel, `pipx install`) has no checkout. The wheel carries them as package data,
`gradcalc/samples` (pyproject.toml's force-include of the repository's `samples/`); a checkout (an
editable install, PYTHONPATH) has them at the repository's `samples/`. This command copies them into a
new folder, never over anything: a folder that exists and is not empty is refused.
"""

from collections.abc import Callable
from pathlib import Path
from typing import Any

DEFAULT_DIR = "gradcalc-examples"
FIRST_PROGRAM = "neuron.eq"  # the tutorial's toy network: the first command to try

EPILOG = (
    "[bold]Examples[/bold]\n\n"
    "  gradcalc examples                  (into ./gradcalc-examples)\n\n"
    "  gradcalc examples samples          (into ./samples: the docs' commands then run as written)\n\n"
    "  gradcalc examples ~/gradcalc-examples --json"
)


def samples_dir() -> Path:
    """Where this gradcalc's samples are: inside the package (a wheel), or beside it (a checkout)."""
    package = Path(__file__).resolve().parent.parent
    shipped = package / "samples"
    if (shipped / FIRST_PROGRAM).is_file():
        return shipped
    checkout = package.parent / "samples"  # only a source tree: site-packages/samples is no one's in particular
    if (checkout / FIRST_PROGRAM).is_file() and (package.parent / "pyproject.toml").is_file():
        return checkout
    raise FileNotFoundError(f"this installation of gradcalc has no samples (looked in {shipped} and {checkout})")


def sample_files(source: Path) -> list[Path]:
    """The samples' regular files, relative to source, in name order (hidden files and caches left out)."""
    found = []
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            continue
        if path.is_file() and not path.is_symlink():
            found.append(relative)
    return found


def copy_samples(target: Path, shown: str) -> list[Path]:
    """Copy the samples into target, a new or empty folder (`shown` is how the user wrote it)."""
    from ..errors import UsageError

    hint = "give a new folder (gradcalc examples DIR), or remove this one"
    if target.is_symlink() and not target.exists():
        raise UsageError(f"{shown} is a link to nothing: gradcalc examples writes into a new or empty folder", hint)
    if target.exists():
        if not target.is_dir():
            raise UsageError(f"{shown} exists and is not a folder: gradcalc examples writes into a new or empty "
                             "folder", hint)
        if any(target.iterdir()):
            raise UsageError(f"{shown} already exists and is not empty: gradcalc examples does not write over "
                             "files", hint)
    source = samples_dir()
    files = sample_files(source)
    try:
        for relative in files:
            destination = target / relative
            destination.parent.mkdir(parents=True, exist_ok=True)
            # "x": never over a file, even one that appeared since the check; the content only, not the
            # installed file's mode (read-only in some installations).
            with open(destination, "xb") as handle:
                handle.write((source / relative).read_bytes())
    except OSError as exc:
        where = exc.filename or shown
        raise UsageError(f"cannot write {where}: {exc.strerror or exc}",
                         "check that the folder can be created and written, or give another DIR") from None
    return files


def first_command(shown: str) -> str:
    import shlex  # here, not at the top: every command loads this module for its --help epilog

    folder = shown.rstrip("/") or "/"
    return f"gradcalc grad {shlex.quote(folder + '/' + FIRST_PROGRAM)}"


def copy(dir_: str) -> tuple[dict[str, Any], Callable[[], str]]:
    """Copy the samples into dir_: the JSON document and the text view of what was written."""
    from ..errors import UsageError
    from ..inert import inert

    if dir_ in ("", "-"):
        raise UsageError("gradcalc examples writes files: it needs a folder, not standard output",
                         f"give a folder, or leave DIR out for ./{DEFAULT_DIR}")
    files = copy_samples(Path(dir_).expanduser(), dir_)
    names = [relative.as_posix() for relative in files]
    command = first_command(dir_)

    def view() -> str:
        listed = "".join(f"  {inert(name)}\n" for name in names)
        return f"wrote {len(names)} files into {inert(dir_)}:\n{listed}\ntry: {inert(command)}\n"

    return {"dir": dir_, "files": names, "try": command}, view
