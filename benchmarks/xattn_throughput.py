"""Throughput of SCAN's cross-attention scorer at the Flickr30K test shape (1,000 images × 5,000
captions, 36 regions, D = 1024), against this machine's matmul throughput and the per-caption
reference loop.

    python -m benchmarks.xattn_throughput                      # full 1,000 × 5,000, 20-caption loop sample
    python -m benchmarks.xattn_throughput --threads 1 --out results/xattn_throughput/cpu-1thread.json

FLOP counts. SCAN's formulation costs, per (image, caption) pair, 2·R·L·D for the logits and
2·R·L·D for the attended vectors (the cosines and norms add under 1%): 4·R·D·ΣL·n_images in
all, about 1.1e13 at the Flickr shape with ~13 tokens per caption. That is the "useful" count.
``xattn_similarity`` executes only the logit half as matmul FLOPs (the attended vectors are
replaced by R×R or L×L Gram products), so its useful throughput can exceed the matmul rate.
Times of partial runs are extrapolated in proportion to the summed caption lengths.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from baselines import scan_original as original_procedure
from baselines.scan import DEFAULT_MEMORY_BUDGET, plan_chunks, xattn_similarity
from baselines.scan_original import per_caption_similarity
from benchmarks.compat import H, from_first

word_counts = from_first("word_counts", "harness.sources.synthetic_precomp", "harness.data.sources.synthetic_precomp")

SETTINGS = {"i2t": (4.0, 5.0), "t2i": (9.0, 6.0)}  # Flickr30K lambda_softmax, lambda_lse


def inputs(n_images: int, n_captions: int, regions: int, dim: int, seed: int = 0):
    """Unit-norm regions and words, caption token counts like synthetic_precomp (words + start/end)."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.from_numpy(word_counts(np.random.default_rng(seed), n_captions, median=10.5, sigma=0.3,
                                           lo=3, hi=50) + 2)
    images = F.normalize(torch.randn(n_images, regions, dim, generator=g), dim=2)
    captions = F.normalize(torch.randn(n_captions, int(lengths.max()), dim, generator=g), dim=2)
    return images, captions, lengths


