"""Plugins as a user writes them: a method file from the public API alone, loaded from a folder outside the
checkout (--include) or dropped into baselines/; broken plugin files; provenance of uncommitted code."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import cli
from harness.config import registry
from harness.store.provenance import git_state
from tests.error_lines import error_line

ROOT = Path(__file__).resolve().parent.parent

MOCO = '''
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from harness.api import METHODS, EmbeddingQueue, Method, require


@dataclass(frozen=True)
class QueueInfoNCEParams:
    temperature: float = 0.1
    queue: int = 64

    def check(self, where):
        require(self.temperature > 0, f"{where}.temperature", "must be > 0")
        require(self.queue >= 0, f"{where}.queue", "must be >= 0")


@METHODS.register("{name}")
class QueueInfoNCE(Method):
    Params = QueueInfoNCEParams

    def __init__(self, encoders, params):
        super().__init__(encoders, params)
        self.queue = EmbeddingQueue(params.queue, self.embed_dim)

    def loss(self, x_a, x_b):
        a, b = self.encode("a", x_a), self.encode("b", x_b)
        _, queued_b = self.queue.with_batch(a, b)
        logits = a @ torch.cat([b, queued_b[len(b):]]).T / self.params.temperature
        loss = F.cross_entropy(logits, torch.arange(len(a)))
        self.queue.push(a, b)
        return loss, {"loss": loss.detach()}
'''


def write_plugin(folder: Path, name: str = "queue_infonce", body: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.py"
    path.write_text(MOCO.replace("{name}", name) if body is None else body)
    return path


@pytest.fixture(autouse=True)
def no_includes():
    """Each test starts and ends with no --include folders (the registry is per process)."""
    registry.set_include(())
    yield
    registry.set_include(())


def with_method(task: Path, name: str, **settings) -> Path:
    text = task.read_text()
    path = task.with_name(f"with_{name}.yaml")
    path.write_text(f"base: {task}\nmethods:\n  {name}: {json.dumps({'method': name, **settings})}\n" if text else "")
    return path


def test_a_method_from_an_include_folder_trains_and_appears_in_the_tables(tiny_task, tmp_path, capsys):
    plugins = tmp_path / "my_methods"
    write_plugin(plugins)
    task = with_method(tiny_task, "queue_infonce", queue=32)
    out = tmp_path / "out"
    assert cli.main(["run", str(task), "--methods", "queue_infonce,contrastive", "--epochs", "2", "--out", str(out),
                     "--no-progress", "--include", str(plugins)]) == 0
    printed = capsys.readouterr().out
    assert re.search(r"^\S*queue_infonce\s", printed, re.M), printed
    (result,) = out.rglob("queue_infonce/seed0.json")
    data = json.loads(result.read_text())
    recorded = data["executed"]["files"]  # the plugin file is code the run executed: its record names it
    assert str((plugins / "queue_infonce.py").resolve()) in recorded and "baselines/contrastive.py" not in recorded
    assert data["metrics"]["a2b/R@1"] > 0
    assert str(plugins / "queue_infonce.py") in data["code"]["files"]
    assert "queue_infonce" in (out / "tiny" / "accuracy.md").read_text()


def test_include_from_the_environment_and_forgetting_it(tiny_task, tmp_path, monkeypatch, capsys):
    plugins = tmp_path / "env_methods"
    write_plugin(plugins, "env_infonce")
    monkeypatch.setenv(registry.INCLUDE_ENV, str(plugins))
    assert cli.main(["list", "--tasks-dir", str(tmp_path)]) == 0
    assert "env_infonce" in capsys.readouterr().out
    monkeypatch.delenv(registry.INCLUDE_ENV)
    registry.set_include(())
    assert "env_infonce" not in registry.METHODS.names()


def test_the_skip_line_says_when_the_code_of_a_finished_run_changed(tiny_task, tmp_path, capsys):
    plugins = tmp_path / "my_methods"
    plugin = write_plugin(plugins)
    task = with_method(tiny_task, "queue_infonce", queue=32)
    argv = ["run", str(task), "--methods", "queue_infonce", "--epochs", "1", "--out", str(tmp_path / "out"),
            "--no-progress", "--include", str(plugins)]
    assert cli.main(argv) == 0
    capsys.readouterr()
    assert cli.main(argv) == 0
    assert "finished earlier, skipped" in capsys.readouterr().out
    plugin.write_text(plugin.read_text() + "\n# a change\n")
    assert cli.main(argv) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if "skipped" in text)
    assert "its code changed since" in line and "queue_infonce.py" in line
    (result,) = (tmp_path / "out").rglob("seed0.json")  # a file that moved, unchanged, is not a change
    data = json.loads(result.read_text())
    files = data["code"]["files"]
    data["code"]["files"] = {k.replace("harness/sources/", "harness/data/sources/"): v for k, v in files.items()}
    assert data["code"]["files"] != files
    result.write_text(json.dumps(data))
    assert cli.main(argv) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if "skipped" in text)
    assert "its code changed since" in line and "sources" not in line.split("since", 1)[1]


def run_cli(argv: list[str], capsys) -> tuple[int, str, str]:
    code = cli.main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_broken_plugin_is_skipped_unless_asked_for(tiny_task, tmp_path, capsys):
    plugins = tmp_path / "plugins"
    write_plugin(plugins, "broken", "from harness.api import METHODS\nimport no_such_module_here\n"
                                    "@METHODS.register('broken')\nclass Broken: ...\n")
    out = tmp_path / "out"
    code, _, err = run_cli(["run", str(tiny_task), "--methods", "contrastive", "--epochs", "1", "--out", str(out),
                            "--no-progress", "--include", str(plugins)], capsys)
    assert code == 0
    assert "warning: skipped plugin file" in err and "broken.py" in err and "ModuleNotFoundError" in err
    task = with_method(tiny_task, "broken")
    code, _, err = run_cli(["run", str(task), "--methods", "broken", "--out", str(tmp_path / "out2"),
                            "--include", str(plugins)], capsys)
    assert code == 2
    error = error_line(err, alone=True)  # the warning about that file is not repeated
    assert "broken.py" in error and "failed to import" in error
    assert "no_such_module_here" in error and "fix that file" in error
    assert not (tmp_path / "out2").exists()


def test_a_method_without_params_names_its_file_and_the_fix(tiny_task, tmp_path, capsys):
    plugins = tmp_path / "plugins"
    write_plugin(plugins, "no_params", "from harness.api import METHODS, Method\n"
                                       "@METHODS.register('no_params')\nclass NoParams(Method):\n"
                                       "    def loss(self, x_a, x_b): ...\n")
    task = with_method(tiny_task, "no_params")
    code, _, err = run_cli(["run", str(task), "--methods", "no_params", "--out", str(tmp_path / "out"),
                            "--include", str(plugins)], capsys)
    assert code == 2
    error = error_line(err)
    assert "no_params.py" in error and "has no Params" in error and "frozen dataclass" in error


def test_a_name_registered_by_two_files_names_both(tiny_task, tmp_path, capsys):
    plugins = tmp_path / "plugins"
    write_plugin(plugins, "one", MOCO.replace("{name}", "twice"))
    write_plugin(plugins, "two", MOCO.replace("{name}", "twice"))
    task = with_method(tiny_task, "twice")
    code, _, err = run_cli(["run", str(task), "--methods", "twice", "--out", str(tmp_path / "out"),
                            "--include", str(plugins)], capsys)
    assert code == 2
    error = error_line(err)
    assert "registered twice" in error and "one.py" in error and "two.py" in error and "rename" in error


def test_a_registry_name_that_is_not_a_string_is_one_line():
    with pytest.raises(registry.ConfigError, match=r"method name in x must be a string, got \[1\]"):
        registry.METHODS.get([1], "x")


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout


def test_an_untracked_plugin_file_makes_the_checkout_dirty(tmp_path):
    repo = tmp_path / "repo"
    (repo / "baselines").mkdir(parents=True)
    (repo / "baselines" / "a.py").write_text("x = 1\n")
    (repo / "notes.txt").write_text("n\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    assert git_state(repo, ["baselines"])["dirty"] is False
    (repo / "scratch.py").write_text("elsewhere\n")  # untracked outside the plugin folders: not our code
    assert git_state(repo, ["baselines"])["dirty"] is False
    (repo / "baselines" / "new_method.py").write_text("y = 2\n")
    state = git_state(repo, [repo / "baselines"])
    assert state["dirty"] is True and state["untracked_plugins"] == ["baselines/new_method.py"]


@pytest.mark.slow
def test_a_method_file_dropped_into_baselines_needs_no_other_edit(tmp_path):
    """A copy of the checkout with one new file in baselines/ and nothing else changed: the method runs from a
    task, and the tests that cover every registered method (contracts, precisions) and the bad-input matrix
    with its document pass in that copy."""
    copy = tmp_path / "checkout"
    for name in ("harness", "baselines", "tests", "tasks", "docs", "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, copy / name, ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))
        else:
            shutil.copy2(src, copy / name)
    write_plugin(copy / "baselines", "dropped_in")
    env = {**os.environ, "PYTHONPATH": str(copy)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           "tests/test_methods.py", "tests/test_bad_input.py", "-k", "dropped_in or document or cca"],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "dropped_in" in subprocess.run([sys.executable, "-m", "harness", "list", "--tasks-dir", str(copy / "tasks")],
                                          cwd=copy, env=env, capture_output=True, text=True).stdout
