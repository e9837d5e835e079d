"""The result file: one self-describing JSON per (task, run, seed), its fields defined once here.

:class:`Result` lists every field with its type, default and meaning. :func:`write_result` is the only
writer (the runner and ``harness ensemble`` build a :class:`Result`); :func:`read_result` the only
reader: it fills the defaults of fields that older files lack, so no reader repeats a default.
``docs/result-schema.json`` is :func:`json_schema` written out (``python -m harness.store.schema``), and
every committed result validates against it.
"""
from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import ConfigError
from harness.store.io import write_json_atomic

SCHEMA = 1  # bump when a field changes meaning; new optional fields keep the version


def _doc(text: str, omit_none: bool = False) -> dict[str, Any]:
    return {"doc": text, "omit_none": omit_none}


@dataclass(kw_only=True)
class Result:
    """One run's result file, in the order its fields are written."""

    schema: int = field(default=SCHEMA, metadata=_doc("version of this layout"))
    task: str = field(metadata=_doc("task name (the task file's `name`)"))
    task_version: str = field(metadata=_doc("the task file's `version`; bumped when data or protocol change"))
    run_name: str = field(metadata=_doc("folder of the run under the task: the method and the settings in which "
                                        "it differs from the task file (`swamp@K=500`)"))
    method: str = field(metadata=_doc("the method's name in the task file"))
    seed: int = field(metadata=_doc("seed of the run"))
    varied: dict[str, Any] = field(default_factory=dict, metadata=_doc("settings that differ from the task file"))
    init: str | None = field(default=None, metadata=_doc("checkpoint the encoders started from (--init)"))
    metrics: dict[str, float] = field(metadata=_doc("test metrics (%, ranks), keyed by direction and protocol"))
    training: str | None = field(default=None, metadata=_doc("'gradient' or 'closed_form'; none for an ensemble"))
    best_epoch: int | None = field(default=None, metadata=_doc("the epoch kept (best validation selection metric; "
                                                                "0: the untrained model)"))
    val_at_best: dict[str, float] | None = field(default=None, metadata=_doc("validation metrics at best_epoch"))
    untrained: dict[str, float] | None = field(default=None, metadata=_doc(
        "validation metrics of the untrained model, epoch 0 (train.select_untrained)", omit_none=True))
    floor: dict[str, Any] | None = field(default=None, metadata=_doc(
        "the no-training floor of the selection metric on validation (harness.run.floor): kind (identity or "
        "untrained), metric, value, the run's selected value, and whether it fell below", omit_none=True))
    auto: dict[str, Any] | None = field(default=None, metadata=_doc(
        "the values the `auto` settings took on this data, by config key (encoders.a.dim, method.K)",
        omit_none=True))
    collapse: dict[str, Any] | None = field(default=None, metadata=_doc("collapse record (harness.run.collapse)"))
    warnings: list[str] = field(default_factory=list, metadata=_doc("settings that do not fit the data, one line "
                                                                    "each (harness.run.preflight.fit_warnings)"))
    history: list[dict[str, float]] = field(default_factory=list, metadata=_doc("per-epoch loss terms and "
                                                                                "validation metrics"))
    profile: dict[str, Any] = field(metadata=_doc("timings (s) and peak memory (MiB) by phase, and under "
                                                  "`contention` how busy the machine was in each phase "
                                                  "(harness.run.contention: own and others' CPU, busy processes, "
                                                  "load, and whether the phase was contended)"))
    resumed_from_epoch: int = field(default=0, metadata=_doc("epochs done before an interruption (0: none)"))
    on_nan: str = field(default="stop", metadata=_doc("what a non-finite loss did: stop the run or skip the step"))
    skipped_steps: list[dict[str, Any]] = field(default_factory=list, metadata=_doc("steps skipped by --on-nan skip"))
    distributed: dict[str, Any] | None = field(default=None, metadata=_doc("world size, backend, batch per process"))
    config: dict[str, Any] = field(metadata=_doc("the resolved configuration: dataset, encoders, method, train, "
                                                 "metrics; enough to rebuild the model"))
    overrides: list[str] = field(default_factory=list, metadata=_doc("the --set values of the command"))
    reference: dict[str, Any] | None = field(default=None, metadata=_doc("the task file's published reference rows"))
    dataset: dict[str, Any] = field(metadata=_doc("what the data source reported: sizes, origin, files"))
    environment: dict[str, Any] = field(metadata=_doc("hardware, versions, git commit and date"))
    checkpoint: str | None = field(default=None, metadata=_doc("best-epoch checkpoint beside the file"))
    ranks: str | None = field(default=None, metadata=_doc("per-query test ranks (.npz) beside the file"))
    wall_s: float = field(metadata=_doc("wall-clock of the whole run, s"))
    metrics_skipped: dict[str, str] | None = field(default=None, metadata=_doc(
        "protocols without metrics (a test time budget stopped the scoring) and why", omit_none=True))
    code: dict[str, Any] | None = field(default=None, metadata=_doc(
        "SHA-256 of the source files of the method, encoders and data source", omit_none=True))
    executed: dict[str, Any] | None = field(default=None, metadata=_doc(
        "what the run executed (harness.store.executed): SHA-256 and normalized hash of every project and plugin "
        "file it loaded, the kernels' paths (Sinkhorn implementation, native build, device, threads, precision), "
        "torch and numpy versions, a fingerprint of the data and the data files read, the commit and whether the "
        "files equal it (clean), and the recording's cost", omit_none=True))
    sources: list[dict[str, Any]] | None = field(default=None, metadata=_doc(
        "the runs an ensemble combines", omit_none=True))
    tuning: dict[str, Any] | None = field(default=None, metadata=_doc(
        "the study that chose this run's settings (harness tune, harness/tune/): study name and storage, the "
        "split and metric searched, trials by state, the search space, the best settings and value, the task's own "
        "settings' value (the first trial), each trial's value in order, parameter importances, minutes"))
    search: dict[str, Any] | None = field(default=None, metadata=_doc(
        "approximate nearest-neighbour search of the whole test split beside the exact ranking (test.search, "
        "harness.run.search): type and settings, and per direction the index's build and query seconds, the exact "
        "top-k seconds of the same queries, the index's MiB, k-NN recall and R@k from the approximate and the "
        "exact lists with what was lost", omit_none=True))

    def to_dict(self) -> dict[str, Any]:
        """The file's JSON object: every field in order, optional ones left out when unset."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if not (f.metadata.get("omit_none") and getattr(self, f.name) is None)}


FIELDS = {f.name: f for f in dataclasses.fields(Result)}


def result_path(out: Path, task: str, run_name: str, seed: int) -> Path:
    """results/<task>/<run>/seed<k>.json."""
    return out / task / run_name / f"seed{seed}.json"


def write_result(path: Path, result: Result) -> dict[str, Any]:
    """Write ``result`` atomically to ``path``; return it as :func:`read_result` would (with ``_path``)."""
    payload = result.to_dict()
    write_json_atomic(path, payload)
    return {**payload, "_path": str(path)}


def with_defaults(data: dict[str, Any]) -> dict[str, Any]:
    """A result object with the fields that it lacks (older files) set to their defaults; other keys kept."""
    filled = dict(data)
    for name, f in FIELDS.items():
        if name not in filled and not f.metadata.get("omit_none"):
            if f.default is not dataclasses.MISSING:
                filled[name] = f.default
            elif f.default_factory is not dataclasses.MISSING:
                filled[name] = f.default_factory()
    return filled


def _load(path: Path) -> dict[str, Any] | None:
    """The JSON object at ``path`` when it is a result file of this schema, else None."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"cannot read the result file {path} ({err})") from None
    return data if isinstance(data, dict) and data.get("schema") == SCHEMA else None


