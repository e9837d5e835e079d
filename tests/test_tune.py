"""``harness tune``: search spaces read from the settings' declarations and the task's ``tune:`` block, refusals
before any trial, equal trials per method, pruning, the test split never read during a study, resume after SIGKILL
with no trial lost or doubled, parallel workers sharing one study (in SQLite or in Optuna's journal file, SLURM's
default, with its lock), and the tables and site marking tuned rows."""
from __future__ import annotations

import dataclasses
import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import optuna
import pytest
import torch
from optuna.trial import TrialState

from harness import cli
from harness.cli import tune as cli_tune
from harness.config import spec as specs
from harness.data import paired
from harness.errors import ConfigError, RunError
from harness.report import accuracy
from harness.report import tuning as tuning_report
from harness.run import preflight, runner
from harness.store.schema import load_results
from harness.tune import command, space, workers
from harness.tune import record as study_record
from harness.tune import storage as stored
from harness.tune import study as studies
from harness.tune import trial as tune_trial
from harness.tune.options import TuneOptions
from tests.conftest import ROOT, TINY, write_task

TUNE = {"space": {"swamp.K": {"low": 8, "high": 32}}}  # the tiny task's queue (64) must exceed K


def tiny(tmp_path: Path, **extra: object) -> Path:
    return write_task(tmp_path, {**TINY, "tune": TUNE, **extra})


def dims(path: Path, method: str) -> dict[str, space.Dimension]:
    return {d.name: d for d in space.dimensions(specs.load_task(path), method)}


# --- search spaces ---------------------------------------------------------------------------------------------

def test_search_spaces_are_read_from_the_declarations():
    found = dims(ROOT / "tasks" / "synthetic.yaml", "swamp")
    assert found["tau"].space.low == 0.005 and found["tau"].space.high == 0.5 and found["tau"].space.log
    assert found["K"].integer and not found["tau"].integer
    assert found["train.lr"].space.log and found["train.weight_decay"].space.low == 0.0
    assert found["encoders.a.hidden"].space.layers and found["encoders.a.hidden"].params() == [
        "encoders.a.hidden.width", "encoders.a.hidden.depth"]
    assert "train.epochs" not in found  # declared with on=False
    # SwAMP without its contrastive term (contrastive_weight 0): the term's settings do nothing and are not searched
    assert "margin" not in found and "temperature" not in found and "siglip_scale" not in found
    plus = dims(ROOT / "tasks" / "synthetic.yaml", "swamp_plus_contrastive")
    assert "margin" in plus and "temperature" not in plus  # the hinge's margin; the temperature is InfoNCE's
    infonce = dims(ROOT / "tasks" / "wikipedia.yaml", "contrastive_infonce")
    assert "temperature" in infonce and "margin" not in infonce
    cca = dims(ROOT / "tasks" / "wikipedia.yaml", "cca")
    assert cca["dim"].integer and cca["reg"].space.log  # closed form: tuned like any other setting
    assert set(cca) == {"dim", "reg"}  # it uses no encoders and no training settings: nothing else is searched


def test_a_task_block_narrows_switches_on_and_off(tmp_path):
    path = write_task(tmp_path, {**TINY, "tune": {"space": {
        "swamp.tau": {"low": 0.05, "high": 0.2}, "train.epochs": True, "swamp.eta": False,
        "encoders.a.hidden": {"width": [8, 16], "depth": [1, 2]}, "swamp.train.lr": {"low": 0.001, "high": 0.01},
        "swamp.K": {"low": 8, "high": 32}}}})
    found = dims(path, "swamp")
    assert (found["tau"].space.low, found["tau"].space.high, found["tau"].space.log) == (0.05, 0.2, True)
    assert "train.epochs" in found and "eta" not in found
    assert found["encoders.a.hidden"].space.depth == (1, 2) and found["encoders.a.hidden"].space.high == 16
    assert found["train.lr"].space.low == 0.001
    assert dims(path, "contrastive")["train.lr"].space.low == 1e-4  # swamp.train.lr is swamp's alone


def test_an_encoder_type_choice_searches_each_types_own_settings(tmp_path):
    path = write_task(tmp_path, {**TINY, "encoders": {"a": {"type": "linear", "dim": 8}, "b": {"type": "linear",
                                                                                              "dim": 8}},
                                 "tune": {"space": {"encoders.a.type": {"choices": ["linear", "mlp"]}}}})
    spec = specs.load_task(path)
    found = {d.name: d for d in space.dimensions(spec, "contrastive")}
    assert found["encoders.a.type"].space.choices == ("linear", "mlp")
    assert found["encoders.a.hidden"].kind == "mlp" and "encoders.b.hidden" not in found  # b stays linear
    assert space.start_params(spec, "contrastive", list(found.values()))["encoders.a.type"] == "linear"
    assert found["encoders.a.type"].override("contrastive", "mlp") == 'encoders.a={"type": "mlp", "dim": 8}'
    study = optuna.create_study()
    for kind in ("linear", "mlp"):
        study.enqueue_trial({"encoders.a.type": kind})
        values, overrides = tune_trial.trial_settings(study.ask(), list(found.values()), "contrastive")
        assert ("encoders.a.hidden" in values) == (kind == "mlp")  # hidden only where the trial picked mlp
        whole = [i for i, o in enumerate(overrides) if o.startswith("encoders.a=")]
        parts = [i for i, o in enumerate(overrides) if o.startswith("encoders.a.")]
        assert len(whole) == 1 and all(whole[0] < i for i in parts)  # the type first, then its settings
        built = specs.load_task(path, overrides)
        assert built.encoders["a"].kind == kind and built.encoders["b"].kind == "linear"


