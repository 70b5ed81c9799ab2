"""Grading many submissions: worker processes, each submission under a time limit.

The key is run once, in this process, before the workers start: forked workers
inherit it (and its nearby runs) and judge one submission at a time. A worker
that passes the time limit is killed and replaced, so one runaway submission
(a loop that never ends, a huge matrix product) is reported and the rest are
graded. Each worker runs under the operating system's limits too: a memory
budget (--max-memory, Linux) and a CPU-time limit, so a submission cannot take
the machine or the other submissions with it. A worker sends back only what is
reported: a large claimed value is reported by its shape. Where fork is not
available, or on the GPU (CUDA does not survive a fork), the workers start
fresh and run the key again.
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

from ...engine import backend as B
from ...errors import FileProblem, GradcalcError, InternalError, TimedOut, error_json, error_text, out_of_memory
from ...program.limits import limit_cpu, memory_budget
from .check import Judge, Report, Submission, judge_file

DEFAULT_TIMEOUT = 10.0
GPU_START_METHOD = "spawn"  # a CUDA context does not survive fork: GPU workers start fresh and run the key again


@dataclass
class _Worker:
    process: Any
    connection: Any
    task: int | None = None
    deadline: float = 0.0


def _serve(make_judge: Callable[[], Judge], connection: Any, timeout: float, budget: int | None) -> None:
    """A worker: receive (index, name, path, root), send back (index, Report), until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    try:
        with memory_budget(budget):
            _judge_each(make_judge(), connection, timeout)
    except (EOFError, OSError, GradcalcError, MemoryError):  # the parent went away, or the key failed here:
        os._exit(1)  # the parent reports the submission; no traceback from a worker


def _judge_each(judge: Judge, connection: Any, timeout: float) -> None:
    while True:
        message = connection.recv()
        if message is None:
            return
        index, name, path, root = message
        limit_cpu(timeout)  # past the parent's wall-clock limit, in case nobody is left to kill this worker
        try:
            report = judge_file(judge, path, name, (root,)).compact()
        except MemoryError:
            report = _failed(name, out_of_memory())
        except Exception as exc:  # a bug met on one submission must not stop the others
            report = _failed(name, InternalError(f"internal error: {type(exc).__name__}: {exc}"))
        connection.send((index, report))


def _failed(name: str, error: GradcalcError) -> Report:
    return Report(name, error=error_json(error)["error"], error_message=error_text(error))


def _died(process: Any, budget: int | None) -> GradcalcError:
    """Why a worker stopped without a word: the error reported for its submission."""
    code = process.exitcode
    if code == -getattr(signal, "SIGXCPU", -1000):
        return TimedOut("used more CPU time than --timeout allows")
    memory = "over the memory limit (--max-memory)" if budget is not None else "out of memory?"
    return InternalError(f"the worker judging it stopped ({memory}; exit status {code})")


def grade(make_judge: Callable[[], Judge], items: list[Submission], jobs: int = 1,
          timeout: float = DEFAULT_TIMEOUT, budget: int | None = None) -> list[Report]:
    """Judge each submission in worker processes; results in the order given.

    budget: the memory each worker may take beyond what it starts with (None: no limit).
    """
    methods = multiprocessing.get_all_start_methods()
    method = GPU_START_METHOD if B.device == "gpu" else "fork" if "fork" in methods else "spawn"
    # The typeshed types get_context(str) as BaseContext, which lacks Process; every real context has it.
    context: Any = multiprocessing.get_context(method)
    results: list[Report | None] = [None] * len(items)
    for index, item in enumerate(items):  # refused before any worker reads it: a link out, a device
        if item.problem is not None:
            results[index] = _failed(item.name, FileProblem(item.problem))
    pending = [i for i, result in enumerate(results) if result is None][::-1]
    workers: list[_Worker] = []

    def start() -> _Worker:
        ours, theirs = context.Pipe()
        process = context.Process(target=_serve, args=(make_judge, theirs, timeout, budget), daemon=True)
        process.start()
        theirs.close()
        return _Worker(process, ours)

    def assign(worker: _Worker) -> None:
        if pending:
            worker.task = pending.pop()
            worker.deadline = time.monotonic() + timeout
            item = items[worker.task]
            worker.connection.send((worker.task, item.name, item.path, item.root))
        else:
            worker.task = None

    def replace(worker: _Worker, why: GradcalcError) -> None:
        """Report the worker's submission as not judged, and put a fresh worker in its place."""
        assert worker.task is not None
        results[worker.task] = _failed(items[worker.task].name, why)
        worker.process.kill()
        worker.process.join()
        worker.connection.close()
        workers[workers.index(worker)] = fresh = start()
        assign(fresh)

    try:
        for _ in range(max(1, min(jobs, len(pending)))) if pending else ():
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
                        worker.process.join(timeout=1)
                        replace(worker, _died(worker.process, budget))
                        continue
                    results[index] = report
                    assign(worker)
                elif time.monotonic() >= worker.deadline:
                    replace(worker, TimedOut(f"timed out after {timeout:g} s (raise --timeout)"))
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
