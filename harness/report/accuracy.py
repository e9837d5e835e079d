"""The accuracy table, rendered from result files only: one row per (fold protocol, relevance, run), each metric's
mean ± std over seeds per direction, the flags that qualify a row ([tuned N], [warned j/n], [below floor j/n], ...),
published rows where the task has them and, against a reference run, the significance markers and four test columns
(:mod:`harness.report.stats`), with the lines under the table that explain them.

Which statistics a table shows per direction and which one its test columns test (``--test-stat``) are decided here
too (:func:`column_stats`, :func:`tested_column`). Each cell carries the number it sorts by
(:mod:`harness.report.cells`).
"""
from __future__ import annotations

from typing import Any

from harness.config import metrics as metric_registry
from harness.config.metric_names import MetricName, parse_metric
from harness.config.spec import MetricSpec
from harness.errors import ConfigError, unknown
from harness.report import model, stats
from harness.report.cells import EMPTY, Cell, Table, mean_std, number, published
from harness.report.model import group_runs

SEED_COLUMNS = ["p (seeds, paired t)", "p (queries, bootstrap)"]


def accuracy_table(results: list[dict[str, Any]], reference: str | None = None,
                   test_stat: str | None = None) -> Table:
    """The accuracy table of ``results`` (:func:`accuracy_rows`) with the lines under it (:func:`accuracy_footnote`)."""
    header, rows = accuracy_rows(results, reference, test_stat)
    return Table(header, rows, accuracy_footnote(results, reference, test_stat))


