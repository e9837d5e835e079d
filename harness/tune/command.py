"""``harness tune``: every method of a comparison gets the same tuning budget on the validation split, then its best
settings train with the given seeds and are tested as ordinary result files (``<method>@tuned``) that record the
study. The studies run in this process (``--launcher sequential``), in worker processes of this machine
(``local``) or in SLURM jobs (``slurm``), all sharing the studies through their storage; the tuned runs always
run here, once every study has its budget.
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from harness.config import plan as plans
from harness.config import spec as specs
from harness.config.plan import Run
from harness.data.paired import PairedData
from harness.errors import ConfigError, RunError
from harness.run import grid, preflight, runner
from harness.tune import record as study_record
from harness.tune import space
from harness.tune import storage as stored
from harness.tune import study as studies
from harness.tune.space import tune_block

DEFAULT_TRIALS = 20


def setup(args: argparse.Namespace) -> list[studies.Study]:
    """The studies the command asks for, every search space checked (before any trial)."""
    overrides = list(args.overrides) + ([f"dataset.root={args.data_root}"] if args.data_root else [])
    names = [m for m in args.methods.split(",") if m]
    if not names:
        raise ConfigError("--methods: name the methods to compare, e.g. --methods contrastive,swamp (every method "
                          "gets the same budget)")
    base = specs.load_task(args.task, overrides)
    added = tuple(specs.undeclared(base, names))
    spec = specs.load_task(args.task, overrides, added)
    specs.select_methods(spec, names)
    block = tune_block(spec)
    trials = args.trials if args.trials is not None else int(block.get("trials") or DEFAULT_TRIALS)
    studies.check_budget(trials, args.seconds_per_method, args.prune, args.prune_warmup)
    seeds = plans.parse_seeds(args.seeds)
    seed = args.study_seed if args.study_seed is not None else seeds[0]
    folder = Path(args.out) / spec.name / "_tune"
    # chosen once, here, and given to every worker (worker_argv): SLURM's workers may run on several machines, whose
    # shared folder may be a network file system, where Optuna's journal file holds and SQLite's locks may not
    storage = args.storage or stored.default_storage(folder, journal=args.launcher == "slurm")
    stored.journal_path(storage)  # a journal URL names an absolute path
    found = [studies.Study(task=str(args.task), method=name, overrides=tuple(overrides), added=added,
                           epochs=args.epochs, seed=seed, trials=trials, seconds=args.seconds_per_method,
                           folder=folder, storage=storage, prune=args.prune, prune_warmup=args.prune_warmup)
             for name in names]
    warned: list[str] = []
    for s in found:  # refuses a search that cannot be valid, naming its key
        space.dimensions(s.spec(), s.method, warned)
    for line in dict.fromkeys(warned):
        print(f"warning: {line}", file=sys.stderr)
    return found


def cmd(args: argparse.Namespace) -> int:
    """Run the studies (with the launcher asked for), then the tuned runs; print the studies' table."""
    found = setup(args)
    setup_grid = grid.Grid(out=Path(args.out), device=args.device, threads=_threads(args),
                           progress=not args.no_progress, force=args.force)
    opts = grid.options(setup_grid)
    preflight.check_precision([Run(s.spec(), s.method, s.method, {}, 0) for s in found], opts.device)
    data = None
    if args.launcher == "sequential" or args.studies_only:
        data = runner.load_data(found[0].spec())
        trial_opts = runner.RunOptions(device=opts.device, out=found[0].folder / "trials", progress=False)
        for s in found:
            with tqdm(total=s.trials if s.dims() else 1, desc=f"tune {s.method}", unit="trial",
                      disable=args.no_progress, dynamic_ncols=True) as bar:
                studies.work(s, data, trial_opts, bar, worker=args.worker)
        if args.studies_only:
            return 0
    else:
        launch_workers(args, found)
    records = {s.method: summarize(s) for s in found}
    print(study_table(records, found))
    if args.no_final:
        return 0
    return final_runs(args, found, records, opts, data if data is not None else runner.load_data(found[0].spec()))


