"""SCAN's precomp format (both caption layouts), vocabulary and its cache, tokenizer, synthetic shapes."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from harness.data import text
from harness.data.paired import ArrayRows
from harness.errors import DataError
from harness.sources.scan_precomp import ScanPrecomp, ScanPrecompParams, expand_root
from harness.sources.synthetic_precomp import SyntheticPrecomp, SyntheticPrecompParams

WORDS = ["a", "dog", "runs", "on", "the", "grass", "man", "rides", "bike", "red"]


def write_precomp(root, sizes=(6, 3, 4), regions=4, features=5, dev_one_to_one=True, seed=0):
    """A dataset folder in SCAN's exact layout: <split>_ims.npy (N x R x F float32) and <split>_caps.txt."""
    rng = np.random.default_rng(seed)
    for split, n in zip(("train", "dev", "test"), sizes):
        np.save(root / f"{split}_ims.npy", rng.normal(size=(n, regions, features)).astype(np.float32))
        per_image = 1 if split == "dev" and dev_one_to_one else 5
        lines = [" ".join(rng.choice(WORDS, size=rng.integers(2, 7))) + " ." for _ in range(n * per_image)]
        (root / f"{split}_caps.txt").write_text("\n".join(lines) + "\n")


def load(root, tmp_path, **kw):
    return ScanPrecomp.load(ScanPrecompParams(root=str(root), vocab_cache=str(tmp_path / "cache"), **kw))


def test_loader_pairs_both_caption_layouts(tmp_path):
    write_precomp(tmp_path)
    data = load(tmp_path, tmp_path, val_images=0)
    train, val = data["train"], data["val"]
    assert (len(train.a), len(train.b)) == (6, 30) and train.b_to_a.tolist()[:7] == [0, 0, 0, 0, 0, 1, 1]
    assert (len(val.a), len(val.b)) == (3, 3) and val.b_to_a.tolist() == [0, 1, 2]  # one to one
    assert data.input_shapes()["a"] == (4, 5)
    assert isinstance(train.a, ArrayRows) and isinstance(train.a.array, np.memmap)
    rows = train.a.take(torch.tensor([3, 0]))
    assert (rows.dtype == torch.float32
            and torch.equal(rows[1], torch.from_numpy(np.load(tmp_path / "train_ims.npy")[0])))


def test_captions_are_framed_token_ids(tmp_path):
    write_precomp(tmp_path)
    data = load(tmp_path, tmp_path)
    words = json.loads(next((tmp_path / "cache").glob("vocab-*.json")).read_text())["words"]
    first = (tmp_path / "test_caps.txt").read_text().split("\n")[0]
    ids, lengths = data["test"].b.take(torch.tensor([0]))
    assert ids[0, 0] == text.START and ids[0, int(lengths[0]) - 1] == text.END
    assert [words[i] for i in ids[0, 1:int(lengths[0]) - 1].tolist()] == [w if w in words else "<unk>"
                                                                        for w in text.tokenize(first)]


def test_val_images_keeps_the_first_images_and_their_captions(tmp_path):
    write_precomp(tmp_path, sizes=(6, 8, 4), dev_one_to_one=False)
    val = load(tmp_path, tmp_path, val_images=2)["val"]
    assert (len(val.a), len(val.b)) == (2, 10) and val.b_to_a.tolist() == [0] * 5 + [1] * 5


def test_vocabulary_threshold_specials_and_order():
    captions = [["dog", "runs"], ["dog", "runs"], ["dog", "cat"], ["dog", "runs"], ["runs", "cat"]]
    words = text.build_vocab(captions, min_count=4)
    assert words == ["<pad>", "<start>", "<end>", "<unk>", "dog", "runs"]  # cat seen twice: dropped


