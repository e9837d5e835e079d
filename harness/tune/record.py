"""A study as the tuned result files record it (``tuning``): the budget and the trials by state, the search space,
the best trial's settings and value beside the task's own settings' value, each trial's value, the parameters'
importances and the minutes the counted trials took."""
from __future__ import annotations

import warnings
from typing import Any

import optuna
from optuna.trial import TrialState

from harness.errors import RunError
from harness.tune.space import Dimension
from harness.tune.storage import COUNTED, counts, interrupted, shown_storage
from harness.tune.study import Study


def best_trial(opened: optuna.Study) -> optuna.trial.FrozenTrial | None:
    """The best complete trial (None before one completes)."""
    complete = opened.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if not complete:
        return None
    return opened.best_trial


def best_settings(best: optuna.trial.FrozenTrial, dims: list[Dimension]) -> dict[str, Any]:
    """The settings the best trial trained with, by setting name (layers rebuilt from width and depth)."""
    out: dict[str, Any] = {}
    for dim in dims:
        names = dim.params()
        if not all(n in best.params for n in names):
            continue
        if dim.space.layers:
            out[dim.name] = [best.params[names[0]]] * best.params[names[1]]
        else:
            out[dim.name] = best.params[dim.name]
    return out


def record(study: Study, opened: optuna.Study, dims: list[Dimension]) -> dict[str, Any]:
    """The study as the tuned result files record it (``tuning``); RunError when no trial completed."""
    best = best_trial(opened)
    have = counts(opened)
    trials = sorted(opened.get_trials(deepcopy=False), key=lambda t: t.number)
    if best is None:
        reasons = sorted({str(t.user_attrs.get("failed", "")) for t in trials if t.user_attrs.get("failed")})
        raise RunError(f"no trial of {study.method} completed ({have['pruned']} pruned, {have['failed']} failed"
                       f"{': ' + reasons[0] if reasons else ''}); widen or fix its search space (tune.space)")
    start = next((t for t in trials if t.user_attrs.get("start") and t.state == TrialState.COMPLETE), None)
    # the counted trials' minutes: an interrupted trial (its process killed, re-run later) is not counted, and its
    # duration runs to the moment a later worker found it dead
    spent = [t.duration.total_seconds() for t in trials if t.duration is not None and not interrupted(t)]
    return {
        "study": study.name, "storage": shown_storage(study.storage), "split": "val",
        "metric": study.spec().methods[study.method].train.select, "direction": opened.direction.name.lower(),
        "sampler": "TPE", "pruner": study.pruner_text, "seed": study.seed,
        "budget": {"trials": study.trials, "seconds": study.seconds},
        "trials": {k: have[k] for k in ("counted", *COUNTED, "interrupted")},
        "space": {d.name: d.describe() for d in dims},
        "best": best_settings(best, dims), "best_trial": best.number, "best_value": best.value,
        "start_value": start.value if start is not None else None,
        "values": [[t.number, t.state.name.lower(), t.value] for t in trials],
        "importances": importances(opened, dims),
        "trial_minutes": round(sum(spent) / 60, 3),
    }


def importances(opened: optuna.Study, dims: list[Dimension]) -> dict[str, float]:
    """Each parameter's share of the variation of the trials' values (Optuna's PED-ANOVA; {} with too few
    complete trials)."""
    complete = opened.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    if len(complete) < 3 or not dims:
        return {}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            found = optuna.importance.get_param_importances(
                opened, evaluator=optuna.importance.PedAnovaImportanceEvaluator())
    except (ValueError, RuntimeError, ZeroDivisionError):
        return {}
    return {k: round(float(v), 4) for k, v in found.items()}


def final_overrides(study: Study, settings: dict[str, Any], dims: list[Dimension]) -> list[str]:
    """The --set texts that give the method the best trial's settings."""
    by_name = {d.name: d for d in dims}
    return [by_name[name].override(study.method, value) for name, value in settings.items()]
