"""Fidelity: the suite's throughput against a plain PyTorch loop of the same model, batch and
precision, run alternately so that clock and thermal drift hit both alike. Needs a CUDA GPU.

    python benchmarks/fidelity.py --repeats 3

Prints one line per run and a table of suite / plain ratios (target: at least 0.98).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, latest_throughput, run_suite

CASES = {  # name: (suite overrides, plain-loop arguments)
    "resnet50-amp": (
        ["model=resnet50", "precision=amp", "model.batch_size=256", "benchmark.channels_last=true"],
        ["--model", "resnet50", "--precision", "amp", "--batch", "256", "--channels-last"],
    ),
    "gpt2-bf16": (
        ["model=gpt2", "precision=bf16", "model.batch_size=16"],
        ["--model", "gpt2", "--precision", "bf16", "--batch", "16"],
    ),
}


def plain_throughput(args: list[str]) -> float:
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "plain_loop.py"), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])["items_per_s"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for the suite's runs")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as store:
        for name in args.cases:
            overrides, plain_args = CASES[name]
            suite, plain = [], []
            for i in range(args.repeats):
                run_suite(["gpu=auto", *overrides, *args.extra], Path(store))
                suite.append(latest_throughput(Path(store)))
                plain.append(plain_throughput(plain_args))
                print(f"{name} repeat {i + 1}: suite {suite[-1]:,.1f}  plain {plain[-1]:,.1f}", flush=True)
            rows.append((name, statistics.median(suite), statistics.median(plain)))
    print(f"\n{'case':<16}{'suite (median)':>16}{'plain (median)':>16}{'ratio':>8}")
    for name, s, p in rows:
        print(f"{name:<16}{s:>16,.1f}{p:>16,.1f}{s / p:>8.3f}")


if __name__ == "__main__":
    main()
