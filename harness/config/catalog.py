"""What ``harness list`` shows, as data: the task files of a folder with the methods each declares (or why one is
invalid), and the registered components (methods, data sources, encoders) with the plugin files that failed to
import."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from harness.config import spec as specs
from harness.config.checks import SHIPPED
from harness.config.registry import ENCODERS, METHODS, SOURCES, failures
from harness.errors import ConfigError


@dataclass(frozen=True)
class TaskEntry:
    """One task file: its name, version, description and declared methods ((run name, method) pairs), or the
    error that makes it invalid (``error``; the other fields then empty)."""

    path: Path
    name: str = ""
    version: str = ""
    description: str = ""
    methods: tuple[tuple[str, str], ...] = ()
    error: str = ""


def tasks(folder: Path | str = SHIPPED) -> list[TaskEntry]:
    """Every ``*.yaml`` task file of ``folder`` (default: the shipped ``tasks/``), by file name, each read and
    checked as a run would read it."""
    entries = []
    for path in sorted(Path(folder).glob("*.yaml")):
        try:
            task = specs.load_task(path)
        except ConfigError as err:
            entries.append(TaskEntry(path, error=str(err)))
            continue
        entries.append(TaskEntry(path, task.name, str(task.version), task.description,
                                 tuple((name, m.method) for name, m in task.methods.items())))
    return entries


def is_shipped(folder: Path | str) -> bool:
    """Whether ``folder`` is the shipped ``tasks/`` (whose tasks run by their file name)."""
    return Path(folder).resolve() == SHIPPED.resolve()


def components() -> dict[str, list[str]]:
    """The registered methods, data sources and encoders, by kind (plugin files included)."""
    return {"methods": list(METHODS.names()), "data sources": list(SOURCES.names()),
            "encoders": list(ENCODERS.names())}


def failed_plugins() -> dict[str, str]:
    """Plugin files that failed to import (skipped), with the error of each."""
    return {str(file): str(error) for file, error in failures().items()}
