"""What the console prints: free-text failure reasons appear as they are, never read as markup."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from src import console

# a real gloo error: a rich closing tag to the eye of the markup parser
REASON = "rank 0 failed: [/__w/pytorch/third_party/gloo/pair.cc:545] Read error [bold]x"


@pytest.fixture
def printed(monkeypatch) -> io.StringIO:
    out = io.StringIO()
    monkeypatch.setattr(console, "console", Console(file=out, width=300, highlight=False))
    return out


def test_a_failure_line_prints_its_reason_verbatim(printed):
    console.failure_line("cpux2-gpt2-fp32", REASON)
    assert f"FAILED cpux2-gpt2-fp32: {REASON}" in printed.getvalue()


def test_the_summary_table_prints_the_error_verbatim(printed):
    console.summary_table([{"name": "cpux2-gpt2-fp32", "status": "FAILED", "error": REASON}])
    assert REASON in printed.getvalue()
