"""Where a job's wall time goes: consecutive phases from the command to the logged result.

Each phase runs from one mark to the next; the marks come from the job process (its start, the
launch, the ranks' reports in hand, the final write) and from the agent and the ranks (in their
reports). Logged as `phase_<name>_s` metrics and printed by benchmarks/time_to_result.py.
"""

from __future__ import annotations

import os
import time

from src.results import recorded
from src.results.reports import RankReport
from src.tracking import owner

# (phase, the mark that ends it), in order; each phase starts at the previous phase's mark
PHASES = (
    ("config", "job_entry"),  # command (or the previous job's end) to this job: compose, devices, finalise
    ("run_open", "launch"),  # experiment, run, environment, params, telemetry started
    ("agent_up", "agent_ready"),  # the elastic agent's interpreter and imports, beyond the job's own
    ("ranks_up", "rank_started"),  # rank processes started (interpreter + imports when spawned)
    ("model_build", "built"),  # model, batch, optimizer, DDP, torch.compile wrapper
    ("first_step", "first_step_done"),  # cuDNN autotuning, compilation, allocator growth
    ("warmup", "window_start"),  # the remaining warm-up steps
    ("measure", "window_end"),  # the measured window
    ("rank_exit", "outcome"),  # reports gathered, ranks and agent gone, outcome read
    ("logging", "logged"),  # telemetry summary, metrics, tags, artifacts, up to the final write
)
RANK_MARKS = ("agent_ready", "rank_started", "built", "first_step_done", "window_start", "window_end")

_previous_job_end: float | None = None


def job_start_mark() -> float:
    """Where this job's `config` phase starts: the previous job's end in this process, or the
    process's own start for its first job (interpreter, imports, Hydra's compose)."""
    if _previous_job_end is not None:
        return _previous_job_end
    return float(owner.process_started(os.getpid()) or time.time())


def job_ended() -> None:
    global _previous_job_end
    _previous_job_end = time.time()


def rank_marks(ranks: list[RankReport]) -> dict[str, float]:
    """A job's marks from its ranks' reports (the agent stamps its own into them): when the last
    rank reached each (they move in step); the window opens at the first rank's start."""
    marks = {
        name: max(getattr(r, name) for r in ranks)
        for name in RANK_MARKS
        if all(getattr(r, name) is not None for r in ranks)
    }
    marks["window_start"] = min(r.window_start for r in ranks)
    return marks


def phase_metrics(start: float, marks: dict[str, float]) -> dict[str, float]:
    """`phase_<name>_s` for every phase whose end mark is known, each from the previous mark."""
    metrics, previous = {}, start
    for name, mark in PHASES:
        if mark not in marks:
            continue
        metrics[recorded.phase_metric(name)] = max(0.0, marks[mark] - previous)
        previous = marks[mark]
    return metrics
