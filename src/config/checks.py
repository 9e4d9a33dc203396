"""The small predicates and the error collector that every group's checks share."""

from __future__ import annotations

from typing import Any


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def positive_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)


class Errors(list):
    """Collects every problem, so one run of a bad command line shows them all."""

    def need(self, ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            self.append(f"{key}={value!r}: must be {allowed}")