def accuracy_rows(results: list[dict[str, Any]], reference: str | None = None,
                  test_stat: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the accuracy table (plus published reference rows when the task has them).

    One row group per (fold protocol, relevance); results on random data (:func:`harness.report.model.timing_only`)
    say so in every row. With a ``reference`` run, recall and mAP cells of other runs that differ from it (the
    significance policy's test over seeds, :func:`harness.report.stats.choose_test`, p < ``ALPHA``) get a ``*``, and
    four columns test one column of each row group: the statistic ``test_stat`` (e.g. 'mAP'; default: the first,
    R@k) (see :func:`accuracy_footnote`).
    """
    groups = group_runs(results)
    _check_reference(groups, reference)
    metrics = results[0]["config"]["metrics"]
    stat_names = column_stats(metrics)
    tested = tested_column(metrics, test_stat)
    columns = [(f"{d} {s}", d, s) for d in metrics["directions"] for s in stat_names]
    header = ["error type", "method", "seeds"] + [c[0] for c in columns] + (["rsum"] if metrics.get("rsum") else [])
    header += [f"Δ vs {reference}", "95% CI", *SEED_COLUMNS] if reference else []
    note = " (timing only: random data)" if model.timing_only(results) else ""
    rows = []
    for n_folds in metrics.get("folds", [1]):
        for relevance in metrics["relevance"]:
            label = f"{relevance}-based{'' if n_folds == 1 else f', {n_folds} folds (mean)'}{note}"
            names = metric_names(columns, metrics, n_folds, relevance)
            for name, runs in groups.items():
                ref_runs = groups[reference] if reference and name != reference else None
                rows.append([label, _row_name(name, runs, results, names[tested]), Cell(str(len(runs)), len(runs)),
                             *(_accuracy_cell(runs, m, ref_runs) for m in names),
                             *(_significance_cells(runs, ref_runs, names[tested]) if reference else [])])
            rows += _published_rows(results[0].get("reference") or {}, label, names, reference)
    return header, rows


def _row_name(name: str, runs: list[dict[str, Any]], results: list[dict[str, Any]], tested: str) -> str:
    """The run's name with the flags that qualify its row."""
    return (name + tuned_flag(runs, results) + _skipped_note(runs, tested) + collapse_flag(runs) + floor_flag(runs)
            + fit_flag(runs))


def _published_rows(published_runs: dict[str, Any], label: str, names: list[str],
                    reference: str | None) -> list[list[str]]:
    """The rows of the published numbers the task file carries (``reference.methods``) for one row group."""
    rows = []
    for name, given in (published_runs.get("methods") or {}).items():
        cells = [published(given.get(m, _published_rsum(given, names, m))) for m in names]
        if any(c != EMPTY for c in cells):
            rows.append([label, f"{name} ({published_runs.get('label', 'published')})", EMPTY, *cells,
                         *([EMPTY] * 4 if reference else [])])
    return rows


def column_stats(metrics: dict[str, Any]) -> list[str]:
    """The statistics shown per direction for a result's (or task's resolved) metric settings."""
    return [f"R@{k}" for k in metrics["ks"]] + ["MedR"] + _precision_stats(metrics)


def test_stats(metrics: dict[str, Any]) -> list[str]:
    """Every statistic ``--test-stat`` accepts for these metric settings: each column statistic (tested in the
    first direction), ``<direction>/<stat>`` for any direction, and ``rsum`` when the table has it."""
    names = column_stats(metrics)
    return (names + [f"{d}/{s}" for d in metrics["directions"] for s in names]
            + (["rsum"] if metrics.get("rsum") else []))


def tested_column(metrics: dict[str, Any], test_stat: str | None) -> int:
    """Index, among a row group's metric names (:func:`metric_names`: every direction's statistics, then rsum),
    of the one the significance columns test: the first unless ``test_stat`` names another
    (:func:`test_stats`); a statistic the table does not show raises ConfigError listing those it does."""
    if test_stat is None:
        return 0
    names, directions = column_stats(metrics), list(metrics["directions"])
    if test_stat in test_stats(metrics):
        if test_stat == "rsum":
            return len(directions) * len(names)
        direction, _, stat = test_stat.rpartition("/")
        return (directions.index(direction) if direction else 0) * len(names) + names.index(stat)
    raise unknown("statistic to test", test_stat, test_stats(metrics))


def tested_label(metrics: dict[str, Any], test_stat: str | None) -> str:
    """The column a ``test_stat`` tests, as the table heads it (e.g. 'a2b R@1', 'rsum')."""
    if test_stat == "rsum":
        return "rsum"
    direction, _, stat = (test_stat or "").rpartition("/")
    first_recall = f"R@{metrics['ks'][0]}"
    return f"{direction or metrics['directions'][0]} {stat or first_recall}"


def validation_view(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The result dicts with the validation metrics of their selected epoch as ``metrics`` (for choosing
    settings without the test split); no published rows, no per-query ranks."""
    return [{**r, "metrics": r["val_at_best"], "reference": None, "ranks": None} for r in results]


def metric_names(columns: list[tuple[str, str, str]], metrics: dict[str, Any], n_folds: int,
                 relevance: str) -> list[str]:
    """Result-file names of the accuracy columns for one fold protocol and relevance
    (:class:`harness.config.metric_names.MetricName`)."""
    names = [str(MetricName(s, d, relevance, n_folds)) for _, d, s in columns]
    return names + ([str(MetricName("rsum", folds=n_folds))] if metrics.get("rsum") else [])


def _precision_stats(metrics: dict[str, Any]) -> list[str]:
    """The mAP / mAP@k / P@k columns a result's metric settings asked for (none in older result files)."""
    return MetricSpec(map=bool(metrics.get("map")), map_at=tuple(metrics.get("map_at", ())),
                      precision_at=tuple(metrics.get("precision_at", ()))).precision_stats()


def _check_reference(groups: dict[str, list[dict[str, Any]]], reference: str | None) -> None:
    """Raise ConfigError when ``reference`` is given but names none of the runs."""
    if reference is not None and reference not in groups:
        raise unknown("reference run", reference, groups)


def _skipped_note(runs: list[dict[str, Any]], metric: str) -> str:
    """' (no accuracy: time budget)' when no run has ``metric`` because a time budget stopped its scoring."""
    if any(metric in r["metrics"] for r in runs) or not any(r.get("metrics_skipped") for r in runs):
        return ""
    return " (no accuracy: time budget)"


def _accuracy_cell(runs: list[dict[str, Any]], metric: str, ref_runs: list[dict[str, Any]] | None) -> Cell:
    """Mean ± std of ``metric``; a ``*`` when it is a recall that differs from ``ref_runs`` by the significance
    policy's test over seeds."""
    values = [r["metrics"][metric] for r in runs if metric in r["metrics"]]  # none where a time budget stopped it
    cell = mean_std(values, metric_registry.digits(metric))
    if ref_runs is None or not stats.query_testable(metric):
        return cell
    return cell + "*" if stats.significance(runs, ref_runs, metric, queries=False).significant else cell


def _significance_cells(runs: list[dict[str, Any]], ref_runs: list[dict[str, Any]] | None, metric: str) -> list[Cell]:
    """Δ, 95% CI, seed-level p and query-level p of ``metric`` (only the CI for the reference itself)."""
    ci = stats.summarize(list(stats.seed_values(runs, metric).values())).ci
    ci_cell = Cell(f"[{ci[0]:.2f}, {ci[1]:.2f}]", ci[0]) if ci else Cell(EMPTY)
    if ref_runs is None:
        return [Cell(EMPTY), ci_cell, Cell(EMPTY), Cell(EMPTY)]
    cmp = stats.compare_runs(runs, ref_runs, metric)
    boot = _p(cmp.p_bootstrap) + ("" if cmp.p_bootstrap is None else f" ({cmp.n_significant}/{len(cmp.bootstrap)})")
    return [number(cmp.seeds.diff, "+.2f"), ci_cell, _p(cmp.seeds.p), boot]


def _p(p: float | None) -> Cell:
    return Cell(EMPTY) if p is None else Cell(stats.p_text(p), p)


def tuned_trials(result: dict[str, Any]) -> int | None:
    """The trials counted in the study that chose a result's settings (``harness tune``); None for an untuned run."""
    tuning = result.get("tuning")
    return int(tuning["trials"]["counted"]) if tuning else None


def tuned_flag(runs: list[dict[str, Any]], results: list[dict[str, Any]]) -> str:
    """' [tuned N]' for a run whose settings a study of N trials chose (``harness tune``), ' [tuned N < M]' when
    another row of the same table was tuned with more (M) trials, with ', k pruned' when the pruner stopped k of
    them; else ''."""
    counted = [n for n in (tuned_trials(r) for r in runs) if n is not None]
    if not counted:
        return ""
    most = max(n for n in (tuned_trials(r) for r in results) if n is not None)
    least = min(counted)
    pruned = max(int(r["tuning"]["trials"].get("pruned", 0)) for r in runs if r.get("tuning"))
    return (f" [tuned {least} < {most}" if least < most else f" [tuned {least}") + \
        (f", {pruned} pruned]" if pruned else "]")


SETTINGS_NOTE = ("[settings warned]: the run's settings do not fit its data (a batch or SwAMP queue at least as "
                 "large as the training set, SwAMP's K leaving fewer than two training pairs per prototype, a k of R@k "
                 "that reaches the number of items a query ranks, CCA's canonical correlations at 1 on the training "
                 "pairs: a fit to noise); the result files' `warnings` say which, and the run printed them before "
                 "training.")


def fit_flag(runs: list[dict[str, Any]]) -> str:
    """' [settings warned]' when a seed's result file records settings that do not fit its data
    (:func:`harness.run.preflight.fit_warnings`); else ''."""
    return " [settings warned]" if any(r.get("warnings") for r in runs) else ""


def floor_flag(runs: list[dict[str, Any]]) -> str:
    """' [below floor j/n]' when in j of the n seeds the selected validation metric fell below the no-training
    floor (:mod:`harness.run.floor`), and ' [epoch 0 j/n]' when in j of them no epoch of training beat the
    untrained model, which the row then reports; else ''."""
    below = sum(1 for r in runs if (r.get("floor") or {}).get("below"))
    untrained = sum(1 for r in runs if r.get("best_epoch") == 0 and r.get("training") == "gradient")
    return (f" [below floor {below}/{len(runs)}]" if below else "") + \
        (f" [epoch 0 {untrained}/{len(runs)}]" if untrained else "")


def collapse_counts(runs: list[dict[str, Any]]) -> tuple[int, int]:
    """(k, j): of the run's seeds, the k whose recorded collapse (:mod:`harness.run.collapse`) held at the selected
    epoch and the j that recorded one at all (k <= j)."""
    records = [r["collapse"] for r in runs if r.get("collapse")]
    return sum(1 for c in records if c.get("at_best_epoch", True)), len(records)


def collapse_flag(runs: list[dict[str, Any]]) -> str:
    """' [warned j/n]' when j of the run's n seeds recorded a collapse (:mod:`harness.run.collapse`), with
    ' [collapsed k/n; warned j/n]' when in k of them it held at the selected epoch; else ''."""
    at_best, recorded = collapse_counts(runs)
    parts = [f"collapsed {at_best}/{len(runs)}"] * bool(at_best) + [f"warned {recorded}/{len(runs)}"]
    return f" [{'; '.join(parts)}]" if recorded else ""


def collapse_note(runs: str = "the n seeds", reports: str = "the row") -> str:
    """The footnote that explains :func:`collapse_flag`'s marks, for a table whose marked entries are ``runs`` (n of
    them) and whose selected model ``reports`` shows."""
    return (f"[warned j/n]: in j of {runs} a collapse signal (a loss term at its collapsed value, or the validation "
            "selection metric at chance) held for `collapse_patience` epochs in a row and the run warned; "
            f"[collapsed k/n]: in k of them it held at the selected epoch, whose model {reports} reports. The result "
            "files' `collapse` entry says which signal and when.")


def accuracy_footnote(results: list[dict[str, Any]], reference: str | None, test_stat: str | None = None) -> list[str]:
    """Lines explaining the collapse flag, the markers and the test columns under the accuracy table."""
    lines = []
    if any(r.get("collapse") for r in results):
        lines.append(collapse_note())
    if any((r.get("floor") or {}).get("below") for r in results):
        kinds = sorted({r["floor"]["kind"] for r in results if (r.get("floor") or {}).get("below")})
        what = " or ".join({"identity": "the features' own cosine without training (identity)",
                            "untrained": "the run's own untrained model (epoch 0)"}[k] for k in kinds)
        lines.append(f"[below floor j/n]: in j of the n seeds the selected validation metric is below the no-training "
                     f"floor, {what}: training made this row worse than not training at all. The result files' "
                     "`floor` entry gives both values.")
    if any(r.get("best_epoch") == 0 and r.get("training") == "gradient" for r in results):
        lines.append("[epoch 0 j/n]: in j of the n seeds no epoch of training beat the untrained model on validation, "
                     "so the row reports the untrained model (train.select_untrained).")
    tuned = [r for r in results if r.get("tuning")]
    if tuned:
        counts = {int(r["tuning"]["trials"]["counted"]) for r in tuned}
        metric = tuned[0]["tuning"].get("metric", "the selection metric")
        uneven = (" Rows marked [tuned N < M] got fewer trials than the most tuned row (a wall-clock budget, "
                  "--seconds-per-method, ran out first): their comparison is not at equal budget."
                  if len(counts) > 1 else "")
        pruned = (" [tuned N, k pruned]: the pruner stopped k of the N trials before their last epoch."
                  if any(int(r["tuning"]["trials"].get("pruned", 0)) for r in tuned) else "")
        lines.append(f"[tuned N]: the row's settings were chosen by `harness tune`, N trials of Optuna's TPE on the "
                     f"validation split's {metric} (the first trial: the task's own settings); rows without the mark "
                     f"use the task's settings. The result files' `tuning` entry holds the study.{uneven}{pruned}")
    if fit_flag(results):
        lines.append(SETTINGS_NOTE)
    return lines if reference is None else lines + significance_footnote(results, reference, test_stat)


def significance_footnote(results: list[dict[str, Any]], reference: str, test_stat: str | None) -> list[str]:
    """The lines under an accuracy table with a ``reference``: what the markers and the four test columns say."""
    metrics = results[0]["config"]["metrics"]
    column = tested_label(metrics, test_stat)
    column = f"first column ({column})" if test_stat is None else f"{column} column"
    cells = "recall, rsum and mAP cells" if metrics.get("map") else "recall and rsum cells"
    groups = group_runs(results)
    mine = [r["seed"] for r in groups.get(reference, [])]
    welch = any(stats.choose_test([r["seed"] for r in runs], mine, "", queries=False) == stats.WELCH
                for name, runs in groups.items() if name != reference)
    tests = "paired t-test over the seeds both runs have" + (
        "; Welch's t-test for a run that shares fewer than two seeds with it" if welch else "")
    return [
        f"Cells marked * differ from {reference} at p < {stats.ALPHA} ({tests}; {cells}).",
        f"Last four columns, for each row group's {column}: Δ = mean over common seeds of run − "
        f"{reference}; 95% CI = Student-t interval of the run's mean; p (seeds, paired t) = that test over "
        f"common seeds (– below 2); p (queries, bootstrap) = paired bootstrap over test queries, "
        f"{stats.N_RESAMPLES:,} resamples per seed: largest p over seeds (seeds with p < {stats.ALPHA} / seeds "
        f"with saved per-query ranks; – without ranks)."]


def _published_rsum(published: dict[str, Any], names: list[str], name: str) -> float | None:
    """A published rsum, summed from the published recalls of the same protocol when all are given."""
    if not name.endswith("rsum"):
        return None
    recalls = [published.get(n) for n in names if _pair_recall(n)]
    known = [r for r in recalls if r is not None]
    return None if not recalls or len(known) < len(recalls) else round(sum(known), 2)


def _pair_recall(name: str) -> bool:
    """Whether ``name`` is a pair-based recall (R@k)."""
    try:
        parsed = parse_metric(name)
    except ConfigError:
        return False
    return parsed.recall_k is not None and parsed.relevance == "pair"
