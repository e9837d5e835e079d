"""Approximate against exact search, the experiment of ``python -m benchmarks.scaling --search-only``: faiss's HNSW
and IVF-flat indexes (:mod:`harness.run.search`) on random pairs shaped like a trained dual encoder's test embeddings,
each against the method's exact scores; ``search.json`` and ``search.md``."""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from benchmarks import pages
from benchmarks.compat import H
from benchmarks.scaling_measure import Dot

HEADER = ["index", "direction", "build s", "query s", "exact top-10 s", "index MiB", "k-NN recall@10 %",
          "R@1 (exact)", "R@5 (exact)", "R@10 (exact)", "R@1 lost"]


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
        H.run_search(Dot(), split, metrics, settings, prof, (emb_a, emb_b))
        out["runs"].append({**prof.search, "peak_rss_mib": prof.memory["test_search"]["cpu_peak_rss_mib"]})
        print("search:", json.dumps(out["runs"][-1]), flush=True)
    return out


def search_rows(record: dict[str, Any]) -> list[list[str]]:
    """The table's cells: per index and direction, its build and query seconds, the exact search's, its size, its
    k-NN recall and recalls beside the exact ones."""
    rows = []
    for run in record["runs"]:
        label = f"{run['type']} " + ", ".join(f"{k}={v}" for k, v in run["settings"].items())
        for direction, row in run["directions"].items():
            rows.append([label, direction, f"{row['build_s']:.2f}", f"{row['query_s']:.2f}",
                         f"{row['exact_top_k_s']:.2f}", f"{row['index_mib']:.0f}", f"{row['knn_recall@10']:.2f}",
                         *(f"{row[f'R@{k}']:.2f} ({row[f'exact_R@{k}']:.2f})" for k in (1, 5, 10)),
                         f"{row['lost_R@1']:.2f}"])
    return rows


def search_markdown(record: dict[str, Any], command: str) -> str:
    """``search.md`` of a record (``search.json``): what the data is, the table, each index's peak memory."""
    peaks = [f"{r['type']} " + ", ".join(f"{k}={v}" for k, v in r["settings"].items() if k != "k") +
             f" {r['peak_rss_mib']:,.0f}" for r in record["runs"]]
    return pages.render(
        "search.md", command=command, n_a=f"{record['n_a']:,}", n_b=f"{record['n_b']:,}", dim=record["dim"],
        noise=record["noise"], header=HEADER, rows=search_rows(record), peaks=peaks)


def write_search(out: Path, command: str) -> dict[str, Any]:
    """Run the search experiment (20,000 images, 100,000 captions, 256 dimensions) and write ``search.json`` and
    ``search.md`` under ``out``.

    >>> write_search(Path("results/scaling"), "python -m benchmarks.scaling --search-only")  # doctest: +SKIP
    """
    out.mkdir(parents=True, exist_ok=True)
    record = search_run(20_000, 100_000, 256, 3.5)
    record["environment"] = H.environment(torch.device("cpu"), [])
    record["load_average_end"] = list(os.getloadavg())
    (out / "search.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    (out / "search.md").write_text(search_markdown(record, command))
    return record
