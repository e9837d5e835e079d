"""The launchers' names and the small facts of their SLURM jobs, defined once: the ``--launcher`` choices, SLURM's
defaults that a task file's ``launcher.slurm`` section and ``--slurm`` leave unset, and where a grid's jobs log
and are recorded (which ``run --launcher slurm`` writes and ``status`` reads).

Plain constants: the command line reads them to build its parser without importing the run layer (torch), and
:mod:`harness.run.slurm` and :mod:`harness.report.status` read the same names."""
from __future__ import annotations

from pathlib import Path

LAUNCHERS: tuple[str, ...] = ("sequential", "local", "slurm")
"""``sequential``: this process, one run after another; ``local``: worker processes of this machine; ``slurm``: one
SLURM job per run, submitted as a job array through submitit."""

DEFAULT_LAUNCHER = "sequential"
LOCAL_JOBS = 2
"""Worker processes of ``--launcher local`` when ``--jobs`` is not given."""

TIMEOUT_MIN = 240
"""A SLURM job's time limit in minutes when ``timeout_min`` is not set; a job that reaches it is requeued."""
MAX_REQUEUE = 3
"""Times a timed-out or preempted SLURM job is requeued when ``max_requeue`` is not set."""
ARRAY_PARALLELISM = 256
"""Jobs of one array running at once when ``array_parallelism`` is not set."""

JOBS_FOLDER = "_jobs"
"""A task's jobs log under ``<out>/<task>/_jobs/<job id>/``."""
JOBS_RECORD = "jobs.jsonl"
"""One line per submitted job in the jobs folder: job id, run, seed, tasks, requeue count."""


def jobs_folder(out: Path | str, task: str) -> Path:
    """Where the SLURM jobs of a task's grid log and are recorded: ``<out>/<task>/_jobs``."""
    return Path(out) / task / JOBS_FOLDER


def jobs_record(out: Path | str, task: str) -> Path:
    """The record of which job runs which (run, seed): ``<out>/<task>/_jobs/jobs.jsonl``."""
    return jobs_folder(out, task) / JOBS_RECORD
