"""Submitting a grid's pending runs as one SLURM job array through submitit: the options as sbatch parameters, the
sbatch script, the executor of the ``cluster`` option (``slurm``, ``local`` or ``debug``), and the record of which
job runs which (run, seed) in ``_jobs/jobs.jsonl``, for ``status``."""
from __future__ import annotations

import json
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import submitit

from harness.config.launchers import ARRAY_PARALLELISM, JOBS_RECORD, MAX_REQUEUE, TIMEOUT_MIN
from harness.config.launchers import jobs_folder as jobs_folder
from harness.errors import ConfigError
from harness.run.slurm_job import RunJob


def tasks_per_node(options: Mapping[str, Any]) -> int:
    """One process per GPU (one on CPU)."""
    gpus: int = options.get("gpus_per_node", 0)
    return max(1, gpus)


def is_distributed(options: Mapping[str, Any]) -> bool:
    nodes: int = options.get("nodes", 1)
    return nodes * tasks_per_node(options) > 1


def sbatch_parameters(options: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The options as submitit's SlurmExecutor parameters (the sbatch script's ``#SBATCH`` lines)."""
    native = {"job_name": name, "nodes": options.get("nodes", 1), "ntasks_per_node": tasks_per_node(options),
              "time": options.get("timeout_min", TIMEOUT_MIN),
              "array_parallelism": options.get("array_parallelism", ARRAY_PARALLELISM)}
    if options.get("gpus_per_node"):
        native["gpus_per_node"] = options["gpus_per_node"]
    if "mem_gb" in options:
        native["mem"] = f"{options['mem_gb']}GB"
    for key in ("partition", "account", "qos", "constraint", "cpus_per_task", "signal_delay_s"):
        if key in options:
            native[key] = options[key]
    return native


def sbatch_script(folder: Path, options: Mapping[str, Any], name: str, count: int) -> str:
    """The sbatch script submitit writes for an array of ``count`` jobs with these options (nothing is
    submitted): what :func:`make_executor` hands sbatch on a cluster."""
    from submitit.slurm.slurm import _make_sbatch_string

    return _make_sbatch_string(command=f"{shlex.quote(sys.executable)} -u -m submitit.core._submit "
                                       f"{shlex.quote(str(folder / '%j'))}", folder=folder / "%j",
                               map_count=count, **sbatch_parameters(options, name))


def check_cluster(options: Mapping[str, Any]) -> None:
    """On the slurm executor, sbatch and srun must be on PATH: refused before anything is submitted."""
    if options.get("cluster", "slurm") == "slurm":
        missing = [tool for tool in ("sbatch", "srun") if shutil.which(tool) is None]
        if missing:
            raise ConfigError(f"--launcher slurm: {' and '.join(missing)} not found on PATH; submit from a SLURM "
                              "login node, or use --launcher local on this machine")


def make_executor(folder: Path, options: Mapping[str, Any], name: str) -> submitit.Executor:
    """submitit's executor for ``options['cluster']`` with the options, logging under ``folder/%j``."""
    cluster = options.get("cluster", "slurm")
    if cluster == "slurm":
        slurm = submitit.SlurmExecutor(folder / "%j", max_num_timeout=options.get("max_requeue", MAX_REQUEUE))
        slurm.update_parameters(**sbatch_parameters(options, name))
        return slurm
    executor = submitit.AutoExecutor(folder / "%j", cluster=cluster)
    if cluster == "local":
        executor.update_parameters(timeout_min=options.get("timeout_min", TIMEOUT_MIN),
                                   tasks_per_node=tasks_per_node(options),
                                   gpus_per_node=options.get("gpus_per_node", 0))
    return executor


def drop_template(folder: Path) -> None:
    """Remove the empty folder named after the log-folder template (``%j``) that submitit's executors make."""
    try:
        (folder / "%j").rmdir()
    except OSError:
        pass


def worker_argv(description: Any) -> list[str]:
    """The worker command (after ``python``) that runs one :class:`harness.run.grid.Job` in a job."""
    return ["-m", "harness.worker", "--job", description.to_json()]


def submit(runs: Sequence[Any], descriptions: Sequence[Any], folder: Path, options: Mapping[str, Any],
           name: str) -> list[submitit.Job[Any]]:
    """Submit one job per run as one array; record (job id, run, seed) in ``folder/jobs.jsonl``."""
    cluster = options.get("cluster", "slurm")
    executor = make_executor(folder, options, name)
    calls = [RunJob(f"{run.run_name} seed{run.seed}", worker_argv(d), is_distributed(options), cluster != "debug")
             for run, d in zip(runs, descriptions, strict=True)]
    with executor.batch():
        pending = [executor.submit(call) for call in calls]
    jobs = list(pending)
    drop_template(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / JOBS_RECORD, "a", encoding="utf-8") as record:  # one short line per job: appends do not mix
        for run, job in zip(runs, jobs):
            record.write(json.dumps({"job_id": str(job.job_id), "cluster": cluster, "run": run.run_name,
                                     "seed": run.seed, "tasks": getattr(job, "num_tasks", 1),
                                     "max_requeue": options.get("max_requeue", MAX_REQUEUE),
                                     "submitted": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return jobs
