"""Why one GPU is faster: every measured point against its card's measured ceilings, where its step
time went, one sentence per model pair, and the published means checked against yours. Computed at
compare time from what the runs logged, so runs logged before a ceilings run existed are placed too.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from src import recorded
from src.compare.analysis import RelativeRow, SummaryRow
from src.compare.report import markdown_grid
from src.compare.runs import MEASURED, Measurement
from src.config import points
from src.console import gpus
from src.run_result import RunResult

# the stack a ceilings run must share with a point: the software of points.py's stack that runs the
# card's kernels (a model's own libraries, torchvision and transformers, are not in a ceilings run)
STACK_TAGS = tuple(t for name, t in points.SOFTWARE.items() if name not in ("torchvision", "transformers"))
SHARES = recorded.SHARES
SHARE_TITLES = {"matmul": "matmul/conv", "other": "other compute", "comm": "communication",
                "memcpy": "memory copies", "idle": "GPU idle"}  # fmt: skip
HEADING, CSV = "Why: ceilings and step time", "explain.csv"
COLUMNS = ("model", "variant", "precision", "gpu_count", "gpu", "gpu_name", recorded.ACHIEVED_TFLOPS_PER_GPU,
           recorded.MFU, "ceiling_math", "ceiling_tflops", "share_of_ceiling", "ceilings_run",
           *(f"{s}_share" for s in SHARES), recorded.THROTTLED_POWER_SHARE, recorded.POWER_LIMIT,
           "power_limited", "note")  # fmt: skip
POWER_LIMITED = 0.5  # a point whose runs sat at the card's power limit for more of the window than this


class Placement:
    """A measured point against its card's ceilings run and power limit: medians over its runs."""

    def __init__(self, measurement: Measurement, by_id: dict[str, RunResult]) -> None:
        m, runs = measurement, [by_id[r.run_id] for r in measurement.runs if r.run_id in by_id]
        self.measurement, self.gpu_name = m, runs[0].gpu_name
        self.achieved_tflops = median_of(r.achieved_tflops_per_gpu for r in runs)  # per GPU
        self.mfu = median_of(r.mfu for r in runs)
        self.math = m.spec.peak_key  # the math that ran: the ceiling it is held against
        self.ceilings_run = card = matching_ceilings(by_id.values(), *runs)
        self.ceiling_tflops = ceiling = (card.ceilings.matmul_tflops if card else {}).get(self.math)
        self.share_of_ceiling = self.achieved_tflops / ceiling if ceiling and self.achieved_tflops else None
        with_shares = [r.shares for r in runs if r.shares]  # step-time breakdowns
        self.shares = {s: median_of(x[s] for x in with_shares) for s in SHARES} if with_shares else None
        # of the window NVML reported the clocks held down by the power limit; None: no telemetry of it
        self.power_share = median_of(r.telemetry.throttled_power_share for r in runs)
        told = self.power_share is not None
        self.power_limited = self.power_share > POWER_LIMITED if told else None
        limits = sorted({r.tags[recorded.POWER_LIMIT] for r in runs if recorded.POWER_LIMIT in r.tags})
        self.power_limit_w = ("/".join(limits) or None) if told else None  # per GPU: "700", or "300/350"
        # `at its 700 W power limit for 89% of the window (695 W mean, SM clock 1,755 MHz)`
        mean_w = median_of(r.telemetry.power_mean_w for r in runs)  # per GPU
        clock_mhz = median_of(r.telemetry.sm_clock_mean_mhz for r in runs)
        detail = [mean_w and f"{mean_w:,.0f} W mean", clock_mhz and f"SM clock {clock_mhz:,.0f} MHz"]
        limit = f"{self.power_limit_w} W " if self.power_limit_w else ""
        self.power_said = f"at its {limit}power limit for {_pct(self.power_share)} of the window"
        self.power_said += f" ({', '.join(d for d in detail if d)})" if any(detail) else ""
        self.note = ""  # what it lacks: a ceilings run, or that run's matmul figure for its math
        if card is None:
            self.note = f"no ceilings run of {self.gpu_name} x{m.gpu_count} with this software stack: "
            self.note += f"python -m src.train model=ceilings gpu={m.gpu} gpu.count={m.gpu_count}"
        elif ceiling is None:
            self.note = f"the ceilings run has no {self.math} matmul figure"


@dataclass
class Explanation:
    placements: list[Placement]
    sentences: list[str]  # one per model pair
    claims: list[str]  # the published category means checked against the measured ones


def _card(run: RunResult) -> tuple:
    """What a ceilings run must share with a point: GPU name and count, the stack, smoke or not."""
    return run.gpu_name, run.gpu_count, tuple(run.tags.get(t, "") for t in STACK_TAGS), run.smoke


