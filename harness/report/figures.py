"""The figures of a result set's page, drawn from its result files: learning curves with a band over seeds, train
step and test times on log scales, each run's time ratios beside the paper's, sweeps, and the tuning studies."""
from __future__ import annotations

import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report import model, plot, stats, timing, tuning
from harness.report.sets import Figure, ResultSet, data_settings, relative
from harness.report.views import sort_key


def save_figure(fig: Any, path: Path, dpi: int = 80) -> None:
    """SVG (no date, fixed ids) or PNG (``dpi``, no software stamp), so that an unchanged figure is an unchanged
    file."""
    import matplotlib

    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.hashsalt": "swamp-bench"}):
        if path.suffix == ".svg":
            fig.savefig(path, metadata={"Date": None})
        else:
            fig.savefig(path, dpi=dpi, metadata={"Software": None})


def _by_epoch(runs: list[dict[str, Any]], key: str) -> tuple[list[int], list[float], list[float]]:
    """Epochs, mean and std over seeds of ``key`` in the runs' histories (epochs that every seed reached)."""
    per_seed = [{h["epoch"]: h[key] for h in r.get("history") or [] if key in h and h[key] is not None} for r in runs]
    per_seed = [s for s in per_seed if s]
    if not per_seed:
        return [], [], []
    epochs = sorted(set.intersection(*(set(s) for s in per_seed)))
    summaries = [stats.summarize([s[e] for s in per_seed]) for e in epochs]
    return epochs, [x.mean for x in summaries], [x.std or 0.0 for x in summaries]


MAX_LINES = 6  # lines per panel of the learning curves: more runs get more rows of panels


