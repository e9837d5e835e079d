"""`python -m harness plot`: figures and point tables from hand-made result files with known answers."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from harness import cli
from harness.report.plot import Axis, Point, draw, evenly_spaced, human, parse_x
from harness.store.schema import SCHEMA, result_path

SWAMP = {"name": "swamp", "method": "swamp", "K": 1000, "queue": 1280, "hard": False, "strict_queue": True}
CONTRASTIVE = {"name": "contrastive", "method": "contrastive", "margin": 0.1}
TRAIN = {"epochs": 100, "lr": 0.001, "select": "a2b/R@1"}


def write_result(root: Path, run: str, seed: int, r1: float, method: dict = SWAMP, varied: dict | None = None,
                 task: str = "toy") -> None:
    """One result file with the resolved config of ``method`` plus ``varied``, and a2b/R@1 = ``r1``."""
    params = {**method, **{k: v for k, v in (varied or {}).items() if "." not in k}}
    train = {**TRAIN, **{k[6:]: v for k, v in (varied or {}).items() if k.startswith("train.")}}
    body = {"schema": SCHEMA, "task": task, "task_version": "1.0", "run_name": run, "method": method["name"],
            "seed": seed, "metrics": {"a2b/R@1": r1, "a2b/R@5": r1 + 10},
            "config": {"task": task, "version": "1.0", "dataset": {"spread": 0.15}, "encoders": {},
                       "train": train, "method": params}}
    if varied is not None:
        body["varied"] = varied
    path = result_path(root, task, run, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body))


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A K sweep of swamp (defaults at K=1000), a queue ablation, a hard-assignment run and contrastive."""
    root = tmp_path / "results"
    for seed, r1 in ((0, 80.0), (1, 82.0)):
        write_result(root, "swamp@K=200", seed, r1, varied={"K": 200})
    write_result(root, "swamp@K=500", 0, 85.0, varied={"K": 500})
    for seed, r1 in ((0, 90.0), (1, 88.0), (2, 89.0)):
        write_result(root, "swamp", seed, r1)  # an older file: no "varied"
    write_result(root, "swamp@queue=0,strict_queue=False", 0, 10.0, varied={"queue": 0, "strict_queue": False})
    write_result(root, "swamp@hard=True", 0, 70.0, varied={"hard": True})
    for seed, r1 in ((0, 60.0), (1, 64.0)):
        write_result(root, "contrastive", seed, r1, method=CONTRASTIVE, varied={})
    return root / "toy"


def read_points(stem: Path) -> dict[tuple[str, str], dict[str, str]]:
    """The CSV table beside a figure, keyed by (method, x)."""
    with open(stem.with_name(f"{stem.name}.csv")) as f:
        return {(row["method"], row["x"]): row for row in csv.DictReader(f)}


def test_parse_x():
    assert parse_x("swamp.K") == Axis("swamp", "K")
    assert parse_x("K") == Axis(None, "K")
    assert parse_x("train.lr") == Axis(None, "train.lr")


def test_numeric_sweep_writes_figures_and_points(folder, capsys):
    assert cli.main(["plot", str(folder), "--x", "swamp.K", "--reference", "contrastive", "--logx"]) == 0
    out = capsys.readouterr().out
    stem = folder / "plots" / "swamp.K_a2b_R@1"
    png, pdf = stem.with_name(f"{stem.name}.png"), stem.with_name(f"{stem.name}.pdf")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and pdf.read_bytes()[:4] == b"%PDF"
    assert str(png) in out and str(pdf) in out
    points = read_points(stem)
    assert float(points["swamp", "200"]["mean"]) == pytest.approx(81.0)
    assert float(points["swamp", "200"]["std"]) == pytest.approx(1.4142, abs=1e-4)
    assert points["swamp", "500"]["seeds"] == "1" and points["swamp", "500"]["std"] == ""
    assert float(points["swamp", "1000"]["mean"]) == pytest.approx(89.0)  # the task's own run, at its default K
    assert float(points["reference: contrastive", ""]["mean"]) == pytest.approx(62.0)
    assert len(points) == 4
    assert "| 200 | swamp | 2 | 81.0000 |" in stem.with_name(f"{stem.name}.md").read_text()