def test_the_first_trial_holds_the_tasks_own_settings(tmp_path):
    spec = specs.load_task(tiny(tmp_path))
    start = space.start_params(spec, "swamp", space.dimensions(spec, "swamp"))
    assert start["tau"] == 0.1 and start["K"] == 16 and start["train.lr"] == 0.001
    assert start["encoders.a.hidden.width"] == 50 and start["encoders.a.hidden.depth"] == 2


@pytest.mark.parametrize("entry, words", [
    ({"swamp.K": {"low": 100, "high": 200}}, "the search reaches K = 100, which its settings refuse: queue (64) must"),
    ({"swamp.tau": {"low": 0.5, "high": 0.1}}, "tune.space.swamp.tau: low must be below high"),
    ({"swamp.tau": {"low": 0.0, "high": 0.1}}, "a log-scale search needs low > 0"),
    ({"train.lr": {"low": -1.0, "high": -0.1, "log": False}}, "which its settings refuse: lr must be > 0"),
    ({"swamp.K": {"low": 1.5, "high": 8}}, "K is an integer setting"),
    ({"swamp.tua": {"low": 0.1, "high": 0.2}}, "did you mean 'swamp.tau'"),
    ({"swamp.hard": True}, "nothing declares a search for this setting"),
    ({"swamp.tau": {"lo": 0.1}}, "tune.space.swamp.tau.lo is not a key of a search"),
    ({"encoders.a.hidden": {"width": [0, 8]}}, "widths must satisfy 1 <= from"),
])
def test_a_search_that_cannot_be_valid_is_refused_naming_its_key(tmp_path, entry, words):
    path = write_task(tmp_path, {**TINY, "tune": {"space": entry}})
    with pytest.raises(ConfigError, match=re.escape(words)):
        space.dimensions(specs.load_task(path), "swamp")


def test_a_search_valid_in_part_is_a_warning(tmp_path):
    warned: list[str] = []
    found = space.dimensions(specs.load_task(write_task(tmp_path, TINY)), "swamp", warned)  # K: 16-1024, queue 64
    assert "K" in [d.name for d in found]
    assert warned == [f"{tmp_path / 'tiny.yaml'}: tune.space.swamp.K: K = 1024 is refused by the method's other "
                      "settings (queue (64) must exceed K (1024) so the uniform class marginal is meaningful (paper "
                      "Sec. 3); raise queue, lower K, or set strict_queue: false for the queue ablation); trials that "
                      "draw such values count as failed: narrow the search"]


def test_a_range_outside_the_settings_declared_range_is_refused(tmp_path):
    body = {**TINY, "tune": {"space": {"doodle.margin": {"low": 0.0, "high": 1.0, "log": False}}},
            "methods": {**TINY["methods"], "doodle": {"method": "doodle2search"}}}
    path = write_task(tmp_path, body)
    with pytest.raises(ConfigError, match=r"tune\.space\.doodle\.margin: the search reaches 0\.0, outside margin's "
                                          r"range \(> 0\)"):
        space.dimensions(specs.load_task(path), "doodle")


def test_bad_budgets_are_refused_before_any_trial(tmp_path, capsys):
    path = tiny(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["tune", str(path), "--methods", "contrastive", "--trials", "0", "--out", str(out)]) == 2
    assert "--trials must be >= 1" in capsys.readouterr().err
    assert cli.main(["tune", str(path), "--methods", "contrastive", "--seconds-per-method", "0", "--out",
                     str(out)]) == 2
    assert not out.exists()  # nothing written
    bad = write_task(tmp_path, {**TINY, "tune": {"space": {"swamp.tau": {"low": 1.0, "high": 0.1}}}}, "bad.yaml")
    assert cli.main(["tune", str(bad), "--methods", "contrastive,swamp", "--out", str(out)]) == 2
    assert "bad.yaml: tune.space.swamp.tau: low must be below high" in capsys.readouterr().err
    assert not out.exists()


# --- a whole study, then the tuned runs -------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    """A real two-method tune of the tiny task, the test split's readers counted by phase."""
    folder = tmp_path_factory.mktemp("tune")
    path = tiny(folder)
    out = folder / "out"
    reads = {"load": 0, "study": 0, "final": 0}  # loading checks every split; trials must not touch the test one
    phase = {"now": "load"}
    original_get, original_final, original_work = paired.PairedData.__getitem__, command.final_runs, studies.work

    def counting(self, name):
        if name == "test":
            reads[phase["now"]] += 1
        return original_get(self, name)

    def final(*args, **kwargs):
        phase["now"] = "final"
        return original_final(*args, **kwargs)

    def work(*args, **kwargs):
        phase["now"] = "study"
        try:
            return original_work(*args, **kwargs)
        finally:
            phase["now"] = "load"

    mp = pytest.MonkeyPatch()
    mp.setattr(paired.PairedData, "__getitem__", counting)
    mp.setattr(command, "final_runs", final)
    mp.setattr(studies, "work", work)
    try:
        code = cli.main(["tune", str(path), "--methods", "contrastive,swamp", "--trials", "5", "--seeds", "0,1",
                         "--out", str(out), "--no-progress"])
    finally:
        mp.undo()
    return SimpleNamespace(code=code, out=out, path=path, reads=reads,
                           results=load_results(out / "tiny"))


