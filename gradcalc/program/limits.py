"""What one run may take from the machine: memory and time, enforced by the operating system.

--max-elements refuses one tensor that is too large before it is made; but a
program can hold many tensors, a claim can stack them, a library call can make
temporaries. The memory budget is the limit on all of it together: the kernel
refuses an allocation past it (RLIMIT_DATA, Linux), NumPy raises MemoryError
before a byte of it is used, and the run stops with a clear error. The time
limit is a wall-clock alarm for one command, and in grading each worker also
gets a CPU-time limit of the operating system, so a worker nobody can kill
still stops.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import threading
from collections.abc import Iterator

from ..errors import TimedOut, UsageError

DEFAULT_MAX_MEMORY = 4 * 2**30  # a run's own data beyond what gradcalc itself uses at start


def seconds(value: float | None, flag: str = "--timeout") -> float | None:
    """A time limit: a finite number of seconds above 0 (NaN and infinity make no limit at all)."""
    if value is None:
        return None
    if not (math.isfinite(value) and 0 < value <= 7 * 86400):
        raise UsageError(f"{flag} must be a number of seconds above 0 and at most a week, not {value:g}",
                         f"for example {flag} 10")
    return value


def _data_in_use() -> int | None:
    """Bytes of private writable memory the process has now (what RLIMIT_DATA counts), or None."""
    try:
        # UTF-8, whose codec is loaded at start (ASCII's module is not); the process name may be UTF-8 too.
        with open("/proc/self/status", encoding="utf-8") as status:
            for line in status:
                if line.startswith("VmData:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@contextlib.contextmanager
def memory_budget(budget: int | None) -> Iterator[bool]:
    """Let the process allocate at most `budget` more bytes of data while inside; yields whether it is enforced.

    Linux only (other systems do not enforce RLIMIT_DATA); the previous limit is restored after.
    """
    used = _data_in_use() if sys.platform.startswith("linux") else None
    if budget is None or used is None:
        yield False
        return
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    wanted = used + budget
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        wanted = soft  # a tighter limit set from outside stays
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (wanted, hard))
    except (ValueError, OSError):
        yield False
        return
    try:
        yield True
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))


@contextlib.contextmanager
def deadline(limit: float | None) -> Iterator[None]:
    """Raise TimedOut in the main thread once `limit` seconds have passed (no limit: None)."""
    if limit is None or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: object) -> None:
        raise TimedOut(f"timed out after {limit:g} s (--timeout)", "raise --timeout, or make the program smaller")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def disarm() -> None:
    """Stop the command's --timeout alarm (grading: --timeout is each submission's, not the command's)."""
    if hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread():
        signal.setitimer(signal.ITIMER_REAL, 0)


def limit_cpu(limit: float) -> None:
    """From now on the process may run `limit` more seconds on every core (the kernel stops it past that).

    A backstop behind the parent's wall-clock limit: NumPy's threads may use several cores at
    once, so a submission within its wall-clock time must not run out of CPU time first.
    """
    try:
        import resource
    except ImportError:  # not on Windows
        return
    import os

    times = os.times()
    used = times.user + times.system
    hard = resource.getrlimit(resource.RLIMIT_CPU)[1]
    wanted = math.ceil(used + limit * (os.cpu_count() or 1)) + 1
    if hard != resource.RLIM_INFINITY:
        wanted = min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_CPU, (wanted, hard))
