"""The dense matmul ceiling of one math: the best m x n x k product of a grid, as the field's
reference tool (stas00's mamf-finder, "Maximum Achievable Matmul FLOPS") defines it.

Every shape of the grid (each of m, n, k takes every value of `model.matmul_dims`) is screened
with a short block of calls, smallest first; the `model.finalists` fastest are then timed in full,
`model.samples` samples of about `model.sample_s` each, and the best of them gets more samples
until its 95% CI is within `model.target_spread` (or it has `model.max_samples`). On a GPU each
call is timed alone with CUDA events after `model.l2_flush_mb` of memory is zeroed (a cold L2), as
mamf-finder times its products, and after each block the GPU rests `model.rest` times the block's
length: the figure is the card's at its full clocks, not held down by its power limit (which a
training step's other kernels also spare its matmuls). A is row-major and B column-major, as
mamf-finder multiplies them.
"""

from __future__ import annotations

import itertools
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from src.results.stats import relative_ci_halfwidth

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
Shape = tuple[int, int, int]


@dataclass
class Timed:
    """One shape's timing: seconds per call, one figure per sample."""

    shape: Shape
    call: Callable[[], object]
    calls: int  # calls per sample
    samples_s: list[float] = field(default_factory=list)

    @property
    def flops(self) -> float:
        m, n, k = self.shape
        return 2.0 * m * n * k

    @property
    def rate(self) -> float:
        return self.flops / statistics.median(self.samples_s)

    @property
    def spread(self) -> float:
        return relative_ci_halfwidth([self.flops / t for t in self.samples_s])


def grid(dims: list[int]) -> list[Shape]:
    """Every (m, n, k) of the dims, fewest FLOPs first."""
    return sorted(itertools.product(sorted(set(dims)), repeat=3), key=lambda s: (s[0] * s[1] * s[2], s))


def best_matmul(math_name: str, cfg: dict, device: torch.device) -> dict:
    """The best shape's figure: median TFLOP/s, range and CI over its samples, the shape, and what
    the screen saw (every shape's rate) and left out (shapes whose call would outlast
    `max_call_s`, or past the math's `screen_budget_s`)."""
    started = time.perf_counter()
    set_tf32(math_name == "tf32", device)
    shapes = grid(cfg["matmul_dims"])
    products = Products(math_name, max(cfg["matmul_dims"]), device)
    timer = Timer(cfg, device)
    screened, skipped = _screen(shapes, products, timer, cfg)
    screen = [[*t.shape, t.rate / 1e12] for t in screened]  # before the finalists are timed again
    finalists = sorted(screened, key=lambda t: t.rate, reverse=True)[: cfg["finalists"]]
    for timed in finalists:
        timed.calls = max(1, math.ceil(cfg["sample_s"] / max(timed.samples_s[0], 1e-9)))
        timed.samples_s = [timer.per_call_s(timed.call, timed.calls) for _ in range(cfg["samples"])]
    best = max(finalists, key=lambda t: t.rate)
    while best.spread > cfg["target_spread"] and len(best.samples_s) < cfg["max_samples"]:
        best.samples_s.append(timer.per_call_s(best.call, best.calls))
        best = max(finalists, key=lambda t: t.rate)
    del products, timer
    if device.type == "cuda":
        torch.cuda.empty_cache()
    set_tf32(False, device)
    rates = [best.flops / t / 1e12 for t in best.samples_s]
    return {
        "value": statistics.median(rates),
        "min": min(rates),
        "max": max(rates),
        "ci95_rel": best.spread,
        "samples": len(rates),
        "shape": "x".join(map(str, best.shape)),
        "skipped": len(skipped),
        "screen": screen,
        "seconds": time.perf_counter() - started,  # what the search cost
    }


def _screen(shapes: list[Shape], products, timer: Timer, cfg: dict) -> tuple[list[Timed], list]:
    """Each shape's rate over one short block of calls, smallest first; a shape whose call would
    take longer than `max_call_s` at the best rate so far, or any once the screen has run
    `screen_budget_s`, is skipped."""
    screened, skipped, started, best_rate = [], [], time.perf_counter(), 0.0
    for shape in shapes:
        timed = Timed(shape, products.call(*shape), calls=1)
        over_budget = time.perf_counter() - started > cfg["screen_budget_s"]
        if over_budget or (best_rate and timed.flops / best_rate > cfg["max_call_s"]):
            skipped.append(shape)
            continue
        timed.call()  # kernel selection for this shape, untimed
        one = timer.per_call_s(timed.call, 1)
        timed.calls = max(1, math.ceil(cfg["screen_s"] / max(one, 1e-9)))
        timed.samples_s = [timer.per_call_s(timed.call, timed.calls)]
        best_rate = max(best_rate, timed.rate)
        screened.append(timed)
    return screened, skipped


class Timer:
    """Times blocks of calls of a product: on a GPU each call alone between CUDA events, after
    zeroing the flush buffer (outside the timing), and after each block the GPU rests `rest` times
    the block's length, so that the card's power limit does not hold its clocks down: the figure
    is the card's at its full clocks (back to back, a large product holds an H200 at its power
    limit). On a CPU a block of calls on the host clock."""

    def __init__(self, cfg: dict, device: torch.device):
        self.device, self.rest = device, cfg["rest"]
        self.flush = None
        if device.type == "cuda" and cfg["l2_flush_mb"]:
            self.flush = torch.empty(int(cfg["l2_flush_mb"] * 2**20) // 4, dtype=torch.int32, device=device)

    def per_call_s(self, fn: Callable[[], object], calls: int) -> float:
        """Mean seconds per call over a block of `calls` calls."""
        if self.device.type != "cuda":
            begin = time.perf_counter()
            for _ in range(calls):
                fn()
            return (time.perf_counter() - begin) / calls
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for start, end in zip(starts, ends, strict=True):
            if self.flush is not None:
                self.flush.zero_()
            start.record()
            fn()
            end.record()
        ends[-1].synchronize()
        seconds = sum(s.elapsed_time(e) for s, e in zip(starts, ends, strict=True)) / 1e3
        time.sleep(self.rest * seconds)
        return seconds / calls


class Products:
    """Inputs made once per math at the largest dims (random normal); each shape's product runs on
    views of them: A (m x k) row-major, B (k x n) column-major, into an m x n output."""

    def __init__(self, math_name: str, largest: int, device: torch.device):
        size = largest * largest
        self.fp8 = math_name == "fp8"
        if self.fp8:
            self.a = torch.randn(size, device=device).to(torch.float8_e4m3fn)
            self.b = torch.randn(size, device=device).to(torch.float8_e4m3fn)
            self.out = torch.empty(size, device=device, dtype=torch.bfloat16)
            self.one = torch.ones((), device=device)
        else:
            dtype = DTYPES[math_name]
            self.a = torch.randn(size, device=device, dtype=dtype)
            self.b = torch.randn(size, device=device, dtype=dtype)
            self.out = torch.empty(size, device=device, dtype=dtype)

    def call(self, m: int, n: int, k: int) -> Callable[[], object]:
        a = self.a[: m * k].view(m, k)
        b = self.b[: n * k].view(n, k).t()
        out = self.out[: m * n].view(m, n)
        if self.fp8:
            one = self.one
            return lambda: torch._scaled_mm(
                a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=True, out=out
            )
        return lambda: torch.mm(a, b, out=out)


def set_tf32(on: bool, device: torch.device) -> None:
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = on
    torch.set_float32_matmul_precision("high" if on else "highest")
