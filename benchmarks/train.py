"""One training step per registered method (CPU wall clock and peak RSS)."""
from __future__ import annotations

import time

import torch

from benchmarks import common


class TrainStep:
    """Data indexing, forward, backward and update on one batch of 128 pairs, queue already full."""

    params = [common.benchmark_methods()]
    param_names = ["method"]

    def setup(self, method: str) -> None:
        common.pin_threads()
        task = common.benchmark_task()
        self.step = common.train_step(task, method, common.load_data(task), torch.device("cpu"))
        common.reset_peak_rss()

    def time_train_step(self, method: str) -> None:
        self.step()

    def peakmem_train_step(self, method: str) -> None:
        self.step()


class StepRatio:
    """SwAMP step over contrastive step on the benchmark task, both built here and timed taking turns in this
    process (best of 7 rounds of 10 steps each), SwAMP as configured: on the CPU, the native Sinkhorn kernel
    (the compiled one where it cannot be built)."""

    unit = "ratio"
    rounds = 1
    repeat = 1

    def setup(self) -> None:
        common.pin_threads()
        task = common.benchmark_task()
        data = common.load_data(task)
        self.steps = {m: common.train_step(task, m, data, torch.device("cpu")) for m in ("swamp", "contrastive")}

    def track_swamp_over_contrastive(self) -> float:
        best = {m: float("inf") for m in self.steps}
        for _ in range(7):
            for m, step in self.steps.items():
                start = time.perf_counter()
                for _ in range(10):
                    step()
                best[m] = min(best[m], time.perf_counter() - start)
        return best["swamp"] / best["contrastive"]