def test_every_method_gets_the_same_number_of_trials(tuned):
    assert tuned.code == 0
    for name in ("contrastive", "swamp"):
        records = [r for r in tuned.results if r["method"] == name]
        assert len(records) == 2 and {r["run_name"] for r in records} == {f"{name}@tuned"}
        t = records[0]["tuning"]
        assert t["trials"]["counted"] == 5 == t["budget"]["trials"]
        assert t["trials"]["complete"] + t["trials"]["pruned"] + t["trials"]["failed"] == 5
        assert len(t["values"]) == 5 and t["split"] == "val" and t["metric"] == "a2b/R@1"
        assert t["storage"].startswith("sqlite:///") and t["study"].startswith(f"tiny.{name}.")


def test_the_test_split_is_never_read_during_a_study(tuned):
    assert tuned.reads["study"] == 0
    assert tuned.reads["final"] > 0  # the tuned runs are tested
    view = tune_trial.without_test(paired.PairedData(splits={"train": None, "val": None, "test": None}))  # type: ignore
    with pytest.raises(ConfigError, match="dataset has no split 'test'"):
        view["test"]


def test_the_tuned_runs_train_the_best_trials_settings_and_beat_the_start(tuned):
    for r in tuned.results:
        t = r["tuning"]
        assert t["best_value"] >= t["start_value"]  # the task's own settings are the first trial
        for key, value in t["best"].items():
            recorded = {**{f"train.{k}": v for k, v in r["config"]["train"].items()}, **r["config"]["method"],
                        **{f"encoders.{m}.{k}": v for m in "ab" for k, v in r["config"]["encoders"][m].items()}}
            assert recorded[key] == value, key
        assert r["seed"] != 0 or r["val_at_best"][t["metric"]] == pytest.approx(t["best_value"])


def test_a_second_run_of_the_command_resumes_and_adds_nothing(tuned, capsys):
    before = {r["_path"]: r["wall_s"] for r in tuned.results}
    assert cli.main(["tune", str(tuned.path), "--methods", "contrastive,swamp", "--trials", "5", "--seeds", "0,1",
                     "--out", str(tuned.out), "--no-progress"]) == 0
    after = {r["_path"]: r["wall_s"] for r in load_results(tuned.out / "tiny")}
    assert after == before  # the finished tuned runs are kept
    assert "5 (" in capsys.readouterr().out  # still five trials each


def test_tables_mark_tuned_rows_and_an_unequal_budget(tuned):
    header, rows = accuracy.accuracy_rows(tuned.results)
    names = [row[1] for row in rows if row[1].endswith("]")]
    assert "contrastive@tuned [tuned 5]" in names and "swamp@tuned [tuned 5]" in names
    assert any(line.startswith("[tuned N]") for line in accuracy.accuracy_footnote(tuned.results, None))
    fewer = json.loads(json.dumps(tuned.results))
    for r in fewer:
        if r["method"] == "swamp":
            r["tuning"]["trials"]["counted"] = 3
    names = [row[1] for row in accuracy.accuracy_rows(fewer)[1]]
    assert "swamp@tuned [tuned 3 < 5]" in names
    assert any("[tuned N < M]" in line for line in accuracy.accuracy_footnote(fewer, None))


def test_the_site_page_shows_each_study(tuned, tmp_path):
    header, rows, notes = tuning_report.rows(tuned.results)
    assert [r[0] for r in rows] == ["contrastive@tuned", "swamp@tuned"]
    assert rows[0][1].startswith("5 of 5 (")
    assert tuning_report.figure(tuned.results) is not None
    assert cli.main(["report", str(tuned.out), "--out", str(tmp_path / "site"), "--no-progress"]) == 0
    page = (tmp_path / "site" / "tiny.html").read_text()
    assert "Tuning studies" in page and "tuning.svg" in page and "most important settings" in page


def test_the_page_states_the_pruning_rule_the_studies_recorded():
    """The note under the studies' table reads the rule from the records: none, a median rule, a mix of them, and
    the median pruner for a study recorded before the rule was (the default of that time)."""
    def result(run: str, **tuning: object) -> dict:
        return {"run_name": run, "tuning": {"metric": "a2b/R@1", "budget": {"trials": 4}, "best": {},
                                            "best_value": 1.0, "trials": {"counted": 4, "complete": 4, "pruned": 0,
                                                                          "failed": 0}, **tuning}}
    rule = "median after 50% of the epochs (3)"

    def note(*results: dict) -> str:
        return tuning_report.rows(list(results))[2][0]
    assert "pruning: none (every trial trained all its epochs);" in note(result("a@tuned", pruner="none"),
                                                                          result("b@tuned", pruner="none"))
    assert f"pruning: {rule};" in note(result("a@tuned", pruner=rule), result("b@tuned", pruner=rule))
    assert "pruning: median;" in note(result("a@tuned"))
    mixed = note(result("a@tuned", pruner="none"), result("b@tuned", pruner=rule))
    assert (f"a@tuned none (every trial trained all its epochs); b@tuned {rule} (not alike: compare with care)"
            in mixed)
    assert "median pruner" not in mixed


