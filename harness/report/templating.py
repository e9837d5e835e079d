"""The Jinja2 environment every page the project writes from a template goes through (the results site, its Markdown
pages, cluster reports; the benchmarks, which reach the harness through its API alone, have theirs in
``benchmarks/pages.py``): templates in ``harness/report/templates/``, HTML escaped
automatically, an undefined name an error rather than an empty string."""
from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

TEMPLATES = Path(__file__).with_name("templates")


def pipes(text: Any) -> str:
    """A Markdown table cell: its pipes escaped, so that they do not split the cell."""
    return str(text).replace("|", "\\|")


def environment(fmt: str) -> Any:
    """The environment for ``fmt`` ('html' escapes every value it inserts; other formats insert text as it is).
    Filters: ``url`` (a path as a link's target), ``cell`` (a Markdown cell, its pipes and angle brackets escaped),
    ``pipes`` (a Markdown cell, its pipes escaped).

    >>> environment("md").from_string("| {{ x|pipes }} |").render(x="a|b")
    '| a\\\\|b |'
    """
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=fmt == "html",
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["url"] = lambda p: quote(str(p), safe="/@=,.-_~")
    env.filters["cell"] = lambda text: pipes(text).replace("<", "&lt;").replace(">", "&gt;")
    env.filters["pipes"] = pipes
    return env
