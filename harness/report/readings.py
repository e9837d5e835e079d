"""What a page links besides its runs: the notes beside the result folder, the readings in docs/results/ that
discuss it (rendered as pages of the site, or linked where they lie), and the other sets of the same task."""
from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from harness.report import markdown
from harness.report.sets import ResultSet
from harness.store.io import write_text_atomic


def notes(rs: ResultSet) -> list[Path]:
    """The README.md notes that describe the set: its folder's and those of the folders above it up to the folder
    given on the command line (which speaks for every set under it), outermost first."""
    folder, root = rs.folder.resolve(), (rs.root or rs.folder).resolve()
    found = []
    for where in [folder, *folder.parents]:
        if (where / "README.md").is_file():
            found.append(where / "README.md")
        if where == root or root not in where.parents:
            break
    return found[::-1]


def project_root(folder: Path) -> Path | None:
    """The checkout that holds ``folder`` and readings of results (a ``docs/results`` folder), if any."""
    for where in folder.resolve().parents:
        if (where / "docs" / "results").is_dir():
            return where
    return None


def readings(rs: ResultSet) -> list[Path]:
    """The pages of ``docs/results/`` (not the generated ``tasks/``) that mention the set's folder (a path such as
    ``results/gpu/coco_shapes``, alone or before a '/'); when none does, those that mention the nearest folder
    above it (``results/gpu``), short of the top results folder, and also name the folder itself
    (``coco_shapes``): a page about some of a folder's sets (``results/reference/qmul_shoes``) says nothing of
    its others."""
    home = project_root(rs.folder)
    if home is None:
        return []
    rel = rs.folder.resolve().relative_to(home)
    texts = {p: p.read_text(encoding="utf-8") for p in sorted((home / "docs" / "results").glob("*.md"))}
    name = re.compile(rf"(?<![\w-]){re.escape(rel.name)}(?![\w-])")
    for where in [rel, *rel.parents][:max(1, len(rel.parts) - 1)]:
        mention = re.compile(rf"(?<![\w.-]){re.escape(where.as_posix())}(?![\w-]|\.\w)")
        found = [p for p, text in texts.items() if mention.search(text)]
        if found and where != rel:  # of those about the folder above, the ones that name this folder too
            found = [p for p in found if name.search(texts[p])]
        if found:
            return found
    return []


def related(rs: ResultSet, sets: list[ResultSet]) -> list[ResultSet]:
    """The other result sets of the same task (its runs in other folders: another machine, another size)."""
    return [s for s in sets if s.task == rs.task and s is not rs]


def href(target: str, base: Path, slugs: dict[Path, str], pages: AbstractSet[Path]) -> str | None:
    """Where a relative link of a note or reading (``target``, relative to ``base``) points inside the site: the
    page of the result set that holds the file, the page a ``docs/results/tasks/`` page became, or a reading the
    site holds (``pages``); None when the site has no such page."""
    path = (base / unquote(target.split("#")[0])).resolve()
    for candidate in (path, *path.parents):
        if candidate in slugs:
            return f"{slugs[candidate]}.html"
    if path.parent.name == "tasks" and path.suffix == ".md" and path.stem in slugs.values():
        return f"{path.stem}.html"
    if path in pages:
        return f"reading-{path.stem}.html" + (f"#{target.split('#', 1)[1]}" if "#" in target else "")
    return None


def links_from(base: Path, slugs: dict[Path, str], pages: AbstractSet[Path]) -> markdown.Link:
    """The link rewriter of a note or reading in ``base`` (:func:`href`)."""
    return lambda target: href(target, base, slugs, pages)


def note_name(note: Path, rs: ResultSet) -> str:
    """A note's path as the page names it, from the given folder's own name on ('results/gpu/README.md')."""
    root = (rs.root or rs.folder).resolve()
    return f"{root.name}/{note.relative_to(root).as_posix()}" if root in note.parents else note.name


def write_readings(sets: list[ResultSet], held: set[Path], out: Path, env: Any, command_line: str) -> list[Path]:
    """Each reading the site's pages link (``held``), rendered as a page of the site."""
    slugs = {s.folder.resolve(): s.slug for s in sets}
    written = []
    for reading in sorted(held):
        top = project_root(reading.parent)
        path = out / f"reading-{reading.stem}.html"
        body = markdown.render(reading.read_text(encoding="utf-8"),
                               links_from(reading.parent, slugs, held))
        write_text_atomic(path, env.get_template("reading.html").render(
            name=reading.relative_to(top).as_posix() if top else reading.name, body=body, command=command_line))
        written.append(path)
    return written
