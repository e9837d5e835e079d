"""Text–video data: word2vec reader, captions, video vectors, held-out validation, and every source's
layout on generated files, including malformed ones."""
from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.config import params as P
from harness.config.registry import SOURCES
from harness.data.videotext import holdout, howto_video, read_feature_dict, read_pickle
from harness.data.words import CaptionDraw, PaddedCaptions, encode_words, read_word2vec, split_words
from harness.errors import DataError
from tests import videotext_fixtures as fx

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "msrvtt_vgg128"


def load(source: str, tmp_path: Path, **params) -> "PairedData":  # noqa: F821
    cls = SOURCES.get(source)
    return cls.load(P.parse(cls.Params, {"vocab_cache": str(tmp_path / "cache"), **params}, source))


# ---------------------------------------------------------------- words

@pytest.mark.parametrize("binary", [True, False])
def test_word2vec_reader_returns_the_wanted_vectors(tmp_path, binary):
    vectors = fx.word_vectors(dim=5)
    path = fx.write_word2vec(tmp_path / "w2v", vectors, binary=binary)
    found, dim = read_word2vec(path, {"man", "guitar", "absent"})
    assert dim == 5 and sorted(found) == ["guitar", "man"]
    np.testing.assert_allclose(found["man"], vectors["man"], rtol=1e-5, atol=1e-6)


def test_word2vec_binary_reader_crosses_chunk_boundaries(tmp_path, monkeypatch):
    import harness.data.words as words

    monkeypatch.setattr(words, "_CHUNK", 7)  # every entry spans several reads
    vectors = fx.word_vectors(dim=3)
    found, _ = read_word2vec(fx.write_word2vec(tmp_path / "w", vectors), set(vectors))
    assert all(np.array_equal(found[w], vectors[w]) for w in vectors)


@pytest.mark.parametrize("content, message", [
    (b"not a header\n", "first line"),
    (b"3 4\nman " + np.zeros(4, "<f4").tobytes(), "ends inside entry 2"),
    (b"2 3\nman 0.1 0.2 0.3\ndog 0.1 x 0.3\n", "is not 3 numbers"),
])
def test_word2vec_reader_rejects_malformed_files(tmp_path, content, message):
    (tmp_path / "bad").write_bytes(content)
    with pytest.raises(DataError, match=message):
        read_word2vec(tmp_path / "bad", {"man", "dog"})


def test_split_words_keeps_case_and_apostrophes():
    assert split_words("A man's dog, runs!  ok") == ["A", "man's", "dog", "runs", "ok"]


def test_encode_words_drops_unknown_words_then_truncates_and_pads():
    captions, dropped = encode_words([["a", "zz", "b", "c", "a"], ["zz"]], ["<pad>", "a", "b", "c"], max_words=3)
    ids, lengths = captions.take(torch.arange(2))
    assert ids.tolist() == [[1, 2, 3], [0, 0, 0]] and lengths.tolist() == [3, 0]
    assert dropped == pytest.approx(2 / 6) and captions.item_shape == (3, 4)


def test_caption_draw_takes_one_caption_of_each_video():
    captions = PaddedCaptions.from_sequences([[1], [2], [3], [4], [5]], 6, 2)
    draw = CaptionDraw(captions, torch.tensor([0, 1, 0, 1, 1]), 2)  # video 0: ids 1, 3; video 1: 2, 4, 5
    torch.manual_seed(0)
    seen = {0: set(), 1: set()}
    for _ in range(50):
        ids, _ = draw.take(torch.tensor([0, 1]))
        seen[0].add(int(ids[0, 0]))
        seen[1].add(int(ids[1, 0]))
    assert seen == {0: {1, 3}, 1: {2, 4, 5}} and len(draw) == 2 and draw.item_shape == (2, 6)
    torch.manual_seed(3)
    first = draw.take(torch.tensor([1, 1, 1, 0]))[0]
    torch.manual_seed(3)
    assert torch.equal(first, draw.take(torch.tensor([1, 1, 1, 0]))[0])


# ---------------------------------------------------------------- videos and splits

def test_howto_video_max_pools_then_normalises_each_half():
    frames_2d = np.array([[3.0, 0.0], [0.0, 4.0]])  # max over time: (3, 4) -> (0.6, 0.8)
    vec = howto_video(frames_2d, np.array([0.0, 2.0, 0.0]), "x")
    np.testing.assert_allclose(vec, [0.6, 0.8, 0.0, 1.0, 0.0], rtol=1e-6)


