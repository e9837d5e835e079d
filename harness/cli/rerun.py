"""``harness rerun``: every given result file's run, rebuilt from the settings the file records."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli import options
from harness.cli.runs import finish, grid_of

NAME = "rerun"
HELP = "run again what result files record, from their own settings; --check: compare the metrics"
EXAMPLE = "python -m harness rerun results/synthetic/contrastive/seed0.json --check"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.plugins(parser)
    options.grid(parser)
    parser.add_argument("results", nargs="+", metavar="RESULT",
                        help="result files (seed<k>.json), or folders searched for them, e.g. results/wikipedia")
    parser.add_argument("--check", action="store_true",
                        help="compare each run's test metrics with the recorded ones; exit 1 when any differ")
    options.launcher(parser, "sequential (default): one run after another in this process; local: worker "
                             "processes, --jobs at a time, as for run", slurm=False)


def handle(args: argparse.Namespace) -> int:
    from harness.run import grid, preflight
    from harness.store.schema import result_path

    records = grid.result_records(args.results)
    runs, _ = grid.reruns(records, args.data_root, "sequential")  # checked first: the same run twice, checkpoints
    out = Path(args.out)
    preflight.check_out(out, [result_path(out, r.spec.name, r.run_name, r.seed).parent for r in runs])
    preflight.check_environment()
    setup = grid_of(args)
    opts = grid.options(setup)
    for line in grid.rerun_warnings(records, opts.device.type, opts.dist.world_size, options.fixed_threads(args)):
        print(f"warning: {line}", file=sys.stderr)
    if opts.dist.is_main:  # a rerun repeats the recorded precision: fp32 is a new run of the task
        preflight.check_precision(runs, opts.device, "a new `harness run` of the task with --set train.precision=fp32")
    print(f"re-running {len(runs)} run(s) from their result files into {out}/")
    outcome = grid.rerun(records, setup, opts)
    check = (lambda results: grid.check_reruns(records, results, opts.device.type)) if args.check else None
    return finish(outcome, args, {r.spec.name for r in runs}, check)
