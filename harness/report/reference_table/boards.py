"""The sets of the reference table, read: a set's manifest, its rows (name, method, role) and a cell per row that has
tuned result files. Nothing here trains or judges; :mod:`.verdicts` compares the cells and :mod:`.page` shows them.

A set is a folder holding ``leaderboard.json`` (written before its studies start: the task, the metric, whether it is
the task's primary metric, the rows, the budget, the seeds, the command) and, below it, the tuned result files of
``harness tune`` (``<set>/<task>/<method>@tuned/seed<k>.json``), which record their studies (``tuning``). Manifests
record rows as ``{name: {method, role, base?}}`` (:mod:`harness.report.rows`); sets made before rows had roles record
``{key: method}`` and are read with :func:`harness.report.rows.legacy_rows`, each SwAMP row's recorded settings
deciding whether it is SwAMP alone or X + SwAMP.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.config.spec import lower_is_better
from harness.errors import ConfigError
from harness.report import model, stats
from harness.report import rows as rowmodel
from harness.report import tuning as tuning_report
from harness.run import contention
from harness.store.io import write_json_atomic
from harness.store.schema import load_results

MANIFEST = "leaderboard.json"


@dataclass(frozen=True)
class Cell:
    """One row of one set: the tuned method's test values by seed, what chose its settings, and what it cost."""

    name: str  # the row's name in the set (infonce, infonce+swamp, swamp, a candidate's name)
    method: str  # the task's method (its tuned runs: <method>@tuned)
    values: dict[int, float]  # seed -> test value of the set's metric
    val_best: float | None  # the study's best validation value (what chose the strongest contrastive loss)
    trials: dict[str, int]  # the study's trials by state
    budget: int  # the trials the study was given
    pruner: str
    trial_minutes: float | None
    step_ms: float | None  # median over seeds of the tuned runs' median training step
    contended: int  # seeds whose training was timed while other work kept the machine busy
    best: dict[str, Any]  # the best trial's settings
    results: list[dict[str, Any]] = field(default_factory=list, compare=False, repr=False)  # the tuned result dicts
    val_at_best: dict[int, float] = field(default_factory=dict)  # seed -> validation value at its selected epoch
    dims: int | None = None  # the study's search-space dimensions
    run_hours: float = 0.0  # the tuned runs' summed wall-clock
    study_seed: int | None = None  # the seed the study trained its trials with

    @property
    def summary(self) -> stats.Summary:
        return stats.summarize(list(self.values.values()))


@dataclass(frozen=True)
class Board:
    """One set of the table: its manifest, its rows and a cell per row that has tuned results."""

    name: str
    folder: Path
    manifest: dict[str, Any]
    cells: dict[str, Cell]
    hardware: str
    missing: dict[str, str] = field(default_factory=dict)  # row -> why it has no cell (yet)
    rows: dict[str, rowmodel.Row] = field(default_factory=dict)
    studies: dict[str, list[float | None]] = field(default_factory=dict, compare=False)  # row -> trial values
    items: int | None = None  # validation items (a recall's step is 100 / items points)

    def __post_init__(self) -> None:
        if not self.rows:
            object.__setattr__(self, "rows", rows_of(self.manifest, _settings(self.cells.values())))

    @property
    def metric(self) -> str:
        return str(self.manifest["metric"])

    @property
    def primary(self) -> bool:
        """Whether the set measures its task's primary metric (a second metric's set answers a claim only)."""
        return bool(self.manifest.get("primary", True))

    @property
    def appendix(self) -> str | None:
        """Why the set stands outside the table's columns (its task's ``leaderboard: appendix:``), or None."""
        why = self.manifest.get("appendix")
        return str(why) if why else None

    @property
    def column(self) -> bool:
        """Whether the set is a column of the table, its ranks and its Bayesian comparisons: a primary metric's
        set not kept for the appendix."""
        return self.primary and self.appendix is None

    @property
    def lower(self) -> bool:
        return lower_is_better(self.metric)

    @property
    def label(self) -> str:
        return str(self.manifest.get("label") or self.name)

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is better than ``b`` on this set's metric."""
        return a < b if self.lower else a > b

    def shown(self, name: str) -> str:
        """A row's printed name ('InfoNCE + SwAMP', 'max-violation hinge (VSE++)', 'SwAMP')."""
        row = self.rows.get(name)
        return row.shown if row is not None else rowmodel.label_of(name, rowmodel.CANDIDATE)

    def role(self, name: str) -> str:
        row = self.rows.get(name)
        return row.role if row is not None else rowmodel.CANDIDATE

    def named(self, *roles: str) -> list[str]:
        """The rows with one of ``roles`` that have a cell, in the set's order."""
        return [r.name for r in rowmodel.of_role(self.rows, *roles) if r.name in self.cells]


