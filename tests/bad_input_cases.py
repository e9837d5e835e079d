"""The bad-input matrix: one row per mistake a user can make in a task file, on the command line or in
the data. ``tests/test_bad_input.py`` runs every row; ``python -m tests.bad_input_matrix`` writes the
rows and the error line each one prints to ``docs/bad-input-matrix.md``.

A row is one :class:`Case`: ``setup(folder)`` writes whatever files the mistake needs into an empty
folder and returns the arguments of ``python -m harness``; the error line must contain ``problem``
and ``fix`` (and ``(did you mean 'X'?)`` when ``suggestion`` is X). A new data source adds its rows
with one entry each, e.g.::

    Case("data", "my_source-missing", "my_source: the root folder is empty",
         lambda d: run(d, task(d, {"dataset": {"source": "my_source", "root": str(d / "empty")}})),
         "missing", "--data-root"),
"""
from __future__ import annotations

import copy
import io
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from tests.conftest import TINY, TINY_IMAGE_TEXT
from tests.sketch_fixtures import folder_task, write_image_folders

DELETE = object()  # a change that removes the key


@dataclass(frozen=True)
class Case:
    group: str  # "task file", "plugins", "command line" or "data"
    id: str
    mistake: str  # one line for the table
    setup: Callable[[Path], list[str]]
    problem: str  # fragment of the error line naming the problem
    fix: str  # fragment naming the fix (a valid range, the valid choices, what to do)
    suggestion: str | None = None  # the close name offered as "did you mean"
    read_only_mount: bool = False  # run in a subprocess whose results folder is a read-only file system


