"""Doodle2Search (Dey et al., CVPR 2019): zero-shot sketch -> photo retrieval with three losses.

A training item is a sketch, a photo of its class (positive), a photo of a semantically sampled
other class (negative; :class:`harness.data.images.SemanticTriplets`) and the sketch class's word
vector w. With s, p, n the raw embeddings (B, D) of sketch, positive and negative:

* triplet: mean_i [‖s−p‖ − ‖s−n‖ + margin]_+ (margin 1, Euclidean);
* domain: a discriminator D tells sketches (target 0) from photos (target 1) through a gradient
  reversal layer whose weight ramps 0 -> 1 (:func:`ramp`), so the encoders learn to fool it:
  (BCE(D(s), 0) + BCE(D(p), 1) + BCE(D(n), 1)) / 3;
* semantic: a head S regresses w from each embedding with the cosine loss (1 − cos)/2, the
  negative's term through a fixed reversal of weight 0.5 (pushing the negative away from w):
  mean_i [c(S(s), w) + c(S(p), w) + c(S(R(n)), w)].

Total: w_triplet·L_triplet + w_domain·L_domain + w_semantic·L_semantic, each term in the history.
Retrieval ranks photos by Euclidean distance between raw embeddings, as Doodle2Search does
(``score`` = −distance; the order equals its 1/(1+distance)).

Ramp: Doodle2Search's loss ramps the reversal weight with an argument named ``epoch`` (0 before
5, (e−5)/20 up to 25, then 1), but its training loop passes the batch index within the epoch,
so in its runs the weight rises over batches 5–25 of every epoch and drops back to 0 when the
next epoch starts. Here the ramp runs once over training steps ``ramp_start``–``ramp_end`` (5
and 25 by default: Doodle2Search's first epoch) and then stays at 1.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from harness.api import METHODS, ConfigError, Method, bounded, require, search

Terms = dict[str, tuple[float, torch.Tensor]]  # name -> (weight, value)


class _GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: float) -> torch.Tensor:
        ctx.weight = weight
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.weight * grad, None


def grad_reverse(x: torch.Tensor, weight: float) -> torch.Tensor:
    """Identity forward; the backward pass multiplies the gradient by −``weight`` (Ganin & Lempitsky, 2015)."""
    out: torch.Tensor = _GradientReversal.apply(x, weight)
    return out


def ramp(step: int, start: int, end: int) -> float:
    """0 before ``start``, rising linearly to 1 at ``end``, 1 afterwards."""
    if step < start:
        return 0.0
    if step >= end:
        return 1.0
    return (step - start) / (end - start)


def cosine_regression(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """(B,) Doodle2Search's semantic loss (1 − cos(pred, target)) / 2 of (B, d) rows, in [0, 1]."""
    return (1.0 - F.cosine_similarity(pred, target, dim=1)) / 2.0


def domain_loss(logit_sketch: torch.Tensor, logit_pos: torch.Tensor, logit_neg: torch.Tensor) -> torch.Tensor:
    """Mean BCE of the discriminator's (B,) logits: sketches are domain 0, photos domain 1."""
    bce = F.binary_cross_entropy_with_logits
    return (bce(logit_sketch, torch.zeros_like(logit_sketch)) + bce(logit_pos, torch.ones_like(logit_pos))
            + bce(logit_neg, torch.ones_like(logit_neg))) / 3.0


@dataclass(frozen=True)
class Doodle2SearchParams:
    margin: float = bounded(1.0, gt=0, tune=search(0.1, 2.0, log=True))  # torch's triplet loss needs a positive margin
    w_triplet: float = 1.0
    w_domain: float = 1.0
    w_semantic: float = 1.0
    negative_reversal: float = 0.5  # fixed reversal weight on the negative's semantic term
    ramp_start: int = 5  # training steps
    ramp_end: int = 25
    domain_hidden: int = 64
    dropout: float = 0.5

    def check(self, where: str) -> None:
        require(self.negative_reversal >= 0, where, "negative_reversal must be >= 0")
        require(min(self.w_triplet, self.w_domain, self.w_semantic) >= 0, where, "loss weights must be >= 0")
        require(0 <= self.ramp_start < self.ramp_end, where, "need 0 <= ramp_start < ramp_end (training steps)")
        require(self.domain_hidden > 0 and 0 <= self.dropout < 1, where, "domain_hidden > 0, dropout in [0, 1)")