def matching_ceilings(runs: Iterable[RunResult], *of: RunResult) -> RunResult | None:
    """The latest ceilings run in `runs` of the card and stack of any of `of` (smoke with smoke only)."""
    cards = {_card(r) for r in of}
    same = [c for c in runs if c.kind == recorded.CEILINGS and c.gpu_count is not None and _card(c) in cards]
    return max(same, key=lambda c: c.started_ms, default=None)


def median_of(values) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def explain(runs: list, measurements: list[Measurement], rows: list[RelativeRow], summary: list[SummaryRow],
            baseline: str) -> Explanation:  # fmt: skip
    """Place every measured point; a sentence per model pair; the category claims checked."""
    by_id = {r.run_id: r for r in runs}
    placements = [Placement(m, by_id) for m in measurements if m.source == MEASURED]
    placed = {p.measurement.label: p for p in placements}
    sentences = []
    for row in rows:
        m, base = row.measurement, row.baseline
        if base is None or base.side == m.side:
            continue
        a, b = placed.get(m.label), placed.get(base.label)
        head = f"{m.workload} {m.precision} x{m.gpu_count}, {m.side} vs {base.side} {row.relative:.2f}x: "
        p, other = (a, base) if a else (b, m)
        if a and b:
            sentences.append(head + pair_sentence(row.relative, a, b))
        elif p and p.power_limited:  # the other side is a published figure: no telemetry
            said = f"{head}{p.measurement.side} {p.power_said}; {other.side}'s figure is published "
            said += f"({other.source}) and carries no power telemetry: a power-limited run set against a "
            sentences.append(said + "figure whose power is not known.")
    return Explanation(placements, sentences, check_claims(summary, baseline))


def _pct(value: float | None, missing: str = "?") -> str:
    return missing if value is None else f"{value:.0%}"


def _side(p: Placement) -> str:
    """`reaches 55% of its measured bf16 ceiling (780 TFLOP/s), with 62% of its step in matmul/conv
    and 30% other compute`."""
    text = "has no measured ceiling"
    if p.share_of_ceiling is not None:
        text = f"reaches {_pct(p.share_of_ceiling)} of its measured {p.math} ceiling"
        text += f" ({p.ceiling_tflops:,.0f} TFLOP/s)"
    if not p.shares:
        text += ", no step-time breakdown"
    else:
        top = max((s for s in SHARES if s != "matmul"), key=lambda s: p.shares[s] or 0)
        text += f", with {_pct(p.shares['matmul'])} of its step in matmul/conv and "
        text += f"{_pct(p.shares[top])} {SHARE_TITLES[top]}"
    return text + (f", {p.power_said}" if p.power_limited else "")


def pair_sentence(relative: float, a: Placement, b: Placement) -> str:
    """Each side's share of ceiling and breakdown; where both have a ceiling of the same math, the
    ratio split into the ceilings' ratio times the ratio of shares of them; the power limits."""
    text = f"{a.measurement.side} {_side(a)}; {b.measurement.side} {_side(b)}"
    if a.share_of_ceiling and b.share_of_ceiling and a.math == b.math:
        ceilings, used = a.ceiling_tflops / b.ceiling_tflops, a.share_of_ceiling / b.share_of_ceiling
        text += f". Of the {relative:.2f}x, {ceilings:.2f}x is the cards' {a.math} ceilings and "
        text += f"{used:.2f}x how much of them each run used"
        copy_a, copy_b = (p.ceilings_run.ceilings.memory_copy_gbs for p in (a, b))
        if copy_a and copy_b:
            text += f"; their memory copy bandwidths differ {copy_a / copy_b:.2f}x"
    limited = [p.measurement.side for p in (a, b) if p.power_limited]
    unknown = [p.measurement.side for p in (a, b) if p.power_limited is None]
    if len(limited) == 2:
        text += ". Both ran at their power limits: a ratio between power-limited cards"
    elif limited and unknown:
        text += f". {limited[0]} ran at its power limit; {unknown[0]}'s runs logged no power telemetry"
    elif limited:
        text += f". Only {limited[0]} ran at its power limit"
    return text + "."


