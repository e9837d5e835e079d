"""Full retrieval on a split, as three separately timeable parts: encode, score, rank.

A protocol with n folds cuts the a items into n consecutive equal folds (MS-COCO 1K: five
folds of 1,000 test images), each with the b items paired to it; items are scored only
within their fold and the metrics are averaged over folds. One fold is the whole split.

Two paths rank a fold (``test.path``): the full path forms the fold's whole score matrix and ranks it
(:func:`score_folds`, :func:`rank_folds`); the streaming path scores blocks of ``block_a`` a items ×
``block_b`` b items and keeps per query only what the metrics need (:func:`stream_folds`,
:mod:`harness.ops.streaming`), so that its memory is bounded by the blocks. For a method that scores in
blocks (:attr:`Method.scores_in_blocks`) the full path fills its matrix from the same blocks, so the two
paths see the same scores and give the same metrics bit for bit.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from harness.config.metrics import fold_prefix, metric_name
from harness.config.spec import DIRECTIONS, MetricSpec, TestSpec
from harness.data.paired import Split, concat, take, to_device
from harness.errors import ConfigError
from harness.method import Method
from harness.ops import streaming
from harness.ops.metrics import (
    class_relevance,
    mean_over_folds,
    pair_relevance,
    precision_metrics,
    query_ranks,
    recall_sum,
    summarize_ranks,
)

Fold = tuple[torch.Tensor, torch.Tensor]  # (a indices, b indices)


@torch.no_grad()
def encode_split(method: Method, split: Split, device: torch.device, batch_size: int) -> tuple[Any, Any]:
    """Embeddings of every a item and every b item, in eval mode, batch by batch (tensors, or tuples
    of tensors such as per-word features and lengths, joined by :func:`harness.data.paired.concat`)."""
    method.eval()
    out = []
    for modality, feats in (("a", split.a), ("b", split.b)):
        chunks = [method.encode(modality, to_device(take(feats, idx), device))
                  for idx in torch.split(torch.arange(len(feats)), batch_size)]
        out.append(concat(chunks))
    return out[0], out[1]


DEFAULT_BLOCKS = (TestSpec.block_a, TestSpec.block_b)


def streams(method: Method, test: TestSpec) -> bool:
    """Whether the test retrieval streams over blocks: ``test.path`` stream or full, or for auto whether the method
    scores in blocks. ConfigError when stream is asked of a method that cannot."""
    if test.path == "full":
        return False
    if test.path == "stream" and not method.scores_in_blocks:
        raise ConfigError(f"test.path stream: {type(method).__name__} cannot score in blocks (its scorer needs the "
                          "whole score matrix); use test.path auto or full")
    return method.scores_in_blocks


def rows_of(emb: Any, lo: int, hi: int) -> Any:
    """Embeddings ``lo:hi`` (a view of a tensor; a copy of other layouts)."""
    return emb[lo:hi] if isinstance(emb, torch.Tensor) else take(emb, torch.arange(lo, hi))


@torch.no_grad()
def score_block(method: Method, emb_a: Any, emb_b: Any, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> torch.Tensor:
    """Block (a_lo:a_hi, b_lo:b_hi) of the score matrix as float32 on the CPU: how both paths compute it."""
    return method.score(rows_of(emb_a, a_lo, a_hi), rows_of(emb_b, b_lo, b_hi)).float().cpu()


@torch.no_grad()
def score_split(method: Method, emb_a: Any, emb_b: Any, deadline: float | None = None,
                blocks: tuple[int, int] | None = None) -> tuple[torch.Tensor, float]:
    """(n_a, n_b) similarity matrix, moved to the CPU for ranking, and the fraction of it computed before
    ``deadline`` (a ``time.perf_counter()`` value; None: no limit; see :meth:`Method.score_within`). For a
    method that scores in blocks the matrix is filled block by block (``blocks``: a and b items per block), as
    the streaming path computes it."""
    if not method.scores_in_blocks:
        sims, fraction = method.score_within(emb_a, emb_b, deadline)
        return sims.float().cpu(), fraction
    block_a, block_b = blocks or DEFAULT_BLOCKS
    n_a, n_b = _length(emb_a), _length(emb_b)
    sims = torch.empty(n_a, n_b)
    for a_lo, a_hi in streaming.blocks(n_a, block_a):
        for b_lo, b_hi in streaming.blocks(n_b, block_b):
            sims[a_lo:a_hi, b_lo:b_hi] = score_block(method, emb_a, emb_b, a_lo, a_hi, b_lo, b_hi)
    return sims, 1.0


def _length(emb: Any) -> int:
    return len(emb) if isinstance(emb, torch.Tensor) else len(emb[0]) if isinstance(emb, (tuple, list)) else len(emb)


@torch.no_grad()
def pair_pass(method: Method, split: Split, device: torch.device, batch_size: int,
              timer: Callable[[str], Any], tag: str = "") -> None:
    """The part of a released evaluation that the protocol's encode/score/rank leaves out (see
    :attr:`Method.times_pair_pass`): every b item in order, batch by batch, encoded with its own a item (an
    a item is encoded once per b item paired with it), timed as ``test_pair_encode<tag>``; then the method's
    training loss of every such batch, timed as ``test_loss<tag>``. ``timer(key)`` is a context manager
    that adds the block's wall-clock to ``key``. The results are discarded: only the cost counts."""
    method.eval()
    order = torch.split(torch.arange(len(split.b)), batch_size)
    b_to_a = split.b_to_a
    if b_to_a is None:
        raise ConfigError("the pair pass encodes each b item with its a item: the split needs a pairing (b_to_a)")
    with timer(f"test_pair_encode{tag}"):
        batches = [(method.encode("a", to_device(take(split.a, b_to_a[idx]), device)),
                    method.encode("b", to_device(take(split.b, idx), device))) for idx in order]
    with timer(f"test_loss{tag}"):
        for emb_a, emb_b in batches:
            method.embedded_loss(emb_a, emb_b)


