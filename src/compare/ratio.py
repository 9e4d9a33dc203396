"""The one ratio of compare: a value, its 95% interval, the figures behind each side and its flags.

Every ratio and mean compare reports is built here. A ratio is a product of figures raised to
weights (a / b: weights 1 and -1); a figure is anything with a `value` and a `spread` (a point,
another ratio), and one on both sides (one object: compare makes one per point) is netted first so
that it cancels.

Spreads are carried on the log scale (standard error and degrees of freedom): throughput is
positive and a ratio a quotient, so independent sides add their variances, the degrees of freedom
come from Welch-Satterthwaite and the interval from Student's t. A bootstrap over runs was not
chosen: with the usual 2-3 repeats it has a handful of distinct resamples and too narrow an
interval, and nothing to resample for a single run. A point's spread comes from its repeats, or,
with one run, from its step-time CI ("within-run": it misses what differs between processes, such
as clocks, placement and autotuning); a published figure carries the spread of the logged runs it
is the mean of ("published runs", reference/lambda/v0-pytorch-train-runs.csv), else none.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from src.results.recorded import PROJECTED
from src.results.stats import t95

REPEATS, WITHIN_RUN, PUBLISHED_RUNS, PUBLISHED = "repeats", "within-run", "published runs", "published"
BASES = (REPEATS, WITHIN_RUN, PUBLISHED_RUNS, PUBLISHED, PROJECTED)  # PROJECTED: a projection's band
FLAGS = ("math_differs", "stack_differs", "setting_differs", "gpu_shared", "projected")  # Ratio attributes
NO_DIFFERENCE = "no measurable difference"


@dataclass(frozen=True)
class Spread:
    se: float  # of the log figure; 0 for a published figure: no spread is known
    dof: float
    basis: str  # one of BASES, or several joined by "+"

    def interval(self, value):
        """The 95% interval around `value` (None when nothing of it has a spread)."""
        if self.se == 0 or not math.isfinite(self.se):
            return None
        # Welch's dof of equal sides is a whole number that floats can land just below (3.9999...)
        half = t95(max(1, math.floor(self.dof + 1e-9))) * self.se
        return (value * math.exp(-half), value * math.exp(half))


def point_spread(throughputs, published, lone=None):
    """The spread of a point's log throughput from its runs' `throughputs`, or from `lone`, its one
    run (run_result.RunResult); None where that run logged no step-time CI."""
    if published:
        runs = lone.published_runs if lone else None  # (n, standard error of their mean log)
        return (
            Spread(runs[1], runs[0] - 1, PUBLISHED_RUNS)
            if runs and runs[0] > 1
            else Spread(0.0, math.inf, PUBLISHED)
        )
    if len(throughputs) > 1:
        logs = [math.log(t) for t in throughputs]
        return Spread(statistics.stdev(logs) / math.sqrt(len(logs)), len(logs) - 1, REPEATS)
    ci_rel, steps = lone.window.step_time_ci95_rel, lone.window.measured_steps
    if ci_rel is None or steps is None or steps < 2 or not math.isfinite(ci_rel):
        return None
    # the CI half-width of the mean step time is t * se; 1/mean is throughput, so its log has that se
    return Spread(ci_rel / t95(steps - 1), steps - 1, WITHIN_RUN)


def combine(spreads, weights):
    """The spread of sum(w_i * x_i) over independent figures x_i."""
    terms = [(w * s.se) ** 2 for w, s in zip(weights, spreads, strict=True)]
    measured = [(t, s.dof) for t, s in zip(terms, spreads, strict=True) if t > 0]
    dof = sum(terms) ** 2 / sum(t**2 / d for t, d in measured) if measured else math.inf
    parts = {part for s in spreads for part in s.basis.split("+")}
    return Spread(math.sqrt(sum(terms)), dof, "+".join(sorted(parts, key=BASES.index)))


def _flat(terms, scale=1.0):
    """`terms` with every ratio among them replaced by its own terms, weighted by its weight."""
    for figure, weight in terms:
        if isinstance(figure, Ratio):
            yield from _flat(figure.terms, scale * weight)
        else:
            yield figure, scale * weight


def _netted(terms):
    """(figure, weight) with one figure's weights added first, so that a figure on both sides of a
    quotient cancels instead of counting twice; those netted to 0 are left out."""
    netted = {}  # id: (figure, its weights' sum)
    for figure, weight in terms:
        netted[id(figure)] = (figure, netted.get(id(figure), (None, 0.0))[1] + weight)
    return [(figure, weight) for figure, weight in netted.values() if weight != 0.0]


def describe(spread):
    """What an interval rests on, for tables: 'repeats', 'within-run only', 'published: none'."""
    if spread is None:
        return "none: a run without a step-time CI"
    if spread.basis == PUBLISHED:
        return "none: published figures have no spread"
    parts = spread.basis.split("+")
    text = "+".join(p.replace(WITHIN_RUN, "within-run only") for p in parts if p != PUBLISHED)
    return text + (" (published side: no spread)" if PUBLISHED in parts else "")


@dataclass(frozen=True)
class Ratio:
    value: float
    spread: Spread | None  # of log value; None: no interval can be given
    terms: tuple = ()  # (figure, weight): value = prod(figure.value ** weight), unless a mean
    stack_differs: str = ""  # what differs between the sides' stacks, e.g. "torch 2.14.1 vs 2.11.0"
    setting_differs: str = ""  # another measured key, e.g. "cpu_threads 1 vs 2"
    math_differs: bool = False  # strict fp32 against TF32 math
    projected: bool = False  # a side is projected, not measured

    @property
    def interval(self):
        return self.spread.interval(self.value) if self.spread else None

    @property
    def no_difference(self):
        """Its interval holds 1.0."""
        return self.interval is not None and self.interval[0] <= 1.0 <= self.interval[1]

    @property
    def difference(self):
        """Its column `difference`: NO_DIFFERENCE where its interval holds 1.0."""
        return NO_DIFFERENCE if self.no_difference else ""

    @property
    def gpu_shared(self):
        """A run behind either side shared its GPU with another program."""
        return any(run.result.foreign for p in self.points() for run in p.runs)

    @property
    def flags(self):
        return [name for name in FLAGS if getattr(self, name)]

    def points(self):
        """The measured points behind it, either side (a point over itself is 1 whatever its runs)."""
        return [figure for figure, _ in _netted(_flat(self.terms)) if hasattr(figure, "runs")]


def ratio(terms, value=None, independent=False, **flags):
    """The ratio prod(figure.value ** weight) over `terms` (figure, weight), or `value` where it is
    a mean of them (the weights are then the mean's sensitivity to each). A ratio among the terms
    counts by its own figures, netted with the others (a point shared by two ratios counts once),
    unless `independent`: then each ratio is one figure with its own spread."""
    terms = tuple(terms)
    if value is None:  # the top over the bottom, so that a / b is exactly that
        value = math.prod(f.value**w for f, w in terms if w > 0) / math.prod(
            f.value**-w for f, w in terms if w < 0
        )
    kept = _netted(terms if independent else _flat(terms))
    # none left: the same figures on both sides, an exact value
    exact = not kept or any(f.spread is None for f, _ in kept)
    return Ratio(
        value, None if exact else combine([f.spread for f, _ in kept], [w for _, w in kept]), terms, **flags
    )


def quotient(a, b, **flags):
    return ratio([(a, 1.0), (b, -1.0)], **flags)


def carried_flags(ratios):
    """The flags a ratio made of these ratios carries: what differs in any of them, projected if any is."""
    differs = ("stack_differs", "setting_differs")  # said in words
    texts = {name: "; ".join(sorted({getattr(r, name) for r in ratios} - {""})) for name in differs}
    return texts | {"projected": any(r.projected for r in ratios)}


def mean(ratios, independent=True):
    """The arithmetic mean of ratios with its 95% interval: the uncertainty of the mean of these
    ratios as measured, not the spread between them. Its weights are its sensitivity to each,
    d log(mean) = sum r_i / sum(r) d log r_i. Ratios of different models are `independent`; where
    two may share a point (a capacity split's), that point counts once."""
    total = sum(r.value for r in ratios)
    terms = [(r, r.value / total) for r in ratios]
    return ratio(terms, value=total / len(ratios), independent=independent, **carried_flags(ratios))
