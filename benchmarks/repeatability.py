"""Repeatability: the same job five times; the coefficient of variation of its throughput.

    python benchmarks/repeatability.py --repeats 5 model=resnet50 precision=amp benchmark.channels_last=true
    python benchmarks/repeatability.py --repeats 5 model=gpt2 precision=bf16

Target: CV at most 1% for resnet50 and gpt2 on one GPU.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import latest_throughput, run_suite


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("overrides", nargs="*", help="suite overrides, as on its command line")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as store:
        values = []
        for i in range(args.repeats):
            run_suite(args.overrides, Path(store))
            values.append(latest_throughput(Path(store)))
            print(f"repeat {i + 1}: {values[-1]:,.1f}", flush=True)
    mean = statistics.fmean(values)
    cv = statistics.stdev(values) / mean
    print(
        f"{' '.join(args.overrides)}: mean {mean:,.1f}, min {min(values):,.1f}, max {max(values):,.1f}, CV {100 * cv:.2f}%"
    )


if __name__ == "__main__":
    main()
