"""SwAMP: swapped assignments of multimodal pairs (Kim et al., AISTATS 2023).

Shared prototypes P (K, D) give p(y|x^M) = softmax(<p_y, phi^M(x)> / tau) for each
modality M. The current batch is pushed into a FIFO queue of recent embedding pairs,
Sinkhorn–Knopp on (batch + queue) turns modality B's log-probabilities into balanced
targets q^A for modality A and vice versa (the swap, paper Eq. 4), and the batch rows
of those targets supervise both classifiers (Eq. 5). Total loss (Eq. 6):
contrastive_weight * L_c + lambda * L_s, with L_c any loss of the contrastive family
(``loss``: the max-violation hinge by default; :class:`baselines.contrastive.PairLoss`).

Under torchrun (:mod:`harness.run.distributed`) each process encodes its shard of the global
batch; Sinkhorn runs over the global batch plus the queue, spread over the processes, and
the global batch enters every process's queue, so targets and queue equal those of one
process training on the whole batch.
"""
from __future__ import annotations

from dataclasses import dataclass, fields, replace
from functools import partial
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from torch import nn

from baselines.contrastive import PairLoss, PairLossFields
from harness.api import (
    METHODS,
    ConfigError,
    EmbeddingQueue,
    Method,
    bounded,
    fused_sinkhorn_pair,
    gather_rows,
    global_batch_sum,
    is_distributed,
    log_softmax_nograd,
    rank_and_world,
    require,
    search,
    sinkhorn,
    sinkhorn_compile_seconds,
)

REDUCTIONS = ("sum", "mean")
PAIRS_PER_PROTOTYPE = 7  # the paper's synthetic task: 7,000 training pairs for K = 1,000 prototypes
MAX_AUTO_K = 1000  # the paper's largest K outside its ablation (synthetic and image-text)
QUEUE_BATCHES = 10  # the paper's queue of 1,280 is 10 batches of 128, the best of its queue ablation
MIN_PAIRS_PER_PROTOTYPE = 2  # below this, K warns


def auto_K(n_pairs: int, queue: int | None = None) -> int:
    """K for ``n_pairs`` training pairs: one prototype per 7 pairs (the paper's synthetic ratio), between 2 and
    1,000; below ``queue`` when one is given (the queue must exceed K)."""
    k = min(MAX_AUTO_K, max(2, round(n_pairs / PAIRS_PER_PROTOTYPE)))
    return max(2, min(k, queue - 1)) if queue is not None else k


def auto_queue(n_pairs: int, batch_size: int, K: int) -> int:
    """A queue of 10 batches (the paper's 1,280 for batches of 128), cut to whole batches that leave room for
    the current batch within the training set (a queue holding every training item sees the batch's own stale
    copies), and above K (the uniform class marginal needs more rows than prototypes)."""
    room = max(0, n_pairs - batch_size) // batch_size * batch_size
    queue = min(QUEUE_BATCHES * batch_size, room)
    if queue <= K:
        queue = max(n_pairs - batch_size, K + 1)
    return queue


