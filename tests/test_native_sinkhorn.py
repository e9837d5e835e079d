"""harness.ops.native: the C Sinkhorn kernel equals the eager reference (harness.ops.ot.sinkhorn) on the numerics
grid of tests/test_numerics.py and on shapes that exercise every vector tail, in both builds (AVX-512 where
this CPU has it, and AVX2); two modalities on two threads equal each alone, bit for bit; non-finite logits go to
the eager path; the build is cached, and a missing compiler or ``SWAMP_BENCH_SINKHORN_NATIVE=off`` leaves the
other kernels in charge.

The kernel is built for real with the system C compiler; without one (or off x86-64) these tests skip and say why.
"""
from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import pytest
import torch

from harness.errors import ConfigError
from harness.ops import native, ot
from tests.conftest import ROOT
from tests.error_lines import error_line
from tests.test_fused_sinkhorn import swamp_targets_fast_and_eager
from tests.test_numerics import ETAS, SCALES, TAUS, cosines

REASON = native.unavailable()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"native Sinkhorn unavailable here: {REASON}")


def _reference(x: torch.Tensor, eta: float, from_logits: bool, iters: int = 3) -> torch.Tensor:
    return ot.sinkhorn(ot.log_softmax_nograd(x) if from_logits else x, eta, iters)


def _assert_close(q: torch.Tensor, ref: torch.Tensor, where: object) -> None:
    """Within 1e-4 of the reference, finite, rows summing to 1; the argmax equal in every row except where the
    reference's own two best targets are within 1e-6 of each other (a tie to float rounding, which any other
    summation order may break the other way; none occurs on the grid)."""
    assert q.shape == ref.shape and q.dtype == torch.float32, where
    assert torch.isfinite(q).all() and (q >= 0).all(), where
    assert float((q - ref).abs().max()) <= 1e-4, (where, float((q - ref).abs().max()))
    assert float((q.double().sum(1) - 1).abs().max()) <= 1e-5, where
    differ = (q.argmax(1) != ref.argmax(1)).nonzero().flatten()
    for i in differ.tolist():
        gap = float(ref[i].max() - ref[i, q[i].argmax()])
        assert gap <= 1e-6, (where, i, gap)


def _grid():
    cos = cosines()
    for tau, eta, scale in itertools.product(TAUS, ETAS, SCALES):
        yield (tau, eta, scale), (cos * scale / tau).float(), torch.log_softmax(cos * scale / tau, dim=1).float()


def test_native_equals_eager_over_the_grid_with_no_argmax_change():
    flips = 0
    for where, logits, logp in _grid():
        eta = where[1]
        for x, from_logits in ((logits, True), (logp, False)):
            q, = native.solve([x], eta, 3, from_logits=from_logits)
            ref = _reference(x, eta, from_logits)
            _assert_close(q, ref, (where, from_logits))
            flips += int((q.argmax(1) != ref.argmax(1)).sum())
    assert flips == 0


GRID_SCRIPT = """
import itertools, json, torch
from harness.ops import native, ot
from tests.test_numerics import ETAS, SCALES, TAUS, cosines
cos = cosines()
worst, flips = 0.0, 0
for tau, eta, scale in itertools.product(TAUS, ETAS, SCALES):
    x = (cos * scale / tau).float()
    q, = native.solve([x], eta, 3, from_logits=True)
    ref = ot.sinkhorn(ot.log_softmax_nograd(x), eta, 3)
    worst = max(worst, float((q - ref).abs().max()))
    flips += int((q.argmax(1) != ref.argmax(1)).sum())
print(json.dumps({"kernel": native.describe(), "worst": worst, "flips": flips}))
"""


