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


METRICS = {"throughput": 1234.5, "step_time_ms": 2.0, "step_time_p10_ms": 1.9, "step_time_p90_ms": 2.2}


def test_a_figure_that_stopped_before_target_ci_says_why(printed):
    metrics = {**METRICS, "measured_steps": 40, "step_time_ci95_rel": 0.05}
    console.result_line("cpux1-gpt2-fp32", metrics, "tokens/s", "time_limit", 0.01)
    assert "stopped at time_limit before target_ci: CI +/-5.0% > 1.0%" in printed.getvalue()


def test_a_window_shorter_than_min_steps_warns_even_with_a_tight_ci(printed):
    metrics = {**METRICS, "measured_steps": 9, "step_time_ci95_rel": 0.004}
    console.result_line("cpux1-gpt2-fp32", metrics, "tokens/s", "time_limit", 0.01, min_steps=100000)
    assert "stopped at time_limit after 9 of min_steps 100,000 steps" in " ".join(printed.getvalue().split())


def test_a_figure_that_met_target_ci_prints_no_warning(printed):
    metrics = {**METRICS, "measured_steps": 20, "step_time_ci95_rel": 0.004}
    console.result_line("cpux1-gpt2-fp32", metrics, "tokens/s", "ci", 0.01)
    assert "done cpux1-gpt2-fp32: 1,234.5 tokens/s" in printed.getvalue()
    assert "stopped" not in printed.getvalue()


def test_the_summary_table_fits_80_columns_with_run_names_whole(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(console, "console", Console(file=out, width=80, highlight=False))
    names = ["h200x1-maskrcnn-bf16", "a6000x8-txl_large-tf32", "rtx3090x2-bert_large-amp"]
    rows = [
        {
            "name": n,
            "status": "FINISHED",
            "throughput": 123456.7,
            "unit": "sequences/s",
            "step_time_ms": 1234.5,
        }
        for n in names
    ] + [{"name": "cpux1-resnet50-fp32", "status": "FAILED", "error": REASON}]
    console.summary_table(rows)
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 80
    for name in [*names, "cpux1-resnet50-fp32"]:
        assert any(name in line for line in lines), name
