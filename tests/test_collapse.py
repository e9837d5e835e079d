"""Collapse detection: the pure detector on known histories, chance levels, the settings the warning
suggests (only ones that exist for the run, are not already set and go together), and end to end: a run
made to collapse warns once, records it and is flagged in the tables; a healthy run is not."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from harness.cli import main
from harness.config.spec import MetricSpec, build
from harness.data.paired import Split
from harness.run.collapse import Chance, chance_level, detect, epoch_signals, hints, plateau_key, warning_line
from tests.conftest import write_task

CHANCE = Chance("a2b/R@1", mean=1.0, std=0.5)  # at chance: <= 2.5


def history(losses, vals, collapsed=25.6):
    return [{"epoch": i + 1, "loss": loss, plateau_key("loss"): collapsed, "val/a2b/R@1": v}
            for i, (loss, v) in enumerate(zip(losses, vals))]


def test_plateau_for_patience_epochs_is_a_collapse():
    h = history([30.0, 25.5, 25.6, 25.4, 25.7, 20.0], [10.0] * 6)
    found = detect(h, CHANCE, patience=4, tolerance=0.02, best_epoch=6)
    assert found["signal"] == "plateau:loss" and (found["from_epoch"], found["to_epoch"]) == (2, 5)
    assert found["at_best_epoch"] is False and found["at_last_epoch"] is False
    assert detect(h, CHANCE, patience=5, tolerance=0.02) is None  # only four epochs in a row
    assert detect(h, CHANCE, patience=4, tolerance=0.001) is None  # 25.5 is 0.4% off
    assert detect(h, CHANCE, patience=0, tolerance=0.02) is None  # checking switched off


def test_validation_at_chance_is_a_collapse():
    h = history([10.0, 9.0, 8.0, 7.0], [2.0, 0.0, 2.5, 1.0])  # the loss falls, retrieval stays at chance
    found = detect(h, CHANCE, patience=3, tolerance=0.02, best_epoch=3)
    assert found["signal"] == "chance" and found["from_epoch"] == 1 and found["to_epoch"] == 4
    assert found["at_best_epoch"] and found["at_last_epoch"]
    assert detect(history([10.0] * 4, [2.0, 3.0, 2.0, 3.0]), CHANCE, patience=3, tolerance=0.02) is None


def test_ranks_are_at_chance_from_above():
    medr = Chance("a2b/MedR", mean=50.0, std=2.0, lower_is_better=True)
    assert medr.holds(49.0) and medr.holds(80.0) and not medr.holds(40.0)


def test_terms_without_a_collapsed_value_are_ignored():
    assert epoch_signals({"loss": 1.0, "swamp": 5.0, "val/a2b/R@1": 50.0}, CHANCE, 0.02) == {}
    assert epoch_signals({"loss": 0.0, plateau_key("loss"): 0.0}, None, 0.02) == {}  # batch of 1: no plateau


def test_chance_level_of_pair_retrieval_is_k_over_n():
    n = 200
    split = Split(torch.zeros(n, 2), torch.zeros(n, 2), labels_a=torch.arange(n) % 4, labels_b=torch.arange(n) % 4)
    spec = MetricSpec(directions=("a2b",), relevance=("pair", "class"), ks=(1, 10))
    assert chance_level(split, spec, "a2b/R@10", draws=20).mean == pytest.approx(100 * 10 / n, abs=1.0)
    assert chance_level(split, spec, "a2b/class_R@1", draws=20).mean == pytest.approx(25.0, abs=3.0)
    assert chance_level(split, spec, "a2b/R@1").lower_is_better is False
    assert chance_level(split, spec, "a2b/MedR").lower_is_better is True


def _low_variance_pairs(root, seed=0):
    """Two views of 4 classes whose features barely vary (about 0.1 ± 0.002, like normalised histograms)."""
    rng = np.random.default_rng(seed)
    views = {"a": rng.normal(size=(4, 16)), "b": rng.normal(size=(4, 8))}
    for split, n in (("train", 256), ("val", 128), ("test", 64)):
        labels = rng.integers(0, 4, n)
        z = np.eye(4)[labels] + 0.3 * rng.normal(size=(n, 4))
        for view, projection in views.items():
            x = 0.1 + 0.002 * z @ projection
            np.save(root / f"{split}_{view}.npy", x.astype(np.float32))
        np.save(root / f"{split}_labels.npy", labels)


def _task(tmp_path, **train):
    data = tmp_path / "data"
    data.mkdir()
    _low_variance_pairs(data)
    return write_task(tmp_path, {
        "name": "lowvar", "version": "test",
        "dataset": {"source": "paired_arrays", "root": str(data)},
        "encoders": {"a": {"type": "mlp", "hidden": [16], "dim": 8}, "b": {"type": "mlp", "hidden": [16], "dim": 8}},
        "metrics": {"directions": ["a2b"], "relevance": ["pair", "class"], "ks": [1, 5]},
        "train": {"batch_size": 32, "epochs": 4, "select": "a2b/class_R@1", "collapse_patience": 3, **train},
        "methods": {"contrastive": {"method": "contrastive", "margin": 0.2}},
    })


def test_a_collapsed_run_warns_records_and_is_flagged(tmp_path, capsys):
    task = _task(tmp_path, lr=1e-9)  # the max-violation hinge cannot leave its plateau
    out = tmp_path / "out"
    assert main(["run", str(task), "--out", str(out), "--no-progress", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    warnings = [line for line in printed.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1
    assert "contrastive seed0: training looks collapsed from epoch 1" in warnings[0]
    assert "max_violation" in warnings[0] and "contrastive.loss=infonce" in warnings[0]
    assert "--set dataset.standardize=true" in warnings[0] and "warmup_epochs" not in warnings[0]  # 4-epoch run
    assert warnings[0].endswith("or another train.lr (now 1e-09).") and "encoders.a.dim" not in warnings[0]
    result = json.loads((out / "lowvar" / "contrastive" / "seed0.json").read_text())
    assert result["collapse"]["signal"] == "plateau:loss" and result["collapse"]["at_best_epoch"]
    assert result["history"][0][plateau_key("loss")] == pytest.approx(2 * 32 * 0.2)
    table = (out / "lowvar" / "accuracy.md").read_text()
    assert "contrastive [collapsed 1/1; warned 1/1]" in table and "collapse_patience" in table


def test_tables_tell_seeds_collapsed_at_the_selected_epoch_from_the_others():
    from harness.report.accuracy import collapse_flag

    runs = [{"collapse": {"at_best_epoch": True}}, {"collapse": {"at_best_epoch": False}}, {"collapse": None}]
    assert collapse_flag(runs) == " [collapsed 1/3; warned 2/3]"
    assert collapse_flag(runs[1:]) == " [warned 1/2]" and collapse_flag(runs[2:]) == ""


def test_a_healthy_run_has_no_flag(tmp_path, capsys):
    task = _task(tmp_path, lr=0.01)
    out = tmp_path / "out"
    assert main(["run", str(task), "--out", str(out), "--no-progress", "--device", "cpu", "--set",
                 "dataset.standardize=true", "--set", "contrastive.loss=infonce"]) == 0
    assert "warning:" not in capsys.readouterr().out
    (result_file,) = (out / "lowvar").rglob("seed0.json")
    assert json.loads(result_file.read_text())["collapse"] is None
    assert "[collapse" not in (out / "lowvar" / "accuracy.md").read_text()


FLAT = {"a": (768,), "b": (768,)}  # two 768-d feature vectors per pair


def _spec(method, dataset=None, dim=128, epochs=100):
    """A task spec with one method named 'm' on MLP encoders of output width ``dim``."""
    return build({
        "name": "hints", "version": "test",
        "dataset": dataset or {"source": "paired_arrays", "root": "data", "standardize": False},
        "encoders": {m: {"type": "mlp", "hidden": [16], "dim": dim} for m in ("a", "b")},
        "train": {"epochs": epochs, "lr": 0.001},
        "methods": {"m": method},
    }, "test")


def test_hints_for_the_max_violation_hinge_offer_infonce_or_a_warm_up_never_both():
    tips = hints(_spec({"method": "contrastive"}), "m", FLAT, 128)
    assert tips == ["--set dataset.standardize=true",
                    "either --set m.loss=infonce or --set m.warmup_epochs=10", "another train.lr (now 0.001)"]
    warmed = hints(_spec({"method": "contrastive", "warmup_epochs": 5}), "m", FLAT, 128)
    assert "either --set m.loss=infonce --set m.warmup_epochs=0 or --set m.warmup_epochs=10" in warmed
    assert not any("warmup" in t for t in hints(_spec({"method": "contrastive"}, epochs=8), "m", FLAT, 128))


def test_hints_leave_out_what_is_already_set_or_absent():
    for loss in ("infonce", "sum"):
        tips = " ".join(hints(_spec({"method": "contrastive", "loss": loss}), "m", FLAT, 128))
        assert "warmup_epochs" not in tips and ("loss=" not in tips) == (loss == "infonce")
    on = _spec({"method": "contrastive"}, {"source": "paired_arrays", "root": "data", "standardize": True})
    assert not any("standardize" in t for t in hints(on, "m", FLAT, 128))
    video = _spec({"method": "contrastive"}, {"source": "synthetic_video"})  # no standardize setting
    assert not any("standardize" in t for t in hints(video, "m", FLAT, 128))
    assert hints(_spec({"method": "mmr"}), "m", FLAT, 128) == ["--set dataset.standardize=true",
                                                              "another train.lr (now 0.001)"]  # margin only


def test_hints_for_swamp_without_its_contrastive_term_turn_the_term_on():
    swamp = {"method": "swamp", "K": 16, "queue": 64, "contrastive_weight": 0.0}
    tips = hints(_spec(swamp), "m", FLAT, 128)
    assert not any(".loss=" in t or ".warmup_epochs=" in t for t in tips)
    assert "--set m.contrastive_weight=1" in tips
    with_term = hints(_spec({**swamp, "contrastive_weight": 1.0}), "m", FLAT, 128)
    assert "either --set m.loss=infonce or --set m.warmup_epochs=10" in with_term
    ranking = hints(_spec({**swamp, "method": "swamp_mmr", "contrastive_weight": 1.0}), "m", FLAT, 128)
    assert not any(".loss=" in t or ".warmup_epochs=" in t for t in ranking)  # swamp_mmr refuses them


def test_hints_name_an_embedding_far_narrower_than_its_inputs():
    spec = _spec({"method": "contrastive"}, dim=5)
    tips = hints(spec, "m", FLAT, 5)
    assert tips[0] == ("--set encoders.a.dim=512 --set encoders.b.dim=512 "
                       "(the embedding has 5 dimensions for inputs of 768)")
    assert hints(spec, "m", {"a": (1000,), "b": (300,)}, 5)[0].startswith("--set encoders.a.dim=300 ")
    assert not any("encoders" in t for t in hints(spec, "m", {"a": (100,), "b": (768,)}, 5))  # 5 x 32 > 100
    assert not any("encoders" in t for t in hints(spec, "m", {"a": (3, 32, 32), "b": (768,)}, 5))  # an image
    found = {"signal": "chance", "description": "validation a2b/R@1 stays at chance", "from_epoch": 1,
             "patience": 10}
    line = warning_line(found, "m seed0", "m", spec, FLAT, 5)
    assert "likely cause: an embedding far narrower than its inputs, or a collapsed" in line
    assert "encoders.a.dim=512" in line and line.endswith(", or another train.lr (now 0.001).")
    assert "likely cause: a collapsed" in warning_line(found, "m seed0", "m", spec, FLAT, 128)
