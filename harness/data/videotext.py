"""What the text–video sources share: video vectors, feature files, the held-out validation videos,
and the assembly of (video, caption) splits.

Modality ``a`` holds videos ((N, d) float32 vectors), ``b`` captions (padded word ids,
:mod:`harness.data.words`); ``b_to_a`` names each caption's video, so a video may have several
captions. Training splits whose videos have several captions draw one per video per epoch
(:class:`harness.data.words.CaptionDraw`); validation and test splits keep all their captions.
"""
from __future__ import annotations

import contextlib
import pickle
import re
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from harness.data.paired import PairedData, Split, expand_root
from harness.data.words import (
    CaptionDraw,
    Vocabulary,
    WordsFields,
    encode_words,
    fixed_vocabulary,
    learned_vocabulary,
    split_words,
)
from harness.errors import DataError

POOLS = ("mean", "max")
HOWTO100M_PUBLISHED = (
    "The HowTo100M authors (Miech et al., ICCV 2019) publish these CSVs, pre-extracted 2D/3D video features and "
    "the word2vec file in metadata_eval.zip, linked from the README of github.com/antoine77340/howto100m (section "
    "'Downloading meta-data for evaluation'); the file names are the defaults of that repository's args.py.")


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows (or a single vector) scaled to unit L2 norm; zero rows stay zero."""
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    out: np.ndarray = x / np.maximum(norm, 1e-12)
    return out


def pool_frames(frames: np.ndarray, how: str) -> np.ndarray:
    """(T, d) frame features -> (d,) by the mean or the max over time; a (d,) vector passes through."""
    if frames.ndim == 1:
        return frames
    pooled: np.ndarray = frames.mean(0) if how == "mean" else frames.max(0)
    return pooled


def howto_video(feat_2d: Any, feat_3d: Any, where: str) -> np.ndarray:
    """HowTo100M's 4,096-d video vector: the 2D and the 3D feature, each max-pooled over time when given
    per frame (T, d), each L2-normalised, concatenated (2D first)."""
    parts = []
    for name, feat in (("2d", feat_2d), ("3d", feat_3d)):
        arr = np.asarray(feat.numpy() if isinstance(feat, torch.Tensor) else feat, dtype=np.float32)
        if arr.ndim not in (1, 2) or arr.size == 0:
            raise DataError(f"{where}: the {name} feature has shape {arr.shape}; expected (d,) or (T, d)")
        parts.append(unit_rows(pool_frames(arr, "max")))
    return np.concatenate(parts)


def stack_videos(vectors: Sequence[np.ndarray], where: str) -> torch.Tensor:
    """(N, d) float32 tensor of equally long vectors."""
    widths = sorted({len(v) for v in vectors})
    if len(widths) > 1:
        raise DataError(f"{where}: video vectors have different lengths {widths[:5]}; all must match")
    return torch.from_numpy(np.stack(vectors).astype(np.float32)) if vectors else torch.zeros(0, 0)


# ---------------------------------------------------------------- files

class _ArraysOnly(pickle.Unpickler):
    """Unpickles containers, strings, numbers and numpy arrays, nothing that could run code."""

    ALLOWED = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy", "ndarray"), ("numpy", "dtype"), ("numpy.core.multiarray", "scalar"),
               ("numpy._core.multiarray", "scalar"), ("collections", "OrderedDict"), ("builtins", "set")}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"{module}.{name} is not allowed (only containers and numpy arrays are read)")


def read_pickle(path: Path) -> Any:
    """A pickle of containers and numpy arrays (YouCook2's ``youcook_*.pkl``), read without running code."""
    try:
        with open(path, "rb") as f:
            return _ArraysOnly(f, encoding="latin1").load()
    except (OSError, EOFError, pickle.UnpicklingError, ValueError, TypeError, AttributeError) as err:
        raise DataError(f"cannot read {path}: {err}") from err


def numpy_array_globals() -> list[Any]:
    """What a pickled numpy array or scalar names besides containers: the array and scalar reconstruction
    functions, ``ndarray``, ``dtype`` and the plain dtype classes (numbers, bool, bytes, str; numpy >= 1.25
    names them in ``numpy.dtypes``). Files written under numpy 1.x name the functions ``numpy.core.…``,
    under numpy 2 ``numpy._core.…``: both names map to the installed functions. None of them runs code
    beyond rebuilding an array."""
    multiarray = getattr(np, "_core", None) or np.core
    found: list[Any] = [np.ndarray, np.dtype]
    for name in ("_reconstruct", "scalar"):
        function = getattr(multiarray.multiarray, name)
        found += [function, (function, f"numpy.core.multiarray.{name}"), (function, f"numpy._core.multiarray.{name}")]
    dtypes = getattr(np, "dtypes", None)
    if dtypes is not None:
        found += [getattr(dtypes, n) for n in dir(dtypes)
                  if n.endswith("DType") and n not in ("ObjectDType", "VoidDType", "StringDType")]
    return found


def _numpy_allowed() -> contextlib.AbstractContextManager[Any]:
    """``torch.load(weights_only=True)`` with :func:`numpy_array_globals` allowed, for this block only."""
    allow = getattr(torch.serialization, "safe_globals", None)  # torch >= 2.5
    return allow(numpy_array_globals()) if allow is not None else contextlib.nullcontext()


_UNSUPPORTED = re.compile(r"Unsupported global: GLOBAL ([\w.]+)")


def read_feature_dict(path: Path) -> Mapping[str, Mapping[str, Any]]:
    """HowTo100M's feature dictionaries, ``{'2d': {video id: vector}, '3d': {...}}``: a torch file (zip or
    legacy serialisation, read with ``weights_only`` and numpy's array globals allowed, so that
    ``torch.save`` of numpy arrays loads) or a plain pickle of numpy arrays, whatever the suffix.
    Anything else a file names (a class, a function) is refused: loading it could run code."""
    feats = None if zipfile.is_zipfile(path) else _plain_pickle(path)
    if feats is None:
        try:
            with _numpy_allowed():
                feats = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as err:
            named = _UNSUPPORTED.search(str(err))
            if named is None:
                raise DataError(f"cannot read {path} as a torch file or a pickle of arrays: {err}") from err
            raise DataError(f"{path} holds {named.group(1)}, which is not read (only containers, tensors and numpy "
                            "arrays are: loading other objects could run code); save the features as "
                            "{'2d': {id: array}, '3d': {id: array}} of tensors or numpy arrays") from None
        except (OSError, EOFError, RuntimeError) as err:
            raise DataError(f"cannot read {path} as a torch file or a pickle of arrays: {err}") from err
    if not isinstance(feats, Mapping) or not all(isinstance(feats.get(k), Mapping) for k in ("2d", "3d")):
        keys = list(feats)[:5] if isinstance(feats, Mapping) else type(feats).__name__
        raise DataError(f"{path} must map '2d' and '3d' each to a dictionary of video id -> feature; found {keys}")
    return feats


def _plain_pickle(path: Path) -> Any:
    """The pickled mapping in ``path``, or None when it is not a plain pickle of one (a legacy torch
    file starts with a pickled magic number)."""
    try:
        found = read_pickle(path)
    except DataError:
        return None
    return found if isinstance(found, Mapping) else None


def videos_from_dict(feats: Mapping[str, Mapping[str, Any]], ids: Sequence[str], path: Path) -> torch.Tensor:
    """(N, 4096) HowTo100M vectors of ``ids`` from a feature dictionary; a missing id is an error."""
    missing = [v for v in ids if v not in feats["2d"] or v not in feats["3d"]]
    if missing:
        raise DataError(f"{path} has no 2d/3d features for {len(missing)} video(s) listed with captions, "
                        f"e.g. {missing[:3]}; the captions and the features must come from the same release")
    return stack_videos([howto_video(feats["2d"][v], feats["3d"][v], f"{path} [{v}]") for v in ids], str(path))


def howto_parts(rows: Sequence[tuple[str, str]], feats: Mapping[str, Mapping[str, Any]], path: Path
                ) -> tuple[torch.Tensor, list[list[str]], torch.Tensor]:
    """(videos (N, 4096), caption words, caption -> video) of (video id, caption) rows; videos in order of
    first appearance, their vectors from a HowTo100M feature dictionary."""
    ids = list(dict.fromkeys(v for v, _ in rows))
    return (videos_from_dict(feats, ids, path), [split_words(c) for _, c in rows],
            caption_owner(ids, [v for v, _ in rows], str(path)))


def check_files(source: str, root: Path, names: Sequence[str], published: str, p: WordsFields | None = None) -> None:
    """Stop, before anything is read or written, with the expected files (``names`` under ``root``, and
    the word vectors ``p`` names) and where they are published."""
    paths = [root / n for n in names] + ([resolve(p.word_vectors, root)] if p is not None and p.word_vectors else [])
    missing = [p for p in paths if not p.exists()]
    if missing:
        listing = "\n  ".join(f"{p}{'  (missing)' if p in missing else ''}" for p in paths)
        raise DataError(f"{source}: {len(missing)} file(s) missing under {root}. Expected:\n  {listing}\n{published}\n"
                        "Set dataset.root in the task file, the environment variable it names, "
                        "or pass --data-root PATH.")


def resolve(path_text: str, root: Path) -> Path:
    """A path from a task file (``~`` and ``${NAME:-default}`` expanded); relative ones are inside ``root``."""
    path = expand_root(path_text)
    return path if path.is_absolute() else root / path


# ---------------------------------------------------------------- splits

def holdout(groups: Sequence[str], n_groups: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(kept, held-out) item indices: ``n_groups`` distinct groups (videos) drawn with ``seed`` are held out,
    all their items with them, so no video is in both parts."""
    distinct = list(dict.fromkeys(groups))
    if not 0 < n_groups < len(distinct):
        raise DataError(f"cannot hold out {n_groups} of {len(distinct)} training videos for validation; "
                        f"choose between 1 and {len(distinct) - 1}")
    held = set(np.asarray(distinct, dtype=object)[np.random.default_rng(seed).permutation(len(distinct))[:n_groups]])
    mask = np.array([g in held for g in groups])
    return np.flatnonzero(~mask), np.flatnonzero(mask)


def caption_owner(video_ids: Sequence[str], caption_ids: Sequence[str], where: str) -> torch.Tensor:
    """(n_captions,) index of each caption's video among ``video_ids``; a caption of an unknown video is an error."""
    index = {v: i for i, v in enumerate(video_ids)}
    unknown = [c for c in caption_ids if c not in index]
    if unknown:
        raise DataError(f"{where}: {len(unknown)} caption(s) name videos without features, e.g. {unknown[:3]}")
    return torch.tensor([index[c] for c in caption_ids], dtype=torch.long)


def vocabulary(captions: Mapping[str, list[list[str]]], p: WordsFields, root: Path, origin: Path) -> Vocabulary:
    """Fixed word2vec vectors when ``p.word_vectors`` names a file, else learned embeddings over the
    training captions (``origin`` names the file they came from, for the vocabulary cache)."""
    if p.word_vectors:
        return fixed_vocabulary(resolve(p.word_vectors, root), [c for split in captions.values() for c in split])
    return learned_vocabulary(captions["train"], origin, p.min_word_count, Path(p.vocab_cache))


def assemble(parts: Mapping[str, tuple[torch.Tensor, list[list[str]], torch.Tensor]], p: WordsFields, root: Path,
             origin: Path, info: dict[str, Any]) -> PairedData:
    """PairedData from per-split (videos (N, d), caption word lists, caption -> video index)."""
    for name, (videos, _, owner) in parts.items():
        bare = int((torch.bincount(owner, minlength=len(videos)) == 0).sum())
        if bare:
            raise DataError(f"{origin}: {bare} {name} video(s) have no caption; every video needs at least one")
    vocab = vocabulary({name: words for name, (_, words, _) in parts.items()}, p, root, origin)
    splits, dropped = {}, {}
    for name, (videos, words, owner) in parts.items():
        captions, dropped[name] = encode_words(words, vocab.words, p.max_words)
        if name == "train" and len(captions) > len(videos):
            splits[name] = Split(videos, CaptionDraw(captions, owner, len(videos)))
        else:
            splits[name] = Split(videos, captions, b_to_a=owner)
    info = {**info, **vocab.info, "max_words": p.max_words, "videos": [len(s.a) for s in splits.values()],
            "captions": [len(parts[n][1]) for n in splits],
            "dropped_words": {k: round(v, 4) for k, v in dropped.items()},
            "train_captions_per_epoch": "one per video, drawn" if isinstance(splits["train"].b, CaptionDraw) else "all"}
    fixed = {"b": {"embed.weight": vocab.vectors}} if vocab.vectors is not None else {}
    return PairedData(splits, info, fixed)
