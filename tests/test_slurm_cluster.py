"""``run --launcher slurm`` against a real single-node SLURM (Debian's Slurm 22.05), started by
``.ci/slurm/start`` (docs/slurm.md): arrays, ``srun`` with two processes, ``scancel``, the time limit,
preemption with and without ``preempt_send_user_signal``, a task cancelled while pending, a cluster without
accounting, and ``harness tune``'s workers in two jobs sharing a journal file.

Marked ``slurm`` (left out of the default run): ``python -m pytest -q -m slurm tests/test_slurm_cluster.py``.
A cluster already running (``$SWAMP_SLURM_DIR/env``, as ``.ci/run`` starts it) is used and left running;
otherwise the module starts one (root and apt-get, or the packages installed) and stops it at its end, also
when a test fails. The tests that change the controller's configuration restore it."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, TINY, write_task

pytestmark = pytest.mark.slurm
submitit = pytest.importorskip("submitit")

START, STOP = ROOT / ".ci" / "slurm" / "start", ROOT / ".ci" / "slurm" / "stop"
FOLDER = Path(os.environ.get("SWAMP_SLURM_DIR", "/tmp/swamp-slurm"))
RUN = ["--threads", "1", "--no-progress", "--no-tables", "--device", "cpu", "--launcher", "slurm"]
WAIT_BOUND_S = 90  # --wait must return this soon after its last job ended (it polls every 5 s)


class Cluster:
    def __init__(self, started: bool):
        self.started = started
        self.env = dict(os.environ)
        self.reload()

    def reload(self) -> None:
        for line in (FOLDER / "env").read_text().splitlines():
            key, _, value = line.removeprefix("export ").partition("=")
            self.env[key] = value.replace("$PATH", os.environ.get("PATH", ""))
        self.env.update(PYTHONPATH=str(ROOT), SWAMP_BENCH_SINKHORN_COMPILE="off", GLOO_SOCKET_IFNAME="lo")

    def configure(self, *options: str) -> None:
        """Restart or reconfigure the controller with these start options (the default: none)."""
        done = subprocess.run([str(START), *options], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        self.reload()

    def sh(self, *argv: str, check: bool = True) -> str:
        done = subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 or not check, (argv, done.stderr)
        return done.stdout

    def harness(self, *argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=self.env, capture_output=True,
                              text=True, timeout=timeout)

    def launch(self, *argv: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "harness", *argv], cwd=ROOT, env=self.env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _running() -> bool:
    if not (FOLDER / "env").exists() or shutil.which("sinfo") is None and not Path("/usr/bin/sinfo").exists():
        return False
    env = {**os.environ, "SLURM_CONF": str(FOLDER / "etc" / "slurm.conf")}
    done = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True, timeout=60)
    return done.returncode == 0 and bool(done.stdout.strip())


@pytest.fixture(scope="module")
def cluster():
    started = False
    if not _running():
        if os.geteuid() != 0:
            pytest.skip("the SLURM test cluster needs root (its daemons run as root); run as root, or start it "
                        "with .ci/slurm/start first")
        if not Path("/usr/sbin/slurmctld").exists() and shutil.which("apt-get") is None:
            pytest.skip("no SLURM installed and no apt-get to install Debian's slurmctld, slurmd and munge")
        done = subprocess.run([str(START)], capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            subprocess.run([str(STOP)], capture_output=True, timeout=300)
            pytest.skip(f"the SLURM test cluster could not start: {(done.stderr or done.stdout).strip()[-500:]}")
        started = True
    c = Cluster(started)
    try:
        yield c
    finally:
        jobs_left = c.sh("squeue", "-h", "-o", "%i", check=False).split()  # a test cluster: none outlive the tests
        if jobs_left:
            c.sh("scancel", *jobs_left, check=False)
        if started:
            subprocess.run([str(STOP), "--clean"], capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def task(tmp_path_factory) -> Path:
    return write_task(tmp_path_factory.mktemp("task"), TINY)


def jobs(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "tiny" / "_jobs" / "jobs.jsonl").read_text().splitlines()]


def wait_for(predicate, what: str, limit: float = 120, step: float = 0.2):
    deadline = time.time() + limit
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"{what}: not within {limit} s")


def finish(process: subprocess.Popen, limit: float) -> tuple[int, str, str]:
    """The exit status and output of a launcher; fails (and stops it) when it does not return within limit."""
    try:
        out, err = process.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        raise AssertionError(f"--wait did not return within {limit} s:\n{out[-3000:]}\n{err[-2000:]}") from None
    return process.returncode, out, err


def result(out: Path, method: str, seed: int = 0) -> dict:
    """The result of the one run of ``method`` (its folder is named after the method and its overrides)."""
    (path,) = (out / "tiny").glob(f"{method}@*/seed{seed}.json")
    return json.loads(path.read_text())


def logs(out: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in sorted((out / "tiny" / "_jobs").rglob("*_log.*")))


@pytest.fixture(scope="module")
def time_limited(cluster, task, tmp_path_factory):
    """Two jobs with a one-minute time limit, started with the first test so that their minutes overlap the
    others (in partition `urgent`, which the preemption tests' job does not preempt): one may be requeued
    three times, one not at all (max_requeue=0)."""
    out = tmp_path_factory.mktemp("time_limit")
    common = [str(task), "--methods", "contrastive", "--epochs", "700", *RUN, "--wait"]
    slurm = "partition=urgent,timeout_min=1,signal_delay_s=30"
    requeued = cluster.launch("run", *common, "--out", str(out / "requeued"), "--slurm", f"{slurm},max_requeue=3")
    exhausted = cluster.launch("run", *common, "--out", str(out / "exhausted"), "--slurm", f"{slurm},max_requeue=0")
    yield out, requeued, exhausted
    for process in (requeued, exhausted):
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_an_array_grid_runs_to_completion_and_status_lists_it(cluster, task, time_limited, tmp_path):
    grid = [str(task), "--methods", "contrastive,swamp", "--seeds", "0,1", "--epochs", "3"]
    done = cluster.harness("run", *grid, *RUN, "--wait", "--slurm", "timeout_min=10", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 job(s) submitted (slurm)" in done.stdout and done.stdout.count("): finished") == 4, done.stdout
    assert all("_" in j["job_id"] for j in jobs(tmp_path))  # one array
    status = cluster.harness("status", str(tmp_path), *grid)
    assert status.returncode == 0, status.stderr
    assert "4 finished, 0 running, 0 interrupted, 0 not started (of 4 runs)" in status.stdout, status.stdout
    assert status.stdout.count("COMPLETED") == 4 and "Bypassing" not in status.stdout + status.stderr


def test_the_hint_after_submission_lists_this_commands_runs(cluster, task, tmp_path):
    done = cluster.harness("run", str(task), "--methods", "swamp", "--seeds", "1", "--epochs", "3", *RUN,
                           "--slurm", "timeout_min=10", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    hint = next(line for line in done.stdout.splitlines() if line.startswith("follow them with: "))
    argv = shlex.split(hint.removeprefix("follow them with: "))
    assert argv[:3] == ["python", "-m", "harness"] and "--epochs" in argv, hint
    status = wait_for(lambda: (s := cluster.harness(*argv[3:])).returncode == 0 and "1 finished" in s.stdout and s,
                      "the run to finish", limit=120, step=2)
    assert "(of 1 runs)" in status.stdout and "0 not started" in status.stdout, status.stdout


def test_a_job_of_two_processes_runs_under_srun_and_succeeds(cluster, task, tmp_path):
    done = cluster.harness("run", str(task), "--methods", "contrastive", "--epochs", "3", *RUN, "--wait",
                           "--slurm", "timeout_min=10,gpus_per_node=2", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "): finished" in done.stdout, done.stdout
    distributed = result(tmp_path, "contrastive")["distributed"]
    assert distributed["world_size"] == 2 and distributed["backend"] == "gloo", distributed
    (job,) = jobs(tmp_path)
    assert len(list((tmp_path / "tiny" / "_jobs" / job["job_id"]).glob("*_result.pkl"))) == 2  # one per task


def test_scancel_ends_the_job_as_cancelled_and_resubmission_resumes_it(cluster, task, tmp_path):
    argv = ["run", str(task), "--methods", "contrastive", "--epochs", "400", *RUN, "--wait", "--slurm",
            "timeout_min=10", "--out", str(tmp_path)]
    launcher = cluster.launch(*argv)
    resume = tmp_path / "tiny" / "contrastive@train.epochs=400" / "seed0.resume.pt"
    wait_for(lambda: resume.exists() or launcher.poll() is not None, "the first checkpoint", limit=120)
    (job,) = jobs(tmp_path)
    cluster.sh("scancel", job["job_id"])
    code, out, err = finish(launcher, WAIT_BOUND_S)
    assert code == 3 and f"(job {job['job_id']}): CANCELLED: " in out, out + err
    status = cluster.harness("status", str(tmp_path), str(task), "--methods", "contrastive", "--epochs", "400")
    row = next(line for line in status.stdout.splitlines() if " contrastive@" in line)
    assert "interrupted" in row and "CANCELLED" in row and "scancel" in row, status.stdout
    again = cluster.harness(*argv)
    assert again.returncode == 0, again.stdout + again.stderr
    assert result(tmp_path, "contrastive")["resumed_from_epoch"] > 0


def test_wait_names_an_array_task_cancelled_while_pending(cluster, task, tmp_path):
    launcher = cluster.launch("run", str(task), "--methods", "contrastive,swamp", "--epochs", "400", *RUN, "--wait",
                              "--slurm", "timeout_min=10,array_parallelism=1", "--out", str(tmp_path))
    wait_for(lambda: (tmp_path / "tiny" / "_jobs" / "jobs.jsonl").exists() or launcher.poll() is not None,
             "the submission", limit=60)
    first, second = jobs(tmp_path)
    wait_for(lambda: cluster.sh("squeue", "-h", "--array", "-o", "%i %T", "-j", second["job_id"].split("_")[0])
             .count("RUNNING") == 1, "one task running, one pending", limit=60)
    pending = cluster.sh("squeue", "-h", "--array", "-t", "PENDING", "-o", "%i", "-j", first["job_id"].split("_")[0])
    (cancelled,) = pending.split()
    cluster.sh("scancel", cancelled)
    cluster.sh("scancel", first["job_id"] if cancelled == second["job_id"] else second["job_id"])
    code, out, err = finish(launcher, WAIT_BOUND_S)
    name = next(j for j in (first, second) if j["job_id"] == cancelled)["run"]
    assert code == 3 and re.search(rf"{name} seed0 \(job {cancelled}\): (CANCELLED|unknown \(no record\)): ", out), \
        out + err


def _preempt(cluster: Cluster, task: Path, out: Path, signal: str) -> None:
    """A job of partition `debug` preempted by one of partition `urgent` (GraceTime 20 s): it must be requeued
    and resume to completion."""
    idle = int(cluster.sh("sinfo", "-h", "-n", "localhost", "-o", "%C").split("/")[1])  # alloc/idle/other/total
    launcher = cluster.launch("run", str(task), "--methods", "swamp", "--epochs", "400", *RUN, "--wait",
                              "--slurm", f"timeout_min=10,cpus_per_task={idle}", "--out", str(out))
    resume = out / "tiny" / "swamp@train.epochs=400" / "seed0.resume.pt"
    wait_for(lambda: resume.exists() or launcher.poll() is not None, "the first checkpoint", limit=120)
    # the job holds every free CPU: one more, in the higher partition, preempts it
    cluster.sh("sbatch", "-p", "urgent", "-c", "1", "-o", "/dev/null", "--wrap", "sleep 3")
    code, stdout, err = finish(launcher, 300)
    assert code == 0, stdout + err
    assert f"Caught signal {signal}" in logs(out), logs(out)[-3000:]
    assert result(out, "swamp")["resumed_from_epoch"] > 0


def test_preemption_with_preempt_send_user_signal_requeues_and_resumes(cluster, task, tmp_path):
    cluster.configure()
    _preempt(cluster, task, tmp_path, "SIGUSR2")


def test_preemption_by_sigterm_with_slurms_default_settings_requeues_and_resumes(cluster, task, tmp_path):
    cluster.configure("--no-user-signal")
    try:
        assert "preempt_send_user_signal" not in cluster.sh("scontrol", "show", "config")
        _preempt(cluster, task, tmp_path, "SIGTERM")
    finally:
        cluster.configure()


def test_the_time_limit_requeues_and_resumes_and_requeue_exhaustion_is_a_timeout(cluster, task, time_limited):
    out, requeued, exhausted = time_limited
    code, stdout, err = finish(exhausted, 300)
    assert code == 3 and "): TIMEOUT: no requeue left" in stdout, stdout + err
    status = cluster.harness("status", str(out / "exhausted"), str(task), "--methods", "contrastive",
                             "--epochs", "700")
    row = next(line for line in status.stdout.splitlines() if " contrastive@" in line)
    assert "TIMEOUT" in row and "no requeue left" in row and "max_requeue 0" in row, status.stdout
    code, stdout, err = finish(requeued, 420)
    assert code == 0, stdout + err
    assert result(out / "requeued", "contrastive")["resumed_from_epoch"] > 0
    assert "Requeued job" in logs(out / "requeued")


def test_without_accounting_wait_ends_and_status_says_so(cluster, task, tmp_path):
    cluster.configure("--no-accounting")
    try:
        sacct = subprocess.run(["sacct", "-j", "1"], env=cluster.env, capture_output=True, text=True, timeout=60)
        assert sacct.returncode != 0 and "accounting storage is disabled" in sacct.stderr.lower(), sacct.stderr
        blocker = cluster.sh("sbatch", "--parsable", "-p", "urgent", "--exclusive", "-o", "/dev/null", "--wrap",
                             "sleep 120").strip()
        try:
            launcher = cluster.launch("run", str(task), "--methods", "contrastive", "--epochs", "3", *RUN, "--wait",
                                      "--slurm", "timeout_min=10", "--out", str(tmp_path))
            wait_for(lambda: (tmp_path / "tiny" / "_jobs" / "jobs.jsonl").exists() or launcher.poll() is not None,
                     "the submission", limit=60)
            (job,) = jobs(tmp_path)
            cluster.sh("scancel", job["job_id"])
            code, out, err = finish(launcher, WAIT_BOUND_S)
            assert code == 3 and f"contrastive@train.epochs=3 seed0 (job {job['job_id']}): CANCELLED" in out, out + err
            status = cluster.harness("status", str(tmp_path), str(task), "--methods", "contrastive", "--epochs", "3")
            assert "Bypassing" not in status.stdout + status.stderr, status.stdout + status.stderr
            assert re.search(r"not started\s+\S+\s+(CANCELLED|unknown \(sacct not available\))", status.stdout), \
                status.stdout
        finally:
            cluster.sh("scancel", blocker, check=False)
    finally:
        cluster.configure()


def test_tune_workers_in_slurm_jobs_share_a_journal_file_and_keep_the_budget_exact(cluster, task, tmp_path):
    """``tune --launcher slurm --jobs 2`` with the default storage: Optuna's journal file, which both jobs share;
    each method gets exactly its budget, trials ran in both jobs, and the tuned runs are written."""
    import optuna

    from harness.tune import storage as stored
    from harness.tune import study as studies

    done = cluster.harness("tune", str(task), "--methods", "contrastive,cca", "--trials", "5", "--jobs", "2",
                           "--seeds", "0", "--epochs", "2", "--launcher", "slurm", "--slurm", "timeout_min=10",
                           "--threads", "1", "--device", "cpu", "--no-progress", "--out", str(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "submitted 2 SLURM job(s) of tuning workers" in done.stdout, done.stdout
    folder = tmp_path / "tiny" / "_tune"
    journal = stored.default_storage(folder, journal=True)
    assert f"stored in {journal}" in done.stdout, done.stdout
    assert (folder / "studies.log").is_file() and not (folder / "studies.db").exists()
    assert not list(folder.glob("*.lock"))  # every lock released
    workers, pids = set(), set()
    for method in ("contrastive", "cca"):
        s = studies.Study(task=str(task), method=method, overrides=(), added=(), epochs=2, seed=0, trials=5,
                          seconds=None, folder=folder, storage=journal)
        opened = optuna.load_study(study_name=s.name, storage=stored.storage_of(s.storage))
        have = stored.counts(opened)
        assert (have["counted"], have["running"], len(opened.get_trials())) == (5, 0, 5), have
        workers |= {t.user_attrs["worker"] for t in opened.get_trials()}
        pids |= {t.user_attrs["pid"] for t in opened.get_trials()}
        tuned = json.loads((tmp_path / "tiny" / f"{method}@tuned" / "seed0.json").read_text())
        assert tuned["tuning"]["trials"]["counted"] == 5 and tuned["tuning"]["storage"] == journal
    assert workers == {1, 2} and len(pids) == 2, (workers, pids)  # trials ran in both jobs
