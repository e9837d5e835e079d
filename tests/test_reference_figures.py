"""The reference table's figures (:mod:`harness.report.reference_figures`): a forest plot of SwAMP's differences and
the studies' best-so-far curves, drawn from small constructed records and read back pixel by pixel."""
from __future__ import annotations

import math
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from harness.errors import ConfigError
from harness.report import reference_figures as rf
from harness.report.convergence import NOT_CONVERGED


def entry(set_: str, comparison: str, diff: float | None, lo: float | None, hi: float | None, reading: str,
          lower: bool = False) -> dict:
    return {"set": set_, "comparison": comparison, "diff": diff, "lo": lo, "hi": hi, "reading": reading,
            "lower": lower}


def rgb(colour: str) -> tuple[int, int, int]:
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def pixels_of(path: Path, colour: str, within: int = 0) -> int:
    """How many pixels of the PNG are ``colour``, each channel within ``within`` of it (anti-aliased lines)."""
    image = np.asarray(Image.open(path).convert("RGB"), dtype=int)
    return int((np.abs(image - np.array(rgb(colour))).max(axis=2) <= within).sum())


LEVEL = [entry("wikipedia: i2t/class_mAP", "SigLIP (chosen)", -0.31, -1.36, 0.74, "level"),
         entry("wikipedia: i2t/class_mAP", "InfoNCE", -0.62, -1.98, 0.75, "level")]
WORSE = entry("qmul_chairs: s2p/R@1", "InfoNCE (chosen)", -20.0, -24.92, -15.08, "worse")


def test_the_forest_plot_is_written_and_its_colours_follow_the_readings(tmp_path):
    level, mixed = tmp_path / "level.png", tmp_path / "mixed.png"
    assert rf.forest(LEVEL, level) and rf.forest([*LEVEL, WORSE], mixed, title="SwAMP against each loss")
    assert Image.open(mixed).size[0] == 800  # a page's column: 8 inches at 100 dpi
    assert pixels_of(level, rf.READINGS["level"]) > 100
    assert pixels_of(level, rf.READINGS["worse"]) == 0  # no worse entry: none of its colour
    assert pixels_of(mixed, rf.READINGS["worse"]) > 100
    assert Image.open(mixed).size[1] > Image.open(level).size[1]  # a set more: a taller figure
    svg = tmp_path / "mixed.svg"
    assert rf.forest([*LEVEL, WORSE], svg) and svg.read_text().lstrip().startswith("<?xml")
    again = tmp_path / "again.png"
    rf.forest([*LEVEL, WORSE], again, title="SwAMP against each loss")
    assert again.read_bytes() == mixed.read_bytes()  # the same input, the same bytes


def test_the_forest_plots_swamp_s_gain_a_rank_metric_s_difference_negated():
    medr = entry("msrvtt: t2v/MedR", "summed hinge", -1.8, -6.64, 3.04, "level", lower=True)
    fig = rf.forest_figure([LEVEL[0], medr])
    ax = fig.axes[0]
    drawn = [line for line in ax.get_lines() if len(line.get_xdata()) in (1, 2) and line.get_ydata()[0] != 0]
    points = {float(line.get_ydata()[0]): list(map(float, line.get_xdata())) for line in drawn
              if len(line.get_xdata()) == 1}
    intervals = {float(line.get_ydata()[0]): list(map(float, line.get_xdata())) for line in drawn
                 if len(line.get_xdata()) == 2}
    assert sorted(points.values()) == [[-0.31], [1.8]]  # MedR's -1.80 (SwAMP's median rank lower) is a gain of +1.80
    assert sorted(intervals.values()) == [[-3.04, 6.64], [-1.36, 0.74]]  # its interval flipped end for end
    texts = [t.get_text() for t in ax.texts]
    assert "+1.80 [-3.04, +6.64]" in texts and any("lower is better" in t for t in texts)
    assert "right of 0 is better for SwAMP" in ax.get_xlabel()
    assert [t.get_text() for t in ax.get_yticklabels()] == ["SigLIP (chosen)", "summed hinge"]


def test_an_uncomputed_difference_keeps_its_row_without_a_mark():
    fig = rf.forest_figure([LEVEL[0], entry("synthetic: a2b/R@1", "SigLIP", None, None, None, "uninformative")])
    assert "–" in [t.get_text() for t in fig.axes[0].texts]
    assert len([t for t in fig.axes[0].get_yticklabels()]) == 2


