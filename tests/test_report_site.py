"""``python -m harness report``: the site and the Markdown pages generated from result files, checked on
runs made for the test, against the committed pages, and in a real browser (headless Chromium)."""
from __future__ import annotations

import os
import shutil
import statistics
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from harness import cli
from harness.report import figures, formats, readings, site, timing, views
from harness.report import sets as result_sets
from harness.report.cells import Cell
from harness.store.schema import load_results

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "docs" / "results" / "tasks"


class Page(HTMLParser):
    """The tables (rows of cells), image sources and link targets of one HTML page."""

    def __init__(self, path: Path):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.headers: list[list[str]] = []
        self.sort: list[list[list[int]]] = []  # each body cell's data-sort rank
        self.images: list[str] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None
        self._in_body = False
        self.feed(path.read_text())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append([])
            self.headers.append([])
            self.sort.append([])
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.tables[-1].append([])
            self.sort[-1].append([])
        elif tag == "th" and not self._in_body:
            self._cell = []
        elif tag == "td" and self._in_body:
            self._cell = []
            if "data-sort" in attrs:
                self.sort[-1][-1].append(int(attrs["data-sort"]))
        elif tag == "img":
            self.images.append(attrs["src"])
        elif tag in ("a", "link", "script") and (attrs.get("href") or attrs.get("src")):
            self.links.append(attrs.get("href") or attrs.get("src"))

    def handle_endtag(self, tag):
        if tag == "tbody":
            self._in_body = False
        elif tag == "td" and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "th" and self._cell is not None:
            self.headers[-1].append("".join(self._cell).strip())
            self._cell = None

    def columns(self, index: int) -> list[dict[str, str]]:
        """The rows of table ``index`` as {heading: cell}, whatever order the page shows the columns in."""
        return [dict(zip(self.headers[index], row)) for row in self.tables[index]]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def local(target: str, page: Path) -> Path | None:
    """The file a relative link of ``page`` points at (None for anchors and other sites)."""
    parsed = urlparse(target)
    if parsed.scheme or not parsed.path:
        return None
    return (page.parent / unquote(parsed.path)).resolve()


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> Path:
    """Two methods × two seeds of the tiny synthetic task and two one-seed sweep points of SwAMP's K (8, 12: their
    names sort apart as text and as numbers), a note beside the folder and a reading that mentions it."""
    from tests.conftest import TINY, write_task

    folder = tmp_path_factory.mktemp("report")
    task = write_task(folder, TINY)
    out = folder / "results"
    for k in (8, 12):
        assert cli.main(["run", str(task), "--methods", "swamp", "--set", f"swamp.K={k}", "--out", str(out),
                         "--no-progress"]) == 0
    assert cli.main(["run", str(task), "--methods", "contrastive,swamp", "--seeds", "0,1", "--out", str(out),
                     "--no-progress", "--reference", "contrastive"]) == 0  # writes the tables last
    (out / "tiny" / "README.md").write_text("# Tiny runs\n\nMade *for the test* with `harness run`:\n\n"
                                            "    python -m harness run tiny.yaml\n\n- one\n- two <b>\n")
    (folder / "docs" / "results").mkdir(parents=True)
    (folder / "docs" / "results" / "tiny-reading.md").write_text(
        "# What the tiny runs say\n\nSee [the runs](../../results/tiny/) and [elsewhere](other.md).\n")
    (folder / "docs" / "results" / "unrelated.md").write_text("# Other\n\nresults/tiny_other is another folder.\n")
    (folder / "claims").mkdir()  # a ledger of one claim, judged from these runs
    (folder / "claims" / "swamp-aistats2023.yaml").write_text(
        "claims:\n- id: tiny\n  claim: SwAMP beats contrastive on the tiny task\n  paper: 1.0\n  evidence:\n"
        "  - results: results/tiny\n    difference: {of: swamp, to: contrastive, metric: a2b/R@1}\n"
        "    verdict: reproduced\n  - not_measured: no such data here\n    verdict: not measured here\n")
    return out


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    assert cli.main(["report", str(runs), "--out", str(out), "--no-progress"]) == 0
    return out


