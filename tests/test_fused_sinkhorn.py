"""harness.ops.ot.fused_sinkhorn: the compiled, fused Sinkhorn equals the eager one (its reference) over the
numerics grid of tests/test_numerics.py in float32 and with bfloat16 inputs, argmax included; one compilation
serves every row count; compilation failures fall back to eager with one warning; SwAMP's targets through it
equal the eager path's.

Every test here compiles for real (``compile="on"``, which ignores the suite's SWAMP_BENCH_SINKHORN_COMPILE=off);
the compiled function is one per process, so the module pays each dtype's compilation once.
"""
from __future__ import annotations

import itertools
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from baselines.swamp import SwAMP, SwAMPParams
from harness.errors import ConfigError
from harness.ops import ot
from tests.conftest import ROOT
from tests.test_numerics import ETAS, SCALES, TAUS, Fixed, cosines

DTYPES = [torch.float32, torch.bfloat16]


def _grid(dtype: torch.dtype):
    """(logits, log p) of every grid point in ``dtype``: logits = scale * cosine / tau."""
    cos = cosines()
    for tau, eta, scale in itertools.product(TAUS, ETAS, SCALES):
        logits = (cos * scale / tau).to(dtype)
        yield (tau, eta, scale), logits, torch.log_softmax(cos * scale / tau, dim=1).to(dtype)


def _assert_same(q: torch.Tensor, ref: torch.Tensor, where: tuple) -> None:
    """Finite, non-negative, within 1e-4 of the reference (plus one rounding of the output where it is 16-bit:
    both are solved in float32 and rounded once), the same argmax in every row."""
    assert q.dtype == ref.dtype and q.shape == ref.shape, where
    assert torch.isfinite(q).all() and (q >= 0).all(), where
    err = (q.double() - ref.double()).abs()
    ulp = torch.maximum(q.double().abs(), ref.double().abs()) * torch.finfo(q.dtype).eps  # one rounding step
    rounding = ulp if q.dtype != torch.float32 else 0.0
    assert bool((err <= 1e-4 + rounding).all()), (where, float(err.max()))
    assert torch.equal(q.argmax(1), ref.argmax(1)), where


def _check_both(fused, eager, x: torch.Tensor, where: tuple) -> None:
    """``fused`` against ``eager`` on ``x``; for 16-bit ``x`` also on its values in float32, the working dtype
    both solve in, where 1e-4 holds without the output's rounding."""
    _assert_same(fused(x), eager(x), where)
    if x.dtype != torch.float32:
        _assert_same(fused(x.float()), eager(x.float()), where)


@pytest.fixture(scope="module")
def compiled():
    """The compiled function, warmed for both dtypes once for the whole module."""
    x = torch.randn(8, 4)
    for dtype in DTYPES:
        for from_logits in (False, True):
            ot.fused_sinkhorn(x.to(dtype), 5.0, 3, from_logits=from_logits, compile="on")
    return ot.fused_sinkhorn


@pytest.mark.slow  # torch.compile: seconds warm, tens of seconds with a cold inductor cache
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_equals_eager_sinkhorn_over_the_grid(compiled, dtype):
    for where, _, logp in _grid(dtype):
        eta = where[1]
        _check_both(lambda x, eta=eta: compiled(x, eta, 3, compile="on"), lambda x, eta=eta: ot.sinkhorn(x, eta, 3),
                    logp, where)


@pytest.mark.slow  # torch.compile: seconds warm, tens of seconds with a cold inductor cache
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fused_log_softmax_and_sinkhorn_equal_the_eager_pair_over_the_grid(compiled, dtype):
    for where, logits, _ in _grid(dtype):
        eta = where[1]
        _check_both(lambda x, eta=eta: compiled(x, eta, 3, from_logits=True, compile="on"),
                    lambda x, eta=eta: ot.sinkhorn(ot.log_softmax_nograd(x), eta, 3), logits, where)


