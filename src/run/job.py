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

from src import console
from src.config import points
from src.config.finalise import resolve_precision
from src.errors import ConfigError, DeviceUnavailable, JobFailed
from src.hardware import devices, environment, gpu_lock, host, occupancy
from src.paths import PROJECT_ROOT
from src.results import recorded, run_result
from src.run import ceiling_figures, launch, phases, profile_figures, resume, signals
from src.run.job_store import JobStore, note_on_parent
from src.run.outcome import JobOutcome, combine_ranks, efficiency
from src.tracking import credentials, job_run, spool

STUDY = "lambda_a6000_vs_3090"  # conf/study/: the question compare answers beside Lambda's published cards
STRICT_FP32 = "fp32"  # IEEE fp32, TF32 off: compare never pools it with published "fp32" (TF32 math)


def run_name(
    profile: str,
    count: int,
    model: str,
    precision: str,
    benchmark: str = "default",
    nodes: int = 1,
    threads: int | None = None,
) -> str:
    """`h200x8-resnet50-amp`: the hardware a run's figure came from, its model and precision. What
    changes that hardware for the same count is in it too, so that two figures never share a name:
    nodes x GPUs per node where a job spans nodes (`h200x2x8-...`), and a CPU rank's threads
    (`cpux1t4-...`: one rank of four threads). A benchmark other than the default says so
    (`cpux1t1-gpt2-fp32-smoke`)."""
    hardware = f"{profile}x{count}" if nodes == 1 else f"{profile}x{nodes}x{count // nodes}"
    if threads is not None:
        hardware += f"t{threads}"
    return f"{hardware}-{model}-{precision}" + ("" if benchmark == "default" else f"-{benchmark}")


def job_name(cfg: DictConfig, selection: devices.Selection) -> str:
    """The run name of the job `cfg` (finalised) on the devices `selection` found."""
    threads = None if selection.device_kind == "cuda" else _cpu_threads(cfg)
    return run_name(
        selection.profile,
        _gpu_count(cfg),
        cfg.model.name,
        cfg.precision.name,
        cfg.benchmark.name,
        cfg.launcher.nnodes,
        threads,
    )


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
    name = job_name(cfg, selection)
    if cfg.launcher.node_rank != 0:
        _launch(cfg, selection, job_dir, name, job_started)
        console.console.print(
            f"node {cfg.launcher.node_rank} of {cfg.launcher.nnodes}: {name} trained; node 0 logs the run"
        )
        return None

    tracking = JobStore(cfg.tracking)
    digest = resume.config_hash(cfg)
    env = environment.capture(selection.devices)  # the stack and card: part of the point resume matches
    tags = _run_tags(cfg, selection, digest)
    if not cfg.benchmark.rerun:
        done, why = tracking.finished_run(
            digest, tags | _environment_tags(env), lambda: _ranks_stack(cfg, env)
        )
        if done is not None:
            return _skip(cfg, name, done, digest, parent_run_id)
        if why is not None:
            console.measure_line(name, why)
    run = tracking.open_run(name, tags, parent_run_id, job_dir / spool.SPOOL_DIR)
    try:
        from src.hardware import telemetry

        _log_set_up(run, cfg, env)
        with telemetry.Watch(cfg.telemetry, selection.devices, run) as watch:
            outcome = _launch(cfg, selection, job_dir, name, job_started)
        metrics = _log_result(run, cfg, env, outcome, watch.summary(outcome), phases_start, job_started)
        if cfg.model.kind == recorded.CEILINGS:  # the card's figures: no throughput to return
            return ceiling_figures.result_line(name, outcome.ceilings)
        console.result_line(
            name,
            metrics,
            cfg.model.unit,
            outcome.stop_reason,
            cfg.benchmark.target_ci,
            run.spooled,
            min_steps=cfg.benchmark.min_steps,
            shared=outcome.foreign,
        )
        if parent_run_id is None and not run.spooled:  # a sweep says where once, at its end
            _where_and_next(cfg, run)
        return metrics[recorded.THROUGHPUT]
    except KeyboardInterrupt:
        stop = signals.received()
        run.set_tags({recorded.ERROR: f"interrupted by {stop.name if stop else 'SIGINT'}"})
        run.end("KILLED")
        raise
    except BaseException as exc:
        reason = credentials.redact(str(exc) or type(exc).__name__)
        run.set_tags({recorded.ERROR: reason[:5000]})
        run.end("FAILED")
        console.failure_line(name, reason.splitlines()[0] if reason else "")
        if isinstance(exc, Exception):
            raise JobFailed(reason) from exc  # said: the entry point adds no traceback
        raise


