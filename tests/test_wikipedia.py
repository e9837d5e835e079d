"""The Wikipedia image–text source on the real files (skipped when ../shared/data/wikipedia is absent)
and its error paths on files made here."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.config.params import parse
from harness.config.spec import load_task
from harness.errors import DataError
from harness.sources.wikipedia import Wikipedia, WikipediaParams, hold_out, read_labels
from tests.conftest import ROOT

DATA = ROOT.parent / "shared" / "data" / "wikipedia"
needs_data = pytest.mark.skipif(not (DATA / "raw_features.mat").exists(),
                                reason=f"Wikipedia data not found at {DATA} (set WIKIPEDIA_DATA to use it elsewhere)")


def _load(**kw):
    return Wikipedia.load(parse(WikipediaParams, {"root": str(DATA), **kw}, "dataset"))


@needs_data
def test_standard_split_with_a_seeded_validation_slice():
    data = _load()
    assert [data[s].n_pairs for s in ("train", "val", "test")] == [2000, 173, 693]
    assert data.input_shapes() == {"a": (128,), "b": (10,)}
    for split in data.splits.values():
        assert split.has_labels and int(split.labels_a.min()) == 0 and int(split.labels_a.max()) == 9
    assert torch.bincount(data["test"].labels_a).tolist() == [34, 88, 96, 85, 65, 58, 51, 41, 71, 104]
    torch.testing.assert_close(data["train"].a.mean(0), torch.zeros(128), atol=1e-5, rtol=0)  # standardised
    again, other = _load(), _load(split_seed=1)
    assert torch.equal(again["val"].a, data["val"].a) and not torch.equal(other["val"].a, data["val"].a)


@needs_data
def test_val_pairs_zero_trains_on_all_and_raw_features_stay_proportions():
    data = _load(val_pairs=0, standardize=False)
    assert data["train"].n_pairs == 2173 and data["val"] is data["train"]
    torch.testing.assert_close(data["train"].b.sum(1), torch.ones(2173), atol=1e-5, rtol=0)  # LDA topic proportions


@needs_data
def test_task_file_finds_the_data_through_its_variable(monkeypatch):
    monkeypatch.setenv("WIKIPEDIA_DATA", str(DATA))
    spec = load_task(ROOT / "tasks" / "wikipedia.yaml")
    assert Wikipedia.load(spec.dataset.params)["test"].n_pairs == 693
    assert {"i2t/class_mAP", "t2i/class_mAP", "t2i/R@1"} <= set(spec.metrics.names())


def test_missing_files_name_the_variable(tmp_path):
    with pytest.raises(DataError, match=r"(?s)raw_features.mat  \(missing\).*WIKIPEDIA_DATA.*--data-root"):
        Wikipedia.load(parse(WikipediaParams, {"root": str(tmp_path)}, "dataset"))


def test_list_files_must_match_the_features(tmp_path):
    path = tmp_path / "testset_txt_img_cat.list"
    path.write_text("t1\ti1\t3\nt2\ti2\t10\n")
    assert read_labels(path, 2).tolist() == [2, 9]
    with pytest.raises(DataError, match="lists 2 pairs"):
        read_labels(path, 3)
    path.write_text("t1\ti1\n")
    with pytest.raises(DataError, match="text_id<TAB>image_id<TAB>class"):
        read_labels(path, 1)


def test_hold_out_is_disjoint_and_checked():
    from harness.data.paired import Split

    labels = torch.arange(10) % 3
    split = Split(torch.arange(10.0)[:, None], torch.arange(10.0)[:, None], labels_a=labels, labels_b=labels)
    train, val = hold_out(split, 3, seed=0)
    assert sorted(train.a[:, 0].tolist() + val.a[:, 0].tolist()) == list(np.arange(10.0))
    assert torch.equal(val.labels_a, val.a[:, 0].long() % 3)  # labels follow their rows
    with pytest.raises(DataError, match="val_pairs \\(10\\) must be below the 10"):
        hold_out(split, 10, seed=0)
