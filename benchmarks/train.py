"""One training step per registered method (CPU wall clock and peak RSS)."""
from __future__ import annotations

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
