"""Streaming evaluation (harness/ops/streaming.py, harness.run.evaluate.stream_folds) against the whole-matrix
metrics: the same ranks, average precisions and statistics to the bit, on generated scores with ties, NaNs,
several relevant items per query, class relevance, both directions and folds, and on small runs of every
committed task family re-ranked from saved embeddings both ways."""
from __future__ import annotations

import json
import math

import pytest
import torch

from harness.config.spec import MetricSpec, TestSpec, load_task
from harness.data.paired import Split
from harness.errors import ConfigError
from harness.method import Method
from harness.ops import metrics as M
from harness.ops.streaming import Relevance, StreamRanker, Wanted, stream
from harness.run import evaluate as ev
from harness.run import runner
from harness.run.profiling import Profiler
from tests.conftest import write_task
from tests.fuzz_tasks import BASES, small_task

WANTED = Wanted(ap=True, ap_ks=(1, 3, 50), precision_ks=(2, 7, 1000))


def _scores(n_a: int, n_b: int, levels: int, nan: float, gen: torch.Generator) -> torch.Tensor:
    """Scores on a few levels (many ties), some NaN, one row of NaN and one column of -inf."""
    sims = torch.randint(0, levels, (n_a, n_b), generator=gen).float() / 4
    sims[torch.rand(n_a, n_b, generator=gen) < nan] = math.nan
    sims[1] = math.nan
    sims[:, 2] = -math.inf
    return sims


def _pairing(n_a: int, n_b: int, gen: torch.Generator) -> torch.Tensor:
    """b_to_a with every a item paired at least once and some paired many times."""
    b_to_a = torch.randint(0, n_a, (n_b,), generator=gen)
    b_to_a[:n_a] = torch.arange(n_a)
    return b_to_a


def _labels(n: int, classes: int, gen: torch.Generator) -> torch.Tensor:
    labels = torch.randint(0, classes, (n,), generator=gen)
    labels[:classes] = torch.arange(classes)
    return labels


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["pair", "class"])
@pytest.mark.parametrize("blocks", [(8, 13), (5, 3), (200, 400), (1, 1)])
def test_stream_ranker_equals_the_whole_matrix_to_the_bit(seed, kind, blocks):
    gen = torch.Generator().manual_seed(seed)
    n_a, n_b = 23, 61
    sims = _scores(n_a, n_b, levels=3 + seed, nan=0.1 * seed, gen=gen)
    if kind == "pair":
        b_to_a = _pairing(n_a, n_b, gen)
        relevant, relevance = M.pair_relevance(b_to_a, n_a), Relevance("pair", b_to_a=b_to_a)
    else:
        labels_a, labels_b = _labels(n_a, 4, gen), _labels(n_b, 4, gen)
        relevant = M.class_relevance(labels_a, labels_b)
        relevance = Relevance("class", labels_a=labels_a, labels_b=labels_b)
    chunk = 64  # several row chunks in the whole-matrix code, reproduced by the streaming one
    ranker = StreamRanker(n_a, n_b, {kind: relevance}, ("a", "b"), WANTED, block_a=blocks[0], block_b=blocks[1],
                          chunk_elems=chunk)
    stream(lambda a0, a1, b0, b1: sims[a0:a1, b0:b1].clone(), n_a, n_b, ranker, *blocks)
    for orientation, s, rel in (("a", sims, relevant), ("b", sims.T, relevant.T)):
        assert torch.equal(ranker.ranks(orientation, kind), M.query_ranks(s, rel, chunk_elems=chunk))
        per_query: dict[str, torch.Tensor] = {}
        expected = M.precision_metrics(s, rel, ap=True, ap_ks=WANTED.ap_ks, precision_ks=WANTED.precision_ks,
                                       per_query=per_query, chunk_elems=chunk)
        got, got_per_query = ranker.precision(orientation, kind)
        assert json.dumps(got) == json.dumps(expected)
        assert torch.equal(got_per_query["AP"], per_query["AP"])


