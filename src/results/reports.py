"""What a rank reports to its job, as data: the one message that crosses the process boundary.

A leaf: the ranks (src/rank/) write it and the job process (src/run/) reads it, and neither may
import the other. It travels between ranks by all_gather (pickled) and from the node's elastic
agent to the job in the outcome file (JSON): written there with `to_json`, read with `from_json`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from src.results.recorded import CEILINGS


@dataclass(frozen=True)
class RankReport:
    rank: int  # global rank
    pid: int
    world_size: int
    step_times_s: list[float]  # the measured window's steps, in order
    items_per_step: int  # this rank's items per step (its batch x items per sample)
    flops_per_item: float | None
    batch_size: int  # per GPU, as it ran (the one model.batch_size=auto chose, if so)
    loss_first: float
    loss_last: float
    all_finite: bool  # every loss of the window was finite
    stop_reason: str  # ci | max_steps | time_limit: the one the ranks agreed on
    precision_math: dict  # which math ran (src/rank/precision.py)
    device_name: str
    runtime_versions: dict  # torch, CUDA, cuDNN, NCCL as the rank saw them
    peak_memory_gb: float | None  # device memory allocated at most; None on a CPU
    # marks (epoch seconds) of the job's phases, src/run/phases.py
    rank_started: float
    built: float
    first_step_done: float | None  # None without warm-up until the first measured step
    window_start: float
    window_end: float
    agent_ready: float | None = None  # stamped by the node's elastic agent, not the rank
    # the step-time breakdown, profiled after the window (src/rank/step_profiler.py); None: off
    breakdown: dict | None = None
    # the NCCL, NVSHMEM and symmetric-memory variables as the rank saw them (name -> value)
    communication: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict) -> RankReport:
        return cls(**data)


@dataclass(frozen=True)
class CeilingsReport:
    """A model=ceilings rank's report: its device's figures (src/rank/ceiling_probes.py), no training."""

    rank: int
    world_size: int
    figures: dict  # metric name -> {value, min, max, ci95_rel, samples, ...}
    device_name: str
    runtime_versions: dict
    rank_started: float
    window_start: float  # the measurements run from here...
    window_end: float  # ...to here
    built: float | None = None  # phase marks a training rank has (src/run/phases.py): none here
    first_step_done: float | None = None
    agent_ready: float | None = None
    communication: dict = field(default_factory=dict)
    kind: str = CEILINGS

    def to_json(self) -> dict:
        return asdict(self)


Report = RankReport | CeilingsReport


def from_json(data: dict) -> Report:
    """A report read back from the agent's outcome file, of whichever kind the rank wrote."""
    return CeilingsReport(**data) if data.get("kind") == CEILINGS else RankReport.from_json(data)
