"""``python -m harness status OUT [TASK]``: each run's state read from the files of a real tiny grid."""
from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from harness import cli
from harness.run import locks
from harness.store.schema import result_path
from tests.conftest import ROOT


def rows(text: str) -> dict[tuple[str, str], str]:
    """(run, seed) -> state from the printed table."""
    found = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[0] == "tiny" and parts[2].isdigit():
            found[(parts[1], parts[2])] = " ".join(parts[3:5]) if parts[3] == "not" else parts[3]
    return found


@pytest.mark.slow
def test_finished_running_interrupted_and_not_started_runs(tiny_task, tmp_path, capsys):
    out = tmp_path / "out"
    assert cli.main(["run", str(tiny_task), "--methods", "contrastive", "--out", str(out), "--no-progress"]) == 0
    killed = subprocess.Popen([sys.executable, "-m", "harness", "run", str(tiny_task), "--methods", "swamp",
                               "--epochs", "400", "--out", str(out), "--no-progress"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not list(out.rglob("seed0.resume.pt")) and time.time() < deadline:
        time.sleep(0.05)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    capsys.readouterr()
    held = result_path(out, "tiny", "cca", 1)
    with locks.run_lock(held):  # a live holder: this process
        assert cli.main(["status", str(out), str(tiny_task), "--methods", "contrastive,cca",
                         "--seeds", "0,1"]) == 0
        planned = capsys.readouterr().out
        assert cli.main(["status", str(out)]) == 0
        found = capsys.readouterr().out
    assert rows(planned) == {("contrastive", "0"): "finished", ("contrastive", "1"): "not started",
                             ("cca", "0"): "not started", ("cca", "1"): "running"}
    assert "1 finished, 1 running, 0 interrupted, 2 not started (of 4 runs)" in planned
    assert rows(found) == {("contrastive", "0"): "finished", ("swamp@train.epochs=400", "0"): "interrupted",
                           ("cca", "1"): "running"}
    assert "1 finished, 1 running, 1 interrupted (of 3 runs)" in found
    assert cli.main(["status", str(out), "--seeds", "0"]) == 2
    assert "add the task file" in capsys.readouterr().err
    assert cli.main(["status", str(out / "tiny")]) == 0  # a task's folder instead of the --out folder
    assert f"pass the --out folder that holds it, python -m harness status {out}" in capsys.readouterr().out
