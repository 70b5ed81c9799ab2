"""The `gradcalc` command's first lines: Ctrl-C while Python is still loading exits quietly.

Loading NumPy, Lark, Typer and Rich takes a few tenths of a second; an interrupt then
would print a traceback from whichever import it landed in. Until the command line
takes over (cli.main restores Python's own handler), Ctrl-C ends the process with
"interrupted" and status 130, as it does later.
"""

import os
import signal
import sys


def _interrupted(signum: int, frame: object) -> None:
    sys.stderr.write("interrupted\n")
    sys.stderr.flush()
    os._exit(130)


def main() -> None:
    signal.signal(signal.SIGINT, _interrupted)
    from .app import main as run

    run()
