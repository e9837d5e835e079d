"""SCAN's original procedure (``scorer: original``): known answers of its per-caption loop, the same scores as
the vectorised scorer, the time budget and its extrapolation, the method parameters."""
from __future__ import annotations

import itertools
import json

import pytest
import torch
import torch.nn.functional as F

from baselines import scan_original as original
from baselines.scan import SCANi2tAVG, SCANParams, SCANt2iLSE, xattn_similarity
from harness.cli import main
from harness.config import params as P
from harness.errors import ConfigError
from harness.method import Method
from harness.run import evaluate as ev
from tests.test_scan import SETTINGS, random_inputs


def test_one_region_images_score_the_mean_word_cosine():
    """t2i with a single region: every word attends to it, so S = mean_l cos(e_l, v)."""
    g = torch.Generator().manual_seed(0)
    images = torch.randn(3, 1, 4, generator=g, dtype=torch.float64)  # (n_i, R = 1, D)
    captions = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    lengths = [5, 2]
    sims = original.per_caption_similarity(images, captions, lengths, direction="t2i", agg="avg",
                                           lambda_softmax=9.0, lambda_lse=6.0)
    for i, j in itertools.product(range(3), range(2)):
        expected = F.cosine_similarity(captions[j, :lengths[j]], images[i, 0][None], dim=1).mean()
        assert float(sims[i, j]) == pytest.approx(float(expected), abs=1e-12)


def test_one_word_captions_score_the_lse_of_region_cosines():
    """i2t with one-word captions: every region attends to the word; LSE pools cos(v_r, e) over regions."""
    g = torch.Generator().manual_seed(1)
    images = torch.randn(2, 4, 3, generator=g, dtype=torch.float64)
    captions = torch.randn(3, 2, 3, generator=g, dtype=torch.float64)  # the second slot is padding
    sims = original.per_caption_similarity(images, captions, [1, 1, 1], direction="i2t", agg="lse",
                                           lambda_softmax=4.0, lambda_lse=5.0)
    for i, j in itertools.product(range(2), range(3)):
        cos = F.cosine_similarity(images[i], captions[j, 0][None], dim=1)  # (R,)
        assert float(sims[i, j]) == pytest.approx(float(torch.log(torch.exp(5.0 * cos).sum()) / 5.0), abs=1e-12)


@pytest.mark.parametrize("direction, agg, lambda_softmax, lambda_lse", SETTINGS)
def test_sharded_evaluation_gives_the_vectorised_scores(direction, agg, lambda_softmax, lambda_lse):
    images, captions, lengths = random_inputs(11, n_i=7, n_c=13, dtype=torch.float64)
    kw = dict(direction=direction, agg=agg, lambda_softmax=lambda_softmax, lambda_lse=lambda_lse)
    sharded, fraction = original.sharded_similarity(images, captions, lengths, shard=3, **kw)  # 3 × 5 shard pairs
    assert fraction == 1.0 and sharded.dtype == torch.float64 and sharded.shape == (7, 13)
    torch.testing.assert_close(sharded, xattn_similarity(images, captions, lengths, **kw), atol=1e-6, rtol=0)
    training = original.per_caption_similarity(images, captions, lengths.tolist(), **kw)
    torch.testing.assert_close(training, sharded, atol=1e-12, rtol=0)


def test_host_arrays_are_float64_and_cut_to_the_longest_caption():
    images, captions, lengths = random_inputs(12, max_len=9)
    lengths = lengths.clamp_max(6)
    host_images, host_captions, host_lengths = original.host_arrays(images, captions, lengths)
    assert host_images.dtype == host_captions.dtype == torch.float64
    assert host_captions.shape == (13, 6, 16) and host_lengths == lengths.tolist()
    assert host_images.data_ptr() != images.data_ptr()  # a copy, as SCAN's numpy arrays are


