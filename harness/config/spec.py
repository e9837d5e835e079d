"""Task files: YAML → a small frozen :class:`TaskSpec`, validated once at load time.

A task may name a ``base:`` file (relative to itself) whose mapping it extends: nested
mappings merge key by key, anything else is replaced. ``--set NAME.KEY=VALUE``
overrides go through the same validation as the file itself.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import yaml

from harness.config import checks, launch
from harness.config import metrics as M
from harness.config import params as P
from harness.config.metrics import fold_prefix as fold_prefix  # the names' folds prefix, read from here too
from harness.config.metrics import lower_is_better as lower_is_better  # the registry's, for every reader
from harness.config.params import bounded, search
from harness.config.registry import ENCODERS, METHODS, SOURCES, Registry
from harness.errors import ConfigError, did_you_mean, unknown
from harness.ops.precision import PRECISIONS

TOP_KEYS = ("name", "version", "description", "base", "dataset", "encoders", "metrics", "train", "test", "methods",
            "reference", "launcher", "tune", "leaderboard")  # tune, leaderboard: read by harness tune and harness
# leaderboard (harness/tune/space.py, harness/tune/reference_sets.py), by no run
MODALITIES = ("a", "b")


@dataclass(frozen=True)
class TrainSpec:
    batch_size: int = 128
    optimizer: str = "adam"
    lr: float = bounded(1e-3, tune=search(1e-4, 1e-2, log=True))
    weight_decay: float = bounded(0.0, tune=search(0.0, 1e-3))
    epochs: int = bounded(100, tune=search(5, 200, log=True, on=False))  # searched when a task's tune: turns it on
    lr_step: int | None = None
    lr_gamma: float = 0.1
    grad_clip: float | None = None
    select: str = "a2b/R@1"
    eval_batch_size: int = 1024
    precision: str = "fp32"  # fp32 | tf32 | bf16 (harness/ops/precision.py)
    collapse_patience: int = 10  # epochs a collapse signal must hold before the warning (0: never check)
    collapse_tolerance: float = 0.02  # relative distance to a loss's collapsed value that counts as on it
    nesterov: bool = False  # optimizer sgd: Nesterov momentum (Doodle2Search's optimiser)
    early_stop_patience: int | None = None  # stop once this many epochs in a row bring no better `select`
    drop_last: bool = False  # leave out each epoch's last, partial batch (HowTo100M's loader)
    # the untrained model (epoch 0) is validated too and kept when no epoch beats it: training that only hurts
    # reports the start it could not improve on
    select_untrained: bool = True

    def check(self, where: str) -> None:
        P.require(self.batch_size >= 2, where,
                  f"batch_size must be >= 2 (the hinge needs negatives), got {self.batch_size}")
        if self.optimizer not in OPTIMIZERS:
            raise unknown("optimizer", self.optimizer, OPTIMIZERS, where)
        P.require(self.lr > 0, where, f"lr must be > 0, got {self.lr}")
        P.require(self.epochs >= 1, where, f"epochs must be >= 1, got {self.epochs}")
        P.require(self.weight_decay >= 0, where, f"weight_decay must be >= 0, got {self.weight_decay}")
        P.require(self.lr_step is None or self.lr_step >= 1, where, "lr_step must be >= 1 epoch")
        P.require(0 < self.lr_gamma <= 1, where, f"lr_gamma must lie in (0, 1], got {self.lr_gamma}")
        P.require(self.grad_clip is None or self.grad_clip > 0, where, "grad_clip must be > 0")
        P.require(self.eval_batch_size >= 1, where, f"eval_batch_size must be >= 1, got {self.eval_batch_size}")
        if self.precision not in PRECISIONS:
            raise unknown("precision", self.precision, PRECISIONS, where)
        P.require(self.collapse_patience >= 0, where,
                  f"collapse_patience must be >= 0 epochs (0: no check), got {self.collapse_patience}")
        P.require(0 <= self.collapse_tolerance < 1, where,
                  f"collapse_tolerance must be in [0, 1), got {self.collapse_tolerance}")
        P.require(not self.nesterov or self.optimizer == "sgd", where,
                  f"nesterov applies to optimizer sgd only (got optimizer {self.optimizer}); set nesterov: false")
        P.require(self.early_stop_patience is None or self.early_stop_patience >= 1, where,
                  "early_stop_patience must be >= 1 epoch (or null: train every epoch), "
                  f"got {self.early_stop_patience}")


OPTIMIZERS = ("adam", "adamw", "sgd")


# Retrieval directions: a2b ranks b items for each a item; i2t/t2i are the image–text names
# of a2b/b2a (modality a holds images, b captions), v2t/t2v the text–video names (a holds
# videos, b captions), s2p/p2s the sketch–photo names (a holds sketches, b photos). The value
# says whether the query axis is the score matrix's second one.
DIRECTIONS = {"a2b": False, "b2a": True, "i2t": False, "t2i": True, "v2t": False, "t2v": True, "s2p": False,
              "p2s": True}


@dataclass(frozen=True)
class MetricSpec:
    directions: tuple[str, ...] = ("a2b", "b2a")
    relevance: tuple[str, ...] = ("pair",)
    ks: tuple[int, ...] = (1, 5, 10)
    rsum: bool = False
    folds: tuple[int, ...] = (1,)
    map: bool = False  # mean average precision over the whole gallery ('mAP')
    map_at: tuple[int, ...] = ()  # mAP of the top k ('mAP@k'), e.g. (200,)
    precision_at: tuple[int, ...] = ()  # share of the top k that is relevant ('P@k')

    def check(self, where: str) -> None:
        for d in self.directions:
            if d not in DIRECTIONS:
                raise unknown("direction", d, DIRECTIONS, where)
        for r in self.relevance:
            if r not in ("pair", "class"):
                raise unknown("relevance", r, ("pair", "class"), where)
        P.require(len(self.ks) > 0 and min(self.ks) >= 1, where, f"ks must be positive integers, got {list(self.ks)}")
        P.require(len(self.folds) > 0 and min(self.folds) >= 1 and len(set(self.folds)) == len(self.folds),
                  where, f"folds {list(self.folds)} must be distinct positive fold counts (1 = the whole split)")
        P.require(all(k >= 1 for k in (*self.map_at, *self.precision_at)), where,
                  "map_at and precision_at must be positive integers")

    def names(self) -> list[str]:
        """Every metric name this spec produces, e.g. 'a2b/R@1', 'b2a/class_MedR', '5folds/rsum'."""
        stats, summed = M.statistics(self), M.summed(self)  # the metric registry, in its declaration order
        return [name for n in self.folds for name in
                [M.metric_name(s, d, r, n) for d in self.directions for r in self.relevance for s in stats]
                + [M.metric_name(s, folds=n) for s in summed]]


    def precision_stats(self) -> list[str]:
        """Names of the requested precision statistics: 'mAP', 'mAP@k', 'P@k'."""
        return [name for m in M.METRICS if m.family in (M.MAP, M.PRECISION) for name in m.names(self)]


# How the test retrieval ranks (``test.path``): ``stream`` scores blocks of a items × b items and keeps per query only
# what the metrics need (harness/ops/streaming.py); ``full`` forms the whole score matrix; ``auto`` streams for every
# method that can score in blocks (Method.scores_in_blocks) and forms the matrix for the others.
TEST_PATHS = ("auto", "stream", "full")
SEARCH_TYPES = ("hnsw", "ivf_flat")


@dataclass(frozen=True)
class HNSWSearch:
    """faiss ``IndexHNSWFlat``: graph degree M, build beam ef_construction, query beam ef_search."""

    type: str = "hnsw"
    M: int = bounded(32, ge=2, le=4096)
    ef_construction: int = bounded(40, ge=1)
    ef_search: int = bounded(64, ge=1)
    k: int = bounded(10, ge=1)  # neighbours returned per query


@dataclass(frozen=True)
class IVFFlatSearch:
    """faiss ``IndexIVFFlat``: nlist k-means cells, nprobe cells visited per query."""

    type: str = "ivf_flat"
    nlist: int = bounded(100, ge=1)
    nprobe: int = bounded(8, ge=1)
    k: int = bounded(10, ge=1)

    def check(self, where: str) -> None:
        P.require(self.nprobe <= self.nlist, where,
                  f"nprobe ({self.nprobe}) cannot exceed nlist ({self.nlist}); lower nprobe or raise nlist")


SEARCH_SPECS = {"hnsw": HNSWSearch, "ivf_flat": IVFFlatSearch}
FAISS_HINT = "pip install faiss-cpu (or the project's extra: pip install -e '.[faiss]')"


def faiss_available() -> bool:
    """Whether the optional faiss package can be imported here (checked without importing it)."""
    import importlib.util
    return importlib.util.find_spec("faiss") is not None


def parse_search(raw: Any, where: str) -> HNSWSearch | IVFFlatSearch:
    """The ``test.search`` mapping as its typed settings; ConfigError naming the bad key or value."""
    if not isinstance(raw, Mapping) or "type" not in raw:
        raise ConfigError(f"{where} must be a mapping with a 'type' key naming one of: {', '.join(SEARCH_TYPES)} "
                          f"(e.g. {{type: hnsw, M: 32, ef_search: 64}}), got {raw!r}")
    if raw["type"] not in SEARCH_SPECS:
        raise unknown("search type", str(raw["type"]), SEARCH_TYPES, where)
    return P.parse(SEARCH_SPECS[raw["type"]], raw, where)


@dataclass(frozen=True)
class TestSpec:
    """The test retrieval's settings (``test:``): how it ranks, its block sizes and an optional approximate search."""

    __test__ = False  # not a pytest test class

    path: str = "auto"
    block_a: int = bounded(2048, ge=1, lt=2**24)  # a items per block of the score matrix (both paths)
    block_b: int = bounded(16384, ge=1, lt=2**24)  # b items per block (below 2^24: counts stay exact in float32)
    search: dict[str, Any] | None = None  # approximate nearest-neighbour search beside the exact ranking (faiss)

    def check(self, where: str) -> None:
        if self.path not in TEST_PATHS:
            raise unknown("test path", self.path, TEST_PATHS, f"{where}.path")
        if self.search is not None:
            # stored (and compared between runs) with every setting filled in
            object.__setattr__(self, "search", P.as_dict(parse_search(self.search, f"{where}.search")))
            if not faiss_available():
                raise ConfigError(f"{where}.search asks for approximate search, which needs the faiss package, "
                                  f"not installed here: {FAISS_HINT}; or drop test.search")

    def search_settings(self) -> HNSWSearch | IVFFlatSearch | None:
        """The approximate search's typed settings (None: exact only)."""
        return None if self.search is None else parse_search(self.search, "test.search")


