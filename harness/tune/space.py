"""The search space of one method of a task: every tunable setting of its training, its two encoders and the method
itself, read from where each setting is declared (``bounded(..., tune=search(...))`` in the part's ``Params``,
harness/config/params.py), then narrowed, widened, switched on or off by the task's ``tune:`` block::

    tune:
      trials: 20                                  # the default of --trials
      space:
        train.lr: {low: 1.0e-4, high: 3.0e-3, log: true}
        train.epochs: on                          # declared with on=False: searched only when a task says so
        swamp.K: off                              # NAME.KEY: a setting of the method NAME
        encoders.a.hidden: {width: [64, 512], depth: [1, 2]}
        contrastive.loss: {choices: [max_violation, infonce]}

A search that cannot be valid (low above high, a log scale through zero, an end the setting's own range or check
refuses, a key nothing declares) is refused here, before any trial, naming the key. The task's own value of each
setting is the search's first trial (:meth:`Space.start`); ``auto`` values stay ``auto`` in it.
"""
from __future__ import annotations

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Any, Mapping

from harness.config import params as P
from harness.config.params import Space
from harness.config.registry import ENCODERS, METHODS
from harness.config.spec import TaskSpec, TrainSpec
from harness.errors import ConfigError, check_keys, did_you_mean

BLOCK_KEYS = ("trials", "space")
SPACE_KEYS = ("low", "high", "log", "choices", "width", "depth")


@dataclass(frozen=True)
class Dimension:
    """One searched setting: where it lives (``part``: train, encoders.a, encoders.b or method), its YAML key, its
    space, and whether its values are integers."""

    part: str
    key: str
    space: Space
    integer: bool
    # an encoder setting searched beside a choice of encoder type: the type it belongs to (searched only in trials
    # that pick it) and the task's own type; a type choice itself keeps the task's encoder mapping (JSON)
    kind: str | None = None
    base_kind: str | None = None
    raw: str = ""
    # whether the task's tune.space gave the range's ends (a {low, high} entry), rather than its declaration
    written: bool = False

    @property
    def is_type(self) -> bool:
        return self.key == "type" and self.part.startswith("encoders.")

    @property
    def name(self) -> str:
        """The setting as the command line and the result files name it: 'train.lr', 'encoders.a.hidden', 'tau'."""
        return self.key if self.part == "method" else f"{self.part}.{self.key}"

    def params(self) -> list[str]:
        """The study's parameter names of this setting (a layer search has two: width and depth)."""
        return [f"{self.name}.width", f"{self.name}.depth"] if self.space.layers else [self.name]

    def suggest(self, trial: Any) -> Any:
        """The setting's value for an Optuna ``trial`` (its sampler's choice, or the value enqueued for it)."""
        sp = self.space
        if sp.layers:
            width = trial.suggest_int(f"{self.name}.width", int(sp.low or 1), int(sp.high or 1), log=sp.log)
            depth = trial.suggest_int(f"{self.name}.depth", sp.depth[0], sp.depth[1])
            return [width] * depth
        if sp.choices:
            return trial.suggest_categorical(self.name, list(sp.choices))
        if self.integer:
            return trial.suggest_int(self.name, int(sp.low or 0), int(sp.high or 0), log=sp.log)
        return trial.suggest_float(self.name, float(sp.low or 0.0), float(sp.high or 0.0), log=sp.log)

    def override(self, method: str, value: Any) -> str:
        """The ``--set`` text that gives this method the value (an encoder type: the whole encoder mapping, with
        the task's settings that the new type also has)."""
        if self.is_type:
            accepted = P.keys(ENCODERS.get(str(value), self.part).Params)
            mapping = {"type": value, **{k: v for k, v in json.loads(self.raw).items() if k in accepted}}
            return f"{self.part}={json.dumps(mapping)}"
        where = {"method": method, "train": f"{method}.train"}.get(self.part, self.part)
        return f"{where}.{self.key}={json.dumps(value)}"

    def start(self, value: Any) -> dict[str, Any] | None:
        """The study parameters that reproduce the task's own ``value`` (None: it cannot be written in this space,
        e.g. ``auto``, or layers of different widths; the first trial then leaves the setting as the task has it)."""
        if self.space.layers:
            sizes = list(value) if isinstance(value, (list, tuple)) else []
            if len(set(sizes)) != 1:
                return None
            return {f"{self.name}.width": sizes[0], f"{self.name}.depth": len(sizes)}
        if self.space.choices:
            return {self.name: value} if value in self.space.choices else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return {self.name: value}

    def describe(self) -> dict[str, Any]:
        """The space as result files record it."""
        sp = self.space
        if sp.layers:
            return {"width": [sp.low, sp.high], "depth": list(sp.depth), "log": sp.log}
        if sp.choices:
            return {"choices": list(sp.choices)}
        return {"low": sp.low, "high": sp.high, "log": sp.log, "int": self.integer}


