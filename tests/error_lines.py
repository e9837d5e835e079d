"""What a command writes to stderr (docs/reliability.md, "What a failing command prints"): every line starts with
``error: ``, ``warning: `` or ``note: ``; a command that fails prints exactly one ``error: `` line, its last. The
tests that read a failed command's error line take it through :func:`error_line`, which checks all of that."""
from __future__ import annotations

import re

PREFIXES = ("error: ", "warning: ", "note: ")
FRAME = re.compile(r"\d+%\|")  # a frame of a progress bar (redrawn in place; --no-progress hides them)


def stderr_lines(stderr: str, progress: bool = False) -> list[str]:
    """The lines of ``stderr``; with ``progress``, without the frames of progress bars (and the empty pieces between
    frames that a carriage return leaves)."""
    lines = stderr.splitlines()
    if progress:
        lines = [line for line in lines if line.strip() and not FRAME.search(line)]
    return lines


def prefixed(stderr: str, progress: bool = False) -> list[str]:
    """The lines of ``stderr``, each checked to start with one of :data:`PREFIXES`."""
    lines = stderr_lines(stderr, progress)
    bare = [line for line in lines if not line.startswith(PREFIXES)]
    assert not bare, f"stderr lines without error:/warning:/note: {bare}; stderr:\n{stderr}"
    return lines


def error_line(stderr: str, alone: bool = False, progress: bool = False) -> str:
    """The error line of a failed command's ``stderr``: the only line starting with ``error: ``, the last line,
    every line before it a ``warning: `` or ``note: `` line; ``alone``: no line before it either (bad input stops
    before anything else is printed). ``progress``: frames of progress bars may lie between the lines."""
    lines = prefixed(stderr, progress)
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, f"{len(errors)} error: lines, one expected; stderr:\n{stderr}"
    assert lines[-1] == errors[0], f"the error: line is not the last line; stderr:\n{stderr}"
    if alone:
        assert lines == errors, f"lines before the error: line; stderr:\n{stderr}"
    return errors[0]
