"""Scaling efficiency, read back from MLflow: throughput at each GPU count against one GPU.

    python -m src.train -m gpu=h200 model=resnet50,txl_base precision=amp gpu.count=1,2
    python benchmarks/scaling.py --gpu h200            [--uri URI] [--sweep PARENT_RUN_ID]

For every (gpu profile, model, precision) it takes the newest finished run at each gpu_count and
prints its throughput and efficiency = throughput(n) / (n x throughput(1)).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file from anywhere

from src.config.schema import register_configs  # noqa: E402
from src.paths import PROJECT_ROOT  # noqa: E402


def default_uri() -> str:
    """tracking.uri as the benchmark itself resolves it (MLFLOW_TRACKING_URI, else the embedded store)."""
    from hydra import compose, initialize_config_dir

    register_configs()
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        return compose("config", overrides=["gpu=cpu"]).tracking.uri


def scaling_rows(runs) -> list[dict]:
    """One row per (gpu, model, precision, gpu_count), newest finished run of each."""
    newest = {}
    for run in sorted(runs, key=lambda r: r.info.start_time):
        tags, metrics = run.data.tags, run.data.metrics
        if run.info.status != "FINISHED" or "throughput" not in metrics or tags.get("sweep") == "true":
            continue
        key = (tags["gpu"], tags["model"], tags["precision"], int(tags["gpu_count"]))
        newest[key] = (metrics["throughput"], tags.get("unit", ""))
    rows = []
    for (gpu, model, precision, count), (throughput, unit) in sorted(newest.items()):
        single = newest.get((gpu, model, precision, 1))
        efficiency = throughput / (count * single[0]) if single and count > 1 else None
        rows.append(
            {
                "gpu": gpu,
                "model": model,
                "precision": precision,
                "gpus": count,
                "throughput": throughput,
                "unit": unit,
                "efficiency": efficiency,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--uri", help="tracking URI (default: the benchmark's tracking.uri)")
    parser.add_argument("--experiment", default="gpubench")
    parser.add_argument("--gpu", help="only this gpu profile")
    parser.add_argument("--sweep", help="only the children of this sweep (parent run id)")
    args = parser.parse_args(argv)

    from src.tracking import store

    client = store.client(args.uri or default_uri())
    experiment = client.get_experiment_by_name(args.experiment)
    if experiment is None:
        raise SystemExit(f"--experiment={args.experiment}: no such experiment in {client.tracking_uri}")
    filters = []
    if args.gpu:
        filters.append(f"tags.gpu = '{args.gpu}'")
    if args.sweep:
        filters.append(f"tags.mlflow.parentRunId = '{args.sweep}'")
    runs = client.search_runs(
        [experiment.experiment_id], filter_string=" and ".join(filters), max_results=5000
    )
    rows = scaling_rows(runs)
    if not rows:
        raise SystemExit("no finished runs match")
    print(
        f"{'gpu':<10}{'model':<14}{'precision':<10}{'gpus':>5}{'throughput':>16}  {'unit':<10}{'efficiency':>10}"
    )
    for row in rows:
        efficiency = f"{100 * row['efficiency']:.1f}%" if row["efficiency"] is not None else "-"
        print(
            f"{row['gpu']:<10}{row['model']:<14}{row['precision']:<10}{row['gpus']:>5}"
            f"{row['throughput']:>16,.1f}  {row['unit']:<10}{efficiency:>10}"
        )


if __name__ == "__main__":
    main()
