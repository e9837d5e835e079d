"""``python -m harness.cli.memory TASK [METHOD ...]``: the memory preflight's estimate of each method of a task
(:mod:`harness.run.memory`), printed without training.

A script of its own, not a subcommand of ``python -m harness``: the preflight runs by itself before every run; this
prints what it counts.
"""
from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Parse the command line and print the data's and each method's estimate in MiB."""
    import torch

    from harness.config.spec import load_task
    from harness.run.memory import data_needs, run_needs
    from harness.run.runner import load_data

    parser = argparse.ArgumentParser(prog="python -m harness.cli.memory", description=__doc__.splitlines()[0])
    parser.add_argument("task")
    parser.add_argument("methods", nargs="*")
    parser.add_argument("--device", default="cpu", help="cpu, or cuda to count the data moved to the device")
    args = parser.parse_args(argv)
    spec = load_task(args.task)
    for need in data_needs(spec):
        print(f"data     {need.bytes / 2**20:12.1f} MiB  {need.what}")
    data = load_data(spec)
    for name in args.methods or list(spec.methods):
        needs = run_needs(spec, name, data, torch.device(args.device))
        for need in needs:
            print(f"{name:<8} {need.bytes / 2**20:12.1f} MiB  {need.what}")
        print(f"{name:<8} {sum(n.bytes for n in needs) / 2**20:12.1f} MiB  total")
    return 0


if __name__ == "__main__":
    sys.exit(main())
