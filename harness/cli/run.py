"""``harness run``: plan a task's runs, check them, run them with the launcher asked for, show the tables."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import options
from harness.cli.lines import plugin_warnings
from harness.cli.runs import finish, grid_of, later
from harness.errors import ConfigError, did_you_mean

NAME = "run"
HELP = "train and test methods of a task; write results and tables"
EXAMPLE = "python -m harness run tasks/synthetic.yaml --methods contrastive,swamp --epochs 2"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    options.grid(parser)
    parser.add_argument("task", help="task YAML, e.g. tasks/synthetic.yaml")
    options.selection(parser)
    options.test_stat(parser)
    options.launcher(parser, "sequential (default): the runs one after another in this process; local: each run in a "
                             "worker process of its own, --jobs at a time; slurm: one SLURM job per run, submitted as "
                             "a job array through submitit (docs/slurm.md)")
    parser.add_argument("--slurm", default=None, metavar="KEY=VALUE,...",
                        help="options of --launcher slurm, e.g. partition=gpu,gpus_per_node=1,timeout_min=600 (they "
                             "override the task file's launcher.slurm section; docs/slurm.md lists them)")
    parser.add_argument("--wait", action="store_true",
                        help="with --launcher slurm: wait for the jobs, with a progress bar, and print the tables")
    parser.add_argument("--on-nan", choices=("stop", "skip"), default="stop",
                        help="a step with a NaN or infinite loss: stop the run there (default) or skip its update")


def handle(args: argparse.Namespace) -> int:
    from harness.config import params as P
    from harness.config import plan
    from harness.report import accuracy
    from harness.run import checkpoint, contention, grid, preflight
    from harness.store.schema import result_path

    watch = contention.snapshot()  # from here to the first training step: how busy is the machine?
    overrides = list(args.overrides) + ([f"dataset.root={args.data_root}"] if args.data_root else [])
    init = Path(args.init) if args.init else None
    if init is not None:
        checkpoint.checkpoint_of(init)
    methods = [m for m in args.methods.split(",") if m]
    runs = plan.plan(args.task, overrides, args.sweep, methods, plan.parse_seeds(args.seeds), args.epochs,
                     checkpoint.init_label(init) if init else None)
    _undeclared(args.task, methods)
    plugin_warnings()  # before the runs start rather than after their tables
    names = list(dict.fromkeys(r.run_name for r in runs))
    try:
        args.reference = plan.resolve_reference(args.reference, ((r.run_name, r.method) for r in runs))
    except ConfigError:
        raise ConfigError(f"--reference {args.reference!r} is not among this command's runs: {', '.join(names)}"
                          f"{did_you_mean(args.reference, names)}; name one of them (or the method of exactly "
                          "one of them)") from None
    if args.test_stat is not None:
        accuracy.tested_column(P.as_dict(runs[0].spec.metrics), args.test_stat)
    out = Path(args.out)
    preflight.check_out(out, [result_path(out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    setup = grid_of(args, init=init, later=later(args, runs[0].spec.path, runs[0].spec.name))
    opts = grid.options(setup, watch)
    if setup.launcher != "slurm" and opts.dist.is_main:  # SLURM jobs train on other machines
        preflight.check_precision(runs, opts.device)
    outcome = grid.run(runs, setup, opts)
    if args.reference in outcome.refused_names:
        args.reference = None  # refused: it has no result to compare with
    return finish(outcome, args, {runs[0].spec.name})


def _undeclared(task: str, methods: list[str]) -> None:
    """A note for each registered method the task file does not declare: it runs with its default settings."""
    from harness.config import spec as spec_file

    declared = spec_file.read_yaml(Path(task)).get("methods") or {}
    for name in dict.fromkeys(m for m in methods if m not in declared):
        print(f"note: {name} is a registered method that {task} does not declare: it runs with its default "
              f"settings (declare it to set them: `{name}: {{method: {name}}}` under methods:)", file=sys.stderr)
