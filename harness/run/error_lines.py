"""The one scanner of a failed process's text for the line that says why it failed: a worker's stderr (its reply's
``last_line``), a SLURM job's report through submitit, a tuning worker's log."""
from __future__ import annotations

ERROR = "error:"


def error_line(text: str, default: str = "") -> str:
    """The line of ``text`` that says why it failed: the last line that starts with ``error:`` (the harness's own one
    error line); else the last that holds one (an exception that quotes a worker's error line); else the last
    exception line (``UncompletedJobError: Job not requeued ...``, its module dropped); else the last non-empty line;
    ``default`` when ``text`` has none."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for found in (next((ln for ln in reversed(lines) if ln.startswith(ERROR)), None),
                  next((ln for ln in reversed(lines) if ERROR in ln), None)):
        if found is not None:
            return found
    for line in reversed(lines):
        name, sep, message = line.partition(": ")
        if sep and name.replace(".", "").replace("_", "").isalnum() and name.split(".")[-1][:1].isupper():
            return f"{name.split('.')[-1]}: {message}"
    return lines[-1] if lines else default
