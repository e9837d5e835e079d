"""Each fact about results that several readers need is computed in one place, the module whose job it is, and every
reader calls it: these tests fail when a second definition appears where it can be seen (a reader that computes a
mean over seeds, picks a test or a significance level, works out a result's folder, machine or random data, or
decides 'dirty' itself), and when a reader reads a number back from text another module rendered."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from harness.config.metric_names import MetricName, parse_metric
from harness.config.spec import MetricSpec
from harness.errors import ConfigError
from harness.report import accuracy, cells, claims, compare, figures, model, plot, stats, views
from harness.store import executed as ex

ROOT = Path(__file__).resolve().parent.parent
REPORT = sorted((ROOT / "harness" / "report").glob("*.py"))


def _calls(path: Path) -> list[tuple[str, str, int]]:
    """(object, attribute, line) of every call ``object.attribute(...)`` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value.id if isinstance(node.func.value, ast.Name) else ""
            found.append((owner, node.func.attr, node.lineno))
    return found


def _code(path: Path) -> str:
    """A module's source without its docstrings and comments (what it does, not what it says)."""
    return ast.unparse(ex.strip_docstrings(ast.parse(path.read_text())))


def _elsewhere(home: str, test) -> list[str]:
    """'file:line' of each place in the report layer outside ``home`` where ``test(path)`` finds something."""
    return [f"{p.name}: {hit}" for p in REPORT if p.name != home for hit in test(p)]


# --- mean and spread over seeds: stats.summarize -------------------------------------------------------------

def test_only_stats_computes_a_mean_or_a_spread_over_seeds():
    averaging = {"mean", "fmean", "stdev", "pstdev", "std", "var", "variance"}
    found = _elsewhere("stats.py", lambda p: [line for owner, attr, line in _calls(p)
                                              if attr in averaging and owner in ("statistics", "np", "numpy")])
    assert found == [], f"take the mean and spread over seeds from stats.summarize: {found}"


def test_every_reader_of_a_value_over_seeds_gives_the_summary_s_numbers():
    values = [84.13, 84.12, 79.5]
    summary = stats.summarize(values)
    assert cells.mean_std(values) == f"{summary.mean:.2f} ± {summary.std:.2f}" and cells.mean_std(values).key == \
        summary.mean
    point = plot.Point("swamp", 1, dict(enumerate(values)))
    assert (point.mean, point.std) == (summary.mean, summary.std)
    runs = [{"history": [{"epoch": 1, "loss": v}]} for v in values]
    assert figures._by_epoch(runs, "loss") == ([1], [summary.mean], [summary.std])
    of = [{"seed": s, "environment": {}, "profile": {"timing": {"train_step": {"median_s": v}}}} for s, v in
          enumerate(values)]
    to = [{**r, "profile": {"timing": {"train_step": {"median_s": 1.0}}}} for r in of]
    assert model.timing_ratio(of, to, "step").value == summary.mean


# --- the significance policy and its level: stats.choose_test, stats.ALPHA -----------------------------------

def test_one_significance_level():
    found = _elsewhere("stats.py", lambda p: [n.lineno for n in ast.walk(ast.parse(_code(p)))
                                              if isinstance(n, ast.Constant) and n.value == 0.05])
    assert found == [], f"read the significance level from stats.ALPHA: {found}"
    assert claims.RULES["alpha"] is stats.ALPHA  # the ledger's default; a ledger's rules: may set their own
    import inspect

    assert inspect.signature(compare.compare).parameters["alpha"].default is stats.ALPHA


def test_only_stats_runs_a_test_and_every_reader_asks_the_policy():
    tests = {"ttest_rel", "ttest_ind", "wilcoxon", "paired_seed_test", "welch_test", "paired_bootstrap"}
    found = _elsewhere("stats.py", lambda p: [f"{attr}:{line}" for _, attr, line in _calls(p) if attr in tests])
    assert found == [], f"readers ask the policy (stats.significance, stats.seed_significance): {found}"
    for reader in ("accuracy.py", "compare.py", "claims/kinds.py", "reference_table/verdicts.py"):
        asked = {attr for _, attr, _ in _calls(ROOT / "harness" / "report" / reader)}
        assert asked & {"significance", "seed_significance", "choose_test"}, f"{reader} does not ask the policy"


