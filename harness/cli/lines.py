"""What a command writes to stderr besides its own lines: Python warnings, library log records and plugin files that
failed to import, each as one ``warning:`` line (docs/reliability.md)."""
from __future__ import annotations

import logging
import sys
from typing import TextIO


def show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                 file: TextIO | None = None, line: str | None = None) -> None:
    """``warnings.showwarning`` of a command: one ``warning:`` line, the category and the message's first line
    (Python's own format spans several lines: the message, its source file and the source line)."""
    print(f"warning: {category.__name__}: {first_line(message)}", file=sys.stderr if file is None else file)


class LogLines(logging.Handler):
    """A library's log records of level WARNING and above as one ``warning:`` line each on stderr (the logger's
    name and the message's first line); without a handler Python prints them bare."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            print(f"warning: {record.name}: {first_line(record.getMessage())}", file=sys.stderr)
        except (TypeError, ValueError, OSError):  # logging's rule: a record that cannot be shown is reported
            self.handleError(record)


def first_line(message: object) -> str:
    """The first non-empty line of ``message``."""
    return next((text.strip() for text in str(message).splitlines() if text.strip()), "")


def plugin_warnings(error: str = "") -> None:
    """Print the plugin files that failed to import, except one the error line already names."""
    from harness.config import registry

    for line in registry.take_warnings():
        file = line.split("skipped plugin file ", 1)[1].split(" (", 1)[0]
        if file not in error:
            print(line, file=sys.stderr)