def test_holdout_keeps_each_group_on_one_side():
    groups = [f"v{i // 3}" for i in range(30)]  # 10 videos, 3 items each
    kept, held = holdout(groups, 4, seed=0)
    assert len(held) == 12 and len(kept) == 18
    assert not {groups[i] for i in kept} & {groups[i] for i in held}
    assert np.array_equal(held, holdout(groups, 4, seed=0)[1]) and not np.array_equal(held, holdout(groups, 4, 1)[1])
    with pytest.raises(DataError, match="cannot hold out 10"):
        holdout(groups, 10, seed=0)


def test_pickles_are_read_without_running_code(tmp_path):
    class Evil:
        def __reduce__(self):
            return (os.system, ("echo hacked",))

    (tmp_path / "evil.pkl").write_bytes(pickle.dumps([Evil()]))
    with pytest.raises(DataError, match="not allowed"):
        read_pickle(tmp_path / "evil.pkl")
    (tmp_path / "ok.pkl").write_bytes(pickle.dumps({"2d": {"v": np.ones(2)}, "3d": {"v": np.zeros(1)}}))
    assert read_feature_dict(tmp_path / "ok.pkl")["2d"]["v"].tolist() == [1.0, 1.0]


def _numpy_feature_dict() -> dict:
    rng = np.random.default_rng(0)
    return {"2d": {"v0": rng.random((3, 4)).astype(np.float32), "v1": rng.random(4)},  # float32 frames, float64
            "3d": {"v0": np.arange(2, dtype=np.int64), "v1": np.ones(2, np.float16), "n": np.float32(2.5)}}


@pytest.mark.parametrize("zip_format", [True, False])
def test_torch_saved_numpy_feature_dicts_load_under_weights_only(tmp_path, zip_format):
    written = _numpy_feature_dict()
    path = tmp_path / "feats.pth"
    torch.save(written, path, _use_new_zipfile_serialization=zip_format)
    with pytest.raises(pickle.UnpicklingError):  # what torch alone does with such a file
        torch.load(path, weights_only=True)
    read = read_feature_dict(path)
    for kind in ("2d", "3d"):
        assert read[kind].keys() == written[kind].keys()
        for key, value in written[kind].items():
            assert np.asarray(read[kind][key]).dtype == np.asarray(value).dtype
            np.testing.assert_array_equal(read[kind][key], value)


def test_numpy_1x_names_of_the_array_functions_are_read(tmp_path):
    """A legacy torch file written under numpy 1.x names numpy.core.multiarray._reconstruct."""
    path = tmp_path / "old.pth"
    torch.save(_numpy_feature_dict(), path, _use_new_zipfile_serialization=False)
    raw = path.read_bytes()
    if b"numpy._core.multiarray\n_reconstruct" in raw:  # numpy 2 wrote it: rename as numpy 1.x would
        raw = raw.replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
        path.write_bytes(raw)
    assert b"numpy.core.multiarray\n_reconstruct" in raw
    np.testing.assert_array_equal(read_feature_dict(path)["3d"]["v0"], [0, 1])


def test_a_feature_file_naming_another_global_is_refused(tmp_path):
    import datetime

    path = tmp_path / "other.pth"
    torch.save({"2d": {"v": np.ones(2)}, "3d": {"v": datetime.date(2020, 1, 1)}}, path)
    with pytest.raises(DataError, match=r"holds datetime\.date, which is not read .*could run code"):
        read_feature_dict(path)


# ---------------------------------------------------------------- sources on generated files

def test_msrvtt_layout(tmp_path):
    fx.msrvtt(tmp_path / "m", n_train=12, n_test=6, per_video=3)
    fx.write_word2vec(tmp_path / "m" / "w2v.bin", fx.word_vectors(dim=8))
    data = load("howto_msrvtt", tmp_path, root=str(tmp_path / "m"), val_videos=3, word_vectors="w2v.bin")
    train, val, test = data["train"], data["val"], data["test"]
    assert (len(train.a), len(val.a), len(test.a)) == (9, 3, 6) and train.a.shape[1] == sum(fx.DIMS)
    assert isinstance(train.b, CaptionDraw) and len(val.b) == 9 and val.b_to_a.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert torch.equal(test.b_to_a, torch.arange(6))
    feats = torch.load(tmp_path / "m" / "MSRVTT_JSFUSION_test.pth", weights_only=True)  # per frame: max-pooled
    expected = howto_video(feats["2d"]["video12"].numpy(), feats["3d"]["video12"].numpy(), "x")
    np.testing.assert_allclose(test.a[0].numpy(), expected, rtol=1e-6)
    vectors = data.fixed_weights["b"]["embed.weight"]
    assert vectors.shape == (data.info["vocab_size"], 8) and not vectors[0].any()
    assert data.info["word_vectors"].endswith("w2v.bin") and data.info["dropped_words"]["test"] >= 0


