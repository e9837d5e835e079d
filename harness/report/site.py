"""A results site generated from result files only: ``python -m harness report RESULTS... --out DIR``.

A *result set* is one folder of runs of one task (``<folder>/<run>/seed<k>.json``), e.g.
``results/msrvtt_vgg128``; runs in different folders may differ in settings or machines, so each
set gets a page of its own and the index groups the sets by task. A page holds the accuracy and
timing tables (the same cells as ``python -m harness table``, with the reference run and tested
statistic named in the set's committed ``accuracy.md``), figures drawn from the result files
(learning curves with a band over seeds, times on a log scale, sweeps), the provenance of every run
and links to the result files, the tables and cluster reports.

``--format html`` (default) writes a self-contained site (HTML from the Jinja2 templates beside
this module, one CSS file, a few lines of JavaScript for sorting and filtering; no network) with the
result files and tables copied in, so the folder can be moved or archived. ``--format md`` writes
the same pages as Markdown that link to the result files where they lie (for ``docs/results/``).
"""
from __future__ import annotations

import argparse
import functools
import os
import re
import shutil
import statistics
import time
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

from harness.errors import ConfigError
from harness.report import freshness as fr
from harness.report import markdown, model, plot, tables, tuning
from harness.store.io import write_text_atomic
from harness.store.schema import load_results

TEMPLATES = Path(__file__).with_name("templates")
FORMATS = ("html", "md")
@dataclass
class Figure:
    """One figure file of a page: its path relative to the page's folder and its caption."""

    path: str
    caption: str


@dataclass
class ResultSet:
    """The runs of one task found in one folder, and what its page shows."""

    task: str
    folder: Path
    slug: str
    results: list[dict[str, Any]]
    reference: str | None = None
    test_stat: str | None = None
    figures: list[Figure] = field(default_factory=list)
    root: Path | None = None  # the folder given on the command line that the set was found under
    machine: str | None = None  # set when the folder holds runs of several machines: this set's (one page each)

    @property
    def name(self) -> str:
        """The folder as figures and headings name it: from the given folder's own name on
        ('results/scan_evaluation_cost/flickr30k_shapes'), with the machine when the folder holds several."""
        if self.root is None:
            base = self.folder.name
        else:
            rel = self.folder.resolve().relative_to(self.root.resolve()).as_posix()
            base = self.root.resolve().name if rel in ("", ".") else f"{self.root.resolve().name}/{rel}"
        return f"{base} ({self.machine})" if self.machine else base

    @property
    def runs(self) -> dict[str, list[dict[str, Any]]]:
        return model.group_runs(self.results)

    @property
    def timing_only(self) -> bool:
        return any((r.get("dataset") or {}).get("timing_only") for r in self.results)

    @property
    def select(self) -> str:
        select: str = self.results[0]["config"]["train"]["select"]
        return select


def find_sets(folders: list[Path]) -> list[ResultSet]:
    """Every result set under ``folders`` (:func:`harness.report.model.sets`: one per folder, task and machine,
    sorted by task, then folder); ConfigError when there is none."""
    found: list[ResultSet] = []
    seen: set[Path] = set()
    for root in folders:
        if not root.is_dir():
            raise ConfigError(f"{root} is not a folder; give folders that hold result files (<run>/seed<k>.json)")
        results = [r for r in load_results(root) if Path(r["_path"]).resolve() not in seen]
        seen |= {Path(r["_path"]).resolve() for r in results}
        for one in model.sets(results, root):
            found.append(ResultSet(one.task, one.folder, "", one.results, root=root,
                                   machine=one.machine if one.several_machines else None))
    if not found:
        raise ConfigError(f"no result files (<run>/seed<k>.json) under {', '.join(map(str, folders))}; "
                          "write some with `python -m harness run TASK --out FOLDER`")
    found.sort(key=lambda s: (s.task, str(s.folder)))
    n_sets = len({(s.folder, s.task) for s in found})
    for s in found:
        s.slug = _slug(s.folder, s.root or s.folder, s.task, n_sets)
        if s.machine:  # runs timed on different hardware are never averaged into one row: a page each
            s.slug = f"{s.slug}-{re.sub(r'[^A-Za-z0-9_.]+', '-', s.machine).strip('-')}"
    slugs = [s.slug for s in found]
    for s in found:  # one folder may hold several tasks: keep their pages apart
        if slugs.count(s.slug) > 1:
            s.slug = f"{s.slug}-{s.task}"
    for s in found:
        s.reference, s.test_stat = committed_table_options(s)
    return found


