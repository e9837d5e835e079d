"""Accuracy regressions: ``python -m harness compare OLD NEW`` for two result folders of the same task(s).

For every run (task, run folder) present on both sides and every test metric both report: the two
means over seeds, their difference, and a significance test of it, the one the significance policy chooses
(:func:`harness.report.stats.choose_test`, which the tables and the claims ledger follow too):

* the same seeds on both sides (at least two): a paired t-test over those seeds;
* otherwise, at least two seeds on each side: Welch's t-test (unpaired, unequal variances);
* one seed on each side: a paired bootstrap over test queries from the saved per-query ranks (recalls
  and mAP), as the accuracy table's query column does; no test for other metrics.

A side's folder may hold the same run (task and run folder) in one owning folder only
(:func:`harness.report.model.owner`): the same run found in two folders of one side is refused, as runs of two
machines are, since its mean would average them.

A difference is *flagged* when its p-value is below ``--alpha`` (default :data:`harness.report.stats.ALPHA`) and
its size at least ``--min-diff``
(in the metric's units: percentage points for recalls and mAP, ranks for MedR). Runs whose resolved
settings differ between the sides are refused with the settings named: they answer another question.
With ``--fail-on-change`` a flagged difference makes the exit status 1, so the command can gate a change
as ``harness bench`` does for speed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from harness.config.plan import NEUTRAL, flatten, setting_name
from harness.errors import ConfigError
from harness.report import formats, model, stats
from harness.report.cells import SPREAD
from harness.store.schema import load_results


@dataclass(frozen=True)
class Change:
    """One metric of one run, old against new."""

    task: str
    run: str
    metric: str
    old: stats.Summary
    new: stats.Summary
    test: str | None  # the policy's test (stats.PAIRED_T, WELCH, BOOTSTRAP) or None (not testable)
    p: float | None
    flagged: bool

    @property
    def diff(self) -> float:
        return self.new.mean - self.old.mean


def _groups(results: Sequence[dict[str, Any]], side: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """A side's result files by (task, run); a run whose seeds were made on several machines, or lie in several
    folders, is refused (its mean would average them)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault((r["task"], r["run_name"]), []).append(r)
    for (task, run), runs in groups.items():
        model.one_machine(runs, f"{side}: the result files of {task}/{run}")
        folders = sorted({str(model.owner(r)) for r in runs})
        if len(folders) > 1:
            raise ConfigError(f"{side}: {task}/{run} lies in {len(folders)} folders ({'; '.join(folders)}): give the "
                              "folder of one of them")
    return groups


