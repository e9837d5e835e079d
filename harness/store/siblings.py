"""A result file's siblings, named once: beside ``seed<k>.json`` the run writes its best epoch's weights
(``seed<k>.pt``, not committed) and every test query's rank (``seed<k>.ranks.npz``, committed: they feed the paired
bootstrap); the result file itself ends in ``.json``."""
from __future__ import annotations

from pathlib import Path

RESULT = ".json"
CHECKPOINT = ".pt"
RANKS = ".ranks.npz"
SIBLINGS: tuple[str, ...] = (RESULT, CHECKPOINT, RANKS)
"""Everything a finished run leaves under its ``seed<k>`` stem (copied together when a run is re-made)."""


def checkpoint_path(result: Path) -> Path:
    """``.../seed<k>.json`` -> ``.../seed<k>.pt``: the best epoch's weights."""
    return Path(result).with_suffix(CHECKPOINT)


def ranks_path(result: Path) -> Path:
    """``.../seed<k>.json`` -> ``.../seed<k>.ranks.npz``: every test query's rank."""
    return Path(result).with_suffix(RANKS)
