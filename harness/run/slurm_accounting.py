"""What SLURM and a job's own files say of the jobs of ``run --launcher slurm``, read without submitit (``status``
reads it on any machine): squeue's and sacct's records, the result file each task of a job writes, a job's state
and the reason, and the jobs recorded in ``_jobs/jobs.jsonl``."""
from __future__ import annotations

import pickle
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from harness.run.error_lines import error_line

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


FINAL_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "BOOT_FAIL", "DEADLINE",
                "OUT_OF_MEMORY")
REQUEUE_EXHAUSTED = "timed-out too many times"  # submitit's reason when no requeue is left
WHY = {"CANCELLED": "cancelled (scancel) before it wrote a result; the same command starts or resumes it",
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


def expand(job_id: str) -> list[str]:
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
        done = run_tool(["sacct", "-X", "-n", "-P", "-o", "JobID,State,ExitCode", "-j", ",".join(bases)])
        if done.returncode != 0:
            problem = (done.stderr.strip().splitlines() or [f"sacct exited with status {done.returncode}"])[-1]
            problem = problem.removeprefix("sacct: error: ").removeprefix("sacct: ")
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            fields = line.split("|")
            if len(fields) >= 3:
                state, _, by = fields[1].partition(" ")
                for job_id in expand(fields[0]):
                    by = by.replace("by ", "by uid ", 1)  # "CANCELLED by 0"
                    records[job_id] = Record(state, by or (f"exit code {fields[2]}" if fields[2] != "0:0" else ""),
                                             "sacct")
    if shutil.which("squeue") is not None:
        done = run_tool(["squeue", "-h", "--array", "-t", "all", "-o", "%i|%T|%r", "-j", ",".join(bases)])
        for line in done.stdout.splitlines() if done.returncode == 0 else []:
            fields = line.strip().split("|")
            if len(fields) == 3:
                records[fields[0]] = Record(fields[1], "" if fields[2] == "None" else fields[2], "squeue")
    return records, problem


def run_tool(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as err:
        return subprocess.CompletedProcess(argv, 1, "", str(err))


def result_pickle(folder: Path, job_id: str, task: int = 0) -> Path:
    """Where submitit writes the result file of task ``task`` of job ``job_id`` whose logs are under ``folder/%j``
    (submitit's ``JobPaths(folder / "%j", job_id, task).result_pickle``, without importing submitit)."""
    return Path(folder).expanduser().absolute() / str(job_id) / f"{job_id}_{task}_result.pkl"


def task_results(folder: Path, job_id: str, tasks: int = 1) -> list[tuple[str, Any]] | None:
    """(kind, value) of each task's result file (kind 'success' or 'error', value the outcome or the job's
    traceback), or None while a task has not written one."""
    outcomes = []
    for task in range(tasks):
        path = result_pickle(folder, job_id, task)
        try:
            with open(path, "rb") as f:
                outcomes.append(pickle.load(f))
        except FileNotFoundError:
            return None
        except Exception:  # a result file being written, or of another submitit version
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
            return slurm_state, f"{WHY[slurm_state]}: {reason}"
        return "FAILED", reason
    if record is None:
        if sacct_problem:
            return "unknown (sacct not available)", (f"no result file, not in squeue, and sacct fails "
                                                     f"({sacct_problem})")
        return "unknown (no record)", ("no result file and no record in squeue or sacct: the job ended without "
                                       "a result (e.g. cancelled while pending); the same command starts it")
    if slurm_state in FINAL_STATES:
        who = f" ({record.detail})" if record.detail.startswith(("by uid", "exit code")) else ""
        return slurm_state, WHY[slurm_state] + who
    return slurm_state, record.detail


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
