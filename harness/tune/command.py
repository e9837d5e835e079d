"""``harness tune``: every method of a comparison gets the same tuning budget, then its best settings train with the
given seeds and are tested as ordinary result files (``<method>@tuned``) that record the study. The studies run in
this process (``--launcher sequential``), in worker processes of this machine (``local``) or in SLURM jobs
(``slurm``), all sharing the studies through their storage (:mod:`harness.tune.workers`); each study is one row's
trials in order, claimed whole by one worker. Once every study has its budget, the tuned runs run in the same way:
with ``--launcher local`` and ``--jobs`` N > 1 in N worker processes that each claim whole rows (a row's seeds), else
here; either way each tuned run is the same result file.
Every trial and tuned run trains with the torch threads the options fix (default 1), whatever ``--jobs`` or the
machine's load, so that ``--jobs`` changes only the wall time.

    tune(TuneOptions(task="tasks/synthetic.yaml", methods=("contrastive", "swamp"), trials=4, epochs=2))
"""
from __future__ import annotations

import contextlib
import dataclasses
import sys
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from harness.config import plan as plans
from harness.config import spec as specs
from harness.config.plan import Run
from harness.data.paired import PairedData
from harness.errors import ConfigError, RunError
from harness.report.formats import format_table
from harness.run import grid, preflight, runner
from harness.tune import record as study_record
from harness.tune import space, workers
from harness.tune import storage as stored
from harness.tune import study as studies
from harness.tune.options import DEFAULT_TRIALS, TuneOptions
from harness.tune.space import tune_block
from harness.tune.workers import worker_argv

__all__ = ["final_runs", "replace_trials", "run_options", "run_studies", "setup", "study_table", "summarize", "tune",
           "tuned_run", "worker_argv"]


def setup(opts: TuneOptions) -> list[studies.Study]:
    """The studies the options ask for, every search space checked (before any trial).

        setup(TuneOptions(task="tasks/synthetic.yaml", methods=("contrastive",), trials=3))  # [Study(...)]
    """
    overrides = list(opts.overrides) + ([f"dataset.root={opts.data_root}"] if opts.data_root else [])
    names = [m for m in opts.methods if m]
    if not names:
        raise ConfigError("--methods: name the methods to compare, e.g. --methods contrastive,swamp (every method "
                          "gets the same budget)")
    base = specs.load_task(opts.task, overrides)
    added = tuple(specs.undeclared(base, names))
    spec = specs.load_task(opts.task, overrides, added)
    specs.select_methods(spec, names)
    block = tune_block(spec)
    trials = opts.trials if opts.trials is not None else int(block.get("trials") or DEFAULT_TRIALS)
    studies.check_budget(trials, opts.seconds_per_method, opts.prune, opts.prune_warmup, opts.folds)
    seeds = plans.parse_seeds(opts.seeds)
    seed = opts.study_seed if opts.study_seed is not None else seeds[0]
    folder = Path(opts.out) / spec.name / "_tune"
    # chosen once, here, and given to every worker (worker_argv): SLURM's workers may run on several machines, whose
    # shared folder may be a network file system, where Optuna's journal file holds and SQLite's locks may not
    storage = opts.storage or stored.default_storage(folder, journal=opts.launcher == "slurm")
    stored.journal_path(storage)  # a journal URL names an absolute path
    found = [studies.Study(task=str(opts.task), method=name, overrides=tuple(overrides), added=added,
                           epochs=opts.epochs, seed=seed, trials=trials, seconds=opts.seconds_per_method,
                           folder=folder, storage=storage, prune=opts.prune, prune_warmup=opts.prune_warmup,
                           row=opts.row_of(name), folds=opts.folds)
             for name in names]
    warned: list[str] = []
    for s in found:  # refuses a search that cannot be valid, naming its key
        space.dimensions(s.spec(), s.method, warned)
    for line in dict.fromkeys(warned):
        print(f"warning: {line}", file=sys.stderr)
    return found


def run_options(opts: TuneOptions) -> runner.RunOptions:
    """The run options of this process's trials and tuned runs: the device, and the torch threads the options fix."""
    if opts.threads < 1:
        raise ConfigError(f"--threads {opts.threads}: give a positive number of torch threads")
    return grid.options(grid.Grid(out=Path(opts.out), device=opts.device, threads=opts.threads,
                                  progress=not opts.no_progress, force=opts.force))


