"""Warm-up: the first step always, then steps until warmup_steps, or sooner once warmup_s has passed."""

from __future__ import annotations

import pytest
import torch

from src.rank import worker


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def time(self) -> float:
        return self.now


@pytest.mark.parametrize(
    ("step_s", "steps"),
    [
        (0.4, 4),  # slow steps: the first, then three more (1.2 s >= warmup_s)
        (0.01, 10),  # fast steps: warmup_steps ends it
        (5.0, 3),  # very slow steps: still the first and MIN_WARMUP_AFTER_FIRST more
    ],
)
def test_warm_up_ends_at_warmup_steps_or_after_warmup_s(monkeypatch, step_s, steps):
    clock = FakeClock()
    monkeypatch.setattr(worker.time, "time", clock.time)
    ran = []

    def step():
        clock.now += step_s
        ran.append(clock.now)

    bench = {"warmup_steps": 10, "warmup_s": 1.0}
    first_done = worker._warm_up(step, bench, 1, torch.device("cpu"), worker.Progress(None, False))
    assert len(ran) == steps
    assert first_done == ran[0]  # when the first step (autotuning, compilation) ended


def test_no_warm_up_steps_means_none():
    bench = {"warmup_steps": 0, "warmup_s": 1.0}
    assert worker._warm_up(None, bench, 1, torch.device("cpu"), worker.Progress(None, False)) is None
