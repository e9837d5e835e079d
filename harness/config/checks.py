"""Checks of task files that go beyond one parameter's type and range: where a task file or its
``base:`` is (with a did-you-mean among the files beside it), ``base:`` cycles, YAML syntax
errors in one line, and the shape of the free-form ``reference:`` block (published numbers)."""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from harness.errors import ConfigError, unknown

# the committed tasks: tasks/ of a checkout, or the copy an installed wheel holds in harness/tasks (pyproject.toml)
_HERE = Path(__file__).resolve()
SHIPPED = next((d for d in (_HERE.parents[2] / "tasks", _HERE.parents[1] / "tasks") if d.is_dir()),
               _HERE.parents[2] / "tasks")


def task_path(path: str | Path) -> Path:
    """A task file as given; a bare name that is no file here (``synthetic`` or ``synthetic.yaml``) is the shipped
    task of that name when there is one (a path always takes precedence)."""
    given = Path(path)
    if given.exists() or given.parent != Path("."):
        return given
    shipped = SHIPPED / (given.name if given.suffix in (".yaml", ".yml") else f"{given.name}.yaml")
    return shipped if shipped.is_file() else given

REFERENCE_KEYS = ("label", "methods", "timing")
TIMING_KEYS = ("label", "relative_to", "methods")


def missing_task(path: Path, named_by: Path | None) -> ConfigError:
    """'task file X does not exist' with the closest task file beside it or among the shipped tasks."""
    candidates = {str(p): p.name for folder in (path.parent, SHIPPED) if folder.is_dir() for p in folder.glob("*.yaml")}
    close = difflib.get_close_matches(path.name, list(candidates.values()), n=1, cutoff=0.5)
    hint = f" (did you mean {next(k for k, v in candidates.items() if v == close[0])!r}?)" if close else ""
    by = f" (the base: of {named_by})" if named_by is not None else ""
    return ConfigError(f"task file {path}{by} does not exist{hint}; `python -m harness list` shows the shipped tasks")


def base_path(path: Path, base: Any, chain: tuple[Path, ...]) -> Path:
    """The file a ``base:`` entry names (relative to ``path``); a cycle or a non-string is an error."""
    if not isinstance(base, str) or not base:
        raise ConfigError(f"{path}: base must name a task file (a path relative to {path.parent}), got {base!r}")
    target = (path.parent / base).resolve()
    seen = (*chain, path.resolve())
    if target in seen:
        cycle = " -> ".join(str(p) for p in (*seen[seen.index(target):], target))
        raise ConfigError(f"{path}: base: chain forms a cycle ({cycle}); remove one of these base: entries")
    return target


def unreadable(path: Path, err: Exception) -> ConfigError:
    """A task file that is not UTF-8 or not valid YAML, with the line and column of the problem."""
    if isinstance(err, UnicodeDecodeError):
        return ConfigError(f"{path} is not UTF-8 text (byte {err.start}); save it as UTF-8")
    return ConfigError(f"{path} is not valid YAML: {yaml_problem(err)}; fix the file")


def yaml_problem(err: Exception) -> str:
    """A YAML error as one short phrase with its line and column."""
    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        return f"{err.problem} at line {err.problem_mark.line + 1}, column {err.problem_mark.column + 1}"
    return " ".join(str(err).split())


def check_reference(ref: Any, where: str) -> None:
    """``reference:`` is optional; when present: ``label`` (text), ``methods`` (name -> metric -> number)
    and ``timing`` (``label``, ``relative_to``, ``methods``: name -> figure -> number)."""
    if ref is None:
        return
    _mapping(ref, where, REFERENCE_KEYS)
    _numbers_by_name(ref.get("methods"), f"{where}.methods")
    if ref.get("timing") is not None:
        _mapping(ref["timing"], f"{where}.timing", TIMING_KEYS)
        _numbers_by_name(ref["timing"].get("methods"), f"{where}.timing.methods")


def _mapping(node: Any, where: str, allowed: tuple[str, ...]) -> None:
    if not isinstance(node, dict):
        raise ConfigError(f"{where} must be a mapping with keys {', '.join(allowed)}, got {node!r}")
    for key in node:
        if key not in allowed:
            raise unknown("key", str(key), allowed, where)


def _numbers_by_name(node: Any, where: str) -> None:
    if node is None:
        return
    if not isinstance(node, dict):
        raise ConfigError(f"{where} must map each method name to its published numbers, got {node!r}")
    for name, figures in node.items():
        if not isinstance(figures, dict):
            raise ConfigError(f"{where}.{name} must map metric names to numbers (a2b/R@1: 84.1), got {figures!r}")
        for metric, value in figures.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise ConfigError(f"{where}.{name}.{metric} must be a number, got {value!r}")
