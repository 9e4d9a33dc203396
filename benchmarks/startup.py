"""Start-up: `python -m src.train --help` and composing a config without running it (`--cfg job`).
Target: `--help` at most 1.5 s on two quiet cores. Prints the median of five runs of each.

    python benchmarks/startup.py
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

from common import ROOT

COMMANDS = {"--help": ["--help"], "compose (--cfg job)": ["--cfg", "job", "model=gpt2", "precision=bf16"]}


def main() -> None:
    for name, args in COMMANDS.items():
        times = []
        for _ in range(5):
            started = time.perf_counter()
            subprocess.run(
                [sys.executable, "-m", "src.train", *args], cwd=ROOT, check=True, capture_output=True
            )
            times.append(time.perf_counter() - started)
        print(
            f"{name:<22} median {statistics.median(times):.2f} s  (min {min(times):.2f}, max {max(times):.2f})"
        )


if __name__ == "__main__":
    main()
