"""The timing and memory table, rendered from result files only: per run and test protocol, the training step (median
and p90), the epoch, the whole test retrieval split into its parts, peak memory per phase, each run's step and test
time as a multiple of a reference run's (:func:`harness.report.model.timing_ratio`), published times beside ours where
the task has them, the flags that qualify a row ([contended j/n], [streamed]) and the lines under the table. Each
cell carries the number it sorts by (:mod:`harness.report.cells`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from harness.config.spec import TrainSpec
from harness.report import cells as cells_
from harness.report import model, stats
from harness.report.cells import EMPTY, Cell, Table, mean_std, number
from harness.report.model import group_runs
from harness.run import contention

PUBLISHED_COLUMN = "{label}: {what}"  # the header of a published timing column ('paper: test s')


@dataclass(frozen=True)
class TimingTable(Table):
    """The timing/memory table with what its readers need besides the text: the run of each row and which columns
    hold the published times (so that nothing reads them back from a header or a row name)."""

    runs: list[str] = field(default_factory=list)  # the run name of each row
    published: list[int] = field(default_factory=list)  # indices of the published columns
    ratios: dict[int, int | None] = field(default_factory=dict)  # our ratio columns -> the paper's ratio of the same


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
            same = baseline_run(groups, groups[base][0]["method"], precision=model.precision(runs[0]))
            row = _timing_row(name + contention_flag(runs), runs, groups[same], tag, mem_field)
            if pair_pass:
                row[11:11] = _pair_pass_cells(runs, tag)
            rows.append(row + _published_cells(published, runs[0]["method"], groups[base][0]["method"], tag))
            names.append(name)
    return TimingTable(header, rows, timing_footnote(results), runs=names, published=columns, ratios=ratios)


def timing_rows(results: list[dict[str, Any]], reference: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the timing/memory table (:func:`timing_table`)."""
    table = timing_table(results, reference)
    return table.header, table.rows


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
    same = [name for name in runs_of if model.precision(groups[name][0]) == precision]
    return (same or runs_of or [run if run in groups else next(iter(groups))])[0]


def _timing_row(name: str, runs: list[dict[str, Any]], base: list[dict[str, Any]], tag: str,
                mem_field: str) -> list[str]:
    """One row of the timing table: a run's times on one test protocol and its ratios to ``base``'s."""
    n = model.folds(tag)
    step = timing_values(runs, "train_step", scale=1e3)
    test, est = test_seconds(runs, "total", tag)
    parts = [_estimated_cell(*test_seconds(runs, part, tag), 3) for part in ("encode", "score", "rank")]
    scored = [r["profile"]["extrapolated"][tag]["fraction_scored"] for r in runs if model.extrapolated(r, tag)]
    if scored:
        parts[1] += f" ({100 * stats.summarize(scored).mean:.2g}% scored)"
    return [name, ("whole test split" if n == 1 else f"{n} folds, per fold") + _streamed_flag(runs, tag),
            mean_std(step), mean_std(timing_values(runs, "train_step", "p90_s", 1e3)),
            mean_std(timing_values(runs, "train_epoch")),
            model.timing_ratio(runs, base, "step").cell(), _estimated_cell(test, est, 3), *parts,
            model.timing_ratio(runs, base, "test", tag).cell(),
            mean_std(_memory(runs, "train", mem_field), 0), mean_std(_memory(runs, f"test{tag}", mem_field), 0)]


def timing_values(runs: list[dict[str, Any]], key: str, field: str = "median_s", scale: float = 1.0) -> list[float]:
    """Every seed's ``field`` of timing ``key`` (e.g. the train step's median), times ``scale``."""
    return [r["profile"]["timing"][key][field] * scale for r in runs if key in r["profile"]["timing"]]


def _memory(runs: list[dict[str, Any]], phase: str, field: str) -> list[float]:
    """Every seed's peak memory ``field`` (MiB) in ``phase``."""
    return [r["profile"]["memory"][phase][field] for r in runs if field in r["profile"]["memory"].get(phase, {})]


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


def _estimated_cell(values: list[float], estimated: bool, digits: int) -> Cell:
    """Mean ± std of ``values``, marked '≈' when extrapolated from a time budget."""
    cell = mean_std(values, digits)
    return Cell(("≈" if estimated and values else "") + cell, cell.key)


def _pair_pass_cells(runs: list[dict[str, Any]], tag: str) -> list[Cell]:
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
        return [Cell(EMPTY)] * 3
    return [_estimated_cell(total, estimated, 3), mean_std(encode, 3), mean_std(loss, 3)]


def _published_cells(published: dict[str, Any], method: str, base: str, tag: str) -> list[str]:
    """Published step and test seconds of ``method`` and their ratios to ``base``'s (empty without a block)."""
    if not published.get("methods"):
        return []
    mine, theirs = published["methods"].get(method) or {}, published["methods"].get(base) or {}
    cells: list[str] = []
    for key in ("train_step_s", f"test_s{tag}"):
        value, ref = mine.get(key), theirs.get(key)
        cells += [cells_.published(value), number(value / ref if value is not None and ref else None, ".1f", after="×")]
    return cells


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
    if len({model.precision(r) for r in results}) > 1:
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
    lines += search_lines(results) + extraction_lines(results)
    if not any(r["profile"].get("extrapolated") for r in results):
        return lines
    return lines + ["≈: extrapolated. The method's time_budget_s stopped the test scoring after the share of the score "
            "matrix given in the score cell; score time = measured time / share scored, test time = measured "
            "encoding + extrapolated scoring. Nothing was ranked, so such a run has no accuracy."]


def extraction_lines(results: list[dict[str, Any]]) -> list[str]:
    """One line for runs whose source extracted frozen features (``dataset.extraction``: a pretrained backbone's
    features, computed once and cached): the extraction is a phase of its own, outside the columns above, so the
    line gives its wall time and peak memory in the runs that computed the features and in those that read them
    from the cache."""
    found = [(r["dataset"]["extraction"]) for r in results if (r.get("dataset") or {}).get("extraction")]
    if not found:
        return []
    made = [e for e in found if int(e.get("hits", 0)) < len(e.get("entries") or {})]
    read = [e for e in found if e not in made]

    def spread(group: list[dict[str, Any]]) -> str:
        seconds = [float(e["seconds"]) for e in group]
        peak = max(float(e.get("peak_rss_mib", 0.0)) for e in group)
        low, high = f"{min(seconds):.1f}", f"{max(seconds):.1f}"
        shown = low if low == high else f"{low}–{high}"
        return f"{shown} s (peak {peak:,.0f} MiB)"

    parts = ([f"{len(made)} run(s) computed the features: {spread(made)}"] if made else []) + \
        ([f"{len(read)} read them from the cache: {spread(read)}"] if read else [])
    return ["Feature extraction, a phase of its own outside the columns above (a frozen backbone's features, computed "
            "once per data file, backbone, weights and preprocessing and kept in the feature cache): "
            + "; ".join(parts) + "."]


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
