"""Budgets shown to be enough: each row's validation values in the order its trials ran, read with the convergence
rule (:mod:`harness.report.convergence`), and the extension that gives every row of a set more trials, equally, while
any row is still rising, up to a cap.

    readings = {row: reading(study, opened, tolerance(items, rank))}  # one per row
    more_trials(readings, 20, cap=40)                                  # 25 while a row still rises, else 20
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import optuna
from optuna.trial import TrialState

from harness.config.spec import lower_is_better
from harness.report import convergence
from harness.report.convergence import Convergence, more_trials, tolerance
from harness.tune import storage as stored
from harness.tune import study as studies

__all__ = ["Convergence", "extend", "more_trials", "reading", "row_values", "tolerance"]


def row_values(opened: optuna.Study) -> list[float | None]:
    """The study's counted trials' values in the order they ran (by trial number): a complete trial's value, None for
    a pruned or failed one; trials interrupted with their worker (not counted, run again) and unfinished ones are left
    out."""
    out: list[float | None] = []
    for t in sorted(opened.get_trials(deepcopy=False), key=lambda t: t.number):
        if t.state == TrialState.COMPLETE:
            out.append(None if t.value is None else float(t.value))
        elif t.state == TrialState.PRUNED or (t.state == TrialState.FAIL and not stored.interrupted(t)):
            out.append(None)
    return out


def reading(study: studies.Study, opened: optuna.Study, tol: float) -> Convergence:
    """A row's convergence reading over the first trials of its budget (a study resumed after it was extended holds
    more, and the decision at this budget must be the one an uninterrupted command made). A row with nothing to search
    (a closed form's or the floor's one trial) has converged by definition: more trials would repeat the same
    settings."""
    values = row_values(opened)[:study.trials]
    lower = opened.direction == optuna.study.StudyDirection.MINIMIZE
    found = convergence.read(values, lower, tol)
    if not study.dims():
        return Convergence(found.curve, found.window, 0.0, tol)
    return found


def record(study: studies.Study, opened: optuna.Study, tol: float) -> dict[str, Any]:
    """A row's entry of a set's ``studies``: the study, its values in trial order, its search space's number of
    dimensions and its convergence reading."""
    return {"study": study.name, "values": row_values(opened)[:study.trials], "dims": len(study.dims()),
            "convergence": reading(study, opened, tol).record()}


def extend(found: list[studies.Study], run: Callable[[list[studies.Study]], object], metric: str, items: int | None,
           cap: int) -> tuple[list[studies.Study], dict[str, Convergence]]:
    """Run every study to its budget (``run``), then, while a row has not converged and the budget is below ``cap``,
    give every row the same larger budget (:func:`harness.report.convergence.more_trials`) and run them again;
    the studies at their final budget and each row's last reading.

        found, readings = extend(setup(opts), lambda f: run_studies(opts, f), "a2b/R@1", 1000, cap=40)
    """
    tol = tolerance(items, lower_is_better(metric))
    while True:
        run(found)
        readings = {s.row_name: reading(s, studies.open_study(s), tol) for s in found}
        budget = found[0].trials
        more = more_trials(readings, budget, cap)
        if more == budget:
            return found, readings
        rising = [name for name, r in readings.items() if not r.converged]
        print(f"note: {', '.join(rising)} still rising after {budget} trials (tolerance {tol:.2f}): every row gets "
              f"{more} (cap {cap})")
        found = [replace(s, trials=more) for s in found]