def _python(script: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    return subprocess.run([sys.executable, "-c", script], env=full, cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow  # seconds: a fresh Python process builds the kernel into a cache of its own
def test_the_avx2_build_equals_eager_over_the_grid_too():
    """The 8-lane build (what a CPU without AVX-512 runs), forced by SWAMP_BENCH_SINKHORN_NATIVE=avx2."""
    out = _python(GRID_SCRIPT, SWAMP_BENCH_SINKHORN_NATIVE="avx2")
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["kernel"] == "native (AVX2, 8 lanes)"
    assert result["worst"] <= 1e-4 and result["flips"] == 0, result


@pytest.mark.parametrize("n, k", [(1, 1), (2, 7), (3, 8), (5, 9), (4, 15), (6, 16), (130, 17), (64, 33),
                                  (200, 1000), (9, 1001)])
def test_every_vector_tail_equals_eager(n, k):
    """Widths below, at and just past 8 and 16 lanes, one row, and a K that leaves a tail after 1,000."""
    g = torch.Generator().manual_seed(n * 1000 + k)
    x = torch.randn(n, k, generator=g) * 40
    for from_logits in (True, False):
        inp = x if from_logits else torch.log_softmax(x, 1)
        q, = native.solve([inp], 20.0, 3, from_logits=from_logits)
        _assert_close(q, _reference(inp, 20.0, from_logits), (n, k, from_logits))


def test_rows_returns_the_first_rows_of_the_whole_solution():
    x = torch.randn(300, 50, generator=torch.Generator().manual_seed(1)) * 60
    whole, = native.solve([x], 20.0, 3, from_logits=True)
    first, = native.solve([x], 20.0, 3, from_logits=True, rows=37)
    assert first.shape == (37, 50) and torch.equal(first, whole[:37])
    assert torch.equal(ot.fused_sinkhorn(x, 20.0, 3, from_logits=True, compile="native", rows=37), first)


def test_two_problems_on_two_threads_equal_each_alone_bit_for_bit():
    g = torch.Generator().manual_seed(2)
    a, b = torch.randn(400, 96, generator=g) * 80, torch.randn(250, 96, generator=g) * 80
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        alone = [native.solve([x], 20.0, 3, from_logits=True)[0] for x in (a, b)]
        one_thread = native.solve([a, b], 20.0, 3, from_logits=True)
        torch.set_num_threads(2)
        two_threads = native.solve([a, b], 20.0, 3, from_logits=True)
        again = native.solve([a, b], 20.0, 3, from_logits=True)
    finally:
        torch.set_num_threads(before)
    for q in (one_thread, two_threads, again):
        assert all(torch.equal(x, y) for x, y in zip(q, alone))


def test_non_finite_logits_go_to_the_eager_path():
    x = torch.randn(20, 24, generator=torch.Generator().manual_seed(3)) * 30
    for bad in (float("nan"), float("inf"), -float("inf")):
        y = x.clone()
        y[5, 23] = bad  # in the vector part's tail for 8 and 16 lanes alike
        z = x.clone()
        z[7, 3] = bad  # inside a full vector
        for t in (y, z):
            assert native.solve([t], 20.0, 3, from_logits=True) is None
            expected = ot.sinkhorn(ot.log_softmax_nograd(t), 20.0, 3)
            for mode in ("auto", "native"):
                got = ot.fused_sinkhorn(t, 20.0, 3, from_logits=True, compile=mode)
                assert torch.equal(got.isnan(), expected.isnan())
                assert torch.equal(got.nan_to_num(), expected.nan_to_num())


def test_what_the_kernel_does_not_take_is_refused_or_passed_on():
    x64 = torch.randn(10, 6, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="takes float32"):
        ot.fused_sinkhorn(x64, 5.0, compile="native")
    assert not native.accepts(x64) and not native.accepts(torch.zeros(3)) and native.accepts(x64.float())
    with pytest.raises(ValueError, match="same K"):
        native.solve([torch.zeros(3, 4), torch.zeros(3, 5)], 5.0, 3, from_logits=True)
    # float64 under auto: not the native kernel; under the suite's eager setting, the reference itself
    assert torch.equal(ot.fused_sinkhorn(x64, 5.0, compile="off"), ot.sinkhorn(x64, 5.0))


def test_swamp_targets_through_the_native_kernel_equal_the_eager_path(monkeypatch):
    calls = []
    solve = native.solve
    monkeypatch.setattr(native, "solve", lambda xs, *a, **k: calls.append([x.shape for x in xs]) or solve(xs, *a, **k))
    fast, eager = swamp_targets_fast_and_eager(monkeypatch)
    assert calls == [[(64, 16), (64, 16)]]  # one call, both modalities: the batch of 32 and the 32 rows queued
    for q, ref in zip(fast, eager):
        assert q.shape == (32, 16)
        _assert_close(q, ref, "swamp targets")


BUILD_SCRIPT = """
import json, os
from harness.ops import native
reason = native.unavailable()
print(json.dumps({"reason": reason, "kernel": native.describe(), "seconds": native.build_seconds(),
                  "files": sorted(os.listdir(native.cache_dir())) if native.cache_dir().exists() else []}))
"""


def _build_report(**env: str) -> dict:
    out = _python(BUILD_SCRIPT, **env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # seconds: a fresh Python process builds the kernel into a cache of its own
def test_the_build_is_cached_and_reused(tmp_path):
    first = _build_report(SWAMP_BENCH_CACHE=str(tmp_path))
    assert first["reason"] is None and first["kernel"].startswith("native (")
    assert len(first["files"]) >= 1 and all(f.startswith("sinkhorn_native_w") for f in first["files"])
    second = _build_report(SWAMP_BENCH_CACHE=str(tmp_path))
    assert second["files"] == first["files"]  # found, not rebuilt
    assert second["kernel"] == first["kernel"]


@pytest.mark.slow  # seconds: a fresh Python process builds the kernel into a cache of its own
def test_an_unwritable_cache_folder_falls_back_to_the_temporary_folder(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    report = _build_report(SWAMP_BENCH_CACHE=str(blocker / "cache"))
    assert report["reason"] is None and report["kernel"].startswith("native (")


@pytest.mark.slow  # seconds: a fresh Python process builds the kernel into a cache of its own
def test_without_a_compiler_or_when_turned_off_the_kernel_says_why(tmp_path):
    missing = _build_report(SWAMP_BENCH_CACHE=str(tmp_path), CC="/nonexistent/cc")
    assert "/nonexistent/cc" in missing["reason"] and missing["files"] == []
    off = _build_report(SWAMP_BENCH_CACHE=str(tmp_path), SWAMP_BENCH_SINKHORN_NATIVE="off")
    assert off["reason"] == "SWAMP_BENCH_SINKHORN_NATIVE=off"
    # auto then uses another kernel without a word; native refuses with the reason
    script = ("import torch; from harness.ops import ot\nx = torch.randn(30, 9)\n"
              "ref = ot.sinkhorn(ot.log_softmax_nograd(x), 5.0, 3)\n"
              "print(torch.equal(ot.fused_sinkhorn(x, 5.0, 3, from_logits=True, compile='auto'), ref))\n"
              "try:\n    ot.fused_sinkhorn(x, 5.0, compile='native')\nexcept RuntimeError as e:\n    print(e)\n")
    out = _python(script, SWAMP_BENCH_SINKHORN_NATIVE="off", SWAMP_BENCH_SINKHORN_COMPILE="off")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.splitlines() == ["True", "native Sinkhorn unavailable: SWAMP_BENCH_SINKHORN_NATIVE=off"]


def test_a_bad_setting_is_one_clear_error(monkeypatch):
    monkeypatch.setenv(native.ENV, "fast")
    with pytest.raises(ConfigError, match="SWAMP_BENCH_SINKHORN_NATIVE='fast': use auto"):
        native.setting()


@pytest.mark.slow  # seconds: a fresh Python process builds the kernel into a cache of its own
@pytest.mark.parametrize("variable", ["SWAMP_BENCH_SINKHORN_NATIVE", "SWAMP_BENCH_SINKHORN_COMPILE"])
def test_a_bad_kernel_setting_stops_a_run_before_anything_is_written(tmp_path, variable):
    env = {**os.environ, "PYTHONPATH": str(ROOT), variable: "fast"}
    out = subprocess.run([sys.executable, "-m", "harness", "run", str(ROOT / "tasks" / "synthetic.yaml"), "--methods",
                          "swamp", "--epochs", "1", "--out", str(tmp_path / "out"), "--no-progress"],
                         env=env, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"{variable}='fast'" in error_line(out.stderr, alone=True), out.stderr
    assert not (tmp_path / "out").exists()


ONE_OFF_SCRIPT = """
import json, torch, torch.nn.functional as F
from baselines.swamp import SwAMP, SwAMPParams
from tests.test_numerics import Fixed
out = []
for _ in range(2):
    method = SwAMP({"a": Fixed(8), "b": Fixed(8)}, SwAMPParams(K=16, queue=64, tau=0.05, eta=20.0))
    emb = F.normalize(torch.randn(32, 8), dim=1)
    method.targets(emb, emb.flip(0))
    out.append(method.one_off_timings())
print(json.dumps(out))
"""


@pytest.mark.slow  # seconds: a fresh Python process builds the kernel into a cache of its own
def test_the_kernel_build_is_reported_by_the_run_that_paid_for_it(tmp_path):
    """A fresh process: the first SwAMP reports the native kernel's build as a one-off cost; a second one in
    the same process (a sequential grid, a launcher's worker) paid nothing and reports nothing."""
    out = _python(ONE_OFF_SCRIPT, SWAMP_BENCH_CACHE=str(tmp_path), SWAMP_BENCH_SINKHORN_COMPILE="auto")
    assert out.returncode == 0, out.stderr[-2000:]
    first, second = json.loads(out.stdout.strip().splitlines()[-1])
    assert list(first) == ["sinkhorn_native_build"] and first["sinkhorn_native_build"] > 0
    assert second == {}
