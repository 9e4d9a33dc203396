"""What a finished run's own record says against its figure: it missed its stopping rule, or it
shared its GPU with another program. Compare flags such a figure; resume measures its point again."""

from __future__ import annotations

from src import stats
from src.tracking import tags as tag


def rule_missed(tags: dict, metrics: dict, params: dict) -> str | None:
    """How a run stopped short of its stopping rule: fewer steps than min_steps (whatever its tag
    says: runs tagged `ci` after a cut-short window were logged before that was caught), its
    `stop_reason` tag, else (runs logged before the tag existed) its CI metric against the target
    param. None when it met it or cannot tell."""
    steps, min_steps = metrics.get("measured_steps"), stats.positive_number(params.get("benchmark.min_steps"))
    return stats.rule_missed(
        tags.get(tag.STOP_REASON),
        None if steps is None else int(steps),
        None if min_steps is None else int(min_steps),
        metrics.get("step_time_ci95_rel"),
        stats.positive_number(params.get("benchmark.target_ci")),
    )


def flaw(tags: dict, metrics: dict, params: dict) -> str | None:
    """Why a FINISHED run's figure is not a clean measurement of its point, in a few words; None."""
    if shared := tags.get(tag.GPU_FOREIGN_PROCESSES):
        return f"shared its GPU with {shared}"
    if missed := rule_missed(tags, metrics, params):
        return f"missed its stopping rule ({missed})"
    return None