def test_the_site_has_an_index_and_a_page_per_result_set_with_every_link_resolving(built):
    assert sorted(p.name for p in built.glob("*.html")) == ["index.html", "reading-tiny-reading.html", "tiny.html"]
    for name in ("index.html", "tiny.html", "reading-tiny-reading.html"):
        page = Page(built / name)
        assert all(rows for rows in page.tables), f"{name}: a table without rows"
        assert page.tables or name.startswith("reading-")
        for target in page.links + page.images:
            path = local(target, built / name)
            assert path is None or path.is_file(), f"{name}: {target} does not resolve"
    page = Page(built / "tiny.html")
    names = [Path(unquote(src)).name for src in page.images]
    assert {"curves.svg", "timing.svg", "ratio.svg", "sweep-K.svg"} <= set(names)
    for src in page.images:
        assert (built / unquote(src)).read_text().lstrip().startswith(("<?xml", "<svg"))
    # downloads: every run's result file and the tables, copied into the site
    assert len(list((built / "tiny" / "files").rglob("seed*.json"))) == 6
    assert {p.name for p in (built / "tiny" / "tables").iterdir()} == {"accuracy.md", "accuracy.tex", "timing.md",
                                                                        "timing.tex"}


def test_the_index_leads_with_the_claims_ledger(runs, built):
    from harness.report import claims

    text = (built / "index.html").read_text()
    assert text.index('id="claims"') < text.index('id="result-sets"')  # the ledger comes first
    page = Page(built / "index.html")
    ledger = page.tables[0]
    lines = claims.judge(runs.parent / "claims" / "swamp-aistats2023.yaml")
    assert [row[0] for row in ledger] == [line.claim for line in lines]
    assert [row[3] for row in ledger] == [line.verdict for line in lines]
    assert ledger[0][6] == "results/tiny" and "tiny.html" in page.links  # the evidence links to its page
    assert ledger[1][2] == "–" and ledger[1][3] == "not measured here"
    assert [row[4] for row in ledger] == ["–", "–"]  # no verdict under equal tuning without a tuned: set


def test_page_tables_are_the_harness_tables_of_the_result_files(runs, built):
    results = load_results(runs)
    table = formats.table_data(results, "contrastive", None)["accuracy"]
    acc_header, acc_rows = table.header, table.rows
    page = Page(built / "tiny.html")
    assert page.columns(0) == [dict(zip(acc_header, row)) for row in acc_rows]  # the accuracy table, cell for cell
    assert page.headers[0][0] == "method"  # shown first (and sticky), the rest in the table's order
    # and the cell itself is the mean ± sample std over the seeds in the files
    swamp = [r["metrics"]["a2b/R@1"] for r in results if r["run_name"] == "swamp"]
    cell = next(row for row in page.columns(0) if row["method"] == "swamp")["a2b R@1"]
    assert cell.rstrip("*") == f"{statistics.mean(swamp):.2f} ± {statistics.stdev(swamp):.2f}"
    provenance = page.tables[2]
    assert len(provenance) == 6 and all(row[-1].startswith("python -m harness run") for row in provenance)


def test_the_headline_is_each_runs_selection_metric_over_seeds(runs):
    (rs,) = result_sets.find_sets([runs])
    metric, rows = site.headline(rs)
    assert metric == "test a2b/R@1"
    values = [r["metrics"]["a2b/R@1"] for r in rs.results if r["run_name"] == "contrastive"]
    assert dict(rows)["contrastive"] == f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} (n=2)"
    assert dict(rows)["swamp@K=8"].endswith("(n=1)")


def test_the_reference_comes_from_the_committed_accuracy_table(runs):
    (rs,) = result_sets.find_sets([runs])
    assert (rs.reference, rs.test_stat) == ("contrastive", None)  # `run --reference contrastive` wrote the table


def test_the_reference_comes_from_the_tables_record_not_from_their_text(runs, tmp_path):
    shutil.copytree(runs / "tiny", tmp_path / "copy" / "tiny")
    table = tmp_path / "copy" / "tiny" / "accuracy.md"
    table.write_text(table.read_text().replace("--reference contrastive", "--reference swamp"))  # a hand edit
    (rs,) = result_sets.find_sets([tmp_path / "copy"])
    assert rs.reference == "contrastive"  # what tables.json records


def test_the_ledger_is_judged_once_from_the_results_the_pages_loaded(runs, tmp_path, monkeypatch):
    from harness.report import claims

    def again(folder):
        raise AssertionError(f"{folder} was loaded a second time for the ledger")

    judged = []
    judge = claims.judge
    monkeypatch.setattr(claims, "load_evidence", again)
    monkeypatch.setattr(claims, "judge", lambda *args, **kwargs: judged.append(args) or judge(*args, **kwargs))
    site.build([runs], tmp_path / "pages", "md", progress=False, render=False)
    assert len(judged) == 1 and "**direction only**" in (tmp_path / "pages" / "README.md").read_text()