def test_the_policy_on_known_seed_sets():
    assert stats.choose_test([0, 1, 2], [0, 1, 2], "a2b/R@1") == stats.PAIRED_T
    assert stats.choose_test([0, 1], [2, 3], "a2b/R@1") == stats.WELCH  # unpaired
    assert stats.choose_test([0], [0], "a2b/R@1") == stats.BOOTSTRAP  # one seed: its test queries
    assert stats.choose_test([0], [0], "a2b/R@1", queries=False) is None  # a reader that shows it apart
    assert stats.choose_test([0], [0], "a2b/MedR") is None  # a median has no per-query terms
    assert stats.choose_test([0, 1], [0], "a2b/MedR") is None
    # the same test and numbers for every reader: compare's and the ledger's come from significance
    values, reference = {0: 1.0, 1: 2.5, 2: 3.0}, {0: 0.5, 1: 1.0, 2: 2.0}
    runs = [{"seed": s, "metrics": {"m": v}} for s, v in values.items()]
    refs = [{"seed": s, "metrics": {"m": v}} for s, v in reference.items()]
    tested = stats.significance(runs, refs, "m")
    assert (tested.test, tested.p) == (stats.PAIRED_T, stats.paired_seed_test(values, reference).p)
    assert compare.test_change(refs, runs, "m") == (stats.PAIRED_T, tested.p)
    assert tested.how == "paired t over 3 seeds"
    welch = stats.seed_significance({0: 1.0, 1: 2.0}, {2: 1.5, 3: 4.0})
    assert welch.test == stats.WELCH and welch.diff == pytest.approx(1.5 - 2.75)


# --- a result's folder, machine, random data: model.py -------------------------------------------------------

def test_only_the_model_works_out_the_folder_that_owns_a_result():
    pattern = re.compile(r"_path['\"]\]\)\.parent\.parent")
    found = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "harness").rglob("*.py"))
             if pattern.search(p.read_text()) and p.name != "model.py"]
    assert found == [], f"call harness.report.model.owner: {found}"
    result = {"_path": "out/tiny/swamp/seed0.json"}
    assert model.owner(result) == Path("out/tiny") and model.owned([result], Path("out/tiny")) == [result]


def test_only_the_model_reads_the_machine_and_the_random_data_flag():
    machine = re.compile(r"""(\[["']environment["']\]|get\(["']environment["']\)[^\n]*?)"""
                         r"""(\[["']hardware["']\]|\.get\(["']hardware["'])""")
    assert _elsewhere("model.py", lambda p: machine.findall(_code(p))) == [], \
        "read a result's machine through model.hardware, model.machine, model.machine_line"
    random_data = re.compile(r"""["']timing_only["']""")
    assert _elsewhere("model.py", lambda p: random_data.findall(_code(p))) == [], "call model.timing_only"
    r = {"environment": {"hardware": {"cpu": "Test CPU", "cores": 2, "device": "cpu"}}, "dataset": {"timing_only": 1}}
    assert model.machine(r) == "Test CPU, 2 cores (cpu)" and model.timing_only([r]) and model.device({}) == "?"


# --- dirty: store/executed.py ---------------------------------------------------------------------------------

def test_only_the_record_s_module_decides_dirty():
    fields = re.compile(r"""["'](differs_from_commit|changed_during_run|clean)["']|["']status["'],\s*["']--porcelain""")
    assert _elsewhere("", lambda p: fields.findall(_code(p))) == [], \
        "decide dirty with harness.store.executed (ran_uncommitted, uncommitted, uncommitted_files)"
    source = (ROOT / "harness" / "store" / "executed.py").read_text()
    assert re.search(r'"clean": None if commit is None else not ran_uncommitted\(', source)  # the record, too


def test_dirty_is_the_same_fact_at_record_time_and_later():
    record = {"blobs": {"a.py": "1", "b.py": "2"}, "differs_from_commit": ["a.py"], "changed_during_run": ["c.py"]}
    assert ex.ran_uncommitted(record, {"a.py": "0"}) == ["a.py", "c.py"]  # a.py: not the commit's
    assert ex.ran_uncommitted(record, {"a.py": "1"}) == ["c.py"]  # committed since: not dirty now
    assert ex.uncommitted({"executed": {"clean": False}}) is True
    assert ex.uncommitted({"environment": {"git": {"dirty": False}}}) is False and ex.uncommitted({}) is None


# --- nothing reads a number back from rendered text -----------------------------------------------------------

def test_table_cells_carry_the_numbers_they_show(tmp_path):
    results = [{"task": "t", "task_version": "1", "run_name": run, "method": run, "seed": s, "_path": "x",
                "config": {"metrics": {"directions": ["a2b"], "relevance": ["pair"], "ks": [1], "folds": [1]}},
                "dataset": {}, "metrics": {"a2b/R@1": v, "a2b/MedR": 3.0}, "profile": {"timing": {}, "memory": {}}}
               for run, base in (("a", 10.0), ("b", 12.5)) for s, v in enumerate((base, base + 1.0))]
    header, rows = accuracy.accuracy_rows(results)
    column = header.index("a2b R@1")
    assert [row[column].key for row in rows] == [10.5, 13.0]
    ranks = views.sort_ranks(rows)
    assert [r[column] for r in ranks] == [0, 1]
    source = (ROOT / "harness" / "report" / "views.py").read_text()
    assert not re.search(r"[kMG]\]|×|±", _code(ROOT / "harness" / "report" / "views.py")), source


