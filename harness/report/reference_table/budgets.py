"""Whether each row's budget was enough, and what the set cost: the trial values of each row's study in the order
they ran (the manifest's ``studies`` where the set records them; for sets made before it did, read from the set's
``studies.db`` with Optuna, opened read-only), each row's convergence reading (:mod:`harness.report.convergence`),
its search-space dimensions, and the worker-hours of the set's studies and tuned runs."""
from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.report import convergence

TUNE_FOLDER = "_tune"
STUDIES_DB = "studies.db"


def trial_values(folder: Path, manifest: Mapping[str, Any], cells: Mapping[str, Any]) -> dict[str, list[float | None]]:
    """Each row's trial values on validation in the order the trials ran (None: a failed or pruned trial): the
    manifest's ``studies: {row: {values: [...]}}`` where present, else the studies of ``<set>/<task>/_tune/studies.db``
    named in the rows' tuning records, else the records' own ``values``."""
    recorded = manifest.get("studies") or {}
    out: dict[str, list[float | None]] = {}
    for name, cell in cells.items():
        entry = recorded.get(name)
        if isinstance(entry, Mapping) and isinstance(entry.get("values"), list):
            out[name] = [None if v is None else float(v) for v in entry["values"]]
            continue
        tuning = cell.results[0].get("tuning") or {} if cell.results else {}
        found = from_storage(folder, str(tuning.get("study") or ""))
        out[name] = found if found is not None else from_record(tuning)
    return out


def from_record(tuning: Mapping[str, Any]) -> list[float | None]:
    """The trial values a tuned result's record lists (``values: [[number, state, value], ...]``), by number."""
    rows = sorted((int(n), state, value) for n, state, value in tuning.get("values") or [])
    return [float(v) if state == "complete" and v is not None else None for _, state, v in rows]


def from_storage(folder: Path, study: str) -> list[float | None] | None:
    """The values of ``study`` in a set's ``studies.db`` (opened read-only), by trial number; None where the file or
    the study is absent or Optuna is not installed."""
    dbs = sorted(Path(folder).glob(f"*/{TUNE_FOLDER}/{STUDIES_DB}"))
    if not study or not dbs:
        return None
    try:
        import optuna
    except ImportError:
        return None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for db in dbs:
        url = f"sqlite:///file:{db.resolve()}?mode=ro&uri=true"
        with warnings.catch_warnings(), contextlib.suppress(KeyError, ValueError):
            warnings.simplefilter("ignore")
            logging.getLogger("sqlalchemy").setLevel(logging.ERROR)
            storage = optuna.storages.RDBStorage(url, skip_table_creation=True)
            trials = optuna.load_study(study_name=study, storage=storage).get_trials(deepcopy=False)
            complete = optuna.trial.TrialState.COMPLETE
            return [float(t.value) if t.state == complete and t.value is not None else None
                    for t in sorted(trials, key=lambda t: t.number)]
    return None


@dataclass(frozen=True)
class Reading:
    """One row's budget: its convergence reading and its search-space dimensions."""

    row: str
    reading: convergence.Convergence
    dims: int | None
    valued: int = 0  # trials with a value (failed and pruned trials have none)

    @property
    def converged(self) -> bool:
        return self.reading.converged

    def text(self) -> str:
        """'20 trials, 6 dims, last quarter +0.30 (tolerance 0.50)' and the mark where the row was still rising."""
        r = self.reading
        gain = "–" if r.gain is None else ("all" if r.gain == float("inf") else f"+{r.gain:.2f}")
        dims = f"{self.dims} dims" if self.dims is not None else "dims –"
        mark = "" if self.converged else f" {convergence.NOT_CONVERGED}"
        counted = f"{len(r.curve)} trials" + (f" ({self.valued} with a value)" if self.valued != len(r.curve) else "")
        return f"{counted}, {dims}, last {r.window} {gain} (tolerance {r.tolerance:.2f}){mark}"


def readings(board: Any) -> dict[str, Reading]:
    """Each trained row's budget reading on ``board`` (a :class:`~.boards.Board`): from its manifest's ``studies``
    convergence where recorded, else computed from the trial values with the set's tolerance."""
    tol = convergence.tolerance(board.items, board.lower)
    recorded = board.manifest.get("studies") or {}
    out: dict[str, Reading] = {}
    for name, values in board.studies.items():
        if board.role(name) == "floor" or not values:
            continue
        entry = recorded.get(name) if isinstance(recorded.get(name), Mapping) else {}
        step = float((entry.get("convergence") or {}).get("tolerance", tol)) if entry else tol
        dims = entry.get("dims") if entry and entry.get("dims") is not None else board.cells[name].dims
        out[name] = Reading(name, convergence.read(values, board.lower, step), None if dims is None else int(dims),
                            sum(1 for v in values if v is not None))
    return out


def cost(board: Any) -> dict[str, float]:
    """The set's worker-hours: its studies' (summed trial minutes) and its tuned runs' (summed wall-clock); the
    manifest's ``cost`` where the set records it."""
    recorded = board.manifest.get("cost")
    if isinstance(recorded, Mapping) and {"study_hours", "run_hours"} <= set(recorded):
        return {"study_hours": float(recorded["study_hours"]), "run_hours": float(recorded["run_hours"])}
    minutes = sum(c.trial_minutes or 0.0 for c in board.cells.values())
    return {"study_hours": minutes / 60.0, "run_hours": sum(c.run_hours for c in board.cells.values())}