def summarize(s: studies.Study) -> dict[str, Any]:
    opened = studies.open_study(s)
    return study_record.record(s, opened, s.dims())


def study_table(records: dict[str, dict[str, Any]], found: list[studies.Study]) -> str:
    """One row per method: trials by state, the task's own settings' value, the best value and settings."""
    from tabulate import tabulate

    rows = []
    for s in found:
        r = records[s.method]
        t = r["trials"]
        best = ", ".join(f"{k}={_short(v)}" for k, v in r["best"].items()) or "(the task's own settings)"
        start = r["start_value"]
        rows.append([s.method, f"{t['counted']} ({t['complete']} complete, {t['pruned']} pruned, {t['failed']} failed)",
                     "-" if start is None else f"{start:.2f}", f"{r['best_value']:.2f}", best,
                     f"{r['trial_minutes']:.1f}"])
    metric = records[found[0].method]["metric"]
    head = ["method", "trials", f"val {metric}: task's settings", f"val {metric}: best", "best settings",
            "trial minutes"]
    table: str = tabulate(rows, head)
    return (f"studies: {found[0].trials} trials per method on the validation split (seed {found[0].seed}), "
            f"stored in {stored.shown_storage(found[0].storage)}\n" + table)


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value).replace(" ", "")


def final_runs(args: argparse.Namespace, found: list[studies.Study], records: dict[str, dict[str, Any]],
               opts: runner.RunOptions, data: PairedData) -> int:
    """Train and test each method's best settings with every seed (``<method>@tuned``) on ``data`` (the task's,
    loaded once for the command); show the tables."""
    from harness.report import folders

    seeds = plans.parse_seeds(args.seeds)
    results = []
    for s in found:
        r = records[s.method]
        extra = study_record.final_overrides(s, r["best"], s.dims())
        base, spec = s.spec(), s.spec(extra)
        present = plans.flatten(spec.resolved(s.method))
        # an encoder given another type drops the old type's keys: they are no settings of this run (as plan.plan)
        varied = plans.ordered({k: v for k, v in plans.diff(base.resolved(s.method), spec.resolved(s.method)).items()
                                if v is not None or k in present or f"method.{k}" in present})
        for seed in seeds:
            run = Run(spec, s.method, f"{s.method}@tuned", varied, seed)
            run_opts = runner.RunOptions(device=opts.device, out=Path(args.out), progress=not args.no_progress,
                                         force=args.force, tuning=r)
            done = runner.finished_result(run, run_opts)
            if done is not None and done.get("tuning", {}).get("study") == r["study"]:
                results.append(done)
                continue
            if done is not None:
                raise ConfigError(f"{done['_path']} was tuned by another study ({done.get('tuning', {}).get('study')});"
                                  " pass --force to replace it, or --out to write elsewhere")
            written = runner.run_one(run, data, run_opts)
            if written is not None:
                results.append(written)
    if results and not args.no_tables:
        folders.show(Path(args.out) / found[0].spec().name, results, None, None)
    return 0


def worker_argv(args: argparse.Namespace, threads: int | None, worker: int, storage: str) -> list[str]:
    """The words after ``python`` of worker number ``worker``: this command in one process with ``--studies-only``,
    on the ``storage`` the command chose (:func:`setup`), written by the ``tune`` parser itself (``args.subcommands``,
    the command line's parsers: :meth:`harness.cli.parser.Parser.argv_of`). What only the launching command does
    (workers, SLURM, the tuned runs and their tables) is left out."""
    words = args.subcommands["tune"].argv_of(
        args, launcher="sequential", studies_only=True, no_progress=True, worker=worker, storage=storage,
        threads=threads, jobs=None, slurm=None, force=False, reference=None, no_final=False, no_tables=False)
    return ["-m", "harness", "tune", *words]