def seconds(fn, repeats: int = 1) -> float:
    """Best wall-clock of ``repeats`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def both_clocks(fn) -> tuple[float, float]:
    """Wall-clock and process CPU seconds of one call. With one torch thread the CPU seconds count the work
    this process did, whatever else the machine runs (cache and memory contention aside)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def matmul_gflops(m: int, k: int, n: int, repeats: int = 5) -> float:
    """float32 (m × k) @ (k × n) throughput in GFLOP/s."""
    a, b = torch.randn(m, k), torch.randn(k, n)
    a @ b  # warm-up
    return 2 * m * k * n / seconds(lambda: a @ b, repeats) / 1e9


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--captions", type=int, default=5000)
    ap.add_argument("--captions-measured", type=int, default=5000, help="captions the vectorised scorer runs on")
    ap.add_argument("--reference-captions", type=int, default=20, help="captions the reference loop runs on")
    ap.add_argument("--original-shards", type=int, default=2,
                    help="pairs of 128 × 128 shards that SCAN's original test procedure runs on (0: skip it)")
    ap.add_argument("--regions", type=int, default=36)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--directions", default="i2t,t2i")
    ap.add_argument("--budget-mib", type=int, default=DEFAULT_MEMORY_BUDGET // 2**20)
    ap.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    ap.add_argument("--out", default="")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    images, captions, lengths = inputs(args.images, args.captions, args.regions, args.dim)
    total_tokens = int(lengths.sum())
    useful = 4 * args.images * args.regions * args.dim * total_tokens
    chunk, bounds = plan_chunks(lengths.sort(descending=True).values, n_images=args.images, regions=args.regions,
                                itemsize=4, memory_budget=args.budget_mib * 2**20)
    block_cols = int(lengths.sort(descending=True).values[bounds[len(bounds) // 2][0]]) * \
        (bounds[len(bounds) // 2][1] - bounds[len(bounds) // 2][0])
    report = {"threads": torch.get_num_threads(),
              "shape": {"images": args.images, "captions": args.captions, "regions": args.regions, "dim": args.dim,
                        "mean_tokens": total_tokens / args.captions, "max_tokens": int(lengths.max())},
              "budget_mib": args.budget_mib, "image_chunk": chunk, "caption_chunks": len(bounds),
              "useful_flops_full": useful,
              "matmul_gflops": {"4096^3": matmul_gflops(4096, 4096, 4096),
                                f"block {chunk * args.regions}x{args.dim}x{block_cols}":
                                    matmul_gflops(chunk * args.regions, args.dim, block_cols)},
              "directions": {}}
    with torch.no_grad():
        for direction in args.directions.split(","):
            report["directions"][direction] = measure(direction, images, captions, lengths, args, useful)
    report["environment"] = H.environment(torch.device("cpu"))
    print(json.dumps({k: v for k, v in report.items() if k != "environment"}, indent=2))
    if args.out:
        H.write_json_atomic(Path(args.out), report)
    return report


def measure(direction: str, images, captions, lengths, args, useful: int) -> dict:
    """Vectorised scorer on the first captions, reference loop on a spread sample; both extrapolated."""
    lambda_softmax, lambda_lse = SETTINGS[direction]
    kw = dict(direction=direction, agg="avg", lambda_softmax=lambda_softmax, lambda_lse=lambda_lse)
    n = args.captions_measured
    fast_s, fast_cpu = both_clocks(lambda: xattn_similarity(images, captions[:n], lengths[:n],
                                                            memory_budget=args.budget_mib * 2**20, **kw))
    fast_full = fast_s * int(lengths.sum()) / int(lengths[:n].sum())
    fast_cpu_full = fast_cpu * int(lengths.sum()) / int(lengths[:n].sum())
    sample = torch.linspace(0, args.captions - 1, args.reference_captions).long()
    ref = {}
    ref_s = seconds(lambda: ref.setdefault("sims", per_caption_similarity(images, captions[sample],
                                                                             lengths[sample].tolist(), **kw)))
    ref_full = ref_s * int(lengths.sum()) / int(lengths[sample].sum())
    fast_sample = xattn_similarity(images, captions[sample], lengths[sample], **kw)
    original = measure_original(images, captions, lengths, args.original_shards, kw) if args.original_shards else {}
    if original:
        original["original_over_vectorised"] = original["original_seconds_full_shape"] / fast_full
        original["original_over_vectorised_cpu"] = original["original_cpu_seconds_full_shape"] / fast_cpu_full
    return {**original, "measured_captions": n, "seconds_measured": fast_s, "seconds_full_shape": fast_full,
            "cpu_seconds_full_shape": fast_cpu_full,
            "useful_gflops": useful / fast_full / 1e9, "executed_matmul_gflops": useful / 2 / fast_full / 1e9,
            "reference_captions": args.reference_captions, "reference_seconds_measured": ref_s,
            "reference_seconds_full_shape": ref_full, "speedup_over_reference": ref_full / fast_full,
            "max_abs_diff_vs_reference": float((fast_sample - ref["sims"]).abs().max())}


def measure_original(images, captions, lengths, n_pairs: int, kw: dict) -> dict:
    """SCAN's original test procedure (baselines.scan_original): the float64 host copies of the whole split,
    then ``n_pairs`` pairs of shards (the first image shard against caption shards spread over the split),
    extrapolated to every pair of shards of the full shape."""
    shard = original_procedure.SHARD
    convert = both_clocks(lambda: original_procedure.host_arrays(images, captions, lengths))
    spread = torch.linspace(0, len(captions) - shard, n_pairs).long()
    sample = torch.cat([torch.arange(lo, lo + shard) for lo in spread.tolist()])
    pairs = both_clocks(lambda: original_procedure.sharded_similarity(images[:shard], captions[sample],
                                                                      lengths[sample], **kw))
    small = both_clocks(lambda: original_procedure.host_arrays(images[:shard], captions[sample], lengths[sample]))
    total_pairs = -(-len(images) // shard) * -(-len(captions) // shard)
    per_pair = [(p - c) / n_pairs for p, c in zip(pairs, small)]  # (wall, cpu) of one pair of shards
    return {"original_pairs_measured": n_pairs, "original_seconds_per_pair": per_pair[0],
            "original_convert_seconds": convert[0],
            "original_seconds_full_shape": convert[0] + per_pair[0] * total_pairs,
            "original_cpu_seconds_full_shape": convert[1] + per_pair[1] * total_pairs}


if __name__ == "__main__":
    main()