def _settings(cells: Any) -> dict[str, dict[str, Any]]:
    """Each cell's method -> its recorded settings (``config.method`` of its first result)."""
    out: dict[str, dict[str, Any]] = {}
    for c in cells:
        if c.results:
            out[c.method] = dict((c.results[0].get("config") or {}).get("method") or {})
    return out


def rows_of(manifest: Mapping[str, Any], settings: Mapping[str, Mapping[str, Any]]) -> dict[str, rowmodel.Row]:
    """A manifest's rows: ``{name: {method, role, base?}}`` parsed, or a first-edition ``{key: method}`` read with each
    SwAMP row's recorded ``settings`` (method -> its settings)."""
    raw = manifest.get("rows") or {}
    if raw and all(isinstance(v, Mapping) for v in raw.values()):
        return rowmodel.parse_rows(raw, "leaderboard.json rows")
    return rowmodel.legacy_rows({str(k): str(v) for k, v in raw.items()}, settings)


def read_manifest(folder: Path) -> dict[str, Any]:
    """A set's ``leaderboard.json``, checked."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise ConfigError(f"{folder} holds no {MANIFEST}: it is not a set of the reference table (make one with "
                          "python -m harness leaderboard TASK --out ROOT)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path} cannot be read ({err}); make the set again with python -m harness leaderboard") \
            from None
    for key in ("task", "metric", "rows", "trials"):
        if key not in data:
            raise ConfigError(f"{path} lacks {key!r}; make the set again with python -m harness leaderboard")
    raw = data["rows"]
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(f"{path}: rows must map row names to {{method, role}}; make the set again")
    if all(isinstance(v, Mapping) for v in raw.values()):
        rowmodel.parse_rows(raw, f"{path}: rows")
    else:
        unknown = sorted(set(raw) - set(rowmodel.LEGACY_KEYS))
        if unknown:
            raise ConfigError(f"{path}: unknown row(s) {', '.join(unknown)}; rows: {', '.join(rowmodel.LEGACY_KEYS)} "
                              "(or {name: {method, role}})")
    return dict(data)


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write a set's manifest (atomic)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(folder) / MANIFEST, manifest)


def step_ms(runs: list[dict[str, Any]]) -> float | None:
    """The median over seeds of the tuned runs' median training step (ms); None without timings."""
    steps = [float(r["profile"]["timing"]["train_step"]["median_s"]) * 1e3 for r in runs
             if ((r.get("profile") or {}).get("timing") or {}).get("train_step")]
    return statistics.median(steps) if steps else None


def make_cell(name: str, method: str, runs: list[dict[str, Any]], metric: str) -> Cell:
    """The cell of one row from its tuned result dicts (every seed)."""
    tuning = runs[0]["tuning"]
    val = {int(r["seed"]): float(v) for r in runs if (v := (r.get("val_at_best") or {}).get(metric)) is not None}
    return Cell(
        name=name, method=method, values=stats.seed_values(runs, metric), val_best=tuning.get("best_value"),
        trials={k: int(v) for k, v in tuning["trials"].items()}, budget=int(tuning["budget"]["trials"]),
        pruner=tuning_report.recorded_pruner(tuning), trial_minutes=tuning.get("trial_minutes"),
        step_ms=step_ms(runs), contended=sum(1 for r in runs if "train" in contention.contended_phases(r)),
        best=dict(tuning.get("best") or {}), results=runs, val_at_best=val,
        dims=len(tuning["space"]) if isinstance(tuning.get("space"), Mapping) else None,
        run_hours=sum(float(r.get("wall_s") or 0.0) for r in runs) / 3600.0,
        study_seed=int(tuning["seed"]) if tuning.get("seed") is not None else None)


