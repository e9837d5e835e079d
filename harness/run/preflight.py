"""What is checked after a command is read and before anything trains or is written: the results
folders can be written, the environment's kernel settings are known, the data fits the task's metrics,
and every planned method can be built.

Each check raises :class:`harness.errors.ConfigError` (exit status 2) naming the problem and the fix.
"""
from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any, Iterable

import torch

from harness.config.registry import METHODS, SOURCES
from harness.config.spec import DIRECTIONS, MetricSpec, TaskSpec
from harness.data.paired import SPLITS, PairedData, Split
from harness.errors import ConfigError, DataError, NotApplicable
from harness.ops import native, ot, precision
from harness.run import guards, search
from harness.run.build import build_method, settled_params
from harness.store import provenance


def _nearest_existing(path: Path) -> Path:
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def check_out(out: Path, folders: Iterable[Path] = ()) -> None:
    """``out`` and the run ``folders`` under it must be, or be creatable inside, writable folders.
    Nothing is created: the nearest existing folder above each is inspected."""
    for folder in (out, *folders):
        node = _nearest_existing(folder)
        if not node.is_dir():
            raise ConfigError(f"--out {out}: {node} is a file, not a folder; pass --out with a folder")
        if not os.access(node, os.W_OK | os.X_OK):
            read_only = bool(os.statvfs(node).f_flag & os.ST_RDONLY)
            reason = "it is on a read-only file system" if read_only else "permission denied"
            raise ConfigError(f"--out {out}: cannot write into {node} ({reason}); pass --out with a writable folder")


def check_environment() -> None:
    """The environment settings of the Sinkhorn kernels (``SWAMP_BENCH_SINKHORN_COMPILE``,
    ``SWAMP_BENCH_SINKHORN_NATIVE``) name values they know."""
    ot.resolve_compile("auto")
    native.setting()


def check_data(spec: TaskSpec, data: PairedData) -> None:
    """Every split holds items (the training split pairs; validation and test splits may be class-only),
    the fold protocols divide the validation and test splits, pair-based metrics find a pairing,
    class-based metrics find labels, and a class-based selection metric finds more than one class to
    tell apart in validation."""
    for name in SPLITS:
        split = data[name]
        if len(split.a) == 0 or len(split.b) == 0 or (split.paired or name == "train") and split.n_pairs == 0:
            raise DataError(f"{spec.path}: the {name} split of dataset {spec.dataset.kind!r} is empty "
                            f"({len(split.a)} a-items, {split.n_pairs} pairs); check dataset.root and the split files")
    for name in ("val", "test"):
        check_pairing(data[name], spec.metrics, f"{spec.path}: {name} split")
        n_items = len(data[name].a)
        bad = [n for n in spec.metrics.folds if n_items % n]
        if bad:
            raise ConfigError(f"{spec.path}: metrics.folds {bad} do not divide the {n_items} a-items of the "
                              f"{name} split into equal folds; use divisors of {n_items}")
        if "class" in spec.metrics.relevance and not data[name].has_labels:
            raise DataError(f"{spec.path}: metrics.relevance asks for class-based metrics but the {name} split of "
                            f"{spec.dataset.kind!r} has no labels; add labels to the data or set "
                            "metrics.relevance to [pair]")
    check_selection_classes(spec, data)
    search.check(spec, data["test"])


def check_selection_classes(spec: TaskSpec, data: PairedData) -> None:
    """A class-based selection metric (``train.select`` with ``class_``) on a validation split whose items all
    share one class is perfect at every epoch (every gallery item is relevant: class mAP 100.00), so it would
    select the first epoch silently: ConfigError naming the class and the fix."""
    selects = list(dict.fromkeys(m.train.select for m in spec.methods.values() if "class_" in m.train.select))
    val = data["val"]
    if not selects or not val.has_labels:
        return
    classes = torch.unique(torch.cat([torch.as_tensor(labels).flatten() for labels in (val.labels_a, val.labels_b)]))
    if len(classes) != 1:
        return
    names = (data.info.get("classes") or {}).get("val") if isinstance(data.info.get("classes"), dict) else None
    shown = repr(names[0]) if isinstance(names, (list, tuple)) and len(names) == 1 else f"label {int(classes[0])}"
    if "val_fraction" in {f.name for f in dataclasses.fields(spec.dataset.params)}:
        fix = (f"raise dataset.val_fraction (now {spec.dataset.params.val_fraction}) so that validation holds "
               "at least two classes")
    else:
        fix = "give the dataset a validation split with items of at least two classes"
    pair = [n for n in spec.metrics.names() if "class_" not in n and not n.endswith("rsum")]
    if pair and val.paired:
        fix += f", or select on a pair-based metric (train.select: {pair[0]})"
    raise ConfigError(f"{spec.path}: the val split holds items of one class only ({shown}), so the class-based "
                      f"selection metric {', '.join(selects)} (train.select) is perfect at every epoch (every item "
                      f"is relevant) and selects nothing; {fix}")