def _slug(folder: Path, root: Path, task: str, n_sets: int) -> str:
    """The page name: the folder relative to the root it was found under ('explore-qmul_chairs'), the task
    name when the root is the set itself."""
    rel = folder.resolve().relative_to(root.resolve()).as_posix()
    name = task if rel in ("", ".") else rel
    return re.sub(r"[^A-Za-z0-9_.]+", "-", name).strip("-") or task


def committed_table_options(rs: ResultSet) -> tuple[str | None, str | None]:
    """The reference run and tested statistic that the set's committed test tables were rendered with (their first
    line names the command), while the reference still names a run; else none."""
    recorded = tables.recorded_for(rs.folder, rs.results)
    if recorded is None or recorded.split != "test":
        return None, None
    return recorded.reference, recorded.test_stat


# --- sorting ----------------------------------------------------------------------------------------------

_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2}))?)?")
# a number at the start of a cell: an optional ≈/~/</>, sign, digits with optional thousands commas, decimals,
# exponent and k/M/G suffix, followed by anything that does not continue a word or a list ('12.3 ± 0.4',
# '≈356.3', '82.12×', '1.48e+04', '14.8k', '-0.15', '0.996 (2/3)'); '0, 1, 2' and '1abb22f' are not numbers
_NUMBER = re.compile(r"^[≈~<>]?\s*(?P<sign>[-+−]?)(?P<digits>\d{1,3}(?:,\d{3})+|\d+)(?P<frac>\.\d+)?"
                     r"(?P<exp>[eE][-+]?\d+)?(?P<suffix>[kMG])?(?![\w.]|\s*,\s*\d)")
_SUFFIX = {"k": 1e3, "M": 1e6, "G": 1e9, None: 1.0}
_MISSING = {"", "–", "-", "?", "n/a", "none"}
_CHUNK = re.compile(r"(\d+(?:\.\d+)?)")


def sort_key(text: str) -> tuple[Any, ...]:
    """How a table cell sorts: dates as dates and numbers by value (before text); text in natural order, its
    numbers by value, so that run names of a sweep sort by the swept setting ('swamp@K=20' < 'swamp@K=500' <
    'swamp@K=2000'); empty and '–' cells last."""
    text = str(text).strip()
    if text.lower() in _MISSING:
        return (2,)
    date = _DATE.match(text)
    if date:
        parts = [int(p or 0) for p in date.groups()]
        return (0, float(f"{parts[0]:04d}{parts[1]:02d}{parts[2]:02d}{parts[3]:02d}{parts[4]:02d}{parts[5]:02d}"), ())
    number = _NUMBER.match(text)
    if number:
        value = float(number["digits"].replace(",", "") + (number["frac"] or "") + (number["exp"] or ""))
        value *= _SUFFIX[number["suffix"]] * (-1 if number["sign"] in ("-", "−") else 1)
        return (0, value, _natural(text))
    return (1, 0.0, _natural(text))


def _natural(text: str) -> tuple[tuple[str, float], ...]:
    """Text split into (words, number) pairs, compared word by word and number by value."""
    chunks = _CHUNK.split(text.lower())
    return tuple((chunks[i], float(chunks[i + 1]) if i + 1 < len(chunks) else -1.0) for i in range(0, len(chunks), 2))


def sort_ranks(rows: list[list[str]]) -> list[list[int]]:
    """Each cell's rank in its column by :func:`sort_key` (equal cells share a rank): the ``data-sort`` attribute
    the site's script sorts a column by, so that the order is the one computed (and tested) here."""
    if not rows:
        return []
    ranks: list[list[int]] = [[0] * len(row) for row in rows]
    for column in range(max(len(row) for row in rows)):
        keys = [sort_key(row[column]) if column < len(row) else (2,) for row in rows]
        order = {key: rank for rank, key in enumerate(sorted(set(keys)))}
        for i, key in enumerate(keys):
            if column < len(rows[i]):
                ranks[i][column] = order[key]
    return ranks