def make_folds(split: Split, n_folds: int) -> list[Fold]:
    """(a indices, b indices) of ``n_folds`` consecutive equal folds of the a items, each with the b
    items paired to them (five captions per image: caption j follows image j // 5)."""
    n_a = len(split.a)
    if split.b_to_a is None:  # class-only split: one fold, every item
        if n_folds != 1:
            raise ConfigError(f"a split without pairing cannot be cut into {n_folds} folds; use folds: [1]")
        return [(torch.arange(n_a), torch.arange(len(split.b)))]
    if n_folds < 1 or n_a % n_folds:
        raise ConfigError(f"{n_a} items cannot be cut into {n_folds} equal folds; use a fold count dividing {n_a}")
    size = n_a // n_folds
    return [(torch.arange(lo, lo + size), ((split.b_to_a >= lo) & (split.b_to_a < lo + size)).nonzero().squeeze(1))
            for lo in range(0, n_a, size)]


@torch.no_grad()
def score_folds(method: Method, emb_a: Any, emb_b: Any, folds: list[Fold],
                budget_s: float | None = None,
                blocks: tuple[int, int] | None = None) -> tuple[list[torch.Tensor], float]:
    """One score matrix per fold (the full matrix when there is a single fold) and the fraction of all
    fold pairs scored. With ``budget_s`` (seconds for all folds together) scoring stops when the budget
    is spent: the last block returned may be partial (NaN where not scored) and later folds are absent."""
    deadline = None if budget_s is None else time.perf_counter() + budget_s
    blocks_out, done = [], 0.0
    for a, b in folds:
        sub_a, sub_b = (emb_a, emb_b) if len(folds) == 1 else (take(emb_a, a), take(emb_b, b))
        sims, fraction = score_split(method, sub_a, sub_b, deadline, blocks)
        blocks_out.append(sims)
        done += fraction * len(a) * len(b)
        if fraction < 1:
            break
    total = sum(len(a) * len(b) for a, b in folds)
    return blocks_out, done / total if total else 1.0


class BlockClock:
    """Seconds spent inside the scorer while streaming (``score_s``), the blocks scored, and those scored by
    the first pass too (``rescored``)."""

    def __init__(self, device: torch.device | None = None):
        self.device, self.score_s, self.blocks, self.rescored = device, 0.0, 0, 0

    def record(self) -> dict[str, Any]:
        return {"score_s": self.score_s, "blocks": self.blocks, "blocks_scored_twice": self.rescored}