def _where_and_next(cfg: DictConfig, run: job_run.JobRun) -> None:
    """A single job's last lines: where its result is, the MLflow UI that shows it, and what next."""
    from src.tracking import ui

    console.console.print(
        f"result: run {run.run_id} in experiment {cfg.tracking.experiment!r} at "
        f"{credentials.redact(cfg.tracking.uri)}",
        soft_wrap=True,
    )
    console.link_line(ui.how_to_open(cfg.tracking.uri, run.experiment_id))
    console.link_line(next_line(cfg))


def next_line(cfg: DictConfig) -> str:
    """What shows a single job's run next: the study's compare where its table counts the run, else
    the MLflow UI (the line before): compare leaves a dry run out, holds only the study's models, and
    keeps strict fp32 out of its means."""
    study = OmegaConf.load(PROJECT_ROOT / "conf" / "study" / f"{STUDY}.yaml")
    command = f"`python -m src.compare experiment={STUDY}`"
    if cfg.benchmark.name == recorded.SMOKE:
        return (
            f"next: the MLflow UI above shows this dry run, which compare leaves out; {command} "
            "answers the study from Lambda's published figures"
        )
    if cfg.model.name not in study.models:
        models = ", ".join(study.models)
        return (
            f"next: the MLflow UI above shows this run; the study's compare, {command}, holds only {models}"
        )
    if cfg.precision.name == STRICT_FP32:  # like math against like math: Lambda's "fp32" ran TF32
        return (
            f"next: the MLflow UI above shows this run; {command} sets strict fp32 apart from Lambda's "
            '"fp32", which ran TF32 (precision=tf32 measures its like)'
        )
    return (
        f"next: {command} sets it beside Lambda's RTX A6000 and RTX 3090 (imports their figures the "
        "first time)"
    )


def _gpu_count(cfg: DictConfig) -> int:
    return cfg.gpu.count * cfg.launcher.nnodes


def _run_tags(cfg: DictConfig, selection: devices.Selection, digest: str) -> dict:
    """What the run is of, set when it opens: the point's fields and the measured settings."""
    return {
        recorded.GPU: selection.profile,
        recorded.GPU_NAME: selection.gpu_name,
        recorded.GPU_COUNT: _gpu_count(cfg),
        recorded.NNODES: cfg.launcher.nnodes,
        recorded.GPUS_PER_NODE: cfg.gpu.count,
        recorded.KIND: cfg.model.kind,
        recorded.MODEL: cfg.model.name,
        recorded.CATEGORY: cfg.model.category,
        recorded.PRECISION: cfg.precision.name,
        recorded.BENCHMARK: cfg.benchmark.name,
        recorded.HOST: socket.gethostname(),
        recorded.CONFIG_HASH: digest,
        **points.setting_tags(cfg),  # compile, channels_last, ...: each measured setting with a tag
        **_cpu_tags(cfg, selection),
    }


def _cpu_tags(cfg: DictConfig, selection: devices.Selection) -> dict:
    """A CPU job's card and threads: the processor model, the intra-op threads each rank runs."""
    if selection.device_kind == "cuda":
        return {}
    return {points.CPU_MODEL: environment.cpu_model(), points.CPU_THREADS: _cpu_threads(cfg)}


