"""Name → class registries for methods, data sources and encoders, and the discovery of plugin files.

A new method, data source or encoder is a new file that decorates its class with
``@METHODS.register("name")`` (or ``SOURCES`` / ``ENCODERS``); :func:`discover` imports every module of
``baselines/``, ``harness/sources/`` and ``harness/encoders/``, and every file of the folders given
with ``--include PATH`` or the ``SWAMP_BENCH_INCLUDE`` environment variable, so that nothing else needs
editing. Readers of other codes' encoder weights register into :data:`STATE_FORMATS` the same way.

A plugin file that fails to import is reported on stderr in one line and skipped: the other plugins keep
working. Asking for a name that only the broken file would have registered stops with that file's error.
"""
from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import sys
from pathlib import Path
from typing import Any, Callable, Generic, Iterable, TypeVar

from harness.errors import ConfigError, one_line, unknown

T = TypeVar("T")

PLUGIN_PACKAGES = ("baselines", "harness.sources", "harness.encoders")
INCLUDE_ENV = "SWAMP_BENCH_INCLUDE"


def origin(obj: Any) -> str:
    """The file that defines ``obj`` (relative to the working directory when inside it)."""
    try:
        path = Path(inspect.getsourcefile(obj) or "?")
    except TypeError:
        return "?"
    return _shown(path)


