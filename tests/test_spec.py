"""Task files: every shipped task loads; bad keys, types, ranges and names fail clearly."""
from __future__ import annotations

import pytest

from harness.config.spec import load_task, parse_override, select_methods, with_epochs
from harness.errors import ConfigError
from tests.conftest import TASKS, TINY, write_task


@pytest.mark.parametrize("path", sorted(TASKS.glob("*.yaml")), ids=lambda p: p.name)
def test_every_task_file_loads(path):
    spec = load_task(path)
    assert spec.methods and spec.version
    for name in spec.methods:
        assert spec.resolved(name)["method"]["name"] == name


def test_base_inheritance_merges_mappings(tiny_task):
    spec = load_task(tiny_task)
    assert spec.dataset.params.pairs_per_class == 20
    assert spec.dataset.params.n_classes == 20  # inherited from tasks/synthetic.yaml
    assert spec.methods["swamp"].params.K == 16
    assert spec.methods["swamp"].train.batch_size == 32


def test_set_override_is_typed(tiny_task):
    spec = load_task(tiny_task, ["swamp.K=8", "train.lr=1e-4", "swamp.hard=true"])
    assert spec.methods["swamp"].params.K == 8
    assert spec.methods["swamp"].params.hard is True
    assert spec.methods["contrastive"].train.lr == pytest.approx(1e-4)
    with pytest.raises(ConfigError, match=r"methods.swamp.K must be a number or one of auto, got 'many'"):
        load_task(tiny_task, ["swamp.K=many"])
    with pytest.raises(ConfigError, match="must be of type int"):
        load_task(tiny_task, ["swamp.K=8.5"])


@pytest.mark.parametrize("override, message", [
    ("swamp.Kk=8", r"unknown key 'Kk'.*did you mean 'K'"),
    ("swap.K=8", r"unknown method 'swap'.*did you mean 'swamp'"),
    ("swamp.queue=10", r"queue \(10\) must exceed K \(16\)"),
    ("swamp.tau=0", "tau and eta must be > 0"),
    ("train.optimizer=adagrad", "unknown optimizer 'adagrad'"),
    ("train.select=a2b/R@2", r"unknown selection metric 'a2b/R@2'.*did you mean 'a2b/R@"),
    ("dataset.spread=-1", "spread must be > 0"),
    ("noequals", "expected NAME.KEY=VALUE"),
])
def test_bad_values_fail_at_load_time(tiny_task, override, message):
    with pytest.raises(ConfigError, match=message):
        load_task(tiny_task, [override])


def test_queue_check_can_be_lifted_for_the_ablation(tiny_task):
    spec = load_task(tiny_task, ["swamp.queue=0", "swamp.strict_queue=false"])
    assert spec.methods["swamp"].params.queue == 0


def test_bad_files(tmp_path):
    (tmp_path / "broken.yaml").write_text("name: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_task(tmp_path / "broken.yaml")
    with pytest.raises(ConfigError, match="does not exist"):
        load_task(tmp_path / "missing.yaml")
    bad = write_task(tmp_path, {**TINY, "metrcs": {}}, "typo.yaml")
    with pytest.raises(ConfigError, match=r"unknown top-level key 'metrcs'.*did you mean 'metrics'"):
        load_task(bad)
    bad = write_task(tmp_path, {**TINY, "dataset": {"source": "synthetic_gausian"}}, "src.yaml")
    with pytest.raises(ConfigError, match=r"unknown data source 'synthetic_gausian'.*did you mean"):
        load_task(bad)
    bad = write_task(tmp_path, {**TINY, "methods": {"x": {"method": "swamp", "lambda": "big"}}}, "lam.yaml")
    with pytest.raises(ConfigError, match=r"methods.x.lambda must be of type float"):
        load_task(bad)


def test_select_methods_and_epochs(tiny_task):
    spec = load_task(tiny_task)
    assert select_methods(spec, []) == list(spec.methods)
    with pytest.raises(ConfigError, match=r"unknown method 'contrast'.*did you mean 'contrastive'"):
        select_methods(spec, ["contrast"])
    assert all(m.train.epochs == 7 for m in with_epochs(spec, 7).methods.values())
    with pytest.raises(ConfigError, match="--epochs"):
        with_epochs(spec, 0)


def test_parse_override_routes_names():
    assert parse_override("swamp.K=5") == (["methods", "swamp", "K"], 5)
    assert parse_override("train.lr=1e-3") == (["train", "lr"], 1e-3)
    assert parse_override("dataset.root=/data/x") == (["dataset", "root"], "/data/x")


def test_a_spec_names_its_metrics_and_their_direction_from_the_registry():
    from harness.config import metrics, spec

    assert spec.lower_is_better is metrics.lower_is_better and spec.fold_prefix(5) == "5folds/"
    names = spec.MetricSpec(directions=("i2t", "t2i"), ks=(1,), rsum=True, folds=(1, 5)).names()
    assert names == ["i2t/R@1", "i2t/MedR", "i2t/MeanR", "t2i/R@1", "t2i/MedR", "t2i/MeanR", "rsum",
                     "5folds/i2t/R@1", "5folds/i2t/MedR", "5folds/i2t/MeanR", "5folds/t2i/R@1", "5folds/t2i/MedR",
                     "5folds/t2i/MeanR", "5folds/rsum"]
    assert [spec.lower_is_better(n) for n in names[:3]] == [False, True, True]


def test_a_selection_metric_the_spec_does_not_produce_is_refused(tiny_task):
    with pytest.raises(ConfigError, match="select"):
        load_task(tiny_task, ["train.select=a2b/R@3"])
