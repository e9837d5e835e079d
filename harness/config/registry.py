"""Name → class registries for methods, data sources and encoders.

A new method, data source or encoder is a new file that decorates its class with
``@METHODS.register("name")`` (or ``SOURCES`` / ``ENCODERS``); :func:`discover`
imports every module of ``baselines/``, ``harness/sources/`` and
``harness/encoders/`` so that nothing else needs editing.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable, Generic, TypeVar

from harness.errors import ConfigError, unknown

T = TypeVar("T")


class Registry(Generic[T]):
    """A named collection of classes of one kind."""

    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        """Class decorator adding ``cls`` under ``name``; duplicate names are an error."""

        def add(cls: T) -> T:
            if name in self._items and self._items[name] is not cls:
                raise ConfigError(f"{self.kind} {name!r} is registered twice")
            self._items[name] = cls
            cls.registry_name = name  # type: ignore[attr-defined]
            return cls

        return add

    def get(self, name: str, where: str = "") -> T:
        """Return the class registered as ``name`` or raise with the valid names."""
        discover()
        if name not in self._items:
            raise unknown(self.kind, name, self._items, where)
        return self._items[name]

    def names(self) -> list[str]:
        """Sorted registered names."""
        discover()
        return sorted(self._items)


METHODS: Registry = Registry("method")
SOURCES: Registry = Registry("data source")
ENCODERS: Registry = Registry("encoder")

_PLUGIN_PACKAGES = ("baselines", "harness.data.sources", "harness.encoders")
_discovered = False


def discover() -> None:
    """Import every plugin module once so that their ``register`` decorators run."""
    global _discovered
    if _discovered:
        return
    _discovered = True
    for package_name in _PLUGIN_PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{package_name}.{info.name}")
