"""Carries: changes of executed code shown by the canaries to leave every number as it was (``claims/carried.yaml``).

A committed result records the SHA-256 and git object name of every file its run executed
(:mod:`harness.store.executed`); any change of such a file other than a cosmetic one stales the result
(:mod:`harness.report.freshness`). A *carry* is the proof that one such change moved nothing:
``python -m harness carry`` (:mod:`harness.remake.carry`) runs the canaries that cover the file, and an
end-to-end run of the runner, with the code before and after the change, and records the change here only when every
number of both is bit-identical.

One entry per file and change::

    - file: harness/run/runner.py
      from: {sha256: ..., blob: ...}    # the version the change started from (its SHA-256 and git object name)
      to: {sha256: ..., blob: ...}      # the version it produced
      canaries: [cca, ..., end-to-end]  # the canaries that executed the file, with both versions: the method
                                        # canaries (tests/test_canaries.py) and the end-to-end run
      end_to_end: tiny synthetic task: contrastive, swamp, seed 0, 2 epochs, 1 thread   # what that run was
      machine: AMD EPYC 7B13 (avx512f, ...); torch 2.14.1
      date: '2026-11-29'
      base: <commit>                    # the commit whose other files both versions ran with

A result whose recorded version of a file reaches the checkout's version through a chain of carries (recorded ->
... -> current, each step's ``from`` equal to the version before it up to the cosmetic rule) reads as *carried*
rather than stale. This module reads the file and finds the chains; it trains nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from harness.errors import ConfigError

RECORD = Path("claims") / "carried.yaml"  # relative to the checkout
END_TO_END_CANARY = "end-to-end"  # the name, among a carry's canaries, of the end-to-end run
HEADER = ("# Changes of executed code that every canary covering them showed to leave every number bit-identical\n"
          "# (python -m harness carry; docs/claims.md, 'Evidence and code'). Written by that command: do not\n"
          "# edit it by hand.\n")


@dataclass(frozen=True)
class Version:
    """One version of a file: the SHA-256 of its bytes and the object name git gives them."""

    sha256: str
    blob: str


@dataclass(frozen=True)
class Carry:
    """One recorded change of one file, and what proved that it moves no number."""

    file: str
    before: Version
    after: Version
    canaries: tuple[str, ...]
    end_to_end: str
    machine: str
    date: str
    base: str

    def as_dict(self) -> dict[str, Any]:
        return {"file": self.file, "from": vars(self.before).copy(), "to": vars(self.after).copy(),
                "canaries": list(self.canaries), "end_to_end": self.end_to_end, "machine": self.machine,
                "date": self.date, "base": self.base}


def _version(item: Any, where: str) -> Version:
    if not isinstance(item, dict) or not all(isinstance(item.get(k), str) and item[k] for k in ("sha256", "blob")):
        raise ConfigError(f"{where}: must be a mapping with sha256: and blob: (the file's SHA-256 and git object "
                          "name); re-make the entry with python -m harness carry")
    return Version(item["sha256"], item["blob"])


def load(path: Path) -> list[Carry]:
    """The carries recorded at ``path`` (none when the file is absent); ConfigError naming the entry when one is
    malformed."""
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text()) or []
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({err}); restore it from git") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path}: must be a list of carries (python -m harness carry writes it)")
    out = []
    for i, item in enumerate(data):
        where = f"{path} entry {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("file"), str):
            raise ConfigError(f"{where}: must be a mapping with file:, from:, to: and canaries:")
        canaries = item.get("canaries")
        if not isinstance(canaries, list) or not canaries or not all(isinstance(c, str) for c in canaries):
            raise ConfigError(f"{where} ({item['file']}): canaries: must name the canaries that proved the change")
        out.append(Carry(item["file"], _version(item.get("from"), f"{where} from"), _version(item.get("to"),
                         f"{where} to"), tuple(canaries), str(item.get("end_to_end") or ""),
                         str(item.get("machine") or ""), str(item.get("date") or ""), str(item.get("base") or "")))
    return out


def dump(carries: list[Carry]) -> str:
    """The file's text for ``carries`` (in their order)."""
    body: str = yaml.safe_dump([c.as_dict() for c in carries], sort_keys=False, width=120,
                               default_flow_style=None)
    return HEADER + body


def chain(file: str, recorded: Version, current_sha256: str, carries: list[Carry],
          same: Callable[[Version, Version], bool], matches_current: Callable[[Version], bool]) -> list[Carry] | None:
    """The carries of ``file`` that lead from the ``recorded`` version to the checkout's (``current_sha256``), in
    order; None when none does. A step applies where its ``from`` is the version reached so far or the same code
    (``same``: the cosmetic rule); the chain ends where a step's ``to`` is the checkout's version or the same
    code (``matches_current``)."""
    mine = [c for c in carries if c.file == file]
    frontier: list[tuple[Version, list[Carry]]] = [(recorded, [])]
    seen: set[Version] = {recorded}
    while frontier:
        at, path = frontier.pop(0)
        for step in mine:
            if step.after in seen or not (step.before == at or step.before.sha256 == at.sha256
                                          or same(step.before, at)):
                continue
            route = [*path, step]
            if step.after.sha256 == current_sha256 or matches_current(step.after):
                return route
            seen.add(step.after)
            frontier.append((step.after, route))
    return None
