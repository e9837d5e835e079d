"""The Markdown the project writes (notes beside result folders, the readings under ``docs/results/``) as HTML
for the results site, without a Markdown library: headings, paragraphs, fenced and indented code, bullet and
numbered lists, pipe tables, block quotes, and inline code, links, images, bold and italics. Everything else is
text, escaped. Links to web addresses stay links; a relative link goes through ``link`` (its target as written,
returning the href to use or None), and without an href it keeps its text and shows its target on hover.
"""
from __future__ import annotations

import html
import re
from typing import Callable

Link = Callable[[str], "str | None"]

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d+[.)])\s+(.*)$")
_RULE = re.compile(r"^\s*([-*_])(\s*\1){2,}\s*$")
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_INLINE = re.compile(r"(?P<code>`+)(?P<code_text>.+?)(?P=code)"
                     r"|(?P<image>!)?\[(?P<text>[^\]]*)\]\((?P<target><[^>]*>|[^)\s]+)(?:\s+\"[^\"]*\")?\)"
                     r"|\*\*(?P<bold>.+?)\*\*"
                     r"|(?<![\w*])\*(?P<em>[^*\s](?:[^*]*[^*\s])?)\*(?![\w*])"
                     r"|<(?P<auto>https?://[^>\s]+)>")


def slug(text: str) -> str:
    """GitHub's anchor of a heading: its text without Markdown, lower case, punctuation dropped, spaces to
    hyphens ('A results site: `harness report`' -> 'a-results-site-harness-report')."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def inline(text: str, link: Link | None = None) -> str:
    """One line's inline Markdown as escaped HTML."""
    out, last = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[last:m.start()]))
        last = m.end()
        if m["code"]:
            out.append(f"<code>{html.escape(m['code_text'].strip())}</code>")
        elif m["target"] is not None:
            target = m["target"][1:-1] if m["target"].startswith("<") else m["target"]
            href = target if re.match(r"^(https?|mailto):", target) else (link(target) if link else None)
            label = inline(m["text"], link) if not m["image"] else html.escape(m["text"] or target)
            if m["image"]:
                label = f"[figure: {label}]"
            out.append(f'<a href="{html.escape(href)}">{label}</a>' if href is not None
                       else f'<span class="link" title="{html.escape(target)}">{label}</span>')
        elif m["bold"] is not None:
            out.append(f"<strong>{inline(m['bold'], link)}</strong>")
        elif m["em"] is not None:
            out.append(f"<em>{inline(m['em'], link)}</em>")
        else:
            out.append(f'<a href="{html.escape(m["auto"])}">{html.escape(m["auto"])}</a>')
    out.append(html.escape(text[last:]))
    return "".join(out)


def _cells(line: str) -> list[str]:
    line = line.strip()
    line = line[1:] if line.startswith("|") else line
    line = line[:-1] if line.endswith("|") and not line.endswith("\\|") else line
    return [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)]


def render(text: str, link: Link | None = None, shift: int = 0) -> str:
    """A Markdown document as HTML; headings go ``shift`` levels down (at most h6) and carry GitHub's anchors."""
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    lines = text.splitlines()
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or _RULE.match(line) and not _ITEM.match(line):
            out.append("<hr>" if line.strip() else "")
            i += 1
        elif fence_match := _FENCE.match(line):
            fence = fence_match.group(1)
            body, i = [], i + 1
            while i < len(lines) and not lines[i].strip().startswith(fence):
                body.append(lines[i])
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(body))}</code></pre>")
            i += 1
        elif line.startswith(("    ", "\t")):
            body = []
            while i < len(lines) and (lines[i].startswith(("    ", "\t")) or not lines[i].strip()):
                body.append(lines[i][4:] if lines[i].startswith("    ") else lines[i].lstrip("\t"))
                i += 1
            out.append(f"<pre><code>{html.escape(chr(10).join(body).rstrip())}</code></pre>")
        elif heading := _HEADING.match(line):
            hashes, title = heading.groups()
            level = min(6, len(hashes) + shift)
            out.append(f'<h{level} id="{html.escape(slug(title))}">{inline(title, link)}</h{level}>')
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and _TABLE_RULE.match(lines[i + 1]):
            head = "".join(f"<th>{inline(c, link)}</th>" for c in _cells(line))
            body, i = [], i + 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                body.append("<tr>" + "".join(f"<td>{inline(c, link)}</td>" for c in _cells(lines[i])) + "</tr>")
                i += 1
            out.append(f'<div class="scroll"><table class="note-table"><thead><tr>{head}</tr></thead>'
                       f"<tbody>{''.join(body)}</tbody></table></div>")
        elif item := _ITEM.match(line):
            ordered = item.group(2)[0].isdigit()
            items: list[list[str]] = []
            while i < len(lines) and lines[i].strip():
                m = _ITEM.match(lines[i])
                if m:
                    items.append([m.group(3)])
                else:
                    items[-1].append(lines[i].strip())
                i += 1
                if i < len(lines) and not lines[i].strip() and i + 1 < len(lines) and _ITEM.match(lines[i + 1]):
                    i += 1  # a loose list: items apart by blank lines
            tag = "ol" if ordered else "ul"
            out.append(f"<{tag}>" + "".join(f"<li>{inline(' '.join(item), link)}</li>" for item in items)
                       + f"</{tag}>")
        elif line.lstrip().startswith(">"):
            body = []
            while i < len(lines) and lines[i].lstrip().startswith(">"):
                body.append(lines[i].lstrip()[1:].strip())
                i += 1
            out.append(f"<blockquote><p>{inline(' '.join(body), link)}</p></blockquote>")
        else:
            body, i = [line.strip()], i + 1
            while (i < len(lines) and lines[i].strip() and not _FENCE.match(lines[i]) and not _HEADING.match(lines[i])
                   and not _ITEM.match(lines[i]) and not lines[i].lstrip().startswith(("|", ">"))):
                body.append(lines[i].strip())
                i += 1
            out.append(f"<p>{inline(' '.join(body), link)}</p>")
    return "\n".join(part for part in out if part) + "\n"
