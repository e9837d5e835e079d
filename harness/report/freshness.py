"""Whether a result still describes the code of a checkout: fresh, stale, dirty or unverifiable.

A result file's ``executed`` record (:mod:`harness.store.executed`) names every file its run executed with the
SHA-256 of its bytes and the git object name of that version. Against a checkout, a result is

* **fresh** when every recorded file has the same bytes there, or differs only cosmetically (below), and every
  data file it read under the dataset root is unchanged (where that folder is found here);
* **stale** when a recorded file's code differs (named, with the changed functions where the run's version
  is in the repository), a recorded file is gone, or a data file it read differs;
* **dirty** when its files are the checkout's but the run executed code that no commit holds (a file differed
  from the recorded commit and differs from HEAD's too, or a file was edited while the run ran:
  :func:`harness.store.executed.ran_uncommitted`);
* **unverifiable** when the result has no record (it predates records).

A file whose code differs is *carried* instead of stale where ``claims/carried.yaml`` holds a chain of carries from
the version that ran to the checkout's (:mod:`harness.report.carried`): changes that the canaries covering the file
and an end-to-end run showed to leave every number bit-identical (``python -m harness carry``). A result whose
changed files are all carried keeps the state it would have without them (fresh, or dirty) and says so in its
label: ``carried (by canaries ...)``; :attr:`Freshness.carried` names the files and the canaries.

The cosmetic rule (:func:`harness.store.executed.normalized_source`, applied here): a Python file whose AST,
docstrings left out, equals that of the version that ran differs only in comments, docstrings, blank lines, line
breaks or quoting, and keeps its results fresh (the check names it as a cosmetic change). Any other change stales,
a renamed variable or a reordered statement included, whether or not it changes a number. The C source of the
native kernel and other non-Python files have no cosmetic rule: every byte counts. Telling a cosmetic change needs
the version that ran: its object must be in the repository (it is when the run's files were committed); where it is
not, any change stales.
"""
from __future__ import annotations

import ast
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from harness.data.paired import expand_root
from harness.errors import DataError
from harness.report import carried as ca
from harness.store import executed as ex

FRESH, STALE, DIRTY, UNVERIFIABLE = "fresh", "stale", "dirty", "unverifiable"
STATES = (FRESH, STALE, DIRTY, UNVERIFIABLE)
_ORDER = {FRESH: 0, UNVERIFIABLE: 1, DIRTY: 2, STALE: 3}  # the worst of several runs is the highest


@dataclass(frozen=True)
class Freshness:
    """One result (or several, :func:`combine`) against a checkout."""

    state: str
    changed: tuple[str, ...] = ()  # recorded files whose code differs, or that are gone
    functions: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> changed functions
    cosmetic: tuple[str, ...] = ()  # files that differ only cosmetically
    data: tuple[str, ...] = ()  # data files that differ or are gone
    dirty: tuple[str, ...] = ()  # files that ran uncommitted or changed during the run
    notes: tuple[str, ...] = ()
    runs: int = 1
    carried: dict[str, tuple[str, ...]] = field(default_factory=dict)  # file -> the canaries of its carries

    def label(self, limit: int = 3) -> str:
        """The state, with what made it so where there is something to say: ``stale: code changed: ...``,
        ``carried (by canaries swamp, contrastive)`` for a fresh result whose changed files are all carried."""
        if self.state == FRESH and self.carried:
            return f"carried (by canaries {_few(self.canaries(), limit)})"
        return self.state if self.state in (FRESH, UNVERIFIABLE) else f"{self.state}: {self.why(limit)}"

    def canaries(self) -> list[str]:
        """Every canary that proved one of the carried changes, sorted."""
        return sorted({c for names in self.carried.values() for c in names})

    def why(self, limit: int = 6) -> str:
        """One line: what made it so."""
        if self.state == UNVERIFIABLE:
            return "; ".join(["no record of what ran (made before result files recorded it): re-make it",
                              *self.notes])
        parts = []
        if self.changed:
            named = [f"{f} ({', '.join(self.functions[f])})" if self.functions.get(f) else f for f in self.changed]
            parts.append("code changed: " + _few(named, limit))
        if self.data:
            parts.append("data changed: " + _few(list(self.data), limit))
        if self.dirty:
            parts.append("ran uncommitted code: " + _few(list(self.dirty), limit))
        if not parts:
            parts.append("every file it ran is unchanged" + (" or carried" if self.carried else "")
                         + (f" (cosmetic edits: {_few(list(self.cosmetic), limit)})" if self.cosmetic else ""))
        if self.carried:
            parts.append(f"carried: {_few(sorted(self.carried), limit)} (by canaries {_few(self.canaries(), limit)})")
        return "; ".join(parts + list(self.notes))