def test_folders_of_one_task_get_pages_of_their_own(runs, tmp_path):
    for name in ("before", "after"):
        shutil.copytree(runs / "tiny", tmp_path / name / "tiny")
    sets = result_sets.find_sets([tmp_path])
    assert [s.slug for s in sets] == ["after-tiny", "before-tiny"]
    assert all(s.task == "tiny" and len(s.results) == 6 for s in sets)
    assert [s.name for s in sets] == [f"{tmp_path.name}/after/tiny", f"{tmp_path.name}/before/tiny"]
    assert [o.slug for o in readings.related(sets[0], sets)] == ["before-tiny"]  # the same task in another folder


def test_markdown_pages_say_they_are_generated_and_link_what_they_show(runs, tmp_path):
    out = tmp_path / "md"
    assert cli.main(["report", str(runs), "--out", str(out), "--format", "md", "--no-progress"]) == 0
    index, page = out / "README.md", out / "tiny.md"
    for path in (index, page):
        assert path.read_text().startswith(f"<!-- generated by `python -m harness report {runs} --out {out} "
                                           "--format md`")
    text = page.read_text()
    assert "## Accuracy (test split)" in text and "| swamp " in text
    for target in _md_links(text):
        assert (page.parent / unquote(target)).is_file(), target


def _sorted_by_rank(cells: list[str]) -> list[str]:
    ranks = [r[0] for r in views.sort_ranks([[c] for c in cells])]
    return [c for _, c in sorted(zip(ranks, cells), key=lambda pair: pair[0])]


def test_cells_sort_by_the_number_they_carry_date_and_swept_value():
    # a cell that stands for a number sorts by it, whatever its text says ('1.48e+04' would sort as 1.48 by text);
    # text after numbers, '–' last
    cells = [Cell("82.12×", 82.12), Cell("1.48e+04", 1.48e4), Cell("≈356.3", 356.3), Cell("12.3 ± 0.4", 12.3),
             Cell("–"), Cell("-0.15", -0.15), Cell("9.5", 9.5), Cell("14.7k", 14.7e3), Cell("3,664", 3664), "text"]
    assert _sorted_by_rank(cells) == ["-0.15", "9.5", "12.3 ± 0.4", "82.12×", "≈356.3", "3,664", "14.7k", "1.48e+04",
                                      "text", "–"]
    # the text of a cell is never read as a number: without its key, '≈9.5' sorts as text, after every number
    assert _sorted_by_rank(["≈9.5", Cell("12.3", 12.3)]) == ["12.3", "≈9.5"]
    # ISO dates in order, with or without a time of day
    assert _sorted_by_rank(["2026-11-27", "2025-12-31T23:59:59", "2026-02-03", "2026-11-27T00:00:01"]) == \
        ["2025-12-31T23:59:59", "2026-02-03", "2026-11-27", "2026-11-27T00:00:01"]
    # a sweep's runs by the swept value, after the method's own run; text otherwise
    assert _sorted_by_rank(["swamp@K=500", "swamp@K=2000", "contrastive", "swamp@K=20", "swamp", "swamp@K=3000",
                            "swamp@K=200"]) == \
        ["contrastive", "swamp", "swamp@K=20", "swamp@K=200", "swamp@K=500", "swamp@K=2000", "swamp@K=3000"]
    assert _sorted_by_rank(["0, 1, 2, 3, 4", "0", "0, 1"]) == ["0", "0, 1", "0, 1, 2, 3, 4"]  # seed lists
    assert _sorted_by_rank(["1abb22f0", "0a648e4c"]) == ["0a648e4c", "1abb22f0"]  # commits are text
    assert views.sort_ranks([["b", Cell("2", 2)], ["a", Cell("2", 2)], ["c", Cell("10", 10)]]) == \
        [[1, 0], [0, 0], [2, 1]]  # ties share a rank


