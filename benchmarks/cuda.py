"""GPU time (ms) and allocator peak (MiB) via ``track_*``: time_* and peakmem_* see neither.

Each set-up raises NotImplementedError without a CUDA device, which asv shows as skipped.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from benchmarks import common, image_text
from benchmarks.compat import H
from benchmarks.kernels import ETA, swamp_logits


class _Cuda:
    """Shared track_* pair; subclasses set ``self.call`` (the measured callable) in setup."""

    call: Callable[[], Any]

    def track_ms(self, *params: str) -> float:
        return common.cuda_ms(self.call, self.device)

    track_ms.unit = "ms"  # type: ignore[attr-defined]

    def track_max_allocated(self, *params: str) -> float:
        return common.cuda_peak_mib(self.call, self.device)

    track_max_allocated.unit = "MiB"  # type: ignore[attr-defined]


class CudaTrainStep(_Cuda):
    """One training step per method on the GPU (data moved per batch, as in real runs)."""

    params = [common.benchmark_methods()]
    param_names = ["method"]

    def setup(self, method: str) -> None:
        self.device = common.require_cuda()
        task = common.benchmark_task()
        self.call = common.train_step(task, method, common.load_data(task), self.device)


class CudaRetrieval(_Cuda):
    """Whole-test retrieval per method on the GPU."""

    params = [common.benchmark_methods()]
    param_names = ["method"]

    def setup(self, method: str) -> None:
        self.device = common.require_cuda()
        task = common.benchmark_task()
        self.call = common.retrieval(task, method, common.load_data(task), self.device)


class CudaSinkhorn(_Cuda):
    """``harness.ops.ot.sinkhorn`` on GPU logits at the paper's sizes."""

    params = [["1408x1000", "2048x500"]]
    param_names = ["N x K"]

    def setup(self, shape: str) -> None:
        self.device = common.require_cuda()
        n, k = (int(v) for v in shape.split("x"))
        logits = swamp_logits(n, k, torch.Generator().manual_seed(common.SEED)).to(self.device)
        self.call = lambda: H.sinkhorn(logits, ETA, n_iters=3)


class CudaImageTextStep(_Cuda):
    """A training step at the Flickr30K shape (batch 128, 36 × 2048 regions, D = 1024, p = 20) under each
    ``train.precision``: the figures behind the paper's per-batch timing."""

    params = [["contrastive_par", "swamp_par", "scan"], ["fp32", "tf32", "bf16"]]
    param_names = ["method", "precision"]

    def setup(self, method: str, precision: str) -> None:
        self.device = common.require_cuda()
        self.call = image_text.step_for(method, (f"train.precision={precision}",), self.device, overrides=(),
                                        warmup=common.WARMUP_STEPS)


class CudaStepRatio:
    """SwAMP-PAR step / Contrastive-PAR step at the Flickr30K shape on the GPU, fp32 (target: at most 1.15)."""

    unit = "ratio"
    rounds = 1
    repeat = 1

    def setup(self) -> None:
        self.device = common.require_cuda()
        self.steps = {m: image_text.step_for(m, (), self.device, overrides=(), warmup=common.WARMUP_STEPS)
                      for m in ("swamp_par", "contrastive_par")}

    def track_swamp_par_over_contrastive_par(self) -> float:
        return image_text.step_ratio(self.steps, self.device, n=30)
