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
"""
from __future__ import annotations

import json
import os
import pickle
import shlex
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import submitit
from submitit.core.utils import JobPaths
from submitit.helpers import Checkpointable, DelayedSubmission, TorchDistributedEnvironment
from tqdm.auto import tqdm

from harness.errors import ConfigError

SKIP_MARKS = ("finished earlier, skipped", "finished by the other process while this one waited, skipped",
              "finished by the other process since this command started, skipped")
RECORD = "jobs.jsonl"


def jobs_folder(out: Path, task: str) -> Path:
    """Where submitit writes the jobs of a task's grid: <out>/<task>/_jobs."""
    return Path(out) / task / "_jobs"


class RunJob(Checkpointable):
    """One planned run as a submitit job: runs its worker command and returns how it ended.

    ``argv`` is the worker's command after ``python``. With ``distributed``, every task of the job is one
    process of a torch.distributed run (submitit's TorchDistributedEnvironment gives the torchrun
    variables). ``raise_on_failure`` makes a failed run a failed job (False under the debug executor,
    which would otherwise open a debugger)."""

    def __init__(self, label: str, argv: Sequence[str], distributed: bool = False, raise_on_failure: bool = True):
        self.label, self.argv, self.distributed = label, list(argv), distributed
        self.raise_on_failure = raise_on_failure
        self._process: subprocess.Popen | None = None

    def __getstate__(self) -> dict[str, Any]:  # the running worker stays behind when the job is pickled
        return {**self.__dict__, "_process": None}

    def __call__(self) -> dict[str, Any]:
        env = dict(os.environ)
        if self.distributed:
            TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
            env = dict(os.environ)
        started = time.perf_counter()
        self._process = subprocess.Popen([sys.executable, *self.argv], env=env, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: list[str] = []
        try:
            for line in self._process.stdout:  # type: ignore[union-attr]
                print(line, end="", flush=True)  # into the job's log
                lines.append(line.rstrip("\n"))
            code = self._process.wait()
        finally:
            self._stop()
        error = next((ln for ln in reversed(lines) if ln.startswith("error:")), "")
        outcome = {"run": self.label, "returncode": code, "error": error, "seconds": time.perf_counter() - started,
                   "trained": code == 0 and not any(mark in ln for ln in lines for mark in SKIP_MARKS)}
        if code != 0 and self.raise_on_failure:
            raise RuntimeError(f"{self.label}: worker exited with status {code}: {error or (lines or [''])[-1]}")
        return outcome

    def checkpoint(self, *args: Any, **kwargs: Any) -> DelayedSubmission:
        """Preempted or timed out: stop the worker (its last complete epoch is saved) and requeue this job,
        which resumes the run from that epoch."""
        self._stop()
        return DelayedSubmission(self, *args, **kwargs)

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def tasks_per_node(options: Mapping[str, Any]) -> int:
    """One process per GPU (one on CPU)."""
    return max(1, options.get("gpus_per_node", 0))


def is_distributed(options: Mapping[str, Any]) -> bool:
    return options.get("nodes", 1) * tasks_per_node(options) > 1


def sbatch_parameters(options: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The options as submitit's SlurmExecutor parameters (the sbatch script's ``#SBATCH`` lines)."""
    native = {"job_name": name, "nodes": options.get("nodes", 1), "ntasks_per_node": tasks_per_node(options),
              "time": options.get("timeout_min", 240), "array_parallelism": options.get("array_parallelism", 256)}
    if options.get("gpus_per_node"):
        native["gpus_per_node"] = options["gpus_per_node"]
    if "mem_gb" in options:
        native["mem"] = f"{options['mem_gb']}GB"
    for key in ("partition", "account", "qos", "constraint", "cpus_per_task"):
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
        executor = submitit.SlurmExecutor(folder / "%j", max_num_timeout=options.get("max_requeue", 3))
        executor.update_parameters(**sbatch_parameters(options, name))
        return executor
    executor = submitit.AutoExecutor(folder / "%j", cluster=cluster)
    if cluster == "local":
        executor.update_parameters(timeout_min=options.get("timeout_min", 240), tasks_per_node=tasks_per_node(options),
                                   gpus_per_node=options.get("gpus_per_node", 0))
    return executor


def _drop_template(folder: Path) -> None:
    """Remove the empty folder named after the log-folder template (``%j``) that submitit's executors make."""
    try:
        (folder / "%j").rmdir()
    except OSError:
        pass


def worker_argv(description: Any) -> list[str]:
    """The worker command (after ``python``) that runs one :class:`harness.run.grid.Job` in a job."""
    return ["-m", "harness.worker", "--job", description.to_json()]


def submit(runs: Sequence[Any], descriptions: Sequence[Any], folder: Path, options: Mapping[str, Any],
           name: str) -> list[submitit.Job]:
    """Submit one job per run as one array; record (job id, run, seed) in ``folder/jobs.jsonl``."""
    cluster = options.get("cluster", "slurm")
    executor = make_executor(folder, options, name)
    calls = [RunJob(f"{run.run_name} seed{run.seed}", worker_argv(d), is_distributed(options), cluster != "debug")
             for run, d in zip(runs, descriptions, strict=True)]
    with executor.batch():
        pending = [executor.submit(call) for call in calls]
    jobs = list(pending)
    _drop_template(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / RECORD, "a", encoding="utf-8") as record:  # one short line per job: appends do not mix
        for run, job in zip(runs, jobs):
            record.write(json.dumps({"job_id": str(job.job_id), "cluster": cluster, "run": run.run_name,
                                     "seed": run.seed, "submitted": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return jobs


@dataclass(frozen=True)
class Finished:
    """How one job ended: the run it ran, whether it trained it (False: found it finished), and the error
    line of a failed one ('' when it succeeded)."""

    run: Any
    job_id: str
    trained: bool
    error: str


def wait(runs: Sequence[Any], jobs: Sequence[submitit.Job], progress: bool = True,
         report: Callable[[str], None] = print, poll: float = 5.0) -> list[Finished]:
    """Block until every job has ended, with a progress bar over the array; the outcomes, in the order given."""
    ended: dict[int, Finished] = {}
    bar = tqdm(total=len(jobs), desc="jobs", unit="run", disable=not progress, dynamic_ncols=True)
    try:
        while len(ended) < len(jobs):
            for i, (run, job) in enumerate(zip(runs, jobs)):
                if i in ended or not job.done():
                    continue
                ended[i] = _finished(run, job)
                status = "FAILED: " + ended[i].error if ended[i].error else \
                    ("finished" if ended[i].trained else "finished earlier, skipped")
                (tqdm.write if progress else report)(f"[{len(ended)}/{len(jobs)}] {run.run_name} seed{run.seed} "
                                                     f"(job {job.job_id}): {status}")
                bar.update(1)
            if len(ended) < len(jobs):
                time.sleep(poll)
    finally:
        bar.close()
    if jobs:
        _drop_template(Path(str(jobs[0].paths.folder)).parent)
    return [ended[i] for i in range(len(jobs))]


def _finished(run: Any, job: submitit.Job) -> Finished:
    try:
        outcome = job.result()
    except Exception as err:  # the job failed: submitit re-raises the job's error here
        lines = [ln for ln in str(err).splitlines() if ln.strip()]
        message = next((ln for ln in reversed(lines) if "error:" in ln), lines[-1] if lines else repr(err))
        return Finished(run, str(job.job_id), False, message.strip())
    error = "" if outcome["returncode"] == 0 else (outcome["error"] or f"exit {outcome['returncode']}")
    return Finished(run, str(job.job_id), bool(outcome["trained"]), error)


def job_state(folder: Path, entry: Mapping[str, Any]) -> str:
    """What is known about a recorded job: COMPLETED / FAILED once submitit wrote its result file, else
    SLURM's state through sacct when it is available, else 'unknown (...)' saying why."""
    paths = JobPaths(folder / "%j", entry["job_id"], 0)
    if paths.result_pickle.exists():
        try:
            with open(paths.result_pickle, "rb") as f:
                kind, _ = pickle.load(f)
        except Exception:  # noqa: BLE001 (a result file being written, or of another submitit version)
            return "unknown (result file unreadable)"
        return "COMPLETED" if kind == "success" else "FAILED"
    if entry.get("cluster") != "slurm":
        return ("unknown (debug job: ran inside the launcher)" if entry.get("cluster") == "debug"
                else f"unknown ({entry.get('cluster')} job, no result yet)")
    if shutil.which("sacct") is None:
        return "unknown (sacct not available)"
    return submitit.SlurmJob(folder / "%j", entry["job_id"]).state
