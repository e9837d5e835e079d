"""The reference table's page of the results site: ``reference.md`` as written by ``harness leaderboard``, with its
figures inline as images, beside the table's data, ``reference.json``.

An image that stands alone on its line of the Markdown (``![what it shows](forest.png)``) becomes a figure of the
page, its file copied into the site; the rest of the text is rendered as the site's other readings are
(:mod:`harness.report.markdown`). Figures the page does not show yet are added from the folder's data: the
critical-difference diagram (``cd.png``) after the section that names it, the forest plot of every comparison
(:func:`harness.report.reference_figures.forest`) and each set's best-so-far curves
(:func:`harness.report.reference_figures.best_so_far`), from the record's ``forest`` and ``curves`` (or, in tables
written before it had them, each set's ``swamp_vs_each`` and its cells' ``convergence``), after the table.
"""
from __future__ import annotations

import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.config.spec import lower_is_better
from harness.errors import ConfigError
from harness.report import markdown, reference_figures
from harness.report.rows import FAMILY

MANIFEST = "leaderboard.json"  # what `harness leaderboard` writes in each set's folder
PAGE, DATA, CD = "reference.md", "reference.json", "cd.png"
IMAGES = (".png", ".svg", ".jpg", ".jpeg", ".gif")
_FIGURE = re.compile(r"^!\[(?P<alt>[^\]]*)\]\((?P<target>[^)\s]+)\)\s*$")  # an image alone on its line
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Block:
    """A piece of the page: rendered HTML (``html``), or a figure (``src`` in the site, ``alt`` its caption)."""

    html: str = ""
    src: str = ""
    alt: str = ""

    @property
    def figure(self) -> bool:
        return bool(self.src)


def roots(folders: list[Path]) -> list[Path]:
    """The reference tables under ``folders``: each folder whose sub-folders hold a set's manifest and that holds
    a written ``reference.md``."""
    return sorted({m.parent.parent for f in folders for m in Path(f).rglob(MANIFEST)
                   if (m.parent.parent / PAGE).is_file()})


def read_data(root: Path) -> dict[str, Any]:
    """The folder's ``reference.json`` ({} where there is none); ConfigError naming the file when it is not JSON."""
    path = root / DATA
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ConfigError(f"{path} is not JSON ({err}): write it again with python -m harness leaderboard "
                          f"--out {root}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path} holds a {type(data).__name__}, not the table's record: write it again with "
                          f"python -m harness leaderboard --out {root}")
    return data


def row_label(row: str) -> str:
    """A row's name as the table shows it: the contrastive family's names, other rows by their key."""
    return FAMILY.get(row, row)


