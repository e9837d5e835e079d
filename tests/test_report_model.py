"""The report layer's model (harness/report/model.py): the one timing ratio that the timing table, the results site
and the claims ledger show, and runs of several machines kept apart by every reader."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness import cli
from harness.errors import ConfigError
from harness.report import claims, compare, figures, model, sets, timing
from harness.store.schema import load_results
from tests.conftest import ROOT

FLICKR = ROOT / "results" / "gpu" / "flickr30k_shapes"


def _result(run: str, seed: int, step: float, test: float, device: str = "cpu", contended: bool = False) -> dict:
    hw = {"cpu": "Test CPU", "cores": 2, "device": device}
    if device == "cuda":
        hw["gpu"] = {"name": "Test GPU"}
    return {"run_name": run, "method": run, "seed": seed, "task": "toy", "environment": {"hardware": hw},
            "profile": {"timing": {"train_step": {"median_s": step}, "test_total": {"median_s": test}},
                        "contention": {"train": {"contended": True}} if contended else {}}}


def test_a_timing_ratio_on_known_answers():
    of = [_result("a", 0, 2.0, 10.0), _result("a", 1, 4.0, 30.0)]
    to = [_result("b", 0, 1.0, 10.0), _result("b", 1, 1.0, 10.0, contended=True)]
    step = model.timing_ratio(of, to, "step")
    assert step.value == pytest.approx(3.0) and step.per_seed == (2.0, 4.0) and not step.estimated
    assert step.cell() == "3.00×" and step.mark == " [contended 1/4]"
    test = model.timing_ratio(of, to, "test")
    assert test.value == pytest.approx(2.0) and test.mark == ""  # the contention was in training only
    assert model.timing_ratio(of, [_result("c", 0, 1.0, 10.0)], "step").per_seed == (2.0,)
    empty = model.timing_ratio(of, [{**_result("d", 0, 1.0, 1.0), "profile": {"timing": {}}}], "step")
    assert empty.value is None and empty.cell() == "–"
    with pytest.raises(ConfigError, match="made on 2 machines"):
        model.timing_ratio(of, [_result("b", 0, 1.0, 10.0, device="cuda")], "step")


def test_the_table_the_site_and_the_ledger_show_one_ratio(tmp_path):
    results = [r for r in load_results(FLICKR) if r["run_name"] in ("scan@scorer=original", "swamp_par")]
    header, rows = timing.timing_rows(results, reference="swamp_par")
    row = next(dict(zip(header, r)) for r in rows if r[0].startswith("scan@scorer=original"))
    ratio = model.timing_ratio([r for r in results if r["run_name"] == "scan@scorer=original"],
                               [r for r in results if r["run_name"] == "swamp_par"], "step")
    assert row["step / swamp_par"] == f"{ratio.value:.2f}×"
    rs = sets.ResultSet("flickr30k_shapes", FLICKR, "f", results, reference="swamp_par")
    _, _, found = figures.ratios(rs)
    assert next(r for r in found if r.name == "scan@scorer=original").ours["train step"] == ratio.value
    folder = tmp_path / "results" / "f"
    for name in ("scan@scorer=original", "swamp_par"):
        shutil.copytree(FLICKR / name, folder / name)
    ledger = tmp_path / "claims" / "l.yaml"
    ledger.parent.mkdir()
    ledger.write_text(json.dumps({"paper": "p", "rules": {"alpha": 0.05, "ratio_tolerance": 2.0},
                                  "claims": [{"id": "c", "claim": "c", "paper": 4.0, "evidence": [
                                      {"results": "results/f", "ratio": {"of": "scan@scorer=original",
                                                                         "to": "swamp_par", "phase": "step"},
                                       "verdict": "reproduced"}]}]}))
    (line,) = claims.judge(ledger, tmp_path)
    assert line.ours.startswith(f"{ratio.value:.1f}×")


def _cpu_and_gpu_folder(tmp_path: Path) -> Path:
    """synthetic's contrastive run: two CPU seeds and a third seed rewritten as if made on a GPU."""
    folder = tmp_path / "results" / "synthetic"
    shutil.copytree(ROOT / "results" / "synthetic" / "contrastive", folder / "contrastive")
    for path in sorted((folder / "contrastive").glob("seed*.json"))[2:]:
        path.unlink()
    gpu = json.loads((folder / "contrastive" / "seed1.json").read_text())
    gpu["seed"] = 7
    gpu["environment"]["hardware"].update(device="cuda", gpu={"name": "NVIDIA H100 80GB HBM3"})
    gpu["metrics"] = {k: 1.0 for k in gpu["metrics"]}
    (folder / "contrastive" / "seed7.json").write_text(json.dumps(gpu))
    return folder


def test_a_folder_of_cpu_and_gpu_runs_is_never_averaged(tmp_path, capsys):
    folder = _cpu_and_gpu_folder(tmp_path)
    results = load_results(folder)
    # harness table: one table per machine, each row the mean of that machine's seeds only
    assert cli.main(["table", str(folder)]) == 0
    out = capsys.readouterr().out
    assert out.count("Accuracy (test") == 2 and "NVIDIA H100" in out and " 1.00 " in out
    sets = model.sets(results)
    assert [len(s.results) for s in sets] == [2, 1] and all(s.several_machines for s in sets)
    # compare and the ledger refuse to average them
    with pytest.raises(ConfigError, match="made on 2 machines"):
        compare.compare(results, results)
    ledger = tmp_path / "claims" / "l.yaml"
    ledger.parent.mkdir()
    ledger.write_text(json.dumps({"paper": "p", "rules": {"alpha": 0.05, "value_tolerance": 1.0},
                                  "claims": [{"id": "c", "claim": "c", "paper": 84.1, "evidence": [
                                      {"results": "results/synthetic",
                                       "value": {"run": "contrastive", "metric": "a2b/R@1"},
                                       "verdict": "reproduced"}]}]}))
    with pytest.raises(ConfigError, match="made on 2 machines"):
        claims.judge(ledger, tmp_path)