# --- table layout -----------------------------------------------------------------------------------------

# columns folded away until asked for: the timing table's spread and parts of a total, the accuracy table's
# interval and second test (the difference and the tested p stay in view)
SECONDARY = ("p90 ms", "epoch s", "encode s", "score s", "rank s", "as released: test s", "pair encode s", "loss s",
             "95% CI", "p (queries, bootstrap)")
NAME_COLUMNS = ("method", "run")


def table_view(header: list[str], rows: list[list[str]], name: str = "") -> dict[str, Any]:
    """A table as the site shows it: the method (or run) column first and sticky, then the ratio columns, ours
    beside the paper's ('step / X', 'paper: step / X', ...), then the paper's times and the rest in table order;
    the SECONDARY columns folded. Each cell carries its rank in its column (:func:`sort_ranks`)."""
    ranks = sort_ranks(rows)
    first = [i for i, h in enumerate(header) if h in NAME_COLUMNS][:1]
    ours = [i for i, h in enumerate(header) if " / " in h and ":" not in h]
    paper = [i for i, h in enumerate(header) if ":" in h and not h.startswith("as released")]
    ratios = []
    for i in ours:  # each of our ratios, then the paper's ratio of the same quantity
        ratios.append(i)
        ratios += [j for j in paper if header[j].split(": ", 1)[1] == header[i] and j not in ratios]
    ratios += [j for j in paper if " / " in header[j] and j not in ratios]
    lead = first + ratios + [j for j in paper if j not in ratios]
    order = lead + [i for i in range(len(header)) if i not in lead]

    def cls(i: int) -> str:
        return "sticky" if i in first else "more" if header[i] in SECONDARY else ""

    return {"name": name, "header": [(header[i], cls(i)) for i in order],
            "rows": [[(row[i], rank[i], cls(i)) for i in order] for row, rank in zip(rows, ranks)],
            "folded": [header[i] for i in order if cls(i) == "more"]}


# --- what a page says -------------------------------------------------------------------------------------

def headline(rs: ResultSet) -> tuple[str, list[tuple[str, str]]]:
    """What the index shows of a set: the selection metric of each run (mean ± std over seeds, n), or the
    median train step when the data is random (timing only)."""
    if rs.timing_only:
        return "train step ms (timing only: random data)", [
            (name, tables.mean_std(tables.timing_values(runs, "train_step", scale=1e3)))
            for name, runs in rs.runs.items()]
    metric = rs.select
    out = []
    for name, runs in rs.runs.items():
        values = [r["metrics"][metric] for r in runs if metric in r["metrics"]]
        out.append((name, f"{tables.mean_std(values)} (n={len(values)})" if values else "–"))
    lower = metric.rsplit("/", 1)[-1] in ("MedR", "MeanR")
    return f"test {metric}{' (lower is better)' if lower else ''}", out


def data_line(results: list[dict[str, Any]]) -> str:
    """Where the data came from: the source's origin line, else the source and its folder's name."""
    d = results[0].get("dataset") or {}
    if d.get("origin"):
        return str(d["origin"])
    root = d.get("root")
    where = f", folder {Path(str(root)).name}" if root else ""
    return f"{d.get('source', results[0]['config']['dataset'].get('source', '?'))}{where}" + (
        " (random data in a real dataset's shapes)" if d.get("timing_only") else "")


def machine(result: dict[str, Any]) -> str:
    hw = result["environment"]["hardware"]
    gpu = (hw.get("gpu") or {}).get("name")
    return gpu or f"{hw['cpu']} ({hw['cores']} cores)"


def command(result: dict[str, Any]) -> str:
    """The command that wrote the run, as recorded; paths outside the project shortened to their last part."""
    argv = result["environment"].get("argv") or []
    words = ["python -m harness", *argv[1:]] if argv else ["?"]
    return " ".join(f"…/{Path(w).name}" if w.startswith(("/", "../")) else w for w in words)


