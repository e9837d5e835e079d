"""The claims ledger (``python -m harness claims``): its verdict rules on known answers, the committed ledger
against the committed results (the README's copy: tests/test_readme.py), a hidden shift in generated results caught by
``--check``, and the ledger's input errors."""
from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.errors import ConfigError
from harness.report import claims, stats

ROOT = Path(__file__).resolve().parent.parent
LEDGER = ROOT / "claims" / "swamp-aistats2023.yaml"


def _copy_runs(src: Path, dst: Path, runs: list[str]) -> None:
    for run in runs:
        shutil.copytree(src / run, dst / run)


def _edit(path: Path, change) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def _ledger(tmp_path: Path, evidence: dict, paper, verdict: str) -> Path:
    path = tmp_path / "claims" / "ledger.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"paper": "test", "claims": [
        {"id": "c", "claim": "a claim", "paper": paper, "evidence": [{**evidence, "verdict": verdict}]}]}))
    return path


@pytest.fixture
def synthetic(tmp_path: Path) -> Path:
    """Five seeds each of contrastive and SwAMP, copied from the committed synthetic runs."""
    _copy_runs(ROOT / "results" / "synthetic", tmp_path / "results" / "synthetic", ["contrastive", "swamp"])
    return tmp_path


def test_committed_ledger_matches_the_committed_results(capsys):
    assert main(["claims", str(LEDGER), "--check"]) == 0
    out = capsys.readouterr().out
    lines = claims.judge(LEDGER)
    assert len(lines) == sum(len(c["evidence"]) for c in claims.load(LEDGER)["claims"]) >= 20
    assert {line.verdict for line in lines} <= set(claims.VERDICTS)
    assert all(line.why for line in lines) and "every verdict matches" in out
    for line in lines:  # one row per piece of evidence, each with its verdict
        assert line.verdict in out and line.claim_id in out


def test_check_fails_when_a_hidden_shift_flips_a_verdict(synthetic, capsys):
    evidence = {"results": "results/synthetic",
                "difference": {"of": "swamp", "to": "contrastive", "metric": "a2b/class_R@1", "expect": "higher"},
                "flagged_ok": "one contrastive seed collapsed and recovered"}
    ledger = _ledger(synthetic, evidence, 4.1, "reproduced")
    assert main(["claims", str(ledger), "--check"]) == 0
    for path in (synthetic / "results" / "synthetic" / "swamp").glob("seed*.json"):  # SwAMP loses 3 points
        _edit(path, lambda d: d["metrics"].update({"a2b/class_R@1": d["metrics"]["a2b/class_R@1"] - 3.0}))
    capsys.readouterr()
    assert main(["claims", str(ledger), "--check"]) == 1
    captured = capsys.readouterr()
    assert "records 'reproduced', the results now give 'not reproduced'" in captured.err
    assert "1 problem(s)" in captured.out


def test_check_fails_when_a_timing_ratio_moves(tmp_path, capsys):
    src = ROOT / "results" / "gpu" / "flickr30k_shapes"
    _copy_runs(src, tmp_path / "results" / "flickr", ["scan@scorer=original", "swamp_par"])
    evidence = {"results": "results/flickr", "ratio": {"of": "scan@scorer=original", "to": "swamp_par"},
                # these GPU runs' freshness depends on the checkout (the committed ledger says why they may stand)
                "stale_ok": "this test is about the ratio rule, not about staleness"}
    ledger = _ledger(tmp_path, evidence, 88.7, "reproduced")
    assert main(["claims", str(ledger), "--check"]) == 0
    slow = tmp_path / "results" / "flickr" / "swamp_par" / "seed0.json"
    _edit(slow, lambda d: d["profile"]["timing"]["test_total"].update(
        median_s=d["profile"]["timing"]["test_total"]["median_s"] * 10))  # SwAMP-PAR's test 10x slower
    assert main(["claims", str(ledger), "--check"]) == 1
    assert "now give 'direction only'" in capsys.readouterr().err


def _line(tmp_path, evidence, paper=None):
    return claims.judge(_ledger(tmp_path, evidence, paper, "reproduced"))[0]


