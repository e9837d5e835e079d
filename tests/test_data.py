"""Batches prepared for a device: pinned gathering on CUDA, nothing changed elsewhere."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.data.paired import ArrayRows, PairedData, PinnedRows, Split, for_device, to_device
from harness.data.text import TokenCaptions

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: pinned host memory")


def split() -> Split:
    regions = torch.arange(4 * 3 * 2, dtype=torch.float32).view(4, 3, 2)  # (N, R, F)
    captions = TokenCaptions.from_ids([[1, 5, 2], [1, 6, 7, 2], [1, 2], [1, 8, 2]], vocab_size=10)
    return Split(regions, captions)


def test_cpu_batches_are_untouched():
    data = PairedData({"train": split()})
    assert data.for_device(torch.device("cpu"))["train"] is data["train"]


def test_array_rows_take_keeps_the_index_order():
    rows = ArrayRows(np.arange(12, dtype=np.float32).reshape(4, 3))
    out = rows.take(torch.tensor([3, 0, 2]))
    assert out.dtype == torch.float32 and out.tolist() == [[9, 10, 11], [0, 1, 2], [6, 7, 8]]


@needs_cuda
def test_pinned_rows_give_the_same_batch_in_page_locked_memory():
    s = split()
    pinned = for_device(s, torch.device("cuda"))
    assert isinstance(pinned.a, PinnedRows) and pinned.b is s.b  # token ids stay as they are
    index = torch.tensor([2, 0])
    a, b = pinned.pair_batch(index)
    assert a.is_pinned() and torch.equal(a, s.pair_batch(index)[0])
    arrays = PinnedRows(ArrayRows(s.a.numpy()))
    assert arrays.take(index).is_pinned() and torch.equal(arrays.take(index), s.a[index])
    on_gpu = to_device(a, torch.device("cuda"))
    torch.cuda.synchronize()
    assert torch.equal(on_gpu.cpu(), s.a[index])


def test_preparing_for_a_device_keeps_the_data_s_fixed_weights():
    data = PairedData({"train": split()}, {"source": "x"}, {"b": {"embed.weight": torch.ones(10, 2)}})
    for device in ("cpu",) + (("cuda",) if torch.cuda.is_available() else ()):
        ready = data.for_device(torch.device(device))
        assert ready.fixed_weights is data.fixed_weights and ready.info == data.info