@dataclass(frozen=True)
class ComponentSpec:
    """A registered component (source, encoder or method) with its validated parameters."""

    kind: str
    params: Any


@dataclass(frozen=True)
class MethodSpec:
    name: str
    method: str
    params: Any
    train: TrainSpec


@dataclass(frozen=True)
class TaskSpec:
    name: str
    version: str
    description: str
    path: str
    dataset: ComponentSpec
    encoders: Mapping[str, ComponentSpec]
    metrics: MetricSpec
    train: TrainSpec
    methods: Mapping[str, MethodSpec]
    raw: Mapping[str, Any]
    overrides: tuple[str, ...] = ()  # the NAME.KEY=VALUE settings applied on top of the file
    test: TestSpec = TestSpec()

    def resolved(self, method: str, values: Callable[[Any], dict[str, Any]] = P.as_dict) -> dict[str, Any]:
        """The fully resolved configuration of one method, as stored in result files; with
        ``values=params.defaults``, the same layout holding each setting's default instead."""
        m = self.methods[method]
        return {
            "task": self.name, "version": self.version,
            "dataset": {"source": self.dataset.kind, **values(self.dataset.params)},
            "encoders": {k: {"type": e.kind, **values(e.params)} for k, e in self.encoders.items()},
            "metrics": values(self.metrics), "test": values(self.test), "train": values(m.train),
            "method": {"name": m.name, "method": m.method, **values(m.params)},
        }