def test_table_view_puts_the_method_and_ratios_first_and_folds_the_parts():
    header = ["method", "test protocol", "train step ms (median)", "p90 ms", "step / a", "test s", "encode s",
              "test / a", "paper: step s", "paper: step / a", "paper: test s", "paper: test / a"]
    rows = [["b", "whole", "20", "25", "2.00×", "3.0", "1.0", "1.50×", "0.2", "2.0×", "4.0", "2.0×"],
            ["a", "whole", "10", "12", "1.00×", "2.0", "0.5", "1.00×", "0.1", "1.0×", "2.0", "1.0×"]]
    view = views.table_view(header, rows, "timing", ratios={4: 9, 7: 11}, published=[8, 9, 10, 11])
    assert [h for h, _ in view["header"]] == [
        "method", "step / a", "paper: step / a", "test / a", "paper: test / a", "paper: step s", "paper: test s",
        "test protocol", "train step ms (median)", "p90 ms", "test s", "encode s"]
    assert dict(view["header"])["method"] == "sticky" and view["folded"] == ["p90 ms", "encode s"]
    assert [cell for cell, _, _ in view["rows"][1]][:3] == ["a", "1.00×", "1.0×"]
    assert [rank for _, rank, _ in view["rows"][0]][:2] == [1, 1] and view["rows"][1][1][1] == 0


def _fake(run: str, method: str, seed: int = 0, history: list | None = None, varied: dict | None = None,
          timing_only: bool = False, published: dict | None = None) -> dict:
    """The parts of a result file that the page's figures and tables read."""
    return {"run_name": run, "method": method, "seed": seed, "task": "toy", "task_version": "1",
            "metrics": {"a2b/R@1": 50.0}, "varied": varied or {}, "history": history or [],
            "config": {"train": {"select": "a2b/R@1"}, "method": {"K": (varied or {}).get("K", 100)}},
            "dataset": {"source": "random" if timing_only else "real", "timing_only": timing_only},
            "reference": {"timing": published} if published else {},
            "environment": {"hardware": {"cpu": "toy CPU", "cores": 2, "device": "cpu"}},
            "profile": {"timing": {"train_step": {"median_s": 0.01 * (1 + len(run)), "p90_s": 0.02 * (1 + len(run))},
                                   "train_epoch": {"median_s": 1.0}, "test_total": {"median_s": 1.0 + len(run)}},
                        "memory": {}}}


def test_learning_curves_hold_at_most_six_lines_per_panel():
    history = [{"epoch": e, "loss": 1.0 / e, "val/a2b/R@1": 10.0 * e} for e in (1, 2, 3)]
    results = [_fake(f"swamp@K={k}", "swamp", history=history, varied={"K": k}) for k in range(10, 140, 10)]
    rs = result_sets.ResultSet("toy", Path("toy"), "toy", results)
    groups = figures.curve_groups(rs)
    assert [len(g) for g in groups] == [5, 4, 4]  # 13 runs: three rows, spread evenly
    assert groups[0][:3] == ["swamp@K=10", "swamp@K=20", "swamp@K=30"]  # in the order of the swept value
    fig = figures.curves_figure(rs)
    assert len(fig.axes) == 6 and all(len(ax.get_lines()) <= figures.MAX_LINES for ax in fig.axes)
    assert sum(len(ax.get_lines()) for ax in fig.axes) == 2 * 13


def test_sets_on_random_data_get_no_accuracy_figures():
    history = [{"epoch": e, "loss": 1.0 / e, "val/a2b/R@1": 10.0 * e} for e in (1, 2, 3)]
    results = [_fake(f"swamp@K={k}", "swamp", history=history, varied={"K": k}, timing_only=True) for k in (10, 20)]
    rs = result_sets.ResultSet("toy", Path("toy"), "toy", results)
    assert rs.timing_only and figures.sweep_figures(rs) == []
    fig = figures.curves_figure(rs)
    assert [ax.get_ylabel() for ax in fig.axes] == ["training loss"]  # the loss alone, no validation R@1
    real = result_sets.ResultSet("toy", Path("toy"), "toy", [dict(r, dataset={"source": "real"}) for r in results])
    assert [key for key, _ in figures.sweep_figures(real)] == ["K"]


def _published_page():
    """Runs a and b with the paper's times of both, and b on a cut of the data: the page's timing table."""
    published = {"label": "paper", "relative_to": "a", "methods": {"a": {"train_step_s": 0.1, "test_s": 2.0},
                                                                 "b": {"train_step_s": 0.4, "test_s": 300.0}}}
    results = [_fake("a", "a", published=published), _fake("b", "b", published=published),
               _fake("b@dataset.images=[64, 20, 100]", "b", varied={"dataset.images": [64, 20, 100]},
                     published=published)]
    rs = result_sets.ResultSet("toy", Path("toy"), "toy", results)
    table = site.timing_table(rs, timing.timing_table(results))
    return results, rs, table, table.footnote, {row[0]: dict(zip(table.header, row)) for row in table.rows}


