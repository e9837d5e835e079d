"""``run --launcher slurm`` through submitit, tested without a cluster: the sbatch script submitit would hand
sbatch, errors before submission, and end to end through submitit's LocalExecutor (real subprocesses, with
its preemption signal and requeue) and DebugExecutor (in this process)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from harness import cli
from harness.cli import runs as cli_runs
from harness.config import launch, plan
from harness.run import grid
from tests.conftest import ROOT, write_task
from tests.error_lines import error_line

submitit = pytest.importorskip("submitit")
from harness.run import slurm, slurm_watch  # noqa: E402 (needs submitit)


def metrics(out: Path) -> dict[str, dict]:
    return {str(p.relative_to(out)): json.loads(p.read_text())["metrics"] for p in sorted(out.rglob("seed*.json"))}


def harness(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_the_sbatch_script_carries_the_options_given(tmp_path):
    options = launch.parse_slurm("partition=gpu,gpus_per_node=2,cpus_per_task=8,mem_gb=64,timeout_min=600,"
                                 "array_parallelism=4,account=lab,qos=high,nodes=2")
    text = slurm.sbatch_script(tmp_path / "_jobs", options, "tiny", 10)
    lines = {line for line in text.splitlines() if line.startswith("#SBATCH")}
    for expected in ("--partition=gpu", "--gpus-per-node=2", "--ntasks-per-node=2", "--nodes=2", "--cpus-per-task=8",
                     "--mem=64GB", "--time=600", "--array=0-9%4", "--account=lab", "--qos=high", "--job-name=tiny",
                     "--signal=USR2@90"):
        assert f"#SBATCH {expected}" in lines, (expected, sorted(lines))
    assert f"#SBATCH --output={tmp_path}/_jobs/%A_%a/%A_%a_0_log.out" in lines  # logs under _jobs/<job id>/
    cpu = {line for line in slurm.sbatch_script(tmp_path, launch.parse_slurm("timeout_min=5"), "t", 3).splitlines()
           if line.startswith("#SBATCH")}
    assert "#SBATCH --array=0-2%3" in cpu and "#SBATCH --ntasks-per-node=1" in cpu
    assert not any("gpus" in line or "partition" in line for line in cpu)


def test_options_from_the_task_file_and_the_command_line_which_wins(tmp_path, tiny_task):
    body = {"base": str(tiny_task), "launcher": {"slurm": {"partition": "cpu", "timeout_min": 30}}}
    task = write_task(tmp_path, body, "with_launcher.yaml")
    runs = plan.plan(task, [], [], ["contrastive"], [0])
    assert grid.slurm_options(runs, "partition=gpu") == {"partition": "gpu", "timeout_min": 30}


@pytest.mark.parametrize("argv,section,message", [
    (["--slurm", "partiton=gpu"], None, "unknown launcher option 'partiton' in --slurm (did you mean 'partition'?)"),
    (["--slurm", "timeout_min=ten"], None, "--slurm: timeout_min must be a whole number, got 'ten'"),
    (["--slurm", "cluster=local"], None, "--slurm cluster=local runs the jobs from this command"),
    ([], {"slurm": {"gpus_per_nod": 1}}, "unknown launcher option 'gpus_per_nod'"),
    ([], {"sge": {}}, "unknown launcher 'sge'"),
])
def test_bad_launcher_options_are_one_line_and_submit_nothing(argv, section, message, tiny_task, tmp_path, capsys):
    task = write_task(tmp_path, {"base": str(tiny_task), "launcher": section}, "t.yaml") if section else tiny_task
    out = tmp_path / "out"
    code = cli.main(["run", str(task), "--out", str(out), "--launcher", "slurm", *argv])
    err = capsys.readouterr().err
    assert code == 2 and message in error_line(err), err
    assert not out.exists()


def test_without_sbatch_nothing_is_submitted(tiny_task, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without sbatch or srun
    assert cli.main(["run", str(tiny_task), "--out", str(tmp_path / "out"), "--launcher", "slurm"]) == 2
    assert "sbatch and srun not found on PATH" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_without_submitit_the_install_command_is_named(tiny_task, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "submitit", None)  # what `import submitit` meets when it is not installed
    assert cli.main(["run", str(tiny_task), "--out", str(tmp_path / "out"), "--launcher", "slurm"]) == 2
    assert 'pip install "swamp-bench[cluster]"' in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_grid_whose_data_is_missing_submits_nothing(tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["run", str(ROOT / "tasks" / "wikipedia.yaml"), "--data-root", str(tmp_path / "absent"),
                     "--out", str(out), "--launcher", "slurm", "--slurm", "cluster=local", "--wait"])
    err = capsys.readouterr().err
    assert code == 2 and str(tmp_path / "absent") in error_line(err, alone=True), err
    assert not out.exists()


@pytest.mark.parametrize("flag", [["--wait"], ["--slurm", "partition=gpu"]])
def test_slurm_flags_need_the_slurm_launcher(flag, tiny_task, tmp_path, capsys):
    assert cli.main(["run", str(tiny_task), "--out", str(tmp_path / "out"), *flag]) == 2
    assert "goes with --launcher slurm" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.parametrize("cluster", ["debug", "local"])
def test_jobs_give_the_result_files_and_tables_of_a_sequential_run(cluster, tiny_task, tmp_path):
    common = [str(tiny_task), "--methods", "contrastive,swamp", "--seeds", "0", "--threads", "1", "--no-progress"]
    sequential = harness("run", *common, "--out", str(tmp_path / "seq"))
    assert sequential.returncode == 0, sequential.stderr
    jobs = harness("run", *common, "--out", str(tmp_path / "jobs"), "--launcher", "slurm", "--slurm",
                   f"cluster={cluster}", "--wait")
    assert jobs.returncode == 0, jobs.stderr
    assert f"2 job(s) submitted ({cluster})" in jobs.stdout
    assert metrics(tmp_path / "seq") == metrics(tmp_path / "jobs") and len(metrics(tmp_path / "seq")) == 2
    drop_header = lambda p: p.read_text().split("\n", 2)[2]  # noqa: E731 (the first lines name the folder)
    assert drop_header(tmp_path / "seq" / "tiny" / "accuracy.md") == drop_header(tmp_path / "jobs" / "tiny" /
                                                                                  "accuracy.md")
    logs = sorted(p.name for p in (tmp_path / "jobs" / "tiny" / "_jobs").iterdir() if p.is_dir())
    assert len(logs) == 2 and all(list((tmp_path / "jobs" / "tiny" / "_jobs" / d).glob("*_log.out")) for d in logs)
    status = harness("status", str(tmp_path / "jobs"), str(tiny_task), "--methods", "contrastive,swamp")
    assert status.returncode == 0 and "2 finished, 0 running, 0 interrupted, 0 not started (of 2 runs)" in status.stdout
    if cluster == "local":
        assert status.stdout.count("COMPLETED") == 2


@pytest.mark.slow
def test_a_preempted_job_is_requeued_and_resumes_to_the_metrics_of_an_uninterrupted_run(tiny_task, tmp_path):
    epochs = ["--epochs", "150"]
    reference = harness("run", str(tiny_task), "--methods", "swamp", "--threads", "1", "--no-progress", *epochs,
                        "--out", str(tmp_path / "reference"))
    assert reference.returncode == 0, reference.stderr
    out = tmp_path / "jobs"
    (run,) = plan.plan(tiny_task, [], [], ["swamp"], [0], 150)
    description = grid.job(run, grid.Grid(out=out, epochs=150), threads=1)
    (job,) = slurm.submit([run], [description], slurm.jobs_folder(out, "tiny"), {"cluster": "local"}, "tiny")
    result_file = out / "tiny" / run.run_name / "seed0.json"
    resume = result_file.with_suffix(".resume.pt")
    deadline = time.time() + 120
    while not resume.exists() and time.time() < deadline and not job.done():
        time.sleep(0.05)
    assert resume.exists(), "the run ended or failed before its first checkpoint"
    # SLURM signals the job's processes (USR2, submitit's default) before it preempts the job; under the local
    # executor the job's process is the child of the controller whose pid is the job id
    (task,) = [p for p in psutil.Process(int(job.job_id)).children()
               if "submitit.core._submit" in " ".join(p.cmdline())]
    task.send_signal(signal.SIGUSR2)
    (ended,) = slurm.wait([run], [job], progress=False, poll=0.5)
    assert ended.error == "" and ended.trained
    log = "".join(p.read_text() for p in (out / "tiny" / "_jobs").rglob("*_log.*"))
    assert "this job is preempted" in log, log[-2000:]
    result = json.loads(result_file.read_text())
    assert result["resumed_from_epoch"] > 0
    assert metrics(tmp_path / "reference") == metrics(out) and len(metrics(out)) == 1


@pytest.mark.slow
def test_two_launchers_on_one_grid_train_every_run_once(tiny_task, tmp_path):
    argv = [sys.executable, "-m", "harness", "run", str(tiny_task), "--methods", "contrastive,swamp", "--seeds", "0,1",
            "--threads", "1", "--no-progress", "--out", str(tmp_path), "--launcher", "slurm", "--slurm",
            "cluster=local", "--wait"]
    launchers = [subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    outputs = [p.communicate(timeout=600) for p in launchers]
    assert all(p.returncode == 0 for p in launchers), [o[1] for o in outputs]
    stdout = "".join(o[0] for o in outputs)
    trained = [line for line in stdout.splitlines() if line.endswith("): finished")]
    assert sorted(line.split("] ", 1)[1].split(" (job")[0] for line in trained) == [
        "contrastive seed0", "contrastive seed1", "swamp seed0", "swamp seed1"], stdout
    assert len(list(tmp_path.rglob("seed*.json"))) == 4


def test_the_hint_after_submission_repeats_the_commands_run_selecting_flags():
    args = cli.build_parser().parse_args(["run", "tasks/synthetic.yaml", "--methods", "swamp", "--seeds", "0-4",
                                          "--set", "swamp.K=8", "--sweep", "train.lr=0.1,0.2", "--epochs", "5",
                                          "--launcher", "slurm"])
    hint, tables = cli_runs.later(args, Path("tasks/synthetic.yaml"), "synthetic")
    assert hint == ("python -m harness status runs tasks/synthetic.yaml --methods swamp --seeds 0-4 --set swamp.K=8 "
                    "--sweep train.lr=0.1,0.2 --epochs 5")
    assert tables == "python -m harness table runs/synthetic --write"  # run's default --out
    status_args = cli.build_parser().parse_args(hint.split()[3:])  # status accepts every flag the hint carries
    assert status_args.epochs == 5 and status_args.methods == "swamp"


def test_status_selects_runs_with_the_flags_of_run(tiny_task, tmp_path, capsys):
    (tmp_path / "out").mkdir()
    assert cli.main(["status", str(tmp_path / "out"), str(tiny_task), "--methods", "swamp", "--epochs", "5"]) == 0
    out = capsys.readouterr().out
    assert "swamp@train.epochs=5" in out and "(of 1 runs)" in out, out
    assert cli.main(["status", str(tmp_path / "out"), "--epochs", "5"]) == 2


@pytest.mark.parametrize("outcomes,record,problem,state,reason", [
    ([("success", {})], None, "", "COMPLETED", ""),
    ([("error", "Traceback ...\nsubmitit.core.utils.UncompletedJobError: Job not requeued because: timed-out too "
                "many times.")], slurm.Record("FAILED", "", "sacct"), "", "TIMEOUT", "no requeue left"),
    ([("error", f"RuntimeError: tiny seed0: {slurm.CANCELLED_BY_SCANCEL}")],
     slurm.Record("CANCELLED", "by uid 0", "sacct"), "", "CANCELLED", "(by uid 0)"),
    ([("error", "RuntimeError: tiny seed0: worker exited with status 1: error: out of memory")], None, "", "FAILED",
     "error: out of memory"),
    (None, slurm.Record("TIMEOUT", "", "sacct"), "", "TIMEOUT", "time limit"),
    (None, slurm.Record("PREEMPTED", "", "sacct"), "", "PREEMPTED", "preempted and not requeued"),
    (None, slurm.Record("PENDING", "Priority", "squeue"), "", "PENDING", "Priority"),
    (None, None, "Slurm accounting storage is disabled", "unknown (sacct not available)", "accounting storage"),
    (None, None, "", "unknown (no record)", "cancelled while pending"),
])
def test_a_jobs_state_and_reason(outcomes, record, problem, state, reason):
    got = slurm.describe(outcomes, record, problem)
    assert got[0] == state and reason in got[1], got


def test_sacct_array_ids_are_expanded():
    assert slurm.expand("12_[0-2,5%4]") == ["12_0", "12_1", "12_2", "12_5"] and slurm.expand("7_3") == ["7_3"]


def test_wait_ends_a_slurm_job_by_its_result_files_or_by_slurm_s_record_confirmed(tmp_path, monkeypatch):
    """Without a cluster: SLURM's records scripted poll by poll, a fake clock, result files written between polls.
    A job ends by its result files; ended by SLURM's account without them, it ends at the next poll that still says
    so, or, COMPLETED, once ``settle`` seconds passed without its result files appearing."""
    import pickle
    from types import SimpleNamespace

    from submitit.core.utils import JobPaths

    folder = tmp_path / "_jobs"
    ids = ["7_0", "7_1", "7_2", "7_3", "7_4"]
    jobs = [submitit.SlurmJob(folder=folder / "%j", job_id=i) for i in ids]
    runs = [SimpleNamespace(run_name=f"r{k}", seed=0) for k in range(len(ids))]
    polls, clock = [0], [100.0]

    def write(job_id: str, trained: bool) -> None:
        path = JobPaths(folder / "%j", job_id, 0).result_pickle
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(pickle.dumps(("success", {"returncode": 0, "trained": trained, "error": ""})))

    def query(job_ids):
        t = polls[0]
        records = {"7_0": slurm.Record("RUNNING", "", "squeue"),  # its result file lands before poll 2
                   "7_1": slurm.Record("CANCELLED", "by uid 0", "sacct") if t >= 1 else slurm.Record(
                       "RUNNING", "", "squeue"),
                   "7_2": slurm.Record("COMPLETED", "", "sacct"),  # its result file lands before poll 3 (< settle)
                   "7_3": slurm.Record("COMPLETED", "", "sacct")}  # never a result file; 7_4: no record at all
        return {i: records[i] for i in job_ids if i in records}, ""

    def sleep(seconds: float) -> None:
        polls[0] += 1
        clock[0] += seconds
        if polls[0] == 2:
            write("7_0", trained=True)
        if polls[0] == 3:
            write("7_2", trained=False)
        assert polls[0] < 20, "wait does not end"

    monkeypatch.setattr(slurm_watch, "query", query)
    monkeypatch.setattr(slurm_watch, "time", SimpleNamespace(time=lambda: clock[0], sleep=sleep))
    lines: list[str] = []
    ended = slurm.wait(runs, jobs, progress=False, report=lines.append, poll=5.0, settle=20.0)
    assert [(e.job_id, e.trained, e.state) for e in ended] == [
        ("7_0", True, "COMPLETED"), ("7_1", False, "CANCELLED"), ("7_2", False, "COMPLETED"),
        ("7_3", False, "COMPLETED"), ("7_4", False, "unknown (no record)")]
    assert lines == [
        "[1/5] r4 seed0 (job 7_4): unknown (no record): " + ended[4].error,  # poll 0 saw it gone, poll 1 confirmed
        "[2/5] r0 seed0 (job 7_0): finished",
        "[3/5] r1 seed0 (job 7_1): CANCELLED: " + ended[1].error,  # CANCELLED at poll 1, confirmed at poll 2
        "[4/5] r2 seed0 (job 7_2): finished earlier, skipped",
        "[5/5] r3 seed0 (job 7_3): COMPLETED: " + ended[3].error]  # after settle: 20 s of polls every 5 s
    assert "by uid 0" in ended[1].error and "no result file appeared" in ended[3].error
    assert polls[0] == 4  # slept between the five polls, not after the last


def test_a_jobs_outcome_is_the_workers_reply_not_its_printed_lines(tiny_task, tmp_path):
    """A SLURM job (RunJob) learns from the worker's reply file whether it trained its run and which result file it
    wrote: a second job of the same run finds it finished and says so, whatever the lines it printed."""
    out = tmp_path / "out"
    replies = set(Path(tempfile.gettempdir()).glob("swamp-bench-reply-*.json"))
    (run,) = plan.plan(tiny_task, [], [], ["contrastive"], [0], 1)
    description = grid.job(run, grid.Grid(out=out, epochs=1), threads=1)
    first = slurm.RunJob("first", slurm.worker_argv(description))()
    assert first["returncode"] == 0 and first["trained"] and first["error"] == ""
    assert first["results"] == [str(out / "tiny" / run.run_name / "seed0.json")]
    second = slurm.RunJob("second", slurm.worker_argv(description))()
    assert second["returncode"] == 0 and not second["trained"] and second["results"] == first["results"]
    assert set(Path(tempfile.gettempdir()).glob("swamp-bench-reply-*.json")) == replies  # the replies are removed


def test_the_jobs_accounting_imports_without_submitit():
    """status reads the jobs' states on a machine without submitit: a fresh process that cannot import it still
    imports the accounting and reads a recorded job's result file."""
    probe = ("import sys; sys.modules['submitit'] = None; from harness.run import slurm_accounting as a; "
             "from harness.report import status; print(a.describe([('success', {})], None, '')[0])")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0 and done.stdout.strip() == "COMPLETED", done.stderr