def _cpu_threads(cfg: DictConfig) -> int:
    return host.threads_per_rank(cfg.gpu.count, cfg.benchmark.cpu_threads)


def _log_set_up(run: job_run.JobRun, cfg: DictConfig, env: dict) -> None:
    """Environment, params and config, sent now so the running run shows its set-up (the ranks'
    versions complete the environment at the end)."""
    _log_environment(run, env)
    run.log_params(job_run.flatten(cfg))
    run.log_files({"config.yaml": OmegaConf.to_yaml(cfg, resolve=True)})
    run.flush()  # the rest goes in one write at the run's end


def _log_result(
    run: job_run.JobRun,
    cfg: DictConfig,
    env: dict,
    outcome: JobOutcome,
    telemetry_figures: recorded.Telemetry,
    phases_start: float,
    job_started: float,
) -> dict:
    """The job's figures, logged and the run ended FINISHED; a diverged run logs none and fails."""
    env["versions"] |= outcome.runtime_versions  # what the ranks ran with: CUDA, cuDNN, NCCL
    env["communication"] = outcome.communication
    _log_environment(run, env)
    if outcome.world_size > 1 and env["devices"]:  # GPUs that talk through NCCL: part of the point
        run.set_tags({recorded.NCCL_SETTINGS: nccl_settings_tag(outcome.communication)})
    if outcome.foreign:
        run.set_tags({recorded.GPU_FOREIGN_PROCESSES: outcome.foreign[:5000]})
    marks = outcome.marks | {"job_entry": job_started, "logged": time.time()}
    phase_figures = phases.phase_metrics(phases_start, marks)
    if cfg.model.kind == recorded.CEILINGS:  # the card's own figures: no throughput, no step times
        figures = outcome.ceilings.metrics() | outcome.measured.metrics() | telemetry_figures.metrics()
        return ceiling_figures.log(run, outcome, figures | phase_figures)
    if not outcome.all_finite:  # its figures are not a result: none is logged
        run.set_tags({recorded.DIVERGED: "true"})
        raise Diverged("training diverged: non-finite loss in the measured window")
    run.log_params({points.RAN_BATCH: outcome.measured.batch_size})  # the per-GPU batch that ran
    peak = cfg.gpu.peak_tflops.get(cfg.precision.peak_key) if cfg.gpu.peak_tflops else None
    power = telemetry_figures.power_mean_w
    measured = efficiency(outcome.measured, peak, power, cfg.gpu, _gpu_count(cfg))
    workload = recorded.workload_metric(cfg.model.name, cfg.precision.name, _gpu_count(cfg))
    metrics = (
        measured.metrics() | telemetry_figures.metrics() | phase_figures | {workload: measured.throughput}
    )
    if outcome.breakdown is not None:  # taken after the window
        gpu, precision = (OmegaConf.to_container(group, resolve=True) for group in (cfg.gpu, cfg.precision))
        outcome.breakdown = profile_figures.bounded(outcome.breakdown, measured, gpu, precision)
        metrics |= outcome.breakdown.metrics()
    run.log_metrics(metrics)
    run.set_tags(
        {recorded.UNIT: cfg.model.unit, recorded.STOP_REASON: outcome.stop_reason}
        | {f"{recorded.MATH_PREFIX}{k}": v for k, v in outcome.precision_math.items()}
    )
    run.log_files(
        {"step_times.csv": _step_times_csv(outcome.step_times_s)}
        | profile_figures.files(outcome.top_kernels, outcome.breakdown)
    )
    run.end("FINISHED")
    return metrics


def _log_environment(run: job_run.JobRun, env: dict) -> None:
    run.set_tags(_environment_tags(env))
    run.log_dict(env, "environment.json")


def _environment_tags(env: dict) -> dict:
    """The stack and card the job runs on, as run tags: versions, driver, the power limit."""
    tags = {f"{k}{recorded.VERSION_SUFFIX}": v for k, v in env["versions"].items()} | {
        recorded.DRIVER_VERSION: env["driver"]
    }
    limits = sorted({f"{d['power_limit_w']:g}" for d in env["devices"] if d.get("power_limit_w")})
    if limits:  # the card's enforced power limit changes its figure: part of compare's point
        tags[recorded.POWER_LIMIT] = "/".join(limits)
    return tags


