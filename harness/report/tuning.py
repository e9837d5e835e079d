"""What a result set's pages say about the studies that tuned its runs (``harness tune``), read from the ``tuning``
record of the result files: one row per tuned run (budget, trials by state, the task's settings' value and the
best one, the best settings, the settings that mattered most) and one figure of the best value so far against the
trial number, every tuned run on the same axes (an equal budget shows as lines of equal length)."""
from __future__ import annotations

from typing import Any

from harness.report import cells

HEADER = ["run", "trials", "task's settings (val)", "best (val)", "best settings", "most important settings",
          "trial minutes"]


def studies(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The study of each tuned run (by run name; every seed of a run records the same study)."""
    out: dict[str, dict[str, Any]] = {}
    for r in results:
        if r.get("tuning"):
            out.setdefault(r["run_name"], r["tuning"])
    return dict(sorted(out.items()))


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        return "[" + ",".join(_value(v) for v in value) + "]"
    return str(value)


def rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, one row per tuned run, and the lines under the table (empty rows: nothing was tuned)."""
    found = studies(results)
    if not found:
        return HEADER, [], []
    out = []
    for name, t in found.items():
        trials = t["trials"]
        state = f"{trials['counted']} of {t['budget']['trials']} ({trials['complete']} complete, " \
                f"{trials['pruned']} pruned, {trials['failed']} failed)"
        start = t.get("start_value")
        best = ", ".join(f"{k}={_value(v)}" for k, v in t["best"].items()) or "the task's own"
        important = ", ".join(f"{k} {v:.2f}" for k, v in list(t.get("importances", {}).items())[:3]) or "–"
        out.append([name, cells.Cell(state, trials["counted"]), cells.number(start), cells.number(t["best_value"]),
                    best, important, cells.number(t.get("trial_minutes", 0), ".1f")])
    first = next(iter(found.values()))
    budgets = sorted({t["budget"]["trials"] for t in found.values()})
    notes = [f"Each study searched {first['metric']} on the validation split with Optuna's TPE sampler, its first "
             f"trial the task's own settings; pruning: {pruning(found)}; budgets: {', '.join(map(str, budgets))} "
             "trials. Importances: PED-ANOVA shares of the variation of the trials' values (– with fewer than three "
             "complete trials)."]
    if len(budgets) > 1 or any(t["trials"]["counted"] < t["budget"]["trials"] for t in found.values()):
        notes.append("The studies did not all get the same number of trials: compare their rows with care.")
    return HEADER, out, notes


def recorded_pruner(tuning: dict[str, Any]) -> str:
    """The pruning rule a result file's ``tuning`` record names (a study recorded before the rule was recorded ran
    Optuna's median pruner, the default of that time)."""
    return str(tuning.get("pruner", "median"))


def pruning(found: dict[str, dict[str, Any]]) -> str:
    """The pruning rule the studies recorded (:func:`recorded_pruner`), in words: one rule for all, or each
    run's."""
    rules = {name: recorded_pruner(t) for name, t in found.items()}
    said = {rule: "none (every trial trained all its epochs)" if rule == "none" else rule
            for rule in rules.values()}
    if len(said) == 1:
        return next(iter(said.values()))
    return "; ".join(f"{name} {said[rule]}" for name, rule in rules.items()) + " (not alike: compare with care)"


def figure(results: list[dict[str, Any]]) -> Any | None:
    """Best validation value so far against trial number, one line per tuned run (None: nothing tuned)."""
    found = studies(results)
    if not found:
        return None
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    first = next(iter(found.values()))
    lower = first.get("direction") == "minimize"
    for name, t in found.items():
        xs, ys, best = [], [], None
        for number, state, value in t["values"]:
            if state == "complete" and value is not None:
                best = value if best is None else (min if lower else max)(best, value)
            if best is not None and state in ("complete", "pruned", "failed"):
                xs.append(number + 1)
                ys.append(best)
        ax.step(xs, ys, where="post", label=name)
    ax.set_xlabel("trial")
    ax.set_ylabel(f"best validation {first['metric']} so far")
    ax.legend(fontsize="small")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
