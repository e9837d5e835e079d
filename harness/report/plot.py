"""One metric against a swept setting, one line per method: ``python -m harness plot FOLDER --x NAME.KEY``.

``--x swamp.K`` plots the runs of method ``swamp`` that differ from the task file in ``K``
only (the task's own run sits at its default ``K``); ``--x K`` draws a line for every method
that has a ``K``; ``--x train.lr`` (or ``dataset.*``, ``encoders.*``, ``metrics.*``) draws
every method. Runs that also vary any other setting are left out, and the command prints
which and why. Each point is the mean over seeds, with the sample standard deviation as error
bar from two seeds on (:func:`harness.report.stats.summarize`). Non-numeric settings give a categorical axis. The
figure is written as PNG and PDF, the points behind it as a Markdown and a CSV table beside them, and its record
(``<stem>.json``: its caption and the command that drew it), which the results site reads its caption from
(:func:`recorded_caption`).
"""
from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harness.config.plan import resolve_reference
from harness.errors import ConfigError, unknown
from harness.report import stats
from harness.store.io import write_text_atomic
from harness.store.schema import load_results

SECTIONS = ("train", "dataset", "encoders", "metrics")


@dataclass(frozen=True)
class Axis:
    """The swept setting: ``method`` None means every method that has ``key``; ``key`` as in ``varied``."""

    method: str | None
    key: str

    @property
    def in_section(self) -> bool:
        return self.key.split(".", 1)[0] in SECTIONS


@dataclass
class Point:
    """The seeds of one method at one x value, and the runs they came from."""

    method: str
    x: Any
    values: dict[int, float] = field(default_factory=dict)  # seed -> metric
    runs: list[str] = field(default_factory=list)

    @property
    def summary(self) -> stats.Summary:
        return stats.summarize(list(self.values.values()))

    @property
    def mean(self) -> float:
        return self.summary.mean

    @property
    def std(self) -> float | None:
        return self.summary.std


def parse_x(text: str) -> Axis:
    """'swamp.K' -> Axis('swamp', 'K'); 'K' -> Axis(None, 'K'); 'train.lr' -> Axis(None, 'train.lr')."""
    head, _, rest = text.partition(".")
    if not rest or head in SECTIONS:
        return Axis(None, text)
    return Axis(head, rest)


def varied(result: dict[str, Any]) -> dict[str, Any]:
    """Settings in which a run differs from its task file; older files: rebuilt from their overrides."""
    if "varied" in result:
        recorded: dict[str, Any] = result["varied"]
        return recorded
    out = {}
    for override in result.get("overrides") or []:
        key, _, value = override.partition("=")
        if key.startswith(f"{result['method']}."):
            out[key.split(".", 1)[1]] = value
        elif key.split(".", 1)[0] in SECTIONS and key != "dataset.root":
            out[key] = value
    return out


# x label of runs that leave a setting outside the resolved config at the task's default
UNSET = {"init": "random"}


def x_value(result: dict[str, Any], axis: Axis) -> Any:
    """The run's value of the swept setting: resolved config first, then ``varied``, else the
    task default (``UNSET``'s label, or None)."""
    node: Any = result["config"] if axis.in_section else result["config"].get("method", {})
    for part in axis.key.split("."):
        if not isinstance(node, dict) or part not in node:
            node = varied(result).get(axis.key, UNSET.get(axis.key))
            break
        node = node[part]
    return tuple(node) if isinstance(node, list) else node


def on_axis(result: dict[str, Any], axis: Axis) -> bool:
    """Whether the run's method belongs on the figure (whatever else the run varies)."""
    if axis.method is not None:
        return bool(result["method"] == axis.method)
    return axis.in_section or axis.key in result["config"].get("method", {}) or axis.key in varied(result)


def _named(result: dict[str, Any], key: str) -> str:
    """A varied key as the command line names it: ``train.epochs`` as is, a method parameter ``swamp.K``."""
    return key if key.split(".", 1)[0] in SECTIONS else f"{result['method']}.{key}"


