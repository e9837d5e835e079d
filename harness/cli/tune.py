"""``harness tune``: the same tuning budget for every method (:mod:`harness.tune.command`)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.cli import options

NAME = "tune"
HELP = ("the same tuning budget for every method (Optuna, validation split), then its best settings trained with the "
        "seeds and tested")
EXAMPLE = "python -m harness tune tasks/synthetic.yaml --methods contrastive,swamp --trials 4 --epochs 2 --out runs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    options.grid(parser)
    options.plugins(parser)
    parser.add_argument("task", help="task YAML, e.g. tasks/own_features_labels.yaml")
    parser.add_argument("--methods", required=True, help="comma-separated methods to compare, each tuned alike")
    options.tune(parser, seeds="0")
    parser.add_argument("--folds", type=int, default=0, metavar="K",
                        help="choose by the mean over K >= 3 folds of the training split instead of the validation "
                             "split (default 0: the validation split)")
    parser.add_argument("--row", dest="rows", action="append", default=[], help=argparse.SUPPRESS)  # METHOD=ROW
    fixed_threads(parser)


def fixed_threads(parser: argparse.ArgumentParser) -> None:
    """``--threads`` of the tuning commands: a fixed number of torch threads for every trial and tuned run, 1 by
    default, never derived from ``--jobs`` or the machine's load."""
    parser.set_defaults(threads=1)
    for action in parser._actions:  # the shared grid option's help speaks of torch's own default
        if action.dest == "threads":
            action.help = ("torch threads of every trial and tuned run (default: 1, whatever --jobs or the machine's "
                           "load, so that --jobs changes only the wall time)")


def tune_options(args: argparse.Namespace, **changes: Any) -> Any:
    """The command line's arguments as :class:`harness.tune.options.TuneOptions` (``changes`` over them)."""
    from harness.errors import ConfigError
    from harness.tune.options import TuneOptions

    if args.threads == "auto":
        raise ConfigError("harness tune trains every trial with the same threads, so that the trials compare: give "
                          "--threads N (default 1)")
    rows = []
    for text in getattr(args, "rows", None) or []:
        method, _, row = str(text).partition("=")
        rows.append((method, row or method))
    methods = tuple(m for m in str(getattr(args, "methods", "") or "").split(",") if m)
    values = dict(
        task=getattr(args, "task", ""), methods=methods,
        out=Path(args.out), device=args.device, data_root=args.data_root, reference=args.reference, force=args.force,
        jobs=args.jobs, threads=int(args.threads), no_progress=args.no_progress, no_tables=args.no_tables,
        trials=args.trials, seconds_per_method=args.seconds_per_method, seeds=args.seeds, study_seed=args.study_seed,
        overrides=tuple(args.overrides), epochs=args.epochs, storage=args.storage, launcher=args.launcher,
        slurm=args.slurm, prune=args.prune, prune_warmup=args.prune_warmup, no_final=args.no_final,
        studies_only=args.studies_only, finals_only=getattr(args, "finals_only", False), worker=args.worker,
        include=tuple(args.include),
        folds=int(getattr(args, "folds", 0) or 0), rows=tuple(rows))
    values.update(changes)
    return TuneOptions(**values)


def handle(args: argparse.Namespace) -> int:
    quiet_optuna()
    from harness.tune import command

    return command.tune(tune_options(args))


def quiet_optuna() -> None:
    """Optuna's log records take the command's one-line warnings (main's handler), not Optuna's own console
    format."""
    import optuna

    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
