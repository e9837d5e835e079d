"""Seeds and significance: pure functions behind the significance columns of the accuracy table.

Two questions, two tests:

* over seeds — does the run beat the reference when the training seed changes? A paired
  t-test on the per-seed metric, pairing by seed (Wilcoxon signed-rank as a check from 5 seeds);
* over test queries — for one trained model, is the difference larger than the choice of test
  queries explains? A paired bootstrap that resamples query indices (the same indices for both
  runs, since query order is identical between runs of a task). Recalls are tested through the
  queries' ranks, mean average precision through the queries' average precisions.

Per-query ranks are 1-based int64 arrays saved beside each result file in an ``.npz`` keyed
``<fold prefix><direction>/<relevance>`` (``a2b/pair``, ``5folds/i2t/pair``); R@k of ranks r
is 100 · mean(r <= k), as in :func:`harness.ops.metrics.summarize_ranks`. With mAP, the same file
holds each query's average precision (0–1) under ``<direction>/<relevance>/AP``. An n-fold protocol's
ranks are the folds' ranks one after another; with folds of equal size, R@k over them equals
the mean of the per-fold R@k that the result file reports.
"""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from harness.errors import ConfigError

ALPHA = 0.05  # the significance level of every test the reports make (the ledger's rules may set their own)

_RECALL = re.compile(r"^(?P<head>.+)/(?P<rel>class_)?R@(?P<k>\d+)$")
_MAP = re.compile(r"^(?P<head>.+)/(?P<rel>class_)?mAP$")


@dataclass(frozen=True)
class Summary:
    """Mean of per-seed values, sample std and Student-t confidence interval (``None`` for n = 1)."""

    n: int
    mean: float
    std: float | None
    ci: tuple[float, float] | None


@dataclass(frozen=True)
class PairedTest:
    """Paired test over the seeds both runs have: mean of (run − reference) and its p-values."""

    n: int
    diff: float | None
    p: float | None
    p_wilcoxon: float | None = None


@dataclass(frozen=True)
class Bootstrap:
    """Paired bootstrap over test queries: observed difference (percentage points), interval, p."""

    diff: float
    ci: tuple[float, float]
    p: float
    n_resamples: int


@dataclass(frozen=True)
class Comparison:
    """A run against a reference on one metric: the test over seeds and one bootstrap per seed.

    ``p_bootstrap`` is the largest per-seed bootstrap p (``None`` when no seed has ranks in both
    runs) and ``n_significant`` the number of seeds whose bootstrap p is below ``alpha``.
    """

    seeds: PairedTest
    bootstrap: dict[int, Bootstrap] = field(default_factory=dict)
    p_bootstrap: float | None = None
    n_significant: int = 0


def summarize(values: Sequence[float], confidence: float = 0.95) -> Summary:
    """Mean, sample standard deviation (n − 1) and the ``confidence`` interval of the mean:
    mean ± t_{(1+confidence)/2, n−1} · std / √n. One value gives neither std nor interval."""
    if not values:
        raise ValueError("summarize needs at least one value")
    x = np.asarray(values, dtype=float)
    mean = float(x.mean())
    if len(x) == 1:
        return Summary(1, mean, None, None)
    std = float(x.std(ddof=1))
    half = float(sps.t.ppf((1 + confidence) / 2, len(x) - 1)) * std / math.sqrt(len(x))
    return Summary(len(x), mean, std, (mean - half, mean + half))


def paired_seed_test(values: Mapping[int, float], reference: Mapping[int, float],
                     wilcoxon_min: int = 5) -> PairedTest:
    """Paired t-test (``scipy.stats.ttest_rel``) of per-seed values against the reference's,
    over the seeds both have. Fewer than 2 common seeds: no p. Differences that are all equal
    make t infinite: p = 1 when they are all zero, else 0. From ``wilcoxon_min`` common seeds,
    and unless every difference is zero, also the Wilcoxon signed-rank p (zeros dropped)."""
    seeds = sorted(set(values) & set(reference))
    d = np.array([values[s] - reference[s] for s in seeds], dtype=float)
    if len(d) == 0:
        return PairedTest(0, None, None)
    diff = float(d.mean())
    if len(d) < 2:
        return PairedTest(len(d), diff, None)
    if np.allclose(d, d[0], rtol=0.0, atol=1e-9):
        p = 1.0 if abs(diff) <= 1e-9 else 0.0
    else:
        p = float(sps.ttest_rel([values[s] for s in seeds], [reference[s] for s in seeds]).pvalue)
    nonzero = d[np.abs(d) > 1e-9]
    p_w = float(sps.wilcoxon(nonzero).pvalue) if len(d) >= wilcoxon_min and len(nonzero) else None
    return PairedTest(len(d), diff, p, p_w)