def test_a_study_is_the_same_on_every_run_of_the_command(tmp_path):
    """Each trial's sampler is seeded by the study's seed, the row's name and the trial's place (not by the worker
    that runs it): the same command proposes the same trials again whoever runs the row (and the tiny task trains
    deterministically on the CPU, so the values agree too)."""
    path = tiny(tmp_path)
    found = []
    for name, worker in (("first", 0), ("second", 3)):
        folder = tmp_path / name / "_tune"
        s = studies.Study(task=str(path), method="contrastive", overrides=(), added=(), epochs=2, seed=0, trials=5,
                          seconds=None, folder=folder, storage=stored.default_storage(folder), row="infonce")
        data = runner.load_data(s.spec())
        opts = runner.RunOptions(device=runner.torch.device("cpu"), out=folder / "trials",
                                         progress=False)
        opened = studies.work(s, data, opts, worker=worker)
        found.append([(t.params, t.value, t.state) for t in opened.get_trials()])
    assert found[0] == found[1]
    other = studies.Study(task=str(path), method="contrastive", overrides=(), added=(), epochs=2, seed=0, trials=5,
                          seconds=None, folder=tmp_path / "third", storage=stored.default_storage(tmp_path / "third"),
                          row="sum")
    opened = studies.work(other, runner.load_data(other.spec()),
                          runner.RunOptions(device=torch.device("cpu"), out=tmp_path / "third", progress=False))
    assert [t.params for t in opened.get_trials()][1:] != [p for p, _, _ in found[0]][1:]  # another row samples apart


def test_a_trials_sampler_seed_is_a_stable_hash_of_seed_row_and_place():
    seeds = {studies.trial_seed(s, r, n) for s in (0, 1) for r in ("infonce", "infonce+swamp") for n in range(5)}
    assert len(seeds) == 20  # every seed, row and place draws apart
    # a stable hash: the same on every machine and Python process (not hash(), which is salted per process)
    assert studies.trial_seed(0, "infonce", 3) == int.from_bytes(
        __import__("hashlib").sha256(b"0:infonce:3").digest()[:4], "big")
    code = "from harness.tune.study import trial_seed; print(trial_seed(7, 'dcl', 2))"
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                           env={**os.environ, "PYTHONHASHSEED": "123"})
    assert int(again.stdout) == studies.trial_seed(7, "dcl", 2)


# --- pruning, refusals ------------------------------------------------------------------------------------------

def test_the_pruner_stops_trials_that_trail_the_median(tmp_path, monkeypatch):
    """The pruner sees each epoch's best value so far: a trial whose values trail the completed trials' median at
    the same epoch is stopped there and counted. (Training is replaced here by a known curve: the value rises with
    train.lr, so that which trials trail is known.)"""
    path = tiny(tmp_path)
    s = studies.Study(task=str(path), method="contrastive", overrides=(), added=(), epochs=6, seed=0, trials=12,
                      seconds=None, folder=tmp_path / "_tune", storage=stored.default_storage(tmp_path / "_tune"),
                      prune="median", prune_warmup=0.5)
    assert s.warmup_epochs == 3 and s.pruner_text == "median after 50% of the epochs (3)"
    epochs_seen = []

    def train(run, data, opts, on_epoch):
        lr = run.spec.methods["contrastive"].train.lr
        history = []
        for epoch in range(1, 7):
            record = {"epoch": epoch, "val/a2b/R@1": 1000 * lr * epoch}
            history.append(record)
            epochs_seen.append(epoch)
            on_epoch(record)
        fit = SimpleNamespace(best_epoch=6, history=history)
        return SimpleNamespace(fit=fit, val_at_best={"a2b/R@1": history[-1]["val/a2b/R@1"]})

    monkeypatch.setattr(runner, "train", train)
    monkeypatch.setattr(preflight, "refusals", lambda runs, data: {})
    opts = SimpleNamespace(out=tmp_path / "trials")
    opened = studies.work(s, paired.PairedData(splits={}), opts)  # type: ignore[arg-type]
    have = stored.counts(opened)
    assert have["counted"] == 12 and have["pruned"] >= 1
    for t in opened.get_trials(states=(TrialState.PRUNED,)):
        # stopped after the warm-up (3 of 6 epochs, alike for every trial) and before its last epoch
        assert 3 <= max(t.intermediate_values) < 6

    # the default rule prunes nothing: every trial trains all its epochs, whatever its curve
    none = dataclasses.replace(s, prune="none", folder=tmp_path / "_none",
                               storage=stored.default_storage(tmp_path / "_none"))
    assert none.pruner_text == "none" and none.name != s.name  # another rule is another study
    have = stored.counts(studies.work(none, paired.PairedData(splits={}), opts))  # type: ignore[arg-type]
    assert (have["counted"], have["complete"], have["pruned"]) == (12, 12, 0)


def test_one_pruning_rule_for_every_method_of_a_command(tmp_path):
    """Every method's study of one command gets the same rule; the warm-up is the same share of each method's
    epochs; the rule is refused when it is not one."""
    path = tiny(tmp_path)
    args = TuneOptions(task=str(path), methods=("contrastive", "swamp", "cca"), trials=4, out=tmp_path, epochs=4,
                       prune="median")
    found = command.setup(args)
    assert {type(studies.pruner_of(s)) for s in found} == {optuna.pruners.MedianPruner}
    assert {s.warmup_epochs for s in found if s.method != "cca"} == {2}
    assert {s.pruner_text for s in found if s.method != "cca"} == {"median after 50% of the epochs (2)"}
    default = command.setup(dataclasses.replace(args, prune="none"))
    assert {type(studies.pruner_of(s)) for s in default} == {optuna.pruners.NopPruner}
    for bad, message in (({"prune": "hyperband"}, "--prune 'hyperband'"), ({"prune_warmup": 0.0}, "--prune-warmup"),
                         ({"folds": 3}, "with folds of the training split"),
                         ({"prune": "none", "folds": 2}, "--folds 2")):
        with pytest.raises(ConfigError, match=message):
            command.setup(dataclasses.replace(args, **bad))


