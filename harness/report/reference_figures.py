"""The reference table's answer as pictures, from plain data (the records of ``reference.json``), so that the table's
own code and the results site draw the same figures:

* :func:`forest`: SwAMP minus each compared loss, set by set, with its 95% interval, on one axis of SwAMP's gain
  (a rank metric's difference negated, so that right is better for SwAMP everywhere), coloured by its reading;
* :func:`best_so_far`: each row's best validation value so far against the trials its study ran, the rows whose
  budget did not converge marked, and where the set's initial budget ended.

Both take lists and dicts of numbers and strings, write one file (PNG or SVG by the path's suffix; the same input
gives the same bytes) and return whether they wrote it: with nothing to draw they write nothing and return False.
Bad input stops with one :class:`harness.errors.ConfigError` naming the entry and what to give instead.
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.report.convergence import NOT_CONVERGED
from harness.report.convergence import best_so_far as running_best
from harness.report.figures import save_figure

# a difference's reading (the paired test's, as the table states it) -> its colour; "uninformative": no test could
# say (too few seeds, or every seed equal)
READINGS: dict[str, str] = {"better": "#1a7f37", "level": "#57606a", "worse": "#cf222e", "uninformative": "#bf8700"}
ENTRY_KEYS = ("set", "comparison", "diff", "lo", "hi", "reading", "lower")
FORMATS = (".png", ".svg")
WIDTH_IN = 8.0  # inches; at the PNG's 100 dpi, 800 pixels: a page's column without scaling
ROW_IN = 0.26  # inches per line of the forest plot
LABEL_CHARS = 34  # a comparison's label wraps onto a second line beyond this
LEGEND_COLUMNS = 3  # the best-so-far legend's columns, under the plot


def _number(value: Any, what: str) -> float | None:
    """``value`` as a float (None and NaN as None); ConfigError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{what} is {value!r}: give a number (or None where the test gave none)")
    return None if math.isnan(value) else float(value)


def _check_path(path: Path) -> Path:
    path = Path(path)
    if path.suffix not in FORMATS:
        raise ConfigError(f"figure path {path} ends in {path.suffix or 'no suffix'!r}: give one ending in "
                          f"{' or '.join(FORMATS)}")
    return path


def _entry(entry: Mapping[str, Any], i: int) -> dict[str, Any]:
    """One forest entry, checked, with its difference turned into SwAMP's gain (``gain``, ``gain_lo``,
    ``gain_hi``): a rank metric's (``lower``) negated, its interval flipped."""
    missing = [k for k in ENTRY_KEYS if k not in entry]
    if missing:
        raise ConfigError(f"forest entry {i} ({entry.get('set', '?')}: {entry.get('comparison', '?')}) lacks "
                          f"{', '.join(missing)}: give every one of {', '.join(ENTRY_KEYS)}")
    where = f"forest entry {i} ({entry['set']}: {entry['comparison']})"
    if entry["reading"] not in READINGS:
        raise ConfigError(f"{where}: reading {entry['reading']!r} is not one of {', '.join(READINGS)}")
    diff = _number(entry["diff"], f"{where}: diff")
    lo, hi = _number(entry["lo"], f"{where}: lo"), _number(entry["hi"], f"{where}: hi")
    if lo is not None and hi is not None and lo > hi:
        raise ConfigError(f"{where}: lo {lo:g} is above hi {hi:g}: give the interval's lower end first")
    sign = -1.0 if entry["lower"] else 1.0
    ends = [None if v is None else sign * v for v in (lo, hi)]
    if entry["lower"]:
        ends.reverse()
    return {**entry, "gain": None if diff is None else sign * diff, "gain_lo": ends[0], "gain_hi": ends[1]}


