"""Sketch -> photo data: image folders (generated with PIL), class splits, word vectors, class-only splits,
semantic triplets, generated shapes, QMUL; bad input stops with one clear error."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from harness.config.params import parse
from harness.config.spec import MetricSpec
from harness.data.images import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    ImageChoices,
    SemanticTriplets,
    negative_class_probabilities,
)
from harness.data.paired import Split
from harness.data.word_vectors import class_vectors
from harness.errors import ConfigError, DataError
from harness.run.evaluate import make_folds, rank_split
from harness.run.preflight import check_pairing
from harness.sources.image_folder import ImageFolder, ImageFolderParams, split_classes
from harness.sources.sketch_shapes import SketchShapes, SketchShapesParams
from tests.sketch_fixtures import CLASSES, write_doodle2search_files, write_image_folders


def folder_params(root: Path, **kw) -> ImageFolderParams:
    body = {"root": str(root), "test_classes": ["bat", "saw"], "val_fraction": 0.25, "image_size": 8,
            "word_vectors": "word_vectors.txt", **kw}
    return parse(ImageFolderParams, body, "dataset")


@pytest.fixture
def folders(tmp_path: Path) -> Path:
    return write_image_folders(tmp_path / "data")


def test_image_folder_splits_classes_not_items(folders):
    data = ImageFolder.load(folder_params(folders))
    names = data.info["classes"]
    assert names["test"] == ["bat", "saw"] and len(names["val"]) == 1 and len(names["train"]) == 3
    assert set(names["train"]) | set(names["val"]) | set(names["test"]) == set(CLASSES)
    test = data["test"]
    assert not test.paired and test.b_to_a is None and test.n_pairs == 0
    assert len(test.a) == 2 * 4 and len(test.b) == 2 * 5
    assert test.a.take(torch.tensor([0, 3])).shape == (2, 3, 8, 8)
    train = data["train"]
    assert train.n_pairs == 3 * 4 and train.b.word_dim == 4
    pos, neg, words = train.b.take(torch.arange(5))
    assert pos.shape == neg.shape == (5, 3, 8, 8) and words.shape == (5, 4)
    assert data.input_shapes() == {"a": (3, 8, 8), "b": (3, 8, 8)}


def test_image_folder_triplets_respect_classes(folders):
    torch.manual_seed(0)
    train = ImageFolder.load(folder_params(folders))["train"]
    triplets = train.b
    photo_labels = torch.tensor([lab for _, lab in __import__("torchvision").datasets.folder.make_dataset(
        str(folders / "photo"), {c: i for i, c in enumerate(CLASSES)}, extensions=(".jpg",))])
    index = torch.arange(len(train.a)).repeat(20)
    pos, neg, _ = triplets.sample(index)
    labels = train.labels_a[index]
    paths = triplets.photos.paths
    pos_class = torch.tensor([CLASSES.index(Path(paths[i]).parent.name) for i in pos.tolist()])
    neg_class = torch.tensor([CLASSES.index(Path(paths[i]).parent.name) for i in neg.tolist()])
    assert torch.equal(pos_class, labels) and not bool((neg_class == labels).any())
    assert set(neg_class.tolist()) <= set(labels.tolist()) and len(photo_labels) == 30


def test_random_test_classes_need_enough_photos(folders):
    for name in ("bat", "cow"):  # two classes with 9 photos: the only ones eligible for 'at least 6'
        for i in range(5, 9):
            shutil.copy(folders / "photo" / name / "0.jpg", folders / "photo" / name / f"x{i}.jpg")
    p = folder_params(folders, test_classes=[], random_test_classes=2, min_test_photos=6)
    assert ImageFolder.load(p).info["classes"]["test"] == ["bat", "cow"]
    with pytest.raises(DataError, match="only 2 classes have >= 6 photos"):
        ImageFolder.load(folder_params(folders, test_classes=[], random_test_classes=3, min_test_photos=6))


def test_class_split_is_seeded():
    classes = [f"c{i}" for i in range(40)]
    counts = {c: 10 for c in classes}
    p = parse(ImageFolderParams, {"root": "x", "random_test_classes": 5}, "dataset")
    a, b = split_classes(classes, counts, p), split_classes(classes, counts, p)
    other = split_classes(classes, counts, parse(ImageFolderParams, {"root": "x", "random_test_classes": 5,
                                                                     "split_seed": 1}, "dataset"))
    assert a == b and a != other
    assert len(a["test"]) == 5 and len(a["val"]) == 35 - int(0.9 * 35) and not set(a["val"]) & set(a["train"])


@pytest.mark.parametrize("break_it, message", [
    (lambda r: (r / "photo" / "cow" / "1.jpg").write_bytes(b"not an image"), r"cannot be read:.*cow/1.jpg"),
    (lambda r: [f.unlink() for f in (r / "sketch" / "door").iterdir()], r"hold no image.*: door"),
    (lambda r: shutil.rmtree(r / "photo"), r"photo folder .* does not exist"),
    (lambda r: (r / "word_vectors.txt").write_text("apple 1 2 3 4\n"),
     r"no vector for 3 class\(es\): cow, door, palm_tree"),
    (lambda r: shutil.rmtree(r / "sketch" / "apple"), r"same classes.*apple"),
])
def test_bad_image_folders_raise_one_clear_error(folders, break_it, message):
    break_it(folders)
    with pytest.raises(DataError, match=f"(?s){message}"):
        ImageFolder.load(folder_params(folders, test_classes=["bat", "saw"], split_seed=3))


def test_unknown_test_class_names_the_valid_ones(folders):
    with pytest.raises(ConfigError, match="did you mean 'palm_tree'"):
        ImageFolder.load(folder_params(folders, test_classes=["palm tree"]))


def test_word_vectors_whole_words_means_and_header(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text("3 2\nPalm 1 3\ntree 3 5\nfire_hydrant 7 7\n")
    out = class_vectors(path, ["palm_tree", "fire hydrant", "Tree"])
    assert out.tolist() == [[2.0, 4.0], [7.0, 7.0], [3.0, 5.0]]
    with pytest.raises(DataError, match="no vector for 1 class.*: apple"):
        class_vectors(path, ["apple", "tree"])
    with pytest.raises(DataError, match="does not exist"):
        class_vectors(tmp_path / "nope.txt", ["tree"])


def test_normalize_none_leaves_pixels_in_unit_range_and_imagenet_standardises(folders):
    raw = ImageFolder.load(folder_params(folders, normalize="none"))["test"]
    net = ImageFolder.load(folder_params(folders))["test"]
    rows = torch.arange(len(raw.b))
    plain, standardised = raw.b.take(rows), net.b.take(rows)
    assert 0 <= float(plain.min()) and float(plain.max()) <= 1 and float(plain.max()) > 0.5
    mean, std = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1), torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    torch.testing.assert_close(standardised, (plain - mean) / std)
    with pytest.raises(ConfigError, match="normalize"):
        folder_params(folders, normalize="unit")


def test_sketch_versions_one_drawn_per_item_and_epoch(folders):
    settings = write_doodle2search_files(folders)
    data = ImageFolder.load(folder_params(folders, normalize="none", **settings))
    train, test = data["train"].a, data["test"].a
    assert isinstance(train, ImageChoices) and not isinstance(test, ImageChoices)
    assert all(p.startswith(str(folders / "sketch_v0")) for p in test.paths)  # held-out splits: the first folder
    each = torch.stack([torch.stack([train.read(f) for f in v]) for v in train.versions])  # (N, 3, C, H, W)
    rows = torch.arange(len(train))

    def drawn(seed):
        torch.manual_seed(seed)
        out = []
        for _ in range(60):  # 60 epochs of every sketch; which version each one read
            taken = train.take(rows)[:, None]  # (N, 1, C, H, W)
            out.append((taken - each).abs().flatten(2).amax(2).argmin(1))
        return torch.stack(out)  # (epochs, N)

    epochs = drawn(0)
    assert set(epochs.unique().tolist()) == {0, 1, 2}
    counts = torch.bincount(epochs.flatten(), minlength=3).double()
    assert float(stats.chisquare(counts.numpy()).pvalue) > 1e-3  # uniform over the versions
    assert torch.equal(epochs, drawn(0)) and not torch.equal(epochs, drawn(1))  # reproducible from the seed


def test_missing_sketch_version_is_one_clear_error(folders):
    settings = write_doodle2search_files(folders)
    (folders / "sketch_v2" / "apple" / "1.png").unlink()
    with pytest.raises(DataError, match=r"1 training sketch\(es\) of .*sketch_v0 are missing from .*sketch_v2 "
                                        r"\(e\.g\. apple/1\.png\)"):
        ImageFolder.load(folder_params(folders, **settings))


def test_class_vectors_from_an_array_and_its_pickled_vocabulary(folders):
    import pickle

    settings = write_doodle2search_files(folders)
    array, names = np.load(folders / "vectors.npy"), pickle.loads((folders / "vocab.pkl").read_bytes())
    data = ImageFolder.load(folder_params(folders, **settings))
    train_names = data.info["classes"]["train"]
    expected = np.stack([array[names.index(n)] for n in train_names])
    np.testing.assert_array_equal(data["train"].b.word_vectors.numpy(), expected)
    (folders / "vocab.txt").write_text("\n".join(n.upper().replace("_", " ") for n in names) + "\n")
    np.testing.assert_array_equal(class_vectors(folders / "vectors.npy", train_names, folders / "vocab.txt"), expected)
    with pytest.raises(DataError, match="name its rows with dataset.word_vocab"):
        class_vectors(folders / "vectors.npy", train_names)
    (folders / "short.txt").write_text("apple\n")
    with pytest.raises(DataError, match="names 1 classes but .* has 6 rows"):
        class_vectors(folders / "vectors.npy", train_names, folders / "short.txt")
    (folders / "other.txt").write_text("\n".join(["zebra", *names[1:]]))
    with pytest.raises(DataError, match=f"no entry for 1 class.*: {names[0]}"):
        class_vectors(folders / "vectors.npy", names, folders / "other.txt")
    (folders / "evil.pkl").write_bytes(pickle.dumps([Path("x")]))
    with pytest.raises(DataError, match="not allowed"):
        class_vectors(folders / "vectors.npy", names, folders / "evil.pkl")


def test_negative_distribution_known_answer():
    words = torch.tensor([[0.0], [1.0], [2.0]])
    p = negative_class_probabilities(words, 3, temperature=1.0)
    # class 0: exp(-1) : exp(-4) for classes 1, 2; the diagonal is never drawn
    assert p[0].tolist() == pytest.approx([0.0, math.exp(-1) / (math.exp(-1) + math.exp(-4)),
                                           math.exp(-4) / (math.exp(-1) + math.exp(-4))])
    assert p.sum(1).tolist() == pytest.approx([1.0] * 3)
    assert negative_class_probabilities(None, 4, 0.1)[2].tolist() == pytest.approx([1 / 3, 1 / 3, 0, 1 / 3])


def test_semantic_sampling_follows_its_distribution():
    torch.manual_seed(0)
    words = torch.tensor([[0.0], [0.5], [1.0], [3.0]])
    triplets = SemanticTriplets(torch.zeros(8, 1, 2, 2), torch.arange(8) % 4, torch.arange(16000) % 4,
                                words, temperature=1.0)
    _, _, negative = triplets.sample(torch.arange(0, 16000, 4))  # 4,000 sketches of class 0
    observed = np.bincount(negative.numpy(), minlength=4)
    expected = triplets.probabilities[0].numpy() * 4000
    assert observed[0] == 0
    _, p = stats.chisquare(observed[1:], expected[1:])
    assert p > 0.01, (observed, expected)
    # the far class (distance 3, weight exp(-9)) is almost never drawn; the nearest most often
    assert observed[1] > observed[2] > observed[3]


def test_class_only_split_rejects_pairs_and_folds():
    lab = torch.tensor([0, 1])
    split = Split(torch.zeros(2, 1), torch.zeros(3, 1), labels_a=lab, labels_b=torch.tensor([0, 1, 1]), paired=False)
    with pytest.raises(ConfigError, match="no pairing"):
        split.pair_batch(torch.arange(1))
    with pytest.raises(ConfigError, match="folds: \\[1\\]"):
        make_folds(split, 2)
    with pytest.raises(ConfigError, match="pair-based metrics are undefined"):
        check_pairing(split, MetricSpec(relevance=("pair", "class")), "test split")
    with pytest.raises(ConfigError, match="folds: \\[1\\]"):
        check_pairing(split, MetricSpec(relevance=("class",), folds=(1, 5)), "test split")
    with pytest.raises(ConfigError, match="needs labels_a and labels_b"):
        Split(torch.zeros(2, 1), torch.zeros(3, 1), paired=False)
    sims = torch.tensor([[0.9, 0.1, 0.2], [0.1, 0.8, 0.3]])
    out = rank_split(sims, split, MetricSpec(directions=("s2p",), relevance=("class",), ks=(1,), map=True))
    assert out["s2p/class_R@1"] == 100.0 and out["s2p/class_mAP"] == pytest.approx(100 * (1 + 1) / 2)


def test_sketch_shapes_sizes_and_zero_shot_classes():
    data = SketchShapes.load(SketchShapesParams(classes=(3, 2, 2), sketches=(6, 4, 5), photos=(9, 2, 7),
                                                image_size=10, word_dim=5))
    assert data.input_shapes() == {"a": (3, 10, 10), "b": (3, 10, 10)}
    labels = {s: set(data[s].labels_a.tolist()) for s in ("train", "val", "test")}
    assert labels == {"train": {0, 1, 2}, "val": {3, 4}, "test": {5, 6}}
    first = data["test"].a.take(torch.tensor([1]))
    assert torch.equal(first, data["test"].a.take(torch.tensor([1])))  # generated, but the same every time
    assert data["train"].b.word_dim == 5 and data.info["timing_only"]
