"""Faults while a run runs: SIGKILL in the middle of every kind of write, a full disk, a non-finite loss and
out of memory. Each ends with the previous files (or none) valid, no partial file, one error line,
and a next start that resumes or redoes the run to the metrics of an uninterrupted one.

Kills are deterministic: ``tests/fault_child.py`` runs the real CLI in a subprocess and stops inside a
chosen write, after half of the file's bytes reached its temporary file; the test then sends SIGKILL.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from baselines.swamp import SwAMP
from harness.cli import main
from harness.errors import RunError
from harness.run import evaluate, guards
from harness.run import train as tr
from harness.store import io as results
from tests.bad_input_matrix import mount_available
from tests.conftest import ROOT
from tests.error_lines import error_line
from tests.fault_child import faulty_atomic_write

ENV = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
RUN = "swamp"  # the tiny task trains 2 epochs, so --epochs 2 names no setting


def start(task: Path, out: Path, *extra: str, fault: tuple[str, int, Path] | None = None) -> subprocess.Popen:
    """``python -m harness run TASK --methods swamp --epochs 2 ...`` in a subprocess, optionally paused in a write."""
    env = dict(ENV)
    if fault is not None:
        env.update(HARNESS_FAULT_FILE=fault[0], HARNESS_FAULT_NTH=str(fault[1]), HARNESS_FAULT_MODE="pause",
                   HARNESS_FAULT_MARKER=str(fault[2]))
    cmd = [sys.executable, "-m", "tests.fault_child", "run", str(task), "--methods", "swamp", "--device", "cpu",
           "--out", str(out), "--no-progress", "--epochs", "2", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(marker: Path, proc: subprocess.Popen, timeout: float = 300.0) -> None:
    """Until ``marker`` exists; fails with the process's output if it ends first."""
    deadline = time.monotonic() + timeout
    while not marker.exists():
        assert proc.poll() is None, f"the process ended before the fault:\n{proc.stdout.read()}"
        assert time.monotonic() < deadline, "the fault was not reached in time"
        time.sleep(0.01)


def finish(proc: subprocess.Popen) -> str:
    out, _ = proc.communicate(timeout=600)
    assert proc.returncode == 0, out
    return out


