"""``harness list``: the tasks and the methods each declares; the registered components."""
from __future__ import annotations

import argparse

from harness.cli import options
from harness.cli.parser import program
from harness.config.checks import SHIPPED as TASKS_DIR

NAME = "list"
HELP = "tasks and the methods each declares; registered components"
EXAMPLE = "python -m harness list"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    parser.add_argument("--tasks-dir", default=str(TASKS_DIR))


def handle(args: argparse.Namespace) -> int:
    from harness.config import catalog

    shipped = catalog.is_shipped(args.tasks_dir)
    if shipped:
        print(f"shipped tasks (run one by its file name or its path, e.g. `{program()} run synthetic`):")
    for task in catalog.tasks(args.tasks_dir):
        if task.error:
            print(f"{task.path}  INVALID: {task.error}")
            continue
        methods = ", ".join(f"{name} ({method})" for name, method in task.methods)
        shown = f"{task.path.stem}  ({task.path})" if shipped else str(task.path)
        print(f"{shown}  [{task.name} v{task.version}]  {task.description}\n    methods: {methods}")
    for kind, names in catalog.components().items():
        print(f"{'' if kind != 'methods' else chr(10)}registered {kind}: {', '.join(names)}")
    for file, error in catalog.failed_plugins().items():
        print(f"plugin file {file} failed to import and was skipped: {error}")
    return 0
