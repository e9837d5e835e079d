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
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import submitit
from submitit.core.utils import JobPaths
from submitit.helpers import Checkpointable, DelayedSubmission, TorchDistributedEnvironment
from tqdm.auto import tqdm

from harness.errors import ConfigError

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
        self._process: subprocess.Popen[str] | None = None

    def __getstate__(self) -> dict[str, Any]:  # the running worker stays behind when the job is pickled
        return {**self.__dict__, "_process": None}

    def __call__(self) -> dict[str, Any]:
        self._cancelled = False
        if os.environ.get("SLURM_JOB_ID") and submitit.JobEnvironment().cluster == "slurm":
            self._handle_sigterm()
        env = dict(os.environ)
        if self.distributed:
            TorchDistributedEnvironment().export(set_cuda_visible_devices=False)
            env = dict(os.environ)
        started = time.perf_counter()
        handle, name = tempfile.mkstemp(prefix="swamp-bench-reply-", suffix=".json")  # the worker's answer
        os.close(handle)
        reply = Path(name)
        argv = [*self.argv, "--reply", str(reply)] if self.argv[:2] == ["-m", "harness.worker"] else self.argv
        process = self._process = subprocess.Popen([sys.executable, *argv], env=env, stdout=subprocess.PIPE,
                                                   stderr=subprocess.STDOUT, text=True, bufsize=1)
        lines: list[str] = []
        try:
            if process.stdout is None:  # Popen above pipes it
                raise RuntimeError(f"{self.label}: the worker process has no stdout pipe")
            for line in process.stdout:
                print(line, end="", flush=True)  # into the job's log
                lines.append(line.rstrip("\n"))
            code = process.wait()
        finally:
            self._stop()
            answer = _reply(reply)
        if self._cancelled:
            raise RuntimeError(f"{self.label}: {CANCELLED_BY_SCANCEL}")
        error = answer.get("last_line") or next((ln for ln in reversed(lines) if ln.startswith("error:")), "")
        outcome = {"run": self.label, "returncode": code, "error": error if code else "",
                   "seconds": time.perf_counter() - started,
                   "trained": code == 0 and bool(answer.get("trained", "--reply" not in argv)),
                   "results": answer.get("results", [])}
        if code != 0 and self.raise_on_failure:
            raise RuntimeError(f"{self.label}: worker exited with status {code}: {error or (lines or [''])[-1]}")
        return outcome

    def _handle_sigterm(self) -> None:
        """SIGTERM as SLURM sends it: on a cluster without ``SlurmctldParameters=preempt_send_user_signal``, to
        a job preempted with a grace time instead of the job's ``--signal``: then it is handled as that signal
        is (checkpoint and requeue); on ``scancel`` (or at the time limit) the job ends: the worker is
        stopped, nothing is requeued."""
        on_user_signal = signal.getsignal(submitit.JobEnvironment._usr_sig())  # submitit's checkpoint and requeue
        if not callable(on_user_signal):
            return

        def on_sigterm(signum: int, frame: Any) -> None:
            if preempted(os.environ["SLURM_JOB_ID"]):
                on_user_signal(signum, frame)
                return
            self._cancelled = True
            self._stop()

        signal.signal(signal.SIGTERM, on_sigterm)

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


def _reply(path: Path) -> dict[str, Any]:
    """The worker's answer (``python -m harness.worker --job JSON --reply PATH``), the file removed; {} when the worker
    wrote none (it was stopped, or ran another command)."""
    try:
        found: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.stat().st_size else {}
    except (OSError, ValueError):
        found = {}
    path.unlink(missing_ok=True)
    return found


CANCELLED_BY_SCANCEL = ("stopped by SLURM's SIGTERM while it ran (scancel, or its time limit); its last complete "
                        "epoch is saved: the same command resumes it")


def preempted(job_id: str) -> bool:
    """Whether SLURM has chosen this job for preemption (``scontrol show job``'s PreemptTime is set): a SIGTERM
    then announces the end of its grace time; on ``scancel`` or at the time limit it is not set."""
    try:
        text = subprocess.run(["scontrol", "show", "job", job_id], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    when = next((word.split("=", 1)[1] for word in text.split() if word.startswith("PreemptTime=")), "None")
    return when not in ("None", "Unknown", "")


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
              "time": options.get("timeout_min", 240), "array_parallelism": options.get("array_parallelism", 256)}
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
        slurm = submitit.SlurmExecutor(folder / "%j", max_num_timeout=options.get("max_requeue", 3))
        slurm.update_parameters(**sbatch_parameters(options, name))
        return slurm
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
           name: str) -> list[submitit.Job[Any]]:
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
                                     "seed": run.seed, "tasks": getattr(job, "num_tasks", 1),
                                     "max_requeue": options.get("max_requeue", 3),
                                     "submitted": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")
    return jobs


FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                "OUT_OF_MEMORY")
REQUEUE_EXHAUSTED = "timed-out too many times"  # submitit's reason when no requeue is left
_WHY = {"CANCELLED": "cancelled (scancel) before it wrote a result; the same command starts or resumes it",
        "TIMEOUT": "reached its time limit and was not requeued; the same command resumes it",
        "PREEMPTED": "preempted and not requeued (its partition's PreemptMode); the same command resumes it",
        "NODE_FAIL": "its node failed; the same command resumes it",
        "BOOT_FAIL": "its node failed to boot; the same command starts it",
        "DEADLINE": "reached its deadline before it could run",
        "OUT_OF_MEMORY": "ran out of memory; raise mem_gb",
        "FAILED": "the job's script failed before the run could report (see its log)",
        "COMPLETED": "SLURM says COMPLETED but no result file appeared (is the results folder shared with the "
                     "compute nodes?)"}


@dataclass(frozen=True)
class Record:
    """What SLURM knows of one job: its state (RUNNING, CANCELLED, ...) and a detail (squeue's reason of a
    pending job, sacct's "by <uid>" of a cancelled one, an exit code), from squeue or sacct."""

    state: str
    detail: str
    source: str


def _expand(job_id: str) -> list[str]:
    """sacct's compressed ids of array tasks, ``12_[0-2,5%4]``, one per task: 12_0, 12_1, 12_2, 12_5."""
    if "_[" not in job_id:
        return [job_id]
    base, ranges = job_id.split("_[", 1)
    ids = []
    for part in ranges.rstrip("]").split("%")[0].split(","):
        low, _, high = part.partition("-")
        ids += [f"{base}_{i}" for i in range(int(low), int(high or low) + 1)]
    return ids


def query(job_ids: Sequence[str]) -> tuple[dict[str, Record], str]:
    """SLURM's records of these jobs (array tasks as ``<array>_<index>``): squeue's for jobs the controller
    still holds (pending, running, and for MinJobAge after they end), sacct's for the others; and why sacct
    gave nothing ('' when it answered: a cluster without accounting, or no sacct on PATH)."""
    bases = sorted({str(j).split("_")[0] for j in job_ids})
    records: dict[str, Record] = {}
    if not bases:
        return records, ""
    problem = ""
    if shutil.which("sacct") is None:
        problem = "sacct not on PATH"
    else:
        done = _run(["sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", ",".join(bases)])
        if done.returncode != 0:
            problem = (done.stderr.strip().splitlines() or [f"sacct exited with status {done.returncode}"])[-1]
            problem = problem.removeprefix("sacct: error: ").removeprefix("sacct: ")
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            fields = line.split("|")
            if len(fields) >= 3:
                state, _, by = fields[1].partition(" ")
                for job_id in _expand(fields[0]):
                    by = by.replace("by ", "by uid ", 1)  # "CANCELLED by 0"
                    records[job_id] = Record(state, by or (f"exit code {fields[2]}" if fields[2] != "0:0" else ""),
                                             "sacct")
    if shutil.which("squeue") is not None:
        done = _run(["squeue", "-h", "--array", "-t", "all", "-o", "%i|%T|%r", "-j", ",".join(bases)])
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            fields = line.strip().split("|")
            if len(fields) == 3:
                records[fields[0]] = Record(fields[1], "" if fields[2] == "None" else fields[2], "squeue")
    return records, problem


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return subprocess.CompletedProcess(argv, 1, "", str(err))


