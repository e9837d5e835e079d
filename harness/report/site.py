"""A results site generated from result files only: ``python -m harness report RESULTS... --out DIR``.

A *result set* is one folder of runs of one task (``<folder>/<run>/seed<k>.json``), e.g.
``results/msrvtt_vgg128``; runs in different folders may differ in settings or machines, so each
set gets a page of its own and the index groups the sets by task. A page holds the accuracy and
timing tables (the same cells as ``python -m harness table``, with the reference run and tested
statistic recorded beside the set's committed tables, in ``tables.json``), figures drawn from the result files
(learning curves with a band over seeds, times on a log scale, sweeps), the provenance of every run
and links to the result files, the tables and cluster reports. The index leads with the claims ledger, judged once
per build from the result files the pages loaded (:func:`harness.report.claims.judge`).

The site renders what the model of the results (:mod:`harness.report.model`), the tables
(:mod:`harness.report.accuracy`, :mod:`harness.report.timing`) and the ledger give it; each cell carries the number it
sorts by (:mod:`harness.report.cells`).

``--format html`` (default) writes a self-contained site (HTML from the Jinja2 templates beside
this module, one CSS file, a few lines of JavaScript for sorting and filtering; no network) with the
result files and tables copied in, so the folder can be moved or archived. ``--format md`` writes
the same pages as Markdown that link to the result files where they lie (for ``docs/results/``).
"""
from __future__ import annotations

import dataclasses
import functools
import shutil
import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config import spec as specs
from harness.errors import ConfigError
from harness.report import formats, markdown, model, reference_page, timing, tuning
from harness.report import freshness as fr
from harness.report.cells import EMPTY, Cell, mean_std, number
from harness.report.figures import draw_figures
from harness.report.files import table_files
from harness.report.readings import links_from, note_name, notes, project_root, readings, related, write_readings
from harness.report.sets import ResultSet, data_settings, find_sets, relative
from harness.report.templating import TEMPLATES, environment
from harness.report.views import sort_ranks, table_view
from harness.store import executed as ex
from harness.store.io import write_text_atomic

FORMATS = ("html", "md")


def headline(rs: ResultSet) -> tuple[str, list[tuple[str, str]]]:
    """What the index shows of a set: the selection metric of each run (mean ± std over seeds, n), or the
    median train step when the data is random (timing only)."""
    if rs.timing_only:
        return "train step ms (timing only: random data)", [
            (name, mean_std(timing.timing_values(runs, "train_step", scale=1e3))) for name, runs in rs.runs.items()]
    metric = rs.select
    out: list[tuple[str, str]] = []
    for name, runs in rs.runs.items():
        values = [r["metrics"][metric] for r in runs if metric in r["metrics"]]
        out.append((name, mean_std(values) + f" (n={len(values)})" if values else EMPTY))
    lower = specs.lower_is_better(metric)
    return f"test {metric}{' (lower is better)' if lower else ''}", out


def data_line(results: list[dict[str, Any]]) -> str:
    """Where the data came from: the source's origin line, else the source and its folder's name."""
    d = results[0].get("dataset") or {}
    if d.get("origin"):
        return str(d["origin"])
    root = d.get("root")
    where = f", folder {Path(str(root)).name}" if root else ""
    return f"{d.get('source', results[0]['config']['dataset'].get('source', '?'))}{where}" + (
        " (random data in a real dataset's shapes)" if model.timing_only(results[:1]) else "")


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
        commit = (git.get("commit") or "?")[:10] + (" (dirty)" if ex.uncommitted(r) else "")
        code = [fr.judge(r, _checkout()).label()] if with_code else []
        threads = model.hardware(r).get("torch_threads", "?")
        rows.append([r["run_name"], Cell(str(r["seed"]), r["seed"]), model.hardware_name(r), model.device(r),
                     Cell(str(threads), threads if isinstance(threads, int) else None), model.precision(r),
                     env["versions"]["torch"], commit, *code, str(env.get("date", "?"))[:19],
                     number(r.get("wall_s"), ".1f"), command(r)])
    return header, rows


@functools.cache
def _checkout() -> fr.Checkout:
    """The checkout of the running harness, read once per process (its files and HEAD's)."""
    return fr.Checkout()