def test_the_result_file_path_is_submitit_s_own(tmp_path):
    from submitit.core.utils import JobPaths

    from harness.run.slurm_accounting import result_pickle

    for job_id, task in (("12", 0), ("7_3", 1), ("99_10", 4)):
        assert result_pickle(tmp_path, job_id, task) == JobPaths(tmp_path / "%j", job_id, task).result_pickle


def test_slurm_s_defaults_are_stated_once_and_the_option_help_agrees():
    """The defaults a task file and --slurm leave unset reach sbatch's parameters and the job record from
    harness.config.launchers; the options' help (harness/config/launch.py) states the same numbers."""
    from harness.config import launchers

    params = slurm.sbatch_parameters({}, "t")
    assert params["time"] == launchers.TIMEOUT_MIN and params["array_parallelism"] == launchers.ARRAY_PARALLELISM
    assert f"default {launchers.TIMEOUT_MIN})" in launch.SLURM_OPTIONS["timeout_min"][1]
    assert f"default {launchers.MAX_REQUEUE})" in launch.SLURM_OPTIONS["max_requeue"][1]
    assert f"default {launchers.ARRAY_PARALLELISM})" in launch.SLURM_OPTIONS["array_parallelism"][1]
    executor = slurm.make_executor(Path("/tmp/none"), {"cluster": "slurm"}, "t") if shutil_which("sbatch") else None
    if executor is not None:
        assert executor.max_num_timeout == launchers.MAX_REQUEUE
    assert slurm.jobs_folder(Path("out"), "task") == Path("out") / "task" / launchers.JOBS_FOLDER
    assert slurm.RECORD == launchers.JOBS_RECORD


def shutil_which(name: str) -> str | None:
    import shutil

    return shutil.which(name)


@pytest.mark.parametrize("text,line", [
    ("note: n\nerror: the run's own line\nwarning: after", "error: the run's own line"),
    ("Traceback (most recent call last):\n  File x\nRuntimeError: a seed0: worker exited with status 3: error: boom",
     "RuntimeError: a seed0: worker exited with status 3: error: boom"),
    ("Traceback:\nsubmitit.core.utils.UncompletedJobError: Job not requeued because: timed-out too many times.",
     "UncompletedJobError: Job not requeued because: timed-out too many times."),
    ("just a line\n\n", "just a line"),
    ("", ""),
])
def test_one_scanner_finds_why_a_job_or_a_worker_failed(text, line):
    from harness import worker
    from harness.run.error_lines import error_line as scan

    assert scan(text) == line
    assert slurm.error_line(text) == line  # the accounting's and the worker's are the same function
    assert worker.error_line is scan
