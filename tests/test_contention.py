"""Contention records: how busy the machine was while each phase was timed, the [contended] mark in the timing
table, and the regression gate's refusal to judge on a busy machine."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness import bench
from harness.cli import main
from harness.report import formats
from harness.run import contention
from harness.store.schema import load_results
from tests.conftest import ROOT


def _record(wall: float, others: float, cores: int, threads: int) -> dict:
    return {"wall_s": wall, "others_cores": others, "cores": cores, "threads": threads}


@pytest.mark.parametrize("wall, others, cores, threads, expected", [
    (2.0, 0.0, 2, 2, False),   # quiet
    (2.0, 0.2, 2, 2, False),   # a little background work is within the slack
    (2.0, 0.9, 2, 2, True),    # one busy process beside two threads on two cores
    (2.0, 1.1, 2, 1, False),   # one thread leaves a core free: one busy process fits in it
    (2.0, 1.33, 2, 1, True),   # two do not: three processes share two cores
    (2.0, 3.0, 16, 8, False),  # a big machine with free cores
    (2.0, 9.0, 16, 8, True),
    (2.0, 1.0, 2, 64, True),   # more threads than cores: none free
    (0.2, 2.0, 2, 2, None),    # too short to judge
])
def test_the_rule(wall, others, cores, threads, expected):
    assert contention.judge(_record(wall, others, cores, threads)) is expected


def test_between_subtracts_this_process_from_the_cores_busy_time():
    start = contention.Snapshot(wall=0.0, own_cpu=1.0, cores_busy=10.0, involuntary=5, load1=0.5,
                                processes={7: ("spin", 3.0), 8: ("idle", 1.0)})
    end = contention.Snapshot(wall=2.0, own_cpu=4.0, cores_busy=15.0, involuntary=9, load1=1.5,
                              processes={7: ("spin", 4.9), 8: ("idle", 1.1)})
    record = contention.between(start, end, threads=2)
    assert record["cpu_s"] == pytest.approx(3.0) and record["cpu_per_wall"] == pytest.approx(1.5)
    assert record["others_cpu_s"] == pytest.approx(2.0) and record["others_cores"] == pytest.approx(1.0)
    assert record["busy_processes"] == 1 and record["busy_names"] == ["spin (0.95 cores)"]
    assert record["involuntary_ctx_switches"] == 4 and record["load1"] == [0.5, 1.5]


@contextmanager
def spinning(n: int):
    """``n`` processes that keep a core busy each, for the duration of the block; started through a shell that
    exits at once, so that they are not this process's children (whose CPU time counts as the run's own, as a
    data loader's workers' does) but other work, as another user's would be."""
    started = subprocess.run(["sh", "-c", " ".join([f"{sys.executable} -c 'while True: pass' >/dev/null 2>&1 & "
                                                   "echo $!;"] * n)], capture_output=True, text=True, check=True)
    pids = [int(p) for p in started.stdout.split()]
    try:
        time.sleep(0.5)  # let them start spinning
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _tiny(tmp_path: Path) -> Path:
    task = tmp_path / "tiny.yaml"  # a train phase of a few seconds, so that it is judged
    task.write_text(f"base: {ROOT / 'tasks' / 'synthetic.yaml'}\nname: tiny\nversion: test\n"
                    "dataset: {pairs_per_class: 40, split_sizes: [640, 80, 80]}\n"
                    "train: {epochs: 30, batch_size: 32}\n")
    return task


def _run(task: Path, out: Path) -> dict:
    cores = len(contention.cores())
    assert main(["run", str(task), "--methods", "contrastive", "--out", str(out), "--no-progress", "--device", "cpu",
                 "--threads", str(cores)]) == 0
    return json.loads((out / "tiny" / "contrastive" / "seed0.json").read_text())


@pytest.mark.slow  # seconds: a whole run (or the gate) timed beside busy processes
def test_a_run_beside_busy_processes_is_marked_contended(tmp_path):
    with spinning(len(contention.cores())):
        result = _run(_tiny(tmp_path), tmp_path / "out")
    train = result["profile"]["contention"]["train"]
    assert train["wall_s"] >= contention.MIN_JUDGED_S and train["contended"] is True
    assert train["others_cores"] > 0.5 and train["busy_processes"] >= 1 and "python" in " ".join(train["busy_names"])
    rendered = formats.render(load_results(tmp_path / "out" / "tiny"), "md")["timing"]
    assert "contrastive [contended 1/1]" in rendered and "[contended j/n]: in j of the n seeds" in rendered


@pytest.mark.slow  # seconds: a whole run (or the gate) timed beside busy processes
def test_a_quiet_run_is_not_marked(tmp_path):
    if contention.probe(1.0, threads=len(contention.cores()))["contended"]:
        pytest.skip("the machine is busy with other work now, so a quiet run cannot be made")
    result = _run(_tiny(tmp_path), tmp_path / "out")
    records = result["profile"]["contention"]
    assert set(records) >= {"train", "test"} and all(r["contended"] in (False, None) for r in records.values())
    assert records["train"]["contended"] is False
    assert "[contended" not in formats.render(load_results(tmp_path / "out" / "tiny"), "md")["timing"]


