"""Numerical guards: Sinkhorn and SwAMP's targets stay finite and accurate over a grid of temperatures,
entropic strengths and logit scales in float64, float32 and bfloat16 (CPU; CUDA where present), and
metrics on degenerate embeddings (all equal, all zero, NaN rows) count ties against the method and
never score NaN as a hit.

The grid: tau in {0.005, 0.01, 0.05, 0.1, 1} x eta in {1, 5, 20, 50, 100} x scale in {1, 10, 100, 1000},
logits = scale * cosine / tau (|logits| up to 2e5), Sinkhorn on log p = log_softmax(logits), N = 256
items, K = 64 classes, 3 iterations (the paper's). Tolerances per dtype (TOL): every row of the
targets sums to 1, and every entry equals a float64 reference (plain log-domain Sinkhorn without
clamping, on the same rounded inputs) within TOL. ``python -m tests.test_numerics`` prints the
worst errors measured.
"""
from __future__ import annotations

import itertools
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from baselines.swamp import SwAMP, SwAMPParams, swamp_loss
from harness.config.spec import MetricSpec
from harness.data.paired import Split
from harness.method import Method
from harness.ops.metrics import image_text_metrics
from harness.ops.ot import sinkhorn
from harness.run import evaluate as ev

TAUS = (0.005, 0.01, 0.05, 0.1, 1.0)
ETAS = (1.0, 5.0, 20.0, 50.0, 100.0)
SCALES = (1.0, 10.0, 100.0, 1000.0)
TOL = {torch.float64: 1e-10, torch.float32: 1e-4, torch.bfloat16: 1e-2}
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"))]


def reference_sinkhorn(logp: torch.Tensor, eta: float, n_iters: int = 3) -> torch.Tensor:
    """The textbook log-domain iteration in float64: no clamping, no in-place tricks."""
    m = logp.double() * eta
    n, k = m.shape
    f, g = m.new_zeros(n, 1), m.new_zeros(1, k)
    for _ in range(n_iters):
        g = -(torch.logsumexp(m + f, 0, keepdim=True) + math.log(k))
        f = -(torch.logsumexp(m + g, 1, keepdim=True) + math.log(n))
    return (m + f + g + math.log(n)).exp()


def cosines(n: int = 256, k: int = 64, seed: int = 0) -> torch.Tensor:
    """(n, k) cosines of random unit vectors to random unit prototypes, float64."""
    g = torch.Generator().manual_seed(seed)
    return F.normalize(torch.randn(n, 16, generator=g, dtype=torch.float64), dim=1) @ \
        F.normalize(torch.randn(k, 16, generator=g, dtype=torch.float64), dim=1).T


def grid_errors(dtype: torch.dtype, device: str = "cpu") -> dict[str, float]:
    """Worst row-sum error, entry error against the reference, and count of non-finite or negative
    targets over the whole grid, for inputs of ``dtype`` on ``device``."""
    cos = cosines()
    worst = {"row": 0.0, "entry": 0.0, "bad": 0}
    for tau, eta, scale in itertools.product(TAUS, ETAS, SCALES):
        logp = torch.log_softmax(cos * scale / tau, dim=1).to(dtype)  # the caller's rounding, kept in the reference
        q = sinkhorn(logp.to(device), eta, 3).cpu()
        assert q.dtype == dtype
        worst["bad"] += int((~torch.isfinite(q)).sum() + (q < 0).sum())
        q = q.double()
        worst["row"] = max(worst["row"], float((q.sum(1) - 1).abs().max()))
        worst["entry"] = max(worst["entry"], float((q - reference_sinkhorn(logp, eta)).abs().max()))
    return worst


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
def test_sinkhorn_over_the_grid_is_finite_and_within_tolerance(dtype, device):
    worst = grid_errors(dtype, device)
    assert worst["bad"] == 0
    assert worst["row"] <= TOL[dtype] and worst["entry"] <= TOL[dtype], worst


def test_class_marginals_converge_where_the_kernel_allows():
    """The class marginal (columns) reaches 1/K as fast as Sinkhorn converges: within 1e-6 after 100
    iterations for eta * scale / tau <= 10, while 3 iterations leave it far off for sharp kernels,
    exactly as in the float64 reference (the algorithm, not rounding)."""
    cos = cosines()
    n, k = cos.shape
    for tau, eta, scale in itertools.product(TAUS, ETAS, SCALES):
        logp = torch.log_softmax(cos * scale / tau, dim=1)
        if eta * scale / tau <= 10:
            q = sinkhorn(logp, eta, 100)
            assert float((q.sum(0) * k / n - 1).abs().max()) < 1e-6
    sharp = torch.log_softmax(cos * 1.0 / 0.01, dim=1)  # the paper's tau and eta
    three = sinkhorn(sharp, 20.0, 3)
    torch.testing.assert_close(three.sum(0), reference_sinkhorn(sharp, 20.0).sum(0), atol=1e-9, rtol=0)


class Fixed(nn.Module):
    """An encoder that returns its input (embeddings chosen by the test)."""

    def __init__(self, dim: int):
        super().__init__()
        self.out_dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(TOL), ids=str)