def run_studies(opts: TuneOptions, found: list[studies.Study]) -> PairedData | None:
    """Every study to its budget: here, one row after another (``sequential``, or a worker's ``--studies-only``),
    or in worker processes or SLURM jobs that each claim whole rows; the task's data when it was loaded here."""
    run_opts = run_options(opts)
    preflight.check_precision([Run(s.spec(), s.method, s.method, {}, 0) for s in found], run_opts.device)
    if opts.launcher != "sequential" and not opts.studies_only:
        workers.launch(opts, found)
        return None
    data = runner.load_data(found[0].spec())
    trial_opts = runner.RunOptions(device=run_opts.device, out=found[0].folder / "trials", progress=False)
    held = []
    for s in found:
        with stored.claim(s.name, s.folder) as mine:
            if not mine:  # another worker runs this row's trials, in order
                held.append(s.row_name)
                continue
            with tqdm(total=s.trials if s.dims() else 1, desc=f"tune {s.row_name}", unit="trial",
                      disable=opts.no_progress, dynamic_ncols=True) as bar:
                studies.work(s, data, trial_opts, bar, worker=opts.worker)
    if held and not opts.studies_only:
        raise RunError(f"another process is running the trials of {', '.join(held)} (it holds their claim in "
                       f"{found[0].folder}); wait for it to end, then run this command again")
    return data


def tune(opts: TuneOptions) -> int:
    """Run the studies (with the launcher asked for), then the tuned runs; print the studies' table.

        tune(TuneOptions(task="tasks/synthetic.yaml", methods=("contrastive", "swamp"), trials=4, epochs=2))
    """
    found = setup(opts)
    if opts.finals_only:  # a worker of the tuned runs: the studies have their budget
        final_runs(opts, found, {s.method: summarize(s, opts) for s in found}, None)
        return 0
    data = run_studies(opts, found)
    if opts.studies_only:
        return 0
    records = {s.method: summarize(s, opts) for s in found}
    print(study_table(records, found))
    if opts.no_final:
        return 0
    final_runs(opts, found, records, data)
    return 0


def summarize(s: studies.Study, opts: TuneOptions | None = None) -> dict[str, Any]:
    """The study as its tuned result files record it (:func:`harness.tune.record.record`), with the torch threads
    its trials trained with."""
    opened = studies.open_study(s)
    found = study_record.record(s, opened, s.dims())
    if opts is not None:
        found["threads"] = opts.threads
    return found


def study_table(records: dict[str, dict[str, Any]], found: list[studies.Study]) -> str:
    """One row per method: trials by state, the task's own settings' value, the best value and settings."""

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
    objective = f"the mean over {found[0].folds} folds of the training split" if found[0].folds else \
        "the validation split"
    head = ["method", "trials", f"val {metric}: task's settings", f"val {metric}: best", "best settings",
            "trial minutes"]
    table = format_table(head, rows, [], "simple", numbers=True)
    return (f"studies: {found[0].trials} trials per method on {objective} (seed {found[0].seed}), "
            f"stored in {stored.shown_storage(found[0].storage)}\n" + table)


def _same_choice(was: dict[str, Any], record: dict[str, Any]) -> bool:
    """Whether a tuned result's recorded study chose what the study now chooses: the same best settings, with the same
    budget (a study continued with more trials may choose others)."""
    return bool(was.get("best") == record["best"] and was.get("budget") == record["budget"])


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value).replace(" ", "")


def tuned_run(s: studies.Study, record: dict[str, Any], seed: int) -> Run:
    """The tuned run of a study's best settings with ``seed`` (``<method>@tuned``), its varied settings named."""
    extra = study_record.final_overrides(s, record["best"], s.dims())
    base, spec = s.spec(), s.spec(extra)
    present = plans.flatten(spec.resolved(s.method))
    # an encoder given another type drops the old type's keys: they are no settings of this run (as plan.plan)
    varied = plans.ordered({k: v for k, v in plans.diff(base.resolved(s.method), spec.resolved(s.method)).items()
                            if v is not None or k in present or f"method.{k}" in present})
    return Run(spec, s.method, f"{s.method}@tuned", varied, seed)


