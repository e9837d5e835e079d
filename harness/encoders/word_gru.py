"""Caption encoder of SCAN: word embeddings, a GRU, per-word features averaged over directions, L2 per word."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from harness.api import ENCODERS, ConfigError, require


@dataclass(frozen=True)
class WordGRUParams:
    word_dim: int = 300
    dim: int = 1024
    layers: int = 1
    bidirectional: bool = True
    normalize: bool = True

    def check(self, where: str) -> None:
        require(self.word_dim > 0 and self.dim > 0 and self.layers >= 1, where,
                "word_dim and dim must be > 0 and layers >= 1")


class WordGRU(nn.Module):
    """((B, L) token ids, (B,) lengths) → ((B, L, D) per-word features, (B,) lengths).

    Padded positions come out as zeros. A bidirectional GRU's two directions are averaged
    (SCAN's ``--bi_gru``), so the width stays D.
    """

    def __init__(self, vocab_size: int, word_dim: int, dim: int, layers: int = 1, bidirectional: bool = True,
                 normalize: bool = True):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, word_dim)
        nn.init.uniform_(self.embed.weight, -0.1, 0.1)  # SCAN's initialisation
        self.gru = nn.GRU(word_dim, dim, layers, batch_first=True, bidirectional=bidirectional)
        self.out_dim, self.normalize, self.bidirectional = dim, normalize, bidirectional

    def forward(self, x: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        tokens, lengths = x  # (B, L), (B,)
        packed = pack_padded_sequence(self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False)
        out, _ = self.gru(packed)
        out, _ = pad_packed_sequence(out, batch_first=True, total_length=tokens.shape[1])  # (B, L, dirs·D)
        if self.bidirectional:
            out = (out[..., : self.out_dim] + out[..., self.out_dim:]) / 2
        return (F.normalize(out, dim=-1) if self.normalize else out), lengths


@ENCODERS.register("word_gru")
class WordGRUEncoder:
    Params = WordGRUParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: WordGRUParams) -> nn.Module:
        if len(input_shape) != 2:
            raise ConfigError(f"word_gru expects captions (items of shape (max length, vocabulary size)), got items "
                              f"of shape {input_shape}; use an encoder for this data's items, such as mlp")
        return WordGRU(input_shape[-1], p.word_dim, p.dim, p.layers, p.bidirectional, p.normalize)
