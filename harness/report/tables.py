"""Paper-style tables rendered from result files only (never edited by hand).

Accuracy: one row per (relevance, method), R@k and MedR per direction, mean ± std over
seeds; against a reference run, significance markers and test columns (``harness.report.stats``).
Timing: per-step train time, whole-test retrieval time split into its parts, peak memory per
phase, and each method's step and test time relative to a reference.
"""
from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tabulate import tabulate

from harness.config.plan import resolve_reference
from harness.config.spec import MetricSpec, TrainSpec
from harness.errors import ConfigError, unknown
from harness.report import model, stats
from harness.report.model import group_runs
from harness.run import contention
from harness.store.io import write_text_atomic

FORMATS = {"md": "github", "tex": "latex_booktabs"}
ALPHA = 0.05  # significance level of the markers and of the bootstrap seed count
N_RESAMPLES = 10_000
_TEX_ESCAPES = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\^{}", "<": r"$<$", ">": r"$>$"}


def mean_std(values: list[float], digits: int = 2) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def accuracy_rows(results: list[dict[str, Any]], reference: str | None = None,
                  test_stat: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the accuracy table (plus published reference rows when the task has them).

    One row group per (fold protocol, relevance); results on a source marked ``timing_only``
    (random data in a real dataset's shapes) say so in every row. With a ``reference`` run,
    recall and mAP cells of other runs that differ from it (paired t-test over seeds, p < ``ALPHA``)
    get a ``*``, and four columns test one column of each row group: the statistic ``test_stat``
    (e.g. 'mAP'; default: the first, R@k) (see :func:`accuracy_footnote`).
    """
    groups = group_runs(results)
    _check_reference(groups, reference)
    first = results[0]
    metrics = first["config"]["metrics"]
    stat_names = column_stats(metrics)
    tested = tested_column(metrics, test_stat)
    columns = [(f"{d} {s}", d, s) for d in metrics["directions"] for s in stat_names]
    header = ["error type", "method", "seeds"] + [c[0] for c in columns] + (["rsum"] if metrics.get("rsum") else [])
    header += [f"Δ vs {reference}", "95% CI", "p (seeds, paired t)", "p (queries, bootstrap)"] if reference else []
    published_runs = first.get("reference") or {}
    note = " (timing only: random data)" if any((r.get("dataset") or {}).get("timing_only") for r in results) else ""
    rows = []
    for n_folds in metrics.get("folds", [1]):
        for relevance in metrics["relevance"]:
            label = f"{relevance}-based{'' if n_folds == 1 else f', {n_folds} folds (mean)'}{note}"
            names = _metric_names(columns, metrics, n_folds, relevance)
            for name, runs in groups.items():
                ref_runs = groups[reference] if reference and name != reference else None
                cells = [_accuracy_cell(runs, m, ref_runs) for m in names]
                extra = _significance_cells(runs, ref_runs, names[tested]) if reference else []
                rows.append([label, name + tuned_flag(runs, results) + _skipped_note(runs, names[tested])
                             + collapse_flag(runs) + floor_flag(runs) + fit_flag(runs), str(len(runs)),
                             *cells, *extra])
            for name, published in (published_runs.get("methods") or {}).items():
                cells = [_published(published.get(m, _published_rsum(published, names, m))) for m in names]
                if any(c != "–" for c in cells):
                    rows.append([label, f"{name} ({published_runs.get('label', 'published')})", "–", *cells,
                                 *(["–"] * 4 if reference else [])])
    return header, rows


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
    """Index, among a row group's metric names (:func:`_metric_names`: every direction's statistics, then rsum),
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


def _accuracy_cell(runs: list[dict[str, Any]], metric: str, ref_runs: list[dict[str, Any]] | None) -> str:
    """Mean ± std of ``metric``; a ``*`` when it is a recall that differs from ``ref_runs`` over seeds."""
    values = [r["metrics"][metric] for r in runs if metric in r["metrics"]]  # none where a time budget stopped it
    text = mean_std(values, 1 if metric.endswith("MedR") else 2)
    if ref_runs is None or not stats.query_testable(metric):
        return text
    test = stats.paired_seed_test(stats.seed_values(runs, metric), stats.seed_values(ref_runs, metric))
    return f"{text}*" if test.p is not None and test.p < ALPHA else text


def _significance_cells(runs: list[dict[str, Any]], ref_runs: list[dict[str, Any]] | None, metric: str) -> list[str]:
    """Δ, 95% CI, seed-level p and query-level p of ``metric`` (only the CI for the reference itself)."""
    ci = stats.summarize(list(stats.seed_values(runs, metric).values())).ci
    ci_text = f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "–"
    if ref_runs is None:
        return ["–", ci_text, "–", "–"]
    cmp = stats.compare_runs(runs, ref_runs, metric, n_resamples=N_RESAMPLES)
    diff = "–" if cmp.seeds.diff is None else f"{cmp.seeds.diff:+.2f}"
    boot = "–" if cmp.p_bootstrap is None else f"{_p(cmp.p_bootstrap)} ({cmp.n_significant}/{len(cmp.bootstrap)})"
    return [diff, ci_text, _p(cmp.seeds.p), boot]


def _p(p: float | None) -> str:
    return "–" if p is None else stats.p_text(p)


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


def collapse_flag(runs: list[dict[str, Any]]) -> str:
    """' [warned j/n]' when j of the run's n seeds recorded a collapse (:mod:`harness.run.collapse`), with
    ' [collapsed k/n; warned j/n]' when in k of them it held at the selected epoch; else ''."""
    records = [r["collapse"] for r in runs if r.get("collapse")]
    at_best = sum(1 for c in records if c.get("at_best_epoch", True))
    parts = [f"collapsed {at_best}/{len(runs)}"] * bool(at_best) + [f"warned {len(records)}/{len(runs)}"]
    return f" [{'; '.join(parts)}]" if records else ""


def accuracy_footnote(results: list[dict[str, Any]], reference: str | None, test_stat: str | None = None) -> list[str]:
    """Lines explaining the collapse flag, the markers and the test columns under the accuracy table."""
    lines = []
    if any(r.get("collapse") for r in results):
        lines.append("[warned j/n]: in j of the n seeds a collapse signal (a loss term at its collapsed value, or the "
                     "validation selection metric at chance) held for `collapse_patience` epochs in a row and the run "
                     "warned; [collapsed k/n]: in k of them it held at the selected epoch, "
                     "whose model the row reports. "
                     "The result files' `collapse` entry says which signal and when.")
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
    if any(r.get("warnings") for r in results):
        lines.append("[settings warned]: the run's settings do not fit its data (a batch or SwAMP queue at least as "
                     "large as the training set, a k of R@k that reaches the number of items a query ranks); the "
                     "result files' `warnings` say which, and the run printed them before training.")
    if reference is None:
        return lines
    metrics = results[0]["config"]["metrics"]
    column = tested_label(metrics, test_stat)
    column = f"first column ({column})" if test_stat is None else f"{column} column"
    cells = "recall, rsum and mAP cells" if metrics.get("map") else "recall and rsum cells"
    return lines + [
        f"Cells marked * differ from {reference} at p < {ALPHA} "
        f"(paired t-test over the seeds both runs have; {cells}).",
        f"Last four columns, for each row group's {column}: Δ = mean over common seeds of run − "
        f"{reference}; 95% CI = Student-t interval of the run's mean; p (seeds, paired t) = that test over "
        f"common seeds (– below 2); p (queries, bootstrap) = paired bootstrap over test queries, "
        f"{N_RESAMPLES:,} resamples per seed: largest p over seeds (seeds with p < {ALPHA} / seeds with saved "
        f"per-query ranks; – without ranks)."]


def _metric_names(columns: list[tuple[str, str, str]], metrics: dict[str, Any], n_folds: int,
                  relevance: str) -> list[str]:
    """Result-file names of the accuracy columns for one fold protocol and relevance."""
    fold = "" if n_folds == 1 else f"{n_folds}folds/"
    rel = "" if relevance == "pair" else "class_"
    names = [f"{fold}{d}/{rel}{s}" for _, d, s in columns]
    return names + ([f"{fold}rsum"] if metrics.get("rsum") else [])


def _published_rsum(published: dict[str, Any], names: list[str], name: str) -> float | None:
    """A published rsum, summed from the published recalls of the same protocol when all are given."""
    if not name.endswith("rsum"):
        return None
    recalls = [published.get(n) for n in names if "/R@" in n and "class_" not in n]
    known = [r for r in recalls if r is not None]
    return None if not recalls or len(known) < len(recalls) else round(sum(known), 2)


def _published(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def timing_values(runs: list[dict[str, Any]], key: str, field: str = "median_s", scale: float = 1.0) -> list[float]:
    return [r["profile"]["timing"][key][field] * scale for r in runs if key in r["profile"]["timing"]]


def _memory(runs: list[dict[str, Any]], phase: str, field: str) -> list[float]:
    return [r["profile"]["memory"][phase][field] for r in runs if field in r["profile"]["memory"].get(phase, {})]


@dataclass(frozen=True)
class TimingTable:
    """The timing/memory table with what its readers need besides the text: the run of each row and which columns
    hold the published times (so that nothing reads them back from a header or a row name)."""

    header: list[str]
    rows: list[list[str]]
    runs: list[str]  # the run name of each row
    published: list[int]  # indices of the published columns
    ratios: dict[int, int | None] = field(default_factory=dict)  # our ratio columns -> the paper's ratio of the same


def timing_rows(results: list[dict[str, Any]], reference: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the timing/memory table (:func:`timing_table`)."""
    table = timing_table(results, reference)
    return table.header, table.rows


def timing_table(results: list[dict[str, Any]], reference: str | None = None) -> TimingTable:
    """The timing/memory table: one row per (method, test protocol).

    Ratios are against ``reference.timing.relative_to`` when that method ran, else the run
    ``reference`` (the accuracy table's), else the first method listed.
    A protocol of n folds reports its times per fold (total / n), as the
    SwAMP paper does for MS-COCO 1K. Published timings (``reference.timing``) fill labelled
    columns of their own, with the same ratios.
    """
    groups = group_runs(results)
    published = (results[0].get("reference") or {}).get("timing") or {}
    base = baseline_run(groups, published.get("relative_to"), reference)
    cuda = any("cuda_max_allocated_mib" in r["profile"]["memory"].get("train", {}) for r in results)
    mem_field, mem_label = ("cuda_max_allocated_mib", "CUDA alloc") if cuda else ("cpu_peak_rss_mib", "RSS")
    header = ["method", "test protocol", "train step ms (median)", "p90 ms", "epoch s", f"step / {base}",
              "test s", "encode s", "score s", "rank s", f"test / {base}",
              f"train peak MiB ({mem_label})", f"test peak MiB ({mem_label})"]
    pair_pass = any(k.startswith("test_loss") for r in results for k in r["profile"]["timing"])
    if pair_pass:  # a run timed its released evaluation's pass over the test pairs (SCAN's scorer: original)
        header[11:11] = ["as released: test s", "pair encode s", "loss s"]
    ref_label = published.get("label", "published")
    columns: list[int] = []
    ratios: dict[int, int | None] = {5: None, 10: None}  # step / base, test / base
    if published.get("methods"):
        columns = list(range(len(header), len(header) + 4))
        ratios = {5: columns[1], 10: columns[3]}
        header += [PUBLISHED_COLUMN.format(label=ref_label, what=what)
                   for what in ("step s", f"step / {base}", "test s", f"test / {base}")]
    rows, names = [], []
    for tag in _protocol_tags(results):
        for name, runs in groups.items():
            same = baseline_run(groups, groups[base][0]["method"], precision=precision_of(runs[0]))
            row = _timing_row(name + contention_flag(runs), runs, groups[same], tag, mem_field)
            if pair_pass:
                row[11:11] = _pair_pass_cells(runs, tag)
            rows.append(row + _published_cells(published, runs[0]["method"], groups[base][0]["method"], tag))
            names.append(name)
    return TimingTable(header, rows, names, columns, ratios)


PUBLISHED_COLUMN = "{label}: {what}"  # the header of a published timing column ('paper: test s')


def precision_of(result: dict[str, Any]) -> str:
    precision: str = (result.get("config") or {}).get("train", {}).get("precision", TrainSpec.precision)
    return precision


def _protocol_tags(results: list[dict[str, Any]]) -> list[str]:
    """Timing-key suffixes of the test protocols present ('' whole split, '@5folds' five folds)."""
    tags: list[str] = []
    for r in results:
        for key in r["profile"]["timing"]:
            if key.startswith("test_total") and key[len("test_total"):] not in tags:
                tags.append(key[len("test_total"):])
    return tags


def baseline_run(groups: dict[str, list[dict[str, Any]]], method: str | None, run: str | None = None,
              precision: str = TrainSpec.precision) -> str:
    """Run name of the method ratios refer to: ``method`` when it ran (under ``precision`` when it ran under
    several), else the run ``run``, else the first run."""
    runs_of = [name for name, runs in groups.items() if runs[0]["method"] == method]
    same = [name for name in runs_of if precision_of(groups[name][0]) == precision]
    return (same or runs_of or [run if run in groups else next(iter(groups))])[0]


def _timing_row(name: str, runs: list[dict[str, Any]], base: list[dict[str, Any]], tag: str,
                mem_field: str) -> list[str]:
    n = model.folds(tag)
    step = timing_values(runs, "train_step", scale=1e3)
    test, est = test_seconds(runs, "total", tag)
    parts = [_estimated_cell(*test_seconds(runs, part, tag), 3) for part in ("encode", "score", "rank")]
    scored = [r["profile"]["extrapolated"][tag]["fraction_scored"] for r in runs if model.extrapolated(r, tag)]
    if scored:
        parts[1] += f" ({100 * statistics.mean(scored):.2g}% scored)"
    return [name, ("whole test split" if n == 1 else f"{n} folds, per fold") + _streamed_flag(runs, tag),
            mean_std(step), mean_std(timing_values(runs, "train_step", "p90_s", 1e3)),
            mean_std(timing_values(runs, "train_epoch")),
            model.timing_ratio(runs, base, "step").cell(), _estimated_cell(test, est, 3), *parts,
            model.timing_ratio(runs, base, "test", tag).cell(),
            mean_std(_memory(runs, "train", mem_field), 0), mean_std(_memory(runs, f"test{tag}", mem_field), 0)]


def _streamed_flag(runs: list[dict[str, Any]], tag: str) -> str:
    """' [streamed]' (or ' [streamed j/n]') when runs ranked the protocol on the streaming path, whose score and rank
    times interleave (docs/measurement.md); '' for the whole-matrix path and for files from before the paths."""
    streamed = sum(_streamed(r, tag) for r in runs)
    if not streamed:
        return ""
    return " [streamed]" if streamed == len(runs) else f" [streamed {streamed}/{len(runs)}]"


def _streamed(result: dict[str, Any], tag: str) -> bool:
    """Whether the run ranked protocol ``tag`` on the streaming path."""
    return bool(((result["profile"].get("test_path") or {}).get(tag) or {}).get("path") == "stream")


def search_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line per run and direction with an approximate search (test.search) beside its exact row."""
    lines = []
    for r in results:
        record = r.get("search")
        if not record:
            continue
        settings = ", ".join(f"{k}={v}" for k, v in record.get("settings", {}).items())
        head = f"Approximate search ({record['type']}: {settings}), {r['run_name']} seed{r['seed']}"
        if "skipped" in record:
            lines.append(f"{head}: not run, {record['skipped']}.")
            continue
        for direction, row in record["directions"].items():
            recall = next((f"{k.replace('_', ' ')} {v:.2f}%" for k, v in row.items() if k.startswith("knn_recall")), "")
            cuts = ", ".join(f"{k} {v:.2f} (exact {row['exact_' + k]:.2f}, lost {row['lost_' + k]:.2f})"
                             for k, v in row.items() if "R@" in k and not k.startswith(("exact_", "lost_")))
            lines.append(f"{head}, {direction}: build {row['build_s']:.3f} s, "
                         f"query {row['query_s']:.3f} s (exact top k "
                         f"{row['exact_top_k_s']:.3f} s), index {row['index_mib']:.1f} MiB, {recall}; {cuts}.")
    return lines


def _pair_pass_cells(runs: list[dict[str, Any]], tag: str) -> list[str]:
    """Per-fold seconds of the released evaluation (its pass over the test pairs, then score and rank), of
    that pass's encoding of every pair and of its loss on every batch; '–' for runs without the pass."""
    total, encode, loss, estimated = [], [], [], False
    for r in runs:
        (e, _), (lo, _), (sc, est), (rk, _) = (test_seconds([r], part, tag)
                                                for part in ("pair_encode", "loss", "score", "rank"))
        if e and lo and sc:  # a run stopped by its time budget has an extrapolated score and no rank
            total.append(e[0] + lo[0] + sc[0] + sum(rk))
            encode.append(e[0])
            loss.append(lo[0])
            estimated |= est
    if not total:
        return ["–"] * 3
    return [_estimated_cell(total, estimated, 3), mean_std(encode, 3), mean_std(loss, 3)]


def test_seconds(runs: list[dict[str, Any]], part: str, tag: str) -> tuple[list[float], bool]:
    """Per-fold seconds of test part ``part`` (encode, score, rank, total) of every run, and whether any is
    extrapolated (:func:`harness.report.model.test_part_seconds`)."""
    values, estimated = [], False
    for r in runs:
        value, est = model.test_part_seconds(r, part, tag)
        if value is not None:
            values.append(value)
            estimated |= est
    return values, estimated


def _estimated_cell(values: list[float], estimated: bool, digits: int) -> str:
    return ("≈" if estimated and values else "") + mean_std(values, digits)


def contention_flag(runs: list[dict[str, Any]]) -> str:
    """' [contended j/n]' when in j of the n seeds a timed phase ran while other work kept the machine's cores
    busy (:mod:`harness.run.contention`); else ''."""
    hit = sum(1 for r in runs if contention.contended_phases(r))
    return f" [contended {hit}/{len(runs)}]" if hit else ""


def timing_footnote(results: list[dict[str, Any]]) -> list[str]:
    """Lines under the timing table: contended timings, how ratios pair runs of several precisions, what ≈ cells
    mean."""
    lines = []
    if any(contention.contended_phases(r) for r in results):
        lines.append(f"[contended j/n]: in j of the n seeds a timed phase ran while {contention.RULE}; those times "
                     "and every ratio that involves them measure the machine as much as the method: re-run them on "
                     "a quiet machine. The result files' profile.contention gives each phase's figures.")
    if len({precision_of(r) for r in results}) > 1:
        lines.append("Ratios compare runs of the same train.precision.")
    if any(k.startswith("test_loss") for r in results for k in r["profile"]["timing"]):
        lines.append("As released: the method's released evaluation, timed in full: it encodes every test pair as its "
                     "data loader yields them (an image once per caption: pair encode s) and computes the training "
                     "loss on every batch of pairs (loss s) before scoring and ranking; as released = pair encode + "
                     "loss + score + rank. Test s beside it is the protocol's own cost (each item encoded once, no "
                     "loss).")
    if any(_streamed(r, tag) for r in results for tag in (r["profile"].get("test_path") or {})):
        lines.append("[streamed]: the protocol was ranked on the streaming path (test.path): "
                     "blocks of the score matrix "
                     "are scored and ranked in turn, so score s is the time inside the scorer over all blocks (some "
                     "scored twice) and rank s the rest of that loop; rows without the mark formed the whole score "
                     "matrix first. See docs/measurement.md.")
    lines += search_lines(results)
    if not any(r["profile"].get("extrapolated") for r in results):
        return lines
    return lines + ["≈: extrapolated. The method's time_budget_s stopped the test scoring after the share of the score "
            "matrix given in the score cell; score time = measured time / share scored, test time = measured "
            "encoding + extrapolated scoring. Nothing was ranked, so such a run has no accuracy."]


def _published_cells(published: dict[str, Any], method: str, base: str, tag: str) -> list[str]:
    """Published step and test seconds of ``method`` and their ratios to ``base``'s (empty without a block)."""
    if not published.get("methods"):
        return []
    mine, theirs = published["methods"].get(method) or {}, published["methods"].get(base) or {}
    cells = []
    for key in ("train_step_s", f"test_s{tag}"):
        value, ref = mine.get(key), theirs.get(key)
        cells += [_published(value), f"{value / ref:.1f}×" if value is not None and ref else "–"]
    return cells


def hardware_line(results: list[dict[str, Any]]) -> str:
    """One line naming the machine(s), thread count, software and numeric precision(s) the results came from;
    runs that differ only in precision share one entry ('precision fp32, bf16')."""
    seen: dict[tuple[str, str], list[str]] = {}  # (machine and software, processes) -> precisions
    for r in results:
        hw, v = r["environment"]["hardware"], r["environment"]["versions"]
        gpu = hw.get("gpu") or {}
        threads = f"{hw['torch_threads']} torch threads"
        where = (f"{gpu['name']} (driver {gpu.get('driver', '?')}; host {hw['cpu']}, {threads})" if gpu.get("name")
                 else f"{hw['cpu']} ({hw['cores']} cores, {threads})")
        cuda = f", CUDA {v['cuda']}" if gpu.get("name") and v.get("cuda") else ""
        world = (r.get("distributed") or {}).get("world_size", 1)
        processes = f" × {world} processes ({r['distributed']['backend']})" if world > 1 else ""
        precisions = seen.setdefault((f"{where}; torch {v['torch']}{cuda}; device {hw['device']}", processes), [])
        if precision_of(r) not in precisions:
            precisions.append(precision_of(r))
    return " | ".join(f"{machine}; precision {', '.join(p)}{processes}" for (machine, processes), p in seen.items())


def table_data(results: list[dict[str, Any]], reference: str | None, test_stat: str | None = None
                ) -> dict[str, tuple[list[str], list[list[str]], list[str]]]:
    """Header, rows and footnote lines of both tables, computed once for every format."""
    reference = resolve_reference(reference, ((r["run_name"], r["method"]) for r in results))
    header, rows = accuracy_rows(results, reference, test_stat)
    return {"accuracy": (header, rows, accuracy_footnote(results, reference, test_stat)),
            "timing": (*timing_rows(results, reference), timing_footnote(results))}


def format_table(header: list[str], rows: list[list[str]], footnote: list[str], fmt: str) -> str:
    """One table in ``fmt``, footnote lines below it (paragraphs in md, a small-print paragraph in tex)."""
    text: str = tabulate(rows, headers=header, tablefmt=FORMATS.get(fmt, fmt), disable_numparse=True)
    if not footnote:
        return text
    if fmt == "md":
        return text + "\n\n" + "\n\n".join(footnote)
    if fmt == "tex":
        escaped = ["".join(_TEX_ESCAPES.get(ch, ch) for ch in line) for line in footnote]
        return text + "\n\\par\\smallskip{\\footnotesize " + "\\newline\n".join(escaped) + "\\par}"
    return text + "\n" + "\n".join(footnote)


def render(results: list[dict[str, Any]], fmt: str, reference: str | None = None,
           test_stat: str | None = None) -> dict[str, str]:
    """Both tables as text in ``fmt`` ('md', 'tex' or a tabulate format such as 'simple').

    ``reference`` names a run to test the others against (markers, four test columns of the
    statistic ``test_stat`` and a footnote in the accuracy table); an unknown name raises ConfigError.
    """
    return {name: format_table(*data, fmt) for name, data in table_data(results, reference, test_stat).items()}


def write_tables(results: list[dict[str, Any]], folder: Path, reference: str | None = None,
                 test_stat: str | None = None, split: str = "test") -> list[Path]:
    """Write accuracy/timing tables as Markdown and LaTeX into ``folder``; return the paths. ``split='val'``
    writes only ``validation.md``/``.tex``: the accuracy table of :func:`validation_view`."""
    files = table_files(results, folder, reference=reference, test_stat=test_stat, split=split)
    for path, text in files.items():
        write_text_atomic(path, text)
    return [*files, record_options(folder, TableOptions(reference, test_stat, split))]


def table_files(results: list[dict[str, Any]], folder: Path, reference: str | None = None,
                test_stat: str | None = None, split: str = "test",
                data: dict[str, tuple[list[str], list[list[str]], list[str]]] | None = None) -> dict[Path, str]:
    """The files :func:`write_tables` writes (path -> text), headed by the command that writes them; ``data``:
    the test split's :func:`table_data` when the caller has it already."""
    task = results[0]
    origin = (task.get("dataset") or {}).get("origin")
    caption = (f"Task {task['task']} v{task['task_version']}; {len(results)} result files; "
               f"{hardware_line(results)}." + (f" Data: {origin}." if origin else ""))
    if split == "val":
        caption += " Validation split, at each run's selected epoch."
        data = {"validation": table_data(validation_view(results), None)["accuracy"]}
    elif data is None:
        data = table_data(results, reference, test_stat)
    command = f"python -m harness table {folder}" + (f" --reference {reference}" if reference else "") + \
        (f" --test-stat {test_stat}" if test_stat else "") + (" --split val" if split == "val" else "") + " --write"
    files = {}
    for ext in ("md", "tex"):
        for name, table in data.items():
            note = f"<!-- generated by `{command}` -->\n{caption}\n\n" if ext == "md" \
                else f"% generated by {command}\n% {caption}\n"
            files[folder / f"{name}.{ext}"] = note + format_table(*table, ext) + "\n"
    return files


# --- which tables a folder holds, and with which options they were written --------------------------------



@dataclass(frozen=True)
class TableOptions:
    """The options of ``harness table`` that change what a table says."""

    reference: str | None = None
    test_stat: str | None = None
    split: str = "test"


OPTIONS_FILE = "tables.json"  # beside the tables: the options each split's tables were written with


def recorded_options(folder: Path) -> TableOptions | None:
    """The options ``folder``'s tables were written with (its test tables', else its validation table's), from the
    record :func:`write_tables` keeps beside them; None when there is none."""
    path = folder / OPTIONS_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {path} ({err}); delete it and write the tables again "
                          f"(python -m harness table {folder} --write)") from None
    for split in ("test", "val"):
        if isinstance(record, dict) and isinstance(record.get(split), dict):
            options = record[split]
            return TableOptions(options.get("reference"), options.get("test_stat"), split)
    return None


def record_options(folder: Path, options: TableOptions) -> Path:
    """Keep ``options`` as the record of the tables of ``options.split`` in ``folder`` (the other split's stays)."""
    path = folder / OPTIONS_FILE
    try:
        record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        record = {}
    record = record if isinstance(record, dict) else {}
    record[options.split] = {"reference": options.reference, "test_stat": options.test_stat}
    write_text_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return path


def recorded_for(folder: Path, results: list[dict[str, Any]]) -> TableOptions | None:
    """:func:`recorded_options` of ``folder`` when they still apply to ``results``: their reference (None, or
    one that still names a run, resolved to its run name); None when there are none or the reference is gone."""
    recorded = recorded_options(folder)
    if recorded is None:
        return None
    try:
        reference = resolve_reference(recorded.reference, ((r["run_name"], r["method"]) for r in results))
    except ConfigError:
        return None
    return TableOptions(reference, recorded.test_stat, recorded.split)


def table_folders(results: list[dict[str, Any]]) -> dict[Path, list[dict[str, Any]]]:
    """Result dicts (as :func:`harness.store.schema.load_results` reads them) grouped by the folder their
    tables belong in: the folder holding each run's folder (``<out>/<task>`` for ``run --out OUT``)."""
    folders: dict[Path, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        folders[model.owner(r)].append(r)
    return dict(sorted(folders.items()))
