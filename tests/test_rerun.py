"""``harness rerun``: a result file's run rebuilt from the settings it records (not from a task file) gives
the same folder, varied settings and, on the CPU, the same test metrics; ``--check`` says so, and fails when
a recorded metric differs; bad targets are one error line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.cli import main
from harness.config import params, plan
from harness.errors import ConfigError
from tests.error_lines import error_line

ROOT = Path(__file__).resolve().parent.parent


def _results(folder: Path) -> dict[str, dict]:
    return {str(p.relative_to(folder)): json.loads(p.read_text()) for p in sorted(folder.rglob("seed*.json"))}


@pytest.fixture
def finished(tiny_task, tmp_path) -> Path:
    """A swept grid of the tiny task: contrastive and SwAMP at two K, the task file then deleted."""
    out = tmp_path / "first"
    assert main(["run", str(tiny_task), "--methods", "contrastive,swamp", "--sweep", "swamp.K=8,16", "--set",
                 "train.epochs=2", "--out", str(out), "--no-progress"]) == 0
    tiny_task.unlink()  # the rerun must need nothing but the result files
    return out


def test_rerun_reproduces_every_run_of_a_grid_exactly(finished, tmp_path, capsys):
    again = tmp_path / "again"
    capsys.readouterr()
    assert main(["rerun", str(finished), "--out", str(again), "--check", "--no-progress"]) == 0
    before, after = _results(finished), _results(again)
    assert sorted(before) == sorted(after) == ["tiny/contrastive/seed0.json", "tiny/swamp/seed0.json",
                                               "tiny/swamp@K=8/seed0.json"]
    for name, old in before.items():
        new = after[name]
        assert new["metrics"] == old["metrics"], name
        assert new["varied"] == old["varied"] and new["run_name"] == old["run_name"]
        assert new["config"] == old["config"]
        assert new["environment"]["argv"][1] == "rerun"
    printed = capsys.readouterr().out
    assert "3 of 3 run(s) made on this kind of machine reproduced their recorded test metrics exactly" in printed
    assert (again / "tiny" / "accuracy.md").is_file()


def test_a_run_that_started_from_a_checkpoint_starts_from_it_again(tiny_task, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # result files record the --init path as given
    assert main(["run", str(tiny_task), "--methods", "contrastive", "--out", "first", "--no-progress"]) == 0
    assert main(["run", str(tiny_task), "--methods", "swamp", "--init", "first/tiny/contrastive/seed0.json",
                 "--out", "first", "--no-progress"]) == 0
    assert main(["rerun", "first/tiny/swamp@init=contrastive", "--out", "again", "--check", "--no-progress"]) == 0
    old = json.loads(Path("first/tiny/swamp@init=contrastive/seed0.json").read_text())
    new = json.loads(Path("again/tiny/swamp@init=contrastive/seed0.json").read_text())
    assert new["init"] == old["init"] and new["metrics"] == old["metrics"]
    (tmp_path / "first" / "tiny" / "contrastive" / "seed0.pt").unlink()
    capsys.readouterr()
    assert main(["rerun", "first/tiny/swamp@init=contrastive", "--out", "third", "--no-progress"]) == 2
    assert "missing" in capsys.readouterr().err and not Path("third").exists()


def test_check_fails_and_names_the_metric_that_differs(finished, tmp_path, capsys):
    path = finished / "tiny" / "contrastive" / "seed0.json"
    record = json.loads(path.read_text())
    record["metrics"]["a2b/R@1"] += 1.0
    path.write_text(json.dumps(record))
    capsys.readouterr()
    code = main(["rerun", str(path), "--out", str(tmp_path / "again"), "--check", "--no-progress"])
    printed = capsys.readouterr().out
    assert code == 1
    assert "differ, largest a2b/R@1" in printed
    assert "0 of 1 run(s) made on this kind of machine reproduced" in printed


def test_data_root_replaces_the_recorded_one_and_is_recorded(tmp_path):
    record = json.loads((ROOT / "results" / "wikipedia" / "cca" / "seed0.json").read_text())
    run = plan.from_record(record, "seed0.json", ["dataset.root=/elsewhere"])
    resolved = run.spec.resolved(run.method)
    assert resolved["dataset"]["root"] == "/elsewhere"
    assert run.spec.overrides[-1] == "dataset.root=/elsewhere"
    assert (run.run_name, run.varied, run.seed) == (record["run_name"], record["varied"], record["seed"])
    rest = {k: v for k, v in resolved.items() if k != "dataset"}
    old = plan.with_legacy_defaults(record["config"], resolved)
    assert plan.diff({k: v for k, v in old.items() if k != "dataset"}, rest,
                     defaults=run.spec.resolved(run.method, params.defaults)) == {}
    synthetic = json.loads((ROOT / "results" / "synthetic" / "swamp" / "seed0.json").read_text())
    with pytest.raises(ConfigError, match="reads no folder"):
        plan.from_record(synthetic, "seed0.json", ["dataset.root=/elsewhere"])


def test_every_committed_result_file_rebuilds(tmp_path):
    """Every committed run can be rebuilt from its file with today's code: a changed setting name or type
    would make `harness rerun` refuse it."""
    paths = [p for p in sorted((ROOT / "results").rglob("seed*.json")) if p.stem[4:].isdigit()]
    assert len(paths) > 100
    refused = []
    for path in paths:
        record = json.loads(path.read_text())
        if record["config"]["method"]["method"] == "ensemble":
            continue
        try:
            plan.from_record(record, str(path))
        except ConfigError as err:
            refused.append(f"{path.relative_to(ROOT)}: {err}")
    assert not refused, "\n".join(refused[:5])


def _written(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize("setup, needle", [
    (lambda d: d / "nothing.json", "no such result file or folder"),
    (lambda d: (d / "empty").mkdir() or d / "empty", "no result files (seed<k>.json)"),
    (lambda d: _written(d / "seed0.json", "{}"), "is not a result file of schema"),
    (lambda d: _written(d / "seed0.json", "{not json"), "cannot read the result file"),
])
def test_bad_targets_are_one_error_line(tmp_path, capsys, setup, needle):
    target = setup(tmp_path)
    assert main(["rerun", str(target), "--out", str(tmp_path / "out")]) == 2
    assert needle in error_line(capsys.readouterr().err, alone=True)
    assert not (tmp_path / "out").exists()


def test_records_that_cannot_be_rerun_say_why(tmp_path):
    record = json.loads((ROOT / "results" / "synthetic" / "contrastive" / "seed0.json").read_text())
    ensemble = json.loads((ROOT / "results" / "flickr30k_shapes" / "scan_t2i_avg+scan_i2t_lse" / "seed0.json")
                          .read_text())
    with pytest.raises(ConfigError, match="an ensemble of the runs scan_t2i_avg and scan_i2t_lse"):
        plan.from_record(ensemble, "r.json")
    stale = json.loads(json.dumps(record))
    stale["config"]["method"]["margn"] = 0.2
    with pytest.raises(ConfigError, match="not valid for today's code"):
        plan.from_record(stale, "r.json")


def test_the_same_run_given_twice_is_refused(finished, tmp_path, capsys):
    path = finished / "tiny" / "contrastive" / "seed0.json"
    copy = tmp_path / "copy" / "seed0.json"
    copy.parent.mkdir()
    shutil.copy(path, copy)
    assert main(["rerun", str(path), str(copy), "--out", str(tmp_path / "again")]) == 2
    assert "same run" in capsys.readouterr().err


def test_a_run_made_elsewhere_warns_before_it_is_made_again(tmp_path, capsys):
    """A GPU run re-made on the CPU, or a torchrun run re-made by one process, says so (once per kind)."""
    from harness.run.grid import rerun_warnings

    record = _here(json.loads((ROOT / "results" / "synthetic" / "contrastive" / "seed0.json").read_text()))
    gpu = json.loads(json.dumps(record))
    gpu["environment"]["hardware"]["device"] = "cuda"
    two = json.loads(json.dumps(record))
    two["distributed"] = {"world_size": 2, "backend": "gloo", "batch_per_process": 64}
    lines = rerun_warnings([(Path("a.json"), gpu), (Path("b.json"), gpu), (Path("c.json"), two),
                             (Path("d.json"), record)], "cpu", 1)
    assert len(lines) == 2
    assert "a.json was made on cuda" in lines[0] and "--device cuda" in lines[0]
    assert "c.json was made by 2 process(es)" in lines[1] and "--nproc_per_node=2" in lines[1]
    assert rerun_warnings([(Path("d.json"), record)], "cpu", 1) == []


def _here(record: dict) -> dict:
    """``record`` as if made on this machine with these libraries."""
    from harness.run.grid import this_machine

    here = this_machine("cpu")
    record["environment"]["hardware"].update(cpu=here["CPU"], cpu_flags=here["vector extensions"])
    record["environment"]["versions"].update(torch=here["torch"], numpy=here["numpy"])
    return record


def test_another_cpu_model_is_named_first_and_its_differences_are_expected(finished, tmp_path, capsys):
    """A file made on another CPU model: rerun warns before running, and --check reports its differences as
    expected from the hardware (exit 0); the same difference on this machine's model is a failure (exit 1)."""
    path = finished / "tiny" / "contrastive" / "seed0.json"
    record = json.loads(path.read_text())
    record["environment"]["hardware"].update(cpu="Some Other CPU", cpu_flags=["avx2", "fma"])
    record["metrics"]["a2b/R@1"] += 1.0  # as if that CPU's rounding had moved it
    path.write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["rerun", str(path), "--out", str(tmp_path / "a"), "--check", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "was made on other hardware or libraries (CPU: Some Other CPU ->" in captured.err
    assert "expected from hardware" in captured.out and "(not counted as a failure)" in captured.out
    path.write_text(json.dumps(_here(record)))
    assert main(["rerun", str(path), "--out", str(tmp_path / "b"), "--check", "--no-progress"]) == 1
    assert "0 of 1 run(s) made on this kind of machine reproduced" in capsys.readouterr().out


def test_rerun_uses_the_recorded_threads_unless_told(finished, tmp_path, capsys):
    """Without --threads a run is re-made with the thread count its file records; --threads overrides it
    with a warning that the numbers will differ."""
    path = finished / "tiny" / "swamp" / "seed0.json"
    record = json.loads(path.read_text())
    record["environment"]["hardware"]["torch_threads"] = 1
    path.write_text(json.dumps(record))
    capsys.readouterr()
    assert main(["rerun", str(path), "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    made = json.loads((tmp_path / "a" / "tiny" / "swamp" / "seed0.json").read_text())
    assert made["environment"]["hardware"]["torch_threads"] == 1
    assert "1 run(s) with 1 torch thread(s) (as recorded)" in capsys.readouterr().out
    assert main(["rerun", str(path), "--out", str(tmp_path / "b"), "--threads", "2", "--no-progress"]) == 0
    assert "--threads 2 re-runs it with 2: the numbers will differ" in capsys.readouterr().err
    assert json.loads((tmp_path / "b" / "tiny" / "swamp" / "seed0.json").read_text())["environment"]["hardware"][
        "torch_threads"] == 2


@pytest.mark.slow
def test_rerun_in_worker_processes_matches_the_sequential_one(finished, tmp_path, capsys):
    """--launcher local hands each run to a worker as `harness rerun FILE`: the same files, the same check."""
    capsys.readouterr()
    assert main(["rerun", str(finished), "--out", str(tmp_path / "workers"), "--launcher", "local", "--jobs", "2",
                 "--threads", "1", "--check", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "3 run(s) in 2 worker process(es), 1 torch thread(s) each" in printed
    assert "3 of 3 run(s) made on this kind of machine reproduced their recorded test metrics exactly" in printed
    made = _results(tmp_path / "workers")
    assert sorted(made) == sorted(_results(finished))
    assert all(r["environment"]["argv"][1] == "rerun" for r in made.values())


def test_launcher_options_of_rerun_are_checked(finished, tmp_path, capsys):
    assert main(["rerun", str(finished), "--out", str(tmp_path / "o"), "--jobs", "2"]) == 2
    assert "add --launcher local" in capsys.readouterr().err
    assert main(["rerun", str(finished), "--out", str(tmp_path / "o"), "--launcher", "local", "--jobs", "0"]) == 2
    assert "positive number of worker processes" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
