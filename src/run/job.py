"""One point of a sweep: resolve hardware, open the run, launch the ranks, log what they measured.

The job process owns MLflow (and NVML); it never initialises CUDA itself.
"""

from __future__ import annotations

import csv
import io
import os
import socket
import time
import uuid
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from src import console, credentials
from src.config import points
from src.config.finalise import resolve_precision
from src.errors import ConfigError, DeviceUnavailable, JobFailed
from src.hardware import devices, gpu_lock, host, occupancy
from src.reports import CeilingsReport
from src.run import breakdown, ceilings, launch, phases, resume, signals
from src.run.job_store import JobStore, note_on_parent
from src.run.results import JobOutcome, combine_ranks, efficiency, mfu
from src.tracking import job_run, spool
from src.tracking import tags as tag


def run_name(profile: str, count: int, model: str, precision: str, benchmark: str = "default") -> str:
    """`h200x2-resnet50-amp`; a benchmark other than the default says so (`cpux1-gpt2-fp32-smoke`)."""
    return f"{profile}x{count}-{model}-{precision}" + ("" if benchmark == "default" else f"-{benchmark}")


def run_job(
    cfg: DictConfig, selection: devices.Selection, job_dir: Path, parent_run_id: str | None = None
) -> float | None:
    """Run one benchmark job on its devices (its config finalised for them: src/run/prepare.py);
    returns its throughput. Raises after recording a failure.

    On a multi-node job only node 0 opens the run; the other nodes train and return None.
    """
    job_started = time.time()
    launch.prestart(cfg.model._target_)  # the model's imports overlap opening the run
    try:
        return _run_job(cfg, selection, job_dir, parent_run_id, phases.job_start_mark(), job_started)
    finally:
        phases.job_ended()


def _run_job(
    cfg: DictConfig,
    selection: devices.Selection,
    job_dir: Path,
    parent_run_id: str | None,
    phases_start: float,
    job_started: float,
) -> float | None:
    name = run_name(
        selection.profile, _gpu_count(cfg), cfg.model.name, cfg.precision.name, cfg.benchmark.name
    )
    if cfg.launcher.node_rank != 0:
        _launch(cfg, selection, job_dir, name, job_started)
        console.console.print(
            f"node {cfg.launcher.node_rank} of {cfg.launcher.nnodes}: {name} trained; node 0 logs the run"
        )
        return None

    tracking = JobStore(cfg.tracking)
    digest = resume.config_hash(cfg)
    if not cfg.benchmark.rerun and (done := tracking.finished_run(digest)) is not None:
        return _skip(cfg, name, done, digest, parent_run_id)
    run = tracking.open_run(name, _run_tags(cfg, selection, digest), parent_run_id, job_dir / spool.SPOOL_DIR)
    try:
        from src.hardware import telemetry

        env = _log_set_up(run, cfg, selection)
        with telemetry.Watch(cfg.telemetry, selection.devices, run) as watch:
            outcome = _launch(cfg, selection, job_dir, name, job_started)
        metrics = _log_result(run, cfg, env, outcome, watch.summary(outcome), phases_start, job_started)
        if outcome.ceilings_table is not None:  # the card's figures: no throughput to return
            return ceilings.result_line(name, metrics)
        console.result_line(
            name, metrics, cfg.model.unit, outcome.stop_reason, cfg.benchmark.target_ci, run.spooled,
            min_steps=cfg.benchmark.min_steps, shared=outcome.foreign,
        )  # fmt: skip
        if parent_run_id is None and not run.spooled:  # a sweep says where once, at its end
            _where_and_next(cfg, run)
        return metrics["throughput"]
    except KeyboardInterrupt:
        stop = signals.received()
        run.set_tags({tag.ERROR: f"interrupted by {stop.name if stop else 'SIGINT'}"})
        run.end("KILLED")
        raise
    except BaseException as exc:
        reason = credentials.redact(str(exc) or type(exc).__name__)
        run.set_tags({tag.ERROR: reason[:5000]})
        run.end("FAILED")
        console.failure_line(name, reason.splitlines()[0] if reason else "")
        if isinstance(exc, Exception):
            raise JobFailed(reason) from exc  # said: the entry point adds no traceback
        raise


