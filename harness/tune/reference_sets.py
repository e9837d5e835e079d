"""``harness leaderboard TASK ... --out ROOT``: the sets of the reference table of cross-modal losses, made. For each
task given, its ``leaderboard:`` block names the set's primary metric, the trials every row's study gets, and the
rows: each a method of the task (any registered method, a plugin's included) with its role
(:mod:`harness.report.rows`)::

    leaderboard:
      metric: a2b/R@1
      trials: 20
      rows:
        infonce: {method: contrastive_infonce, role: contrastive}
        infonce+swamp: {method: swamp_infonce, role: with_swamp, base: infonce}
        swamp: {method: swamp, role: swamp}
        floor: {method: identity, role: floor}

The first edition's ``methods: {key: method}`` is still read (:func:`harness.report.rows.legacy_rows`). Every row
gets one study with that budget (:mod:`harness.tune.command`), its trials in order, seeded by the study's seed and
the row's name; while a row has not converged, every row gets more trials, equally, up to ``--trials-cap``
(:mod:`harness.tune.budget`); where the validation split has fewer than 100 items, the studies choose by the mean
over ``folds`` folds of the training split (:mod:`harness.tune.folds`). Then each row's best settings train with every
seed and are tested. A set is ``<out>/<name>/`` (name: the task's, with the metric for a metric other than the
primary one), holding its manifest ``leaderboard.json`` and the studies and tuned result files below it.

    make_sets(SetOptions(tasks=("tasks/wikipedia.yaml",), tune=TuneOptions(task="", methods=(), out=Path("r"))))
"""
from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.config import spec as specs
from harness.config.plan import Run
from harness.config.registry import METHODS
from harness.config.spec import TaskSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError, check_keys, unknown
from harness.report import reference_table
from harness.report import rows as rowmodel
from harness.report.rows import Row
from harness.run import preflight, runner
from harness.store import provenance
from harness.tune import bounds, budget, command, folds
from harness.tune import study as tune_study
from harness.tune.options import DEFAULT_FOLDS, DEFAULT_TRIALS, SMALL_VALIDATION, SetOptions, TuneOptions
from harness.tune.trial import without_test

MANIFEST = reference_table.MANIFEST  # leaderboard.json
BLOCK_KEYS = ("metric", "trials", "rows", "methods", "folds", "appendix")


@dataclass(frozen=True)
class Block:
    """A task's ``leaderboard:`` block: the primary metric, the trials per row, the rows by name, the folds of
    the training split to choose by where the validation split is small (None: :data:`DEFAULT_FOLDS`), and, for a
    set kept outside the table's columns, why (``appendix``: the page lists it in its appendix)."""

    metric: str
    trials: int
    rows: dict[str, Row]
    folds: int | None = None
    appendix: str | None = None


def _positive(raw: Mapping[str, Any], key: str, where: str, least: int = 1) -> int | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(f"{where}.{key} must be an integer >= {least}, got {value!r}")
    return value


def block_of(spec: TaskSpec) -> Block:
    """The task's leaderboard block, checked: a metric the task has, rows with roles whose methods the task declares or
    the registry holds, each method in one row.

        block_of(specs.load_task("tasks/synthetic.yaml")).rows["infonce+swamp"].base  # 'infonce'
    """
    raw = spec.raw.get("leaderboard")
    where = f"{spec.path}: leaderboard"
    if raw is None:
        raise ConfigError(f"{where}: the task has no leaderboard block; add one naming its primary metric and the "
                          "table's rows, e.g. leaderboard: {metric: a2b/R@1, trials: 20, rows: {infonce: {method: "
                          "contrastive, role: contrastive}, swamp: {method: swamp, role: swamp}}} "
                          "(docs/reference-table.md)")
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a mapping with keys among {', '.join(BLOCK_KEYS)}")
    check_keys(raw, BLOCK_KEYS, where, "leaderboard")
    metric = raw.get("metric")
    if metric not in spec.metrics.names():
        raise unknown("leaderboard metric", str(metric), spec.metrics.names(), f"{where}.metric")
    trials = _positive(raw, "trials", where) or DEFAULT_TRIALS
    appendix = raw.get("appendix")
    if appendix is not None and (not isinstance(appendix, str) or not appendix.strip()):
        raise ConfigError(f"{where}.appendix: give in words why the task's sets stand outside the table's columns "
                          f"(e.g. appendix: the from-scratch regime), got {appendix!r}")
    return Block(str(metric), trials, _rows_of(spec, raw, where), _positive(raw, "folds", where, least=3),
                 appendix.strip() if appendix else None)


