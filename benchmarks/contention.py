"""Training-step time on a quiet machine and beside other processes, under OpenMP's wait settings and two thread
counts: what the harness's defaults for both are chosen from (docs/measurement.md).

    python -m benchmarks.contention --out results/contention [--epochs 2] [--threads 2,1]

For each machine state (``quiet``; ``loops`` beside two busy Python loops; ``torch`` beside a matmul loop and a
softmax loop, each a separate process with torch's default threads and wait policy, as other people's jobs
would be) and each setting (the wait: libgomp's own default with neither variable set, ``OMP_WAIT_POLICY`` active or
passive, or a ``GOMP_SPINCOUNT``; the threads: ``--threads`` N, torch's default, or ``--threads auto``, which lowers
them on a machine it finds busy), one ``python -m harness run tasks/synthetic.yaml --methods contrastive,swamp`` runs
in a fresh process (OpenMP reads its variables when it starts); the step medians come from its result files. Writes
``contention.json`` (every figure and the machine) and ``contention.md`` (the table) under ``--out``.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from benchmarks import pages

ROOT = Path(__file__).resolve().parent.parent
LOADS = {  # machine state -> the other processes' code, one process each
    "quiet": [],
    "loops": ["while True: pass"] * 2,
    "torch": ["import torch\na = torch.randn(512, 512)\nwhile True:\n    a = torch.tanh(a @ a) ",
              "import torch\nx = torch.randn(256, 1024)\nwhile True:\n    x = torch.softmax(x, 1) * 1024 "],
}


@contextmanager
def other_torch_processes(state: str) -> Iterator[None]:
    """Nothing for ``quiet``; two busy Python loops for ``loops``; the two torch loops for ``torch``; started before
    and killed after the block."""
    if not LOADS[state]:
        yield
        return
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS")}
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env) for code in LOADS[state]]
    try:
        time.sleep(3.0)  # torch imported and looping
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


WAITS = {  # the wait setting's name -> the OpenMP variables it sets (the others are removed)
    "unset": {},  # libgomp's own default: spin a while (GOMP_SPINCOUNT 300,000), then sleep
    "active": {"OMP_WAIT_POLICY": "ACTIVE"},  # spin (almost) forever
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},  # sleep at once
    "spin 10k": {"GOMP_SPINCOUNT": "10000"},
}


def run_once(wait: str, threads: int | str | None, epochs: int, out: Path) -> dict[str, float]:
    """Median train step (ms) per method of one harness run under the wait setting ``wait`` and ``threads`` (None:
    torch's default; ``auto``: the harness's --threads auto), and the threads it trained with."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_NUM_THREADS")}
    env.update({**WAITS[wait], "PYTHONPATH": str(ROOT)})
    cmd = [sys.executable, "-m", "harness", "run", str(ROOT / "tasks" / "synthetic.yaml"), "--methods",
           "contrastive,swamp", "--epochs", str(epochs), "--out", str(out), "--no-progress", "--no-tables",
           *(["--threads", str(threads)] if threads is not None else []), "--force"]
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    steps = {}
    for method in ("contrastive", "swamp"):
        (path,) = (out / "synthetic").glob(f"{method}@*/seed0.json")
        result = json.loads(path.read_text())
        steps[method] = result["profile"]["timing"]["train_step"]["median_s"] * 1e3
        train = (result["profile"].get("contention") or {}).get("train", {})
        steps[f"{method}_contended"] = bool(train.get("contended"))
        steps[f"{method}_threads"] = train.get("threads")
    return steps


HEADER = ["machine", "OpenMP wait", "threads", "contrastive step ms", "SwAMP step ms", "SwAMP / contrastive"]


def table_rows(rows: list[dict]) -> list[list[str]]:
    """The table's cells: each run's step medians, slowdown against the quiet machine at the same setting and its
    contention mark, and SwAMP's step over contrastive's."""
    quiet = {(r["wait"], r["threads"]): r for r in rows if r["state"] == "quiet"}
    out = []
    for r in rows:
        base = quiet.get((r["wait"], r["threads"]))
        shown = {None: "default", "auto": "auto"}.get(r["threads"], r["threads"])
        shown = f"{shown} ({r['contrastive_threads']})" if r["threads"] in (None, "auto") else shown

        def cell(m: str, r: dict = r, base: dict | None = base) -> str:
            slow = f" ({r[m] / base[m]:.1f}× quiet)" if base and r is not base else ""
            mark = " [contended]" if r[f"{m}_contended"] else ""
            return f"{r[m]:.1f}{slow}{mark}"

        out.append([r["state"], r["wait"], str(shown), cell("contrastive"), cell("swamp"),
                    f"{r['swamp'] / r['contrastive']:.2f}×"])
    return out


def markdown(record: dict, command: str) -> str:
    """``contention.md`` of a record (``contention.json``): the machine line and the table."""
    return pages.render(
        "contention.md", command=command, epochs=record["epochs"], machine=record["machine"], header=HEADER,
        rows=table_rows(record["rows"]))


@dataclass(frozen=True)
class ContentionOptions:
    """Where the files go, the epochs of each run, and the thread counts tried beside torch's default and ``auto``
    (the first is the machine's cores, which the default already uses)."""

    out: Path
    epochs: int = 2
    threads: tuple[int, ...] = (len(os.sched_getaffinity(0)), 1)


def measure(options: ContentionOptions) -> dict:
    """Every machine state under every setting, one fresh harness run each: the record ``contention.json`` holds.

    >>> measure(ContentionOptions(Path("results/contention"), epochs=1, threads=(2, 1)))  # doctest: +SKIP
    """
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for state in LOADS:
            with other_torch_processes(state):
                settings: list[tuple[str, int | str | None]] = [(wait, None) for wait in WAITS] + \
                    [("unset", "auto")] + [("unset", t) for t in options.threads[1:]]
                for wait, threads in settings:
                    steps = run_once(wait, threads, options.epochs, Path(tmp))
                    rows.append({"state": state, "wait": wait, "threads": threads, **steps})
                    print(rows[-1], flush=True)
    machine = {"cpu": platform.processor() or platform.machine(), "cores": len(os.sched_getaffinity(0)),
               "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}
    return {"machine": machine, "epochs": options.epochs, "rows": rows}


def write(record: dict, out: Path) -> None:
    """``contention.json`` and ``contention.md`` under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "contention.json").write_text(json.dumps(record, indent=2) + "\n")
    (out / "contention.md").write_text(markdown(record, f"python -m benchmarks.contention --out {out}"))


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.contention``: the command line, converted once to :class:`ContentionOptions`."""
    import argparse

    from tabulate import tabulate

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--threads", default=f"{len(os.sched_getaffinity(0))},1")
    args = parser.parse_args(argv)
    options = ContentionOptions(args.out, args.epochs, tuple(int(t) for t in args.threads.split(",")))
    record = measure(options)
    write(record, options.out)
    print(tabulate(table_rows(record["rows"]), headers=HEADER, disable_numparse=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
