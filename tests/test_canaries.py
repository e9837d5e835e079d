"""Canaries: a tiny deterministic CPU run of every registered method, against its committed trace.

Each canary builds the method on the tiny test task of its family (seed 0), converts the model to float64, feeds it
float64 features made from integers alone in the shapes of the task's (:func:`hashed`: the same bits on every CPU,
where the sources' float32 features are not), trains three steps through the training loop's own step
(:func:`harness.run.train.make_step`, the task's optimizer, fixed batches) and scores a few test items. The trace
(``tests/canaries/<method>.json``) holds every logged loss term of every step, the score matrix of those items and
the test metrics. A setting that takes its method down another code path (another loss of the contrastive family)
has a canary of its own, declared in :data:`VARIANTS` (trace ``tests/canaries/<method>@<key>=<value>.json``). A
canary passes when every number is within a relative :data:`RTOL` of the trace (metrics, which are ranks, exactly;
the scores of methods whose embeddings are float32 by design, CCA and the identity, within
:data:`RTOL_FLOAT32_SCORES`).

Why float64 and that tolerance: in float64 a different BLAS summation order (another thread count, another CPU
model's vector width) moves these numbers by at most 3e-13 relative, while a change of a method's arithmetic (a
margin moved in its sixth digit, a temperature rounded differently, one more Sinkhorn iteration) moves them by 1e-7
or more; 1e-9 sits between the two, with a factor of 100 or more on each side (``tests/canaries/README.md`` gives
the measurements and the commands that made them).

A change that moves a method's numbers fails here until its trace is re-made in the commit that explains it:

    SWAMP_BENCH_CANARY=write python -m pytest -q tests/test_canaries.py
"""
from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.config.registry import METHODS
from harness.data.paired import take
from harness.run import evaluate as ev
from harness.run import train as tr
from tests.test_methods import tiny_method_for

TRACES = Path(__file__).with_name("canaries")
RTOL = 1e-9  # relative tolerance of every float in a trace
# methods whose embeddings are float32 by design (CCA's canonical variates, the identity's normalized features):
# their scores round in float32 whatever the input, and another CPU moves them by up to about 1e-7
RTOL_FLOAT32_SCORES = 1e-5
ATOL = 1e-12  # absolute floor, for values that are zero up to rounding
STEPS, BATCH, SCORED = 3, 16, 6
WRITE = os.environ.get("SWAMP_BENCH_CANARY") == "write"
# canaries beyond one per registered method: a method with settings that take another code path, named as a run
# that varies a setting is named
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    "contrastive@loss=siglip": ("contrastive", {"loss": "siglip"}),
}
CASES = [*METHODS.names(), *VARIANTS]  # every canary: a registered method, or a variant of one


def hashed(rows: torch.Tensor, shape: tuple[int, ...], salt: int) -> torch.Tensor:
    """Float64 values in [-1, 1) for items ``rows`` of a feature of item shape ``shape``, made from integers
    alone (a multiplicative hash of item, position and ``salt``, divided by a power of two: exact), so that
    every CPU computes the same bits. The canaries feed these instead of the sources' float32 features, whose
    generation (matrix products in float32) rounds differently on CPUs of other vector widths."""
    numel = math.prod(shape)
    position = torch.arange(numel, dtype=torch.int64)
    key = rows.to(torch.int64).reshape(-1, 1) * numel + position.reshape(1, -1) + salt * 1_000_003
    mixed = (key * 2654435761 + 40503) % (2**32)
    mixed = (mixed ^ (mixed >> 13)) * 1274126177 % (2**32)
    return (mixed.to(torch.float64) / 2**31 - 1.0).reshape(len(rows), *shape)