def test_vocabulary_is_cached_by_input_hash(tmp_path, monkeypatch):
    write_precomp(tmp_path)
    load(tmp_path, tmp_path)
    cached = list((tmp_path / "cache").glob("vocab-*.json"))
    assert len(cached) == 1
    monkeypatch.setattr(text, "build_vocab", lambda *a: pytest.fail("a cached vocabulary was rebuilt"))
    load(tmp_path, tmp_path)  # same inputs: read from the cache
    with pytest.raises(BaseException, match="rebuilt"):
        load(tmp_path, tmp_path, min_word_count=2)  # another threshold: another hash
    monkeypatch.undo()
    (tmp_path / "train_caps.txt").write_text("a red bike .\n" * 30)  # other captions: another hash, a new file
    data = load(tmp_path, tmp_path)
    assert len(list((tmp_path / "cache").glob("vocab-*.json"))) == 2  # the first captions, then the new ones
    assert data.info["vocab_size"] == 4 + 4  # specials + a, red, bike, .
    assert text.vocab_key(b"x", 4) != text.vocab_key(b"y", 4) != text.vocab_key(b"y", 3)


def test_missing_files_list_what_is_expected_and_where_it_is_published(tmp_path):
    write_precomp(tmp_path)
    (tmp_path / "test_caps.txt").unlink()
    with pytest.raises(DataError) as err:
        load(tmp_path, tmp_path)
    message = str(err.value)
    for name in ("train_ims.npy", "train_caps.txt", "dev_ims.npy", "test_ims.npy", "test_caps.txt  (missing)"):
        assert name in message
    assert "SCAN authors" in message and "--data-root" in message and "SCAN_DATA" in message
    assert not (tmp_path / "cache").exists()  # nothing written before the check


def test_root_expands_environment_variables(monkeypatch, tmp_path):
    monkeypatch.setenv("SCAN_DATA", str(tmp_path))
    assert expand_root("${SCAN_DATA:-data}/f30k_precomp") == tmp_path / "f30k_precomp"
    monkeypatch.delenv("SCAN_DATA")
    assert str(expand_root("${SCAN_DATA:-data}/f30k_precomp")) == "data/f30k_precomp"
    with pytest.raises(DataError, match=r"\$\{SCAN_DATA\}, which is not set"):
        expand_root("${SCAN_DATA}/x")


@pytest.mark.parametrize("caption, tokens", [
    ("A man's red T-shirt.", ["a", "man", "'s", "red", "t-shirt", "."]),
    ("Two dogs don't run, 3.5 m away!", ["two", "dogs", "do", "n't", "run", ",", "3.5", "m", "away", "!"]),
    ("  spaced   out  ", ["spaced", "out"]),
])
def test_tokenizer(caption, tokens):
    assert text.tokenize(caption) == tokens


def test_token_captions_pad_each_batch_to_its_longest():
    caps = text.TokenCaptions.from_ids([[1, 5, 2], [1, 2], [1, 7, 8, 9, 2]], vocab_size=10)
    ids, lengths = caps.take(torch.tensor([1, 0]))
    assert ids.tolist() == [[1, 2, 0], [1, 5, 2]] and lengths.tolist() == [2, 3]
    assert caps.item_shape == (5, 10) and len(caps.subset(2)) == 2


def test_synthetic_precomp_has_scan_shapes_and_caption_lengths():
    p = SyntheticPrecompParams(images=(4, 5, 200), regions=36, feature_dim=8, vocab_size=50)
    data = SyntheticPrecomp.load(p)
    test = data["test"]
    assert (len(test.a), len(test.b)) == (200, 1000) and tuple(test.a.shape) == (200, 36, 8)
    assert data.input_shapes()["b"] == (int(data["train"].b.lengths.max()), 50)
    words = (test.b.lengths - 2).double()
    assert 10.0 <= float(words.mean()) <= 12.0 and int(words.min()) >= 3 and int(words.max()) <= 50
    assert data.info["timing_only"] and test.b_to_a.tolist()[:6] == [0, 0, 0, 0, 0, 1]
    ids, lengths = test.b.take(torch.arange(3))
    assert (ids[:, 0] == text.START).all() and int(ids.max()) < 50
    again = SyntheticPrecomp.load(p)["test"]
    assert torch.equal(again.a, test.a) and torch.equal(again.b.tokens, test.b.tokens)
