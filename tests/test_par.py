"""PAR pooling (padding never changes the output), region and word-GRU encoders, PAR methods."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from baselines.contrastive_par import ContrastivePAR, ContrastivePARParams
from baselines.swamp_par import SwAMPPAR, SwAMPPARParams
from harness.config import params as P
from harness.encoders.par import PAR, par_pool, par_width
from harness.encoders.regions import RegionProjection
from harness.encoders.word_gru import WordGRU
from harness.errors import ConfigError


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


def pool_by_hand(queries: torch.Tensor, features: torch.Tensor) -> torch.Tensor:
    """(B, k, D') attention-weighted sums softmax_n(q_k·x_n / 0.5) x_n, one query at a time."""
    weights = torch.softmax(torch.einsum("kd,bnd->bkn", queries, features) / 0.5, -1)
    return torch.einsum("bkn,bnd->bkd", weights, features)


@pytest.mark.parametrize("mode, width", [("concat", 48), ("split", 24)])
def test_heads_computed_by_hand(mode, width):
    torch.manual_seed(0)
    par = PAR(dim=8, p=3, temperature=0.5, heads=2, mode=mode)
    features = torch.randn(5, 4, 8)
    out = par(features)
    assert out.shape == (5, width) and par.out_dim == width == par_width(8, 3, 2, mode)
    torch.testing.assert_close(out.norm(dim=1), torch.ones(5))
    q = par.queries.detach()
    if mode == "concat":  # each head: its own 3 queries over all 8 dimensions; heads side by side
        z = torch.cat([pool_by_hand(head, features).reshape(5, -1) for head in q.split(3)], 1)
    else:  # (3, 8) queries: each query's first half attends on the first half of D, its second on the second
        z = torch.cat([pool_by_hand(q[:, lo:lo + 4], features[..., lo:lo + 4]) for lo in (0, 4)], 2).reshape(5, 24)
    torch.testing.assert_close(out, F.normalize(z, dim=1))


def test_one_head_reads_the_same_either_way():
    torch.manual_seed(2)
    concat, split = PAR(8, 3, 0.5, 1, "concat"), PAR(8, 3, 0.5, 1, "split")
    split.load_state_dict(concat.state_dict())
    features = torch.randn(2, 5, 8)
    torch.testing.assert_close(concat(features), split(features))


def test_bad_head_settings():
    with pytest.raises(ValueError, match="must divide"):
        PAR(dim=8, p=3, temperature=0.5, heads=3, mode="split")
    PAR(dim=8, p=3, temperature=0.5, heads=3, mode="concat")  # any H works side by side
    with pytest.raises(ValueError, match="not one of concat, split"):
        PAR(dim=8, p=3, temperature=0.5, heads=2, mode="both")
    with pytest.raises(ConfigError, match="unknown heads 'both'.*valid: concat, split"):
        P.parse(ContrastivePARParams, {"heads": "both"}, "methods.contrastive_par")


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
    swamp = SwAMPPAR(encoders(), SwAMPPARParams(K=4, queue=8, p=3, H=2))  # concat heads: 2 · 3 · 8 wide
    split = SwAMPPAR(encoders(), SwAMPPARParams(K=4, queue=8, p=3, H=2, heads="split"))  # 3 · 8 wide
    contrastive = ContrastivePAR(encoders(), ContrastivePARParams(p=3))
    for method, width in ((swamp, 48), (split, 24), (contrastive, 24)):
        queries = [n for n, _ in method.named_parameters() if "queries" in n]
        assert queries == ["par.queries"]
        assert method.embed_dim == width == method.par.out_dim
        emb = method.encode("b", (torch.tensor([[1, 4, 2]]), torch.tensor([3])))
        assert emb.shape == (1, width)
    assert swamp.prototypes.shape == (4, 48) and swamp.queue.a.shape == (8, 48)
    assert split.prototypes.shape == (4, 24)
