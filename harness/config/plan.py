"""Which runs a command asks for: every selected method at every point of the sweep grid, for
every seed, each with the folder name and the settings that set it apart from the task file.

A run's folder is the method name plus the settings that differ from the task file
(``swamp@K=200``); a setting overridden to the task's own value names no folder, so a sweep
that passes through the default point reuses the task's own run.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, overload

from harness.config import spec as specs
from harness.config.spec import TaskSpec
from harness.errors import ConfigError, unknown

# Settings that change where data is read from (or cached), never what a run computes.
NEUTRAL = ("dataset.root", "dataset.vocab_cache")


@dataclass(frozen=True)
class Run:
    """One (method, grid point, seed): its resolved task, folder name and what it varies."""

    spec: TaskSpec
    method: str
    run_name: str
    varied: dict[str, Any]
    seed: int
    source: str | None = None  # the result file it was rebuilt from (``harness rerun``), else None


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]; also 'A-B' ranges."""
    seeds: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part.strip()[1:]:
                lo, hi = part.split("-", 1)
                seeds.extend(range(int(lo), int(hi) + 1))
            else:
                seeds.append(int(part))
    except ValueError:
        raise ConfigError(f"--seeds {text!r}: expected comma-separated integers such as 0,1,2 or 0-4") from None
    if not seeds or min(seeds) < 0 or len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {text!r}: expected distinct non-negative integers")
    if max(seeds) >= 2**63:
        raise ConfigError(f"--seeds {text!r}: seeds must be below 2^63 (torch's seed is a 64-bit integer)")
    return seeds


def parse_sweep(text: str) -> list[str]:
    """'swamp.K=200,500' -> ['swamp.K=200', 'swamp.K=500'] (scalar values only)."""
    if "=" not in text:
        raise ConfigError(f"--sweep {text!r}: expected NAME.KEY=V1,V2,..., e.g. swamp.K=200,500,1000")
    key, values = text.split("=", 1)
    if "[" in values or "{" in values:
        raise ConfigError(f"--sweep {text!r}: sweep values must be scalars; use --set for lists")
    items = [v.strip() for v in values.split(",")]
    if not all(items) or len(set(items)) != len(items):
        raise ConfigError(f"--sweep {text!r}: expected distinct non-empty comma-separated values")
    return [f"{key}={v}" for v in items]


def grid(sweeps: list[str]) -> list[list[str]]:
    """The product of the sweeps as lists of overrides ([[]] without sweeps)."""
    axes = [parse_sweep(s) for s in sweeps]
    keys = [s.split("=", 1)[0] for s in sweeps]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--sweep: each key may be swept once, got {', '.join(keys)}")
    return [list(point) for point in itertools.product(*axes)]


def flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings to dotted keys; lists stay values."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten(value, f"{prefix}{key}."))
    return {k.rstrip("."): v for k, v in out.items()}


def setting_name(key: str) -> str:
    """Dotted key of a resolved config as written on the command line: method parameters bare
    ('method.K' -> 'K'), everything else with its section ('train.lr', 'dataset.spread')."""
    return key[len("method."):] if key.startswith("method.") else key


# Settings added after result files had been written, each with the value that reproduces what such an
# older file computed (PAR heads used to split D; everything else kept today's default). A result file
# lacking one of these reads it with that value wherever the setting exists.
LEGACY_DEFAULTS = {"train.precision": "fp32", "method.scorer": "vectorised", "method.time_budget_s": None,
                   "method.heads": "split", "train.select_untrained": False}


