"""Running a grid of planned runs as a SLURM job array through submitit: ``run --launcher slurm``.

One job per planned run, submitted together as one array. Each job runs the same worker as
``--launcher local`` (``python -m harness run`` restricted to that run), so it takes the run's lock, skips
the run when it is finished and resumes it from its last complete epoch after an interruption. The job's
callable is a submitit ``Checkpointable``: when SLURM announces preemption or the time limit (submitit's
USR2 signal), :meth:`RunJob.checkpoint` stops the worker (the run's last complete epoch is already on disk)
and hands submitit the same job to requeue, which then resumes through the harness's own checkpoint.

Jobs log under ``<out>/<task>/_jobs/<job id>/`` (submitit's folder ``%j``), and ``_jobs/jobs.jsonl``
records which job runs which (run, seed), for ``python -m harness status``. The executor is chosen by the
``cluster`` option: ``slurm`` (sbatch), ``local`` (submitit's LocalExecutor: real subprocesses) or
``debug`` (its DebugExecutor: in this process) — the last two test this path without a cluster.

This module is the launcher's one name for its callers; the work lives in rooms of one job each:
:mod:`harness.run.slurm_job` (the compute-node job), :mod:`harness.run.slurm_submit` (submission),
:mod:`harness.run.slurm_accounting` (SLURM's records and the jobs' states, importable without submitit) and
:mod:`harness.run.slurm_watch` (waiting for an array).
"""
from __future__ import annotations

from harness.config.launchers import JOBS_RECORD as RECORD
from harness.run.error_lines import error_line
from harness.run.slurm_accounting import (
    CANCELLED_BY_SCANCEL,
    FINAL_STATES,
    REQUEUE_EXHAUSTED,
    Record,
    describe,
    expand,
    job_states,
    preempted,
    query,
    result_pickle,
    task_results,
)
from harness.run.slurm_job import RunJob
from harness.run.slurm_submit import (
    check_cluster,
    is_distributed,
    jobs_folder,
    make_executor,
    sbatch_parameters,
    sbatch_script,
    submit,
    tasks_per_node,
    worker_argv,
)
from harness.run.slurm_watch import Finished, wait

__all__ = ["CANCELLED_BY_SCANCEL", "FINAL_STATES", "RECORD", "REQUEUE_EXHAUSTED", "Finished", "Record", "RunJob",
           "check_cluster", "describe", "error_line", "expand", "is_distributed", "job_states", "jobs_folder",
           "make_executor", "preempted", "query", "result_pickle", "sbatch_parameters", "sbatch_script", "submit",
           "task_results", "tasks_per_node", "wait", "worker_argv"]