def test_youcook2_layout_holds_out_whole_videos(tmp_path):
    fx.youcook2(tmp_path / "y", n_videos=6, clips=3, n_test=5)
    data = load("howto_youcook2", tmp_path, root=str(tmp_path / "y"), val_videos=2)
    assert [len(data[s].a) for s in ("train", "val", "test")] == [12, 6, 5]
    assert data.fixed_weights == {} and data.info["text"].startswith("learned")
    assert Path(data.info["vocab_file"]).exists()


def test_lsmdc_layout_reads_the_sentence_field(tmp_path):
    written = fx.lsmdc(tmp_path / "l", n_train=14, n_test=5)
    fx.write_word2vec(tmp_path / "l" / "w2v.txt", fx.word_vectors(dim=4), binary=False)
    data = load("howto_lsmdc", tmp_path, root=str(tmp_path / "l"), val_clips=3, word_vectors="w2v.txt")
    assert [len(data[s].a) for s in ("train", "val", "test")] == [11, 3, 5]
    words = [w for w in split_words(written["test_captions"][0]) if w in fx.KNOWN]  # field 5, unknown dropped
    ids, length = data["test"].b.take(torch.tensor([0]))
    table = data.fixed_weights["b"]["embed.weight"]
    expected = np.stack([fx.word_vectors(dim=4)[w] for w in words])
    assert int(length) == len(words)
    np.testing.assert_allclose(table[ids[0, :len(words)]].numpy(), expected, atol=1e-5)


@pytest.mark.parametrize("pool", ["mean", "max"])
def test_video_npy_layout(tmp_path, pool):
    written = fx.video_npy(tmp_path / "v", n_videos=20, frames=5, dim=8, per_video=2)
    data = load("video_npy", tmp_path, root=str(tmp_path / "v"), split_sizes=[12, 4, 4], pool=pool)
    assert [len(data[s].a) for s in ("train", "val", "test")] == [12, 4, 4]
    assert [len(data[s].b) for s in ("val", "test")] == [8, 8]  # all captions of val/test videos
    order = np.random.default_rng(0).permutation(20)
    frames = written["arrays"][written["ids"][order[12]]]
    pooled = frames.mean(0) if pool == "mean" else frames.max(0)
    np.testing.assert_allclose(data["val"].a[0].numpy(), pooled / np.linalg.norm(pooled), rtol=1e-5)


@pytest.mark.skipif(not SHARED.is_dir(),
                    reason=f"real MSR-VTT sample not present at {SHARED} (a clone elsewhere has no ../shared)")
def test_real_msrvtt_vgg128_sample_loads(tmp_path):
    data = load("video_npy", tmp_path, root=str(SHARED), split_sizes=[800, 100, 100])
    assert [len(data[s].a) for s in ("train", "val", "test")] == [800, 100, 100] and data["train"].a.shape[1] == 128
    assert data.info["captions"] == [800, 100, 100]


# ---------------------------------------------------------------- malformed files: one clear error

def _break(kind: str, root: Path) -> None:
    if kind == "missing":
        (root / "MSRVTT_JSFUSION_test.pth").unlink()
    elif kind == "json":
        (root / "MSRVTT_data.json").write_text('{"sentence": []}')
    elif kind == "csv column":
        (root / "MSRVTT_JSFUSION_test.csv").write_text("video,text\nvideo12,a man\n")
    elif kind == "features":
        torch.save({"2d": {}}, root / "MSRVTT_train.pth")
    elif kind == "video missing":
        torch.save({"2d": {"video0": torch.ones(6)}, "3d": {"video0": torch.ones(4)}}, root / "MSRVTT_train.pth")