def test_a_plot_s_caption_comes_from_its_record_not_from_its_markdown(tmp_path):
    from matplotlib.figure import Figure

    stem = tmp_path / "plots" / "swamp.K_a2b_R@1"
    paths = plot.write_outputs(Figure(), [["1", "swamp", "1", "0.5", "", "swamp"]], stem, "Task t: a2b/R@1 against K.",
                               "python -m harness plot x --x K")
    assert json.loads(paths[-1].read_text()) == {"caption": "Task t: a2b/R@1 against K.",
                                                 "command": "python -m harness plot x --x K"}
    md = stem.with_name(stem.name + ".md")
    md.write_text("<!-- generated -->\nanother caption\n")  # the Markdown is for people; nothing reads it back
    assert figures._plot_caption(stem.with_name(stem.name + ".png")) == "Task t: a2b/R@1 against K."
    assert ".md" not in _code(ROOT / "harness" / "report" / "figures.py")


def test_metric_names_are_taken_apart_by_the_spec_that_builds_them():
    spec = MetricSpec(directions=("i2t", "t2i"), relevance=("pair", "class"), ks=(1, 5), rsum=True, folds=(1, 5),
                      map=True, precision_at=(10,))
    for name in spec.names():
        assert str(parse_metric(name)) == name
    config = {"directions": ["i2t", "t2i"], "ks": [1, 5]}
    assert stats.rank_keys("5folds/t2i/class_R@5", config) == (["5folds/t2i/class"], [5])
    assert stats.rank_keys("5folds/rsum", config) == (["5folds/i2t/pair", "5folds/t2i/pair"], [1, 5])
    assert stats.rank_keys(str(MetricName("mAP", "i2t", "class")), config) == (["i2t/class/AP"], [])
    assert not stats.query_testable("i2t/P@10") and not stats.query_testable("nonsense")
    with pytest.raises(ConfigError, match="not a test metric's name"):
        parse_metric("x2y/R@1")
    assert "import re" not in (ROOT / "harness" / "report" / "stats.py").read_text()


def test_cells_keep_their_number_through_marks():
    cell = cells.mean_std([1.0, 2.0]) + "*"
    assert cell == "1.50 ± 0.71*" and cell.key == 1.5
    assert cells.number(None) == "–" and cells.number(float("nan")).key is None
    assert np.isclose(cells.number(2.0, ".1f", "≈", "×").key, 2.0) and cells.number(2.0, ".1f", "≈", "×") == "≈2.0×"


# --- the documents say what is true of the report layer -------------------------------------------------------

ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text()


def _imports(module: str, package: str = "report") -> set[str]:
    """The harness.report modules a module of ``package`` imports (inside functions too)."""
    found = set()
    for node in ast.walk(ast.parse((ROOT / "harness" / package / f"{module}.py").read_text())):
        if isinstance(node, ast.ImportFrom) and node.module == "harness.report":
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("harness.report."):
            found.add(node.module.rsplit(".", 1)[1])
    return found


def test_the_readers_the_architecture_names_compute_from_the_model_and_plot_does_not():
    assert "the tables, the site, the ledger, compare, folders and reproduce compute from it" in ARCHITECTURE
    for reader in ("accuracy", "timing", "files", "site", "claims/kinds", "compare", "folders"):
        assert "model" in _imports(reader), f"{reader}.py does not compute from model.py"
    assert "model" in _imports("evidence", "remake"), "harness reproduce (remake/evidence.py) does not compute from it"
    assert "not through model.py" in ARCHITECTURE and "model" not in _imports("plot")


def test_pages_come_from_templates_and_markdown_from_markdown_it():
    import tomllib

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("markdown-it-py") for d in dependencies) and "| markdown-it-py |" in ARCHITECTURE
    assert "from markdown_it import MarkdownIt" in (ROOT / "harness" / "report" / "markdown.py").read_text()
    tags = re.compile(r"<(html|body|table|thead|tr|td|th|div|h[1-6]|ul|li|a)[ >]")
    assert not tags.search(_code(ROOT / "harness" / "report" / "site.py")), "site.py renders through its templates"


def test_the_record_s_rules_live_in_the_store_and_freshness_applies_them():
    assert "`store/executed.py`: the cosmetic rule (`normalized_source`" in " ".join(ARCHITECTURE.split())
    assert "dirty (`ran_uncommitted`)" in " ".join(ARCHITECTURE.split())
    calls = {(owner, attr) for owner, attr, _ in _calls(ROOT / "harness" / "report" / "freshness.py")}
    assert {("ex", "normalized_source"), ("ex", "ran_uncommitted")} <= calls


def test_the_site_and_its_sets_say_where_table_options_come_from():
    from harness.report import sets, site

    for doc in (site.__doc__, sets.__doc__, sets.committed_table_options.__doc__):
        assert "tables.json" in doc and "first line" not in doc
    assert "recorded_for" in {attr for _, attr, _ in _calls(ROOT / "harness" / "report" / "sets.py")}


def test_no_module_of_the_report_layer_goes_through_the_tables_facade():
    found = [p.name for p in REPORT if "tables" in _imports(p.stem)]
    assert found == [], f"import the tables' own modules (accuracy, timing, formats, files): {found}"
