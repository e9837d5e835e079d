"""Would the pruned trials have won? Every trial the median pruner stopped in a committed study, trained to its last
epoch at the settings it was stopped with, and its validation value set beside the best value among the trials the
pruner kept: what pruning did to each method's study (docs/reference-table.md, "Pruning").

    python -m harness.cli.audit tasks/own_features_labels.yaml --data-root OWN/quickdraw_halves \\
        --out results/tuning/quickdraw_halves --methods contrastive,swamp --json results/tuning/prune_audit.json

``--out`` is the folder the studies' ``harness tune`` command wrote (its ``<task>/_tune/studies.db`` and the tuned
result files, whose ``tuning.study`` names each method's study). The trials train as the study's did (its seed, the
validation split only, no test split), with ``--threads`` torch threads (default 1). Writes every trial's value to
``--json`` and prints one row per method: trials pruned, how many of them end above the best kept trial, and the best
of them.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import optuna
import torch
from optuna.study import StudyDirection
from optuna.trial import TrialState

from harness.config.plan import Run
from harness.report.formats import format_table
from harness.run import runner
from harness.store.schema import load_results
from harness.tune import command
from harness.tune.options import TuneOptions
from harness.tune.record import best_settings, final_overrides
from harness.tune.storage import recorded_storage, storage_of
from harness.tune.trial import without_test


def audit(task: str, out: str | Path, methods: str, data_root: str | None = None, threads: int = 1,
          scratch: str | Path = "/tmp/prune-audit") -> dict[str, Any]:
    """Every pruned trial of each method's committed study (``out``: the folder the studies' ``harness tune`` wrote)
    trained to its last epoch, beside the best kept trial; by method.

        audit("tasks/own_features_labels.yaml", "results/tuning/wikipedia", "contrastive,swamp", "OWN/wikipedia")
    """
    torch.set_num_threads(threads)
    setup = TuneOptions(task=task, methods=tuple(m for m in methods.split(",") if m), data_root=data_root,
                        out=Path(out))
    found = {s.method: s for s in command.setup(setup)}
    tuned = {r["run_name"].split("@")[0]: r for r in load_results(Path(out)) if r.get("tuning")}
    data = without_test(runner.load_data(next(iter(found.values())).spec()))
    opts = runner.RunOptions(device=torch.device("cpu"), out=Path(scratch), progress=False)
    result: dict[str, Any] = {}
    for method, s in found.items():
        record = tuned[method]["tuning"]
        folder = Path(tuned[method]["_path"]).parent
        storage = storage_of(recorded_storage(record["storage"], folder))
        stored = optuna.load_study(study_name=record["study"], storage=storage)
        kept = [t for t in stored.get_trials(deepcopy=False) if t.state == TrialState.COMPLETE]
        best_kept = float(stored.best_value)  # Optuna's best complete trial, in the study's own direction
        maximize = stored.direction == StudyDirection.MAXIMIZE
        dims = s.dims()
        select = s.spec().methods[method].train.select
        rows = []
        for t in stored.get_trials(deepcopy=False, states=(TrialState.PRUNED,)):
            settings = best_settings(t, dims)
            spec = s.spec(final_overrides(s, settings, dims))
            run = Run(spec, method, f"{method}@audit-{t.number}", settings, s.seed)
            start = time.perf_counter()
            trained = runner.train(run, data, opts)
            assert trained is not None  # one process: rank 0
            value = float(trained.val_at_best[select])
            beats = value > best_kept if maximize else value < best_kept
            last = max(t.intermediate_values) if t.intermediate_values else 0
            rows.append({"trial": t.number, "pruned_at_epoch": last,
                         "value_when_pruned": t.intermediate_values.get(last),
                         "value_at_the_end": value, "beats_best_kept": bool(beats),
                         "seconds": round(time.perf_counter() - start, 1)})
            print(f"{method} trial {t.number}: pruned at epoch {last}, {value:.2f} at the end "
                  f"({'beats' if beats else 'below'} the best kept {best_kept:.2f})", flush=True)
        result[method] = {"study": record["study"], "metric": select, "best_kept": best_kept, "kept": len(kept),
                          "pruned": rows}
    return result


def table(found: dict[str, Any]) -> str:
    """One row per method: trials pruned, kept, the best kept value, how many pruned ones end above it, and the best
    of them at the end.

        print(table(audit("tasks/own_features_labels.yaml", "results/tuning/wikipedia", "contrastive,swamp")))
    """
    rows = [[m, f["metric"], len(f["pruned"]), f["kept"], f"{f['best_kept']:.2f}",
             sum(r["beats_best_kept"] for r in f["pruned"]),
             f"{max((r['value_at_the_end'] for r in f['pruned']), default=float('nan')):.2f}"]
            for m, f in found.items()]
    return format_table(["method", "metric", "pruned", "kept", "best kept", "pruned that beat it",
                         "best pruned at the end"], rows, [], "simple")


def write(found: dict[str, Any], path: Path, command: dict[str, Any]) -> None:
    """Every trial's value, with the ``command`` that measured them, as JSON at ``path``.

        write(found, Path("results/tuning/prune_audit.json"), {"task": "tasks/own_features_labels.yaml", ...})
    """
    path.write_text(json.dumps({"command": command, "methods": found}, indent=2) + "\n")