def test_runs_varying_other_settings_are_left_out(folder, capsys):
    assert cli.main(["plot", str(folder), "--x", "swamp.K", "--metric", "a2b/R@5"]) == 0
    out = capsys.readouterr().out
    assert "left out swamp@queue=0,strict_queue=False: also varies queue, strict_queue" in out
    assert "left out swamp@hard=True: also varies hard" in out
    points = read_points(folder / "plots" / "swamp.K_a2b_R@5")
    assert {x for _, x in points} == {"200", "500", "1000"}
    assert float(points["swamp", "200"]["mean"]) == pytest.approx(91.0)


def test_categorical_axis(folder, tmp_path, capsys):
    stem = tmp_path / "figs" / "hard"
    assert cli.main(["plot", str(folder), "--x", "hard", "--out", str(stem)]) == 0
    assert stem.with_name("hard.png").stat().st_size > 0 and stem.with_name("hard.pdf").stat().st_size > 0
    points = read_points(stem)
    assert set(points) == {("swamp", "False"), ("swamp", "True")}
    assert float(points["swamp", "False"]["mean"]) == pytest.approx(89.0)
    assert float(points["swamp", "True"]["mean"]) == pytest.approx(70.0)


def test_train_setting_draws_every_method(folder, tmp_path, capsys):
    write_result(folder.parent, "contrastive@train.lr=0.01", 0, 66.0, method=CONTRASTIVE, varied={"train.lr": 0.01})
    stem = tmp_path / "lr"
    assert cli.main(["plot", str(folder), "--x", "train.lr", "--out", str(stem)]) == 0
    points = read_points(stem)
    assert float(points["contrastive", "0.01"]["mean"]) == 66.0
    assert float(points["contrastive", "0.001"]["mean"]) == pytest.approx(62.0)
    assert points["swamp", "0.001"]["seeds"] == "3"


def test_same_seed_at_same_x_counts_once(folder, tmp_path, capsys):
    write_result(folder.parent, "swamp@K=1000", 0, 0.0, varied={"K": 1000})
    assert cli.main(["plot", str(folder), "--x", "swamp.K", "--out", str(tmp_path / "k")]) == 0
    assert "left out swamp@K=1000 seed 0: same K and seed as swamp" in capsys.readouterr().out
    assert float(read_points(tmp_path / "k")["swamp", "1000"]["mean"]) == pytest.approx(89.0)


