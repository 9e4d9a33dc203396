"""Why one GPU is faster: every measured point against its card's measured ceilings, where its step
time went, and one sentence per model pair. Computed at compare time from what the runs logged (the
point's summary, src/compare/runs.py), so runs logged before a ceilings run existed are placed too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from src.compare import charts
from src.compare.report import Section, Table
from src.compare.runs import MEASURED, Measurement
from src.config import points
from src.results import recorded
from src.results.run_result import RunResult

# the stack a ceilings run must share with a point: the software of points.py's stack that runs the
# card's kernels (a model's own libraries, torchvision and transformers, are not in a ceilings run)
STACK_TAGS = tuple(t for name, t in points.SOFTWARE.items() if name not in ("torchvision", "transformers"))
SHARE_TITLES = {
    "matmul": "matmul/conv",
    "other": "other compute",
    "comm": "communication",
    "memcpy": "memory copies",
    "idle": "GPU idle",
}
SHARE_COLUMNS = tuple(f"{s}_share" for s in recorded.SHARES)
COLUMNS = (
    *("model", "variant", "precision", "gpu_count", "gpu", "gpu_name", recorded.ACHIEVED_TFLOPS_PER_GPU),
    *(recorded.MFU, "ceiling_math", "ceiling_tflops", "share_of_ceiling", "ceilings_run", *SHARE_COLUMNS),
    *(recorded.THROTTLED_POWER_SHARE, recorded.POWER_LIMIT, "power_limited", "note"),
)
SHOWN = ("model", "variant", "precision", "gpu_count", "gpu", recorded.ACHIEVED_TFLOPS_PER_GPU, recorded.MFU)
SHOWN += ("share_of_ceiling", "ceiling_tflops", "ceiling_math", *SHARE_COLUMNS, "note")
INTRO = (
    "Each measured point against its card's own ceilings (the latest `model=ceilings` run of the same GPU "
    "name, count and software stack) and where its step time went (a few steps profiled after the measured "
    "window). Share of ceiling: achieved TFLOP/s over the measured matmul ceiling of the math that ran; MFU: "
    "over the spec sheet. docs/metrics.md says what each share means. A point whose runs sat at their card's "
    "power limit for at least half of the measured window says so, with the limit, the mean power and SM "
    "clock: the card ran as fast as its power allowed, not its clocks."
)


@dataclass(frozen=True)
class Placement:
    """A measured point against its card's latest ceilings run of its stack (None: there is none)."""

    point: Measurement
    ceilings_run: RunResult | None

    @property
    def math(self):
        return self.point.spec.peak_key  # the math that ran: the ceiling it is held against

    @property
    def ceiling_tflops(self):
        return self.ceilings_run.ceilings.matmul_tflops.get(self.math) if self.ceilings_run else None

    @property
    def share_of_ceiling(self):
        achieved, ceiling = self.point.achieved_tflops_per_gpu, self.ceiling_tflops
        return achieved / ceiling if achieved and ceiling else None

    @property
    def note(self):
        """What it lacks: a ceilings run, or that run's matmul figure for its math."""
        m = self.point
        if self.ceilings_run is None:
            return (
                f"no ceilings run of {m.gpu_name} x{m.gpu_count} with this software stack: "
                f"python -m src.train model=ceilings gpu={m.gpu} gpu.count={m.gpu_count}"
            )
        return "" if self.ceiling_tflops else f"the ceilings run has no {self.math} matmul figure"

    @property
    def power_said(self):
        """`at its 700 W power limit for 89% of the window (695 W mean, SM clock 1,755 MHz)`."""
        m = self.point
        limit = f"{m.power_limit_w} W " if m.power_limit_w else ""
        detail = [
            m.power_mean_w and f"{m.power_mean_w:,.0f} W mean",
            m.sm_clock_mean_mhz and f"SM clock {m.sm_clock_mean_mhz:,.0f} MHz",
        ]
        said = f"at its {limit}power limit for {m.throttled_power_share:.0%} of the window"
        return said + (f" ({', '.join(d for d in detail if d)})" if any(detail) else "")


def _card(run):
    """What a ceilings run must share with a point: GPU name and count, the stack, smoke or not."""
    return run.gpu_name, run.gpu_count, tuple(run.tags.get(t, "") for t in STACK_TAGS), run.smoke


def matching_ceilings(runs, *of):
    """The latest ceilings run in `runs` of the card and stack of any of `of` (smoke with smoke only)."""
    cards = {_card(r) for r in of}
    same = [c for c in runs if c.kind == recorded.CEILINGS and _card(c) in cards]
    return max(same, key=lambda c: c.started_ms, default=None)


