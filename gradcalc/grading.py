"""Grading many submissions: worker processes, each submission under a time limit.

The key is run once, in this process, before the workers start: forked workers
inherit it (and its nearby runs) and judge one submission at a time. A worker
that passes the time limit is killed and replaced, so one runaway submission
(a loop that never ends, a huge matrix product) is reported and the rest are
graded. Where fork is not available, or on the GPU (CUDA does not survive a
fork), the workers start fresh and run the key again.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import backend as B
from .check import Judge, Report, judge_file
from .errors import GradcalcError

DEFAULT_TIMEOUT = 10.0
GPU_START_METHOD = "spawn"  # a CUDA context does not survive fork: GPU workers start fresh and run the key again


@dataclass
class _Worker:
    process: Any
    connection: Any
    task: int | None = None
    deadline: float = 0.0


def _serve(make_judge: Callable[[], Judge], connection: Any) -> None:
    """A worker: receive (index, name, path), send back (index, Report), until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    try:
        _judge_each(make_judge(), connection)
    except (EOFError, OSError, GradcalcError):  # the parent went away, or the key failed to run here:
        os._exit(1)  # the parent reports the submission; no traceback from a worker


def _judge_each(judge: Judge, connection: Any) -> None:
    while True:
        message = connection.recv()
        if message is None:
            return
        index, name, path = message
        try:
            report = judge_file(judge, path, name)
        except Exception as exc:  # a bug met on one submission must not stop the others
            report = Report(name, error={"type": "InternalError", "message": f"{type(exc).__name__}: {exc}",
                                         "line": None, "column": None},
                            error_message=f"error: internal error: {type(exc).__name__}: {exc}")
        connection.send((index, report))


def grade(make_judge: Callable[[], Judge], items: list[tuple[str, str]], jobs: int = 1,
          timeout: float = DEFAULT_TIMEOUT) -> list[Report]:
    """Judge each (name, path) in worker processes; results in the order given."""
    methods = multiprocessing.get_all_start_methods()
    method = GPU_START_METHOD if B.device == "gpu" else "fork" if "fork" in methods else "spawn"
    context = multiprocessing.get_context(method)
    results: list[Report | None] = [None] * len(items)
    pending = list(range(len(items)))[::-1]
    workers: list[_Worker] = []

    def start() -> _Worker:
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(make_judge, theirs), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, ours)

    def assign(worker: _Worker) -> None:
        if pending:
            worker.task = pending.pop()
            worker.deadline = time.monotonic() + timeout
            name, path = items[worker.task]
            worker.connection.send((worker.task, name, path))
        else:
            worker.task = None

    def replace(worker: _Worker, kind: str, why: str) -> None:
        """Report the worker's submission as not judged, and put a fresh worker in its place."""
        assert worker.task is not None
        name = items[worker.task][0]
        results[worker.task] = Report(name, error={"type": kind, "message": why, "line": None, "column": None},
                                      error_message=f"error: {why}")
        worker.process.kill()
        worker.process.join()
        worker.connection.close()
        workers[workers.index(worker)] = fresh = start()
        assign(fresh)

    try:
        for _ in range(max(1, min(jobs, len(items)))):
            worker = start()
            workers.append(worker)
            assign(worker)
        while any(w.task is not None for w in workers):
            busy = [w for w in workers if w.task is not None]
            wait = max(0.0, min(w.deadline for w in busy) - time.monotonic())
            ready = multiprocessing.connection.wait([w.connection for w in busy], timeout=wait)
            for worker in busy:
                if worker.connection in ready:
                    try:
                        index, report = worker.connection.recv()
                    except (EOFError, OSError):
                        replace(worker, "InternalError", "the worker judging it stopped (out of memory?)")
                        continue
                    results[index] = report
                    assign(worker)
                elif time.monotonic() >= worker.deadline:
                    replace(worker, "TimeoutError", f"timed out after {timeout:g} s (raise --timeout)")
    finally:
        for worker in workers:
            try:
                worker.connection.send(None)
            except OSError:
                pass
            worker.process.join(timeout=1)
            if worker.process.is_alive():
                worker.process.kill()
    return [r for r in results if r is not None]
