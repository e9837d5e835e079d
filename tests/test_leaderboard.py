"""The reference table of cross-modal losses (harness leaderboard): the strongest contrastive loss chosen on
validation, equal budgets, bold cells, ranks across sets, the Bayesian comparison, the task's leaderboard block, the
command on a small own-features set, and the ledger's verdict under equal tuning."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from harness.cli import main
from harness.config import spec as specs
from harness.errors import ConfigError
from harness.report import claims, stats
from harness.report import reference_table as lb
from harness.report.accuracy import collapse_flag
from harness.store.schema import load_results
from harness.tune import reference_sets as tune_lb
from tests.conftest import ROOT, write_task


def cell(role: str, values: list[float], val_best: float, budget: int = 20, counted: int | None = None,
         minutes: float = 1.0) -> lb.Cell:
    return lb.Cell(name=role, method=role, values=dict(enumerate(values)), val_best=val_best,
                   trials={"counted": budget if counted is None else counted, "complete": budget, "pruned": 0},
                   budget=budget, pruner="none", trial_minutes=minutes, step_ms=2.0, contended=0, best={})


def board(name: str, cells: list[lb.Cell], metric: str = "a2b/R@1") -> lb.Board:
    manifest = {"task": "t.yaml", "metric": metric, "primary": True, "rows": {c.name: c.name for c in cells},
                "trials": 20}
    return lb.Board(name, Path(name), manifest, {c.name: c for c in cells}, "AMD EPYC, 2 cores")


def test_the_strongest_contrastive_loss_is_chosen_on_validation_not_on_test():
    b = board("s", [cell("infonce", [50, 51, 52], val_best=60.0),  # best on validation
                    cell("sum", [70, 71, 72], val_best=55.0),  # far better on test: not chosen
                    cell("swamp", [60, 61, 62], val_best=70.0)])  # not a contrastive loss: never a candidate
    rival, values = lb.strongest(b)
    assert rival == "infonce" and values == {"infonce": 60.0, "sum": 55.0}
    ranks = board("r", [cell("infonce", [5, 5, 5], 9.0), cell("sum", [5, 5, 5], 7.0)], metric="a2b/MedR")
    assert lb.strongest(ranks)[0] == "sum"  # a rank: lower is better on validation too
    with pytest.raises(ConfigError, match="no contrastive loss"):
        lb.strongest(board("n", [cell("swamp", [1, 2], 1.0)]))


def test_equal_budgets_are_checked():
    assert lb.equal_budget(board("s", [cell("infonce", [1, 2], 1.0), cell("swamp", [1, 2], 1.0)])) == 20
    uneven = board("s", [cell("infonce", [1, 2], 1.0), cell("swamp", [1, 2], 1.0, budget=12)])
    with pytest.raises(ConfigError, match="different budgets"):
        lb.equal_budget(uneven)
    short = board("s", [cell("infonce", [1, 2], 1.0), cell("swamp", [1, 2], 1.0, counted=15)])
    with pytest.raises(ConfigError, match="swamp 15/20"):
        lb.equal_budget(short)


def test_bold_is_not_significantly_below_the_best():
    rng = np.random.default_rng(0)
    best = list(80 + rng.normal(0, 0.1, 5))
    b = board("s", [cell("infonce", best, 1.0),
                    cell("sum", [v - 0.05 + e for v, e in zip(best, rng.normal(0, 0.3, 5))], 1.0),  # level
                    cell("siglip", [v - 10 for v in best], 1.0)])  # clearly below
    assert lb.bold_rows(b) == {"infonce", "sum"}
    test = stats.paired_seed_test(b.cells["siglip"].values, b.cells["infonce"].values)
    assert test.p is not None and test.p < stats.ALPHA


def test_ranks_across_sets_use_the_rows_every_set_has():
    pytest.importorskip("autorank", reason="the rank test needs autorank (test extra)")
    boards = [board(f"s{i}", [cell("infonce", [80 + i, 81 + i], 1.0), cell("swamp", [70 + i, 71 + i], 1.0),
                              cell("sum", [75 + i, 76 + i], 1.0)] + ([cell("cca", [1, 2], 1.0)] if i else []))
              for i in range(5)]
    found = lb.ranks(boards)
    assert found["rows"] == ["sum", "infonce", "swamp"]  # cca is missing from one set: left out of the ranks
    assert found["mean_ranks"] == {"infonce": 1.0, "sum": 2.0, "swamp": 3.0}
    assert found["test"] == "Friedman" and 0 < found["p"] < 0.05 and found["cd"] > 0
    assert "skipped" in lb.ranks(boards[:1]) and "at least 5" in lb.ranks(boards[:4])["skipped"]


def test_render_shows_the_budget_the_choice_and_the_costs():
    b = board("wiki", [cell("infonce", [80, 81, 82], 60.0, minutes=3.2), cell("sum", [60, 61, 62], 50.0),
                       cell("swamp", [79, 80, 81], 59.0, minutes=6.1)])
    page = lb.render([b], {"skipped": "one set"}, {"skipped": "one set"}, "cmd")
    # ± is the sample std over seeds; the summed hinge is not bold
    assert "**81.00 ± 1.00 (n=3)**" in page and "| 61.00 ± 1.00 (n=3)" in page
    assert "20 trials per method, pruning none" in page
    assert "strongest contrastive loss (validation): InfoNCE (summed hinge 50.00, InfoNCE 60.00)" in page or \
        "strongest contrastive loss (validation): InfoNCE (InfoNCE 60.00, summed hinge 50.00)" in page
    assert "3.2 / 2.0" in page and "6.1 / 2.0" in page


def test_swamp_against_the_strongest_loss_reads_better_level_or_worse():
    rng = np.random.default_rng(2)
    base = list(60 + rng.normal(0, 1.0, 5))
    noise = rng.normal(0, 0.2, 5)

    def against(shift: float, metric: str = "a2b/R@1") -> lb.Against:
        rank = metric.endswith("MedR")  # lower is better, on validation too: InfoNCE's 60 beats 70 there
        b = board("s", [cell("infonce", base, 60.0 if rank else 70.0),
                        cell("sum", [v + 9 for v in base], 70.0 if rank else 60.0),  # far apart on test
                        cell("swamp", [v + shift + e for v, e in zip(base, noise)], 65.0)], metric=metric)
        found = lb.against_strongest(b)
        assert found is not None and found.rival == "infonce" and found.seeds == [0, 1, 2, 3, 4]
        return found

    up, level, down = against(3.0), against(0.0), against(-3.0)
    assert up.tested.diff == pytest.approx(3.0 + noise.mean()) and up.reading == "better"
    assert level.reading == "level" and down.reading == "worse"
    assert up.tested.ci is not None and up.tested.ci[0] < up.tested.diff < up.tested.ci[1]
    assert against(-3.0, metric="a2b/MedR").reading == "better"  # a rank: lower is SwAMP's gain (validation too)
    assert lb.against_strongest(board("n", [cell("infonce", base, 1.0)])) is None  # no SwAMP yet
    assert lb.against_strongest(board("o", [cell("infonce", [1.0], 1.0), cell("swamp", [2.0], 1.0)])) is None
    line = lb.against_line(board("s", [cell("infonce", base, 70.0),
                                       cell("swamp", [v + 3 + e for v, e in zip(base, noise)], 65.0)]))
    assert line.startswith("- **s** (a2b/R@1): SwAMP − InfoNCE = +") and line.endswith("**better**.")
    assert "not measured yet" in lb.against_line(board("n", [cell("infonce", base, 1.0)]))


def test_a_tie_on_validation_is_judged_against_the_least_favourable_tied_loss():
    # a saturated validation metric: three losses at 100.00; list order would pick the max-violation hinge
    b = board("s", [cell("max_violation", [97.0, 97.2, 96.8, 97.1, 96.9], 100.0),
                    cell("sum", [99.0, 99.2, 98.9, 99.1, 99.0], 100.0),  # the best of the tied on test
                    cell("infonce", [98.0, 98.1, 97.9, 98.2, 97.8], 100.0),
                    cell("siglip", [99.9, 99.9, 99.9, 99.9, 99.9], 99.5),  # below on validation: not a candidate
                    cell("swamp", [98.5, 98.6, 98.4, 98.7, 98.5], 100.0)])
    assert lb.tied(b) == ["max_violation", "sum", "infonce"]
    found = lb.against_strongest(b)
    assert found is not None and found.rival == "sum" and found.tied == ("max_violation", "sum", "infonce")
    assert found.tested.diff == pytest.approx(-0.5) and found.reading == "worse"
    assert "a tie between max-violation hinge (VSE++), summed hinge, InfoNCE" in lb.render([b], {"skipped": "-"},
                                                                                          {"skipped": "-"}, "cmd")
    assert "validation tied" in lb.against_line(b)
    record = lb.summary([b], {"skipped": "-"}, {"skipped": "-"})["sets"]["s"]
    assert record["strongest_contrastive"] == ["max_violation", "sum", "infonce"]  # the tie, not list order's pick
    assert record["swamp_vs_strongest"]["rival"] == "sum"
    ranks = board("r", [cell("infonce", [3, 3, 4], 2.0), cell("sum", [2, 2, 2], 2.0), cell("swamp", [2, 3, 3], 1.0)],
                  metric="a2b/MedR")  # a rank: the least favourable is the lowest rank on test
    assert lb.against_strongest(ranks).rival == "sum"
    single = lb.against_strongest(board("u", [cell("infonce", [1, 2, 3], 9.0), cell("sum", [5, 6, 7], 8.0),
                                              cell("swamp", [2, 3, 4], 1.0)]))
    assert single is not None and single.rival == "infonce" and single.tied == ()  # validation decides


def test_swamp_against_each_loss_shows_how_much_the_answer_leans_on_the_choice():
    rng = np.random.default_rng(3)
    base = list(60 + rng.normal(0, 1.0, 5))
    noise = rng.normal(0, 0.2, 5)
    b = board("s", [cell("max_violation", [v - 5 for v in base], 50.0),  # SwAMP clearly above it
                    cell("infonce", [v + 3 for v in base], 70.0),  # chosen on validation; SwAMP clearly below
                    cell("siglip", [v + e for v, e in zip(base, rng.normal(0, 0.2, 5))], 65.0),  # level
                    cell("swamp", [v + e for v, e in zip(base, noise)], 60.0)])
    each = {a.rival: a for a in lb.against_each(b)}
    assert list(each) == ["max_violation", "infonce", "siglip"]  # the family's order; no study of the summed hinge
    assert each["max_violation"].tested.diff == pytest.approx(5.0 + noise.mean())
    assert [each[r].reading for r in each] == ["better", "worse", "level"]
    assert each["infonce"].tested.diff == lb.against_strongest(b).tested.diff  # the chosen one is the verdict
    line = lb.each_line(b)
    assert line is not None and "InfoNCE (chosen) -3." in line and "max-violation hinge (VSE++) +5." in line
    assert "(validation 50.00)" in line and line.endswith("the reading depends on the rival.")
    page = lb.render([b], {"skipped": "-"}, {"skipped": "-"}, "cmd")
    assert "## Had validation chosen another loss" in page and line in page
    record = lb.summary([b], {"skipped": "-"}, {"skipped": "-"})["sets"]["s"]["swamp_vs_each"]
    assert set(record) == set(each) and record["siglip"]["reading"] == "level"
    alike = board("a", [cell("infonce", [v + 3 for v in base], 70.0), cell("swamp", base, 60.0)])
    assert lb.each_line(alike).endswith("the same reading against every loss (worse).")
    assert lb.against_each(board("n", [cell("infonce", base, 1.0)])) == [] and lb.each_line(board("n", [])) is None


def test_the_committed_reference_table_is_what_the_code_renders():
    root = ROOT / "results" / "reference"
    committed = (root / "reference.md").read_text(encoding="utf-8")
    command = committed.splitlines()[0].removeprefix("<!-- generated by `").removesuffix("` -->")
    assert command.startswith("python -m harness leaderboard --out results/reference"), command
    boards = lb.load_boards(root)
    columns = [b for b in boards if b.column and b.cells]  # the appendix's sets take no part in the ranks
    recorded = lb.recorded(root)
    # the Bayesian comparison samples for minutes: its committed record is taken, everything else recomputed
    assert lb.render(boards, lb.ranks(columns), recorded["bayes"], command) == committed, \
        "results/reference/reference.md is stale: python -m harness leaderboard --out results/reference"
    assert set(recorded["sets"]) == {b.name for b in boards}
    for b in boards:
        if b.named("contrastive"):  # a set with a contrastive row has a strongest one
            assert recorded["sets"][b.name]["strongest_contrastive"] == lb.tied(b), \
                "results/reference/reference.json is stale: python -m harness leaderboard --out results/reference"


@pytest.mark.slow  # samples a Stan model (minutes the first time: pystan compiles it)
def test_the_bayesian_comparison_is_seeded_and_points_the_right_way():
    pytest.importorskip("stan", reason="the hierarchical model samples with pystan (test extra)")
    pytest.importorskip("baycomp", reason="baycomp (test extra)")
    rng = np.random.default_rng(1)
    boards = []
    for i in range(4):
        base = 60 + 5 * i + rng.normal(0, 0.5, 5)
        boards.append(board(f"s{i}", [cell("infonce", list(base), 1.0),
                                      cell("swamp", list(base + 4 + rng.normal(0, 0.3, 5)), 1.0)]))
    one = lb.bayes(boards, samples=500, chains=2)
    two = lb.bayes(boards, samples=500, chains=2)
    assert one == two  # the sampler is seeded
    assert one["p_better"] > 0.9 and one["p_worse"] < 0.05  # SwAMP 4 points above on every set
    assert one["pairs"] == {f"s{i}": ["swamp", "infonce"] for i in range(4)}
    scaled = lb.bayes(boards, scale=lb.across.SCALED, samples=500, chains=2)  # pooled seed SDs: 4 points is ~8
    assert scaled["scale"] == lb.across.SCALED and scaled["p_better"] > 0.9 and scaled["units"]["s0"] < 1.0


# --- the task's block and the command ---------------------------------------------------------------------------

def test_every_committed_leaderboard_block_is_valid():
    """Each primary task's block is the factorial design: every contrastive loss X alone and with SwAMP's term beside
    it (its weight searched), SwAMP alone; at least 20 trials per set, QMUL included."""
    from harness.report import rows as rowmodel
    from harness.tune import space

    for name in ("synthetic", "wikipedia", "msrvtt_vgg128", "qmul_shoes", "qmul_chairs", "own_features",
                 "own_features_labels"):
        spec = specs.load_task(ROOT / "tasks" / f"{name}.yaml")
        block = tune_lb.block_of(spec)
        assert block.metric in spec.metrics.names() and block.trials >= 20
        family = list(rowmodel.FAMILY)
        assert [r.name for r in rowmodel.of_role(block.rows, rowmodel.CONTRASTIVE)] == family
        assert sorted((r.base, r.name) for r in rowmodel.of_role(block.rows, rowmodel.WITH_SWAMP)) == \
            sorted((x, x + rowmodel.WITH) for x in family)
        (alone,) = rowmodel.of_role(block.rows, rowmodel.SWAMP)
        assert spec.resolved(alone.method)["method"]["contrastive_weight"] == 0
        for row in rowmodel.of_role(block.rows, rowmodel.WITH_SWAMP):
            settings = spec.resolved(row.method)["method"]
            assert settings["contrastive_weight"] > 0 and rowmodel.legacy_base(settings) == row.base, (name, row)
            searched = {d.name: d for d in space.dimensions(spec, row.method)}
            assert searched["contrastive_weight"].space.log, (name, row.name)  # its weight is searched
    assert tune_lb.block_of(specs.load_task(ROOT / "tasks" / "qmul_chairs.yaml")).folds == 3
    # the paper's own configuration per family is the matching X + SwAMP row
    shoes = tune_lb.block_of(specs.load_task(ROOT / "tasks" / "qmul_shoes.yaml"))
    assert shoes.rows["max_violation+swamp"].method == "swamp"
    msrvtt = tune_lb.block_of(specs.load_task(ROOT / "tasks" / "msrvtt_vgg128.yaml"))
    assert msrvtt.rows["sum+swamp"].method == "swamp"


def _with_block(tmp_path: Path, block: dict, **extra: object) -> Path:
    """The tiny task with ``block`` as its whole leaderboard block (not merged with its base's)."""
    from harness.config.spec import merge
    from tests.conftest import TINY

    raw = yaml.safe_load((ROOT / "tasks" / "synthetic.yaml").read_text())
    raw.pop("leaderboard")
    body = merge(raw, {k: v for k, v in {**TINY, **extra}.items() if k != "base"})
    return write_task(tmp_path, {**body, "leaderboard": block})


def test_the_first_editions_methods_block_is_still_read(tmp_path):
    from tests.conftest import TINY

    methods = {**TINY["methods"], "swamp_plus": {**TINY["methods"]["swamp"], "contrastive_weight": 1.0,
                                                 "loss": "infonce"}}
    path = _with_block(tmp_path, {"metric": "a2b/R@1", "methods": {"infonce": "contrastive", "swamp": "swamp",
                                                                   "swamp_infonce": "swamp_plus"}}, methods=methods)
    rows = tune_lb.block_of(specs.load_task(path)).rows
    assert {n: (r.method, r.role, r.base) for n, r in rows.items()} == {
        "infonce": ("contrastive", "contrastive", None), "swamp": ("swamp", "swamp", None),
        "infonce+swamp": ("swamp_plus", "with_swamp", "infonce")}


def test_a_bad_leaderboard_block_is_refused_naming_the_key(tmp_path):
    row = {"infonce": {"method": "contrastive", "role": "contrastive"}}
    for block, message in (({"metric": "a2b/R@99", "rows": row}, "leaderboard metric"),
                           ({"metric": "a2b/R@1", "methods": {"infonse": "contrastive"}}, "did you mean 'infonce'"),
                           ({"metric": "a2b/R@1", "methods": {"infonce": "nope"}}, "unknown method 'nope'"),
                           ({"metric": "a2b/R@1", "rows": {"x": {"method": "nope", "role": "candidate"}}},
                            "unknown method 'nope'"),
                           ({"metric": "a2b/R@1", "rows": {"x": {"method": "contrastive", "role": "rival"}}},
                            "role must be one of"),
                           ({"metric": "a2b/R@1", "rows": {**row, "again": {"method": "contrastive",
                                                                              "role": "candidate"}}},
                            "both tune contrastive"),
                           ({"metric": "a2b/R@1", "rows": row, "methods": {"infonce": "contrastive"}}, "not both"),
                           ({"metric": "a2b/R@1", "trials": 0, "rows": row}, "trials"),
                           ({"metric": "a2b/R@1", "folds": 2, "rows": row}, "folds must be an integer >= 3"),
                           ({"metrc": "a2b/R@1"}, "did you mean 'metric'")):
        with pytest.raises(ConfigError, match=message):
            tune_lb.block_of(specs.load_task(_with_block(tmp_path, block)))
    # any registered method is a row, declared by the task or not
    path = _with_block(tmp_path, {"metric": "a2b/R@1", "rows": {**row, "mmr": {"method": "mmr", "role": "candidate"}}})
    assert tune_lb.block_of(specs.load_task(path)).rows["mmr"].role == "candidate"


def _labelled_features(root: Path, n: int = 240, classes: int = 4, width: int = 12) -> Path:
    rng = np.random.default_rng(0)
    means_a, means_b = rng.normal(0, 1, (classes, width)), rng.normal(0, 1, (classes, width))
    root.mkdir(parents=True)
    for split, count in (("train", n), ("val", n // 4), ("test", n // 4)):
        y = rng.integers(0, classes, count)
        np.save(root / f"{split}_a.npy", (means_a[y] + rng.normal(0, 0.7, (count, width))).astype("float32"))
        np.save(root / f"{split}_b.npy", (means_b[y] + rng.normal(0, 0.7, (count, width))).astype("float32"))
        np.save(root / f"{split}_labels.npy", y.astype("int64"))
    return root


@pytest.mark.slow  # four studies and their tuned runs (about 15 s)
def test_the_table_command_on_a_small_own_features_set(tmp_path, capsys):
    data = _labelled_features(tmp_path / "features")
    out = tmp_path / "reference"
    assert main(["leaderboard", str(ROOT / "tasks" / "own_features_labels.yaml"), "--data-root", str(data),
                 "--trials", "2", "--trials-cap", "2", "--seeds", "0,1", "--epochs", "1", "--out", str(out),
                 "--no-bayes", "--no-progress",
                 "--rows", "max_violation,infonce,swamp,cca,floor"]) == 0
    page = capsys.readouterr().out
    manifest = json.loads((out / "own_features_labels" / lb.MANIFEST).read_text())
    assert manifest["metric"] == "a2b/class_mAP" and manifest["primary"] and manifest["trials"] == 2
    results = [r for r in load_results(out) if r.get("tuning")]
    assert {r["run_name"] for r in results} == {"contrastive_max_violation@tuned", "contrastive@tuned",
                                                 "swamp_only@tuned", "cca@tuned", "identity@tuned"}
    gradient = [r for r in results if r["run_name"] != "identity@tuned"]
    assert {r["tuning"]["trials"]["counted"] for r in gradient} == {2}  # the same budget for every method
    assert {r["tuning"]["pruner"] for r in gradient} == {"none"} and {r["seed"] for r in results} == {0, 1}
    assert {r["tuning"]["metric"] for r in results} == {"a2b/class_mAP"}
    for label in ("max-violation hinge", "InfoNCE", "SwAMP", "CCA", "no training (identity)"):
        assert label in page
    assert page.rstrip("\n").endswith((out / "reference.md").read_text().rstrip("\n"))
    assert set(json.loads((out / "reference.json").read_text())["sets"]) == {"own_features_labels"}
    # reproduce --reference re-makes every tuned run from its record and computes the table again: the same numbers
    assert main(["reproduce", "--reference", str(out), "--out", str(tmp_path / "again"), "--allow-dirty",
                 "--no-progress"]) == 0
    shown = capsys.readouterr().out
    assert "moved" not in shown and "rank order unchanged" in shown
    assert "SwAMP − " in shown and shown.count(" same") >= 6  # 5 cells and SwAMP against the strongest loss


# --- the ledger's verdicts: flagged runs and equal tuning ----------------------------------------------------------

def _tuned_set(tmp_path: Path) -> Path:
    """A reference-table set made of the committed tuned runs of results/tuning (3 seeds, a2b/class_mAP), with a
    second contrastive loss that wins on test but not on validation."""
    src = ROOT / "results" / "tuning" / "wikipedia" / "own_features_labels"
    folder = tmp_path / "results" / "reference" / "wiki"
    for run in ("contrastive@tuned", "swamp@tuned"):
        shutil.copytree(src / run, folder / "own_features_labels" / run)
    shutil.copytree(src / "contrastive@tuned", folder / "own_features_labels" / "contrastive_sum@tuned")
    for path in (folder / "own_features_labels" / "swamp@tuned").glob("seed*.json"):  # read as SwAMP alone
        data = json.loads(path.read_text())
        data["config"]["method"]["contrastive_weight"] = 0.0
        path.write_text(json.dumps(data))
    for path in (folder / "own_features_labels" / "contrastive_sum@tuned").glob("seed*.json"):
        data = json.loads(path.read_text())
        data["run_name"], data["metrics"]["a2b/class_mAP"] = "contrastive_sum@tuned", 99.0 + data["seed"] / 10
        data["tuning"]["best_value"] = 1.0  # the worst on validation
        path.write_text(json.dumps(data))
    lb.write_manifest(folder, {"task": "tasks/own_features_labels.yaml", "task_name": "own_features_labels",
                               "metric": "a2b/class_mAP", "primary": True, "trials": 20,
                               "rows": {"infonce": "contrastive", "sum": "contrastive_sum", "swamp": "swamp"}})
    return folder


def test_the_ledger_judges_again_against_the_strongest_loss_on_validation(tmp_path):
    folder = _tuned_set(tmp_path)
    committed = ROOT / "results" / "tuning" / "wikipedia" / "own_features_labels"
    item = {"results": "results/reference/wiki", "verdict": "not reproduced",
            "difference": {"of": "swamp@tuned", "to": "contrastive@tuned", "metric": "a2b/class_mAP",
                           "expect": "higher"},
            "tuned": {"results": "results/reference/wiki", "verdict": "not reproduced"}}
    ledger = tmp_path / "claims" / "ledger.yaml"
    ledger.parent.mkdir()
    ledger.write_text(yaml.safe_dump({"paper": "t", "claims": [{"id": "c", "claim": "SwAMP wins",
                                                                 "evidence": [item]}]}))
    (line,) = claims.judge(ledger, tmp_path)
    t = line.tuned
    assert t is not None and t.rival == "InfoNCE"  # chosen on validation, though the summed hinge wins on test
    swamp = {json.loads(p.read_text())["seed"]: json.loads(p.read_text())["metrics"]["a2b/class_mAP"]
             for p in (committed / "swamp@tuned").glob("seed*.json")}
    infonce = {json.loads(p.read_text())["seed"]: json.loads(p.read_text())["metrics"]["a2b/class_mAP"]
               for p in (committed / "contrastive@tuned").glob("seed*.json")}
    assert t.ours == f"{np.mean([swamp[s] - infonce[s] for s in swamp]):+.2f}"
    assert t.budget.startswith("20 trials per method") and "InfoNCE" in t.why and "summed hinge 1.00" in t.why
    assert t.verdict == "not reproduced"
    assert not [m for m in claims.check([line]) if "records" in m]  # (the copied runs are stale: not the point)
    # an unequal budget gives no verdict, saying why
    for path in (folder / "own_features_labels" / "swamp@tuned").glob("seed*.json"):
        data = json.loads(path.read_text())
        data["tuning"]["budget"]["trials"] = 12
        path.write_text(json.dumps(data))
    (line,) = claims.judge(ledger, tmp_path)
    assert line.tuned is not None and line.tuned.verdict == claims.NOT_MEASURED
    assert "different budgets" in line.tuned.why
    assert any("under equal tuning): the ledger records 'not reproduced', the results now give 'not measured here'" in m
               for m in claims.check([line]))


def test_a_collapsed_baseline_is_marked_and_refused_without_a_reason(tmp_path):
    shutil.copytree(ROOT / "results" / "wikipedia" / "contrastive", tmp_path / "results" / "wikipedia" / "contrastive")
    shutil.copytree(ROOT / "results" / "wikipedia" / "swamp", tmp_path / "results" / "wikipedia" / "swamp")
    item = {"results": "results/wikipedia", "verdict": "reproduced",
            "difference": {"of": "swamp", "to": "contrastive", "metric": "i2t/class_mAP", "expect": "higher"}}

    def judged(extra: dict) -> claims.Line:
        ledger = tmp_path / "claims" / "ledger.yaml"
        ledger.parent.mkdir(exist_ok=True)
        ledger.write_text(yaml.safe_dump({"paper": "t", "claims": [{"id": "w", "claim": "SwAMP wins",
                                                                     "evidence": [{**item, **extra}]}]}))
        (line,) = claims.judge(ledger, tmp_path)
        return line

    line = judged({})
    # every seed recorded the collapse; in 2 of the 5 it still held at the selected epoch (the accuracy table's marks)
    assert line.flags == "contrastive collapsed 2/5, collapse warned 5/5" and line.verdict == "reproduced"
    assert "[contrastive collapsed 2/5, collapse warned 5/5]" in line.shown_verdict()
    assert any("rests on flagged runs (contrastive collapsed 2/5, collapse warned 5/5)" in m and "flagged_ok" in m
               for m in claims.check([line]))
    line = judged({"flagged_ok": "the paper's baseline as published"})
    assert "reason stated" in line.shown_verdict() and not any("flagged_ok" in m for m in claims.check([line]))
    with pytest.raises(ConfigError, match="flagged_ok: must say why"):
        judged({"flagged_ok": "  "})


def test_the_ledger_marks_runs_in_the_accuracy_tables_terms():
    slow = {"signal": "chance", "from_epoch": 1, "to_epoch": 12, "at_best_epoch": False}  # a slow start, recovered
    held = {"signal": "plateau:loss", "from_epoch": 30, "to_epoch": 60, "at_best_epoch": True}
    runs = [{"collapse": slow}, {"collapse": held}, {"collapse": None}, {"collapse": slow, "warnings": ["K"]}]
    assert claims.flag_text("SwAMP", runs) == "SwAMP collapsed 1/4, collapse warned 3/4; SwAMP settings warned 1/4"
    assert claims.flag_text("SwAMP", runs[:1] + runs[2:3]) == "SwAMP collapse warned 1/2"  # never "collapsed"
    assert claims.flag_text("SwAMP", [{"collapse": None}, {}]) == ""
    # the cell of the table says the same of the same runs
    assert collapse_flag(runs) == " [collapsed 1/4; warned 3/4]"
    # refused: a verdict that says the claim holds, on flagged runs, without a reason; nothing else
    assert claims.refuses("reproduced", "x", "") and claims.refuses("direction only", "x", "")
    assert not claims.refuses("not reproduced", "x", "") and not claims.refuses("reproduced", "x", "why")
    assert not claims.refuses("reproduced", "", "")


def test_a_tuned_verdict_on_collapsed_runs_is_marked_and_refused_without_a_reason(tmp_path):
    folder = _tuned_set(tmp_path)
    runs = folder / "own_features_labels"
    for path in (runs / "contrastive@tuned").glob("seed*.json"):  # the rival (InfoNCE) collapsed in every seed
        data = json.loads(path.read_text())
        data["collapse"] = {"signal": "chance", "from_epoch": 1, "to_epoch": 9, "at_best_epoch": True}
        path.write_text(json.dumps(data))
    for path in (runs / "swamp@tuned").glob("seed*.json"):  # SwAMP far ahead: the tuned verdict says it holds
        data = json.loads(path.read_text())
        data["metrics"]["a2b/class_mAP"] = 90.0 + data["seed"] / 10
        path.write_text(json.dumps(data))

    def judged(tuned: dict) -> claims.Line:
        item = {"results": "results/reference/wiki", "verdict": "reproduced",
                "difference": {"of": "swamp@tuned", "to": "contrastive@tuned", "metric": "a2b/class_mAP",
                               "expect": "higher"},
                "tuned": {"results": "results/reference/wiki", "verdict": "reproduced", **tuned}}
        ledger = tmp_path / "claims" / "ledger.yaml"
        ledger.parent.mkdir(exist_ok=True)
        ledger.write_text(yaml.safe_dump({"paper": "t", "claims": [{"id": "c", "claim": "SwAMP wins",
                                                                     "evidence": [item]}]}))
        (line,) = claims.judge(ledger, tmp_path)
        return line

    t = judged({}).tuned
    flags = "InfoNCE collapsed 3/3, collapse warned 3/3"
    assert t is not None and t.verdict == "reproduced" and t.flags == flags
    assert t.shown().endswith(f"vs InfoNCE {t.interval} [{flags}]") and t.interval
    assert any(f"under equal tuning): its verdict 'reproduced' rests on flagged tuned runs ({flags})" in m
               for m in claims.check([judged({})]))
    line = judged({"flagged_ok": "the rival recovered after its slow start"})
    assert "reason stated" in line.tuned.shown() and not any("flagged tuned runs" in m for m in claims.check([line]))
    with pytest.raises(ConfigError, match="tuned: flagged_ok: must say why"):
        judged({"flagged_ok": " "})
    page = lb.render([lb.load_set(folder)], {"skipped": "-"}, {"skipped": "-"}, "cmd")
    assert "[collapsed 3/3; warned 3/3]" in page and "[warned j/n]" in page  # the table marks the cell too


def test_reproduce_reference_counts_a_changed_tie_as_moved():
    from harness.remake import reference as remake
    swamp = cell("swamp", [98.5, 98.6, 98.4], 99.5)  # below the ceiling: the set is not saturated
    tie = [cell("max_violation", [97.0, 97.2, 96.8], 100.0), cell("sum", [99.0, 99.2, 98.9], 100.0),
           cell("infonce", [98.0, 98.1, 97.9], 99.0), swamp]
    assert remake.compared([board("s", tie)], {"s": board("s", tie)})[1] == 0  # the same cells: nothing moved
    # InfoNCE now ties on validation too: list order still picks the max-violation hinge and the answer's rival
    # (the summed hinge) and reading stay, but the losses validation cannot tell apart changed
    wider = [*tie[:2], cell("infonce", [98.0, 98.1, 97.9], 100.0), swamp]
    rows, moved = remake.compared([board("s", tie)], {"s": board("s", wider)})
    assert moved == 1
    assert rows[-1][1] == "SwAMP − summed hinge" and rows[-1][-1] == "same"


def test_the_budget_line_names_the_rows_a_primary_set_does_not_declare():
    cells = [cell("infonce", [1, 2, 3], 9.0), cell("swamp", [2, 3, 4], 1.0)]
    page = lb.render([board("p", cells)], {"skipped": "-"}, {"skipped": "-"}, "cmd")
    assert "no row for max-violation hinge (VSE++), summed hinge, SigLIP, InfoNCE + SwAMP, CCA, no training " \
           "(identity): the task does not declare them" in page
    second = board("m", cells, metric="a2b/MedR")
    second.manifest["primary"] = False  # a second metric's rows are chosen with --rows: nothing to say
    assert "no row for" not in lb.render([second], {"skipped": "-"}, {"skipped": "-"}, "cmd")
