"""PAR pooling (padding never changes the output), region and word-GRU encoders, PAR methods."""
from __future__ import annotations

import torch
import torch.nn.functional as F

from baselines.contrastive_par import ContrastivePAR, ContrastivePARParams
from baselines.swamp_par import SwAMPPAR, SwAMPPARParams
from harness.encoders.par import PAR, par_pool
from harness.encoders.regions import RegionProjection
from harness.encoders.word_gru import WordGRU


def test_padding_never_changes_the_output():
    g = torch.Generator().manual_seed(0)
    features = torch.randn(3, 7, 8, generator=g)
    mask = torch.arange(7)[None, :] < torch.tensor([7, 2, 1])[:, None]
    queries = torch.randn(4, 8, generator=g)
    out = par_pool(features, mask, queries, temperature=0.5, heads=2)
    garbage = torch.where(mask[..., None], features, torch.full_like(features, 1e4))
    longer = torch.cat([features, torch.randn(3, 5, 8, generator=g)], 1)  # five more padded slots
    longer_mask = torch.cat([mask, torch.zeros(3, 5, dtype=torch.bool)], 1)
    torch.testing.assert_close(par_pool(garbage, mask, queries, temperature=0.5, heads=2), out)
    torch.testing.assert_close(par_pool(longer, longer_mask, queries, temperature=0.5, heads=2), out)
    one = par_pool(features[2:, :1], None, queries, temperature=0.5, heads=2)
    torch.testing.assert_close(out[2:], one)  # a set of one item, with or without padding


def test_known_answer_single_head():
    features = torch.tensor([[[1.0, 0.0], [0.0, 1.0]]])  # (1, 2, 2)
    queries = torch.tensor([[1.0, 0.0]])
    weights = torch.softmax(torch.tensor([1.0, 0.0]) / 0.5, 0)  # q·x / T
    expected = F.normalize(weights[0] * features[0, 0] + weights[1] * features[0, 1], dim=0)
    torch.testing.assert_close(par_pool(features, None, queries, temperature=0.5, heads=1)[0], expected)


def test_heads_attend_separately_and_width_is_p_times_d():
    par = PAR(dim=8, p=3, temperature=0.5, heads=2)
    out = par(torch.randn(5, 4, 8))
    assert out.shape == (5, 24) and par.out_dim == 24
    torch.testing.assert_close(out.norm(dim=1), torch.ones(5))


def test_word_gru_ignores_padding_and_normalises_words():
    torch.manual_seed(0)
    enc = WordGRU(vocab_size=30, word_dim=6, dim=8).eval()
    ids = torch.tensor([[1, 5, 7, 2, 0, 0], [1, 9, 2, 0, 0, 0]])
    lengths = torch.tensor([4, 3])
    feats, out_lengths = enc((ids, lengths))
    assert feats.shape == (2, 6, 8) and torch.equal(out_lengths, lengths)
    torch.testing.assert_close(feats[0, :4].norm(dim=1), torch.ones(4))
    assert feats[1, 3:].abs().max() == 0  # padded positions are zero
    alone, _ = enc((ids[1:, :3], lengths[1:]))
    torch.testing.assert_close(feats[1, :3], alone[0])


def test_region_projection_normalises_each_region():
    enc = RegionProjection(in_features=12, dim=5)
    out = enc(torch.rand(2, 36, 12))
    assert out.shape == (2, 36, 5)
    torch.testing.assert_close(out.norm(dim=2), torch.ones(2, 36))


def test_par_methods_share_one_set_of_queries():
    encoders = lambda: {"a": RegionProjection(12, 8), "b": WordGRU(30, 6, 8)}  # noqa: E731
    swamp = SwAMPPAR(encoders(), SwAMPPARParams(K=4, queue=8, p=3, H=2))
    contrastive = ContrastivePAR(encoders(), ContrastivePARParams(p=3))
    for method in (swamp, contrastive):
        queries = [n for n, _ in method.named_parameters() if "queries" in n]
        assert queries == ["par.queries"]
        assert method.embed_dim == 24
    assert swamp.prototypes.shape == (4, 24) and swamp.queue.a.shape == (8, 24)
    emb = swamp.encode("b", (torch.tensor([[1, 4, 2]]), torch.tensor([3])))
    assert emb.shape == (1, 24)
