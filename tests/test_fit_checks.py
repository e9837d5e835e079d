"""Settings that cannot fit the data, caught before training: a batch or a SwAMP queue as large as the training
set and a k of R@k that reaches the gallery warn (one line each, kept in the result file, flagged in the
tables); more SwAMP prototypes than training pairs is refused."""
from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.config.spec import load_task
from harness.errors import ConfigError
from harness.run import preflight, runner
from tests.conftest import TINY, write_task

N_TRAIN, N_TEST, BATCH = 240, 80, 32  # the tiny task's training and test pairs, its batch


def _warnings(tmp_path, name, *overrides):
    spec = load_task(write_task(tmp_path, TINY), list(overrides))
    return preflight.fit_warnings(spec, name, runner.load_data(spec))


def test_settings_that_fit_give_no_warning(tmp_path):
    assert _warnings(tmp_path, "swamp") == [] and _warnings(tmp_path, "contrastive") == []


def test_a_batch_larger_than_the_training_set_warns(tmp_path):
    (line,) = _warnings(tmp_path, "contrastive", "contrastive.train.batch_size=300")
    assert "train.batch_size = 300" in line and f"the {N_TRAIN} training pairs" in line
    assert f"e.g. {N_TRAIN // 4}" in line and "methods.contrastive" in line


def test_a_queue_as_large_as_the_training_set_warns(tmp_path):
    (line,) = _warnings(tmp_path, "swamp", f"swamp.queue={N_TRAIN}")
    expected = (N_TRAIN - BATCH) // BATCH * BATCH  # batch + queue within the training set, still above K = 16
    assert f"queue = {N_TRAIN}" in line and f"the {N_TRAIN} training pairs" in line and f"queue: {expected}" in line
    assert _warnings(tmp_path, "swamp", f"swamp.queue={N_TRAIN - 1}") == []


def test_more_prototypes_than_training_pairs_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=rf"methods.swamp: K = 300 prototypes exceed the {N_TRAIN} training pairs"
                                          rf".*K: auto \({round(N_TRAIN / 7)} here"):
        _warnings(tmp_path, "swamp", "swamp.K=300", "swamp.queue=400")


def test_on_random_data_for_timing_more_prototypes_than_pairs_is_a_warning(tmp_path):
    """A task on random data in a real dataset's shapes measures time at the real K; shrinking its data (the GPU
    tables' --smoke run) must not stop it, so what would be refused is said and the run goes on."""
    spec = load_task(write_task(tmp_path, TINY), ["swamp.K=300", "swamp.queue=400"])
    data = runner.load_data(spec)
    data.info["timing_only"] = True
    lines = preflight.fit_warnings(spec, "swamp", data)
    assert any("K = 300 prototypes exceed" in line and "timing only: the run goes on" in line for line in lines)


def test_ks_that_reach_the_gallery_warn_per_direction(tmp_path):
    lines = _warnings(tmp_path, "contrastive", "metrics.ks=[1,5,80]", "metrics.directions=[a2b,b2a]")
    assert len(lines) == 2 and all("metrics.ks [80]" in line and f"ranks {N_TEST} test items" in line for line in lines)
    assert "e.g. [1, 5]" in lines[0]


def test_a_run_prints_records_and_flags_its_warnings(tmp_path, capsys):
    out = tmp_path / "out"
    task = write_task(tmp_path, TINY)
    rc = main(["run", str(task), "--methods", "contrastive", "--set", "contrastive.train.batch_size=300",
               "--epochs", "1", "--device", "cpu", "--out", str(out), "--no-progress"])
    assert rc == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: ")]
    assert len(err) == 1 and "train.batch_size = 300" in err[0]
    (folder,) = (out / "tiny").glob("contrastive@*")
    result = json.loads((folder / "seed0.json").read_text())
    assert result["warnings"] == [err[0].removeprefix("warning: ")]
    accuracy = (out / "tiny" / "accuracy.md").read_text()
    assert f"| {folder.name} [settings warned]" in accuracy and "[settings warned]: the run's settings" in accuracy


def test_the_command_stops_before_training_when_k_exceeds_the_training_set(tmp_path, capsys):
    out = tmp_path / "out"
    rc = main(["run", str(write_task(tmp_path, TINY)), "--methods", "swamp", "--set", "swamp.K=300",
               "--set", "swamp.queue=400", "--device", "cpu", "--out", str(out), "--no-progress"])
    assert rc == 2 and "K = 300 prototypes exceed the 240 training pairs" in capsys.readouterr().err
    assert not list(out.rglob("seed*.json"))
