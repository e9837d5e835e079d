"""The library behind the command line, called directly: each subcommand's work is a function of typed options
(docs/architecture.md, "The library"), and a script gets the same runs, files and errors as the command."""
from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path

import pytest

from harness.analysis import ensemble
from harness.config import catalog
from harness.errors import ConfigError
from harness.remake import evidence
from harness.report import compare, folders, plot, status
from harness.run import commands
from harness.run.grid import SKIPPED, Grid
from harness.store.schema import read_result
from tests.conftest import ROOT, write_task


@pytest.fixture
def made(tiny_task, tmp_path):
    """Two runs of the tiny task (contrastive and swamp, seed 0) made by :func:`commands.run_task`."""
    out = tmp_path / "out"
    outcome = commands.run_task(commands.Selection(task=tiny_task, methods=("contrastive", "swamp")),
                                Grid(out=out, device="cpu", progress=False))
    return tiny_task, out, outcome


def test_a_selection_plans_the_runs_the_command_would(tiny_task):
    runs = commands.plan_runs(commands.Selection(task=tiny_task, methods=("contrastive", "swamp"), seeds="0-1",
                                                 sweep=("swamp.K=8,16",)))
    # the tiny task's own K is 16: that run keeps the plain name
    assert sorted((r.run_name, r.seed) for r in runs) == sorted(
        (name, seed) for name in ("contrastive", "swamp", "swamp@K=8") for seed in (0, 1))
    assert commands.reference_of("contrastive", runs) == "contrastive"
    with pytest.raises(ConfigError, match="--reference 'contrastiv' is not among this command's runs.*contrastive"):
        commands.reference_of("contrastiv", runs)
    with pytest.raises(ConfigError, match="no_such_method"):
        commands.plan_runs(commands.Selection(task=tiny_task, methods=("no_such_method",)))


def test_a_registered_method_the_task_does_not_declare_gets_a_note(tiny_task):
    assert commands.undeclared(tiny_task, ["contrastive"]) == []
    (note,) = commands.undeclared(tiny_task, ["mmr", "contrastive", "mmr"])
    assert note.startswith("note: mmr is a registered method") and "`mmr: {method: mmr}`" in note


def test_run_task_writes_result_files_and_skips_them_the_second_time(made):
    tiny_task, out, outcome = made
    assert outcome.failed is None and outcome.refused is None and not outcome.submitted
    assert sorted(r["run_name"] for r in outcome.results) == ["contrastive", "swamp"]
    assert all(Path(r["_path"]).is_file() and not r.get(SKIPPED) for r in outcome.results)
    again = commands.run_task(commands.Selection(task=tiny_task, methods=("contrastive",)),
                              Grid(out=out, device="cpu", progress=False))
    (skipped,) = again.results
    assert skipped[SKIPPED] and skipped["metrics"] == read_result(Path(skipped["_path"]))["metrics"]


def test_rerun_files_reproduces_the_recorded_metrics_and_its_check_counts_none_different(made, tmp_path, capsys):
    _, out, outcome = made
    source = next(r["_path"] for r in outcome.results if r["run_name"] == "contrastive")
    reran = commands.rerun_files([source], Grid(out=tmp_path / "again", device="cpu", progress=False))
    (result,) = reran.outcome.results
    assert result["metrics"] == read_result(Path(source))["metrics"]
    assert reran.check() == 0 and "1 of 1 run(s) made on this kind of machine reproduced" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="no such result file or folder"):
        commands.rerun_files([tmp_path / "absent.json"], Grid(out=tmp_path / "x", device="cpu", progress=False))


def test_the_tables_of_a_folder_print_and_are_written_only_when_asked(made, capsys):
    _, out, _ = made
    folder = out / "tiny"  # run_task writes result files; the tables are the command line's (or tables') to write
    assert folders.tables(folder) == []
    assert "Accuracy (test)" in capsys.readouterr().out and not (folder / "accuracy.md").exists()
    written = folders.tables(folder, fmt="github", reference="contrastive", write=True)
    assert folder / "accuracy.md" in written and all(p.is_file() for p in written)
    with pytest.raises(ConfigError, match="no result files"):
        folders.tables(out / "nothing")


