"""The reference table's figures (:mod:`harness.report.reference_figures`): a forest plot of SwAMP's differences and
the studies' best-so-far curves, drawn from small constructed records and read back pixel by pixel."""
from __future__ import annotations

import math
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
