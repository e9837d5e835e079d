"""Shared fixtures: tiny tasks derived from the embedded synthetic task and from the image–text shapes task."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

# Compiling the fused Sinkhorn costs seconds per process: tests that are not about it (and the CLI runs they
# start) use the eager Sinkhorn; tests/test_fused_sinkhorn.py compiles it explicitly (compile="on").
os.environ.setdefault("SWAMP_BENCH_SINKHORN_COMPILE", "off")
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
        "swamp_infonce": {"method": "swamp", "K": 16, "queue": 64, "contrastive_weight": 1.0, "loss": "infonce"},
        "swamp_sum": {"method": "swamp", "K": 16, "queue": 64, "contrastive_weight": 1.0, "loss": "sum"},
        "swamp_siglip": {"method": "swamp", "K": 16, "queue": 64, "contrastive_weight": 1.0, "loss": "siglip"},
        "cca": {"method": "cca", "dim": 4},
    },
}


# Image–text methods need sets of regions and words: a seconds-long variant of
# tasks/flickr30k_shapes.yaml (random data in SCAN's layout, small widths).
TINY_IMAGE_TEXT = {
    "base": str(TASKS / "flickr30k_shapes.yaml"),
    "name": "tiny_image_text",
    "version": "test",
    "dataset": {"images": [16, 10, 10], "regions": 6, "feature_dim": 24, "vocab_size": 40, "median_words": 4.0,
                "max_words": 8},
    "encoders": {"a": {"dim": 16}, "b": {"word_dim": 8, "dim": 16}},
    "metrics": {"folds": [1, 5]},
    "train": {"epochs": 2, "batch_size": 32, "eval_batch_size": 16},
    "methods": {
        "scan": {"method": "scan_i2t_avg", "lambda_softmax": 4},
        "scan_i2t_lse": {"method": "scan_i2t_lse", "lambda_softmax": 4, "lambda_lse": 5},
        "scan_t2i_avg": {"method": "scan_t2i_avg", "lambda_softmax": 9},
        "scan_t2i_lse": {"method": "scan_t2i_lse", "lambda_softmax": 9, "lambda_lse": 6},
        "contrastive_par": {"method": "contrastive_par", "p": 3, "T": 0.5, "H": 2},
        "swamp_par": {"method": "swamp_par", "K": 8, "queue": 64, "tau": 0.1, "eta": 5.0, "p": 3, "T": 0.5, "H": 2},
    },
}


# Text–video methods need videos and padded captions over a fixed word table: a seconds-long variant
# of tasks/msrvtt_shapes.yaml (random data in HowTo100M's layout, small widths, 3 captions per video).
TINY_VIDEO_TEXT = {
    "base": str(TASKS / "msrvtt_shapes.yaml"),
    "name": "tiny_video_text",
    "version": "test",
    "dataset": {"videos": [48, 16, 16], "train_captions_per_video": 3, "feature_dim": 12, "vocab_size": 30,
                "word_dim": 6, "max_words": 6, "median_words": 4.0},
    "encoders": {"a": {"dim": 8}, "b": {"word_dim": 6, "dim": 8}},
    "train": {"epochs": 2, "batch_size": 16, "eval_batch_size": 16},
    "methods": {"contrastive": {"method": "mmr", "margin": 0.1},
                "swamp": {"method": "swamp_mmr", "K": 8, "queue": 32, "tau": 0.25, "eta": 5.0, "lambda": 0.25}},
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


@pytest.fixture
def tiny_image_text_task(tmp_path: Path) -> Path:
    """Path of a seconds-long image–text task on random data in SCAN's layout."""
    return write_task(tmp_path, TINY_IMAGE_TEXT, "tiny_image_text.yaml")


@pytest.fixture
def tiny_video_text_task(tmp_path: Path) -> Path:
    """Path of a seconds-long text–video task on random data in HowTo100M's layout."""
    return write_task(tmp_path, TINY_VIDEO_TEXT, "tiny_video_text.yaml")


# Sketch -> photo methods need images, class-only test splits and training triplets: a seconds-long
# variant of tasks/sketchy_shapes.yaml (generated 16 × 16 images, a small CNN).
TINY_SKETCH = {
    "base": str(TASKS / "sketchy_shapes.yaml"),
    "name": "tiny_sketch",
    "version": "test",
    "dataset": {"classes": [4, 2, 3], "sketches": [40, 8, 12], "photos": [40, 8, 15], "image_size": 16,
                "word_dim": 6},
    "encoders": {"a": {"arch": "small", "widths": [4, 8], "dim": 8, "attention_hidden": 4},
                 "b": {"arch": "small", "widths": [4, 8], "dim": 8, "attention_hidden": 4}},
    "train": {"epochs": 2, "batch_size": 8, "eval_batch_size": 16},
    "methods": {
        "doodle2search": {"method": "doodle2search", "ramp_start": 1, "ramp_end": 4},
        "doodle2search_swamp": {"method": "doodle2search_swamp", "K": 6, "queue": 16, "ramp_start": 1, "ramp_end": 4},
    },
}


@pytest.fixture
def tiny_sketch_task(tmp_path: Path) -> Path:
    """Path of a seconds-long zero-shot sketch -> photo task on generated images."""
    return write_task(tmp_path, TINY_SKETCH, "tiny_sketch.yaml")
