"""Captions as HowTo100M reads them (Miech et al., ICCV 2019): word lists, word2vec vectors,
fixed-length id sequences.

* Words: ``re.findall(r"[\\w']+", sentence)``, case kept (HowTo100M's ``_tokenize_text``; the
  GoogleNews vectors are case-sensitive).
* Out-of-vocabulary words are dropped, not mapped to ``<unk>``; then the first ``max_words``
  (20) are kept. A caption left without words is all padding, as in HowTo100M.
* Vocabulary with a word2vec file: ``<pad>`` = 0 (a zero vector), then every word of any split's
  captions that the file holds, first seen first; the vectors stay fixed (HowTo100M feeds them as
  inputs). Without a file: ``<pad>``, then the training captions' words seen at least
  ``min_word_count`` times, learned by the text encoder (cached like SCAN's vocabulary).
* Every caption is zero-padded to ``max_words`` ids, as HowTo100M pads its word vectors, so the
  padding takes part in the text encoder's max over words exactly as there.

:func:`read_word2vec` reads word2vec's binary and text formats (written for this project: the
format is a header line ``<words> <dims>`` followed, per word, by the word, a space, and either
``dims`` little-endian float32 values (binary) or ``dims`` decimal numbers (text)).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np
import torch
import torch.nn.functional as F

from harness.config.params import require
from harness.data.text import TokenCaptions, cached_vocab
from harness.errors import DataError

PAD_WORD = "<pad>"
TOKENIZER = "howto100m-words-1"
GOOGLE_NEWS = ("word2vec GoogleNews-vectors-negative300.bin (Mikolov et al. 2013), published with word2vec "
               "(code.google.com/archive/p/word2vec) and shipped in HowTo100M's metadata_eval.zip")
_WORD = re.compile(r"[\w']+")
_CHUNK = 1 << 20


def split_words(sentence: str) -> list[str]:
    """HowTo100M's word list of a caption: runs of word characters and apostrophes, case kept."""
    return _WORD.findall(sentence)


@dataclass(frozen=True)
class WordsFields:
    """Caption settings shared by the text–video sources."""

    word_vectors: str = ""
    max_words: int = 20
    min_word_count: int = 1
    vocab_cache: str = "results/cache"

    def check_words(self, where: str) -> None:
        require(self.max_words >= 1, where, f"max_words must be >= 1, got {self.max_words}")
        require(self.min_word_count >= 1, where, f"min_word_count must be >= 1, got {self.min_word_count}")


class PaddedCaptions(TokenCaptions):
    """:class:`harness.data.text.TokenCaptions` whose batches are always ``length`` ids wide (zero-padded)."""

    def __init__(self, tokens: torch.Tensor, offsets: torch.Tensor, vocab_size: int, length: int):
        super().__init__(tokens, offsets, vocab_size)
        self.length = length

    @classmethod
    def from_sequences(cls, sequences: list[list[int]], vocab_size: int, length: int) -> "PaddedCaptions":
        """Build from lists of at most ``length`` token ids."""
        base = TokenCaptions.from_ids(sequences, vocab_size)
        return cls(base.tokens, base.offsets, vocab_size, length)

    @property
    def item_shape(self) -> tuple[int, int]:
        return (self.length, self.vocab_size)

    def take(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, length) int64 ids, zero-padded, and (B,) lengths (0 for a caption without known words)."""
        ids, lengths = super().take(index)
        return F.pad(ids, (0, self.length - ids.shape[1])), lengths


class CaptionDraw:
    """Training captions seen one per video: every ``take`` draws, for each video asked for, one of its
    captions uniformly (torch's global generator, which resuming restores). MSR-VTT trains this way:
    one of a video's 20 captions per epoch (HowTo100M's ``MSRVTT_TrainDataLoader``)."""

    def __init__(self, captions: PaddedCaptions, caption_video: torch.Tensor, n_videos: int):
        self.captions, self.n_videos = captions, n_videos
        self.order = torch.argsort(caption_video, stable=True)  # caption ids grouped by video
        self.counts = torch.bincount(caption_video, minlength=n_videos)  # (V,), all >= 1 (checked by the source)
        self.starts = torch.cumsum(self.counts, 0) - self.counts  # (V,)

    def __len__(self) -> int:
        return self.n_videos

    @property
    def item_shape(self) -> tuple[int, int]:
        return self.captions.item_shape

    def take(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One random caption of each video in ``index``: (B, length) ids and (B,) lengths."""
        counts = self.counts[index]  # (B,)
        offset = torch.minimum((torch.rand(len(index)) * counts).long(), counts - 1)
        return self.captions.take(self.order[self.starts[index] + offset])


# ---------------------------------------------------------------- word2vec files

def _header(f: BinaryIO, path: Path) -> tuple[int, int]:
    parts = f.readline().split()
    if len(parts) != 2 or not all(p.isdigit() for p in parts) or int(parts[1]) < 1:
        raise DataError(f"{path} is not a word2vec file: its first line must be '<number of words> <dimensions>'")
    return int(parts[0]), int(parts[1])


def _is_text(sample: bytes, dim: int) -> bool:
    """Whether the first entry after the header is a text line of a word and ``dim`` numbers."""
    parts = sample.split(b"\n", 1)[0].split()
    if len(parts) != dim + 1:
        return False
    try:
        [float(x) for x in parts[1:]]
    except ValueError:
        return False
    return True


