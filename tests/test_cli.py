"""The command line end to end: result files, tables, determinism and error exits."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.cli import main
from harness.config.plan import parse_seeds
from harness.errors import ConfigError
from harness.report.files import TableOptions, record_options
from tests.conftest import ROOT


def run_cli(*args: str) -> int:
    return main(list(args))


@pytest.fixture
def two_runs(tiny_task, tmp_path, capsys):
    out = tmp_path / "out"
    rc = run_cli("run", str(tiny_task), "--methods", "contrastive,swamp", "--seeds", "0,1",
                 "--device", "cpu", "--out", str(out), "--no-progress")
    assert rc == 0
    printed = capsys.readouterr().out
    assert "Accuracy" in printed and "step / contrastive" in printed and "tiny/accuracy.md" in printed
    return out / "tiny"


def test_run_writes_result_files_and_tables(two_runs):
    files = sorted(p.relative_to(two_runs).as_posix() for p in two_runs.rglob("*.json"))
    assert files == ["contrastive/seed0.json", "contrastive/seed1.json", "swamp/seed0.json", "swamp/seed1.json",
                     "tables.json"]  # the tables' options
    result = json.loads((two_runs / "swamp" / "seed0.json").read_text())
    assert set(result["metrics"]) >= {"a2b/R@1", "a2b/R@10", "a2b/MedR", "a2b/class_R@1"}
    assert result["config"]["method"]["K"] == 16 and result["task_version"] == "test"
    assert result["environment"]["versions"]["torch"] and result["environment"]["hardware"]["cores"]
    assert "commit" in result["environment"]["git"] and result["environment"]["date"]
    timing = result["profile"]["timing"]
    for key in ("train_step", "train_epoch", "test_total", "test_encode", "test_score", "test_rank"):
        assert timing[key]["median_s"] > 0
    assert timing["train_step"]["p90_s"] >= timing["train_step"]["median_s"]
    assert result["profile"]["memory"]["train"]["cpu_peak_rss_mib"] > 0
    assert result["profile"]["memory"]["test"]["cpu_peak_rss_mib"] > 0
    assert 1 <= result["best_epoch"] <= 2 and len(result["history"]) == 2
    assert (two_runs / "swamp" / "seed0.pt").exists()
    for name in ("accuracy.md", "accuracy.tex", "timing.md", "timing.tex"):
        assert (two_runs / name).stat().st_size > 0
    assert "\\toprule" in (two_runs / "accuracy.tex").read_text()
    assert " ± " in (two_runs / "accuracy.md").read_text()  # two seeds: mean ± std


def test_table_prints_and_writes_only_with_write(two_runs, capsys):
    before = {p: p.read_bytes() for p in two_runs.glob("*.*")}
    record_options(two_runs, TableOptions("contrastive"))  # the options the folder's tables record
    assert run_cli("table", str(two_runs)) == 0
    out = capsys.readouterr().out
    assert "swamp" in out and "Δ vs contrastive" in out  # printed with the recorded reference
    assert (two_runs / "timing.md").read_bytes() == before[two_runs / "timing.md"]  # nothing written
    (two_runs / "accuracy.md").unlink()
    assert run_cli("table", str(two_runs)) == 0 and not (two_runs / "accuracy.md").exists()
    assert run_cli("table", str(two_runs), "--write") == 0
    assert (two_runs / "accuracy.md").exists() and "wrote" in capsys.readouterr().out


def test_table_never_averages_two_machines(two_runs, capsys):
    path = next(two_runs.glob("swamp/seed0.json"))
    other = two_runs / "swamp" / "seed2.json"
    data = json.loads(path.read_text())
    data["seed"] = 2
    data["environment"]["hardware"]["gpu"] = {"name": "NVIDIA H100 80GB HBM3", "driver": "580"}
    data["environment"]["hardware"]["device"] = "cuda"
    other.write_text(json.dumps(data))
    before = (two_runs / "timing.md").read_bytes()
    assert run_cli("table", str(two_runs), "--write") == 2
    captured = capsys.readouterr()
    assert "hold runs timed on different hardware" in captured.err and "NVIDIA H100" in captured.err
    assert captured.out.count("Accuracy (test)") == 2  # one table per machine, printed
    assert (two_runs / "timing.md").read_bytes() == before  # and nothing written


def test_same_seed_twice_gives_identical_metrics(tiny_task, tmp_path):
    for out in ("x", "y"):
        assert run_cli("run", str(tiny_task), "--methods", "swamp", "--device", "cpu",
                       "--out", str(tmp_path / out), "--no-progress") == 0
    x, y = (json.loads((tmp_path / o / "tiny" / "swamp" / "seed0.json").read_text()) for o in ("x", "y"))
    assert x["metrics"] == y["metrics"] and x["history"][-1]["loss"] == y["history"][-1]["loss"]


def test_overrides_get_their_own_folder(tiny_task, tmp_path):
    assert run_cli("run", str(tiny_task), "--methods", "swamp", "--set", "swamp.K=8", "--epochs", "1",
                   "--device", "cpu", "--out", str(tmp_path), "--no-progress") == 0
    result = json.loads((tmp_path / "tiny" / "swamp@K=8,train.epochs=1" / "seed0.json").read_text())
    assert result["config"]["method"]["K"] == 8 and result["overrides"] == ["swamp.K=8"]


@pytest.mark.parametrize("args, message", [
    (["--methods", "swampp"], "did you mean 'swamp'"),
    (["--set", "swamp.K=abc"], "must be a number or one of auto"),
    (["--seeds", "a,b"], "--seeds"),
    (["--epochs", "0"], "--epochs"),
    (["--device", "cuda:7" if not __import__("torch").cuda.is_available() else "tpu"], "device"),
    (["--reference", "contrastive", "--test-stat", "mAP"], "unknown statistic to test 'mAP'"),
    (["--reference", "contrastive", "--test-stat", "rsum"], "unknown statistic to test 'rsum'"),
    (["--set", "contrastive.loss=hinge"], "unknown value 'hinge'"),
    (["--set", "train.collapse_patience=-1"], "collapse_patience must be >= 0"),
])
def test_bad_input_exits_2_without_results(tiny_task, tmp_path, capsys, args, message):
    assert run_cli("run", str(tiny_task), "--out", str(tmp_path / "out"), "--no-progress", *args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") <= 12
    assert not (tmp_path / "out").exists()


def test_missing_data_root_exits_2(tmp_path, capsys):
    task = tmp_path / "user.yaml"
    task.write_text(f"base: {ROOT / 'tasks' / 'synthetic.yaml'}\nname: user\ndataset: {{source: paired_arrays}}\n")
    assert run_cli("run", str(task), "--data-root", str(tmp_path / "nowhere"), "--out", str(tmp_path / "o")) == 2
    assert "train_a.npy" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_table_of_empty_folder_is_an_error(tmp_path, capsys):
    assert run_cli("table", str(tmp_path)) == 2
    assert "no result files" in capsys.readouterr().err


def test_list_shows_tasks_and_methods(capsys):
    assert run_cli("list") == 0
    out = capsys.readouterr().out
    assert "tasks/synthetic.yaml" in out and "swamp (swamp)" in out and "registered methods" in out


def test_parse_seeds():
    assert parse_seeds("0,1,2") == [0, 1, 2] and parse_seeds("0-3") == [0, 1, 2, 3]
    with pytest.raises(ConfigError):
        parse_seeds("1,1")


@pytest.mark.slow  # seconds: a fresh Python process
def test_module_entry_point_exit_code(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "harness", "run", str(tmp_path / "nope.yaml")],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "harness", "frobnicate"], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2  # argparse's own usage error


def test_sweep_runs_the_grid_and_reference_marks_the_table(tiny_task, tmp_path, capsys):
    out = tmp_path / "o"
    assert run_cli("run", str(tiny_task), "--methods", "contrastive,swamp", "--sweep", "swamp.K=8,16",
                   "--sweep", "swamp.tau=0.1,0.2", "--epochs", "1", "--device", "cpu", "--out", str(out),
                   "--no-progress", "--reference", "contrastive@train.epochs=1") == 0
    folders = sorted(p.name for p in (out / "tiny").iterdir() if p.is_dir())
    assert folders == ["contrastive@train.epochs=1", "swamp@K=8,tau=0.2,train.epochs=1",
                       "swamp@K=8,train.epochs=1", "swamp@tau=0.2,train.epochs=1", "swamp@train.epochs=1"]
    assert (out / "tiny" / "swamp@K=8,tau=0.2,train.epochs=1" / "seed0.ranks.npz").exists()
    printed = capsys.readouterr().out
    assert "Δ vs contrastive@train.epochs=1" in printed and "p (queries, bootstrap)" in printed
    swamp_row = next(line for line in printed.splitlines() if line.startswith("pair-based    swamp@K=8,train"))
    assert swamp_row.rstrip().endswith("/1)")  # the bootstrap ran on the fresh runs' saved ranks


def test_reference_must_be_one_of_the_runs(tiny_task, tmp_path, capsys):
    assert run_cli("run", str(tiny_task), "--methods", "swamp", "--reference", "contrastive",
                   "--out", str(tmp_path / "o")) == 2
    assert "--reference 'contrastive' is not among this command's runs: swamp" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_validation_table_has_no_significance(two_runs, capsys):
    assert run_cli("table", str(two_runs), "--split", "val", "--reference", "contrastive") == 2
    assert "drop --reference" in capsys.readouterr().err
    assert run_cli("table", str(two_runs), "--split", "val", "--write") == 0
    assert "Accuracy (val)" in capsys.readouterr().out and (two_runs / "validation.md").exists()


def _example_argv(name: str) -> list[str]:
    import shlex

    from harness.cli import EXAMPLES

    words = shlex.split(EXAMPLES[name])
    assert words[:3] == ["python", "-m", "harness"] and words[3] == name
    return words[3:]


def test_every_command_shows_an_example_that_parses():
    from harness.cli import EXAMPLES, build_parser

    parser = build_parser()
    commands = parser.parse_args(["list"]).subcommands
    assert set(EXAMPLES) == set(commands)
    for name, command in commands.items():
        assert f"example: {EXAMPLES[name]}" in command.format_help()
        args = parser.parse_args(_example_argv(name))
        assert args.command == name
        for word in _example_argv(name):  # the committed files an example names exist
            if word.startswith(("results/", "tasks/")):
                assert (ROOT / word).exists(), f"{name}'s example names {word}, which is not in the checkout"


# rerun retrains a 100-epoch run and bench builds asv environments: their examples are parsed above only
QUICK_EXAMPLES = ["run", "compare", "list", "table", "plot", "clusters", "ensemble", "report", "status", "claims"]


@pytest.mark.slow
def test_the_quick_examples_run(tmp_path, monkeypatch, capsys):
    for name in ("results", "tasks", "claims"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)  # what they write goes under runs/, here
    import shutil  # compare's example compares the committed runs with a re-run of them in runs/

    shutil.copytree(ROOT / "results" / "synthetic" / "contrastive", tmp_path / "runs" / "synthetic" / "contrastive")
    before = sorted((p, p.stat().st_mtime_ns) for p in (ROOT / "results").rglob("*") if p.is_file())
    for name in QUICK_EXAMPLES:
        assert main(_example_argv(name)) == 0, f"{name}'s example failed: {capsys.readouterr().err}"
    assert sorted((p, p.stat().st_mtime_ns) for p in (ROOT / "results").rglob("*") if p.is_file()) == before


# --- the command line's parts --------------------------------------------------------------------------------

def test_every_subcommand_is_one_module_listed_once():
    """A subcommand is a module of harness/cli/ with NAME, HELP, EXAMPLE, add_arguments and handle, listed in
    COMMANDS: a module that defines NAME but is not listed would never be reachable."""
    import ast

    from harness import cli

    names = [c.NAME for c in cli.COMMANDS]
    assert len(names) == len(set(names)) == 17
    for command in cli.COMMANDS:
        assert all(callable(getattr(command, f)) for f in ("add_arguments", "handle")), command.__name__
        assert isinstance(command.HELP, str) and command.EXAMPLE.startswith(f"python -m harness {command.NAME}")
    defining = {p.stem for p in (ROOT / "harness" / "cli").glob("*.py")
                if any(isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "NAME" for t in n.targets)
                       for n in ast.parse(p.read_text()).body)}
    assert defining == {c.__name__.rsplit(".", 1)[1] for c in cli.COMMANDS}


ROUND_TRIPS = [
    ["run", "tasks/synthetic.yaml", "--methods", "contrastive,swamp", "--seeds", "0-2", "--set", "swamp.K=8",
     "--set", "train.lr=0.1", "--sweep", "swamp.eta=1,2", "--epochs", "3", "--threads", "auto", "--include", "plug",
     "--launcher", "slurm", "--slurm", "partition=gpu", "--wait", "--on-nan", "skip", "--no-tables", "--force"],
    ["run", "synthetic", "--init", "results/synthetic/swamp/seed0.json", "--threads", "2", "--device", "cpu",
     "--test-stat", "t2v/R@5", "--reference", "contrastive", "--out", "elsewhere", "--data-root", "/data"],
    ["tune", "tasks/synthetic.yaml", "--methods", "contrastive", "--trials", "4", "--seconds-per-method", "30.5",
     "--prune", "median", "--prune-warmup", "0.25", "--storage", "journal:///tmp/studies.log", "--launcher", "local",
     "--jobs", "3", "--study-seed", "7", "--no-final", "--studies-only", "--worker", "2"],
    ["leaderboard", "tasks/wikipedia.yaml", "tasks/synthetic.yaml", "--metric", "t2i/class_mAP", "--no-bayes",
     "--rows", "sum,swamp", "--name", "w", "--seeds", "0-4"],
    ["leaderboard", "--out", "results/reference"],
    ["rerun", "a/seed0.json", "b/seed1.json", "--check", "--launcher", "local"],
    ["status", "results"],
    ["status", "results", "tasks/synthetic.yaml", "--seeds", "0", "--sweep", "swamp.K=1,2", "--format", "github"],
    ["compare", "--metric", "a2b/R@1", "--metric", "a2b/R@5", "--min-diff", "-0.5", "--", "-old", "new"],
    ["plot", "results/x", "--x", "swamp.K", "--logx", "--ignore", "train.epochs"],
    ["report", "results", "more", "--out", "site", "--format", "md", "--no-figures"],
    ["reproduce", "synthetic-pair", "--budget", "600", "--write", "--allow-dirty", "--launcher", "local"],
    ["claims", "--check"],
    ["ensemble", "a.json", "b.json", "--device", "cuda:1"],
    ["bench", "--against", "HEAD~1", "--factor", "3.0"],
    ["list", "--tasks-dir", "tasks"],
]


@pytest.mark.parametrize("argv", ROUND_TRIPS, ids=lambda argv: argv[0])
def test_a_parsed_command_turns_back_into_words_that_parse_alike(argv):
    from harness.cli import build_parser

    parser = build_parser()
    args = parser.parse_args(argv)
    words = parser.argv_of(args)
    assert parser.parse_args(words) == args, words
    assert words[0] == argv[0] and len(words) <= len(argv) + 1  # defaults are left out


def test_a_tuning_worker_s_command_is_the_command_with_only_the_worker_s_changes(tmp_path):
    from harness.cli import build_parser
    from harness.tune import command

    parser = build_parser()
    args = parser.parse_args(["tune", "tasks/synthetic.yaml", "--methods", "contrastive,swamp", "--trials", "4",
                              "--set", "swamp.K=8", "--launcher", "slurm", "--slurm", "partition=gpu", "--jobs", "3",
                              "--prune", "median", "--out", str(tmp_path), "--include", "plug", "--force"])
    argv = command.worker_argv(args, 2, 3, "journal:///shared/studies.log")
    assert argv[:3] == ["-m", "harness", "tune"]
    worker = parser.parse_args(argv[2:])
    changed = {k for k in vars(args) if getattr(worker, k) != getattr(args, k)}
    assert changed == {"launcher", "slurm", "jobs", "force", "studies_only", "no_progress", "worker", "storage",
                       "threads"}
    assert (worker.launcher, worker.studies_only, worker.worker, worker.threads) == ("sequential", True, 3, 2)


# --- the parser is quick: nothing heavy is imported to build it ---------------------------------------------------

HEAVY = ("torch", "numpy", "scipy", "pandas", "matplotlib", "submitit", "optuna", "tabulate")


def test_building_the_parser_imports_no_torch_and_no_run_layer():
    """A fresh process builds the whole parser (every subcommand's options) and prints --help without importing
    torch, numpy, scipy or any module of the run layer: `python -m harness --help` stays instant."""
    probe = ("import sys; from harness.cli import build_parser; build_parser().format_help(); "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in %r or m.startswith('harness.run')))" % (HEAVY,))
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]", done.stdout
    helped = subprocess.run([sys.executable, "-X", "importtime", "-m", "harness", "--help"], capture_output=True,
                            text=True, timeout=120, cwd=ROOT)
    assert helped.returncode == 0 and "SwAMP Bench" in helped.stdout, helped.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in helped.stderr.splitlines() if "|" in line}
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_the_design_card_example_without_scan_s_features_names_the_task_that_runs_now(tmp_path, capsys,
                                                                                         monkeypatch):
    """`run tasks/coco.yaml --methods scan,swamp_par` on a machine without SCAN's features: one error line naming
    the missing files, where they are published and the task at COCO's shapes that needs no data."""
    monkeypatch.setenv("SCAN_DATA", str(tmp_path / "nothing"))
    code = run_cli("run", str(ROOT / "tasks" / "coco.yaml"), "--methods", "scan,swamp_par", "--out",
                   str(tmp_path / "out"), "--device", "cpu")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2
    assert "coco_precomp/testall_ims.npy  (missing)" in line and "github.com/kuanghuei/SCAN" in line
    assert line.endswith("python -m harness run tasks/coco_shapes.yaml --methods scan,swamp_par"), line
    assert not (tmp_path / "out").exists()


def test_only_scan_s_own_folders_name_a_shapes_task_and_each_names_a_shipped_one():
    from harness.sources import scan_precomp

    assert scan_precomp.without_data(ROOT / "my_features") == ""
    for folder, (_, task) in scan_precomp.SHAPES_TASKS.items():
        assert (ROOT / task).exists() and task in scan_precomp.without_data(ROOT / "data" / folder)
