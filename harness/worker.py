"""A worker process of ``run --launcher local``: ``python -m harness.worker``.

It runs one ``python -m harness`` command line after another in this one process, as the launcher hands them
over: each is read from stdin as a JSON list of arguments, run through :func:`harness.cli.main`, and answered
on stdout with one JSON line ``{"returncode", "last_line", "seconds"}``, the last line being the command's
``error:`` line (or the last line it wrote to stderr). Keeping the process between runs saves each run's start
(importing torch and the harness, building or loading the Sinkhorn kernels); every run still builds its data,
model and generators from its own settings, exactly as a sequential ``harness run`` of several runs does in
its one process. The commands' own stdout is discarded (the launcher prints the tables at the end); end of
input ends the worker.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return next((line for line in reversed(lines) if line.startswith("error:")), lines[-1] if lines else "")


def main() -> int:
    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)  # the protocol's channel
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # what the commands (and C code) print goes nowhere
    from harness import cli

    for line in sys.stdin:
        if not line.strip():
            continue
        argv = json.loads(line)
        stderr = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(stderr):
            try:
                code = cli.main(argv)
            except SystemExit as exc:  # argparse's own exits
                code = exc.code if isinstance(exc.code, int) else 2
            except Exception as exc:  # noqa: BLE001 - a bug in one run is that run's failure, reported as one line
                code = 1
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        reply.write(json.dumps({"returncode": code, "last_line": _last_line(stderr.getvalue()),
                                "seconds": time.perf_counter() - start}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
