"""The command line's parser: usage errors as one ``error:`` line (exit status 2), and a parsed command turned back
into its words (:meth:`Parser.argv_of`), from the parser's own actions."""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any, NoReturn

from harness.errors import ConfigError, did_you_mean


def program() -> str:
    """How the command was typed: ``swamp-bench`` (the installed console script) or ``python -m harness``."""
    return "swamp-bench" if Path(sys.argv[0]).name == "swamp-bench" else "python -m harness"


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are ConfigErrors: one line and exit status 2, like any other bad input."""

    def error(self, message: str) -> NoReturn:
        choice = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        hint = did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2))) if choice else ""
        raise ConfigError(f"{message}{hint}; see `{self.prog} --help`")

    def argv_of(self, args: Any, **changes: Any) -> list[str]:
        """The words that this parser parses back into ``args`` (a Namespace, with ``changes`` over it): one
        per action of the parser, a value equal to its default left out; attributes the parser does not define are
        ignored. A parser with subcommands adds the chosen one (``args.<dest>``) and its own words."""
        values = {**vars(args), **changes}
        positionals: list[str] = []
        options: list[str] = []
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                name = values[action.dest]
                words: list[str] = action.choices[name].argv_of(args, **changes)
                return options + [name] + words
            if action.dest == argparse.SUPPRESS or action.dest not in values:
                continue
            value = values[action.dest]
            if value is None or value == action.default:
                continue
            if action.option_strings:
                options += _option_words(action, value)
            else:
                positionals += [str(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
        if any(w.startswith("-") for w in positionals):
            return options + ["--"] + positionals
        return positionals + options


def _option_words(action: argparse.Action, value: Any) -> list[str]:
    """An optional argument's words for ``value``: its flag alone (store_true and the like), once per item
    (append), or with its value(s)."""
    flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
    if action.nargs == 0:  # store_true, store_false, store_const
        return [flag] if value == action.const else []
    if isinstance(action, argparse._AppendAction):
        default = list(action.default or [])
        items = list(value)[len(default):] if list(value)[:len(default)] == default else list(value)
        return [w for item in items for w in _one(flag, item)]
    if isinstance(value, (list, tuple)) and action.nargs not in (None, "?"):
        return [flag, *(str(v) for v in value)]
    return _one(flag, value)


def _one(flag: str, value: Any) -> list[str]:
    text = str(value)
    return [f"{flag}={text}"] if text.startswith("-") else [flag, text]


def unrecognized(parser: argparse.ArgumentParser, extra: list[str]) -> ConfigError:
    """Unknown options of a subcommand, with the closest valid option."""
    options = [o for action in parser._actions for o in action.option_strings]
    flag = next((e for e in extra if e.startswith("-")), extra[0]).split("=")[0]
    return ConfigError(f"unrecognized arguments: {' '.join(extra)}{did_you_mean(flag, options)}; "
                       f"see `{parser.prog} --help`")
