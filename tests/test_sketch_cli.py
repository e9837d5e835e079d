"""Sketch -> photo end to end on generated image folders (seconds), and its bad-input exits; QMUL data."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.cli import main
from harness.config.params import parse
from harness.errors import ConfigError, DataError
from harness.sources.qmul_sbir import QMULSBIR, QMULParams
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


def write_qmul_release(root: Path, category: str, sizes: dict[str, int],
                       triplets: bool = True) -> dict[str, np.ndarray]:
    """The release's files of a category as it ships them: MATLAB v5 files with key 'data', uint8
    N x 256 x 256 (row i of the sketch and the edge file of a split: the same item; here the edge map
    is the sketch inverted, so pairs can be checked), plus, with ``triplets``, a training-triplet file
    the pair-based methods must not need."""
    from scipy.io import savemat

    rng = np.random.default_rng(7)
    root.mkdir(parents=True, exist_ok=True)
    written = {}
    for split, n in sizes.items():
        sketch = rng.integers(0, 256, (n, 256, 256), dtype=np.uint8)
        for drawing, array in (("sketch", sketch), ("edge", 255 - sketch)):
            savemat(root / f"{category}_{drawing}_db_{split}.mat", {"data": array}, format="5")
            written[f"{drawing}_{split}"] = array
    if triplets:
        savemat(root / f"{category}_triplets_train.mat", {"triplets": rng.integers(0, sizes["train"], (50, 3))})
    return written


def test_qmul_handbags_read_as_shoes_and_chairs_without_their_triplet_file(tmp_path):
    write_qmul_release(tmp_path / "with", "handbags", {"train": 40, "test": 12})
    write_qmul_release(tmp_path / "without", "handbags", {"train": 40, "test": 12}, triplets=False)
    data = QMULSBIR.load(QMULParams(root=str(tmp_path / "with"), category="handbags", image_size=16, crop_scale=()))
    same = QMULSBIR.load(QMULParams(root=str(tmp_path / "without"), category="handbags", image_size=16,
                                    crop_scale=()))
    assert tuple(data[s].n_pairs for s in ("train", "val", "test")) == (36, 4, 12)
    assert data.info["category"] == "handbags" and "QMUL-Handbag" in data.info["origin"]
    for split in ("train", "val", "test"):
        for side in ("a", "b"):
            assert torch.equal(getattr(data[split], side).images, getattr(same[split], side).images)
    test = data["test"]  # row i of both files is item i: the edge map is the inverted sketch, before standardising
    sketch, edge = test.a.images.flatten(1), test.b.images.flatten(1)
    corr = torch.corrcoef(torch.cat([sketch, edge]))[: len(sketch), len(sketch):]
    assert torch.equal(corr.argmin(1), torch.arange(len(sketch)))
    with pytest.raises(DataError, match=r"(?s)4 file\(s\) missing.*handbags_sketch_db_train.mat"):
        QMULSBIR.load(QMULParams(root=str(tmp_path / "none"), category="handbags"))
    with pytest.raises(ConfigError, match="handbags"):
        parse(QMULParams, {"category": "bags"}, "dataset")


@pytest.mark.slow
def test_qmul_handbags_task_runs_end_to_end(tmp_path):
    write_qmul_release(tmp_path / "data", "handbags", {"train": 24, "test": 10})
    out = tmp_path / "out"
    small = ["encoders.a.widths=[4,8]", "encoders.b.widths=[4,8]", "encoders.a.dim=8", "encoders.b.dim=8",
             "dataset.image_size=16", "train.epochs=2", "train.batch_size=8", "swamp.K=4", "swamp.queue=8"]
    args = ["run", str(ROOT / "tasks" / "qmul_handbags.yaml"), "--methods", "contrastive,swamp", "--data-root",
            str(tmp_path / "data"), "--device", "cpu", "--out", str(out), "--no-progress"]
    assert main(args + [a for s in small for a in ("--set", s)]) == 0
    for method in ("contrastive", "swamp"):
        [path] = (out / "qmul_handbags").glob(f"{method}@*/seed0.json")
        result = json.loads(path.read_text())
        assert result["dataset"]["category"] == "handbags" and result["dataset"]["pairs"]["test"] == 10
        assert 0 <= result["metrics"]["s2p/R@1"] <= 100


@pytest.mark.skipif(not QMUL.is_dir(), reason=f"QMUL data not found at {QMUL} (read-only shared data)")
@pytest.mark.parametrize("task", ["qmul_shoes", "qmul_chairs"])
def test_the_shipped_qmul_tasks_fit_their_data(task, capsys):
    """No setting of a shipped QMUL task trips the fit check on the real release (e.g. a SwAMP queue as large
    as the training split)."""
    from harness.config import plan
    from harness.run import preflight, runner

    runs = plan.plan(ROOT / "tasks" / f"{task}.yaml", [f"dataset.root={QMUL}", "dataset.image_size=32"], [], [], [0])
    preflight.check_fit(runs, runner.load_data(runs[0].spec))
    assert capsys.readouterr().err == ""
