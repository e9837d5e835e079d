"""SCAN: stacked cross attention for image–text matching (Lee et al., ECCV 2018, Sec. 3).

Image i has regions v_1..v_R and caption j has words e_1..e_L (all D-dim). With
s_rl = v_r·e_l, SCAN's released code scores the pair as follows, for direction t2i (words
attend to regions; i2t swaps the roles of regions and words):

  (a) s̄_rl   = LeakyReLU_0.1(s_rl) / ‖LeakyReLU_0.1(s_r·)‖, the norm over the query axis (words)
  (b) α_lr   = softmax over regions r of λ_softmax · s̄_rl
  (c) a_l    = Σ_r α_lr v_r ;  R_l = cos(e_l, a_l)
  (d) S(i,j) = mean_l R_l (AVG)  or  log Σ_l exp(λ_lse R_l) / λ_lse (LSE)

:func:`xattn_similarity` computes the whole (n_images, n_captions) matrix without a
Python loop over captions. Two identities keep it cheap: e_l·a_l = Σ_r α_lr s_rl reuses
the logits, and ‖a_l‖² = α_l^T G α_l with the R×R Gram matrix G of the image's regions
(for i2t, the L×L Gram matrix of the caption's words), so the attended vectors are never
formed; the cosine does not depend on the softmax's normaliser either. Captions are
sorted by length and cut into chunks, each padded only to its own longest caption; chunk
sizes follow a memory budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import torch

from baselines import scan_original as original
from baselines.contrastive import max_violation_loss
from harness.api import METHODS, Method, bounded, global_batch_sum, require, search, unknown

DIRECTIONS = ("t2i", "i2t")
POOLINGS = ("avg", "lse")
DEFAULT_MEMORY_BUDGET = 64 * 2**20  # bytes of block-sized scratch tensors
_BUFFERS = 3  # block-sized scratch tensors: logits, attention weights, products
_SHIFT_LIMIT = 40.0  # up to this lambda_softmax the constant shift keeps exp() in float32's normal range


def xattn_similarity(images: torch.Tensor, captions: torch.Tensor, caption_lengths: torch.Tensor, *,
                     direction: str, agg: str, lambda_softmax: float, lambda_lse: float = 6.0,
                     memory_budget: int = DEFAULT_MEMORY_BUDGET, eps: float = 1e-8) -> torch.Tensor:
    """SCAN similarity (see the module docstring) of every image to every caption, (n_images, n_captions).

    ``images`` (n_i, R, D), ``captions`` (n_c, L, D) with anything after each caption's length,
    ``caption_lengths`` (n_c,) in 1..L. ``direction`` is 't2i' or 'i2t', ``agg`` 'avg' or 'lse'.
    Computed on the inputs' device in their common dtype, at least float32, outside autocast:
    under bf16 autocast the encoders hand over bfloat16 regions and float32 words, and the
    exp/softmax chain needs float32 (autocast also rejects the scratch tensors' ``out=``).
    Without gradients, three block-sized scratch tensors are allocated once and reused
    (``memory_budget`` bytes in all); with gradients every block allocates what autograd keeps.
    """
    dtype = torch.promote_types(torch.promote_types(images.dtype, captions.dtype), torch.float32)
    with torch.autocast(images.device.type, enabled=False):
        return _similarity(images.to(dtype), captions.to(dtype), caption_lengths, direction=direction, agg=agg,
                           lambda_softmax=lambda_softmax, lambda_lse=lambda_lse, memory_budget=memory_budget, eps=eps)


def _similarity(images: torch.Tensor, captions: torch.Tensor, caption_lengths: torch.Tensor, *, direction: str,
                agg: str, lambda_softmax: float, lambda_lse: float, memory_budget: int, eps: float) -> torch.Tensor:
    _check(images, captions, caption_lengths, direction, agg, lambda_softmax, lambda_lse)
    lengths = caption_lengths.detach().to("cpu", torch.long)
    order = torch.argsort(lengths, descending=True, stable=True)
    image_chunk, bounds = plan_chunks(lengths[order], n_images=len(images), regions=images.shape[1],
                                      itemsize=images.element_size(), memory_budget=memory_budget)
    block_elems = max((hi - lo) * int(lengths[order[lo]]) for lo, hi in bounds) * image_chunk * images.shape[1]
    grad = torch.is_grad_enabled() and (images.requires_grad or captions.requires_grad)
    scratch = Scratch(block_elems, images, enabled=not grad)
    gram = images @ images.transpose(1, 2) if direction == "t2i" else None  # (n_i, R, R)
    # t2i takes the images' gram matrices, i2t None
    block: Callable[..., torch.Tensor] = _block_t2i if direction == "t2i" else _block_i2t
    kw: dict[str, Any] = dict(agg=agg, lambda_softmax=lambda_softmax, lambda_lse=lambda_lse, eps=eps, scratch=scratch)
    columns = []
    for lo, hi in bounds:
        index = order[lo:hi].to(captions.device)
        longest = int(lengths[order[lo]])
        mask = torch.arange(longest, device=captions.device)[:, None] < caption_lengths.to(captions.device)[index]
        words = captions[index, :longest].transpose(0, 1) * mask[..., None]  # (L, c, D), padding zeroed
        rows = [block(images[s:s + image_chunk], None if gram is None else gram[s:s + image_chunk], words, mask, **kw)
                for s in range(0, len(images), image_chunk)]
        columns.append(torch.cat(rows, 0))
    if not columns:
        return images.new_zeros(len(images), 0)
    return torch.cat(columns, 1).index_select(1, torch.argsort(order).to(images.device))


def plan_chunks(sorted_lengths: torch.Tensor, *, n_images: int, regions: int, itemsize: int,
                memory_budget: int) -> tuple[int, list[tuple[int, int]]]:
    """Image chunk size and caption ranges (over captions sorted by decreasing length) such that the
    three scratch tensors of one block, n_i_chunk × R × c × L elements each, fit ``memory_budget``.

    The block's logit matmul is (n_i_chunk·R) × D times D × (c·L); both sides aim at the square
    root of the budget so that it stays efficient.
    """
    elems = max(1, memory_budget // (_BUFFERS * itemsize))
    image_chunk = min(max(1, n_images), max(1, math.isqrt(elems) // regions))
    bounds, lo, n = [], 0, len(sorted_lengths)
    while lo < n:
        width = max(1, elems // (image_chunk * regions * int(sorted_lengths[lo])))
        bounds.append((lo, min(n, lo + width)))
        lo += width
    return image_chunk, bounds


class Scratch:
    """Block-sized scratch tensors reused by every block when no gradient is needed, so that the
    hot loop neither allocates nor page-faults; disabled, it hands out None (ops allocate)."""

    def __init__(self, elems: int, like: torch.Tensor, enabled: bool):
        self.flat = [like.new_empty(elems) for _ in range(_BUFFERS)] if enabled else None

    def __call__(self, k: int, *shape: int) -> torch.Tensor | None:
        """Scratch tensor ``k`` viewed as ``shape`` (None when disabled)."""
        return None if self.flat is None else self.flat[k][: math.prod(shape)].view(shape)


def _check(images: torch.Tensor, captions: torch.Tensor, lengths: torch.Tensor, direction: str, agg: str,
           lambda_softmax: float, lambda_lse: float) -> None:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction {direction!r} is not one of {', '.join(DIRECTIONS)}")
    if agg not in POOLINGS:
        raise ValueError(f"agg {agg!r} is not one of {', '.join(POOLINGS)}")
    if images.ndim != 3 or captions.ndim != 3 or images.shape[2] != captions.shape[2]:
        raise ValueError(f"images (n_i, R, D) and captions (n_c, L, D) must share D; got "
                         f"{tuple(images.shape)} and {tuple(captions.shape)}")
    if images.dtype != captions.dtype or images.device != captions.device:
        raise ValueError(f"images ({images.dtype}, {images.device}) and captions ({captions.dtype}, "
                         f"{captions.device}) must share dtype and device")
    if lengths.shape != (len(captions),):
        raise ValueError(f"caption_lengths has shape {tuple(lengths.shape)}; expected ({len(captions)},)")
    if len(lengths) and (int(lengths.min()) < 1 or int(lengths.max()) > captions.shape[1]):
        raise ValueError(f"caption lengths must lie in 1..{captions.shape[1]}, got "
                         f"{int(lengths.min())}..{int(lengths.max())}")
    if lambda_softmax <= 0 or lambda_lse <= 0:
        raise ValueError(f"lambda_softmax ({lambda_softmax}) and lambda_lse ({lambda_lse}) must be > 0")


def _leaky(raw: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
    """LeakyReLU_0.1 = max(x, 0.1 x), written into ``out`` when given."""
    return torch.maximum(raw, torch.mul(raw, 0.1, out=out), out=out)


def _softmax_numerators(x: torch.Tensor, scale: torch.Tensor, *, dim: int,
                        lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """exp(scale·x + shift), in place of ``x`` when no gradient is needed, and ``shift``: SCAN's
    softmax weights along ``dim`` up to their normaliser.

    ``scale`` is λ_softmax / ‖x‖ over the query axis, so scale·x lies in [−λ, λ] and the
    constant shift −λ cannot overflow (for λ ≤ 40 nothing falls below float32's normal range
    either, which would make exp() slow); a larger λ subtracts the maximum along ``dim``.
    An entry with x = 0 gets exactly exp(shift).
    """
    shift = x.new_tensor(-lam) if lam <= _SHIFT_LIMIT else -(x * scale).amax(dim, keepdim=True)
    out = None if x.requires_grad else x
    return torch.exp(torch.addcmul(shift, x, scale, out=out), out=out), shift


def _l2norm_scale(x: torch.Tensor, dim: int, lam: float, eps: float, out: torch.Tensor | None) -> torch.Tensor:
    """λ / (‖x‖ + eps) along ``dim`` (keepdim): the clipped l2norm of step (a) folded into the softmax
    temperature. ‖x‖ is clamped at the dtype's smallest normal number so that all-zero (padded)
    rows have a finite gradient."""
    sumsq = torch.mul(x, x, out=out).sum(dim, keepdim=True)
    return lam / (sumsq.clamp_min(torch.finfo(x.dtype).tiny).sqrt() + eps)


def _cosine(dot: torch.Tensor, sq: torch.Tensor, weight_sum: torch.Tensor, query_norm: torch.Tensor,
            eps: float) -> torch.Tensor:
    """cos(q, a) = q·a / max(‖q‖ ‖a‖, eps) (SCAN's clamp), from unnormalised q·a and ‖a‖² and the
    softmax normaliser ``weight_sum``."""
    norm_a = sq.clamp_min(torch.finfo(sq.dtype).tiny).sqrt() / weight_sum
    return (dot / weight_sum) / (query_norm * norm_a).clamp_min(eps)


def _block_t2i(images: torch.Tensor, gram: torch.Tensor, words: torch.Tensor, mask: torch.Tensor, *, agg: str,
               lambda_softmax: float, lambda_lse: float, eps: float, scratch: Scratch) -> torch.Tensor:
    """(n_i, c) t2i scores: each word attends to the image's regions; pooled over the caption's words.
    ``words`` (L, c, D) word-major with zero padding, ``mask`` (L, c), ``gram`` (n_i, R, R)."""
    (ni, r, d), (length, c, _) = images.shape, words.shape
    shape = (ni, r, length, c)
    raw = torch.mm(images.reshape(ni * r, d), words.reshape(length * c, d).T,
                   out=scratch(0, ni * r, length * c)).view(shape)  # s_rl
    attn = _leaky(raw, scratch(1, *shape))  # padded words are 0 and stay out of the norm over words
    scale = _l2norm_scale(attn, 2, lambda_softmax, eps, scratch(2, *shape))  # (ni, R, 1, c), step (a)
    attn, _ = _softmax_numerators(attn, scale, dim=1, lam=lambda_softmax)  # step (b), over regions
    dot = torch.mul(attn, raw, out=scratch(2, *shape)).sum(1)  # (ni, L, c): e_l · Σ_r w_r v_r
    g_attn = torch.bmm(gram, attn.view(ni, r, length * c), out=scratch(0, ni, r, length * c)).view(shape)
    sq = torch.mul(g_attn, attn, out=scratch(0, *shape)).sum(1)  # (ni, L, c): ‖Σ_r w_r v_r‖²
    cos = _cosine(dot, sq, attn.sum(1), torch.linalg.vector_norm(words, dim=2), eps)  # step (c)
    return pool(cos, mask, dim=1, agg=agg, lambda_lse=lambda_lse)


def _block_i2t(images: torch.Tensor, gram: None, words: torch.Tensor, mask: torch.Tensor, *, agg: str,
               lambda_softmax: float, lambda_lse: float, eps: float, scratch: Scratch) -> torch.Tensor:
    """(n_i, c) i2t scores: each region attends to the caption's words; pooled over regions.

    ``words`` (L, c, D) word-major with zero padding, ``mask`` (L, c). A padded word has zero
    logits and a zero Gram row, so its weight exp(shift) adds nothing to a_r; it is only
    taken out of the softmax normaliser (which matters to SCAN's eps clamp alone).
    """
    (ni, r, d), (length, c, _) = images.shape, words.shape
    shape = (length, c, ni, r)
    raw = torch.mm(words.reshape(length * c, d), images.reshape(ni * r, d).T,
                   out=scratch(0, length * c, ni * r)).view(shape)  # s_rl, word-major
    attn = _leaky(raw, scratch(1, *shape))
    scale = _l2norm_scale(attn, 3, lambda_softmax, eps, scratch(2, *shape))  # (L, c, ni, 1), step (a)
    attn, shift = _softmax_numerators(attn, scale, dim=0, lam=lambda_softmax)  # step (b), over words
    padded = (~mask).sum(0).to(attn.dtype)[:, None, None]  # (c, 1, 1)
    weight_sum = (attn.sum(0) - padded * shift.squeeze(0).exp()).clamp_min(torch.finfo(attn.dtype).tiny)
    dot = torch.mul(attn, raw, out=scratch(2, *shape)).sum(0)  # (c, ni, R): v_r · Σ_l w_l e_l
    per_caption = attn.view(length, c, ni * r).transpose(0, 1)  # (c, L, ni·R), a strided view
    word_gram = words.transpose(0, 1) @ words.permute(1, 2, 0)  # (c, L, L)
    h_attn = torch.bmm(word_gram, per_caption, out=scratch(0, c, length, ni * r))
    sq = torch.mul(h_attn, per_caption, out=scratch(0, c, length, ni * r)).sum(1).view(c, ni, r)
    cos = _cosine(dot, sq, weight_sum, torch.linalg.vector_norm(images, dim=2), eps)  # (c, ni, R), step (c)
    return pool(cos, None, dim=2, agg=agg, lambda_lse=lambda_lse).T


def pool(sims: torch.Tensor, mask: torch.Tensor | None, *, dim: int, agg: str, lambda_lse: float) -> torch.Tensor:
    """SCAN's pooling, step (d), along ``dim``: AVG, or LSE log Σ exp(λ s) / λ, over the entries that ``mask``
    (broadcastable to ``sims``) marks valid; None: all valid."""
    if agg == "avg":
        if mask is None:
            return sims.mean(dim)
        return (sims * mask).sum(dim) / mask.sum(dim - sims.ndim + mask.ndim)
    scaled = sims * lambda_lse
    if mask is not None:
        scaled = scaled.masked_fill(~mask, -math.inf)
    return torch.logsumexp(scaled, dim=dim) / lambda_lse


SCORERS = ("vectorised", "original")


@dataclass(frozen=True)
class SCANParams:
    lambda_softmax: float = bounded(9.0, tune=search(1.0, 20.0, log=True))
    lambda_lse: float = bounded(6.0, tune=search(1.0, 20.0, log=True))
    margin: float = bounded(0.2, tune=search(0.01, 0.5, log=True))
    memory_budget_mib: int = 64
    scorer: str = "vectorised"  # or "original": SCAN's own procedure (baselines/scan_original.py)
    time_budget_s: float | None = None  # scorer original: stop the test scoring after this long

    def check(self, where: str) -> None:
        require(self.lambda_softmax > 0 and self.lambda_lse > 0, where, "lambda_softmax and lambda_lse must be > 0")
        require(self.margin >= 0, where, f"margin must be >= 0, got {self.margin}")
        require(self.memory_budget_mib >= 1, where, "memory_budget_mib must be >= 1")
        if self.scorer not in SCORERS:
            raise unknown("scorer", self.scorer, SCORERS, where)
        require(self.time_budget_s is None or self.time_budget_s > 0, where, "time_budget_s must be > 0")
        require(self.time_budget_s is None or self.scorer == "original", where,
                "time_budget_s limits the test scoring of scorer: original only; set scorer: original or "
                "drop time_budget_s")


class SCAN(Method):
    """Per-region and per-word features scored by cross attention, trained with the max-violation hinge.

    Encoders: modality a gives (B, R, D) region features, modality b ((B, L, D) word features,
    (B,) lengths). ``encode`` keeps these sets. ``scorer: vectorised`` trains and tests with
    :func:`xattn_similarity`; ``scorer: original`` with SCAN's own per-caption training forward and
    its sharded float64 test evaluation (:mod:`baselines.scan_original`), the same scores at SCAN's cost.
    """

    # the vectorised scorer plans its own chunks and the original procedure stops at a time budget, leaving NaN
    # blocks: both rank the whole score matrix; the score of a pair needs its sets of regions and words
    scores_in_blocks = False
    search_metric = None

    Params = SCANParams
    params: SCANParams
    direction: ClassVar[str]
    agg: ClassVar[str]

    def encode(self, modality: str, x: Any) -> Any:
        """Region features (B, R, D), or (word features (B, L, D), lengths (B,)) for captions."""
        return self.encoders[modality](x)

    def _kw(self) -> dict[str, Any]:
        p = self.params
        return dict(direction=self.direction, agg=self.agg, lambda_softmax=p.lambda_softmax, lambda_lse=p.lambda_lse)

    def similarity(self, emb_a: torch.Tensor, emb_b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """(n_images, n_captions) scores with gradient, as the training forward computes them."""
        words, lengths = emb_b
        if self.params.scorer == "original":
            return original.per_caption_similarity(emb_a, words, lengths.tolist(), **self._kw())
        return xattn_similarity(emb_a, words, lengths, memory_budget=self.params.memory_budget_mib * 2**20,
                                **self._kw())

    def score(self, emb_a: torch.Tensor, emb_b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """(n_images, n_captions) cross-attention similarity of a test or validation split."""
        return self.score_within(emb_a, emb_b, None)[0]

    def score_within(self, emb_a: torch.Tensor, emb_b: tuple[torch.Tensor, torch.Tensor],
                     deadline: float | None) -> tuple[torch.Tensor, float]:
        """The scorer's test evaluation; the original one stops at ``deadline`` (see :class:`Method`)."""
        if self.params.scorer == "original":
            words, lengths = emb_b
            return original.sharded_similarity(emb_a, words, lengths, deadline=deadline, **self._kw())
        return self.similarity(emb_a, emb_b), 1.0

    @property
    def test_time_budget_s(self) -> float | None:
        """``time_budget_s`` (original scorer only)."""
        return self.params.time_budget_s

    @property
    def times_pair_pass(self) -> bool:
        """``scorer: original``: SCAN's ``encode_data`` encodes every (image, caption) pair of the test split in
        batches, an image once per caption, and runs the training loss on every batch; the runner times that
        pass beside the protocol's encode/score/rank (:func:`harness.run.evaluate.pair_pass`)."""
        return self.params.scorer == "original"

    def embedded_loss(self, emb_a: torch.Tensor, emb_b: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """The max-violation hinge on the training forward's scores of a batch of pair embeddings."""
        return max_violation_loss(self.similarity(emb_a, emb_b), self.params.margin)

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        loss = self.embedded_loss(self.encode("a", x_a), self.encode("b", x_b))
        return global_batch_sum(loss), {"loss": loss.detach()}  # negatives from this process's shard


@METHODS.register("scan_t2i_avg")
class SCANt2iAVG(SCAN):
    """SCAN t-i AVG: words attend to regions, mean over words."""

    direction, agg = "t2i", "avg"


@METHODS.register("scan_t2i_lse")
class SCANt2iLSE(SCAN):
    """SCAN t-i LSE: words attend to regions, log-sum-exp over words."""

    direction, agg = "t2i", "lse"


@METHODS.register("scan_i2t_avg")
class SCANi2tAVG(SCAN):
    """SCAN i-t AVG: regions attend to words, mean over regions (the variant the SwAMP paper times)."""

    direction, agg = "i2t", "avg"


@METHODS.register("scan_i2t_lse")
class SCANi2tLSE(SCAN):
    """SCAN i-t LSE: regions attend to words, log-sum-exp over regions."""

    direction, agg = "i2t", "lse"
