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


def check_memory_cap(cap: Any, card_gb: float | None, device: str, card: str, errors: Errors) -> None:
    """gpu.memory_limit_gb: null, or a positive size no larger than the card's memory (`card` says
    whose figure that is). A CPU has no device allocator to cap: refused rather than ignored, so
    no run is tagged with a cap that held nothing."""
    if cap is None:
        return
    key = "gpu.memory_limit_gb"
    if device == "cpu":
        errors.need(False, key, cap, "null on a CPU (it caps a GPU's memory allocator)")
    elif not positive_or_none(cap):
        errors.need(False, key, cap, "a positive number of GB, or null (the whole card)")
    elif card_gb is not None:
        errors.need(cap <= card_gb, key, cap, f"at most {card_gb:g} GB, the memory of {card}, or null")
