"""The result file has one definition (harness.store.schema.Result): docs/result-schema.json is generated
from it, every committed result validates against it, the runner writes it and the reader fills the
defaults of older files."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import jsonschema
import pytest

from harness.errors import ConfigError
from harness.store import schema

ROOT = Path(__file__).resolve().parent.parent
COMMITTED = sorted(p for p in (ROOT / "results").rglob("seed*.json"))


def test_the_committed_schema_file_is_generated_from_the_definition():
    committed = json.loads((ROOT / "docs" / "result-schema.json").read_text())
    assert committed == schema.json_schema(), "regenerate: python -m harness.store.schema > docs/result-schema.json"


def test_every_committed_result_file_validates():
    assert len(COMMITTED) > 250
    validator = jsonschema.Draft202012Validator(schema.json_schema())
    errors = {str(p.relative_to(ROOT)): [e.message for e in validator.iter_errors(json.loads(p.read_text()))]
              for p in COMMITTED}
    assert {k: v for k, v in errors.items() if v} == {}


def test_the_schema_rejects_what_it_should():
    validator = jsonschema.Draft202012Validator(schema.json_schema())
    good = json.loads(COMMITTED[0].read_text())
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "seed": "zero"})
    assert not validator.is_valid({**good, "unknown_field": 1})
    assert not validator.is_valid({k: v for k, v in good.items() if k != "metrics"})
    assert not validator.is_valid({**good, "schema": 2})


def test_reader_fills_defaults_of_older_files(tmp_path):
    old = {"schema": 1, "task": "t", "task_version": "1", "run_name": "m", "method": "m", "seed": 0,
           "metrics": {"a2b/R@1": 1.0}, "profile": {}, "config": {}, "dataset": {}, "environment": {}, "wall_s": 1.0}
    path = tmp_path / "t" / "m" / "seed0.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(old))
    read = schema.read_result(path)
    assert read["resumed_from_epoch"] == 0 and read["on_nan"] == "stop" and read["history"] == []
    assert read["init"] is None and read["varied"] == {} and read["_path"] == str(path)
    assert "metrics_skipped" not in read and "code" not in read  # optional fields stay absent
    assert schema.load_results(tmp_path) == [read]


def test_reader_refuses_other_files(tmp_path):
    (tmp_path / "seed0.json").write_text(json.dumps({"schema": 99}))
    with pytest.raises(ConfigError, match="not a result file of schema 1"):
        schema.read_result(tmp_path / "seed0.json")
    assert schema.load_results(tmp_path) == []  # passed over when scanning a folder
    (tmp_path / "seed1.json").write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the result file"):
        schema.read_result(tmp_path / "seed1.json")


def test_writer_keeps_field_order_and_leaves_unset_optional_fields_out(tmp_path):
    result = schema.Result(task="t", task_version="1", run_name="m", method="m", seed=3, metrics={}, profile={},
                           config={}, dataset={}, environment={}, wall_s=0.5)
    written = schema.write_result(tmp_path / "seed3.json", result)
    on_disk = json.loads((tmp_path / "seed3.json").read_text())
    names = [f.name for f in dataclasses.fields(schema.Result) if not f.metadata.get("omit_none")]
    assert list(on_disk) == names
    assert written == {**on_disk, "_path": str(tmp_path / "seed3.json")}
    assert jsonschema.Draft202012Validator(schema.json_schema()).is_valid(on_disk)


def test_a_run_writes_a_valid_result_with_its_code_record(tiny_task, tmp_path):
    from harness import cli

    assert cli.main(["run", str(tiny_task), "--methods", "contrastive", "--epochs", "1", "--out", str(tmp_path),
                     "--no-progress"]) == 0
    (path,) = tmp_path.rglob("seed0.json")
    data = json.loads(path.read_text())
    jsonschema.validate(data, schema.json_schema())
    files = data["code"]["files"]
    assert {"baselines/contrastive.py", "harness/encoders/mlp.py", "harness/sources/synthetic_gaussian.py",
            "harness/method.py"} <= set(files)
    assert len(data["code"]["sha256"]) == 64
