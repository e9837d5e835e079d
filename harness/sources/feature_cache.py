"""A content-addressed on-disk cache of frozen features (a pretrained backbone's output for a data file), so that a
backbone runs over a dataset once per machine rather than once per run.

An entry's key is the SHA-256 of everything its features depend on (:func:`key_of`: for the sources here, the data
file's own SHA-256, the split and modality, the backbone, its weights' SHA-256 and the preprocessing), so changing
any of them names another entry and nothing is ever invalidated in place. An entry is one ``<key>.npz`` file holding
the features, the SHA-256 of their bytes and the inputs' text; it is written to a temporary file in the same folder
and renamed over the name (atomic), so a reader sees a whole entry or none. On reading, an entry that is unreadable,
whose checksum or inputs differ, or whose shape is not the one expected is rebuilt and rewritten, never used.

The folder: the source's ``cache`` setting when given, else ``$SWAMP_BENCH_FEATURE_CACHE``, else
``$XDG_CACHE_HOME/swamp-bench/features`` (``~/.cache/swamp-bench/features``). Deleting it is always safe.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from harness.api import DataError, expand_root

ENV = "SWAMP_BENCH_FEATURE_CACHE"
FORMAT = 1  # bump when an entry's layout changes


def cache_dir(setting: str = "") -> Path:
    """The cache's folder: ``setting`` (``~`` and ``${NAME}`` expanded), else ``$SWAMP_BENCH_FEATURE_CACHE``, else
    the user's cache folder."""
    if setting:
        return expand_root(setting)
    if os.environ.get(ENV):
        return Path(os.environ[ENV]).expanduser()
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser()
    return base / "swamp-bench" / "features"


def inputs_text(inputs: Mapping[str, Any]) -> str:
    """The inputs as canonical JSON text (sorted keys): what the key hashes and what an entry stores."""
    return json.dumps({"format": FORMAT, **inputs}, sort_keys=True, separators=(",", ":"), default=str)


def key_of(inputs: Mapping[str, Any]) -> str:
    """The entry's key: SHA-256 of :func:`inputs_text`."""
    return hashlib.sha256(inputs_text(inputs).encode()).hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of a data file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _checksum(features: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(features).tobytes()).hexdigest()


def read_entry(path: Path, inputs: str, shape: tuple[int, ...]) -> tuple[np.ndarray | None, str]:
    """(features, '') from a sound entry, or (None, why it cannot be used)."""
    if not path.is_file():
        return None, "absent"
    try:
        with np.load(path, allow_pickle=False) as entry:
            features, checksum, stored = entry["features"], str(entry["sha256"]), str(entry["inputs"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as err:
        return None, f"unreadable ({type(err).__name__}: {err})"
    if stored != inputs:
        return None, "its inputs differ from the key's"
    if features.dtype != np.float32 or tuple(features.shape) != shape:
        return None, f"holds {features.dtype} {tuple(features.shape)}, expected float32 {shape}"
    if _checksum(features) != checksum:
        return None, "checksum mismatch"
    return features, ""


def write_entry(path: Path, inputs: str, features: np.ndarray) -> None:
    """Write an entry atomically: a temporary file in the same folder, renamed over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, features=features, sha256=np.array(_checksum(features)), inputs=np.array(inputs))
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's 0600 -> what a plain open() would have made
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def cached(folder: Path, inputs: Mapping[str, Any], shape: tuple[int, ...],
           compute: Callable[[], np.ndarray]) -> tuple[np.ndarray, dict[str, Any]]:
    """The features for ``inputs`` (float32 of ``shape``) from the cache, or from ``compute()`` written to it; with
    the record of the look-up: the key, and ``hit``, ``miss`` or ``rebuilt`` (with why the old entry was unusable)."""
    text = inputs_text(inputs)
    key = key_of(inputs)
    path = folder / f"{key}.npz"
    features, why = read_entry(path, text, shape)
    if features is not None:
        return features, {"key": key, "status": "hit"}
    features = np.ascontiguousarray(compute(), dtype=np.float32)
    if tuple(features.shape) != shape or not np.isfinite(features).all():
        raise DataError(f"the features computed for cache entry {key} are {tuple(features.shape)} or not finite, "
                        f"expected finite {shape}; the backbone or its input is broken")
    try:
        write_entry(path, text, features)
    except OSError as err:
        raise DataError(f"cannot write the feature cache entry {path}: {err}; set the cache folder with the "
                        f"source's cache setting or {ENV} to a writable folder") from err
    record = {"key": key, "status": "miss" if why == "absent" else "rebuilt"}
    if why != "absent":
        record["rebuilt_because"] = why
    return features, record