def provenance_rows(rs: ResultSet, with_code: bool = True) -> tuple[list[str], list[list[str]]]:
    """One row per result file: where and how it was made and, ``with_code``, its code against this checkout
    (``code``: fresh, stale with the changed files, dirty or unverifiable; :mod:`harness.report.freshness`). The
    Markdown pages, which are committed, leave the code column out: they describe the results, not a
    checkout (as the written tables do)."""
    header = ["run", "seed", "machine", "device", "threads", "precision", "torch", "commit", *(["code"] * with_code),
              "date", "wall s", "command"]
    rows = []
    for r in rs.results:
        env, git = r["environment"], r["environment"].get("git") or {}
        commit = (git.get("commit") or "?")[:10] + (" (dirty)" if fr.uncommitted(r) else "")
        code = [fr.judge(r, _checkout()).label()] if with_code else []
        wall = r.get("wall_s")
        rows.append([r["run_name"], str(r["seed"]), machine(r), env["hardware"]["device"],
                     str(env["hardware"].get("torch_threads", "?")), tables.precision_of(r), env["versions"]["torch"],
                     commit, *code, str(env.get("date", "?"))[:19], "–" if wall is None else f"{wall:.1f}",
                     command(r)])
    return header, rows


@functools.cache
def _checkout() -> fr.Checkout:
    """The checkout of the running harness, read once per process (its files and HEAD's)."""
    return fr.Checkout()


def summary(rs: ResultSet) -> dict[str, Any]:
    seeds = sorted({r["seed"] for r in rs.results})
    return {"task": rs.task, "version": ", ".join(sorted({str(r["task_version"]) for r in rs.results})),
            "folder": rs.folder, "data": data_line(rs.results), "files": len(rs.results), "runs": list(rs.runs),
            "seeds": ", ".join(map(str, seeds)), "machines": sorted({machine(r) for r in rs.results}),
            "newest": max(str(r["environment"].get("date", "")) for r in rs.results)[:10] or "?",
            "hardware": tables.hardware_line(rs.results)}


# --- notes, readings and related sets --------------------------------------------------------------------

def notes(rs: ResultSet) -> list[Path]:
    """The README.md notes that describe the set: its folder's and those of the folders above it up to the folder
    given on the command line (which speaks for every set under it), outermost first."""
    folder, root = rs.folder.resolve(), (rs.root or rs.folder).resolve()
    found = []
    for where in [folder, *folder.parents]:
        if (where / "README.md").is_file():
            found.append(where / "README.md")
        if where == root or root not in where.parents:
            break
    return found[::-1]


def project_root(folder: Path) -> Path | None:
    """The checkout that holds ``folder`` and readings of results (a ``docs/results`` folder), if any."""
    for where in folder.resolve().parents:
        if (where / "docs" / "results").is_dir():
            return where
    return None


def readings(rs: ResultSet) -> list[Path]:
    """The pages of ``docs/results/`` (not the generated ``tasks/``) that mention the set's folder (a path such as
    ``results/gpu/coco_shapes``, alone or before a '/'); when none does, those that mention the nearest folder
    above it (``results/gpu``), short of the top results folder, preferring those that also name the folder
    itself (``coco_shapes``)."""
    home = project_root(rs.folder)
    if home is None:
        return []
    rel = rs.folder.resolve().relative_to(home)
    texts = {p: p.read_text(encoding="utf-8") for p in sorted((home / "docs" / "results").glob("*.md"))}
    name = re.compile(rf"(?<![\w-]){re.escape(rel.name)}(?![\w-])")
    for where in [rel, *rel.parents][:max(1, len(rel.parts) - 1)]:
        mention = re.compile(rf"(?<![\w.-]){re.escape(where.as_posix())}(?![\w-]|\.\w)")
        found = [p for p, text in texts.items() if mention.search(text)]
        if found and where != rel:  # of those about the folder above, the ones that name this folder too
            found = [p for p in found if name.search(texts[p])] or found
        if found:
            return found
    return []


