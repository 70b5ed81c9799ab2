"""Reading the files a command names, a program loads or a class submits: bounded, and inside their folder.

Teachers run gradcalc on files their students wrote, so a file is opened as a
hostile one would be: a link that leaves its folder, a device (/dev/zero), a named
pipe or a socket is refused by name before a byte is read; every read stops at
--max-file-size; and an array file's element count is read from its header and
checked against the limits before its data is.
"""

from __future__ import annotations

import functools
import os
import re
import stat
import sys
from typing import BinaryIO

from .errors import FileProblem, GradcalcError, UsageError

DEFAULT_MAX_FILE_SIZE = 10 * 2**20  # 10 MiB: far more than any program or answers file, far less than memory
_CHUNK = 2**16


def parse_size(text: str, flag: str) -> int:
    """A size in bytes written as 10485760, 10M, 512K, 2G (powers of 1024) or 1.5G."""
    units = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    cleaned = text.strip().upper().removesuffix("IB").removesuffix("B")
    number, unit = (cleaned[:-1], cleaned[-1]) if cleaned[-1:] in units and cleaned[-1:] else (cleaned, "")
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value * units[unit] < 2**63):  # NaN fails too
        raise UsageError(f"{flag} must be a size such as 10M, 512K or 2G, not {text!r}",
                         f"for example {flag} 10M (bytes; K, M, G are powers of 1024)")
    return int(value * units[unit])


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


class Outside(FileProblem):
    """A path that leads outside the folders it may be read from (`real` is where it leads)."""

    def __init__(self, path: str, real: str) -> None:
        super().__init__(f"{path} leads outside its folder ({real})",
                         "a link out of the folder is not followed: copy the file into the folder")
        self.real = real


@functools.lru_cache(maxsize=64)
def _real_root(root: str) -> str:
    """A folder's real path (grading asks for the same one for every submission in it)."""
    return os.path.realpath(root)


def inside(path: str, roots: tuple[str, ...]) -> str:
    """The real path of `path`, which must lie inside one of `roots` once every link is followed."""
    try:
        real = os.path.realpath(path)
    except (ValueError, OSError) as exc:  # an embedded NUL byte, a loop of links
        raise FileProblem(f"{path}: not a usable file name ({exc})", "name a file in the folder") from None
    for root in roots:
        real_root = _real_root(root)
        if os.path.commonpath([real, real_root]) == real_root:
            return real
    raise Outside(path, real)


def open_regular(path: str, roots: tuple[str, ...] | None = None) -> BinaryIO:
    """A regular file opened for reading; with roots, only one inside them (links followed first)."""
    real = inside(path, roots) if roots is not None else path
    # O_NONBLOCK: opening a named pipe must not wait for a writer; it is refused below.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if roots is not None:
        flags |= getattr(os, "O_NOFOLLOW", 0)  # resolved above: a link now is one swapped in since
    try:
        descriptor = os.open(real, flags)
    except (OSError, ValueError) as exc:
        raise _unopened(FileProblem, path, exc, "check the path", "a file") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise FileProblem(f"{path} is {_kind(mode)}, not a regular file", "only regular files are read")
    if hasattr(os, "set_blocking"):
        os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def read_bounded(handle: BinaryIO, limit: int, shown: str) -> bytes:
    """At most `limit` bytes; a file with more is refused rather than cut."""
    data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileProblem(f"{shown} is larger than {limit:,} bytes (--max-file-size)",
                          "give a smaller file, or raise --max-file-size")
    return data


def read_text(path: str, limit: int = DEFAULT_MAX_FILE_SIZE, roots: tuple[str, ...] | None = None) -> str:
    """A program or answers file's text ('-': standard input), read to at most `limit` bytes.

    With roots (a submission), the file must be a regular file inside them. The command's own
    FILE may be a pipe (`<(...)`): it is still read only to the limit.
    """
    if path == "-":
        data = read_bounded(sys.stdin.buffer, limit, "standard input") if hasattr(sys.stdin, "buffer") \
            else sys.stdin.read(limit + 1).encode("utf-8")
        shown = "standard input"
    else:
        shown = path
        if roots is not None:
            with open_regular(path, roots) as handle:
                data = read_bounded(handle, limit, path)
        else:
            data = _read_named(path, limit)
    try:
        text = data.decode("utf-8-sig" if path != "-" else "utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise UsageError(f"{shown} is not UTF-8 text", "save the file as UTF-8 text") from None
    return lines_ended(text)


def lines_ended(text: str) -> str:
    """Text whose lone \\r end lines, as Python's universal newlines read them (classic Mac OS files): as the
    language's blank, one joined a file's lines into one (an answers file's claims into one wrong claim)."""
    return re.sub("\r(?!\n)", "\n", text) if "\r" in text else text


def _read_named(path: str, limit: int) -> bytes:
    try:
        with open(path, "rb") as handle:
            return read_bounded(handle, limit, path)
    except (OSError, ValueError) as exc:
        raise _unopened(UsageError, path, exc, "check the path, or pass the program with -e 'TEXT'",
                        "a program file", "a .eq file") from None


def _unopened(kind: type[GradcalcError], path: str, exc: Exception, missing: str, what: str,
              wanted: str = "a file") -> GradcalcError:
    """Why `path` could not be opened, as an error of `kind`."""
    if isinstance(exc, FileNotFoundError):
        return kind(f"no such file: {path}", missing)
    if isinstance(exc, IsADirectoryError):
        return kind(f"{path} is a folder, not {what}", f"give the path of {wanted}")
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return kind(f"cannot read {path}: {reason}", "check the file's name and permissions")


def entry_problem(path: str, root: str) -> str | None:
    """Why a submission found in (or given as) `path` cannot be read, or None: checked before judging."""
    try:
        info = os.lstat(path)
    except (OSError, ValueError) as exc:
        return f"cannot read it: {getattr(exc, 'strerror', None) or exc}"
    if stat.S_ISLNK(info.st_mode):
        try:
            inside(path, (root,))
        except Outside:
            return f"a link leading outside the folder ({os.readlink(path)}): not followed"
        try:
            info = os.stat(path)
        except OSError:
            return "a link to nothing"
        if stat.S_ISDIR(info.st_mode):
            return "a link to a folder: not followed"
    if not stat.S_ISREG(info.st_mode):
        return f"{_kind(info.st_mode)}, not a regular file: not read"
    return None


def describe(exc: Exception) -> str:
    """NumPy's, zipfile's and json's many ways to say a file is malformed, in one line."""
    text = str(exc).split("\n")[0]
    return text or type(exc).__name__

