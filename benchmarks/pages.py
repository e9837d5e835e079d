"""The Jinja2 environment of the pages the benchmarks write (``contention.md``, ``scaling.md``, ``search.md``): the
templates in ``benchmarks/templates``, with the settings of the results site's (:mod:`harness.report.templating`),
which the benchmarks do not import (they reach the harness through :mod:`harness.api` alone)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

TEMPLATES = Path(__file__).with_name("templates")


def pipes(text: Any) -> str:
    """A Markdown table cell: its pipes escaped, so that they do not split the cell."""
    return str(text).replace("|", "\\|")


def render(template: str, **values: Any) -> str:
    """The template ``template`` of ``benchmarks/templates`` rendered with ``values`` (Markdown: nothing escaped but
    the cells' pipes, an undefined name an error).

    >>> render("contention.md", command="...", epochs=2, machine={...}, header=[...], rows=[...])  # doctest: +SKIP
    """
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=False, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["pipes"] = pipes
    return str(env.get_template(template).render(**values))
