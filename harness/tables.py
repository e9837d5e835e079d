"""Paper-style tables rendered from result files only (never edited by hand).

Accuracy: one row per (relevance, method), R@k and MedR per direction, mean ± std over
seeds. Timing: per-step train time, whole-test retrieval time split into its parts,
peak memory per phase, and each method's step and test time relative to a reference.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from tabulate import tabulate

FORMATS = {"md": "github", "tex": "latex_booktabs"}


def _mean_std(values: list[float], digits: int = 2) -> str:
    if not values:
        return "–"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def group_runs(results: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Result dicts grouped by run name (method plus overrides), in first-seen order."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in results:
        groups[r["run_name"]].append(r)
    return dict(groups)


def accuracy_rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the accuracy table (plus published reference rows when the task has them)."""
    groups = group_runs(results)
    first = results[0]
    metrics = first["config"]["metrics"]
    stats = [f"R@{k}" for k in metrics["ks"]] + ["MedR"]
    header = ["error type", "method", "seeds"] + [f"{d} {s}" for d in metrics["directions"] for s in stats]
    reference = first.get("reference") or {}
    rows = []
    for relevance in metrics["relevance"]:
        prefix = "" if relevance == "pair" else "class_"
        for name, runs in groups.items():
            cells = [_mean_std([r["metrics"][f"{d}/{prefix}{s}"] for r in runs], 1 if s == "MedR" else 2)
                     for d in metrics["directions"] for s in stats]
            rows.append([f"{relevance}-based", name, str(len(runs)), *cells])
        for name, published in (reference.get("methods") or {}).items():
            cells = [_published(published.get(f"{d}/{prefix}{s}")) for d in metrics["directions"] for s in stats]
            if any(c != "–" for c in cells):
                rows.append([f"{relevance}-based", f"{name} ({reference.get('label', 'published')})", "–", *cells])
    return header, rows


def _published(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def _timing(runs: list[dict[str, Any]], key: str, field: str = "median_s", scale: float = 1.0) -> list[float]:
    return [r["profile"]["timing"][key][field] * scale for r in runs if key in r["profile"]["timing"]]


def _memory(runs: list[dict[str, Any]], phase: str, field: str) -> list[float]:
    return [r["profile"]["memory"][phase][field] for r in runs if field in r["profile"]["memory"].get(phase, {})]


def timing_rows(results: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the timing/memory table; ratios are against the first method listed."""
    groups = group_runs(results)
    ref_name = next(iter(groups))
    ref_step = statistics.mean(_timing(groups[ref_name], "train_step"))
    ref_test = statistics.mean(_timing(groups[ref_name], "test_total"))
    cuda = any("cuda_max_allocated_mib" in r["profile"]["memory"].get("train", {}) for r in results)
    mem_field, mem_label = ("cuda_max_allocated_mib", "CUDA alloc") if cuda else ("cpu_peak_rss_mib", "RSS")
    header = ["method", "train step ms (median)", "p90 ms", "epoch s", f"step / {ref_name}",
              "test s", "encode s", "score s", "rank s", f"test / {ref_name}",
              f"train peak MiB ({mem_label})", f"test peak MiB ({mem_label})"]
    rows = []
    for name, runs in groups.items():
        step = _timing(runs, "train_step", scale=1e3)
        test = _timing(runs, "test_total")
        rows.append([
            name, _mean_std(step), _mean_std(_timing(runs, "train_step", "p90_s", 1e3)),
            _mean_std(_timing(runs, "train_epoch")),
            f"{statistics.mean(step) / 1e3 / ref_step:.2f}×",
            _mean_std(test, 3), _mean_std(_timing(runs, "test_encode"), 3),
            _mean_std(_timing(runs, "test_score"), 3), _mean_std(_timing(runs, "test_rank"), 3),
            f"{statistics.mean(test) / ref_test:.2f}×",
            _mean_std(_memory(runs, "train", mem_field), 0), _mean_std(_memory(runs, "test", mem_field), 0),
        ])
    return header, rows


def hardware_line(results: list[dict[str, Any]]) -> str:
    """One line naming the machine(s) and software the results came from."""
    seen = []
    for r in results:
        hw, v = r["environment"]["hardware"], r["environment"]["versions"]
        gpu = hw.get("gpu") or {}
        where = gpu.get("name") or f"{hw['cpu']} ({hw['cores']} cores, {hw['torch_threads']} torch threads)"
        line = f"{where}; torch {v['torch']}; device {hw['device']}"
        if line not in seen:
            seen.append(line)
    return " | ".join(seen)


def render(results: list[dict[str, Any]], fmt: str) -> dict[str, str]:
    """Both tables as text in ``fmt`` ('md', 'tex' or a tabulate format such as 'simple')."""
    table_fmt = FORMATS.get(fmt, fmt)
    out = {}
    for name, (header, rows) in (("accuracy", accuracy_rows(results)), ("timing", timing_rows(results))):
        out[name] = tabulate(rows, headers=header, tablefmt=table_fmt, disable_numparse=True)
    return out


def write_tables(results: list[dict[str, Any]], folder: Path) -> list[Path]:
    """Write accuracy/timing tables as Markdown and LaTeX into ``folder``; return the paths."""
    task = results[0]
    caption = (f"Task {task['task']} v{task['task_version']}; {len(results)} result files; "
               f"{hardware_line(results)}.")
    written = []
    for ext in ("md", "tex"):
        for name, text in render(results, ext).items():
            path = folder / f"{name}.{ext}"
            note = f"<!-- generated by `python -m harness table {folder}` -->\n{caption}\n\n" if ext == "md" \
                else f"% generated by python -m harness table {folder}\n% {caption}\n"
            path.write_text(note + text + "\n")
            written.append(path)
    return written
