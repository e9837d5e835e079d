"""Where one SwAMP training step spends its time, next to one contrastive step (CPU, torch.profiler).

    python -m benchmarks.profile_swamp_step --threads 2 [--repeats 7] [--steps 20] [--top 12] [--no-profile]

Three steps are built: contrastive, SwAMP with the eager Sinkhorn (``sinkhorn_compile: false``, the code path
before the fused kernel) and SwAMP as configured (``true``: the compiled, fused Sinkhorn). They are built as the
asv suite builds them (:func:`benchmarks.common.train_step`: the synthetic task's batch of 128, SwAMP's
K = 1,000 and queue of 1,280, queue already full) in one process, so the ratios are measured under the same
load. Prints the best-of-``repeats`` mean step time of each and its ratio to contrastive, then ``steps``
profiled steps of each grouped by part (Sinkhorn, log_softmax_nograd, queue, encoders and heads forward,
backward, optimizer) and the top operators by self time.
"""
from __future__ import annotations

import argparse
import time
from collections import defaultdict
from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks import common
from benchmarks.compat import H

# Python function names (": name" ends a profiler's Python event) or operator prefixes -> part of the step.
# The innermost enclosing event that matches decides; operators under none of them are "other".
_PARTS = (
    (": _sinkhorn_plain", "fused_sinkhorn"), (": fused_sinkhorn", "fused_sinkhorn"),
    (": fused_sinkhorn_pair", "fused_sinkhorn"),
    (": sinkhorn", "sinkhorn"), (": log_softmax_nograd", "log_softmax_nograd"),
    (": with_batch", "queue"), (": remember", "queue"), (": encode", "encoders forward"),
    (": log_probs", "heads forward (log_probs)"), (": swamp_loss", "loss"), (": contrastive_term", "loss"),
    (": loss", "loss"), ("autograd::engine", "backward"), (": backward", "backward"),
    ("Optimizer.", "optimizer"), (": clip_grad_norm_", "grad clip"), (": pair_batch", "batch indexing"),
)


def step_ms(steps: dict[str, Callable[[], Any]], n: int, repeats: int) -> dict[str, float]:
    """Best over ``repeats`` of the mean wall-clock milliseconds of ``n`` calls of each step, the steps taking
    turns within every repeat (so a burst of load elsewhere hits all of them alike)."""
    best = {name: float("inf") for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(n):
                step()
            best[name] = min(best[name], (time.perf_counter() - start) / n)
    return {name: 1000.0 * seconds for name, seconds in best.items()}


def _part(event: Any) -> str | None:
    """The part of the step an event belongs to: the innermost enclosing event named in :data:`_PARTS`;
    None for a background thread's (an idle monitor thread's waits are no work of the step)."""
    found = None
    while event is not None:
        if found is None:
            for needle, part in _PARTS:
                if event.name.endswith(needle) if needle.startswith(":") else needle in event.name:
                    found = part
                    break
        if "_bootstrap_inner" in event.name:
            return None
        event = event.cpu_parent
    return found or "other"


def profile_step(step: Callable[[], Any], steps: int) -> tuple[dict[str, float], list[tuple[str, float, int]]]:
    """Self CPU milliseconds per step by part, and per operator (name, ms per step, calls per step)."""
    with profile(activities=[ProfilerActivity.CPU], with_stack=True) as prof:
        for _ in range(steps):
            step()
    parts: dict[str, float] = defaultdict(float)
    ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for event in prof.events():
        part = _part(event)
        if part is None:
            continue
        parts[part] += event.self_cpu_time_total / 1000.0 / steps
        if not event.name.startswith("<") and "(" not in event.name.split(":")[0]:  # operators, not Python
            ops[event.name][0] += event.self_cpu_time_total / 1000.0 / steps
            ops[event.name][1] += 1 / steps
    top = sorted(((name, ms, round(calls)) for name, (ms, calls) in ops.items()), key=lambda row: -row[1])
    return dict(parts), top


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=common.THREADS)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--no-profile", action="store_true", help="only the step times and ratios")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    task = common.benchmark_task()
    eager_task = H.load_task(common.TASK_FILE, [*common.OVERRIDES, "swamp.sinkhorn_compile=false"])
    data = common.load_data(task)
    cpu = torch.device("cpu")
    steps = {"contrastive": common.train_step(task, "contrastive", data, cpu),
             "swamp (eager Sinkhorn)": common.train_step(eager_task, "swamp", data, cpu),
             "swamp (sinkhorn_compile: true)": common.train_step(task, "swamp", data, cpu)}
    step_ms(steps, 3, 1)  # a first round each, so none pays a one-off cost in the timed rounds
    times = step_ms(steps, args.steps, args.repeats)
    print(f"torch {torch.__version__}, {args.threads} thread(s); best of {args.repeats} x {args.steps} steps, "
          f"taking turns; compiled Sinkhorn first calls (s): {H.sinkhorn_compile_seconds() or 'none'}")
    for name, ms in times.items():
        ratio = f"{ms / times['contrastive']:6.2f}x contrastive" if name != "contrastive" else ""
        print(f"  {name:32} {ms:8.2f} ms/step  {ratio}")
    if args.no_profile:
        return
    for name in list(steps)[::-1]:
        parts, ops = profile_step(steps[name], args.steps)
        total = sum(parts.values())
        print(f"\n{name}: profiled self CPU time by part, ms/step (total {total:.2f}, profiler overhead included)")
        for part, ms in sorted(parts.items(), key=lambda kv: -kv[1]):
            print(f"  {part:34} {ms:8.3f}  {100 * ms / total:5.1f}%")
        print(f"{name}: top {args.top} operators by self CPU time")
        print(f"  {'operator':56} {'ms/step':>8} {'calls':>6}")
        for key, ms, calls in ops[:args.top]:
            print(f"  {key[:56]:56} {ms:8.3f} {calls:6d}")


if __name__ == "__main__":
    main()