def _rows_of(spec: TaskSpec, raw: Mapping[str, Any], where: str) -> dict[str, Row]:
    """The block's rows: ``rows:`` parsed, or the first edition's ``methods: {key: method}`` given their roles from
    the methods' settings; every method declared by the task or registered, and in one row only."""
    if raw.get("rows") is not None and raw.get("methods") is not None:
        raise ConfigError(f"{where}: give rows (the rows with their roles) or the first edition's methods, not both "
                          "(a task based on another sets the one it does not use to null)")
    if raw.get("rows") is not None:
        rows = rowmodel.parse_rows(raw["rows"], f"{where}.rows")
    else:
        legacy = raw.get("methods")
        if not isinstance(legacy, Mapping) or not legacy:
            raise ConfigError(f"{where}.rows must map row names to {{method: M, role: R}} (roles: "
                              f"{', '.join(rowmodel.ROLES)})")
        for key, method in legacy.items():
            if key not in rowmodel.LEGACY_KEYS:
                raise unknown("leaderboard row", str(key), rowmodel.LEGACY_KEYS, f"{where}.methods")
            if method not in spec.methods:
                raise unknown("method", str(method), spec.methods, f"{where}.methods.{key}")
        rows = rowmodel.legacy_rows({str(k): str(v) for k, v in legacy.items()},
                                    {str(m): spec.resolved(str(m))["method"] for m in legacy.values()})
    seen: dict[str, str] = {}
    for row in rows.values():
        if row.method not in spec.methods and row.method not in METHODS.names():
            raise unknown("method", row.method, [*spec.methods, *METHODS.names()], f"{where}.rows.{row.name}.method")
        if row.method in seen:
            raise ConfigError(f"{where}.rows: {seen[row.method]} and {row.name} both tune {row.method}; a row is one "
                              "study and one set of tuned runs: declare another method entry for the second")
        seen[row.method] = row.name
    return rows


def set_name(spec: TaskSpec, metric: str, block: Block, given: str | None) -> str:
    """The set's folder name: ``--name``, else the task's name, with the metric for a metric other than the primary
    one (``wikipedia-t2i_class_mAP``)."""
    if given:
        if not re.fullmatch(r"[A-Za-z0-9_.-]+", given):
            raise ConfigError(f"--name {given!r}: use letters, digits, '_', '.' and '-' only (it names a folder)")
        return given
    return spec.name if metric == block.metric else f"{spec.name}-{re.sub(r'[^A-Za-z0-9_.]+', '_', metric)}"


def chosen_rows(block: Block, asked: str | None) -> dict[str, Row]:
    """The rows ``--rows`` asks for, by name (default: every row of the block)."""
    if not asked:
        return dict(block.rows)
    names = [r for r in asked.split(",") if r]
    for name in names:
        if name not in block.rows:
            raise unknown("row", name, block.rows, "--rows")
    return {n: r for n, r in block.rows.items() if n in names}


def applicable(spec: TaskSpec, rows: dict[str, Row], data: PairedData) -> tuple[dict[str, Row], dict[str, str]]:
    """The rows whose method can run on the task's data, and why each other one cannot (identity on two widths, CCA
    on items that are not feature vectors, ...): checked on the data before any study starts."""
    refused = preflight.refusals([Run(spec, r.method, r.method, {}, 0) for r in rows.values()], data)
    keep = {n: r for n, r in rows.items() if r.method not in refused}
    skipped = {n: str(refused[r.method]).split(": ", 1)[-1] for n, r in rows.items() if r.method in refused}
    return keep, skipped


def fold_count(data: PairedData, metric: str, block: Block, asked: int | None) -> int:
    """The folds of the training split the studies choose by: 0 (the validation split) where it has at least
    :data:`SMALL_VALIDATION` queries, else ``--folds``, the block's ``folds`` or :data:`DEFAULT_FOLDS`."""
    if folds.query_items(data["val"], metric) >= SMALL_VALIDATION:
        return 0
    return asked or block.folds or DEFAULT_FOLDS


def manifest(opts: SetOptions, task: str, spec: TaskSpec, name: str, metric: str, block: Block,
             rows: dict[str, Row], skipped: dict[str, str], trials: int) -> dict[str, Any]:
    """What a set's ``leaderboard.json`` records before its studies start: the task, the metric (and whether it is
    the primary one), the rows (``{name: {method, role, base?}}``), the rows that do not apply and why, the budget,
    the seeds, the pruning rule, the torch threads and the command."""
    t = opts.tune
    return {"task": task, "task_name": spec.name, "label": name, "metric": metric,
            "primary": metric == block.metric, "rows": {n: r.record() for n, r in rows.items()},
            "skipped": skipped, "trials": trials, "seeds": t.seeds, "prune": t.prune, "data_root": t.data_root,
            "threads": t.threads, "command": " ".join(provenance.command()),
            **({"appendix": block.appendix} if block.appendix else {})}


def _check_folder(folder: Path, found: dict[str, Any]) -> None:
    """A folder that holds a set already holds this one (same task and metric)."""
    if not (folder / MANIFEST).is_file():
        return
    before = reference_table.read_manifest(folder)
    for key in ("task_name", "metric"):
        if before.get(key) != found[key]:
            raise ConfigError(f"{folder} holds the set of {key} {before.get(key)!r}, not {found[key]!r}; give "
                              "another --name or --out")