def forest_entries(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The forest plot's entries: ``reference.json``'s own (``forest``) where it records them; else, from tables
    written before it did, per set SwAMP against each contrastive loss (``swamp_vs_each``, the loss validation chose
    marked), or against the strongest alone."""
    if isinstance(data.get("forest"), list):
        return list(data["forest"])
    entries = []
    for name, s in (data.get("sets") or {}).items():
        metric = str(s.get("metric", ""))
        label = name if metric in name.replace("_", "/") else f"{name}: {metric}"
        chosen = set(s.get("strongest_contrastive") or [])
        strongest = s.get("swamp_vs_strongest") or {}
        each = s.get("swamp_vs_each") or ({strongest["rival"]: strongest} if strongest.get("rival") else {})
        for rival, c in each.items():
            ci = c.get("ci") or [None, None]
            entries.append({"set": label, "comparison": row_label(rival) + (" (chosen)" if rival in chosen else ""),
                            "diff": c.get("diff"), "lo": ci[0], "hi": ci[1],
                            "reading": c.get("reading") or "uninformative", "lower": lower_is_better(metric)})
    return entries


@dataclass(frozen=True)
class Curves:
    """One set's best-so-far curves (row label -> curve), as :func:`harness.report.reference_figures.best_so_far`
    takes them."""

    metric: str
    lower: bool
    curves: dict[str, list[float | None]]
    not_converged: frozenset[str] = frozenset()
    initial_budget: int | None = None


def set_curves(data: dict[str, Any]) -> dict[str, Curves]:
    """Each set's curves: ``reference.json``'s own (``curves``) where it records them; else from the cells'
    ``convergence`` records (none in tables written before rows had them)."""
    found: dict[str, Curves] = {}
    if isinstance(data.get("curves"), dict):
        for name, c in data["curves"].items():
            metric = str(c.get("metric", ""))
            found[name] = Curves(metric, bool(c.get("lower", lower_is_better(metric))), dict(c.get("curves") or {}),
                                 frozenset(c.get("not_converged") or ()), _trials(c.get("initial_trials")))
        return found
    for name, record in (data.get("sets") or {}).items():
        curves: dict[str, list[float | None]] = {}
        late: set[str] = set()
        for row, cell in (record.get("cells") or {}).items():
            reading = cell.get("convergence") or {}
            if reading.get("best_so_far"):
                curves[row_label(row)] = list(reading["best_so_far"])
                if reading.get("converged") is False:
                    late.add(row_label(row))
        if curves:
            metric = str(record.get("metric", ""))
            found[name] = Curves(metric, lower_is_better(metric), curves, frozenset(late),
                                 _trials(record.get("initial_trials")))
    return found


def _trials(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def blocks(text: str, root: Path, out: Path, name: str, link: Callable[[str], str | None]) -> list[Block]:
    """The page's text split at the images that stand alone on their lines: rendered HTML between figures, each
    figure's file copied into ``out`` as ``<name>-<file>``. An image whose file is missing stays in the text."""
    found: list[Block] = []
    chunk: list[str] = []
    fenced = False

    def flush() -> None:
        if any(line.strip() for line in chunk):
            found.append(Block(html=markdown.render("\n".join(chunk) + "\n", link)))
        chunk.clear()

    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        hit = None if fenced else _FIGURE.match(line)
        source = root / hit["target"] if hit else None
        if hit is None or source is None or source.suffix.lower() not in IMAGES or not source.is_file():
            chunk.append(line)
            continue
        flush()
        found.append(Block(src=copy_figure(source, root, out, name), alt=hit["alt"]))
    flush()
    return found


def copy_figure(source: Path, root: Path, out: Path, name: str) -> str:
    """Copy a figure of the table's folder into the site as ``<name>-<its path, slashes as dashes>``."""
    target = f"{name}-{source.relative_to(root).as_posix().replace('/', '-')}"
    shutil.copyfile(source, out / target)
    return target


def markdown_page(root: Path, out: Path, name: str) -> str:
    """``reference.md`` for the Markdown pages: each figure it names (an image or a link to one, beside it) copied
    into ``out`` as ``<name>-<file>`` and its target rewritten to match."""
    def copied(hit: re.Match[str]) -> str:
        source = root / hit["target"]
        if source.suffix.lower() not in IMAGES or not source.is_file():
            return hit[0]
        return f"]({copy_figure(source, root, out, name)})"

    return re.sub(r"\]\((?P<target>[^)\s:]+)\)", copied, (root / PAGE).read_text(encoding="utf-8"))


def _after(found: list[Block], pattern: str) -> int:
    """The index after the text block whose HTML matches ``pattern`` (the end when none does)."""
    for i, b in enumerate(found):
        if not b.figure and re.search(pattern, b.html):
            return i + 1
    return len(found)


def sections(found: list[Block]) -> list[Block]:
    """The text blocks cut at each second-level heading, so that a figure can go after the section it belongs to."""
    out: list[Block] = []
    for b in found:
        if b.figure:
            out.append(b)
            continue
        cuts = [0, *(m.start() for m in re.finditer(r"<h2[ >]", b.html) if m.start() > 0), len(b.html)]
        out += [Block(html=b.html[a:z]) for a, z in zip(cuts, cuts[1:]) if b.html[a:z].strip()]
    return out


def drawn_figures(data: dict[str, Any], out: Path, name: str, shown: set[str], render: bool) -> list[Block]:
    """The forest plot and the best-so-far curves of each set, drawn into ``out`` from ``reference.json`` where the
    page shows none of its own (``shown``: the figure files the Markdown embeds)."""
    drawn: list[Block] = []
    if not any("forest" in s for s in shown):
        path = out / f"{name}-forest.png"
        entries = forest_entries(data)
        if entries and any(e["diff"] is not None for e in entries):
            if render:
                reference_figures.forest(entries, path, "SwAMP against each contrastive loss, set by set")
            drawn.append(Block(src=path.name, alt="SwAMP minus each contrastive loss on test, set by set, with its "
                                                  "95% interval (paired over seeds), coloured by the paired test's "
                                                  "reading; (chosen): the loss validation chose"))
    if not any(key in s for s in shown for key in ("best_so_far", "curve", "trials")):
        for set_name, c in set_curves(data).items():
            if not any(v is not None for curve in c.curves.values() for v in curve):
                continue
            path = out / f"{name}-trials-{re.sub(r'[^A-Za-z0-9_.-]+', '-', set_name)}.png"
            if render:
                reference_figures.best_so_far(c.curves, path, c.metric, c.lower, c.not_converged, set_name,
                                              initial_budget=c.initial_budget)
            drawn.append(Block(src=path.name, alt=f"{set_name}: each row's best validation {c.metric} so far "
                                                  "against its study's trials"))
    return drawn


def page_blocks(root: Path, out: Path, name: str, link: Callable[[str], str | None],
                render: bool = True) -> list[Block]:
    """The reference page of the table in ``root`` as blocks: its Markdown with its figures inline, the
    critical-difference diagram after the text that names it when the Markdown does not embed it, and the figures
    drawn from ``reference.json`` (:func:`drawn_figures`) after the table."""
    found = sections(blocks((root / PAGE).read_text(encoding="utf-8"), root, out, name, link))
    shown = {b.src for b in found if b.figure}
    if (root / CD).is_file() and f"{name}-{CD}" not in shown:
        at = _after(found, re.escape(CD) + r"|critical.difference")
        found.insert(at, Block(src=copy_figure(root / CD, root, out, name),
                               alt="The critical-difference diagram: mean ranks over the sets every row has "
                                   "(autorank); rows joined by a bar are not told apart"))
    drawn = drawn_figures(read_data(root), out, name, shown, render)
    at = next((i + 1 for i, b in enumerate(found) if not b.figure), len(found))  # after the table's own section
    return found[:at] + drawn + found[at:]
