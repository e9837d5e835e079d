"""Known answers of the seed-level and query-level tests on tiny inputs (harness.report.stats)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from harness.errors import ConfigError
from harness.report import stats

METRICS_CONFIG = {"directions": ["i2t", "t2i"], "relevance": ["pair"], "ks": [1, 5, 10], "folds": [1, 5],
                  "rsum": True}


def test_summary_t_interval_by_hand():
    # mean 2, sample std 1; Student t with 2 degrees of freedom has the closed-form quantile
    # t_p = (2p − 1) / sqrt(2p(1 − p)), so t_0.975 = 0.95 / sqrt(0.04875) ≈ 4.3027.
    s = stats.summarize([1.0, 2.0, 3.0])
    half = 0.95 / math.sqrt(2 * 0.975 * 0.025) / math.sqrt(3)
    assert (s.n, s.mean, s.std) == (3, 2.0, 1.0)
    assert s.ci == pytest.approx((2.0 - half, 2.0 + half), abs=1e-9)


def test_summary_of_one_value_has_no_interval_and_none_fails():
    assert stats.summarize([83.2]) == stats.Summary(1, 83.2, None, None)
    with pytest.raises(ValueError, match="at least one"):
        stats.summarize([])


def test_paired_t_test_by_hand_over_common_seeds_only():
    # differences 1, 2, 3: t = 2 / (1 / √3) = √12 with 2 degrees of freedom, whose two-sided
    # p is 1 − t / sqrt(t² + 2) = 1 − sqrt(12 / 14). Seed 9 has no partner and is left out.
    test = stats.paired_seed_test({0: 2.0, 1: 4.0, 2: 6.0, 9: 50.0}, {0: 1.0, 1: 2.0, 2: 3.0})
    assert (test.n, test.diff) == (3, 2.0)
    assert test.p == pytest.approx(1 - math.sqrt(12 / 14), rel=1e-9)
    assert test.p_wilcoxon is None  # fewer than 5 seeds


def test_paired_test_needs_two_common_seeds():
    assert stats.paired_seed_test({0: 2.0, 1: 3.0}, {1: 1.0, 5: 0.0}) == stats.PairedTest(1, 2.0, None)
    assert stats.paired_seed_test({0: 2.0}, {1: 1.0}) == stats.PairedTest(0, None, None)


def test_paired_test_constant_differences():
    same = stats.paired_seed_test({0: 80.0, 1: 90.0}, {0: 80.0, 1: 90.0})
    assert (same.diff, same.p) == (0.0, 1.0)
    shifted = stats.paired_seed_test({0: 81.0, 1: 91.0, 2: 71.0}, {0: 80.0, 1: 90.0, 2: 70.0})
    assert (shifted.diff, shifted.p) == (1.0, 0.0)


def test_wilcoxon_from_five_seeds():
    # five positive differences: the exact two-sided signed-rank p is 2 / 2^5
    test = stats.paired_seed_test({s: 11.0 + s * 1.5 for s in range(5)}, {s: 10.0 for s in range(5)})
    assert test.p_wilcoxon == pytest.approx(2 / 32)
    zero = stats.paired_seed_test({s: 1.0 for s in range(5)}, {s: 1.0 for s in range(5)})
    assert zero.p_wilcoxon is None


def test_bootstrap_of_identical_ranks_is_zero_with_p_one():
    ranks = np.array([1, 3, 1, 7, 2, 1, 12], dtype=np.int64)
    b = stats.bootstrap_recall(ranks, ranks.copy(), 1, n_resamples=500)
    assert (b.diff, b.ci, b.p, b.n_resamples) == (0.0, (0.0, 0.0), 1.0, 500)


def _better_and_worse(n: int = 200) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    good = np.where(rng.random(n) < 0.8, 1, rng.integers(2, 20, n))
    bad = np.where(rng.random(n) < 0.5, 1, rng.integers(2, 20, n))
    return good.astype(np.int64), bad.astype(np.int64)


def test_bootstrap_detects_a_clearly_better_run():
    good, bad = _better_and_worse()
    b = stats.bootstrap_recall(good, bad, 1, n_resamples=2000, seed=1)
    assert b.diff == pytest.approx(stats.recall(good, 1) - stats.recall(bad, 1))
    assert b.p < 0.01
    assert 0 < b.ci[0] < b.diff < b.ci[1]


def test_bootstrap_is_deterministic_and_antisymmetric():
    good, bad = _better_and_worse(60)
    first = stats.bootstrap_recall(good, bad, 5, n_resamples=1000, seed=0)
    assert stats.bootstrap_recall(good, bad, 5, n_resamples=1000, seed=0) == first
    assert stats.bootstrap_recall(good, bad, 5, n_resamples=1000, seed=3) != first
    # swapping the runs negates every resampled difference drawn from the same indices
    swapped = stats.bootstrap_recall(bad, good, 5, n_resamples=1000, seed=0)
    assert swapped.diff == pytest.approx(-first.diff)
    assert swapped.ci == pytest.approx((-first.ci[1], -first.ci[0]))
    assert swapped.p == pytest.approx(first.p)


def test_bootstrap_chunks_keep_the_observed_difference():
    good, bad = _better_and_worse(50)
    small = stats.paired_bootstrap({"a": good}, {"a": bad}, [1], n_resamples=300, chunk_elems=7)
    large = stats.paired_bootstrap({"a": good}, {"a": bad}, [1], n_resamples=300)
    assert small.diff == large.diff
    assert small.ci[0] <= small.diff <= small.ci[1]


def test_rsum_bootstrap_over_keys_of_different_lengths():
    run = {"i2t/pair": np.array([1, 1, 3, 20]), "t2i/pair": np.array([1, 5, 7, 1, 1, 30])}
    ref = {"i2t/pair": np.array([2, 1, 3, 20]), "t2i/pair": np.array([1, 6, 7, 2, 1, 30])}
    # i2t: R@1 +25, R@5 0; t2i: R@1 +16.67, R@5 +16.67
    b = stats.paired_bootstrap(run, ref, [1, 5], n_resamples=400)
    assert b.diff == pytest.approx(25 + 100 / 6 + 100 / 6)
    assert b.ci[0] <= b.diff <= b.ci[1]
    same = stats.paired_bootstrap(run, run, [1, 5], n_resamples=100)
    assert (same.diff, same.p) == (0.0, 1.0)


def test_bootstrap_rejects_mismatched_ranks():
    with pytest.raises(ConfigError, match="same test queries"):
        stats.bootstrap_recall(np.array([1, 2, 3]), np.array([1, 2]), 1)
    with pytest.raises(ConfigError, match="rank keys differ"):
        stats.paired_bootstrap({"i2t/pair": np.array([1])}, {"t2i/pair": np.array([1])}, [1])


@pytest.mark.parametrize("metric, keys, ks", [
    ("a2b/R@1", ["a2b/pair"], [1]),
    ("a2b/class_R@5", ["a2b/class"], [5]),
    ("5folds/t2i/R@10", ["5folds/t2i/pair"], [10]),
    ("rsum", ["i2t/pair", "t2i/pair"], [1, 5, 10]),
    ("5folds/rsum", ["5folds/i2t/pair", "5folds/t2i/pair"], [1, 5, 10]),
])
def test_rank_keys_of_metric_names(metric, keys, ks):
    assert stats.rank_keys(metric, METRICS_CONFIG) == (keys, ks)
    assert stats.query_testable(metric)


def test_medr_has_no_query_level_test():
    assert not stats.query_testable("a2b/MedR")
    with pytest.raises(ConfigError, match="MedR"):
        stats.rank_keys("a2b/MedR", METRICS_CONFIG)


def _result(folder: Path, run: str, seed: int, ranks: np.ndarray | None) -> dict:
    """A result dict as load_results returns it, with its ranks saved beside it when given."""
    path = folder / run / f"seed{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    r = {"run_name": run, "method": run, "seed": seed, "_path": str(path),
         "config": {"metrics": {"directions": ["a2b"], "relevance": ["pair"], "ks": [1, 5]}},
         "metrics": {"a2b/R@1": 0.0 if ranks is None else stats.recall(ranks, 1)}}
    if ranks is not None:
        np.savez(path.with_suffix(".npz"), **{"a2b/pair": ranks})
        r["ranks"] = path.with_suffix(".npz").name
    path.write_text(json.dumps(r))
    return r


def test_compare_runs_combines_seeds_by_the_largest_p(tmp_path):
    good, bad = _better_and_worse()
    runs = [_result(tmp_path, "swamp", s, np.roll(good, s)) for s in range(2)] + [_result(tmp_path, "swamp", 2, None)]
    refs = [_result(tmp_path, "contrastive", s, np.roll(bad, s)) for s in range(3)]
    refs[1]["metrics"]["a2b/R@1"] += 1.0  # seed-level values need some spread
    cmp = stats.compare_runs(runs, refs, "a2b/R@1", n_resamples=500)
    assert sorted(cmp.bootstrap) == [0, 1]  # seed 2 of swamp has no ranks saved
    assert cmp.p_bootstrap == max(b.p for b in cmp.bootstrap.values())
    assert cmp.n_significant == 2
    assert cmp.seeds.n == 3 and cmp.seeds.p is not None


def test_load_ranks_without_file_or_key(tmp_path):
    r = _result(tmp_path, "swamp", 0, np.array([1, 2]))
    assert stats.load_ranks(r, ["a2b/pair"])["a2b/pair"].tolist() == [1, 2]
    assert stats.load_ranks(r, ["a2b/class"]) is None
    assert stats.load_ranks({k: v for k, v in r.items() if k != "ranks"}, ["a2b/pair"]) is None
    (tmp_path / "swamp" / "seed0.npz").unlink()
    assert stats.load_ranks(r, ["a2b/pair"]) is None


def test_map_is_tested_through_per_query_average_precisions():
    assert stats.query_testable("i2t/class_mAP") and stats.query_testable("5folds/t2i/mAP")
    assert not stats.query_testable("i2t/mAP@200")
    assert stats.rank_keys("i2t/class_mAP", METRICS_CONFIG) == (["i2t/class/AP"], [])
    assert stats.rank_keys("5folds/t2i/mAP", METRICS_CONFIG) == (["5folds/t2i/pair/AP"], [])
    ap = np.array([1.0, 0.5, 0.25, 0.0])
    ref = np.array([0.5, 0.5, 0.25, 0.0])
    boot = stats.paired_bootstrap({"i2t/class/AP": ap}, {"i2t/class/AP": ref}, [], n_resamples=2000)
    assert boot.diff == pytest.approx(100 * 0.5 / 4)  # mAP points: 43.75 − 31.25
    assert boot.ci[0] >= 0.0  # every resample gains or ties
    same = stats.paired_bootstrap({"k": ap}, {"k": ap}, [], n_resamples=500)
    assert (same.diff, same.p) == (0.0, 1.0)


def test_p_values_are_written_one_way():
    assert [stats.p_text(p) for p in (0.04567, 0.001, 0.000999)] == ["0.046", "0.001", "<0.001"]
    assert [stats.p_text(p, relation=True) for p in (0.2, 1e-9)] == ["= 0.200", "< 0.001"]
