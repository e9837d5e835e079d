"""Resumable runs: an interrupted run (exception or SIGKILL) continues from its last complete
epoch and ends with the metrics of an uninterrupted run; finished runs are skipped unless
--force; --init starts encoders from another run's checkpoint."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml

from harness.cli import main
from harness.config import plan
from harness.errors import ConfigError
from harness.run import checkpoint as ckpt
from harness.run import runner

ROOT = Path(__file__).resolve().parent.parent


def _run(task: Path, out: Path, epochs: int, method: str = "swamp") -> dict:
    run = plan.plan(task, [], [], [method], [0], epochs=epochs)[0]
    opts = runner.RunOptions(device=torch.device("cpu"), out=out, progress=False)
    return runner.run_one(run, runner.load_data(run.spec), opts)


def _comparable(result: dict) -> tuple:
    history = [{k: v for k, v in h.items()} for h in result["history"]]
    return result["metrics"], result["best_epoch"], history


def test_interrupted_run_resumes_to_the_same_result(tiny_task, tmp_path, monkeypatch):
    whole = _run(tiny_task, tmp_path / "whole", epochs=4)
    real_save = ckpt.save_resume

    def save_then_crash(path, fingerprint, method, optimizer, scheduler, fit, generator):
        real_save(path, fingerprint, method, optimizer, scheduler, fit, generator)
        if len(fit.history) == 2:
            raise KeyboardInterrupt  # the process dies right after epoch 2 was checkpointed

    monkeypatch.setattr(ckpt, "save_resume", save_then_crash)
    with pytest.raises(KeyboardInterrupt):
        _run(tiny_task, tmp_path / "cut", epochs=4)
    result_file = tmp_path / "cut" / "tiny" / "swamp@train.epochs=4" / "seed0.json"
    assert not result_file.exists() and ckpt.resume_path(result_file).exists()
    monkeypatch.setattr(ckpt, "save_resume", real_save)
    resumed = _run(tiny_task, tmp_path / "cut", epochs=4)
    assert resumed["resumed_from_epoch"] == 2 and whole["resumed_from_epoch"] == 0
    assert _comparable(resumed) == _comparable(whole)
    assert not ckpt.resume_path(result_file).exists()  # removed once the result is written


def test_resume_refuses_a_checkpoint_of_other_settings(tiny_task, tmp_path, monkeypatch):
    real_save = ckpt.save_resume

    def crash(*args):
        real_save(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(ckpt, "save_resume", crash)
    with pytest.raises(KeyboardInterrupt):
        _run(tiny_task, tmp_path, epochs=3)
    monkeypatch.setattr(ckpt, "save_resume", real_save)
    body = yaml.safe_load(tiny_task.read_text())
    body["train"]["lr"] = 0.01  # the task file changed under the interrupted run
    tiny_task.write_text(yaml.safe_dump(body))
    with pytest.raises(ConfigError, match="--force"):
        _run(tiny_task, tmp_path, epochs=3)


def _cli(task: Path, out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "harness", "run", str(task), "--methods", "swamp", "--device", "cpu",
           "--out", str(out), "--no-progress", *extra]
    return subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.mark.slow
def test_sigkilled_run_resumes_with_the_same_command(tiny_task, tmp_path):
    epochs = ("--epochs", "25")
    reference = _cli(tiny_task, tmp_path / "whole", *epochs)
    assert reference.wait(timeout=600) == 0, reference.stdout.read()
    out = tmp_path / "killed"
    result_file = out / "tiny" / "swamp@train.epochs=25" / "seed0.json"
    victim = _cli(tiny_task, out, *epochs)
    deadline = time.monotonic() + 300
    while not ckpt.resume_path(result_file).exists():
        assert victim.poll() is None, "the run ended before its first checkpoint:\n" + victim.stdout.read()
        assert time.monotonic() < deadline
        time.sleep(0.01)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    assert not result_file.exists()  # no partial result
    again = _cli(tiny_task, out, *epochs)
    assert again.wait(timeout=600) == 0, again.stdout.read()
    killed, whole = (json.loads(p.read_text()) for p in
                     (result_file, tmp_path / "whole" / "tiny" / "swamp@train.epochs=25" / "seed0.json"))
    assert 1 <= killed["resumed_from_epoch"] < 25
    assert _comparable(killed) == _comparable(whole)


def test_finished_runs_are_skipped_unless_forced(tiny_task, tmp_path, capsys):
    args = ["run", str(tiny_task), "--methods", "contrastive", "--device", "cpu", "--out", str(tmp_path),
            "--no-progress"]
    assert main(args) == 0
    path = tmp_path / "tiny" / "contrastive" / "seed0.json"
    first = path.read_text()
    capsys.readouterr()
    assert main(args) == 0
    assert "finished earlier, skipped" in capsys.readouterr().out
    assert path.read_text() == first
    assert main(args + ["--force"]) == 0
    assert json.loads(path.read_text())["environment"]["date"] >= json.loads(first)["environment"]["date"]
    assert path.read_text() != first


def test_finished_run_with_other_settings_is_an_error(tiny_task, tmp_path, capsys):
    args = ["run", str(tiny_task), "--methods", "contrastive", "--device", "cpu", "--out", str(tmp_path),
            "--no-progress"]
    assert main(args) == 0
    body = yaml.safe_load(tiny_task.read_text())
    body["train"]["lr"] = 0.01
    tiny_task.write_text(yaml.safe_dump(body))
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "other settings (train.lr)" in err and "--force" in err


def test_init_copies_encoders_and_names_the_run(tiny_task, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["run", str(tiny_task), "--methods", "contrastive", "--out", str(out), "--no-progress",
                 "--device", "cpu"]) == 0
    source = out / "tiny" / "contrastive" / "seed0.json"
    run = plan.plan(tiny_task, [], [], ["swamp"], [0])[0]
    method = runner.build_method(run.spec, "swamp", runner.load_data(run.spec), torch.device("cpu"))
    prototypes = method.prototypes.detach().clone()
    copied = ckpt.load_encoders(method, source)
    trained = torch.load(out / "tiny" / "contrastive" / "seed0.pt", weights_only=True)
    assert copied and all(torch.equal(method.state_dict()[k], trained[k]) for k in copied)
    assert torch.equal(method.prototypes, prototypes)  # only encoders are copied
    assert main(["run", str(tiny_task), "--methods", "swamp", "--out", str(out), "--no-progress", "--device", "cpu",
                 "--init", str(source), "--epochs", "1"]) == 0
    result = json.loads((out / "tiny" / "swamp@train.epochs=1,init=contrastive" / "seed0.json").read_text())
    assert result["init"] == str(source) and result["varied"]["init"] == "contrastive"


def test_init_errors(tiny_task, tmp_path, capsys):
    assert main(["run", str(tiny_task), "--init", str(tmp_path / "nope.pt"), "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
    run = plan.plan(tiny_task, [], [], ["swamp"], [0])[0]
    method = runner.build_method(run.spec, "swamp", runner.load_data(run.spec), torch.device("cpu"))
    bad = tmp_path / "other" / "seed0.pt"
    bad.parent.mkdir()
    torch.save({k: torch.zeros(3) for k in method.state_dict() if k.startswith("encoders.")}, bad)
    with pytest.raises(ConfigError, match="do not match"):
        ckpt.load_encoders(method, bad)