def related(rs: ResultSet, sets: list[ResultSet]) -> list[ResultSet]:
    """The other result sets of the same task (its runs in other folders: another machine, another size)."""
    return [s for s in sets if s.task == rs.task and s is not rs]


# --- figures ----------------------------------------------------------------------------------------------

def _save(fig: Any, path: Path) -> None:
    """SVG (no date, fixed ids) or PNG (no software stamp), so that an unchanged figure is an unchanged file."""
    import matplotlib

    path.parent.mkdir(parents=True, exist_ok=True)
    with matplotlib.rc_context({"svg.hashsalt": "swamp-bench"}):
        if path.suffix == ".svg":
            fig.savefig(path, metadata={"Date": None})
        else:
            fig.savefig(path, dpi=80, metadata={"Software": None})


def _by_epoch(runs: list[dict[str, Any]], key: str) -> tuple[list[int], list[float], list[float]]:
    """Epochs, mean and std over seeds of ``key`` in the runs' histories (epochs that every seed reached)."""
    per_seed = [{h["epoch"]: h[key] for h in r.get("history") or [] if key in h and h[key] is not None} for r in runs]
    per_seed = [s for s in per_seed if s]
    if not per_seed:
        return [], [], []
    epochs = sorted(set.intersection(*(set(s) for s in per_seed)))
    means = [statistics.mean(s[e] for s in per_seed) for e in epochs]
    stds = [statistics.stdev(s[e] for s in per_seed) if len(per_seed) > 1 else 0.0 for e in epochs]
    return epochs, means, stds


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
        step = tables.timing_values(runs, "train_step", scale=1e3)
        test, est = tables.test_seconds(runs, "total", "")
        if step or test:
            names.append(name)
            steps.append(statistics.mean(step) if step else 0.0)
            tests.append(statistics.mean(test) if test else 0.0)
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


def data_settings(runs: list[dict[str, Any]]) -> str:
    """The dataset settings in which the runs differ from their task file ('dataset.images=[64, 20, 100]'), or ''
    when they ran on the task's own data."""
    keys = {}
    for r in runs:
        for key, value in plot.varied(r).items():
            if key.startswith("dataset.") and key != "dataset.root":
                keys[key] = value
    return ", ".join(f"{k}={v}" for k, v in sorted(keys.items()))


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
    base = tables.baseline_run(groups, published.get("relative_to"), rs.reference)
    out = []
    for name, runs in groups.items():
        same = groups[tables.baseline_run(groups, groups[base][0]["method"], precision=tables.precision_of(runs[0]))]
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
    md = png.with_suffix(".md")
    if md.is_file():
        lines = md.read_text().splitlines()
        return lines[1] if len(lines) > 1 else png.stem
    return png.stem


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
            _save(fig, path)
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
            figures.append(Figure(_rel(png, home or out), _plot_caption(png)))
    return figures


# --- writing pages ----------------------------------------------------------------------------------------

def _rel(path: Path, start: Path) -> str:
    return Path(os.path.relpath(path.resolve(), start.resolve())).as_posix()


def _environment(fmt: str) -> Any:
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=fmt == "html",
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["url"] = lambda p: quote(str(p), safe="/@=,.-_~")
    env.filters["cell"] = lambda text: str(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
    return env


def downloads(rs: ResultSet, out: Path, fmt: str, data: dict[str, Any], home: Path | None = None) -> dict[str, Any]:
    """Links to the set's result files, tables and cluster reports: copied into the site (html) or pointing
    at where they lie (md)."""
    files, table_links, clusters = [], [], []
    for r in rs.results:
        src = Path(r["_path"])
        rel_in_set = src.relative_to(rs.folder)
        if fmt == "html":
            target = out / rs.slug / "files" / rel_in_set
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, target)
            files.append((f"{r['run_name']} seed {r['seed']}", target.relative_to(out).as_posix()))
        else:
            files.append((f"{r['run_name']} seed {r['seed']}", _rel(src, home or out)))
    rendered = tables.table_files(rs.results, rs.folder, reference=rs.reference, test_stat=rs.test_stat, data=data)
    for path, text in rendered.items():
        committed = path.is_file()
        if fmt == "html":
            target = out / rs.slug / "tables" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text() if committed else text)
            table_links.append((path.name, target.relative_to(out).as_posix()))
        elif committed:
            table_links.append((path.name, _rel(path, home or out)))
    for report in sorted(rs.folder.glob("*/clusters-seed*/clusters.html" if fmt == "html"
                                        else "*/clusters-seed*/clusters.md")):
        label = f"{report.parent.parent.name} {report.parent.name.replace('clusters-', '')}"
        if fmt == "html":
            target = out / rs.slug / "clusters" / report.parent.parent.name / report.parent.name
            shutil.copytree(report.parent, target, dirs_exist_ok=True)
            clusters.append((label, (target / report.name).relative_to(out).as_posix()))
        else:
            clusters.append((label, _rel(report, home or out)))
    return {"files": files, "tables": table_links, "clusters": clusters}