def read_result(path: Path) -> dict[str, Any]:
    """The result file at ``path`` with defaults filled (see :func:`with_defaults`) and ``_path`` set;
    ConfigError when it cannot be read or is not a result file of this layout."""
    data = _load(path)
    if data is None:
        raise ConfigError(f"{path} is not a result file of schema {SCHEMA}; is it a result of `python -m harness run`?")
    return {**with_defaults(data), "_path": str(path)}


def load_results(folder: Path) -> list[dict[str, Any]]:
    """Every result file under ``folder`` (recursively; other JSON files are passed over), defaults filled,
    sorted by task, run, then seed."""
    results = []
    for path in sorted(Path(folder).rglob("seed*.json")):
        data = _load(path)
        if data is not None:
            results.append({**with_defaults(data), "_path": str(path)})
    return sorted(results, key=lambda r: (r["task"], r["run_name"], r["seed"]))


def _json_type(hint: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [_json_type(a) for a in args if a is not type(None)]
        kinds = [i["type"] for i in inner] + (["null"] if type(None) in args else [])
        return {"type": kinds[0] if len(kinds) == 1 else kinds}
    base = origin or hint
    names = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array"}
    if base not in names:
        return {}
    return {"type": names[base]}


def json_schema() -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) of :class:`Result`; fields without a default are required."""
    hints = typing.get_type_hints(Result)
    properties, required = {}, []
    for name, f in FIELDS.items():
        properties[name] = {**_json_type(hints[name]), "description": f.metadata["doc"]}
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(name)
    properties["schema"]["const"] = SCHEMA
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": "SwAMP Bench result file",
            "description": (Result.__doc__ or "").strip() + " Generated from harness/store/schema.py by "
                           "`python -m harness.store.schema`.",
            "type": "object", "properties": properties, "required": required, "additionalProperties": False}


if __name__ == "__main__":  # python -m harness.store.schema > docs/result-schema.json
    print(json.dumps(json_schema(), indent=2))
