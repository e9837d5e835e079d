"""Evidence tied to the code that made it: what a result file records of the run (harness.store.executed), how
a checkout judges it (harness.report.freshness: fresh, stale, dirty, unverifiable, and the cosmetic rule), the
ledger's refusal of evidence that is not fresh, and ``harness reproduce``."""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.ops import native
from harness.report import claims
from harness.report import freshness as fr
from harness.store import executed as ex
from tests.conftest import ROOT, TINY, write_task
from tests.test_own_features import arrays


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> Path:
    """Two seeds of the tiny task's contrastive and SwAMP runs (results/tiny), and one own-features run that
    reads .npy files (results/own_features)."""
    import os
    from unittest import mock

    root = tmp_path_factory.mktemp("made")
    task = write_task(root, TINY)
    with mock.patch.dict(os.environ, {"SWAMP_BENCH_SINKHORN_COMPILE": "auto"}):  # the C kernel where it builds
        assert main(["run", str(task), "--methods", "contrastive,swamp", "--seeds", "0,1", "--out",
                     str(root / "results"), "--no-progress", "--no-tables", "--device", "cpu"]) == 0
    data = arrays(root / "data", 6, 6, sizes=(60, 20, 20))
    assert main(["run", str(ROOT / "tasks" / "own_features.yaml"), "--methods", "contrastive", "--data-root",
                 str(data), "--set", "train.epochs=1", "--out", str(root / "results"), "--no-progress",
                 "--no-tables", "--device", "cpu"]) == 0
    return root


def _record(made: Path, run: str = "swamp", seed: int = 0, task: str = "tiny") -> dict:
    return json.loads((made / "results" / task / run / f"seed{seed}.json").read_text())


@pytest.fixture
def checkout(made, tmp_path) -> Path:
    """A repository holding, at one commit, every file the made runs recorded (the checkout's own copies)."""
    repo = tmp_path / "checkout"
    names = set()
    for path in (made / "results").rglob("seed*.json"):
        names |= set(json.loads(path.read_text())["executed"]["files"])
    for name in names:
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ex.path_of(name), target)
    (repo / "harness" / "report").mkdir(parents=True, exist_ok=True)
    shutil.copy2(ROOT / "harness" / "report" / "plot.py", repo / "harness" / "report" / "plot.py")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "-C", str(repo), "add", "-A"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-qm", "files"], check=True)
    return repo


def _edit(repo: Path, name: str, old: str, new: str) -> None:
    path = repo / name
    text = path.read_text()
    assert old in text, f"{old!r} not in {name}"
    path.write_text(text.replace(old, new, 1))


# --- what a record holds ------------------------------------------------------------------------------------

def test_a_record_names_the_files_the_run_executed_and_leaves_out_the_others(made):
    record = _record(made)["executed"]
    files = set(record["files"])
    assert {"harness/ops/ot.py", "harness/run/train.py", "harness/run/runner.py", "harness/run/evaluate.py",
            "baselines/swamp.py", "harness/encoders/mlp.py", "harness/sources/synthetic_gaussian.py"} <= files
    assert not files & {"harness/cli/__init__.py", "harness/run/grid.py", "harness/store/schema.py",
                        "baselines/scan.py", "baselines/cca.py"}, \
        "command line, launchers, writers and unused plugins are left out"
    assert not any(f.startswith(("harness/report/", "harness/cli/")) for f in files)
    assert all(len(h) == 64 for h in record["files"].values()) and set(record["blobs"]) == files
    assert record["kernels"]["threads"] >= 1 and record["kernels"]["device"] == "cpu"
    assert record["versions"]["torch"] and len(record["data"]["sha256"]) == 64
    assert record["cost_ms"] > 0
    assert sum(record["kernels"]["sinkhorn"].values()) > 0  # SwAMP's Sinkhorn solves, by the path they took
    if record["kernels"]["sinkhorn"].get("native"):  # through the C kernel: its source and build are recorded
        assert "harness/ops/sinkhorn_native.c" in files
        assert record["kernels"]["native"]["flags"] and record["kernels"]["native"]["compiler"]
    else:
        assert "harness/ops/sinkhorn_native.c" not in files
    contrastive = _record(made, "contrastive")["executed"]
    assert "harness/ops/sinkhorn_native.c" not in contrastive["files"] and not contrastive["kernels"]["sinkhorn"]
    assert "baselines/swamp.py" not in contrastive["files"]