class _Clock:
    """perf_counter stand-in that advances by one second per reading."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_deadline_stops_after_whole_shard_pairs(monkeypatch):
    monkeypatch.setattr(original.time, "perf_counter", _Clock())
    images, captions, lengths = random_inputs(13, n_i=7, n_c=13, dtype=torch.float64)
    kw = dict(direction="i2t", agg="avg", lambda_softmax=4.0, lambda_lse=5.0)
    full, _ = original.sharded_similarity(images, captions, lengths, shard=3, **kw)
    # The first shard pair runs without reading the clock; readings 1 and 2 come before the deadline 2.5,
    # so two more pairs run (images 0-2 against captions 0-8); the third reading (3.0) stops the loop.
    part, fraction = original.sharded_similarity(images, captions, lengths, shard=3, deadline=2.5, **kw)
    assert fraction == pytest.approx(27 / 91)
    torch.testing.assert_close(part[:3, :9], full[:3, :9])
    assert part[:3, 9:].isnan().all() and part[3:].isnan().all()


class _Budgeted(Method):
    """Scores 1s, a fixed fraction at a time, like a scorer a budget stops part-way."""

    def __init__(self, fractions: list[float]):
        super().__init__({}, None)
        self.fractions = fractions

    def score_within(self, emb_a, emb_b, deadline):
        fraction = self.fractions.pop(0)
        sims = torch.ones(len(emb_a), len(emb_b))
        sims.view(-1)[int(fraction * sims.numel()):] = torch.nan
        return sims, fraction


def test_score_folds_stops_at_the_first_partial_fold():
    split_a, split_b = torch.zeros(10, 1), torch.zeros(50, 1)
    folds = [(torch.arange(lo, lo + 2), torch.arange(5 * lo, 5 * lo + 10)) for lo in range(0, 10, 2)]
    blocks, done = ev.score_folds(_Budgeted([1.0, 1.0, 0.5, 1.0, 1.0]), split_a, split_b, folds, budget_s=10.0)
    assert len(blocks) == 3 and done == pytest.approx(2.5 / 5)
    blocks, done = ev.score_folds(_Budgeted([1.0] * 5), split_a, split_b, folds)
    assert len(blocks) == 5 and done == 1.0


@pytest.mark.parametrize("cls", [SCANi2tAVG, SCANt2iLSE])
def test_original_and_vectorised_methods_agree_in_training_and_test(cls):
    images, captions, lengths = random_inputs(14, n_i=5, n_c=5, dtype=torch.float64)
    identity = lambda: {"a": torch.nn.Identity(), "b": torch.nn.Identity()}  # noqa: E731
    kw = dict(lambda_softmax=4.0, lambda_lse=5.0)
    fast, slow = cls(identity(), SCANParams(**kw)), cls(identity(), SCANParams(scorer="original", **kw))
    grads = []
    for method in (fast, slow):
        x = images.clone().requires_grad_(True)
        loss, _ = method.loss(x, (captions, lengths))
        loss.backward()
        grads.append((float(loss.detach()), x.grad))
    assert grads[0][0] == pytest.approx(grads[1][0], abs=1e-9)
    torch.testing.assert_close(grads[0][1], grads[1][1], atol=1e-8, rtol=1e-6)
    sims = slow.score(images, (captions, lengths))
    assert sims.dtype == torch.float64
    torch.testing.assert_close(sims, fast.score(images, (captions, lengths)), atol=1e-6, rtol=0)
    assert fast.test_time_budget_s is None and cls(identity(), SCANParams(scorer="original", time_budget_s=5.0,
                                                                          **kw)).test_time_budget_s == 5.0


@pytest.mark.parametrize("body, message", [
    ({"scorer": "loop"}, "unknown scorer 'loop'.*valid: original, vectorised"),
    ({"time_budget_s": 60}, "time_budget_s limits the test scoring of scorer: original only"),
    ({"scorer": "original", "time_budget_s": 0}, "time_budget_s must be > 0"),
])
def test_bad_scorer_settings(body, message):
    with pytest.raises(ConfigError, match=message):
        P.parse(SCANParams, body, "methods.scan")


def test_a_budgeted_run_records_extrapolated_times_and_no_accuracy(tiny_image_text_task, tmp_path, monkeypatch):
    monkeypatch.setattr(original, "SHARD", 4)  # test split: 10 images × 50 captions = 3 × 13 shard pairs
    out = tmp_path / "out"
    rc = main(["run", str(tiny_image_text_task), "--methods", "scan", "--set", "scan.scorer=original",
               "--set", "scan.time_budget_s=1e-9", "--epochs", "1", "--device", "cpu", "--out", str(out),
               "--no-progress"])
    assert rc == 0
    folder = out / "tiny_image_text" / "scan@scorer=original,time_budget_s=1e-09,train.epochs=1"
    result = json.loads((folder / "seed0.json").read_text())
    assert result["metrics"] == {} and set(result["metrics_skipped"]) == {"test", "test@5folds"}
    extra = result["profile"]["extrapolated"]
    assert extra[""]["fraction_scored"] == pytest.approx(16 / 500)  # one shard pair of 4 × 4
    assert extra["@5folds"]["fraction_scored"] == pytest.approx(8 / 100)  # one pair of fold 1 (2 × 4 of 2 × 10)
    timing = result["profile"]["timing"]
    assert extra[""]["score_s"] == pytest.approx(timing["test_score"]["median_s"] * 500 / 16)
    assert extra[""]["total_s"] == pytest.approx(timing["test_encode"]["median_s"] + extra[""]["score_s"])
    assert "test_rank" not in timing and result["val_at_best"]  # validation is never budgeted
    table = (out / "tiny_image_text" / "timing.md").read_text()
    assert "(3.2% scored)" in table and "(8% scored)" in table and "≈: extrapolated" in table
    accuracy = (out / "tiny_image_text" / "accuracy.md").read_text()
    assert "(no accuracy: time budget)" in accuracy


class _Counting(Method):
    """Identity encoders that count the items each modality encodes and the batches of the pair pass's loss."""

    def __init__(self) -> None:
        super().__init__({}, None)
        self.encoded = {"a": 0, "b": 0}
        self.loss_batches: list[int] = []

    @property
    def times_pair_pass(self) -> bool:
        return True

    def encode(self, modality, x):
        self.encoded[modality] += len(x)
        return x

    def embedded_loss(self, emb_a, emb_b):
        assert len(emb_a) == len(emb_b)
        self.loss_batches.append(len(emb_a))
        return (emb_a * emb_b).sum()


