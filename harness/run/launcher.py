"""Running a grid of planned runs in parallel on this machine: ``run --launcher local --jobs N``.

Each run (method, grid point, seed) becomes one :class:`harness.run.grid.Job`, which a worker runs exactly as
a sequential run would: it takes the run's lock, skips the run when it is finished, resumes it from its last
complete epoch after an interruption, and writes its result atomically. ``jobs`` worker processes
(``python -m harness.worker``, each with ``threads`` torch threads) take the runs one at a time from a shared
queue and keep their process between runs, so torch is imported and the Sinkhorn kernels are built or loaded
once per worker rather than once per run. A worker that dies fails its run and is replaced for the next one.
A line is printed as each run ends; Ctrl-C stops every worker (their last complete epochs stay for the same
command to resume) and the command exits with status 3.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from harness.errors import RunError


@dataclass(frozen=True)
class Outcome:
    """How one worker ended: its exit status, its last stderr line (the error, if any) and its wall-clock."""

    run: Any
    returncode: int
    last_line: str
    seconds: float


def run_local(runs: Sequence[Any], descriptions: Sequence[Any], jobs: int, threads: int,
              report: Callable[[str], None] = print) -> list[Outcome]:
    """Run every planned run, described by its :class:`harness.run.grid.Job` in ``descriptions``, in ``jobs``
    worker processes; the outcomes, in the order given."""
    workers = _Workers(runs, descriptions, threads)
    outcomes: dict[int, Outcome] = {}
    servers = [threading.Thread(target=workers.serve, args=(slot,), daemon=True)
               for slot in range(min(jobs, len(runs)))]
    try:
        for server in servers:
            server.start()
        _collect(workers.done, len(servers), len(runs), outcomes, report)
    except KeyboardInterrupt:
        workers.stop()
        for server in servers:
            server.join(timeout=60)
        raise RunError(f"interrupted: {sum(o.returncode == 0 for o in outcomes.values())} of {len(runs)} runs had "
                       "finished; the workers were stopped, and the same command skips the finished runs and resumes "
                       "the others from their last complete epoch") from None
    return [outcomes[i] for i in range(len(runs))]


_Taken = tuple[int, Any, Any, "subprocess.Popen[str]"]  # a run's index, the run, its description, the worker


class _Workers:
    """The worker slots' shared state: the runs not yet taken, each slot's live worker process, and the queue of
    outcomes, ``(index, Outcome)`` per run and ``(slot, None)`` when a slot has nothing left."""

    def __init__(self, runs: Sequence[Any], descriptions: Sequence[Any], threads: int) -> None:
        self.env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        self.todo = deque(enumerate(zip(runs, descriptions, strict=True)))
        self.live: dict[int, subprocess.Popen[str]] = {}  # slot -> its worker process
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.done: queue.Queue[tuple[int, Outcome | None]] = queue.Queue()

    def start_worker(self, slot: int) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-m", "harness.worker"], env=self.env, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.live[slot] = process
        return process

    def take(self, slot: int, process: subprocess.Popen[str] | None) -> _Taken | None:
        """The next run (index, run, description) and the slot's worker, started if it has none; None when
        nothing is left or the command is stopping."""
        with self.lock:
            if self.stopping.is_set() or not self.todo:
                return None
            index, (run, description) = self.todo.popleft()
            if process is None:
                process = self.start_worker(slot)
        return index, run, description, process

    def serve(self, slot: int) -> None:
        """One slot's loop: its worker runs the runs it takes one at a time; a worker that dies fails its run and
        is replaced for the next one."""
        process = None
        try:
            while (taken := self.take(slot, process)) is not None:
                index, run, description, process = taken
                started = time.perf_counter()
                answer = _ask(process, description)
                if answer:
                    reply = json.loads(answer)
                    self.done.put((index, Outcome(run, reply["returncode"], reply["last_line"],
                                                  time.perf_counter() - started)))
                    continue
                code = process.wait()
                self.done.put((index, Outcome(run, code or -1,
                                              f"the worker process ended (exit {code}) during this run",
                                              time.perf_counter() - started)))
                process = None
        finally:
            if process is not None and process.poll() is None:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait()
            self.done.put((slot, None))

    def stop(self) -> None:
        """Take no more runs and terminate every live worker."""
        self.stopping.set()
        with self.lock:
            for process in self.live.values():
                if process.poll() is None:
                    process.terminate()


def _ask(process: subprocess.Popen[str], description: Any) -> str:
    """Send a worker one run's description; its one-line JSON reply, '' when the worker is gone (stopped, or it
    died)."""
    if process.stdin is None or process.stdout is None:  # start_worker opens both pipes
        raise RuntimeError("the worker process has no stdin or stdout pipe")
    try:
        process.stdin.write(description.to_json() + "\n")
        process.stdin.flush()
        return process.stdout.readline()
    except OSError:  # the worker is gone (stopped, or it died)
        return ""


def _collect(done: queue.Queue[tuple[int, Outcome | None]], slots: int, total: int, outcomes: dict[int, Outcome],
             report: Callable[[str], None]) -> None:
    """Gather the outcomes into ``outcomes`` by index, a line reported for each, until every slot is idle."""
    idle = 0
    while idle < slots:
        index, outcome = done.get()
        if outcome is None:
            idle += 1
            continue
        outcomes[index] = outcome
        status = "finished" if outcome.returncode == 0 else \
            f"FAILED (exit {outcome.returncode}): {outcome.last_line}"
        report(f"[{len(outcomes)}/{total}] {outcome.run.run_name} seed{outcome.run.seed}: {status} "
               f"({outcome.seconds:.1f} s)")


def default_threads(jobs: int) -> int:
    """Torch threads per worker: the cores this process may run on (its affinity: what a container or a cluster
    job was given, not the machine's count) shared among ``jobs`` workers (at least one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // jobs)
