"""The side of the reference table that makes its sets (``harness leaderboard TASK ... --out ROOT``,
harness/tune/reference_sets.py): the folds a small validation split is replaced by, the budget extended equally while
a row still rises, study storages recorded relative to their result folders, the same trials and cells whatever
``--jobs``, and a plugin's row made end to end from another working directory."""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import optuna
import pytest
import torch

from harness import cli
from harness.data import paired
from harness.data.paired import PairedData, Split
from harness.errors import ConfigError
from harness.report import convergence
from harness.run import runner
from harness.store.schema import load_results, read_result
from harness.tune import bounds, budget, folds
from harness.tune import storage as stored
from harness.tune import study as studies
from harness.tune.reference_sets import cost
from tests.conftest import ROOT, TINY, write_task

OWN_LABELS = ROOT / "tasks" / "own_features_labels.yaml"


# --- the folds of the training split --------------------------------------------------------------------------

def _two_captions(n: int = 30) -> PairedData:
    """n images with two captions each (b item j belongs to image j // 2), labels on both sides."""
    a = torch.arange(n, dtype=torch.float32)[:, None].repeat(1, 3)
    b = torch.arange(2 * n, dtype=torch.float32)[:, None]
    b_to_a = torch.arange(2 * n) // 2
    labels = torch.arange(n) % 3
    train = Split(a=a, b=b, b_to_a=b_to_a, labels_a=labels, labels_b=labels[b_to_a])
    test = Split(a=a[:4] + 1000, b=b[:4] + 1000)
    return PairedData(splits={"train": train, "val": test, "test": test})


