"""The project speaks of itself: no tracked page, source file, test, benchmark or config tells how
it was built. The words that would are listed beside CI (.ci/development-words.json), not here:
the list is the check's, not the product's text."""

from __future__ import annotations

import json
import re
import subprocess

import pytest

from src.paths import PROJECT_ROOT

SCANNED = ["README.md", "pyproject.toml", "docs", "src", "tests", "benchmarks", "conf", "scripts", "reference"]

# What the product itself calls a session (a process session, a test run's scope, a terminal's),
# removed from a line before it is searched.
PRODUCT_SESSIONS = re.compile(
    r"\w*_session\w*|\w*session_\w*|\w+\.session\b|ClientSession|scope=\"session\""
    r"|\b(?:tmux|terminal|desktop|login|process|new) sessions?\b|\bsessions? of (?:its|their) own\b"
    r"|\bsession[.(]|\bas session\b|\bsession leader\b",
    re.I,
)
WORDS = json.loads((PROJECT_ROOT / ".ci" / "development-words.json").read_text())
DEVELOPMENT = re.compile(WORDS["pattern"], re.I)


def development_words(text: str) -> list[str]:
    """Each line of text that speaks of how the project was built, with its line number."""
    if "session" not in text.casefold() and not DEVELOPMENT.search(text):
        return []  # most files: no word listed, and no session of the product's own to take out first
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if DEVELOPMENT.search(PRODUCT_SESSIONS.sub("", line)):
            found.append(f"{number}: {line.strip()[:100]}")
    return found


def _tracked_text_files() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "--", *SCANNED], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    this = "tests/test_wording.py"
    return [p for p in listed if p != this and not p.endswith((".png", ".db", ".whl", ".gz"))]


def test_no_tracked_text_speaks_of_how_the_project_was_built():
    if not (PROJECT_ROOT / ".git").exists():
        pytest.skip("not a git checkout: no list of tracked files")
    offenders = {}
    for path in _tracked_text_files():
        try:
            text = (PROJECT_ROOT / path).read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        if lines := development_words(text):
            offenders[path] = lines
    assert not offenders, "\n".join(f"{p}: {lines}" for p, lines in offenders.items())


@pytest.mark.parametrize("line", WORDS["found_in"])
def test_a_line_about_the_build_is_found(line):
    assert development_words(line)


@pytest.mark.parametrize(
    "line",
    [
        "the agent leads a session of its own",
        "start_new_session=True,",
        "with nvml.session() as lib:",
        "a sweep started from a tmux session survives a dropped connection",
        "a torchvision release made for the installed torch",
        "an excellent, silent, released lock",
    ],
)
def test_product_words_are_left_alone(line):
    assert not development_words(line)
