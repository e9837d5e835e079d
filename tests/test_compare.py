"""``python -m harness compare OLD NEW``: accuracy changes between two result folders, with a test of
significance per metric, flagged and gating with --fail-on-change; settings that differ are refused."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness import cli
from harness.report import compare
from harness.store.schema import Result, load_results, result_path, write_result
from tests.error_lines import error_line

CONFIG = {"dataset": {"source": "synthetic_gaussian", "spread": 0.5}, "encoders": {}, "method": {"method": "m"},
          "train": {"lr": 0.001}, "metrics": {"directions": ["a2b"], "relevance": ["pair"], "ks": [1]}}


def write_runs(folder: Path, values: dict[int, float], run: str = "swamp", config: dict | None = None) -> Path:
    for seed, value in values.items():
        result = Result(task="toy", task_version="1", run_name=run, method=run, seed=seed,
                        metrics={"a2b/R@1": value, "a2b/MedR": 10.0}, profile={}, config=config or CONFIG,
                        dataset={}, environment={}, wall_s=1.0)
        write_result(result_path(folder, "toy", run, seed), result)
    return folder


def test_unchanged_runs_flag_nothing(tmp_path):
    old = write_runs(tmp_path / "old", {0: 40.0, 1: 42.0, 2: 41.0})
    new = write_runs(tmp_path / "new", {0: 40.0, 1: 42.0, 2: 41.0})
    changes, notes = compare.compare(load_results(old), load_results(new))
    assert notes == [] and {c.metric for c in changes} == {"a2b/R@1", "a2b/MedR"}
    assert not any(c.flagged for c in changes)
    r1 = next(c for c in changes if c.metric == "a2b/R@1")
    assert r1.test == "paired t" and r1.p == 1.0 and r1.diff == 0


def test_a_shift_of_several_standard_deviations_is_flagged_and_gates(tmp_path, capsys):
    old = write_runs(tmp_path / "old", {0: 40.0, 1: 42.0, 2: 41.0, 3: 40.5, 4: 41.5})
    new = write_runs(tmp_path / "new", {0: 45.1, 1: 46.9, 2: 46.2, 3: 45.4, 4: 46.6})
    assert cli.main(["compare", str(old), str(new)]) == 0  # reported, not gated
    assert cli.main(["compare", str(old), str(new), "--fail-on-change"]) == 1
    out = capsys.readouterr().out
    assert "CHANGED" in out and "toy/swamp a2b/R@1: 41.00 -> 46.04 (paired t" in out
    assert cli.main(["compare", str(old), str(new), "--fail-on-change", "--min-diff", "10"]) == 0  # too small


def test_unpaired_seeds_use_welch(tmp_path):
    old = write_runs(tmp_path / "old", {0: 40.0, 1: 42.0, 2: 41.0})
    new = write_runs(tmp_path / "new", {5: 50.0, 6: 51.0, 7: 52.0})
    (change,) = [c for c in compare.compare(load_results(old), load_results(new))[0] if c.metric == "a2b/R@1"]
    assert change.test == "Welch t" and change.p < 0.01 and change.flagged


def test_different_settings_are_refused_with_the_setting_named(tmp_path, capsys):
    old = write_runs(tmp_path / "old", {0: 40.0})
    new = write_runs(tmp_path / "new", {0: 40.0}, config={**CONFIG, "train": {"lr": 0.01}})
    assert cli.main(["compare", str(old), str(new)]) == 2
    line = error_line(capsys.readouterr().err, alone=True)
    assert "toy/swamp was run with other settings in NEW (train.lr: 0.001 -> 0.01)" in line


def test_runs_on_one_side_only_are_noted_and_empty_folders_refused(tmp_path, capsys):
    old = write_runs(tmp_path / "old", {0: 40.0, 1: 41.0})
    write_runs(old, {0: 30.0}, run="contrastive")
    new = write_runs(tmp_path / "new", {0: 40.0, 1: 41.0})
    _, notes = compare.compare(load_results(old), load_results(new))
    assert notes == ["only in OLD: toy/contrastive"]
    assert cli.main(["compare", str(old), str(tmp_path / "nothing")]) == 2
    assert "NEW" in capsys.readouterr().err
    assert cli.main(["compare", str(old), str(new), "--alpha", "2"]) == 2


def test_one_seed_each_is_tested_over_queries_from_the_saved_ranks(tiny_task, tmp_path):
    old = tmp_path / "old"
    assert cli.main(["run", str(tiny_task), "--methods", "contrastive", "--epochs", "1", "--out", str(old),
                     "--no-progress"]) == 0
    new = tmp_path / "new"
    shutil.copytree(old, new)
    changes, _ = compare.compare(load_results(old), load_results(new), metrics=["a2b/R@1"], n_resamples=500)
    (change,) = changes
    assert change.test == "bootstrap" and change.p == pytest.approx(1.0) and not change.flagged
