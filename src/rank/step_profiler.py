"""Where the step time goes: a few training steps under torch.profiler, after the measured window.

The profiled stretch's device time is split into five shares that add up to 1 (docs/metrics.md):
`matmul` (matrix products, convolutions and fused attention: the tensor-core kernels on a GPU),
`other` (elementwise, normalisation, softmax, reductions, the optimizer), `comm` (collectives:
NCCL, gloo), `memcpy` (copies and memsets) and `idle` (no kernel running: the host not keeping
up). Where kernels overlap (communication beside compute), the instant counts once, for the first
of matmul, other, comm, memcpy that is running: `comm` is communication nothing hid.

On a GPU the intervals are the device's kernels; on a CPU (tests, dry runs), the aten operators.
The rank returns the shares and the top kernels as data; the job process logs them.
"""

from __future__ import annotations

import re
import time

CATEGORIES = ("matmul", "other", "comm", "memcpy", "idle")  # busy ones in priority order, then idle
TOP_KERNELS = 25
NAME_CHARS = 160

_COMM = re.compile(r"nccl|gloo|all_?reduce|c10d::", re.I)
_MEMCPY = re.compile(r"^memcpy|^memset|\bmemcpy\b|\bmemset\b", re.I)
# cuBLAS/cuBLASLt (gemm, nvjet, xmma, cutlass), cuDNN convolutions (implicit gemm, fprop/dgrad/
# wgrad, convolve), fused attention (flash, fmha, sdpa), fp8 products; on a CPU the aten names.
_MATMUL = re.compile(
    r"gemm|nvjet|xmma|cutlass|wgmma|hmma|splitkreduce|conv(?!ert)|winograd|fprop|dgrad|wgrad|flash|fmha|sdpa"
    r"|scaled_mm|(^|::)(addmm|mm|bmm|baddbmm|matmul)$",
    re.I,
)


def category(name: str) -> str:
    """The share a kernel's (or CPU operator's) time counts toward, from its name."""
    if _COMM.search(name):
        return "comm"
    if _MEMCPY.search(name):
        return "memcpy"
    if _MATMUL.search(name):
        return "matmul"
    return "other"


def shares(intervals: list[tuple[float, float, str]]) -> tuple[dict[str, float], float]:
    """Each category's share of the span from the first interval's start to the last one's end,
    each instant counted once (for the first busy category running, else idle); and the span."""
    if not intervals:
        return {c: 0.0 for c in CATEGORIES}, 0.0
    rank = {c: i for i, c in enumerate(CATEGORIES)}
    edges = sorted([(s, 1, rank[c]) for s, e, c in intervals] + [(e, -1, rank[c]) for s, e, c in intervals])
    running = [0] * (len(CATEGORIES) - 1)
    totals = [0.0] * len(CATEGORIES)
    previous = edges[0][0]
    for at, change, which in edges:
        if at > previous:
            active = next((i for i, n in enumerate(running) if n), len(CATEGORIES) - 1)
            totals[active] += at - previous
            previous = at
        running[which] += change
    span = edges[-1][0] - edges[0][0]
    return {c: (totals[i] / span if span else 0.0) for i, c in enumerate(CATEGORIES)}, span


def top_kernels(intervals: list[tuple[float, float, str, str]], span: float) -> list[dict]:
    """The kernels with the most time in all (calls summed, overlaps not removed), with their
    category and share of the span."""
    totals: dict[str, list] = {}
    for start, end, cat, name in intervals:
        entry = totals.setdefault(name, [0.0, 0, cat])
        entry[0] += end - start
        entry[1] += 1
    ranked = sorted(totals.items(), key=lambda item: -item[1][0])[:TOP_KERNELS]
    return [
        {
            "kernel": name[:NAME_CHARS],
            "category": cat,
            "calls": calls,
            "total_ms": total / 1e6,
            "share_of_span": total / span if span else 0.0,
        }
        for name, (total, calls, cat) in ranked
    ]


def _intervals(events, device_type) -> list[tuple[float, float, str, str]]:
    """(start ns, end ns, category, name) of the device's kernels, or (on a CPU) the aten
    operators and collectives; user annotations (record_function ranges) are not work."""
    found = []
    for event in events:
        annotation = getattr(event, "is_user_annotation", lambda: False)()  # not in every torch
        if event.device_type() != device_type or annotation or event.name().startswith("ProfilerStep"):
            continue
        name = event.name()
        if device_type.name == "CPU" and not (name.startswith("aten::") or _COMM.search(name)):
            continue
        start = event.start_ns()
        found.append((start, start + event.duration_ns(), category(name), name))
    return found


PROFILE_BUDGET_S = 1.0  # profiled steps fit in about this much of the window's step time
PHASES = ("start", "steps", "stop", "parse")  # what the stretch's seconds are spent on


def steps_within_budget(asked: int, step_s: float, budget_s: float = PROFILE_BUDGET_S) -> int:
    """Up to `asked` steps, fewer when steps are long (the profiler's stop and parse costs grow
    with the kernels recorded), never none."""
    return max(1, min(asked, int(budget_s // step_s) if step_s > 0 else asked))


def profile_steps(step, device, asked: int, step_s: float, world: int = 1) -> dict | None:
    """Run up to `asked` more training steps under the profiler (steps_within_budget of the
    window's median step, the same count on every rank); the shares, the top kernels, the profiled
    time per step and what the stretch cost in seconds per phase (PHASES). None when the profiler
    recorded no kernel: no breakdown rather than one of zeros."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from src.rank.collectives import agreed_int

    steps = agreed_int(steps_within_budget(asked, step_s), device, world)
    cuda = device.type == "cuda"
    marks = [time.perf_counter()]
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        marks.append(time.perf_counter())
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize(device)
        marks.append(time.perf_counter())
    marks.append(time.perf_counter())
    device_type = torch.autograd.DeviceType.CUDA if cuda else torch.autograd.DeviceType.CPU
    intervals = _intervals(prof.profiler.kineto_results.events(), device_type)
    if not intervals:
        return None
    found, span = shares([i[:3] for i in intervals])
    kernels = top_kernels(intervals, span)
    marks.append(time.perf_counter())
    return {
        "shares": found,
        "steps": steps,
        "step_ms": span / steps / 1e6,
        "kernels": len(intervals),
        "top_kernels": kernels,
        "phase_seconds": {phase: marks[i + 1] - marks[i] for i, phase in enumerate(PHASES)},
    }
