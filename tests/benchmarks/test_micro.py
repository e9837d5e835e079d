"""Kernel micro-benchmarks: Sinkhorn, rank_metrics, SCAN's scorer, one training step per method.

Opt in with ``python -m pytest tests/benchmarks -m benchmark`` (docs/benchmarks.md); each
result carries a correctness or memory figure in ``extra_info`` next to its timing.
"""
from __future__ import annotations

import pytest
import torch

from benchmarks import common
from benchmarks.kernels import ETA, swamp_logits
from harness.ops.metrics import pair_relevance, rank_metrics
from harness.ops.ot import sinkhorn
from harness.run.profiling import CpuPeakRSS, MiB


@pytest.mark.parametrize("n, k", [(1408, 1000), (2048, 500)])
def test_sinkhorn(benchmark, n: int, k: int) -> None:
    logits = swamp_logits(n, k, torch.Generator().manual_seed(common.SEED))
    q = benchmark(sinkhorn, logits, ETA, 3)
    benchmark.extra_info["max_row_sum_error"] = float((q.sum(1) - 1).abs().max())
    assert q.shape == (n, k) and torch.isfinite(q).all()


def test_rank_metrics(benchmark) -> None:
    generator = torch.Generator().manual_seed(common.SEED)
    relevant = pair_relevance(torch.arange(5000) // 5, 1000)  # (1000, 5000), five captions per image
    sims = torch.randn(1000, 5000, generator=generator) + 3.0 * relevant  # relevant items score higher
    metrics = benchmark(rank_metrics, sims, relevant, (1, 5, 10))
    benchmark.extra_info.update({k: metrics[k] for k in ("R@1", "R@5", "R@10")})
    assert 0.0 < metrics["R@1"] <= metrics["R@5"] <= metrics["R@10"] <= 100.0


@pytest.mark.parametrize("method", common.benchmark_methods())
def test_train_step(benchmark, method: str) -> None:
    task = common.benchmark_task()
    try:
        step = common.train_step(task, method, common.load_data(task), torch.device("cpu"))
    except NotImplementedError as e:  # CCA (closed form), identity (nothing to train)
        pytest.skip(str(e))
    with CpuPeakRSS() as rss:
        step()
    benchmark.extra_info["peak_rss_mib"] = rss.peak / MiB
    logs = benchmark(step)
    assert torch.isfinite(logs["loss"])


@pytest.mark.parametrize("variant", ["t2i_avg", "i2t_lse"])
def test_scan_scorer(benchmark, variant: str) -> None:
    pytest.importorskip("baselines.scan", reason="no SCAN scorer in this checkout")
    from benchmarks.scorer import ScanScorer

    scorer = ScanScorer()
    scorer.setup(variant)
    sims = benchmark(scorer.score)
    benchmark.extra_info["pairs"] = sims.numel()
    assert sims.shape == (16, 80) and torch.isfinite(sims).all()
