"""Typed figures whose fields name the metrics they are logged as: one declaration (src/results/recorded.py's
`Window`, `Breakdown`) gives both the writer's metrics and the reader's figures."""

from __future__ import annotations

import math
import sys
from dataclasses import field, fields


def is_figure(value: float | None) -> bool:
    """A throughput a ratio can divide by: a normal, finite number above 0 (not 0, nan, inf, nor a
    subnormal such as 5e-324, whose quotients overflow or lose their digits)."""
    return value is not None and math.isfinite(value) and value >= sys.float_info.min


def figure(metric: str, kind: type = float):
    """A field logged as the metric `metric` (None: not logged), read back as `kind`."""
    return field(default=None, metadata={"metric": metric, "kind": kind})


class Figures:
    """The base of a frozen dataclass of `figure` fields (and fields of its own, which it writes and
    reads itself: per rank, per category)."""

    @classmethod
    def metric_names(cls) -> tuple[str, ...]:
        return tuple(f.metadata["metric"] for f in fields(cls) if "metric" in f.metadata)

    def metrics(self) -> dict[str, float]:
        """The figures as metrics, those not known (None) left out."""
        named = {f.metadata["metric"]: getattr(self, f.name) for f in fields(self) if "metric" in f.metadata}
        return {name: value for name, value in named.items() if value is not None}

    @classmethod
    def read_named(cls, metrics: dict, **own):
        """The figures `metrics` holds, with the fields that have no metric of their own given in `own`."""
        named = {}
        for f in fields(cls):
            if "metric" in f.metadata:
                value = metrics.get(f.metadata["metric"])
                named[f.name] = None if value is None else f.metadata["kind"](value)
        return cls(**named, **own)