def _parts(spec: TaskSpec, method: str) -> list[tuple[str, type, Any]]:
    """(part, parameter class, current parameters) of the method's training, encoders and method; a method fitted
    in closed form (``trains_by_gradient = False``: CCA, identity) uses neither training settings nor encoders, so
    only its own settings are searched."""
    m = spec.methods[method]
    cls = METHODS.get(m.method, method)
    own = [("method", cls.Params, m.params)]
    if not cls.trains_by_gradient:
        return own
    return [("train", TrainSpec, m.train),
            *((f"encoders.{k}", type(e.params), e.params) for k, e in spec.encoders.items()), *own]


def _is_integer(hint: Any) -> bool:
    """Whether a field's type makes its numbers integers (``int``, or ``int | Literal['auto']``)."""
    args = typing.get_args(hint) or (hint,)
    return int in args and float not in args


def dimensions(spec: TaskSpec, method: str, warnings: list[str] | None = None) -> list[Dimension]:
    """The method's search space: the declared searches, with the task's ``tune.space`` entries applied; checked
    (searches valid only in part add a line to ``warnings``). ``encoders.a.type: {choices: [linear, mlp]}`` searches
    the encoder type too, each type with its own declared searches."""
    block = tune_block(spec)
    entries = dict(block.get("space") or {})
    used: set[str] = set()
    found: list[Dimension] = []
    for part, cls, current in _parts(spec, method):
        kinds: list[tuple[str | None, type, dict[str, Any]]] = [(None, cls, P.as_dict(current))]
        base_kind = None
        if part.startswith("encoders.") and f"{part}.type" in entries:
            used.add(f"{part}.type")
            base_kind = spec.encoders[part.split(".")[1]].kind
            type_dim, kinds = _type_choice(spec, part, entries[f"{part}.type"], base_kind, current)
            found.append(type_dim)
        for kind, kind_cls, values in kinds:
            hints = typing.get_type_hints(kind_cls)
            idle = _idle(current) if kind is None else frozenset()
            for field in dataclasses.fields(kind_cls):
                key = P.yaml_key(field)
                if key in idle:
                    continue  # the part's own settings say this one does nothing here (a switched-off loss term)
                declared: Space | None = field.metadata.get("tune")
                # the method's own entry (swamp.train.lr) before the task-wide one (train.lr)
                candidates = [_entry_key(part, method, key)] + ([f"train.{key}"] if part == "train" else [])
                given = [c for c in candidates if c in entries]
                used.update(given)
                entry_key = given[0] if given else candidates[0]
                where = f"{spec.path}: tune.space.{entry_key}"
                sp = _apply(declared, entries.get(entry_key), where)
                if sp is None or not sp.on or not _holds(sp, values):
                    continue
                entry = entries.get(entry_key)
                dim = Dimension(part, key, sp, _is_integer(hints[field.name]), kind, base_kind,
                                written=isinstance(entry, Mapping) and ("low" in entry or "high" in entry))
                warned = _check(dim, kind_cls, values, field, where)
                if warned is not None and warnings is not None:
                    warnings.append(warned)
                found.append(dim)
    closed_form = not METHODS.get(spec.methods[method].method, method).trains_by_gradient
    shared = ("train.", "encoders.", f"{method}.train.")  # settings a closed-form fit does not have
    others = [k for k in entries if k not in used and not _names_other_method(k, spec, method)
              and not (closed_form and k.startswith(shared))]
    if others:
        known = [_entry_key(p, method, P.yaml_key(f)) for p, cls, _ in _parts(spec, method)
                 for f in dataclasses.fields(cls)]
        raise ConfigError(f"{spec.path}: tune.space.{others[0]} names no setting of {method}"
                          f"{did_you_mean(others[0], known)}; keys are train.KEY, encoders.a.KEY, encoders.b.KEY "
                          f"or METHOD.KEY (e.g. {method}.{known[-1].split('.')[-1]})")
    return found


