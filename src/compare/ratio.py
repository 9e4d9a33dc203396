"""The one ratio of compare: a value, its 95% interval, the figures behind each side and its flags.

Every ratio and mean compare reports is built by `ratio`: a GPU against the baseline, a category
mean, the hardware and software parts of a cross-stack ratio, the speed/capacity split, the
ceilings' part of a ratio in the explanation. A ratio is a product of figures raised to weights
(a / b: weights 1 and -1); its interval comes from the figures' spreads on the log scale
(src/compare/intervals.py), a figure on both sides netted first so that it cancels. A figure is
anything with a `key`, a `value` and a `spread`: a point, a ceilings figure, or another ratio (a
mean of ratios treats each ratio as one independent figure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

from src.compare import intervals

MATH_DIFFERS, STACK_DIFFERS, GPU_SHARED, PROJECTED = "math_differs", "stack_differs", "gpu_shared", "projected"
SETTING_DIFFERS = "setting_differs"
NO_DIFFERENCE = "no measurable difference"


class Figure(Protocol):
    key: object  # what makes two figures the same one
    value: float
    spread: intervals.Spread | None


@dataclass(frozen=True)
class Fixed:
    """A figure without a spread (a ceilings run's figure)."""

    key: object
    value: float
    spread: intervals.Spread | None = None


@dataclass(frozen=True)
class Ratio:
    value: float
    spread: intervals.Spread | None  # of log value; None: no interval can be given
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
        return intervals.holds_one(self.interval)

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
        return intervals.describe(self.spread)


def ratio(terms, value: float | None = None, independent: bool = False, **flags) -> Ratio:
    """The ratio prod(figure.value ** weight) over `terms` (figure, weight), or `value` where it is
    a mean of them (the weights are then the mean's sensitivity to each: intervals.mean_weights).
    A ratio among the terms counts by its own figures, netted with the others (a point shared by
    two ratios counts once), unless `independent`: then each ratio is one figure with its own
    spread. flags: stack_differs, setting_differs, math_differs, projected."""
    terms = tuple(terms)
    if value is None:  # the top over the bottom, so that a / b is exactly that
        value = math.prod(f.value**w for f, w in terms if w > 0) / math.prod(f.value**-w for f, w in terms if w < 0)
    flat = terms if independent else Ratio(value, None, terms)._flat(1.0)
    spread = intervals.net_spread([(f.key, f.spread, w) for f, w in flat])
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
    weights = intervals.mean_weights(values)
    mean = ratio(zip(ratios, weights, strict=True), value=sum(values) / k, independent=True, **flags)
    return mean, ratio([(r, 1 / k) for r in ratios], independent=True, **flags)
