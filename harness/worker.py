"""A worker process of ``run --launcher local`` and of each SLURM job: ``python -m harness.worker``.

It runs one :class:`harness.run.grid.Job` (a JSON object: the run, the command's options) after another in this
one process: from stdin, one job a line, each answered on stdout with one JSON line ``{"returncode",
"last_line", "seconds", "trained", "results"}``, the last line being the job's ``error:`` line (or the last line it
wrote to stderr), ``trained`` false when the run was found finished, ``results`` its result files; or, with
``--job JSON [--reply PATH]``, the one job given, ending with its exit status, the same reply written to PATH (what
a SLURM job runs: :class:`harness.run.slurm.RunJob` reads the reply, not the job's printed lines). Exit statuses
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
from typing import Any

from harness.run.error_lines import error_line


def run(text: str, reply: dict[str, Any] | None = None) -> int:
    """Run the job ``text`` describes; its exit status, with the one ``error:`` line on stderr when it failed;
    ``reply`` receives the job's answer (:func:`harness.run.grid.run_job`)."""
    from harness.errors import ConfigError, RunError, report
    from harness.run import grid

    try:
        answer = grid.run_job(grid.Job.from_json(text))
    except (ConfigError, RunError) as err:
        return report(err)
    if reply is not None:
        reply.update(answer)
    return 0


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
        reply.write(json.dumps(answer(line)) + "\n")
    return 0


def answer(text: str, echo: bool = False) -> dict[str, Any]:
    """Run one job and describe how it ended: ``returncode``, ``last_line`` (its error line), ``seconds``,
    ``trained`` and ``results``; with ``echo``, what the job wrote to stderr is written there too (a SLURM job's
    log)."""
    from harness.errors import one_line

    stderr = io.StringIO()
    start = time.perf_counter()
    found: dict[str, Any] = {"trained": False, "results": []}
    with contextlib.redirect_stderr(stderr):
        try:
            code = run(text, found)
        except Exception as exc:  # a bug in one run is that run's failure, reported as one line
            code = 1
            print(f"error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
    if echo:
        sys.stderr.write(stderr.getvalue())
    return {"returncode": code, "last_line": error_line(stderr.getvalue()), "seconds": time.perf_counter() - start,
            **found}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--job"] and len(argv) in (2, 4) and (len(argv) == 2 or argv[2] == "--reply"):
        found = answer(argv[1], echo=True)
        if len(argv) == 4:
            with open(argv[3], "w", encoding="utf-8") as f:
                json.dump(found, f)
        return int(found["returncode"])
    if argv:
        print("error: usage: python -m harness.worker [--job JSON [--reply PATH]]  (without --job: one job a line on "
              "stdin)", file=sys.stderr)
        return 2
    return serve()


if __name__ == "__main__":
    sys.exit(main())