def test_the_paper_stands_beside_our_runs_only_on_the_task_s_own_data():
    results, rs, table, note, cells = _published_page()
    assert cells["b"]["paper: test s"] == "300.00" and cells["b"]["paper: test / a"] == "150.0×"
    assert cells["b@dataset.images=[64, 20, 100]"]["paper: test s"] == "–"
    assert "dataset.images=[64, 20, 100]" in note[-1]
    base, label, ratios = figures.ratios(rs)
    by_name = {r.name: r for r in ratios}
    assert (base, label) == ("a", "paper") and by_name["b"].paper["test"] == pytest.approx(150.0)
    assert by_name["b@dataset.images=[64, 20, 100]"].paper["test"] is None
    assert by_name["b"].ours["test"] == pytest.approx((1.0 + 1) / (1.0 + 1))  # 'a' and 'b': same name length
    assert figures.ratio_figure(rs) is not None
    # no run on the task's data: no paper columns at all
    only = result_sets.ResultSet("toy", Path("toy"), "toy", results[2:])
    table = site.timing_table(only, timing.timing_table(results[2:]))
    note = table.footnote
    assert not any(h.startswith("paper") for h in table.header) and note[-1].startswith("No paper columns")
    assert not table.published and all(theirs is None for theirs in table.ratios.values())


def test_a_renamed_header_or_a_marked_row_leaves_the_page_correct(monkeypatch):
    """The page learns which columns are the paper's and which run a row is from the table itself, not from its
    text: renamed published headers and a contention mark on a row name change nothing."""
    monkeypatch.setattr(timing, "PUBLISHED_COLUMN", "{what} (published by {label})")
    monkeypatch.setattr(timing, "contention_flag", lambda runs: " [busy machine]")
    results, rs, table, note, cells = _published_page()
    view = views.table_view(table.header, table.rows, "timing", table.ratios, table.published)
    shown = [h for h, _ in view["header"]]
    assert shown[:3] == ["method", "step / a", "step / a (published by paper)"]  # our ratio, then the paper's
    assert cells["b [busy machine]"]["test s (published by paper)"] == "300.00"
    assert cells["b@dataset.images=[64, 20, 100] [busy machine]"]["test s (published by paper)"] == "–"
    assert "dataset.images=[64, 20, 100]" in note[-1]


def test_a_reading_about_a_folder_s_other_sets_is_not_linked(tmp_path):
    """A reading that names results/reference/qmul_shoes says nothing of results/reference/wikipedia; one that
    names the folder above and this set does."""
    (tmp_path / "docs" / "results").mkdir(parents=True)
    (tmp_path / "docs" / "results" / "sketch.md").write_text("results/reference/qmul_shoes/qmul_shoes is one set\n")
    (tmp_path / "docs" / "results" / "text.md").write_text("the sets of results/reference: wikipedia and more\n")
    for name in ("qmul_shoes", "wikipedia", "synthetic"):
        (tmp_path / "results" / "reference" / name / name).mkdir(parents=True)

    def found(name: str) -> list[str]:
        rs = result_sets.ResultSet(name, tmp_path / "results" / "reference" / name / name, name, [])
        return [p.name for p in readings.readings(rs)]

    assert found("qmul_shoes") == ["sketch.md"]
    assert found("wikipedia") == ["text.md"]
    assert found("synthetic") == []


def test_pages_show_the_folder_s_notes_and_link_their_readings(runs, built):
    (rs,) = result_sets.find_sets([runs])
    assert rs.name == "results/tiny"
    assert [n.name for n in readings.notes(rs)] == ["README.md"]
    assert [r.name for r in readings.readings(rs)] == ["tiny-reading.md"]  # not 'unrelated.md' (results/tiny_other)
    text = (built / "tiny.html").read_text()
    assert '<h3 id="tiny-runs">Tiny runs</h3>' in text and "<em>for the test</em>" in text
    assert "<li>two &lt;b&gt;</li>" in text  # the note's text is escaped
    assert 'href="reading-tiny-reading.html"' in text
    reading = (built / "reading-tiny-reading.html").read_text()
    assert '<a href="tiny.html">the runs</a>' in reading  # a link to the result folder leads to its page
    assert '<span class="link" title="other.md">elsewhere</span>' in reading  # no such page: text only