def _loaded(opts: SetOptions, task: str) -> tuple[TaskSpec, Block, str, PairedData]:
    """The task (with the methods its rows name that it does not declare), its block, the set's metric and its
    data."""
    overrides = list(opts.tune.overrides) + ([f"dataset.root={opts.tune.data_root}"] if opts.tune.data_root else [])
    spec = specs.load_task(task, overrides)
    block = block_of(spec)
    added = tuple(r.method for r in block.rows.values() if r.method not in spec.methods)
    if added:
        spec = specs.load_task(task, overrides, added)
    metric = opts.metric or block.metric
    if metric not in spec.metrics.names():
        raise unknown("metric", metric, spec.metrics.names(), "--metric")
    return spec, block, metric, runner.load_data(spec)


def make_set(opts: SetOptions, task: str) -> Path:
    """One set: the task's rows studied with the block's (or ``--trials``) budget for the metric, extended equally
    while a row still rises, each best trained with every seed; its folder.

        make_set(SetOptions(tasks=(), tune=TuneOptions(task="", methods=(), out=Path("runs/ref"))), "tasks/x.yaml")
    """
    spec, block, metric, data = _loaded(opts, task)
    rows, skipped = applicable(spec, chosen_rows(block, opts.rows), data)
    for name, why in skipped.items():
        print(f"note: {spec.name}: the row {block.rows[name].shown} ({block.rows[name].method}) does not apply: {why}")
    if not rows:
        raise ConfigError(f"{spec.name}: no row of the table applies to its data ({'; '.join(skipped.values())})")
    name = set_name(spec, metric, block, opts.name)
    folder = Path(opts.tune.out) / name
    trials = opts.tune.trials if opts.tune.trials is not None else block.trials
    k = fold_count(data, metric, block, opts.folds)
    if opts.folds and not k:
        print(f"note: {spec.name}: --folds {opts.folds} left unused: the validation split has at least "
              f"{SMALL_VALIDATION} queries, and the studies choose on it")
    tune = replace(opts.tune, task=task, methods=tuple(r.method for r in rows.values()), out=folder, trials=trials,
                   overrides=(*opts.tune.overrides, f"train.select={metric}"), no_tables=True, folds=k,
                   rows=tuple((r.method, n) for n, r in rows.items()))
    found = manifest(opts, task, spec, name, metric, block, rows, skipped, trials)
    _check_folder(folder, found)
    found_studies = command.setup(tune)  # every search space checked before anything is written
    for line in bounds.check(found_studies, data):  # and its ranges' ends against the data each trial trains on
        print(f"warning: {line}", file=sys.stderr)
    seed = found_studies[0].seed
    fold_record = folds.record(folds.make_folds(without_test(data)["train"], k, seed), seed) if k else None
    reference_table.write_manifest(folder, {**found, "folds": fold_record})
    print(f"leaderboard {name}: {len(rows)} rows x {trials} trials (up to {opts.cap}) on "
          f"{f'{k} folds of the training split' if k else 'validation'} {metric}, then seeds {tune.seeds}: "
          f"{', '.join(f'{r.shown} ({r.method})' for r in rows.values())}")
    items = folds.query_items(data["train"] if k else data["val"], metric)
    # the workers of a larger budget read it from their command line: --trials is each round's budget
    done, readings = budget.extend(found_studies, lambda f: command.run_studies(replace(tune, trials=f[0].trials), f),
                                   metric, items, opts.cap)
    records = {s.method: command.summarize(s, tune) for s in done}
    print(command.study_table(records, done))
    results = [] if tune.no_final else command.final_runs(tune, done, records, data)
    tol = budget.tolerance(items, specs.lower_is_better(metric))
    reference_table.write_manifest(folder, {
        **found, "trials": done[0].trials, "folds": fold_record,
        "budget": {"start": trials, "cap": opts.cap, "converged": all(r.converged for r in readings.values())},
        "studies": {s.row_name: budget.record(s, tune_study.open_study(s), tol) for s in done},
        "cost": cost(records, results)})
    return folder


def cost(records: Mapping[str, Mapping[str, Any]], results: list[dict[str, Any]]) -> dict[str, float]:
    """A set's worker-hours: its studies' (the summed durations of their counted trials) and its tuned runs' (the
    summed wall-clock of their result files).

    >>> cost({"m": {"trial_minutes": 90.0}}, [{"wall_s": 1800.0}, {"wall_s": 1800.0}])
    {'study_hours': 1.5, 'run_hours': 1.0}
    """
    study = sum(float(r.get("trial_minutes") or 0.0) for r in records.values()) / 60
    run = sum(float(r.get("wall_s") or 0.0) for r in results) / 3600
    return {"study_hours": round(study, 4), "run_hours": round(run, 4)}


def make_sets(opts: SetOptions) -> list[Path]:
    """Each task's set (its studies and tuned runs) under ``opts.tune.out``; their folders.

        make_sets(SetOptions(tasks=("tasks/synthetic.yaml",), tune=TuneOptions(task="", methods=(), out=Path("r"))))
    """
    if opts.cap < 1:
        raise ConfigError(f"--trials-cap must be >= 1, got {opts.cap}")
    return [make_set(opts, task) for task in opts.tasks]


__all__ = ["BLOCK_KEYS", "MANIFEST", "Block", "TuneOptions", "applicable", "block_of", "chosen_rows", "cost",
           "fold_count", "make_set", "make_sets", "manifest", "set_name"]