def test_a_closed_form_fit_is_never_pruned(tmp_path):
    """CCA's one 'epoch' is its whole fit: a trial that reports it has finished, so it completes; were it pruned,
    its value could never be the best."""
    path = tiny(tmp_path)
    s = studies.Study(task=str(path), method="cca", overrides=(), added=(), epochs=None, seed=0, trials=10,
                      seconds=None, folder=tmp_path / "_tune", storage=stored.default_storage(tmp_path / "_tune"))
    data = runner.load_data(s.spec())
    opts = runner.RunOptions(device=runner.torch.device("cpu"), out=tmp_path / "trials",
                                     progress=False)
    have = stored.counts(studies.work(s, data, opts))
    assert (have["counted"], have["complete"], have["pruned"]) == (10, 10, 0)


def test_settings_the_method_refuses_count_as_failed_trials(tmp_path):
    """K from 8 to 128 beside a queue of 64: the values from 64 up are refused, each such trial counted as failed
    with the reason (two are queued here so that the test does not depend on the sampler)."""
    path = write_task(tmp_path, {**TINY, "tune": {"space": {"swamp.K": {"low": 8, "high": 128}}}})
    s = studies.Study(task=str(path), method="swamp", overrides=(), added=(), epochs=None, seed=0, trials=3,
                      seconds=None, folder=tmp_path / "_tune", storage=stored.default_storage(tmp_path / "_tune"))
    opened = studies.open_study(s)
    start = opened.get_trials()[0].system_attrs["fixed_params"]
    for k in (100, 120):
        opened.enqueue_trial({**start, "K": k})
    data = runner.load_data(s.spec())
    opts = runner.RunOptions(device=runner.torch.device("cpu"), out=tmp_path / "trials",
                                     progress=False)
    opened = studies.work(s, data, opts)
    have = stored.counts(opened)
    assert (have["counted"], have["complete"], have["failed"]) == (3, 1, 2)
    reasons = [t.user_attrs["failed"] for t in opened.get_trials(states=(TrialState.FAIL,))]
    assert all(r.startswith("settings refused: ") and "queue (64) must exceed K" in r for r in reasons)
    assert study_record.record(s, opened, s.dims())["trials"]["failed"] == 2


# --- interruption, parallel workers -----------------------------------------------------------------------------

def _study(out: Path, path: Path, method: str, trials: int, epochs: int | None = None) -> optuna.Study:
    spec = specs.load_task(path)
    s = studies.Study(task=str(path), method=method, overrides=(), added=(), epochs=epochs, seed=0, trials=trials,
                      seconds=None, folder=out / spec.name / "_tune",
                      storage=stored.default_storage(out / spec.name / "_tune"))
    return optuna.load_study(study_name=s.name, storage=stored.storage_of(s.storage))


def _open_storage(url: str, start: float) -> str:
    time.sleep(max(0.0, start - time.time()))  # every process opens the new file at the same moment
    stored.storage_of(url)  # an error here is raised again in the test by the pool
    return "ok"


def test_processes_opening_a_new_sqlite_study_file_at_once_all_succeed(tmp_path):
    """Optuna creates its tables when a storage first opens a file; several workers (or a watcher) opening a new file
    together would race on that (UNIQUE constraint failed: alembic_version.version_num)."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(6) as pool:
        for attempt in range(2):
            url = stored.default_storage(tmp_path / f"_tune{attempt}")
            start = time.time() + 3.0  # after the spawned interpreters have imported Optuna
            answers = pool.starmap(_open_storage, [(url, start)] * 6)
            assert answers == ["ok"] * 6


def test_a_running_trial_is_judged_by_its_process_only_on_this_host_in_this_boot(tmp_path):
    """A study's storage carried to a fresh machine of the same name: a live process there that happens to have the
    dead worker's id does not keep the trial running; its old heartbeat marks it dead."""
    opened = optuna.create_study(study_name="s", storage=stored.default_storage(tmp_path))
    old = time.time() - stored.GRACE_S - 60
    cases = {"this boot, live": {"boot": stored.BOOT, "beat": old},
             "another boot, live id, old beat": {"boot": "another-boot", "beat": old},
             "no boot recorded, old beat": {"beat": old},
             "another boot, fresh beat": {"boot": "another-boot", "beat": time.time()}}
    numbers = {}
    for name, attrs in cases.items():
        trial = opened.ask({"x": optuna.distributions.FloatDistribution(0.0, 1.0)})
        for key, value in {"host": stored.HOST, "pid": os.getpid(), **attrs}.items():
            trial.set_user_attr(key, value)
        numbers[trial.number] = name
    recovered = {numbers[n] for n in stored.recover(opened)}
    assert recovered == {"another boot, live id, old beat", "no boot recorded, old beat"}
    assert stored.BOOT == Path("/proc/sys/kernel/random/boot_id").read_text().strip() or not Path("/proc").is_dir()