def test_markdown_notes_render_through_markdown_it_with_the_project_s_rules():
    from harness.report import markdown

    html = markdown.render("<!-- generated -->\n# A: `b`\n\ntext **bold** and [web](https://x.org) <i>\n\n"
                           "```\ncode <x>\n```\n\n| h | i |\n|---|---|\n| 1 | 2 |\n\n1. first\n2. second\n\n"
                           "[here](notes.md) and [gone](old.md#a) ![plot](cd.png)\n", shift=1,
                           link=lambda target: "page.html" if target == "notes.md" else None)
    assert "".join(html.split("\n")) == (
        '<h2 id="a-b">A: <code>b</code></h2>'  # a heading a level down, with GitHub's anchor; the comment dropped
        '<p>text <strong>bold</strong> and <a href="https://x.org">web</a> &lt;i&gt;</p>'  # raw HTML as text
        "<pre><code>code &lt;x&gt;</code></pre>"
        '<div class="scroll"><table class="note-table"><thead><tr><th>h</th><th>i</th></tr></thead>'
        "<tbody><tr><td>1</td><td>2</td></tr></tbody></table></div>"
        "<ol><li>first</li><li>second</li></ol>"
        '<p><a href="page.html">here</a> and <span class="link" title="old.md#a">gone</span> '  # through ``link``
        '<span class="link" title="cd.png">[figure: plot]</span></p>')