def merged(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``changes`` merged in recursively; DELETE removes a key."""
    out = copy.deepcopy(base)
    for key, value in changes.items():
        if value is DELETE:
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = merged(out[key] if isinstance(out.get(key), dict) else {}, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


# The tiny task as one file without base:, for rows that leave out a required key.
STANDALONE = merged(yaml.safe_load((Path(TINY["base"])).read_text()), {k: v for k, v in TINY.items() if k != "base"})


def task(folder: Path, changes: dict[str, Any] | None = None, name: str = "task.yaml",
         base: dict[str, Any] = TINY) -> Path:
    """The tiny synthetic task of the test suite with ``changes`` merged in, written to ``folder/name``."""
    path = folder / name
    path.write_text(yaml.safe_dump(merged(base, changes or {}), sort_keys=False))
    return path


def text(folder: Path, body: str | bytes, name: str = "task.yaml") -> Path:
    """A task file with exactly ``body`` in it."""
    path = folder / name
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


def run(folder: Path, task_path: Path | str, *extra: str, epochs: str | None = "1", out: str = "results") -> list[str]:
    """``run TASK --out FOLDER/OUT --device cpu --epochs 1 EXTRA...`` (progress bars on: they would show)."""
    return ["run", str(task_path), "--out", str(folder / out), "--device", "cpu",
            *(["--epochs", epochs] if epochs else []), *extra]


def on(changes: dict[str, Any], *extra: str, base: dict[str, Any] = TINY) -> Callable[[Path], list[str]]:
    """Setup: the tiny task with ``changes``, run with ``extra`` arguments."""
    return lambda d: run(d, task(d, changes, base=base), *extra)


def args(*extra: str) -> Callable[[Path], list[str]]:
    """Setup: the unchanged tiny task run with ``extra`` arguments."""
    return on({}, *extra)


def _write(root: Path, files: dict[str, Any]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        if isinstance(content, np.ndarray):
            np.save(root / name, content)
        elif content is not None:  # bytes or text; None leaves the file out
            (root / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    return root


def on_folders(break_it: Callable[[Path], Any] = lambda root: None, *, changes: dict[str, Any] | None = None,
               **dataset: Any) -> Callable[[Path], list[str]]:
    """Setup: PIL-generated sketch/photo folders (tests/sketch_fixtures.py) broken by ``break_it``, run with
    the tiny image-folder variant of tasks/sketchy.yaml, ``dataset`` overrides and other ``changes`` merged in."""
    def setup(folder: Path) -> list[str]:
        root = write_image_folders(folder / "folders")
        break_it(root)
        path = folder / "task.yaml"
        body = merged(folder_task(root, **dataset), changes or {})
        path.write_text(yaml.safe_dump(body, sort_keys=False))
        return run(folder, path)
    return setup


def arrays(folder: Path, **files: Any) -> Path:
    """A paired_arrays folder (40/20/20 pairs, 6-d a, 4-d b, labels); ``files`` replaces files by name:
    an array is saved, bytes or text written as they are, None leaves the file out."""
    rng = np.random.default_rng(0)
    default: dict[str, Any] = {}
    for split, n in (("train", 40), ("val", 20), ("test", 20)):
        default.update({f"{split}_a.npy": rng.normal(size=(n, 6)).astype(np.float32),
                        f"{split}_b.npy": rng.normal(size=(n, 4)).astype(np.float32),
                        f"{split}_labels.npy": rng.integers(0, 4, n)})
    return _write(folder / "arrays", {**default, **files})


def reading(folder: Path, dataset: dict[str, Any], base: dict[str, Any] = TINY, **changes: Any) -> Path:
    """A task like ``base`` whose dataset is ``dataset`` (not merged into the base's)."""
    return task(folder, changes, base={**base, "dataset": dataset})


def on_arrays(**files: Any) -> Callable[[Path], list[str]]:
    """Setup: the tiny task reading a paired_arrays folder (see :func:`arrays`)."""
    return lambda d: run(d, reading(d, {"source": "paired_arrays", "root": str(arrays(d, **files))}))


def precomp(folder: Path, **files: Any) -> Path:
    """A scan_precomp folder (5/5/5 images of 3 x 8 regions, 5 captions each); ``files`` as in :func:`arrays`."""
    rng = np.random.default_rng(0)
    default: dict[str, Any] = {}
    for split in ("train", "dev", "test"):
        default[f"{split}_ims.npy"] = rng.random((5, 3, 8)).astype(np.float32)
        default[f"{split}_caps.txt"] = "".join(f"a photo of thing {i}\n" for i in range(25))
    return _write(folder / "precomp", {**default, **files})


def on_precomp(**files: Any) -> Callable[[Path], list[str]]:
    """Setup: the tiny image–text task reading a scan_precomp folder (see :func:`precomp`)."""
    def setup(d: Path) -> list[str]:
        dataset = {"source": "scan_precomp", "root": str(precomp(d, **files)), "val_images": 0, "min_word_count": 1,
                   "vocab_cache": str(d / "results" / "cache")}
        return run(d, reading(d, dataset, TINY_IMAGE_TEXT, metrics={"folds": [1]}))
    return setup


def without(*keys: str) -> Callable[[Path], list[str]]:
    """Setup: the tiny task as one file (no base:) without ``keys`` ('encoders.b' reaches inside)."""
    changes: dict[str, Any] = {}
    for key in keys:
        *parents, last = key.split(".")
        node = changes
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = DELETE
    return on(changes, base=STANDALONE)


def base_cycle(d: Path) -> list[str]:
    text(d, "base: b.yaml\nname: a\n", "a.yaml")
    text(d, "base: a.yaml\nname: b\n", "b.yaml")
    return run(d, d / "a.yaml")


def corrupt_result(d: Path) -> list[str]:
    result = d / "results" / "tiny" / "swamp@train.epochs=1" / "seed0.json"
    result.parent.mkdir(parents=True)
    result.write_text('{"schema": 1, "metrics": {"a2b/R@1": 8')  # cut short by hand
    return run(d, task(d), "--methods", "swamp")


def _text_file(path: Path, body: str) -> Path:
    path.write_text(body)
    return path


def _record(d: Path, method: str = "contrastive") -> dict[str, Any]:
    """What a result file of the tiny task's ``method`` records about its run (no training needed)."""
    from harness.config import spec as specs

    config = specs.load_task(task(d, name="recorded.yaml")).resolved(method)
    return {"schema": 1, "task": config["task"], "run_name": method, "method": method, "seed": 0, "varied": {},
            "config": config, "metrics": {}}


def _stale_result(d: Path) -> Path:
    """A result file whose contrastive margin is recorded under a name the code does not know."""
    record = _record(d)
    record["config"]["method"]["margn"] = record["config"]["method"].pop("margin")
    return _text_file(d / "seed0.json", json.dumps(record))


def _ensemble_result(d: Path) -> Path:
    """A result file of `harness ensemble` over two runs of the tiny task."""
    record = _record(d)
    record["config"]["method"] = {"name": "contrastive+swamp", "method": "ensemble",
                                  "sources": ["contrastive", "swamp"]}
    record["sources"] = [{"run_name": "contrastive"}, {"run_name": "swamp"}]
    return _text_file(d / "seed0.json", json.dumps(record))


def out_is_file(d: Path) -> list[str]:
    (d / "results").write_text("not a folder\n")
    return run(d, task(d))


def read_only_out(d: Path) -> list[str]:
    (d / "ro").mkdir()  # the subprocess mounts a read-only file system here
    return run(d, task(d), out="ro/results")


def _npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def _npz_as_npy(d: Path) -> Path:
    root = arrays(d)
    with open(root / "train_a.npy", "wb") as f:
        np.savez(f, x=np.zeros((40, 6), np.float32))
    return root


NAN = np.full((20, 6), np.nan, dtype=np.float32)

def with_plugin(files: dict[str, str], method: str) -> Callable[[Path], list[str]]:
    """Setup: plugin files in ``<folder>/plugins`` (name -> source) and the tiny task running ``method``, which
    one of them registers, with ``--include`` on that folder."""
    def setup(folder: Path) -> list[str]:
        plugins = folder / "plugins"
        plugins.mkdir()
        for name, source in files.items():
            (plugins / name).write_text(source)
        path = task(folder, {"methods": {method: {"method": method}}})
        return run(folder, path, "--methods", method, "--include", str(plugins))
    return setup


PLUGIN_METHOD = (
    "from dataclasses import dataclass\nfrom harness.api import METHODS, Method\n"
    "@dataclass(frozen=True)\nclass P:\n    pass\n"
    "@METHODS.register('{name}')\nclass M(Method):\n    Params = P\n"
)


CASES: list[Case] = [
    # --- task files -------------------------------------------------------------------------------
    Case("task file", "yaml-syntax", "malformed YAML", lambda d: run(d, text(d, "name: [unclosed\n")),
         "is not valid YAML", "line 2"),
    Case("task file", "yaml-not-mapping", "a list at the top level", lambda d: run(d, text(d, "- a\n- b\n")),
         "must hold a mapping at the top level", "name: ..., dataset: ..."),
    Case("task file", "yaml-not-utf8", "a task file that is not UTF-8", lambda d: run(d, text(d, b"name: caf\xe9\n")),
         "not UTF-8", "save it as UTF-8"),
    Case("task file", "launcher-option", "misspelt option in the launcher section",
         on({"launcher": {"slurm": {"gpus_per_nod": 1}}}), "unknown launcher option 'gpus_per_nod'",
         "valid: account", "gpus_per_node"),
    Case("task file", "key-top", "misspelt top-level key", on({"metrcs": {}}), "unknown top-level key 'metrcs'",
         "valid: base, dataset", "metrics"),
    Case("task file", "key-train", "misspelt training key", on({"train": {"bach_size": 8}}), "unknown key 'bach_size'",
         "valid: batch_size", "batch_size"),
    Case("task file", "key-method", "misspelt method parameter", on({"methods": {"swamp": {"tua": 0.1}}}),
         "unknown key 'tua' in", "valid: K,", "tau"),
    Case("task file", "key-encoder", "misspelt encoder parameter", on({"encoders": {"a": {"dimm": 5}}}),
         "unknown key 'dimm'", "valid: dim, hidden", "dim"),
    Case("task file", "key-dataset", "misspelt dataset parameter", on({"dataset": {"sprad": 0.2}}),
         "unknown key 'sprad'", "valid: hidden", "spread"),
    Case("task file", "key-metrics", "misspelt metrics key", on({"metrics": {"direction": ["a2b"]}}),
         "unknown key 'direction'", "valid: directions", "directions"),
    Case("task file", "key-reference", "misspelt key in the published reference block",
         on({"reference": {"lable": "paper"}}), "unknown key 'lable'", "valid: label, methods, timing", "label"),
    Case("task file", "name-source", "unknown data source", on({"dataset": {"source": "synthetic_gausian"}}),
         "unknown data source 'synthetic_gausian'", "; valid: ", "synthetic_gaussian"),
    Case("task file", "name-encoder", "unknown encoder type", on({"encoders": {"b": {"type": "mlpp"}}}),
         "unknown encoder 'mlpp'", "; valid: ", "mlp"),
    Case("task file", "name-method", "unknown method class", on({"methods": {"swamp": {"method": "swampp"}}}),
         "unknown method 'swampp'", "; valid: ", "swamp"),
    Case("task file", "name-optimizer", "unknown optimizer", on({"train": {"optimizer": "adan"}}),
         "unknown optimizer 'adan'", "valid: adam, adamw, sgd", "adam"),
    Case("task file", "name-direction", "unknown retrieval direction", on({"metrics": {"directions": ["a2c"]}}),
         "unknown direction 'a2c'", "valid: a2b, b2a", "a2b"),
    Case("task file", "name-select", "selection metric the task does not compute",
         on({"train": {"select": "a2b/R@3"}}), "unknown selection metric 'a2b/R@3'", "valid: a2b/MeanR"),
    Case("task file", "type-int", "text where an integer belongs", on({"train": {"batch_size": "big"}}),
         "batch_size must be of type int, got 'big'", "of type int"),
    Case("task file", "type-float", "text where a number belongs", on({"train": {"lr": "fast"}}),
         "lr must be of type float, got 'fast'", "of type float"),
    Case("task file", "type-list", "a number where a list belongs", on({"encoders": {"a": {"hidden": 50}}}),
         "hidden must be of type tuple, got 50", "of type tuple"),
    Case("task file", "type-section", "a section that is a list, not a mapping", on({"train": [1, 2]}),
         "train must be a mapping", "KEY: VALUE"),
    Case("task file", "type-method-train", "a method's train override that is not a mapping",
         on({"methods": {"swamp": {"train": [1]}}}), "methods.swamp.train must be a mapping", "training settings"),
    Case("task file", "missing-name", "no name", without("name"), "missing required key 'name'", "task.yaml"),
    Case("task file", "missing-methods", "no methods", without("methods"), "missing required key 'methods'",
         "task.yaml"),
    Case("task file", "missing-method-class", "a method entry without its method class",
         on({"methods": {"swamp": {"method": DELETE}}}, base=STANDALONE), "must be a mapping with a 'method' key",
         "naming one of"),
    Case("task file", "missing-encoder", "an encoder for only one modality", without("encoders.b"),
         "encoders must map exactly the modalities a and b", "to encoder specs"),
    Case("task file", "base-cycle", "base: files that include each other", base_cycle,
         "base: chain forms a cycle", "remove one of these base: entries"),
    Case("task file", "base-missing", "base: names a file that does not exist (close to one that does)",
         lambda d: run(d, text(d, f"base: {Path(TINY['base']).parent / 'synthetc.yaml'}\nname: x\n")),
         "(the base: of", "`python -m harness list`", str(Path(TINY["base"]).parent / "synthetic.yaml")),
    Case("task file", "range-batch-0", "batch size 0", on({"train": {"batch_size": 0}}),
         "batch_size must be >= 2", "got 0"),
    Case("task file", "range-batch-1", "batch size 1 (no negatives)", on({"train": {"batch_size": 1}}),
         "batch_size must be >= 2 (the hinge needs negatives)", "got 1"),
    Case("task file", "range-K", "K < 2 prototypes", on({"methods": {"swamp": {"K": 1}}}), "K must be >= 2", "got 1"),
    Case("task file", "range-queue", "queue not larger than K", on({"methods": {"swamp": {"K": 64, "queue": 32}}}),
         "queue (32) must exceed K (64)", "raise queue, lower K, or set strict_queue: false"),
    Case("task file", "range-margin", "negative margin", on({"methods": {"contrastive": {"margin": -0.1}}}),
         "margin must be >= 0", "got -0.1"),
    Case("task file", "range-tau", "temperature 0", on({"methods": {"swamp": {"tau": 0}}}), "tau and eta", "> 0"),
    Case("task file", "range-epochs", "0 epochs in the task file",
         lambda d: run(d, task(d, {"train": {"epochs": 0}}), epochs=None), "epochs must be >= 1", "got 0"),
    Case("task file", "range-lr", "negative learning rate", on({"train": {"lr": -0.001}}), "lr must be > 0",
         "got -0.001"),
    Case("task file", "range-eval-batch", "evaluation batch size 0", on({"train": {"eval_batch_size": 0}}),
         "eval_batch_size must be >= 1", "got 0"),
    Case("task file", "range-weight-decay", "negative weight decay", on({"train": {"weight_decay": -1}}),
         "weight_decay must be >= 0", "got -1"),
    Case("task file", "range-lr-gamma", "learning-rate decay factor above 1", on({"train": {"lr_gamma": 2}}),
         "lr_gamma must lie in (0, 1]", "got 2"),
    Case("task file", "range-early-stop", "early-stopping patience 0", on({"train": {"early_stop_patience": 0}}),
         "early_stop_patience must be >= 1 epoch", "or null: train every epoch"),
    Case("task file", "nesterov-adam", "Nesterov momentum with an optimizer other than sgd",
         on({"train": {"optimizer": "adam", "nesterov": True}}), "nesterov applies to optimizer sgd only",
         "set nesterov: false"),
    Case("task file", "range-ks", "recall at k = 0", on({"metrics": {"ks": [0, 1]}}), "ks must be positive integers",
         "positive"),
    Case("task file", "range-folds", "a fold count that does not divide the validation split",
         on({"metrics": {"folds": [1, 3]}}),
         "metrics.folds [3] do not divide the 80 a-items", "use divisors of 80"),
    Case("task file", "reference-value", "a published number that is not a number",
         on({"reference": {"methods": {"contrastive": {"a2b/R@1": "high"}}}}), "a2b/R@1 must be a number",
         "got 'high'"),
    Case("task file", "encoders-width", "encoders of different output sizes",
         on({"encoders": {"a": {"dim": 5}, "b": {"dim": 6}}}), "encoders disagree on the embedding size",
         "the same output size"),
    Case("task file", "encoder-data", "an encoder that does not fit the data's items",
         on({"encoders": {"a": {"type": "region_projection", "dim": 5, "hidden": DELETE}}}),
         "region_projection expects items of shape (regions, features), got (100,)", "such as mlp"),
    Case("task file", "name-precision", "unknown numeric precision", on({"train": {"precision": "fp16"}}),
         "unknown precision 'fp16'", "valid: bf16, fp32, tf32", "bf16"),
    Case("task file", "swamp-K-data", "more SwAMP prototypes than training pairs (the command's only method; "
         "beside other methods, it alone is refused and the others run)",
         on({"methods": {"swamp": {"K": 300, "queue": 400}}}, "--methods", "swamp"),
         "K = 300 prototypes exceed the 240 training pairs", "set K below 240, e.g. K: auto (34 here"),
    Case("task file", "swamp-K-auto-typo", "a misspelt auto for SwAMP's K",
         on({"methods": {"swamp": {"K": "atuo", "queue": 400}}}), "K must be a number or one of auto, got 'atuo'",
         "(did you mean 'auto'?)", "auto"),
    Case("task file", "encoder-dim-auto-typo", "a misspelt auto for an encoder's width",
         on({"encoders": {"a": {"type": "linear", "dim": "automatic"}, "b": {"type": "linear", "dim": "auto"}}}),
         "dim must be a number or one of auto, got 'automatic'", "(did you mean 'auto'?)", "auto"),
    Case("command line", "methods-unregistered", "a method that is neither declared by the task nor registered",
         args("--methods", "identty"), "unknown method 'identty'",
         "registered methods (run with their defaults when named)", "identity"),
    Case("task file", "scan-scorer", "unknown SCAN scorer",
         on({"methods": {"scan": {"scorer": "orignal"}}}, base=TINY_IMAGE_TEXT), "unknown scorer 'orignal'",
         "valid: original, vectorised", "original"),
    Case("task file", "scan-budget", "a time budget for the vectorised SCAN scorer",
         on({"methods": {"scan": {"time_budget_s": 60}}}, base=TINY_IMAGE_TEXT),
         "time_budget_s limits the test scoring of scorer: original only", "set scorer: original"),
    Case("task file", "par-heads", "PAR split heads that do not divide the feature width",
         on({"methods": {"swamp_par": {"H": 3, "heads": "split"}}}, "--methods", "swamp_par", base=TINY_IMAGE_TEXT),
         "PAR split heads H (3) must divide", "divisors of 16"),
    # --- plugins ----------------------------------------------------------------------------------
    Case("plugins", "include-missing", "--include names a folder that does not exist",
         args("--include", "no_such_plugins"), "--include no_such_plugins: no such folder", "pass a folder holding"),
    Case("plugins", "plugin-broken", "the plugin file a task asks for fails to import",
         with_plugin({"mine.py": PLUGIN_METHOD.replace("{name}", "mine") + "import no_such_module_anywhere\n"}, "mine"),
         "method 'mine' is in", "fix that file"),
    Case("plugins", "plugin-no-params", "a method class without Params",
         with_plugin({"bare.py": "from harness.api import METHODS, Method\n@METHODS.register('bare')\n"
                                 "class Bare(Method):\n    pass\n"}, "bare"),
         "has no Params", "declare `Params = <a frozen dataclass"),
    Case("plugins", "plugin-twice", "two plugin files register the same name",
         with_plugin({"first.py": PLUGIN_METHOD.replace("{name}", "twin"),
                      "second.py": PLUGIN_METHOD.replace("{name}", "twin")}, "twin"),
         "method 'twin' is registered twice", "rename one of them"),
    Case("plugins", "name-not-string", "a method type that is not a name",
         on({"methods": {"swamp": {"method": [1, "x"]}}}), "must be a string, got [1, 'x']", "valid: "),
    # --- command line -----------------------------------------------------------------------------
    Case("command line", "task-missing", "a misspelt task file",
         lambda d: run(d, Path(TINY["base"]).parent / "synthtic.yaml"), "synthtic.yaml does not exist",
         "`python -m harness list`", str(Path(TINY["base"]).parent / "synthetic.yaml")),
    Case("command line", "tune-trials", "harness tune with --trials 0",
         lambda d: ["tune", str(task(d)), "--methods", "contrastive", "--trials", "0", "--out", str(d / "results")],
         "--trials must be >= 1", "trials per method"),
    Case("command line", "tune-no-methods", "harness tune without --methods",
         lambda d: ["tune", str(task(d)), "--methods", "", "--out", str(d / "results")],
         "--methods: name the methods to compare", "every method gets the same budget"),
    Case("task file", "tune-range", "a tune search whose low lies above its high",
         lambda d: ["tune", str(task(d, {"tune": {"space": {"swamp.tau": {"low": 0.5, "high": 0.1}}}})),
                    "--methods", "swamp", "--out", str(d / "results")],
         "tune.space.swamp.tau: low must be below high", "low 0.5, high 0.1"),
    Case("task file", "tune-key", "a tune search of a misspelt setting",
         lambda d: ["tune", str(task(d, {"tune": {"space": {"swamp.tua": {"low": 0.05, "high": 0.5}}}})),
                    "--methods", "swamp", "--out", str(d / "results")],
         "tune.space.swamp.tua names no setting of swamp", "keys are train.KEY", "swamp.tau"),
    Case("task file", "tune-refused", "a tune search every value of which the method refuses",
         lambda d: ["tune", str(task(d, {"tune": {"space": {"swamp.K": {"low": 100, "high": 200}}}})),
                    "--methods", "swamp", "--out", str(d / "results")],
         "the search reaches K = 100, which its settings refuse", "raise queue, lower K"),
    Case("command line", "subcommand", "a misspelt subcommand", lambda d: ["rn", "tasks/synthetic.yaml"],
         "invalid choice: 'rn'", "--help", "run"),
    Case("command line", "option", "a misspelt option", args("--seeeds", "1"), "unrecognized arguments: --seeeds 1",
         "--help", "--seeds"),
    Case("command line", "methods", "a misspelt method name", args("--methods", "swampp"), "unknown method 'swampp'",
         "the task declares: contrastive, swamp", "swamp"),
    Case("command line", "set-method", "--set on a method the task does not declare", args("--set", "swap.K=8"),
         "unknown method 'swap'", "valid: cca, contrastive", "swamp"),
    Case("command line", "set-key", "--set on a misspelt parameter", args("--set", "swamp.KK=8"),
         "unknown key 'KK'", "valid: K,", "K"),
    Case("command line", "set-syntax", "--set without a value", args("--set", "swamp.K"), "--set 'swamp.K'",
         "expected NAME.KEY=VALUE"),
    Case("command line", "set-value", "--set with an unparseable value", args("--set", "swamp.K=[8"),
         "cannot parse value '[8'", "write lists as [1, 2]"),
    Case("command line", "set-type", "--set with a value of the wrong type", args("--set", "swamp.K=many"),
         "K must be a number or one of auto, got 'many'", "one of auto"),
    Case("command line", "sweep-syntax", "--sweep without values", args("--sweep", "swamp.K"), "--sweep 'swamp.K'",
         "expected NAME.KEY=V1,V2"),
    Case("command line", "sweep-empty", "--sweep with an empty value", args("--sweep", "swamp.K=8,,16"),
         "--sweep 'swamp.K=8,,16'", "distinct non-empty"),
    Case("command line", "sweep-list", "--sweep over lists", args("--sweep", "encoders.a.hidden=[8],[16]"),
         "sweep values must be scalars", "use --set for lists"),
    Case("command line", "sweep-twice", "the same key swept twice",
         args("--sweep", "swamp.K=8", "--sweep", "swamp.K=16"),
         "each key may be swept once", "swamp.K, swamp.K"),
    Case("command line", "seeds-text", "seeds that are not numbers", args("--seeds", "a,b"), "--seeds 'a,b'",
         "comma-separated integers such as 0,1,2 or 0-4"),
    Case("command line", "seeds-repeated", "a seed listed twice", args("--seeds", "1,1"), "--seeds '1,1'",
         "distinct non-negative"),
    Case("command line", "seeds-negative", "a negative seed", args("--seeds", "-1"), "--seeds '-1'",
         "distinct non-negative"),
    Case("command line", "seeds-empty-range", "a seed range that runs backwards", args("--seeds", "3-1"),
         "--seeds '3-1'", "distinct non-negative"),
    Case("command line", "epochs-0", "--epochs 0", args("--epochs", "0"), "--epochs must be >= 1", "got 0"),
    Case("command line", "epochs-text", "--epochs that is not a number", args("--epochs", "ten"),
         "argument --epochs: invalid int value: 'ten'", "--help"),
    Case("command line", "on-nan", "a misspelt --on-nan policy", args("--on-nan", "skp"),
         "argument --on-nan: invalid choice: 'skp'", "choose from 'stop', 'skip'", "skip"),
    Case("command line", "device-name", "a misspelt device", args("--device", "cdua"), "--device 'cdua'",
         "use auto, cpu, cuda or cuda:N", "cuda"),
    Case("command line", "device-absent", "a CUDA device this machine does not have", args("--device", "cuda:7"),
         "--device cuda:7", "use "),
    Case("command line", "reference", "--reference to a run the command does not make",
         args("--methods", "contrastive", "--reference", "contrastiv"), "--reference 'contrastiv' is not among",
         "name one of them", "contrastive@train.epochs=1"),
    Case("command line", "init-missing", "--init from a checkpoint that does not exist",
         lambda d: run(d, task(d), "--init", str(d / "nope" / "seed0.json")), "does not exist",
         "pass a result file (seed<k>.json) or its checkpoint"),
    Case("command line", "data-root", "--data-root that does not exist",
         lambda d: run(d, reading(d, {"source": "paired_arrays", "root": "x"}), "--data-root",
                       str(d / "nowhere")), "6 file(s) missing", "pass --data-root PATH"),
    Case("command line", "out-file", "--out naming a file", out_is_file, "is a file, not a folder",
         "pass --out with a folder"),
    Case("command line", "out-read-only", "--out on a read-only file system", read_only_out,
         "it is on a read-only file system", "pass --out with a writable folder", read_only_mount=True),
    Case("command line", "out-corrupt-result", "a result file in the results folder cut short by hand",
         corrupt_result, "cannot read the result file", "pass --force"),
    Case("command line", "report-empty", "harness report on a folder without result files",
         lambda d: ["report", str((d / "empty").mkdir() or d / "empty"), "--out", str(d / "site")],
         "no result files", "write some with `python -m harness run"),
    Case("command line", "report-not-folder", "harness report on a folder that does not exist",
         lambda d: ["report", str(d / "nowhere"), "--out", str(d / "site")], "is not a folder",
         "give folders that hold result files"),
    Case("command line", "rerun-missing", "harness rerun on a result file that does not exist",
         lambda d: ["rerun", str(d / "seed0.jsn"), "--out", str(d / "results")], "no such result file or folder",
         "give result files (seed<k>.json)"),
    Case("command line", "rerun-not-result", "harness rerun on a JSON file that is not a run's result",
         lambda d: ["rerun", str(_text_file(d / "seed0.json", '{"schema": 1}')), "--out", str(d / "results")],
         "not a run's result file", "give the seed<k>.json files a run wrote"),
    Case("command line", "rerun-ensemble", "harness rerun on an ensemble's result file",
         lambda d: ["rerun", str(_ensemble_result(d)), "--out", str(d / "results")],
         "an ensemble of the runs contrastive and swamp",
         "give their files to `harness ensemble`"),
    Case("command line", "rerun-stale", "harness rerun on a result file with a setting the code no longer has",
         lambda d: ["rerun", str(_stale_result(d)), "--out", str(d / "results")], "unknown key 'margn'",
         "re-run its task file with `harness run` instead", "margin"),
    Case("command line", "rerun-data-root", "harness rerun --data-root on generated data",
         lambda d: ["rerun", str(_text_file(d / "seed0.json", json.dumps(_record(d, "swamp")))), "--data-root",
                    str(d), "--out", str(d / "results")], "reads no folder", "leave --data-root out"),
    Case("command line", "slurm-option", "--slurm with a misspelt option",
         args("--launcher", "slurm", "--slurm", "partiton=gpu"), "unknown launcher option 'partiton' in --slurm",
         "valid: account, array_parallelism", "partition"),
    Case("command line", "slurm-value", "--slurm with a value of the wrong type",
         args("--launcher", "slurm", "--slurm", "timeout_min=2h"), "timeout_min must be a whole number",
         "got '2h'"),
    Case("command line", "slurm-data-missing", "--launcher slurm on a grid whose data is missing (nothing submitted)",
         lambda d: run(d, reading(d, {"source": "paired_arrays", "root": "x"}), "--data-root", str(d / "nowhere"),
                       "--launcher", "slurm", "--slurm", "cluster=local", "--wait"),
         "6 file(s) missing", "pass --data-root PATH"),
    # --- data -------------------------------------------------------------------------------------
    Case("data", "arrays-missing", "paired_arrays: a file missing", on_arrays(**{"test_b.npy": None}),
         "1 file(s) missing", "Set dataset.root in the task file or pass --data-root PATH"),
    Case("data", "identity-widths", "method identity on features of different widths (6-d a, 4-d b)",
         lambda d: run(d, reading(d, {"source": "paired_arrays", "root": str(arrays(d))},
                                  methods={"identity": {"method": "identity"}}), "--methods", "identity"),
         "both modalities need the same width, but an a item has 6 values", "cca or a trained method"),
    Case("data", "arrays-ndim", "paired_arrays: features that are a vector, not N x d",
         on_arrays(**{"train_a.npy": np.zeros(40, np.float32)}), "must be N x d with equal N", "(40,)"),
    Case("data", "arrays-rows", "paired_arrays: a and b with different numbers of rows",
         on_arrays(**{"val_b.npy": np.zeros((19, 4), np.float32)}), "must be N x d with equal N", "(19, 4)"),
    Case("data", "arrays-dtype", "paired_arrays: text instead of numbers",
         on_arrays(**{"train_b.npy": np.array([["x"] * 4] * 40)}), "holds <U1 values", "astype(numpy.float32)"),
    Case("data", "arrays-object", "paired_arrays: an array of Python objects",
         on_arrays(**{"train_b.npy": np.array([{"x": 1}] * 40, dtype=object)}), "Python objects in dtype",
         "an array of numbers"),
    Case("data", "arrays-nan", "paired_arrays: NaN features", on_arrays(**{"val_a.npy": NAN}),
         "20 of 20 rows hold NaN or infinite values", "remove or impute those rows"),
    Case("data", "arrays-inf", "paired_arrays: an infinite feature",
         on_arrays(**{"test_b.npy": np.where(np.eye(20, 4) > 0, np.inf, 0).astype(np.float32)}),
         "4 of 20 rows hold NaN or infinite values (as float32; first row 0)", "remove or impute"),
    Case("data", "arrays-overflow", "paired_arrays: float64 values beyond float32's range",
         on_arrays(**{"train_a.npy": np.full((40, 6), 1e300)}), "40 of 40 rows hold NaN or infinite values (as float32",
         "remove or impute"),
    Case("data", "arrays-empty", "paired_arrays: an empty split",
         on_arrays(**{"test_a.npy": np.zeros((0, 6), np.float32), "test_b.npy": np.zeros((0, 4), np.float32),
                      "test_labels.npy": np.zeros(0, np.int64)}), "the test split", "is empty"),
    Case("data", "arrays-labels-length", "paired_arrays: labels of the wrong length",
         on_arrays(**{"train_labels.npy": np.zeros(39, np.int64)}), "train_labels.npy must hold 40 integers", "(39,)"),
    Case("data", "arrays-labels-dtype", "paired_arrays: labels that are not integers",
         on_arrays(**{"val_labels.npy": np.zeros(20)}), "val_labels.npy must hold 20 integers", "float64"),
    Case("data", "arrays-not-npy", "paired_arrays: a .npy file that is not an array",
         on_arrays(**{"train_a.npy": "a,b,c\n1,2,3\n"}), "is not a .npy file", "write it with numpy.save(path, array)"),
    Case("data", "arrays-npz", "paired_arrays: an .npz archive named .npy",
         lambda d: run(d, reading(d, {"source": "paired_arrays", "root": str(_npz_as_npy(d))})),
         "is an .npz archive, not one array", "save each array with numpy.save"),
    Case("data", "arrays-truncated", "paired_arrays: a .npy file cut short (an interrupted copy)",
         on_arrays(**{"val_b.npy": _npy_bytes(np.zeros((20, 4), np.float32))[:200]}), "cannot read",
         "write it again with numpy.save(path, array)"),
    Case("data", "arrays-no-labels", "paired_arrays: class-based metrics without labels",
         on_arrays(**{f"{split}_labels.npy": None for split in ("train", "val", "test")}),
         "asks for class-based metrics but the val split", "set metrics.relevance to [pair]"),
    Case("data", "precomp-missing", "scan_precomp: caption files missing",
         on_precomp(**{"dev_caps.txt": None}),
         "scan_precomp: 1 file(s) missing", "pass --data-root PATH"),
    Case("data", "precomp-utf8", "scan_precomp: captions that are not UTF-8",
         on_precomp(**{"test_caps.txt": b"a photo\n" * 3 + b"caf\xe9 au lait\n" + b"a photo\n" * 21}),
         "test_caps.txt is not UTF-8 text (line 4", "re-save it as UTF-8"),
    Case("data", "precomp-captions", "scan_precomp: fewer captions than 5 per image",
         on_precomp(**{"train_caps.txt": "a photo\n" * 20}), "20 captions for 5 images", "expected 25 (5 per image)"),
    Case("data", "precomp-ims-shape", "scan_precomp: image features without a regions axis",
         on_precomp(**{"dev_ims.npy": np.zeros((5, 8), np.float32)}), "has shape (5, 8); expected a 3-D array",
         "N x regions x features"),
    Case("data", "precomp-env", "scan_precomp: a root naming an unset environment variable",
         lambda d: run(d, reading(d, {"source": "scan_precomp", "root": "${NO_SUCH_VARIABLE_SET}/x"}, TINY_IMAGE_TEXT,
                                  metrics={"folds": [1]})),
         "uses ${NO_SUCH_VARIABLE_SET}, which is not set", "set it or pass --data-root PATH"),
    Case("data", "folders-unreadable", "image_folder: a file that is not an image",
         on_folders(lambda r: (r / "photo" / "cow" / "1.jpg").write_bytes(b"not an image")),
         "1 image file(s) cannot be read", "Remove or replace them"),
    Case("data", "folders-empty-class", "image_folder: a class folder without images",
         on_folders(lambda r: [f.unlink() for f in (r / "sketch" / "door").iterdir()]),
         "1 sketch class folder(s) under", "add images or remove the folders"),
    Case("data", "folders-missing", "image_folder: no photo folder",
         on_folders(photo_dir="photos"), "photo folder", "set dataset.photo_dir or --data-root"),
    Case("data", "folders-pair-metrics", "image_folder: pair-based metrics on class-only (zero-shot) splits",
         lambda d: on_folders()(d) + ["--set", "metrics.relevance=[pair,class]"],
         "pair-based metrics are undefined", "use metrics.relevance: [class]"),
    Case("data", "folders-word-vectors", "image_folder: a word-vector file without some training classes",
         on_folders(lambda r: (r / "word_vectors.txt").write_text("apple 1 2 3 4\n")),
         "has no vector for 1 class(es): door", "add lines 'name v1 … vd' for them"),
    Case("data", "folders-image-size", "image_folder: images smaller than the CNN's pooling needs (12 px, 4 pools)",
         lambda d: on_folders(val_fraction=0.5)(d) + ["--set", "encoders.b.widths=[4,8,16,32]"],
         "halves its input 4 times, so images of 12x12 pixels vanish", "use dataset.image_size >= 16"),
    Case("data", "folders-normalize", "image_folder: an unknown normalisation",
         on_folders(normalize="unit"), "unknown value 'unit'", "valid: imagenet, none"),
    Case("data", "folders-sketch-version", "image_folder: a listed sketch folder lacks some training sketches",
         on_folders(lambda r: __import__("shutil").copytree(r / "sketch", r / "sketch2", ignore=lambda d, f: [
             x for x in f if d.endswith("apple") and x == "1.png"]), sketch_dir=["sketch", "sketch2"]),
         "training sketch(es) of", "every folder in dataset.sketch_dir must hold the same files"),
    Case("data", "folders-vocab-missing", "image_folder: a .npy word-vector array without its vocabulary",
         on_folders(lambda r: np.save(r / "vectors.npy", np.zeros((6, 4), np.float32)), word_vectors="vectors.npy"),
         "is an array of class vectors", "name its rows with dataset.word_vocab"),
    Case("data", "qmul-missing", "qmul_sbir: the .mat files are not in the folder",
         lambda d: run(d, Path(TINY["base"]).parent / "qmul_shoes.yaml", "--data-root", str(d / "empty")),
         "qmul_sbir: 4 file(s) missing", "Set QMUL_SBIR"),
    Case("data", "qmul-pretrained-missing", "qmul_sbir_pretrained: the .mat files are not in the folder",
         lambda d: run(d, Path(TINY["base"]).parent / "qmul_shoes_pretrained.yaml", "--data-root", str(d / "empty")),
         "qmul_sbir_pretrained: 4 file(s) missing", "Set QMUL_SBIR"),
    Case("data", "folders-method-items", "image_folder: a method that cannot read its training triplets (contrastive)",
         lambda d: on_folders(changes={"methods": {"contrastive": {"method": "contrastive"}}}, val_fraction=0.5)(d)
         + ["--methods", "contrastive"],
         "method 'contrastive' cannot train on dataset source 'image_folder'",
         "only doodle2search, doodle2search_swamp (and methods derived from them) read those"),
    Case("data", "folders-one-val-class", "image_folder: one validation class with a class-based train.select",
         on_folders(val_fraction=0.25), "the val split holds items of one class only",
         "raise dataset.val_fraction (now 0.25) so that validation holds at least two classes"),
]