class _HashedRows:
    """A modality's features with every floating-point part replaced by :func:`hashed` values of the same shape
    (token ids, lengths and other integers kept)."""

    def __init__(self, rows: Any, salt: int) -> None:
        self.rows, self.salt = rows, salt

    def __len__(self) -> int:
        return len(self.rows)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.rows, name)

    def take(self, index: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        return self._replace(take(self.rows, index), index, 0)

    def _replace(self, x: Any, index: torch.Tensor, part: int) -> Any:
        if isinstance(x, torch.Tensor):
            if not x.is_floating_point():
                return x
            return hashed(index, tuple(x.shape[1:]), self.salt * 16 + part)
        if isinstance(x, (tuple, list)):
            return type(x)(self._replace(v, index, part * 4 + i + 1) for i, v in enumerate(x))
        return x


def _hashed_split(split: Any, salt: int) -> Any:
    out = copy.copy(split)
    out.a, out.b = _HashedRows(split.a, 2 * salt), _HashedRows(split.b, 2 * salt + 1)
    return out


def _snap(x: float) -> float:
    """``x`` to two significant digits: equal on every CPU unless ``x`` lies within float32 rounding of a
    boundary (about one chance in 10^5)."""
    return float(f"{x:.2g}")


def _hashed_weights(method: torch.nn.Module) -> torch.nn.Module:
    """Every parameter of ``method`` drawn afresh from :func:`hashed` values, scaled to its initial spread and
    centred on its initial mean (both rounded to two digits); constant ones (biases, norms' weights, a learned
    temperature) kept. The float32 initialisation rounds differently on CPUs of other vector widths; this does
    not, and keeps each tensor's scale."""
    with torch.no_grad():
        for i, (_, p) in enumerate(sorted(method.named_parameters())):
            if p.numel() < 2 or bool((p == p.flatten()[0]).all()):
                continue
            mean, std = _snap(float(p.mean())), _snap(float(p.std()))
            flat = hashed(torch.arange(1), (p.numel(),), 1000 + i).reshape(p.shape)
            p.copy_(flat * std * math.sqrt(3.0) + mean)  # uniform on [-1, 1) has std 1/sqrt(3)
    return method


def canary(kind: str, tasks: tuple[Path, ...], settings: dict[str, Any] | None = None) -> dict[str, Any]:
    """The trace of ``kind``'s canary (module docstring), with the method's ``settings`` changed when given."""
    spec, name, data, method = tiny_method_for(kind, *tasks, settings=settings)
    method = _hashed_weights(method.double())
    train, test = _hashed_split(data["train"], 1), _hashed_split(data["test"], 3)
    torch.manual_seed(0)
    steps: list[dict[str, float]] = []
    if method.trains_by_gradient:
        opt = tr.make_optimizer(method, spec.methods[name].train)
        step = tr.make_step(method, opt, train, torch.device("cpu"), spec.methods[name].train.grad_clip)
        n = train.n_pairs
        for i in range(STEPS):
            if hasattr(method, "start_epoch") and i == 0:
                method.start_epoch(1)
            index = torch.arange(i * BATCH, (i + 1) * BATCH) % n
            logs = step(index)
            steps.append({k: float(v) for k, v in sorted(logs.items())})
    else:
        method.fit_closed_form(train)
    method.eval()
    with torch.no_grad():
        n_a = min(SCORED, len(test.a))
        n_b = min(SCORED, len(test.b))
        emb_a = method.encode("a", take(test.a, torch.arange(n_a)))
        emb_b = method.encode("b", take(test.b, torch.arange(n_b)))
        raw = method.score(emb_a, emb_b)
        scores = raw.double()
    metrics = ev.evaluate(method, test, spec.metrics, torch.device("cpu"), 64)
    return {"method": kind, **({"settings": settings} if settings else {}), "task": spec.name, "run": name,
            "dtype": "float64", "score_dtype": str(raw.dtype), "steps": steps,
            "scores": [[float(v) for v in row] for row in scores.tolist()],
            "metrics": {k: float(v) for k, v in sorted(metrics.items())}}


def compare(trace: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """Every number of ``now`` that is not within :data:`RTOL` of ``trace`` (metrics: not equal), named."""
    problems = []

    def close(a: float, b: float, rtol: float = RTOL) -> bool:
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return abs(a - b) <= ATOL + rtol * abs(a)

    score_rtol = RTOL_FLOAT32_SCORES if trace.get("score_dtype") == "torch.float32" else RTOL

    if len(trace["steps"]) != len(now["steps"]):
        problems.append(f"{len(now['steps'])} steps, the trace has {len(trace['steps'])}")
    for i, (old, new) in enumerate(zip(trace["steps"], now["steps"])):
        for key in sorted(old.keys() | new.keys()):
            if key not in old or key not in new or not close(old[key], new[key]):
                problems.append(f"step {i + 1} {key}: trace {old.get(key)!r}, now {new.get(key)!r}")
    flat_old = [v for row in trace["scores"] for v in row]
    flat_new = [v for row in now["scores"] for v in row]
    bad = [i for i, (a, b) in enumerate(zip(flat_old, flat_new)) if not close(a, b, score_rtol)]
    if len(flat_old) != len(flat_new) or bad:
        worst = max(bad, key=lambda i: abs(flat_old[i] - flat_new[i]), default=None)
        problems.append(f"test scores: {len(bad)} of {len(flat_old)} differ" +
                        (f", e.g. {flat_old[worst]!r} -> {flat_new[worst]!r}" if worst is not None else ""))
    for key in sorted(trace["metrics"].keys() | now["metrics"].keys()):
        if trace["metrics"].get(key) != now["metrics"].get(key):
            problems.append(f"test {key}: trace {trace['metrics'].get(key)!r}, now {now['metrics'].get(key)!r}")
    return problems


@pytest.fixture
def tasks(tiny_task, tiny_image_text_task, tiny_video_text_task, tiny_sketch_task, monkeypatch) -> tuple[Path, ...]:
    monkeypatch.setenv("SWAMP_BENCH_SINKHORN_COMPILE", "off")  # float64 Sinkhorn: the eager reference
    return tiny_task, tiny_image_text_task, tiny_video_text_task, tiny_sketch_task


def canary_case(case: str, tasks: tuple[Path, ...]) -> dict[str, Any]:
    """The trace of the canary ``case``: a registered method, or a variant in :data:`VARIANTS`."""
    kind, settings = VARIANTS.get(case, (case, {}))
    return canary(kind, tasks, settings)


def _run(case: str, tasks: tuple[Path, ...], threads: int) -> dict[str, Any]:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return canary_case(case, tasks)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("kind", CASES)
def test_canary_matches_its_committed_trace(kind, tasks):
    path = TRACES / f"{kind}.json"
    now = _run(kind, tasks, threads=1)
    if WRITE:
        TRACES.mkdir(exist_ok=True)
        path.write_text(json.dumps(now, indent=1) + "\n")
        pytest.skip(f"wrote {path}")
    assert path.is_file(), (f"method {kind!r} has no canary trace: make it with SWAMP_BENCH_CANARY=write "
                            "python -m pytest -q tests/test_canaries.py and commit tests/canaries/")
    problems = compare(json.loads(path.read_text()), now)
    assert not problems, (f"{kind}'s numbers moved (canary {path.name}): " + "; ".join(problems[:8]) +
                          ". If the change is meant, re-make the trace in the commit that explains it "
                          "(SWAMP_BENCH_CANARY=write python -m pytest -q tests/test_canaries.py)")


def test_every_trace_belongs_to_a_registered_method():
    stray = sorted(p.stem for p in TRACES.glob("*.json")) if TRACES.is_dir() else []
    assert set(stray) <= set(CASES), f"traces of unregistered methods or variants: {set(stray) - set(CASES)}"
    assert all(kind in METHODS.names() for kind, _ in VARIANTS.values())


# torch's kernels without vector instructions and MKL's compatible code path: every sum in another order, as on
# a CPU of another vector width (AVX2 instead of AVX-512, another vendor's MKL path)
OTHER_ORDER = {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE"}


def traces_in_a_process(kinds: list[str], env: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The canaries of ``kinds`` run in a fresh process with ``env`` added (for settings read at torch's start)."""
    import subprocess
    import sys
    import tempfile

    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "traces.json"
        code = ("import json, sys, tempfile; from pathlib import Path; import torch; torch.set_num_threads(1); "
                "from tests import conftest, test_canaries as tc; d = Path(tempfile.mkdtemp()); "
                "tasks = tuple(conftest.write_task(d, t, n + '.yaml') for n, t in (('tiny', conftest.TINY), "
                "('tiny_image_text', conftest.TINY_IMAGE_TEXT), ('tiny_video_text', conftest.TINY_VIDEO_TEXT), "
                "('tiny_sketch', conftest.TINY_SKETCH))); "
                "json.dump({k: tc.canary_case(k, tasks) for k in sys.argv[2:]}, open(sys.argv[1], 'w'))")
        full = {**os.environ, **env, "PYTHONPATH": str(root), "SWAMP_BENCH_SINKHORN_COMPILE": "off"}
        subprocess.run([sys.executable, "-c", code, str(out), *kinds], cwd=root, env=full, check=True,
                       capture_output=True)
        traces: dict[str, dict[str, Any]] = json.loads(out.read_text())
        return traces


@pytest.mark.slow
def test_canaries_pass_under_another_summation_order():
    """Every canary, made again with every sum in another order (OTHER_ORDER), still matches its trace."""
    kinds = CASES
    other = traces_in_a_process(kinds, OTHER_ORDER)
    for kind in kinds:
        assert compare(json.loads((TRACES / f"{kind}.json").read_text()), other[kind]) == [], kind


def test_canary_passes_under_another_thread_count(tasks):
    one, two = _run("swamp", tasks, threads=1), _run("swamp", tasks, threads=2)
    assert compare(one, two) == []


def test_canary_fails_on_a_small_change_of_a_loss(tasks, monkeypatch):
    """SwAMP's swapped-assignment loss scaled by 1 + 1e-7 (far below anything a table shows) fails the canary."""
    import baselines.swamp as swamp_module

    trace = _run("swamp", tasks, threads=1)
    original = swamp_module.swamp_loss

    def nudged(*args: Any, **kwargs: Any) -> Any:
        return original(*args, **kwargs) * (1 + 1e-7)

    monkeypatch.setattr(swamp_module, "swamp_loss", nudged)
    problems = compare(trace, _run("swamp", tasks, threads=1))
    assert problems and any("step" in p for p in problems), problems