def check_pairing(split: Split, metrics: MetricSpec, where: str) -> None:
    """A class-only split (``paired=False``: zero-shot sketch -> photo) supports neither pair-based metrics
    nor folds, which follow the pairing."""
    if split.paired:
        return
    if "pair" in metrics.relevance:
        raise ConfigError(f"{where}: the split has no sketch↔photo (a↔b) pairing, only classes, so pair-based "
                          "metrics are undefined; use metrics.relevance: [class]")
    if tuple(metrics.folds) != (1,):
        raise ConfigError(f"{where}: a split without pairing cannot be cut into folds; use metrics.folds: [1]")


def check_builds(runs: Iterable[Any], data: PairedData) -> None:
    """Build every planned (task settings, method) on the meta device, which allocates and computes
    nothing, so that encoders that do not fit the data or each other stop the command before the
    first run trains."""
    seen: set[tuple[int, str]] = set()
    with torch.device("meta"):
        for run in runs:
            if (id(run.spec), run.method) not in seen:
                seen.add((id(run.spec), run.method))
                check_reads_items(run.spec, run.method)
                try:
                    built = build_method(run.spec, run.method, data, torch.device("meta"))
                except (RuntimeError, TypeError, ValueError, OverflowError) as err:
                    if not guards.is_oom(err):
                        raise
                    # on the meta device nothing is allocated: only sizes no allocator can count get here
                    raise ConfigError(f"{run.spec.path}: methods.{run.method}: the model cannot be built at these "
                                      f"sizes ({str(err).splitlines()[0]}); lower the encoders' dim and widths or the "
                                      "method's sizes") from None
                if run.spec.test.path == "stream" and not built.scores_in_blocks:
                    raise ConfigError(f"{run.spec.path}: test.path stream: methods.{run.method} "
                                      f"({type(built).__name__}) cannot score in blocks (its scorer needs the whole "
                                      "score matrix); use test.path auto or full")


def refusals(runs: Iterable[Any], data: PairedData) -> dict[str, ConfigError]:
    """Why each planned run's method cannot run on ``data``, by run folder: a model that cannot be built for it
    (:func:`check_builds`: ``identity`` on modalities of two widths, encoders that do not fit) or settings with
    which the run could mean nothing (:func:`fit_warnings`: SwAMP's K above the training pairs). A refusal
    concerns that method alone: the command runs the others and names it at the end (a method that cannot apply
    to such data at all, :class:`harness.errors.NotApplicable`, is only noted)."""
    out: dict[str, ConfigError] = {}
    for run in runs:
        if run.run_name in out:
            continue
        try:
            check_builds([run], data)
            fit_warnings(run.spec, run.method, data)
        except DataError:
            raise  # the data, not one method, is at fault
        except ConfigError as err:
            out[run.run_name] = err
    return out


def check_reads_items(spec: TaskSpec, name: str) -> None:
    """A data source whose training items have a structure only some methods read declares them: its
    ``training_methods`` (registered names; classes derived from them read the items too) and, in words, its
    ``training_items``. Another method would get that structure where its encoders expect a batch of inputs
    (a CNN handed a tuple), so it is refused before anything trains, as :class:`NotApplicable`."""
    source = SOURCES.get(spec.dataset.kind)
    readers = getattr(source, "training_methods", None)
    m = spec.methods[name]
    if readers is None or m.method in readers:
        return
    if any(issubclass(METHODS.get(m.method), METHODS.get(r)) for r in readers if r in METHODS.names()):
        return
    raise NotApplicable(f"{spec.path}: methods.{name}: method {m.method!r} cannot train on dataset source "
                        f"{spec.dataset.kind!r}, whose training items are {source.training_items}; only "
                        f"{', '.join(readers)} (and methods derived from them) read those: run one of them "
                        "on this source")


