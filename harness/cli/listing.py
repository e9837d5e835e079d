"""``harness list``: the tasks and the methods each declares; the registered components."""
from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli import options
from harness.cli.parser import program
from harness.config.checks import SHIPPED as TASKS_DIR
from harness.errors import ConfigError

NAME = "list"
HELP = "tasks and the methods each declares; registered components"
EXAMPLE = "python -m harness list"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    parser.add_argument("--tasks-dir", default=str(TASKS_DIR))


def handle(args: argparse.Namespace) -> int:
    from harness.config import spec as specs
    from harness.config.registry import ENCODERS, METHODS, SOURCES, failures

    shipped = Path(args.tasks_dir).resolve() == TASKS_DIR.resolve()
    if shipped:
        print(f"shipped tasks (run one by its file name or its path, e.g. `{program()} run synthetic`):")
    for path in sorted(Path(args.tasks_dir).glob("*.yaml")):
        try:
            task = specs.load_task(path)
            methods = ", ".join(f"{n} ({m.method})" for n, m in task.methods.items())
            shown = f"{path.stem}  ({path})" if shipped else str(path)
            print(f"{shown}  [{task.name} v{task.version}]  {task.description}\n    methods: {methods}")
        except ConfigError as err:
            print(f"{path}  INVALID: {err}")
    print(f"\nregistered methods: {', '.join(METHODS.names())}")
    print(f"registered data sources: {', '.join(SOURCES.names())}")
    print(f"registered encoders: {', '.join(ENCODERS.names())}")
    for file, error in failures().items():
        print(f"plugin file {file} failed to import and was skipped: {error}")
    return 0
