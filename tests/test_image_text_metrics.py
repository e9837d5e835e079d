"""image_text_metrics against SCAN-style sorting loops; folds; fold averages and rsum."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from harness.config.spec import MetricSpec
from harness.data.paired import Split
from harness.ops.metrics import image_text_metrics, mean_over_folds
from harness.run import evaluate as ev


def naive_image_text(sims: np.ndarray, per_image: int = 5) -> dict[str, float]:
    """SCAN's i2t/t2i evaluation written as loops over sorted score rows (0-based ranks)."""
    n_images, n_captions = sims.shape
    i2t = []
    for i in range(n_images):
        order = list(np.argsort(-sims[i], kind="stable"))
        i2t.append(min(order.index(j) for j in range(per_image * i, per_image * (i + 1))))
    t2i = [list(np.argsort(-sims[:, j], kind="stable")).index(j // per_image) for j in range(n_captions)]
    out = {}
    for name, ranks in (("i2t", np.array(i2t)), ("t2i", np.array(t2i))):
        for k in (1, 5, 10):
            out[f"{name}/R@{k}"] = 100.0 * float(np.mean(ranks < k))
        out[f"{name}/MedR"] = math.floor(np.median(ranks)) + 1
        out[f"{name}/MeanR"] = float(ranks.mean()) + 1
    out["rsum"] = sum(out[f"{d}/R@{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10))
    return out


@pytest.mark.parametrize("seed", range(3))
def test_matches_scan_style_loop(seed):
    g = torch.Generator().manual_seed(seed)
    n = 24
    sims = torch.randn(n, 5 * n, generator=g)
    sims[torch.arange(n).repeat_interleave(5), torch.arange(5 * n)] += 1.5  # some signal: ranks spread out
    fast = image_text_metrics(sims)
    slow = naive_image_text(sims.numpy())
    assert fast.keys() == slow.keys()
    for key in fast:
        assert fast[key] == pytest.approx(slow[key]), key


def test_known_answer_and_one_to_one_layout():
    sims = torch.tensor([[0.9, 0.2], [0.1, 0.8]])
    m = image_text_metrics(sims, captions_per_image=1, ks=(1,))
    assert m == {"i2t/R@1": 100.0, "i2t/MedR": 1.0, "i2t/MeanR": 1.0,
                 "t2i/R@1": 100.0, "t2i/MedR": 1.0, "t2i/MeanR": 1.0, "rsum": 200.0}


def test_collapsed_scores_rank_last():
    m = image_text_metrics(torch.zeros(4, 20))
    assert m["i2t/R@1"] == 0.0 and m["t2i/R@1"] == 0.0
    assert m["rsum"] == 200.0  # only t2i R@5 and R@10, trivially 100 with 4 images
    assert m["i2t/MedR"] == 16.0  # 15 wrong captions tie with the best true one


def test_shape_error_names_the_layout():
    with pytest.raises(ValueError, match=r"must be \(N, 5·N\)"):
        image_text_metrics(torch.zeros(3, 14))


def five_per_image_split(n_images: int) -> Split:
    return Split(torch.zeros(n_images, 1), torch.zeros(5 * n_images, 1), b_to_a=torch.arange(5 * n_images) // 5)


def test_folds_are_consecutive_with_their_captions():
    folds = ev.make_folds(five_per_image_split(10), 5)
    assert [a.tolist() for a, _ in folds] == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]
    assert folds[1][1].tolist() == list(range(10, 20))
    with pytest.raises(ValueError, match="cannot be cut into 3 equal folds"):
        ev.make_folds(five_per_image_split(10), 3)


def test_fold_protocol_averages_blocks_and_recomputes_rsum():
    g = torch.Generator().manual_seed(0)
    split = five_per_image_split(10)
    sims = torch.randn(10, 50, generator=g)
    metrics = MetricSpec(directions=("i2t", "t2i"), rsum=True, folds=(1, 5))
    folds = ev.make_folds(split, 5)
    blocks = [sims[a][:, b] for a, b in folds]
    got = ev.rank_folds(blocks, folds, split, metrics)
    per_fold = [image_text_metrics(block) for block in blocks]
    for key in per_fold[0]:
        assert got[f"5folds/{key}"] == pytest.approx(sum(f[key] for f in per_fold) / 5), key
    assert set(got) == {n for n in metrics.names() if n.startswith("5folds/")}
    whole = ev.rank_folds([sims], ev.make_folds(split, 1), split, metrics)
    assert whole == image_text_metrics(sims)


def test_mean_over_folds_recomputes_rsum_from_means():
    folds = [{"i2t/R@1": 10.0, "t2i/R@1": 20.0, "rsum": 30.0, "i2t/MedR": 3.0},
             {"i2t/R@1": 30.0, "t2i/R@1": 40.0, "rsum": -1.0, "i2t/MedR": 6.0}]  # a wrong stored rsum is ignored
    mean = mean_over_folds(folds, ("i2t", "t2i"), ks=(1,))
    assert mean == {"i2t/R@1": 20.0, "t2i/R@1": 30.0, "rsum": 50.0, "i2t/MedR": 4.5}