def semantic_head(dim: int, word_dim: int, dropout: float) -> nn.Sequential:
    """Embedding (B, dim) -> predicted word vector (B, word_dim), through a hidden layer of word_dim."""
    return nn.Sequential(nn.Linear(dim, word_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(word_dim, word_dim))


def domain_head(dim: int, hidden: int, dropout: float) -> nn.Sequential:
    """Embedding (B, dim) -> (B, 1) logit of 'photo'."""
    return nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, hidden),
                         nn.ReLU(), nn.Linear(hidden, 1))


@METHODS.register("doodle2search")
class Doodle2Search(Method):
    """Triplet + domain (gradient reversal) + semantic losses; modality a holds sketches, b the training
    triplets' photos (positive, negative, word vector)."""

    search_metric = "l2"  # score: negative Euclidean distance

    Params: ClassVar[type] = Doodle2SearchParams
    steps: torch.Tensor  # buffer: training steps taken (the ramp)

    def __init__(self, encoders: dict[str, nn.Module], params: Any, word_dim: int):
        super().__init__(encoders, params)
        self.semantic = semantic_head(self.embed_dim, word_dim, params.dropout)
        self.domain = domain_head(self.embed_dim, params.domain_hidden, params.dropout)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))  # training steps taken (the ramp)

    @classmethod
    def build(cls, encoders: dict[str, nn.Module], params: Any, data: Any) -> "Doodle2Search":
        word_dim = getattr(data["train"].b, "word_dim", None)
        if not word_dim:
            raise ConfigError(f"{cls.registry_name} regresses class word vectors, which this dataset lacks: set "
                              "dataset.word_vectors to a word2vec/GloVe text file holding the training classes")
        return cls(encoders, params, word_dim)

    def encode(self, modality: str, x: Any) -> torch.Tensor:
        """(B, D) raw embeddings (Doodle2Search neither normalises nor uses cosine)."""
        out: torch.Tensor = self.encoders[modality](x)
        return out

    def score(self, emb_a: torch.Tensor, emb_b: torch.Tensor) -> torch.Tensor:
        """(n_a, n_b) negative Euclidean distance."""
        return -torch.cdist(emb_a, emb_b)

    def reversal_weight(self) -> float:
        """The domain term's gradient-reversal weight at the current training step."""
        return ramp(int(self.steps), self.params.ramp_start, self.params.ramp_end)

    def terms(self, sketch: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, words: torch.Tensor) -> Terms:
        """Weighted loss terms of a batch of raw embeddings (B, D) and word vectors (B, d)."""
        p, weight = self.params, self.reversal_weight()
        triplet = F.triplet_margin_loss(sketch, pos, neg, margin=p.margin, p=2)
        logits = [self.domain(grad_reverse(e, weight)).squeeze(1) for e in (sketch, pos, neg)]  # 3 × (B,)
        semantic = (cosine_regression(self.semantic(sketch), words) + cosine_regression(self.semantic(pos), words)
                    + cosine_regression(self.semantic(grad_reverse(neg, p.negative_reversal)), words)).mean()
        return {"triplet": (p.w_triplet, triplet), "domain": (p.w_domain, domain_loss(*logits)),
                "semantic": (p.w_semantic, semantic)}

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        positives, negatives, words = x_b  # (B, C, H, W) × 2, (B, d)
        sketch, pos, neg = self.encode("a", x_a), self.encode("b", positives), self.encode("b", negatives)
        terms = self.terms(sketch, pos, neg, words)
        total = cast(torch.Tensor, sum(w * v for w, v in terms.values()))  # terms is never empty: a tensor
        logs = {name: v.detach() for name, (_, v) in terms.items()}
        logs.update(loss=total.detach(), reversal_weight=torch.tensor(self.reversal_weight()))
        if self.training:
            self.steps += 1
        return total, logs