def test_ratio_rule_on_known_answers(tmp_path):
    src = ROOT / "results" / "gpu" / "flickr30k_shapes"
    _copy_runs(src, tmp_path / "results" / "f", ["scan@scorer=original", "swamp_par"])
    seconds = {name: json.loads((tmp_path / "results" / "f" / name / "seed0.json").read_text())
               ["profile"]["timing"]["test_total"]["median_s"] for name in ("scan@scorer=original", "swamp_par")}
    ours = seconds["scan@scorer=original"] / seconds["swamp_par"]
    spec = {"results": "results/f", "ratio": {"of": "scan@scorer=original", "to": "swamp_par"}}
    assert _line(tmp_path, spec, ours * 1.9).verdict == claims.REPRODUCED  # within the factor 2
    assert _line(tmp_path, spec, ours * 2.1).verdict == claims.DIRECTION
    assert _line(tmp_path, spec, 0.5).verdict == claims.NOT_REPRODUCED  # the paper says the other is faster
    line = _line(tmp_path, spec, ours)
    assert line.ours == f"{ours:.1f}×" and line.hardware == "NVIDIA H200"
    tight = {**spec, "ratio": {**spec["ratio"], "tolerance": 1.01}}
    assert _line(tmp_path, tight, ours * 1.05).verdict == claims.DIRECTION


def test_difference_rule_on_known_answers(synthetic):
    folder = synthetic / "results" / "synthetic"

    def judge(metric, expect):
        spec = {"results": "results/synthetic",
                "difference": {"of": "swamp", "to": "contrastive", "metric": metric, "expect": expect}}
        return _line(synthetic, spec, 1.0)

    def metric_of(run, seed, metric):
        return json.loads((folder / run / f"seed{seed}.json").read_text())["metrics"][metric]

    diffs = [metric_of("swamp", s, "a2b/class_R@1") - metric_of("contrastive", s, "a2b/class_R@1") for s in range(5)]
    line = judge("a2b/class_R@1", "higher")
    assert line.ours == f"{sum(diffs) / 5:+.2f}" and line.verdict == claims.REPRODUCED
    assert "paired t over 5 seeds" in line.why
    assert judge("a2b/class_R@1", "lower").verdict == claims.NOT_REPRODUCED
    for path in (folder / "swamp").glob("seed*.json"):  # SwAMP far below contrastive on every seed
        _edit(path, lambda d: d["metrics"].update({"a2b/R@1": d["metrics"]["a2b/R@1"] - 50.0}))
    lower = judge("a2b/R@1", "higher")
    assert lower.verdict == claims.NOT_REPRODUCED and "significantly" in lower.why
    assert judge("a2b/R@1", "lower").verdict == claims.REPRODUCED


def test_missing_runs_are_not_measured_and_named(synthetic):
    spec = {"results": "results/synthetic", "difference": {"of": "swamp@K=3", "to": "contrastive",
                                                           "metric": "a2b/R@1"}}
    line = _line(synthetic, spec)
    assert line.verdict == claims.NOT_MEASURED and "no result files of run 'swamp@K=3'" in line.why


@pytest.mark.parametrize("claim, message", [
    ({"id": "x", "claim": "c", "evidence": [{"not_measured": "no data", "verdict": "maybe"}]}, "valid: reproduced"),
    ({"id": "x", "claim": "c", "evidence": []}, "needs a list under evidence"),
    ({"id": "x", "claim": "c", "evidence": [{"verdict": "reproduced"}]}, "needs exactly one of"),
    ({"id": "x", "claim": "c", "evidence": [{"ratio": {"of": "a", "to": "b"}, "verdict": "reproduced"}]},
     "needs results:"),
    ({"claim": "c", "evidence": []}, "needs an id"),
])
def test_ledger_errors_name_the_problem(tmp_path, capsys, claim, message):
    path = tmp_path / "ledger.yaml"
    path.write_text(yaml.safe_dump({"claims": [claim]}))
    with pytest.raises(ConfigError, match=message):
        claims.load(path)
    assert main(["claims", str(path)]) == 2 and message in capsys.readouterr().err
    assert main(["claims", str(tmp_path / "absent.yaml")]) == 2
    assert "no claims ledger at" in capsys.readouterr().err