def test_a_record_names_the_data_files_the_run_read(made):
    data = _record(made, "contrastive@train.epochs=1", task="own_features")["executed"]["data"]
    assert set(data["files"]) == {f"{s}_{m}.npy" for s in ("train", "val", "test") for m in ("a", "b")}


def test_a_record_leaves_out_the_modules_that_launch_runs(made):
    """The grid's rooms launch runs and change no number: a run's record names none of them, so that a change to
    how runs are launched leaves the evidence fresh."""
    files = _record(made, "contrastive@train.epochs=1", task="own_features")["executed"]["files"]
    launching = ("jobs", "dispatch", "sequential", "rerun", "commands", "hardware", "error_lines", "grid", "slurm")
    assert not [f for f in files if f.startswith(tuple(f"harness/run/{m}" for m in launching))], sorted(files)
    assert "harness/run/runner.py" in files and "harness/run/train.py" in files


def test_every_left_out_module_exists():
    import importlib.util

    for name in ex.EXCLUDED:
        assert importlib.util.find_spec(name) is not None, name


def test_a_file_edited_during_the_run_makes_it_dirty(monkeypatch):
    class Data:
        def __getitem__(self, name):
            raise KeyError(name)

    recorder = ex.Recorder()
    name = next(iter(recorder.start_hashes))
    recorder.start_hashes[name] = "0" * 64  # as if its bytes had been others at the start
    record = recorder.finish(classes=(), plugin_dirs=(), data=Data(), data_root=None, data_dir=None, device="cpu",
                             threads=1, precision=None)
    assert record["changed_during_run"] == [name] and record["clean"] is False
    judged = fr.judge({"executed": record}, fr.Checkout())
    assert judged.state == fr.DIRTY and name in judged.dirty


# --- freshness against a checkout ---------------------------------------------------------------------------

def test_results_are_fresh_against_the_code_that_made_them(made, checkout):
    co = fr.Checkout(checkout)
    for path in (made / "results").rglob("seed*.json"):
        judged = fr.judge(json.loads(path.read_text()), co)
        assert judged.state == fr.FRESH, (path, judged.why())


def test_a_no_op_statement_in_the_training_loop_makes_every_run_stale(made, checkout):
    _edit(checkout, "harness/run/train.py", "def run_epoch(", "def run_epoch(*args, **kwargs):\n    return "
          "_run_epoch(*args, **kwargs)\n\n\ndef _run_epoch(")
    co = fr.Checkout(checkout)
    for run in ("swamp", "contrastive"):
        judged = fr.judge(_record(made, run), co)
        assert judged.state == fr.STALE and judged.changed == ("harness/run/train.py",)
        assert "run_epoch" in judged.functions["harness/run/train.py"]
        assert "harness/run/train.py (" in judged.why()


def test_an_edit_of_a_kernel_function_stales_the_runs_that_executed_it(made, checkout):
    _edit(checkout, "harness/ops/ot.py", "    return _softmax_rows_(m + g)", "    m = m + 0.0\n"
          "    return _softmax_rows_(m + g)")
    judged = fr.judge(_record(made), fr.Checkout(checkout))
    assert judged.state == fr.STALE and judged.functions["harness/ops/ot.py"] == ("sinkhorn",)


@pytest.mark.skipif(native.unavailable() is not None, reason="the native Sinkhorn kernel does not build here")
def test_an_unused_static_variable_in_the_c_source_stales_swamp_not_contrastive(made, checkout):
    _edit(checkout, "harness/ops/sinkhorn_native.c", "#include", "static int unused_canary = 0;\n#include")
    co = fr.Checkout(checkout)
    assert fr.judge(_record(made), co).changed == ("harness/ops/sinkhorn_native.c",)
    assert fr.judge(_record(made, "contrastive"), co).state == fr.FRESH


def test_an_edit_of_a_module_the_runs_never_load_stales_nothing(made, checkout):
    _edit(checkout, "harness/report/plot.py", "from __future__", "X = 1\nfrom __future__")
    co = fr.Checkout(checkout)
    assert all(fr.judge(json.loads(p.read_text()), co).state == fr.FRESH for p in (made / "results").rglob("s*.json"))


