"""Command line: ``python -m harness {run,list,table} ...``. Bad input exits with status 2."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.errors import ConfigError

TASKS_DIR = Path(__file__).resolve().parent.parent / "tasks"


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
    return seeds


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m harness", description="SwAMP Bench: cross-modal retrieval benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="train and test methods of a task; write results and tables")
    run.add_argument("task", help="task YAML, e.g. tasks/synthetic.yaml")
    run.add_argument("--methods", default="", help="comma-separated method names declared by the task (default: all)")
    run.add_argument("--seeds", default="0", help="comma-separated seeds (default: 0)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME.KEY=VALUE",
                     help="override a value, e.g. swamp.K=500 or train.lr=0.001 (repeatable)")
    run.add_argument("--epochs", type=int, default=None, help="override the number of epochs of every method")
    run.add_argument("--device", default="auto", help="auto (default), cpu, cuda or cuda:N")
    run.add_argument("--data-root", default=None, help="dataset folder (sets dataset.root)")
    run.add_argument("--out", default="results", help="results folder (default: results/)")
    run.add_argument("--no-progress", action="store_true", help="hide progress bars")
    lst = sub.add_parser("list", help="tasks and the methods each declares; registered components")
    lst.add_argument("--tasks-dir", default=str(TASKS_DIR))
    table = sub.add_parser("table", help="re-render tables from saved result files")
    table.add_argument("folder", help="e.g. results/synthetic")
    table.add_argument("--format", default="simple", help="console format (tabulate name; md and tex also accepted)")
    from harness.bench import DEFAULT_FACTOR

    bench = sub.add_parser("bench", help="regression gate: asv suite on REV and on the working tree; exit 1 if slower")
    bench.add_argument("--against", required=True, metavar="REV", help="commit to compare with, e.g. HEAD~1 or main")
    bench.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                       help=f"after/before ratio that fails the gate (default: {DEFAULT_FACTOR}, from measured noise)")
    bench.add_argument("--bench", default=None, metavar="REGEX", help="only benchmarks matching REGEX (asv's -b)")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from harness import runner, spec as specs, tables

    overrides = list(args.overrides) + ([f"dataset.root={args.data_root}"] if args.data_root else [])
    seeds = parse_seeds(args.seeds)
    task = specs.load_task(args.task, overrides)
    methods = specs.select_methods(task, [m for m in args.methods.split(",") if m])
    if args.epochs is not None:
        task = specs.with_epochs(task, args.epochs)
    device = runner.resolve_device(args.device)
    data = runner.load_data(task)
    opts = runner.RunOptions(device=device, out=Path(args.out), overrides=overrides,
                             run_names=runner.run_names(task, methods, overrides, args.epochs),
                             progress=not args.no_progress)
    results = [runner.run_one(task, name, seed, data, opts) for name in methods for seed in seeds]
    folder = Path(args.out) / task.name
    _print_tables(results)
    paths = tables.write_tables(results, folder)
    print(f"\nresults: {folder}/<method>/seed<k>.json; tables: {', '.join(str(p) for p in paths)}")
    return 0


def _print_tables(results: list[dict]) -> None:
    from harness import tables

    rendered = tables.render(results, "simple")
    print(f"\nAccuracy (test split, %; mean ± std over seeds)\n{rendered['accuracy']}")
    print(f"\nTiming and peak memory ({tables.hardware_line(results)})\n{rendered['timing']}")


def cmd_list(args: argparse.Namespace) -> int:
    from harness import spec as specs
    from harness.registry import ENCODERS, METHODS, SOURCES

    for path in sorted(Path(args.tasks_dir).glob("*.yaml")):
        try:
            task = specs.load_task(path)
            methods = ", ".join(f"{n} ({m.method})" for n, m in task.methods.items())
            print(f"{path}  [{task.name} v{task.version}]  {task.description}\n    methods: {methods}")
        except ConfigError as err:
            print(f"{path}  INVALID: {err}")
    print(f"\nregistered methods: {', '.join(METHODS.names())}")
    print(f"registered data sources: {', '.join(SOURCES.names())}")
    print(f"registered encoders: {', '.join(ENCODERS.names())}")
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    from harness import tables
    from harness.results import load_results

    folder = Path(args.folder)
    results = load_results(folder) if folder.is_dir() else []
    if not results:
        raise ConfigError(f"no result files (<method>/seed<k>.json) under {folder}")
    for task in sorted({r["task"] for r in results}):
        subset = [r for r in results if r["task"] == task]
        rendered = tables.render(subset, args.format)
        print(f"Task {task}\n\nAccuracy\n{rendered['accuracy']}\n\nTiming ({tables.hardware_line(subset)})\n{rendered['timing']}\n")
        tables.write_tables(subset, folder if len({r['task'] for r in results}) == 1 else folder / task)
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    from harness import bench

    return bench.gate(args.against, args.factor, args.bench)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {"run": cmd_run, "list": cmd_list, "table": cmd_table, "bench": cmd_bench}[args.command]
    try:
        return handler(args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
