"""Property-based fuzzing (Hypothesis) of task files and command-line flags: whatever the input, a command
ends with exit status 0, 2 or 3; every stderr line starts with ``error: ``, ``warning: `` or ``note: ``, and on 2
and 3 exactly one is an ``error: ...`` line, the last; no exception escapes; and on 2 nothing is written under the
results folder.

Task files: every task in tasks/ that the fixtures can give data to (tests/fuzz_tasks.py), made small and
mutated one to three times: a value replaced (None, negatives, zero, huge or non-finite numbers, strings,
lists, mappings, booleans), a key deleted, an unknown key added, a section turned into a scalar. Flags:
``--set``, ``--sweep``, ``--seeds``, ``--methods`` and ``--epochs`` drawn from valid and broken values.

Example counts: the default profile (``SWAMP_BENCH_FUZZ`` unset) runs 8 mutations per task and 120 flag
sets; ``SWAMP_BENCH_FUZZ=thorough`` (what ``.ci/run`` also runs) runs 60 per task and 1,000 flag sets.
Both are derandomized (the same examples on every machine); a failure Hypothesis shrinks becomes a row of
``test_escapes_found_by_fuzzing_stay_one_line_errors`` below.
"""
from __future__ import annotations

import contextlib
import io
import math
import os
import traceback
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import cli
from harness.config import registry
from harness.run.memory import LIMIT_ENV
from tests.error_lines import error_line, prefixed
from tests.fuzz_tasks import BASES, WITHOUT_FIXTURE, small_task

PROFILE = os.environ.get("SWAMP_BENCH_FUZZ", "default")
COUNTS = {"default": (8, 120), "thorough": (60, 1000)}  # profile -> (mutations per task file, flag sets)
PER_TASK, FLAG_SETS = COUNTS[PROFILE]
MUTATIONS = ("a value replaced", "a key deleted", "an unknown key added to a section",
             "a section or value turned into a scalar (0, 'x', null, [], true)")
VALUE_CLASSES = ("null", "booleans", "small integers -3..3", "huge integers (1e12, -1e12, 1e18, 2^63, 1e400)",
                 "any float including NaN, ±inf, -0.0, 1e308", "short strings", "strings that look like YAML",
                 "lists of small integers and strings", "small mappings")
FUZZ = settings(derandomize=True, deadline=None, database=None, print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                       HealthCheck.data_too_large, HealthCheck.filter_too_much])
MEMORY_GIB = "2"  # a generated size that needs more stops in the memory preflight instead of swapping

VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([10**12, -10**12, 10**18, 2**63, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([float("nan"), float("inf"), -0.0, 1e308]),
    st.text(max_size=8), st.sampled_from(["", "x", "auto", "[]", "{}", "1e3", "swamp", "contrastive"]),
    st.lists(st.one_of(st.integers(-2, 5), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(max_size=4), st.integers(-2, 2), max_size=2),
)


def paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every key path of a nested mapping (sections and leaves)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((*prefix, key))
            found += paths(value, (*prefix, key))
    return found


def _parent(raw: dict, path: tuple) -> dict:
    node = raw
    for key in path[:-1]:
        node = node[key]
    return node


@st.composite
def mutated(draw: Any, raw: dict) -> tuple[dict, list[str]]:
    """``raw`` changed one to three times; the changes, described."""
    raw = yaml.safe_load(yaml.safe_dump(raw))
    described = []
    for _ in range(draw(st.integers(1, 3))):
        where = paths(raw)
        if not where:
            break
        path = draw(st.sampled_from(where))
        parent = _parent(raw, path)
        if not isinstance(parent, dict) or path[-1] not in parent:
            continue
        kind = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "scalar"]))
        if kind == "replace":
            parent[path[-1]] = draw(VALUES)
        elif kind == "delete":
            del parent[path[-1]]
        elif kind == "add" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.sampled_from(["unknown_key", "dim", "K", "type", "method"]))] = draw(VALUES)
        else:
            parent[path[-1]] = draw(st.sampled_from([0, "x", None, [], True]))
        described.append(f"{kind} {'.'.join(map(str, path))}")
    return raw, described


