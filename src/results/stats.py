"""Statistics of step times: the stopping rule's confidence interval and the reported spread."""

from __future__ import annotations

import math
import statistics

# Two-sided 95% Student-t quantiles for 1..30 degrees of freedom; the normal 1.96 beyond.
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t95(dof: int) -> float:
    return _T95[dof - 1] if dof <= len(_T95) else 1.96


def relative_ci_halfwidth(samples: list[float]) -> float:
    """95% confidence half-width of the mean, as a fraction of the mean (inf below 2 samples)."""
    n = len(samples)
    if n < 2:
        return math.inf
    mean = statistics.fmean(samples)
    return t95(n - 1) * statistics.stdev(samples) / math.sqrt(n) / mean


def percentile(samples: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    ordered = sorted(samples)
    pos = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(pos), math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def rule_missed(
    stop_reason: str | None, steps: int | None, min_steps: int | None, ci: float | None, target_ci: float | None
) -> str | None:
    """How a window fell short of its stopping rule (at least min_steps measured, and its CI within
    target_ci), e.g. `time_limit after 9 of min_steps 100 steps`; None when it met it or it cannot
    be told (a run logged without the figures). A window shorter than min_steps never met it."""
    if steps is not None and min_steps and steps < min_steps:
        return f"{'stopped' if stop_reason in (None, 'ci') else stop_reason} after {steps:,} of min_steps {min_steps:,} steps"
    if stop_reason == "ci" or ci is None or target_ci is None or (stop_reason is None and ci <= target_ci):
        return None
    return f"{stop_reason or 'stopped'} before target_ci: CI +/-{ci:.1%} > {target_ci:.1%}"