def test_the_folds_are_disjoint_cover_the_training_split_and_keep_an_items_captions_together():
    data = _two_captions()
    found = folds.make_folds(data["train"], 3, seed=0)
    items = np.concatenate(found)
    assert sorted(items.tolist()) == list(range(30)) and len(set(items.tolist())) == 30  # disjoint, covering
    assert [len(f) for f in found] == [10, 10, 10]
    assert [f.tolist() for f in folds.make_folds(data["train"], 3, seed=0)] == [f.tolist() for f in found]
    assert [f.tolist() for f in folds.make_folds(data["train"], 3, seed=1)] != [f.tolist() for f in found]
    for i, fold in enumerate(found):
        view = folds.fold_view(data, found, i)
        assert set(view.splits) == {"train", "val"}  # no test split to read
        val, train = view["val"], view["train"]
        assert val.a[:, 0].tolist() == fold.tolist()  # the fold's own training items, nothing else
        assert set(train.a[:, 0].tolist()) == set(range(30)) - set(fold.tolist())
        for split in (val, train):  # each caption with its image, labels alike
            assert (split.b[:, 0] // 2 == split.a[split.b_to_a, 0]).all()
            assert (split.labels_b == split.labels_a[split.b_to_a]).all()
    record = folds.record(found, 0)
    assert record["k"] == 3 and record["items"][0] == found[0].tolist() and record["split"] == "train"
    with pytest.raises(ConfigError, match="k >= 3"):
        folds.make_folds(data["train"], 2, seed=0)
    with pytest.raises(ConfigError, match="too few"):
        folds.make_folds(data["train"], 20, seed=0)


def test_the_k_fold_objective_reads_no_test_item_and_is_the_mean_over_the_folds(tmp_path, monkeypatch):
    path = write_task(tmp_path, TINY)
    s = studies.Study(task=str(path), method="contrastive", overrides=(), added=(), epochs=1, seed=0, trials=1,
                      seconds=None, folder=tmp_path / "_tune", storage=stored.default_storage(tmp_path / "_tune"),
                      folds=3)
    data = runner.load_data(s.spec())
    reads = {"test": 0}
    original = paired.PairedData.__getitem__

    def counting(self, name):
        reads["test"] += name == "test"
        return original(self, name)

    monkeypatch.setattr(paired.PairedData, "__getitem__", counting)
    opened = studies.work(s, data, runner.RunOptions(device=torch.device("cpu"), out=tmp_path / "t", progress=False))
    assert reads["test"] == 0
    trials = opened.get_trials()
    assert len(trials) == 1
    for t in trials:
        assert len(t.user_attrs["fold_values"]) == 3
        assert t.value == pytest.approx(sum(t.user_attrs["fold_values"]) / 3)
    assert s.name != dataclasses.replace(s, folds=0).name  # another objective, another study
    view = studies.views_of(s, data)
    assert len(view) == 3 and all("test" not in v.splits for v in view)
    assert sum(len(v["val"].a) for v in view) == len(data["train"].a)  # every training item validates once


def _swamp_study(tmp_path: Path, high: int | None, k: int) -> studies.Study:
    """SwAMP on TINY's 240 training pairs beside a queue of 1,100, K searched from 8 to ``high`` (None: the range its
    declaration gives, up to 1,024)."""
    searched = {"swamp.K": {"low": 8, "high": high}} if high else {"swamp.K": True}
    body = {**TINY, "methods": {**TINY["methods"], "swamp": {**TINY["methods"]["swamp"], "queue": 1100}},
            "tune": {"space": searched}}
    path = write_task(tmp_path, body, f"tiny_{high}_{k}.yaml")
    return studies.Study(task=str(path), method="swamp", overrides=(), added=(), epochs=1, seed=0, trials=1,
                         seconds=None, folder=tmp_path / "_tune", storage=stored.default_storage(tmp_path / "_tune"),
                         folds=k)


def test_a_range_that_reaches_past_what_a_fold_trains_on_is_refused_before_any_trial(tmp_path):
    """240 training pairs; on 3 folds a trial trains on 160. K up to 200 fits the task's own runs and not a fold:
    refused with folds, naming the setting, the end, the fold's pairs and the value that fits; up to 150 fits both."""
    wide = _swamp_study(tmp_path, 200, 3)
    data = runner.load_data(wide.spec())
    with pytest.raises(ConfigError) as err:
        bounds.check([wide], data)
    text = str(err.value)
    assert "tune.space swamp.K (high end 200 on fold 0's training part (--folds 3), 160 training pairs)" in text
    assert "set K below 160" in text and "count against its row's budget" in text
    assert bounds.check([_swamp_study(tmp_path, 200, 0)], data) == []  # no folds: the 240 training pairs hold it
    assert bounds.check([_swamp_study(tmp_path, 150, 3)], data) == []
    # a range the task does not write (K's declared one, to 1,024) is a warning naming the fix, not an error
    (line,) = bounds.check([_swamp_study(tmp_path, None, 3)], data)
    assert "the declared tune.space swamp.K (high end 1024 on fold 0's training part" in line
    assert "narrow the range in the task's tune.space" in line
    assert not list((tmp_path / "_tune").glob("*.row"))  # nothing ran


# --- the budget: convergence and the equal extension ----------------------------------------------------------

def _fake_study(tmp_path: Path, method: str, trials: int) -> studies.Study:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = write_task(tmp_path, TINY)
    return studies.Study(task=str(path), method=method, overrides=(), added=(), epochs=1, seed=0, trials=trials,
                         seconds=None, folder=tmp_path / "_tune", storage=stored.default_storage(tmp_path / "_tune"))


def test_a_row_still_rising_is_marked_and_the_extension_gives_every_row_the_same_count(tmp_path, capsys):
    """The values are told, not trained: one row's best rises by 2 points every trial (never converges), the other
    row's stays put (converged); every row is extended alike to the cap, and the rising row stays marked."""
    rising = convergence.read([float(2 * i) for i in range(8)], lower=False, tol=0.5)
    assert not rising.converged and rising.gain == pytest.approx(4.0) and rising.window == 2
    assert convergence.read([10.0, 12.0, 12.0, 12.0], lower=False, tol=0.5).converged

    def told(found: list[studies.Study]) -> None:
        for s in found:
            opened = studies.open_study(s)
            while len(opened.get_trials()) < s.trials:
                trial = opened.ask()
                n = trial.number
                opened.tell(trial, 2.0 * n if s.method == "contrastive" else 5.0)

    found = [_fake_study(tmp_path, "contrastive", 8), _fake_study(tmp_path, "cca", 8)]
    done, readings = budget.extend(found, told, "a2b/R@1", items=1000, cap=13)
    assert {s.trials for s in done} == {13}  # 8, then 10, 13 (a quarter more each time, the cap last)
    for s in done:
        assert stored.counts(studies.open_study(s))["counted"] == 13  # every row got the same count
    assert not readings["contrastive"].converged and readings["cca"].converged
    assert "contrastive still rising after 8 trials" in capsys.readouterr().out
    row = budget.record(done[0], studies.open_study(done[0]), 0.5)
    assert row["values"] == [2.0 * n for n in range(13)] and row["convergence"]["converged"] is False
    assert row["dims"] == len(done[0].dims()) > 0
    # a resumed command reads each budget's decision from that budget's first trials, as the first command did
    early = budget.reading(dataclasses.replace(done[0], trials=8), studies.open_study(done[0]), 0.5)
    assert len(early.curve) == 8 and early.gain == pytest.approx(4.0)
    flat, _ = budget.extend([_fake_study(tmp_path / "flat", "cca", 4)], told, "a2b/R@1", items=1000, cap=40)
    assert flat[0].trials == 4  # converged: no trial more


def test_the_tolerance_is_one_validation_items_worth_and_a_rank_for_rank_metrics():
    assert convergence.tolerance(20, False) == 5.0 and convergence.tolerance(1000, False) == 0.5
    assert convergence.tolerance(100, True) == 1.0
    assert cost({"a": {"trial_minutes": 30.0}, "b": {"trial_minutes": 60.0}}, [{"wall_s": 7200.0}]) == \
        {"study_hours": 1.5, "run_hours": 2.0}
    small = Split(a=torch.zeros(20, 2), b=torch.zeros(40, 2), b_to_a=torch.arange(40) // 2)
    assert folds.query_items(small, "s2p/R@1") == 20 and folds.query_items(small, "t2v/R@1") == 40


# --- the study's storage, recorded relative to the result folder ----------------------------------------------

def test_a_tuned_record_names_its_storage_relative_to_its_folder_and_old_absolute_records_still_open(tmp_path):
    db = tmp_path / "set" / "task" / "_tune" / "studies.db"
    url = stored.default_storage(db.parent)
    here = tmp_path / "set" / "task" / "m@tuned"
    assert stored.relative_storage(url, here, tmp_path) == "sqlite:///../_tune/studies.db"
    assert stored.recorded_storage("sqlite:///../_tune/studies.db", here) == f"sqlite:///{db.resolve()}"
    elsewhere = "sqlite:////elsewhere/studies.db"  # outside the results folder: kept as given
    assert stored.relative_storage(elsewhere, here, tmp_path) == elsewhere
    journal = stored.default_storage(db.parent, journal=True)  # SLURM's jobs open the shared path: kept
    assert stored.relative_storage(journal, here, tmp_path) == journal
    assert stored.recorded_storage("journal://../_tune/studies.log", here) == \
        f"journal://{(db.parent / 'studies.log').resolve()}"
    assert stored.relative_storage("postgresql://u:pw@host/db", here, tmp_path) == "postgresql://u:***@host/db"
    # every committed record names its studies.db relative to its folder
    (path,) = sorted((ROOT / "results" / "reference" / "qmul_chairs").rglob("contrastive@tuned/seed0.json"))
    tuning = read_result(path)["tuning"]
    assert tuning["storage"] == "sqlite:///../_tune/studies.db"
    # a record written before storages were relative names the making machine's absolute path, which does not exist
    # here: the committed studies.db beside the run folder opens instead
    absolute = "sqlite:////machine/that/made/it/results/reference/qmul_chairs/_tune/studies.db"
    assert not Path(absolute[10:]).exists()
    opened = optuna.load_study(study_name=tuning["study"],
                               storage=stored.storage_of(stored.recorded_storage(absolute, path.parent)))
    assert stored.counts(opened)["counted"] == tuning["trials"]["counted"]


# --- the command: --jobs changes only the wall time; a plugin's row -------------------------------------------

def _features(root: Path, n: int = 200, val: int = 120, classes: int = 4, width: int = 8) -> Path:
    rng = np.random.default_rng(0)
    means_a, means_b = rng.normal(0, 1, (classes, width)), rng.normal(0, 1, (classes, width))
    root.mkdir(parents=True)
    for split, count in (("train", n), ("val", val), ("test", 60)):
        y = rng.integers(0, classes, count)
        np.save(root / f"{split}_a.npy", (means_a[y] + rng.normal(0, 0.7, (count, width))).astype("float32"))
        np.save(root / f"{split}_b.npy", (means_b[y] + rng.normal(0, 0.7, (count, width))).astype("float32"))
        np.save(root / f"{split}_labels.npy", y.astype("int64"))
    return root


def _studies_and_cells(out: Path) -> tuple[dict, dict]:
    manifest = json.loads((out / "own_features_labels" / "leaderboard.json").read_text())
    trials = {}
    for row, entry in manifest["studies"].items():
        url = stored.default_storage(out / "own_features_labels" / "own_features_labels" / "_tune")
        opened = optuna.load_study(study_name=entry["study"], storage=stored.storage_of(url))
        trials[row] = [(t.number, t.params, t.value) for t in opened.get_trials()]
    cells = {(r["run_name"], r["seed"]): r["metrics"]["a2b/class_mAP"] for r in load_results(out)
             if r.get("tuning")}
    return trials, cells


@pytest.mark.slow  # two commands of worker subprocesses (about a minute)
def test_the_same_command_makes_the_same_studies_with_one_worker_or_two(tmp_path):
    data = _features(tmp_path / "features")
    found = []
    for jobs in (1, 2):
        out = tmp_path / f"jobs{jobs}"
        assert cli.main(["leaderboard", str(OWN_LABELS), "--data-root", str(data), "--trials", "2", "--trials-cap",
                         "3", "--seeds", "0", "--epochs", "1", "--out", str(out), "--rows", "infonce,swamp,cca",
                         "--launcher", "local", "--jobs", str(jobs), "--no-progress", "--sets-only"]) == 0
        manifest = json.loads((out / "own_features_labels" / "leaderboard.json").read_text())
        assert manifest["threads"] == 1 and manifest["folds"] is None  # 120 validation items: no folds
        # a row still rose after 2 trials: the workers gave every row a third one
        assert manifest["budget"]["start"] == 2 and manifest["trials"] == 3
        assert {len(row["values"]) for row in manifest["studies"].values()} == {3}
        found.append(_studies_and_cells(out))
    assert found[0][0] == found[1][0] and set(found[0][0]) == {"infonce", "swamp", "cca"}
    assert found[0][1] == found[1][1] and len(found[0][1]) == 3
    torch_threads = {r["environment"]["hardware"]["torch_threads"] for r in load_results(tmp_path / "jobs2")}
    assert torch_threads == {1}


DCL = '''
"""Decoupled contrastive learning (Yeh et al., ECCV 2022): InfoNCE without the positive pair in the denominator."""
from dataclasses import dataclass

import torch

from harness.api import METHODS, Method, bounded, search


@dataclass(frozen=True)
class DCLParams:
    temperature: float = bounded(0.1, gt=0, tune=search(0.02, 1.0, log=True))


@METHODS.register("dcl")
class DCL(Method):
    Params = DCLParams

    def loss(self, x_a, x_b):
        a, b = self.encode("a", x_a), self.encode("b", x_b)
        logits = a @ b.T / self.params.temperature
        eye = torch.eye(len(a), dtype=torch.bool, device=logits.device)
        pos = logits.diagonal()
        neg_a = logits.masked_fill(eye, float("-inf")).logsumexp(1)
        neg_b = logits.masked_fill(eye, float("-inf")).logsumexp(0)
        loss = (neg_a - pos).mean() + (neg_b - pos).mean()
        return loss, {"loss": loss.detach()}
'''


@pytest.mark.slow  # a subprocess that makes a set of two rows and its table (about 25 s)
def test_a_plugin_row_is_tuned_beside_infonce_from_another_working_directory(tmp_path):
    plugins = tmp_path / "my_losses"
    plugins.mkdir()
    (plugins / "dcl.py").write_text(DCL)
    task = tmp_path / "tasks" / "mine.yaml"
    task.parent.mkdir()
    task.write_text(f"base: {OWN_LABELS}\nname: mine\nmethods:\n  dcl: {{method: dcl}}\nleaderboard:\n  trials: 2\n"
                    "  rows:\n    dcl: {method: dcl, role: candidate}\n")
    data = _features(tmp_path / "features")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "harness", "leaderboard", str(task), "--data-root", str(data), "--include",
         str(plugins), "--rows", "infonce,dcl", "--trials-cap", "2", "--seeds", "0,1", "--epochs", "1", "--out", "ref",
         "--no-progress", "--no-bayes"],
        cwd=elsewhere, capture_output=True, text=True, timeout=600,
        env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-2000:]
    manifest = json.loads((elsewhere / "ref" / "mine" / "leaderboard.json").read_text())
    assert manifest["rows"] == {"infonce": {"method": "contrastive", "role": "contrastive"},
                                "dcl": {"method": "dcl", "role": "candidate"}}
    assert len(manifest["studies"]["dcl"]["values"]) == 2 and manifest["studies"]["dcl"]["dims"] >= 3
    tuned = [r for r in load_results(elsewhere / "ref") if r["run_name"] == "dcl@tuned"]
    assert sorted(r["seed"] for r in tuned) == [0, 1]
    result = tuned[0]
    assert result["tuning"]["trials"]["counted"] == 2 and "temperature" in result["tuning"]["space"]
    assert result["tuning"]["storage"] == "sqlite:///../_tune/studies.db"
    assert str((plugins / "dcl.py").resolve()) in result["executed"]["files"]
    # the reading side places it: a cell of the table, compared with the strongest contrastive loss
    table = json.loads((elsewhere / "ref" / "reference.json").read_text())["sets"]["mine"]
    assert table["rows"]["dcl"]["role"] == "candidate" and set(table["cells"]["dcl"]["values"]) == {"0", "1"}
    assert any(c["of"] == "dcl" and c["rival"] == "infonce" for c in table["comparisons"])
    assert "| dcl " in (elsewhere / "ref" / "reference.md").read_text()


