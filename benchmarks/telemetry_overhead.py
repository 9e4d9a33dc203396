"""What the telemetry sampler costs: the same job with telemetry on and off, alternated in pairs.

    python benchmarks/telemetry_overhead.py                       # gpu=auto resnet50 amp, 3 pairs
    python benchmarks/telemetry_overhead.py --pairs 4 -- gpu=h200 model=gpt2 precision=bf16

Each job is a fresh `python -m src.train` with a fixed number of measured steps (so both arms
measure the same work), logged to the experiment `telemetry-overhead`. Pairs alternate which arm
runs first (on-off, off-on, ...) so that drift (heat, clocks) does not favour one arm. Prints each
run's throughput, the overhead (mean off - mean on) / mean off with the per-pair spread, and the
telemetry figures of the last run with telemetry on. Budget: overhead <= 0.5%.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
EXPERIMENT = "telemetry-overhead"


def run_job(overrides: list[str], telemetry_on: bool, uri: str, client) -> object:
    """Run one job to completion; return its MLflow run."""
    cmd = [
        sys.executable,
        "-m",
        "src.train",
        *overrides,
        f"telemetry.enabled={str(telemetry_on).lower()}",
        f"tracking.uri={uri}",
        f"tracking.experiment={EXPERIMENT}",
    ]
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"job failed: {' '.join(cmd)}\n{(result.stdout + result.stderr)[-3000:]}")
    experiment = client.get_experiment_by_name(EXPERIMENT)
    (run,) = client.search_runs(
        [experiment.experiment_id], order_by=["attributes.start_time DESC"], max_results=1
    )
    return run


def main() -> None:
    from src.config import PROJECT_ROOT

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300, help="measured steps per job (fixed)")
    parser.add_argument("--uri", default=f"sqlite:///{PROJECT_ROOT}/mlruns/mlflow.db")
    parser.add_argument("overrides", nargs="*", default=["model=resnet50", "precision=amp"])
    args = parser.parse_args()
    if args.pairs < 3:
        parser.error("--pairs must be at least 3")
    overrides = [*args.overrides, f"benchmark.min_steps={args.steps}", f"benchmark.max_steps={args.steps}"]

    from mlflow.tracking import MlflowClient
    from show_telemetry import describe

    from src.tracking import ensure_experiment

    ensure_experiment(args.uri, EXPERIMENT)  # before the first job, as a sweep does
    client = MlflowClient(args.uri)
    throughput = {True: [], False: []}
    last_on = None
    print(f"jobs: python -m src.train {' '.join(overrides)} telemetry.enabled=true|false")
    for pair in range(args.pairs):
        for telemetry_on in (True, False) if pair % 2 == 0 else (False, True):
            run = run_job(overrides, telemetry_on, args.uri, client)
            value, unit = run.data.metrics["throughput"], run.data.tags["unit"]
            throughput[telemetry_on].append(value)
            last_on = run if telemetry_on else last_on
            print(
                f"pair {pair + 1} telemetry {'on ' if telemetry_on else 'off'}: {value:,.1f} {unit}",
                flush=True,
            )

    on, off = statistics.fmean(throughput[True]), statistics.fmean(throughput[False])
    per_pair = [100 * (b - a) / b for a, b in zip(throughput[True], throughput[False], strict=True)]
    print(f"mean on {on:,.1f}, off {off:,.1f} {unit}")
    print(
        f"overhead {100 * (off - on) / off:+.2f}% (per pair {', '.join(f'{x:+.2f}%' for x in per_pair)}; "
        f"budget <= 0.5%)"
    )
    print("\nlast run with telemetry on:")
    print(describe(last_on))


if __name__ == "__main__":
    main()
