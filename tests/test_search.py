"""Approximate search beside the exact test retrieval (test.search, harness/run/search.py)."""
from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F

from harness.config import spec as specs
from harness.config.spec import HNSWSearch, IVFFlatSearch, MetricSpec, TestSpec, load_task
from harness.data.paired import Split
from harness.errors import ConfigError
from harness.method import Method
from harness.run import runner, search
from harness.run.profiling import Profiler
from tests.conftest import TINY, write_task


class _Dot(Method):
    def __init__(self):
        super().__init__({}, None)

    def encode(self, modality, x):
        return x


def _split(n: int = 1000, dim: int = 16) -> Split:
    g = torch.Generator().manual_seed(0)
    a = F.normalize(torch.randn(n, dim, generator=g), dim=1)
    b = F.normalize(a + 0.3 * torch.randn(n, dim, generator=g), dim=1)
    return Split(a=a, b=b, b_to_a=torch.arange(n))


def test_missing_faiss_stops_the_task_at_load_naming_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(specs, "faiss_available", lambda: False)
    path = write_task(tmp_path, {**TINY, "test": {"search": {"type": "hnsw"}}})
    with pytest.raises(ConfigError, match="pip install faiss-cpu"):
        load_task(path)
    monkeypatch.setattr(specs, "faiss_available", lambda: True)
    assert load_task(path).test.search == {"type": "hnsw", "M": 32, "ef_construction": 40, "ef_search": 64, "k": 10}


faiss = pytest.importorskip("faiss", reason="faiss is not installed (pip install faiss-cpu)")


@pytest.mark.parametrize("settings, floor", [(HNSWSearch(M=16, ef_search=128, k=10), 95.0),
                                             (IVFFlatSearch(nlist=16, nprobe=16, k=10), 100.0),
                                             (IVFFlatSearch(nlist=16, nprobe=1, k=10), 0.0)])
def test_recall_against_exact_search_on_generated_data(settings, floor):
    split = _split()
    prof = Profiler(torch.device("cpu"))
    metrics = MetricSpec(directions=("a2b", "b2a"), ks=(1, 5, 10))
    search.run_search(_Dot(), split, metrics, settings, prof, (split.a, split.b))
    rows = prof.search["directions"]
    assert set(rows) == {"a2b", "b2a"} and "test_search" in prof.memory
    for row in rows.values():
        assert floor <= row["knn_recall@10"] <= 100.0
        assert row["build_s"] >= 0 and row["query_s"] >= 0 and row["index_mib"] > 0
        for k in (1, 5, 10):
            assert row[f"lost_R@{k}"] == pytest.approx(row[f"exact_R@{k}"] - row[f"R@{k}"])
            if floor == 100.0:  # every cell visited: the exact neighbours
                assert row[f"lost_R@{k}"] == pytest.approx(0.0, abs=1e-9)
    if settings.type == "ivf_flat" and settings.nprobe == 1:  # one cell of 16: some neighbours missed
        assert min(r["knn_recall@10"] for r in rows.values()) < 100.0


def test_exact_top_agrees_with_a_full_sort():
    split = _split(300)
    top = search.exact_top(_Dot(), split.a, split.b, 7, block=64)
    assert torch.equal(top, (split.a @ split.b.T).topk(7, dim=1).indices)


def test_ivf_cells_beyond_the_gallery_stop_before_training(tmp_path):
    path = write_task(tmp_path, {**TINY, "test": {"search": {"type": "ivf_flat", "nlist": 100000, "nprobe": 1}}})
    spec = load_task(path)
    with pytest.raises(ConfigError, match="nlist"):
        runner.load_data(spec)


def test_exact_metrics_are_unchanged_by_the_search_and_absent_without_it(tiny_task):
    spec = load_task(tiny_task)
    data = runner.load_data(spec)
    method = runner.build_method(spec, next(iter(spec.methods)), data, torch.device("cpu"))
    out = {}
    for name, test in (("off", TestSpec()), ("on", TestSpec(search={"type": "hnsw", "M": 8, "ef_construction": 40,
                                                                       "ef_search": 16, "k": 10}))):
        prof = Profiler(torch.device("cpu"))
        out[name] = runner.full_test(method, data, spec.metrics, 256, prof, torch.device("cpu"), test=test)
        assert (prof.search is None) == (name == "off")
    assert json.dumps(out["on"]) == json.dumps(out["off"])


def test_a_cross_attention_method_records_why_it_is_not_searched():
    class Sets(_Dot):
        search_metric = None

    prof = Profiler(torch.device("cpu"))
    split = _split(50)
    search.run_search(Sets(), split, MetricSpec(), HNSWSearch(), prof, (split.a, split.b))
    assert "skipped" in prof.search and "directions" not in prof.search
