"""Turn a YAML mapping into a typed, frozen parameter dataclass, once, at the boundary.

Every configurable part (method, encoder, data source, training settings) declares
its parameters as a frozen dataclass. :func:`parse` checks the keys (unknown keys
fail with "did you mean"), the types (an int is accepted for a float, nothing else
is coerced; numbers must be finite) and the ranges fields declare with :func:`bounded`, then calls
the dataclass's own ``check()`` for what depends on several fields. A field may carry
``metadata={"key": "lambda"}`` when its YAML name is a Python keyword.
"""
from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from harness.errors import ConfigError, did_you_mean, unknown

P = TypeVar("P")
FLOAT32_MAX = 3.4028234663852886e38  # every float setting fits torch's float32
INT_LIMIT = 2**63  # every integer setting fits a 64-bit signed integer (what numpy and torch take as a size)


def yaml_key(field: dataclasses.Field[Any]) -> str:
    """The name a field has in YAML (its ``metadata['key']`` or its attribute name)."""
    key: str = field.metadata.get("key", field.name)
    return key


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of the parameter dataclass ``cls`` (TypeError when it is no dataclass)."""
    return dataclasses.fields(cls)


def keys(cls: type) -> list[str]:
    """All YAML keys accepted by the parameter dataclass ``cls``."""
    return [yaml_key(f) for f in _fields(cls)]


def parse(cls: type[P], raw: Mapping[str, Any] | None, where: str) -> P:
    """Validate ``raw`` against the dataclass ``cls`` and build it; ``where`` prefixes errors."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ConfigError(f"{where} must be a mapping of KEY: VALUE, got {raw!r} ({type(raw).__name__})")
    raw = dict(raw or {})
    hints = typing.get_type_hints(cls)
    by_key = {yaml_key(f): f for f in _fields(cls)}
    values = {}
    for key, value in raw.items():
        if key not in by_key:
            raise unknown("key", str(key), by_key, where)
        field = by_key[key]
        values[field.name] = coerce(value, hints[field.name], f"{where}.{key}")
        check_range(values[field.name], field, f"{where}.{key}")
    missing = [k for k, f in by_key.items() if k not in raw and _required(f)]
    if missing:
        raise ConfigError(f"{where} is missing required key(s): {', '.join(missing)}")
    obj = cls(**values)
    check = getattr(obj, "check", None)
    if check is not None:
        check(where)
    return obj


@dataclasses.dataclass(frozen=True)
class Space:
    """Where ``harness tune`` searches a setting (harness/tune/space.py reads it): numbers from ``low`` to
    ``high`` (on a log scale with ``log``; integers for an int field), one of ``choices``, or, with ``layers``,
    hidden layer sizes: ``depth`` layers (a range) of one width from ``low`` to ``high``. ``when``: searched only
    where these other settings of the same part hold one of these values (``(("loss", ("infonce",)),)``).
    ``on=False``: declared, but searched only when a task's ``tune:`` block turns it on."""

    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()
    layers: bool = False
    depth: tuple[int, int] = (1, 1)
    when: tuple[tuple[str, tuple[Any, ...]], ...] = ()
    on: bool = True


def search(low: float, high: float, *, log: bool = False, when: dict[str, tuple[Any, ...]] | None = None,
           on: bool = True) -> Space:
    """A numeric search range, e.g. ``search(1e-4, 1e-2, log=True)``."""
    return Space(low=low, high=high, log=log, when=tuple((when or {}).items()), on=on)


def choose(*values: Any, when: dict[str, tuple[Any, ...]] | None = None, on: bool = True) -> Space:
    """A search over a few values, e.g. ``choose("sum", "mean")``."""
    return Space(choices=tuple(values), when=tuple((when or {}).items()), on=on)


def layer_sizes(width: tuple[int, int], depth: tuple[int, int], on: bool = True) -> Space:
    """A search over hidden layers: ``depth`` layers (from, to) of one width in ``width`` (log scale)."""
    return Space(low=width[0], high=width[1], log=True, layers=True, depth=depth, on=on)


def bounded(default: Any = dataclasses.MISSING, *, ge: float | None = None, gt: float | None = None,
            le: float | None = None, lt: float | None = None, key: str | None = None,
            tune: Space | None = None) -> Any:
    """A parameter field with its range, declared beside it: ``seed: int = bounded(0, ge=0)``. :func:`parse`
    refuses a value outside the range (for a tuple, any element outside it) with the range in the message.
    ``tune``: where ``harness tune`` searches it (:func:`search`, :func:`choose`, :func:`layer_sizes`), which must
    lie inside the range."""
    meta: dict[str, Any] = {"range": {k: v for k, v in (("ge", ge), ("gt", gt), ("le", le), ("lt", lt))
                                      if v is not None}}
    if key is not None:
        meta["key"] = key
    if tune is not None:
        meta["tune"] = tune
    return dataclasses.field(default=default, metadata=meta)