def _digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def test_table_and_run_leave_committed_results_untouched(tiny_task, tmp_path, monkeypatch, capsys):
    before = _digest(ROOT / "results")
    monkeypatch.setattr(stats, "N_RESAMPLES", 200)  # the bootstrap's cost; what is written is the question
    monkeypatch.chdir(ROOT)
    assert main(["table", "results"]) == 0
    assert capsys.readouterr().out.count("Accuracy (test)") >= 30
    monkeypatch.chdir(tmp_path)  # run's default --out is runs/, beside where it is started
    assert main(["run", str(tiny_task), "--methods", "contrastive", "--device", "cpu", "--no-progress"]) == 0
    assert (tmp_path / "runs" / "tiny" / "contrastive" / "seed0.json").is_file()
    assert _digest(ROOT / "results") == before


def test_value_rule_on_known_answers(synthetic):
    """The paper's number inside the 95% interval over seeds, or within the tolerance of the mean, reproduces."""
    from harness.report import stats
    from harness.store.schema import load_results

    evidence = {"results": "results/synthetic", "value": {"run": "contrastive", "metric": "a2b/R@1"}}
    runs = [r for r in load_results(synthetic / "results" / "synthetic") if r["run_name"] == "contrastive"]
    summary = stats.summarize([r["metrics"]["a2b/R@1"] for r in runs])
    inside = _line(synthetic, evidence, round(summary.mean, 2))
    assert inside.verdict == claims.REPRODUCED and "inside the 95% interval" in inside.why, inside.why
    far = _line(synthetic, evidence, summary.ci[1] + 5.0)
    assert far.verdict == claims.NOT_REPRODUCED and "below the paper's" in far.why
    paper = summary.ci[1] + 0.5  # outside the interval, within a tolerance of that distance and a bit
    tolerance = round(paper - summary.mean + 0.1, 1)
    near = _line(synthetic, {**evidence, "value": {**evidence["value"], "tolerance": tolerance}}, paper)
    assert near.verdict == claims.REPRODUCED and f"within {tolerance:g} points of the mean" in near.why


def test_every_cited_cpu_result_records_a_clean_run_of_the_kernels_and_the_loop():
    """Each result file the ledger cites outside results/gpu/ records what ran, made from committed files, and
    the record holds the Sinkhorn module and the training loop."""
    from harness.store.schema import load_results

    cited: set[tuple[str, str]] = set()
    for claim in claims.load(LEDGER)["claims"]:
        for item in claim["evidence"]:
            if "results" in item and not item["results"].startswith("results/gpu/"):
                cited |= {(item["results"], name) for name in claims.run_names(item)}
    assert cited
    for folder, name in sorted(cited):
        runs = [r for r in load_results(ROOT / folder) if r["run_name"] == name]
        assert runs, (folder, name)
        for r in runs:
            record = r.get("executed") or {}
            assert {"harness/ops/ot.py", "harness/run/train.py"} <= set(record.get("files") or {}), r["_path"]
            assert record.get("clean") is True, f"{r['_path']} was made from uncommitted files"


def test_a_contended_timing_is_marked_in_the_ledger(tmp_path):
    src = ROOT / "results" / "gpu" / "flickr30k_shapes"
    _copy_runs(src, tmp_path / "results" / "f", ["scan@scorer=original", "swamp_par"])
    spec = {"results": "results/f", "ratio": {"of": "scan@scorer=original", "to": "swamp_par", "phase": "step"}}
    assert "contended" not in _line(tmp_path, spec, 4.0).ours
    path = tmp_path / "results" / "f" / "swamp_par" / "seed0.json"
    data = json.loads(path.read_text())
    data["profile"].setdefault("contention", {})["train"] = {"contended": True}
    path.write_text(json.dumps(data))
    line = _line(tmp_path, spec, 4.0)
    assert line.ours.endswith("[contended 1/2]") and "kept the machine busy" in line.why


def _tuned_ledger(tmp_path: Path, folder: str, metric: str, tuned: dict, expect: str = "higher") -> Path:
    """A one-claim ledger whose evidence is judged again on the committed reference set ``folder``."""
    return _ledger(tmp_path, {"results": f"results/{folder.split('/')[-1]}",
                              "difference": {"of": "swamp", "to": "contrastive", "metric": metric, "expect": expect},
                              "tuned": {"results": f"results/reference/{folder}", **tuned}}, None, "not measured here")


