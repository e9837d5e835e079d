"""Micro-benchmarks (pytest-benchmark): opt-in, one intra-op thread like the asv suite."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
import torch

from benchmarks import common


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark everything here ``benchmark`` so that the default ``-m 'not benchmark'`` leaves it out."""
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.benchmark)


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Pin torch to :data:`benchmarks.common.THREADS` threads for the test, then restore."""
    before = torch.get_num_threads()
    common.pin_threads()
    yield
    torch.set_num_threads(before)