class Registry(Generic[T]):
    """A named collection of plugins of one kind; ``requires`` names attributes every entry must have."""

    def __init__(self, kind: str, requires: tuple[str, ...] = ()):
        self.kind = kind
        self.requires = requires
        self._items: dict[str, T] = {}
        self._conflicts: dict[str, str] = {}  # name -> why it cannot be used (registered by two files)

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator adding a class (or function) under ``name``; a name taken by another file is an error."""
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.+-]*", name):
            raise ConfigError(f"{self.kind} names are words such as 'my_method', got {name!r}")

        def add(obj: T) -> T:
            where = origin(obj)
            for attribute in self.requires:
                if not hasattr(obj, attribute):
                    raise ConfigError(f"{where}: {self.kind} {name!r} ({getattr(obj, '__name__', obj)}) has no "
                                      f"{attribute}; declare `{attribute} = <a frozen dataclass of its settings>` "
                                      "in the class (an empty @dataclass(frozen=True) when it has none)")
            known = self._items.get(name)
            if known is not None and known is not obj and origin(known) != where:
                self._conflicts[name] = (f"{self.kind} {name!r} is registered twice: in {origin(known)} and in "
                                         f"{where}; rename one of them")
                if _loading is not None:
                    _registered_by.setdefault(_loading, []).append((self, name, None))
                raise ConfigError(self._conflicts[name])
            self._items[name] = obj
            obj.registry_name = name  # type: ignore[attr-defined]  # T (a class or function) declares no such attribute
            if _loading is not None:
                _registered_by.setdefault(_loading, []).append((self, name, obj))
            return obj

        return add

    def get(self, name: Any, where: str = "") -> T:
        """Return the entry registered as ``name`` or raise with the valid names (and, when a plugin file
        that failed to import would have registered it, that file's error)."""
        discover()
        if not isinstance(name, str):
            at = f" in {where}" if where else ""
            raise ConfigError(f"{self.kind} name{at} must be a string, got {name!r} ({type(name).__name__}); "
                              f"valid: {', '.join(sorted(self._items))}")
        if name in self._conflicts:
            raise ConfigError(self._conflicts[name])
        if name not in self._items:
            broken = _failure_for(name)
            if broken is not None:
                raise ConfigError(f"{self.kind} {name!r} is in {broken[0]}, which failed to import: {broken[1]}; "
                                  "fix that file")
            raise unknown(self.kind, name, self._items, where)
        return self._items[name]

    def names(self) -> list[str]:
        """Sorted registered names."""
        discover()
        return sorted(self._items)

    def items(self) -> list[tuple[str, T]]:
        """(name, entry) pairs in registration order."""
        discover()
        return list(self._items.items())


METHODS: Registry[type[Any]] = Registry("method", requires=("Params",))
SOURCES: Registry[type[Any]] = Registry("data source", requires=("Params", "load"))
ENCODERS: Registry[type[Any]] = Registry("encoder", requires=("Params", "build"))
# Readers of encoder weights saved by other code: name -> function(state, the method's encoders by modality)
# returning this harness's keys ('encoders.<modality>.<parameter>'), or None when the state is not in that format.
STATE_FORMATS: Registry[Callable[..., Any]] = Registry("encoder state format")

_discovered = False
_include: list[Path] = []
_loaded_files: set[Path] = set()
_failures: dict[Path, str] = {}  # plugin file -> its import error on one line
_warned: set[Path] = set()  # failures already reported
_loading: Path | None = None  # the plugin file being imported by discover()
# file -> (registry, name, entry or None: a clash)
_registered_by: dict[Path, list[tuple[Registry[Any], str, Any]]] = {}
_include_modules: dict[Path, str] = {}  # included file -> its module name


def plugin_folders() -> list[Path]:
    """The folders of the plugin packages (for provenance: an untracked file there is uncommitted code)."""
    return [Path(importlib.import_module(p).__path__[0]) for p in PLUGIN_PACKAGES]


def set_include(paths: Iterable[str]) -> None:
    """Also load plugin files from ``paths`` (folders of .py files, or single files) at the next discovery;
    the folders of ``SWAMP_BENCH_INCLUDE`` (separated by ``os.pathsep``) are added to them."""
    global _discovered
    found = []
    for text in [*paths, *filter(None, os.environ.get(INCLUDE_ENV, "").split(os.pathsep))]:
        path = Path(text).expanduser()
        if not path.exists() or not (path.is_dir() or path.suffix == ".py"):
            raise ConfigError(f"--include {text}: no such folder or .py file; pass a folder holding method, source "
                              f"or encoder files (or fix {INCLUDE_ENV})")
        found.append(path.resolve())
    _include[:] = list(dict.fromkeys(found))
    _forget_excluded()
    _discovered = False


def _forget_excluded() -> None:
    """Unregister what files of earlier --include folders registered, when they are no longer included (one
    process running several commands, as the tests do, sees only the plugins of the current one)."""
    for file in sorted({f for f in (*_registered_by, *_failures) if f in _include_modules}):
        if any(file == p or file.is_relative_to(p) for p in _include):
            continue
        for registry, name, obj in _registered_by.pop(file, []):
            if obj is None:
                registry._conflicts.pop(name, None)
            elif registry._items.get(name) is obj:
                registry._items.pop(name)
        _failures.pop(file, None)
        _warned.discard(file)
        _loaded_files.discard(file)
        sys.modules.pop(_include_modules.pop(file, ""), None)


def discover() -> None:
    """Import every plugin module once so that their ``register`` decorators run; report and skip the ones
    that fail to import."""
    global _discovered
    if _discovered:
        return
    if not _include and os.environ.get(INCLUDE_ENV):
        set_include(())  # a process that never parsed --include (python -c, a notebook) still sees the variable
    _discovered = True
    for package_name in PLUGIN_PACKAGES:
        package = importlib.import_module(package_name)
        for info in pkgutil.iter_modules(package.__path__):
            if not info.name.startswith("_"):
                module = f"{package_name}.{info.name}"
                _load(Path(package.__path__[0]) / f"{info.name}.py", functools.partial(importlib.import_module, module))
    for path in _include:
        for file in sorted(path.glob("*.py")) if path.is_dir() else [path]:
            if not file.name.startswith("_"):
                _load(file, functools.partial(_import_file, file))


def _load(file: Path, importer: Callable[[], Any]) -> None:
    global _loading
    file = file.resolve()
    if file in _loaded_files or file in _failures:
        return
    _loading = file
    try:
        importer()
        _loaded_files.add(file)
    except Exception as err:  # any error in a plugin file: report it, keep the other plugins
        _failures[file] = f"{type(err).__name__}: {one_line(err)}"
        for registry, name, obj in _registered_by.get(file, []):  # what it registered before failing is unusable
            if obj is not None and registry._items.get(name) is obj:
                registry._items.pop(name)
    finally:
        _loading = None


def _import_file(file: Path) -> None:
    """Import a plugin file from outside the packages under a module name of its own."""
    file = file.resolve()
    tag = hashlib.sha256(str(file).encode()).hexdigest()[:8]
    name = f"swamp_bench_include_{tag}_{file.stem}" if file.stem.isidentifier() else f"swamp_bench_include_{tag}"
    if str(file.parent) not in sys.path:
        sys.path.append(str(file.parent))  # a plugin may import a helper module beside it
    _include_modules[file] = name
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ConfigError(f"cannot load {file} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise


def _shown(file: Path) -> str:
    """``file`` relative to the working directory when inside it, else as it is."""
    try:
        return str(file.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(file)


def _failure_for(name: str) -> tuple[str, str] | None:
    """(file, error) of a plugin file that failed to import and would have registered ``name``."""
    for file, error in _failures.items():
        try:
            text = file.read_text(errors="replace")
        except OSError:
            text = ""
        if file.stem == name or re.search(r"register\(\s*['\"]" + re.escape(name) + r"['\"]", text):
            return _shown(file), error
    return None


def take_warnings() -> list[str]:
    """One line per plugin file that failed to import and has not been reported yet (the command line
    prints them; a command that stops on that very file reports its error instead)."""
    lines = [f"warning: skipped plugin file {_shown(f)} ({e}); fix it, or move it out of the plugin folder"
             for f, e in _failures.items() if f not in _warned]
    _warned.update(_failures)
    return lines


def failures() -> dict[str, str]:
    """Plugin files that failed to import, and why (for ``harness list``)."""
    discover()
    return {_shown(f): e for f, e in _failures.items()}
