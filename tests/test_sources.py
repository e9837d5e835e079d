"""Data sources: the synthetic generator and user-supplied paired arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.config.params import parse
from harness.errors import DataError
from harness.sources.paired_arrays import PairedArrays, PairedArraysParams
from harness.sources.synthetic_gaussian import SyntheticGaussian, SyntheticParams, generate


def small(**kw) -> SyntheticParams:
    return SyntheticParams(pairs_per_class=10, split_sizes=(100, 50, 50), **kw)


def test_synthetic_is_determined_by_its_seed():
    a1, b1, l1 = generate(small(seed=3))
    a2, b2, l2 = generate(small(seed=3))
    a3, _, _ = generate(small(seed=4))
    assert np.array_equal(a1, a2) and np.array_equal(b1, b2) and np.array_equal(l1, l2)
    assert not np.array_equal(a1, a3)


def test_synthetic_shapes_splits_and_labels():
    data = SyntheticGaussian.load(small())
    assert [data[s].n_pairs for s in ("train", "val", "test")] == [100, 50, 50]
    assert data.input_shapes() == {"a": (100,), "b": (100,)}
    train = data["train"]
    assert train.a.dtype == torch.float32 and train.has_labels
    assert set(train.labels_a.tolist()) <= set(range(20))
    assert np.bincount(generate(small())[2], minlength=20).tolist() == [10] * 20


def test_synthetic_modalities_differ_but_share_latents():
    a, b, labels = generate(small())
    assert not np.allclose(a, b)
    # same class -> closer latents -> the a-features of one class are more alike than across classes
    centroid = np.stack([a[labels == c].mean(0) for c in range(20)])
    within = np.mean([np.linalg.norm(a[labels == c] - centroid[c], axis=1).mean() for c in range(20)])
    between = np.linalg.norm(centroid[:, None] - centroid[None], axis=2).sum() / (20 * 19)
    assert within < between


def write_pairs(root, n=(30, 10, 12), d=(7, 3), labels=True):
    rng = np.random.default_rng(0)
    for split, size in zip(("train", "val", "test"), n):
        np.save(root / f"{split}_a.npy", rng.normal(size=(size, d[0])).astype(np.float32))
        np.save(root / f"{split}_b.npy", rng.normal(size=(size, d[1])))
        if labels:
            np.save(root / f"{split}_labels.npy", rng.integers(0, 4, size))


def test_paired_arrays_any_shape(tmp_path):
    write_pairs(tmp_path)
    data = PairedArrays.load(parse(PairedArraysParams, {"root": str(tmp_path)}, "dataset"))
    assert data.input_shapes() == {"a": (7,), "b": (3,)}
    assert data["test"].n_pairs == 12 and data["test"].has_labels
    assert data["train"].b.dtype == torch.float32


def test_paired_arrays_missing_files_lists_expected(tmp_path):
    with pytest.raises(DataError, match=r"(?s)missing.*train_a.npy.*test_b.npy.*--data-root"):
        PairedArrays.load(PairedArraysParams(root=str(tmp_path)))


def test_paired_arrays_rejects_mismatched_rows(tmp_path):
    write_pairs(tmp_path, labels=False)
    np.save(tmp_path / "val_b.npy", np.zeros((9, 3)))
    with pytest.raises(DataError, match="equal N"):
        PairedArrays.load(PairedArraysParams(root=str(tmp_path)))
    np.save(tmp_path / "val_b.npy", np.zeros((10, 3)))
    np.save(tmp_path / "val_labels.npy", np.zeros(10, dtype=np.float32))
    with pytest.raises(DataError, match="integers"):
        PairedArrays.load(PairedArraysParams(root=str(tmp_path)))


def test_synthetic_features_are_standardised_on_train():
    data = SyntheticGaussian.load(small())
    train_a = data["train"].a.double()
    torch.testing.assert_close(train_a.mean(0), torch.zeros(100, dtype=torch.float64), atol=1e-5, rtol=0)
    torch.testing.assert_close(train_a.std(0, unbiased=False), torch.ones(100, dtype=torch.float64),
                               atol=1e-4, rtol=0)
    raw = SyntheticGaussian.load(small(standardize=False))
    assert float(raw["train"].a.std(0).mean()) < 0.5  # the random nets' raw outputs barely vary


def test_paired_arrays_standardize_uses_training_statistics(tmp_path):
    write_pairs(tmp_path)
    raw = PairedArrays.load(parse(PairedArraysParams, {"root": str(tmp_path)}, "dataset"))
    std = PairedArrays.load(parse(PairedArraysParams, {"root": str(tmp_path), "standardize": True}, "dataset"))
    for modality in ("a", "b"):
        train = getattr(raw["train"], modality).double()
        mean, sd = train.mean(0), train.std(0, unbiased=False)
        torch.testing.assert_close(getattr(std["train"], modality).double().mean(0), torch.zeros_like(mean),
                                   atol=1e-6, rtol=0)
        expected = (getattr(raw["test"], modality).double() - mean) / sd  # test uses train's mean and std
        torch.testing.assert_close(getattr(std["test"], modality).double(), expected, atol=1e-5, rtol=0)
    assert torch.equal(std["val"].labels_a, raw["val"].labels_a) and std.info["standardized"]


def test_paired_arrays_root_expands_variables(tmp_path, monkeypatch):
    write_pairs(tmp_path)
    monkeypatch.setenv("MY_FEATURES", str(tmp_path))
    data = PairedArrays.load(parse(PairedArraysParams, {"root": "${MY_FEATURES}"}, "dataset"))
    assert data["train"].n_pairs == 30
