"""Test time and memory against gallery size: ``python -m benchmarks.scaling --out results/scaling``.

Random data in MS-COCO's shapes (SCAN's precomputed features: 36 regions x 2048 per image, five captions per
image, COCO's vocabulary; the methods of tasks/coco.yaml at their COCO settings), at gallery sizes (captions)
from 1,000 to 1,000,000, images = captions / 5. A full test at size N encodes N/5 images and N captions and
ranks both directions (i2t and t2i) of the (N/5) x N score matrix. What is timed, and what is extrapolated:

* encode: the test encoders on every item at the smallest sizes (--encode-sizes), timed; larger sizes
  extrapolate the per-item time of the largest size timed (encoding is item by item).
* SwAMP-PAR / Contrastive-PAR (one row: at test both are the same encoders and PAR pooling, 20,480-wide
  embeddings; SwAMP's prototypes are unused): the streaming path (harness/ops/streaming.py, both passes, both
  directions) over a slab of --queries images x all N captions, timed at every size; the captions are one
  block of distinct embeddings used for every gallery block (no 1M x 20,480 gallery fits in memory; scoring
  and ranking cost do not depend on the values). Score and rank seconds of the full test = slab seconds x
  (N/5) / queries.
* SCAN (i2t AVG) vectorised: its scorer (baselines.scan.xattn_similarity) on one image x all N captions (one
  block of 1,000 distinct captions reused), timed while one size takes under --scan-budget seconds; larger
  sizes extrapolate the largest timed size's time per pair. Its rank is the whole-matrix path
  (harness.ops.metrics.query_ranks in both directions), timed on random (N/5) x N matrices up to
  --rank-max and extrapolated per score beyond.
* SCAN original (baselines.scan_original.sharded_similarity, SCAN's own procedure): stopped by a time budget
  as ``time_budget_s`` stops the harness's test, at the smallest size; the seconds per pair scored x pairs
  of each size is its scoring time, as the harness extrapolates. Encode and rank as the vectorised scorer.

Peak memory: the process's peak RSS over each timed part (Linux VmHWM), and the full test's working memory
computed from its sizes (streaming: embeddings + one block; whole matrix: embeddings + (N/5) x N float32
scores and a bool mask). ``--memory`` also runs one whole streaming test of 20,000 x 100,000 (1,024-wide unit
embeddings, pair relevance, both directions) and records its measured peak RSS.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
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


class _Dot(H.Method):
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
        out = H.stream_folds(_Dot(), emb_a, emb_b, folds, split, metrics, H.DEFAULT_BLOCKS, clock=clock)
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


def search_run(n_a: int, n_b: int, dim: int, noise: float) -> dict[str, Any]:
    """Approximate against exact search (harness.run.search) on random pairs shaped like a trained dual encoder's:
    unit image vectors, each of their five captions the image plus Gaussian noise, renormalised."""
    g = torch.Generator().manual_seed(0)
    emb_a = F.normalize(torch.randn(n_a, dim, generator=g), dim=1)
    b_to_a = torch.arange(n_b) // (n_b // n_a)
    emb_b = F.normalize(emb_a[b_to_a] + noise * torch.randn(n_b, dim, generator=g) / math.sqrt(dim), dim=1)
    split = H.Split(a=emb_a, b=emb_b, b_to_a=b_to_a)
    metrics = H.MetricSpec(directions=("i2t", "t2i"))
    nlist = int(round(math.sqrt(n_a)))
    out: dict[str, Any] = {"n_a": n_a, "n_b": n_b, "dim": dim, "noise": noise, "runs": []}
    for settings in (H.HNSWSearch(M=32, ef_construction=40, ef_search=64, k=10),
                     H.HNSWSearch(M=32, ef_construction=40, ef_search=512, k=10),
                     H.IVFFlatSearch(nlist=nlist, nprobe=8, k=10), H.IVFFlatSearch(nlist=nlist, nprobe=64, k=10)):
        prof = H.Profiler(torch.device("cpu"))
        H.run_search(_Dot(), split, metrics, settings, prof, (emb_a, emb_b))
        out["runs"].append({**prof.search, "peak_rss_mib": prof.memory["test_search"]["cpu_peak_rss_mib"]})
        print("search:", json.dumps(out["runs"][-1]), flush=True)
    return out


def search_markdown(record: dict[str, Any], command: str) -> str:
    lines = [f"<!-- generated by `{command}` -->", "# Approximate against exact search", "",
             f"Random pairs shaped like a dual encoder's test embeddings: {record['n_a']:,} unit image vectors of "
             f"{record['dim']} dimensions, five captions each ({record['n_b']:,}), "
             "every caption its image plus Gaussian "
             f"noise (norm about {record['noise']}) renormalised; inner product. Exact = the method's scores block by "
             "block, top 10. Machine as in scaling.md.", "",
             "| index | direction | build s | query s | exact top-10 s | index MiB | k-NN recall@10 % | R@1 (exact) | "
             "R@5 (exact) | R@10 (exact) | R@1 lost |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for run in record["runs"]:
        label = f"{run['type']} " + ", ".join(f"{k}={v}" for k, v in run["settings"].items())
        for direction, row in run["directions"].items():
            lines.append(f"| {label} | {direction} | {row['build_s']:.2f} | {row['query_s']:.2f} | "
                         f"{row['exact_top_k_s']:.2f} | {row['index_mib']:.0f} | {row['knn_recall@10']:.2f} | " +
                         " | ".join(f"{row[f'R@{k}']:.2f} ({row[f'exact_R@{k}']:.2f})" for k in (1, 5, 10)) +
                         f" | {row['lost_R@1']:.2f} |")
    lines += ["", "Peak RSS of each search phase (MiB, the process): " + ", ".join(
        f"{r['type']} " + ", ".join(f"{k}={v}" for k, v in r["settings"].items() if k != "k") +
        f" {r['peak_rss_mib']:,.0f}" for r in record["runs"]) + ". Isotropic random vectors are the hard case for "
        "both index families (no clusters, full intrinsic dimension); embeddings of a trained model are not.", ""]
    return "\n".join(lines)


def rss_now() -> float:
    import psutil
    return psutil.Process().memory_info().rss / MiB


def exponent(sizes: Any, seconds: Any) -> float | None:
    """Least-squares slope of log(seconds) on log(size) (None with fewer than two sizes)."""
    pts = [(math.log(n), math.log(s)) for n, s in zip(sizes, seconds) if s and s > 0]
    if len(pts) < 2:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def crossing(sizes: list[int], seconds: list[float], target: float) -> tuple[float | None, str]:
    """Gallery size where a full test takes ``target`` seconds: log-log interpolation between sizes, or the
    fitted power law of the last two sizes beyond them."""
    logs = [(math.log(n), math.log(s)) for n, s in zip(sizes, seconds)]
    for (x0, y0), (x1, y1) in zip(logs, logs[1:]):
        if y0 <= math.log(target) <= y1:
            return math.exp(x0 + (math.log(target) - y0) * (x1 - x0) / (y1 - y0)), "interpolated"
    below = math.log(target) < logs[0][1]
    (x0, y0), (x1, y1) = (logs[0], logs[1]) if below else (logs[-2], logs[-1])
    slope = (y1 - y0) / (x1 - x0)
    if slope <= 0:
        return None, "no growth"
    how = "extrapolated below the smallest size" if below else "extrapolated beyond the largest size"
    return math.exp(x1 + (math.log(target) - y1) / slope), how


def run(args: argparse.Namespace) -> dict[str, Any]:
    torch.manual_seed(0)
    record: dict[str, Any] = {"command": "python -m benchmarks.scaling " + " ".join(args.argv), "sizes": list(SIZES),
                              "queries": args.queries, "threads": torch.get_num_threads(),
                              "load_average_start": list(os.getloadavg())}
    if args.memory:
        record["memory_20k_x_100k"] = memory_run()
        print("memory run:", json.dumps(record["memory_20k_x_100k"]))
    n_enc_images = max(args.encode_sizes) // PER_IMAGE
    spec, split, methods = coco_methods(max(n_enc_images, args.queries, 128))
    encode = measure_encode(methods, split, list(args.encode_sizes), spec.methods["swamp_par"].train.eval_batch_size)
    n_pool = min(1000, len(split.b))  # distinct caption embeddings, repeated to fill one gallery block
    emb_a, emb_b = encode_first(methods["swamp_par"], split, args.queries, n_pool, 128)
    width = emb_a.shape[1]
    reps = -(-args.block_b // len(emb_b))
    pool = torch.cat([emb_b] * reps)[:args.block_b].contiguous()  # one block of caption embeddings
    scan = methods["scan"]
    scan_a, scan_b = encode_first(scan, split, 128, n_pool, 128)
    rows: dict[str, dict[str, Any]] = {"SwAMP-PAR / Contrastive-PAR (streaming)": {}, "SCAN vectorised": {},
                                       "SCAN original": {}}
    par, vec, orig = rows.values()
    # SCAN original: measured once within its budget, as the harness extrapolates a budgeted test
    o_s, o_frac, o_pairs = measure_scan_original(_as_original(scan), H.take(scan_a, torch.arange(128)),
                                              (scan_b[0][:640], scan_b[1][:640]), args.original_budget)
    per_pair_original = o_s / (o_frac * o_pairs)
    record["scan_original_probe"] = {"images": 128, "captions": 640, "budget_s": args.original_budget,
                                     "measured_s": o_s, "fraction_scored": o_frac, "s_per_pair": per_pair_original}
    scan_per_pair, rank_per_score = None, None
    for n in SIZES:
        n_a = n // PER_IMAGE
        enc = {name: _encode_at(encode[name], n) for name in ("swamp_par", "scan")}
        if n <= args.stream_max:
            score_s, rank_s, peak, info = measure_stream(emb_a, pool, n, args.block_b)
            per_query = timed_per_query = (score_s / args.queries, rank_s / args.queries)
            how = f"timed on {args.queries} query images x {n} captions, x {n_a / args.queries:.4g}"
        else:
            peak, info = None, {}
            largest = max(m for m in SIZES if m <= args.stream_max)
            per_query = (timed_per_query[0] * n / largest, timed_per_query[1] * n / largest)
            how = f"extrapolated: the time per query and caption at {largest:,} x {n_a} x {n}"
        par[n] = {"encode_s": enc["swamp_par"][0], "encode": enc["swamp_par"][1],
                  "timed": {"encode": enc["swamp_par"][1] == "timed", "score": n <= args.stream_max,
                            "rank": n <= args.stream_max},
                  "score_s": per_query[0] * n_a, "rank_s": per_query[1] * n_a, "score": how, "rank": how,
                  "slab_peak_rss_mib": peak,
                  "test_memory_mib": ((n_a + n) * width * 4 + 2 * min(n_a, 2048) * min(n, 16384) * 5) / MiB,
                  **info}
        scan_was_timed = n <= args.scan_max
        if n <= args.scan_max:
            seconds = measure_scan(scan, scan_a[:args.scan_images], scan_b, n)
            scan_per_pair = seconds / (args.scan_images * n)
            scan_timed = f"timed on {args.scan_images} images x {n} captions, x {n_a / args.scan_images:.4g}"
            if seconds > args.scan_budget:
                args.scan_max = n  # the budget is spent: larger sizes extrapolate
        else:
            scan_timed = f"extrapolated: {scan_per_pair * 1e6:.2f} us per pair x {n_a} x {n} pairs"
        if n <= args.rank_max:
            r_s, r_peak = measure_rank_full(n)
            rank_per_score, rank_how = r_s / (n_a * n), "timed on the whole matrix"
        else:
            r_s, r_peak = rank_per_score * n_a * n, None
            rank_how = f"extrapolated: {rank_per_score * 1e9:.2f} ns per score x {n_a} x {n}"
        full_mem = ((n_a * 36 + n * 12) * 1024 * 4 + n_a * n * 5) / MiB
        vec[n] = {"timed": {"encode": enc["scan"][1] == "timed", "score": scan_was_timed, "rank": n <= args.rank_max},
                  "encode_s": enc["scan"][0], "encode": enc["scan"][1], "score_s": scan_per_pair * n_a * n,
                  "score": scan_timed, "rank_s": r_s, "rank": rank_how, "rank_peak_rss_mib": r_peak,
                  "test_memory_mib": full_mem}
        orig[n] = {"timed": {"encode": enc["scan"][1] == "timed", "score": False, "rank": n <= args.rank_max},
                   "encode_s": enc["scan"][0], "encode": enc["scan"][1], "score_s": per_pair_original * n_a * n,
                   "score": f"extrapolated from the budgeted probe: {per_pair_original * 1e3:.3f} ms per pair",
                   "rank_s": r_s, "rank": rank_how,
                   "test_memory_mib": full_mem * 2 - n_a * n * 5 / MiB + n_a * n * 8 / MiB}
        print(f"N={n}: PAR score {par[n]['score_s']:.3g} s rank {par[n]['rank_s']:.3g} s; SCAN vec score "
              f"{vec[n]['score_s']:.3g} s; original {orig[n]['score_s']:.3g} s", flush=True)
    for row in rows.values():
        for cell in row.values():
            cell["total_s"] = cell["encode_s"] + cell["score_s"] + cell["rank_s"]
    record["methods"] = {name: {str(n): cell for n, cell in row.items()} for name, row in rows.items()}
    # growth exponents over the sizes where the phase was timed (an extrapolated cell only repeats its model), and
    # over every size
    record["exponents"] = {name: {phase: exponent(*zip(*[(n, row[n][f"{phase}_s"]) for n in SIZES
                                                         if row[n]["timed"][phase]] or [((), ())]))
                                  for phase in ("encode", "score", "rank")} for name, row in rows.items()}
    record["exponents_all_sizes"] = {name: {phase: exponent(list(SIZES), [row[n][f"{phase}_s"] for n in SIZES])
                                            for phase in ("encode", "score", "rank", "total")}
                                     for name, row in rows.items()}
    record["crossings"] = {name: {label: dict(zip(("gallery", "how"), crossing(list(SIZES), [row[n]["total_s"]
                                                                                        for n in SIZES], target)))
                                  for label, target in (("1 s", 1.0), ("1 h", 3600.0))} for name, row in rows.items()}
    record["encode_timed"] = {name: {str(n): v for n, v in per.items()} for name, per in encode.items()}
    record["embedding_width"] = {"swamp_par": width}
    record["environment"] = H.environment(torch.device("cpu"), [])
    record["slab_product_rate"] = product_rates(width, args.queries, args.block_b)
    record["load_average_end"] = list(os.getloadavg())
    record["paper"] = {k: {"gallery": g, "test_s": v} for k, (g, v) in PAPER.items()}
    return record


def _as_original(scan: H.Method) -> H.Method:
    """The same SCAN model with ``scorer: original`` (SCAN's own test procedure) and no pair pass."""
    import copy
    import dataclasses
    out = copy.copy(scan)
    out.params = dataclasses.replace(scan.params, scorer="original", time_budget_s=None)
    return out


def _encode_at(timed: dict[int, dict], n: int) -> tuple[float, str]:
    if n in timed:
        return timed[n]["s"], "timed"
    largest = max(timed)
    return timed[largest]["s"] * n / largest, f"extrapolated per item from {largest}"


def write(record: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    (out / "scaling.md").write_text(markdown(record))
    figure(record, out / "scaling.svg")


def _hardware(record: dict[str, Any]) -> str:
    hw = record["environment"].get("hardware", {})
    cpu = hw.get("cpu") or hw.get("cpu_model") or platform.processor() or "CPU"
    return (f"{cpu}, {hw.get('cores', '?')} cores, {record['threads']} torch threads; torch "
            f"{record['environment'].get('versions', {}).get('torch', torch.__version__)}; device cpu, fp32")


def markdown(record: dict[str, Any]) -> str:
    sizes = record["sizes"]
    lines = [f"<!-- generated by `{record['command']}` -->", "# Test time and memory against gallery size", "",
             f"Machine: {_hardware(record)}. Gallery = captions (N); images = N/5; a full test encodes both and ranks "
             "i2t and t2i. Seconds per full test; how each cell was obtained is in scaling.json (`encode`, `score`, "
             "`rank`) and in benchmarks/scaling.py's docstring.", ""]
    header = ("| method | phase | " + " | ".join(f"{n:,}" for n in sizes) +
              " | growth exponent, timed sizes | growth exponent, all sizes |")
    lines += [header, "|" + "---|" * (len(sizes) + 4)]

    def fmt(value: float | None) -> str:
        return "–" if value is None else f"{value:.2f}"

    for name, row in record["methods"].items():
        for phase in ("encode", "score", "rank", "total"):
            cells = [_seconds(row[str(n)][f"{phase}_s"]) + ("" if phase == "total" or row[str(n)]["timed"][phase]
                                                            else "*") for n in sizes]
            lines.append(f"| {name} | {phase} s | " + " | ".join(cells) +
                         f" | {fmt(record['exponents'][name].get(phase))} | "
                         f"{fmt(record['exponents_all_sizes'][name][phase])} |")
        cells = [f"{row[str(n)]['test_memory_mib']:,.0f}" for n in sizes]
        lines.append(f"| {name} | test memory MiB (computed) | " + " | ".join(cells) + " | | |")
    par = record["methods"]["SwAMP-PAR / Contrastive-PAR (streaming)"]
    lines.append("| SwAMP-PAR / Contrastive-PAR (streaming) | slab peak RSS MiB (measured) | " +
                 " | ".join(f"{par[str(n)]['slab_peak_rss_mib']:,.0f}" if par[str(n)]["slab_peak_rss_mib"] else "–"
                            for n in sizes) + " | | |")
    lines += ["",
              "\\*: extrapolated (see scaling.json for the rule of each cell); unmarked cells were timed (score and "
              "rank of the streaming row: timed on the slab and scaled to the full test's queries)."]
    lines += ["", "Where a full test crosses one second and one hour on this machine:", "",
              "| method | 1 s at gallery | 1 h at gallery |", "|---|---|---|"]
    for name, cross in record["crossings"].items():
        cells = [f"{c['gallery']:,.0f} ({c['how']})" if c["gallery"] else f"– ({c['how']})"
                 for c in (cross["1 s"], cross["1 h"])]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    (slab, slab_rate), (block, block_rate) = record["slab_product_rate"].items()
    load = lambda v: ", ".join(f"{x:.2f}" for x in v)  # noqa: E731
    lines += ["", f"Streaming slab: the score product of the slab ({slab} embeddings) ran at {slab_rate:.1f} G "
              f"multiply-adds/s, that of the streaming path's own blocks ({block}) at {block_rate:.1f}: the slab's "
              f"score seconds overstate a full test's by about {block_rate / slab_rate:.2f}x. Load average (1, 5, 15 "
              f"min) at the start {load(record['load_average_start'])} and at the end "
              f"{load(record['load_average_end'])} on 2 cores: the machine was shared with other work."]
    probe = record["scan_original_probe"]
    lines += ["", f"SCAN original: its own procedure stopped by a {probe['budget_s']:.0f} s budget after "
              f"{100 * probe['fraction_scored']:.2f}% of {probe['images']} x {probe['captions']} pairs "
              f"({probe['s_per_pair'] * 1e3:.3f} ms per pair); every size extrapolates that rate."]
    mem = record.get("memory_20k_x_100k")
    if mem:
        lines += ["", f"Streaming memory, measured: a whole streaming test of {mem['n_a']:,} x {mem['n_b']:,} "
                  f"({mem['dim']}-wide embeddings, blocks {mem['blocks'][0]} x {mem['blocks'][1]}, i2t and t2i) peaked "
                  f"at {mem['peak_rss_mib']:,.0f} MiB RSS (the process, embeddings of {mem['embeddings_mib']:,.0f} MiB "
                  f"included; {mem['rss_at_start_mib']:,.0f} MiB before it started) in {mem['seconds']:.1f} s "
                  f"(score {mem['score_s']:.1f} s, rank {mem['rank_s']:.1f} s); its score matrix alone would be "
                  f"{mem['score_matrix_would_be_mib']:,.0f} MiB."]
        lines += ["", reconcile(record)]
    lines += ["", "Paper (one RTX 2080 Ti): " + "; ".join(
        f"{k} (gallery {v['gallery']:,}): " + ", ".join(f"{m} {s:g} s" for m, s in v["test_s"].items())
        for k, v in record["paper"].items()) + ".", ""]
    return "\n".join(lines)


def reconcile(record: dict[str, Any]) -> str:
    """Why the measured whole streaming test and the table's score cell of the same gallery size differ: both
    follow the streaming path, at different embedding widths, so at different multiply-add rates (the rule of the
    table's cells is one at every size: the slab, scaled to the full test's queries)."""
    mem = record["memory_20k_x_100k"]
    par_name = "SwAMP-PAR / Contrastive-PAR (streaming)"
    width = next(iter(record["embedding_width"].values()))
    size = max(n for n in record["sizes"] if record["methods"][par_name][str(n)]["timed"]["score"])
    cell = record["methods"][par_name][str(size)]
    images = size // PER_IMAGE
    calls = mem["blocks_scored"] + mem["blocks_scored_twice"]
    done = mem["n_a"] * mem["n_b"] * mem["dim"] * calls / mem["blocks_scored"]  # both passes' multiply-adds
    mem_rate = done / mem["score_s"] / 1e9
    cell_rate = images * size * width / cell["score_s"] / 1e9  # one pass: a lower bound on the cell's rate
    at_mem_rate = images * size * width * calls / mem["blocks_scored"] / (mem_rate * 1e9)
    return (f"The two measurements of the streaming path at {size:,} captions differ in width, not in rule: the "
            f"whole test above used {mem['dim']:,}-wide embeddings, the table's PAR rows {width:,}-wide ones, "
            f"{width // mem['dim']}x the multiply-adds per score. The whole test's score phase did "
            f"{done:.3g} multiply-adds ({calls} block scorings of {mem['blocks_scored']} blocks: the first pass "
            f"re-scores the blocks that hold relevant pairs) in {mem['score_s']:.1f} s, {mem_rate:.0f} G/s; the "
            f"table's cell ({_seconds(cell['score_s'])} s, the slab rule) is {images * size * width:.3g} "
            f"multiply-adds of one pass, at least {cell_rate:.0f} G/s. The two rates are not measured on one "
            f"shape, so they need not agree: a narrow product writes one score per {mem['dim']:,} multiply-adds "
            f"instead of one per {width:,}, which likely makes it slower per multiply-add (not measured here). Were "
            f"the PAR test as slow per multiply-add as the narrow one, it would score in about "
            f"{_seconds(at_mem_rate)} s instead of {_seconds(cell['score_s'])} s: read the table's score cells as "
            f"the slab's rate scaled, which the whole test does not check.")


def _seconds(s: float) -> str:
    return f"{s:.3g}" if s < 1000 else f"{s:,.0f}"


def figure(record: dict[str, Any], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    matplotlib.rcParams["svg.hashsalt"] = "scaling"  # reproducible ids
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = record["sizes"]
    for name, row in record["methods"].items():
        ax.plot(sizes, [row[str(n)]["total_s"] for n in sizes], marker="o", label=f"{name} (this CPU)")
    markers = {"SCAN": "s", "SwAMP-PAR": "^"}
    for label, spec in record["paper"].items():
        for method, seconds in spec["test_s"].items():
            ax.scatter([spec["gallery"]], [seconds], marker=markers[method], s=70, color="black", zorder=5)
            ax.annotate(f"paper {method}, {label}", (spec["gallery"], seconds), textcoords="offset points",
                        xytext=(6, -4), fontsize=7)
    for seconds, text in ((1, "1 s"), (3600, "1 h")):
        ax.axhline(seconds, color="grey", lw=0.6, ls="--")
        ax.text(sizes[0], seconds * 1.15, text, fontsize=7, color="grey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("gallery size (captions; images = captions / 5)")
    ax.set_ylabel("seconds per full test (encode + score + rank)")
    ax.set_title("Test time against gallery size (COCO shapes, random data)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    import sys
    parser = argparse.ArgumentParser(prog="python -m benchmarks.scaling", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="results/scaling")
    parser.add_argument("--queries", type=int, default=256, help="query images per size for the streaming slab")
    parser.add_argument("--stream-max", type=int, default=100_000, help="largest size the streaming slab is timed at")
    parser.add_argument("--scan-images", type=int, default=32, help="images per size for SCAN's vectorised scorer")
    parser.add_argument("--block-b", type=int, default=2048, help="captions per block of the streaming slab")
    parser.add_argument("--encode-sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--scan-budget", type=float, default=10.0,
                        help="once one size of SCAN's vectorised scorer takes longer, larger sizes are extrapolated")
    parser.add_argument("--scan-max", type=int, default=1_000_000)
    parser.add_argument("--rank-max", type=int, default=10_000, help="largest whole matrix ranked for real")
    parser.add_argument("--original-budget", type=float, default=10.0)
    parser.add_argument("--memory", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the measured 20,000 x 100,000 streaming test")
    parser.add_argument("--search-only", action="store_true",
                        help="only the approximate-search measurement (search.json, search.md)")
    parser.add_argument("--render-only", action="store_true",
                        help="re-render scaling.md and scaling.svg from the scaling.json in --out (no measurement)")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    if args.render_only:
        record = json.loads((out / "scaling.json").read_text())
        sizes = record["sizes"]
        record["crossings"] = {name: {label: dict(zip(("gallery", "how"), crossing(sizes, [row[str(n)]["total_s"]
                                                                                        for n in sizes], target)))
                                      for label, target in (("1 s", 1.0), ("1 h", 3600.0))}
                               for name, row in record["methods"].items()}
        write(record, out)
        return 0
    if args.search_only:
        out.mkdir(parents=True, exist_ok=True)
        record = search_run(20_000, 100_000, 256, 3.5)
        record["environment"] = H.environment(torch.device("cpu"), [])
        record["load_average_end"] = list(os.getloadavg())
        (out / "search.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
        (out / "search.md").write_text(search_markdown(record, "python -m benchmarks.scaling " + " ".join(args.argv)))
        print(f"wrote {out}/search.json, search.md")
        return 0
    write(run(args), out)
    print(f"wrote {args.out}/scaling.json, scaling.md, scaling.svg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
