"""Rebuild a trained method from what a run left behind: its result file's resolved ``config``
and its best-epoch checkpoint (no task YAML needed)."""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import torch

from harness.config import params as P
from harness.config.plan import with_legacy_defaults
from harness.config.registry import METHODS, SOURCES
from harness.config.spec import TrainSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError
from harness.method import Method
from harness.run.build import build_from_config, component
from harness.run.checkpoint import checkpoint_of
from harness.store.schema import read_result


def run_files(target: Path) -> tuple[Path, Path]:
    """(result file, checkpoint) of a run given either ``seed<k>.json`` or ``seed<k>.pt``."""
    if target.suffix not in (".json", ".pt"):
        raise ConfigError(f"{target}: expected a result file (seed<k>.json) or its checkpoint (seed<k>.pt)")
    if not target.exists():
        raise ConfigError(f"{target} does not exist; pass a result file results/<task>/<run>/seed<k>.json "
                          "or its checkpoint seed<k>.pt")
    result = target.with_suffix(".json")
    if not result.exists():
        raise ConfigError(f"result file {result} of checkpoint {target} does not exist; the model is rebuilt "
                          "from the configuration it holds")
    return result, checkpoint_of(target)


def train_settings(result: dict[str, Any], where: str) -> TrainSpec:
    """The training settings a result file records, with today's defaults for settings it predates."""
    train = (result.get("config") or {}).get("train")
    if not isinstance(train, dict):
        raise ConfigError(f"{where} is not a result file of `python -m harness run` (no config.train)")
    known = {k: v for k, v in train.items() if k in P.keys(TrainSpec)}
    return P.parse(TrainSpec, known, f"{where}: config.train")


def method_config(result: dict[str, Any], where: str) -> dict[str, Any]:
    """The resolved configuration stored in a result file, checked for the parts a rebuild needs."""
    config = result.get("config")
    if not isinstance(config, dict) or not all(k in config for k in ("dataset", "encoders", "method")):
        raise ConfigError(f"{where} holds no resolved configuration (config.dataset/encoders/method)")
    return config


def restore_run(target: str | Path, device: torch.device, data_root: str | None = None,
                data: PairedData | None = None) -> tuple[Method, PairedData, dict[str, Any]]:
    """Rebuild a trained method from its result file's ``config`` and load its best-epoch checkpoint.

    ``target`` is ``seed<k>.json`` or ``seed<k>.pt``; the data are loaded through the registered source
    (``data_root`` replaces ``dataset.root``) unless ``data``, already loaded, is given. Returns (method in
    eval mode on ``device``, data, result)."""
    result_file, checkpoint = run_files(Path(target))
    result = read_result(result_file)
    config = method_config(result, str(result_file))
    dataset = dict(config["dataset"], **({"root": data_root} if data_root else {}))
    source, source_params = component(SOURCES, dataset, "source", f"{result_file}: config.dataset")
    if "method" in config["method"]:  # settings added since the file was written get their old values
        params_now = P.as_dict(METHODS.get(config["method"]["method"], f"{result_file}: config.method").Params())
        config = with_legacy_defaults(config, {"method": params_now})
    data = data if data is not None else source.load(source_params)
    method = build_from_config(config, data, device, str(result_file))
    try:
        state = torch.load(checkpoint, map_location=device, weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as err:
        raise ConfigError(f"cannot read checkpoint {checkpoint}: {err}") from err
    try:
        method.load_state_dict(state)
    except (RuntimeError, KeyError, TypeError) as err:
        raise ConfigError(f"checkpoint {checkpoint} does not fit the model its result file describes: {err}") from err
    return method.eval(), data, result