def _where_and_next(cfg: DictConfig, run: job_run.JobRun) -> None:
    """A single job's last lines: where its result is, and the command that sets it beside the study."""
    from src.tracking import ui

    console.console.print(
        f"result: run {run.run_id} in experiment {cfg.tracking.experiment!r} at "
        f"{credentials.redact(cfg.tracking.uri)}",
        soft_wrap=True,
    )
    console.link_line(ui.how_to_open(cfg.tracking.uri, run.experiment_id))
    console.link_line(
        "next: `python -m src.compare experiment=lambda_a6000_vs_3090` sets it beside Lambda's "
        "RTX A6000 and RTX 3090 (imports their figures the first time)"
    )


def _gpu_count(cfg: DictConfig) -> int:
    return cfg.gpu.count * cfg.launcher.nnodes


def _run_tags(cfg: DictConfig, selection: devices.Selection, digest: str) -> dict:
    """What the run is of, set when it opens: the point's fields and the measured settings."""
    return {
        tag.GPU: selection.profile,
        tag.GPU_NAME: selection.gpu_name,
        tag.GPU_COUNT: _gpu_count(cfg),
        tag.NNODES: cfg.launcher.nnodes,
        tag.GPUS_PER_NODE: cfg.gpu.count,
        tag.MODEL: cfg.model.name,
        tag.CATEGORY: cfg.model.category,
        tag.PRECISION: cfg.precision.name,
        tag.BENCHMARK: cfg.benchmark.name,
        tag.HOST: socket.gethostname(),
        tag.CONFIG_HASH: digest,
        **points.setting_tags(cfg),  # compile, channels_last, ...: each measured setting with a tag
    }


def _log_set_up(run: job_run.JobRun, cfg: DictConfig, selection: devices.Selection) -> dict:
    """Environment, params and config, sent now so the running run shows its set-up; returns the
    environment, which the ranks' versions complete."""
    from src.hardware import environment

    env = environment.capture(selection.devices)
    _log_environment(run, env)
    run.log_params(job_run.flatten(cfg))
    run.log_files({"config.yaml": OmegaConf.to_yaml(cfg, resolve=True)})
    run.flush()  # the rest goes in one write at the run's end
    return env


def _log_result(
    run: job_run.JobRun,
    cfg: DictConfig,
    env: dict,
    outcome: JobOutcome,
    telemetry_figures: dict,
    phases_start: float,
    job_started: float,
) -> dict:
    """The job's figures, logged and the run ended FINISHED; a diverged run logs none and fails."""
    env["versions"] |= outcome.runtime_versions  # what the ranks ran with: CUDA, cuDNN, NCCL
    env["communication"] = outcome.communication
    _log_environment(run, env)
    if outcome.world_size > 1 and env["devices"]:  # GPUs that talk through NCCL: part of the point
        run.set_tags({tag.NCCL_SETTINGS: nccl_settings_tag(outcome.communication)})
    if outcome.foreign:
        run.set_tags({tag.GPU_FOREIGN_PROCESSES: outcome.foreign[:5000]})
    marks = outcome.marks | {"job_entry": job_started, "logged": time.time()}
    if outcome.ceilings_table is not None:  # the card's own figures: no throughput, no step times
        return ceilings.log(
            run, outcome, outcome.metrics | telemetry_figures | phases.phase_metrics(phases_start, marks)
        )
    if not outcome.all_finite:  # its figures are not a result: none is logged
        run.set_tags({tag.DIVERGED: "true"})
        raise Diverged("training diverged: non-finite loss in the measured window")
    metrics = outcome.metrics
    run.log_params({points.RAN_BATCH: metrics["batch_size"]})  # the per-GPU batch that ran
    peak = cfg.gpu.peak_tflops.get(cfg.precision.peak_key) if cfg.gpu.peak_tflops else None
    metrics["mfu"] = mfu(metrics.get("achieved_tflops_per_gpu"), peak)
    metrics |= telemetry_figures
    metrics |= efficiency(metrics, cfg.gpu, _gpu_count(cfg))
    metrics |= phases.phase_metrics(phases_start, marks)
    metrics |= breakdown.metrics(outcome.breakdown)  # taken after the window
    metrics[tag.workload_metric(cfg.model.name, cfg.precision.name, _gpu_count(cfg))] = metrics["throughput"]
    run.log_metrics(metrics)
    run.set_tags(
        {tag.UNIT: cfg.model.unit, tag.STOP_REASON: outcome.stop_reason}
        | {f"{tag.MATH_PREFIX}{k}": v for k, v in outcome.precision_math.items()}
    )
    run.log_files(
        {"step_times.csv": _step_times_csv(outcome.step_times_s)} | breakdown.files(outcome.breakdown)
    )
    run.end("FINISHED")
    return metrics