def test_pair_pass_encodes_an_image_once_per_caption_and_takes_the_loss_of_every_batch():
    from harness.data.paired import Split
    split = Split(a=torch.randn(4, 3), b=torch.randn(20, 3), b_to_a=torch.arange(20) // 5)
    method, times = _Counting(), {}

    class Timer:
        def __init__(self, key):
            self.key = key

        def __enter__(self):
            times[self.key] = times.get(self.key, 0) + 1

        def __exit__(self, *exc):
            return False

    ev.pair_pass(method, split, torch.device("cpu"), 8, Timer, "@2folds")
    assert method.encoded == {"a": 20, "b": 20}  # 4 images × 5 captions: each image five times
    assert method.loss_batches == [8, 8, 4]
    assert times == {"test_pair_encode@2folds": 1, "test_loss@2folds": 1}


def test_scan_original_times_its_released_evaluation_beside_the_protocol(tiny_image_text_task, tmp_path):
    out = tmp_path / "out"
    rc = main(["run", str(tiny_image_text_task), "--methods", "scan", "--sweep", "scan.scorer=vectorised,original",
               "--epochs", "1", "--device", "cpu", "--out", str(out), "--no-progress"])
    assert rc == 0
    task = out / "tiny_image_text"
    released = json.loads((task / "scan@scorer=original,train.epochs=1" / "seed0.json").read_text())
    for tag in ("", "@5folds"):
        timing = released["profile"]["timing"]
        assert {f"test_pair_encode{tag}", f"test_loss{tag}"} <= set(timing)
        parts = sum(timing[f"test_{p}{tag}"]["median_s"] for p in ("encode", "score", "rank"))
        assert timing[f"test_total{tag}"]["median_s"] >= parts  # the protocol's own figure excludes the pass
    vectorised = json.loads((task / "scan@train.epochs=1" / "seed0.json").read_text())
    assert not any(k.startswith(("test_loss", "test_pair_encode")) for k in vectorised["profile"]["timing"])
    table = (task / "timing.md").read_text()
    assert "as released: test s" in table and "pair encode s" in table and "loss s" in table
    row = next(line for line in table.splitlines() if line.startswith("| scan@scorer=original") and "whole" in line)
    cells = [c.strip() for c in row.strip("|").split("|")]
    t = released["profile"]["timing"]
    expected = sum(t[k]["median_s"] for k in ("test_pair_encode", "test_loss", "test_score", "test_rank"))
    assert float(cells[11]) == pytest.approx(expected, abs=1e-3)
    vec_row = next(line for line in table.splitlines() if line.startswith("| scan@train.epochs=1 ") and "whole" in line)
    assert [c.strip() for c in vec_row.strip("|").split("|")][11:14] == ["–", "–", "–"]
