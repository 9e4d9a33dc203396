"""What a projected ratio between two target cards is made of, in one sentence a buyer reads:

    a6000 over rtx3090, txl_large amp x1 (projected from h200): 1.61x tensor rate on 46% of the
    rtx3090's step, 0.81x SMs x clock on 30%, 0.82x memory bandwidth on 22% = 1.09x at batch 8;
    1.05x from the batch (32 against 8) = 1.14x [1.02-1.28].

Each governing ratio is how much faster card A does that part than card B, on the share of B's
projected step it takes; their weighted sum is the ratio at the same batch. Where the two cards
run different batches (each its profile's), the rest is the capacity factor.
"""

from __future__ import annotations

from src.projection.model import Projection, project, ratio_band
from src.results.recorded import AT_POWER_LIMIT

SHOWN = 0.02  # parts under 2% of the step are left out of the words (not of the figure)


def same_batch(a: Projection, b: Projection, model_error: float) -> Projection:
    """Card A projected from B's point at B's batch: the ratio's speed part."""
    return project(b.source, b.source_figures, a.target_figures, model_error, b.batch)


def pair_sentence(a: Projection, b: Projection, model_error: float) -> str:
    p = b.source
    ratio = a.throughput / b.throughput
    at_b = same_batch(a, b, model_error) if a.batch != b.batch or a.source is not b.source else a
    speed = at_b.throughput / b.throughput
    governs: dict[str, list[float]] = {}  # ratio kind -> [B's time share, A's time share]
    for fa, fb in zip(at_b.factors, b.factors, strict=True):
        both = governs.setdefault(fb.governs, [0.0, 0.0])
        both[0] += fb.target_share / b.step_ratio
        both[1] += fa.target_share / b.step_ratio
    parts = [
        f"{share_b / share_a:.2f}x {kind} on {share_b:.0%}"
        for kind, (share_b, share_a) in sorted(governs.items(), key=lambda item: -item[1][0])
        if share_b >= SHOWN and share_a > 0
    ]
    head = (
        f"{a.target.name} over {b.target.name}, {p.model} {p.precision} x{p.gpu_count} (projected from {p.gpu}): "
        f"{', '.join(parts)} of the {b.target.name}'s step = {speed:.2f}x at batch {b.batch}"
    )
    low, high = ratio_band(a, b, model_error)
    if at_b is a:
        return f"{head} [{low:.2f}-{high:.2f}].{_power(p)}"
    rest = (
        f"from the batch ({a.batch} against {b.batch})"
        if a.source.gpu == b.source.gpu
        else f"from {a.target.name}'s own point ({a.source.gpu}'s, at batch {a.batch})"
    )
    return f"{head}; {ratio / speed:.2f}x {rest} = {ratio:.2f}x [{low:.2f}-{high:.2f}].{_power(p)}"


def _power(point) -> str:
    """Where the source ran at its power limit, said: its measured step is what it sustained there."""
    if point.power_bound is None or point.power_bound < AT_POWER_LIMIT:
        return ""
    return f" {point.gpu} ran at its power limit in {point.power_bound:.0%} of the window."