def select(results: list[dict[str, Any]], axis: Axis, metric: str,
           ignore: tuple[str, ...] = ()) -> tuple[list[Point], dict[str, str]]:
    """Points of the runs that vary at most the swept setting and the ``ignore``d settings (which must hold
    one value across the figure's runs); the other runs with the reason."""
    points: dict[tuple[str, Any], Point] = {}
    excluded: dict[str, str] = {}
    seen: dict[str, dict[str, str]] = {}  # ignored setting -> {its value: a run that has it}
    for r in (r for r in results if on_axis(r, axis)):
        others = sorted(k for k in set(varied(r)) - {axis.key} if k not in ignore and _named(r, k) not in ignore)
        if others:
            excluded[r["run_name"]] = (f"also varies {', '.join(others)} (pass --ignore {_named(r, others[0])} "
                                       "when it is the same for every run of the sweep)")
            continue
        for key in ignore:
            value = next((v for k, v in varied(r).items() if key in (k, _named(r, k))), None)
            seen.setdefault(key, {}).setdefault(json.dumps(value, sort_keys=True, default=str), r["run_name"])
            if len(seen[key]) > 1:
                runs = ", ".join(f"{run} ({value})" for value, run in seen[key].items())
                raise ConfigError(f"--ignore {key}: the runs of the figure differ in it ({runs}); it can only be "
                                  "ignored when every run has the same value")
        if metric not in r["metrics"]:
            excluded[r["run_name"]] = f"has no metric {metric}"
        else:
            point = points.setdefault((r["method"], x_value(r, axis)), Point(r["method"], x_value(r, axis)))
            if r["seed"] in point.values:
                excluded[f"{r['run_name']} seed {r['seed']}"] = f"same {axis.key} and seed as {point.runs[0]}"
                continue
            point.values[r["seed"]] = r["metrics"][metric]
            point.runs += [] if r["run_name"] in point.runs else [r["run_name"]]
    return list(points.values()), excluded


def check_axis(results: list[dict[str, Any]], axis: Axis, text: str) -> None:
    """Raise unless some run of the figure's methods varies the swept setting."""
    if any(on_axis(r, axis) and axis.key in varied(r) for r in results):
        return
    keys = sorted({k if k.split(".", 1)[0] in SECTIONS else f"{r['method']}.{k}" for r in results for k in varied(r)})
    raise ConfigError(f"no run varies {text!r}; settings varied by some run: {', '.join(keys) or '(none)'}")


def is_numeric(xs: list[Any]) -> bool:
    """True when every x value is a number (booleans count as categories)."""
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)


def order(x: Any) -> tuple[int, Any, str]:
    """Sort key of x values: numbers by value, before anything else by type name and text."""
    return (0, x, "") if is_numeric([x]) else (1, 0, f"{type(x).__name__}:{x}")


def seeds_label(counts: list[int]) -> str:
    """'3 seeds', '1 seed' or '1–3 seeds'."""
    lo, hi = min(counts), max(counts)
    return f"{lo}–{hi} seeds" if lo != hi else f"{lo} seed{'s' if lo != 1 else ''}"


def human(value: float) -> str:
    """A number as a reader writes it: 3 significant digits below 100 ('0.351', '12.3'), whole numbers with
    thousands commas below 10,000 ('3,664'), then k, M and G ('14.8k', '1.23M'); never an exponent."""
    import math

    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    size = abs(value)
    if size < 100:
        decimals = max(0, 2 - math.floor(math.log10(size)))
        return f"{value:.{decimals}f}".rstrip("0").rstrip(".") if decimals else f"{value:.0f}"
    if size < 1e4:
        return f"{value:,.0f}"
    for scale, suffix in ((1e3, "k"), (1e6, "M"), (1e9, "G")):
        text = f"{value / scale:.3g}"
        if "e" not in text:
            return text + suffix
    return f"{value / 1e9:,.0f}G"


def evenly_spaced(xs: list[Any], logx: bool) -> bool:
    """Whether numeric x values are too unevenly spread for their own scale: the closest two lie within 8% of
    the axis (their tick labels would run together, as 0, 128, 256 beside 2560 do), so the values get one
    evenly spaced slot each instead."""
    import math

    if not is_numeric(xs) or len(xs) < 3:
        return False
    pos = sorted(math.log10(x) for x in xs) if logx else sorted(float(x) for x in xs)
    span = pos[-1] - pos[0]
    return span > 0 and min(b - a for a, b in zip(pos, pos[1:])) < 0.08 * span


def draw(points: list[Point], reference: tuple[str, list[float]] | None, labels: tuple[str, str, str],
         logx: bool) -> Any:
    """The figure: a line (numeric x) or dodged markers (categorical x) per method, plus the reference band;
    numeric values too crowded for their scale get evenly spaced slots (:func:`evenly_spaced`). The legend sits
    outside the axes, so it covers no point."""
    from matplotlib.figure import Figure  # no pyplot: the Agg canvas, no display and no global state

    fig = Figure(figsize=(7.5, 4), layout="constrained")
    ax = fig.add_subplot()
    xs = sorted({p.x for p in points}, key=order)
    slots = not is_numeric(xs) or evenly_spaced(xs, logx)
    methods = sorted({p.method for p in points})
    for j, method in enumerate(methods):
        shift = 0.0 if not slots or len(methods) == 1 else (j - (len(methods) - 1) / 2) * 0.1
        _line(ax, [p for p in points if p.method == method], xs, shift, f"C{j % 10}", slots)
    if reference is not None:
        _band(ax, *reference)
    _x_axis(ax, xs, logx and not slots, slots)
    ax.set_xlabel(labels[0] + (" (one slot per value, not to scale)" if slots and is_numeric(xs) else ""))
    ax.set_ylabel(labels[1])
    ax.set_title(labels[2])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    if not slots and len(xs) <= 8:
        _untangle(fig, ax, xs)
    return fig


