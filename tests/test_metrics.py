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



# --- the metric registry (harness/config/metrics.py) ----------------------------------------------------------------

RICH = dict(directions=("i2t", "t2i"), relevance=("pair", "class"), ks=(1, 5, 10), rsum=True, folds=(1, 5),
            map=True, map_at=(200,), precision_at=(10, 100))


def _naive_names(spec) -> list[str]:
    """Every name a MetricSpec asks for, written out by hand (the layout of docs/architecture.md)."""
    out = []
    for n in spec.folds:
        prefix = "" if n == 1 else f"{n}folds/"
        stats = [f"R@{k}" for k in spec.ks] + ["MedR", "MeanR"] + (["mAP"] if spec.map else []) \
            + [f"mAP@{k}" for k in spec.map_at] + [f"P@{k}" for k in spec.precision_at]
        for d in spec.directions:
            for r in spec.relevance:
                out += [f"{prefix}{d}/{'class_' if r == 'class' else ''}{s}" for s in stats]
        out += [f"{prefix}rsum"] if spec.rsum else []
    return out


@pytest.mark.parametrize("settings", [{}, {"directions": ("a2b",), "ks": (1,)}, RICH,
                                      {**RICH, "rsum": False, "map": False, "precision_at": ()}])
def test_the_names_a_spec_asks_for_come_from_the_registry_in_the_written_out_order(settings):
    from harness.config.spec import MetricSpec

    spec = MetricSpec(**settings)
    assert spec.names() == _naive_names(spec)


def test_every_name_has_its_direction_digits_and_family():
    from harness.config import metrics as M
    from harness.config.spec import MetricSpec

    names = MetricSpec(**RICH).names()
    assert len(names) == 2 * (2 * 2 * 9 + 1)
    for name in names + [f"val/{n}" for n in names]:
        stat = name.rpartition("/")[2].removeprefix("class_")
        assert M.lower_is_better(name) is (stat in ("MedR", "MeanR")), name
        assert M.digits(name) == (1 if stat == "MedR" else 2), name
        expected = {"R": M.RECALL, "MedR": M.RANK, "MeanR": M.RANK, "mAP": M.MAP, "P": M.PRECISION,
                    "rsum": M.RSUM}[stat.partition("@")[0]]
        assert M.family(name) == expected, name


@pytest.mark.parametrize("name", ["a2b/NDCG@10", "a2b/R@0", "a2b/R@x", "a2b/class_", "medr"])
def test_an_undeclared_statistic_is_refused_naming_the_declared_ones(name):
    from harness.config import metrics as M
    from harness.errors import ConfigError

    with pytest.raises(ConfigError, match=r"is not a metric: .*R@k, MedR, MeanR, mAP, mAP@k, P@k, rsum"):
        M.lower_is_better(name)


def test_a_new_metric_is_one_declaration(monkeypatch):
    """A statistic declared once is named by every spec that asks for it, with its direction and digits."""
    from harness.config import metrics as M
    from harness.config.metric_names import parse_metric
    from harness.config.spec import MetricSpec

    hits = M.Metric("Hits@k", M.RECALL, False, 3, "ks", meaning="a recall under another name")
    monkeypatch.setattr(M, "METRICS", (*M.METRICS, hits))
    monkeypatch.setattr(M, "_BY_STAT", {**M._BY_STAT, "Hits@k": hits})
    names = MetricSpec(directions=("a2b",), ks=(1, 5)).names()
    assert names == ["a2b/R@1", "a2b/R@5", "a2b/MedR", "a2b/MeanR", "a2b/Hits@1", "a2b/Hits@5"]
    assert M.digits("a2b/Hits@5") == 3 and not M.lower_is_better("val/a2b/Hits@1")
    assert parse_metric("a2b/Hits@5").recall_k == 5 and parse_metric("a2b/MedR").recall_k is None


def test_no_module_outside_the_registry_tests_a_metric_name_for_its_kind():
    """'MedR' and 'MeanR' appear in harness/ outside the registry (and the kernels that compute them) only as data:
    never in a comparison, an endswith/startswith test or a module-level collection that readers test names
    against (the way spec.RANK_STATS and accuracy's endswith('MedR') did)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "harness"
    allowed = {root / "config" / "metrics.py", root / "ops" / "metrics.py"}

    def names_a_rank(node: ast.AST) -> bool:
        return any(isinstance(c, ast.Constant) and isinstance(c.value, str) and ("MedR" in c.value or
                   "MeanR" in c.value) for c in ast.walk(node))

    found = []
    for path in sorted(root.rglob("*.py")):
        if path in allowed:
            continue
        tree = ast.parse(path.read_text())
        suspects: list[ast.AST] = [n for n in ast.walk(tree) if isinstance(n, ast.Compare)]
        suspects += [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                     and n.func.attr in ("endswith", "startswith")]
        suspects += [n.value for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign))
                     and isinstance(n.value, (ast.Tuple, ast.List, ast.Set, ast.Dict))]
        found += [f"{path.relative_to(root.parent)}:{n.lineno}" for n in suspects if names_a_rank(n)]
    assert found == [], f"ask harness.config.metrics (lower_is_better, digits, family) instead: {found}"
