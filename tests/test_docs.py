"""The manual agrees with the code: tables that restate conf/ match it, and every link between the
pages lands on a file and heading that exist."""

from __future__ import annotations

import importlib.util
import re

import pytest

from src.paths import PROJECT_ROOT

_spec = importlib.util.spec_from_file_location("docs_tables", PROJECT_ROOT / "scripts" / "docs_tables.py")
docs_tables = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(docs_tables)

PAGES = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", docs_tables.DOCS, ids=lambda p: p.name)
def test_tables_restating_conf_match_conf(doc):
    text = doc.read_text()
    assert set(re.findall(r"<!-- conf:([\w-]+) -->", text)) == set(docs_tables.TABLES)
    assert docs_tables.render(text) == text, "stale: run python scripts/docs_tables.py"


def test_a_table_that_drifted_from_conf_is_regenerated():
    text = docs_tables.DOCS[0].read_text()
    drifted = text.replace("| `h200` |", "| `h200` | 999 |", 1)
    assert drifted != text
    assert docs_tables.render(drifted) == text


def _anchors(page) -> set[str]:
    """GitHub's heading ids: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_links_between_pages_resolve(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if target.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(target)
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(target)
    assert not broken, f"{page.name}: links to nothing: {broken}"


def test_every_benchmark_script_is_in_the_index_of_the_performance_page():
    text = (PROJECT_ROOT / "docs" / "performance.md").read_text()
    index = text[text.index("## The benchmark scripts") :]
    scripts = sorted(p.name for p in (PROJECT_ROOT / "benchmarks").glob("*.py"))
    assert [s for s in scripts if f"`{s}`" not in index] == []