def read_yaml(path: Path, chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """Read a task file, following ``base:`` chains (``chain``: the files that named it); errors name the file. A
    bare name names a shipped task (:func:`harness.config.checks.task_path`)."""
    if not chain:
        path = checks.task_path(path)
    if not path.is_file():
        raise checks.missing_task(path, chain[-1] if chain else None)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise checks.unreadable(path, err) from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path} must hold a mapping at the top level (name: ..., dataset: ...), "
                          f"got {type(raw).__name__}")
    base = raw.pop("base", None)
    if base is None:
        return raw
    base_path = checks.base_path(path, base, chain)
    return merge(read_yaml(base_path, (*chain, path.resolve())), raw)


def merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive merge: mappings merge, other values replace; a component whose type changes
    (another ``source``, ``type`` or ``method``) replaces the base's entry whole."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict) and not _retyped(out[key], value):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _retyped(base: Mapping[str, Any], over: Mapping[str, Any]) -> bool:
    return any(k in over and k in base and over[k] != base[k] for k in ("source", "type", "method"))


def parse_override(text: str) -> tuple[list[str], Any]:
    """'swamp.K=500' -> (['methods', 'swamp', 'K'], 500); 'train.lr=1e-4' -> (['train', 'lr'], 0.0001)."""
    if "=" not in text or "." not in text.split("=", 1)[0]:
        raise ConfigError(f"--set {text!r}: expected NAME.KEY=VALUE, e.g. swamp.K=500 or train.lr=0.001")
    lhs, value_text = text.split("=", 1)
    parts = lhs.split(".")
    try:
        value = yaml.safe_load(value_text)
    except yaml.YAMLError as err:
        raise ConfigError(f"--set {text!r}: cannot parse value {value_text!r} ({checks.yaml_problem(err)}); "
                          "quote text values, write lists as [1, 2]") from None
    if isinstance(value, str) and _looks_float(value_text):
        value = float(value_text)  # YAML 1.1 reads '1e-4' as a string
    if parts[0] in ("train", "dataset", "encoders", "metrics", "test"):
        return parts, value
    return ["methods", *parts], value


