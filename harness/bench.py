"""Regression gate: ``python -m harness bench --against REV [--factor F] [--bench REGEX]``.

Runs the asv suite (``benchmarks/``) on REV, checked out with ``git worktree`` into a temporary folder, and on the
working tree, in one invocation on this machine. Both use this Python environment (asv's ``existing`` environment:
torch is never rebuilt); each side's checkout goes first on the path (ASV_PYTHONPATH, which asv turns into
PYTHONPATH), while the suite is always the working tree's, less the modules REV cannot import. It prints asv's
comparison table, the benchmarks it compared and those it could not judge (and why), and exits 1 when a benchmark's
median got worse than ``factor`` x REV's with its samples slower than REV's (Mann-Whitney; a benchmark with too few
samples, against a higher factor), or failed where REV's ran. asv's ``compare`` exits 0 on regressions and
``continuous`` refuses an existing environment, so the verdict is read from the result files. Exit 2: bad input, or
no results to compare. Exit 4: no verdict, because other work kept a core busy before or while the suite ran
(:mod:`harness.run.contention`; a slowdown measured so would be the machine's).
"""
from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from harness.errors import ConfigError
from harness.run import contention

ROOT = Path(__file__).resolve().parent.parent
BUSY = 4  # exit status: the machine was too busy to judge (harness.run.contention), no verdict either way
PROBE_S = 2.0  # seconds the machine is watched before the suite runs
CONFIG_NAME = "asv.conf.json"
# A benchmark regressed when its median got worse than DEFAULT_FACTOR x REV's and its samples are slower than
# REV's by a one-sided Mann-Whitney test (p < SHIFT_P); one with under MIN_SAMPLES samples a side (peak memory, track_*
# figures, the slowest timings) is judged by its median alone, against MEDIAN_ALONE_FACTOR (or the factor, if
# higher). docs/benchmarks.md has the same-code noise these were chosen from and the injected slowdowns they catch.
DEFAULT_FACTOR = 1.75
MEDIAN_ALONE_FACTOR = 2.0
MIN_SAMPLES = 5
SHIFT_P = 0.01
PASSES = 2  # asv runs per side, interleaved with the other side's


@dataclass(frozen=True)
class Regression:
    """A benchmark that got worse: its value on REV and on the working tree (None: it failed), and the one-sided
    Mann-Whitney p of its samples (None: too few samples to test, judged by the medians alone)."""

    name: str
    before: float
    after: float | None
    p: float | None = None

    def describe(self) -> str:
        """One line for the gate's summary."""
        if self.after is None:
            return f"{self.name}: failed (REV: {self.before:.4g})"
        shift = f", samples slower: p = {self.p:.2g}" if self.p is not None else ", medians alone: too few samples"
        return f"{self.name}: {self.before:.4g} -> {self.after:.4g} ({self.after / self.before:.2f}x{shift})"


@dataclass
class Judgement:
    """What the gate compared: the regressions, the benchmarks judged (by their samples' test, by their medians
    alone), those over the factor whose samples did not show the shift, and those not judged with the reason."""

    regressions: list[Regression]
    tested: list[str]
    medians_only: list[str]
    noise: list[Regression]
    not_judged: dict[str, str]

    def summary(self) -> list[str]:
        """The lines the gate prints before its verdict: every benchmark is in exactly one of them."""
        judged = len(self.tested) + len(self.medians_only)
        lines = [f"bench gate: compared {judged} benchmark(s): {len(self.tested)} by their samples (Mann-Whitney, "
                 f"p < {SHIFT_P}) and median, {len(self.medians_only)} by their median alone (under {MIN_SAMPLES} "
                 f"samples a side; ratio over {MEDIAN_ALONE_FACTOR} or the factor, if higher)"]
        lines += [f"  median alone: {name}" for name in self.medians_only]
        lines += [f"  over the factor, but its samples do not show a slowdown (noise): {r.describe()}"
                  for r in self.noise]
        lines += [f"  not judged: {name} ({why})" for name, why in sorted(self.not_judged.items())]
        return lines


@dataclass(frozen=True)
class Side:
    """One side of the comparison: the code at ``source``, recorded as ``commit`` under ``folder``."""

    label: str
    source: Path
    commit: str
    folder: Path
    config: Path

    @property
    def results(self) -> Path:
        """asv's results folder of this side."""
        return self.folder / "results"

    def values(self) -> dict[str, float | None]:
        """The benchmark values recorded so far (see :func:`load_values`)."""
        return load_values(self.results, self.commit)