def written(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")) if folder.exists() else []


def run_cli(argv: list[str], out: Path) -> tuple[int, str, list[str]]:
    """Exit status, stderr and the files written under ``out``; fails on an escaped exception."""
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except BaseException as escaped:  # any escape at all is what the property is about
            pytest.fail(f"an exception escaped from {argv}: {''.join(traceback.format_exception(escaped))[-3000:]}")
    return code, err.getvalue(), written(out)


def check_outcome(code: int, stderr: str, files: list[str], what: str) -> None:
    assert code in (0, 2, 3), f"{what}: exit status {code}"
    try:
        if code in (2, 3):
            error_line(stderr, progress=True)
        else:
            prefixed(stderr, progress=True)
    except AssertionError as err:
        raise AssertionError(f"{what}: {err}") from None
    if code in (2, 3):
        assert "Traceback" not in stderr
    if code == 2:
        assert files == [], f"{what}: exit 2 but wrote {files}"


@pytest.fixture(scope="module")
def data_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz_data")


@pytest.fixture(autouse=True)
def small_memory(monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, MEMORY_GIB)
    registry.set_include(())


def test_every_task_file_is_fuzzed_or_named():
    shipped = {p.stem for p in (Path(__file__).resolve().parent.parent / "tasks").glob("*.yaml")}
    assert shipped == set(BASES) | set(WITHOUT_FIXTURE)


@pytest.mark.parametrize("name", sorted(BASES))
def test_mutated_task_files_end_in_one_line_or_a_run(name, data_root, tmp_path_factory):
    base = small_task(name, data_root / name)

    @settings(FUZZ, max_examples=PER_TASK)
    @given(change=mutated(base), method=st.sampled_from(BASES[name].methods))
    def property_(change, method):
        raw, described = change
        folder = tmp_path_factory.mktemp(f"fuzz_{name}")
        task = folder / "task.yaml"
        task.write_text(yaml.safe_dump(raw, sort_keys=False, allow_unicode=True))
        out = folder / "out"
        code, stderr, files = run_cli(["run", str(task), "--methods", method, "--epochs", "1", "--out", str(out),
                                       "--device", "cpu", "--no-progress"], out)
        check_outcome(code, stderr, files, f"{name}: {'; '.join(described)}")

    property_()


SET_KEYS = ["swamp.K", "swamp.queue", "swamp.tau", "swamp.eta", "swamp.lambda",
            "contrastive.margin", "contrastive.loss",
            "train.lr", "train.batch_size", "train.eval_batch_size", "train.select", "train.precision",
            "train.optimizer", "dataset.spread", "dataset.out_dim", "dataset.latent_dim", "dataset.seed",
            "dataset.split_sizes", "metrics.directions", "metrics.ks", "encoders.a.dim", "encoders.a.type",
            "swampp.K", "swamp.KK", "nothing", "swamp", ".K", "swamp.", "a.b.c.d"]
TEXT_VALUES = st.one_of(st.sampled_from(["0", "-1", "1", "2", "1e12", "nan", "inf", "-inf", "[]", "{}", "[1,x]", "x",
                                         "", "null", "true", "0.5", "[16,32]", "[1,1,1]", "a2b/R@1", "bf16"]),
                        st.text(alphabet="0123456789-.,[]{}:xe ", max_size=6))


@st.composite
def flags(draw: Any) -> list[str]:
    argv: list[str] = []
    for _ in range(draw(st.integers(0, 2))):
        argv += ["--set", f"{draw(st.sampled_from(SET_KEYS))}={draw(TEXT_VALUES)}"]
    if draw(st.booleans()):
        values = ",".join(draw(st.lists(TEXT_VALUES, min_size=0, max_size=3)))
        argv += ["--sweep", f"{draw(st.sampled_from(SET_KEYS))}={values}"]
    if draw(st.booleans()):
        argv += ["--seeds", draw(st.one_of(st.sampled_from(["0", "0,1", "0-1", "1-0", "-1", "0,0", "", "x", "0-",
                                                             "99999999999999999999"]),
                                           st.text(alphabet="0123456789-,", max_size=5)))]
    if draw(st.booleans()):
        argv += ["--methods", draw(st.sampled_from(["contrastive", "swamp", "contrastive,swamp", "", ",", "swampp",
                                                     "cca", "swamp,swamp"]))]
    else:
        argv += ["--methods", "contrastive"]
    argv += ["--epochs", draw(st.sampled_from(["1", "0", "-1", "x", "1.5", "", "2"]))]
    return argv


@pytest.mark.slow  # seconds: some generated flag sets train a run
def test_generated_flags_end_in_one_line_or_a_run(data_root, tmp_path_factory):
    task = tmp_path_factory.mktemp("flags") / "task.yaml"
    task.write_text(yaml.safe_dump(small_task("synthetic", data_root / "flags"), sort_keys=False))

    @settings(FUZZ, max_examples=FLAG_SETS)
    @given(argv=flags())
    def property_(argv):
        out = tmp_path_factory.mktemp("flags_out") / "out"
        code, stderr, files = run_cli(["run", str(task), *argv, "--out", str(out), "--device", "cpu",
                                       "--no-progress"], out)
        check_outcome(code, stderr, files, " ".join(argv))

    property_()


# Inputs that once escaped as exceptions (found by fuzzing, or reported from a fuzzing run outside the
# suite), each now a one-line error with exit status 2.
ESCAPES = [
    ({"encoders": {"a": {"type": []}}}, "encoder name in", "must be a string"),
    ({"encoders": {"b": {"type": {"x": 1}}}}, "encoder name in", "must be a string"),
    ({"methods": {"contrastive": {"method": [1, "x"]}}}, "method name in", "must be a string"),
    ({"dataset": {"source": ["synthetic_gaussian"]}}, "data source name in", "must be a string"),
    ({"dataset": {"latent_dim": 0}}, "dataset.latent_dim must be >= 1", "got 0"),
    ({"dataset": {"latent_dim": -1}}, "dataset.latent_dim must be >= 1", "got -1"),
    ({"dataset": {"out_dim": -1}}, "dataset.out_dim must be >= 1", "got -1"),
    ({"dataset": {"seed": -1}}, "dataset.seed must be >= 0", "got -1"),
    ({"dataset": {"hidden": [50, -2]}}, "dataset.hidden must be >= 1", "element -2"),
    ({"dataset": {"out_dim": 10**12}}, "more than the", "reduce dataset.pairs_per_class, dataset.out_dim"),
    ({"dataset": {"latent_dim": 10**12}}, "more than the", "reduce dataset."),
    ({"methods": {"swamp": {"queue": 10**12}}}, "the largest part is the buffer queue", "swamp.queue"),
    ({"dataset": {"spread": float("nan")}}, "dataset.spread must be a finite number", "nan"),
    ({"methods": {"swamp": {"tau": 10**400}}}, "swamp.tau must be a finite number", "digits"),
    ({"dataset": {"pairs_per_class": 10**40}}, "pairs_per_class must be an integer between -2^63", "41 digits"),
    ({"encoders": {"b": {"dim": 6}}}, "encoders disagree on the embedding size", "a: 5, b: 6"),
    # a width no allocator can count, even on the meta device (found on the TU-Berlin task's CNN encoder)
    ({"encoders": {"a": {"dim": 10**18}}}, "the model cannot be built at these sizes", "lower the encoders' dim"),
]

FOUND_FLAGS = [
    (["--set", "train.lr=1e100"], "train.lr must lie within float32's range"),
    (["--seeds", "99999999999999999999"], "seeds must be below 2^63"),
]


@pytest.mark.parametrize("argv,problem", FOUND_FLAGS, ids=[a[0] for a, _ in FOUND_FLAGS])
def test_flags_fuzzing_found_stay_one_line_errors(argv, problem, data_root, tmp_path):
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(small_task("synthetic", data_root / "flags_found"), sort_keys=False))
    out = tmp_path / "out"
    code, stderr, files = run_cli(["run", str(task), *argv, "--methods", "contrastive", "--epochs", "1", "--out",
                                   str(out), "--no-progress"], out)
    assert code == 2 and files == []
    line = error_line(stderr)
    assert problem in line, line


