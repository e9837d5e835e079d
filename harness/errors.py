"""Errors raised where bad input enters the harness, with the fix in the message.

Two families, two exit statuses of the CLI:

- :class:`ConfigError` (and :class:`DataError`): the command, a task file or a dataset is wrong.
  Raised before anything trains or is written; exit status 2.
- :class:`RunError`: a run stopped for a reason found while it ran (a non-finite loss, out of
  memory, a write that failed). Finished results and the last complete checkpoint stay as they
  were, no partial result is written; exit status 3.
"""
from __future__ import annotations

import difflib
import sys
from collections.abc import Iterable, Sequence
from typing import Any


class ConfigError(ValueError):
    """Bad task file, method parameter or command-line value: the CLI exits with status 2."""


class DataError(ConfigError):
    """Missing or malformed dataset files."""


class NotApplicable(ConfigError):
    """A method that cannot apply to this data at all (``identity`` on modalities of two widths): among other
    methods it is skipped with a note; alone, it is an error like any other."""


class RunError(RuntimeError):
    """A run stopped while running (non-finite loss, out of memory, failed write): the CLI exits with status 3."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest valid choice, or '' when none is close."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown(kind: str, name: str, choices: Iterable[str], where: str = "") -> ConfigError:
    """Build the standard 'unknown X' error naming the valid choices."""
    choices = sorted(str(c) for c in choices)
    at = f" in {where}" if where else ""
    return ConfigError(
        f"unknown {kind} {name!r}{at}{did_you_mean(name, choices)}; valid: {', '.join(choices) or '(none)'}"
    )


def check_keys(mapping: Iterable[Any], allowed: Sequence[str], where: str, what: str) -> None:
    """ConfigError on the first key of ``mapping`` not in ``allowed``: '<where>.<key> is not a key of <what> (did you
    mean ...?); keys: ...'."""
    for key in mapping:
        if key not in allowed:
            raise ConfigError(f"{where}.{key} is not a key of {what}{did_you_mean(str(key), allowed)}; keys: "
                              f"{', '.join(allowed)}")


def one_line(err: BaseException) -> str:
    """The error's message on one line (a listing of expected files becomes a '; '-separated run)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return "; ".join(lines).replace(":;", ":")


def report(err: ConfigError | RunError) -> int:
    """Print ``err`` as the command's one ``error:`` line on stderr; its exit status (2 bad input, 3 a stopped run)."""
    print(f"error: {one_line(err)}", file=sys.stderr)
    return 2 if isinstance(err, ConfigError) else 3