def launch_workers(args: argparse.Namespace, found: list[studies.Study]) -> None:
    """``--jobs`` workers sharing the studies: processes of this machine, or one SLURM job array; wait for all,
    showing the trials counted so far."""
    jobs = args.jobs or 2
    if jobs < 1:
        raise ConfigError(f"--jobs must be >= 1, got {jobs}")
    opened = [studies.open_study(s) for s in found]  # created once, before the workers race to create them
    storage = found[0].storage
    logs = found[0].folder / "workers"
    logs.mkdir(parents=True, exist_ok=True)
    if args.launcher == "local":
        from harness.run.launcher import default_threads

        threads = _threads(args) or default_threads(jobs)
        print(f"tuning with {jobs} worker processes ({threads} threads each): "
              f"python {shlex.join(worker_argv(args, threads, 1, storage))} (and --worker 2 ...)")
        procs = []
        for i in range(jobs):
            with open(logs / f"worker{i}.log", "w") as log:
                procs.append(subprocess.Popen([sys.executable, *worker_argv(args, threads, i + 1, storage)],
                                              stdout=subprocess.DEVNULL, stderr=log))
        _follow(found, opened, lambda: all(p.poll() is not None for p in procs), args.no_progress)
        failed = [(i, p.returncode) for i, p in enumerate(procs) if p.returncode != 0]
        if failed:
            i, code = failed[0]
            raise RunError(f"tuning worker {i} exited with status {code}: {_last_line(logs / f'worker{i}.log')} "
                           f"(its log: {logs / f'worker{i}.log'})")
        return
    from harness.run import slurm

    options = grid.slurm_options([Run(found[0].spec(), found[0].method, found[0].method, {}, 0)], args.slurm)
    slurm.check_cluster(options)
    folder = slurm.jobs_folder(Path(args.out), found[0].spec().name) / "tune"
    executor = slurm.make_executor(folder, options, f"tune-{found[0].spec().name}")
    with executor.batch():  # one job array
        submitted = [executor.submit(slurm.RunJob(f"tune worker {i + 1}",
                                                  worker_argv(args, _threads(args), i + 1, storage)))
                     for i in range(jobs)]
    print(f"submitted {jobs} SLURM job(s) of tuning workers: {', '.join(j.job_id for j in submitted)}; waiting "
          f"(logs: {folder})")
    _follow(found, opened, lambda: all(j.done() for j in submitted), args.no_progress, step=5.0)
    problems = []
    for job in submitted:
        try:
            job.result()
        except Exception as err:  # noqa: BLE001 - submitit re-raises the job's failure as its own exception types
            problems.append(f"job {job.job_id}: {str(err).strip().splitlines()[-1] if str(err).strip() else err}")
    if problems:
        raise RunError(f"a SLURM tuning job failed: {problems[0]}")


def _follow(found: list[studies.Study], opened: list[Any], done: Any, quiet: bool, step: float = 1.0) -> None:
    """A progress bar of the trials counted in all studies until ``done()``."""
    def counted() -> int:
        return sum(min(stored.counts(o)["counted"], s.trials) for s, o in zip(found, opened))

    with tqdm(total=sum(s.trials for s in found), desc="tune", unit="trial", disable=quiet,
              dynamic_ncols=True) as bar:
        while not done():
            time.sleep(step)
            bar.n = counted()
            bar.refresh()
        bar.n = counted()
        bar.refresh()


def _threads(args: argparse.Namespace) -> int | None:
    """The torch threads of every trial and tuned run: --threads N, else torch's default (a study's trials train alike
    whatever the machine's load: --threads auto is refused)."""
    if args.threads == "auto":
        raise ConfigError("harness tune trains every trial with the same threads, so that the trials compare: give "
                          "--threads N, or leave it out for torch's default")
    return args.threads if isinstance(args.threads, int) else None


def _last_line(path: Path) -> str:
    lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    return next((ln for ln in reversed(lines) if ln.startswith("error:")), lines[-1] if lines else "")
