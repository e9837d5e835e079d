"""Retrieval metrics of a score matrix seen one block at a time, equal bit for bit to :mod:`harness.ops.metrics`
on the whole matrix, with memory bounded by the blocks instead of n_a × n_b.

The caller cuts the (n_a, n_b) score matrix into blocks (a items × b items) and hands each block over twice:

1. :meth:`StreamRanker.first` for the blocks holding a relevant pair (:meth:`StreamRanker.holds_relevant`): each
   query's best relevant score and, for average precision, the score of every relevant pair;
2. :meth:`StreamRanker.second` for every block, b blocks in increasing order within each a block and a blocks
   in increasing order overall: per query, the non-relevant items scoring at least as high as its best relevant
   one (the rank rule of :func:`harness.ops.metrics.query_ranks`), for average precision how many items score
   at least as high as (and higher than) each relevant score, and for mAP@k and P@k a running top-k list in
   the pessimistic order of :func:`harness.ops.metrics.pessimistic_order` (score descending, non-relevant
   before relevant, then gallery index).

:meth:`StreamRanker.metrics` then gives exactly what :func:`harness.ops.metrics.summarize_ranks` and
:func:`harness.ops.metrics.precision_metrics` give on the whole matrix: the same integer ranks, and average
precisions summed by the same float64 reductions over tensors of the same shapes (a query's average precision
is rebuilt as the row of hit-weighted precisions the whole-matrix code sums, in the same row chunks), so the
statistics agree to the bit. NaN scores count as -inf, as there.

Queries are the a items (orientation 'a', the score matrix's rows: a2b) or the b items (orientation 'b', its
columns: b2a). Memory beyond one block: a few values per query, one score per relevant pair when average
precision is asked for, and k entries per query for mAP@k and P@k.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from harness.ops.metrics import ap_of_sorted, order_of_clean, ordering_scores

ORIENTATIONS = ("a", "b")


def stream(scores_of: Callable[[int, int, int, int], torch.Tensor], n_a: int, n_b: int, ranker: "StreamRanker",
           block_a: int, block_b: int) -> None:
    """Both passes of ``ranker`` over the blocks of an (n_a, n_b) score matrix; ``scores_of(a_lo, a_hi, b_lo, b_hi)``
    returns one block's float32 CPU scores (the caller times it)."""
    ranker.holding = set()
    kept = None  # a matrix of one block is scored once: the first pass keeps it for the second
    for a_lo, a_hi in blocks(n_a, block_a):
        for b_lo, b_hi in blocks(n_b, block_b):
            masks = ranker.masks(a_lo, a_hi, b_lo, b_hi)
            if ranker.holds_relevant(masks):
                ranker.holding.add((a_lo, b_lo))
                scores = scores_of(a_lo, a_hi, b_lo, b_hi)
                ranker.first(scores, a_lo, b_lo, masks)
                kept = scores if n_a <= block_a and n_b <= block_b else None
    ranker.finish_first()
    for a_lo, a_hi in blocks(n_a, block_a):
        for b_lo, b_hi in blocks(n_b, block_b):
            ranker.second(kept if kept is not None else scores_of(a_lo, a_hi, b_lo, b_hi), a_lo, b_lo)


