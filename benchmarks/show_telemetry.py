"""Print a run's telemetry figures from MLflow: power, energy per item, clocks, throttling, efficiency.

python benchmarks/show_telemetry.py                   # the newest finished job run
python benchmarks/show_telemetry.py --run RUN_ID      [--uri URI]
"""

from __future__ import annotations

import argparse

from common import recorded

# (metric, label, format); a figure the run lacks (no NVML, no price) prints as "-"
FIGURES = (
    (recorded.THROUGHPUT, "throughput, all GPUs", "{:,.1f} {unit}"),
    (recorded.POWER_MEAN_W, "power, mean per GPU", "{:.1f} W"),
    (recorded.POWER_MAX_W, "power, max", "{:.1f} W"),
    (recorded.ENERGY_PER_ITEM_J, "energy per item", "{:.4f} J"),
    (recorded.ENERGY_J, "energy in the window, all GPUs", "{:,.1f} J"),
    (recorded.SM_CLOCK_MEAN_MHZ, "SM clock, mean", "{:.0f} MHz"),
    (recorded.MEM_CLOCK_MEAN_MHZ, "memory clock, mean", "{:.0f} MHz"),
    (recorded.TEMPERATURE_MAX_C, "temperature, max", "{:.0f} C"),
    (recorded.GPU_UTIL_MEAN_PCT, "GPU utilisation, mean", "{:.1f} %"),
    (recorded.THROTTLED_POWER_SHARE, "window throttled for power", "{:.1%}"),
    (recorded.THROTTLED_THERMAL_SHARE, "window throttled for heat", "{:.1%}"),
    (recorded.CPU_UTIL_MEAN_PCT, "host CPU utilisation, mean", "{:.1f} %"),
    (recorded.TELEMETRY_SAMPLES_PER_GPU, "samples in the window per GPU", "{:.0f}"),
    (recorded.MEASURED_WINDOW_S, "measured window", "{:.1f} s"),
    (recorded.MFU, "MFU", "{:.1%}"),
    (recorded.THROUGHPUT_PER_WATT, "throughput per watt", "{:.2f} {unit}/W"),
    (recorded.THROUGHPUT_PER_KUSD, "throughput per 1,000 USD", "{:.2f} {unit}"),
)


def describe(run) -> str:
    metrics, unit = run.data.metrics, run.data.tags.get(recorded.UNIT, "items/s")
    lines = [f"{run.info.run_name} ({run.info.run_id}, {run.info.status})"]
    for key, label, fmt in FIGURES:
        value = metrics.get(key)
        lines.append(f"  {label:<32} {fmt.format(value, unit=unit) if value is not None else '-'}")
    return "\n".join(lines)


def suite_tracking():
    """The tracking group as the suite itself resolves it (tracking.uri: MLFLOW_TRACKING_URI, else
    the embedded store; its experiment)."""
    from hydra import compose, initialize_config_dir

    from src.config.schema import register_configs
    from src.paths import PROJECT_ROOT

    register_configs()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=["gpu=cpu"]).tracking


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--uri", help="tracking URI (default: the one the suite itself uses)")
    parser.add_argument("--experiment", help="experiment (default: the suite's tracking.experiment)")
    parser.add_argument("--run", help="run id (default: the newest finished job run)")
    args = parser.parse_args()

    from mlflow.tracking import MlflowClient

    tracking = suite_tracking() if not (args.uri and args.experiment) else None
    client = MlflowClient(args.uri or tracking.uri)
    args.experiment = args.experiment or tracking.experiment
    if args.run:
        run = client.get_run(args.run)
    else:
        experiment = client.get_experiment_by_name(args.experiment)
        runs = experiment and client.search_runs(
            [experiment.experiment_id],
            "attributes.status = 'FINISHED'",
            order_by=["attributes.start_time DESC"],
        )
        jobs = [r for r in runs or [] if r.data.tags.get(recorded.SWEEP) != "true"]
        if not jobs:
            raise SystemExit(f"no finished job run in experiment {args.experiment!r}")
        run = jobs[0]
    print(describe(run))
    power = client.get_metric_history(run.info.run_id, "telemetry/gpu0/power_w")
    print(f"  {'power series points (gpu0)':<32} {len(power)}")


if __name__ == "__main__":
    main()
