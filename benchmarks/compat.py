"""The harness as the benchmarks see it: :mod:`harness.api`, or, for a revision that predates it, the same
names gathered from that revision's modules.

The regression gate (``python -m harness bench --against REV``) runs this suite on REV too, so a revision
from before the public API still reports numbers rather than failing to import. Every benchmark module
reaches the harness through ``H`` from here and through nothing else.
"""
from __future__ import annotations

import importlib
from pathlib import Path
from types import SimpleNamespace

import harness

# name -> modules of the flat layout (before harness/ had sub-packages) that defined it
_LEGACY = {
    "ConfigError": ("harness.errors",), "METHODS": ("harness.registry",), "Method": ("harness.method",),
    "PairedData": ("harness.data",), "TaskSpec": ("harness.spec",), "load_task": ("harness.spec",),
    "with_epochs": ("harness.spec",), "Run": ("harness.plan",), "load_data": ("harness.runner",),
    "build_method": ("harness.runner",), "resolve_device": ("harness.runner",), "RunOptions": ("harness.runner",),
    "run_one": ("harness.runner",), "make_optimizer": ("harness.train",), "make_step": ("harness.train",),
    "evaluate": ("harness.evaluate",), "MiB": ("harness.profiling",), "synchronize": ("harness.profiling",),
    "sinkhorn": ("harness.ot",), "pair_relevance": ("harness.metrics",), "precision_metrics": ("harness.metrics",),
    "rank_metrics": ("harness.metrics",), "wrap_forward": ("harness.precision",), "wrap_step": ("harness.precision",),
    "environment": ("harness.results",), "write_json_atomic": ("harness.results",),
}


def _legacy() -> SimpleNamespace:
    """The names of :data:`_LEGACY` that this revision has (a benchmark using a missing one fails alone)."""
    found = {}
    for name, modules in _LEGACY.items():
        for module_name in modules:
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                continue
            if hasattr(module, name):
                found[name] = getattr(module, name)
                break
    return SimpleNamespace(**found)


def from_first(name: str, *modules: str):
    """``name`` from the first of ``modules`` this revision has (a plugin's helper that moved with the
    layout, such as ``word_counts`` of the synthetic_precomp source)."""
    for module_name in modules:
        try:
            return getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(f"none of {', '.join(modules)} defines {name}")


# Ask the measured checkout itself: an editable install of another checkout would otherwise answer an
# import of harness.api that this revision's harness/ cannot.
if (Path(harness.__file__).resolve().parent / "api.py").exists():
    from harness import api as H
else:
    H = _legacy()

__all__ = ["H", "from_first"]
