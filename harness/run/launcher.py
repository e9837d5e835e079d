"""Running a grid of planned runs in parallel on this machine: ``run --launcher local --jobs N``.

Each run (method, grid point, seed) becomes one ``python -m harness run`` process restricted to that run
(``--methods``, ``--seeds``, its overrides as ``--set``), so a worker is exactly a sequential run: it
takes the run's lock, skips the run when it is finished, resumes it from its last complete epoch after an
interruption, and writes its result atomically. At most ``jobs`` processes run at once, each with
``threads`` torch threads. A line is printed as each run ends; Ctrl-C stops every worker (their last
complete epochs stay for the same command to resume) and the command exits with status 3.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
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


def run_argv(run: Any, common: Sequence[str], threads: int | None) -> list[str]:
    """The command line of the worker for ``run``: its task, method, seed and overrides, then ``common``
    (``threads`` None: torch's own number of threads)."""
    sets = [arg for override in run.spec.overrides for arg in ("--set", override)]
    return [sys.executable, "-m", "harness", "run", str(run.spec.path), "--methods", run.method, "--seeds",
            str(run.seed), *sets, *common, *(["--threads", str(threads)] if threads else []), "--no-progress",
            "--no-tables"]


def run_local(runs: Sequence[Any], common: Sequence[str], jobs: int, threads: int,
              report: Callable[[str], None] = print) -> list[Outcome]:
    """Run every planned run as a worker process, ``jobs`` at a time; the outcomes, in the order given."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    live: dict[int, subprocess.Popen] = {}
    lock = threading.Lock()
    stopping = threading.Event()

    def work(index: int, run: Any) -> Outcome:
        started = time.perf_counter()
        with lock:
            if stopping.is_set():
                return Outcome(run, -2, "not started: the grid was interrupted", 0.0)
            process = subprocess.Popen(run_argv(run, common, threads), env=env, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.PIPE, text=True)
            live[index] = process
        _, stderr = process.communicate()
        with lock:
            live.pop(index, None)
        lines = [line for line in stderr.splitlines() if line.strip()]
        last = next((line for line in reversed(lines) if line.startswith("error:")), lines[-1] if lines else "")
        return Outcome(run, process.returncode, last, time.perf_counter() - started)

    outcomes: dict[int, Outcome] = {}
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(work, i, run): i for i, run in enumerate(runs)}
        for future in as_completed(futures):
            outcome = future.result()
            outcomes[futures[future]] = outcome
            status = "finished" if outcome.returncode == 0 else f"FAILED (exit {outcome.returncode}): {outcome.last_line}"
            report(f"[{len(outcomes)}/{len(runs)}] {outcome.run.run_name} seed{outcome.run.seed}: {status} "
                   f"({outcome.seconds:.1f} s)")
    except KeyboardInterrupt:
        stopping.set()
        with lock:
            for process in live.values():
                process.terminate()
        pool.shutdown(wait=True, cancel_futures=True)
        raise RunError(f"interrupted: {sum(o.returncode == 0 for o in outcomes.values())} of {len(runs)} runs had "
                       "finished; the workers were stopped, and the same command skips the finished runs and resumes "
                       "the others from their last complete epoch") from None
    pool.shutdown(wait=True)
    return [outcomes[i] for i in range(len(runs))]


def default_threads(jobs: int) -> int:
    """Torch threads per worker: the machine's cores shared among ``jobs`` workers (at least one)."""
    return max(1, (os.cpu_count() or 1) // jobs)
