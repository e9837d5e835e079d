"""HowTo100M's encoders (Miech et al., ICCV 2019; SwAMP paper, text–video experiments).

* Gated embedding unit (Miech et al. 2018, "Learning a text-video embedding from incomplete and
  heterogeneous data", Eq. 1–2): ``y = normalize(z * sigmoid(W2 z + b2))`` with ``z = W1 x + b1``.
* ``gated_embedding`` (videos): a gated embedding unit on the (N, d) video vector.
* ``word_maxpool`` (captions): word vectors -> Linear -> ReLU -> max over the word positions -> gated
  embedding unit. Captions arrive as fixed-length padded ids (:mod:`harness.data.words`); the
  ``<pad>`` row of the word table is zero, so padded positions give ReLU(bias) inside the max,
  exactly as HowTo100M's zero-padded word vectors do. The word table ``embed`` is learned, or
  replaced by the data's fixed word2vec vectors (:class:`harness.data.paired.PairedData.fixed_weights`).

Parameter names follow HowTo100M's ``model.py`` so that its checkpoints map one to one
(:data:`HOWTO100M_KEYS`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from harness.api import ENCODERS, STATE_FORMATS, require


class ContextGating(nn.Module):
    """x * sigmoid(W x + b), elementwise."""

    def __init__(self, dim: int):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, D) -> (B, D)
        return x * torch.sigmoid(self.fc(x))


class GatedEmbeddingUnit(nn.Module):
    """Linear, context gating, L2 normalisation."""

    def __init__(self, in_features: int, dim: int):
        super().__init__()
        self.fc = nn.Linear(in_features, dim)
        self.cg = ContextGating(dim)
        self.out_dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, F) -> (B, D), unit rows
        return F.normalize(self.cg(self.fc(x)), dim=-1)


class WordMaxPool(nn.Module):
    """((B, L) padded word ids, (B,) lengths) -> (B, D) unit vectors."""

    def __init__(self, vocab_size: int, word_dim: int, hidden: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim, padding_idx=0)
        self.pool = nn.Linear(word_dim, hidden)
        self.gate = GatedEmbeddingUnit(hidden, dim)
        self.out_dim = dim

    def forward(self, x: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        ids, _ = x  # (B, L); padding included on purpose (module docstring)
        words = F.relu(self.pool(self.embed(ids)))  # (B, L, H)
        out: torch.Tensor = self.gate(words.amax(1))  # (B, D)
        return out


@dataclass(frozen=True)
class GatedParams:
    dim: int = 4096

    def check(self, where: str) -> None:
        require(self.dim > 0, where, f"dim must be > 0, got {self.dim}")


@dataclass(frozen=True)
class WordMaxPoolParams:
    word_dim: int = 300
    hidden: int = 0  # width of the Linear before the max; 0: dim (HowTo100M's sentence_dim = -1)
    dim: int = 4096

    def check(self, where: str) -> None:
        require(self.word_dim > 0 and self.dim > 0 and self.hidden >= 0, where,
                "word_dim and dim must be > 0, hidden >= 0 (0: equal to dim)")


@ENCODERS.register("gated_embedding")
class GatedEncoder:
    Params = GatedParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: GatedParams) -> nn.Module:
        if len(input_shape) != 1:
            raise ValueError(f"gated_embedding expects (d,) vectors, got items of shape {input_shape}; "
                             "pool frame features over time in the data source")
        return GatedEmbeddingUnit(input_shape[0], p.dim)


@ENCODERS.register("word_maxpool")
class WordMaxPoolEncoder:
    Params = WordMaxPoolParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: WordMaxPoolParams) -> nn.Module:
        if len(input_shape) != 2:
            raise ValueError(f"word_maxpool expects captions of shape (max words, vocabulary size), got {input_shape}")
        return WordMaxPool(input_shape[-1], p.word_dim, p.hidden or p.dim, p.dim)


# HowTo100M's Net (model.py) parameter names -> (modality role, our name within that encoder).
# Its Context_Gating also holds an unused BatchNorm (add_batch_norm=False): those entries are ignored.
HOWTO100M_KEYS = {
    "GU_video.fc.weight": ("video", "fc.weight"), "GU_video.fc.bias": ("video", "fc.bias"),
    "GU_video.cg.fc.weight": ("video", "cg.fc.weight"), "GU_video.cg.fc.bias": ("video", "cg.fc.bias"),
    "text_pooling.fc.weight": ("text", "pool.weight"), "text_pooling.fc.bias": ("text", "pool.bias"),
    "GU_text.fc.weight": ("text", "gate.fc.weight"), "GU_text.fc.bias": ("text", "gate.fc.bias"),
    "GU_text.cg.fc.weight": ("text", "gate.cg.fc.weight"), "GU_text.cg.fc.bias": ("text", "gate.cg.fc.bias"),
}


@STATE_FORMATS.register("howto100m")
def howto100m_state(state: Mapping[str, torch.Tensor], encoders: Mapping[str, nn.Module]
                    ) -> dict[str, torch.Tensor] | None:
    """HowTo100M's ``Net`` state dict under this harness's names (``encoders.<modality>.<parameter>``): its
    video unit goes to the modality encoded by ``gated_embedding``, its text pooling and unit to the one
    encoded by ``word_maxpool``. None when ``state`` holds none of HowTo100M's keys."""
    if not any(k in HOWTO100M_KEYS for k in state):
        return None
    roles = {"video": [m for m, e in encoders.items() if isinstance(e, GatedEmbeddingUnit)],
             "text": [m for m, e in encoders.items() if isinstance(e, WordMaxPool)]}
    out = {}
    for key, (role, name) in HOWTO100M_KEYS.items():
        if key in state and len(roles[role]) == 1:
            out[f"encoders.{roles[role][0]}.{name}"] = state[key]
    return out

