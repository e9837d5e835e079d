"""Average precision, AP@k and P@k: scikit-learn and naive loops as references, ties, NaN, errors,
and the metrics flowing through a task's evaluation into result names and tables."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from harness.ops.metrics import average_precisions, precision_metrics, precisions_at

sklearn_metrics = pytest.importorskip("sklearn.metrics", reason="scikit-learn (test extra) is the reference for AP")


def pessimistic_ranking(scores: list[float], relevant: list[bool]) -> list[int]:
    """Gallery indices by decreasing score, non-relevant first among equal scores (a plain sort)."""
    return sorted(range(len(scores)), key=lambda g: (-scores[g], relevant[g]))


def naive_ap(scores: list[float], relevant: list[bool], k: int | None = None) -> float:
    """AP over the top k of the pessimistic ranking; P(j) counts every kept item scoring >= j's score."""
    kept = pessimistic_ranking(scores, relevant)[:k]
    hits = [g for g in kept if relevant[g]]
    if not hits:
        return 0.0
    total = 0.0
    for j in hits:
        at_least = [g for g in kept if scores[g] >= scores[j]]
        total += sum(relevant[g] for g in at_least) / len(at_least)
    return total / len(hits)


def naive_precision(scores: list[float], relevant: list[bool], k: int) -> float:
    kept = pessimistic_ranking(scores, relevant)[:k]
    return sum(relevant[g] for g in kept) / len(kept)


def random_case(seed: int, q: int = 12, g: int = 40, levels: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    sims = torch.randint(0, levels, (q, g), generator=gen).float()  # many ties
    relevant = torch.rand(q, g, generator=gen) < 0.25
    relevant[torch.arange(q), torch.randint(0, g, (q,), generator=gen)] = True
    return sims, relevant


def test_known_answer_tiny():
    # ranking: rel, non, rel, non -> AP = (1/1 + 2/3) / 2
    sims = torch.tensor([[0.9, 0.8, 0.7, 0.6]])
    rel = torch.tensor([[True, False, True, False]])
    assert average_precisions(sims, rel).item() == pytest.approx((1 + 2 / 3) / 2)
    assert average_precisions(sims, rel, k=2).item() == pytest.approx(1.0)  # one relevant in the top 2
    assert precisions_at(sims, rel, 2).item() == pytest.approx(0.5)
    assert precisions_at(sims, rel, 3).item() == pytest.approx(2 / 3)


@pytest.mark.parametrize("seed", range(5))
def test_matches_scikit_learn_with_ties(seed):
    sims, rel = random_case(seed)
    ours = average_precisions(sims, rel, chunk_elems=100).numpy()  # several chunks
    ref = [sklearn_metrics.average_precision_score(rel[i].numpy(), sims[i].numpy()) for i in range(len(sims))]
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("k", [1, 3, 10, 40, 100])
def test_ap_at_k_and_precision_match_naive_loops(seed, k):
    sims, rel = random_case(seed)
    ap = average_precisions(sims, rel, k=k, chunk_elems=100)
    prec = precisions_at(sims, rel, k, chunk_elems=100)
    for i in range(len(sims)):
        s, r = sims[i].tolist(), rel[i].tolist()
        assert ap[i].item() == pytest.approx(naive_ap(s, r, k), abs=1e-12)
        assert prec[i].item() == pytest.approx(naive_precision(s, r, k), abs=1e-12)


def test_ap_at_k_is_scikit_learn_on_the_truncated_ranking():
    sims, rel = random_case(7, levels=1000)  # (almost) no ties: any tie order is the pessimistic one
    k = 15
    ours = average_precisions(sims, rel, k=k)
    for i in range(len(sims)):
        top = torch.argsort(sims[i], descending=True, stable=True)[:k]
        truth = rel[i, top].numpy()
        ref = sklearn_metrics.average_precision_score(truth, sims[i, top].numpy()) if truth.any() else 0.0
        assert ours[i].item() == pytest.approx(ref, abs=1e-12)


def test_ties_count_against_the_method():
    # a relevant item tied with three non-relevant ones: they all count as ranked above it
    sims = torch.tensor([[0.5, 0.5, 0.5, 0.5]])
    rel = torch.tensor([[True, False, False, False]])
    assert average_precisions(sims, rel).item() == pytest.approx(0.25)
    assert precisions_at(sims, rel, 1).item() == 0.0  # the cut keeps a non-relevant item
    collapsed = torch.ones(20, 20)  # every item at the same point: AP is the relevant share, not 1
    assert average_precisions(collapsed, torch.eye(20, dtype=torch.bool)).tolist() == pytest.approx([0.05] * 20)


def test_nan_scores_are_never_hits():
    sims = torch.tensor([[float("nan"), 0.1, 0.2]])
    rel = torch.tensor([[True, False, False]])
    assert average_precisions(sims, rel).item() == pytest.approx(1 / 3)
    assert precisions_at(sims, rel, 2).item() == 0.0
    assert average_precisions(sims, rel, k=2).item() == 0.0


def test_fewer_items_than_k_and_percent_summary():
    sims = torch.tensor([[0.3, 0.2, 0.1]])
    rel = torch.tensor([[False, True, False]])
    assert precisions_at(sims, rel, 200).item() == pytest.approx(1 / 3)  # share of the whole gallery
    out = precision_metrics(sims, rel, ap=True, ap_ks=(2,), precision_ks=(1, 200))
    assert out == pytest.approx({"mAP": 50.0, "mAP@2": 50.0, "P@1": 0.0, "P@200": 100 / 3})


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="bool"):
        average_precisions(torch.rand(2, 2), torch.eye(2))
    with pytest.raises(ValueError, match="must be equal"):
        precisions_at(torch.rand(2, 3), torch.eye(2, dtype=torch.bool), 1)
    with pytest.raises(ValueError, match="k must be >= 1"):
        average_precisions(torch.rand(2, 2), torch.eye(2, dtype=torch.bool), k=0)


