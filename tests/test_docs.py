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


# A manual states a figure with its machine, software and date: never the time of day it was taken
# ("an hour later", "in a fast hour", "evening") nor how many lines the code has.
TIME_OF_DAY = re.compile(
    r"\b(?:this|that|one|an|the|another|next|same|previous|fast|quiet|busy|slow) hour\b"
    r"|\bhours? (?:before|after|later|earlier)\b|\b(?:evening|morning|afternoon|tonight|midnight)\b",
    re.I,
)
LINE_COUNT = re.compile(r"\b\d[\d,]*(?: to \d[\d,]*)? lines\b|\blines of code\b|\bLOC\b")
CODE = re.compile(r"\b(?:code|modules?|source|src/\S*|\w+\.py)\b", re.I)


def notebook_words(text: str) -> list[str]:
    """The sentences of `text` that tell the time of day of a figure, or count the code's lines."""
    found = []
    for sentence in re.split(r"(?<=[.;:])\s+", " ".join(text.split())):
        if TIME_OF_DAY.search(sentence) or (LINE_COUNT.search(sentence) and CODE.search(sentence)):
            found.append(sentence[:120])
    return found


@pytest.mark.parametrize(
    "sentence",
    [
        "695 of them took 3 min 14 s one hour and 4 min 28 s the hour before.",
        "the earlier 676 took 1 min 57 s (218 CPU-s) in a fast hour.",
        "| default, 697 tests (2026-12-03, evening) | nothing |",
        "compare's code is a quarter smaller (4,301 to 3,251 lines) with the same outputs.",
        "no import cycle and that no module passes 400 lines.",
    ],
)
def test_a_figure_told_by_the_hour_or_a_line_count_of_the_code_is_found(sentence):
    assert notebook_words(sentence)


@pytest.mark.parametrize(
    "sentence",
    [
        "A sweep runs for hours on shared machines.",
        "a dry run of a sweep before spending GPU hours.",
        "writes a report of 117 lines and 25 charts.",
        "prints one line per check and exits 1.",
    ],
)
def test_hours_of_work_and_lines_of_a_report_are_left_alone(sentence):
    assert not notebook_words(sentence)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_page_tells_a_figure_by_the_hour_or_counts_the_codes_lines(page):
    assert notebook_words(page.read_text()) == []


def test_the_readmes_test_command_stands_alone_and_is_what_ci_runs():
    """CI runs exactly the README's test command: it is a code block of its own, and .ci/run runs it."""
    blocks = re.findall(r"^```(?:bash)?\n(.*?)^```", (PROJECT_ROOT / "README.md").read_text(), re.M | re.S)
    assert "python -m pytest -q\n" in blocks
    assert "run_tests python -m pytest -q\n" in (PROJECT_ROOT / ".ci" / "run").read_text()
