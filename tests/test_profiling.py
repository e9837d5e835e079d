"""Profiler: timings, per-phase peak memory, and the CUDA/NVML paths (skipped without a GPU)."""
from __future__ import annotations

import time

import pytest
import torch

from harness.run.profiling import CpuPeakRSS, Profiler, percentile


def test_timed_wrapper_records_each_call():
    prof = Profiler(torch.device("cpu"))
    slow = prof.timed("work", lambda s: time.sleep(s) or s)
    assert slow(0.01) == 0.01 and slow(0.02) == 0.02
    assert len(prof.times["work"]) == 2 and prof.times["work"][1] >= 0.02
    summary = prof.summary()["timing"]["work"]
    assert summary["n"] == 2 and summary["total_s"] >= 0.03


def test_train_step_warmup_is_excluded_from_median():
    prof = Profiler(torch.device("cpu"))
    prof.times["train_step"] = [10.0] * 5 + [1.0] * 10
    assert prof.summary(warmup=5)["timing"]["train_step"]["median_s"] == 1.0


def test_phase_peak_rss_sees_a_transient_allocation():
    prof = Profiler(torch.device("cpu"))
    with prof.phase("small"):
        pass
    with prof.phase("big"):
        block = torch.ones(64 * 2**20 // 4)  # 64 MiB, touched
        del block
    small, big = prof.memory["small"]["cpu_peak_rss_mib"], prof.memory["big"]["cpu_peak_rss_mib"]
    assert big - small > 48  # the freed block still shows in the phase's peak
    assert "cuda_max_allocated_mib" not in prof.memory["big"]
    assert any("CPU run" in n for n in prof.notes)


def test_cpu_peak_rss_method_is_named():
    with CpuPeakRSS() as rss:
        pass
    assert rss.method in ("VmHWM", "psutil sampler") and rss.peak > 0


def test_percentile():
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 90) == pytest.approx(4.6)
    assert percentile([7.0], 90) == 7.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: CUDA allocator and NVML paths")
def test_cuda_phase_reads_allocator_and_nvml():
    device = torch.device("cuda")
    prof = Profiler(device)
    with prof.phase("gpu"), prof.timer("matmul"):
        x = torch.randn(4096, 4096, device=device)
        (x @ x).sum().item()
    mem = prof.memory["gpu"]
    assert mem["cuda_max_allocated_mib"] >= 64
    assert "nvml_peak_used_mib" in mem or any("NVML" in n for n in prof.notes)
