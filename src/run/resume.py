"""Resume: a job whose point already has a clean FINISHED run in the experiment is not run again.

Each run carries the tag `config_hash`: a hash of its finalised config (after the smoke sizes,
the batch-size rule and, for gpu=auto, the profile of the GPU found) as src/config/points.py
declares it: its measured and procedure keys, never its plumbing (tracking, the Slurm request,
`benchmark.rerun`, host guards), and a key added later only once it leaves its default.
A finished run of the hash is this job's point only where the rest of the point agrees too: the
whole stack (torch, CUDA, cuDNN, NCCL and its settings, the driver), the card (its name and power
limit), the nodes and a CPU job's threads (points.point_config of the run's tags, the one key
compare uses). What the ranks will report (CUDA, cuDNN, NCCL) is read from this install before any
rank runs, only when a finished run of the hash exists: pip keeps torch's version when the cuDNN
beside it changes. Of those, one whose figure is flawed (it shared its GPU, it missed its stopping
rule) is not done: the point is measured again and that run is kept as it is.
Re-running a sweep after a crash therefore runs only the points that have no clean FINISHED run;
`benchmark.rerun=true` runs a point anyway.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable

from omegaconf import DictConfig, OmegaConf

from src.config import points
from src.results import recorded, run_result

CANDIDATES = 100  # finished runs of one hash looked at, latest first


def config_hash(cfg: DictConfig) -> str:
    data = points.hashed(OmegaConf.to_container(cfg, resolve=True))
    if data["model"].get("kind") == recorded.CEILINGS:  # it measures every math: one point per gpu and count
        data.pop("precision", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:16]


def finished_run(
    client, experiment_id: str, digest: str, tags: dict, from_ranks: Callable[[], dict]
) -> tuple[object | None, str | None]:
    """The latest clean FINISHED run of the point of a job with this config hash and these run tags
    (what it is tagged with before it runs, and `from_ranks()`: what its ranks will add), else None
    and why the job measures: a finished run of its config that is another point or is flawed
    (None: nothing of its config finished)."""
    runs = client.search_runs(
        [experiment_id],
        filter_string=f"tags.{recorded.CONFIG_HASH} = '{digest}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time DESC"],
        max_results=CANDIDATES,
    )
    if not runs:
        return None, None
    ours = points.point_config({}, {k: str(v) for k, v in (tags | from_ranks()).items()})  # as stored
    flawed = elsewhere = None
    for run in runs:
        theirs = points.point_config({}, run.data.tags)
        if theirs != ours:
            there, here = points.differences(theirs, ours)
            elsewhere = elsewhere or f"run {run.info.run_id} of this config ran with {there}, this job with {here}"
        elif (flaw := _flaw(run_result.read(run))) is None:
            return run, None
        else:
            flawed = flawed or f"run {run.info.run_id} of this point {flaw}; it is kept as it is"
    return None, flawed or elsewhere


def _flaw(result: run_result.RunResult) -> str | None:
    """Why a finished run's figure is not a clean measurement of its point; None when it is."""
    if result.foreign:
        return f"shared its GPU with {result.foreign}"
    if result.missed:
        return f"missed its stopping rule ({result.missed})"
    return None
