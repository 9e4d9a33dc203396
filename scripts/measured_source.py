"""Make a shipped measured source (reference/measured/) from finished runs: a store's, or an export's.

An export holds one object per run name: the run's final metrics under the names the project
logged then, and its tags under `tags`. A store (`--store URI`) gives the same of each finished job
run (training or ceilings) of its measured experiment, with the params it logged and the counted
ops it logged (recorded.OP_COUNTS). This script writes what src/projection/shipped.py reads: each
run's tags as logged; its metrics under today's names (src/results/recorded.py); its params as it
logged them, or for an export's run composed from conf/ for its gpu, model and precision (what the
job logs, the batch that ran added); and, for each training run, its step's ops: the run's own
where it logged them, else counted on this host's CPU at the config composed for it with the
measured keys it logged (src/rank/op_count.py: products, convolutions and attention from their
shapes, dropout and attention as a GPU's fused kernels).

    python scripts/measured_source.py EXPORT.json [--out reference/measured/NAME.json]
    python scripts/measured_source.py --store sqlite:////abs/mlruns/mlflow.db --out reference/measured/NAME.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT_ROOT))  # the suite's own modules

from hydra import compose, initialize_config_dir  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from src.compare.runs import CompareError, finished_runs  # noqa: E402
from src.config import points  # noqa: E402
from src.config.finalise import finalize  # noqa: E402
from src.config.schema import register_configs  # noqa: E402
from src.errors import TrackingUnavailable, exit_with_error  # noqa: E402
from src.results import recorded, run_result  # noqa: E402
from src.tracking.job_run import flatten  # noqa: E402

OLD_SHAPE = "_shape"  # ceiling_matmul_<math>_shape: the side of the best square matmul, now m, n, k
STORE_HINT = "--store takes the tracking URI the jobs logged to"


def today(metrics: dict) -> dict:
    """The metrics under today's names: a square matmul's side as its m, n and k."""
    found = {}
    for name, value in metrics.items():
        if name.startswith(recorded.ceiling_metric("matmul_")) and name.endswith(OLD_SHAPE):
            stem = name.removesuffix(OLD_SHAPE)
            found |= {f"{stem}_{dim}": value for dim in recorded.SHAPE_DIMS}
        else:
            found[name] = value
    return found


def composed(tags: dict, batch: float | None, own: dict | None = None) -> dict:
    """The finalised config of the run's gpu, model and precision, as the job logs it; with the
    measured keys the run logged (`own`, its params) where they differ from the composed ones."""
    overrides = [f"gpu={tags['gpu']}", f"model={tags['model']}", f"precision={tags['precision']}"]
    overrides += [f"gpu.count={tags['gpu_count']}", f"benchmark={tags.get('benchmark', 'default')}"]
    if batch:
        overrides.append(f"model.batch_size={int(batch)}")

    def config(more: list[str]) -> dict:
        with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
            return OmegaConf.to_container(finalize(compose("config", overrides + more)), resolve=True)

    cfg = config([])
    logged = {k: str(v) for k, v in flatten(cfg).items()}
    ran = [f"{k}={v}" for k, v in points.point_config(own or {}) if k in logged and logged[k] != v]
    return config(ran) if ran else cfg


def from_store(uri: str) -> dict:
    """Each finished job run (training or ceilings) of the store's measured experiment as an export
    holds it, by run name, with the params it logged (under `params`) and the ops its job counted
    (under `op_counts`) where it logged them. A name run twice at one batch: the latest; a name
    measured at several batches (a name does not say its batch) is one entry per batch, `NAME-bN`."""
    from src.compare.projection import stored_counts
    from src.config.groups.tracking import TrackingConfig

    order = ["attributes.start_time ASC"]
    finished, _ = finished_runs(uri, [TrackingConfig.experiment], "", STORE_HINT, order)
    counted, by_name = stored_counts(uri), {}
    for run in filter(lambda run: run_result.read(run).is_job, finished):  # no sweep parent, no report
        tags = {k: v for k, v in run.data.tags.items() if not k.startswith("mlflow.")}
        entry = dict(run.data.metrics) | {"tags": tags, "params": dict(run.data.params)}
        if counts := counted(run.info.run_id):
            entry["op_counts"] = counts.to_json()
        by_name.setdefault(run.info.run_name, {})[run.data.metrics.get(recorded.BATCH_SIZE)] = entry
    return {
        name if len(batches) == 1 or batch is None else f"{name}-b{int(batch)}": entry
        for name, batches in by_name.items()
        for batch, entry in batches.items()
    }


def counted_on_cpu(cfg: dict) -> dict:
    """The ops of the config's training step, counted on this host's CPU (a run that logged none)."""
    import torch

    from src.rank.worker import counted_ops

    return counted_ops(cfg, torch.device("cpu")).to_json()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path, nargs="?")
    parser.add_argument("--store", help="an MLflow tracking URI to read the finished runs from")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if (args.export is None) == (args.store is None):
        parser.error("give an export file or --store URI, one of them")
    if args.store and not args.out:
        parser.error("--store needs --out")
    register_configs()
    out = args.out or PROJECT_ROOT / "reference" / "measured" / args.export.name
    try:
        source = from_store(args.store) if args.store else json.loads(args.export.read_text())
    except (CompareError, TrackingUnavailable) as exc:
        exit_with_error(exc)
    runs = {}
    for name, exported in source.items():
        own_counts, own_params = exported.get("op_counts"), exported.get("params")
        tags = exported["tags"]
        metrics = today({k: v for k, v in exported.items() if k not in ("tags", "params", "op_counts")})
        batch = metrics.get(recorded.BATCH_SIZE)
        counting = tags["model"] != recorded.CEILINGS and not own_counts
        cfg = composed(tags, batch, own_params) if counting or not own_params else None
        params = own_params or {k: str(v) for k, v in flatten(cfg).items()}
        if batch:
            params.setdefault(recorded.BATCH_SIZE, str(int(batch)))
        runs[name] = {"tags": tags, "params": params, "metrics": metrics}
        if tags["model"] != recorded.CEILINGS:
            runs[name]["op_counts"] = own_counts or counted_on_cpu(cfg)
        print(f"{name}: {len(metrics)} metrics, {len(params)} params", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": runs}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