def final_runs(opts: TuneOptions, found: list[studies.Study], records: dict[str, dict[str, Any]],
               data: PairedData | None) -> list[dict[str, Any]]:
    """Train and test each method's best settings with every seed (``<method>@tuned``) on ``data`` (the task's,
    loaded here when None), each recording its study with the storage named relative to its result folder; show the
    tables unless ``no_tables``; the result records, in the order of ``found`` and the seeds.

    With ``--launcher local`` and ``--jobs`` N > 1 (and no ``--force``) N worker processes train them, each claiming
    whole rows (:func:`harness.tune.workers.launch_finals`), and this process reads their result files; a worker
    (``finals_only``) trains the rows it claims."""
    from harness.report import folders

    if opts.launcher == "local" and (opts.jobs or 2) > 1 and not opts.force and not opts.finals_only:
        seeds = plans.parse_seeds(opts.seeds)
        runs = [tuned_run(s, records[s.method], seed) for s in found for seed in seeds]
        workers.launch_finals(replace_trials(opts, found), found, runs)
        results = [_collected(opts, s, records[s.method], seed) for s in found for seed in seeds]
    else:
        results = []
        for s in found:
            with contextlib.ExitStack() as held:
                if opts.finals_only and not held.enter_context(stored.claim(f"{s.name}.tuned", s.folder)):
                    continue  # another worker trains this row's seeds
                if opts.finals_only:
                    print(f"worker {opts.worker}: the tuned runs of {s.row_name}", file=sys.stderr, flush=True)
                for seed in plans.parse_seeds(opts.seeds):
                    if data is None:
                        data = runner.load_data(found[0].spec())
                    written = _final_run(opts, s, records[s.method], seed, data)
                    if written is not None:
                        results.append(written)
    if results and not opts.no_tables and not opts.finals_only:
        folders.show(Path(opts.out) / found[0].spec().name, results, None, None)
    return results


def replace_trials(opts: TuneOptions, found: list[studies.Study]) -> TuneOptions:
    """The options with the studies' budget as ``--trials`` (a set's studies may have been extended past the
    command's own budget), so that a worker's studies are these."""
    return dataclasses.replace(opts, trials=found[0].trials) if found else opts


def _final_options(opts: TuneOptions, s: studies.Study, record: dict[str, Any],
                   seed: int) -> tuple[Run, runner.RunOptions, dict[str, Any]]:
    """A tuned run, its run options and the study record its result file holds (the storage relative to it)."""
    run = tuned_run(s, record, seed)
    where = Path(opts.out) / s.spec().name / run.run_name
    held = {**record, "storage": stored.relative_storage(s.storage, where, Path(opts.out))}
    ropts = runner.RunOptions(device=run_options(opts).device, out=Path(opts.out), progress=not opts.no_progress,
                              force=opts.force, tuning=held)
    return run, ropts, held


def _final_run(opts: TuneOptions, s: studies.Study, record: dict[str, Any], seed: int,
               data: PairedData) -> dict[str, Any] | None:
    """One tuned run: its finished result when it holds the study's present choice, else trained (again)."""
    run, ropts, held = _final_options(opts, s, record, seed)
    done = runner.finished_result(run, ropts)
    was = (done or {}).get("tuning") or {}
    if done is not None and was.get("study") != held["study"]:
        raise ConfigError(f"{done['_path']} was tuned by another study ({was.get('study')}); pass --force to "
                          "replace it, or --out to write elsewhere")
    if done is not None and _same_choice(was, held):
        return done
    if done is not None:  # the same study, given more trials since: its best may have moved, so run it again
        ropts = dataclasses.replace(ropts, force=True)
    return runner.run_one(run, data, ropts)


def _collected(opts: TuneOptions, s: studies.Study, record: dict[str, Any], seed: int) -> dict[str, Any]:
    """The result file a worker wrote for one tuned run; RunError when it is missing or holds another choice."""
    run, ropts, held = _final_options(opts, s, record, seed)
    done = runner.finished_result(run, ropts)
    if done is None or not _same_choice((done.get("tuning") or {}), held):
        raise RunError(f"the tuned run {run.run_name} seed {seed} of {s.row_name} was not written by the workers; "
                       "run the same command again: it resumes")
    return done