def _binary_entries(f: BinaryIO, n: int, dim: int, path: Path) -> Iterator[tuple[bytes, bytes]]:
    """(word, raw float32 vector) per entry, read in 1 MiB chunks."""
    width, buf, pos = 4 * dim, b"", 0
    for i in range(n):
        while True:
            space = buf.find(b" ", pos)
            if space != -1 and len(buf) >= space + 1 + width:
                break
            more = f.read(_CHUNK)
            if not more:
                raise DataError(f"{path} ends inside entry {i + 1} of the {n} its header announces")
            buf, pos = buf[pos:] + more, 0
        yield buf[pos:space].strip(b"\n\r"), buf[space + 1: space + 1 + width]
        pos = space + 1 + width


def _text_entries(f: BinaryIO, n: int, dim: int, path: Path) -> Iterator[tuple[bytes, bytes]]:
    """(word, the rest of its line) per entry."""
    for i in range(n):
        line = f.readline()
        if not line:
            raise DataError(f"{path} has {i} entries; its header announces {n}")
        word, _, rest = line.rstrip(b"\r\n").partition(b" ")
        yield word, rest


def _vector(raw: bytes, binary: bool, dim: int, path: Path, word: bytes) -> np.ndarray:
    if binary:
        return np.frombuffer(raw, dtype="<f4").astype(np.float32)
    try:
        values = np.array([float(x) for x in raw.split()], dtype=np.float32)
    except ValueError:
        values = np.zeros(0, dtype=np.float32)
    if len(values) != dim:
        raise DataError(f"{path}: the vector of {word.decode('utf-8', 'replace')!r} is not {dim} numbers")
    return values


def read_word2vec(path: Path, wanted: set[str]) -> tuple[dict[str, np.ndarray], int]:
    """The vectors of the ``wanted`` words that the word2vec file ``path`` holds (binary or text format,
    detected from the first entry), and the file's dimension. Other entries are skipped unparsed."""
    keys = {w.encode("utf-8"): w for w in wanted}
    found: dict[str, np.ndarray] = {}
    try:
        with open(path, "rb") as f:
            n, dim = _header(f, path)
            start = f.tell()
            binary = not _is_text(f.read(64 * dim + 256), dim)
            f.seek(start)
            entries = (_binary_entries if binary else _text_entries)(f, n, dim, path)
            for word, raw in entries:
                if word in keys and keys[word] not in found:
                    found[keys[word]] = _vector(raw, binary, dim, path, word)
    except OSError as err:
        raise DataError(f"cannot read word vectors {path}: {err}") from err
    return found, dim


# ---------------------------------------------------------------- vocabulary and captions

@dataclass
class Vocabulary:
    """Id → word, the fixed vectors (None: learned embeddings) and a description for result files."""

    words: list[str]
    vectors: torch.Tensor | None = None  # (V, D), row 0 zeros
    info: dict[str, Any] = field(default_factory=dict)


def first_seen(captions: list[list[str]]) -> list[str]:
    """Distinct words in order of first occurrence."""
    return list(dict.fromkeys(w for words in captions for w in words))


def fixed_vocabulary(path: Path, captions: list[list[str]]) -> Vocabulary:
    """``<pad>`` plus every caption word the word2vec file holds, with its vector."""
    if not path.is_file():
        raise DataError(f"word vectors file {path} is missing. Expected the {GOOGLE_NEWS}, or any word2vec "
                        "binary/text file; set dataset.word_vectors to its path, or to '' to learn embeddings "
                        "over the training vocabulary instead")
    needed = first_seen(captions)
    found, dim = read_word2vec(path, set(needed))
    words = [PAD_WORD] + [w for w in needed if w in found]
    vectors = torch.from_numpy(np.stack([np.zeros(dim, np.float32)] + [found[w] for w in words[1:]]))
    return Vocabulary(words, vectors, {"text": f"word2vec {path} ({dim}-d, fixed)", "word_vectors": str(path),
                                       "word_dim": dim, "vocab_size": len(words)})


def learned_vocabulary(train: list[list[str]], origin: Path, min_count: int, cache: Path) -> Vocabulary:
    """``<pad>`` plus the training words seen ``min_count`` times, cached by the training captions' hash."""
    key = "\n".join(" ".join(words) for words in train).encode("utf-8")
    words, vocab_file = cached_vocab(origin, train, min_count, cache, key_bytes=key, tokenizer=TOKENIZER,
                                     specials=(PAD_WORD,))
    return Vocabulary(words, None, {"text": "learned embeddings over the training vocabulary",
                                    "word_vectors": None, "vocab_size": len(words), "vocab_file": str(vocab_file)})


def encode_words(captions: list[list[str]], words: list[str], max_words: int) -> tuple[PaddedCaptions, float]:
    """Known words only, the first ``max_words`` of them, as padded ids; and the share of words dropped."""
    index = {w: i for i, w in enumerate(words)}
    ids = [[index[w] for w in c if w in index] for c in captions]
    total = sum(len(c) for c in captions)
    dropped = 1.0 - sum(len(s) for s in ids) / total if total else 0.0
    return PaddedCaptions.from_sequences([s[:max_words] for s in ids], len(words), max_words), dropped