def setting_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Settings both configurations hold with different values (a setting one side predates is not one)."""
    a, b = flatten(old), flatten(new)
    return sorted(f"{setting_name(k)}: {a[k]!r} -> {b[k]!r}" for k in a.keys() & b.keys()
                  if a[k] != b[k] and k not in NEUTRAL)


def test_change(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], metric: str,
                n_resamples: int = stats.N_RESAMPLES) -> tuple[str | None, float | None]:
    """(name of the test, p) for ``metric`` between the two sides' runs: the significance policy's test
    (:func:`harness.report.stats.significance`); (None, None) where none applies or the bootstrap lacks ranks."""
    tested = stats.significance(new, old, metric, n_resamples=n_resamples)
    return (tested.test, tested.p) if tested.p is not None else (None, None)


def compare(old: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]], metrics: Sequence[str] = (),
            alpha: float = stats.ALPHA, min_diff: float = 0.5,
            n_resamples: int = stats.N_RESAMPLES) -> tuple[list[Change], list[str]]:
    """The changes of every run both sides hold, and notes on runs only one side holds."""
    old_groups, new_groups = _groups(old, "OLD"), _groups(new, "NEW")
    notes = [f"only in OLD: {t}/{r}" for t, r in sorted(old_groups.keys() - new_groups.keys())] + \
            [f"only in NEW: {t}/{r}" for t, r in sorted(new_groups.keys() - old_groups.keys())]
    shared = sorted(old_groups.keys() & new_groups.keys())
    if not shared:
        raise ConfigError("the two folders share no run (task and run folder); compare result folders of the same "
                          "task(s), e.g. results/synthetic and a re-run of it with --out")
    for key in shared:
        differences = setting_differences(old_groups[key][0]["config"], new_groups[key][0]["config"])
        if differences:
            raise ConfigError(f"{key[0]}/{key[1]} was run with other settings in NEW ({'; '.join(differences)}); "
                              "compare runs of the same configuration")
    changes = []
    for key in shared:
        o, n = old_groups[key], new_groups[key]
        names = [m for m in (metrics or sorted(set(o[0]["metrics"]) & set(n[0]["metrics"])))]
        for metric in names:
            old_values, new_values = stats.seed_values(o, metric), stats.seed_values(n, metric)
            if not old_values or not new_values:
                continue
            test, p = test_change(o, n, metric, n_resamples)
            old_s = stats.summarize(list(old_values.values()))
            new_s = stats.summarize(list(new_values.values()))
            flagged = p is not None and p < alpha and abs(new_s.mean - old_s.mean) >= min_diff
            changes.append(Change(key[0], key[1], metric, old_s, new_s, test, p, flagged))
    return changes, notes


def _cell(s: stats.Summary) -> str:
    return f"{s.mean:.2f}" + (f" ± {s.std:.2f}" if s.std is not None else "") + f" (n={s.n})"


def render(changes: Sequence[Change], fmt: str = "simple", only_flagged: bool = False) -> str:
    rows = [[c.task, c.run, c.metric, _cell(c.old), _cell(c.new), f"{c.diff:+.2f}", c.test or "—",
             "—" if c.p is None or math.isnan(c.p) else stats.p_text(c.p), "CHANGED" if c.flagged else ""]
            for c in changes if c.flagged or not only_flagged]
    note = [f"OLD, NEW: {SPREAD} (n: seeds); Δ: NEW − OLD of the means"] if rows else []
    return formats.format_table(["task", "run", "metric", "OLD", "NEW", "Δ", "test", "p", ""], rows, note, fmt)


def compare_folders(old: Path | str, new: Path | str, *, metrics: Sequence[str] = (), alpha: float | None = None,
                    min_diff: float = 0.5, fmt: str = "simple", only_flagged: bool = False) -> list[Change]:
    """``python -m harness compare OLD NEW``: print the table of every metric both folders report (``metrics``: only
    these) and the flagged changes under it; every change compared, the flagged ones marked. ``alpha``: the
    significance level (default :data:`harness.report.stats.ALPHA`)."""
    alpha = stats.ALPHA if alpha is None else alpha
    if not 0 < alpha < 1:
        raise ConfigError(f"--alpha {alpha}: a significance level in (0, 1), e.g. {stats.ALPHA}")
    if not (min_diff >= 0 and math.isfinite(min_diff)):
        raise ConfigError(f"--min-diff {min_diff}: a non-negative difference in the metric's units")
    sides = []
    for name, folder in (("OLD", old), ("NEW", new)):
        path = Path(folder)
        results = load_results(path) if path.is_dir() else []
        if not results:
            raise ConfigError(f"{name} {folder}: no result files (<task>/<run>/seed<k>.json) under it")
        sides.append(results)
    changes, notes = compare(sides[0], sides[1], metrics=list(metrics), alpha=alpha, min_diff=min_diff)
    print(render(changes, fmt, only_flagged=only_flagged))
    for note in notes:
        print(note)
    flagged = [c for c in changes if c.flagged]
    print(f"\ncompare: {len(flagged)} of {len(changes)} metric(s) changed (p < {alpha} and |Δ| >= "
          f"{min_diff})" + "".join(f"\n  {c.task}/{c.run} {c.metric}: {c.old.mean:.2f} -> {c.new.mean:.2f} "
                                  f"({c.test}, p {stats.p_text(c.p or 0.0, relation=True)})" for c in flagged))
    return changes