def _type_choice(spec: TaskSpec, part: str, entry: Any, base_kind: str,
                 current: Any) -> tuple[Dimension, list[tuple[str | None, type, dict[str, Any]]]]:
    """A search over encoder types (``encoders.a.type: {choices: [linear, mlp]}``), and each type's class and
    settings: the task's own for its type; for another type, the task's settings that type has, else its
    defaults."""
    where = f"{spec.path}: tune.space.{part}.type"
    if not isinstance(entry, Mapping) or set(entry) != {"choices"} or not isinstance(entry["choices"], list) \
            or len(entry["choices"]) < 2:
        raise ConfigError(f"{where} must be {{choices: [TYPE, TYPE, ...]}} (at least two registered encoder types, "
                          f"e.g. [linear, mlp]), got {entry!r}")
    raw = dict((spec.raw.get("encoders") or {}).get(part.split(".")[1]) or {})
    raw.pop("type", None)
    kinds: list[tuple[str | None, type, dict[str, Any]]] = []
    for kind in entry["choices"]:
        cls = ENCODERS.get(str(kind), where).Params
        if kind == base_kind:
            kinds.append((kind, cls, P.as_dict(current)))
            continue
        accepted = P.keys(cls)
        kinds.append((kind, cls, P.as_dict(P.parse(cls, {k: v for k, v in raw.items() if k in accepted},
                                                   f"{where} ({kind})"))))
    dim = Dimension(part, "type", Space(choices=tuple(entry["choices"])), False, None, base_kind,
                    json.dumps(raw, sort_keys=True))
    return dim, kinds


def _entry_key(part: str, method: str, key: str) -> str:
    """The ``tune.space`` key of a setting of ``method``: swamp.tau, swamp.train.lr, encoders.a.hidden."""
    if part in ("method", "train"):
        return f"{method}.{key}" if part == "method" else f"{method}.train.{key}"
    return f"{part}.{key}"


def _names_other_method(key: str, spec: TaskSpec, method: str) -> bool:
    head = key.split(".", 1)[0]
    return head in spec.methods and head != method


def tune_block(spec: TaskSpec) -> dict[str, Any]:
    """The task's ``tune:`` mapping ({} without one), its shape checked."""
    block = spec.raw.get("tune") or {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"{spec.path}: tune must be a mapping with keys among {', '.join(BLOCK_KEYS)}, got {block!r}")
    check_keys(block, BLOCK_KEYS, f"{spec.path}: tune", "tune")
    trials = block.get("trials")
    if trials is not None and (isinstance(trials, bool) or not isinstance(trials, int) or trials < 1):
        raise ConfigError(f"{spec.path}: tune.trials must be a positive integer, got {trials!r}")
    space = block.get("space") or {}
    if not isinstance(space, Mapping):
        raise ConfigError(f"{spec.path}: tune.space must map settings (train.lr, swamp.tau, ...) to searches, "
                          f"got {space!r}")
    return dict(block)


def _apply(declared: Space | None, entry: Any, where: str) -> Space | None:
    """The declared search with the task's entry applied: True/on switches it on, False/off off, a mapping
    replaces its bounds (a key nothing declares needs the whole search)."""
    if entry is None:
        return declared
    if isinstance(entry, bool):
        if declared is None:
            raise ConfigError(f"{where}: nothing declares a search for this setting, so `on` has no range to use; "
                              "give one, e.g. {low: 0.1, high: 1.0}")
        return dataclasses.replace(declared, on=entry)
    if not isinstance(entry, Mapping):
        raise ConfigError(f"{where} must be on, off or a mapping with keys among {', '.join(SPACE_KEYS)}, "
                          f"got {entry!r}")
    check_keys(entry, SPACE_KEYS, where, "a search")
    base = declared or Space(layers="width" in entry)
    changes: dict[str, Any] = {"on": True}
    if "choices" in entry:
        choices = entry["choices"]
        if not isinstance(choices, list) or len(choices) < 2:
            raise ConfigError(f"{where}.choices must list at least two values, got {choices!r}")
        changes.update(choices=tuple(choices), low=None, high=None, layers=False)
    for key in ("low", "high"):
        if key in entry:
            changes[key] = _number(entry[key], f"{where}.{key}")
    if "log" in entry:
        if not isinstance(entry["log"], bool):
            raise ConfigError(f"{where}.log must be true or false, got {entry['log']!r}")
        changes["log"] = entry["log"]
    for key in ("width", "depth"):
        if key in entry:
            pair = entry[key]
            if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, int) and not isinstance(v, bool)
                                                                     for v in pair)):
                raise ConfigError(f"{where}.{key} must be [FROM, TO] (integers), got {pair!r}")
            if key == "width":
                changes.update(low=pair[0], high=pair[1], layers=True)
            else:
                changes.update(depth=(pair[0], pair[1]), layers=True)
    sp = dataclasses.replace(base, **changes)
    if not sp.choices and (sp.low is None or sp.high is None):
        raise ConfigError(f"{where}: nothing declares a search for this setting; give low and high (or choices)")
    return sp


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{where} must be a number, got {value!r} (write 1.0e-4, not 1e-4, for YAML to read a "
                          "number)")
    return value