def short(value: float) -> str:
    """A tick label of a crowded axis: thousands as k ('2k', '2.5k'), else :func:`human`."""
    return f"{value / 1e3:g}k" if 1e3 <= abs(value) < 1e6 else human(value)


def _overlap(fig: Any, ax: Any) -> bool:
    """Whether two neighbouring tick labels of the x axis run into each other (measured on the drawn figure)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()  # type: ignore[no-untyped-call]  # matplotlib's backend_agg leaves it unannotated
    renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]  # likewise
    boxes = [t.get_window_extent(renderer) for t in ax.get_xticklabels() if t.get_visible() and t.get_text()]
    boxes.sort(key=lambda b: b.x0)
    return any(b.x0 - a.x1 < 2 for a, b in zip(boxes, boxes[1:]))


def _untangle(fig: Any, ax: Any, xs: list[Any]) -> None:
    """Tick labels at the swept values that run into each other ('2,0003,000') are shortened ('2k', '3k'), and
    when they still touch every other one is left out."""
    if not _overlap(fig, ax):
        return
    ax.set_xticks(xs, [short(x) for x in xs])
    if _overlap(fig, ax):
        ax.set_xticks(xs, [short(x) if i % 2 == 0 else "" for i, x in enumerate(xs)])


def _line(ax: Any, points: list[Point], xs: list[Any], shift: float, colour: str, slots: bool) -> None:
    """One method's points with ± std bars; seed counts in the legend, and at each point when they differ."""
    points = sorted(points, key=lambda p: xs.index(p.x))
    pos = [xs.index(p.x) + shift if slots else p.x for p in points]
    counts = [len(p.values) for p in points]
    ax.errorbar(pos, [p.mean for p in points], yerr=[p.std or 0.0 for p in points], color=colour,
                fmt="o-" if is_numeric(xs) else "o", capsize=3, label=f"{points[0].method} ({seeds_label(counts)})")
    if len(set(counts)) > 1:
        for x, p in zip(pos, points):
            ax.annotate(f"n={len(p.values)}", (x, p.mean), textcoords="offset points", xytext=(4, 4), fontsize=7)