def in_range(value: float, field: dataclasses.Field[Any]) -> bool:
    """Whether ``value`` lies in the range ``field`` declares (any value, without one)."""
    limits = field.metadata.get("range") or {}
    return all(_RANGE_WORDS[name][1](value, bound) for name, bound in limits.items())


def range_text(field: dataclasses.Field[Any]) -> str:
    """The range ``field`` declares, as words: '> 0 and <= 1' ('' without one)."""
    return " and ".join(_range_text(field.metadata.get("range") or {}))


_Bound = Callable[[float, float], bool]
_RANGE_WORDS: dict[str, tuple[str, _Bound]] = {"ge": (">=", lambda v, b: v >= b), "gt": (">", lambda v, b: v > b),
                                              "le": ("<=", lambda v, b: v <= b), "lt": ("<", lambda v, b: v < b)}


def check_range(value: Any, field: dataclasses.Field[Any], where: str) -> None:
    """ConfigError unless ``value`` (each element of a tuple) lies in the range ``field`` declares."""
    limits = field.metadata.get("range") or {}
    for item in (value if isinstance(value, tuple) else (value,)):
        if item is None or not isinstance(item, (int, float)):
            continue
        if not all(_RANGE_WORDS[name][1](item, bound) for name, bound in limits.items()):
            shown = f"{value!r}" if not isinstance(value, tuple) else f"{list(value)!r} (element {item!r})"
            raise ConfigError(f"{where} must be {' and '.join(_range_text(limits))}, got {shown}")


def _range_text(limits: dict[str, float]) -> list[str]:
    return [f"{_RANGE_WORDS[name][0]} {bound}" for name, bound in limits.items()]


def _required(field: dataclasses.Field[Any]) -> bool:
    return field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Check ``value`` against the type ``hint``; return it (ints widen to floats, lists to tuples)."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, where)
            except ConfigError as err:
                errors.append(str(err))
        words = [str(w) for a in args if typing.get_origin(a) is typing.Literal for w in typing.get_args(a)]
        if words and isinstance(value, str):  # 'autoo' for an int or 'auto': name the words, not the number type
            raise ConfigError(f"{where} must be a number or one of {', '.join(words)}, got {value!r}"
                              f"{did_you_mean(value, words)}")
        raise ConfigError(errors[0])
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise _type_error(value, hint, where)
        inner = args[0] if args else Any
        return tuple(coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value))
    if origin in (dict, Mapping) or hint in (dict, Any):
        return value
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            try:
                number = float(value)
            except OverflowError:
                raise ConfigError(f"{where} must be a finite number, got an integer of {len(str(value))} digits") \
                    from None
            if not math.isfinite(number):
                raise ConfigError(f"{where} must be a finite number, got {value!r}")
            if abs(number) > FLOAT32_MAX:
                raise ConfigError(f"{where} must lie within float32's range (magnitude at most 3.4e38, what torch "
                                  f"computes in), got {value!r}")
            return number
        raise _type_error(value, hint, where)
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            if not -INT_LIMIT <= value < INT_LIMIT:
                raise ConfigError(f"{where} must be an integer between -2^63 and 2^63 - 1, got one of "
                                  f"{len(str(abs(value)))} digits")
            return value
        raise _type_error(value, hint, where)
    if hint in (bool, str):
        if isinstance(value, hint):
            return value
        raise _type_error(value, hint, where)
    if typing.get_origin(hint) is typing.Literal:
        if value in args:
            return value
        raise unknown("value", str(value), [str(a) for a in args], where)
    raise ConfigError(f"{where}: unsupported parameter type {hint!r}")


def _type_error(value: Any, hint: Any, where: str) -> ConfigError:
    name = getattr(hint, "__name__", str(hint))
    return ConfigError(f"{where} must be of type {name}, got {value!r} ({type(value).__name__})")


def require(condition: bool, where: str, message: str) -> None:
    """Raise a ConfigError naming ``where`` unless ``condition`` holds (range checks)."""
    if not condition:
        raise ConfigError(f"{where}: {message}")


def defaults(obj: Any) -> dict[str, Any]:
    """The default value of every field of ``obj``'s parameter dataclass that has one, YAML-keyed like
    :func:`as_dict` (to recognise a setting added after a result file was written)."""
    out = {}
    for f in dataclasses.fields(obj):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            continue
        out[yaml_key(f)] = list(value) if isinstance(value, tuple) else value
    return out


def as_dict(obj: Any) -> dict[str, Any]:
    """The parameters as a plain YAML-keyed dict (for result files)."""
    out = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        out[yaml_key(f)] = list(value) if isinstance(value, tuple) else value
    return out
