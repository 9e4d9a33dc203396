"""What a comparison sets side by side: gpus (the default), or with `by=KEY` the values of one
stack key or tag (torch, cuda, cudnn, nccl, driver, power_limit, host, ...) on the same gpu and point.

With by=, a point's `side` is `KEY=value` (its `gpu` stays the card it ran on), the gpu joins the
measured configuration (a ratio takes its baseline on the same gpu) and KEY leaves the stack (the
other stack keys still have to match, or the ratio is flagged `stack_differs`).
"""

from __future__ import annotations

import dataclasses

from packaging.version import InvalidVersion, Version

from src.compare.runs import CompareError
from src.config import points


def along(records, by):
    """Records set side by side along `by=KEY`, and those that lack KEY's tag (left out: published
    rows log no stack)."""
    tag = points.STACK.get(by, by)
    kept = []
    for record in (r for r in records if r.result.tags.get(tag)):
        config = tuple((k, v) for k, v in record.config if k != f"tag:{tag}") + (("gpu", record.gpu),)
        side = f"{by}={record.result.tags[tag]}"
        kept.append(dataclasses.replace(record, side=side, config=tuple(sorted(config))))
    return kept, [r for r in records if not r.result.tags.get(tag)]


def baseline(records, by, wanted, default):
    """The compared axis's baseline: `wanted` (a gpu; with by=, a value of KEY, where `2.13.0` also
    names `2.13.0+cpu` when that is the only one), else `default` (the study's, conf/study/) for
    gpus and the oldest value for by= (the lowest version where every value is one, else the value
    of the earliest run)."""
    if not by:
        return wanted or default
    values = sorted({r.side.split("=", 1)[1] for r in records})
    if not values:
        raise CompareError(f"by={by}: no run that the filters keep has a {points.STACK.get(by, by)!r} tag")
    if len(values) == 1:
        raise CompareError(
            f"by={by}: only one value ({values[0]}) among the runs the filters keep; nothing to set it against"
        )
    if wanted is None:
        try:
            return f"{by}={min(values, key=Version)}"
        except InvalidVersion:
            return min(records, key=lambda r: r.result.started_ms).side
    matches = [v for v in values if v == wanted] or [v for v in values if v.startswith(f"{wanted}+")]
    if len(matches) != 1:
        raise CompareError(f"baseline={wanted}: not one value of by={by}; values found: {', '.join(values)}")
    return f"{by}={matches[0]}"
