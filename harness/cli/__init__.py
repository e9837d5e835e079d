"""Command line: ``python -m harness {run,tune,leaderboard,rerun,list,table,...} ...``. Bad input exits with status 2.

One module per subcommand, each with its ``NAME``, ``HELP``, ``EXAMPLE`` (shown under its --help; tests/test_cli.py
parses every one and runs the quick ones), ``add_arguments(parser)`` and ``handle(args)``; :data:`COMMANDS` lists
them in the order --help shows them. The options several subcommands share are functions of
:mod:`harness.cli.options`; :mod:`harness.cli.parser` holds the parser, whose usage errors are error lines and which
turns a parsed command back into its words.

May import: every layer below it (``tune``, ``remake``, ``analysis``, ``report``, ``run``, ``config``, ``store``,
``errors``; the heavy ones inside ``handle``, so that ``--help`` stays quick). Never ``worker``."""
from __future__ import annotations

import argparse
import logging
import sys
import warnings
from types import ModuleType

from harness.cli import (
    bench,
    carry,
    claims,
    clusters,
    compare,
    ensemble,
    leaderboard,
    listing,
    plot,
    readme,
    report,
    reproduce,
    rerun,
    run,
    status,
    table,
    tune,
)
from harness.cli.lines import LogLines, plugin_warnings, show_warning
from harness.cli.parser import Parser, program, unrecognized
from harness.errors import ConfigError, RunError
from harness.errors import report as report_error

COMMANDS: tuple[ModuleType, ...] = (run, tune, leaderboard, rerun, listing, table, plot, clusters, ensemble, compare,
                                    report, claims, readme, reproduce, carry, status, bench)
EXAMPLES = {command.NAME: command.EXAMPLE for command in COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; ``args.subcommands`` holds each subcommand's parser by name."""
    parser = Parser(prog=program(), description="SwAMP Bench: cross-modal retrieval benchmarks")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        # the example on one line, as typed
        one = sub.add_parser(command.NAME, help=command.HELP, epilog=f"example: {command.EXAMPLE}",
                             formatter_class=argparse.RawDescriptionHelpFormatter)
        command.add_arguments(one)
    parser.set_defaults(subcommands=sub.choices)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; bad input exits with status 2 and a run that stopped with status 3, each with
    one ``error:`` line on stderr, its last line. Every line the command writes to stderr starts with
    ``error: ``, ``warning: `` or ``note: `` (docs/reliability.md): Python warnings and library log records
    become one ``warning:`` line each while it runs. Plugin files that failed to import are reported once,
    as warnings."""
    previous = warnings.showwarning
    warnings.showwarning = show_warning
    lines = LogLines()
    logging.getLogger().addHandler(lines)
    try:
        return _main(argv)
    finally:
        warnings.showwarning = previous
        logging.getLogger().removeHandler(lines)


def _main(argv: list[str] | None) -> int:
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)  # --help prints and exits here: nothing heavy is imported yet
        if extra:
            raise unrecognized(args.subcommands[args.command], extra)
        from harness.config import registry
        from harness.store import provenance

        registry.set_include(getattr(args, "include", []))
        provenance.set_command(sys.argv[1:] if argv is None else argv)
        handler = next(c for c in COMMANDS if c.NAME == args.command).handle  # looked up now: tests replace it
        code: int = handler(args)
        plugin_warnings()
        return code
    except (ConfigError, RunError) as err:
        plugin_warnings(str(err))
        return report_error(err)