def timing_table(rs: ResultSet, table: tables.TimingTable,
                 footnote: list[str]) -> tuple[list[str], list[list[str]], list[str]]:
    """The timing table as a page shows it: the paper's cells of a run left empty ('–') when the run used data
    other than its task file's (the data the paper's times are for, e.g. a 100-image cut beside the paper's full
    test split), with a note naming the setting; the paper's columns dropped when no run keeps any. Which row is
    which run and which columns are the paper's come with the table (:class:`harness.report.tables.TimingTable`)."""
    header, paper = list(table.header), table.published
    if not paper:
        return header, table.rows, footnote
    resized = {}
    rows = [list(row) for row in table.rows]
    for row, name in zip(rows, table.runs):
        settings = data_settings(rs.runs.get(name, []))
        if settings:
            resized[name] = settings
            for i in paper:
                row[i] = "–"
    if not resized:
        return header, rows, footnote
    label = (rs.results[0].get("reference") or {}).get("timing", {}).get("label", "published")
    note = (f"{label}: left empty for runs on data other than the task file's, which the published times are for "
            f"({'; '.join(f'{name}: {v}' for name, v in resized.items())}).")
    if len(resized) == len(set(table.runs)):
        keep = [i for i in range(len(header)) if i not in paper]
        header, rows = [header[i] for i in keep], [[row[i] for i in keep] for row in rows]
        note = (f"No {label} columns: every run used data other than the task file's, which the published times "
                f"are for ({'; '.join(sorted(set(resized.values())))}).")
    return header, rows, [*footnote, note]


def page(rs: ResultSet, out: Path, fmt: str, figures: bool = True, render: bool = True,
         home: Path | None = None) -> dict[str, Any]:
    """Everything a set's page shows, computed once."""
    data = tables.table_data(rs.results, rs.reference, rs.test_stat)
    rs.figures = draw_figures(rs, out, "svg" if fmt == "html" else "png", render, home) if figures else []
    timing = timing_table(rs, tables.timing_table(rs.results, rs.reference), data["timing"][2])
    provenance = provenance_rows(rs, fmt == "html")
    studies = tuning.rows(rs.results)
    return {"set": rs, "summary": summary(rs), "accuracy": data["accuracy"], "timing": timing, "studies": studies,
            "provenance": provenance, "figures": rs.figures, "links": downloads(rs, out, fmt, data, home),
            "headline": headline(rs),
            "views": {"accuracy": table_view(*data["accuracy"][:2], "accuracy"),
                      "timing": table_view(*timing[:2], "timing"),
                      "studies": table_view(*studies[:2], "studies"),
                      "provenance": table_view(*provenance, "provenance")}}


def _href(target: str, base: Path, slugs: dict[Path, str], pages: AbstractSet[Path]) -> str | None:
    """Where a relative link of a note or reading (``target``, relative to ``base``) points inside the site: the
    page of the result set that holds the file, the page a ``docs/results/tasks/`` page became, or a reading the
    site holds (``pages``); None when the site has no such page."""
    path = (base / unquote(target.split("#")[0])).resolve()
    for candidate in (path, *path.parents):
        if candidate in slugs:
            return f"{slugs[candidate]}.html"
    if path.parent.name == "tasks" and path.suffix == ".md" and path.stem in slugs.values():
        return f"{path.stem}.html"
    if path in pages:
        return f"reading-{path.stem}.html" + (f"#{target.split('#', 1)[1]}" if "#" in target else "")
    return None


