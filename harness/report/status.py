"""Where a grid stands: ``python -m harness status OUT [TASK]``.

Each run (task, run folder, seed) is in one of four states, read from the files beside its result:

- ``running``: a live process holds the run's lock (``harness.run.locks``);
- ``finished``: its result file exists;
- ``interrupted``: its resume checkpoint (``seed<k>.resume.pt``) exists without a result: the same command
  resumes it from its last complete epoch;
- ``not started``: nothing on disk (listed only when TASK gives the planned runs).

Without TASK every run found under OUT is listed. For a grid submitted with ``--launcher slurm`` the last
job recorded for each run (``<out>/<task>/_jobs/jobs.jsonl``) is shown with its state and, for a job that
did not complete, the reason: its result file once the job ended (FAILED with the run's error line,
CANCELLED, TIMEOUT, also when no requeue was left), otherwise SLURM's state through squeue and sacct
(PENDING, RUNNING, CANCELLED while pending, ...), or ``unknown (sacct not available)``.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from harness.config.launchers import JOBS_RECORD, jobs_folder
from harness.errors import ConfigError
from harness.report import formats
from harness.report import freshness as fr
from harness.run import checkpoint, locks

STATES = ("finished", "running", "interrupted", "not started")
_FILE = re.compile(r"\.?seed(\d+)(\.json|\.resume\.pt|\.lock)$")


def run_state(result: Path) -> str:
    """The state of the run whose result file is ``result``."""
    if locks.is_held(result):
        return "running"
    if result.exists():
        return "finished"
    if checkpoint.resume_path(result).exists():
        return "interrupted"
    return "not started"


def found_runs(out: Path) -> list[tuple[str, str, int]]:
    """(task, run folder, seed) of every run with a result, resume checkpoint or lock file under ``out``."""
    found = set()
    for task in sorted(p for p in out.iterdir() if p.is_dir() and not p.name.startswith("_")):
        for run in sorted(p for p in task.iterdir() if p.is_dir() and not p.name.startswith("_")):
            for f in run.iterdir():
                m = _FILE.fullmatch(f.name)
                if m:
                    found.add((task.name, run.name, int(m.group(1))))
    return sorted(found)


def recorded_jobs(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The last job recorded for each (run, seed) in a grid's ``_jobs/jobs.jsonl``."""
    latest: dict[tuple[str, int], dict[str, Any]] = {}
    path = folder / JOBS_RECORD
    if not path.exists():
        return latest
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
            latest[(entry["run"], int(entry["seed"]))] = entry
        except (ValueError, KeyError, TypeError):
            continue  # a line cut short by a launcher killed while writing it
    return latest


def job_states(out: Path, tasks: set[str]) -> dict[tuple[str, str, int], tuple[str, str, str]]:
    """(task, run, seed) -> (job id, job state, reason) for runs submitted with --launcher slurm."""
    from harness.run import slurm_accounting  # SLURM's records and the jobs' files, read without submitit

    states: dict[tuple[str, str, int], tuple[str, str, str]] = {}
    for task in sorted(tasks):
        folder = jobs_folder(out, task)
        latest = recorded_jobs(folder)
        known = slurm_accounting.job_states(folder, list(latest.values())) if latest else {}
        for (run, seed), entry in latest.items():
            state, reason = known[str(entry["job_id"])]
            states[(task, run, seed)] = (entry["job_id"], state, reason)
    return states


def table(out: Path, runs: list[tuple[str, str, int]],
          checkout: fr.Checkout | None = None) -> tuple[list[list[Any]], Counter[str]]:
    """The rows (task, run, seed, state, code, job, job state, reason) and the count of each state; ``code``
    is a finished run's freshness against ``checkout`` (:mod:`harness.report.freshness`), counted too."""
    from harness.store.schema import read_result, result_path

    jobs = job_states(out, {t for t, _, _ in runs})
    checkout = checkout or fr.Checkout()
    rows: list[list[Any]] = []
    counts: Counter[str] = Counter()
    for task, run, seed in runs:
        path = result_path(out, task, run, seed)
        state = run_state(path)
        counts[state] += 1
        code = ""
        if state == "finished":
            try:
                judged = fr.judge(read_result(path), checkout)
                code = judged.label()
                counts[judged.state] += 1
            except ConfigError:
                code = "unreadable"
        job, job_state, reason = jobs.get((task, run, seed), ("", "", ""))
        rows.append([task, run, seed, state, code, job, job_state, reason])
    return rows, counts


def show(out: Path, planned: list[tuple[str, str, int]] | None, fmt: str = "simple") -> Counter[str]:
    """Print the table of the ``planned`` runs (None: every run found under ``out``) and the counts."""
    if not out.is_dir():
        raise ConfigError(f"{out} is not a results folder; pass the --out folder of `python -m harness run` "
                          "(default: results)")
    runs = planned if planned is not None else found_runs(out)
    if not runs:
        inside = planned is None and any(t == out.name for t, _, _ in found_runs(out.parent))
        print(f"no runs under {out}" + (f"; it is a task's folder: pass the --out folder that holds it, "
                                         f"python -m harness status {out.parent}" if inside else ""))
        return Counter()
    rows, counts = table(out, runs)
    with_jobs = any(r[5] for r in rows)
    width = 5 + 2 * with_jobs + any(r[7] for r in rows)
    headers = ["task", "run", "seed", "state", "code", "job", "job state", "reason"][:width]
    print(formats.format_table(headers, [r[:width] for r in rows], [], fmt, numbers=True))
    shown = [s for s in STATES if counts[s] or s != "not started" or planned is not None]
    print("\n" + ", ".join(f"{counts[s]} {s}" for s in shown) + f" (of {len(rows)} runs)")
    if counts["finished"]:
        print("code of the finished runs against this checkout: " +
              ", ".join(f"{counts[s]} {s}" for s in fr.STATES if counts[s]) +
              " (fresh: the files they ran are unchanged; docs/claims.md, 'Evidence and code')")
    return counts


def status(out: Path | str, task: str | Path | None = None, *, methods: Sequence[str] = (), seeds: str | None = None,
           overrides: Sequence[str] = (), sweep: Sequence[str] = (), epochs: int | None = None,
           init: str | Path | None = None, fmt: str = "simple") -> Counter[str]:
    """``harness status OUT [TASK]``: print the runs under ``out`` or, with the run command's ``task`` and its
    run-selecting settings, exactly the runs that command plans, whether started or not; the count of each state."""
    from harness.config import plan

    if task is None:
        if methods or seeds or overrides or sweep or epochs is not None or init:
            raise ConfigError("--methods, --seeds, --set, --sweep, --epochs and --init describe the planned runs of "
                              "a task; add the task file, e.g. status results tasks/synthetic.yaml --seeds 0-4")
        planned = None
    else:
        runs = plan.plan(str(task), list(overrides), list(sweep), [m for m in methods if m],
                         plan.parse_seeds(seeds or "0"), epochs,
                         checkpoint.init_label(Path(init)) if init else None)
        planned = [(r.spec.name, r.run_name, r.seed) for r in runs]
    return show(Path(out), planned, fmt)
