"""`python -m harness ensemble`: metrics of the averaged score matrix of two trained runs, its result file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from harness.analysis.restore import restore_run
from harness.cli import main
from harness.config import params as P
from harness.config.spec import MetricSpec
from harness.run import evaluate as ev
from tests.conftest import TINY, TINY_IMAGE_TEXT, write_task

PAIR = ("scan_t2i_avg", "scan_i2t_lse")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """Results folder holding one-epoch runs of the two SCAN variants of the tiny image–text task."""
    root = tmp_path_factory.mktemp("ensemble")
    task = write_task(root, TINY_IMAGE_TEXT, "tiny_image_text.yaml")
    out = root / "out"
    assert main(["run", str(task), "--methods", ",".join(PAIR), "--epochs", "1", "--device", "cpu",
                 "--out", str(out), "--no-progress"]) == 0
    return out / "tiny_image_text"


def _result(folder: Path, run: str) -> Path:
    return folder / run / "seed0.json"


def test_metrics_are_those_of_the_averaged_matrix(trained, capsys):
    a, b = (_result(trained, f"{m}@train.epochs=1") for m in PAIR)
    assert main(["ensemble", str(a), str(b), "--device", "cpu"]) == 0
    path = trained / f"{PAIR[0]}@train.epochs=1+{PAIR[1]}@train.epochs=1" / "seed0.json"
    result = json.loads(path.read_text())
    assert result["method"] == "+".join(PAIR) and [s["result"] for s in result["sources"]] == [str(a), str(b)]
    cpu = torch.device("cpu")
    (first, data, ra), (second, _, _) = restore_run(a, cpu), restore_run(b, cpu)
    spec = P.parse(MetricSpec, ra["config"]["metrics"], "metrics")
    expected = {}
    emb = [ev.encode_split(m, data["test"], cpu, 16) for m in (first, second)]
    for n_folds in spec.folds:
        folds = ev.make_folds(data["test"], n_folds)
        blocks = [ev.score_folds(m, *e, folds)[0] for m, e in zip((first, second), emb)]
        mean = [(x + y) / 2 for x, y in zip(*blocks)]
        expected.update(ev.rank_folds(mean, folds, data["test"], spec))
    assert result["metrics"] == pytest.approx(expected, abs=1e-9)
    timing = result["profile"]["timing"]
    assert {"test_total", "test_encode", "test_score", "test_rank", "test_total@5folds"} <= set(timing)
    assert "train_step" not in timing and (path.parent / "seed0.ranks.npz").exists()
    assert "i2t/R@1" in capsys.readouterr().out


def test_a_run_with_itself_keeps_its_metrics(trained, tmp_path):
    a = _result(trained, f"{PAIR[0]}@train.epochs=1")
    assert main(["ensemble", str(a), str(a), "--device", "cpu", "--out", str(tmp_path)]) == 0
    (path,) = tmp_path.rglob("seed0.json")
    assert json.loads(path.read_text())["metrics"] == pytest.approx(json.loads(a.read_text())["metrics"], abs=1e-9)


def test_tables_show_the_ensemble_beside_the_published_row(trained, tmp_path):
    a, b = (_result(trained, f"{m}@train.epochs=1") for m in PAIR)
    assert main(["ensemble", str(a), str(b), "--device", "cpu"]) == 0
    assert main(["table", str(trained), "--format", "md", "--write"]) == 0
    accuracy = (trained / "accuracy.md").read_text()
    assert f"{PAIR[0]}@train.epochs=1+{PAIR[1]}@train.epochs=1" in accuracy


def test_runs_of_different_tasks_are_refused(trained, tmp_path, capsys):
    task = write_task(tmp_path, TINY)
    assert main(["run", str(task), "--methods", "contrastive", "--epochs", "1", "--device", "cpu",
                 "--out", str(tmp_path / "other"), "--no-progress"]) == 0
    other = tmp_path / "other" / "tiny" / "contrastive@train.epochs=1" / "seed0.json"
    before = sorted(p.name for p in trained.iterdir())
    assert main(["ensemble", str(_result(trained, f"{PAIR[0]}@train.epochs=1")), str(other)]) == 2
    assert "different tasks" in capsys.readouterr().err
    assert sorted(p.name for p in trained.iterdir()) == before
    assert main(["ensemble", str(other), str(tmp_path / "missing.json")]) == 2