def test_an_add_on_claim_is_judged_as_x_plus_swamp_against_x(tmp_path):
    path = _tuned_ledger(tmp_path, "qmul_shoes", "s2p/R@1", {"base": "max_violation", "verdict": "direction only"})
    (line,) = claims.judge(path, ROOT)
    t = line.tuned
    assert t is not None and t.pair and t.rival == "max-violation hinge (VSE++)"
    assert t.of == "max-violation hinge (VSE++) + SwAMP" and t.ours == "+1.57" and t.verdict == claims.DIRECTION
    shown = t.shown()  # 'direction only: ...', or 'direction only (stale): ...' beside uncommitted code
    assert shown.startswith("direction only") and \
        ": max-violation hinge (VSE++) + SwAMP − max-violation hinge (VSE++) = +1.57 [-5.11, +8.24]" in shown
    assert t.beside.startswith("best with SwAMP's term − best without: InfoNCE + SwAMP − SigLIP = +0.00")
    # the flags are the two compared rows' tuned runs, and a 'holds' verdict on them is refused without a reason
    assert "max-violation hinge (VSE++) + SwAMP collapse warned 5/5" in t.flags
    assert any("rests on flagged tuned runs" in m for m in claims.check([line]))
    # SwAMP alone asked of a set whose SwAMP row is an add-on: no verdict, saying how to ask
    path = _tuned_ledger(tmp_path, "qmul_shoes", "s2p/R@1", {"verdict": "not measured here"})
    (line,) = claims.judge(path, ROOT)
    assert line.tuned.verdict == claims.NOT_MEASURED and "tuned: base: X" in line.tuned.why
    path = _tuned_ledger(tmp_path, "qmul_shoes", "s2p/R@1", {"base": "siglip", "verdict": "not measured here"})
    (line,) = claims.judge(path, ROOT)
    assert line.tuned.verdict == claims.NOT_MEASURED and "no row X + SwAMP with X = 'siglip'" in line.tuned.why


def test_a_saturated_set_gives_the_uninformative_verdict_and_a_tie_is_holm_corrected(tmp_path):
    path = _tuned_ledger(tmp_path, "synthetic-a2b_class_R_1", "a2b/class_R@1", {"verdict": "uninformative for tuning"})
    (line,) = claims.judge(path, ROOT)
    t = line.tuned
    assert t.verdict == claims.UNINFORMATIVE and t.rival == "InfoNCE" and t.ours == "-0.11"
    assert "Holm's correction over the 4 tests deciding (adjusted p = 0.378)" in t.why and "ceiling" in t.why
    assert not [m for m in claims.check([line]) if "under equal tuning): the ledger records" in m]
    assert claims.UNINFORMATIVE not in claims.VERDICTS  # a verdict under equal tuning only
    bad = _ledger(tmp_path, {"results": "results/x", "verdict": "not measured here", "difference": {
        "of": "a", "to": "b", "metric": "a2b/R@1"}, "tuned": {"results": "results/y", "verdict": "not reproduced",
                                                               "rival": "infonce"}}, None, "not measured here")
    with pytest.raises(ConfigError, match="unknown key"):
        claims.load(bad)


def test_a_seed_mark_of_a_compared_row_is_named_beside_the_tuned_verdict(tmp_path):
    """The committed Wikipedia t2i set: SwAMP alone's study optimum (seed 0) is not held by its other seeds, so the
    ledger names the mark beside the verdict, as it names a collapse; SigLIP's cell has no mark."""
    path = _tuned_ledger(tmp_path, "wikipedia-t2i_class_mAP", "t2i/class_mAP", {"verdict": "not reproduced"})
    (line,) = claims.judge(path, ROOT)
    t = line.tuned
    assert t.verdict == claims.NOT_REPRODUCED and t.rival == "SigLIP" and t.ours == "-1.85"
    assert t.flags == "SwAMP optimum of seed 0 only"
    assert "[SwAMP optimum of seed 0 only]" in t.shown()