def _by_method(folder: Path, manifest: dict[str, Any]) -> tuple[dict[str, list[dict[str, Any]]], dict[str, Any]]:
    """The tuned result dicts of each method (those with the set's metric), and each method's recorded settings."""
    metric = str(manifest["metric"])
    by_run = model.group_runs(r for r in load_results(folder) if r.get("tuning"))
    runs = {name.removesuffix("@tuned"): [r for r in rs if metric in r["metrics"]]
            for name, rs in by_run.items() if name.endswith("@tuned")}
    settings = {m: dict((rs[0].get("config") or {}).get("method") or {}) for m, rs in runs.items() if rs}
    return runs, settings


def load_set(folder: Path) -> Board:
    """One set: its manifest, its rows and, for each row with tuned result files, the cell they give."""
    from harness.report.reference_table import budgets  # the study reader: optuna, loaded only here

    folder = Path(folder)
    manifest = read_manifest(folder)
    metric = str(manifest["metric"])
    by_method, settings = _by_method(folder, manifest)
    rows = rows_of(manifest, settings)
    cells: dict[str, Cell] = {}
    missing: dict[str, str] = {}
    machines: list[str] = []
    skipped = manifest.get("skipped") or {}
    for row in rows.values():
        runs = by_method.get(row.method, [])
        if not runs:
            missing[row.name] = skipped.get(row.name, skipped.get(_legacy_key(manifest, row), "no tuned result files"
                                                                                                " yet"))
            continue
        machines.append(model.one_machine(runs, f"{folder}: the tuned runs of {row.method}"))
        recorded = runs[0]["tuning"].get("metric")
        if recorded != metric:
            raise ConfigError(f"{folder}: {row.method}@tuned was tuned for {recorded}, the set ranks {metric}; "
                              "make the set again with python -m harness leaderboard")
        cells[row.name] = make_cell(row.name, row.method, runs, metric)
    studies = budgets.trial_values(folder, manifest, cells)
    return Board(folder.name, folder, manifest, cells, "; ".join(dict.fromkeys(machines)), missing, rows, studies,
                 _items(cells))


def undeclared(board: Board) -> list[str]:
    """The first edition's fixed rows a primary set made before rows had roles does not declare (their labels); none
    for a set that names its rows."""
    raw = board.manifest.get("rows") or {}
    if not board.primary or any(isinstance(v, Mapping) for v in raw.values()):
        return []
    labels = {"swamp_infonce": "InfoNCE + SwAMP"}
    return [labels.get(k) or rowmodel.label_of(k, role) for k, role in rowmodel.LEGACY_KEYS.items() if k not in raw]


def _legacy_key(manifest: Mapping[str, Any], row: rowmodel.Row) -> str:
    """The first-edition key a row was recorded under (its method's key), for the manifest's ``skipped``."""
    return next((str(k) for k, v in (manifest.get("rows") or {}).items() if v == row.method), row.name)


def _items(cells: Mapping[str, Cell]) -> int | None:
    """The validation split's size, from the result files' dataset record: its sizes (train, validation, test), its
    captions or videos per split, or its pairs per split."""
    for c in cells.values():
        for r in c.results:
            data = r.get("dataset") or {}
            for key in ("sizes", "captions", "videos"):
                if isinstance(data.get(key), list) and len(data[key]) >= 2 and data[key][1]:
                    return int(data[key][1])
            if isinstance(data.get("pairs"), Mapping) and data["pairs"].get("val"):
                return int(data["pairs"]["val"])
    return None


def load_boards(root: Path) -> list[Board]:
    """Every set under ``root`` (its sub-folders holding a manifest), by name."""
    root = Path(root)
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder; give the folder harness leaderboard wrote its sets into (--out)")
    return [load_set(p.parent) for p in sorted(root.glob(f"*/{MANIFEST}"))]


def equal_budget(board: Board, names: tuple[str, ...] | None = None) -> int:
    """The trials every study of the set counted; ConfigError when the rows' budgets differ."""
    cells = [c for r, c in board.cells.items() if names is None or r in names]
    trained = [c for c in cells if board.role(c.name) != rowmodel.FLOOR]
    budgets = {c.budget for c in trained}
    counted = {c.trials.get("counted", 0) for c in trained if c.trials.get("counted", 0) > 1}
    if len(budgets) > 1 or len(counted) > 1:
        shown = ", ".join(f"{c.name} {c.trials.get('counted', 0)}/{c.budget}" for c in cells)
        raise ConfigError(f"{board.folder}: the rows' studies got different budgets ({shown}); an equal budget is "
                          "the table's premise: run the set again with one --trials")
    return budgets.pop() if budgets else 0