def test_stream_ranker_refuses_a_query_without_relevant_items_as_the_whole_matrix_does():
    b_to_a = torch.tensor([0, 0, 2])  # a item 1 has no caption
    with pytest.raises(ValueError, match="query 1 has no relevant gallery item"):
        M.query_ranks(torch.zeros(3, 3), M.pair_relevance(b_to_a, 3))
    ranker = StreamRanker(3, 3, {"pair": Relevance("pair", b_to_a=b_to_a)}, ("a",), block_a=2, block_b=2)
    with pytest.raises(ValueError, match="query 1 has no relevant gallery item"):
        ranker.check([("a", "pair")])


class _Dot(Method):
    """Embeddings as given; the default dot-product score."""

    def __init__(self):
        super().__init__({}, None)

    def encode(self, modality, x):
        return x


def _split(n_a: int, per: int, dim: int, gen: torch.Generator, classes: int = 3) -> Split:
    """Exactly representable embeddings (small integers / 4: every dot product exact, many ties), some NaN."""
    a = torch.randint(-2, 3, (n_a, dim), generator=gen).float() / 4
    b = torch.randint(-2, 3, (n_a * per, dim), generator=gen).float() / 4
    b[3, 0] = math.nan
    labels_a = _labels(n_a, classes, gen)
    b_to_a = torch.arange(n_a * per) // per
    return Split(a=a, b=b, b_to_a=b_to_a, labels_a=labels_a, labels_b=labels_a[b_to_a])


@pytest.mark.parametrize("blocks", [(4, 7), (3, 50), (2048, 16384)])
def test_stream_folds_equals_rank_folds_with_folds_directions_and_both_relevances(blocks):
    split = _split(20, 3, 4, torch.Generator().manual_seed(1))
    metrics = MetricSpec(directions=("i2t", "t2i"), relevance=("pair", "class"), ks=(1, 2, 5), rsum=True,
                         folds=(1, 5), map=True, map_at=(3,), precision_at=(4,))
    method = _Dot()
    for n_folds in metrics.folds:
        folds = ev.make_folds(split, n_folds)
        full_ranks, stream_ranks = {}, {}
        full = ev.rank_folds(ev.score_folds(method, split.a, split.b, folds, blocks=blocks)[0], folds, split, metrics,
                             full_ranks)
        streamed = ev.stream_folds(method, split.a, split.b, folds, split, metrics, blocks, stream_ranks)
        assert json.dumps(streamed) == json.dumps(full)
        assert full_ranks.keys() == stream_ranks.keys()
        assert all(torch.equal(full_ranks[k], stream_ranks[k]) for k in full_ranks)
        # the whole matrix in one product, as the harness scored it before blocks: the same here (exact sums)
        legacy = ev.rank_folds([method.score(split.a, split.b)] if n_folds == 1 else
                               [method.score(split.a[a], split.b[b]) for a, b in folds], folds, split, metrics)
        assert json.dumps(legacy) == json.dumps(full)


def test_a_method_with_its_own_score_within_is_ranked_whole_and_cannot_be_forced_to_stream():
    class Budgeted(_Dot):
        def score_within(self, emb_a, emb_b, deadline):
            return self.score(emb_a, emb_b), 1.0

    assert _Dot().scores_in_blocks and not Budgeted().scores_in_blocks
    assert not ev.streams(Budgeted(), TestSpec())
    assert ev.streams(_Dot(), TestSpec()) and not ev.streams(_Dot(), TestSpec(path="full"))
    with pytest.raises(ConfigError, match="cannot score in blocks"):
        ev.streams(Budgeted(), TestSpec(path="stream"))


def test_scan_ranks_the_whole_matrix():
    from baselines.scan import SCAN
    assert SCAN.scores_in_blocks is False and SCAN.search_metric is None


@pytest.mark.parametrize("bad, message", [({"path": "streaming"}, "unknown test path 'streaming'"),
                                          ({"block_a": 0}, "block_a"),
                                          ({"search": {"type": "lsh"}}, "unknown search type 'lsh'"),
                                          ({"search": {"M": 4}}, "'type' key"),
                                          ({"search": {"type": "ivf_flat", "nlist": 4, "nprobe": 8}},
                                           "nprobe \\(8\\) cannot exceed nlist \\(4\\)"),
                                          ({"extra": 1}, "unknown key 'extra'")])