@pytest.mark.slow
def test_a_study_killed_with_sigkill_resumes_with_no_trial_lost_or_doubled(tmp_path):
    path = tiny(tmp_path)
    out = tmp_path / "out"
    words = [sys.executable, "-m", "harness", "tune", str(path), "--methods", "contrastive", "--trials", "6",
             "--epochs", "40", "--out", str(out), "--no-progress", "--no-final"]
    killed = subprocess.Popen(words, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = out / "tiny" / "_tune" / "studies.db"
    deadline = time.time() + 300
    victim = None
    while time.time() < deadline and victim is None:
        time.sleep(0.2)
        if not db.exists():
            continue
        try:
            trials = _study(out, path, "contrastive", 6, 40).get_trials()
        except (KeyError, optuna.exceptions.StorageInternalError, ValueError):
            continue
        done = [t for t in trials if t.state.is_finished()]
        running = [t for t in trials if t.state == TrialState.RUNNING]
        if len(done) >= 2 and running and running[0].params:  # a trial under way, its settings drawn
            victim = running[0]
    assert victim is not None, "the study never reached a running third trial"
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    subprocess.run(words, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    trials = _study(out, path, "contrastive", 6, 40).get_trials()
    counted = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)
               or (t.state == TrialState.FAIL and "failed" in t.user_attrs)]
    assert len(counted) == 6
    interrupted = [t for t in trials if t.state == TrialState.FAIL and "failed" not in t.user_attrs]
    assert [t.number for t in interrupted] == [victim.number]
    retry = [t for t in trials if t.user_attrs.get("retry_of") == victim.number]
    killed_trial = next(t for t in trials if t.number == victim.number)
    assert len(retry) == 1 and retry[0].params == killed_trial.params and retry[0].state.is_finished()
    assert not any(t.state == TrialState.RUNNING for t in trials)
    # the record's minutes are the counted trials' (the interrupted one ran until it was found dead: not counted)
    folder = out / "tiny" / "_tune"
    s = studies.Study(task=str(path), method="contrastive", overrides=(), added=(), epochs=40, seed=0, trials=6,
                      seconds=None, folder=folder, storage=stored.default_storage(folder))
    rec = study_record.record(s, studies.open_study(s), s.dims())
    assert rec["trial_minutes"] == round(sum(t.duration.total_seconds() for t in counted) / 60, 3)


@pytest.mark.slow
def test_local_workers_share_one_study_and_keep_the_budget_exact(tmp_path, capsys):
    path = tiny(tmp_path)
    out = tmp_path / "out"
    assert cli.main(["tune", str(path), "--methods", "contrastive,cca", "--trials", "7", "--launcher", "local",
                     "--jobs", "2", "--out", str(out), "--no-progress"]) == 0
    assert "tuning with 2 worker processes (1 threads each)" in capsys.readouterr().out
    for method in ("contrastive", "cca"):
        have = stored.counts(_study(out, path, method, 7))
        assert have["counted"] == 7 and have["running"] == 0
        trials = sorted(_study(out, path, method, 7).get_trials(), key=lambda t: t.number)
        assert len({t.user_attrs["pid"] for t in trials}) == 1  # a row's trials run in one worker, in order
        assert all(a.datetime_complete <= b.datetime_start for a, b in zip(trials, trials[1:]))


@pytest.mark.slow
def test_local_workers_share_the_tuned_runs_by_rows_and_write_what_one_process_writes(tmp_path, capsys):
    path = tiny(tmp_path)
    common = ["tune", str(path), "--methods", "contrastive,cca", "--trials", "2", "--seeds", "0-1", "--no-progress",
              "--no-tables"]
    assert cli.main([*common, "--out", str(tmp_path / "here")]) == 0
    assert "tuned runs with" not in capsys.readouterr().out  # one process: they run here
    assert cli.main([*common, "--out", str(tmp_path / "workers"), "--launcher", "local", "--jobs", "2"]) == 0
    assert "tuned runs with 2 worker processes (1 threads each), each claiming whole rows" in capsys.readouterr().out
    logs = [(tmp_path / "workers" / "tiny" / "_tune" / "workers" / f"tuned-worker{i}.log").read_text()
            for i in range(2)]
    claimed = {m for log in logs for m in re.findall(r"worker \d: the tuned runs of (\w+)", log)}
    assert claimed == {"contrastive", "cca"}

    def cells(out: Path) -> dict:
        return {(r["run_name"], r["seed"]): (r["metrics"], r["tuning"]["best"], r["tuning"]["storage"],
                                            r["environment"]["hardware"]["torch_threads"])
                for r in load_results(out)}

    here, there = cells(tmp_path / "here"), cells(tmp_path / "workers")
    assert here == there and len(here) == 4 and {v[3] for v in there.values()} == {1}
    # a second command finds every tuned run written and trains nothing again
    before = {p: p.stat().st_mtime_ns for p in (tmp_path / "workers").rglob("seed*.json")}
    assert cli.main([*common, "--out", str(tmp_path / "workers"), "--launcher", "local", "--jobs", "2"]) == 0
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "workers").rglob("seed*.json")} == before


def test_workers_end_with_the_command_that_started_them_when_it_is_interrupted(tmp_path, monkeypatch):
    path = tiny(tmp_path)
    opts = tune_options(path, tmp_path / "out", launcher="local", jobs=2)
    found = command.setup(opts)
    started = []

    class Worker:  # a worker process that runs until it is told to end
        def __init__(self, argv, **_):
            self.argv, self.returncode = argv, None
            started.append(self)

        def poll(self):
            return self.returncode

        def terminate(self):
            self.returncode = -15

    def interrupted(done):
        assert not done()
        raise KeyboardInterrupt

    monkeypatch.setattr(workers.subprocess, "Popen", Worker)
    with pytest.raises(KeyboardInterrupt):
        workers._processes(opts, found, 2, True, interrupted)
    assert [w.returncode for w in started] == [-15, -15]
    assert all("--finals-only" in w.argv and "--studies-only" not in w.argv for w in started)