def check_claims(summary: list[SummaryRow], baseline: str) -> list[str]:
    """The published study's category means (each source other than `measured`) against the
    measured ones: per category, vision against language, and the smallest GPU count against the
    largest, each said in words."""
    means: dict[str, dict[tuple, float]] = {}  # source -> (category, precision, count, gpu) -> mean
    for s in summary:
        if s.side != baseline:  # the baseline's own rows are 1.0 by definition: no claim
            means.setdefault(s.source, {})[s.category, s.precision, s.gpu_count, s.side] = s.relative_mean
    ours = means.pop(MEASURED, {})
    claims = []
    for source, theirs in sorted(means.items()):
        for key in sorted(theirs.keys() & ours.keys()):  # the others, nothing of yours: the tables show them
            (category, precision, count, gpu), value, mine = key, theirs[key], ours[key]
            said = f"{source} {category}, {precision}, {gpus(count)}: {gpu} {value:.2f}x; "
            said += f"measured {mine:.2f}x ({mine / value - 1:+.0%}): "
            if (value - 1) * (mine - 1) > 0 or abs(mine - value) < 0.02:
                claims.append(said + "holds in direction.")
            else:
                claims.append(said + "does not hold: the measured ratio is on the other side of 1.")
        # published: b's mean above or below a's; measured: the same? Vision then language at one
        # precision, count and gpu; the smallest GPU count then the largest of one category, precision, gpu
        pairs = [(("vision", *key), ("language", *key)) for key in sorted({key[1:] for key in theirs})]
        for category, precision, gpu in sorted({(c, p, g) for c, p, _, g in theirs}):
            counts = [n for c, p, n, g in theirs if (c, p, g) == (category, precision, gpu)]
            pairs.append(((category, precision, min(counts), gpu), (category, precision, max(counts), gpu)))
        for a, b in pairs:
            pa, pb, ma, mb = theirs.get(a), theirs.get(b), ours.get(a), ours.get(b)
            if a == b or None in (pa, pb, ma, mb):
                continue
            category, precision, count, gpu, up = *b, pb > pa
            if a[0] != category:  # vision against language
                said = f"{gpu} gains {'more' if up else 'less'} on {category} ({pb:.2f}x) than on {a[0]} "
                said += f"({pa:.2f}x) at {precision}, {gpus(count)}; measured {category} {mb:.2f}x, "
                said += f"{a[0]} {ma:.2f}x"
            else:  # the largest GPU count against the smallest
                said = f"{gpu}'s {category} {precision} ratio is {'higher' if up else 'lower'} "
                said += f"at {count} GPUs ({pb:.2f}x) than at {a[2]} ({pa:.2f}x); "
                said += f"measured {mb:.2f}x and {ma:.2f}x"
            claims.append(f"{source}: {said}: {'holds' if up == (mb > ma) else 'does not hold'}.")
    return claims


def record(p: Placement) -> dict:
    m, card = p.measurement, p.ceilings_run
    values = (m.model, m.variant, m.precision, m.gpu_count, m.side, p.gpu_name, p.achieved_tflops, p.mfu,
              p.math, p.ceiling_tflops, p.share_of_ceiling, card and card.run_id,
              *((p.shares or {}).get(s) for s in SHARES), p.power_share, p.power_limit_w, p.power_limited,
              p.note)  # fmt: skip
    return dict(zip(COLUMNS, values, strict=True))  # in COLUMNS' order


def markdown(explanation: Explanation) -> list[str]:
    """The report's section: the sentences, the claims, the placements (each where it has any)."""
    lines = [
        "Each measured point against its card's own ceilings (the latest `model=ceilings` run of the same "
        "GPU name, count and software stack) and where its step time went (a few steps profiled after "
        "the measured window). Share of ceiling: achieved TFLOP/s over the measured matmul ceiling of "
        "the math that ran; MFU: over the spec sheet. docs/metrics.md says what each share means. A point "
        "whose runs sat at their card's power limit for most of the measured window says so, with the "
        "limit, the mean power and SM clock: the card ran as fast as its power allowed, not its clocks.",
        "",
    ]
    lines += [f"- {s}" for s in explanation.sentences] or ["- No model pair has runs on two GPUs to explain."]
    if explanation.claims:
        lines += ["", "### Published means against yours", "", *[f"- {c}" for c in explanation.claims]]
    if not explanation.placements:
        return lines
    header = ("point", "achieved TFLOP/s", "MFU (spec)", "share of ceiling", *SHARES, "note")
    rows = []
    for p in explanation.placements:
        achieved = "" if p.achieved_tflops is None else f"{p.achieved_tflops:,.3g}"
        used = p.share_of_ceiling and f"{_pct(p.share_of_ceiling)} of {p.ceiling_tflops:,.3g} ({p.math})"
        shares = [_pct(p.shares.get(s)) if p.shares else "" for s in SHARES]
        said = "; ".join(n for n in (p.power_said if p.power_limited else "", p.note) if n)
        rows.append([p.measurement.label, achieved, _pct(p.mfu, ""), used or "", *shares, said])
    return lines + ["", "### Points against their ceilings", ""] + markdown_grid(header, rows)
