"""The ops of one training step, counted: each op's FLOPs and the bytes it reads and writes, at any batch.

A rank counts one step at two small batches (src/rank/op_count.py); `OpCounts.fit` lines the two
lists up op by op and keeps, for each op, its FLOPs and bytes as a straight line in the batch
(weights are the same at every batch, activations grow with it). Ops the larger batch runs and the
smaller does not (a loop over the images of the batch) are kept as kernels whose number grows with
the batch. Evaluated at a batch, the counts give every op's FLOPs and bytes there, which
src/projection/model.py sets against a card's tensor rate and memory bandwidth.

No torch here: compare and the job process read counts as data.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass

MATMUL, OTHER = "matmul", "other"  # tensor-core candidates (products, convolutions, attention) and the rest


@dataclass(frozen=True)
class Counted:
    """One op as a counting run saw it: name, kind, the math of its inputs (fp32, fp16, bf16), FLOPs, bytes."""

    name: str
    kind: str
    math: str
    flops: float
    bytes: float


@dataclass(frozen=True)
class OpRow:
    """Ops of one kind whose kernels, FLOPs and bytes are each `fixed + per_item x batch`."""

    name: str
    kind: str
    math: str
    kernels: tuple[float, float]  # how many such kernels a step runs
    flops: tuple[float, float]  # per kernel
    bytes: tuple[float, float]  # per kernel, read and written

    def at(self, batch: float) -> tuple[float, float, float]:
        """(kernels, FLOPs per kernel, bytes per kernel) at this per-GPU batch, none below zero."""
        return tuple(
            max(0.0, fixed + per_item * batch) for fixed, per_item in (self.kernels, self.flops, self.bytes)
        )


@dataclass(frozen=True)
class OpCounts:
    rows: tuple[OpRow, ...]
    batches: tuple[int, int]  # the two batches counted
    counted: str  # how: the device and software that counted them

    @classmethod
    def fit(
        cls, small: tuple[int, list[Counted]], large: tuple[int, list[Counted]], counted: str
    ) -> OpCounts:
        """Two counts of the same step at batches b1 < b2 as lines in the batch: ops matched in order
        by name; the extra ops of the larger batch as kernels that number (b - b1) / (b2 - b1)."""
        (b1, ops1), (b2, ops2) = small, large
        span = b2 - b1
        found: dict[tuple, list[float]] = {}

        def add(op: Counted, kernels: tuple[float, float], flops: tuple, bytes_: tuple) -> None:
            key = (op.name, op.kind, op.math, flops, bytes_)
            total = found.setdefault(key, [0.0, 0.0])
            total[0] += kernels[0]
            total[1] += kernels[1]

        matcher = difflib.SequenceMatcher(
            None, [o.name for o in ops1], [o.name for o in ops2], autojunk=False
        )
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for one, two in zip(ops1[i1:i2], ops2[j1:j2], strict=True):
                    add(
                        one,
                        (1.0, 0.0),
                        _line(b1, one.flops, b2, two.flops),
                        _line(b1, one.bytes, b2, two.bytes),
                    )
            else:  # a loop over the batch: one more pass per (b2 - b1) items
                for two in ops2[j1:j2]:
                    add(two, (-b1 / span, 1 / span), (two.flops, 0.0), (two.bytes, 0.0))
        rows = tuple(OpRow(k[0], k[1], k[2], tuple(n), k[3], k[4]) for k, n in found.items())
        return cls(rows, (b1, b2), counted)

    def to_json(self) -> dict:
        rows = [[r.name, r.kind, r.math, *r.kernels, *r.flops, *r.bytes] for r in self.rows]
        return {"batches": list(self.batches), "counted": self.counted, "rows": rows}

    @classmethod
    def from_json(cls, data: dict) -> OpCounts:
        rows = tuple(OpRow(r[0], r[1], r[2], (r[3], r[4]), (r[5], r[6]), (r[7], r[8])) for r in data["rows"])
        return cls(rows, tuple(data["batches"]), data["counted"])

    def dumps(self) -> str:
        return json.dumps(self.to_json())


def _line(b1: int, at_b1: float, b2: int, at_b2: float) -> tuple[float, float]:
    """(fixed, per item) of the line through the two counts."""
    per_item = (at_b2 - at_b1) / (b2 - b1)
    return at_b1 - per_item * b1, per_item