def summary(rs: ResultSet) -> dict[str, Any]:
    """What the index and a page's head say of a set: task, version, folder, data, files, runs, seeds, machines, the
    newest run's date and the machine line of its tables."""
    seeds = sorted({r["seed"] for r in rs.results})
    return {"task": rs.task, "version": ", ".join(sorted({str(r["task_version"]) for r in rs.results})),
            "folder": rs.folder, "data": data_line(rs.results), "files": len(rs.results), "runs": list(rs.runs),
            "seeds": ", ".join(map(str, seeds)), "machines": sorted({model.hardware_name(r) for r in rs.results}),
            "newest": max(str(r["environment"].get("date", "")) for r in rs.results)[:10] or "?",
            "hardware": model.machine_line(rs.results)}


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
            files.append((f"{r['run_name']} seed {r['seed']}", relative(src, home or out)))
    rendered = table_files(rs.results, rs.folder, reference=rs.reference, test_stat=rs.test_stat, data=data)
    for path, text in rendered.items():
        committed = path.is_file()
        if fmt == "html":
            target = out / rs.slug / "tables" / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text() if committed else text)
            table_links.append((path.name, target.relative_to(out).as_posix()))
        elif committed:
            table_links.append((path.name, relative(path, home or out)))
    for report in sorted(rs.folder.glob("*/clusters-seed*/clusters.html" if fmt == "html"
                                        else "*/clusters-seed*/clusters.md")):
        label = f"{report.parent.parent.name} {report.parent.name.replace('clusters-', '')}"
        if fmt == "html":
            target = out / rs.slug / "clusters" / report.parent.parent.name / report.parent.name
            shutil.copytree(report.parent, target, dirs_exist_ok=True)
            clusters.append((label, (target / report.name).relative_to(out).as_posix()))
        else:
            clusters.append((label, relative(report, home or out)))
    return {"files": files, "tables": table_links, "clusters": clusters}


def timing_table(rs: ResultSet, table: timing.TimingTable) -> timing.TimingTable:
    """The timing table as a page shows it: the paper's cells of a run left empty ('–') when the run used data
    other than its task file's (the data the paper's times are for, e.g. a 100-image cut beside the paper's full
    test split), with a note naming the setting; the paper's columns dropped when no run keeps any. Which row is
    which run and which columns are the paper's come with the table (:class:`harness.report.timing.TimingTable`)."""
    paper = table.published
    if not paper:
        return table
    resized = {}
    rows = [list(row) for row in table.rows]
    for row, name in zip(rows, table.runs):
        settings = data_settings(rs.runs.get(name, []))
        if settings:
            resized[name] = settings
            for i in paper:
                row[i] = Cell(EMPTY)
    if not resized:
        return table
    label = (rs.results[0].get("reference") or {}).get("timing", {}).get("label", "published")
    note = (f"{label}: left empty for runs on data other than the task file's, which the published times are for "
            f"({'; '.join(f'{name}: {v}' for name, v in resized.items())}).")
    if len(resized) < len(set(table.runs)):
        return dataclasses.replace(table, rows=rows, footnote=[*table.footnote, note])
    keep = [i for i in range(len(table.header)) if i not in paper]
    moved = {old: new for new, old in enumerate(keep)}
    note = (f"No {label} columns: every run used data other than the task file's, which the published times "
            f"are for ({'; '.join(sorted(set(resized.values())))}).")
    return timing.TimingTable([table.header[i] for i in keep], [[row[i] for i in keep] for row in rows],
                              [*table.footnote, note], runs=table.runs, ratios={moved[i]: None for i in table.ratios})


