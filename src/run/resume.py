"""Resume: a job whose config already has a FINISHED run in the experiment is not run again.

Each run carries the tag `config_hash`: a hash of its finalised config (after the smoke sizes,
the batch-size rule and, for gpu=auto, the profile of the GPU found) as src/config/points.py
declares it: its measured and procedure keys, never its plumbing (tracking, the Slurm request,
`benchmark.rerun`, host guards), and a key added later only once it leaves its default.
Re-running a sweep after a crash therefore runs only the points that have no FINISHED run;
`benchmark.rerun=true` runs a point anyway.
"""

from __future__ import annotations

import hashlib
import json

from omegaconf import DictConfig, OmegaConf

from src import recorded
from src.config import points


def config_hash(cfg: DictConfig) -> str:
    data = points.hashed(OmegaConf.to_container(cfg, resolve=True))
    if data["model"].get("kind") == recorded.CEILINGS:  # it measures every math: one point per gpu and count
        data.pop("precision", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def finished_run(client, experiment_id: str, digest: str):
    """The latest FINISHED run with this config hash, or None."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.{recorded.CONFIG_HASH} = '{digest}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    return runs[0] if runs else None