def _grouped(entries: Sequence[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """The entries by set, sets in the order they first appear, entries in theirs."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        groups.setdefault(str(e["set"]), []).append(e)
    return list(groups.items())


def _label(e: dict[str, Any]) -> str:
    interval = ("" if e["gain_lo"] is None or e["gain_hi"] is None
                else f" [{e['gain_lo']:+.2f}, {e['gain_hi']:+.2f}]")
    gain = "–" if e["gain"] is None else f"{e['gain']:+.2f}"
    return f"{gain}{interval}"


def forest_figure(entries: Sequence[Mapping[str, Any]], title: str = "") -> Any | None:
    """The forest plot of :func:`forest` as a matplotlib Figure (None when there is nothing to draw)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    checked = [_entry(e, i) for i, e in enumerate(entries)]
    if not any(e["gain"] is not None for e in checked):
        return None
    groups = _grouped(checked)
    n_rows = len(checked) + len(groups)  # a heading row per set
    fig = Figure(figsize=(WIDTH_IN, 1.3 + ROW_IN * n_rows), layout="constrained")
    ax = fig.subplots()
    y, ticks, labels = 0.0, [], []
    for name, group in groups:  # a shaded heading row per set, its lines below it
        ax.axhspan(y - 0.5, y + 0.5, color="#f6f8fa", linewidth=0)
        heading = ax.annotate(name + (" (a rank, lower is better: its differences negated)" if group[0]["lower"]
                                      else ""), xy=(0.0, y), xycoords=("figure fraction", "data"), xytext=(6, 0),
                              textcoords="offset points", va="center", fontsize=8, fontweight="bold",
                              annotation_clip=False, bbox={"facecolor": "#f6f8fa", "edgecolor": "none", "pad": 1.0})
        heading.set_in_layout(False)  # it spans the labels' column and the plot: the layout need not make room
        y -= 1
        for e in group:
            colour = READINGS[e["reading"]]
            if e["gain"] is not None:
                if e["gain_lo"] is not None and e["gain_hi"] is not None:
                    ax.plot([e["gain_lo"], e["gain_hi"]], [y, y], color=colour, linewidth=2.2, solid_capstyle="butt")
                ax.plot([e["gain"]], [y], "o", color=colour, markersize=6)
            ax.annotate(_label(e), xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                        textcoords="offset points", va="center", fontsize=8, color=colour)
            ticks.append(y)
            labels.append(textwrap.fill(str(e["comparison"]), LABEL_CHARS))
            y -= 1
    ax.axvline(0.0, color="#1b1f24", linewidth=0.9)
    ax.set_yticks(ticks, labels, fontsize=8)
    ax.set_ylim(y + 0.5, 0.5)
    ax.tick_params(axis="y", length=0)
    ax.tick_params(axis="x", labelsize=8)
    ax.grid(axis="x", color="#eaeef2", linewidth=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("SwAMP's gain on test (points; SwAMP − the loss, negated for a rank metric): "
                  "right of 0 is better for SwAMP", fontsize=8)
    shown = [r for r in READINGS if any(e["reading"] == r for e in checked)]
    fig.legend([Line2D([], [], color=READINGS[r], marker="o", linewidth=2.2) for r in shown], shown, fontsize=8,
               loc="outside lower center", ncols=len(shown), frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def forest(entries: list[dict[str, Any]], path: Path, title: str = "") -> bool:
    """A forest plot of SwAMP against each compared loss, set by set: a line per (set, comparison) with the
    difference and its 95% interval, a zero line, coloured by the reading (:data:`READINGS`), grouped by set; a rank
    metric's (``lower``) difference is negated so that one axis reads SwAMP's gain. Writes ``path`` (.png or .svg);
    returns False, writing nothing, when no entry has a difference.

    >>> forest([{"set": "wikipedia", "comparison": "SigLIP", "diff": -0.31, "lo": -1.36, "hi": 0.74,
    ...          "reading": "level", "lower": False}], Path("forest.png"))  # doctest: +SKIP
    True
    """
    path = _check_path(path)
    fig = forest_figure(entries, title)
    if fig is None:
        return False
    save_figure(fig, path, dpi=100)
    return True


def best_so_far_figure(curves: Mapping[str, Sequence[float | None]], metric: str, lower: bool,
                       not_converged: Collection[str] = frozenset(), title: str = "",
                       initial_budget: int | None = None) -> Any | None:
    """The figure of :func:`best_so_far` as a matplotlib Figure (None when no row has a value)."""
    import matplotlib
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    unknown = sorted(set(not_converged) - set(curves))
    if unknown:
        raise ConfigError(f"not_converged names {', '.join(unknown)}, which have no curve: name rows of curves "
                          f"({', '.join(curves) or 'none'})")
    if initial_budget is not None and (isinstance(initial_budget, bool) or not isinstance(initial_budget, int)
                                       or initial_budget < 1):
        raise ConfigError(f"initial_budget is {initial_budget!r}: give the trials of the initial budget (>= 1) "
                          "or None")
    best = {row: running_best([_number(v, f"curve {row!r}, trial {i + 1}") for i, v in enumerate(values)], lower)
            for row, values in curves.items()}
    best = {row: values for row, values in best.items() if any(v is not None for v in values)}
    if not best:
        return None
    fig = Figure(figsize=(WIDTH_IN, 3.4 + 0.2 * math.ceil((len(best) + 1) / LEGEND_COLUMNS)), layout="constrained")
    ax = fig.subplots()
    colours = [matplotlib.colormaps["tab10"](i) for i in range(10)]
    for i, (row, values) in enumerate(best.items()):
        edges = [t + 0.5 for t in range(len(values) + 1)]  # trial t spans t - 0.5 .. t + 0.5
        ys = [math.nan if v is None else v for v in values]
        late = row in not_converged
        ax.stairs(ys, edges, baseline=None, color=colours[i % len(colours)], linewidth=2.0 if late else 1.4,
                  linestyle="--" if late else "-", label=f"{row} {NOT_CONVERGED}" if late else row)
    if initial_budget is not None:
        ax.axvline(initial_budget + 0.5, color="#57606a", linewidth=1.0, linestyle=":",
                   label=f"initial budget ({initial_budget} trials)")
    ax.set_xlabel("trial", fontsize=8)
    ax.set_ylabel(f"best validation {metric} so far" + (" (lower is better)" if lower else ""), fontsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(color="#eaeef2", linewidth=0.6)
    ax.tick_params(labelsize=8)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=LEGEND_COLUMNS, frameon=False)
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def best_so_far(curves: dict[str, list[float | None]], path: Path, metric: str, lower: bool,
                not_converged: Collection[str] = frozenset(), title: str = "",
                initial_budget: int | None = None) -> bool:
    """The best validation value so far against the trial number, a step line per row of a set (``curves``: row ->
    its trials' validation values in the order they ran, or their best-so-far curve: either gives the same line;
    None or NaN for a failed or pruned trial). Rows in ``not_converged`` are dashed and marked
    '[budget not converged]' in the legend; ``initial_budget`` draws a line where the set's initial budget ended.
    Writes ``path`` (.png or .svg); returns False, writing nothing, when no row has a value.

    >>> best_so_far({"InfoNCE": [20.1, 25.3, None, 24.0], "SwAMP": [18.0, 19.5, 23.2, 23.9]},
    ...             Path("wikipedia-trials.png"), "i2t/class_mAP", lower=False,
    ...             not_converged={"SwAMP"}, initial_budget=3)  # doctest: +SKIP
    True
    """
    path = _check_path(path)
    fig = best_so_far_figure(curves, metric, lower, not_converged, title, initial_budget)
    if fig is None:
        return False
    save_figure(fig, path, dpi=100)
    return True