def _links_from(base: Path, slugs: dict[Path, str], pages: AbstractSet[Path]) -> markdown.Link:
    """The link rewriter of a note or reading in ``base`` (:func:`_href`)."""
    return lambda target: _href(target, base, slugs, pages)


def context(rs: ResultSet, sets: list[ResultSet], out: Path, fmt: str, home: Path | None = None,
            held: AbstractSet[Path] = frozenset()) -> dict[str, Any]:
    """What a page says beyond its runs: the other sets of its task, the notes beside its folder and the readings
    that discuss it. In the site, notes are rendered in place and readings are pages of their own
    (``reading-<name>.html``, the ``held`` ones); Markdown pages link both where they lie."""
    slugs = {s.folder.resolve(): s.slug for s in sets}
    others = [(s.name, f"{s.slug}.{fmt}", summary(s)["hardware"]) for s in related(rs, sets)]
    top = project_root(rs.folder)
    named = [(r.relative_to(top).as_posix(), r) for r in readings(rs)] if top is not None else []  # None: none
    if fmt == "html":
        return {"related": others,
                "notes": [(_note_name(n, rs), markdown.render(n.read_text(encoding="utf-8"),
                                                               _links_from(n.parent, slugs, held), shift=2))
                          for n in notes(rs)],
                "readings": [(name, f"reading-{r.stem}.html") for name, r in named]}
    where = home or out
    return {"related": others, "notes": [(_note_name(n, rs), _rel(n, where)) for n in notes(rs)],
            "readings": [(name, _rel(r, where)) for name, r in named]}


def _note_name(note: Path, rs: ResultSet) -> str:
    """A note's path as the page names it, from the given folder's own name on ('results/gpu/README.md')."""
    root = (rs.root or rs.folder).resolve()
    return f"{root.name}/{note.relative_to(root).as_posix()}" if root in note.parents else note.name


def write_readings(sets: list[ResultSet], held: set[Path], out: Path, env: Any, command_line: str) -> list[Path]:
    """Each reading the site's pages link (``held``), rendered as a page of the site."""
    slugs = {s.folder.resolve(): s.slug for s in sets}
    written = []
    for reading in sorted(held):
        top = project_root(reading.parent)
        path = out / f"reading-{reading.stem}.html"
        body = markdown.render(reading.read_text(encoding="utf-8"),
                               _links_from(reading.parent, slugs, held))
        write_text_atomic(path, env.get_template("reading.html").render(
            name=reading.relative_to(top).as_posix() if top else reading.name, body=body, command=command_line))
        written.append(path)
    return written