def test_the_parent_names_a_tuned_run_its_workers_did_not_write(tmp_path, monkeypatch):
    path = tiny(tmp_path)
    opts = tune_options(path, tmp_path / "out", methods=("cca",), trials=1, launcher="local", jobs=2, seeds="0")
    found = command.setup(opts)
    command.run_studies(dataclasses.replace(opts, launcher="sequential"), found)
    records = {s.method: command.summarize(s, opts) for s in found}
    launched = []
    monkeypatch.setattr(workers, "launch_finals", lambda o, f, runs: launched.append((o.trials, len(runs))))
    with pytest.raises(RunError, match="the tuned run cca@tuned seed 0 of cca was not written by the workers"):
        command.final_runs(opts, found, records, None)
    assert launched == [(1, 1)]


# --- Optuna's journal file: SLURM's default storage, its lock -------------------------------------------------

def test_journal_urls_round_trip_through_the_storage(tmp_path):
    url = stored.default_storage(tmp_path / "_tune", journal=True)
    assert url == f"journal://{(tmp_path / '_tune' / 'studies.log').resolve()}" and url.startswith("journal:///")
    assert stored.journal_path(url) == tmp_path / "_tune" / "studies.log"
    assert stored.shown_storage(url) == url  # recorded as given: no password to hide
    storage = stored.storage_of(url)
    assert isinstance(storage, optuna.storages.JournalStorage) and (tmp_path / "_tune" / "studies.log").is_file()
    optuna.create_study(storage=storage, study_name="s").enqueue_trial({"x": 1.0}, user_attrs={"start": True})
    again = optuna.load_study(study_name="s", storage=stored.storage_of(stored.shown_storage(url)))
    assert [t.user_attrs for t in again.get_trials()] == [{"start": True}]
    assert stored.journal_path(stored.default_storage(tmp_path)) is None  # SQLite
    with pytest.raises(ConfigError, match="journal:///ABSOLUTE/PATH"):
        stored.journal_path("journal://studies.log")


def test_the_slurm_launcher_stores_studies_in_a_journal_file_and_passes_it_to_its_workers(tmp_path):
    path = tiny(tmp_path)
    args = tune_options(path, tmp_path / "out", launcher="slurm", rows=(("contrastive", "infonce"),), folds=3)
    (found,) = command.setup(args)
    journal = f"journal://{(tmp_path / 'out' / 'tiny' / '_tune' / 'studies.log').resolve()}"
    assert found.storage == journal and found.row_name == "infonce" and found.folds == 3
    argv = workers.worker_argv(args, 1, 2, found.storage)
    assert argv[argv.index("--storage") + 1] == journal
    worker = cli.build_parser().parse_args(argv[2:])  # the worker's own command line: the same studies
    (again,) = command.setup(cli_tune.tune_options(worker))
    assert (again.storage, again.name, again.row_name) == (journal, found.name, "infonce") and worker.worker == 2
    assert (worker.launcher, worker.studies_only, worker.threads, worker.slurm) == ("sequential", True, 1, None)
    for launcher in ("sequential", "local"):  # one machine: SQLite
        (here,) = command.setup(tune_options(path, tmp_path / "out", launcher=launcher))
        assert here.storage == stored.default_storage(tmp_path / "out" / "tiny" / "_tune")
        assert "--storage" in workers.worker_argv(args, None, 1, here.storage)
    given = f"journal://{tmp_path / 'elsewhere.log'}"
    assert [s.storage for s in command.setup(tune_options(path, tmp_path / "out", storage=given))] == [given]
    with pytest.raises(ConfigError, match="absolute path"):
        command.setup(tune_options(path, tmp_path / "out", storage="journal://relative.log"))


def tune_options(path: Path, out: Path, **extra: object) -> TuneOptions:
    """The options of ``harness tune`` for one method of the tiny task."""
    return TuneOptions(**{"task": str(path), "methods": ("contrastive",), "trials": 3, "out": out, "epochs": 1,
                          "device": "cpu", **extra})


def test_a_study_in_a_journal_file_runs_here_and_resumes(tmp_path, capsys):
    path = tiny(tmp_path)
    journal = tmp_path / "shared" / "studies.log"
    words = ["tune", str(path), "--methods", "contrastive", "--trials", "3", "--epochs", "1", "--seeds", "0",
             "--storage", f"journal://{journal}", "--out", str(tmp_path / "out"), "--no-progress", "--no-tables"]
    assert cli.main(words) == 0
    assert f"stored in journal://{journal}" in capsys.readouterr().out
    (result,) = load_results(tmp_path / "out" / "tiny")
    assert result["tuning"]["storage"] == f"journal://{journal}" and result["tuning"]["trials"]["counted"] == 3
    opened = optuna.load_study(study_name=result["tuning"]["study"], storage=stored.storage_of(f"journal://{journal}"))
    first = [(t.number, t.state, t.value) for t in opened.get_trials()]
    assert len(first) == 3 and all(t.user_attrs["worker"] == 0 for t in opened.get_trials())
    name = result["tuning"]["study"]
    assert (journal.parent / f"{name}.budget").is_file() and not list(journal.parent.glob("*.lock"))  # released
    assert not (tmp_path / "out" / "tiny" / "_tune" / f"{name}.lock").exists()  # no flock beside it
    assert cli.main(words) == 0  # again: the study is complete, the tuned run finished
    again = optuna.load_study(study_name=name, storage=stored.storage_of(f"journal://{journal}"))
    assert [(t.number, t.state, t.value) for t in again.get_trials()] == first