def test_swamp_targets_and_loss_are_finite_over_the_grid(dtype, device):
    g = torch.Generator().manual_seed(0)
    emb_a, emb_b = (F.normalize(torch.randn(32, 8, generator=g), dim=1) for _ in range(2))
    for tau, eta, scale in itertools.product(TAUS, ETAS, SCALES):
        torch.manual_seed(0)
        method = SwAMP({"a": Fixed(8), "b": Fixed(8)}, SwAMPParams(K=16, queue=64, tau=tau, eta=eta))
        method = method.to(device=device, dtype=dtype)
        a, b = (e.to(device=device, dtype=dtype) * scale for e in (emb_a, emb_b))  # logits up to scale / tau
        method.queue.push(a.flip(0), b.flip(0))
        q_a, q_b = method.targets(a, b)
        loss = swamp_loss(method.log_probs(a), method.log_probs(b), q_a, q_b)
        assert torch.isfinite(q_a).all() and torch.isfinite(q_b).all() and torch.isfinite(loss), (tau, eta, scale)
        assert float((q_a.double().sum(1) - 1).abs().max()) <= TOL[dtype], (tau, eta, scale)


# ---------------------------------------------------------------- metrics on degenerate embeddings

def _evaluate(emb_a: torch.Tensor, emb_b: torch.Tensor, labels: torch.Tensor, folds: tuple[int, ...] = (1,)):
    method = Method({"a": Fixed(emb_a.shape[1]), "b": Fixed(emb_b.shape[1])}, None)
    split = Split(emb_a, emb_b, labels_a=labels, labels_b=labels)
    spec = MetricSpec(directions=("a2b", "b2a"), relevance=("pair", "class"), ks=(1, 5), folds=folds, map=True,
                      map_at=(5,), precision_at=(1, 5))
    return ev.evaluate(method, split, spec, torch.device("cpu"), 7)


@pytest.mark.parametrize("kind", ["all equal", "all zero", "all NaN"])
def test_a_degenerate_embedding_ranks_every_query_last(kind):
    n = 20
    value = {"all equal": 0.3, "all zero": 0.0, "all NaN": math.nan}[kind]
    emb = torch.full((n, 4), value)
    labels = torch.arange(n) % 4  # 5 items a class
    metrics = _evaluate(emb, emb.clone(), labels, folds=(1, 2))
    for direction in ("a2b", "b2a"):
        assert metrics[f"{direction}/R@1"] == 0 and metrics[f"{direction}/R@5"] == 0
        assert metrics[f"{direction}/MedR"] == n  # every one of the n - 1 ties counts against it
        assert metrics[f"{direction}/class_R@1"] == 0 and metrics[f"{direction}/class_MedR"] == n - 5 + 1
        assert metrics[f"2folds/{direction}/MedR"] == n // 2
        for stat in ("mAP@5", "P@1", "P@5", "class_mAP@5", "class_P@1", "class_P@5"):  # ties broken against it
            assert metrics[f"{direction}/{stat}"] == 0
        # whole-gallery AP pools tied scores (as scikit-learn): the share of relevant items, never more
        assert metrics[f"{direction}/mAP"] == pytest.approx(100 / n) and metrics[f"{direction}/class_mAP"] == 25


def test_nan_rows_never_hit_and_leave_the_other_queries_alone():
    n = 20
    emb = F.normalize(torch.randn(n, 8, generator=torch.Generator().manual_seed(0)), dim=1)
    broken = emb.clone()
    broken[::2] = math.nan  # every other item of modality a has a NaN embedding
    metrics = _evaluate(broken, emb.clone(), torch.arange(n))
    assert metrics["a2b/R@1"] == 50.0  # the finite half finds its pair first; NaN queries rank last
    assert metrics["b2a/R@1"] == 50.0  # a NaN gallery item is never a hit, never a rival
    ranks: dict[str, torch.Tensor] = {}
    method = Method({"a": Fixed(8), "b": Fixed(8)}, None)
    split = Split(broken, emb.clone())
    folds = ev.make_folds(split, 1)
    ev.rank_folds(ev.score_folds(method, broken, emb, folds)[0], folds, split, MetricSpec(("a2b", "b2a")), ranks)
    assert ranks["a2b/pair"][::2].tolist() == [n] * (n // 2) and ranks["a2b/pair"][1::2].tolist() == [1] * (n // 2)
    assert ranks["b2a/pair"][::2].tolist() == [n] * (n // 2) and ranks["b2a/pair"][1::2].tolist() == [1] * (n // 2)


def test_image_text_protocol_on_a_collapsed_embedding():
    metrics = image_text_metrics(torch.ones(20, 100))  # 20 images, 5 captions each, every score tied
    assert metrics["i2t/R@10"] == 0 and metrics["t2i/R@10"] == 0 and metrics["rsum"] == 0
    assert metrics["i2t/MedR"] == 100 - 5 + 1 and metrics["t2i/MedR"] == 20
    assert image_text_metrics(torch.full((20, 100), math.nan))["rsum"] == 0


if __name__ == "__main__":  # python -m tests.test_numerics [cpu|cuda]
    import sys

    where = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    for dt in TOL:
        w = grid_errors(dt, where)
        print(f"{where} {str(dt):15} non-finite or negative: {w['bad']}  worst row-sum error: {w['row']:.1e}  "
              f"worst entry error vs float64 reference: {w['entry']:.1e}  (tolerance {TOL[dt]:.0e})")
