"""The timing table's line on feature extraction: a frozen backbone's features are a phase of their own, outside
the per-step and test columns, and the line says what computing them and reading them from the cache cost."""
from __future__ import annotations

from typing import Any

from harness.report.timing import extraction_lines


def _run(seconds: float, peak: float, hits: int, entries: int = 4) -> dict[str, Any]:
    return {"dataset": {"extraction": {"seconds": seconds, "peak_rss_mib": peak, "hits": hits,
                                       "entries": {f"f{i}.mat": {"key": "k"} for i in range(entries)}}}}


def test_runs_that_computed_and_runs_that_read_the_features_are_told_apart():
    lines = extraction_lines([_run(215.7, 1460.3, 0), _run(0.65, 900.0, 4), _run(0.72, 910.0, 4)])
    assert len(lines) == 1
    assert "1 run(s) computed the features: 215.7 s (peak 1,460 MiB)" in lines[0]
    assert "2 read them from the cache: 0.7 s (peak 910 MiB)" in lines[0]
    assert "0.5–3.0 s" in extraction_lines([_run(0.5, 1.0, 4), _run(3.0, 1.0, 4)])[0]


def test_a_partly_cached_run_counts_as_computing():
    lines = extraction_lines([_run(60.0, 1200.0, 2)])
    assert "1 run(s) computed the features: 60.0 s" in lines[0] and "cache:" not in lines[0]


def test_no_line_without_extraction():
    assert extraction_lines([{"dataset": {}}, {}]) == []
