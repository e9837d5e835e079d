"""Captions as token ids: a word tokenizer, SCAN's vocabulary, and compact variable-length storage.

Vocabulary (as SCAN's ``vocab.py``): ``<pad>`` = 0, ``<start>`` = 1, ``<end>`` = 2,
``<unk>`` = 3, then every word seen at least ``min_count`` times in the training captions,
in order of first occurrence. A caption becomes ``<start> w_1 … w_n <end>``.

Tokenizer: lower-cased, then a regular expression instead of NLTK's Punkt/Treebank
``word_tokenize`` (no download). Like Treebank it splits punctuation off words, splits
clitics (``man's`` → ``man 's``, ``don't`` → ``do n't``) and keeps hyphenated words and
decimals whole (``t-shirt``, ``3.5``). It differs on rarer cases: quotes stay single
characters (Treebank rewrites them to `` and ''), ``cannot`` stays one word (Treebank:
``can not``), and no sentence splitting happens (a caption is one sentence anyway).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import torch

from harness.errors import DataError
from harness.store.io import write_text_atomic

SPECIALS = ("<pad>", "<start>", "<end>", "<unk>")
PAD, START, END, UNK = range(4)
TOKENIZER_VERSION = "regex-1"
_TOKEN = re.compile(r"[a-z0-9]+(?=n't)|n't|'[a-z]+|[a-z0-9]+(?:[-.][a-z0-9]+)*|[^\sa-z0-9]")


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens of one caption (see the module docstring for the rules)."""
    return _TOKEN.findall(text.lower())


def read_lines(path: Path) -> list[str]:
    """One caption per line, UTF-8, surrounding whitespace stripped; a final newline adds no caption."""
    raw = path.read_bytes()
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        raise DataError(f"{path} is not UTF-8 text (line {line}, byte {err.start}: {raw[err.start:err.start + 1]!r}); "
                        "re-save it as UTF-8, e.g. iconv -f latin1 -t utf-8") from None
    if lines and lines[-1].strip() == "":
        lines.pop()
    return [line.strip() for line in lines]


def build_vocab(captions: Iterable[list[str]], min_count: int, specials: tuple[str, ...] = SPECIALS) -> list[str]:
    """Index → word: the specials, then words with at least ``min_count`` occurrences, first seen first."""
    counts = Counter(token for tokens in captions for token in tokens)
    return list(specials) + [w for w, n in counts.items() if n >= min_count and w not in specials]


def vocab_key(caption_bytes: bytes, min_count: int, tokenizer: str = TOKENIZER_VERSION,
              specials: tuple[str, ...] = SPECIALS) -> str:
    """Hash of everything the vocabulary depends on: the training captions, the threshold, the tokenizer."""
    h = hashlib.sha256(caption_bytes)
    h.update(f"|min_count={min_count}|tokenizer={tokenizer}|specials={','.join(specials)}".encode())
    return h.hexdigest()[:16]


def cached_vocab(caption_file: Path, tokens: list[list[str]], min_count: int, cache_dir: Path, *,
                 key_bytes: bytes | None = None, tokenizer: str = TOKENIZER_VERSION,
                 specials: tuple[str, ...] = SPECIALS) -> tuple[list[str], Path]:
    """The vocabulary of ``tokens`` (the tokenized ``caption_file``), read from ``cache_dir`` when a file
    with the same input hash exists, else built and written there atomically.

    The hash covers ``key_bytes`` (default: the bytes of ``caption_file``; a source whose captions
    sit in a larger file passes the training captions themselves), ``tokenizer`` and ``specials``."""
    key = vocab_key(caption_file.read_bytes() if key_bytes is None else key_bytes, min_count, tokenizer, specials)
    path = cache_dir / f"vocab-{key}.json"
    if path.exists():
        return json.loads(path.read_text())["words"], path
    words = build_vocab(tokens, min_count, specials)
    write_text_atomic(path, json.dumps({"source": str(caption_file), "min_count": min_count,
                                        "tokenizer": tokenizer, "words": words}))
    return words, path


class TokenCaptions:
    """Variable-length token sequences stored flat; ``take(index)`` pads a batch to its longest.

    Item shape is (longest caption, vocabulary size): a caption is a sequence over the
    vocabulary, which is what a text encoder sizes itself from.
    """

    def __init__(self, tokens: torch.Tensor, offsets: torch.Tensor, vocab_size: int):
        self.tokens, self.offsets, self.vocab_size = tokens, offsets, vocab_size  # (T,), (N + 1,)
        self.lengths = offsets[1:] - offsets[:-1]  # (N,)

    @classmethod
    def from_ids(cls, sequences: list[list[int]], vocab_size: int) -> "TokenCaptions":
        """Build from lists of token ids."""
        lengths = torch.tensor([len(s) for s in sequences], dtype=torch.long)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        tokens = torch.tensor([t for s in sequences for t in s], dtype=torch.int32)
        return cls(tokens, offsets, vocab_size)

    def __len__(self) -> int:
        return len(self.lengths)

    @property
    def item_shape(self) -> tuple[int, int]:
        return (int(self.lengths.max()) if len(self) else 0, self.vocab_size)

    def take(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, L) int64 ids zero-padded to the batch's longest caption, and (B,) lengths."""
        lengths = self.lengths[index]
        positions = torch.arange(int(lengths.max()) if len(lengths) else 0)
        valid = positions[None, :] < lengths[:, None]  # (B, L)
        ids = torch.zeros(valid.shape, dtype=torch.long)
        ids[valid] = self.tokens[(self.offsets[index][:, None] + positions[None, :])[valid]].long()
        return ids, lengths

    def subset(self, n: int) -> "TokenCaptions":
        """The first ``n`` captions."""
        return TokenCaptions(self.tokens[: int(self.offsets[n])], self.offsets[: n + 1], self.vocab_size)


def encode_captions(captions: list[list[str]], words: list[str]) -> TokenCaptions:
    """``<start>`` + word ids (``<unk>`` for unknown words) + ``<end>`` for every tokenized caption."""
    index = {w: i for i, w in enumerate(words)}
    return TokenCaptions.from_ids([[START, *(index.get(t, UNK) for t in c), END] for c in captions], len(words))
