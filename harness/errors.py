"""Errors raised where bad input enters the harness, with the fix in the message."""
from __future__ import annotations

import difflib
from collections.abc import Iterable


class ConfigError(ValueError):
    """Bad task file, method parameter or command-line value: the CLI exits with status 2."""


class DataError(ConfigError):
    """Missing or malformed dataset files."""


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """Return ' (did you mean X?)' for the closest valid choice, or '' when none is close."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean {close[0]!r}?)" if close else ""


def unknown(kind: str, name: str, choices: Iterable[str], where: str = "") -> ConfigError:
    """Build the standard 'unknown X' error naming the valid choices."""
    choices = sorted(choices)
    at = f" in {where}" if where else ""
    return ConfigError(
        f"unknown {kind} {name!r}{at}{did_you_mean(name, choices)}; valid: {', '.join(choices) or '(none)'}"
    )