def swapped_targets(logp_a: torch.Tensor, logp_b: torch.Tensor, *, eta: float, n_iters: int,
                    hard: bool, distributed: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Targets (q_a, q_b), each (N, K): q_a from modality b's log p(y|x), q_b from a's (Alg. 1, step 4).

    ``distributed``: the rows are this process's part of a problem spread over all processes
    (see :func:`harness.ops.ot.sinkhorn`).
    """
    solve = partial(sinkhorn, distributed=True) if distributed else sinkhorn
    return _harden(solve(logp_b, eta, n_iters), solve(logp_a, eta, n_iters), hard)


def fused_swapped_targets(logits_a: torch.Tensor, logits_b: torch.Tensor, *, eta: float, n_iters: int, hard: bool,
                          compile: str = "auto", rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`swapped_targets` of the log-softmaxed ``logits_a``, ``logits_b`` (N, K) in one process, each
    modality's log-softmax and Sinkhorn fused into one kernel (:func:`harness.api.fused_sinkhorn_pair`: the native
    C kernel on the CPU, two modalities on two threads, else the compiled one; ``compile``: ``auto``, ``native``,
    ``on`` or ``off``, the eager reference); ``rows``: only the first ``rows`` rows of each target."""
    q_a, q_b = fused_sinkhorn_pair([logits_b, logits_a], eta, n_iters, from_logits=True, compile=compile, rows=rows)
    return _harden(q_a, q_b, hard)


def _harden(q_a: torch.Tensor, q_b: torch.Tensor, hard: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """The targets as they are, or (``hard``) one-hot at each row's argmax (scattered: ``F.one_hot`` checks its
    indices' range on the host, a synchronisation on a GPU)."""
    if hard:
        q_a = torch.zeros_like(q_a).scatter_(1, q_a.argmax(1, keepdim=True), 1.0)
        q_b = torch.zeros_like(q_b).scatter_(1, q_b.argmax(1, keepdim=True), 1.0)
    return q_a, q_b


def swamp_loss(logp_a: torch.Tensor, logp_b: torch.Tensor, q_a: torch.Tensor, q_b: torch.Tensor) -> torch.Tensor:
    """L_s (paper Eq. 5): mean over the batch of CE(q^A, p(.|x^A)) + CE(q^B, p(.|x^B)); all (B, K)."""
    return -(q_a * logp_a).sum(1).mean() - (q_b * logp_b).sum(1).mean()


@dataclass(frozen=True)
class SwAMPFields:
    """The settings of SwAMP's swapped-assignment loss L_s, shared by every method that adds it."""

    # auto: from the number of training pairs (:func:`auto_K`); a K the queue does not exceed is refused per trial
    K: int | Literal["auto"] = bounded(1000, tune=search(16, 1024, log=True))
    queue: int | Literal["auto"] = 1280  # auto: from the training pairs, the batch and K (:func:`auto_queue`)
    tau: float = bounded(0.01, tune=search(0.005, 0.5, log=True))
    eta: float = bounded(20.0, tune=search(1.0, 50.0, log=True))
    lam: float = bounded(1.0, key="lambda", tune=search(0.1, 10.0, log=True))
    sinkhorn_iters: int = 3
    hard: bool = False
    strict_queue: bool = True
    # true: the fused, compiled Sinkhorn where inductor works (eager with one warning where it fails; eager
    # everywhere under SWAMP_BENCH_SINKHORN_COMPILE=off); false (or YAML's off): the eager Sinkhorn
    sinkhorn_compile: bool = True

    def check_swamp(self, where: str) -> None:
        require(self.K == "auto" or self.K >= 2, where, f"K must be >= 2 (or auto), got {self.K}")
        require(self.queue == "auto" or self.queue >= 0, where, f"queue must be >= 0 (or auto), got {self.queue}")
        require(not self.strict_queue or isinstance(self.K, str) or isinstance(self.queue, str)  # str: auto
                or self.queue > self.K, where,
                f"queue ({self.queue}) must exceed K ({self.K}) so the uniform class marginal is meaningful "
                "(paper Sec. 3); raise queue, lower K, or set strict_queue: false for the queue ablation")
        require(self.tau > 0 and self.eta > 0, where, f"tau and eta must be > 0, got tau={self.tau}, eta={self.eta}")
        require(self.lam >= 0, where, "lambda must be >= 0")
        require(self.sinkhorn_iters >= 1, where, "sinkhorn_iters must be >= 1")


@dataclass(frozen=True)
class SwAMPParams(PairLossFields, SwAMPFields):  # margin, loss, temperature, siglip_*, warmup_epochs: L_c
    """``contrastive_reduction``: how L_c enters Eq. 6 against L_s (a mean over the batch). ``sum``: summed
    over the batch's queries, as the paper's Eq. 1 writes it (Σ over the batch), so that with a batch of B
    L_c weighs about B times more than L_s at equal ``lambda``; ``mean``: that sum divided by B, the scale
    of L_s. No SwAMP code is public to settle which one the paper trained with (docs/fidelity.md)."""

    contrastive_weight: float = 1.0
    contrastive_reduction: Literal["sum", "mean"] = "sum"

    def check(self, where: str) -> None:
        self.check_swamp(where)
        require(self.contrastive_reduction in REDUCTIONS, where,
                f"contrastive_reduction must be one of {', '.join(REDUCTIONS)}, got {self.contrastive_reduction!r}")
        require(self.lam >= 0 and self.contrastive_weight >= 0, where, "lambda and contrastive_weight must be >= 0")
        require(self.lam > 0 or self.contrastive_weight > 0, where, "lambda and contrastive_weight are both 0")
        self.check_pair_loss(where)

    def idle_settings(self) -> frozenset[str]:
        """The settings that do nothing here, which ``harness tune`` does not search: L_c's when its weight is 0."""
        if self.contrastive_weight:
            return frozenset()
        return frozenset(f.metadata.get("key", f.name) for f in fields(PairLossFields))


def _unsettled(params: SwAMPFields) -> ValueError:
    return ValueError(f"K and queue must be numbers here (settle() resolves auto), got K={params.K!r}, "
                      f"queue={params.queue!r}")


class SwappedAssignments(Method):
    """SwAMP's L_s machinery on a method's embeddings: prototypes, the queue, swapped Sinkhorn targets
    (params: :class:`SwAMPFields`). :class:`SwAMP` adds its contrastive term; other methods add L_s to
    their own losses (Doodle2Search + SwAMP)."""

    def __init__(self, encoders: dict[str, nn.Module], params: SwAMPFields):
        super().__init__(encoders, params)
        if isinstance(params.K, str) or isinstance(params.queue, str):
            raise _unsettled(params)
        self.prototypes = nn.Parameter(F.normalize(torch.randn(params.K, self.embed_dim), dim=1))
        self.queue = EmbeddingQueue(params.queue, self.embed_dim)
        self._kernels_before = set(sinkhorn_compile_seconds())  # kernels this process already paid for

    @classmethod
    def settle(cls, params: SwAMPFields, n_pairs: int, batch_size: int) -> SwAMPFields:
        """``K: auto`` and ``queue: auto`` from the training split's size (:func:`auto_K`, :func:`auto_queue`)."""
        if "auto" not in (params.K, params.queue):
            return params
        queue = None if params.queue == "auto" else params.queue
        K = auto_K(n_pairs, queue if params.strict_queue else None) if params.K == "auto" else params.K
        return replace(params, K=K, queue=auto_queue(n_pairs, batch_size, K) if queue is None else queue)

    @classmethod
    def fit_warnings(cls, params: SwAMPFields, n_pairs: int, batch_size: int) -> list[str]:
        """K above the number of training pairs is refused: Sinkhorn's equal class marginal would give each
        prototype less than one training item, so the targets could group nothing. Fewer than two training pairs
        per prototype warns, and so does a queue at least as large as the training set: once full it holds every
        training item, the batch's own included."""
        if isinstance(params.K, str) or isinstance(params.queue, str):
            raise _unsettled(params)
        lines = []
        suggested = auto_K(n_pairs)
        if params.K > n_pairs:
            raise ConfigError(f"K = {params.K} prototypes exceed the {n_pairs} training pairs: Sinkhorn's equal class "
                              "marginal gives each prototype less than one training item, so the swapped targets "
                              f"group nothing; set K below {n_pairs}, e.g. K: auto ({suggested} here: the paper's "
                              f"synthetic task has {PAIRS_PER_PROTOTYPE} training pairs per prototype)")
        if n_pairs < MIN_PAIRS_PER_PROTOTYPE * params.K:
            lines.append(f"K = {params.K} prototypes leave {n_pairs / params.K:.1f} "
                         "training pairs per prototype (fewer "
                         f"than {MIN_PAIRS_PER_PROTOTYPE}), so most prototypes hold one item and the swapped targets "
                         f"group little; set K: auto ({suggested} here, {PAIRS_PER_PROTOTYPE} pairs per prototype as "
                         "in the paper's synthetic task)")
        if params.queue >= n_pairs:
            fits = (n_pairs - batch_size) // batch_size * batch_size  # batch + queue within the training set
            hint = f"e.g. queue: {fits}" if fits > params.K else \
                f"e.g. queue: {max(fits, batch_size)} with K below it (strict_queue needs queue > K)"
            lines.append(f"queue = {params.queue} is at least the {n_pairs} training pairs: once full it holds every "
                         "training item, the current batch's own (stale) copies included, so Sinkhorn sees items "
                         f"twice; set queue below {n_pairs} minus the batch ({batch_size}), {hint}")
        return lines

    def scaled_prototypes(self) -> torch.Tensor:
        """The unit-norm prototypes over tau (K, D), with gradient: logits are embeddings times its transpose. The
        1/tau scales the (K, D) prototypes rather than the (N, K) product, N being the batch plus the queue."""
        out: torch.Tensor = F.normalize(self.prototypes, dim=1) / self.params.tau
        return out

    def logits(self, emb: torch.Tensor, prototypes: torch.Tensor | None = None) -> torch.Tensor:
        """Cosine to each prototype over tau (N, K); embeddings and prototypes are unit-norm. ``prototypes``:
        :meth:`scaled_prototypes` already formed this step. The product is taken against a (D, K) copy of the
        prototypes, so that their gradient is formed as a (D, K) product, about 3x faster on the CPU than the
        (K, D) one autograd picks for a transposed operand."""
        protos = self.scaled_prototypes() if prototypes is None else prototypes
        return emb @ protos.T.contiguous()

    def log_probs(self, emb: torch.Tensor, prototypes: torch.Tensor | None = None) -> torch.Tensor:
        """log p(y|x) (N, K) with gradient."""
        return F.log_softmax(self.logits(emb, prototypes), dim=1)

    def targets(self, emb_a: torch.Tensor, emb_b: torch.Tensor, distributed: bool = False,
                prototypes: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Swapped Sinkhorn targets (q_a, q_b), each (B, K), for the batch rows of ``emb_a``, ``emb_b`` (B, D).

        Sinkhorn sees the batch followed by the queue. ``distributed``: the batch is this
        process's shard; Sinkhorn runs over every process's batch rows plus its contiguous
        share of the (identical) queue, so the rows returned are this process's rows of the
        single-process targets for the global batch. ``prototypes``: :meth:`scaled_prototypes` of this step.
        """
        p = self.params
        share = rank_and_world() if distributed else (0, 1)
        all_a, all_b = self.queue.with_batch(emb_a, emb_b, share)  # (n, D), batch first
        with torch.no_grad():  # targets carry no gradient (paper Sec. 3); the batch-only rows in loss do
            protos = (self.scaled_prototypes() if prototypes is None else prototypes).detach()
            logits = self.logits(torch.cat([all_a, all_b]), protos)  # (2n, K): one product for both modalities
            logits_a, logits_b = logits[:len(all_a)], logits[len(all_a):]  # contiguous row blocks, no copy
        if distributed or not p.sinkhorn_compile:
            q_a, q_b = swapped_targets(log_softmax_nograd(logits_a), log_softmax_nograd(logits_b), eta=p.eta,
                                       n_iters=p.sinkhorn_iters, hard=p.hard, distributed=distributed)
            q_a, q_b = q_a[:len(emb_a)], q_b[:len(emb_a)]
        else:  # one process: log-softmax and Sinkhorn fused (native on the CPU, compiled elsewhere), batch rows only
            q_a, q_b = fused_swapped_targets(logits_a, logits_b, eta=p.eta, n_iters=p.sinkhorn_iters, hard=p.hard,
                                             rows=len(emb_a))
        return q_a, q_b

    def one_off_timings(self) -> dict[str, float]:
        """The Sinkhorn kernels' one-off costs paid while this method trained, in seconds, apart from the step
        times: ``sinkhorn_compile`` (the compiled kernel's first calls: compilation or a load from inductor's
        on-disk cache, plus one run) and ``sinkhorn_native_build`` (the native kernel's build, or finding it in
        its cache, and loading it). A later run in the same process (a sequential grid, a launcher's worker)
        pays neither again and reports neither."""
        new = {k: v for k, v in sinkhorn_compile_seconds().items() if k not in self._kernels_before}
        out = {}
        if any(k != "native" for k in new):
            out["sinkhorn_compile"] = sum(v for k, v in new.items() if k != "native")
        if "native" in new:
            out["sinkhorn_native_build"] = new["native"]
        return out

    def remember(self, emb_a: torch.Tensor, emb_b: torch.Tensor, distributed: bool = False) -> None:
        """Push the batch into the queue; ``distributed``: the global batch, gathered in rank order."""
        if distributed and self.queue.size > 0:
            emb_a, emb_b = gather_rows(emb_a), gather_rows(emb_b)  # (B_global, D)
        self.queue.push(emb_a, emb_b)

    def swapped_loss(self, emb_a: torch.Tensor, emb_b: torch.Tensor, distributed: bool = False) -> torch.Tensor:
        """L_s (Eq. 5) of a batch of unit-norm pair embeddings (B, D) against the swapped Sinkhorn targets of
        the batch plus the queue; then the batch joins the queue (Alg. 1, steps 3–6)."""
        prototypes = self.scaled_prototypes()  # formed once per step, for the targets and both heads
        q_a, q_b = self.targets(emb_a, emb_b, distributed, prototypes)
        logp = self.log_probs(torch.cat([emb_a, emb_b]), prototypes)  # (2B, K): both heads in one product
        l_s = swamp_loss(logp[:len(emb_a)], logp[len(emb_a):], q_a, q_b)
        self.remember(emb_a, emb_b, distributed)
        return l_s


@METHODS.register("swamp")
class SwAMP(SwappedAssignments):
    """SwAMP on modality-wise embeddings (optionally plus the contrastive hinge).

    With several processes (:func:`harness.run.distributed.is_distributed`) the Sinkhorn targets
    and the queue follow the global batch (:meth:`targets`, :meth:`remember`), while the
    hinge L_c takes its negatives from the process's own rows only. L_c is a sum over the
    batch and DDP averages gradients, so each process multiplies its L_c by the world size:
    the gradient is then that of the single-process sum over the global batch with each
    row's negatives drawn from its own shard, weighted against L_s (a mean) as in one process.
    """

    Params: ClassVar[type] = SwAMPParams

    def __init__(self, encoders: dict[str, nn.Module], params: SwAMPParams):
        super().__init__(encoders, params)
        self.pair_loss = PairLoss(params)

    def start_epoch(self, epoch: int) -> None:
        self.pair_loss.start_epoch(epoch)

    def contrastive_term(self, emb_a: torch.Tensor, emb_b: torch.Tensor,
                         distributed: bool) -> tuple[torch.Tensor, dict[str, Any]]:
        """L_contrastive of Eq. 6 and its logs: the task's pair loss (:class:`PairLoss`) with negatives from
        this process's rows (a subclass may pick another contrastive loss). ``contrastive_reduction: sum``
        keeps the family's sum over the batch (scaled for DDP's gradient mean when ``distributed``);
        ``mean`` divides it by this process's batch, whose gradient DDP's mean already averages. The logs
        hold the sum, the scale of its collapsed value."""
        l_c, collapsed = self.pair_loss(emb_a @ emb_b.T)
        logs = self.pair_loss.logs("contrastive", l_c, collapsed)
        if self.params.contrastive_reduction == "mean":
            return l_c / len(emb_a), logs
        return (global_batch_sum(l_c) if distributed else l_c), logs

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        p = self.params
        distributed = is_distributed()  # decided once per step; everything below follows it
        emb_a, emb_b = self.encode("a", x_a), self.encode("b", x_b)  # (B, D)
        l_s = self.swapped_loss(emb_a, emb_b, distributed)
        logs = {"swamp": l_s.detach()}
        total = p.lam * l_s
        if p.contrastive_weight > 0:
            l_c, c_logs = self.contrastive_term(emb_a, emb_b, distributed)
            logs.update(c_logs)
            total = total + p.contrastive_weight * l_c
        logs["loss"] = total.detach()
        return total, logs
