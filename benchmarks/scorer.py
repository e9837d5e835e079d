"""SCAN's cross-attention scorer on a fixed chunk: 16 images x 80 captions, 36 regions, D = 1024."""
from __future__ import annotations

import importlib
from typing import Any, Callable

import torch
import torch.nn.functional as F

from benchmarks import common

IMAGES, CAPTIONS, REGIONS, DIM, MAX_WORDS = 16, 80, 36, 1024, 20
LAMBDA_SOFTMAX = {"t2i": 9.0, "i2t": 4.0}  # SCAN's Flickr30K settings
LAMBDA_LSE = {"t2i": 6.0, "i2t": 5.0}


def chunk() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The fixed chunk: unit regions (n_i, R, D), unit words (n_c, L, D) and lengths (n_c,) in 4..L."""
    g = torch.Generator().manual_seed(common.SEED)
    images = F.normalize(torch.randn(IMAGES, REGIONS, DIM, generator=g), dim=2)  # (n_i, R, D)
    captions = F.normalize(torch.randn(CAPTIONS, MAX_WORDS, DIM, generator=g), dim=2)  # (n_c, L, D)
    lengths = torch.randint(4, MAX_WORDS + 1, (CAPTIONS,), generator=g)  # (n_c,)
    return images, captions, lengths


def scorer_call(module: str, function: str, variant: str) -> Callable[[], Any]:
    """``module.function`` on the chunk for ``variant`` (e.g. 'i2t_avg'), imported in set-up so that a revision
    without it shows n/a (NotImplementedError) instead of breaking the suite."""
    common.pin_threads()
    try:
        fn = getattr(importlib.import_module(module), function)
    except (ImportError, AttributeError) as err:
        raise NotImplementedError(f"no {module}.{function} in this revision: {err}") from None
    images, captions, lengths = chunk()
    direction, agg = variant.split("_")
    kw = dict(direction=direction, agg=agg, lambda_softmax=LAMBDA_SOFTMAX[direction], lambda_lse=LAMBDA_LSE[direction])
    return lambda: fn(images, captions, lengths, **kw)


class ScanScorer:
    """``baselines.scan.xattn_similarity`` (no gradient) per direction and pooling."""

    params = [["t2i_avg", "t2i_lse", "i2t_avg", "i2t_lse"]]
    param_names = ["variant"]

    def setup(self, variant: str) -> None:
        self.score = scorer_call("baselines.scan", "xattn_similarity", variant)

    def time_xattn_similarity(self, variant: str) -> None:
        with torch.no_grad():
            self.score()


class ScanOriginalScorer:
    """SCAN's original test procedure (``baselines.scan_original.sharded_similarity``: float64 host arrays,
    a Python loop over captions) on the same chunk as :class:`ScanScorer`, i2t and t2i AVG. Its ratio to
    ``ScanScorer`` is the implementation's share of SCAN's test cost."""

    params = [["t2i_avg", "i2t_avg"]]
    param_names = ["variant"]

    def setup(self, variant: str) -> None:
        self.score = scorer_call("baselines.scan_original", "sharded_similarity", variant)

    def time_sharded_similarity(self, variant: str) -> None:
        self.score()
