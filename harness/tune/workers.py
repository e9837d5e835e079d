"""The workers of ``harness tune --launcher local|slurm``: ``--jobs`` processes of this machine or SLURM jobs, each the
same command with ``--studies-only`` on the storage the command chose. A worker claims whole rows
(:func:`harness.tune.storage.claim`) and runs each claimed row's trials in order, so that the workers parallelise
across rows, never inside one row's sequence; every worker trains with the torch threads the command fixes. The tuned
runs of ``--launcher local`` go the same way (:func:`launch_finals`: ``--finals-only`` workers, each training the
seeds of the rows it claims).

    launch(TuneOptions(task="tasks/synthetic.yaml", methods=("contrastive", "swamp"), launcher="local", jobs=2),
           setup(...))
"""
from __future__ import annotations

import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from harness.config.plan import Run
from harness.errors import ConfigError, RunError
from harness.run import grid
from harness.run.error_lines import error_line
from harness.store.schema import result_path
from harness.tune import storage as stored
from harness.tune import study as studies
from harness.tune.options import TuneOptions

# (option, attribute, kind) of the words a worker's command line repeats from the command's own options
_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--methods", "methods", "list"), ("--out", "out", "value"), ("--device", "device", "value"),
    ("--data-root", "data_root", "value"), ("--reference", "reference", "value"), ("--force", "force", "flag"),
    ("--jobs", "jobs", "value"), ("--threads", "threads", "value"), ("--no-progress", "no_progress", "flag"),
    ("--no-tables", "no_tables", "flag"), ("--trials", "trials", "value"),
    ("--seconds-per-method", "seconds_per_method", "value"), ("--seeds", "seeds", "value"),
    ("--study-seed", "study_seed", "value"), ("--set", "overrides", "each"), ("--epochs", "epochs", "value"),
    ("--storage", "storage", "value"), ("--launcher", "launcher", "value"), ("--slurm", "slurm", "value"),
    ("--prune", "prune", "value"), ("--prune-warmup", "prune_warmup", "value"), ("--no-final", "no_final", "flag"),
    ("--studies-only", "studies_only", "flag"), ("--finals-only", "finals_only", "flag"),
    ("--worker", "worker", "value"), ("--include", "include", "each"),
    ("--folds", "folds", "value"), ("--row", "rows", "each"),
)


def _words(flag: str, value: Any, kind: str) -> list[str]:
    if kind == "flag":
        return [flag] if value else []
    if kind == "each":
        return [w for item in value or () for w in
                (flag, item if isinstance(item, str) else "=".join(str(v) for v in item))]
    if value is None or (flag == "--folds" and not value):
        return []
    if kind == "list":
        return [flag, value if isinstance(value, str) else ",".join(value)]
    return [flag, str(value)]


def worker_argv(opts: TuneOptions, threads: int | None, worker: int, storage: str, finals: bool = False) -> list[str]:
    """The words after ``python`` of worker number ``worker``: this command in one process with ``--studies-only``
    (``--finals-only`` with ``finals``: the tuned runs of the rows it claims) on the ``storage`` the command chose,
    with ``threads`` torch threads. What only the launching command does (workers, SLURM, the tables) is left out.

        worker_argv(opts, 1, 2, "sqlite:////runs/tiny/_tune/studies.db")  # ['-m', 'harness', 'tune', TASK, ...]
    """
    changes = {"launcher": "sequential", "studies_only": not finals, "finals_only": finals, "no_progress": True,
               "worker": worker, "storage": storage, "threads": threads, "jobs": None, "slurm": None, "force": False,
               "reference": None, "no_final": False, "no_tables": False}
    words = [str(opts.task)]
    for flag, attr, kind in _FLAGS:
        words += _words(flag, changes[attr] if attr in changes else getattr(opts, attr, None), kind)
    return ["-m", "harness", "tune", *words]


def launch(opts: TuneOptions, found: list[studies.Study]) -> None:
    """``--jobs`` workers sharing the studies, each claiming whole rows: processes of this machine, or one SLURM job
    array; wait for all, showing the trials counted so far; RunError when a worker failed or a row fell short."""
    jobs = opts.jobs or 2
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    opened = [studies.open_study(s) for s in found]  # created once, before the workers race to create them
    if opts.launcher == "local":
        _local(opts, found, opened, jobs)
    else:
        _slurm(opts, found, opened, jobs)
    short = [f"{s.row_name} {stored.counts(o)['counted']}/{s.trials}" for s, o in zip(found, opened)
             if stored.counts(o)["counted"] < (s.trials if s.dims() else 1)]
    if short:
        raise RunError(f"the workers ended with rows short of their budget ({', '.join(short)}); run the same command "
                       "again: it resumes them")


