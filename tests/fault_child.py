"""``python -m tests.fault_child ARGS...`` is ``python -m harness ARGS...`` with one write interrupted at a
chosen moment, so that tests can kill a real process in the middle of a write (tests/test_faults.py,
tests/test_locks.py).

The moment is the ``HARNESS_FAULT_NTH``-th write (1 = the first) of the file named
``HARNESS_FAULT_FILE`` (e.g. ``seed0.resume.pt``) through :func:`harness.store.io.atomic_write`,
which every result, checkpoint, ranks file and table goes through. There the write puts half of
the file's bytes into its temporary file, flushes them to disk and then, by ``HARNESS_FAULT_MODE``:

- ``pause``: creates the file ``HARNESS_FAULT_MARKER`` and waits (the test sends SIGKILL now) until a
  file named like the marker plus ``.go`` appears, then writes the rest and carries on;
- ``enospc``: fails as a full disk does (OSError ENOSPC).
"""
from __future__ import annotations

import errno
import io
import os
import sys
import time
from pathlib import Path
from typing import IO, Callable

Writer = Callable[[IO[bytes]], None]


def faulty_atomic_write(real: Callable[[Path, Writer], None], name: str, nth: int, mode: str,
                        marker: Path | None = None) -> Callable[[Path, Writer], None]:
    """``real`` (harness.store.io.atomic_write) with the ``nth`` write of file ``name`` interrupted."""
    seen = [0]

    def atomic_write(path: Path, write: Writer) -> None:
        if path.name == name:
            seen[0] += 1
        if path.name != name or seen[0] != nth:
            return real(path, write)

        def half_then_fault(f: IO[bytes]) -> None:
            buffer = io.BytesIO()
            write(buffer)
            data = buffer.getvalue()
            f.write(data[: len(data) // 2])
            f.flush()
            os.fsync(f.fileno())
            if mode == "enospc":
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            assert marker is not None
            marker.touch()
            while not Path(f"{marker}.go").exists():
                time.sleep(0.01)
            f.write(data[len(data) // 2:])

        return real(path, half_then_fault)

    return atomic_write


def install_from_env() -> None:
    """Replace ``atomic_write`` in every harness module that imported it, as the environment says."""
    import harness.run.runner  # noqa: F401 (imported lazily by the CLI; it holds its own reference)
    from harness.store import io as results

    real = results.atomic_write
    patched = faulty_atomic_write(real, os.environ["HARNESS_FAULT_FILE"],
                                  int(os.environ.get("HARNESS_FAULT_NTH", "1")),
                                  os.environ.get("HARNESS_FAULT_MODE", "pause"),
                                  Path(os.environ["HARNESS_FAULT_MARKER"]) if "HARNESS_FAULT_MARKER" in os.environ
                                  else None)
    for module in list(sys.modules.values()):
        if getattr(module, "atomic_write", None) is real:
            module.atomic_write = patched


if __name__ == "__main__":
    from harness.cli import main

    if "HARNESS_FAULT_FILE" in os.environ:
        install_from_env()
    sys.exit(main(sys.argv[1:]))
