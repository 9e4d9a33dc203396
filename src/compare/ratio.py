"""The one ratio of compare: a value, its 95% interval, the figures behind each side and its flags.

Every ratio and mean compare reports is built by `ratio`: a GPU against the baseline, a category
mean, the hardware and software parts of a cross-stack ratio, the speed/capacity split, the
ceilings' part of a ratio in the explanation. A ratio is a product of figures raised to weights
(a / b: weights 1 and -1); its interval comes from the figures' spreads, a figure on both sides
netted first so that it cancels. A figure is anything with a `key`, a `value` and a `spread`: a
point, a ceilings figure, or another ratio (a mean of ratios treats each ratio as one independent
figure).

Spreads and 95% intervals: every figure's spread is carried on the log scale, as the standard
error of its log and its degrees of freedom. Throughput is positive and a ratio is a quotient, so on the log scale a ratio
is a difference and independent sides add their variances; the degrees of freedom of a sum come
from Welch-Satterthwaite and the interval from Student's t. A bootstrap over runs was not chosen:
with the usual 2-3 repeats it has only a handful of distinct resamples and its interval is too
narrow, and it has nothing to resample for a single run.

A point's spread comes from its repeats (fresh processes: n runs, n-1 degrees of freedom), or, with
one run, from that run's step-time confidence interval ("within-run": it misses what differs
between processes, such as clocks, placement and autotuning choices). A published figure that is
the mean of several logged runs (Lambda's 2021 tables: reference/lambda/v0-pytorch-train-runs.csv)
carries their spread ("published runs"); one without has none: it contributes none, and an
interval made from it says so.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Protocol

from src import recorded
from src.stats import t95

REPEATS, WITHIN_RUN, PUBLISHED_RUNS, PUBLISHED = "repeats", "within-run", "published runs", "published"
PROJECTED = recorded.PROJECTED  # a projection's band: its point's interval and the model's error (src/projection/)
BASES = (REPEATS, WITHIN_RUN, PUBLISHED_RUNS, PUBLISHED, PROJECTED)


@dataclass(frozen=True)
class Spread:
    """Uncertainty of a log figure: standard error, degrees of freedom, where it came from."""

    se: float  # 0 for a published figure: no spread is known
    dof: float
    basis: str  # one of BASES, or several joined by "+"

    def interval(self, value: float) -> tuple[float, float] | None:
        """The 95% interval around `value` (None when nothing of it has a spread)."""
        if self.se == 0 or not math.isfinite(self.se):
            return None
        # Welch's dof of equal sides is a whole number that floats can land just below (3.9999...)
        half = t95(max(1, math.floor(self.dof + 1e-9))) * self.se
        return (value * math.exp(-half), value * math.exp(half))


def point_spread(
    throughputs: list[float],
    ci_rel: float | None,
    steps: int | None,
    published: bool,
    published_runs: tuple[int, float] | None = None,
) -> Spread | None:
    """The spread of a point's log throughput; None when a lone run logged no step-time CI.
    `published_runs`: (n, standard error of their mean log throughput) behind a published figure."""
    if published:
        if published_runs and published_runs[0] > 1:
            return Spread(published_runs[1], published_runs[0] - 1, PUBLISHED_RUNS)
        return Spread(0.0, math.inf, PUBLISHED)
    if len(throughputs) > 1:
        logs = [math.log(t) for t in throughputs]
        return Spread(statistics.stdev(logs) / math.sqrt(len(logs)), len(logs) - 1, REPEATS)
    if ci_rel is None or steps is None or steps < 2 or not math.isfinite(ci_rel):
        return None
    # the CI half-width of the mean step time is t * se; 1/mean is throughput, so its log has that se
    return Spread(ci_rel / t95(steps - 1), steps - 1, WITHIN_RUN)


def combine(spreads: list[Spread], weights: list[float] | None = None) -> Spread:
    """The spread of sum(w_i * x_i) over independent figures x_i (a ratio: weights 1 and -1)."""
    weights = weights or [1.0] * len(spreads)
    terms = [(w * s.se) ** 2 for w, s in zip(weights, spreads, strict=True)]
    variance = sum(terms)
    measured = [(t, s.dof) for t, s in zip(terms, spreads, strict=True) if t > 0]
    dof = variance**2 / sum(t**2 / d for t, d in measured) if measured else math.inf
    parts = {part for s in spreads for part in s.basis.split("+")}
    basis = "+".join(sorted(parts, key=BASES.index))
    return Spread(math.sqrt(variance), dof, basis)


def net_spread(terms: list[tuple[object, Spread | None, float]]) -> Spread | None:
    """The spread of sum(w * log x) over terms (key, spread of log x, w) in which one figure (one
    key) may appear more than once: its weights add first, so a figure on both sides of a quotient
    cancels instead of counting twice. None when a figure left has no spread, or none is left (the
    value is then exact: the same figures on both sides)."""
    weights: dict[object, float] = {}
    spreads: dict[object, Spread | None] = {}
    for key, spread, weight in terms:
        weights[key] = weights.get(key, 0.0) + weight
        spreads[key] = spread
    kept = [key for key, weight in weights.items() if weight != 0.0]
    if not kept or any(spreads[key] is None for key in kept):
        return None
    return combine([spreads[key] for key in kept], [weights[key] for key in kept])


def mean_weights(ratios: list[float]) -> list[float]:
    """d log(mean of ratios) = sum w_i d log r_i with w_i = r_i / sum r (the delta method)."""
    total = sum(ratios)
    return [r / total for r in ratios]


def holds_one(interval: tuple[float, float] | None) -> bool:
    """A ratio whose interval holds 1.0: no measurable difference."""
    return interval is not None and interval[0] <= 1.0 <= interval[1]


def describe(spread: Spread | None) -> str:
    """What an interval rests on, for tables: 'repeats', 'within-run only', 'published: none'."""
    if spread is None:
        return "none: a run without a step-time CI"
    if spread.basis == PUBLISHED:
        return "none: published figures have no spread"
    parts = spread.basis.split("+")
    text = "+".join(p.replace(WITHIN_RUN, "within-run only") for p in parts if p != PUBLISHED)
    return text + (" (published side: no spread)" if PUBLISHED in parts else "")


MATH_DIFFERS, STACK_DIFFERS, GPU_SHARED = "math_differs", "stack_differs", "gpu_shared"  # and PROJECTED
SETTING_DIFFERS = "setting_differs"
NO_DIFFERENCE = "no measurable difference"


class Figure(Protocol):
    key: object  # what makes two figures the same one
    value: float
    spread: Spread | None


@dataclass(frozen=True)
class Fixed:
    """A figure without a spread (a ceilings run's figure)."""

    key: object
    value: float
    spread: Spread | None = None


@dataclass(frozen=True)
class Ratio:
    value: float
    spread: Spread | None  # of log value; None: no interval can be given
    terms: tuple = ()  # (figure, weight): value = prod(figure.value ** weight), unless a mean
    stack_differs: str = ""  # what differs between the sides' stacks, e.g. "torch 2.14.1 vs 2.11.0"
    setting_differs: str = ""  # a measured key other than the compared one, e.g. "cpu_threads=1 vs cpu_threads=2"
    math_differs: bool = False  # strict fp32 against TF32 math
    projected: bool = False  # a side is projected, not measured

    @property
    def key(self) -> tuple:
        return ("ratio", tuple((f.key, w) for f, w in self.terms))

    @property
    def interval(self) -> tuple[float, float] | None:
        return self.spread.interval(self.value) if self.spread else None

    @property
    def no_difference(self) -> bool:
        """Its interval holds 1.0."""
        return holds_one(self.interval)

    def points(self) -> list:
        """The measured points behind it, either side (a point on both sides cancels: a figure over
        itself is 1 whatever its runs)."""
        weights: dict[object, float] = {}
        found: dict[object, object] = {}
        for figure, weight in self._flat(1.0):
            weights[figure.key] = weights.get(figure.key, 0.0) + weight
            found[figure.key] = figure
        return [found[k] for k, w in weights.items() if w != 0.0 and hasattr(found[k], "runs")]

    def _flat(self, scale: float) -> list:
        return [
            term
            for figure, weight in self.terms
            for term in (figure._flat(scale * weight) if isinstance(figure, Ratio) else [(figure, scale * weight)])
        ]

    @property
    def gpu_shared(self) -> bool:
        """A run behind either side shared its GPU with another program."""
        return any(r.result.foreign for p in self.points() for r in p.runs)

    @property
    def flags(self) -> list[str]:
        named = ((MATH_DIFFERS, self.math_differs), (STACK_DIFFERS, self.stack_differs),
                 (SETTING_DIFFERS, self.setting_differs), (GPU_SHARED, self.gpu_shared),
                 (PROJECTED, self.projected))  # fmt: skip
        return [name for name, on in named if on]

    def basis(self) -> str:
        """What its interval rests on: `repeats`, `within-run only`, `none: ...`."""
        return describe(self.spread)


def ratio(terms, value: float | None = None, independent: bool = False, **flags) -> Ratio:
    """The ratio prod(figure.value ** weight) over `terms` (figure, weight), or `value` where it is
    a mean of them (the weights are then the mean's sensitivity to each: mean_weights).
    A ratio among the terms counts by its own figures, netted with the others (a point shared by
    two ratios counts once), unless `independent`: then each ratio is one figure with its own
    spread. flags: stack_differs, setting_differs, math_differs, projected."""
    terms = tuple(terms)
    if value is None:  # the top over the bottom, so that a / b is exactly that
        value = math.prod(f.value**w for f, w in terms if w > 0) / math.prod(f.value**-w for f, w in terms if w < 0)
    flat = terms if independent else Ratio(value, None, terms)._flat(1.0)
    spread = net_spread([(f.key, f.spread, w) for f, w in flat])
    return Ratio(value, spread, terms, **flags)


def quotient(a: Figure, b: Figure, **flags) -> Ratio:
    """a / b."""
    return ratio([(a, 1.0), (b, -1.0)], **flags)


def carried_flags(ratios) -> dict:
    """The flags a ratio made of these ratios carries: what differs in any of them, projected if any is."""
    flags = {
        name: "; ".join(sorted({getattr(r, name) for r in ratios if getattr(r, name)}))
        for name in (STACK_DIFFERS, SETTING_DIFFERS)
    }
    return flags | {"projected": any(r.projected for r in ratios)}


def columns(name: str, r: Ratio | None) -> dict:
    """A ratio as a table's three columns: `name`, `name_low`, `name_high` (None where it has none)."""
    low, high = (r and r.interval) or (None, None)
    return {name: r.value if r else None, f"{name}_low": low, f"{name}_high": high}


def means(ratios: list[Ratio]) -> tuple[Ratio, Ratio]:
    """(arithmetic mean, geometric mean) of independent ratios, each with its 95% interval: the
    uncertainty of the mean of these ratios as measured, not the spread between them. Flags carry
    over: a mean of a stack_differs ratio is flagged too."""
    k = len(ratios)
    flags = carried_flags(ratios)
    values = [r.value for r in ratios]
    weights = mean_weights(values)
    mean = ratio(zip(ratios, weights, strict=True), value=sum(values) / k, independent=True, **flags)
    return mean, ratio([(r, 1 / k) for r in ratios], independent=True, **flags)