@pytest.mark.slow  # seconds: a whole run (or the gate) timed beside busy processes
def test_the_regression_gate_gives_no_verdict_on_a_busy_machine(capsys):
    pytest.importorskip("asv", reason="the regression gate needs asv (test extra)")
    if not (ROOT / ".git").exists():
        pytest.skip("the gate compares git revisions: this copy of the code is not a git checkout")
    with spinning(len(contention.cores())):
        status = bench.gate("HEAD")
    out = capsys.readouterr().out
    assert status == bench.BUSY == 4
    assert "bench gate: no verdict: other work kept" in out and "Re-run the gate on a quiet machine" in out


@pytest.mark.slow  # seconds: a whole run timed beside busy processes
def test_a_busy_machine_at_the_start_keeps_the_threads_and_says_so(tmp_path, capsys):
    """Without --threads the threads are torch's default whatever the load: the numbers are a function of the
    command, not of the moment; the note says how to choose threads."""
    import torch

    before = torch.get_num_threads()
    cores = len(contention.cores())
    if cores < 2:
        pytest.skip("one core: there is no thread to give up")
    torch.set_num_threads(cores)
    try:
        with spinning(cores):
            assert main(["run", str(_tiny(tmp_path)), "--methods", "contrastive", "--out", str(tmp_path / "out"),
                         "--no-progress", "--device", "cpu"]) == 0
        err = capsys.readouterr().err
        assert "note: the machine is busy (other work kept" in err
        assert f"torch trains with its {cores} thread(s) all the same" in err and "--threads auto" in err
        result = json.loads((tmp_path / "out" / "tiny" / "contrastive" / "seed0.json").read_text())
        assert result["profile"]["contention"]["train"]["threads"] == cores
        assert result["environment"]["hardware"]["torch_threads"] == cores
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow  # seconds: a whole run timed beside busy processes
def test_threads_auto_trains_with_the_cores_left_free(tmp_path, capsys):
    import torch

    before = torch.get_num_threads()
    cores = len(contention.cores())
    if cores < 2:
        pytest.skip("one core: there is no thread to give up")
    torch.set_num_threads(cores)
    try:
        with spinning(cores):
            assert main(["run", str(_tiny(tmp_path)), "--methods", "contrastive", "--out", str(tmp_path / "out"),
                         "--no-progress", "--device", "cpu", "--threads", "auto"]) == 0
        err = capsys.readouterr().err
        assert "note: the machine is busy (other work kept" in err
        assert "--threads auto: torch trains with 1 thread" in err
        result = json.loads((tmp_path / "out" / "tiny" / "contrastive" / "seed0.json").read_text())
        assert result["profile"]["contention"]["train"]["threads"] == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.slow  # two whole runs of the synthetic task in fresh processes (about 15 s each)
def test_the_numbers_do_not_depend_on_the_load(tmp_path):
    """The same command, quiet and beside a process that keeps one core busy: byte-identical test metrics and the
    same recorded threads (the thread count changes the arithmetic, so it must not follow the load)."""
    if contention.probe(0.5, threads=len(contention.cores()))["contended"]:
        pytest.skip("the machine is busy with other work now, so a quiet run cannot be made")

    def run(out: Path) -> dict:
        subprocess.run([sys.executable, "-m", "harness", "run", str(ROOT / "tasks" / "synthetic.yaml"), "--methods",
                        "swamp", "--epochs", "3", "--seeds", "0", "--out", str(out), "--no-progress", "--no-tables"],
                       check=True, cwd=ROOT, capture_output=True)
        (written,) = (out / "synthetic").glob("swamp*/seed0.json")  # the folder names the epochs override
        return json.loads(written.read_text())

    quiet = run(tmp_path / "quiet")
    with spinning(1):
        busy = run(tmp_path / "busy")
    assert busy["profile"]["contention"]["train"]["contended"] or len(contention.cores()) > 2
    assert json.dumps(quiet["metrics"], sort_keys=True) == json.dumps(busy["metrics"], sort_keys=True)
    threads = [r["environment"]["hardware"]["torch_threads"] for r in (quiet, busy)]
    assert threads[0] == threads[1] == quiet["profile"]["contention"]["train"]["threads"]


def test_a_quiet_start_keeps_the_threads():
    if contention.probe(0.5, threads=len(contention.cores()))["contended"]:
        pytest.skip("the machine is busy with other work now")
    start = contention.snapshot()
    time.sleep(0.3)
    assert contention.threads_for(start, len(contention.cores())) is None
    assert contention.threads_for(contention.snapshot(), 2) is None  # watched too briefly to judge


def test_one_thread_on_a_busy_machine_has_nothing_to_give_up(tmp_path, capsys):
    with spinning(len(contention.cores())):
        start = contention.snapshot()
        time.sleep(contention.MIN_WATCHED_S)
        assert contention.threads_for(start, 1) is None  # no "1 thread(s) instead of 1" note
        found = contention.threads_for(start, len(contention.cores()) + 1)
    assert found is not None and found[0] < len(contention.cores()) + 1
