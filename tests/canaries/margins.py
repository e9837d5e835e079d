"""How far the canaries' tolerance sits from what another summation order moves and from what a code change
moves (the numbers quoted in tests/canaries/README.md).

    python -m tests.canaries.margins

For every canary (tests/test_canaries.py: every registered method and every variant) it runs the canary in two
fresh processes, as made (this CPU's vector kernels) and with every sum in another order (torch without vector
instructions, MKL's compatible path), and prints the largest relative difference between the two traces; then
SwAMP's swapped-assignment loss and the contrastive hinge scaled by 1 + 1e-7, and the largest relative difference
that causes. The canary's tolerance (RTOL) should sit between the two, far from each.
"""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any
from unittest import mock

from tests import conftest
from tests import test_canaries as tc


def _numbers(trace: dict[str, Any]) -> list[float]:
    return [v for step in trace["steps"] for _, v in sorted(step.items())] + \
        [v for row in trace["scores"] for v in row]


def largest_gap(a: dict[str, Any], b: dict[str, Any]) -> float:
    """The largest relative difference between two traces' numbers (0 when identical)."""
    gaps = [abs(x - y) / max(abs(x), 1e-300) for x, y in zip(_numbers(a), _numbers(b))
            if not (math.isnan(x) and math.isnan(y)) and x != y]
    return max(gaps, default=0.0)


def main() -> None:
    import os

    import torch

    kinds = tc.CASES
    made = tc.traces_in_a_process(kinds, {})
    other = tc.traces_in_a_process(kinds, tc.OTHER_ORDER)
    print(f"{'method':22s} {'other summation order':>22s}")
    worst = 0.0
    for kind in kinds:
        gap = largest_gap(made[kind], other[kind])
        worst = max(worst, gap)
        print(f"{kind:22s} {gap:22.2g}")
    print(f"{'largest':22s} {worst:22.2g}")
    os.environ["SWAMP_BENCH_SINKHORN_COMPILE"] = "off"
    torch.set_num_threads(1)
    folder = Path(tempfile.mkdtemp())
    tasks = (conftest.write_task(folder, conftest.TINY, "tiny.yaml"),)
    import baselines.contrastive as contrastive
    import baselines.swamp as swamp

    for module, name, kind in ((swamp, "swamp_loss", "swamp"), (contrastive, "max_violation_loss", "contrastive")):
        base = tc.canary(kind, tasks)
        original = getattr(module, name)
        with mock.patch.object(module, name, lambda *a, _f=original, **k: _f(*a, **k) * (1 + 1e-7)):
            moved = tc.canary(kind, tasks)
        print(f"{kind}: {name} x (1 + 1e-7) moves the trace by up to {largest_gap(base, moved):.2g} (relative)")
    print(f"canary tolerance RTOL = {tc.RTOL:g}")


if __name__ == "__main__":
    main()