def test_comments_docstrings_and_formatting_are_cosmetic(made, checkout):
    text = (checkout / "harness/run/train.py").read_text()
    first_def = text.index("def run_epoch(")
    body_doc = text.index('"""', first_def)
    text = text[:body_doc + 3] + "Reworded. " + text[body_doc + 3:]  # a docstring
    text = text.replace("import torch\n", "import torch  # tensors\n\n", 1)  # a comment and a blank line
    (checkout / "harness/run/train.py").write_text(text)
    judged = fr.judge(_record(made), fr.Checkout(checkout))
    assert judged.state == fr.FRESH and judged.cosmetic == ("harness/run/train.py",)
    assert "cosmetic edits: harness/run/train.py" in judged.why()


def test_a_renamed_local_variable_is_not_cosmetic(made, checkout):
    _edit(checkout, "harness/ops/ot.py", "    f = m.new_zeros(n, 1)  # log u", "    f = m.new_zeros(n, 1)  # log u\n"
          "    unused = f")
    assert fr.judge(_record(made), fr.Checkout(checkout)).state == fr.STALE


def test_cosmetic_needs_the_version_that_ran(made, checkout):
    """Where the version that ran is not in the repository, no edit can be called cosmetic."""
    record = _record(made)
    record["executed"]["blobs"]["harness/run/train.py"] = "0" * 40
    _edit(checkout, "harness/run/train.py", "import torch\n", "import torch  # a comment\n")
    assert fr.judge(record, fr.Checkout(checkout)).changed == ("harness/run/train.py",)


def test_an_edited_data_file_stales_the_run_that_read_it(made, checkout, monkeypatch):
    record = _record(made, "contrastive@train.epochs=1", task="own_features")
    co = fr.Checkout(checkout)
    assert fr.judge(record, co).state == fr.FRESH
    root = Path(record["executed"]["data"]["root"])
    if not root.is_absolute():
        root = Path(record["config"]["dataset"]["root"])
    import numpy as np

    values = np.load(root / "val_b.npy")
    values[0, 0] += 1.0
    np.save(root / "val_b.npy", values)
    judged = fr.judge(record, fr.Checkout(checkout))
    assert judged.state == fr.STALE and judged.data == ("val_b.npy",) and "data changed: val_b.npy" in judged.why()
    assert fr.judge(_record(made), fr.Checkout(checkout)).state == fr.FRESH  # runs on other data are not touched


def test_a_result_without_a_record_is_unverifiable_and_a_mixed_set_says_how_many(made):
    old = _record(made)
    del old["executed"]
    assert fr.judge(old, fr.Checkout()).state == fr.UNVERIFIABLE
    both = fr.combine([fr.judge(old, fr.Checkout()), fr.Freshness(fr.FRESH)])
    assert both.state == fr.UNVERIFIABLE and "1 of 2 runs have no record" in both.why()


def test_a_run_of_uncommitted_code_is_dirty_until_its_files_are_committed(made, checkout):
    record = _record(made)
    record["executed"]["differs_from_commit"] = ["harness/ops/ot.py"]
    record["executed"]["clean"] = False
    assert fr.judge(record, fr.Checkout(checkout)).state == fr.FRESH  # HEAD holds the version that ran
    record["executed"]["blobs"]["harness/ops/ot.py"] = "1" * 40  # a version no commit holds
    judged = fr.judge(record, fr.Checkout(checkout))
    assert judged.state == fr.DIRTY and judged.dirty == ("harness/ops/ot.py",)


# --- the ledger -----------------------------------------------------------------------------------------------

def _ledger(made: Path, **extra) -> Path:
    path = made / "claims" / "ledger.yaml"
    path.parent.mkdir(exist_ok=True)
    evidence = {"results": "results/tiny", "verdict": "direction only",
                "difference": {"of": "swamp", "to": "contrastive", "metric": "a2b/class_R@1", "expect": "higher"},
                **extra}
    path.write_text(yaml.safe_dump({"paper": "t", "claims": [{"id": "c", "claim": "SwAMP wins", "paper": 1.0,
                                                               "evidence": [evidence]}]}))
    return path


def _line(made: Path, repo: Path, **extra) -> claims.Line:
    lines = claims.judge(_ledger(made, **extra), made, fr.Checkout(repo))
    return lines[0]


