"""The Markdown the project writes (notes beside result folders, the readings under ``docs/results/``) as HTML for
the results site, parsed by markdown-it-py (CommonMark with GitHub's pipe tables). The project's rules on top of it:
raw HTML is shown as text (escaped) and HTML comments are dropped; headings go ``shift`` levels down and carry
GitHub's anchors (:func:`slug`); links to web addresses stay links; a relative link goes through ``link`` (its target
as written, returning the href to use or None), and without an href it keeps its text and shows its target on hover;
an image becomes a link to it ('[figure: its text]'); tables scroll sideways on their own.
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence
from typing import Any, Callable

from markdown_it import MarkdownIt
from markdown_it.token import Token

Link = Callable[[str], "str | None"]

_WEB = re.compile(r"^(https?|mailto):")


def slug(text: str) -> str:
    """GitHub's anchor of a heading: its text without Markdown, lower case, punctuation dropped, spaces to
    hyphens ('A results site: `harness report`' -> 'a-results-site-harness-report')."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _escaped_html(renderer: Any, tokens: Sequence[Token], idx: int, options: Any, env: Any) -> str:
    """Raw HTML as text; an HTML comment not at all."""
    content = tokens[idx].content
    if content.lstrip().startswith("<!--"):
        return ""
    text = html.escape(content)
    return f"<p>{text.strip()}</p>\n" if tokens[idx].type == "html_block" else text


class _Parser(MarkdownIt):
    def normalizeLink(self, url: str) -> str:  # markdown-it's name for it
        """A link's target as written, so that ``link`` sees it so (the renderer escapes attributes)."""
        return url


def _parser() -> MarkdownIt:
    md = _Parser("commonmark", {"html": True}).enable("table")
    md.add_render_rule("html_block", _escaped_html)
    md.add_render_rule("html_inline", _escaped_html)
    md.add_render_rule("table_open", lambda *_: '<div class="scroll"><table class="note-table">\n')
    md.add_render_rule("table_close", lambda *_: "</table></div>\n")
    return md


_MD = _parser()


def _heading(tokens: list[Token], i: int, shift: int) -> None:
    """A heading ``shift`` levels down (at most h6), with GitHub's anchor of its text."""
    level = min(6, int(tokens[i].tag[1]) + shift)
    tokens[i].tag = tokens[i + 2].tag = f"h{level}"
    tokens[i].attrSet("id", slug(tokens[i + 1].content))


def _links(children: list[Token], link: Link | None) -> list[Token]:
    """The inline tokens with each relative link's href from ``link`` (a span with its target on hover where it
    gives none) and each image as a link to it."""
    out: list[Token] = []
    opened: list[Token] = []
    for token in children:
        if token.type == "image":
            target = str(token.attrGet("src") or "")
            label = Token("text", "", 0, content=f"[figure: {token.content or target}]")
            start = Token("link_open", "a", 1, attrs={"href": target})
            out += [start, label, Token("link_close", "a", -1)]
            _route(start, out[-1], target, link)
        elif token.type == "link_open":
            opened.append(token)
            out.append(token)
        elif token.type == "link_close" and opened:
            start = opened.pop()
            out.append(token)
            _route(start, token, str(start.attrGet("href") or ""), link)
        else:
            out.append(token)
    return out


def _route(start: Token, end: Token, target: str, link: Link | None) -> None:
    """Point a link (``start`` … ``end``) at ``target``'s href: a web address as it is, a relative one through
    ``link``; without an href, a span that shows the target on hover."""
    href = target if _WEB.match(target) else (link(target) if link else None)
    if href is not None:
        start.attrs = {"href": href}
        return
    start.tag = end.tag = "span"
    start.attrs = {"class": "link", "title": target}


def render(text: str, link: Link | None = None, shift: int = 0) -> str:
    """A Markdown document as HTML; headings go ``shift`` levels down (at most h6) and carry GitHub's anchors."""
    tokens = _MD.parse(text)
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            _heading(tokens, i, shift)
        elif token.type == "inline" and token.children:
            token.children = _links(token.children, link)
    out: str = _MD.renderer.render(tokens, _MD.options, {})
    return out