def with_legacy_defaults(old: dict[str, Any], current: dict[str, Any]) -> dict[str, Any]:
    """Resolved config ``old`` (from a result file) with :data:`LEGACY_DEFAULTS` filled in for the settings
    that ``current`` (a resolved config or a dataclass's fields) has and ``old`` lacks."""
    flat_old, flat_new = flatten(old), flatten(current)
    filled = {k: v for k, v in LEGACY_DEFAULTS.items() if k in flat_new and k not in flat_old}
    if not filled:
        return old
    out: dict[str, Any] = json.loads(json.dumps(old))
    for key, value in filled.items():
        *parents, leaf = key.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def diff(base: dict[str, Any], config: dict[str, Any], defaults: dict[str, Any] | None = None) -> dict[str, Any]:
    """Settings of resolved ``config`` that differ from resolved ``base`` (neutral ones ignored).

    ``defaults`` (``TaskSpec.resolved(method, params.defaults)``): a setting that ``base`` lacks, because
    it was added to the code after ``base`` was written, counts as having its default value there.
    """
    a, b = flatten(base), flatten(config)
    fallback = flatten(defaults or {})
    a.update({k: fallback[k] for k in b.keys() - a.keys() if k in fallback})
    return {setting_name(k): b.get(k) for k in b.keys() | a.keys() if a.get(k) != b.get(k) and k not in NEUTRAL}


@overload
def resolve_reference(name: str, runs: Iterable[tuple[str, str]]) -> str: ...
@overload
def resolve_reference(name: None, runs: Iterable[tuple[str, str]]) -> None: ...
def resolve_reference(name: str | None, runs: Iterable[tuple[str, str]]) -> str | None:
    """The run a ``--reference`` names: a run folder name (``contrastive@train.epochs=5``) as is, or a method
    name when exactly one run of that method is present. ``runs``: (run name, method) pairs. ConfigError when
    it names no run, or a method of several runs (they are listed)."""
    if name is None:
        return None
    pairs = list(runs)
    names = list(dict.fromkeys(run for run, _ in pairs))
    if name in names:
        return name
    of_method = list(dict.fromkeys(run for run, method in pairs if method == name))
    if len(of_method) == 1:
        return of_method[0]
    if of_method:
        raise ConfigError(f"reference {name!r} is the method of {len(of_method)} runs here ({', '.join(of_method)}); "
                          "name one of them")
    raise unknown("reference run", name, names)


def ordered(varied: dict[str, Any]) -> dict[str, Any]:
    """Method parameters first, then train, dataset, encoders, metrics, init; alphabetical within."""
    rank = {"train": 1, "dataset": 2, "encoders": 3, "metrics": 4, "init": 5}
    return dict(sorted(varied.items(), key=lambda kv: (rank.get(kv[0].split(".")[0], 0), kv[0])))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


MAX_RUN_NAME = 200  # bytes; file systems allow 255 per folder name


def run_name(method: str, varied: dict[str, Any]) -> str:
    """'swamp' or 'swamp@K=200,train.epochs=1': one folder name, so '/' in a value (a path, a metric
    such as '5folds/rsum') is written %2F (and '%' itself %25). A name longer than :data:`MAX_RUN_NAME`
    bytes keeps its first part and ends in '~' and 12 hex digits of its SHA-1, so that it stays one
    valid folder name and distinct settings stay distinct folders (the result file's ``varied`` has them all)."""
    tags = [f"{k}={_text(v).replace('%', '%25').replace('/', '%2F')}" for k, v in ordered(varied).items()]
    name = f"{method}@{','.join(tags)}" if tags else method
    encoded = name.encode()
    if len(encoded) <= MAX_RUN_NAME:
        return name
    head = encoded[:MAX_RUN_NAME - 13].decode(errors="ignore")
    return f"{head}~{hashlib.sha1(encoded).hexdigest()[:12]}"