@torch.no_grad()
def stream_folds(method: Method, emb_a: Any, emb_b: Any, folds: list[Fold], split: Split, metrics: MetricSpec,
                 blocks: tuple[int, int] | None = None, ranks: dict[str, torch.Tensor] | None = None,
                 clock: BlockClock | None = None) -> dict[str, float]:
    """The metrics of :func:`rank_folds` without forming any fold's score matrix: each fold's blocks are scored
    (twice for the blocks holding relevant pairs, see :mod:`harness.ops.streaming`) and ranked as they come.
    ``clock`` receives the seconds spent scoring; the rest is ranking."""
    block_a, block_b = blocks or DEFAULT_BLOCKS
    clock = clock or BlockClock()
    per_fold: list[dict[str, float]] = []
    per_fold_ranks: list[dict[str, torch.Tensor]] = []
    for a, b in folds:
        sub_a, sub_b = (emb_a, emb_b) if len(folds) == 1 else (take(emb_a, a), take(emb_b, b))
        labels_a = split.labels_a[a] if split.labels_a is not None else None
        labels_b = split.labels_b[b] if split.labels_b is not None else None
        b_to_a = None if split.b_to_a is None else split.b_to_a[b] - a[0]
        per_fold_ranks.append({})
        per_fold.append(_stream_rank(method, sub_a, sub_b, len(a), len(b), b_to_a, labels_a, labels_b, metrics,
                                     block_a, block_b, clock, per_fold_ranks[-1]))
    prefix = fold_prefix(len(folds))
    if ranks is not None:
        ranks.update({f"{prefix}{k}": torch.cat([r[k] for r in per_fold_ranks]) for k in per_fold_ranks[0]})
    mean = per_fold[0] if len(per_fold) == 1 else mean_over_folds(per_fold, metrics.directions, metrics.ks)
    return {f"{prefix}{k}": v for k, v in mean.items()}


