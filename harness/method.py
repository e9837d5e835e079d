"""The interface every method in ``baselines/`` implements.

A method owns its encoders (and any extra parameters or state such as SwAMP's
prototypes and queue). The training loop only calls :meth:`Method.start_epoch` and
:meth:`Method.loss`; the evaluation only calls :meth:`Method.encode` and :meth:`Method.score`.
Methods whose similarity is not a dot product (cross attention) override ``score``.
A method fitted in closed form rather than by gradient steps (CCA) sets
``trains_by_gradient = False`` and implements :meth:`Method.fit_closed_form` instead of ``loss``.
"""
from __future__ import annotations

from typing import Any, ClassVar, cast

import torch
import torch.nn.functional as F
from torch import nn

from harness.data.paired import Split
from harness.errors import ConfigError


class Method(nn.Module):
    """Base class: L2-normalised embeddings per modality, cosine similarity."""

    Params: ClassVar[type]
    registry_name: ClassVar[str]
    trains_by_gradient: ClassVar[bool] = True  # False: the runner calls fit_closed_form once instead
    # What ``score`` computes from two embeddings, for an approximate nearest-neighbour index (test.search):
    # 'inner_product' (the default dot product of unit vectors), 'l2' (negative Euclidean distance), or None
    # when the score is no function of one vector per item (cross attention).
    search_metric: ClassVar[str | None] = "inner_product"

    def __init__(self, encoders: dict[str, nn.Module], params: Any):
        super().__init__()
        self.encoders = nn.ModuleDict(encoders)
        self.params = params

    @classmethod
    def build(cls, encoders: dict[str, nn.Module], params: Any, data: Any) -> "Method":
        """The method for a task's data (a :class:`harness.data.paired.PairedData`). Most methods need only the
        encoders; one whose extra parts are sized by the data (a head regressing class word vectors)
        overrides this and raises ConfigError when the data lack what it needs."""
        return cls(encoders, params)

    @classmethod
    def fit_warnings(cls, params: Any, n_pairs: int, batch_size: int) -> list[str]:
        """Lines saying which of the method's settings ``params`` do not fit a training split of ``n_pairs``
        pairs taken in batches of ``batch_size`` (each naming the setting, its value, the data's size and a
        value that fits); ConfigError where the run could not mean anything. The checks before training
        print the lines and the result file keeps them (:func:`harness.run.preflight.fit_warnings`). No lines by
        default."""
        return []

    @classmethod
    def settle(cls, params: Any, n_pairs: int, batch_size: int) -> Any:
        """``params`` with each setting given as ``auto`` replaced by the value that fits a training split of
        ``n_pairs`` pairs taken in batches of ``batch_size`` (SwAMP's K and queue); the same object when nothing
        is ``auto``. The run records the values it used. Nothing by default."""
        return params

    @classmethod
    def tiny_settings(cls) -> dict[str, Any]:
        """Settings (YAML keys of ``Params``) small enough for the test suite's seconds-long contract tests; the
        ``Params`` defaults unless a method overrides this (a queue of thousands of rows, say)."""
        return {}

    @property
    def encoder_width(self) -> int:
        """Output width shared by both encoders (they must agree)."""
        # every encoder sets an int ``out_dim`` (harness.encoders); nn.Module types attributes as tensors or modules
        dims = {m: cast(int, enc.out_dim) for m, enc in self.encoders.items()}
        if len(set(dims.values())) != 1:
            raise ConfigError(f"encoders disagree on the embedding size: {dims}; give encoders.a and encoders.b "
                              "the same output size (dim)")
        return next(iter(dims.values()))

    @property
    def embed_dim(self) -> int:
        """Width of the joint embedding: the encoders' width unless a method pools further."""
        return self.encoder_width

    def encode(self, modality: str, x: Any) -> torch.Tensor:
        """(B, D) unit-norm embeddings of a batch of ``modality`` ('a' or 'b') items."""
        return F.normalize(self.encoders[modality](x), dim=-1)

    def score(self, emb_a: Any, emb_b: Any) -> torch.Tensor:
        """(n_a, n_b) similarity of every a item to every b item; the embeddings are what :meth:`encode` returns
        (a method scoring by cross attention keeps sets of vectors, not one tensor)."""
        out: torch.Tensor = emb_a @ emb_b.T
        return out

    def score_within(self, emb_a: Any, emb_b: Any, deadline: float | None) -> tuple[torch.Tensor, float]:
        """The scores that can be computed before ``time.perf_counter()`` passes ``deadline`` (None: all) and
        the fraction of entries computed; entries not computed are NaN. By default everything is scored."""
        return self.score(emb_a, emb_b), 1.0

    @property
    def scores_in_blocks(self) -> bool:
        """True when ``score(emb_a[rows], emb_b[cols])`` is block (rows, cols) of ``score(emb_a, emb_b)`` for any rows
        and columns and scoring has no time budget: the test retrieval may then stream over blocks of the score
        matrix instead of forming it whole (``test.path: auto``; :mod:`harness.ops.streaming`). By default, true
        unless the method scores through its own :meth:`score_within` (a scorer that may stop part-way); a method
        whose scorer plans its own chunks over the whole matrix (SCAN) sets it False."""
        return type(self).score_within is Method.score_within

    @property
    def test_time_budget_s(self) -> float | None:
        """Seconds that the test scoring of one protocol may take (None: no limit); see :meth:`score_within`."""
        return None

    @property
    def times_pair_pass(self) -> bool:
        """True when the method reproduces a released evaluation that does more than encode each item once,
        score and rank: it also encodes every test pair as its data loader yields them (an a item once per
        b item) and computes the training loss of every batch of pairs (SCAN's ``encode_data``). The runner
        then times those two steps too (``test_pair_encode``, ``test_loss``; :func:`harness.run.evaluate.pair_pass`),
        beside the protocol's own test time. False by default."""
        return False

    def embedded_loss(self, emb_a: Any, emb_b: Any) -> torch.Tensor:
        """The training loss of a batch of pair embeddings (row i of ``emb_a`` with row i of ``emb_b``), for the
        pair pass of a method whose :attr:`times_pair_pass` is True."""
        raise NotImplementedError(f"{type(self).__name__} has no pair pass in its evaluation")

    def one_off_timings(self) -> dict[str, float]:
        """Seconds of one-off costs inside the training steps (a kernel compiled on first use), by key; the
        runner records each once in the result's timing table, apart from the step times. Empty by default."""
        return {}

    def fitted_warnings(self) -> list[str]:
        """Lines saying what looks wrong with the model as trained or fitted (a closed-form fit that reproduces
        its training pairs exactly, say), each naming what was seen and the setting to change; the runner
        prints them after training and the result file keeps them with the fit warnings. No lines by default."""
        return []

    def start_epoch(self, epoch: int) -> None:
        """Called by the training loop before the steps of every epoch (1-based, also when a run resumes),
        for methods whose loss depends on the epoch (a warm-up); nothing by default."""

    def fit_closed_form(self, split: Split) -> None:
        """Fit every parameter from the training ``split`` at once (methods with ``trains_by_gradient =
        False``); the runner times it as the run's only training epoch."""
        raise NotImplementedError(f"{type(self).__name__} trains by gradient steps; it has no closed-form fit")

    def loss(self, x_a: Any, x_b: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Training loss of a batch of pairs (row i of x_a with row i of x_b) and detached scalars to log."""
        raise NotImplementedError