def _few(items: list[str], limit: int) -> str:
    return ", ".join(items[:limit]) + (f" and {len(items) - limit} more" if len(items) > limit else "")


class Checkout:
    """A checkout to judge results against, with caches shared by every result judged (a folder's runs share
    most of their files)."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = (root or ex.ROOT).resolve()
        self._current: dict[str, str | None] = {}
        self._source: dict[str, bytes | None] = {}
        self._blob: dict[str, bytes | None] = {}
        self._cosmetic: dict[tuple[str, str], tuple[bool, tuple[str, ...]]] = {}
        self._data: dict[str, str | None] = {}
        self._normal: dict[str, str | None] = {}
        self._here: dict[str, str | None] = {}
        self._carries: list[ca.Carry] | None = None
        self.commit, self.head_blobs = ex.commit_blobs(self.root)

    @property
    def carries(self) -> list[ca.Carry]:
        """The carries recorded in this checkout (``claims/carried.yaml``)."""
        if self._carries is None:
            self._carries = ca.load(self.root / ca.RECORD)
        return self._carries

    def _normalized(self, name: str, sha1: str) -> str | None:
        """The form the cosmetic rule compares of the version ``sha1`` of file ``name``; None when absent."""
        if sha1 not in self._normal:
            data = self.blob(sha1)
            self._normal[sha1] = None if data is None else ex.normalized_source(data.decode("utf-8", "replace"),
                                                                                Path(name).suffix)
        return self._normal[sha1]

    def carried(self, name: str, sha: str, sha1: str | None) -> tuple[str, ...] | None:
        """The canaries of the chain of carries that leads the recorded version of ``name`` (SHA-256 ``sha``,
        object name ``sha1``) to this checkout's; None when no chain does."""
        now = self.current(name)
        if now is None or not any(c.file == name for c in self.carries):
            return None
        here = self.normalized_here(name)

        def same(a: ca.Version, b: ca.Version) -> bool:
            left, right = self._normalized(name, a.blob), self._normalized(name, b.blob)
            return left is not None and left == right

        route = ca.chain(name, ca.Version(sha, sha1 or ""), now, self.carries, same,
                         lambda v: here is not None and self._normalized(name, v.blob) == here)
        return None if route is None else tuple(sorted({c for step in route for c in step.canaries}))

    def normalized_here(self, name: str) -> str | None:
        """The form the cosmetic rule compares of file ``name`` in this checkout; None when it is gone."""
        if name not in self._here:
            data = self.read(name)
            self._here[name] = None if data is None else ex.normalized_source(data.decode("utf-8", "replace"),
                                                                               Path(name).suffix)
        return self._here[name]

    def current(self, name: str) -> str | None:
        """SHA-256 of the file ``name`` in this checkout; None when it is gone."""
        if name not in self._current:
            data = self.read(name)
            self._current[name] = None if data is None else ex.sha256(data)
        return self._current[name]

    def read(self, name: str) -> bytes | None:
        if name not in self._source:
            try:
                self._source[name] = ex.path_of(name, self.root).read_bytes()
            except OSError:
                self._source[name] = None
        return self._source[name]

    def blob(self, sha1: str) -> bytes | None:
        """A file's bytes from the repository's object store by its object name; None when absent."""
        if sha1 not in self._blob:
            try:
                done = subprocess.run(["git", "cat-file", "blob", sha1], cwd=self.root, capture_output=True,
                                      check=True)
                self._blob[sha1] = done.stdout
            except (OSError, subprocess.CalledProcessError):
                self._blob[sha1] = None
        return self._blob[sha1]

    def compare(self, name: str, sha1: str | None) -> tuple[bool, tuple[str, ...]] | None:
        """For a file that differs: (cosmetic only?, changed functions), or None when the version that ran
        is not in the repository (then no rule can be applied)."""
        key = (name, sha1 or "")
        if key not in self._cosmetic:
            old = self.blob(sha1) if sha1 else None
            new = self.read(name)
            if old is None or new is None:
                return None
            if Path(name).suffix != ".py":
                self._cosmetic[key] = (False, ())
            else:
                old_text, new_text = old.decode("utf-8", "replace"), new.decode("utf-8", "replace")
                same = self._normalized(name, sha1 or "") == self.normalized_here(name)
                self._cosmetic[key] = (same, () if same else changed_functions(old_text, new_text))
        return self._cosmetic[key]

    def data_file(self, path: Path) -> str | None:
        key = str(path)
        if key not in self._data:
            self._data[key] = ex.file_sha256(path) if path.is_file() else None
        return self._data[key]