# Found by the thorough fuzzing run on other task files: (task, change, method, exit status, fragments).
FOUND = [
    ("lsmdc_shapes", {"dataset": {"max_words": 10**18}}, "contrastive", 2, ("padded captions", "dataset.max_words")),
    ("lsmdc_shapes", {"dataset": {"feature_dim": 10**18}}, "contrastive", 2, ("video features",
                                                                              "dataset.feature_dim")),
    ("lsmdc_shapes", {"dataset": {"feature_dim": 10**40}}, "contrastive", 2, ("feature_dim must be an integer",)),
    ("lsmdc_shapes", {"encoders": {"b": {"dim": 4096}}}, "contrastive", 2,
     ("encoders disagree on the embedding size",)),
    ("sketchy_shapes", {"methods": {"doodle2search_swamp": {"margin": 0}}}, "doodle2search_swamp", 2,
     ("doodle2search_swamp.margin must be > 0",)),
    ("coco_shapes", {"dataset": {"regions": 10**12}}, "scan", 2, ("region features", "dataset.regions")),
]


@pytest.mark.parametrize("name,change,method,status,fragments", FOUND, ids=[f"{f[0]}-{i}" for i, f in enumerate(FOUND)])
def test_what_fuzzing_found_stays_fixed(name, change, method, status, fragments, data_root, tmp_path):
    from harness.config.spec import merge

    raw = merge(small_task(name, data_root / name), change)
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    code, stderr, files = run_cli(["run", str(task), "--methods", method, "--epochs", "1", "--out", str(out),
                                   "--no-progress"], out)
    assert code == status and files == []
    line = error_line(stderr)
    assert all(f in line for f in fragments), line