def _local(opts: TuneOptions, found: list[studies.Study], opened: list[Any], jobs: int) -> None:
    print(f"tuning with {jobs} worker processes ({opts.threads} threads each): "
          f"python {shlex.join(worker_argv(opts, opts.threads, 1, found[0].storage))} (and --worker 2 ...)")
    _processes(opts, found, jobs, False, lambda done: _follow(found, opened, done, opts.no_progress))


def launch_finals(opts: TuneOptions, found: list[studies.Study], runs: list[Run]) -> None:
    """The tuned runs ``runs`` of the finished studies ``found`` in ``--jobs`` worker processes of this machine, each
    claiming whole rows (all of a row's seeds, in order) and training with the threads the command fixes; wait for
    all, showing the result files written so far; RunError when a worker failed. The caller reads the results."""
    jobs = opts.jobs or 2
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    out = Path(opts.out)

    def written() -> int:
        return sum(result_path(out, r.spec.name, r.run_name, r.seed).exists() for r in runs)

    print(f"tuned runs with {jobs} worker processes ({opts.threads} threads each), each claiming whole rows: "
          f"python {shlex.join(worker_argv(opts, opts.threads, 1, found[0].storage, finals=True))} "
          "(and --worker 2 ...)")
    _processes(opts, found, jobs, True,
               lambda done: _bar(len(runs), written, done, opts.no_progress, "tuned runs", "run"))


def _processes(opts: TuneOptions, found: list[studies.Study], jobs: int, finals: bool, follow: Any) -> None:
    """``jobs`` worker processes (of the studies, or of the tuned runs with ``finals``), their logs in the studies'
    folder; ``follow(done)`` shows their progress until all ended; RunError naming the first that failed."""
    storage = found[0].storage
    logs = found[0].folder / "workers"
    logs.mkdir(parents=True, exist_ok=True)
    stem = "tuned-worker" if finals else "worker"
    procs = []
    for i in range(jobs):
        with open(logs / f"{stem}{i}.log", "w") as log:
            procs.append(subprocess.Popen([sys.executable, *worker_argv(opts, opts.threads, i + 1, storage, finals)],
                                          stdout=subprocess.DEVNULL, stderr=log))
    try:
        follow(lambda: all(p.poll() is not None for p in procs))
    finally:  # interrupted: the workers end with this command (a re-run resumes them)
        for p in procs:
            if p.poll() is None:
                p.terminate()
    failed = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode != 0]
    if failed:
        i, code = failed[0]
        said = error_line((logs / f"{stem}{i}.log").read_text(errors="replace"))
        raise RunError(f"{'the tuned runs' if finals else 'tuning'} worker {i} exited with status {code}: {said} "
                       f"(its log: {logs / f'{stem}{i}.log'})")


def _slurm(opts: TuneOptions, found: list[studies.Study], opened: list[Any], jobs: int) -> None:
    from harness.run import slurm

    name = found[0].spec().name
    options = grid.slurm_options([Run(found[0].spec(), found[0].method, found[0].method, {}, 0)], opts.slurm)
    slurm.check_cluster(options)
    folder = slurm.jobs_folder(Path(opts.out), name) / "tune"
    executor = slurm.make_executor(folder, options, f"tune-{name}")
    with executor.batch():  # one job array
        submitted = [executor.submit(slurm.RunJob(f"tune worker {i + 1}",
                                                  worker_argv(opts, opts.threads, i + 1, found[0].storage)))
                     for i in range(jobs)]
    print(f"submitted {jobs} SLURM job(s) of tuning workers: {', '.join(j.job_id for j in submitted)}; waiting "
          f"(logs: {folder})")
    _follow(found, opened, lambda: all(j.done() for j in submitted), opts.no_progress, step=5.0)
    problems = []
    for job in submitted:
        try:
            job.result()
        except Exception as err:  # submitit re-raises the job's failure as its own exception types
            problems.append(f"job {job.job_id}: {error_line(str(err), default=type(err).__name__)}")
    if problems:
        raise RunError(f"a SLURM tuning job failed: {problems[0]}")


def _follow(found: list[studies.Study], opened: list[Any], done: Any, quiet: bool, step: float = 1.0) -> None:
    """A progress bar of the trials counted in all studies until ``done()``."""
    def counted() -> int:
        return sum(min(stored.counts(o)["counted"], s.trials) for s, o in zip(found, opened))

    _bar(sum(s.trials for s in found), counted, done, quiet, "tune", "trial", step)


def _bar(total: int, count: Callable[[], int], done: Callable[[], bool], quiet: bool, desc: str, unit: str,
         step: float = 1.0) -> None:
    """A progress bar of ``count()`` out of ``total``, read every ``step`` seconds until ``done()``."""
    with tqdm(total=total, desc=desc, unit=unit, disable=quiet, dynamic_ncols=True) as bar:
        while not done():
            time.sleep(step)
            bar.n = count()
            bar.refresh()
        bar.n = count()
        bar.refresh()