def fit_warnings(spec: TaskSpec, name: str, data: PairedData) -> list[str]:
    """One line for each setting of method ``name`` that does not fit ``data``: a batch larger than the
    training set, a k of ``metrics.ks`` that reaches the number of items a test query ranks, and what the
    method itself checks (:meth:`harness.method.Method.fit_warnings`: SwAMP's K and queue). Settings with
    which the run could not mean anything raise ConfigError instead, except on data marked ``timing_only``
    (random data in a real dataset's shapes), where accuracy means nothing anyway and they are warnings."""
    m = spec.methods[name]
    where = f"{spec.path}: methods.{name}"
    n_pairs, batch = data["train"].n_pairs, m.train.batch_size
    lines = []
    if batch > n_pairs:
        lines.append(f"{where}: train.batch_size = {batch} exceeds the {n_pairs} training pairs: every epoch is "
                     f"one step on all of them ({m.train.epochs} steps in all); set train.batch_size below "
                     f"{n_pairs}, e.g. {max(2, n_pairs // 4)}")
    try:
        params = settled_params(spec, name, data)
        lines += [f"{where}: {line}" for line in METHODS.get(m.method).fit_warnings(params, n_pairs, batch)]
    except ConfigError as err:
        if not data.info.get("timing_only"):
            raise ConfigError(f"{where}: {err}") from None
        # random data in a real dataset's shapes measures time only, at the real settings (a smoke run shrinks
        # the data, not K): what would stop an accuracy run is said, and the run goes on
        lines.append(f"{where}: {err} (random data, timing only: the run goes on)")
    if "test" not in data.splits:  # a tuning trial's data: no test split to rank
        return lines
    test = data["test"]
    for n_folds in spec.metrics.folds:
        for direction in spec.metrics.directions:
            gallery = (len(test.a) if DIRECTIONS[direction] else len(test.b)) // n_folds
            big = [k for k in spec.metrics.ks if k >= gallery]
            if big:
                fold = "" if n_folds == 1 else f" within each of {n_folds} folds"
                fits = [k for k in spec.metrics.ks if k < gallery] or [1]
                lines.append(f"{spec.path}: metrics.ks {big}: a {direction} query ranks {gallery} test items{fold}, "
                             f"so R@{big[0]} and above are 100% for any method; use ks below {gallery}, e.g. {fits}")
    return lines


def check_fit(runs: Iterable[Any], data: PairedData) -> None:
    """Print the :func:`fit_warnings` of every planned (task settings, method) once, as one line each, before
    anything trains; a setting that is an error stops the command before any warning is printed, so bad input
    still gets one line. The runs record the warnings in their result files."""
    seen: set[tuple[int, str]] = set()
    lines: list[str] = []
    for run in runs:
        if (id(run.spec), run.method) not in seen:
            seen.add((id(run.spec), run.method))
            lines += fit_warnings(run.spec, run.method, data)
    for line in dict.fromkeys(lines):
        print(f"warning: {line}", file=sys.stderr)


def check_precision(runs: Iterable[Any], device: torch.device, setting: str = precision.FP32_SETTING) -> None:
    """Print one ``warning:`` line for each precision of the planned runs that this machine's CPU, when it is the
    device, would emulate (:func:`harness.ops.precision.cpu_warning`: bf16 without avx512_bf16 or amx_bf16), before
    anything trains; ``setting`` says how to ask for fp32. It concerns the machine, not the settings: the result
    files do not record it."""
    if device.type != "cpu":
        return
    asked = dict.fromkeys(run.spec.methods[run.method].train.precision for run in runs)
    cpu, flags = provenance.cpu_model(), provenance.cpu_flags()
    for name in asked:
        line = precision.cpu_warning(name, device.type, cpu, flags, setting)
        if line is not None:
            print(f"warning: {line}", file=sys.stderr)