def _side(p):
    """`reaches 55% of its measured bf16 ceiling (780 TFLOP/s), with 62% of its step in matmul/conv
    and 30% other compute`."""
    text, shares = "has no measured ceiling", p.point.shares
    if p.share_of_ceiling is not None:
        text = f"reaches {p.share_of_ceiling:.0%} of its measured {p.math} ceiling"
        text += f" ({p.ceiling_tflops:,.0f} TFLOP/s)"
    if not shares:
        text += ", no step-time breakdown"
    else:
        top = max((s for s in recorded.SHARES if s != "matmul"), key=lambda s: shares[s])
        text += f", with {shares['matmul']:.0%} of its step in matmul/conv and {shares[top]:.0%} {SHARE_TITLES[top]}"
    return text + (f", {p.power_said}" if p.point.at_power_limit else "")


def pair_sentence(relative, a, b):
    """Each side's share of ceiling and breakdown; where both have a ceiling of the same math, the
    ratio split into the ceilings' ratio times the ratio of shares of them; the power limits."""
    text = f"{a.point.side} {_side(a)}; {b.point.side} {_side(b)}"
    if a.share_of_ceiling and b.share_of_ceiling and a.math == b.math:
        ceilings, used = a.ceiling_tflops / b.ceiling_tflops, a.share_of_ceiling / b.share_of_ceiling
        text += f". Of the {relative:.2f}x, {ceilings:.2f}x is the cards' {a.math} ceilings and "
        text += f"{used:.2f}x how much of them each run used"
        copy_a, copy_b = (p.ceilings_run.ceilings.memory_copy_gbs for p in (a, b))
        if copy_a and copy_b:
            text += f"; their memory copy bandwidths differ {copy_a / copy_b:.2f}x"
    limited = [p.point.side for p in (a, b) if p.point.at_power_limit]
    unknown = [p.point.side for p in (a, b) if p.point.at_power_limit is None]
    if len(limited) == 2:
        text += ". Both ran at their power limits: a ratio between power-limited cards"
    elif limited and unknown:
        text += f". {limited[0]} ran at its power limit; {unknown[0]}'s runs logged no power telemetry"
    elif limited:
        text += f". Only {limited[0]} ran at its power limit"
    return text + "."


def sentences(rows, placed):
    """One per ratio between two sides, where one or both are placed."""
    said = []
    for row in rows:
        m, base = row.measurement, row.baseline
        if base is None or base.side == m.side:
            continue
        a, b = placed.get(m.point), placed.get(base.point)
        head = f"{m.workload} {m.precision} x{m.gpu_count}, {m.side} vs {base.side} {row.value:.2f}x: "
        p, other = (a, base) if a else (b, m)
        if a and b:
            said.append(head + pair_sentence(row.value, a, b))
        elif p and p.point.at_power_limit:  # the other side is a published figure: no telemetry
            said.append(
                f"{head}{p.point.side} {p.power_said}; {other.side}'s figure is published ({other.source}) and "
                "carries no power telemetry: a power-limited run set against a figure whose power is not known."
            )
    return said


def record(p):
    """Its row of explain.csv: the point's figures and the placement's own (ceiling_tflops, share_of_ceiling, note)."""
    m, card = p.point, p.ceilings_run
    return {name: getattr(p, name, getattr(m, name, None)) for name in COLUMNS} | {
        "gpu": m.side,
        "ceiling_math": p.math,
        "ceilings_run": card and card.run_id,
        **{f"{s}_share": (m.shares or {}).get(s) for s in recorded.SHARES},
        recorded.POWER_LIMIT: None if m.throttled_power_share is None else m.power_limit_w,
        "power_limited": m.at_power_limit,
    }


def section(runs, measurements, rows):
    """Each measured point placed, a sentence per model pair, the step breakdown beside the ceilings."""
    placements = [
        Placement(m, matching_ceilings(runs, *[r.result for r in m.runs]))
        for m in measurements
        if m.source == MEASURED
    ]
    if not placements:  # nothing measured to place
        return []
    said = sentences(rows, {p.point.point: p for p in placements})
    lines = [INTRO, "", *([f"- {s}" for s in said] or ["- No model pair has runs on two GPUs to explain."])]
    table = Table(
        [record(p) for p in placements], COLUMNS, "explain.csv", SHOWN, title="Points against their ceilings:"
    )
    draw = functools.partial(charts.breakdown, placements)
    return [Section("Why: ceilings and step time", lines, [table], draw=draw)]
