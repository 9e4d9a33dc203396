"""Make a shipped measured source (reference/measured/) from runs exported with their metrics and tags.

The export holds one object per run name: the run's final metrics under the names the project
logged then, and its tags under `tags`. This script writes what src/projection/shipped.py reads:
each run's tags as logged; its metrics under today's names (src/recorded.py); its params composed
from conf/ for its gpu, model and precision (what the job logs, the batch that ran added); and, for
each training run, its step's ops counted on this host's CPU (src/rank/op_count.py: products,
convolutions and attention from their shapes, dropout and attention as a GPU's fused kernels).

    python scripts/measured_source.py EXPORT.json [--out reference/measured/NAME.json]
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

from src import recorded  # noqa: E402
from src.config.finalise import finalize  # noqa: E402
from src.config.schema import register_configs  # noqa: E402
from src.tracking.job_run import flatten  # noqa: E402

OLD_SHAPE = "_shape"  # ceiling_matmul_<math>_shape: the side of the best square matmul, now m, n, k


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


def composed(tags: dict, batch: float | None) -> dict:
    """The finalised config of the run's gpu, model and precision, as the job logs it."""
    overrides = [f"gpu={tags['gpu']}", f"model={tags['model']}", f"precision={tags['precision']}"]
    overrides += [f"gpu.count={tags['gpu_count']}", f"benchmark={tags.get('benchmark', 'default')}"]
    if batch:
        overrides.append(f"model.batch_size={int(batch)}")
    with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
        cfg = finalize(compose(config_name="config", overrides=overrides))
    return OmegaConf.to_container(cfg, resolve=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("export", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    import torch

    from src.rank.worker import counted_ops

    register_configs()
    out = args.out or PROJECT_ROOT / "reference" / "measured" / args.export.name
    runs = {}
    for name, exported in json.loads(args.export.read_text()).items():
        tags, metrics = exported["tags"], today({k: v for k, v in exported.items() if k != "tags"})
        batch = metrics.get(recorded.BATCH_SIZE)
        cfg = composed(tags, batch)
        params = {k: str(v) for k, v in flatten(cfg).items()}
        if batch:
            params[recorded.BATCH_SIZE] = str(int(batch))
        runs[name] = {"tags": tags, "params": params, "metrics": metrics}
        if tags["model"] != recorded.CEILINGS:
            runs[name]["op_counts"] = counted_ops(cfg, torch.device("cpu")).to_json()
        print(f"{name}: {len(metrics)} metrics, {len(params)} params", file=sys.stderr)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": runs}, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
