"""The measurements of ``python -m benchmarks.scaling`` (what each times and how: :mod:`benchmarks.scaling`'s
docstring): encoding, the streaming slab, SCAN's two scorers, whole-matrix ranking, the measured whole streaming test
and the score product's rate, each on random data in MS-COCO's shapes."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import torch
import torch.nn.functional as F

from benchmarks.compat import H

TASK = Path(__file__).resolve().parent.parent / "tasks" / "coco_shapes.yaml"
SIZES = (1_000, 3_000, 10_000, 30_000, 100_000, 300_000, 1_000_000)
PER_IMAGE = 5
MiB = 2**20
# the paper's test times (seconds, one RTX 2080 Ti; docs: /work reference paper-facts): gallery = captions
PAPER = {"Flickr30K 1K": (5_000, {"SCAN": 336.9, "SwAMP-PAR": 3.8}),
         "COCO 5K": (25_000, {"SCAN": 9352.0, "SwAMP-PAR": 25.9})}


class Dot(H.Method):
    """Unit embeddings as given, dot-product score (the memory run)."""

    def __init__(self):
        super().__init__({}, None)


def _timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(seconds, peak RSS MiB over the call, result)."""
    with H.CpuPeakRSS() as rss:
        start = time.perf_counter()
        out = fn()
        seconds = time.perf_counter() - start
    return seconds, rss.peak / MiB, out


def coco_methods(n_images: int) -> tuple[Any, Any, dict[str, H.Method]]:
    """The task, its test split of ``n_images`` random images in COCO's shapes, and its swamp_par and scan models."""
    spec = H.load_task(TASK, [f"dataset.images=[64,20,{n_images}]", "metrics.folds=[1]"])
    data = H.load_data(spec)
    torch.manual_seed(0)
    methods = {name: H.build_method(spec, name, data, torch.device("cpu")).eval() for name in ("swamp_par", "scan")}
    return spec, data["test"], methods


@torch.no_grad()
def encode_first(method: H.Method, split: H.Split, n_a: int, n_b: int, batch: int) -> tuple[Any, Any]:
    """Embeddings of the first ``n_a`` a items and ``n_b`` b items, batch by batch as
    :func:`harness.run.evaluate.encode_split` encodes a split."""
    method.eval()
    out = []
    for modality, feats, n in (("a", split.a, n_a), ("b", split.b, n_b)):
        out.append(H.concat([method.encode(modality, H.take(feats, idx)) for idx in torch.arange(n).split(batch)]))
    return out[0], out[1]


