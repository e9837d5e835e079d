"""Full retrieval on a split, as three separately timeable parts: encode, score, rank."""
from __future__ import annotations

from typing import Any

import torch

from harness.data import Split, take, to_device
from harness.method import Method
from harness.metrics import class_relevance, pair_relevance, rank_metrics
from harness.spec import MetricSpec


@torch.no_grad()
def encode_split(method: Method, split: Split, device: torch.device, batch_size: int) -> tuple[Any, Any]:
    """Embeddings of every a item and every b item, in eval mode, batch by batch."""
    method.eval()
    out = []
    for modality, feats in (("a", split.a), ("b", split.b)):
        chunks = [method.encode(modality, to_device(take(feats, idx), device))
                  for idx in torch.arange(len(feats)).split(batch_size)]
        out.append(torch.cat(chunks))
    return out[0], out[1]


@torch.no_grad()
def score_split(method: Method, emb_a: Any, emb_b: Any) -> torch.Tensor:
    """(n_a, n_b) similarity matrix, moved to the CPU for ranking."""
    return method.score(emb_a, emb_b).float().cpu()


def rank_split(sims: torch.Tensor, split: Split, metrics: MetricSpec) -> dict[str, float]:
    """All requested metrics, named '<direction>/<prefix><stat>' (e.g. 'a2b/class_R@1')."""
    masks = {"pair": pair_relevance(split.b_to_a, sims.shape[0])}
    if "class" in metrics.relevance:
        if not split.has_labels:
            raise ValueError("class-based metrics need hidden labels, which this dataset lacks")
        masks["class"] = class_relevance(split.labels_a, split.labels_b)
    prefix = {"pair": "", "class": "class_"}
    out: dict[str, float] = {}
    for direction in metrics.directions:
        for relevance in metrics.relevance:
            s, rel = (sims, masks[relevance]) if direction == "a2b" else (sims.T, masks[relevance].T)
            for name, value in rank_metrics(s, rel, metrics.ks).items():
                out[f"{direction}/{prefix[relevance]}{name}"] = value
    return out


def evaluate(method: Method, split: Split, metrics: MetricSpec, device: torch.device,
             batch_size: int) -> dict[str, float]:
    """Encode, score and rank in one call (used for validation)."""
    emb_a, emb_b = encode_split(method, split, device, batch_size)
    return rank_split(score_split(method, emb_a, emb_b), split, metrics)