def test_the_ledger_refuses_stale_evidence_naming_claim_folder_and_files(made, checkout):
    line = _line(made, checkout)
    line = claims.Line(**{**line.__dict__, "recorded": line.verdict})  # the verdict itself is not at issue
    assert line.state == fr.FRESH and claims.check([line]) == []
    _edit(checkout, "harness/run/train.py", "def run_epoch(", "def run_epoch(*a, **k):\n    return _e(*a, **k)\n\n\n"
          "def _e(")
    line = _line(made, checkout)
    line = claims.Line(**{**line.__dict__, "recorded": line.verdict})
    problems = claims.check([line])
    assert len(problems) == 1 and problems[0].startswith("c (results/tiny): its evidence is stale")
    assert "harness/run/train.py (" in problems[0] and "run_epoch" in problems[0]
    assert line.shown_verdict().endswith("(stale)")
    assert "| stale" in claims.render([line], "md")


def test_the_ledger_accepts_stale_evidence_it_says_why_for(made, checkout):
    _edit(checkout, "harness/ops/ot.py", "    return _softmax_rows_(m + g)", "    return _softmax_rows_(g + m)")
    line = _line(made, checkout, stale_ok="made on a GPU, which this machine lacks")
    line = claims.Line(**{**line.__dict__, "recorded": line.verdict})
    assert line.state == fr.STALE and claims.check([line]) == []
    assert line.shown_verdict().endswith("(stale, accepted)")


def test_stale_ok_must_say_why(made):
    with pytest.raises(Exception, match="stale_ok: must say why"):
        claims.load(_ledger(made, stale_ok=" "))


# --- reproduce --------------------------------------------------------------------------------------------------

def test_reproduce_re_derives_the_verdicts_and_writes_them_back(made, tmp_path, capsys):
    root = tmp_path / "copy"
    shutil.copytree(made / "results" / "tiny", root / "results" / "tiny")
    ledger = _ledger(root)
    capsys.readouterr()
    argv = ["reproduce", "--ledger", str(ledger), "--allow-dirty", "--out", str(tmp_path / "scratch"),
            "--no-progress", "--device", "cpu"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "re-making 4 result file(s) of 1 piece(s) of evidence" in out
    assert "1 piece(s) of evidence re-made" in out and "0 verdict(s) moved" in out and " same" in out
    before = (root / "results" / "tiny" / "swamp" / "seed0.json").read_text()
    assert main([*argv, "--write"]) == 0
    after = json.loads((root / "results" / "tiny" / "swamp" / "seed0.json").read_text())
    assert after["environment"]["argv"][1] == "reproduce" and after["metrics"] == json.loads(before)["metrics"]


def test_reproduce_keeps_to_its_budget_and_names_what_it_left_out(made, tmp_path, capsys):
    ledger = _ledger(made)
    assert main(["reproduce", "--ledger", str(ledger), "--allow-dirty", "--budget", "0", "--out",
                 str(tmp_path / "s"), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "re-making 0 result file(s)" in out and "left out: c (results/tiny): over the budget" in out


def test_reproduce_refuses_a_dirty_checkout_and_unknown_claims(made, monkeypatch, capsys):
    monkeypatch.setattr(ex, "uncommitted_files", lambda root: ["harness/ops/ot.py"])
    assert main(["reproduce", "--ledger", str(_ledger(made))]) == 2
    assert "uncommitted changes (harness/ops/ot.py)" in capsys.readouterr().err
    monkeypatch.setattr(ex, "uncommitted_files", lambda root: [])
    assert main(["reproduce", "cc", "--ledger", str(_ledger(made))]) == 2
    assert "no claim 'cc'" in capsys.readouterr().err


def test_a_data_fingerprint_is_the_same_for_a_tensor_and_an_array_and_samples_large_ones(monkeypatch):
    import numpy as np
    import torch

    values = np.arange(3 * 2**19, dtype=np.float32).reshape(-1, 8)  # 6 MiB
    as_tensor, as_array = [], []
    assert b"".join(ex._array_bytes(torch.from_numpy(values), as_tensor)) == \
        b"".join(ex._array_bytes(values, as_array)) and as_tensor == as_array == []
    monkeypatch.setattr(ex, "DATA_HASH_LIMIT", 2**20)  # 6 MiB is now large: 64 evenly spaced slices are hashed
    sampled_tensor, sampled_array = [], []
    one = b"".join(ex._array_bytes(torch.from_numpy(values), sampled_tensor))
    two = b"".join(ex._array_bytes(values, sampled_array))
    assert one == two and sampled_tensor == sampled_array == [True]
    changed = values.copy()
    changed[-1, -1] += 1  # the last element lies in the last sampled slice
    assert b"".join(ex._array_bytes(changed, [])) != two