@pytest.mark.slow  # torch.compile: seconds warm, tens of seconds with a cold inductor cache
def test_one_compilation_serves_every_row_count_and_eta(compiled):
    """The queue fills over a run's first steps and an epoch may end on a smaller batch: new row counts
    and etas reuse the compiled kernel (no new first-call entry, no recompilation)."""
    from torch._dynamo.utils import counters
    logits = torch.randn(300, 40, generator=torch.Generator().manual_seed(0)) * 50
    compiled(logits, 20.0, 3, from_logits=True, compile="on")
    before, frames = ot.compile_seconds(), counters["stats"]["unique_graphs"]
    for n, eta in ((300, 20.0), (299, 20.0), (57, 5.0), (2, 100.0)):
        q = compiled(logits[:n], eta, 3, from_logits=True, compile="on")
        _assert_same(q, ot.sinkhorn(ot.log_softmax_nograd(logits[:n]), eta, 3), (n, eta))
    assert ot.compile_seconds() == before
    assert counters["stats"]["unique_graphs"] == frames


def swamp_targets_fast_and_eager(monkeypatch) -> tuple[tuple, tuple]:
    """SwAMP's targets of one batch (32 rows, queue of 32 more, K = 16) through the fast path
    (``sinkhorn_compile: true``, the suite's eager setting lifted) and through the eager one."""
    monkeypatch.setenv(ot.COMPILE_ENV, "auto")
    g = torch.Generator().manual_seed(0)
    emb_a, emb_b = (F.normalize(torch.randn(32, 8, generator=g), dim=1) for _ in range(2))
    targets = {}
    for flag in (True, False):
        torch.manual_seed(0)
        method = SwAMP({"a": Fixed(8), "b": Fixed(8)}, SwAMPParams(K=16, queue=64, tau=0.05, eta=20.0,
                                                                   sinkhorn_compile=flag))
        method.queue.push(emb_a.flip(0), emb_b.flip(0))
        targets[flag] = method.targets(emb_a, emb_b)
    return targets[True], targets[False]


class _Counting:
    """The compiled function, counting its calls."""

    def __init__(self, inner):
        self.inner, self.calls = inner, 0

    def __call__(self, *args, **kwargs):
        self.calls += 1
        return self.inner(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.slow  # torch.compile: seconds warm, tens of seconds with a cold inductor cache
def test_swamp_targets_through_the_compiled_path_equal_the_eager_path(compiled, monkeypatch):
    """Where the native kernel is unavailable (as on a GPU), SwAMP's targets go through the compiled kernel."""
    monkeypatch.setattr(ot.native, "unavailable", lambda: "turned off by this test")
    counting = _Counting(ot._COMPILED)
    monkeypatch.setattr(ot, "_COMPILED", counting)
    fast, eager = swamp_targets_fast_and_eager(monkeypatch)
    assert counting.calls == 2  # one per modality
    for q, ref in zip(fast, eager):
        assert q.shape == (32, 16)
        _assert_same(q, ref, "swamp targets")


def test_compile_mode_and_environment_are_checked():
    with pytest.raises(ValueError, match="compile mode must be one of auto, native, on, off"):
        ot.fused_sinkhorn(torch.zeros(3, 2), 1.0, compile="yes")
    os.environ[ot.COMPILE_ENV], old = "fast", os.environ.get(ot.COMPILE_ENV)
    try:
        with pytest.raises(ConfigError, match="SWAMP_BENCH_SINKHORN_COMPILE='fast': use off"):
            ot.fused_sinkhorn(torch.zeros(3, 2), 1.0)
    finally:
        os.environ[ot.COMPILE_ENV] = old if old is not None else ""
    with pytest.raises(ValueError, match=r"expects \(N, K\) logits"):
        ot.fused_sinkhorn(torch.zeros(3), 1.0, compile="on")


FALLBACK = """
import warnings, torch
from harness.errors import ConfigError
from harness.ops import ot
x = torch.randn(50, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 30
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    q1 = ot.fused_sinkhorn(x, 20.0, 3, from_logits=True)
    q2 = ot.fused_sinkhorn(x, 20.0, 3, from_logits=True)
ref = ot.sinkhorn(ot.log_softmax_nograd(x), 20.0, 3)
print(len([w for w in caught if "compiled Sinkhorn unavailable" in str(w.message)]), torch.equal(q1, ref),
      torch.equal(q2, ref), ot.compile_seconds())
"""


@pytest.mark.slow
def test_a_failing_compiler_falls_back_to_eager_with_one_warning():
    """A real compiler failure (a C++ compiler that does not exist, caches off): ``auto`` warns once and returns
    the eager result; the second call does not try again."""
    env = {**os.environ, "CXX": "/nonexistent/c++", "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
           "SWAMP_BENCH_SINKHORN_COMPILE": "auto", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", FALLBACK], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["1", "True", "True", "{}"], out.stdout + out.stderr[-2000:]
