"""benchmarks/gpu_tables.sh: the GPU tables' commands, run at tiny shapes on the CPU (--smoke)."""
from __future__ import annotations

import os
import subprocess
import tarfile

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "benchmarks" / "gpu_tables.sh"


@pytest.mark.slow
def test_smoke_run_writes_every_table_and_packs_them(tmp_path):
    results, tar = tmp_path / "results", tmp_path / "out" / "gpu_tables.tar.gz"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(SCRIPT), "--smoke", "--results", str(results), "--tar", str(tar)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr + (results / "gpu_tables.log").read_text()
    flickr = (results / "flickr30k_shapes" / "timing.md").read_text()
    assert "scan@scorer=original" in flickr and "train.precision=bf16" in flickr and "train.precision=tf32" in flickr
    assert "Ratios compare runs of the same train.precision." in flickr
    coco = (results / "coco_shapes" / "timing.md").read_text()
    assert "5 folds, per fold" in coco and "≈" in coco and "scored)" in coco
    assert (results / "synthetic" / "timing.md").exists()
    assert "doodle2search_swamp" in (results / "sketchy_shapes" / "timing.md").read_text()
    assert "swamp" in (results / "msrvtt_shapes" / "timing.md").read_text()
    with tarfile.open(tar) as packed:
        names = packed.getnames()
    assert "results/coco_shapes/timing.tex" in names and "results/gpu_tables.log" in names
    assert not any(n.endswith(".pt") for n in names)


def test_unknown_option_exits_2(tmp_path):
    done = subprocess.run([str(SCRIPT), "--fast"], capture_output=True, text=True)
    assert done.returncode == 2 and "valid: --smoke" in done.stderr


@pytest.mark.slow
def test_runs_past_the_deadline_are_skipped_and_the_rest_still_packed(tmp_path):
    results, tar = tmp_path / "results", tmp_path / "gpu.tar.gz"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([str(SCRIPT), "--smoke", "--deadline", "1", "--results", str(results), "--tar", str(tar)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    log = (results / "gpu_tables.log").read_text()
    assert log.count("+ python -m harness run") == 1 and log.count("- skipped (past --deadline 1 s)") == 7
    assert (results / "flickr30k_shapes" / "timing.md").exists() and not (results / "synthetic").exists()
    with tarfile.open(tar) as packed:
        assert "results/flickr30k_shapes/timing.md" in packed.getnames()
