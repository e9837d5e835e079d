"""SCAN's vectorised cross-attention similarity against SCAN's own per-caption loop (the ``original`` scorer's
training forward, itself checked on known answers in tests/test_scan_original.py), chunking, dtype, errors."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from baselines.scan import DIRECTIONS, SCANi2tAVG, SCANParams, plan_chunks, pool, xattn_similarity
from baselines.scan_original import per_caption_similarity


def reference_xattn(images, captions, lengths, **kw):
    """SCAN's per-caption loop as the reference."""
    return per_caption_similarity(images, captions, lengths.tolist(), **kw)

SETTINGS = [("t2i", "avg", 9.0, 6.0), ("t2i", "lse", 9.0, 6.0), ("i2t", "avg", 4.0, 5.0), ("i2t", "lse", 4.0, 20.0)]


def random_inputs(seed: int, n_i: int = 7, n_c: int = 13, regions: int = 5, max_len: int = 9, dim: int = 16,
                  dtype: torch.dtype = torch.float32, unit: bool = True):
    """Images, garbage-padded captions and lengths that include 1 and max_len."""
    g = torch.Generator().manual_seed(seed)
    images = torch.randn(n_i, regions, dim, generator=g, dtype=dtype)
    captions = torch.randn(n_c, max_len, dim, generator=g, dtype=dtype)
    if unit:  # SCAN's encoders L2-normalise every region and word
        images, captions = F.normalize(images, dim=2), F.normalize(captions, dim=2)
    lengths = torch.randint(1, max_len + 1, (n_c,), generator=g)
    lengths[0], lengths[1] = 1, max_len
    return images, captions, lengths


@pytest.mark.parametrize("direction, agg, lambda_softmax, lambda_lse", SETTINGS)
@pytest.mark.parametrize("unit", [True, False])
def test_matches_reference_loop(direction, agg, lambda_softmax, lambda_lse, unit):
    images, captions, lengths = random_inputs(0, unit=unit)
    kw = dict(direction=direction, agg=agg, lambda_softmax=lambda_softmax, lambda_lse=lambda_lse)
    fast = xattn_similarity(images, captions, lengths, **kw)
    slow = reference_xattn(images.double(), captions.double(), lengths, **kw)
    assert fast.shape == (7, 13) and fast.dtype == torch.float32
    torch.testing.assert_close(fast.double(), slow, atol=1e-4, rtol=0)


@pytest.mark.parametrize("direction, agg, lambda_softmax, lambda_lse", SETTINGS)
def test_many_small_chunks_give_the_same_matrix(direction, agg, lambda_softmax, lambda_lse):
    images, captions, lengths = random_inputs(1, n_i=9, n_c=20, dtype=torch.float64)
    kw = dict(direction=direction, agg=agg, lambda_softmax=lambda_softmax, lambda_lse=lambda_lse)
    one_block = xattn_similarity(images, captions, lengths, **kw)
    tiny_budget = xattn_similarity(images, captions, lengths, memory_budget=3 * 8 * 5 * 9 * 2, **kw)
    torch.testing.assert_close(tiny_budget, one_block, atol=1e-12, rtol=0)
    torch.testing.assert_close(one_block, reference_xattn(images, captions, lengths, **kw), atol=1e-10, rtol=0)


def test_padding_content_is_ignored():
    images, captions, lengths = random_inputs(2)
    other = captions.clone()
    for j, n in enumerate(lengths.tolist()):
        other[j, n:] = 100.0  # garbage after each caption's end
    for direction, agg, ls, ll in SETTINGS:
        kw = dict(direction=direction, agg=agg, lambda_softmax=ls, lambda_lse=ll)
        torch.testing.assert_close(xattn_similarity(images, other, lengths, **kw),
                                   xattn_similarity(images, captions, lengths, **kw))


def test_dtype_follows_input_and_gradients_flow():
    images, captions, lengths = random_inputs(3, dtype=torch.float64)
    images.requires_grad_(True)
    sims = xattn_similarity(images, captions, lengths, direction="i2t", agg="lse", lambda_softmax=4.0, lambda_lse=5.0)
    assert sims.dtype == torch.float64
    sims.sum().backward()
    assert images.grad is not None and torch.isfinite(images.grad).all()


def test_plan_chunks_respects_the_budget():
    lengths = torch.tensor([30, 20, 12, 12, 10, 9, 5, 1])
    image_chunk, bounds = plan_chunks(lengths, n_images=100, regions=36, itemsize=4, memory_budget=2**20)
    assert bounds[0][0] == 0 and bounds[-1][1] == 8
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:]))  # contiguous cover
    for lo, hi in bounds:
        assert hi - lo == 1 or 3 * image_chunk * 36 * (hi - lo) * int(lengths[lo]) * 4 <= 2**20