def curve_groups(rs: ResultSet, names: list[str] | None = None) -> list[list[str]]:
    """The runs (``names``, default all) of the learning curves in panels of at most MAX_LINES lines: runs of one
    method together, sweeps in the order of their setting, the runs spread evenly over as few rows as will do."""
    names = sorted(rs.runs if names is None else names, key=lambda n: (rs.runs[n][0]["method"], sort_key(n)))
    rows = -(-len(names) // MAX_LINES)
    sizes = [len(names) // rows + (i < len(names) % rows) for i in range(rows)]
    return [names[sum(sizes[:i]):sum(sizes[:i + 1])] for i in range(rows)]


def curves_figure(rs: ResultSet) -> Any | None:
    """Validation selection metric and training loss per epoch, one line per run, mean ± std over seeds; one row
    of panels per group of at most MAX_LINES runs, its legend beside it. Sets on random data (timing only) get
    the loss alone: their accuracy means nothing."""
    from matplotlib.figure import Figure as MplFigure

    keys = [("loss", "training loss")]
    if not rs.timing_only:
        keys.insert(0, (f"val/{rs.select}", f"validation {rs.select}"))
    lines = {name: [_by_epoch(runs, key) for key, _ in keys] for name, runs in rs.runs.items()}
    groups = curve_groups(rs, [name for name in rs.runs if any(len(series[0]) > 1 for series in lines[name])])
    if not groups:
        return None
    fig = MplFigure(figsize=(11 if len(keys) > 1 else 8, 0.6 + 2.6 * len(groups)), layout="constrained")
    axes = fig.subplots(len(groups), len(keys), squeeze=False)
    for row, group in zip(axes, groups):
        for (name, colour) in zip(group, _colours(len(group))):
            n = len(rs.runs[name])
            for ax, (epochs, means, stds) in zip(row, lines[name]):
                if len(epochs) < 2:
                    continue
                ax.plot(epochs, means, color=colour, label=f"{name} (n={n})", linewidth=1.2)
                if n > 1:
                    lo = [m - s for m, s in zip(means, stds)]
                    hi = [m + s for m, s in zip(means, stds)]
                    ax.fill_between(epochs, lo, hi, color=colour, alpha=0.2, linewidth=0)
        for ax, (_, label) in zip(row, keys):
            ax.set_ylabel(label, fontsize=8)
            ax.grid(alpha=0.3)
            ax.tick_params(labelsize=7)
        row[-1].legend(*_handles(row), loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, fontsize=7)
    for ax in axes[-1]:
        ax.set_xlabel("epoch")
    fig.suptitle(f"{rs.name}: per epoch, mean ± std over seeds{'; random data: loss only' if rs.timing_only else ''}",
                 fontsize=10)
    return fig


def _handles(row: Any) -> tuple[list[Any], list[str]]:
    """The legend entries of a row of panels (each run once)."""
    seen: dict[str, Any] = {}
    for ax in row:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, handle)
    return list(seen.values()), list(seen)


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if n <= 10 else "tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


def _log_bars(ax: Any, ys: Sequence[float], values: list[float], estimated: list[bool], floor: float,
              height: float = 0.8, colour: str = "C0", label: str = "", hatched: bool = False) -> None:
    """Horizontal bars on a log scale from ``floor`` (below the smallest value), each labelled with its value in
    human numbers ('≈' and hatched when extrapolated; every bar hatched when ``hatched``)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    bars = ax.barh(ys, [v - floor if v > 0 else 0.0 for v in values], left=floor, height=height, color=colour,
                   label=label or None)
    for bar, value, est in zip(bars, values, estimated):
        if est or hatched:
            bar.set_hatch("//")
            bar.set_facecolor("white")
            bar.set_edgecolor(colour)
        if value > 0:
            ax.annotate(f"{'≈' if est else ''}{plot.human(value)}", (value, bar.get_y() + bar.get_height() / 2),
                        xytext=(3, 0), textcoords="offset points", va="center", fontsize=7)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: plot.human(v)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3, axis="x")


def _log_range(*series: list[float]) -> tuple[float, float]:
    """A log axis's limits for bars of these values: a third of the smallest to four times the largest."""
    shown = [v for values in series for v in values if v > 0]
    return min(shown) / 3, max(shown) * 4


def timing_figure(rs: ResultSet) -> Any | None:
    """Median train step and whole-test time per run on log scales (hatched: extrapolated test time)."""
    from matplotlib.figure import Figure as MplFigure

    names, steps, tests, estimated = [], [], [], []
    for name, runs in rs.runs.items():
        step = timing.timing_values(runs, "train_step", scale=1e3)
        test, est = timing.test_seconds(runs, "total", "")
        if step or test:
            names.append(name)
            steps.append(stats.summarize(step).mean if step else 0.0)
            tests.append(stats.summarize(test).mean if test else 0.0)
            estimated.append(est)
    if not names:
        return None
    fig = MplFigure(figsize=(10, 0.9 + 0.32 * len(names)), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    ys = list(range(len(names)))
    for ax, values, label, ests in ((axes[0], steps, "train step, ms (median)", [False] * len(names)),
                                    (axes[1], tests, "whole test split, s", estimated)):
        if not any(v > 0 for v in values):
            ax.set_xlabel(f"{label}: not measured")
            continue
        low, high = _log_range(values)
        _log_bars(ax, ys, values, ests, low)
        ax.set_xlim(low, high)
        ax.set_xlabel(label)
    axes[0].set_yticks(ys, names, fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(f"{rs.name}: time per run (mean over seeds; log scale"
                 f"{'; hatched: extrapolated' if any(estimated) else ''})",
                 fontsize=10)
    return fig


@dataclass
class Ratio:
    """One run's train-step and test-time ratios to the table's reference run, ours and the paper's."""

    name: str
    ours: dict[str, float | None]
    paper: dict[str, float | None]


def ratios(rs: ResultSet) -> tuple[str, str, list[Ratio]]:
    """Each run's ratios to the run the timing table divides by (as ``harness table``: the published block's
    ``relative_to`` method when it ran, else the reference run), and the paper's ratios of the same methods
    where the result files carry published times and the run used the task's own data (the paper's data)."""
    groups = rs.runs
    published = (rs.results[0].get("reference") or {}).get("timing") or {}
    methods = published.get("methods") or {}
    base = timing.baseline_run(groups, published.get("relative_to"), rs.reference)
    out = []
    for name, runs in groups.items():
        same = groups[timing.baseline_run(groups, groups[base][0]["method"], precision=model.precision(runs[0]))]
        ours, paper = {}, {}
        for part, phase, key in (("train step", "step", "train_step_s"), ("test", "test", "test_s")):
            ours[part] = model.timing_ratio(runs, same, phase).value
            value = (methods.get(runs[0]["method"]) or {}).get(key)
            ref = (methods.get(groups[base][0]["method"]) or {}).get(key)
            paper[part] = value / ref if value is not None and ref and not data_settings(runs) else None
        out.append(Ratio(name, ours, paper))
    return base, published.get("label", "paper"), out


def ratio_figure(rs: ResultSet) -> Any | None:
    """Each run's train step and test time as a multiple of the reference run's, on log scales, with the paper's
    ratio of the same methods beside ours (hatched) where the paper timed them on the same data."""
    from matplotlib.figure import Figure as MplFigure

    base, label, rows = ratios(rs)
    rows = [r for r in rows if any(v is not None for v in r.ours.values())]
    if len(rows) < 2:
        return None
    with_paper = any(v is not None for r in rows for v in r.paper.values())
    fig = MplFigure(figsize=(10, 1.1 + (0.45 if with_paper else 0.32) * len(rows)), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    ys = list(range(len(rows)))
    for ax, part in zip(axes, ("train step", "test")):
        ours = [r.ours[part] or 0.0 for r in rows]
        paper = [r.paper[part] or 0.0 for r in rows]
        if not any(ours):
            ax.set_xlabel(f"{part} / {base}: not measured")
            continue
        low, high = _log_range(ours, paper, [1.0])
        plain = [False] * len(rows)
        if any(paper):
            _log_bars(ax, [y - 0.2 for y in ys], ours, plain, low, height=0.38, label="ours")
            _log_bars(ax, [y + 0.2 for y in ys], paper, plain, low, height=0.38, colour="C1", label=label,
                      hatched=True)
        else:
            _log_bars(ax, ys, ours, plain, low)
        ax.set_xlim(low, high)
        ax.axvline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel(f"{part} / {base} (×)")
    axes[0].set_yticks(ys, [r.name for r in rows], fontsize=7)
    axes[0].invert_yaxis()
    if with_paper:  # below the panels, where it covers no bar
        fig.legend(*_handles(axes), loc="outside lower center", ncols=2, fontsize=7)
    fig.suptitle(f"{rs.name}: time as a multiple of {base}'s (log scale"
                 f"{f'; hatched: {label}' if with_paper else ''})", fontsize=10)
    return fig


def sweep_figures(rs: ResultSet) -> list[tuple[str, Any]]:
    """The figure ``python -m harness plot`` draws for every setting the set's runs sweep (two values or more);
    none for sets on random data, whose accuracy means nothing."""
    if rs.timing_only:
        return []
    keys = sorted({k for r in rs.results for k in plot.varied(r) if k != "train.epochs"})
    out = []
    for key in keys:
        axis = plot.Axis(None, key)
        try:
            points, _ = plot.select(rs.results, axis, rs.select)
        except (ConfigError, KeyError, TypeError, ValueError):
            continue
        xs = [p.x for p in points]
        if len(set(map(repr, xs))) < 2:
            continue
        logx = plot.is_numeric(xs) and min(xs) > 0 and max(xs) / min(xs) >= 100
        out.append((key, plot.draw(points, None, (key, rs.select, rs.name), logx)))
    return out


def _plot_caption(png: Path) -> str:
    """The caption ``harness plot`` recorded for a figure it drew (:func:`harness.report.plot.recorded_caption`); the
    file's name without a record."""
    return plot.recorded_caption(png) or png.stem


def draw_figures(rs: ResultSet, out: Path, ext: str, render: bool = True, home: Path | None = None) -> list[Figure]:
    """Write the set's figures under ``out/<slug>/`` and return them (paths relative to ``out``); with
    ``render`` False, only say which figures the page shows (what the test of committed pages needs). Links
    to files outside the site are relative to ``home`` (default ``out``), where the pages will lie."""
    import matplotlib.pyplot as plt  # noqa: F401  (registers the colormaps; figures are drawn without pyplot)

    figures = []
    curves = ("Training loss per epoch (random data: no accuracy curve)" if rs.timing_only else
              "Validation selection metric and training loss per epoch")
    made = [("curves", curves_figure(rs), f"{curves}; line: mean over seeds, band: ± one standard deviation; at "
                                          f"most {MAX_LINES} runs per panel."),
            ("timing", timing_figure(rs), "Median train step and whole-test retrieval time per run, log scale."),
            ("ratio", ratio_figure(rs), "Train step and whole-test time of each run as a multiple of the run the "
                                        "timing table divides by, log scale; hatched beside ours: the paper's "
                                        "ratio of the same methods, where the run used the task's own data."),
            ("tuning", tuning.figure(rs.results), "Tuning (harness tune): best validation value so far against the "
                                                  "trial, one line per tuned run.")]
    made += [(f"sweep-{re.sub(r'[^A-Za-z0-9_.]+', '_', key)}", fig, f"Test {rs.select} against {key}: mean ± std "
              f"over seeds (the runs that vary {key} only).") for key, fig in sweep_figures(rs)]
    for name, fig, caption in made:
        if fig is None:
            continue
        path = out / rs.slug / f"{name}.{ext}"
        if render:
            save_figure(fig, path)
        figures.append(Figure(path.relative_to(out).as_posix(), caption))
    for png in [] if rs.timing_only else sorted((rs.folder / "plots").glob("*.png")):  # harness plot: accuracy
        if ext == "svg" and render:  # the site is self-contained: copy the committed plots in
            target = out / rs.slug / "plots" / png.name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(png, target)
            figures.append(Figure(target.relative_to(out).as_posix(), _plot_caption(png)))
        elif ext == "svg":
            figures.append(Figure(f"{rs.slug}/plots/{png.name}", _plot_caption(png)))
        else:
            figures.append(Figure(relative(png, home or out), _plot_caption(png)))
    return figures