@pytest.mark.parametrize("kind, message", [
    ("missing", "(?s)1 file\\(s\\) missing.*MSRVTT_JSFUSION_test.pth  \\(missing\\).*metadata_eval.zip"),
    ("json", "is not MSR-VTT's annotation"),
    ("csv column", "has no column"),
    ("features", "must map '2d' and '3d'"),
    ("video missing", "has no 2d/3d features for"),
])
def test_msrvtt_malformed_files(tmp_path, kind, message):
    fx.msrvtt(tmp_path / "m")
    _break(kind, tmp_path / "m")
    with pytest.raises(DataError, match=message):
        load("howto_msrvtt", tmp_path, root=str(tmp_path / "m"), val_videos=3)


def test_missing_word_vectors_are_listed_before_reading(tmp_path):
    fx.youcook2(tmp_path / "y")
    with pytest.raises(DataError, match="GoogleNews-vectors-negative300.bin  \\(missing\\)"):
        load("howto_youcook2", tmp_path, root=str(tmp_path / "y"), val_videos=2,
             word_vectors="GoogleNews-vectors-negative300.bin")


@pytest.mark.parametrize("records, message", [
    ([{"2d": np.ones(2), "caption": "x", "id": "a_1"}], "record 0 must hold"),
    ({"not": "a list"}, "non-empty list"),
])
def test_youcook2_malformed_records(tmp_path, records, message):
    fx.youcook2(tmp_path / "y")
    (tmp_path / "y" / "youcook_val.pkl").write_bytes(pickle.dumps(records))
    with pytest.raises(DataError, match=message):
        load("howto_youcook2", tmp_path, root=str(tmp_path / "y"), val_videos=2)


def test_lsmdc_short_row(tmp_path):
    fx.lsmdc(tmp_path / "l")
    (tmp_path / "l" / "LSMDC16_challenge_1000_publictect.csv").write_text("clip\t0\t1\tsentence\n")
    with pytest.raises(DataError, match=":1: expected at least 6 tab-separated fields"):
        load("howto_lsmdc", tmp_path, root=str(tmp_path / "l"), val_clips=3)


@pytest.mark.parametrize("kind, message", [
    ("no bar", "caption.txt:3: expected 'video_id|caption'"),
    ("npy missing", "no .npy for 1 of the 20"),
    ("npy shape", "expected a T x d number array"),
    ("too few", "need 25 videos"),
])
def test_video_npy_malformed(tmp_path, kind, message):
    root = tmp_path / "v"
    fx.video_npy(root)
    sizes = [12, 4, 4]
    if kind == "no bar":
        lines = (root / "caption.txt").read_text().splitlines()
        lines[2] = "video2 a caption without a separator"
        (root / "caption.txt").write_text("\n".join(lines))
    elif kind == "npy missing":
        (root / "features" / "video5.npy").unlink()
    elif kind == "npy shape":
        np.save(root / "features" / "video0.npy", np.zeros((2, 2, 2), np.float32))
        sizes = [18, 1, 1]
    else:
        sizes = [20, 4, 1]
    with pytest.raises(DataError, match=message):
        load("video_npy", tmp_path, root=str(root), split_sizes=sizes)


def test_learned_vocabulary_comes_from_the_training_captions_only(tmp_path):
    root = tmp_path / "v"
    fx.video_npy(root, n_videos=6, per_video=1)
    order = np.random.default_rng(0).permutation(6)  # the source's split: 4 train, 1 val, 1 test videos
    captions = {f"video{order[i]}": "a man cooks" for i in range(4)}
    captions.update({f"video{order[4]}": "a man sings", f"video{order[5]}": "a zebra cooks loudly"})
    (root / "caption.txt").write_text("".join(f"video{i}|{captions[f'video{i}']}\n" for i in range(6)))
    data = load("video_npy", tmp_path, root=str(root), split_sizes=[4, 1, 1])
    words = json.loads(Path(data.info["vocab_file"]).read_text())["words"]
    assert words == ["<pad>", "a", "man", "cooks"] and data.fixed_weights == {}
    ids, lengths = data["test"].b.take(torch.tensor([0]))
    assert ids[0, :2].tolist() == [1, 3] and int(lengths) == 2  # 'zebra' and 'loudly' dropped
    assert data.info["dropped_words"] == {"train": 0.0, "val": pytest.approx(1 / 3, abs=1e-4),
                                          "test": pytest.approx(0.5, abs=1e-4)}