def error_line(text: str) -> str:
    """The line that says why a job failed, out of submitit's report of it: the worker's ``error:`` line, else
    the exception's line (``UncompletedJobError: Job not requeued because: timed-out too many times.``)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    worker = next((ln for ln in reversed(lines) if "error:" in ln), None)
    if worker is not None:
        return worker
    for line in reversed(lines):
        name, sep, message = line.partition(": ")
        if sep and name.replace(".", "").replace("_", "").isalnum() and name.split(".")[-1][:1].isupper():
            return f"{name.split('.')[-1]}: {message}"
    return lines[-1] if lines else "the job failed without a message"


def task_results(folder: Path, job_id: str, tasks: int = 1) -> list[tuple[str, Any]] | None:
    """(kind, value) of each task's result file (kind 'success' or 'error', value the outcome or the job's
    traceback), or None while a task has not written one."""
    outcomes = []
    for task in range(tasks):
        path = JobPaths(folder / "%j", job_id, task).result_pickle
        try:
            with open(path, "rb") as f:
                outcomes.append(pickle.load(f))
        except FileNotFoundError:
            return None
        except Exception:  # noqa: BLE001 (a result file being written, or of another submitit version)
            outcomes.append(("error", "the job's result file is unreadable"))
    return outcomes


def describe(outcomes: list[tuple[str, Any]] | None, record: Record | None, sacct_problem: str,
             max_requeue: int | None = None) -> tuple[str, str]:
    """(state, reason) of one job from its tasks' result files and SLURM's record of it: COMPLETED once every
    task succeeded; CANCELLED, TIMEOUT (also when no requeue was left), PREEMPTED, FAILED ... with why;
    SLURM's state while it runs; ``unknown (...)`` when nothing says."""
    slurm_state = record.state if record is not None else ""
    if outcomes is not None:
        errors = [value for kind, value in outcomes if kind != "success"]
        if not errors:
            return "COMPLETED", ""
        reason = error_line(str(errors[0]))
        if REQUEUE_EXHAUSTED in reason:
            limit = f" (max_requeue {max_requeue})" if max_requeue is not None else ""
            return "TIMEOUT", (f"no requeue left: requeued as often as allowed{limit}, then timed out or was preempted "
                               "again; the same command resumes it from its last complete epoch")
        if CANCELLED_BY_SCANCEL in reason:
            state = slurm_state if slurm_state in FINAL_STATES and slurm_state != "COMPLETED" else "CANCELLED"
            who = (f" ({record.detail})" if state == "CANCELLED" and record and record.detail.startswith("by uid")
                   else "")
            return state, CANCELLED_BY_SCANCEL + who
        if slurm_state in FINAL_STATES and slurm_state not in ("COMPLETED", "FAILED"):
            return slurm_state, f"{_WHY[slurm_state]}: {reason}"
        return "FAILED", reason
    if record is None:
        if sacct_problem:
            return "unknown (sacct not available)", (f"no result file, not in squeue, and sacct fails "
                                                     f"({sacct_problem})")
        return "unknown (no record)", ("no result file and no record in squeue or sacct: the job ended without "
                                       "a result (e.g. cancelled while pending); the same command starts it")
    if slurm_state in FINAL_STATES:
        who = f" ({record.detail})" if record.detail.startswith(("by uid", "exit code")) else ""
        return slurm_state, _WHY[slurm_state] + who
    return slurm_state, record.detail


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
        _drop_template(_jobs_root(jobs[0]))
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


def job_states(folder: Path, entries: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """job id -> (state, reason) of recorded jobs (lines of ``jobs.jsonl``): COMPLETED / FAILED / CANCELLED /
    TIMEOUT ... from the job's result files and SLURM's record, SLURM's state (PENDING, RUNNING, ...) while it
    has none, 'unknown (...)' saying why when nothing is known. One squeue and one sacct call for all."""
    slurm_ids = [str(e["job_id"]) for e in entries if e.get("cluster") == "slurm"]
    records, problem = query(slurm_ids) if slurm_ids and shutil.which("squeue") else ({}, "")
    if slurm_ids and not shutil.which("squeue"):
        problem = "squeue and sacct not on PATH"
    states = {}
    for entry in entries:
        job_id = str(entry["job_id"])
        outcomes = task_results(folder, job_id, int(entry.get("tasks", 1)))
        if entry.get("cluster") != "slurm" and outcomes is None:
            states[job_id] = ("unknown (debug job: ran inside the launcher)" if entry.get("cluster") == "debug"
                              else f"unknown ({entry.get('cluster')} job, no result yet)", "")
            continue
        states[job_id] = describe(outcomes, records.get(job_id), problem, entry.get("max_requeue"))
    return states
