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
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    todo = deque(enumerate(zip(runs, descriptions, strict=True)))
    live: dict[int, subprocess.Popen[str]] = {}  # slot -> its worker process
    lock = threading.Lock()
    stopping = threading.Event()
    # (index, Outcome), or (slot, None) when a slot has nothing left
    done: queue.Queue[tuple[int, Outcome | None]] = queue.Queue()

    def start_worker(slot: int) -> subprocess.Popen[str]:
        process = subprocess.Popen([sys.executable, "-m", "harness.worker"], env=env, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        live[slot] = process
        return process

    def serve(slot: int) -> None:
        process = None
        try:
            while True:
                with lock:
                    if stopping.is_set() or not todo:
                        return
                    index, (run, description) = todo.popleft()
                    if process is None:
                        process = start_worker(slot)
                started = time.perf_counter()
                if process.stdin is None or process.stdout is None:  # start_worker opens both pipes
                    raise RuntimeError("the worker process has no stdin or stdout pipe")
                try:
                    process.stdin.write(description.to_json() + "\n")
                    process.stdin.flush()
                    answer = process.stdout.readline()
                except OSError:  # the worker is gone (stopped, or it died)
                    answer = ""
                if answer:
                    reply = json.loads(answer)
                    done.put((index, Outcome(run, reply["returncode"], reply["last_line"],
                                             time.perf_counter() - started)))
                    continue
                code = process.wait()
                done.put((index, Outcome(run, code or -1, f"the worker process ended (exit {code}) during this run",
                                         time.perf_counter() - started)))
                process = None
        finally:
            if process is not None and process.poll() is None:
                if process.stdin is not None:
                    process.stdin.close()
                process.wait()
            done.put((slot, None))

    outcomes: dict[int, Outcome] = {}
    servers = [threading.Thread(target=serve, args=(slot,), daemon=True) for slot in range(min(jobs, len(runs)))]
    try:
        for server in servers:
            server.start()
        idle = 0
        while idle < len(servers):
            index, outcome = done.get()
            if outcome is None:
                idle += 1
                continue
            outcomes[index] = outcome
            status = "finished" if outcome.returncode == 0 else \
                f"FAILED (exit {outcome.returncode}): {outcome.last_line}"
            report(f"[{len(outcomes)}/{len(runs)}] {outcome.run.run_name} seed{outcome.run.seed}: {status} "
                   f"({outcome.seconds:.1f} s)")
    except KeyboardInterrupt:
        stopping.set()
        with lock:
            for process in live.values():
                if process.poll() is None:
                    process.terminate()
        for server in servers:
            server.join(timeout=60)
        raise RunError(f"interrupted: {sum(o.returncode == 0 for o in outcomes.values())} of {len(runs)} runs had "
                       "finished; the workers were stopped, and the same command skips the finished runs and resumes "
                       "the others from their last complete epoch") from None
    return [outcomes[i] for i in range(len(runs))]


def default_threads(jobs: int) -> int:
    """Torch threads per worker: the cores this process may run on (its affinity: what a container or a cluster
    job was given, not the machine's count) shared among ``jobs`` workers (at least one)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, cores // jobs)