def git(root: Path, *args: str) -> str:
    """Standard output of ``git -C root ARGS``, stripped; CalledProcessError when git fails."""
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def resolve_rev(root: Path, rev: str) -> str:
    """Full hash of commit ``rev`` of the repository at ``root``, or ConfigError naming the fix."""
    try:
        return git(root, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    except (subprocess.CalledProcessError, FileNotFoundError):
        raise ConfigError(f"--against {rev!r}: not a commit of the git repository at {root}; "
                          "give a commit hash, tag or branch, e.g. HEAD~1 or main") from None


@contextlib.contextmanager
def worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached checkout of ``commit`` in a temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="swamp-bench-rev-") as tmp:
        path = Path(tmp) / "tree"
        git(root, "worktree", "add", "--detach", "--quiet", str(path), commit)
        try:
            yield path
        finally:
            git(root, "worktree", "remove", "--force", str(path))


def read_config(root: Path) -> dict[str, Any]:
    """``root``'s asv.conf.json (JSON with // comments)."""
    from asv.util import load_json

    config: dict[str, Any] = load_json(str(root / CONFIG_NAME), js_comments=True)
    return config


def write_config(root: Path, folder: Path, suite: Path) -> Path:
    """A copy of ``root``'s asv.conf.json running ``suite``, with results and html kept under ``folder``."""
    conf = read_config(root)
    conf.update(repo=str(root), branches=["HEAD"], benchmark_dir=str(suite), results_dir=str(folder / "results"),
                html_dir=str(folder / "html"), env_dir=str(folder / "env"))
    path = folder / CONFIG_NAME
    folder.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conf, indent=2))
    return path


# Imports each module of a suite folder (argv[1]) as asv does, without its parent on sys.path,
# and prints {module: error} for those that fail.
_IMPORT_CHECK = """
import importlib, importlib.util, json, os, pkgutil, sys
suite = sys.argv[1]
name = os.path.basename(suite)
spec = importlib.util.spec_from_file_location(name, os.path.join(suite, "__init__.py"),
                                              submodule_search_locations=[suite])
sys.modules[name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sys.modules[name])
failed = {}
for info in pkgutil.iter_modules([suite]):
    try:
        importlib.import_module(name + "." + info.name)
    except Exception as err:
        failed[info.name] = type(err).__name__ + ": " + str(err)
print(json.dumps(failed))
"""


def suite_for(suite: Path, env: dict[str, str], folder: Path) -> Path:
    """A copy of ``suite`` without the modules that cannot be imported under ``env`` (printed).

    Against an older revision, a benchmark module that imports code added since would stop
    asv's discovery of the whole suite; left out, its benchmarks are simply not compared.
    """
    done = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, str(suite)], env=env, cwd=tempfile.gettempdir(),
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ConfigError(f"the benchmark suite {suite} does not import: {done.stderr.strip()[-500:]}")
    failed = json.loads(done.stdout.strip().splitlines()[-1])
    for module, error in failed.items():
        print(f"   not compared: {suite.name}/{module}.py cannot be imported here ({error})")
    skip = {f"{module}.py" for module in failed} | {"__pycache__"}
    shutil.copytree(suite, folder / suite.name, ignore=lambda _, names: [n for n in names if n in skip])
    return folder / suite.name


def side_env(source: Path, home: Path) -> dict[str, str]:
    """Environment with ``source`` first on the path; HOME holding the gate's own machine file.

    asv drops PYTHONPATH from the environment of benchmark processes and sets it from
    ASV_PYTHONPATH instead, so both are set.
    """
    path = os.pathsep.join([str(source), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))])
    return {**os.environ, "PYTHONPATH": path, "ASV_PYTHONPATH": path, "HOME": str(home)}


def check_source(source: Path, env: dict[str, str]) -> None:
    """Fail unless ``import harness`` under ``env`` loads the checkout at ``source``."""
    found = subprocess.run([sys.executable, "-c", "import harness; print(harness.__file__)"], env=env,
                           cwd=tempfile.gettempdir(), capture_output=True, text=True).stdout.strip()
    if not found or Path(found).resolve().parent.parent != source.resolve():
        raise ConfigError(f"import harness loads {found or 'nothing'}, not the checkout at {source}; "
                          "remove other copies of harness from sys.path (PYTHONPATH, .pth files)")


def run_suite(side: Side, bench: str | None, append: bool) -> None:
    """One pass of ``asv run`` (one round per benchmark) on ``side``'s code; ``append`` pools its samples."""
    env = side_env(side.source, side.folder)
    asv = [sys.executable, "-m", "asv"]
    if not (side.folder / ".asv-machine.json").exists():
        subprocess.run([*asv, "machine", "--yes", "--config", str(side.config)], env=env, check=True,
                       stdout=subprocess.DEVNULL)
    cmd = [*asv, "run", "--config", str(side.config), "--python=same", "--set-commit-hash", side.commit,
           "--attribute", "rounds=1", "--record-samples", *(["--append-samples"] if append else []),
           *(["--bench", bench] if bench else [])]
    print(f"== asv run on {side.label} ({side.source})", flush=True)
    subprocess.run(cmd, env=env, check=False)


