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


# A job's result line and an NVML warning, each longer than 80 columns, printed by a fresh process.
PRINTS = f"""
from src import console
metrics = {{**{METRICS!r}, "measured_steps": 40, "step_time_ci95_rel": 0.05}}
console.result_line("a6000x1-resnet50-amp", metrics, "images/s", "time_limit", 0.01)
console.warning("NVML: " + "; ".join(["cannot read the power limit of GPU 0000:01:00.0"] * 3))
"""


def _terminal(columns: int) -> tuple[int, int]:
    """A pseudo-terminal `columns` wide: (our end, the child's end)."""
    import fcntl
    import pty
    import struct
    import termios

    ours, theirs = pty.openpty()
    fcntl.ioctl(theirs, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return ours, theirs


def _run(stdout, stdin, stderr) -> None:
    import os
    import subprocess
    import sys

    env = {
        k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "TTY_COMPATIBLE")
    }
    subprocess.run([sys.executable, "-c", PRINTS], stdin=stdin, stdout=stdout, stderr=stderr, env=env,
                   check=True, timeout=120)  # fmt: skip


def test_a_piped_log_keeps_every_line_whole_though_the_terminal_is_80_wide(tmp_path):
    """`python -m src.train ... > log` in an 80-column terminal: stdin and stderr are that
    terminal, stdout is a file; no line is cut for grep."""
    import os

    ours, theirs = _terminal(80)
    log = tmp_path / "log"
    with open(log, "w") as stdout:
        _run(stdout, theirs, theirs)
    os.close(theirs)
    os.close(ours)
    lines = log.read_text().splitlines()
    (done,) = [line for line in lines if line.startswith("done ")]
    assert done.endswith("stopped at time_limit before target_ci: CI +/-5.0% > 1.0%)")
    (warned,) = [line for line in lines if line.startswith("warning NVML")]
    assert len(warned) > 80 and warned == warned.rstrip()
    assert len(lines) == 2


def test_a_terminal_gets_lines_wrapped_at_its_width():
    import os

    ours, theirs = _terminal(80)
    _run(theirs, theirs, theirs)
    os.close(theirs)
    shown = b""
    while True:
        try:
            chunk = os.read(ours, 65536)
        except OSError:  # the child's end is closed: everything is read
            break
        if not chunk:
            break
        shown += chunk
    os.close(ours)
    import re

    lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in shown.decode().splitlines()]
    assert len(lines) > 2 and max(map(len, lines)) <= 80


def test_a_skip_reason_is_said_once(printed, monkeypatch):
    """The skipped line said why; the sweep summary does not repeat it, but keeps a reason this
    process never printed (a job run elsewhere, e.g. on Slurm)."""
    monkeypatch.setattr(console, "_said", set())
    console.unavailable_line("a6000x1-resnet50-amp", "needs 1 x RTX A6000; this host has 1 x NVIDIA H200")
    rows = [
        {
            "name": "a6000x1-resnet50-amp",
            "status": "SKIPPED",
            "error": "needs 1 x RTX A6000; this host has 1 x NVIDIA H200",
        },
        {
            "name": "a6000x1-gpt2-amp",
            "status": "SKIPPED",
            "error": "needs 1 x RTX A6000; this host has 2 x CPU",
        },
    ]
    console.summary_table(rows)
    assert printed.getvalue().count("needs 1 x RTX A6000; this host has 1 x NVIDIA H200") == 1
    assert "a6000x1-gpt2-amp: needs 1 x RTX A6000; this host has 2 x CPU" in printed.getvalue()


def test_a_long_line_wraps_between_words_under_its_text_in_a_terminal_and_stays_whole_in_a_log(monkeypatch):
    address = "https://download.pytorch.org/whl/cpu"
    text = "note  torch     " + " ".join(["the CPU build does the same work here;"] * 6) + f" see {address} now"
    for terminal, expected_lines in ((True, None), (False, 1)):
        out = io.StringIO()
        monkeypatch.setattr(
            console, "console", console._Console(file=out, width=80, force_terminal=terminal, highlight=False)
        )
        console.hanging_line(text, 16)
        lines = out.getvalue().splitlines()
        if expected_lines:
            assert lines == [text]
            continue
        assert len(lines) > 1 and max(map(len, lines)) <= 80
        assert all(line.startswith(" " * 16) and line[16] != " " for line in lines[1:])
        assert " ".join(" ".join(lines).split()) == " ".join(text.split())  # every word whole, in order
        assert any(address in line for line in lines)
