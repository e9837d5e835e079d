"""The installed wheel, away from the checkout: the console script names itself ``swamp-bench``, ``list`` shows the
committed tasks, a task runs by name from another folder, and a task file given by path takes precedence."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TINY


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """A virtual environment (seeing this interpreter's packages: torch and the rest) with the wheel installed."""
    if shutil.which("git") is None:
        pytest.skip("needs git to copy the checkout's tracked files")
    folder = tmp_path_factory.mktemp("wheel")
    source = folder / "source"  # the tracked files only, as a clean clone has them
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    for name in (f.decode() for f in files if f):
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_symlink():
            target.symlink_to(os.readlink(ROOT / name))
        elif (ROOT / name).is_file():
            shutil.copy2(ROOT / name, target)
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(folder / "dist")], check=True, capture_output=True)
    (wheel,) = (folder / "dist").glob("swamp_bench-*.whl")
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "--no-deps", "-q", str(wheel)], check=True,
                   capture_output=True)
    return venv


def cli(venv: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SWAMP_BENCH_INCLUDE")}
    return subprocess.run([str(venv / "bin" / "swamp-bench"), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)


@pytest.mark.slow
def test_the_wheel_runs_a_committed_task_by_name_from_another_folder(installed, tmp_path):
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import harness; print(harness.__file__)"],
                           cwd=tmp_path, capture_output=True, text=True, check=True).stdout.strip()
    assert str(installed) in where and str(ROOT) not in where  # the installed copy, not the checkout
    assert "usage: swamp-bench" in cli(installed, tmp_path, "--help").stdout
    listed = cli(installed, tmp_path, "list")
    assert listed.returncode == 0 and "\nsynthetic  (" in listed.stdout and "swamp-bench run synthetic" in listed.stdout
    done = cli(installed, tmp_path, "run", "synthetic", "--methods", "contrastive", "--epochs", "1", "--out", "out",
               "--no-progress", "--set", "dataset.pairs_per_class=20", "--set", "dataset.split_sizes=[240,80,80]")
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "out" / "synthetic").glob("contrastive@*/seed0.json"))


@pytest.mark.slow
def test_a_path_takes_precedence_over_a_shipped_name(installed, tmp_path):
    local = {**TINY, "name": "local_copy"}
    local["base"] = str(ROOT / "tasks" / "synthetic.yaml")
    (tmp_path / "synthetic.yaml").write_text(yaml.safe_dump(local))
    done = cli(installed, tmp_path, "run", "synthetic.yaml", "--methods", "contrastive", "--out", "out",
               "--no-progress")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "local_copy").is_dir() and not (tmp_path / "out" / "synthetic").exists()
    missing = cli(installed, tmp_path, "run", "synthtic", "--out", "out")
    assert missing.returncode == 2 and "task file synthtic does not exist" in missing.stderr
