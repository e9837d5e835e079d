"""The shape of the package: import contracts (import-linter, contracts in pyproject.toml), no import cycle
between modules, plugins and benchmarks that reach the harness only through its public API, and a top
level that stays small."""
from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from harness import api

ROOT = Path(__file__).resolve().parent.parent
PLUGIN_DIRS = ("baselines", "harness/encoders", "harness/sources")
PLUGIN_PACKAGES = ("baselines", "harness.encoders", "harness.sources")


def lint_imports(cwd: Path, pythonpath: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    return subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
                           "lint_imports_command()", "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


def test_import_contracts_hold():
    done = lint_imports(ROOT, ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "KEPT" in done.stdout


@pytest.mark.parametrize("module,line,contract", [
    ("harness/ops/ot.py", "from harness.report import accuracy", "Layers"),  # a kernel importing the reports
    ("harness/run/train.py", "from harness.analysis import restore", "Layers"),  # running importing analysis
    ("baselines/mmr.py", "from harness.run import guards", "Plugins import only"),  # a plugin past the API
    ("harness/report/folders.py", "from harness.run import grid", "The report layer trains nothing"),  # runs
])
@pytest.mark.slow  # seconds each: import-linter on a copy of the package
def test_lint_imports_fails_on_an_injected_back_import(tmp_path, module, line, contract):
    for name in ("harness", "baselines", "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(src, tmp_path / name)
    with (tmp_path / module).open("a") as f:
        f.write(f"\n{line}  # injected by the test\n")
    done = lint_imports(tmp_path, tmp_path)
    assert done.returncode != 0, done.stdout
    broken = [block for block in done.stdout.split("\n\n") if "BROKEN" in block or contract in block]
    assert any(contract in block for block in broken), done.stdout
    injected = module.removesuffix(".py").replace("/", ".")
    assert injected in done.stdout, done.stdout


def module_graph() -> grimp.ImportGraph:
    return grimp.build_graph("harness", "baselines", cache_dir=None)


def test_no_import_cycle_between_modules():
    """Tarjan's strongly connected components over every module of harness/ and baselines/ (imports inside
    functions included): each component is one module."""
    graph = module_graph()
    modules = sorted(graph.modules)
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []
    counter = [0]

    def visit(v: str) -> None:  # recursive Tarjan; the graph has ~100 modules
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.find_modules_directly_imported_by(v)):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    assert cycles == [], f"import cycles: {cycles}"


def harness_imports(path: Path) -> list[str]:
    """Every module named by an import statement of ``path`` that starts with harness or baselines."""
    tree = ast.parse(path.read_text(), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append(node.module)
    return [m for m in found if m.split(".")[0] in ("harness", "baselines")]


def test_plugin_files_import_only_the_public_api_and_other_plugins():
    files = [p for d in PLUGIN_DIRS for p in sorted((ROOT / d).glob("*.py"))]
    assert len(files) > 25
    bad = {str(p.relative_to(ROOT)): m for p in files for m in harness_imports(p)
           if m != "harness.api" and not m.startswith(PLUGIN_PACKAGES)}
    assert bad == {}, "plugins must import from harness.api (or another plugin) only"


def test_benchmarks_reach_the_harness_through_the_public_api_only():
    files = sorted((ROOT / "benchmarks").glob("*.py"))
    bad = {str(p.relative_to(ROOT)): m for p in files for m in harness_imports(p)
           if m not in ("harness", "harness.api", "baselines") and not m.startswith(PLUGIN_PACKAGES)}
    assert bad == {}
    compat = (ROOT / "benchmarks" / "compat.py").read_text()
    assert "from harness import api as H" in compat and "_legacy()" in compat


# The last commit with the flat layout (harness/runner.py, harness/ot.py, ... and no harness/api.py).
FLAT_LAYOUT = "9251278"

FALLBACK_PROBE = """
import importlib.util, sys, torch
# this checkout's benchmarks/compat.py, with the measured revision's harness first on the path
spec = importlib.util.spec_from_file_location("compat_under_test", sys.argv[1] + "/benchmarks/compat.py")
compat = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compat)
H = compat.H
import harness
assert not hasattr(harness, "api"), harness.__file__
missing = sorted(set(sys.argv[2].split(",")) - set(vars(H)))
assert not missing, missing
task = H.load_task(sys.argv[3], ["dataset.pairs_per_class=20", "dataset.split_sizes=[240,80,80]"])
data = H.load_data(task)
method = H.build_method(task, "swamp", data, torch.device("cpu"))
q = H.sinkhorn(torch.randn(64, 8), 5.0, n_iters=3)
print("fallback ok", harness.__file__, type(method).__name__, tuple(q.shape))
"""


@pytest.mark.slow  # seconds: a worktree of an older revision imports the benchmarks
def test_the_benchmarks_run_against_a_revision_without_the_public_api(tmp_path):
    """What the regression gate meets on a commit from before harness.api: the suite's names resolve
    from that revision's own modules (and not from this checkout through an editable install)."""
    from benchmarks import compat

    assert set(compat._LEGACY) <= set(api.__all__)  # every fallback name is a public name today
    if subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{FLAT_LAYOUT}^{{commit}}"]).returncode != 0:
        pytest.skip(f"commit {FLAT_LAYOUT} (the flat layout) is not in this clone's history")
    tree = tmp_path / "flat"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(tree), FLAT_LAYOUT], check=True)
    try:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        done = subprocess.run([sys.executable, "-c", FALLBACK_PROBE, str(ROOT), ",".join(compat._LEGACY),
                               str(tree / "tasks" / "synthetic.yaml")], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fallback ok {tree}/harness/__init__.py SwAMP (64, 8)" in done.stdout


def test_public_api_names_exist_and_are_listed():
    assert len(api.__all__) == len(set(api.__all__))
    missing = [n for n in api.__all__ if not hasattr(api, n)]
    assert missing == []


def test_top_level_holds_at_most_ten_modules_and_each_subpackage_says_what_it_may_import():
    modules = sorted(p.name for p in (ROOT / "harness").glob("*.py"))
    assert len(modules) <= 10, modules
    for init in sorted((ROOT / "harness").glob("*/__init__.py")):
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 80, f"{init} needs a docstring saying what lives there"
        if init.parent.name not in ("encoders",):
            assert "import" in doc, f"{init}: say what the sub-package may import"


def package_edges() -> set[tuple[str, str]]:
    """(importer, imported) between the packages of harness (``harness.run``, ``harness.api``…) and
    ``baselines``, imports inside functions included."""
    graph = module_graph()

    def package(module: str) -> str:
        parts = module.split(".")
        return ".".join(parts[:2]) if parts[0] == "harness" and len(parts) > 1 else parts[0]

    return {(package(m), package(i)) for m in graph.modules for i in graph.find_modules_directly_imported_by(m)
            if package(m) != package(i)}


def test_no_package_import_runs_against_the_layer_order():
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    assert not any("ignore_imports" in c for c in contracts), "the contracts hold without exceptions"
    rank = {name: i for i, name in enumerate(contracts[0]["layers"])}  # worker (top) … errors (bottom)
    edges = package_edges()
    upward = sorted((a, b) for a, b in edges if a in rank and b in rank and rank[a] > rank[b])
    assert not upward, f"imports against the layer order: {upward}"
    plugins = {"baselines", "harness.encoders", "harness.sources"}
    assert {b for a, b in edges if a in plugins} <= plugins | {"harness.api"}
    assert not {a for a, b in edges if b == "harness.api"} - plugins  # only plugins reach the facade
    assert {b for a, b in edges if a == "harness.api"} <= set(rank)  # the facade re-exports layered packages


# JSON files other than result files that modules outside harness/store/ read themselves, each with what it is
OTHER_JSON = {
    "harness/data/text.py": "vocabulary files (SCAN's *_vocab.json)",
    "harness/sources/howto_msrvtt.py": "MSR-VTT's caption annotations",
    "harness/analysis/clusters.py": "the word list of a vocabulary",
    "harness/bench.py": "asv's results and its benchmark list",
    "harness/remake/carry.py": "the method canaries' traces, written by the canary process it starts",
    "harness/report/files.py": "the options a folder's tables were written with (tables.json)",
    "harness/report/plot.py": "a figure's record beside it (its caption and command)",
    "harness/report/reference_table/boards.py": "a reference-table set's manifest (leaderboard.json)",
    "harness/report/reference_table/record.py": "the reference table's record (reference.json)",
    "harness/report/reference_page.py": "the reference table's record (reference.json), for the site's figures",
    "harness/run/slurm_job.py": "a SLURM job's worker's reply (harness.worker --reply)",
}


def test_only_the_store_reads_result_files():
    """Result files are read through harness.store.schema (read_result, load_results), which fills the defaults of
    fields added since a file was written: a module elsewhere that parses a file's JSON itself must be reading
    another kind of file, listed in OTHER_JSON with what it is."""
    readers = set()
    for path in sorted((ROOT / "harness").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("harness/store/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and node.func.value.id == "json" and \
                    node.func.attr in ("load", "loads") and node.args:
                arg = node.args[0]
                reads_file = node.func.attr == "load" or (
                    isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "read_text")
                if reads_file:
                    readers.add(rel)
    assert readers == set(OTHER_JSON), f"read result files through harness.store.schema: {readers - set(OTHER_JSON)}"


def test_no_module_uses_another_modules_private_names():
    """A name with a leading underscore stays in its module: a module that another one needs is made public
    (the report layer's helpers: cells.mean_std, timing.baseline_run, readings.links_from, ...)."""
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")) + sorted((ROOT / "baselines").glob("*.py")):
        tree = ast.parse(path.read_text())
        modules = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("harness", "baselines"):
                for alias in node.names:
                    if alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append(f"{path.relative_to(ROOT)}: from {node.module} import {alias.name}")
                    elif (ROOT / node.module.replace(".", "/") / f"{alias.name}.py").is_file():
                        modules.add(alias.asname or alias.name)  # a module of a package
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert not found, "\n".join(found)


# No function of harness/ is longer than this, without exceptions: a function that committed runs executed is split
# like any other, and the split is carried (python -m harness carry; docs/claims.md, 'Evidence and code')
MAX_FUNCTION_LINES = 60


def test_no_function_in_harness_is_longer_than_the_limit():
    found = {}
    for path in sorted((ROOT / "harness").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    found[(path.relative_to(ROOT).as_posix(), node.name)] = lines
    assert found == {}, f"split these (at most {MAX_FUNCTION_LINES} lines each): {found}"


def test_no_module_in_harness_is_longer_than_a_room():
    """Rooms of one job: no module of harness/ over MAX_ROOM_LINES lines, with no list of exceptions."""
    found = {path.relative_to(ROOT).as_posix(): n for path in sorted((ROOT / "harness").rglob("*.py"))
             if (n := len(path.read_text().splitlines())) > MAX_ROOM_LINES}
    assert found == {}, f"split these by job (at most {MAX_ROOM_LINES} lines each): {found}"


# --- the command line converts once: the library takes typed options ------------------------------------------------

def test_nothing_outside_the_command_line_imports_argparse_or_takes_a_namespace():
    """Each subcommand's handle turns its namespace into typed options and calls a library function: outside
    harness/cli/ no module imports argparse, no parameter is a Namespace, and no ``cmd(args)`` adapter is left (a
    script of its own, such as ``python -m harness.cli.audit``, lives in harness/cli/ too)."""
    importing, taking = set(), []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        if name.startswith("harness/cli/"):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import) and any(a.name == "argparse" for a in node.names) or \
                    isinstance(node, ast.ImportFrom) and node.module == "argparse":
                importing.add(name)
            if isinstance(node, ast.arg) and "Namespace" in ast.unparse(node.annotation or ast.Constant("")):
                taking.append(f"{name}:{node.lineno}: {node.arg}: {ast.unparse(node.annotation)}")
            if isinstance(node, ast.FunctionDef) and node.name == "cmd" and [a.arg for a in node.args.args] == ["args"]:
                taking.append(f"{name}:{node.lineno}: cmd(args)")
    assert not importing, sorted(importing)
    assert not taking, taking


MAX_ROOM_LINES = 450


def test_the_grid_and_the_slurm_launcher_live_in_rooms_of_one_job_under_the_limit():
    """harness/run/grid.py and harness/run/slurm.py name their rooms (jobs, dispatch, sequential, rerun, hardware;
    the compute-node job, submission, accounting, watching): each under MAX_ROOM_LINES lines, and the two modules
    export every name their callers use."""
    from harness.run import grid, slurm

    rooms = ["grid", "jobs", "dispatch", "sequential", "rerun", "hardware", "commands", "slurm", "slurm_job",
             "slurm_submit", "slurm_accounting", "slurm_watch", "error_lines", "launcher"]
    for room in rooms:
        lines = len((ROOT / "harness" / "run" / f"{room}.py").read_text().splitlines())
        assert lines < MAX_ROOM_LINES, f"harness/run/{room}.py: {lines} lines"
    for module in (grid, slurm):
        assert all(hasattr(module, name) for name in module.__all__)
    used = {"Grid", "Job", "rerun", "options", "result_records", "job", "slurm_options", "run_job", "run", "reruns",
            "rerun_warnings", "check_reruns", "LAUNCHERS", "this_machine"}
    assert used <= set(grid.__all__)
    assert {"Record", "RunJob", "wait", "jobs_folder", "worker_argv", "submit", "sbatch_script", "check_cluster",
            "expand", "make_executor", "job_states", "describe", "CANCELLED_BY_SCANCEL"} <= set(slurm.__all__)
