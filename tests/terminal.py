"""gradcalc on a real (pseudo-)terminal of a given size: what a person sees, not what a pipe gets."""

from __future__ import annotations

import fcntl
import os
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass

from helpers import REPO

# Control sequences a terminal obeys and does not show: colours, styles, cursor moves, titles.
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


@dataclass
class Shown:
    status: int
    screen: str  # what standard output put on the terminal, control sequences removed, lines ending in \n
    raw: bytes  # the terminal's bytes as they came
    stderr: str  # standard error, a pipe (kept apart so that the screen is standard output alone)


def run_in_terminal(*args: str, columns: int = 80, rows: int = 40, env: dict[str, str] | None = None,
                    timeout: float = 60) -> Shown:
    """`gradcalc ARGS` with standard input and output on a pseudo-terminal of columns × rows."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    # The terminal's size must come from the terminal: COLUMNS and LINES would override it.
    environment = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR")}
    environment.update({"TERM": "xterm-256color", "PYTHONIOENCODING": "utf-8", **(env or {})})
    process = subprocess.Popen([sys.executable, "-m", "gradcalc", *args], cwd=REPO, stdin=slave, stdout=slave,
                               stderr=subprocess.PIPE, env=environment)
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                if process.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer to the terminal has closed it
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
    try:
        status = process.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        process.kill()
        raise
    assert process.stderr is not None
    stderr = process.stderr.read().decode("utf-8", "replace")
    process.stderr.close()
    raw = b"".join(chunks)
    screen = _CONTROL.sub("", raw.decode("utf-8", "replace")).replace("\r\n", "\n")
    return Shown(status, screen, raw, stderr)
