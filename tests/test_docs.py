"""The documents hold: the README stays a short front door whose links resolve, every relative link in the
docs names a file of the repository, and the complete method file of docs/methods.md runs as written."""
from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from harness import cli
from harness.config import registry

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").rglob("*.md"))]
# a link or image: [text](target "title") or [text](<target with spaces>), targets percent-encoded
LINK = re.compile(r"!?\[[^\]]*\]\((<[^>]+>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")


def links(path: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)  # code blocks are not links
    return [unquote(t[1:-1] if t.startswith("<") else t) for t in LINK.findall(text)]


def test_readme_is_a_short_front_door_with_the_two_commands_first():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    first_block = text.split("```")[1]
    assert "python -m pip install -e . && python -m harness run tasks/synthetic.yaml" in first_block
    assert 'python -m pip install -e ".[test]" && python -m pytest -q' in first_block
    assert "python -m pytest -q" in (ROOT / ".ci" / "run").read_text()  # CI runs the README's test command


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_relative_link_resolves(doc):
    broken = []
    for target in links(doc):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue  # a web address or an anchor in the same page
        path = (doc.parent / target.split("#")[0]).resolve()
        if not path.exists():
            broken.append(target)
    assert broken == [], f"{doc.relative_to(ROOT)} links to missing files"


def anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file: its headings' slugs (a repeated slug gets -1, -2, ...), outside
    code blocks, and the ids of HTML anchors in it."""
    from harness.report.markdown import slug

    text = re.sub(r"```.*?```", "", path.read_text(encoding="utf-8"), flags=re.S)
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        name, n = slug(heading), 0
        while (name if n == 0 else f"{name}-{n}") in found:
            n += 1
        found.add(name if n == 0 else f"{name}-{n}")
    return found | set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_anchor_of_a_link_between_markdown_files_names_a_heading(doc):
    broken = []
    for target in links(doc):
        if re.match(r"^[a-z]+:", target) or "#" not in target:
            continue
        path, anchor = target.split("#", 1)
        page = (doc.parent / path).resolve() if path else doc
        if page.suffix == ".md" and page.is_file() and anchor not in anchors(page):
            broken.append(target)
    assert broken == [], f"{doc.relative_to(ROOT)} links to anchors that no heading makes"


def test_anchors_are_github_s_heading_slugs(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# A results site: `harness report`\n\n## Seeds & significance\n\n## Notes\n\n## Notes\n\n"
                    "```\n# not a heading\n```\n")
    assert anchors(page) == {"a-results-site-harness-report", "seeds--significance", "notes", "notes-1"}


def test_the_readme_links_every_docs_page():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    pages = [p for p in (ROOT / "docs").glob("*.md")]
    missing = [p.name for p in pages if f"docs/{p.name}" not in readme]
    assert missing == []


def method_example(doc: str, head: str) -> str:
    text = (ROOT / doc).read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    complete = [b for b in blocks if b.startswith(head)]
    assert len(complete) == 1, f"{doc} holds one complete method file, headed {head}<name>.py"
    return complete[0]


@pytest.mark.parametrize("doc,head", [("docs/methods.md", "# baselines/"), ("README.md", "# my_methods/")])
def test_the_method_files_of_the_docs_run_as_written(doc, head, tiny_task, tmp_path, capsys):
    code = method_example(doc, head)
    assert not [line for line in code.splitlines() if re.match(r"\s*(from|import) harness", line)
                and not re.match(r"\s*from harness\.api import", line)], "the example imports only harness.api"
    name = re.search(r"# \w+/(\w+)\.py", code).group(1)
    registered = re.search(r"register\(\"(\w+)\"\)", code).group(1)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / f"{name}.py").write_text(code)
    task = tmp_path / "with_example.yaml"
    task.write_text(f"base: {tiny_task}\nmethods:\n  {registered}: {json.dumps({'method': registered})}\n")
    try:
        assert cli.main(["run", str(task), "--methods", registered, "--epochs", "2", "--out", str(tmp_path / "out"),
                         "--no-progress", "--include", str(plugins)]) == 0
    finally:
        registry.set_include(())
    (result,) = (tmp_path / "out").rglob("seed0.json")
    data = json.loads(result.read_text())
    assert data["method"] == registered and all(v == v for v in data["metrics"].values())
    assert registered in capsys.readouterr().out


def test_the_minimal_source_and_encoder_of_the_docs_run_as_written(tiny_task, tmp_path):
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    for doc, head in (("docs/sources.md", "# harness/sources/"), ("docs/encoders.md", "# harness/encoders/")):
        code = method_example(doc, head)
        stem = re.search(r"# [\w/]+/(\w+)\.py", code).group(1)
        (plugins / f"{stem}.py").write_text(code)
    task = tmp_path / "with_examples.yaml"
    task.write_text(f"base: {tiny_task}\ndataset: {{source: noise_pairs, split_sizes: [200, 100, 100]}}\n"
                    "encoders: {a: {type: projection, dim: 8}, b: {type: projection, dim: 8}}\n"
                    "metrics: {relevance: [pair]}\n")
    try:
        assert cli.main(["run", str(task), "--methods", "contrastive", "--epochs", "1", "--out",
                         str(tmp_path / "out"), "--no-progress", "--include", str(plugins)]) == 0
    finally:
        registry.set_include(())
    (result,) = (tmp_path / "out").rglob("seed0.json")
    data = json.loads(result.read_text())
    assert data["dataset"]["source"] == "noise_pairs" and data["config"]["encoders"]["a"]["type"] == "projection"


def test_contributing_counts_the_noqa_comments_by_code():
    """CONTRIBUTING.md says how many `# noqa` comments there are, by code: the count stays true."""
    import re
    from collections import Counter

    text = " ".join((ROOT / "CONTRIBUTING.md").read_text().split())
    total = int(re.search(r"There are (\d+) today", text).group(1))
    said = {code: int(n) for code, n in re.findall(r"\(`([A-Z]+\d+)`, (\d+)\)", text)}
    said.update({code: 1 for code in re.findall(r"one [^()]*?\(`([A-Z]+\d+)`\)", text)})
    found: Counter[str] = Counter()
    for path in [*ROOT.glob("harness/**/*.py"), *ROOT.glob("baselines/*.py"), *ROOT.glob("benchmarks/*.py"),
                 *ROOT.glob("tests/**/*.py")]:
        for code in re.findall(r"# noqa: ([A-Z]+\d+)", path.read_text()):
            found[code] += 1
    assert sum(found.values()) == total and dict(found) == said, (total, said, dict(found))


# --- docs/architecture.md and the README's layout table against the package ---------------------------------------

@pytest.mark.parametrize("page", ["architecture.md", "running.md"])
def test_the_pages_list_every_subcommand_in_help_s_order(page):
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    listed = re.search(r"python -m harness ([a-z]+(?:\|[a-z]+)+)", text).group(1).split("|")
    assert listed == [command.NAME for command in cli.COMMANDS]


def layout_rows() -> dict[str, str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8").split("## Layout", 1)[1]
    return {m.group(1): m.group(2) for m in re.finditer(r"^\| `([^`]+)` \| (.*?) \|", text, flags=re.M)}


def test_the_readme_layout_has_a_row_for_every_subpackage_and_its_files_exist():
    rows = layout_rows()
    packages = {f"harness/{p.parent.name}/" for p in (ROOT / "harness").glob("*/__init__.py")}
    shown = set(rows) | {f"harness/{name}" for name in re.findall(r"`(\w+/)`", rows["harness/"])}  # cli/ there
    assert packages <= shown, sorted(packages - shown)
    for folder in [f for f in rows if f.startswith("harness/")]:
        for name in re.findall(r"`([\w./]+\.py|[a-z_]+/?)`", rows[folder]):
            if name.endswith((".py", "/")) or name in ("claims",):
                here = ROOT / folder / name
                assert here.exists() or here.with_suffix(".py").exists(), f"{folder} names {name}, not in the checkout"


def test_the_readme_report_row_names_the_ledger_the_site_the_reference_table_and_status():
    row = layout_rows()["harness/report/"]
    for part in ("claims ledger", "results site", "reference table", "`status.py`", "`compare.py`", "`plot.py`"):
        assert part in row, part


def test_the_library_section_names_functions_that_exist_and_its_example_imports_them():
    """docs/architecture.md's library section: each function of its table is importable under the name given, and
    the example's imports and calls name only what the modules define."""
    import ast
    import importlib

    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("## The library: the command line's work as functions", 1)[1].split("\n## ", 1)[0]
    named = re.findall(r"`(harness\.[\w.]+)\(", section)
    assert len(named) >= 9
    for dotted in named:
        module, name = dotted.rsplit(".", 1)
        assert callable(getattr(importlib.import_module(module), name)), dotted
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    tree = ast.parse(code)
    imported = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module.startswith("harness"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
                imported[alias.name] = getattr(module, alias.name)
    called = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert called - {"Path"} <= set(imported), called - set(imported)
    assert {"run_task", "rerun_files", "tables", "compare_folders", "plot_sweep", "status", "evaluate_ensemble",
            "reproduce_evidence"} <= called
