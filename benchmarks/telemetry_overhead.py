"""Telemetry overhead: the same job with the sampler on and off, alternated in pairs.

    python benchmarks/telemetry_overhead.py gpu=h200 model=resnet50 precision=amp
    python benchmarks/telemetry_overhead.py --pairs 4 --steps 200 gpu=h200 model=gpt2 precision=bf16

Every job measures the same fixed number of steps; pairs alternate which arm runs first (on-off,
off-on, ...) so that drift (heat, clocks) favours neither. Prints each run's throughput, the
overhead (mean off - mean on) / mean off with the per-pair figures, and the telemetry of the last
run with the sampler on. Target: overhead at most 0.5% at telemetry.interval_ms=100.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from common import job_runs, recorded, run_suite
from show_telemetry import describe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=3, help="on/off pairs (at least 3)")
    parser.add_argument("--steps", type=int, default=300, help="measured steps per job")
    parser.add_argument("overrides", nargs="*", help="suite overrides, as on its command line")
    args = parser.parse_args()
    if args.pairs < 3:
        parser.error("--pairs: at least 3")
    fixed = [f"benchmark.min_steps={args.steps}", f"benchmark.max_steps={args.steps}"]
    throughput: dict[bool, list[float]] = {True: [], False: []}
    last_on = None
    with tempfile.TemporaryDirectory() as store:
        for pair in range(args.pairs):
            for on in (True, False) if pair % 2 == 0 else (False, True):
                run_suite([*args.overrides, *fixed, f"telemetry.enabled={str(on).lower()}"], Path(store))
                run = job_runs(Path(store))[0]
                throughput[on].append(run.data.metrics[recorded.THROUGHPUT])
                unit = run.data.tags[recorded.UNIT]
                last_on = run if on else last_on
                print(
                    f"pair {pair + 1}, telemetry {'on ' if on else 'off'}: {throughput[on][-1]:,.1f} {unit}"
                )
    on, off = statistics.fmean(throughput[True]), statistics.fmean(throughput[False])
    pairs = [100 * (b - a) / b for a, b in zip(throughput[True], throughput[False], strict=True)]
    print(f"{' '.join(args.overrides)}: mean on {on:,.1f}, off {off:,.1f} {unit}")
    print(
        f"overhead {100 * (off - on) / off:+.2f}% (pairs {', '.join(f'{p:+.2f}%' for p in pairs)}); target <= 0.5%"
    )
    print("\nlast run with telemetry on:\n" + describe(last_on))


if __name__ == "__main__":
    main()