def page(rs: ResultSet, out: Path, fmt: str, figures: bool = True, render: bool = True,
         home: Path | None = None) -> dict[str, Any]:
    """Everything a set's page shows, computed once."""
    data = formats.table_data(rs.results, rs.reference, rs.test_stat)
    rs.figures = draw_figures(rs, out, "svg" if fmt == "html" else "png", render, home) if figures else []
    accuracy, table = data["accuracy"], data["timing"]
    assert isinstance(table, timing.TimingTable)
    shown = timing_table(rs, table)
    provenance = provenance_rows(rs, fmt == "html")
    studies = tuning.rows(rs.results)
    return {"set": rs, "summary": summary(rs), "accuracy": (accuracy.header, accuracy.rows, accuracy.footnote),
            "timing": (shown.header, shown.rows, shown.footnote), "studies": studies,
            "provenance": provenance, "figures": rs.figures, "links": downloads(rs, out, fmt, data, home),
            "headline": headline(rs),
            "views": {"accuracy": table_view(accuracy.header, accuracy.rows, "accuracy"),
                      "timing": table_view(shown.header, shown.rows, "timing", shown.ratios, shown.published),
                      "studies": table_view(*studies[:2], "studies"),
                      "provenance": table_view(*provenance, "provenance")}}


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
                "notes": [(note_name(n, rs), markdown.render(n.read_text(encoding="utf-8"),
                                                               links_from(n.parent, slugs, held), shift=2))
                          for n in notes(rs)],
                "readings": [(name, f"reading-{r.stem}.html") for name, r in named]}
    where = home or out
    return {"related": others, "notes": [(note_name(n, rs), relative(n, where)) for n in notes(rs)],
            "readings": [(name, relative(r, where)) for name, r in named]}


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
    env = environment(fmt)
    md = fmt == "md"
    pages, written = [], []
    held = {r for rs in sets for r in readings(rs)}
    for rs in tqdm(sets, desc="report", unit="page", delay=1.0, disable=not progress):
        info = page(rs, out, fmt, figures, render, home)
        info.update(context(rs, sets, out, fmt, home, held))
        if md:
            info.update(markdown_tables(info))
        path = out / f"{rs.slug}.{fmt}"
        write_text_atomic(path, env.get_template(f"task.{fmt}").render(**info, command=command_line))
        pages.append(info)
        written.append(path)
    references = reference_pages(folders, sets, out, fmt, env, command_line, render)
    written += references
    index = out / ("README.md" if md else "index.html")
    ledger, ledger_summary = ledger_rows(folders, sets, fmt)  # the ledger, judged once
    ledger_ranks = sort_ranks([[r["claim"], r["paper"], r["ours"], r["verdict"], r["tuned"], r["hardware"],
                                r["evidence"]] for r in ledger])
    write_text_atomic(index, env.get_template(f"index.{fmt}").render(
        pages=pages, command=command_line, folders=[str(f) for f in folders], ranks=sort_ranks(index_rows(pages)),
        ledger=ledger, ledger_summary=ledger_summary, ledger_ranks=ledger_ranks,
        references=[p.name for p in references]))
    if not md:
        write_readings(sets, held, out, env, command_line)
        for asset in ("site.css", "site.js"):
            shutil.copyfile(TEMPLATES / asset, out / asset)
    return [index, *written], sum(len(p["figures"]) for p in pages)


def markdown_tables(info: dict[str, Any]) -> dict[str, str]:
    """A page's tables as the Markdown page writes them (its accuracy, timing, provenance and tuning tables)."""
    def md(header: list[str], rows: list[list[str]], footnote: list[str] | None = None) -> str:
        return formats.format_table(header, rows, footnote or [], "md")

    studies = info["studies"]
    return {"accuracy_md": md(*info["accuracy"]), "timing_md": md(*info["timing"]),
            "provenance_md": md(*info["provenance"]), "studies_md": md(*studies) if studies[1] else ""}


def loaded_results(folders: list[Path], sets: list[ResultSet]) -> Callable[[Path], list[dict[str, Any]]]:
    """A loader for the ledger (:func:`harness.report.claims.judge`) that gives the results under a folder from the
    sets the site has loaded already, and loads only a folder outside ``folders``."""
    from harness.report import claims

    roots = [Path(f).resolve() for f in folders]

    def load(folder: Path) -> list[dict[str, Any]]:
        where = folder.resolve()
        if any(where == r or r in where.parents for r in roots):
            return [r for rs in sets if where == rs.folder.resolve() or where in rs.folder.resolve().parents
                    for r in rs.results]
        return claims.load_evidence(folder)

    return load


def ledger_rows(folders: list[Path], sets: list[ResultSet], fmt: str) -> tuple[list[dict[str, str]], str]:
    """The claims ledger (:mod:`harness.report.claims`) of the checkout holding ``folders``, judged from the results
    of ``sets`` (:func:`loaded_results`), one row per piece of evidence with a link to the page of the result set
    that measured it, and its summary line; no rows where the checkout has no ledger."""
    from harness.report import claims

    root = next((r for r in map(_ledger_root, folders) if r is not None), None)
    if root is None:
        return [], ""
    lines = claims.judge(root / claims.DEFAULT_LEDGER, root, loader=loaded_results(folders, sets))
    pages = {rs.folder.resolve(): f"{rs.slug}.{fmt}" for rs in sets}
    rows = [{"claim": line.claim, "paper": Cell(line.paper, line.paper_value), "ours": Cell(line.ours, line.value),
             "interval": line.interval, "verdict": line.shown_verdict() if fmt == "html" else line.verdict,
             "flags": line.flags + ("; reason stated: " + line.flagged_ok if line.flagged_ok else ""),
             "tuned": Cell(EMPTY) if line.tuned is None else
             Cell(line.tuned.shown(), line.tuned.value),
             "tuned_budget": "" if line.tuned is None else line.tuned.budget,
             "tuned_why": "" if line.tuned is None else line.tuned.why,
             "why": line.why + (f"; evidence {line.state}: {line.freshness.why(4)}" if fmt == "html" and
                                line.freshness and line.state != fr.FRESH else ""),
             "hardware": line.hardware or "–",
             "evidence": line.evidence, "page": pages.get((root / line.evidence).resolve(), "") if line.evidence
             else ""} for line in lines]
    return rows, claims.summary(lines)


