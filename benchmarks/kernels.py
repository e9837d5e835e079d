"""The kernels every run leans on: Sinkhorn at the paper's queue/K sizes, and ranking."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from benchmarks import common
from benchmarks.compat import H

TAU, ETA, DIM = 0.01, 20.0, 5  # the synthetic task's SwAMP settings and embedding size


def swamp_logits(n: int, k: int, generator: torch.Generator) -> torch.Tensor:
    """log p(y|x) (n, k) as SwAMP feeds Sinkhorn: cosines of unit vectors over tau, log-softmaxed."""
    emb = F.normalize(torch.randn(n, DIM, generator=generator), dim=1)  # (N, D)
    protos = F.normalize(torch.randn(k, DIM, generator=generator), dim=1)  # (K, D)
    return F.log_softmax(emb @ protos.T / TAU, dim=1)


class Sinkhorn:
    """``harness.ops.ot.sinkhorn`` (3 iterations, eta 20) on batch + queue rows against K prototypes."""

    params = [["1408x1000", "2048x500"]]
    param_names = ["N x K"]

    def setup(self, shape: str) -> None:
        common.pin_threads()
        n, k = (int(v) for v in shape.split("x"))
        self.logits = swamp_logits(n, k, torch.Generator().manual_seed(common.SEED))

    def time_sinkhorn(self, shape: str) -> None:
        H.sinkhorn(self.logits, ETA, n_iters=3)


class FusedSinkhorn:
    """``harness.api.fused_sinkhorn`` from the logits, as SwAMP calls it in one process (log-softmax and
    Sinkhorn in one compiled kernel, compiled in set-up); skipped on revisions without it."""

    params = [["1408x1000"]]
    param_names = ["N x K"]

    def setup(self, shape: str) -> None:
        if not hasattr(H, "fused_sinkhorn"):
            raise NotImplementedError("this revision has no fused_sinkhorn")
        common.pin_threads()
        n, k = (int(v) for v in shape.split("x"))
        emb = F.normalize(torch.randn(n, DIM, generator=torch.Generator().manual_seed(common.SEED)), dim=1)
        protos = F.normalize(torch.randn(k, DIM, generator=torch.Generator().manual_seed(common.SEED + 1)), dim=1)
        self.logits = emb @ protos.T / TAU  # (N, K)
        H.fused_sinkhorn(self.logits, ETA, 3, from_logits=True, compile="on")  # compile (or load) once

    def time_fused_sinkhorn(self, shape: str) -> None:
        H.fused_sinkhorn(self.logits, ETA, 3, from_logits=True, compile="on")


class NativeSinkhorn:
    """``harness.api.fused_sinkhorn_pair`` through the native C kernel, as SwAMP calls it in one process on the
    CPU: both modalities' logits (batch + queue rows) in one call, the batch's 128 target rows out; built (or
    found in its cache) in set-up; skipped on revisions without it or where it cannot be built."""

    params = [["1408x1000"]]
    param_names = ["N x K"]

    def setup(self, shape: str) -> None:
        if not hasattr(H, "native_sinkhorn_unavailable"):
            raise NotImplementedError("this revision has no native Sinkhorn")
        if H.native_sinkhorn_unavailable() is not None:
            raise NotImplementedError(f"native Sinkhorn unavailable: {H.native_sinkhorn_unavailable()}")
        common.pin_threads()
        n, k = (int(v) for v in shape.split("x"))
        g = torch.Generator().manual_seed(common.SEED)
        protos = F.normalize(torch.randn(k, DIM, generator=g), dim=1) / TAU
        self.logits = [F.normalize(torch.randn(n, DIM, generator=g), dim=1) @ protos.T for _ in range(2)]

    def time_native_sinkhorn_pair(self, shape: str) -> None:
        H.fused_sinkhorn_pair(self.logits, ETA, 3, from_logits=True, compile="native", rows=128)


class RankMetrics:
    """``harness.ops.metrics.rank_metrics`` on 1,000 queries x 5,000 gallery items (5 relevant each)."""

    def setup(self) -> None:
        common.pin_threads()
        generator = torch.Generator().manual_seed(common.SEED)
        self.sims = torch.randn(1000, 5000, generator=generator)  # (Q, G)
        self.relevant = H.pair_relevance(torch.arange(5000) // 5, 1000)  # (Q, G), five captions per image

    def time_rank_metrics(self) -> None:
        H.rank_metrics(self.sims, self.relevant, (1, 5, 10))


class PrecisionMetrics:
    """``harness.ops.metrics.precision_metrics`` (mAP, mAP@200, P@200: Doodle2Search's statistics) on
    2,000 sketch queries x 12,264 photos of 21 classes, Sketchy's test gallery size."""

    def setup(self) -> None:
        common.pin_threads()
        generator = torch.Generator().manual_seed(common.SEED)
        self.sims = torch.randn(2000, 12264, generator=generator)
        labels = torch.arange(12264) % 21
        queries = torch.randint(0, 21, (2000,), generator=generator)
        self.relevant = queries[:, None] == labels[None, :]

    def time_precision_metrics(self) -> None:
        H.precision_metrics(self.sims, self.relevant, ap=True, ap_ks=(200,), precision_ks=(200,))


class RankMetricsMemory:
    """Peak RSS of ranking a COCO-5K-sized (5,000 x 25,000) score matrix: the matrix and its mask
    (~625 MB together) plus the row-chunk temporaries; a whole-matrix temporary adds 500 MB."""

    def setup(self) -> None:
        common.pin_threads()
        self.sims = torch.randn(5000, 25000, generator=torch.Generator().manual_seed(common.SEED))
        self.relevant = H.pair_relevance(torch.arange(25000) // 5, 5000)

    def peakmem_rank_metrics_coco5k(self) -> None:
        H.rank_metrics(self.sims, self.relevant, (1, 5, 10))
