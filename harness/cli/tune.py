"""``harness tune``: the same tuning budget for every method (:mod:`harness.tune.command`)."""
from __future__ import annotations

import argparse

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


def handle(args: argparse.Namespace) -> int:
    quiet_optuna()
    from harness.tune import command

    return command.cmd(args)


def quiet_optuna() -> None:
    """Optuna's log records take the command's one-line warnings (main's handler), not Optuna's own console
    format."""
    import optuna

    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