def test_nothing_to_plot_writes_nothing(tmp_path):
    assert rf.forest([], tmp_path / "f.png") is False
    assert rf.forest([entry("s", "c", None, None, None, "uninformative")], tmp_path / "f.png") is False
    assert rf.best_so_far({}, tmp_path / "b.png", "a2b/R@1", lower=False) is False
    assert rf.best_so_far({"SwAMP": [None, math.nan]}, tmp_path / "b.png", "a2b/R@1", lower=False) is False
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("bad, message", [
    ({"reading": "fine"}, "reading 'fine' is not one of better, level, worse, uninformative"),
    ({"lo": 2.0, "hi": 1.0}, "lo 2 is above hi 1"),
    ({"diff": "0.3"}, "diff is '0.3': give a number"),
])
def test_a_bad_forest_entry_is_named(tmp_path, bad, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[")):
        rf.forest([{**LEVEL[0], **bad}], tmp_path / "f.png")
    assert not (tmp_path / "f.png").exists()


def test_a_forest_entry_without_a_key_names_it(tmp_path):
    partial = {k: v for k, v in LEVEL[0].items() if k != "lower"}
    with pytest.raises(ConfigError, match="lacks lower"):
        rf.forest([partial], tmp_path / "f.png")
    with pytest.raises(ConfigError, match="ends in '.jpg'"):
        rf.forest(LEVEL, tmp_path / "f.jpg")


CURVES = {"InfoNCE": [20.0, 25.0, None, 24.0, 26.0], "SwAMP": [18.0, 19.5, 23.0, 23.5, 27.0]}


def test_best_so_far_marks_the_rows_not_converged_and_the_initial_budget(tmp_path):
    fig = rf.best_so_far_figure(CURVES, "i2t/class_mAP", lower=False, not_converged={"SwAMP"}, initial_budget=4)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend == ["InfoNCE", f"SwAMP {NOT_CONVERGED}", "initial budget (4 trials)"]
    (budget,) = [line for line in ax.get_lines() if line.get_label().startswith("initial budget")]
    assert list(budget.get_xdata()) == [4.5, 4.5]  # between the 4th and the 5th trial
    stairs = {p.get_label(): p for p in ax.patches}
    assert stairs[f"SwAMP {NOT_CONVERGED}"].get_linestyle() == "--" and stairs["InfoNCE"].get_linestyle() == "-"
    # the line is the best so far: InfoNCE's failed third trial and its worse fourth leave 25 where it was
    assert list(stairs["InfoNCE"].get_data().values) == [20.0, 25.0, 25.0, 25.0, 26.0]
    assert list(stairs["InfoNCE"].get_data().edges) == [0.5, 1.5, 2.5, 3.5, 4.5, 5.5]
    assert "best validation i2t/class_mAP so far" in ax.get_ylabel()


def test_best_so_far_of_a_rank_metric_keeps_the_lowest(tmp_path):
    fig = rf.best_so_far_figure({"SwAMP": [12.0, 15.0, 9.0, 11.0]}, "t2v/MedR", lower=True)
    (stairs,) = fig.axes[0].patches
    assert list(stairs.get_data().values) == [12.0, 12.0, 9.0, 9.0]
    assert "(lower is better)" in fig.axes[0].get_ylabel()
    assert fig.axes[0].get_legend().get_texts()[0].get_text() == "SwAMP"  # converged: no mark


def test_best_so_far_is_written_and_a_not_converged_row_shows(tmp_path):
    quiet, marked = tmp_path / "quiet.png", tmp_path / "marked.png"
    assert rf.best_so_far(CURVES, quiet, "a2b/R@1", lower=False)
    assert rf.best_so_far(CURVES, marked, "a2b/R@1", lower=False, not_converged={"SwAMP"}, title="synthetic")
    assert quiet.read_bytes() != marked.read_bytes()
    orange = "#ff7f0e"  # tab10's second colour: SwAMP's line, drawn in both
    assert pixels_of(quiet, orange, 24) > 50 and pixels_of(marked, orange, 24) > 50
    assert pixels_of(quiet, "#1a7f37", 24) == 0  # no colour the figure does not use


def test_bad_best_so_far_input_is_named(tmp_path):
    with pytest.raises(ConfigError, match="not_converged names CCA, which have no curve"):
        rf.best_so_far(CURVES, tmp_path / "b.png", "a2b/R@1", lower=False, not_converged={"CCA"})
    with pytest.raises(ConfigError, match="initial_budget is 0"):
        rf.best_so_far(CURVES, tmp_path / "b.png", "a2b/R@1", lower=False, initial_budget=0)
    with pytest.raises(ConfigError, match=r"curve 'SwAMP', trial 2 is 'x'"):
        rf.best_so_far({"SwAMP": [1.0, "x"]}, tmp_path / "b.png", "a2b/R@1", lower=False)
    assert list(tmp_path.iterdir()) == []


# ---- the reference page of the results site ---------------------------------------------------------------------

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = ROOT / "results" / "reference"
TABLE = """<!-- generated by `python -m harness leaderboard --out results/reference` -->
# The reference table of cross-modal losses

| method | wikipedia: i2t/class_mAP | msrvtt: t2v/MedR |
|---|---|---|
| InfoNCE | **26.47 ± 0.82** | 14.0 ± 1.0 |
| SwAMP | **25.85 ± 0.97** | 12.2 ± 2.0 |

## Budget and convergence of each set

- **wikipedia**: 20 trials per method.

![best-so-far: wikipedia](best_so_far-wikipedia.png)

## Across sets

Mean ranks (autorank). The critical-difference diagram: [cd.png](cd.png).

```
![not a figure: inside code](cd.png)
```
"""


def reference_root(folder: Path, text: str = TABLE, data: dict | None = None) -> Path:
    """A folder as `harness leaderboard` leaves it: a set's manifest, reference.md and .json, and figures."""
    import json

    root = folder / "reference"
    (root / "wikipedia").mkdir(parents=True)
    (root / "wikipedia" / "leaderboard.json").write_text("{}")
    (root / "reference.md").write_text(text)
    (root / "reference.json").write_text(json.dumps(data if data is not None else {
        "sets": {}, "forest": [*LEVEL, WORSE],
        "curves": {"wikipedia": {"metric": "i2t/class_mAP", "lower": False, "not_converged": ["SwAMP"],
                                 "curves": CURVES}}}))
    assert rf.best_so_far(CURVES, root / "best_so_far-wikipedia.png", "i2t/class_mAP", lower=False)
    assert rf.forest(LEVEL, root / "cd.png")  # any picture stands in for autorank's diagram here
    return root


def reference_site(root: Path, out: Path) -> Path:
    from harness.report import site

    out.mkdir(parents=True, exist_ok=True)
    (page,) = site.reference_pages([root.parent], [], out, "html", site.environment("html"), "test")
    for asset in ("site.css", "site.js"):
        shutil.copyfile(site.TEMPLATES / asset, out / asset)
    return page


def images_of(page: Path) -> list[str]:
    import re

    return re.findall(r'<img src="([^"]+)"', page.read_text())


def test_the_reference_page_shows_its_figures_inline(tmp_path):
    page = reference_site(reference_root(tmp_path), tmp_path / "site")
    text = page.read_text()
    # the Markdown's own figure, the CD diagram after the text naming it, the forest from the record after the table
    assert images_of(page) == ["reference-forest.png", "reference-best_so_far-wikipedia.png", "reference-cd.png"]
    assert text.index("reference-forest.png") < text.index('id="budget-and-convergence-of-each-set"')
    assert text.index('id="across-sets"') < text.index('<img src="reference-cd.png"')
    assert '<a href="reference-cd.png">cd.png</a>' in text  # the text's link to it, too
    assert "![not a figure: inside code](cd.png)" in text  # code stays code
    for src in images_of(page):
        assert Image.open(page.parent / src).size[0] > 0
    # the site drew the forest from the record: its worse entry is there in its colour
    assert pixels_of(page.parent / "reference-forest.png", rf.READINGS["worse"]) > 100


def test_a_table_written_before_the_record_had_figures_gets_them_from_its_sets(tmp_path):
    data = {"sets": {"wikipedia": {
        "metric": "i2t/class_mAP", "strongest_contrastive": ["siglip"],
        "swamp_vs_each": {"infonce": {"diff": -0.62, "ci": [-1.98, 0.75], "p": 0.3, "reading": "level"},
                          "siglip": {"diff": -0.31, "ci": [-1.36, 0.74], "p": 0.45, "reading": "level"}},
        "cells": {"swamp": {"convergence": {"best_so_far": [18.0, 23.0, 27.0], "converged": False}},
                  "infonce": {"convergence": {"best_so_far": [20.0, 25.0, 25.0], "converged": True}}}}}}
    text = TABLE.replace("![best-so-far: wikipedia](best_so_far-wikipedia.png)\n", "")
    page = reference_site(reference_root(tmp_path, text, data), tmp_path / "site")
    assert images_of(page) == ["reference-forest.png", "reference-trials-wikipedia.png", "reference-cd.png"]
    from harness.report import reference_page

    (entry, chosen) = reference_page.forest_entries(data)
    assert (entry["comparison"], chosen["comparison"]) == ("InfoNCE", "SigLIP (chosen)")
    curves = reference_page.set_curves(data)["wikipedia"]
    assert curves.not_converged == {"swamp"} and curves.curves["InfoNCE"] == [20.0, 25.0, 25.0]
    assert pixels_of(page.parent / "reference-forest.png", rf.READINGS["worse"]) == 0  # no worse entry here


def test_the_markdown_page_carries_every_figure_it_names(tmp_path):
    from harness.report import site

    root, out = reference_root(tmp_path), tmp_path / "md"
    out.mkdir()
    (page,) = site.reference_pages([root.parent], [], out, "md", site.environment("md"), "")
    text = page.read_text()
    assert "](reference-best_so_far-wikipedia.png)" in text and "[cd.png](reference-cd.png)" in text
    assert "](best_so_far-wikipedia.png)" not in text
    assert sorted(p.name for p in out.iterdir()) == ["reference-best_so_far-wikipedia.png", "reference-cd.png",
                                                     "reference.md"]


def test_an_unreadable_record_is_named(tmp_path):
    root = reference_root(tmp_path)
    (root / "reference.json").write_text("{not json")
    with pytest.raises(ConfigError, match="reference.json is not JSON .*python -m harness leaderboard"):
        reference_site(root, tmp_path / "site")


def _chromium() -> str | None:
    return os.environ.get("SWAMP_BENCH_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow  # seconds: headless Chromium
def test_the_committed_reference_page_fits_a_desktop_screen_with_its_figures(tmp_path):
    """The committed table's page in headless Chromium at 1,366 and 1,024 px: every image decoded and shown inline
    (the CD diagram among them), the page never scrolls sideways and neither does any table; at a phone's 390 px
    only a table's own box scrolls, never the page."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (test extra)")
    executable = _chromium()
    if executable is None:
        pytest.skip("no Chromium executable: apt-get install chromium, or set SWAMP_BENCH_CHROMIUM")
    if not (COMMITTED / "reference.md").is_file():
        pytest.skip("results/reference/reference.md is not in this checkout")
    root = tmp_path / "results" / "reference"
    root.mkdir(parents=True)
    for path in COMMITTED.iterdir():  # the page, its record and figures, and the sets' manifests
        if path.is_file():
            shutil.copyfile(path, root / path.name)
        elif (path / "leaderboard.json").is_file():
            (root / path.name).mkdir()
            shutil.copyfile(path / "leaderboard.json", root / path.name / "leaderboard.json")
    page = reference_site(root, tmp_path / "site")
    assert "reference-cd.png" in images_of(page) and "reference-forest.png" in images_of(page)
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        try:
            for width in (1366, 1024, 390):
                view = browser.new_page(viewport={"width": width, "height": 900})
                errors: list[str] = []
                view.on("console", lambda m, errors=errors: errors.append(m.text) if m.type == "error" else None)
                view.goto(page.as_uri(), wait_until="load")
                assert errors == [], errors
                scroll, client = view.evaluate("[document.scrollingElement.scrollWidth, "
                                               "document.scrollingElement.clientWidth]")
                assert scroll <= client, f"the page scrolls sideways at {width} px ({scroll} > {client})"
                shown = view.evaluate("Array.from(document.images).map(i => [i.getAttribute('src'), i.complete, "
                                      "i.naturalWidth, i.getBoundingClientRect().width])")
                assert {src for src, *_ in shown} == set(images_of(page))
                assert all(done and natural > 0 and on_page > 0 for _, done, natural, on_page in shown), shown
                tables = view.evaluate("Array.from(document.querySelectorAll('article table')).map(t => "
                                       "[t.parentElement.scrollWidth, t.parentElement.clientWidth])")
                assert len(tables) >= 2
                if width >= 1024:
                    assert all(inner <= box for inner, box in tables), f"a table scrolls at {width} px: {tables}"
                view.close()
        finally:
            browser.close()
