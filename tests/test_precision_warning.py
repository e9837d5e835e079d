"""bf16 asked of a CPU that lacks the instructions computing it natively (avx512_bf16, amx_bf16) is emulated and
slow: one warning line before anything trains, naming the CPU, its vector extensions and fp32; printed, not
recorded in the result files (it concerns the machine, not the settings)."""
from __future__ import annotations

import json

import pytest
import torch

from harness.cli import main
from harness.config import plan
from harness.ops.precision import cpu_warning
from harness.run import preflight
from harness.store import provenance

AVX2 = ["sse4_2", "avx", "avx2", "fma", "f16c"]  # AVX2 only: an AMD EPYC before Zen 4
AVX512 = [*AVX2, "avx512f", "avx512dq", "avx512bw", "avx512vl", "avx512_vnni"]
CPU = "AMD EPYC 7B12 64-Core Processor"


@pytest.mark.parametrize("flags", [[*AVX512, "avx512_bf16"], [*AVX512, "amx_tile", "amx_bf16"]],
                         ids=["avx512_bf16", "amx_bf16"])
def test_a_cpu_with_native_bf16_gets_no_warning(flags):
    assert cpu_warning("bf16", "cpu", CPU, flags) is None


@pytest.mark.parametrize("flags", [AVX2, AVX512], ids=["avx2", "avx512-without-bf16"])
def test_a_cpu_without_native_bf16_is_warned_with_its_extensions_and_fp32(flags):
    line = cpu_warning("bf16", "cpu", CPU, flags)
    assert line is not None
    assert CPU in line and ", ".join(flags) in line and "avx512_bf16 or amx_bf16" in line
    assert "bf16 is emulated there and slow" in line
    assert "runs fp32 natively: --set train.precision=fp32" in line


def test_other_devices_precisions_and_cpus_get_no_warning():
    assert cpu_warning("bf16", "cuda", CPU, AVX2) is None  # the GPU computes it
    assert cpu_warning("fp32", "cpu", CPU, AVX2) is None
    assert cpu_warning("tf32", "cpu", CPU, AVX2) is None  # changes nothing on a CPU
    assert cpu_warning("bf16", "cpu", "Neoverse-V1", ["neon", "asimd", "sve"]) is None  # flags that do not tell
    assert cpu_warning("bf16", "cpu", "unknown", []) is None  # /proc/cpuinfo unreadable


def test_the_setting_named_is_the_caller_s():
    line = cpu_warning("bf16", "cpu", CPU, AVX2, "a new run with --set train.precision=fp32")
    assert line is not None and line.endswith("runs fp32 natively: a new run with --set train.precision=fp32")


@pytest.fixture
def avx2_machine(monkeypatch):
    monkeypatch.setattr(provenance, "cpu_flags", lambda: list(AVX2))
    monkeypatch.setattr(provenance, "cpu_model", lambda: CPU)


def test_the_preflight_prints_one_line_for_the_runs_of_a_command(tiny_task, avx2_machine, capsys):
    runs = plan.plan(tiny_task, ["train.precision=bf16"], [], ["contrastive", "swamp"], [0, 1], 1, None)
    preflight.check_precision(runs, torch.device("cpu"))
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"warning: train.precision bf16 on the CPU {CPU}")
    preflight.check_precision(runs, torch.device("cuda"))
    preflight.check_precision(plan.plan(tiny_task, [], [], ["contrastive"], [0], 1, None), torch.device("cpu"))
    assert capsys.readouterr().err == ""


def test_a_run_prints_the_warning_and_does_not_record_it(tiny_task, tmp_path, avx2_machine, capsys):
    assert main(["run", str(tiny_task), "--methods", "contrastive", "--set", "train.precision=bf16", "--epochs", "1",
                 "--device", "cpu", "--out", str(tmp_path / "out"), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert sum(line.startswith("warning: train.precision bf16") for line in err.splitlines()) == 1
    (result,) = (tmp_path / "out").rglob("seed0.json")
    recorded = json.loads(result.read_text())
    assert recorded["config"]["train"]["precision"] == "bf16"
    assert not any("bf16" in line for line in recorded.get("warnings", []))
