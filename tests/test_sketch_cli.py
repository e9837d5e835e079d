"""Sketch -> photo end to end on generated image folders (seconds), and its bad-input exits; QMUL data."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from harness.cli import main
from harness.errors import DataError
from harness.data.sources.qmul_sbir import QMULParams, QMULSBIR
from tests import sketch_fixtures
from tests.conftest import ROOT, write_task
from tests.sketch_fixtures import write_image_folders

QMUL = ROOT.parent / "shared" / "data" / "qmul_sbir"


def folder_task(tmp_path: Path, **dataset) -> Path:
    """A seconds-long variant of tasks/sketchy.yaml on PIL-generated folders under ``tmp_path/data``."""
    root = tmp_path / "data"
    if not root.exists():
        write_image_folders(root)
    return write_task(tmp_path, sketch_fixtures.folder_task(root, **dataset), "tiny_folders.yaml")


@pytest.mark.slow
def test_end_to_end_on_generated_image_folders(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(folder_task(tmp_path)), "--device", "cpu", "--out", str(out), "--no-progress",
                 "--reference", "doodle2search"]) == 0
    result = json.loads((out / "tiny_folders" / "doodle2search_swamp" / "seed0.json").read_text())
    assert set(result["metrics"]) == {"s2p/class_R@1", "s2p/class_R@10", "s2p/class_MedR", "s2p/class_MeanR",
                                      "s2p/class_mAP", "s2p/class_mAP@200", "s2p/class_P@200"}
    assert {"triplet", "domain", "semantic", "swamp", "loss"} <= set(result["history"][-1])
    assert result["dataset"]["classes"]["test"] == ["bat", "saw"] and result["config"]["encoders"]["a"]["weights"] == ""
    assert result["profile"]["timing"]["test_encode"]["median_s"] > 0
    table = (out / "tiny_folders" / "accuracy.md").read_text()
    assert "s2p mAP@200" in table and "SwAMP paper" in table and "36.91" in table


@pytest.mark.parametrize("break_it, extra, message", [
    (lambda r: (r / "photo" / "cow" / "2.jpg").write_bytes(b"\x89PNG broken"), {}, "cannot be read"),
    (lambda r: [f.unlink() for f in (r / "photo" / "apple").iterdir()], {}, "hold no image"),
    (lambda r: shutil.rmtree(r / "sketch"), {}, "sketch folder .* does not exist"),
    (lambda r: None, {"word_vectors": "missing.txt"}, "word-vector file .* does not exist"),
    (lambda r: None, {"word_vectors": ""}, "regresses class word vectors"),
])
def test_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, break_it, extra, message):
    task = folder_task(tmp_path, **extra)
    break_it(tmp_path / "data")
    out = tmp_path / "out"
    assert main(["run", str(task), "--device", "cpu", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert __import__("re").search(message, err), err
    assert not out.exists()


def test_pair_metrics_on_class_only_splits_are_refused(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(folder_task(tmp_path)), "--set", "metrics.relevance=[pair,class]", "--device", "cpu",
                 "--out", str(out), "--no-progress"]) == 2
    assert "pair-based metrics are undefined" in capsys.readouterr().err and not out.exists()


def test_qmul_missing_files_are_listed(tmp_path):
    with pytest.raises(DataError, match=r"(?s)4 file\(s\) missing.*chairs_sketch_db_train.mat.*QMUL_SBIR"):
        QMULSBIR.load(QMULParams(root=str(tmp_path), category="chairs"))


@pytest.mark.skipif(not QMUL.is_dir(), reason=f"QMUL data not found at {QMUL} (read-only shared data)")
@pytest.mark.parametrize("category, sizes", [("shoes", (274, 30, 115)), ("chairs", (180, 20, 97))])
def test_qmul_splits_are_paired_and_validation_is_a_seeded_slice(category, sizes):
    data = QMULSBIR.load(QMULParams(root=str(QMUL), category=category, image_size=32))
    assert tuple(data[s].n_pairs for s in ("train", "val", "test")) == sizes
    assert data.input_shapes() == {"a": (1, 32, 32), "b": (1, 32, 32)}
    again = QMULSBIR.load(QMULParams(root=str(QMUL), category=category, image_size=32))
    assert data.info["val_rows"] == again.info["val_rows"]
    torch.manual_seed(0)
    crops = data["train"].a.take(torch.tensor([0, 0]))
    assert not torch.equal(crops[0], crops[1])  # augmented independently
    assert torch.equal(data["test"].a.take(torch.tensor([0])), again["test"].a.take(torch.tensor([0])))
    assert abs(float(data["train"].a.images.mean())) < 1e-3  # standardised with training statistics