def _ranks_stack(cfg: DictConfig, env: dict) -> dict:
    """The stack tags the job's ranks will report, before they run (as _log_result tags them): this
    install's CUDA, cuDNN and NCCL, and NCCL's settings where GPUs talk through it."""
    tags = {f"{k}{recorded.VERSION_SUFFIX}": v for k, v in environment.installed_runtime_versions().items()}
    if _gpu_count(cfg) > 1 and env["devices"]:
        tags[recorded.NCCL_SETTINGS] = nccl_settings_tag(environment.communication_settings())
    return tags


def nccl_settings_tag(settings: dict[str, str]) -> str:
    """`NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0`, or `default` where the user set none."""
    return " ".join(f"{name}={value}" for name, value in sorted(settings.items())) or "default"


class Diverged(RuntimeError):
    """NaN or inf loss in the measured window."""


def _skip(cfg: DictConfig, name: str, done, digest: str, parent_run_id: str | None) -> float:
    """Report the point as done by an earlier run; its parent (if any) lists it."""
    throughput = run_result.read(done).throughput
    console.skip_line(name, done.info.run_id, throughput, cfg.model.unit)
    # keyed by this point's name too: amp's ceilings point is the run tf32's measured, named tf32
    note_on_parent(
        cfg.tracking.uri, parent_run_id, f"{recorded.SKIPPED_PREFIX}{digest}.{name}", done.info.run_id
    )
    return throughput


def skip_unavailable(cfg: DictConfig, exc: DeviceUnavailable, parent_run_id: str | None, num: int) -> None:
    """A sweep's point whose GPUs this host lacks: one line, and a note on the parent (no run)."""
    precision = resolve_precision(cfg).precision.name  # cfg as composed: the device was never found
    name = run_name(
        cfg.gpu.name, _gpu_count(cfg), cfg.model.name, precision, cfg.benchmark.name, cfg.launcher.nnodes
    )
    console.unavailable_line(name, exc.shortfall)
    note_on_parent(
        cfg.tracking.uri, parent_run_id, f"{recorded.UNAVAILABLE_PREFIX}{num}", f"{name}: {exc.shortfall}"
    )


def _launch(
    cfg: DictConfig, selection: devices.Selection, job_dir: Path, name: str, job_started: float
) -> JobOutcome:
    rank_cfg = OmegaConf.to_container(cfg, resolve=True)
    del rank_cfg["tracking"]  # ranks never log; a database URI's password stays out of launch.json
    # the job id is in every file the job exchanges with its ranks: what it reads back is its own
    job_id = uuid.uuid4().hex
    rank_cfg["runtime"] = {"device": selection.device_kind, "job_id": job_id}
    if selection.device_kind == "cuda":
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        os.environ["CUDA_VISIBLE_DEVICES"] = selection.cuda_visible_devices
    else:  # share the cores between CPU ranks instead of oversubscribing them
        rank_cfg["runtime"]["cpu_threads"] = _cpu_threads(cfg)
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
    if cfg.model.kind == recorded.CEILINGS:  # figures of the card, no steps
        outcome = ceiling_figures.combine(reports)
    else:
        outcome = combine_ranks(reports, job_started + waited_s)  # start-up figures leave the wait out
    outcome.marks |= {"launch": launched, "outcome": time.time()}
    outcome.foreign = occupancy.describe(busy, watch.during(outcome.window))
    return outcome


def _step_times_csv(step_times_s: list[float]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["step", recorded.STEP_TIME_MS])
    writer.writerows((i, f"{t * 1e3:.4f}") for i, t in enumerate(step_times_s))
    return out.getvalue()


__all__ = ["ConfigError", "job_name", "run_job", "run_name"]