def _log_environment(run: job_run.JobRun, env: dict) -> None:
    tags = {f"{k}{tag.VERSION_SUFFIX}": v for k, v in env["versions"].items()} | {tag.DRIVER_VERSION: env["driver"]}
    limits = sorted({f"{d['power_limit_w']:g}" for d in env["devices"] if d.get("power_limit_w")})
    if limits:  # the card's enforced power limit changes its figure: part of compare's point
        tags[tag.POWER_LIMIT] = "/".join(limits)
    run.set_tags(tags)
    run.log_dict(env, "environment.json")


def nccl_settings_tag(settings: dict[str, str]) -> str:
    """`NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0`, or `default` where the user set none."""
    return " ".join(f"{name}={value}" for name, value in sorted(settings.items())) or "default"


class Diverged(RuntimeError):
    """NaN or inf loss in the measured window."""


def _skip(cfg: DictConfig, name: str, done, digest: str, parent_run_id: str | None) -> float:
    """Report the point as done by an earlier run; its parent (if any) lists it."""
    throughput = done.data.metrics.get("throughput")
    console.skip_line(name, done.info.run_id, throughput, cfg.model.unit)
    note_on_parent(cfg.tracking.uri, parent_run_id, f"{tag.SKIPPED_PREFIX}{digest}", done.info.run_id)
    return throughput


def skip_unavailable(cfg: DictConfig, exc: DeviceUnavailable, parent_run_id: str | None, num: int) -> None:
    """A sweep's point whose GPUs this host lacks: one line, and a note on the parent (no run)."""
    precision = resolve_precision(cfg).precision.name  # cfg as composed: the device was never found
    name = run_name(cfg.gpu.name, _gpu_count(cfg), cfg.model.name, precision, cfg.benchmark.name)
    console.unavailable_line(name, exc.shortfall)
    note_on_parent(
        cfg.tracking.uri, parent_run_id, f"{tag.UNAVAILABLE_PREFIX}{num}", f"{name}: {exc.shortfall}"
    )


def _launch(
    cfg: DictConfig, selection: devices.Selection, job_dir: Path, name: str, job_started: float
) -> JobOutcome:
    rank_cfg = OmegaConf.to_container(cfg, resolve=True)
    # the job id is in every file the job exchanges with its ranks: what it reads back is its own
    job_id = uuid.uuid4().hex
    rank_cfg["runtime"] = {"device": selection.device_kind, "job_id": job_id}
    if selection.device_kind == "cuda":
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = selection.cuda_visible_devices
    else:  # share the cores between CPU ranks instead of oversubscribing them
        rank_cfg["runtime"]["cpu_threads"] = host.threads_per_rank(cfg.gpu.count, cfg.benchmark.cpu_threads)
    job_dir.mkdir(parents=True, exist_ok=True)
    # one file and folder per node: the nodes of a Slurm job share the job's folder
    node = f"node{cfg.launcher.node_rank}"
    progress_file = job_dir / f"progress.{node}.json"
    run_id = launch.rendezvous_id(name, cfg.launcher.nnodes)
    with gpu_lock.exclusive(selection.devices, name) as waited_s:  # never two jobs on one GPU
        # ...and see any other program on them: refused with benchmark.exclusive, else recorded
        busy = occupancy.before_start(selection.devices, cfg.benchmark.exclusive)
        launched = time.time()
        with (
            console.JobProgress(name, progress_file, cfg.model.unit, job_id),
            occupancy.Watch(selection.devices) as watch,
        ):
            reports = launch.launch_ranks(
                rank_cfg, cfg.gpu.count, dict(cfg.launcher), job_dir / "ranks" / node, progress_file, run_id
            )
    if isinstance(reports[0], CeilingsReport):  # a model=ceilings job: figures of the card, no steps
        outcome = ceilings.combine(reports)
    else:
        outcome = combine_ranks(reports, job_started + waited_s)  # start-up figures leave the wait out
    outcome.marks |= {"launch": launched, "outcome": time.time()}
    outcome.foreign = occupancy.describe(busy, watch.during(outcome.window))
    return outcome


def _step_times_csv(step_times_s: list[float]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["step", "step_time_ms"])
    writer.writerows((i, f"{t * 1e3:.4f}") for i, t in enumerate(step_times_s))
    return out.getvalue()


__all__ = ["ConfigError", "run_job", "run_name"]