def recall(ranks: np.ndarray, k: int) -> float:
    """R@k in percent: 100 · share of queries whose rank is at most ``k``."""
    return float(np.mean(np.asarray(ranks) <= k) * 100.0)


def _query_diffs(ranks: np.ndarray, reference: np.ndarray, ks: Sequence[int], key: str) -> np.ndarray:
    """(Q,) per-query contribution to the difference: 100 · Σ_k (hit − reference hit) for ranks, or
    100 · (value − reference value) for per-query values such as average precision (``ks`` empty)."""
    r, ref = np.asarray(ranks), np.asarray(reference)
    if r.shape != ref.shape or r.ndim != 1:
        raise ConfigError(f"ranks {key!r}: run has shape {r.shape}, reference {ref.shape}; paired tests need "
                          f"the same test queries in the same order")
    if len(r) == 0:
        raise ConfigError(f"ranks {key!r}: no queries")
    if not ks:
        diff: np.ndarray = 100.0 * (r.astype(float) - ref.astype(float))
        return diff
    hits = sum((r <= k).astype(float) - (ref <= k).astype(float) for k in ks)
    scaled: np.ndarray = 100.0 * hits
    return scaled


def paired_bootstrap(ranks: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], ks: Sequence[int], *,
                     n_resamples: int = 10_000, seed: int = 0, confidence: float = 0.95,
                     chunk_elems: int = 2**20) -> Bootstrap:
    """Paired bootstrap of Σ_key Σ_k R@k(run) − R@k(reference) over test queries (with ``ks`` empty, of
    Σ_key mean per-query value (run − reference), in percent: mAP from average precisions).

    Each resample draws every key's query indices with replacement (keys independently, since
    i2t and t2i have different query counts), the same indices for run and reference. Draws
    come from ``numpy.random.default_rng(seed)`` in chunks of about ``chunk_elems`` indices.
    Returns the observed difference, the percentile interval of the resampled differences and
    the two-sided p = min(1, 2 · min(share ≤ 0, share ≥ 0)): the share of resamples on the
    far side of zero, doubled. Its resolution is 1 / ``n_resamples``; p = 0 means below it.
    """
    if set(ranks) != set(reference) or not ranks:
        raise ConfigError(f"rank keys differ: run {sorted(ranks)}, reference {sorted(reference)}")
    per_key = [_query_diffs(ranks[key], reference[key], ks, key) for key in sorted(ranks)]
    rng = np.random.default_rng(seed)
    resampled = np.zeros(n_resamples)
    for c in per_key:
        resampled += _resampled_means(c, n_resamples, rng, chunk_elems)
    lo, hi = np.quantile(resampled, [(1 - confidence) / 2, (1 + confidence) / 2])
    p = 2 * min(float(np.mean(resampled <= 0)), float(np.mean(resampled >= 0)))
    observed = float(sum(c.mean() for c in per_key))
    return Bootstrap(observed, (float(lo), float(hi)), min(1.0, p), n_resamples)


