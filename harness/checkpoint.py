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
import random
from pathlib import Path
from typing import Any

import torch

from harness.errors import ConfigError
from harness.method import Method
from harness.results import save_checkpoint
from harness.train import FitResult


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
                "history": fit.history},
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
        try:
            name = json.loads(path.read_text()).get("checkpoint")
        except (OSError, json.JSONDecodeError) as err:
            raise ConfigError(f"cannot read result file {path}: {err}") from err
        if not name:
            raise ConfigError(f"{path} names no checkpoint")
        ckpt = path.parent / name
        if not ckpt.exists():
            raise ConfigError(f"{path} names the checkpoint {ckpt}, which is missing; checkpoints are written by "
                              "`python -m harness run` beside the result file")
        return ckpt
    return path


def init_label(path: Path) -> str:
    """How an initialisation is named in run folders: the source run's folder name."""
    return path.parent.name


def load_encoders(method: Method, path: Path) -> list[str]:
    """Copy the encoder weights of a checkpoint into ``method`` (everything else stays as built);
    return the copied keys. Missing or differently shaped encoder weights are an error."""
    ckpt = checkpoint_of(path)
    state = torch.load(ckpt, map_location="cpu", weights_only=True)
    own = {k: v for k, v in method.state_dict().items() if k.startswith("encoders.")}
    missing = [k for k in own if k not in state]
    wrong = [f"{k} {tuple(state[k].shape)} vs {tuple(v.shape)}" for k, v in own.items()
             if k in state and state[k].shape != v.shape]
    if missing or wrong:
        raise ConfigError(f"--init {path}: its encoders do not match this task's "
                          f"(missing: {missing[:3]}, shape mismatch: {wrong[:3]}); "
                          "initialise from a run of the same task with the same encoders")
    method.load_state_dict({k: state[k] for k in own}, strict=False)
    return list(own)