def test_comparing_a_folder_with_itself_flags_nothing_and_bad_levels_are_refused(made, capsys):
    _, out, _ = made
    changes = compare.compare_folders(out, out, metrics=["a2b/R@1"])
    assert [(c.run, c.metric, c.diff, c.flagged) for c in changes] == [
        ("contrastive", "a2b/R@1", 0.0, False), ("swamp", "a2b/R@1", 0.0, False)]
    assert "compare: 0 of 2 metric(s) changed" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="--alpha 2: a significance level in"):
        compare.compare_folders(out, out, alpha=2)
    with pytest.raises(ConfigError, match="NEW .*: no result files"):
        compare.compare_folders(out, out / "nothing")


def test_status_counts_the_runs_found_and_the_runs_a_command_plans(made, capsys):
    tiny_task, out, _ = made
    assert status.status(out)["finished"] == 2
    planned = status.status(out, tiny_task, methods=["contrastive", "swamp", "cca"], seeds="0-1")
    assert isinstance(planned, Counter) and (planned["finished"], planned["not started"]) == (2, 4)
    assert "swamp" in capsys.readouterr().out
    with pytest.raises(ConfigError, match="add the task file"):
        status.status(out, seeds="0-4")


def test_an_ensemble_of_two_runs_is_evaluated_and_written(made, tmp_path):
    _, out, outcome = made
    paths = [r["_path"] for r in outcome.results]
    result = ensemble.evaluate_ensemble(paths, device="cpu", out=tmp_path / "ens")
    assert Path(result["_path"]).is_file() and set(result["metrics"]) == set(outcome.results[0]["metrics"])
    assert f"result: {result['_path']}" in ensemble.summary(result)
    with pytest.raises(ConfigError, match="an ensemble averages two runs; got 1"):
        ensemble.evaluate_ensemble(paths[:1], device="cpu")


def test_a_sweep_is_plotted_from_the_committed_ablations(tmp_path):
    folder = tmp_path / "synthetic_ablations"
    shutil.copytree(ROOT / "results" / "synthetic_ablations", folder, ignore=shutil.ignore_patterns("plots", "*.pt"))
    paths = plot.plot_sweep(folder, "swamp.K", reference="contrastive", out=tmp_path / "K")
    assert {p.suffix for p in paths} >= {".png", ".pdf", ".md", ".csv", ".json"}
    assert plot.recorded_caption(tmp_path / "K.png").endswith("mean and sample std over seeds.")
    with pytest.raises(ConfigError, match="no run varies 'train.lr'; settings varied by some run: swamp.K"):
        plot.plot_sweep(folder, "train.lr", out=tmp_path / "lr")


def test_the_catalog_lists_the_shipped_tasks_and_names_an_invalid_one(tmp_path):
    shipped = {t.path.stem: t for t in catalog.tasks()}
    assert ("swamp", "swamp") in shipped["synthetic"].methods and not shipped["synthetic"].error
    assert catalog.is_shipped(ROOT / "tasks") and not catalog.is_shipped(tmp_path)
    write_task(tmp_path, {"name": "broken"}, "broken.yaml")
    (entry,) = catalog.tasks(tmp_path)
    assert entry.error and not entry.methods
    assert "swamp" in catalog.components()["methods"] and "synthetic_gaussian" in catalog.components()["data sources"]


def test_reproduce_names_an_unknown_claim(tmp_path):
    with pytest.raises(ConfigError, match="no claim 'no-such-claim' in the ledger"):
        evidence.reproduce_evidence(["no-such-claim"], allow_dirty=True, out=tmp_path)


LIBRARY = ["harness/report/compare.py", "harness/report/folders.py", "harness/report/plot.py",
           "harness/report/status.py", "harness/analysis/ensemble.py", "harness/remake/evidence.py",
           "harness/run/commands.py", "harness/config/catalog.py", "harness/run/jobs.py"]


@pytest.mark.parametrize("module", LIBRARY)
def test_the_library_modules_take_typed_options_not_a_parsed_command(module):
    """No argparse in the library behind the command line, and no parameter annotated as a parsed command."""
    tree = ast.parse((ROOT / module).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names} | {
        n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert "argparse" not in imported
    annotations = [ast.unparse(n.annotation) for n in ast.walk(tree) if isinstance(n, ast.arg) and n.annotation]
    assert annotations and not [a for a in annotations if "Namespace" in a]