def reference_pages(folders: list[Path], sets: list[ResultSet], out: Path, fmt: str, env: Any,
                    command_line: str, render: bool = True) -> list[Path]:
    """A page for each reference table of cross-modal losses under ``folders`` (a folder whose sub-folders are sets
    that ``harness leaderboard`` made): the table, the ranks, the Bayesian comparison and the costs, as written in
    the folder's ``reference.md``; in the site with its figures inline as images, the critical-difference diagram,
    the forest plot of every comparison and each set's best-so-far curves among them
    (:mod:`harness.report.reference_page`); none where no table was written."""
    found = reference_page.roots(folders)
    slugs = {s.folder.resolve(): f"{s.slug}.{fmt}" for s in sets}
    written = []
    for root in found:
        name = "reference" if len(found) == 1 else f"reference-{root.name}"
        path = out / f"{name}.{fmt}"
        if fmt == "md":
            write_text_atomic(path, reference_page.markdown_page(root, out, name))
        else:
            def link(target: str, root: Path = root, name: str = name) -> str | None:
                source = root / target
                if source.suffix.lower() in reference_page.IMAGES and source.is_file():
                    return reference_page.copy_figure(source, root, out, name)
                return slugs.get(source.resolve())

            blocks = reference_page.page_blocks(root, out, name, link, render)
            write_text_atomic(path, env.get_template("reference.html").render(
                name=f"{root.name}/{reference_page.PAGE}", blocks=blocks, command=command_line))
        written.append(path)
    return written


def _ledger_root(folder: Path) -> Path | None:
    from harness.report import claims

    for where in (folder.resolve(), *folder.resolve().parents):
        if (where / claims.DEFAULT_LEDGER).is_file():
            return where
    return None


def index_rows(pages: list[dict[str, Any]]) -> list[list[str]]:
    """The index's cells, column by column as the index shows them (what its rows sort by)."""
    rows = []
    for p in pages:
        s = p["summary"]
        rows.append([f"{s['task']} v{s['version']}", str(s["folder"]), s["data"], Cell(str(s["files"]), s["files"]),
                     Cell(str(len(s["runs"])), len(s["runs"])), s["seeds"], "; ".join(s["machines"]), s["newest"],
                     p["headline"][0]])
    return rows


@dataclass(frozen=True)
class SiteOptions:
    """What ``python -m harness report`` asks for: the folders of result files, where the site (or the Markdown
    pages) goes, its format (:data:`FORMATS`), whether to draw the figures and show a progress bar."""

    folders: tuple[Path, ...]
    out: Path
    format: str = "html"
    figures: bool = True
    progress: bool = True

    def command_line(self) -> str:
        """The command that writes these pages, as they name it."""
        flags = f" --format {self.format}" if self.format != "html" else ""
        flags += "" if self.figures else " --no-figures"
        return f"python -m harness report {' '.join(map(str, self.folders))} --out {self.out}{flags}"


def write_site(options: SiteOptions) -> tuple[list[Path], int]:
    """Write the site (or the Markdown pages) of ``options`` (:func:`build`), say where, and return the pages written
    (the index first) and the number of figures they show.

    >>> write_site(SiteOptions(folders=(Path("results"),), out=Path("runs/site"), figures=False))  # doctest: +SKIP
    """
    start = time.perf_counter()
    written, n_fig = build(list(options.folders), options.out, options.format, figures=options.figures,
                           progress=options.progress, command_line=options.command_line())
    print(f"{len(written) - 1} result sets, {len(written)} pages, {n_fig} figures in {options.out} "
          f"({time.perf_counter() - start:.1f} s); open {written[0]}")
    return written, n_fig
