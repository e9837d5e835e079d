"""What ``python -m benchmarks.scaling`` writes from its record (``scaling.json``): growth exponents and the sizes
where a full test crosses one second and one hour, ``scaling.md`` (the template ``benchmarks/templates/scaling.md``)
and the log-log figure ``scaling.svg``."""
from __future__ import annotations

import math
import platform
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmarks import pages
from benchmarks.scaling_measure import PER_IMAGE

STREAMING = "SwAMP-PAR / Contrastive-PAR (streaming)"
TARGETS = (("1 s", 1.0), ("1 h", 3600.0))


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


def hardware(record: dict[str, Any]) -> str:
    hw = record["environment"].get("hardware", {})
    cpu = hw.get("cpu") or hw.get("cpu_model") or platform.processor() or "CPU"
    return (f"{cpu}, {hw.get('cores', '?')} cores, {record['threads']} torch threads; torch "
            f"{record['environment'].get('versions', {}).get('torch', torch.__version__)}; device cpu, fp32")


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
            f"table's cell ({seconds(cell['score_s'])} s, the slab rule) is {images * size * width:.3g} "
            f"multiply-adds of one pass, at least {cell_rate:.0f} G/s. The two rates are not measured on one "
            f"shape, so they need not agree: a narrow product writes one score per {mem['dim']:,} multiply-adds "
            f"instead of one per {width:,}, which likely makes it slower per multiply-add (not measured here). Were "
            f"the PAR test as slow per multiply-add as the narrow one, it would score in about "
            f"{seconds(at_mem_rate)} s instead of {seconds(cell['score_s'])} s: read the table's score cells as "
            f"the slab's rate scaled, which the whole test does not check.")


def seconds(s: float) -> str:
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


def crossings(record: dict[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """Per method, the gallery size where a full test takes one second and one hour (:func:`crossing`)."""
    sizes = record["sizes"]
    return {name: {label: dict(zip(("gallery", "how"), crossing(sizes, [row[str(n)]["total_s"] for n in sizes],
                                                                 target)))
                   for label, target in TARGETS} for name, row in record["methods"].items()}


def _exponent_cell(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"


def table_rows(record: dict[str, Any]) -> list[list[str]]:
    """The main table's cells: per method its phases' seconds at every size ('*' where extrapolated) with their growth
    exponents, its computed test memory, and the streaming slab's measured peak RSS."""
    sizes, rows = record["sizes"], []
    for name, row in record["methods"].items():
        for phase in ("encode", "score", "rank", "total"):
            cells = [seconds(row[str(n)][f"{phase}_s"]) + ("" if phase == "total" or row[str(n)]["timed"][phase]
                                                           else "*") for n in sizes]
            rows.append([name, f"{phase} s", *cells, _exponent_cell(record["exponents"][name].get(phase)),
                         _exponent_cell(record["exponents_all_sizes"][name][phase])])
        rows.append([name, "test memory MiB (computed)", *(f"{row[str(n)]['test_memory_mib']:,.0f}" for n in sizes),
                     "", ""])
    par = record["methods"][STREAMING]
    rows.append([STREAMING, "slab peak RSS MiB (measured)",
                 *(f"{par[str(n)]['slab_peak_rss_mib']:,.0f}" if par[str(n)]["slab_peak_rss_mib"] else "–"
                   for n in sizes), "", ""])
    return rows


def _load(averages: list[float]) -> str:
    """Load averages as the page writes them: '1.02, 0.98, 0.75'."""
    return ", ".join(f"{x:.2f}" for x in averages)


def markdown(record: dict[str, Any]) -> str:
    """``scaling.md`` of a record: the machine, the table, where a full test crosses 1 s and 1 h, the slab's rate
    and the load, SCAN's budgeted probe, the measured whole streaming test and the paper's times."""
    (slab, slab_rate), (block, block_rate) = record["slab_product_rate"].items()
    probe, mem = record["scan_original_probe"], record.get("memory_20k_x_100k")
    memory = mem and {
        "n_a": f"{mem['n_a']:,}", "n_b": f"{mem['n_b']:,}", "dim": mem["dim"], "block_a": mem["blocks"][0],
        "block_b": mem["blocks"][1], "peak": f"{mem['peak_rss_mib']:,.0f}",
        "embeddings": f"{mem['embeddings_mib']:,.0f}", "before": f"{mem['rss_at_start_mib']:,.0f}",
        "seconds": f"{mem['seconds']:.1f}", "score": f"{mem['score_s']:.1f}", "rank": f"{mem['rank_s']:.1f}",
        "matrix": f"{mem['score_matrix_would_be_mib']:,.0f}"}
    return pages.render(
        "scaling.md", command=record["command"], hardware=hardware(record),
        header=["method", "phase", *(f"{n:,}" for n in record["sizes"]), "growth exponent, timed sizes",
                "growth exponent, all sizes"],
        rows=table_rows(record),
        crossings=[[name, *(f"{c['gallery']:,.0f} ({c['how']})" if c["gallery"] else f"– ({c['how']})"
                           for c in (cross["1 s"], cross["1 h"]))] for name, cross in record["crossings"].items()],
        slab=slab, slab_rate=f"{slab_rate:.1f}", block=block, block_rate=f"{block_rate:.1f}",
        overstate=f"{block_rate / slab_rate:.2f}", load_start=_load(record["load_average_start"]),
        load_end=_load(record["load_average_end"]),
        probe={"budget": f"{probe['budget_s']:.0f}", "percent": f"{100 * probe['fraction_scored']:.2f}",
               "images": probe["images"], "captions": probe["captions"],
               "ms_per_pair": f"{probe['s_per_pair'] * 1e3:.3f}"},
        memory=memory, reconcile=reconcile(record) if mem else "",
        paper="; ".join(f"{k} (gallery {v['gallery']:,}): " + ", ".join(f"{m} {s:g} s" for m, s in v["test_s"].items())
                        for k, v in record["paper"].items()))