def test_task_metrics_and_tables_carry_map(tiny_task, tmp_path):
    from harness.config.plan import Run
    from harness.config.spec import load_task
    from harness.errors import ConfigError
    from harness.report import accuracy
    from harness.run import runner

    overrides = ["metrics.map=true", "metrics.map_at=[5]", "metrics.precision_at=[10]", "train.epochs=1"]
    spec = load_task(tiny_task, overrides)
    assert "a2b/class_mAP" in spec.metrics.names() and "a2b/P@10" in spec.metrics.names()
    data = runner.load_data(spec)
    opts = runner.RunOptions(device=torch.device("cpu"), out=tmp_path / "out", progress=False)
    result = runner.run_one(Run(spec, "contrastive", "contrastive", {}, 0), data, opts)
    m = result["metrics"]
    for name in ("a2b/mAP", "a2b/mAP@5", "a2b/P@10", "a2b/class_mAP", "a2b/class_mAP@5", "a2b/class_P@10"):
        assert 0.0 <= m[name] <= 100.0
    # one relevant item per query (pair relevance): AP is 1 / rank, so mAP is the mean reciprocal rank
    saved = np.load(tmp_path / "out" / spec.name / "contrastive" / "seed0.ranks.npz")
    ranks = saved["a2b/pair"]
    assert m["a2b/class_mAP"] == pytest.approx(100.0 * saved["a2b/class/AP"].mean())  # per-query AP for the bootstrap
    assert m["a2b/mAP"] == pytest.approx(100.0 * np.mean(1.0 / ranks))
    assert m["a2b/P@10"] == pytest.approx(100.0 * np.mean(ranks <= 10) / 10)
    header, _ = accuracy.accuracy_rows([result])
    assert {"a2b mAP", "a2b mAP@5", "a2b P@10"} <= set(header)
    with pytest.raises(ConfigError, match="positive"):
        load_task(tiny_task, ["metrics.map_at=[0]"])


@pytest.mark.parametrize("chunk_elems", [1, 37, 2**22])
def test_one_ordering_gives_each_statistic_as_computed_alone(chunk_elems):
    gen = torch.Generator().manual_seed(3)
    sims = torch.randint(0, 4, (23, 40), generator=gen).float()  # many ties
    sims[5, :7] = float("nan")
    relevant = torch.rand(23, 40, generator=gen) < 0.3
    relevant[0] = False  # a query with nothing relevant
    per_query: dict[str, torch.Tensor] = {}
    got = precision_metrics(sims, relevant, ap_ks=(1, 10, 100), precision_ks=(5, 200), per_query=per_query,
                            chunk_elems=chunk_elems)
    alone = {"mAP": average_precisions(sims, relevant)}
    alone |= {f"mAP@{k}": average_precisions(sims, relevant, k=k) for k in (1, 10, 100)}
    alone |= {f"P@{k}": precisions_at(sims, relevant, k) for k in (5, 200)}
    assert list(got) == list(alone)
    for name, values in alone.items():
        assert got[name] == pytest.approx(float(values.mean() * 100), abs=1e-12)
    assert torch.equal(per_query["AP"], alone["mAP"])
    empty = precision_metrics(sims[:0], relevant[:0], ap_ks=(10,))
    assert set(empty) == {"mAP", "mAP@10"}  # no queries: every asked statistic, as NaN
