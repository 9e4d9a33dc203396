"""`hydra/launcher=slurm`: one sweep, one Slurm job array per resource shape.

hydra-submitit-launcher asks Slurm for the resources of the sweep's base config for every point, so
`gpu=a6000,rtx3090` or `gpu.count=1,8` would run every point with the first profile's GPUs. Here
each point's config is composed first; points whose `hydra.launcher` block resolves alike (gres,
constraint, nodes, time limit, and every other sbatch setting) share one array. Every array is
submitted before any is waited on, so the cluster runs them side by side.

Everything else is hydra-submitit-launcher's own: the class subclasses its `SlurmLauncher` and
inherits `__init__`, `setup`, `__call__` (what runs on the node: the point re-composed, `hydra.job.id`
from Slurm, Hydra's `run_job`) and `checkpoint` (resubmission on timeout), and takes its keys and
defaults from `submitit_slurm`. Upstream builds its one executor inside `launch`, so the per-shape
executor below follows upstream's rule for turning a launcher block into submitit arguments, and
tests/test_slurm.py holds the two to the same submitit calls for the same block.

The class lives under `hydra_plugins`: Hydra instantiates launchers from that package only.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

# Launcher keys that build the executor rather than fill the sbatch request: upstream's, with the
# `python` its main branch adds (given to submitit as a job parameter, it is refused).
_EXECUTOR_INIT_KEYS = ("max_num_timeout", "python")
# What a person reads to tell the arrays apart.
_SHOWN_KEYS = ("gres", "constraint", "nodes", "timeout_min", "partition")


def slurm_request(sweep_config: DictConfig) -> dict[str, Any]:
    """A point's resolved `hydra.launcher` block: everything its sbatch script asks for."""
    request = OmegaConf.to_container(sweep_config.hydra.launcher, resolve=True)
    request.pop("_target_", None)
    return request


def group_by_shape(requests: Sequence[dict[str, Any]]) -> list[tuple[dict[str, Any], list[int]]]:
    """Points (by position) that ask for the same resources, in order of first appearance."""
    groups: dict[str, tuple[dict[str, Any], list[int]]] = {}
    for position, request in enumerate(requests):
        key = json.dumps(request, sort_keys=True, default=str)
        groups.setdefault(key, (request, []))[1].append(position)
    return list(groups.values())


def describe(request: dict[str, Any]) -> str:
    return " ".join(f"{k}={request[k]}" for k in _SHOWN_KEYS if request.get(k) is not None)


class SlurmShapesLauncher(SlurmLauncher):
    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        import submitit  # lazy, as the base class: Hydra imports every plugin at start-up

        assert self.config is not None and self.hydra_context is not None
        points = [list(overrides) for overrides in job_overrides]
        configs = [self.hydra_context.config_loader.load_sweep_config(self.config, p) for p in points]
        for position, config in enumerate(configs):
            with open_dict(config.hydra.job):
                config.hydra.job.num = initial_job_idx + position
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        groups = group_by_shape([slurm_request(c) for c in configs])
        log.info(f"Submitit '{self._EXECUTOR}' sweep output dir : {sweep_dir}: {len(groups)} job array(s)")

        results: list[JobReturn | None] = [None] * len(points)
        submitted = []
        for request, members in groups:
            log.info(f"array of {len(members)}: {describe(request)}")
            job_args = []
            for position in members:
                num = configs[position].hydra.job.num
                log.info(f"\t#{num} : {' '.join(filter_overrides(points[position]))}")
                job_args.append(
                    (points[position], "hydra.sweep.dir", num, f"job_id_for_{num}", Singleton.get_state())
                )
            try:
                jobs = self._executor(submitit, request).map_array(self, *zip(*job_args, strict=True))
            except Exception as exc:  # sbatch refused it (a partition or account the site lacks...)
                reason = _line(exc, -1)  # sbatch's verdict comes last
                for position in members:
                    results[position] = self._failed(configs[position], exc, f"sbatch refused it: {reason}")
                continue
            submitted += zip(members, jobs, strict=True)

        # Wait for every array: the parent run closes after this returns.
        try:
            for position, job in submitted:
                try:
                    results[position] = job.results()[0]
                except Exception as exc:  # Slurm ended it: time limit, node failure, scancel
                    why = f"Slurm job {job.job_id}: {_line(exc, 0)}"
                    results[position] = self._failed(configs[position], exc, why)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the study stops on the cluster too
            for _, job in submitted:
                if not job.done():
                    job.cancel(check=False)  # scancel: the job ends its run KILLED
            raise
        return results

    def _executor(self, submitit: Any, params: dict[str, Any]):
        """The executor upstream's `launch` would build from a launcher block of `params`: the folder
        and _EXECUTOR_INIT_KEYS build it, the rest are job parameters, BaseQueueConf's under their
        own names and the cluster's own with its prefix (`slurm_gres`)."""
        prefix = f"{self._EXECUTOR}_"
        built_with = {prefix + k: params[k] for k in _EXECUTOR_INIT_KEYS if k in params}
        executor = submitit.AutoExecutor(cluster=self._EXECUTOR, folder=params["submitit_folder"], **built_with)
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(
            **{
                k if k in shared else prefix + k: v
                for k, v in params.items()
                if k not in (*_EXECUTOR_INIT_KEYS, "submitit_folder")
            }
        )
        return executor

    def _failed(self, config: DictConfig, exc: Exception, why: str) -> JobReturn:
        """A point whose job never reported back: said once here and noted on the sweep's parent run
        (its own on_job_end, which does that, ran on the node or not at all)."""
        log.error(f"#{config.hydra.job.num} failed: {why}")
        failed = JobReturn(
            overrides=list(config.hydra.overrides.task), status=JobStatus.FAILED, _return_value=exc
        )
        self.hydra_context.callbacks.on_job_end(config=config, job_return=failed)
        return failed


def _line(exc: Exception, index: int) -> str:
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[index] if lines else type(exc).__name__
