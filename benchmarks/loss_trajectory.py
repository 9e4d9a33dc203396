"""Does a model's training recipe stay stable at every precision? One rank's own training step
(src.rank.worker.TrainingStep), in this process, for each precision in turn: the loss every
`--every` steps, its largest value, and whether it stayed finite. Exits 1 if a precision's loss
became NaN/inf or grew beyond `--max-growth` times its first value.

    python benchmarks/loss_trajectory.py gpu=h200 model=maskrcnn                   # fp32 tf32 amp bf16, 300 steps
    python benchmarks/loss_trajectory.py --precisions fp32 --steps 40 gpu=cpu model=maskrcnn benchmark=smoke
"""

from __future__ import annotations

import argparse
import math
import sys
import time

import torch
from profile_step import rank_config

from src.rank.worker import TrainingStep


def trajectory(overrides: list[str], steps: int, every: int) -> list[tuple[int, float]]:
    """(step, loss) every `every` steps, up to the first non-finite loss."""
    cfg = rank_config(overrides)
    device = torch.device("cuda", 0) if cfg["gpu"]["device"] == "cuda" else torch.device("cpu")
    torch.manual_seed(cfg["benchmark"]["seed"])
    step = TrainingStep(cfg, device, world=1)
    losses = []
    for i in range(steps):
        loss = float(step())  # a host sync per step: this script checks the math, not the speed
        if i % every == 0 or i == steps - 1 or not math.isfinite(loss):
            losses.append((i, loss))
        if not math.isfinite(loss):
            break
    return losses


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--precisions", nargs="+", default=["fp32", "tf32", "amp", "bf16"])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=20, help="print the loss every N steps")
    parser.add_argument("--max-growth", type=float, default=3.0, help="largest loss allowed, over the first")
    parser.add_argument("overrides", nargs="*", help="config overrides, as for python -m src.train")
    args = parser.parse_args()

    unstable = []
    for precision in args.precisions:
        started = time.perf_counter()
        losses = trajectory([*args.overrides, f"precision={precision}"], args.steps, args.every)
        values = [loss for _, loss in losses]
        finite = all(math.isfinite(v) for v in values)
        growth = max(values) / values[0] if finite and values[0] > 0 else math.inf
        stable = finite and growth <= args.max_growth
        print(f"{precision}: " + " ".join(f"{i}:{loss:.3g}" for i, loss in losses))
        print(
            f"{precision}: {'stable' if stable else 'UNSTABLE'} - {len(losses) and losses[-1][0] + 1} steps, "
            f"first {values[0]:.3g}, max {max(values):.3g} ({growth:.2f}x), "
            f"{'finite' if finite else 'NON-FINITE'}, {time.perf_counter() - started:.0f} s"
        )
        if not stable:
            unstable.append(precision)
    sys.exit(1 if unstable else 0)


if __name__ == "__main__":
    main()