def kill_during(task: Path, out: Path, name: str, nth: int, *extra: str) -> None:
    """Start the run and SIGKILL it in the middle of the ``nth`` write of file ``name``."""
    marker = out.parent / f"paused-in-{name}-{nth}{''.join(extra)}"
    proc = start(task, out, *extra, fault=(name, nth, marker))
    wait_for(marker, proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    proc.stdout.close()


def temporaries(folder: Path) -> list[Path]:
    return sorted(folder.glob(".*.tmp"))


def epochs_in(checkpoint: Path) -> int:
    return len(torch.load(checkpoint, weights_only=True)["fit"]["history"])


def assert_every_visible_file_reads(out: Path) -> None:
    """Every file a user or `harness table` would read parses completely."""
    for path in (p for p in out.rglob("*") if p.is_file() and not p.name.startswith(".")):
        if path.suffix == ".json":
            json.loads(path.read_text())
        elif path.suffix == ".pt":
            torch.load(path, weights_only=True)
        elif path.suffix == ".npz":
            dict(np.load(path))
        else:
            assert path.read_text().endswith("\n"), path


def comparable(result: dict) -> tuple:
    return result["metrics"], result["best_epoch"], result["history"]


@pytest.mark.slow
def test_a_run_killed_in_the_middle_of_every_kind_of_write_loses_nothing(tiny_task, tmp_path):
    out = tmp_path / "out"
    folder = out / "tiny" / RUN
    result, resume, best = folder / "seed0.json", folder / "seed0.resume.pt", folder / "seed0.pt"

    kill_during(tiny_task, out, "seed0.resume.pt", 2)  # the second epoch's checkpoint: the first one stays
    assert epochs_in(resume) == 1 and not result.exists() and len(temporaries(folder)) == 1
    kill_during(tiny_task, out, "seed0.json", 1)  # the result file, written last
    assert not result.exists() and epochs_in(resume) == 2 and torch.load(best, weights_only=True)
    assert len(temporaries(folder)) == 1  # the first kill's half-written checkpoint was removed, this kill's is left
    assert_every_visible_file_reads(out)
    finish(start(tiny_task, out))  # the same command again: it tests the trained model and writes the result
    assert json.loads(result.read_text())["resumed_from_epoch"] == 2 and not resume.exists()
    finished = result.read_bytes()

    kill_during(tiny_task, out, "seed0.json", 1, "--force")  # replacing a finished result
    assert result.read_bytes() == finished  # the previous result is intact
    assert_every_visible_file_reads(out)
    finish(start(tiny_task, out, "--force"))  # an uninterrupted run from scratch
    fresh = json.loads(result.read_text())
    assert fresh["resumed_from_epoch"] == 0
    assert comparable(json.loads(finished)) == comparable(fresh)  # three kills changed no number
    assert temporaries(folder) == [] and not resume.exists()
    assert_every_visible_file_reads(out)


def _cli(task: Path, out: Path, *extra: str) -> list[str]:
    return ["run", str(task), "--methods", "swamp", "--device", "cpu", "--out", str(out), "--no-progress", *extra]


def _one_error_line(capsys) -> str:
    """The one error line, the last; warnings about settings that do not fit the tiny data and notes (a busy
    machine) may come before it."""
    return error_line(capsys.readouterr().err)


def test_a_failed_result_write_keeps_the_previous_result(tiny_task, tmp_path, capsys, monkeypatch):
    args = _cli(tiny_task, tmp_path, "--epochs", "1")
    assert main(args) == 0
    result = tmp_path / "tiny" / "swamp@train.epochs=1" / "seed0.json"
    before = result.read_bytes()
    monkeypatch.setattr(results, "atomic_write", faulty_atomic_write(results.atomic_write, "seed0.json", 1, "enospc"))
    capsys.readouterr()
    assert main(args + ["--force"]) == 3
    line = _one_error_line(capsys)
    assert f"cannot write {result}: No space left on device" in line and "pass --out" in line
    assert result.read_bytes() == before and temporaries(result.parent) == []


@pytest.mark.slow  # seconds: mounts a tiny file system
@pytest.mark.skipif(not mount_available(), reason="this machine cannot mount a tmpfs in a user namespace (unshare)")
def test_a_full_disk_stops_the_run_with_one_line_and_no_partial_file(tiny_task, tmp_path):
    """A real full file system: a 128 KiB tmpfs cannot hold the first checkpoint (about 280 KB)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = 'mount -t tmpfs -o size=128k none "$0" || exit 99; "$@"; echo "exit=$?"; find "$0" -type f'
    cmd = ["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script, str(disk),
           sys.executable, "-m", "harness", *_cli(tiny_task, disk / "results", "--epochs", "2")]
    proc = subprocess.run(cmd, cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=600)
    assert proc.stdout.splitlines() == ["exit=3"], proc.stdout + proc.stderr  # and no file left on the disk
    line = error_line(proc.stderr)
    assert "seed0.resume.pt: No space left on device" in line, proc.stderr
    assert "free space on that file system or pass --out" in line


def test_make_step_skips_the_update_when_the_loss_check_says_so(tiny_task):
    from harness.config import plan
    from harness.run import runner

    run = plan.plan(tiny_task, [], [], ["swamp"], [0])[0]
    data = runner.load_data(run.spec)
    method = runner.build_method(run.spec, "swamp", data, torch.device("cpu"))
    optimizer = tr.make_optimizer(method, run.spec.methods["swamp"].train)
    before = {k: v.clone() for k, v in method.state_dict().items() if not k.startswith("queue.")}
    step = tr.make_step(method, optimizer, data["train"], torch.device("cpu"), None,
                        check_loss=lambda loss, logs: False)
    assert step(torch.arange(32)) == {}
    assert all(torch.equal(v, method.state_dict()[k]) for k, v in before.items()) and not optimizer.state


def nan_at(monkeypatch, calls: set[int]) -> None:
    """SwAMP's loss becomes NaN at these calls (1 = the first step of the run)."""
    real, seen = SwAMP.loss, [0]

    def loss(self, x_a, x_b):
        seen[0] += 1
        total, logs = real(self, x_a, x_b)
        if seen[0] in calls:
            total = total * float("nan")
            logs = {**logs, "loss": total.detach()}
        return total, logs

    monkeypatch.setattr(SwAMP, "loss", loss)


def test_a_nan_loss_stops_at_its_step_and_keeps_the_last_checkpoint(tiny_task, tmp_path, capsys, monkeypatch):
    nan_at(monkeypatch, {11})  # 240 pairs in batches of 32: 8 steps an epoch, so epoch 2, step 3
    args = _cli(tiny_task, tmp_path, "--epochs", "3")
    assert main(args) == 3
    line = _one_error_line(capsys)
    folder = tmp_path / "tiny" / "swamp@train.epochs=3"
    assert "non-finite loss at epoch 2, step 3 of 8 (step 11 of the run): swamp=" in line and "loss=nan" in line
    assert "method=swamp " in line and "K=16 queue=64 tau=0.1 eta=5.0" in line and "lr=0.001" in line
    assert f"its last complete epoch stays in {folder / 'seed0.resume.pt'}" in line and "--on-nan skip" in line
    assert not (folder / "seed0.json").exists() and epochs_in(folder / "seed0.resume.pt") == 1
    monkeypatch.undo()  # the same command again: it resumes after epoch 1 and finishes
    assert main(args) == 0
    assert json.loads((folder / "seed0.json").read_text())["resumed_from_epoch"] == 1


def test_a_diverging_run_stops_at_its_first_nan(tiny_task, tmp_path, capsys):
    assert main(_cli(tiny_task, tmp_path, "--set", "train.optimizer=sgd", "--set", "train.lr=1e30")) == 3
    line = _one_error_line(capsys)
    assert "non-finite loss at epoch 1, step 2 of 8" in line and "no epoch was complete" in line
    assert not (tmp_path / "tiny").exists()  # nothing written, no empty folders


def test_on_nan_skip_drops_those_updates_and_records_them(tiny_task, tmp_path, monkeypatch):
    nan_at(monkeypatch, {3, 4})
    assert main(_cli(tiny_task, tmp_path, "--on-nan", "skip")) == 0
    result = json.loads((tmp_path / "tiny" / "swamp" / "seed0.json").read_text())
    assert [(s["epoch"], s["step"], s["run_step"]) for s in result["skipped_steps"]] == [(1, 3, 3), (1, 4, 4)]
    assert result["on_nan"] == "skip" and all(np.isfinite(h["loss"]) for h in result["history"])


def test_on_nan_skip_gives_up_after_a_run_of_failed_steps(tiny_task, tmp_path, capsys):
    args = _cli(tiny_task, tmp_path, "--set", "train.optimizer=sgd", "--set", "train.lr=1e30", "--on-nan", "skip")
    assert main(args) == 3
    assert f"({guards.MAX_CONSECUTIVE_SKIPS} non-finite steps in a row)" in _one_error_line(capsys)


def _allocate_too_much(device: str = "cpu") -> None:
    torch.empty(2**62 if device == "cpu" else 2**50, dtype=torch.uint8, device=device)  # a real failed allocation


def test_out_of_memory_in_a_training_step_names_the_batch_size(tiny_task, tmp_path, capsys, monkeypatch):
    real, seen = SwAMP.loss, [0]

    def loss(self, x_a, x_b):
        seen[0] += 1
        if seen[0] == 3:
            _allocate_too_much()
        return real(self, x_a, x_b)

    monkeypatch.setattr(SwAMP, "loss", loss)
    assert main(_cli(tiny_task, tmp_path)) == 3
    line = _one_error_line(capsys)
    assert "out of memory on cpu during a training step: lower train.batch_size (now 32)" in line
    assert "no epoch was complete" in line and not (tmp_path / "tiny").exists()


def test_out_of_memory_in_the_test_names_the_eval_batch_and_scorer_budget(tiny_image_text_task, tmp_path, capsys,
                                                                          monkeypatch):
    real, seen = evaluate.score_folds, [0]

    def score_folds(*args, **kwargs):
        seen[0] += 1
        if seen[0] == 3 * 2 + 1:  # the untrained model and two epochs validate two protocols each; then the test
            _allocate_too_much()
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate, "score_folds", score_folds)
    args = ["run", str(tiny_image_text_task), "--methods", "scan", "--device", "cpu", "--out", str(tmp_path),
            "--no-progress"]
    assert main(args) == 3
    line = _one_error_line(capsys)
    assert "during the test retrieval: lower train.eval_batch_size (now 16) or scan.memory_budget_mib (now 64)" in line
    folder = tmp_path / "tiny_image_text" / "scan"
    assert not (folder / "seed0.json").exists() and epochs_in(folder / "seed0.resume.pt") == 2
    monkeypatch.undo()
    assert main(args) == 0  # nothing lost: the same command tests the trained model
    assert json.loads((folder / "seed0.json").read_text())["resumed_from_epoch"] == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_out_of_memory_names_the_batch_size(tiny_task, tmp_path, capsys, monkeypatch):
    real = SwAMP.loss

    def loss(self, x_a, x_b):
        _allocate_too_much("cuda")
        return real(self, x_a, x_b)

    monkeypatch.setattr(SwAMP, "loss", loss)
    assert main(_cli(tiny_task, tmp_path, "--device", "cuda")) == 3
    assert "out of memory on cuda" in _one_error_line(capsys)


def _nan_verdicts(info, cases: list[tuple[str, list[int]]]) -> list[object]:
    """Each process's verdict on a loss that is NaN on the ranks listed (a scenario of test_distributed)."""
    verdicts: list[object] = []
    for policy, nan_on in cases:
        guard = guards.NonFiniteGuard(policy, "test", 8, Path("no-checkpoint"))
        guard.step = 1
        loss = torch.tensor(math.nan if info.rank in nan_on else 1.0)
        try:
            verdicts.append(guard(loss, {"loss": loss}))
        except RunError:
            verdicts.append("stopped")
    return verdicts


@pytest.mark.slow
def test_all_processes_agree_on_a_non_finite_loss(tmp_path):
    """Under torchrun a NaN on one process stops or skips the step on every process (none waits forever)."""
    from tests.test_distributed import WORLD, run_on_ranks

    cases = [("skip", [1]), ("skip", []), ("stop", [0])]
    assert run_on_ranks(_nan_verdicts, tmp_path, cases=cases) == [[False, True, "stopped"]] * WORLD