def _recorded(results: Path, commit: str, column: str) -> Iterator[tuple[str, Any]]:
    """(name, value of ``column``) of every benchmark and parameter combination recorded for ``commit`` under
    ``results`` (asv's result format v2), named like asv's compare does: ``name(p1, p2)``; the value is None where
    the file has no such column for it."""
    for path in sorted(results.glob("*/*.json")):
        data = json.loads(path.read_text())
        if data.get("commit_hash") != commit or "results" not in data:
            continue
        columns = data["result_columns"]
        for name, row in data["results"].items():
            entry = dict(zip(columns, row))
            combos = itertools.product(*entry.get("params") or [])
            for combo, value in zip(combos, entry.get(column) or itertools.repeat(None)):
                yield (f"{name}({', '.join(combo)})" if combo else name), value


def load_values(results: Path, commit: str) -> dict[str, float | None]:
    """Every benchmark value recorded for ``commit`` under ``results``, parameterised benchmarks expanded to one
    entry per combination (:func:`_recorded`). None means the benchmark failed; NaN that it was skipped."""
    return dict(_recorded(results, commit, "result"))


def load_samples(results: Path, commit: str) -> dict[str, list[float]]:
    """Every benchmark's samples recorded for ``commit`` under ``results`` (``asv run --record-samples``; passes
    appended), named as :func:`load_values` names them; a benchmark without samples is absent."""
    return {name: [float(v) for v in found] for name, found in _recorded(results, commit, "samples") if found}


def slower_p(before: list[float], after: list[float]) -> float | None:
    """One-sided Mann-Whitney U p that ``after``'s samples are larger than ``before``'s; None under
    :data:`MIN_SAMPLES` on a side (too few to tell a shift from noise)."""
    if min(len(before), len(after)) < MIN_SAMPLES:
        return None
    from scipy.stats import mannwhitneyu

    return float(mannwhitneyu(after, before, alternative="greater").pvalue)


def judge(before: dict[str, float | None], after: dict[str, float | None], factor: float,
          samples: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})) -> Judgement:
    """Each benchmark: a regression when it fails where REV's ran, or when its median is worse than ``factor`` x
    REV's and its samples are slower (:func:`slower_p` below :data:`SHIFT_P`); with fewer than :data:`MIN_SAMPLES`
    samples a side, when its median is worse than :data:`MEDIAN_ALONE_FACTOR` (or ``factor``, if higher) x REV's.
    Benchmarks on one side only, skipped on a side (NaN: CUDA ones without a GPU) or failing on
    REV are not judged, and say so."""
    found: list[Regression] = []
    noise: list[Regression] = []
    tested: list[str] = []
    medians_only: list[str] = []
    not_judged = {name: "only on the working tree" for name in after.keys() - before.keys()}
    not_judged.update({name: "only on REV" for name in before.keys() - after.keys()})
    for name in sorted(before.keys() & after.keys()):
        old, new = before[name], after[name]
        if old is None:
            not_judged[name] = "failed on REV"
            continue
        if math.isnan(old) or (new is not None and math.isnan(new)):
            not_judged[name] = "skipped on " + ("both sides" if new is not None and math.isnan(old)
                                                  else "REV" if math.isnan(old) else "the working tree")
            continue
        if new is None:
            found.append(Regression(name, old, None))
            tested.append(name)
            continue
        p = slower_p(samples[0].get(name, []), samples[1].get(name, []))
        (medians_only if p is None else tested).append(name)
        if p is None and new > max(factor, MEDIAN_ALONE_FACTOR) * old:
            found.append(Regression(name, old, new, None))
        elif p is not None and new > factor * old:
            (found if p < SHIFT_P else noise).append(Regression(name, old, new, p))
    return Judgement(found, tested, medians_only, noise, not_judged)


def regressions(before: dict[str, float | None], after: dict[str, float | None], factor: float,
                samples: tuple[dict[str, list[float]], dict[str, list[float]]] = ({}, {})) -> list[Regression]:
    """The regressions of :func:`judge`."""
    return judge(before, after, factor, samples).regressions


