"""Reading one ``.npy`` array, memory-mapped, with errors that say what the file should hold."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from harness.errors import DataError

_MAGIC = b"\x93NUMPY"


def load(path: Path, ndim: int | None = None, layout: str = "") -> np.ndarray:
    """The array in ``path``, memory-mapped; unreadable files, files in another format, ``.npz`` archives
    and arrays of another number of dimensions (``layout`` describes the expected one, e.g.
    'N x regions x features') are errors."""
    try:
        with open(path, "rb") as f:
            magic = f.read(len(_MAGIC))
    except OSError as err:
        raise DataError(f"cannot read {path}: {err.strerror}; check that it is a readable file") from None
    if magic.startswith(b"PK"):
        raise DataError(f"{path} is an .npz archive, not one array; save each array with numpy.save")
    if magic != _MAGIC:
        raise DataError(f"{path} is not a .npy file (it lacks numpy's header); write it with numpy.save(path, array)")
    try:
        arr: np.ndarray = np.load(path, mmap_mode="r")
    except (OSError, ValueError, EOFError) as err:
        raise DataError(f"cannot read {path} as a numpy array ({err}); write it again with numpy.save(path, array) "
                        "and an array of numbers") from None
    if ndim is not None and arr.ndim != ndim:
        raise DataError(f"{path} has shape {arr.shape}; expected a {ndim}-D array{f' ({layout})' if layout else ''}")
    return arr
