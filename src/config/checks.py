"""The small predicates, the error collector and the batch-table check that the config checks share."""

from __future__ import annotations

from typing import Any

from src.config.schema import PRECISIONS


def positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def positive_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)


class Errors(list):
    """Collects every problem, so one run of a bad command line shows them all."""

    def need(self, ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            self.append(f"{key}={value!r}: must be {allowed}")


def check_batch_table(table: Any, key: str, errors: Errors) -> None:
    """A precision -> batch size table (a model's defaults, or a GPU profile's per model)."""
    for precision, value in table.items():
        errors.need(
            precision in (*PRECISIONS, "default"),
            key,
            precision,
            f"keyed by {', '.join(PRECISIONS)} or default",
        )
        errors.need(positive_int(value), f"{key}.{precision}", value, "a positive integer")
