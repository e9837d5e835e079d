"""Class word vectors from a file the user provides (never downloaded).

Two formats. (1) A numpy array file (``.npy``, read without pickles) of one row per class with a
vocabulary file naming the rows in order: a pickled list of names (Doodle2Search's
``vocab_<dataset>.pkl``, read without running code) or a text file of one name a line. A class is
looked up as written, then case-insensitively with ``_`` and ``-`` read as spaces. (2) word2vec / GloVe
text, one ``word v1 v2 … vd`` per line; a first line of two integers
(word2vec's ``count dim`` header) is skipped. Words are matched case-insensitively. A class name
is looked up as written, then with ``_`` and ``-`` read as spaces; a name of several words that
is not in the file as a whole gets the mean of its words' vectors (``palm_tree`` -> mean of
``palm`` and ``tree``). The file is streamed: only the vectors of the words needed are kept.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
import torch

from harness.errors import DataError

_SEPARATORS = re.compile(r"[_\-\s]+")


def _forms(name: str) -> tuple[str, list[str]]:
    """(the whole name as one key, its words) of a class name, lower-cased."""
    words = [w for w in _SEPARATORS.split(name.lower()) if w]
    return " ".join(words), words


def _lines(path: Path) -> Iterator[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield from f
    except OSError as err:
        raise DataError(f"cannot read the word-vector file {path}: {err}") from err


def _read(path: Path, wanted: set[str]) -> dict[str, torch.Tensor]:
    """Vectors of the ``wanted`` (lower-case) words, the first occurrence of each; dims checked."""
    found: dict[str, torch.Tensor] = {}
    dim = None
    for number, line in enumerate(_lines(path), 1):
        parts = line.rstrip().split(" ")
        if number == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
            continue  # word2vec header: count dim
        word = parts[0].lower().replace("_", " ")
        if word not in wanted or word in found:
            continue
        try:
            vector = torch.tensor([float(v) for v in parts[1:]], dtype=torch.float32)
        except ValueError as err:
            raise DataError(f"{path}:{number}: expected 'word v1 … vd' with numbers, got {line[:60]!r}") from err
        if dim is not None and len(vector) != dim:
            raise DataError(f"{path}:{number}: vector of {len(vector)} numbers, earlier ones have {dim}")
        dim, found[word] = len(vector), vector
    return found


def read_vocabulary(path: Path) -> list[str]:
    """The row names of an array of class vectors: a pickled list/tuple of strings, or text lines."""
    if not path.is_file():
        raise DataError(f"vocabulary file {path} does not exist; give the names of the word-vector rows in "
                        "dataset.word_vocab (a pickled list, as Doodle2Search's vocab_<dataset>.pkl, "
                        "or one name a line)")
    if path.suffix == ".pkl":
        from harness.data.videotext import read_pickle

        names = read_pickle(path)
        if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
            raise DataError(f"{path} must hold a pickled list of class names, found {type(names).__name__}")
        return list(names)
    return [line.strip() for line in _lines(path) if line.strip()]


def array_vectors(path: Path, vocab: Path, names: Sequence[str]) -> torch.Tensor:
    """(len(names), d) float32 rows of the ``.npy`` array ``path`` named by ``vocab``."""
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read the word-vector array {path}: {err} (expected a numpy .npy file)") from err
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.number):
        raise DataError(f"{path} holds a {array.dtype} array of shape {array.shape}; expected (classes, dim) numbers")
    rows = read_vocabulary(vocab)
    if len(rows) != len(array):
        raise DataError(f"{vocab} names {len(rows)} classes but {path} has {len(array)} rows; they must match")
    exact = {n: i for i, n in reversed(list(enumerate(rows)))}  # the first occurrence, as list.index
    loose = {_forms(n)[0]: i for i, n in reversed(list(enumerate(rows)))}
    found = [exact.get(n, loose.get(_forms(n)[0])) for n in names]
    missing = [n for n, i in zip(names, found) if i is None]
    if missing:
        raise DataError(f"{vocab} has no entry for {len(missing)} class(es): {', '.join(missing)}; the vocabulary "
                        "must name every training class (looked up as written, then ignoring case, _ and -)")
    return torch.from_numpy(np.asarray(array[found], dtype=np.float32))


def class_vectors(path: str | Path, names: Sequence[str], vocab: str | Path | None = None) -> torch.Tensor:
    """(len(names), d) float32 word vectors of the class ``names`` read from ``path``: a ``.npy`` array
    whose rows ``vocab`` names, or a word2vec/GloVe text file.

    One DataError lists every class the file cannot give a vector for.
    """
    path = Path(path).expanduser()
    if path.suffix == ".npy":
        if not path.is_file():
            raise DataError(f"word-vector array {path} does not exist; give the file in dataset.word_vectors "
                            "(e.g. Doodle2Search's semantic_labels_<dataset>.npy, from its repository's src/data/)")
        if not vocab:
            raise DataError(f"{path} is an array of class vectors: name its rows with dataset.word_vocab "
                            "(Doodle2Search's vocab_<dataset>.pkl beside it)")
        return array_vectors(path, Path(vocab).expanduser(), names)
    if not path.is_file():
        raise DataError(f"word-vector file {path} does not exist; give a word2vec/GloVe text file "
                        "(one 'word v1 … vd' per line) in dataset.word_vectors")
    forms = [_forms(n) for n in names]
    found = _read(path, {w for whole, words in forms for w in (whole, *words)})
    vectors, missing = [], []
    for name, (whole, words) in zip(names, forms):
        if whole in found:
            vectors.append(found[whole])
        elif words and all(w in found for w in words):
            vectors.append(torch.stack([found[w] for w in words]).mean(0))
        else:
            missing.append(name)
    if missing:
        raise DataError(f"{path} has no vector for {len(missing)} class(es): {', '.join(missing)} "
                        "(looked up whole, with _ and - as spaces, and as the mean of their words); "
                        "add lines 'name v1 … vd' for them")
    return torch.stack(vectors)
