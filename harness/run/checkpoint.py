"""Checkpoints beside each result file.

- ``seed<k>.pt``: the best epoch's ``method.state_dict()`` (encoders, prototypes, queue),
  kept with the result so trained models can be inspected later.
- ``seed<k>.resume.pt``: everything needed to continue an interrupted run after its last
  complete epoch: model, optimizer, scheduler, the batch-order generator and the global RNG
  states, the history and the best-so-far state. Written atomically at the end of every epoch
  and removed once the result file exists, so a run killed at any point (SIGKILL included)
  resumes from its last complete epoch and ends with the same metrics.
"""
from __future__ import annotations

import json
import pickle
import random
import re
from pathlib import Path
from typing import Any, Mapping

import torch

from harness.config.registry import STATE_FORMATS
from harness.errors import ConfigError
from harness.method import Method
from harness.run.train import FitResult
from harness.store.io import save_checkpoint
from harness.store.schema import read_result


def resume_path(result: Path) -> Path:
    """results/<task>/<run>/seed<k>.json -> .../seed<k>.resume.pt"""
    return result.with_suffix(".resume.pt")


def _rng_states() -> dict[str, Any]:
    states: dict[str, Any] = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def _set_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    random.setstate(states["python"])
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])


def save_resume(path: Path, fingerprint: dict[str, Any], method: Method, optimizer: torch.optim.Optimizer,
                scheduler: Any, fit: FitResult, generator: torch.Generator) -> None:
    """Atomically write the state after the last complete epoch."""
    save_checkpoint({
        "fingerprint": json.dumps(fingerprint, sort_keys=True, default=str),
        "method": method.state_dict(), "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "fit": {"best_epoch": fit.best_epoch, "best_score": fit.best_score, "best_state": fit.best_state,
                "history": fit.history, "untrained": fit.untrained},
        "generator": generator.get_state(), "rng": _rng_states(),
    }, path)


def load_resume(path: Path, fingerprint: dict[str, Any], method: Method, optimizer: torch.optim.Optimizer,
                scheduler: Any) -> tuple[FitResult, torch.Generator]:
    """Restore what :func:`save_resume` wrote into ``method``, ``optimizer`` and ``scheduler``; return
    the fit state and batch-order generator. A checkpoint of other settings is refused."""
    state = torch.load(path, map_location="cpu", weights_only=True)
    if state["fingerprint"] != json.dumps(fingerprint, sort_keys=True, default=str):
        raise ConfigError(f"{path} belongs to an interrupted run with other settings or code; "
                          "pass --force to start this run afresh (the file is then replaced)")
    method.load_state_dict(state["method"])
    optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    generator = torch.Generator()
    generator.set_state(state["generator"])
    _set_rng_states(state["rng"])
    return FitResult(**state["fit"]), generator


def checkpoint_of(path: Path) -> Path:
    """The model checkpoint named by a result file, or ``path`` itself when it is a checkpoint."""
    if not path.exists():
        raise ConfigError(f"{path} does not exist; pass a result file (seed<k>.json) or its checkpoint (seed<k>.pt)")
    if path.suffix == ".json":
        name = read_result(path).get("checkpoint")
        if not name:
            raise ConfigError(f"{path} names no checkpoint")
        ckpt: Path = path.parent / name
        if not ckpt.exists():
            raise ConfigError(f"{path} names the checkpoint {ckpt}, which is missing; checkpoints are written by "
                              "`python -m harness run` beside the result file")
        return ckpt
    return path


def init_label(path: Path) -> str:
    """How an initialisation is named in run folders: the source run's folder name for one of our runs
    (``seed<k>.json`` / ``seed<k>.pt``), the file's stem for any other state dict."""
    return path.parent.name if re.fullmatch(r"seed\d+\.(json|pt)", path.name) else path.stem


def read_state(path: Path) -> dict[str, torch.Tensor]:
    """A flat state dict (parameter name -> tensor) from a torch file."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as err:
        raise ConfigError(f"--init {path}: cannot read it as a torch state dict: {err}") from err
    if not isinstance(state, Mapping) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ConfigError(f"--init {path} must hold a flat state dict (parameter name -> tensor)")
    return dict(state)


def encoder_state(state: Mapping[str, torch.Tensor], method: Method, path: Path) -> tuple[dict[str, torch.Tensor], str]:
    """The state's encoder weights under this harness's names, and the format they were found in."""
    if any(k.startswith("encoders.") for k in state):
        return dict(state), "harness"
    for name, translate in STATE_FORMATS.items():
        found = translate(state, method.encoders)
        if found is not None:
            return found, name
    raise ConfigError(f"--init {path}: no encoder weights found; expected keys 'encoders.<a|b>.<parameter>' (this "
                      f"harness's state dicts) or one of the formats {STATE_FORMATS.names()}; found e.g. "
                      f"{list(state)[:3]}")


def load_encoders(method: Method, path: Path) -> list[str]:
    """Copy the encoder weights of a checkpoint, result file or state dict into ``method`` (everything else
    stays as built); return the copied keys. Frozen parameters (fixed weights that come with the data, such
    as word2vec vectors) keep the data's values and need not be in the file. A missing or differently
    shaped trainable encoder weight is an error."""
    state, kind = encoder_state(read_state(checkpoint_of(path)), method, path)
    frozen = {f"encoders.{n}" for n, p in method.encoders.named_parameters() if not p.requires_grad}
    own = {k: v for k, v in method.state_dict().items() if k.startswith("encoders.") and k not in frozen}
    missing = [k for k in own if k not in state]
    wrong = [f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}" for k, v in own.items()
             if k in state and state[k].shape != v.shape]
    if missing or wrong:
        hint = ("; HowTo100M's model holds no word table (it reads word2vec vectors): set dataset.word_vectors"
                if kind == "howto100m" and any(k.endswith(".embed.weight") for k in missing) else "")
        raise ConfigError(f"--init {path}: its encoders do not match this task's "
                          f"(missing: {missing[:3]}, shape mismatch: {wrong[:3]}){hint}; initialise from a run of "
                          "the same task with the same encoders, or a state dict with these keys and shapes")
    method.load_state_dict({k: state[k] for k in own}, strict=False)
    return list(own)
