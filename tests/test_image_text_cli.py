"""The image–text command line end to end on a generated dataset in SCAN's precomp layout."""
from __future__ import annotations

import json

from harness.cli import main
from tests.conftest import TASKS, write_task
from tests.test_image_text_data import write_precomp

SMALL = {
    "base": str(TASKS / "coco.yaml"),
    "name": "tiny_coco",
    "version": "test",
    "dataset": {"val_images": 5},
    "encoders": {"a": {"dim": 16}, "b": {"word_dim": 8, "dim": 16}},
    "train": {"epochs": 1, "batch_size": 10, "eval_batch_size": 8},
    "methods": {
        "scan": {"method": "scan_i2t_avg", "lambda_softmax": 4},
        "swamp_par": {"method": "swamp_par", "K": 8, "queue": 20, "tau": 0.1, "eta": 5.0, "p": 2, "T": 0.5, "H": 2},
    },
}


def test_run_writes_accuracy_and_timing_tables(tmp_path, capsys):
    data = tmp_path / "coco_precomp"
    data.mkdir()
    write_precomp(data, sizes=(8, 5, 10), regions=3, features=6)
    (data / "testall_ims.npy").write_bytes((data / "test_ims.npy").read_bytes())
    (data / "testall_caps.txt").write_text((data / "test_caps.txt").read_text())
    task = write_task(tmp_path, {**SMALL, "dataset": {**SMALL["dataset"], "vocab_cache": str(tmp_path / "cache")}})
    out = tmp_path / "out"
    rc = main(["run", str(task), "--methods", "scan,swamp_par", "--data-root", str(data), "--device", "cpu",
               "--out", str(out), "--no-progress"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "i2t R@1" in printed and "rsum" in printed and "test / swamp_par" in printed
    result = json.loads((out / "tiny_coco" / "scan" / "seed0.json").read_text())
    assert {"i2t/R@1", "t2i/MedR", "rsum", "5folds/i2t/R@1", "5folds/rsum"} <= set(result["metrics"])
    assert {"test_total", "test_total@5folds", "test_score@5folds"} <= set(result["profile"]["timing"])
    assert "test@5folds" in result["profile"]["memory"]
    timing = (out / "tiny_coco" / "timing.md").read_text()
    assert "5 folds, per fold" in timing and "paper, RTX 2080 Ti: test s" in timing
    assert "21.5×" in timing and "361.1×" in timing  # the paper's SCAN / SwAMP-PAR test ratios, 1K and 5K
    accuracy = (out / "tiny_coco" / "accuracy.md").read_text()
    assert "pair-based, 5 folds (mean)" in accuracy and "(SwAMP paper, MS-COCO table)" in accuracy


def test_missing_data_stops_before_anything_is_written(tmp_path, capsys):
    task = write_task(tmp_path, {**SMALL, "dataset": {**SMALL["dataset"], "vocab_cache": str(tmp_path / "cache")}})
    rc = main(["run", str(task), "--data-root", str(tmp_path / "nowhere"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert rc == 2 and "train_ims.npy" in err and "testall_caps.txt" in err and "SCAN authors" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()