@pytest.mark.parametrize("change,problem,fix", ESCAPES, ids=[p for _, p, _ in ESCAPES])
def test_escapes_found_by_fuzzing_stay_one_line_errors(change, problem, fix, data_root, tmp_path):
    from harness.config.spec import merge

    raw = merge(small_task("synthetic", data_root / "escapes"), change)
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = tmp_path / "out"
    method = "swamp" if "swamp" in str(change) else "contrastive"
    code, stderr, files = run_cli(["run", str(task), "--methods", method, "--epochs", "1", "--out", str(out),
                                   "--no-progress"], out)
    assert code == 2 and files == []
    line = error_line(stderr)
    assert problem in line and fix in line, line


def test_the_memory_preflight_names_the_setting_and_the_estimate(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv(LIMIT_ENV, "0.001")  # 1 MiB: even the small task's test score matrix does not fit
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(small_task("synthetic", data_root / "memory"), sort_keys=False))
    code, stderr, files = run_cli(["run", str(task), "--methods", "swamp", "--epochs", "1", "--out",
                                   str(tmp_path / "out"), "--no-progress"], tmp_path / "out")
    assert code == 2 and files == []
    assert f"more than the 0.001 GiB of {LIMIT_ENV}=0.001" in stderr and "reduce" in stderr
    assert math.isfinite(float(stderr.split("needs about ")[1].split(" GiB")[0]))


@pytest.mark.parametrize("change,phase", [
    ({"methods": {"swamp": {"queue": 10**12}}}, "out of memory on cpu during building the model"),
    ({"dataset": {"out_dim": 10**12}}, "out of memory while loading dataset 'synthetic_gaussian'"),
])
def test_an_allocation_the_preflight_lets_through_is_exit_3_and_one_line(change, phase, data_root, tmp_path,
                                                                          monkeypatch):
    """When an estimate misses (here: the preflight switched off), the allocation failure itself ends the run
    like a CUDA out-of-memory error: exit 3, one line naming the phase and what to reduce, no result."""
    from harness.config.spec import merge
    from harness.run import memory

    monkeypatch.setattr(memory, "require_fits", lambda *args, **kwargs: None)
    task = tmp_path / "task.yaml"
    task.write_text(yaml.safe_dump(merge(small_task("synthetic", data_root / "oom"), change), sort_keys=False))
    out = tmp_path / "out"
    code, stderr, files = run_cli(["run", str(task), "--methods", "swamp", "--epochs", "1", "--out", str(out),
                                   "--no-progress"], out)
    assert code == 3
    # the queue of 10**12 also draws the warning that it exceeds the training set (the run went on to build)
    line = error_line(stderr)
    assert phase in line and ("reduce" in line or "lower" in line), line
    assert not [f for f in files if f.endswith(".json")]