def test_pool_known_answers():
    sims = torch.tensor([0.5, 0.1, 9.0]).view(1, 3, 1)  # (1 image, 3 words, 1 caption), the last word padding
    mask = torch.tensor([[True], [True], [False]])  # (L, c)
    assert float(pool(sims, mask, dim=1, agg="avg", lambda_lse=1.0)) == pytest.approx(0.3)
    expected = torch.log(torch.exp(torch.tensor(2 * 0.5)) + torch.exp(torch.tensor(2 * 0.1))) / 2
    assert float(pool(sims, mask, dim=1, agg="lse", lambda_lse=2.0)) == pytest.approx(float(expected))
    assert float(pool(sims, None, dim=1, agg="avg", lambda_lse=1.0)) == pytest.approx(3.2)


@pytest.mark.parametrize("kwargs, message", [
    (dict(direction="both"), "direction 'both' is not one of t2i, i2t"),
    (dict(agg="max"), "agg 'max' is not one of avg, lse"),
    (dict(lambda_softmax=0.0), "must be > 0"),
])
def test_bad_arguments_name_the_valid_choices(kwargs, message):
    images, captions, lengths = random_inputs(4)
    kw = dict(direction="t2i", agg="avg", lambda_softmax=9.0, lambda_lse=6.0) | kwargs
    with pytest.raises(ValueError, match=message):
        xattn_similarity(images, captions, lengths, **kw)


def test_bad_lengths_and_shapes():
    images, captions, lengths = random_inputs(5)
    kw = dict(direction="t2i", agg="avg", lambda_softmax=9.0)
    with pytest.raises(ValueError, match="lengths must lie in 1..9"):
        xattn_similarity(images, captions, torch.zeros_like(lengths), **kw)
    with pytest.raises(ValueError, match="must share D"):
        xattn_similarity(images, captions[..., :3], lengths, **kw)


def test_mixed_and_low_precision_inputs_are_scored_in_float32():
    """Under bf16 autocast the region encoder hands over bfloat16 and the GRU float32: both are promoted."""
    images, captions, lengths = random_inputs(5)
    kw = dict(direction="t2i", agg="avg", lambda_softmax=9.0)
    expected = xattn_similarity(images.bfloat16().float(), captions, lengths, **kw)
    mixed = xattn_similarity(images.bfloat16(), captions, lengths, **kw)
    assert mixed.dtype == torch.float32
    torch.testing.assert_close(mixed, expected)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        under_autocast = xattn_similarity(images.bfloat16(), captions, lengths, **kw)
    torch.testing.assert_close(under_autocast, expected)
    assert xattn_similarity(images.double(), captions, lengths, **kw).dtype == torch.float64


def test_method_scores_its_encoded_sets():
    images, captions, lengths = random_inputs(6)
    method = SCANi2tAVG({"a": torch.nn.Identity(), "b": torch.nn.Identity()}, SCANParams(lambda_softmax=4.0))
    expected = xattn_similarity(images, captions, lengths, direction="i2t", agg="avg", lambda_softmax=4.0)
    torch.testing.assert_close(method.score(images, (captions, lengths)), expected)


@pytest.mark.parametrize("direction, agg, lambda_softmax, lambda_lse", SETTINGS)
def test_gradients_match_reference_loop(direction, agg, lambda_softmax, lambda_lse):
    kw = dict(direction=direction, agg=agg, lambda_softmax=lambda_softmax, lambda_lse=lambda_lse)
    grads = []
    for fn in (xattn_similarity, reference_xattn):
        images, captions, lengths = random_inputs(7, n_i=4, n_c=6, dtype=torch.float64)
        images.requires_grad_(True)
        captions.requires_grad_(True)
        (fn(images, captions, lengths, **kw) * torch.arange(24.0, dtype=torch.float64).view(4, 6)).sum().backward()
        grads.append((images.grad, captions.grad))
    for fast, slow in zip(*grads):
        torch.testing.assert_close(fast, slow, atol=1e-8, rtol=1e-6)


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_large_softmax_temperature_subtracts_the_maximum(direction):
    images, captions, lengths = random_inputs(8, dtype=torch.float64)
    kw = dict(direction=direction, agg="lse", lambda_softmax=80.0, lambda_lse=6.0)
    torch.testing.assert_close(xattn_similarity(images, captions, lengths, **kw),
                               reference_xattn(images, captions, lengths, **kw), atol=1e-10, rtol=0)