@pytest.mark.parametrize("args, message", [
    (["--x", "swamp.K", "--metric", "a2b/R@2"], "unknown metric 'a2b/R@2'"),
    (["--x", "swamp.tau"], "no run varies 'swamp.tau'; settings varied by some run: swamp.K, swamp.hard"),
    (["--x", "contrastive.K"], "no run varies 'contrastive.K'"),
    (["--x", "swamp.K", "--reference", "contrastiv"], "unknown reference run 'contrastiv'"),
    (["--x", "swamp.queue"], "fewer than two values of swamp.queue left to plot; left out: swamp@K=200 (also"),
    (["--x", "hard", "--logx"], "--logx needs positive numeric values of hard"),
])
def test_bad_input_exits_2(folder, capsys, args, message):
    assert cli.main(["plot", str(folder), *args]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert "valid:" in err if "unknown" in message else True
    assert not (folder / "plots").exists()


def test_empty_folder_and_several_tasks_are_errors(folder, tmp_path, capsys):
    assert cli.main(["plot", str(tmp_path / "nothing"), "--x", "swamp.K"]) == 2
    assert "no result files" in capsys.readouterr().err
    write_result(tmp_path / "results", "swamp", 0, 1.0, task="other")
    assert cli.main(["plot", str(tmp_path / "results"), "--x", "swamp.K"]) == 2
    assert "several tasks (other, toy)" in capsys.readouterr().err


def test_init_axis_labels_the_task_default_random(folder, capsys):
    write_result(folder.parent, "swamp@init=contrastive", 0, 91.0, varied={"init": "contrastive"})
    stem = folder / "plots" / "init"
    assert cli.main(["plot", str(folder), "--x", "swamp.init", "--metric", "a2b/R@1", "--out", str(stem)]) == 0
    points = read_points(stem)
    assert float(points[("swamp", "random")]["mean"]) == pytest.approx(89.0)
    assert float(points[("swamp", "contrastive")]["mean"]) == pytest.approx(91.0)


@pytest.fixture
def short_sweep(tmp_path: Path) -> Path:
    """A K sweep made with --epochs 5 (every run varies train.epochs too) and a contrastive run likewise."""
    root = tmp_path / "results"
    for k, r1 in ((200, 80.0), (500, 85.0), (1000, 88.0)):
        varied = {"train.epochs": 5} if k == 1000 else {"K": k, "train.epochs": 5}
        run = "swamp@train.epochs=5" if k == 1000 else f"swamp@K={k},train.epochs=5"
        write_result(root, run, 0, r1, varied=varied)
    write_result(root, "contrastive@train.epochs=5", 0, 60.0, method=CONTRASTIVE, varied={"train.epochs": 5})
    return root / "toy"


def test_a_sweep_made_with_epochs_plots_with_ignore_and_says_so_without(short_sweep, tmp_path, capsys):
    out = tmp_path / "fig"
    assert cli.main(["plot", str(short_sweep), "--x", "swamp.K", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "also varies train.epochs (pass --ignore train.epochs" in err
    assert cli.main(["plot", str(short_sweep), "--x", "swamp.K", "--out", str(out), "--ignore", "train.epochs",
                     "--reference", "contrastive"]) == 0  # the method's only run is its reference
    points = read_points(out)
    assert {x for method, x in points if method == "swamp"} == {"200", "500", "1000"}
    assert ("reference: contrastive@train.epochs=5", "") in points  # the method named its only run


def test_ignore_refuses_a_setting_that_differs_between_the_runs(short_sweep, tmp_path, capsys):
    write_result(short_sweep.parent, "swamp@K=300,train.epochs=7", 0, 81.0, varied={"K": 300, "train.epochs": 7})
    assert cli.main(["plot", str(short_sweep), "--x", "swamp.K", "--out", str(tmp_path / "f"),
                     "--ignore", "train.epochs"]) == 2
    assert "--ignore train.epochs: the runs of the figure differ in it" in capsys.readouterr().err


@pytest.mark.parametrize("value, text", [(0.351, "0.351"), (12.3, "12.3"), (1.0, "1"), (3663.67, "3,664"),
                                         (14812.0, "14.8k"), (1.48e4, "14.8k"), (999600.0, "1M"), (1.23e6, "1.23M"),
                                         (-14800.0, "-14.8k"), (0.00012, "0.00012")])
def test_human_numbers_have_no_exponent(value, text):
    assert human(value) == text


def _points(xs: list, method: str = "swamp") -> list[Point]:
    return [Point(method, x, {0: 80.0 + i, 1: 82.0 + i}) for i, x in enumerate(xs)]


def _boxes(fig, artists) -> list:
    renderer = fig.canvas.get_renderer()
    return [a.get_window_extent(renderer) for a in artists if a.get_text()]


def test_crowded_values_get_one_slot_each_and_their_ticks_do_not_touch():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    xs = [0, 128, 256, 640, 1280, 2560]  # the queue sweep: on a linear axis '0', '128' and '256' ran together
    assert evenly_spaced(xs, logx=False)
    assert not evenly_spaced([20, 200, 500, 1000, 2000, 3000], logx=True)
    fig = draw(_points(xs), None, ("swamp.queue", "a2b/R@1", "toy"), logx=False)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "128", "256", "640", "1,280", "2,560"]
    assert "not to scale" in ax.get_xlabel()
    boxes = _boxes(fig, ax.get_xticklabels())
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])), "tick labels overlap"


def test_tick_labels_at_swept_values_that_would_touch_are_shortened():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    xs = [20, 200, 500, 1000, 2000, 3000]  # the K sweep on a log axis: '2,000' and '3,000' ran together
    fig = draw(_points(xs), None, ("swamp.K", "a2b/R@1", "toy"), logx=True)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["20", "200", "500", "1k", "2k", "3k"]
    boxes = _boxes(fig, ax.get_xticklabels())
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:])), "tick labels overlap"


def test_the_legend_covers_no_point():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    points = _points([200, 500, 1000]) + _points([200, 500, 1000], "contrastive")
    fig = draw(points, ("contrastive", [60.0, 64.0]), ("swamp.K", "a2b/R@1", "toy"), logx=False)
    FigureCanvasAgg(fig).draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(fig.canvas.get_renderer())
    for p in points:
        x, y = ax.transData.transform((p.x, p.mean))
        assert not legend.contains(x, y), f"the legend covers the point {p.method} at {p.x}"
    assert legend.x0 >= ax.get_window_extent().x1  # beside the axes, not on them