class Relevance:
    """Which b items are relevant to which a items, one block at a time: 'pair' (b item j belongs to a item
    ``b_to_a[j]``, :func:`harness.ops.metrics.pair_relevance`) or 'class' (same label,
    :func:`harness.ops.metrics.class_relevance`)."""

    def __init__(self, kind: str, *, b_to_a: torch.Tensor | None = None, labels_a: torch.Tensor | None = None,
                 labels_b: torch.Tensor | None = None):
        if kind not in ("pair", "class"):
            raise ValueError(f"relevance must be 'pair' or 'class', got {kind!r}")
        if kind == "pair" and b_to_a is None or kind == "class" and (labels_a is None or labels_b is None):
            raise ValueError(f"{kind} relevance needs {'b_to_a' if kind == 'pair' else 'labels_a and labels_b'}")
        self.kind, self.b_to_a, self.labels_a, self.labels_b = kind, b_to_a, labels_a, labels_b

    def block(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> torch.Tensor:
        """(a_hi - a_lo, b_hi - b_lo) bool mask of the block."""
        if self.kind == "pair":
            return torch.arange(a_lo, a_hi)[:, None] == self._pairs()[b_lo:b_hi][None, :]
        labels_a, labels_b = self._labels()
        return labels_a[a_lo:a_hi][:, None] == labels_b[b_lo:b_hi][None, :]

    def counts(self, n_a: int, n_b: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Relevant items per a item (n_a,) and per b item (n_b,), int64, without forming the mask."""
        if self.kind == "pair":
            b_to_a = self._pairs()
            inside = (b_to_a >= 0) & (b_to_a < n_a)
            return torch.bincount(b_to_a[inside].long(), minlength=n_a), inside.long()
        labels_a, labels_b = self._labels()
        return _label_counts(labels_a, labels_b), _label_counts(labels_b, labels_a)

    def _pairs(self) -> torch.Tensor:
        if self.b_to_a is None:  # the constructor requires it for 'pair'
            raise ValueError("pair relevance needs b_to_a")
        return self.b_to_a

    def _labels(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self.labels_a is None or self.labels_b is None:  # the constructor requires them for 'class'
            raise ValueError("class relevance needs labels_a and labels_b")
        return self.labels_a, self.labels_b


def _label_counts(queries: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
    """For each query label, how many gallery items carry it."""
    values, counts = torch.unique(gallery, return_counts=True)
    if len(values) == 0:
        return torch.zeros(len(queries), dtype=torch.long)
    pos = torch.searchsorted(values, queries.contiguous()).clamp_max(len(values) - 1)
    return torch.where(values[pos] == queries, counts[pos], 0)


@dataclass(frozen=True)
class Wanted:
    """What to compute per query beyond its rank: average precision ('mAP'), mAP@k and P@k."""

    ap: bool = False
    ap_ks: tuple[int, ...] = ()
    precision_ks: tuple[int, ...] = ()

    @property
    def top(self) -> int:
        """Length of the running top list (0: none kept)."""
        return max((*self.ap_ks, *self.precision_ks), default=0)


def blocks(n: int, size: int) -> list[tuple[int, int]]:
    """Consecutive (lo, hi) ranges of at most ``size`` covering range(n)."""
    return [(lo, min(n, lo + size)) for lo in range(0, n, size)]


def _rank_scores(scores: torch.Tensor) -> torch.Tensor:
    """float32 scores as :func:`harness.ops.metrics.query_ranks` reads a chunk of queries holding a NaN score: NaN
    as -inf (and, as ``torch.nan_to_num`` does, ±inf as ±the largest finite float32). A chunk without NaN is
    read as it is."""
    return torch.nan_to_num(scores, nan=-math.inf)


class _Side:
    """The state of one (orientation, relevance) pair of queries."""

    def __init__(self, n_queries: int, n_gallery: int, per_query: torch.Tensor):
        self.n, self.g, self.m = n_queries, n_gallery, per_query
        # the rank rule reads a chunk of queries with a NaN score through _rank_scores, other chunks as they are:
        # both readings are kept until the end says which chunk holds a NaN
        self.best = torch.full((n_queries,), -math.inf)  # scores as they are
        self.best_read = torch.full((n_queries,), -math.inf)  # through _rank_scores
        self.beaten = torch.zeros(n_queries, dtype=torch.long)
        self.beaten_read = torch.zeros(n_queries, dtype=torch.long)
        self.has_nan = torch.zeros(n_queries, dtype=torch.bool)
        self.pairs: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # (query, gallery, score)
        self.sorted: torch.Tensor | None = None  # (n, m_max) relevant scores ascending, +inf padded
        self.gallery: torch.Tensor | None = None  # (n, m_max) their gallery indices
        self.hist_ge: torch.Tensor | None = None  # (n, m_max + 1) items by how many relevant scores they reach
        self.hist_gt: torch.Tensor | None = None  # (n, m_max + 1) items by how many relevant scores they exceed
        self.top: dict[int, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}  # query lo -> (scores, rel, idx)

    def laid_out(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(sorted, gallery, hist_ge, hist_gt), which :meth:`StreamRanker.finish_first` lays out for AP."""
        if self.sorted is None or self.gallery is None or self.hist_ge is None or self.hist_gt is None:
            raise RuntimeError("average precision needs StreamRanker.finish_first with Wanted.ap")
        return self.sorted, self.gallery, self.hist_ge, self.hist_gt


class StreamRanker:
    """Rank statistics of every requested (orientation, relevance) from blocks of the score matrix (module
    docstring). ``relevances``: kind -> :class:`Relevance`; ``orientations``: 'a' (queries are a items) and/or
    'b'. ValueError, as :func:`harness.ops.metrics.query_ranks` raises it, when a query has no relevant item."""

    def __init__(self, n_a: int, n_b: int, relevances: dict[str, Relevance], orientations: tuple[str, ...],
                 wanted: Wanted = Wanted(), *, block_a: int, block_b: int, chunk_elems: int = 2**22):
        self.n_a, self.n_b, self.relevances, self.wanted, self.chunk_elems = n_a, n_b, relevances, wanted, chunk_elems
        self.block_a, self.block_b = block_a, block_b  # the caller's block sizes (a items, b items)
        self.orientations = tuple(o for o in ORIENTATIONS if o in orientations)
        self.sides: dict[tuple[str, str], _Side] = {}
        for kind, relevance in relevances.items():
            per_a, per_b = relevance.counts(n_a, n_b)
            for o in self.orientations:
                per_query = per_a if o == "a" else per_b
                self.sides[o, kind] = _Side(n_a if o == "a" else n_b, n_b if o == "a" else n_a, per_query)
        self._first_done = False
        # (a_lo, b_lo) of the blocks holding a relevant pair (stream() fills it in the first pass); None: unknown,
        # every block's masks are formed
        self.holding: set[tuple[int, int]] | None = None
        self._reached: torch.Tensor | None = None  # float32 scratch of one block (second pass)

    def check(self, order: list[tuple[str, str]]) -> None:
        """ValueError naming the first query without a relevant item, visiting (orientation, kind) in ``order``."""
        for key in order:
            missing = (self.sides[key].m == 0).nonzero()
            if len(missing):
                raise ValueError(f"query {int(missing[0])} has no relevant gallery item")

    def masks(self, a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> dict[str, torch.Tensor]:
        """The block's relevance mask per kind."""
        return {kind: r.block(a_lo, a_hi, b_lo, b_hi) for kind, r in self.relevances.items()}

    def holds_relevant(self, masks: dict[str, torch.Tensor]) -> bool:
        """Whether the first pass needs the block's scores."""
        return any(bool(m.any()) for m in masks.values())

    def first(self, scores: torch.Tensor, a_lo: int, b_lo: int, masks: dict[str, torch.Tensor]) -> None:
        """First pass over a block holding relevant pairs: best relevant scores and, for AP, every relevant score."""
        s = scores.float()
        for kind, mask in masks.items():
            i, j = mask.nonzero(as_tuple=True)
            if not len(i):
                continue
            raw = s[i, j]
            read = _rank_scores(raw)
            for o in self.orientations:
                side = self.sides[o, kind]
                q = i + a_lo if o == "a" else j + b_lo
                # max is exact in any order; a NaN relevant score puts its query's chunk on the read scores
                side.best.scatter_reduce_(0, q, raw, reduce="amax")
                side.best_read.scatter_reduce_(0, q, read, reduce="amax")
                if self.wanted.ap:
                    g = j + b_lo if o == "a" else i + a_lo
                    side.pairs.append((q, g, ordering_scores(raw)))

    def finish_first(self) -> None:
        """After the first pass: lay out each query's relevant scores for the second (AP only)."""
        self._first_done = True
        if not self.wanted.ap:
            return
        for side in self.sides.values():
            q = torch.cat([p[0] for p in side.pairs]) if side.pairs else torch.zeros(0, dtype=torch.long)
            g = torch.cat([p[1] for p in side.pairs]) if side.pairs else torch.zeros(0, dtype=torch.long)
            s = torch.cat([p[2] for p in side.pairs]) if side.pairs else torch.zeros(0, dtype=torch.float64)
            side.pairs = []
            # by query, then score ascending, then gallery index ascending (three stable sorts, last key first)
            order = torch.sort(g, stable=True).indices
            order = order[torch.sort(s[order], stable=True).indices]
            order = order[torch.sort(q[order], stable=True).indices]
            q, g, s = q[order], g[order], s[order]
            m_max = int(side.m.max()) if side.n else 0
            start = torch.cumsum(side.m, 0) - side.m
            slot = torch.arange(len(q)) - start[q]
            side.sorted = torch.full((side.n, m_max), math.inf, dtype=torch.float64)
            side.sorted[q, slot] = s
            side.gallery = torch.full((side.n, m_max), -1, dtype=torch.long)
            side.gallery[q, slot] = g
            side.hist_ge = torch.zeros(side.n, m_max + 1, dtype=torch.long)
            side.hist_gt = torch.zeros(side.n, m_max + 1, dtype=torch.long)

    def second(self, scores: torch.Tensor, a_lo: int, b_lo: int) -> None:
        """Second pass: every block, in the order of the module docstring."""
        if not self._first_done:
            raise RuntimeError("StreamRanker.second before finish_first")
        s = scores.float()
        a_hi, b_hi = a_lo + s.shape[0], b_lo + s.shape[1]
        low, high = torch.aminmax(s)  # NaN propagates: one pass says whether any score is NaN or ±inf
        as_is = bool(torch.isfinite(low) & torch.isfinite(high))  # then both readings of the block agree
        if self._reached is None or self._reached.numel() < s.numel():
            self._reached = torch.empty(s.numel())
        buffer = self._reached[:s.numel()].view(s.shape)
        read = s if as_is else _rank_scores(s)
        row_nan = col_nan = None
        if not as_is:
            nan = s.isnan()
            row_nan, col_nan = nan.any(1), nan.any(0)
        detail = self.wanted.ap or self.wanted.top
        if detail or self.holding is None or (a_lo, b_lo) in self.holding:
            masks: Mapping[str, torch.Tensor | None] = self.masks(a_lo, a_hi, b_lo, b_hi)
        else:  # no relevant pair here (first pass): every item counts against the queries it reaches
            masks = dict.fromkeys(self.relevances)
        ordered = ordering_scores(s) if detail else None
        transposed = None
        for kind, mask in masks.items():
            for o in self.orientations:
                side = self.sides[o, kind]
                q = slice(a_lo, a_hi) if o == "a" else slice(b_lo, b_hi)
                self._count_beaten(side, o, q, s, read, mask, buffer, as_is, row_nan if o == "a" else col_nan)
                if not (self.wanted.ap or self.wanted.top):
                    continue
                # with AP or a top list (detail) every block's masks are formed and its ordering scores computed
                assert ordered is not None and mask is not None
                if o == "a":
                    q_lo, g_lo, view, rel = a_lo, b_lo, ordered, mask
                else:
                    if transposed is None:
                        transposed = ordered.T.contiguous()
                    q_lo, g_lo, view, rel = b_lo, a_lo, transposed, mask.T
                self._add_detail(side, o, view, rel, q_lo, g_lo)

    def _count_beaten(self, side: _Side, o: str, q: slice, s: torch.Tensor, read: torch.Tensor,
                      mask: torch.Tensor | None, buffer: torch.Tensor, as_is: bool,
                      nan: torch.Tensor | None) -> None:
        """One block's items that reach each query's best relevant score (queries ``q`` of orientation ``o``), under
        both readings of the scores, into ``side``'s counts; ``nan`` marks the queries whose scores hold a NaN."""
        axis = 1 if o == "a" else 0

        def beaten(values: torch.Tensor, best: torch.Tensor) -> torch.Tensor:
            # 1.0 where an item reaches the query's best relevant score, relevant items zeroed; float32
            # sums of ones are exact below 2^24 items (the blocks are smaller), and much faster than bool
            threshold = best[q, None] if o == "a" else best[None, q]
            reached = torch.ge(values, threshold, out=buffer)
            if mask is not None:
                reached.masked_fill_(mask, 0.0)
            return reached.sum(axis).long()

        counted = beaten(read, side.best_read)
        side.beaten_read[q] += counted
        side.beaten[q] += counted if as_is and torch.equal(side.best[q], side.best_read[q]) else \
            beaten(s, side.best)
        if not as_is:
            assert nan is not None  # formed whenever the block is not read as it is
            side.has_nan[q] |= nan

    def _add_detail(self, side: _Side, o: str, view: torch.Tensor, rel: torch.Tensor, q_lo: int, g_lo: int) -> None:
        """A block's ordering scores (rows: queries from ``q_lo``; columns: gallery items from ``g_lo``) into the
        average precisions' histograms and the top lists, in row chunks."""
        # row chunks bound the int64 temporaries; sized from the nominal gallery block, they are the same
        # in every gallery block, as the top lists (keyed by their first query) need
        step = max(1, self.chunk_elems // max(1, self.block_b if o == "a" else self.block_a))
        for lo in range(0, view.shape[0], step):
            part, part_rel = view[lo:lo + step], rel[lo:lo + step]
            if self.wanted.ap:
                self._count_reached(side, part, q_lo + lo)
            if self.wanted.top:
                self._merge_top(side, part, part_rel, q_lo + lo, g_lo)

    def _count_reached(self, side: _Side, view: torch.Tensor, q_lo: int) -> None:
        """Add each item of ``view`` (rows are queries from ``q_lo``) to the histograms of how many of its query's
        relevant scores it reaches (>=) and exceeds (>)."""
        rows = view.shape[0]
        side_sorted, _, hist_ge, hist_gt = side.laid_out()
        ref = side_sorted[q_lo:q_lo + rows]
        width = ref.shape[1] + 1
        base = (torch.arange(rows) * width)[:, None]
        for right, hist in ((True, hist_ge), (False, hist_gt)):
            pos = torch.searchsorted(ref, view, right=right)  # relevant scores <= (right) or < each item's score
            hist[q_lo:q_lo + rows] += torch.bincount((pos + base).view(-1), minlength=rows * width).view(rows, width)

    def _merge_top(self, side: _Side, view: torch.Tensor, rel: torch.Tensor, q_lo: int, g_lo: int) -> None:
        """Merge a block's items into the top lists of queries ``q_lo:q_lo + len(view)`` (the same row chunk in
        every gallery block)."""
        k = self.wanted.top
        scores, hits, index = _block_top(view, rel, k)
        index = index + g_lo
        held = side.top.get(q_lo)
        if held is not None:  # items held come from earlier blocks: lower gallery indices, so first among ties
            scores, hits, index = (torch.cat([h, x], 1) for h, x in zip(held, (scores, hits, index)))
            order = order_of_clean(scores, hits)[:, :k]
            scores, hits, index = scores.gather(1, order), hits.gather(1, order), index.gather(1, order)
        side.top[q_lo] = (scores, hits, index)

    def ranks(self, orientation: str, kind: str) -> torch.Tensor:
        """1-based rank (int64) of each query's best relevant item, as :func:`harness.ops.metrics.query_ranks` (its
        row chunks: a chunk holding a NaN score is read through :func:`_rank_scores`)."""
        side = self.sides[orientation, kind]
        rows = max(1, self.chunk_elems // max(1, side.g))
        out = side.beaten.clone()
        for lo in range(0, side.n, rows):
            if bool(side.has_nan[lo:lo + rows].any()):
                out[lo:lo + rows] = side.beaten_read[lo:lo + rows]
        return 1 + out

    def precision(self, orientation: str, kind: str) -> tuple[dict[str, float], dict[str, torch.Tensor]]:
        """The statistics of :func:`harness.ops.metrics.precision_metrics` ('mAP', 'mAP@k', 'P@k') and, with
        average precision, each query's AP under 'AP' (its ``per_query``)."""
        side, w = self.sides[orientation, kind], self.wanted
        rows = max(1, self.chunk_elems // max(1, side.g))  # the whole-matrix code's row chunks
        parts: dict[str, list[torch.Tensor]] = {name: [] for name in (["mAP"] if w.ap else []) +
                                                [f"mAP@{k}" for k in w.ap_ks] + [f"P@{k}" for k in w.precision_ks]}
        if w.ap:
            position, precision = self._ap_terms(side)
        if w.top:
            top = [side.top[lo] for lo in sorted(side.top)]
            top_s = torch.cat([t[0] for t in top]) if top else torch.zeros(0, 0, dtype=torch.float64)
            top_h = torch.cat([t[1] for t in top]).double() if top else torch.zeros(0, 0, dtype=torch.float64)
        for lo in range(0, side.n, rows):
            hi = min(side.n, lo + rows)
            if w.ap:
                weighted = torch.zeros(hi - lo, side.g, dtype=torch.float64)  # hits * precision, in ranked order
                real = side.laid_out()[1][lo:hi] >= 0
                q = torch.arange(hi - lo)[:, None].expand_as(real)[real]
                weighted[q, position[lo:hi][real]] = precision[lo:hi][real]
                n_relevant = side.m[lo:hi].double()
                parts["mAP"].append(torch.where(n_relevant > 0, weighted.sum(1) / n_relevant.clamp_min(1), 0.0))
            for k in w.ap_ks:
                parts[f"mAP@{k}"].append(ap_of_sorted(top_s[lo:hi, :k], top_h[lo:hi, :k]))
            for k in w.precision_ks:
                parts[f"P@{k}"].append(top_h[lo:hi, :k].mean(1))
        values = {name: torch.cat(chunks) if chunks else torch.zeros(0, dtype=torch.float64)
                  for name, chunks in parts.items()}
        per_query = {"AP": values["mAP"]} if w.ap else {}
        return {name: float(v.mean() * 100.0) for name, v in values.items()}, per_query

    def _ap_terms(self, side: _Side) -> tuple[torch.Tensor, torch.Tensor]:
        """(n, m_max) position of each relevant item in its query's pessimistic order, and the precision there
        (relevant items / items scoring at least as high)."""
        m = side.m[:, None]
        side_sorted, _, hist_ge, hist_gt = side.laid_out()
        reached = hist_ge.flip(1).cumsum(1).flip(1)[:, 1:]  # items scoring >= each relevant score
        exceeded = hist_gt.flip(1).cumsum(1).flip(1)[:, 1:]  # items scoring > it
        left = torch.searchsorted(side_sorted, side_sorted, right=False).clamp_max(m)
        right = torch.searchsorted(side_sorted, side_sorted, right=True).clamp_max(m)
        rel_reached, rel_exceeded = m - left, m - right
        slot = torch.arange(side_sorted.shape[1])[None, :]
        tied_before = slot - left  # tied relevant items with lower gallery indices
        position = exceeded + (reached - exceeded - (rel_reached - rel_exceeded)) + tied_before
        precision = rel_reached.double() / reached.double()
        return position, precision


def _block_top(view: torch.Tensor, rel: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's first ``k`` items of the block (scores from :func:`harness.ops.metrics.ordering_scores`) in
    pessimistic order: (scores, relevance, column index)."""
    width = view.shape[1]
    if width > k:
        threshold = view.topk(k, dim=1).values[:, -1:]  # every item tied at the cut stays a candidate
        keep = int((view >= threshold).sum(1).max())
        if keep < width:
            cols = torch.sort(view.topk(keep, dim=1, sorted=False).indices, dim=1).values
            order = order_of_clean(view.gather(1, cols), rel.gather(1, cols))[:, :k]
            cols = cols.gather(1, order)
            return view.gather(1, cols), rel.gather(1, cols), cols
    cols = order_of_clean(view, rel)[:, :k]
    return view.gather(1, cols), rel.gather(1, cols), cols
