"""Checks before training that stop a run which could not mean anything: a method that cannot read a data
source's training items (contrastive on image_folder's triplets), and a class-based selection metric on a
validation split of a single class. Each exits with status 2 and one line, writing nothing."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import yaml

from harness.cli import main
from tests.bad_input_cases import arrays, reading
from tests.error_lines import error_line
from tests.sketch_fixtures import folder_task, write_image_folders


def _folders(tmp_path: Path, **dataset) -> Path:
    """The tiny image-folder task (tests/sketch_fixtures.py) with ``dataset`` overrides, as a file."""
    root = write_image_folders(tmp_path / "data")
    path = tmp_path / "task.yaml"
    path.write_text(yaml.safe_dump(folder_task(root, **dataset), sort_keys=False))
    return path


def _refused(task: Path, out: Path, capsys, *extra: str) -> str:
    """The one error line of a run that must exit 2 before anything is written under ``out``."""
    assert main(["run", str(task), "--out", str(out), "--device", "cpu", "--no-progress", "--epochs", "1",
                 *extra]) == 2
    err = capsys.readouterr().err
    line = error_line(err)
    assert "Traceback" not in err, err
    assert not out.exists()
    return line


def test_a_method_that_cannot_read_the_sources_triplets_is_refused(tmp_path, capsys):
    # 4 seen classes, 2 of them validate: only the method check can stop this run
    line = _refused(_folders(tmp_path, val_fraction=0.5), tmp_path / "out", capsys, "--methods", "contrastive")
    assert "methods.contrastive: method 'contrastive' cannot train on dataset source 'image_folder'" in line
    assert "(positive photo, negative photo, class word vector) triplet" in line
    assert "only doodle2search, doodle2search_swamp (and methods derived from them) read those" in line


def test_a_single_validation_class_with_a_class_based_selection_is_refused(tmp_path, capsys):
    # 4 seen classes, val_fraction 0.25: one class validates, so s2p/class_mAP would be 100.00 every epoch
    line = _refused(_folders(tmp_path, val_fraction=0.25), tmp_path / "out", capsys)
    assert "the val split holds items of one class only ('" in line
    assert "selection metric s2p/class_mAP (train.select) is perfect at every epoch" in line
    assert "raise dataset.val_fraction (now 0.25) so that validation holds at least two classes" in line


def test_a_single_validation_class_without_a_val_fraction_names_the_split_and_a_pair_metric(tmp_path, capsys):
    root = arrays(tmp_path, **{"val_labels.npy": np.full(20, 3)})
    task = reading(tmp_path, {"source": "paired_arrays", "root": str(root)}, train={"select": "a2b/class_R@1"})
    line = _refused(task, tmp_path / "out", capsys)
    assert "one class only (label 3)" in line and "a2b/class_R@1" in line
    assert "give the dataset a validation split with items of at least two classes" in line
    assert "or select on a pair-based metric (train.select: a2b/R@1)" in line
    # the same data selected on a pair-based metric is no mistake
    task = reading(tmp_path, {"source": "paired_arrays", "root": str(root)}, train={"select": "a2b/R@1"})
    assert main(["run", str(task), "--out", str(tmp_path / "ok"), "--device", "cpu", "--no-progress",
                 "--epochs", "1", "--methods", "cca"]) == 0
