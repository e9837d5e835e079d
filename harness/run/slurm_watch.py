"""Waiting for the jobs of ``run --launcher slurm --wait``: a progress bar over the array, each job announced as it
ends, judged from its tasks' result files and, for a job that ended without them, from squeue and sacct."""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import submitit
from tqdm.auto import tqdm

from harness.run.error_lines import error_line
from harness.run.slurm_accounting import FINAL_STATES, Record, describe, query, task_results
from harness.run.slurm_submit import drop_template


@dataclass(frozen=True)
class Finished:
    """How one job ended: the run it ran, whether it trained it (False: found it finished), the error line of
    a failed one ('' when it succeeded) and its state (COMPLETED, FAILED, CANCELLED, TIMEOUT, ...)."""

    run: Any
    job_id: str
    trained: bool
    error: str
    state: str = ""


def wait(runs: Sequence[Any], jobs: Sequence[submitit.Job[Any]], progress: bool = True,
         report: Callable[[str], None] = print, poll: float = 5.0, settle: float = 60.0) -> list[Finished]:
    """Block until every job has ended, with a progress bar over the array; the outcomes, in the order given.

    A SLURM job has ended when all its tasks wrote their result files, or when SLURM says it ended without
    them (cancelled, timed out, preempted without requeue, its node failed, ...), or when neither squeue nor
    sacct knows it any more (a job cancelled while pending has no sacct record; without accounting, squeue
    forgets a job MinJobAge after it ended); a job SLURM calls COMPLETED is given ``settle`` seconds for its
    result file to appear on a shared file system."""
    watch = _Watch(runs, jobs, progress, report, settle)
    try:
        while len(watch.ended) < len(jobs):
            waiting = watch.check_results()
            if waiting:
                watch.check_slurm(waiting)
            if len(watch.ended) < len(jobs):
                time.sleep(poll)
    finally:
        watch.bar.close()
    if jobs:
        drop_template(_jobs_root(jobs[0]))
    return [watch.ended[i] for i in range(len(jobs))]


def _jobs_root(job: submitit.Job[Any]) -> Path:
    """The folder of a job's log folders (``_jobs``: the parent of submitit's ``%j``)."""
    return Path(str(job.paths.folder)).parent


def _wrote_results(job: submitit.Job[Any]) -> bool:
    """Whether every task of a SLURM job has written its result file."""
    return task_results(_jobs_root(job), str(job.job_id), job.num_tasks) is not None


class _Watch:
    """The jobs :func:`wait` watches: those that ended, by index, each announced by a line and a step of the
    bar as it ends, and when each job SLURM says has ended was first seen without its result files."""

    def __init__(self, runs: Sequence[Any], jobs: Sequence[submitit.Job[Any]], progress: bool,
                 report: Callable[[str], None], settle: float) -> None:
        self.runs, self.jobs, self.progress, self.report, self.settle = runs, jobs, progress, report, settle
        self.ended: dict[int, Finished] = {}
        self.missing: dict[int, float] = {}  # job -> when it was first seen ended without its result files
        self.bar = tqdm(total=len(jobs), desc="jobs", unit="run", disable=not progress, dynamic_ncols=True)

    def end(self, i: int, outcome: Finished) -> None:
        self.ended[i] = outcome
        run, job = self.runs[i], self.jobs[i]
        status = (f"{outcome.state or 'FAILED'}: {outcome.error}" if outcome.error else
                  ("finished" if outcome.trained else "finished earlier, skipped"))
        (tqdm.write if self.progress else self.report)(f"[{len(self.ended)}/{len(self.jobs)}] {run.run_name} "
                                                       f"seed{run.seed} (job {job.job_id}): {status}")
        self.bar.update(1)

    def check_results(self) -> list[int]:
        """End the jobs that have finished by their own account (a SLURM job's result files, a local or debug
        job's done()); the SLURM jobs still without their result files, for SLURM to be asked about."""
        waiting = []
        for i, (run, job) in enumerate(zip(self.runs, self.jobs)):
            if i in self.ended:
                continue
            if isinstance(job, submitit.SlurmJob):
                if _wrote_results(job):
                    self.end(i, _finished(run, job))
                else:
                    waiting.append(i)
            elif job.done():
                self.end(i, _finished(run, job))
        return waiting

    def check_slurm(self, waiting: list[int]) -> None:
        """End the ``waiting`` jobs that squeue and sacct say have ended (or no longer know), once confirmed."""
        records, problem = query([str(self.jobs[i].job_id) for i in waiting])
        for i in waiting:
            record = records.get(str(self.jobs[i].job_id))
            if record is not None and record.state not in FINAL_STATES:
                self.missing.pop(i, None)
                continue
            if not self.confirmed(i, record):
                continue
            if _wrote_results(self.jobs[i]):
                self.end(i, _finished(self.runs[i], self.jobs[i]))
                continue
            state, reason = describe(None, record, problem)
            self.end(i, Finished(self.runs[i], str(self.jobs[i].job_id), False, reason, state))

    def confirmed(self, i: int, record: Record | None) -> bool:
        """Whether job ``i``, ended by SLURM's account, has been seen so for long enough to be judged."""
        now = time.time()
        first = self.missing.setdefault(i, now)
        # ended without its result files (or gone from squeue and sacct): confirmed by a later poll,
        # which also gives a job's own last words (its result file) time to land; a COMPLETED job's
        # result files may be on their way through a shared file system: they get `settle` seconds
        return not (now == first or (record is not None and record.state == "COMPLETED" and now - first < self.settle))


def _finished(run: Any, job: submitit.Job[Any]) -> Finished:
    """How a job that wrote its result files (every task's, for a job of several processes) ended."""
    if isinstance(job, submitit.SlurmJob):
        outcomes = task_results(Path(str(job.paths.folder)).parent, str(job.job_id), job.num_tasks) or []
        state, reason = describe(outcomes, None, "")
        if reason:
            return Finished(run, str(job.job_id), False, reason, state)
        results = [value for _, value in outcomes]
    else:
        try:
            results = job.results()  # one per task; rank 0's reports the run
        except Exception as err:  # the job failed: submitit re-raises the job's error here
            return Finished(run, str(job.job_id), False, error_line(str(err)), "FAILED")
    outcome = results[0]
    error = "" if outcome["returncode"] == 0 else (outcome["error"] or f"exit {outcome['returncode']}")
    return Finished(run, str(job.job_id), bool(outcome["trained"]), error, "FAILED" if error else "COMPLETED")