def _looks_float(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply --set overrides to the raw mapping; unknown method names fail with the valid ones."""
    raw = copy.deepcopy(raw)
    for text in overrides:
        path, value = parse_override(text)
        if path[0] == "methods" and path[1] not in (raw.get("methods") or {}):
            raise unknown("method", path[1], raw.get("methods") or {}, f"--set {text}")
        node = raw
        for key in path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {text}: {key!r} is not a mapping")
        node[path[-1]] = value
    return raw


def _component(registry: Registry[type[Any]], raw: Any, type_key: str, where: str) -> ComponentSpec:
    if not isinstance(raw, dict) or type_key not in raw:
        raise ConfigError(f"{where} must be a mapping with a {type_key!r} key")
    body = dict(raw)
    kind = body.pop(type_key)
    cls = registry.get(kind, where)
    return ComponentSpec(kind, P.parse(cls.Params, body, where))


def _method(name: str, raw: Any, train_raw: dict[str, Any], where: str) -> MethodSpec:
    if not isinstance(raw, dict) or "method" not in raw:
        raise ConfigError(f"{where} must be a mapping with a 'method' key naming one of: {', '.join(METHODS.names())}")
    body = dict(raw)
    kind = body.pop("method")
    over = body.pop("train", {}) or {}
    if not isinstance(over, dict):
        raise ConfigError(f"{where}.train must be a mapping of training settings, got {over!r}")
    train = P.parse(TrainSpec, merge(train_raw, over), f"{where}.train")
    cls = METHODS.get(kind, where)
    return MethodSpec(name, kind, P.parse(cls.Params, body, where), train)


def build(raw: dict[str, Any], path: str) -> TaskSpec:
    """Validate a raw task mapping into a TaskSpec."""
    for key in raw:
        if key not in TOP_KEYS:
            raise unknown("top-level key", str(key), TOP_KEYS, path)
    checks.check_reference(raw.get("reference"), f"{path}: reference")
    launch.check_section(raw.get("launcher"), f"{path}: launcher")
    for key in ("name", "version", "dataset", "encoders", "methods"):
        if key not in raw:
            raise ConfigError(f"{path}: missing required key {key!r}")
    encoders = raw["encoders"]
    if not isinstance(encoders, dict) or sorted(encoders) != sorted(MODALITIES):
        raise ConfigError(f"{path}: encoders must map exactly the modalities a and b to encoder specs")
    train_raw = raw.get("train") or {}
    train = P.parse(TrainSpec, train_raw, f"{path}: train")  # before the methods, which inherit it
    methods = raw["methods"]
    if not isinstance(methods, dict) or not methods:
        raise ConfigError(f"{path}: methods must map at least one name to a method spec")
    metrics = P.parse(MetricSpec, raw.get("metrics"), f"{path}: metrics")
    spec = TaskSpec(
        name=str(raw["name"]), version=str(raw["version"]), description=str(raw.get("description", "")),
        path=path,
        dataset=_component(SOURCES, raw["dataset"], "source", f"{path}: dataset"),
        encoders={m: _component(ENCODERS, encoders[m], "type", f"{path}: encoders.{m}") for m in MODALITIES},
        metrics=metrics,
        train=train,
        methods={n: _method(n, m, train_raw, f"{path}: methods.{n}") for n, m in methods.items()},
        raw=raw,
        test=P.parse(TestSpec, raw.get("test"), f"{path}: test"),
    )
    for m in spec.methods.values():
        if m.train.select not in metrics.names():
            raise unknown("selection metric", m.train.select, metrics.names(), f"{path}: methods.{m.name}.train.select")
    return spec


def load_task(path: str | Path, overrides: list[str] | None = None, add_methods: tuple[str, ...] = ()) -> TaskSpec:
    """Read, override and validate a task file; ``add_methods``: registered methods the file does not declare,
    added under their own names with their default settings."""
    path = checks.task_path(path)
    raw = read_yaml(path)
    if add_methods:
        raw["methods"] = {**(raw.get("methods") or {}), **{name: {"method": name} for name in add_methods}}
    raw = apply_overrides(raw, list(overrides or []))
    return dataclasses.replace(build(raw, str(path)), overrides=tuple(overrides or ()))


def undeclared(spec: TaskSpec, names: list[str]) -> list[str]:
    """The ``names`` (from --methods) that the task does not declare but that are registered methods: they run with
    their defaults. A name that is neither raises ConfigError with the task's methods and the registered ones."""
    out = []
    for name in names:
        if name in spec.methods:
            continue
        if name not in METHODS.names():
            raise ConfigError(f"{spec.path} (--methods): unknown method {name!r}"
                              f"{did_you_mean(name, [*spec.methods, *METHODS.names()])}; the task declares: "
                              f"{', '.join(spec.methods)}; registered methods (run with their defaults when named): "
                              f"{', '.join(METHODS.names())}")
        out.append(name)
    return out


def select_methods(spec: TaskSpec, names: list[str] | None) -> list[str]:
    """The method names to run (all declared ones when ``names`` is empty)."""
    if not names:
        return list(spec.methods)
    for name in names:
        if name not in spec.methods:
            raise unknown("method", name, spec.methods, f"{spec.path} (--methods)")
    return names


def with_epochs(spec: TaskSpec, epochs: int) -> TaskSpec:
    """A copy of ``spec`` whose every method trains for ``epochs`` epochs."""
    if epochs < 1:
        raise ConfigError(f"--epochs must be >= 1, got {epochs}")
    methods = {n: dataclasses.replace(m, train=dataclasses.replace(m.train, epochs=epochs))
               for n, m in spec.methods.items()}
    return dataclasses.replace(spec, methods=methods, train=dataclasses.replace(spec.train, epochs=epochs))