def _resampled_means(c: np.ndarray, n_resamples: int, rng: np.random.Generator, chunk_elems: int) -> np.ndarray:
    """(n_resamples,) means of ``c`` over query indices drawn with replacement, chunk by chunk."""
    rows = max(1, chunk_elems // len(c))
    out = np.empty(n_resamples)
    for lo in range(0, n_resamples, rows):
        idx = rng.integers(0, len(c), size=(min(rows, n_resamples - lo), len(c)))  # (rows, Q)
        out[lo:lo + len(idx)] = c[idx].mean(1)
    return out


def bootstrap_recall(ranks: np.ndarray, reference: np.ndarray, k: int, *, n_resamples: int = 10_000,
                     seed: int = 0) -> Bootstrap:
    """Paired bootstrap of R@k(run) − R@k(reference) for one rank array each (see :func:`paired_bootstrap`)."""
    return paired_bootstrap({"ranks": ranks}, {"ranks": reference}, (k,), n_resamples=n_resamples, seed=seed)


def query_testable(metric: str) -> bool:
    """Whether ``metric`` is a recall, an rsum or a mAP over the whole gallery, i.e. has a bootstrap over
    test queries."""
    return metric == "rsum" or metric.endswith("/rsum") or bool(_RECALL.match(metric) or _MAP.match(metric))


def rank_keys(metric: str, metrics_config: Mapping[str, Any]) -> tuple[list[str], list[int]]:
    """Rank-file keys and ks whose recalls sum to ``metric``.

    ``a2b/R@1`` -> (['a2b/pair'], [1]); ``a2b/class_R@5`` -> (['a2b/class'], [5]);
    ``5folds/rsum`` -> (['5folds/i2t/pair', '5folds/t2i/pair'], ks); ``i2t/class_mAP`` ->
    (['i2t/class/AP'], []): per-query average precisions. MedR and MeanR have no bootstrap here
    (a median is not a mean of per-query terms) and raise ConfigError.
    """
    ap = _MAP.match(metric)
    if ap:
        return [f"{ap['head']}/{'class' if ap['rel'] else 'pair'}/AP"], []
    if metric == "rsum" or metric.endswith("/rsum"):
        prefix = metric[:-len("rsum")]
        return [f"{prefix}{d}/pair" for d in metrics_config["directions"]], list(metrics_config["ks"])
    match = _RECALL.match(metric)
    if not match:
        raise ConfigError(f"no query-level test for metric {metric!r}; valid: <direction>/R@k, "
                          f"<direction>/class_R@k, <direction>/mAP, <direction>/class_mAP, rsum "
                          "(with an optional '<n>folds/' prefix)")
    relevance = "class" if match["rel"] else "pair"
    return [f"{match['head']}/{relevance}"], [int(match["k"])]


def load_ranks(result: Mapping[str, Any], keys: Sequence[str]) -> dict[str, np.ndarray] | None:
    """The per-query ranks ``keys`` of a result dict, read from the ``.npz`` its ``ranks`` key names
    (relative to the folder of ``_path``); ``None`` when the file, or one of the keys, is absent."""
    name, where = result.get("ranks"), result.get("_path")
    if not name or not where:
        return None
    path = Path(where).parent / name
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as npz:
        if any(k not in npz.files for k in keys):
            return None
        return {k: npz[k] for k in keys}


def seed_values(results: Sequence[Mapping[str, Any]], metric: str) -> dict[int, float]:
    """{seed: value of ``metric``} of one run's result dicts (seeds lacking the metric left out)."""
    return {r["seed"]: float(r["metrics"][metric]) for r in results if metric in r["metrics"]}


def compare_runs(runs: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]], metric: str, *,
                 n_resamples: int = 10_000, seed: int = 0, alpha: float = 0.05) -> Comparison:
    """Seed-level paired test and per-seed query bootstraps of ``metric`` between two runs.

    Per-seed bootstrap p-values are combined by their maximum: "the run differs from the
    reference on every seed's model" is an intersection–union hypothesis, and rejecting it when
    the largest p is below ``alpha`` keeps the level ``alpha`` with no multiplicity correction.
    ``n_significant`` counts the seeds with p < ``alpha`` for the reader's sake.
    """
    test = paired_seed_test(seed_values(runs, metric), seed_values(reference, metric))
    if not runs or not reference or not query_testable(metric):
        return Comparison(test)
    keys, ks = rank_keys(metric, runs[0]["config"]["metrics"])
    ref_by_seed = {r["seed"]: r for r in reference}
    boots = {}
    for r in sorted(runs, key=lambda r: r["seed"]):
        theirs = load_ranks(ref_by_seed[r["seed"]], keys) if r["seed"] in ref_by_seed else None
        mine = load_ranks(r, keys) if theirs is not None else None
        if mine is None or theirs is None:
            continue
        try:
            boots[r["seed"]] = paired_bootstrap(mine, theirs, ks, n_resamples=n_resamples, seed=seed)
        except ConfigError as err:
            raise ConfigError(f"{r['run_name']} vs {ref_by_seed[r['seed']]['run_name']}, seed {r['seed']}: "
                              f"{err}") from None
    ps = [b.p for b in boots.values()]
    return Comparison(test, boots, max(ps) if ps else None, sum(p < alpha for p in ps))


def p_text(p: float, relation: bool = False) -> str:
    """A p-value as every table and the ledger write it: '0.012', '<0.001' below 0.001; with ``relation``,
    '= 0.012' or '< 0.001' (to follow a 'p')."""
    if p < 0.001:
        return "< 0.001" if relation else "<0.001"
    return f"= {p:.3f}" if relation else f"{p:.3f}"