def test_bad_input_stops_before_anything_is_written(tmp_path, capsys):
    out = tmp_path / "site"
    (tmp_path / "empty").mkdir()
    assert cli.main(["report", str(tmp_path / "empty"), "--out", str(out)]) == 2
    assert "no result files" in capsys.readouterr().err
    assert cli.main(["report", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert not out.exists()


def _md_links(text: str) -> list[str]:
    import re

    return [m for m in re.findall(r"\]\(<([^>]+)>\)", text) if not m.startswith(("http:", "https:", "#"))]


@pytest.mark.slow
def test_committed_result_pages_are_current(monkeypatch, tmp_path):
    """docs/results/tasks/ is `python -m harness report results --out docs/results/tasks --format md`: regenerate
    its text (figures are listed, not drawn) and compare; every figure and file it links exists."""
    if not COMMITTED.is_dir():
        pytest.fail("docs/results/tasks/ is missing: run the command in this test's docstring")
    monkeypatch.chdir(ROOT)
    command = COMMITTED.joinpath("README.md").read_text().split("`", 2)[1]
    out = tmp_path / "pages"
    site.build([Path("results")], out, "md", progress=False, command_line=command, render=False, home=COMMITTED)
    fresh = {p.name: p.read_text() for p in out.glob("*.md")}
    committed = {p.name: p.read_text() for p in COMMITTED.glob("*.md")}
    assert sorted(fresh) == sorted(committed), f"regenerate with: {command}"
    for name, text in fresh.items():
        assert text == committed[name], f"docs/results/tasks/{name} is out of date; regenerate with: {command}"
        for target in _md_links(text):
            assert (COMMITTED / unquote(target)).is_file(), f"{name} links {target}, which is missing"


def _chromium() -> str | None:
    return os.environ.get("SWAMP_BENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow  # seconds: headless Chromium
def test_the_site_in_a_real_browser(built):
    """Headless Chromium opens the index and a task page at a laptop's width (1,366 px) and a phone's (390 px): no
    console errors, no sideways scrolling of the page, rows in every table, the method column sticky, every image
    decoded, every local link resolves; a click on a heading sorts by the ranks the page carries (sweep runs by
    the swept value), and the folded columns open."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (test extra)")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium executable: apt-get install chromium, or set SWAMP_BENCH_CHROMIUM")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            for width, name in ((1366, "index.html"), (1366, "tiny.html"), (390, "index.html"), (390, "tiny.html")):
                page = browser.new_page(viewport={"width": width, "height": 800})
                errors: list[str] = []
                page.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto((built / name).as_uri(), wait_until="load")
                assert errors == [], f"{name}: {errors}"
                scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
                assert scroll <= inner, f"{name} at {width} px scrolls sideways ({scroll} > {inner})"
                rows = page.evaluate("Array.from(document.querySelectorAll('table')).map(t => "
                                     "t.tBodies[0].rows.length)")
                assert rows and min(rows) > 0, f"{name}: rows per table {rows}"
                sticky = page.evaluate("Array.from(document.querySelectorAll('table')).map(t => "
                                       "getComputedStyle(t.tBodies[0].rows[0].cells[0]).position)")
                assert set(sticky) == {"sticky"}, f"{name}: first columns {sticky}"
                widths = page.evaluate("Array.from(document.images).map(i => [i.src, i.complete, i.naturalWidth])")
                assert all(done and width > 0 for _, done, width in widths), f"{name}: images not loaded {widths}"
                for href in page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
                    if href.startswith("file:"):
                        assert Path(unquote(urlparse(href).path)).is_file(), f"{name}: {href} does not resolve"
                if name == "tiny.html" and width == 1366:
                    page.click("#table-accuracy th:text-is('method')")
                    shown = page.evaluate("Array.from(document.querySelector('#table-accuracy').tBodies[0].rows)"
                                          ".map(r => r.cells[0].textContent)")
                    runs = [r for r in dict.fromkeys(shown) if "paper" not in r]
                    assert runs == ["contrastive", "swamp", "swamp@K=8", "swamp@K=12"]  # 8 before 12: by value
                    page.click("#table-accuracy th:text-is('method')")  # again: descending
                    shown = page.evaluate("Array.from(document.querySelector('#table-accuracy').tBodies[0].rows)"
                                          ".map(r => r.cells[0].textContent)")
                    assert [r for r in dict.fromkeys(shown) if "paper" not in r] == runs[::-1]
                    hidden = "document.querySelector('#table-timing th.more').offsetWidth"
                    assert page.evaluate(hidden) == 0
                    page.check("#more-timing")
                    assert page.evaluate(hidden) > 0
                page.close()
        finally:
            browser.close()


def test_a_folder_of_cpu_and_gpu_runs_gets_a_page_per_machine(tmp_path):
    """One synthetic seed re-labelled as made on a GPU: the site shows the CPU runs and the GPU run on pages of
    their own, and the CPU page's mean is the CPU seeds' alone (nothing averages across machines)."""
    import json
    import statistics

    folder = tmp_path / "results" / "synthetic"
    for run in ("contrastive", "swamp"):
        shutil.copytree(ROOT / "results" / "synthetic" / run, folder / run)
    gpu = folder / "contrastive" / "seed4.json"
    data = json.loads(gpu.read_text())
    data["environment"]["hardware"].update(device="cuda", gpu={"name": "NVIDIA H100 80GB HBM3"})
    data["metrics"]["a2b/R@1"] = 1.0  # a value no CPU seed has, so that an average across machines would show
    gpu.write_text(json.dumps(data))
    sets = result_sets.find_sets([tmp_path / "results"])
    assert len(sets) == 2 and len({s.slug for s in sets}) == 2
    by_device = {s.results[0]["environment"]["hardware"]["device"]: s for s in sets}
    assert {r["environment"]["hardware"]["device"] for r in by_device["cpu"].results} == {"cpu"}
    assert [r["seed"] for r in by_device["cuda"].results] == [4] and "NVIDIA H100" in by_device["cuda"].name
    cpu_values = [r["metrics"]["a2b/R@1"] for r in by_device["cpu"].results if r["run_name"] == "contrastive"]
    out = tmp_path / "pages"
    site.build([tmp_path / "results"], out, "md", progress=False, render=False)
    cpu_page = (out / f"{by_device['cpu'].slug}.md").read_text()
    assert f"{statistics.mean(cpu_values):.2f}" in cpu_page and len(cpu_values) == 4


def test_the_site_s_options_name_the_command_that_writes_it(runs, tmp_path, capsys):
    options = site.SiteOptions((runs,), tmp_path / "pages", "md", figures=False, progress=False)
    assert options.command_line() == f"python -m harness report {runs} --out {tmp_path / 'pages'} --format md " \
                                     "--no-figures"
    written, n_figures = site.write_site(options)
    assert written[0] == tmp_path / "pages" / "README.md" and n_figures == 0
    assert written[0].read_text().startswith(f"<!-- generated by `{options.command_line()}`")
    assert f"open {written[0]}" in capsys.readouterr().out