def build(folders: list[Path], out: Path, fmt: str = "html", figures: bool = True,
          progress: bool = True, command_line: str = "", render: bool = True,
          home: Path | None = None) -> tuple[list[Path], int]:
    """Write the site (or Markdown pages) for every result set under ``folders`` into ``out``; return the pages.
    ``render`` False writes the pages but not the figure files they show (the pages' text is the same).
    ``home``: where the pages will lie when that is not ``out`` (Markdown links to result files are relative).
    Returns the pages of the index and the sets written (the index first) and the number of figures they show;
    the site also holds a page per reading its pages link."""
    from tqdm import tqdm

    if fmt not in FORMATS:
        raise ConfigError(f"unknown report format {fmt!r}; use one of {', '.join(FORMATS)}")
    sets = find_sets(folders)
    out.mkdir(parents=True, exist_ok=True)
    env = _environment(fmt)
    md = fmt == "md"
    pages, written = [], []
    held = {r for rs in sets for r in readings(rs)}
    for rs in tqdm(sets, desc="report", unit="page", delay=1.0, disable=not progress):
        info = page(rs, out, fmt, figures, render, home)
        info.update(context(rs, sets, out, fmt, home, held))
        if md:
            accuracy: tuple[list[str], list[list[str]], list[str]] = info["accuracy"]
            timing: tuple[list[str], list[list[str]], list[str]] = info["timing"]
            provenance: tuple[list[str], list[list[str]]] = info["provenance"]
            info["accuracy_md"] = tables.format_table(*accuracy, "md")
            info["timing_md"] = tables.format_table(*timing, "md")
            info["provenance_md"] = tables.format_table(*provenance, [], "md")
            studies: tuple[list[str], list[list[str]], list[str]] = info["studies"]
            info["studies_md"] = tables.format_table(*studies, "md") if studies[1] else ""
        path = out / f"{rs.slug}.{fmt}"
        write_text_atomic(path, env.get_template(f"task.{fmt}").render(**info, command=command_line))
        pages.append(info)
        written.append(path)
    index = out / ("README.md" if md else "index.html")
    ledger, ledger_summary = ledger_rows(folders, sets, fmt)
    ledger_ranks = sort_ranks([[r["claim"], r["paper"], r["ours"], r["verdict"], r["hardware"], r["evidence"]]
                               for r in ledger])
    write_text_atomic(index, env.get_template(f"index.{fmt}").render(
        pages=pages, command=command_line, folders=[str(f) for f in folders], ranks=sort_ranks(index_rows(pages)),
        ledger=ledger, ledger_summary=ledger_summary, ledger_ranks=ledger_ranks))
    if not md:
        write_readings(sets, held, out, env, command_line)
        for asset in ("site.css", "site.js"):
            shutil.copyfile(TEMPLATES / asset, out / asset)
    return [index, *written], sum(len(p["figures"]) for p in pages)


def ledger_rows(folders: list[Path], sets: list[ResultSet], fmt: str) -> tuple[list[dict[str, str]], str]:
    """The claims ledger (:mod:`harness.report.claims`) of the checkout holding ``folders``, one row per piece of
    evidence with a link to the page of the result set that measured it, and its summary line; no rows where
    the checkout has no ledger."""
    from harness.report import claims

    root = next((r for r in map(_ledger_root, folders) if r is not None), None)
    if root is None:
        return [], ""
    lines = claims.judge(root / claims.DEFAULT_LEDGER, root)
    pages = {rs.folder.resolve(): f"{rs.slug}.{fmt}" for rs in sets}
    rows = [{"claim": line.claim, "paper": line.paper, "ours": line.ours, "interval": line.interval,
             "verdict": line.shown_verdict() if fmt == "html" else line.verdict,
             "why": line.why + (f"; evidence {line.state}: {line.freshness.why(4)}" if fmt == "html" and
                                line.freshness and line.state != fr.FRESH else ""),
             "hardware": line.hardware or "–",
             "evidence": line.evidence, "page": pages.get((root / line.evidence).resolve(), "") if line.evidence
             else ""} for line in lines]
    return rows, claims.summary(lines)


def _ledger_root(folder: Path) -> Path | None:
    from harness.report import claims

    for where in (folder.resolve(), *folder.resolve().parents):
        if (where / claims.DEFAULT_LEDGER).is_file():
            return where
    return None


def index_rows(pages: list[dict[str, Any]]) -> list[list[str]]:
    """The index's cells as text, column by column as the index shows them (what its rows sort by)."""
    rows = []
    for p in pages:
        s = p["summary"]
        rows.append([f"{s['task']} v{s['version']}", str(s["folder"]), s["data"], str(s["files"]), str(len(s["runs"])),
                     s["seeds"], "; ".join(s["machines"]), s["newest"], p["headline"][0]])
    return rows


def cmd(args: argparse.Namespace) -> int:
    """Entry point of ``python -m harness report``."""
    folders = [Path(f) for f in args.folders]
    out = Path(args.out)
    flags = f" --format {args.format}" if args.format != "html" else ""
    flags += " --no-figures" if args.no_figures else ""
    line = f"python -m harness report {' '.join(args.folders)} --out {args.out}{flags}"
    start = time.perf_counter()
    written, n_fig = build(folders, out, args.format, figures=not args.no_figures, progress=not args.no_progress,
                           command_line=line)
    print(f"{len(written) - 1} result sets, {len(written)} pages, {n_fig} figures in {out} "
          f"({time.perf_counter() - start:.1f} s); open {written[0]}")
    return 0
