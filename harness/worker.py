"""A worker process of ``run --launcher local`` and of each SLURM job: ``python -m harness.worker``.

It runs one :class:`harness.run.grid.Job` (a JSON object: the run, the command's options) after another in this
one process: from stdin, one job a line, each answered on stdout with one JSON line ``{"returncode",
"last_line", "seconds"}``, the last line being the job's ``error:`` line (or the last line it wrote to stderr);
or, with ``--job JSON``, the one job given, ending with its exit status (what a SLURM job runs). Exit statuses
are the command line's: 2 for bad input, 3 for a run that stopped. Keeping the process between runs saves each
run's start (importing torch and the harness, building or loading the Sinkhorn kernels); every run still builds
its data, model and generators from its own settings, exactly as a sequential ``harness run`` of several runs
does in its one process. What the runs print to stdout is discarded; end of input ends the worker.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time


def run(text: str) -> int:
    """Run the job ``text`` describes; its exit status, with the one ``error:`` line on stderr when it failed."""
    from harness.errors import ConfigError, RunError, report
    from harness.run import grid

    try:
        grid.run_job(grid.Job.from_json(text))
        return 0
    except (ConfigError, RunError) as err:
        return report(err)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return next((line for line in reversed(lines) if line.startswith("error:")), lines[-1] if lines else "")


def serve() -> int:
    """Answer the jobs of stdin, one a line, on the process's stdout; everything else written to stdout is
    discarded."""
    reply = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)  # the protocol's channel
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())  # what the runs (and C code) print goes nowhere
    for line in sys.stdin:
        if not line.strip():
            continue
        stderr = io.StringIO()
        start = time.perf_counter()
        with contextlib.redirect_stderr(stderr):
            try:
                code = run(line)
            except Exception as exc:  # noqa: BLE001 - a bug in one run is that run's failure, reported as one line
                code = 1
                print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        reply.write(json.dumps({"returncode": code, "last_line": _last_line(stderr.getvalue()),
                                "seconds": time.perf_counter() - start}) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--job"] and len(argv) == 2:
        return run(argv[1])
    if argv:
        print("usage: python -m harness.worker [--job JSON]  (without --job: one job a line on stdin)",
              file=sys.stderr)
        return 2
    return serve()


if __name__ == "__main__":
    sys.exit(main())
