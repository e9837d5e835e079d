"""Sweep expansion, run folder names and the settings each run varies."""
from __future__ import annotations

import pytest

from harness.config import plan
from harness.errors import ConfigError


def test_parse_sweep_and_grid_product():
    assert plan.parse_sweep("swamp.K=200,500") == ["swamp.K=200", "swamp.K=500"]
    points = plan.grid(["swamp.K=200,500", "swamp.queue=0,128,256"])
    assert len(points) == 6
    assert points[0] == ["swamp.K=200", "swamp.queue=0"] and points[-1] == ["swamp.K=500", "swamp.queue=256"]
    assert plan.grid([]) == [[]]


@pytest.mark.parametrize("sweeps, message", [
    (["swamp.K"], "expected NAME.KEY=V1,V2"),
    (["swamp.K=1,,2"], "distinct non-empty"),
    (["swamp.K=1,1"], "distinct non-empty"),
    (["encoders.a.hidden=[1],[2]"], "scalars"),
    (["swamp.K=1,2", "swamp.K=3"], "swept once"),
])
def test_bad_sweeps_name_the_problem(sweeps, message):
    with pytest.raises(ConfigError, match=message):
        plan.grid(sweeps)


def test_flatten_and_diff_name_settings_as_on_the_command_line():
    base = {"train": {"lr": 0.001, "epochs": 10}, "method": {"K": 1000, "hard": False}, "dataset": {"root": "a"}}
    other = {"train": {"lr": 0.01, "epochs": 10}, "method": {"K": 200, "hard": True}, "dataset": {"root": "b"}}
    assert plan.flatten(base)["train.lr"] == 0.001
    assert plan.diff(base, other) == {"train.lr": 0.01, "K": 200, "hard": True}  # the data root is neutral
    assert plan.diff(base, base) == {}
    assert plan.run_name("swamp", plan.ordered({"train.lr": 0.01, "K": 200, "hard": True})) == \
        "swamp@K=200,hard=true,train.lr=0.01"


def test_plan_expands_grid_methods_and_seeds(tiny_task):
    runs = plan.plan(tiny_task, [], ["swamp.K=8,16,32"], ["contrastive", "swamp"], [0, 1])
    names = [(r.run_name, r.seed) for r in runs]
    # the task's own K (16) names no folder; contrastive is untouched by the sweep and runs once per seed
    assert names == [("contrastive", 0), ("contrastive", 1), ("swamp@K=8", 0), ("swamp@K=8", 1),
                     ("swamp", 0), ("swamp", 1), ("swamp@K=32", 0), ("swamp@K=32", 1)]
    by_name = {r.run_name: r for r in runs}
    assert by_name["swamp@K=8"].varied == {"K": 8}
    assert by_name["swamp@K=8"].spec.methods["swamp"].params.K == 8
    assert by_name["swamp"].varied == {} and by_name["swamp"].spec.methods["swamp"].params.K == 16


def test_plan_records_epochs_sets_and_init(tiny_task):
    runs = plan.plan(tiny_task, ["train.lr=0.01", "swamp.K=16"], [], ["swamp"], [0], epochs=1,
                     init_label="contrastive")
    # K=16 is the task's own value and names nothing
    assert [r.run_name for r in runs] == ["swamp@train.epochs=1,train.lr=0.01,init=contrastive"]
    assert runs[0].varied == {"train.epochs": 1, "train.lr": 0.01, "init": "contrastive"}


def test_plan_rejects_unknown_names_from_sweeps(tiny_task):
    with pytest.raises(ConfigError, match="did you mean"):
        plan.plan(tiny_task, [], ["swmp.K=8,16"], ["swamp"], [0])


def test_older_result_files_read_added_settings_with_their_old_values():
    old = {"train": {"lr": 0.1}, "method": {"method": "swamp_par", "H": 2}}
    now = {"train": {"lr": 0.1, "precision": "fp32"}, "method": {"method": "swamp_par", "H": 2, "heads": "concat"}}
    filled = plan.with_legacy_defaults(old, now)
    assert filled == {"train": {"lr": 0.1, "precision": "fp32"}, "method": {"method": "swamp_par", "H": 2,
                                                                            "heads": "split"}}
    assert old["method"] == {"method": "swamp_par", "H": 2}  # not modified in place
    assert plan.diff(filled, now) == {"heads": "concat"}  # PAR heads used to split D: a different model
    contrastive = {"method": {"method": "contrastive", "margin": 0.1}}
    assert plan.with_legacy_defaults(contrastive, contrastive) is contrastive  # nothing it lacks


def test_settings_added_after_a_result_count_as_their_defaults(tiny_task):
    from harness.config import params as P
    from harness.config.spec import load_task

    spec = load_task(tiny_task)
    current, defaults = spec.resolved("contrastive"), spec.resolved("contrastive", P.defaults)
    older = {**current, "method": {k: v for k, v in current["method"].items() if k not in ("loss", "temperature")},
             "train": {k: v for k, v in current["train"].items() if not k.startswith("collapse_")}}
    assert plan.diff(older, current, defaults) == {}
    assert set(plan.diff(older, current)) == {"loss", "temperature", "train.collapse_patience",
                                              "train.collapse_tolerance"}  # without defaults: all differ
    changed = load_task(tiny_task, ["contrastive.loss=sum"]).resolved("contrastive")
    assert plan.diff(older, changed, defaults) == {"loss": "sum"}  # a non-default value still differs


def test_run_names_are_single_folder_names():
    name = plan.run_name("scan", {"train.select": "5folds/rsum", "dataset.word_vectors": "/data/w2v%.bin"})
    assert "/" not in name
    assert name == "scan@train.select=5folds%2Frsum,dataset.word_vectors=%2Fdata%2Fw2v%25.bin"


def test_long_run_names_stay_one_valid_distinct_folder_name(tmp_path):
    varied = ({f"encoders.{side}.widths": [4, 8] for side in "ab"}
              | {f"dataset.setting_{i}": "x" * 20 for i in range(12)})
    name = plan.run_name("doodle2search_swamp", varied)
    other = plan.run_name("doodle2search_swamp", {**varied, "encoders.b.widths": [4, 16]})  # past the cut
    assert len(name.encode()) == plan.MAX_RUN_NAME and name != other and name[:-12] == other[:-12]
    assert name.startswith("doodle2search_swamp@dataset.setting_0=") and "/" not in name
    (tmp_path / name / ".seed0.json.tmp").parent.mkdir()  # the file system takes it
    assert plan.run_name("swamp", {"K": 8}) == "swamp@K=8"  # short names unchanged