# --- the script that makes every set names rows and metrics its tasks have, and the rows its claims compare -----

def _script_sets() -> dict[str, tuple[str, str | None, str | None, str | None]]:
    """The sets of benchmarks/reference_table.sh: name -> (task, --metric, --rows, --name), its variables expanded."""
    import re
    import shlex

    text = (ROOT / "benchmarks" / "reference_table.sh").read_text()
    variables = dict(re.findall(r"^(\w+)=([\w,+]+)$", text, flags=re.M))
    found = {}
    for name, words in re.findall(r'^\s+"([\w.-]+)\|([^"]+)"$', text, flags=re.M):
        argv = shlex.split(re.sub(r"\$(\w+)", lambda m: variables.get(m.group(1), m.group(0)), words))
        given = {argv[i]: argv[i + 1] for i in range(1, len(argv) - 1) if argv[i].startswith("--")}
        found[name] = (argv[0], given.get("--metric"), given.get("--rows"), given.get("--name"))
    return found


def test_the_set_script_names_rows_and_metrics_its_tasks_have_and_the_rows_each_claim_compares():
    import yaml

    from harness.config import spec as specs
    from harness.report.rows import CONTRASTIVE, SWAMP, WITH_SWAMP
    from harness.tune.reference_sets import block_of, chosen_rows, set_name

    made = {}
    for name, (task, metric, rows, named) in _script_sets().items():
        spec = specs.load_task(ROOT / task)
        block = block_of(spec)
        chosen = chosen_rows(block, rows)  # unknown rows are refused here
        metric = metric or block.metric
        assert metric in spec.metrics.names(), name
        assert set_name(spec, metric, block, named) == name  # the folder the script's name says
        made[name] = chosen
    assert {"synthetic", "wikipedia", "msrvtt_vgg128", "qmul_chairs_pretrained", "qmul_shoes_pretrained",
            "quickdraw_halves"} <= set(made)
    ledger = yaml.safe_load((ROOT / "claims" / "swamp-aistats2023.yaml").read_text())
    checked = 0
    for claim in ledger["claims"]:
        for item in claim.get("evidence", []):
            tuned = item.get("tuned") if isinstance(item, dict) else None
            if not tuned or Path(tuned["results"]).parent != Path("results/reference") \
                    or Path(tuned["results"]).name not in made:
                continue
            rows = made[Path(tuned["results"]).name]
            roles = {r.role for r in rows.values()}
            assert SWAMP in roles and sum(r.role == CONTRASTIVE for r in rows.values()) == 4, claim["id"]
            if tuned.get("base"):  # an add-on claim: X and X + SwAMP for every X, so best-with against best-without
                bases = {r.base for r in rows.values() if r.role == WITH_SWAMP}
                assert tuned["base"] in rows and bases == {n for n, r in rows.items() if r.role == CONTRASTIVE}
            checked += 1
    assert checked == 8  # synthetic, its class R@1, Wikipedia and its t2i, MSR-VTT and its MedR, both QMUL sets
