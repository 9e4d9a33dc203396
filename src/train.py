"""Entry point: `python -m src.train [-m] key=value ...` runs one benchmark job per config point."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from src.config import cli, help_groups
from src.config.schema import register_configs
from src.errors import (
    JOB_FAILED,
    RESULT_SPOOLED,
    ConfigError,
    DeviceUnavailable,
    JobFailed,
    PointFailed,
    TrackingUnavailable,
    exit_with_error,
)
from src.run import signals, sweep_watch
from src.run.prepare import prepare
from src.tracking import credentials

register_configs("config_schema")


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> float:
    cli.composed()
    signals.install()  # again here: a parallel launcher runs jobs in processes of its own
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    _keep_credentials_out(cfg, hydra_cfg)
    if multirun:
        sweep_watch.watch(cfg.tracking.uri)  # in a parallel launcher's worker: end with the sweep
    try:
        try:
            # Bad input and missing hardware stop here, before any run is opened or rank started.
            cfg, selection = prepare(cfg)
        except DeviceUnavailable as exc:
            # a Slurm job holds the GPUs its profile asked for: a mismatch (a site's gres names) fails
            if not multirun or os.environ.get("SUBMITIT_EXECUTOR") == "slurm":
                raise
            from src.run import job

            # another host runs this point (two workstations, one server): not a failure here
            return job.skip_unavailable(cfg, exc, _parent_run(hydra_cfg), hydra_cfg.job.num)
        from src.run import job
        from src.tracking import spool

        job_dir = Path(hydra_cfg.runtime.output_dir)
        with sweep_watch.job():
            throughput = job.run_job(cfg, selection, job_dir, _parent_run(hydra_cfg))
        if not multirun and spool.pending([job_dir])[0]:  # a sweep says so once, at its end
            raise SystemExit(RESULT_SPOOLED)
        return throughput
    except (ConfigError, TrackingUnavailable) as exc:
        if multirun:
            print(f"error: {credentials.redact(str(exc))}", file=sys.stderr)
            return PointFailed(credentials.redact(str(exc)), has_run=False)  # the sweep goes on
        exit_with_error(exc)
    except JobFailed as exc:  # its FAILED line said why; a traceback would only repeat it
        if multirun:
            return PointFailed(str(exc), has_run=True)
        for line in str(exc).splitlines()[1:]:  # where the ranks' own tracebacks are
            if line.startswith("(rank logs under"):
                print(line, file=sys.stderr)
        sys.exit(JOB_FAILED)


def _parent_run(hydra_cfg) -> str | None:
    """The sweep's parent run, which a multirun's callback opened before its first job."""
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    from src.tracking import store

    return store.read_parent_run(Path(hydra_cfg.sweep.dir))


def _keep_credentials_out(cfg: DictConfig, hydra_cfg) -> None:
    """A server's user:password into MLflow's variables; every secret masked in Hydra's copies."""
    credentials.adopt_tracking_credentials(cfg)
    output = Path(hydra_cfg.runtime.output_dir)
    saved = list((output / hydra_cfg.output_subdir).glob("*.yaml")) if hydra_cfg.output_subdir else []
    if hydra_cfg.mode == RunMode.MULTIRUN:  # a single run has no sweep folder (nor should claim one)
        saved.append(Path(hydra_cfg.sweep.dir) / "multirun.yaml")
    credentials.scrub_files(saved)


# Hydra's options that print and exit, and launchers that run the jobs in other processes
NO_LOCAL_JOB = (
    "--help",
    "-h",
    "--hydra-help",
    "--cfg",
    "-c",
    "--info",
    "-i",
    "--resolve",
    "--shell-completion",
)


def _runs_jobs_here(argv: list[str]) -> bool:
    return not any(a in NO_LOCAL_JOB or a.startswith(("hydra/launcher=", "--cfg=")) for a in argv)


def with_cpu_dry_run(argv: list[str]) -> list[str]:
    """A single job left at gpu=auto on a host without a GPU runs the CPU dry run: ResNet-50 at full
    size on a few cores takes minutes and misses its stopping rule. Naming gpu= or an experiment, a
    sweep (-m), or an option that prints instead of running (--cfg job) keeps the command as it is."""
    if not _runs_jobs_here(argv) or cli.names_the_hardware(argv):
        return argv
    from src.hardware import devices

    if devices.list_devices():
        return argv
    from src import console

    console.note(f"no GPU here: a CPU dry run ({cli.CPU_DRY_RUN}), not a GPU figure")
    return [cli.CPU_DRY_RUN, *argv]


if __name__ == "__main__":
    help_groups.exit_with_help_if_asked("config", sys.argv[1:])  # Hydra's takes seconds to list the groups
    signals.install()  # before the sweep's parent run opens
    sweep_watch.mark_sweep_process()
    sys.argv[1:] = with_cpu_dry_run(sys.argv[1:])
    if _runs_jobs_here(sys.argv[1:]):
        from src.run import launch

        launch.prestart()  # the agents' preloader imports torch while Hydra composes
    try:
        cli.run_app(main)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: runs are closed by now; say so to the shell
        sys.exit(signals.exit_code())