def _stream_rank(method: Method, emb_a: Any, emb_b: Any, n_a: int, n_b: int, b_to_a: torch.Tensor | None,
                 labels_a: torch.Tensor | None, labels_b: torch.Tensor | None, metrics: MetricSpec, block_a: int,
                 block_b: int, clock: BlockClock, ranks: dict[str, torch.Tensor]) -> dict[str, float]:
    """:func:`_rank` of one fold, streamed."""
    _check_relevance(b_to_a, labels_a, labels_b, metrics.relevance)
    relevances = {kind: streaming.Relevance(kind, b_to_a=b_to_a, labels_a=labels_a, labels_b=labels_b)
                  for kind in metrics.relevance}
    orientation = {d: "b" if DIRECTIONS[d] else "a" for d in metrics.directions}
    wanted = streaming.Wanted(ap=metrics.map, ap_ks=metrics.map_at, precision_ks=metrics.precision_at) \
        if metrics.precision_stats() else streaming.Wanted()
    ranker = streaming.StreamRanker(n_a, n_b, relevances, tuple(set(orientation.values())), wanted,
                                    block_a=block_a, block_b=block_b)
    ranker.check([(orientation[d], kind) for d in metrics.directions for kind in metrics.relevance])
    seen: set[tuple[int, int]] = set()

    def scores_of(a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> torch.Tensor:
        start = time.perf_counter()
        block = score_block(method, emb_a, emb_b, a_lo, a_hi, b_lo, b_hi)  # .cpu() waits for the device
        clock.score_s += time.perf_counter() - start
        if (a_lo, b_lo) in seen:
            clock.rescored += 1
        else:
            clock.blocks += 1
            seen.add((a_lo, b_lo))
        return block

    streaming.stream(scores_of, n_a, n_b, ranker, block_a, block_b)
    out: dict[str, float] = {}
    for direction in metrics.directions:
        for relevance in metrics.relevance:
            query = ranker.ranks(orientation[direction], relevance)
            stats = summarize_ranks(query, metrics.ks)
            per_query: dict[str, torch.Tensor] = {}
            if metrics.precision_stats():
                precision, per_query = ranker.precision(orientation[direction], relevance)
                stats.update(precision)
            _record(out, ranks, direction, relevance, query, stats, per_query)
    return _with_rsum(out, metrics)


def rank_folds(blocks: list[torch.Tensor], folds: list[Fold], split: Split, metrics: MetricSpec,
               ranks: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    """Metrics of each fold's block, averaged over folds (rsum recomputed from the mean recalls),
    named with the protocol's prefix ('' or '<n>folds/'). When ``ranks`` is given, every query's
    rank is stored in it under '<prefix><direction>/<relevance>' and, with ``map``, its average precision
    under '<prefix><direction>/<relevance>/AP' (folds concatenated in order)."""
    per_fold: list[dict[str, float]] = []
    per_fold_ranks: list[dict[str, torch.Tensor]] = []
    for sims, (a, b) in zip(blocks, folds):
        labels_b = split.labels_b[b] if split.labels_b is not None else None
        labels_a = split.labels_a[a] if split.labels_a is not None else None
        per_fold_ranks.append({})
        b_to_a = None if split.b_to_a is None else split.b_to_a[b] - a[0]
        per_fold.append(_rank(sims, b_to_a, labels_a, labels_b, metrics, per_fold_ranks[-1]))
    prefix = fold_prefix(len(folds))
    if ranks is not None:
        ranks.update({f"{prefix}{k}": torch.cat([r[k] for r in per_fold_ranks]) for k in per_fold_ranks[0]})
    mean = per_fold[0] if len(per_fold) == 1 else mean_over_folds(per_fold, metrics.directions, metrics.ks)
    return {f"{prefix}{k}": v for k, v in mean.items()}


def rank_split(sims: torch.Tensor, split: Split, metrics: MetricSpec) -> dict[str, float]:
    """All requested metrics of a whole split, named '<direction>/<prefix><stat>' (e.g. 'a2b/class_R@1')."""
    return _rank(sims, split.b_to_a, split.labels_a, split.labels_b, metrics)


def _check_relevance(b_to_a: torch.Tensor | None, labels_a: torch.Tensor | None, labels_b: torch.Tensor | None,
                     relevance: tuple[str, ...]) -> None:
    """ConfigError when a requested relevance lacks what defines it (a pairing, labels)."""
    if "pair" in relevance and b_to_a is None:
        raise ConfigError("pair-based metrics need a pairing, which this split lacks; use relevance: [class]")
    if "class" in relevance and (labels_a is None or labels_b is None):
        raise ConfigError("class-based metrics need hidden labels, which this dataset lacks")


def _masks(sims: torch.Tensor, b_to_a: torch.Tensor | None, labels_a: torch.Tensor | None,
           labels_b: torch.Tensor | None, relevance: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """(n_a, n_b) relevance mask per requested relevance ('pair', 'class')."""
    _check_relevance(b_to_a, labels_a, labels_b, relevance)
    masks = {}
    if "pair" in relevance and b_to_a is not None:  # _check_relevance: a pairing when pair relevance is asked
        masks["pair"] = pair_relevance(b_to_a, sims.shape[0])
    if "class" in relevance and labels_a is not None and labels_b is not None:  # likewise the labels
        masks["class"] = class_relevance(labels_a, labels_b)
    return masks


def _rank(sims: torch.Tensor, b_to_a: torch.Tensor | None, labels_a: torch.Tensor | None,
          labels_b: torch.Tensor | None, metrics: MetricSpec,
          ranks: dict[str, torch.Tensor] | None = None) -> dict[str, float]:
    masks = _masks(sims, b_to_a, labels_a, labels_b, metrics.relevance)
    out: dict[str, float] = {}
    for direction in metrics.directions:
        for relevance in metrics.relevance:
            rel = masks[relevance]
            s, rel = (sims.T, rel.T) if DIRECTIONS[direction] else (sims, rel)
            query = query_ranks(s, rel)
            per_query: dict[str, torch.Tensor] = {}
            stats = summarize_ranks(query, metrics.ks)
            if metrics.precision_stats():
                stats.update(precision_metrics(s, rel, ap=metrics.map, ap_ks=metrics.map_at,
                                               precision_ks=metrics.precision_at, per_query=per_query))
            _record(out, ranks, direction, relevance, query, stats, per_query)
    return _with_rsum(out, metrics)


def _record(out: dict[str, float], ranks: dict[str, torch.Tensor] | None, direction: str, relevance: str,
            query: torch.Tensor, stats: dict[str, float], per_query: dict[str, torch.Tensor]) -> None:
    """One (direction, relevance)'s statistics into ``out`` ('a2b/R@1', 'a2b/class_mAP'), and its per-query
    ranks and average precisions into ``ranks`` (for the paired bootstrap) when given."""
    if ranks is not None:
        ranks[f"{direction}/{relevance}"] = query
        ranks.update({f"{direction}/{relevance}/{k}": v for k, v in per_query.items()})
    for name, value in stats.items():
        out[metric_name(name, direction, relevance)] = value


def _with_rsum(out: dict[str, float], metrics: MetricSpec) -> dict[str, float]:
    if metrics.rsum:
        out["rsum"] = recall_sum(out, metrics.directions, metrics.ks)
    return out


def protocol_tag(n_folds: int) -> str:
    """Suffix of a protocol's timing and memory keys: '' for the whole split, '@5folds' for five folds."""
    return "" if n_folds == 1 else f"@{n_folds}folds"


def evaluate(method: Method, split: Split, metrics: MetricSpec, device: torch.device,
             batch_size: int, test: TestSpec | None = None) -> dict[str, float]:
    """Encode once, then score and rank for every protocol of ``metrics`` (used for validation), on the path
    ``test`` chooses (:func:`streams`; default: the task file's defaults)."""
    test = TestSpec() if test is None else test
    emb_a, emb_b = encode_split(method, split, device, batch_size)
    blocks = (test.block_a, test.block_b)
    out: dict[str, float] = {}
    for n_folds in metrics.folds:
        folds = make_folds(split, n_folds)
        if streams(method, test):
            out.update(stream_folds(method, emb_a, emb_b, folds, split, metrics, blocks))
        else:
            out.update(rank_folds(score_folds(method, emb_a, emb_b, folds, blocks=blocks)[0], folds, split, metrics))
    return out
