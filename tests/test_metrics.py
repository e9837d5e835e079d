"""rank_metrics: known answers, a naive reference loop, ties and error paths."""
from __future__ import annotations

import math

import pytest
import torch

from harness.ops.metrics import class_relevance, pair_relevance, query_ranks, rank_metrics


def naive_ranks(sims: torch.Tensor, relevant: torch.Tensor) -> list[int]:
    """Per query: 1 + #non-relevant items scoring >= the best relevant score."""
    ranks = []
    for q in range(sims.shape[0]):
        best = max(float(sims[q, g]) for g in range(sims.shape[1]) if relevant[q, g])
        beaten = sum(1 for g in range(sims.shape[1]) if not relevant[q, g] and float(sims[q, g]) >= best)
        ranks.append(1 + beaten)
    return ranks


def test_known_answer_tiny():
    sims = torch.tensor([[0.9, 0.1, 0.5], [0.2, 0.3, 0.8], [0.7, 0.6, 0.1]])
    ranks = query_ranks(sims, torch.eye(3, dtype=torch.bool))
    assert ranks.tolist() == [1, 2, 3]
    m = rank_metrics(sims, torch.eye(3, dtype=torch.bool), ks=(1, 2))
    assert m["R@1"] == pytest.approx(100 / 3)
    assert m["R@2"] == pytest.approx(200 / 3)
    assert m["MedR"] == 2.0
    assert m["MeanR"] == pytest.approx(2.0)


@pytest.mark.parametrize("seed", range(4))
def test_matches_naive_loop_with_ties_and_several_relevant(seed):
    g = torch.Generator().manual_seed(seed)
    sims = torch.randint(0, 6, (40, 70), generator=g).float()  # many ties
    relevant = torch.rand(40, 70, generator=g) < 0.08
    relevant[torch.arange(40), torch.randint(0, 70, (40,), generator=g)] = True
    fast = query_ranks(sims, relevant, chunk_elems=300)  # forces several chunks
    assert fast.tolist() == naive_ranks(sims, relevant)


def test_collapsed_embedding_scores_zero():
    sims = torch.ones(50, 50)  # every item embedded at the same point
    m = rank_metrics(sims, torch.eye(50, dtype=torch.bool))
    assert m["R@1"] == 0.0 and m["R@10"] == 0.0
    assert m["MedR"] == 50.0


def test_nan_scores_never_hit():
    sims = torch.full((3, 3), float("nan"))
    assert query_ranks(sims, torch.eye(3, dtype=torch.bool)).tolist() == [3, 3, 3]


def test_medr_is_floor_of_median():
    sims = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    rel = torch.tensor([[True, False], [False, True]])  # ranks 1 and 2
    assert rank_metrics(sims, rel)["MedR"] == math.floor(1.5)


def test_relevance_helpers():
    b_to_a = torch.tensor([0, 0, 1, 1])
    assert pair_relevance(b_to_a, 2).tolist() == [[True, True, False, False], [False, False, True, True]]
    assert class_relevance(torch.tensor([3, 4]), torch.tensor([4, 3, 3])).tolist() == [[False, True, True],
                                                                                       [True, False, False]]


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="no relevant"):
        rank_metrics(torch.rand(2, 3), torch.tensor([[True, False, False], [False, False, False]]))
    with pytest.raises(ValueError, match="bool"):
        rank_metrics(torch.rand(2, 2), torch.eye(2))
    with pytest.raises(ValueError, match="must be equal"):
        rank_metrics(torch.rand(2, 3), torch.eye(2, dtype=torch.bool))