def test_bad_test_settings_stop_at_load_with_the_valid_choices(tmp_path, bad, message):
    from tests.conftest import TINY
    path = write_task(tmp_path, {**TINY, "test": bad})
    with pytest.raises(ConfigError, match=message):
        load_task(path)


def test_test_settings_round_trip_and_override(tiny_task):
    spec = load_task(tiny_task, ["test.path=full"])
    assert spec.test.path == "full" and spec.resolved(next(iter(spec.methods)))["test"]["path"] == "full"


# every committed task family, small: data in the tasks' shapes from the test fixtures, untrained models
FAMILIES = sorted(BASES)


@pytest.mark.parametrize("name", FAMILIES)
def test_saved_embeddings_rank_the_same_both_ways_for_every_task_family(name, tmp_path):
    task = write_task(tmp_path, small_task(name, tmp_path / "data"), f"{name}.yaml")
    spec = load_task(task)
    data = runner.load_data(spec)
    split = data["test"]
    checked = 0
    for method_name in BASES[name].methods:
        if method_name not in spec.methods:
            continue
        torch.manual_seed(0)
        method = runner.build_method(spec, method_name, data, torch.device("cpu"))
        if not method.scores_in_blocks:
            continue  # SCAN: always the whole matrix
        if not method.trains_by_gradient:
            method.fit_closed_form(data["train"])
        emb_a, emb_b = ev.encode_split(method, split, torch.device("cpu"), 16)
        saved = tmp_path / f"{method_name}.pt"
        torch.save({"a": emb_a, "b": emb_b}, saved)
        loaded = torch.load(saved)
        for blocks in ((3, 5), (spec.test.block_a, spec.test.block_b)):
            for n_folds in spec.metrics.folds:
                folds = ev.make_folds(split, n_folds)
                full_ranks, stream_ranks = {}, {}
                full = ev.rank_folds(ev.score_folds(method, loaded["a"], loaded["b"], folds, blocks=blocks)[0], folds,
                                     split, spec.metrics, full_ranks)
                streamed = ev.stream_folds(method, loaded["a"], loaded["b"], folds, split, spec.metrics, blocks,
                                           stream_ranks)
                assert json.dumps(streamed, sort_keys=True) == json.dumps(full, sort_keys=True), (method_name, blocks)
                assert all(torch.equal(full_ranks[k], stream_ranks[k]) for k in full_ranks)
        checked += 1
    assert checked, f"{name}: no method that scores in blocks among {BASES[name].methods}"


def test_a_streamed_test_records_its_path_and_both_clocks(tiny_task):
    spec = load_task(tiny_task)
    data = runner.load_data(spec)
    name = next(iter(spec.methods))
    method = runner.build_method(spec, name, data, torch.device("cpu"))
    results = {}
    for path in ("stream", "full"):
        prof = Profiler(torch.device("cpu"))
        results[path] = runner.full_test(method, data, spec.metrics, 64, prof, torch.device("cpu"),
                                         test=TestSpec(path=path, block_a=64, block_b=128))
        summary = prof.summary()
        assert summary["test_path"][""]["path"] == path
        assert {"test_encode", "test_score", "test_rank", "test_total"} <= set(summary["timing"])
        assert "test" in summary["memory"]
    assert json.dumps(results["stream"]) == json.dumps(results["full"])
    assert prof.summary()["test_path"][""]["fused"] is False


def test_stream_forced_on_a_method_that_cannot_is_refused_before_training(tiny_image_text_task):
    from types import SimpleNamespace

    from harness.run import preflight
    spec = load_task(tiny_image_text_task, ["test.path=stream"])
    data = runner.load_data(spec)
    name = next(n for n, m in spec.methods.items() if m.method.startswith("scan"))
    with pytest.raises(ConfigError, match="cannot score in blocks"):
        preflight.check_builds([SimpleNamespace(spec=spec, method=name, run_name=name)], data)
    others = [n for n, m in spec.methods.items() if not m.method.startswith("scan")]
    preflight.check_builds([SimpleNamespace(spec=spec, method=n, run_name=n) for n in others], data)
