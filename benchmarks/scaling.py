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

The measurements are in :mod:`benchmarks.scaling_measure`, the approximate-search experiment (``--search-only``) in
:mod:`benchmarks.scaling_search`, and what is written from a record (``scaling.md`` from the template
``benchmarks/templates/scaling.md``, the growth exponents and crossings, ``scaling.svg``) in
:mod:`benchmarks.scaling_report`; this module runs them (:class:`ScalingOptions`, :func:`run`).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from benchmarks import scaling_report as R
from benchmarks.compat import H
from benchmarks.scaling_measure import (
    PAPER,
    PER_IMAGE,
    SIZES,
    MiB,
    as_original,
    coco_methods,
    encode_at,
    encode_first,
    measure_encode,
    measure_rank_full,
    measure_scan,
    measure_scan_original,
    measure_stream,
    memory_run,
    product_rates,
)
from benchmarks.scaling_search import write_search


@dataclass(frozen=True)
class ScalingOptions:
    """The measurement's settings (the command line's options, converted once by :func:`main`); ``command`` is the
    command the written files name."""

    out: Path = Path("results/scaling")
    queries: int = 256  # query images per size for the streaming slab
    stream_max: int = 100_000  # largest size the streaming slab is timed at
    scan_images: int = 32  # images per size for SCAN's vectorised scorer
    block_b: int = 2048  # captions per block of the streaming slab
    encode_sizes: tuple[int, ...] = (1000,)
    scan_budget: float = 10.0  # once one size of SCAN's vectorised scorer takes longer, larger sizes extrapolate
    scan_max: int = 1_000_000
    rank_max: int = 10_000  # largest whole matrix ranked for real
    original_budget: float = 10.0
    memory: bool = True  # also run the measured 20,000 x 100,000 streaming test
    command: str = field(default="python -m benchmarks.scaling")


def run(options: ScalingOptions) -> dict[str, Any]:
    """Every measurement of the module's docstring at every gallery size: the record ``scaling.json`` holds.

    >>> run(ScalingOptions(out=Path("results/scaling"), memory=False, stream_max=10_000))  # doctest: +SKIP
    """
    args = options
    scan_max = options.scan_max
    torch.manual_seed(0)
    record: dict[str, Any] = {"command": args.command, "sizes": list(SIZES),
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
    o_s, o_frac, o_pairs = measure_scan_original(as_original(scan), H.take(scan_a, torch.arange(128)),
                                              (scan_b[0][:640], scan_b[1][:640]), args.original_budget)
    per_pair_original = o_s / (o_frac * o_pairs)
    record["scan_original_probe"] = {"images": 128, "captions": 640, "budget_s": args.original_budget,
                                     "measured_s": o_s, "fraction_scored": o_frac, "s_per_pair": per_pair_original}
    scan_per_pair, rank_per_score = None, None
    for n in SIZES:
        n_a = n // PER_IMAGE
        enc = {name: encode_at(encode[name], n) for name in ("swamp_par", "scan")}
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
        scan_was_timed = n <= scan_max
        if n <= scan_max:
            seconds = measure_scan(scan, scan_a[:args.scan_images], scan_b, n)
            scan_per_pair = seconds / (args.scan_images * n)
            scan_timed = f"timed on {args.scan_images} images x {n} captions, x {n_a / args.scan_images:.4g}"
            if seconds > args.scan_budget:
                scan_max = n  # the budget is spent: larger sizes extrapolate
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
    record["exponents"] = {name: {phase: R.exponent(*zip(*[(n, row[n][f"{phase}_s"]) for n in SIZES
                                                         if row[n]["timed"][phase]] or [((), ())]))
                                  for phase in ("encode", "score", "rank")} for name, row in rows.items()}
    record["exponents_all_sizes"] = {name: {phase: R.exponent(list(SIZES), [row[n][f"{phase}_s"] for n in SIZES])
                                            for phase in ("encode", "score", "rank", "total")}
                                     for name, row in rows.items()}
    record["crossings"] = {name: {label: dict(zip(("gallery", "how"), R.crossing(list(SIZES), [row[n]["total_s"]
                                                                                        for n in SIZES], target)))
                                  for label, target in (("1 s", 1.0), ("1 h", 3600.0))} for name, row in rows.items()}
    record["encode_timed"] = {name: {str(n): v for n, v in per.items()} for name, per in encode.items()}
    record["embedding_width"] = {"swamp_par": width}
    record["environment"] = H.environment(torch.device("cpu"), [])
    record["slab_product_rate"] = product_rates(width, args.queries, args.block_b)
    record["load_average_end"] = list(os.getloadavg())
    record["paper"] = {k: {"gallery": g, "test_s": v} for k, (g, v) in PAPER.items()}
    return record


def write(record: dict[str, Any], out: Path) -> None:
    """``scaling.json``, ``scaling.md`` and ``scaling.svg`` of a record under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "scaling.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    (out / "scaling.md").write_text(R.markdown(record))
    R.figure(record, out / "scaling.svg")


def render(out: Path) -> None:
    """Re-render ``scaling.md`` and ``scaling.svg`` from the ``scaling.json`` in ``out`` (no measurement)."""
    record = json.loads((out / "scaling.json").read_text())
    record["crossings"] = R.crossings(record)
    write(record, out)


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.scaling``: the command line, converted once to :class:`ScalingOptions`."""
    import argparse
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
    command = "python -m benchmarks.scaling " + " ".join(sys.argv[1:] if argv is None else argv)
    out = Path(args.out)
    if args.render_only:
        render(out)
        return 0
    if args.search_only:
        write_search(out, command)
        print(f"wrote {out}/search.json, search.md")
        return 0
    options = ScalingOptions(out, args.queries, args.stream_max, args.scan_images, args.block_b,
                             tuple(args.encode_sizes), args.scan_budget, args.scan_max, args.rank_max,
                             args.original_budget, args.memory, command)
    write(run(options), out)
    print(f"wrote {args.out}/scaling.json, scaling.md, scaling.svg")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