def _idle(params: Any) -> frozenset[str]:
    """The settings (YAML keys) that do nothing given the part's other settings, which a search would spend trials on
    for nothing: what the parameters' ``idle_settings()`` names (SwAMP's contrastive-loss settings when its
    ``contrastive_weight`` is 0), else none."""
    hook = getattr(params, "idle_settings", None)
    return frozenset(hook()) if callable(hook) else frozenset()


def _holds(sp: Space, values: Mapping[str, Any]) -> bool:
    """Whether the part's settings meet the search's ``when`` conditions."""
    return all(values.get(key) in allowed for key, allowed in sp.when)


def _check(dim: Dimension, cls: type, values: Mapping[str, Any], field: dataclasses.Field[Any],
           where: str) -> str | None:
    """ConfigError naming ``where`` when the search cannot be valid: its ends out of order, a log scale that reaches
    zero, integer settings searched over fractions, an end outside the setting's declared range, both ends (any
    choice) refused by its part's check. One end refused there (e.g. K not below this task's queue) is a warning,
    returned: values of the rest of the range are valid."""
    sp = dim.space
    if sp.layers:
        width = (sp.low or 0, sp.high or 0)
        if not (1 <= width[0] <= width[1]) or not (0 <= sp.depth[0] <= sp.depth[1]):
            raise ConfigError(f"{where}: widths must satisfy 1 <= from <= to and depths 0 <= from <= to, got width "
                              f"[{sp.low}, {sp.high}], depth {list(sp.depth)}")
        ends: list[Any] = [[int(w)] * max(1, sp.depth[1]) for w in width]
    elif sp.choices:
        ends = list(sp.choices)
    else:
        low, high = sp.low, sp.high
        if low is None or high is None or not low < high:
            raise ConfigError(f"{where}: low must be below high, got low {low}, high {high}")
        if sp.log and low <= 0:
            raise ConfigError(f"{where}: a log-scale search needs low > 0, got low {low}; set log: false or raise low")
        if dim.integer and (low != int(low) or high != int(high)):
            raise ConfigError(f"{where}: {dim.key} is an integer setting; low and high must be integers, got "
                              f"{low} and {high}")
        ends = [int(low), int(high)] if dim.integer else [low, high]
    refused = []
    for end in ends:
        if not sp.layers and not sp.choices and not P.in_range(end, field):
            raise ConfigError(f"{where}: the search reaches {end!r}, outside {dim.key}'s range "
                              f"({P.range_text(field)}); keep low and high inside it")
        try:
            P.parse(cls, {**values, dim.key: end}, where)
        except ConfigError as err:
            refused.append((end, str(err).replace(f"{where}: ", "")))
    if refused and (len(refused) == len(ends) or sp.choices):
        end, why = refused[0]
        raise ConfigError(f"{where}: the search reaches {dim.key} = {end!r}, which its settings refuse: {why}")
    if refused:
        end, why = refused[0]
        return (f"{where}: {dim.key} = {end!r} is refused by the method's other settings ({why}); trials that draw "
                "such values count as failed: narrow the search")
    return None


def start_params(spec: TaskSpec, method: str, dims: list[Dimension]) -> dict[str, Any]:
    """The study parameters of the task's own settings (the first trial); settings that cannot be written in their
    space (``auto``) are left out, and that trial leaves them as the task has them."""
    values = {part: P.as_dict(current) for part, _, current in _parts(spec, method)}
    out: dict[str, Any] = {}
    for dim in dims:
        if dim.kind is not None and dim.kind != dim.base_kind:
            continue  # a setting of another encoder type than the task's
        own = dim.base_kind if dim.is_type else values[dim.part].get(dim.key)
        found = dim.start(own)
        if found is not None:
            out.update(found)
    return out

