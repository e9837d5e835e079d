"""Shared fixtures: a tiny task derived from the embedded synthetic task."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
TASKS = ROOT / "tasks"

TINY = {
    "base": str(TASKS / "synthetic.yaml"),
    "name": "tiny",
    "version": "test",
    "dataset": {"pairs_per_class": 20, "split_sizes": [240, 80, 80]},
    "train": {"epochs": 2, "batch_size": 32},
    "methods": {
        "contrastive": {"method": "contrastive", "margin": 0.1},
        "swamp": {"method": "swamp", "K": 16, "queue": 64, "tau": 0.1, "eta": 5.0, "lambda": 1.0,
                  "contrastive_weight": 0.0},
        "swamp_plus_contrastive": {"method": "swamp", "K": 16, "queue": 64, "contrastive_weight": 1.0},
        "swamp_hard": {"method": "swamp", "K": 16, "queue": 64, "hard": True},
    },
}


def write_task(folder: Path, body: dict, name: str = "tiny.yaml") -> Path:
    """Write a task mapping (``base`` may point at a real task) and return its path."""
    path = folder / name
    path.write_text(yaml.safe_dump(body, sort_keys=False))
    return path


@pytest.fixture
def tiny_task(tmp_path: Path) -> Path:
    """Path of a seconds-long variant of tasks/synthetic.yaml."""
    return write_task(tmp_path, TINY)