def measure_encode(methods: dict[str, H.Method], split: H.Split, sizes: list[int],
                batch: int) -> dict[str, dict[int, dict]]:
    """Encode seconds and peak RSS per method at each gallery size in ``sizes`` (first N/5 images, N captions)."""
    out: dict[str, dict[int, dict]] = {name: {} for name in methods}
    for n in sizes:
        for name, method in methods.items():
            seconds, peak, _ = _timed(lambda m=method, k=n: encode_first(m, split, k // PER_IMAGE, k, batch))
            out[name][n] = {"s": seconds, "peak_mib": peak}
    return out


@torch.no_grad()
def measure_stream(images: torch.Tensor, pool: torch.Tensor, n: int, block_b: int) -> tuple[float, float, float, dict]:
    """Streaming score and rank of ``images`` (q, D) against n captions (blocks of ``pool`` reused): (score s,
    rank s, peak RSS MiB, blocks)."""
    q = len(images)
    b_to_a = torch.arange(n) // PER_IMAGE  # captions of images beyond the slab belong to no slab row
    ranker = H.StreamRanker(q, n, {"pair": H.Relevance("pair", b_to_a=b_to_a)}, ("a", "b"),
                                    block_a=q, block_b=block_b)
    clock = {"score_s": 0.0, "blocks": 0}

    def scores_of(a_lo: int, a_hi: int, b_lo: int, b_hi: int) -> torch.Tensor:
        start = time.perf_counter()
        block = images[a_lo:a_hi] @ pool[:b_hi - b_lo].T
        clock["score_s"] += time.perf_counter() - start
        clock["blocks"] += 1
        return block

    seconds, peak, _ = _timed(lambda: H.stream_blocks(scores_of, q, n, ranker, q, block_b))
    return clock["score_s"], seconds - clock["score_s"], peak, {"blocks_scored": clock["blocks"]}


@torch.no_grad()
def measure_scan(method: H.Method, image: Any, captions: Any, n: int) -> float:
    """Seconds of SCAN's vectorised scorer for one image against n captions (blocks of ``captions`` reused)."""
    words, lengths = captions
    start = time.perf_counter()
    for lo in range(0, n, len(lengths)):
        hi = min(n, lo + len(lengths))
        method.score(image, (words[:hi - lo], lengths[:hi - lo]))
    return time.perf_counter() - start


@torch.no_grad()
def measure_scan_original(method: H.Method, images: Any, captions: Any, budget_s: float) -> tuple[float, float, int]:
    """SCAN's original procedure over images x captions, stopped after ``budget_s``: (measured s, fraction, pairs)."""
    start = time.perf_counter()
    _, fraction = method.score_within(images, captions, start + budget_s)
    return time.perf_counter() - start, fraction, len(images) * len(captions[1])


def measure_rank_full(n: int) -> tuple[float, float]:
    """Whole-matrix ranking of a random (n/5) x n score matrix in both directions: (seconds, peak RSS MiB)."""
    n_a = n // PER_IMAGE
    g = torch.Generator().manual_seed(0)
    sims = torch.rand(n_a, n, generator=g)
    b_to_a = torch.arange(n) // PER_IMAGE

    def rank() -> None:
        rel = H.pair_relevance(b_to_a, n_a)
        H.query_ranks(sims, rel)
        H.query_ranks(sims.T, rel.T)

    seconds, peak, _ = _timed(rank)
    return seconds, peak


def memory_run(n_a: int = 20_000, n_b: int = 100_000, dim: int = 1024) -> dict[str, Any]:
    """One whole streaming test of n_a x n_b (i2t and t2i, R@1/5/10, rsum) on random unit embeddings, measured."""
    g = torch.Generator().manual_seed(0)
    emb_a = F.normalize(torch.randn(n_a, dim, generator=g), dim=1)
    emb_b = F.normalize(torch.randn(n_b, dim, generator=g), dim=1)
    split = H.Split(a=emb_a, b=emb_b, b_to_a=torch.arange(n_b) // (n_b // n_a))
    metrics = H.MetricSpec(directions=("i2t", "t2i"), rsum=True)
    folds = H.make_folds(split, 1)
    clock = H.BlockClock()
    with H.CpuPeakRSS() as rss:
        start = time.perf_counter()
        before = rss_now()
        out = H.stream_folds(Dot(), emb_a, emb_b, folds, split, metrics, H.DEFAULT_BLOCKS, clock=clock)
        seconds = time.perf_counter() - start
    return {"n_a": n_a, "n_b": n_b, "dim": dim, "blocks": list(H.DEFAULT_BLOCKS), "seconds": seconds,
            "score_s": clock.score_s, "rank_s": seconds - clock.score_s, "blocks_scored": clock.blocks,
            "blocks_scored_twice": clock.rescored, "peak_rss_mib": rss.peak / MiB, "rss_at_start_mib": before,
            "embeddings_mib": (n_a + n_b) * dim * 4 / MiB, "score_matrix_would_be_mib": n_a * n_b * 4 / MiB,
            "i2t/R@1": out["i2t/R@1"]}


def product_rates(width: int, queries: int, block_b: int) -> dict[str, float]:
    """Multiply-adds per second (G) of the slab's score product and of the streaming path's default block."""
    g = torch.Generator().manual_seed(0)
    gallery = torch.randn(block_b, width, generator=g)
    out = {}
    for rows in (queries, H.DEFAULT_BLOCKS[0]):
        q = torch.randn(rows, width, generator=g)
        q @ gallery.T
        start = time.perf_counter()
        q @ gallery.T
        out[f"{rows} x {block_b}"] = rows * block_b * width / (time.perf_counter() - start) / 1e9
    return out


def rss_now() -> float:
    import psutil
    return psutil.Process().memory_info().rss / MiB


def as_original(scan: H.Method) -> H.Method:
    """The same SCAN model with ``scorer: original`` (SCAN's own test procedure) and no pair pass."""
    import copy
    import dataclasses
    out = copy.copy(scan)
    out.params = dataclasses.replace(scan.params, scorer="original", time_budget_s=None)
    return out


def encode_at(timed: dict[int, dict], n: int) -> tuple[float, str]:
    if n in timed:
        return timed[n]["s"], "timed"
    largest = max(timed)
    return timed[largest]["s"] * n / largest, f"extrapolated per item from {largest}"


