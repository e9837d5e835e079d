"""Seeds and significance: pure functions behind every mean over seeds the reports show and every test of a
difference they make (the accuracy table's markers and test columns, ``harness compare``, the claims ledger).

Two questions, two tests:

* over seeds — does the run beat the reference when the training seed changes? A paired
  t-test on the per-seed metric, pairing by seed (Wilcoxon signed-rank as a check from 5 seeds);
* over test queries — for one trained model, is the difference larger than the choice of test
  queries explains? A paired bootstrap that resamples query indices (the same indices for both
  runs, since query order is identical between runs of a task). Recalls are tested through the
  queries' ranks, mean average precision through the queries' average precisions.

One policy decides which test answers "does a run differ from another on a metric" (:func:`choose_test`), and
every reader asks it (the tables' markers, ``harness compare``, the claims ledger): the paired t-test over the seeds
both runs have when they share two or more; Welch's t-test (unpaired, unequal variances) when each has two or more
seeds but they share fewer; the paired bootstrap over test queries when they share one seed; no test otherwise. Every
test is read at one significance level, :data:`ALPHA`; the mean and spread over seeds come from :func:`summarize`.

Per-query ranks are 1-based int64 arrays saved beside each result file in an ``.npz`` keyed
``<fold prefix><direction>/<relevance>`` (``a2b/pair``, ``5folds/i2t/pair``); R@k of ranks r
is 100 · mean(r <= k), as in :func:`harness.ops.metrics.summarize_ranks`. With mAP, the same file
holds each query's average precision (0–1) under ``<direction>/<relevance>/AP``. An n-fold protocol's
ranks are the folds' ranks one after another; with folds of equal size, R@k over them equals
the mean of the per-fold R@k that the result file reports.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from scipy import stats as sps

from harness.config.metric_names import parse_metric
from harness.config.spec import fold_prefix
from harness.errors import ConfigError

ALPHA = 0.05  # the significance level of every test the reports make: tables, compare, the ledger (its rules' default)
N_RESAMPLES = 10_000  # resamples of each paired bootstrap over test queries
PAIRED_T, WELCH, BOOTSTRAP = "paired t", "Welch t", "bootstrap"  # the tests :func:`choose_test` chooses among


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
    x = [float(v) for v in values]
    mean = statistics.mean(x)  # exactly rounded, whatever the order of the seeds
    if len(x) == 1:
        return Summary(1, mean, None, None)
    std = statistics.stdev(x)
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
    diff = summarize(d.tolist()).mean
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
                     n_resamples: int = N_RESAMPLES, seed: int = 0, confidence: float = 0.95,
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


def bootstrap_recall(ranks: np.ndarray, reference: np.ndarray, k: int, *, n_resamples: int = N_RESAMPLES,
                     seed: int = 0) -> Bootstrap:
    """Paired bootstrap of R@k(run) − R@k(reference) for one rank array each (see :func:`paired_bootstrap`)."""
    return paired_bootstrap({"ranks": ranks}, {"ranks": reference}, (k,), n_resamples=n_resamples, seed=seed)


def query_testable(metric: str) -> bool:
    """Whether ``metric`` is a recall, an rsum or a mAP over the whole gallery, i.e. has a bootstrap over
    test queries."""
    try:
        name = parse_metric(metric)
    except ConfigError:
        return False
    return name.stat in ("rsum", "mAP") or name.recall_k is not None


def rank_keys(metric: str, metrics_config: Mapping[str, Any]) -> tuple[list[str], list[int]]:
    """Rank-file keys and ks whose recalls sum to ``metric``, from the parts of its name
    (:func:`harness.config.metric_names.parse_metric`).

    ``a2b/R@1`` -> (['a2b/pair'], [1]); ``a2b/class_R@5`` -> (['a2b/class'], [5]);
    ``5folds/rsum`` -> (['5folds/i2t/pair', '5folds/t2i/pair'], ks); ``i2t/class_mAP`` ->
    (['i2t/class/AP'], []): per-query average precisions. MedR and MeanR have no bootstrap here
    (a median is not a mean of per-query terms) and raise ConfigError.
    """
    name = parse_metric(metric)
    prefix = fold_prefix(name.folds)
    if name.stat == "rsum":
        return [f"{prefix}{d}/pair" for d in metrics_config["directions"]], list(metrics_config["ks"])
    if name.stat == "mAP":
        return [f"{prefix}{name.direction}/{name.relevance}/AP"], []
    if name.recall_k is None:
        raise ConfigError(f"no query-level test for metric {metric!r}; valid: <direction>/R@k, "
                          f"<direction>/class_R@k, <direction>/mAP, <direction>/class_mAP, rsum "
                          "(with an optional '<n>folds/' prefix)")
    return [f"{prefix}{name.direction}/{name.relevance}"], [name.recall_k]


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
                 n_resamples: int | None = None, seed: int = 0, alpha: float | None = None) -> Comparison:
    """Seed-level paired test and per-seed query bootstraps of ``metric`` between two runs.

    Per-seed bootstrap p-values are combined by their maximum: "the run differs from the
    reference on every seed's model" is an intersection–union hypothesis, and rejecting it when
    the largest p is below ``alpha`` keeps the level ``alpha`` with no multiplicity correction.
    ``n_significant`` counts the seeds with p < ``alpha`` for the reader's sake. ``n_resamples`` and ``alpha``
    default to :data:`N_RESAMPLES` and :data:`ALPHA`.
    """
    n_resamples = N_RESAMPLES if n_resamples is None else n_resamples
    alpha = ALPHA if alpha is None else alpha
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


def welch_test(values: Sequence[float], reference: Sequence[float]) -> float:
    """Welch's t-test (unpaired, unequal variances) of two samples of at least two values each: its p. Two
    constant samples make t infinite: p = 1 when they are equal, else 0."""
    a, b = [float(v) for v in values], [float(v) for v in reference]
    if max(a) == min(a) and max(b) == min(b):
        return 1.0 if a[0] == b[0] else 0.0
    return float(sps.ttest_ind(a, b, equal_var=False).pvalue)


def choose_test(seeds: Sequence[int], reference_seeds: Sequence[int], metric: str, queries: bool = True) -> str | None:
    """The significance policy: the test that says whether a run (its ``seeds``) differs from a reference (its
    ``reference_seeds``) on ``metric``. The paired t-test over the common seeds when there are two or more; else
    Welch's t-test when each side has two seeds or more; else, when they share one seed and ``metric`` is a sum
    of per-query terms (recalls, rsum, mAP), the paired bootstrap over that seed's test queries; else none.
    ``queries`` False leaves the bootstrap out, for a reader that shows the query-level test in a column of its
    own (the accuracy table)."""
    common = set(seeds) & set(reference_seeds)
    if len(common) >= 2:
        return PAIRED_T
    if len(set(seeds)) >= 2 and len(set(reference_seeds)) >= 2:
        return WELCH
    if len(common) == 1 and queries and query_testable(metric):
        return BOOTSTRAP
    return None


@dataclass(frozen=True)
class Difference:
    """A run against a reference on one metric, tested as :func:`choose_test` says (:func:`significance`).

    ``diff`` is the mean over the common seeds of run − reference (Welch: the difference of the two means; None
    without values), ``ci`` the 95% interval of that difference (the Student-t interval over the seeds' differences,
    or the bootstrap's percentile interval; None where the test gives none), ``p`` the chosen test's p (None: no
    test, or no per-query ranks for the bootstrap), ``n`` the seeds it used and ``seeds`` the paired t-test over the
    common seeds, whichever test was chosen."""

    test: str | None
    diff: float | None
    p: float | None
    ci: tuple[float, float] | None
    n: int
    seeds: PairedTest

    @property
    def significant(self) -> bool:
        """Whether the chosen test rejects 'no difference' at :data:`ALPHA`."""
        return self.p is not None and self.p < ALPHA

    @property
    def how(self) -> str:
        """The test as a reason names it: 'paired t over 3 seeds', 'paired bootstrap over test queries, 1 seed'."""
        if self.test == PAIRED_T:
            return f"paired t over {self.n} seeds"
        if self.test == WELCH:
            return f"Welch t over {self.n} seeds"
        if self.test == BOOTSTRAP:
            return "paired bootstrap over test queries, 1 seed" if self.p is not None else \
                "1 seed, no per-query ranks"
        return f"no test over {self.n} seed(s)"


def seed_significance(values: Mapping[int, float], reference: Mapping[int, float]) -> Difference:
    """Per-seed ``values`` of a run against ``reference``'s ({seed: value}), tested by the test the policy chooses
    from the seeds alone (:func:`choose_test` without the query-level test): the paired t-test over the common
    seeds, or Welch's t-test, or none."""
    paired = paired_seed_test(values, reference)
    test = choose_test(list(values), list(reference), "", queries=False)
    common = sorted(set(values) & set(reference))
    if test == PAIRED_T:
        ci = summarize([values[s] - reference[s] for s in common]).ci
        return Difference(test, paired.diff, paired.p, ci, len(common), paired)
    if test == WELCH:
        diff = summarize(list(values.values())).mean - summarize(list(reference.values())).mean
        return Difference(test, diff, welch_test(list(values.values()), list(reference.values())), None,
                          len(values) + len(reference), paired)
    return Difference(None, paired.diff, None, None, len(common), paired)


def significance(runs: Sequence[Mapping[str, Any]], reference: Sequence[Mapping[str, Any]], metric: str, *,
                 queries: bool = True, n_resamples: int | None = None) -> Difference:
    """``metric`` of the run ``runs`` (result dicts, one per seed) against ``reference``'s, tested by the test the
    policy chooses (:func:`choose_test`): over seeds as :func:`seed_significance` does, or, for one common seed, the
    paired bootstrap over its test queries (``queries`` False: not that one)."""
    mine, theirs = seed_values(runs, metric), seed_values(reference, metric)
    if choose_test(list(mine), list(theirs), metric, queries) != BOOTSTRAP:
        return seed_significance(mine, theirs)
    (seed,) = sorted(set(mine) & set(theirs))
    boot = compare_runs([r for r in runs if r["seed"] == seed], [r for r in reference if r["seed"] == seed],
                        metric, n_resamples=n_resamples).bootstrap.get(seed)
    paired = paired_seed_test(mine, theirs)
    return Difference(BOOTSTRAP, paired.diff, boot.p if boot else None, boot.ci if boot else None, 1, paired)


def interval_text(ci: tuple[float, float] | None) -> str:
    """A difference's interval as every table and the ledger write it ('[+0.12, +1.34]'); '' without a finite one."""
    return f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci and all(math.isfinite(c) for c in ci) else ""


def p_text(p: float, relation: bool = False) -> str:
    """A p-value as every table and the ledger write it: '0.012', '<0.001' below 0.001; with ``relation``,
    '= 0.012' or '< 0.001' (to follow a 'p')."""
    if p < 0.001:
        return "< 0.001" if relation else "<0.001"
    return f"= {p:.3f}" if relation else f"{p:.3f}"