def _journal_worker(s: studies.Study, data: paired.PairedData, worker: int, start: object) -> None:
    torch.set_num_threads(1)  # a forked process: no thread pool inherited half-way
    start.wait()  # type: ignore[attr-defined]
    opts = runner.RunOptions(device=torch.device("cpu"), out=s.folder / "trials", progress=False)
    studies.work(s, data, opts, worker=worker)


def test_two_processes_sharing_a_journal_study_keep_the_budget_exact(tmp_path):
    """As local or SLURM workers do, on Optuna's journal file and its lock: two processes (forked, so that they start
    in a moment) ask for trials until the budget, and together run exactly that many."""
    path = tiny(tmp_path)
    folder = tmp_path / "out" / "tiny" / "_tune"
    s = studies.Study(task=str(path), method="contrastive", overrides=(), added=(), epochs=1, seed=0, trials=6,
                      seconds=None, folder=folder, storage=stored.default_storage(folder, journal=True))
    studies.open_study(s)  # created once, before the workers
    data = runner.load_data(s.spec())
    fork = multiprocessing.get_context("fork")
    start = fork.Barrier(2)
    workers = [fork.Process(target=_journal_worker, args=(s, data, i + 1, start)) for i in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]
    opened = optuna.load_study(study_name=s.name, storage=stored.storage_of(s.storage))
    have = stored.counts(opened)
    assert (have["counted"], have["running"], len(opened.get_trials())) == (6, 0, 6)  # none over, none re-run
    assert {t.user_attrs["worker"] for t in opened.get_trials()} == {1, 2}  # both workers ran trials
    assert len({t.user_attrs["pid"] for t in opened.get_trials()} - {os.getpid()}) == 2


@pytest.mark.filterwarnings("ignore:The value of `grace_period` might be too small")
def test_a_journal_lock_left_by_a_killed_holder_is_taken_over_and_a_live_ones_is_not(tmp_path, monkeypatch):
    """Optuna's lock is a symbolic link: a holder killed while holding it leaves it. A waiter removes it once the
    lock's file went unmodified for the grace period; a live holder touches that file meanwhile and keeps it."""
    monkeypatch.setattr(stored, "LOCK_GRACE_S", 1)
    monkeypatch.setattr(stored, "LOCK_TOUCH_S", 0.1)
    target = tmp_path / "study.budget"
    target.touch()
    os.symlink(target, f"{target}.lock")  # as a killed holder leaves it
    began = time.monotonic()
    with stored.journal_lock(target):
        waited = time.monotonic() - began
        assert os.path.islink(f"{target}.lock")
    assert 1 <= waited < 10 and not os.path.lexists(f"{target}.lock")

    held, released = threading.Event(), []

    def hold() -> None:
        with stored.journal_lock(target):
            held.set()
            time.sleep(2.0)  # twice the grace period, alive
            released.append(time.monotonic())

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    with stored.journal_lock(target):
        got = time.monotonic()
    holder.join()
    assert released and got >= released[0]  # it waited for the holder: no take-over of a live lock


def test_a_study_given_more_trials_retrains_its_tuned_runs_with_the_record_of_the_larger_budget(tmp_path):
    """A larger --trials continues the same study, whose best may move: the tuned runs made after the smaller budget
    are trained again, not kept with a record of a budget and best settings the study no longer has."""
    path = tiny(tmp_path)
    words = ["tune", str(path), "--methods", "contrastive", "--epochs", "1", "--seeds", "0", "--out",
             str(tmp_path / "out"), "--no-progress", "--no-tables"]
    assert cli.main([*words, "--trials", "2"]) == 0
    (first,) = load_results(tmp_path / "out" / "tiny")
    assert first["tuning"]["budget"]["trials"] == 2
    assert cli.main([*words, "--trials", "3"]) == 0
    (again,) = load_results(tmp_path / "out" / "tiny")
    assert again["tuning"]["study"] == first["tuning"]["study"] and again["tuning"]["budget"]["trials"] == 3
    assert again["tuning"]["trials"]["counted"] == 3 and again["tuning"]["threads"] == 1
    assert again["tuning"]["storage"] == "sqlite:///../_tune/studies.db"


def test_a_row_claimed_by_another_process_is_not_run_here_and_is_named(tmp_path):
    """A row's trials run in one process: a command that finds a row claimed (another worker holds it) runs the other
    rows and names the one it could not run, instead of running its trials beside the other process's."""
    path = tiny(tmp_path)
    opts = TuneOptions(task=str(path), methods=("contrastive", "cca"), trials=2, epochs=1, out=tmp_path / "out",
                       device="cpu", no_progress=True)
    found = command.setup(opts)
    held = found[0]
    code = ("import fcntl, sys, time; h = open(sys.argv[1], 'a'); fcntl.flock(h, fcntl.LOCK_EX); print('held', "
            "flush=True); time.sleep(60)")
    held.folder.mkdir(parents=True, exist_ok=True)
    other = subprocess.Popen([sys.executable, "-c", code, str(held.folder / f"{held.name}.row")],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        with pytest.raises(RunError, match="another process is running the trials of contrastive"):
            command.run_studies(opts, found)
        assert stored.counts(studies.open_study(found[1]))["counted"] == 2  # the free row ran
        assert stored.counts(studies.open_study(held))["counted"] == 0
        command.run_studies(dataclasses.replace(opts, studies_only=True), found)  # a worker skips it quietly
    finally:
        other.kill()
        other.wait()
    command.run_studies(opts, found)  # released with its process: this command runs it now
    assert stored.counts(studies.open_study(held))["counted"] == 2
