"""The public API: everything a method, data source or encoder file needs, and what benchmark or
analysis scripts use to build and time the harness's parts. Plugins (``baselines/``,
``harness/sources/``, ``harness/encoders/``) and ``benchmarks/`` import from here and from each
other only; an import-linter contract in ``pyproject.toml`` keeps it so. Names here stay stable;
the modules they come from may move (see CONTRIBUTING.md).

A method in ~30 lines, using nothing else (docs/methods.md has it in full)::

    from dataclasses import dataclass
    from harness.api import METHODS, Method, infonce_loss, require

    @dataclass(frozen=True)
    class Params:
        temperature: float = 0.05

        def check(self, where):
            require(self.temperature > 0, f"{where}.temperature", "must be > 0")

    @METHODS.register("my_infonce")
    class MyInfoNCE(Method):
        Params = Params

        def loss(self, x_a, x_b):
            sims = self.encode("a", x_a) @ self.encode("b", x_b).T
            loss = infonce_loss(sims, self.params.temperature)
            return loss, {"loss": loss.detach()}
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

# --- parameters: every plugin declares a frozen dataclass ``Params``; a field's range is declared beside it with
# bounded(default, ge=..., gt=...), and an optional ``check(where)`` calls require for what spans several fields;
# bounded(..., tune=search(low, high, log=...)) declares where ``harness tune`` searches it (choose, layer_sizes)
from harness.config.params import as_dict, bounded, choose, layer_sizes, require, search
from harness.config.params import parse as parse_params
from harness.config.plan import Run

# --- registries: decorate a class with @METHODS.register("name") (SOURCES, ENCODERS likewise); readers of
# other codes' encoder weights register with @STATE_FORMATS.register("name")
from harness.config.registry import ENCODERS, METHODS, SOURCES, STATE_FORMATS, Registry

# --- building and timing the harness's parts (benchmarks, notebooks): the same code `harness run` uses
from harness.config.spec import (
                             MODALITIES,
                             HNSWSearch,
                             IVFFlatSearch,
                             MetricSpec,
                             TaskSpec,
                             TestSpec,
                             load_task,
                             with_epochs,
)
from harness.data import npy
from harness.data.images import (
                             IMAGENET_MEAN,
                             IMAGENET_STD,
                             ImageChoices,
                             ImageFiles,
                             ImageTensor,
                             RandomImages,
                             SemanticTriplets,
                             check_readable,
                             image_transform,
)

# --- data: what a source returns, and helpers for the on-disk formats the shipped sources read
from harness.data.paired import (
                             SPLITS,
                             ArrayRows,
                             PairedData,
                             Split,
                             concat,
                             expand_root,
                             require_files,
                             standardize,
                             standardize_splits,
                             take,
)
from harness.data.text import END, SPECIALS, START, TokenCaptions, cached_vocab, encode_captions, read_lines, tokenize
from harness.data.videotext import (
                             HOWTO100M_PUBLISHED,
                             POOLS,
                             assemble,
                             caption_owner,
                             check_files,
                             holdout,
                             howto_parts,
                             howto_video,
                             pool_frames,
                             read_feature_dict,
                             read_pickle,
                             stack_videos,
                             unit_rows,
)
from harness.data.word_vectors import class_vectors
from harness.data.words import CaptionDraw, PaddedCaptions, WordsFields, split_words

# --- errors: ConfigError/DataError for bad settings or data (exit 2), RunError while running (exit 3)
from harness.errors import ConfigError, DataError, NotApplicable, RunError, did_you_mean, unknown

# --- the method interface and the parts methods share
from harness.method import Method
from harness.ops.losses import (
                             LOSSES,
                             collapsed_value,
                             infonce_loss,
                             max_violation_loss,
                             plateau_key,
                             siglip_loss,
                             sum_violation_loss,
)
from harness.ops.metrics import pair_relevance, precision_metrics, query_ranks, rank_metrics
from harness.ops.native import unavailable as native_sinkhorn_unavailable
from harness.ops.ot import compile_seconds as sinkhorn_compile_seconds
from harness.ops.ot import fused_sinkhorn, fused_sinkhorn_pair, log_softmax_nograd, sinkhorn
from harness.ops.precision import wrap_forward, wrap_step
from harness.ops.queue import EmbeddingQueue, chunk_bounds
from harness.ops.streaming import Relevance, StreamRanker
from harness.ops.streaming import stream as stream_blocks
from harness.run.build import build_method, resolve_device
from harness.run.distributed import gather_rows, global_batch_sum, is_distributed, rank_and_world
from harness.run.evaluate import DEFAULT_BLOCKS, BlockClock, evaluate, make_folds, stream_folds
from harness.run.floor import FeatureCosine
from harness.run.profiling import CpuPeakRSS, Profiler, synchronize
from harness.run.runner import RunOptions, load_data, run_one
from harness.run.search import run_search
from harness.run.train import make_optimizer, make_step
from harness.store.io import write_json_atomic
from harness.store.provenance import MiB, environment

# --- the library behind the command line (docs/architecture.md, "The library"): each subcommand's work as a function
# of typed options, for scripts and notebooks; imported on first use, so that a plugin's import stays light
_LIBRARY = {
    "Grid": ("harness.run.jobs", "Grid"), "Selection": ("harness.run.commands", "Selection"),
    "plan_runs": ("harness.run.commands", "plan_runs"), "run_planned": ("harness.run.commands", "run_planned"),
    "run_task": ("harness.run.commands", "run_task"), "rerun_files": ("harness.run.commands", "rerun_files"),
    "list_tasks": ("harness.config.catalog", "tasks"), "list_components": ("harness.config.catalog", "components"),
    "folder_tables": ("harness.report.folders", "tables"),
    "compare_folders": ("harness.report.compare", "compare_folders"),
    "plot_sweep": ("harness.report.plot", "plot_sweep"), "grid_status": ("harness.report.status", "status"),
    "evaluate_ensemble": ("harness.analysis.ensemble", "evaluate_ensemble"),
    "reproduce_evidence": ("harness.remake.evidence", "reproduce_evidence"),
    "TuneOptions": ("harness.tune.options", "TuneOptions"), "tune_methods": ("harness.tune.command", "tune"),
    "SetOptions": ("harness.tune.options", "SetOptions"), "make_sets": ("harness.tune.reference_sets", "make_sets"),
    "TableOptions": ("harness.report.reference_table", "Options"),
    "reference_table": ("harness.report.reference_table", "table"),
    "ClaimsOptions": ("harness.report.claims", "Options"), "judge_claims": ("harness.report.claims", "main"),
    "ReadmeOptions": ("harness.report.readme", "Options"), "write_readme": ("harness.report.readme", "main"),
    "SiteOptions": ("harness.report.site", "SiteOptions"), "write_site": ("harness.report.site", "write_site"),
    "ClusterOptions": ("harness.analysis.clusters", "ClusterOptions"),
    "report_clusters": ("harness.analysis.clusters", "report_clusters"),
    "ReferenceOptions": ("harness.remake.reference", "ReferenceOptions"),
    "reproduce_reference": ("harness.remake.reference", "reproduce_reference"),
    "carry_changes": ("harness.remake.carry", "carry"),
}


if TYPE_CHECKING:  # the same names for type checkers and linters; at run time __getattr__ imports them
    from harness.analysis.clusters import ClusterOptions, report_clusters
    from harness.analysis.ensemble import evaluate_ensemble
    from harness.config.catalog import components as list_components
    from harness.config.catalog import tasks as list_tasks
    from harness.remake.carry import carry as carry_changes
    from harness.remake.evidence import reproduce_evidence
    from harness.remake.reference import ReferenceOptions, reproduce_reference
    from harness.report.claims import Options as ClaimsOptions
    from harness.report.claims import main as judge_claims
    from harness.report.compare import compare_folders
    from harness.report.folders import tables as folder_tables
    from harness.report.plot import plot_sweep
    from harness.report.readme import Options as ReadmeOptions
    from harness.report.readme import main as write_readme
    from harness.report.reference_table import Options as TableOptions
    from harness.report.reference_table import table as reference_table
    from harness.report.site import SiteOptions, write_site
    from harness.report.status import status as grid_status
    from harness.run.commands import Selection, plan_runs, rerun_files, run_planned, run_task
    from harness.run.jobs import Grid
    from harness.tune.command import tune as tune_methods
    from harness.tune.options import SetOptions, TuneOptions
    from harness.tune.reference_sets import make_sets


def __getattr__(name: str) -> Any:
    """A name of the library (:data:`_LIBRARY`), imported when first asked for."""
    if name not in _LIBRARY:
        raise AttributeError(f"module 'harness.api' has no attribute {name!r}")
    import importlib

    module, attribute = _LIBRARY[name]
    return getattr(importlib.import_module(module), attribute)


__all__ = [
    "ConfigError", "DataError", "NotApplicable", "RunError", "did_you_mean", "unknown",
    "ENCODERS", "METHODS", "SOURCES", "STATE_FORMATS", "Registry",
    "as_dict", "bounded", "choose", "layer_sizes", "parse_params", "require", "search",
    "Method", "FeatureCosine", "EmbeddingQueue", "chunk_bounds",
    "LOSSES", "collapsed_value", "infonce_loss", "max_violation_loss", "plateau_key", "siglip_loss",
    "sum_violation_loss",
    "fused_sinkhorn", "fused_sinkhorn_pair", "log_softmax_nograd", "native_sinkhorn_unavailable", "sinkhorn",
    "sinkhorn_compile_seconds",
    "gather_rows", "global_batch_sum", "is_distributed", "rank_and_world",
    "SPLITS", "ArrayRows", "PairedData", "Split", "concat", "expand_root", "require_files", "standardize",
    "standardize_splits", "take", "npy",
    "IMAGENET_MEAN", "IMAGENET_STD", "ImageChoices", "ImageFiles", "ImageTensor", "RandomImages", "SemanticTriplets",
    "check_readable",
    "image_transform", "END", "SPECIALS", "START", "TokenCaptions", "cached_vocab", "encode_captions", "read_lines",
    "tokenize", "CaptionDraw", "PaddedCaptions", "WordsFields", "split_words", "HOWTO100M_PUBLISHED", "POOLS",
    "assemble", "caption_owner", "check_files", "holdout", "howto_parts", "howto_video", "pool_frames",
    "read_feature_dict", "read_pickle", "stack_videos", "unit_rows", "class_vectors",
    "MODALITIES", "TaskSpec", "load_task", "with_epochs", "Run", "pair_relevance", "precision_metrics",
    "rank_metrics", "wrap_forward", "wrap_step", "build_method", "resolve_device", "evaluate", "MiB", "synchronize",
    "RunOptions", "load_data", "run_one", "make_optimizer", "make_step", "write_json_atomic", "environment",
    # the test paths and what measures them (benchmarks/scaling.py)
    "MetricSpec", "TestSpec", "HNSWSearch", "IVFFlatSearch", "query_ranks", "Relevance", "StreamRanker",
    "stream_blocks", "DEFAULT_BLOCKS", "BlockClock", "make_folds", "stream_folds", "CpuPeakRSS", "Profiler",
    "run_search",
    # the library behind the command line
    "Grid", "Selection", "plan_runs", "run_planned", "run_task", "rerun_files", "list_tasks", "list_components",
    "folder_tables", "compare_folders", "plot_sweep", "grid_status", "evaluate_ensemble", "reproduce_evidence",
    "TuneOptions", "tune_methods", "SetOptions", "make_sets", "TableOptions", "reference_table", "ClaimsOptions",
    "judge_claims", "ReadmeOptions", "write_readme", "SiteOptions", "write_site", "ClusterOptions", "report_clusters",
    "ReferenceOptions", "reproduce_reference", "carry_changes",
]
