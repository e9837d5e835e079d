"""Whole-test retrieval per registered method: encode 2,000 + 2,000 items, score, rank."""
from __future__ import annotations

import torch

from benchmarks import common


class Retrieval:
    """``harness.run.evaluate.evaluate`` on the 2,000-pair test split (a 2,000 x 2,000 score matrix)."""

    params = [common.benchmark_methods()]
    param_names = ["method"]

    def setup(self, method: str) -> None:
        common.pin_threads()
        task = common.benchmark_task()
        self.retrieve = common.retrieval(task, method, common.load_data(task), torch.device("cpu"))
        common.reset_peak_rss()

    def time_retrieval(self, method: str) -> None:
        self.retrieve()

    def peakmem_retrieval(self, method: str) -> None:
        self.retrieve()
