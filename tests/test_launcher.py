"""``run --launcher local --jobs N``: the planned runs in worker processes give the result files and tables
of a sequential run; finished runs are skipped; a failed run is named; Ctrl-C stops every worker."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness import cli
from tests.conftest import ROOT
from tests.error_lines import error_line

pytestmark = pytest.mark.slow


def metrics(out: Path) -> dict[str, dict]:
    return {str(p.relative_to(out)): json.loads(p.read_text())["metrics"] for p in sorted(out.rglob("seed*.json"))}


def harness(*argv: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, **kw)


def test_local_workers_give_the_result_files_and_tables_of_a_sequential_run(tiny_task, tmp_path):
    common = [str(tiny_task), "--methods", "contrastive,swamp", "--seeds", "0,1", "--threads", "1", "--no-progress"]
    sequential = harness("run", *common, "--out", str(tmp_path / "seq"))
    assert sequential.returncode == 0, sequential.stderr
    local = harness("run", *common, "--out", str(tmp_path / "local"), "--launcher", "local", "--jobs", "2")
    assert local.returncode == 0, local.stderr
    assert "4 run(s) in 2 worker process(es), 1 torch thread(s) each" in local.stdout
    assert sum("finished (" in line for line in local.stdout.splitlines()) == 4
    assert metrics(tmp_path / "seq") == metrics(tmp_path / "local") and len(metrics(tmp_path / "seq")) == 4
    drop_header = lambda p: p.read_text().split("\n", 2)[2]  # noqa: E731 (the first lines name the folder)
    assert drop_header(tmp_path / "seq" / "tiny" / "accuracy.md") == drop_header(tmp_path / "local" / "tiny" /
                                                                                  "accuracy.md")
    again = harness("run", *common, "--out", str(tmp_path / "local"), "--launcher", "local", "--jobs", "2")
    assert again.returncode == 0 and again.stdout.count("finished earlier, skipped") == 4
    assert "worker process" not in again.stdout  # nothing left to run


def test_the_study_a_runs_options_record_reaches_its_result_file_through_the_workers(tiny_task, tmp_path):
    """``RunOptions.tuning`` (the study that chose a run's settings; ``reproduce --reference`` sets it from the
    committed files) travels in each worker's job: the files local workers write record it as a sequential run's
    do, where the workers used to build their options afresh and drop it."""
    from harness.config import plan
    from harness.run import grid

    study = {"study": "tiny.contrastive.0123456789", "metric": "a2b/R@1", "best": {"margin": 0.1}}
    runs = plan.plan(tiny_task, [], [], ["contrastive"], [0, 1], 1)
    described = grid.job(runs[0], grid.Grid(out=tmp_path, epochs=1), threads=1, tuning=study)
    assert grid.Job.from_json(described.to_json()).tuning == study
    recorded = {}
    for launcher in ("sequential", "local"):
        base = grid.Grid(out=tmp_path / launcher, epochs=1, threads=1, launcher=launcher,
                         jobs=2 if launcher == "local" else None, progress=False)
        opts = grid.options(base)
        opts.tuning = study
        outcome = grid.run(runs, base, opts)
        assert outcome.failed is None and len(outcome.results) == 2
        recorded[launcher] = [json.loads(Path(r["_path"]).read_text())["tuning"] for r in outcome.results]
    assert recorded["local"] == recorded["sequential"] == [study, study]


def test_a_failed_run_is_named_and_the_others_finish(tiny_task, tmp_path):
    done = harness("run", str(tiny_task), "--methods", "contrastive", "--sweep", "train.lr=0.002,1e30",
                   "--out", str(tmp_path), "--no-progress", "--launcher", "local", "--jobs", "2")
    assert done.returncode == 3, done.stdout + done.stderr
    line = error_line(done.stderr)
    assert line.startswith("error: 1 of 2 run(s) failed, first contrastive@train.lr=1e+30 seed0 (exit 3)"), line
    assert "non-finite loss" in line and "lower train.lr" in line
    assert "contrastive@train.lr=0.002 seed0: finished" in done.stdout
    assert [p.parent.name for p in tmp_path.rglob("seed0.json")] == ["contrastive@train.lr=0.002"]


def test_ctrl_c_stops_every_worker_and_the_same_command_resumes(tiny_task, tmp_path):
    argv = [sys.executable, "-m", "harness", "run", str(tiny_task), "--methods", "contrastive,swamp", "--epochs", "60",
            "--out", str(tmp_path), "--no-progress", "--launcher", "local", "--jobs", "2"]
    # a shell that runs the suite in the background leaves SIGINT ignored, and Python then never installs its
    # KeyboardInterrupt handler: the command gets SIGINT's default disposition, as a terminal would give it
    parent = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    while not list(tmp_path.rglob("seed0.resume.pt")) and time.time() < deadline and parent.poll() is None:
        time.sleep(0.2)
    workers = psutil.Process(parent.pid).children(recursive=True)
    parent.send_signal(signal.SIGINT)
    _, stderr = parent.communicate(timeout=60)
    assert parent.returncode == 3, stderr
    assert "interrupted:" in stderr and "resumes the others" in stderr
    psutil.wait_procs(workers, timeout=30)
    assert not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)
    assert not list(tmp_path.rglob("seed0.json")) or len(list(tmp_path.rglob("seed0.json"))) < 2
    resumed = harness("run", *argv[4:])
    assert resumed.returncode == 0, resumed.stderr
    assert len(list(tmp_path.rglob("seed0.json"))) == 2


@pytest.mark.parametrize("argv,message", [
    (["--launcher", "local", "--jobs", "0"], "--jobs 0: give a positive number"),
    (["--jobs", "2"], "--jobs sets the workers of --launcher local"),
    (["--threads", "0"], "--threads: 0: give a positive number of torch threads, or auto"),
])
def test_bad_launcher_flags_are_one_line(argv, message, tiny_task, tmp_path, capsys):
    assert cli.main(["run", str(tiny_task), "--out", str(tmp_path / "out"), *argv]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