def plan(task_path: str | Path, overrides: list[str], sweeps: list[str], methods: list[str], seeds: list[int],
         epochs: int | None = None, init_label: str | None = None) -> list[Run]:
    """Every run the command asks for, in order (grid point, method, seed); each distinct folder once. A method of
    ``methods`` that the task does not declare but that is registered (``identity``, ``cca``) runs with its
    defaults under its own name (:func:`harness.config.spec.undeclared`)."""
    neutral = [o for o in overrides if o.split("=", 1)[0] in NEUTRAL]
    added = tuple(specs.undeclared(specs.load_task(task_path, neutral), methods))
    base = specs.load_task(task_path, neutral, added)
    runs: list[Run] = []
    seen: set[tuple[str, int]] = set()
    for point in grid(sweeps):
        spec = specs.load_task(task_path, overrides + point, added)
        if epochs is not None:
            spec = specs.with_epochs(spec, epochs)
        for name in specs.select_methods(spec, methods):
            present = flatten(spec.resolved(name))
            # a component given another type (--set encoders.a.type=mlp) drops the old type's keys: they are not
            # settings of this run, so they do not name its folder
            varied = {k: v for k, v in diff(base.resolved(name), spec.resolved(name)).items()
                      if v is not None or k in present or f"method.{k}" in present}
            if init_label is not None:
                varied["init"] = init_label
            varied = ordered(varied)
            folder = run_name(name, varied)
            for seed in seeds:
                if (folder, seed) not in seen:
                    seen.add((folder, seed))
                    runs.append(Run(spec, name, folder, varied, seed))
    return runs


def from_record(record: dict[str, Any], where: str, overrides: list[str] | None = None) -> Run:
    """The run a result file records, rebuilt from its own configuration rather than from a task file: the
    same resolved settings, folder name, varied settings and seed (``harness rerun``). ``overrides``
    (NAME.KEY=VALUE, e.g. ``dataset.root=...``) apply on top, named after the method as on the command line.
    A run that started from a checkpoint (``init``) needs it again: the caller passes it as ``RunOptions.init``.
    Settings added to the code since the file was written take :data:`LEGACY_DEFAULTS`' value, or today's
    default. ConfigError, naming ``where``, when the record is not a finished run's or its settings are no
    longer valid."""
    config = record.get("config")
    if not isinstance(config, dict) or not isinstance(config.get("method"), dict) or "seed" not in record:
        raise ConfigError(f"{where}: not a run's result file (no config, method or seed recorded); "
                          "give the seed<k>.json files a run wrote")
    if config["method"].get("method") == "ensemble":
        names = [s.get("run_name", "?") if isinstance(s, dict) else str(s) for s in record.get("sources") or []]
        raise ConfigError(f"{where}: an ensemble of the runs {' and '.join(names)}, "
                          "not a trained run; re-run those and give their files to `harness ensemble`")
    name = str(config["method"].get("name", ""))
    spec = _spec_of(config, record, where, overrides or [])
    spec = _spec_of(with_legacy_defaults(config, spec.resolved(name)), record, where, overrides or [])
    return Run(spec, name, str(record.get("run_name") or run_name(name, record.get("varied") or {})),
               dict(record.get("varied") or {}), int(record["seed"]), source=where)


def _spec_of(config: dict[str, Any], record: dict[str, Any], where: str, overrides: list[str]) -> TaskSpec:
    """A one-method task spec whose ``resolved(method)`` is ``config``; the record's overrides are kept."""
    method = dict(config["method"])
    name = str(method.pop("name", ""))
    raw: dict[str, Any] = {
        "name": config.get("task"), "version": config.get("version", record.get("task_version", "")),
        "description": f"rebuilt from {where}", "dataset": config.get("dataset"),
        "encoders": config.get("encoders"), "metrics": config.get("metrics"), "test": config.get("test"),
        "train": config.get("train"),
        "methods": {name: method},
    }
    if record.get("reference"):
        raw["reference"] = record["reference"]
    try:
        spec = specs.build(json.loads(json.dumps(raw)), where)
    except ConfigError as err:
        raise ConfigError(f"{err}; the result file's settings are not valid for today's code, so it cannot "
                          "be re-run as recorded (re-run its task file with `harness run` instead)") from None
    if overrides:
        if "dataset.root" in {o.split("=", 1)[0] for o in overrides} and "root" not in (raw["dataset"] or {}):
            raise ConfigError(f"{where}: --data-root: its dataset (source {spec.dataset.kind!r}) reads no folder; "
                              "leave --data-root out for it")
        spec = specs.build(specs.apply_overrides(json.loads(json.dumps(raw)), overrides), where)
    return dataclasses.replace(spec, overrides=tuple(record.get("overrides") or ()) + tuple(overrides))
