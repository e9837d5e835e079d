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
from harness.report import site, tables
from harness.store.schema import load_results

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "docs" / "results" / "tasks"


class Page(HTMLParser):
    """The tables (rows of cells), image sources and link targets of one HTML page."""

    def __init__(self, path: Path):
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self.images: list[str] = []
        self.links: list[str] = []
        self._cell: list[str] | None = None
        self._in_body = False
        self.feed(path.read_text())

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "table":
            self.tables.append([])
        elif tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.tables[-1].append([])
        elif tag == "td" and self._in_body:
            self._cell = []
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
    """Two methods × two seeds of the tiny synthetic task, and a one-seed sweep point of SwAMP's K."""
    from tests.conftest import TINY, write_task

    folder = tmp_path_factory.mktemp("report")
    task = write_task(folder, TINY)
    out = folder / "results"
    assert cli.main(["run", str(task), "--methods", "swamp", "--set", "swamp.K=8", "--out", str(out),
                     "--no-progress"]) == 0
    assert cli.main(["run", str(task), "--methods", "contrastive,swamp", "--seeds", "0,1", "--out", str(out),
                     "--no-progress", "--reference", "contrastive"]) == 0  # writes the tables last
    return out


@pytest.fixture(scope="module")
def built(runs, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site") / "site"
    assert cli.main(["report", str(runs), "--out", str(out), "--no-progress"]) == 0
    return out


def test_the_site_has_an_index_and_a_page_per_result_set_with_every_link_resolving(built):
    assert sorted(p.name for p in built.glob("*.html")) == ["index.html", "tiny.html"]
    for name in ("index.html", "tiny.html"):
        page = Page(built / name)
        assert page.tables and all(rows for rows in page.tables), f"{name}: a table without rows"
        for target in page.links + page.images:
            path = local(target, built / name)
            assert path is None or path.is_file(), f"{name}: {target} does not resolve"
    page = Page(built / "tiny.html")
    names = [Path(unquote(src)).name for src in page.images]
    assert {"curves.svg", "timing.svg", "sweep-K.svg"} <= set(names)
    for src in page.images:
        assert (built / unquote(src)).read_text().lstrip().startswith(("<?xml", "<svg"))
    # downloads: every run's result file and the tables, copied into the site
    assert len(list((built / "tiny" / "files").rglob("seed*.json"))) == 5
    assert {p.name for p in (built / "tiny" / "tables").iterdir()} == {"accuracy.md", "accuracy.tex", "timing.md",
                                                                        "timing.tex"}


def test_page_tables_are_the_harness_tables_of_the_result_files(runs, built):
    results = load_results(runs)
    acc_header, acc_rows, _ = tables.table_data(results, "contrastive", None)["accuracy"]
    page = Page(built / "tiny.html")
    assert page.tables[0] == acc_rows  # the accuracy table, cell for cell
    # and the cell itself is the mean ± sample std over the seeds in the files
    swamp = [r["metrics"]["a2b/R@1"] for r in results if r["run_name"] == "swamp"]
    cell = page.tables[0][[row[1] for row in acc_rows].index("swamp")][acc_header.index("a2b R@1")]
    assert cell.rstrip("*") == f"{statistics.mean(swamp):.2f} ± {statistics.stdev(swamp):.2f}"
    provenance = page.tables[2]
    assert len(provenance) == 5 and all(row[-1].startswith("python -m harness run") for row in provenance)


def test_the_headline_is_each_runs_selection_metric_over_seeds(runs):
    (rs,) = site.find_sets([runs])
    metric, rows = site.headline(rs)
    assert metric == "test a2b/R@1"
    values = [r["metrics"]["a2b/R@1"] for r in rs.results if r["run_name"] == "contrastive"]
    assert dict(rows)["contrastive"] == f"{statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} (n=2)"
    assert dict(rows)["swamp@K=8"].endswith("(n=1)")


def test_the_reference_comes_from_the_committed_accuracy_table(runs):
    (rs,) = site.find_sets([runs])
    assert (rs.reference, rs.test_stat) == ("contrastive", None)  # `run --reference contrastive` wrote the table


def test_folders_of_one_task_get_pages_of_their_own(runs, tmp_path):
    for name in ("before", "after"):
        shutil.copytree(runs / "tiny", tmp_path / name / "tiny")
    sets = site.find_sets([tmp_path])
    assert [s.slug for s in sets] == ["after-tiny", "before-tiny"]
    assert all(s.task == "tiny" and len(s.results) == 5 for s in sets)


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


def test_the_site_in_a_real_browser(built):
    """Headless Chromium opens the index and a task page: no console errors, rows in every table, every image
    decoded, every local link resolves."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (test extra)")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium executable: apt-get install chromium, or set SWAMP_BENCH_CHROMIUM")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            for name in ("index.html", "tiny.html"):
                page = browser.new_page()
                errors: list[str] = []
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto((built / name).as_uri(), wait_until="load")
                assert errors == [], f"{name}: {errors}"
                rows = page.evaluate("Array.from(document.querySelectorAll('table')).map(t => t.tBodies[0].rows.length)")
                assert rows and min(rows) > 0, f"{name}: rows per table {rows}"
                widths = page.evaluate("Array.from(document.images).map(i => [i.src, i.complete, i.naturalWidth])")
                assert all(done and width > 0 for _, done, width in widths), f"{name}: images not loaded {widths}"
                for href in page.evaluate("Array.from(document.querySelectorAll('a[href]')).map(a => a.href)"):
                    if href.startswith("file:"):
                        assert Path(unquote(urlparse(href).path)).is_file(), f"{name}: {href} does not resolve"
                if name == "tiny.html":  # sorting works: a click on 'method' orders the rows by it
                    page.click("table >> nth=0 >> th:text-is('method')")
                    shown = page.evaluate("Array.from(document.querySelector('table').tBodies[0].rows)"
                                          ".map(r => r.cells[1].textContent)")
                    assert shown == sorted(shown)
                page.close()
        finally:
            browser.close()