def print_table(config: Path, before: tuple[str, Path], after: tuple[str, Path], factor: float) -> None:
    """asv's comparison table ('+' marks a ratio above ``factor``) of two sides' result folders."""
    from asv.commands.compare import Compare
    from asv.config import Config
    from asv.results import iter_results_for_machine_and_hash

    def rows(commit: str, results: Path) -> Iterator[tuple[Any, ...]]:
        for machine in sorted(p.name for p in results.iterdir() if p.is_dir()):
            for result in iter_results_for_machine_and_hash(str(results), machine, commit):
                for key in result.get_all_result_keys():
                    params = result.get_result_params(key)
                    yield (key, params, result.get_result_value(key, params), result.get_result_stats(key, params),
                           result.get_result_samples(key, params), result.benchmark_version.get(key),
                           machine, result.env_name)

    Compare.print_table(Config.load(str(config)), before[0], after[0], factor=factor, split=False,
                        resultset_1=rows(*before), resultset_2=rows(*after), use_stats=False,
                        commit_names={} if before[0] == after[0] else {before[0]: "REV", after[0]: "working tree"})


def require_asv() -> None:
    """ConfigError with the install command when asv is missing."""
    try:
        import asv  # noqa: F401
    except ImportError:
        raise ConfigError('the regression gate needs asv: python -m pip install -e ".[test]"') from None


def gate(against: str, factor: float = DEFAULT_FACTOR, bench: str | None = None, root: Path = ROOT) -> int:
    """Measure ``against`` and the working tree at ``root``; 1 when a benchmark regressed, else 0.

    The sides run in the order before, after, after, before (:data:`PASSES` passes each,
    samples pooled), so that a change in machine load over the run hits both alike.
    """
    if not factor > 1.0:
        raise ConfigError(f"--factor {factor}: must be > 1 (after/before ratio that counts as a regression)")
    if not (root / CONFIG_NAME).exists():
        raise ConfigError(f"no {CONFIG_NAME} at {root}: run the gate from a source checkout of SwAMP Bench")
    rev, head = resolve_rev(root, against), resolve_rev(root, "HEAD")
    require_asv()
    machine = contention.probe(PROBE_S, threads=len(contention.cores()))
    if machine["contended"]:
        return busy(machine, "before measuring")
    start = contention.snapshot()
    with tempfile.TemporaryDirectory(prefix="swamp-bench-gate-") as tmp, worktree(root, rev) as rev_tree:
        before = prepare(root, rev_tree, rev, f"REV {against}", Path(tmp) / "before")
        after = prepare(root, root, head, "the working tree", Path(tmp) / "after")
        order = [before, after, after, before] * (PASSES // 2) + [before, after] * (PASSES % 2)
        for i, side in enumerate(order):
            run_suite(side, bench, append=side in order[:i])
        values = [side.values() for side in (before, after)]
        samples = (load_samples(before.results, before.commit), load_samples(after.results, after.commit))
        for side, found in zip((before, after), values):
            if not found:
                raise ConfigError(f"asv recorded no results on {side.label}; its output above names the problem "
                                  "(`asv check`, and a --bench pattern that matches some benchmark)")
        print_table(after.config, (rev, before.results), (head, after.results), factor)
    during = contention.between(start, contention.snapshot(), threads=len(contention.cores()))
    if during["contended"]:
        return busy(during, "while the suite ran")
    judged = judge(values[0], values[1], factor, samples)
    print("\n" + "\n".join(judged.summary()), flush=True)
    return report(judged.regressions, factor, against)


def busy(record: dict[str, Any], when: str) -> int:
    """Say that the machine was too busy to judge a slowdown; the gate's exit status for it."""
    names = ", ".join(record["busy_names"]) or "no single process: many small ones"
    print(f"\nbench gate: no verdict: other work kept {record['others_cores']:.2f} of this machine's "
          f"{record['cores']} cores busy {when} ({record['wall_s']:.0f} s; busiest: {names}); timings taken so would "
          "report slowdowns that are the machine's. Re-run the gate on a quiet machine "
          f"(exit status {BUSY})", flush=True)
    return BUSY


def prepare(root: Path, source: Path, commit: str, label: str, folder: Path) -> Side:
    """A side that runs the suite of ``root`` on the code at ``source``.

    The working tree runs its suite as is, so a module that no longer imports fails the gate;
    an older revision runs the modules it can import.
    """
    env = side_env(source, folder)
    check_source(source, env)
    suite = root / read_config(root).get("benchmark_dir", "benchmarks")
    suite = suite if source == root else suite_for(suite, env, folder)
    return Side(label, source, commit, folder, write_config(root, folder, suite))


def report(found: list[Regression], factor: float, against: str) -> int:
    """Print the verdict; the gate's exit status."""
    if not found:
        print(f"\nbench gate: no benchmark worse than {factor}x {against}")
        return 0
    print(f"\nbench gate: {len(found)} benchmark(s) worse than {factor}x {against}:")
    for item in found:
        print(f"  {item.describe()}")
    return 1