def changed_functions(old: str, new: str) -> tuple[str, ...]:
    """The functions and methods (``Class.method``) whose code differs between two versions of a module,
    added and removed ones included; module-level statements outside functions count as ``<module>``."""
    def table(text: str) -> dict[str, str]:
        try:
            tree = ex.strip_docstrings(ast.parse(text))
        except SyntaxError:
            return {"<module>": text}
        out: dict[str, str] = {}
        rest = []
        for node in tree.body:  # type: ignore[attr-defined]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out[node.name] = ast.dump(node)
            elif isinstance(node, ast.ClassDef):
                body = []
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        out[f"{node.name}.{item.name}"] = ast.dump(item)
                    else:
                        body.append(ast.dump(item))
                out[node.name] = "\n".join([ast.dump(b) for b in node.bases] + body)
            else:
                rest.append(ast.dump(node))
        out["<module>"] = "\n".join(rest)
        return out

    before, after = table(old), table(new)
    return tuple(sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)))


def judge(result: dict[str, Any], checkout: Checkout) -> Freshness:
    """How ``result`` (a result file's object) stands against ``checkout``."""
    record = result.get("executed")
    if not isinstance(record, dict) or not record.get("files"):
        return Freshness(UNVERIFIABLE)
    blobs = record.get("blobs") or {}
    changed: list[str] = []
    cosmetic: list[str] = []
    notes: list[str] = []
    functions: dict[str, tuple[str, ...]] = {}
    carried: dict[str, tuple[str, ...]] = {}
    for name, sha in sorted(record["files"].items()):
        now = checkout.current(name)
        if now == sha:
            continue
        if now is None:
            changed.append(name)
            functions[name] = ("removed",)
            continue
        compared = checkout.compare(name, blobs.get(name))
        if compared is not None and compared[0]:
            cosmetic.append(name)
            continue
        by = checkout.carried(name, sha, blobs.get(name))
        if by is not None:
            carried[name] = by
            continue
        changed.append(name)
        if compared is not None and compared[1]:
            functions[name] = compared[1]
    data_changed = []
    data = record.get("data") or {}
    if data.get("files"):
        try:
            root: Path | None = expand_root(str(data.get("root") or ""))
        except DataError:  # a variable without a default is unset here
            root = None
        if root is None or not root.is_dir():
            notes.append(f"data files not checked: {data.get('root')} is not found here")
        else:
            for rel, sha in sorted(data["files"].items()):
                if checkout.data_file(root / rel) != sha:
                    data_changed.append(rel)
    # the run's version is committed if HEAD holds it (a record made in a copy whose git metadata lagged)
    dirty = ex.ran_uncommitted(record, checkout.head_blobs)
    state = STALE if changed or data_changed else DIRTY if dirty else FRESH
    return Freshness(state, tuple(changed), functions, tuple(cosmetic), tuple(data_changed), tuple(dirty),
                     tuple(notes), carried=carried)


def combine(parts: Iterable[Freshness]) -> Freshness:
    """The freshness of several results together: the worst state, with every file named."""
    items = list(parts)
    if not items:
        return Freshness(UNVERIFIABLE, runs=0)
    state = max((p.state for p in items), key=_ORDER.__getitem__)

    def union(attr: str) -> tuple[str, ...]:
        return tuple(sorted({x for p in items for x in getattr(p, attr)}))

    functions: dict[str, tuple[str, ...]] = {}
    carried: dict[str, tuple[str, ...]] = {}
    for p in items:
        for f, names in p.functions.items():
            functions[f] = tuple(sorted(set(functions.get(f, ())) | set(names)))
        for f, names in p.carried.items():
            carried[f] = tuple(sorted(set(carried.get(f, ())) | set(names)))
    unverifiable = sum(1 for p in items if p.state == UNVERIFIABLE)
    notes = union("notes") + ((f"{unverifiable} of {len(items)} runs have no record of what ran",)
                              if 0 < unverifiable < len(items) else ())
    return Freshness(state, union("changed"), functions, union("cosmetic"), union("data"), union("dirty"), notes,
                     runs=len(items), carried=carried)