def _x_axis(ax: Any, xs: list[Any], logx: bool, slots: bool) -> None:
    """Ticks at the swept values: one slot per value (categories, crowded numbers) at 0..n-1, else the values
    themselves (up to 8 of them) on a linear or log scale; long or many labels are turned."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    labels = [human(x) if is_numeric([x]) else str(x) for x in xs]
    if slots:
        ax.set_xticks(range(len(xs)), labels)
        ax.set_xlim(-0.5, len(xs) - 0.5)
    else:
        if logx:
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
        if len(xs) <= 8:
            ax.set_xticks(xs, labels)
        else:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v)))
        ax.margins(x=0.08)
    if len(xs) > 6 or max(map(len, labels)) > 8:
        ax.tick_params(axis="x", labelrotation=30)
        for label in ax.get_xticklabels():
            label.set_horizontalalignment("right")


def _band(ax: Any, name: str, values: list[float]) -> None:
    """Horizontal line at the reference mean, shaded ± one standard deviation from two seeds on."""
    summary = stats.summarize(values)
    ax.axhline(summary.mean, color="black", linestyle="--", linewidth=1, label=f"{name} ({seeds_label([len(values)])})")
    if summary.std is not None:
        ax.axhspan(summary.mean - summary.std, summary.mean + summary.std, color="0.5", alpha=0.2, linewidth=0)


def table_rows(points: list[Point], reference: tuple[str, list[float]] | None) -> list[list[str]]:
    """Rows (x, method, seeds, mean, std, runs) of the plotted points, reference last."""
    rows = [[str(p.x), p.method, str(len(p.values)), f"{p.mean:.4f}", "" if p.std is None else f"{p.std:.4f}",
             " ".join(p.runs)] for p in sorted(points, key=lambda p: (p.method, order(p.x)))]
    if reference is not None:
        name, values = reference
        summary = stats.summarize(values)
        std = "" if summary.std is None else f"{summary.std:.4f}"
        rows.append(["", f"reference: {name}", str(len(values)), f"{summary.mean:.4f}", std, name])
    return rows


def write_outputs(fig: Any, rows: list[list[str]], stem: Path, caption: str, command: str = "") -> list[Path]:
    """Write <stem>.png (dpi 150), .pdf, .md and .csv, and the figure's record <stem>.json (its ``caption`` and the
    ``command`` that drew it); return the paths."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    png, pdf, md, csv_path, record = (stem.with_name(f"{stem.name}.{ext}") for ext in ("png", "pdf", "md", "csv",
                                                                                     "json"))
    fig.savefig(png, dpi=150)
    fig.savefig(pdf, metadata={"CreationDate": None})  # no date: regenerating an unchanged figure changes no file
    header = ["x", "method", "seeds", "mean", "std", "runs"]
    lines = [f"| {' | '.join(header)} |", f"|{'---|' * len(header)}"] + [f"| {' | '.join(r)} |" for r in rows]
    head = f"<!-- generated by `{command}` -->\n" if command else ""
    md.write_text(f"{head}{caption}\n\n" + "\n".join(lines) + "\n")
    with open(csv_path, "w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    write_text_atomic(record, json.dumps({"caption": caption, "command": command}, indent=1, sort_keys=True) + "\n")
    return [png, pdf, md, csv_path, record]


def recorded_caption(png: Path) -> str | None:
    """The caption :func:`write_outputs` recorded for the figure ``png`` (its ``.json`` beside it); None without a
    record."""
    path = png.with_suffix(".json")
    try:
        record = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except (OSError, ValueError):
        return None
    caption = record.get("caption") if isinstance(record, dict) else None
    return caption if isinstance(caption, str) else None


def _load(folder: Path) -> list[dict[str, Any]]:
    """Result files of exactly one task under ``folder``."""
    results = load_results(folder) if folder.is_dir() else []
    if not results:
        raise ConfigError(f"no result files (<run>/seed<k>.json) under {folder}")
    tasks = sorted({r["task"] for r in results})
    if len(tasks) > 1:
        raise ConfigError(f"{folder} holds several tasks ({', '.join(tasks)}); name one task's folder")
    return results


def _reference(results: list[dict[str, Any]], name: str | None, metric: str) -> tuple[str, list[float]] | None:
    """(run name, metric per seed) of the reference run, or None when none was asked for."""
    if name is None:
        return None
    name = resolve_reference(name, ((r["run_name"], r["method"]) for r in results))
    runs = [r for r in results if r["run_name"] == name]
    if any(metric not in r["metrics"] for r in runs):
        raise ConfigError(f"reference run {name!r} has no metric {metric!r}")
    return name, [r["metrics"][metric] for r in runs]


def _command(folder: Path, x: str, metric: str, reference: str | None, out: Path | None, logx: bool,
             ignore: Sequence[str]) -> str:
    """The command line that regenerates the figure (written into its table)."""
    options = [("--reference", reference), ("--out", out), *(("--ignore", key) for key in ignore)]
    return (f"python -m harness plot {folder} --x {x} --metric {metric}"
            + "".join(f" {flag} {value}" for flag, value in options if value) + (" --logx" if logx else ""))


def plot_sweep(folder: Path | str, x: str, *, metric: str | None = None, reference: str | None = None,
               out: Path | str | None = None, logx: bool = False, ignore: Sequence[str] = ()) -> list[Path]:
    """``python -m harness plot FOLDER --x NAME.KEY``: ``metric`` (default: the task's selection metric) against
    the swept setting ``x``, one line per method, ``reference`` as a band; validated, drawn and written (PNG, PDF,
    the points as Markdown and CSV, the record) at ``out`` (default: FOLDER/plots/<x>_<metric>): the paths."""
    folder, stem_given = Path(folder), Path(out) if out else None
    results = _load(folder)
    metric = metric or results[0]["config"]["train"]["select"]
    names = {m for r in results for m in r["metrics"]}
    if metric not in names:
        raise unknown("metric", metric, names)
    axis = parse_x(x)
    check_axis(results, axis, x)
    band = _reference(results, reference, metric)
    points, excluded = select(results, axis, metric, tuple(ignore))
    if len({p.x for p in points}) < 2:
        left = "; ".join(f"{run} ({why})" for run, why in excluded.items())
        raise ConfigError(f"fewer than two values of {x} left to plot; left out: {left or '(none)'}")
    if logx and not (is_numeric([p.x for p in points]) and all(p.x > 0 for p in points)):
        raise ConfigError(f"--logx needs positive numeric values of {x}; got {sorted({str(p.x) for p in points})}")
    for run, reason in excluded.items():
        print(f"left out {run}: {reason}")
    title = f"{results[0]['task']} v{', '.join(sorted({str(r['task_version']) for r in results}))}"
    fig = draw(points, band, (x, metric, title), logx)
    stem = stem_given or folder / "plots" / f"{x}_{metric.replace('/', '_')}"
    caption = f"Task {title}: {metric} against {x}, mean and sample std over seeds."
    command = _command(folder, x, metric, reference, stem_given, logx, ignore)
    paths = list(write_outputs(fig, table_rows(points, band), stem, caption, command))
    for path in paths:
        print(path)
    return paths
