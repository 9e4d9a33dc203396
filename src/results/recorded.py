"""What a run records, named once: every tag and metric that one part of gpubench writes and another
reads (the measured settings' tags and the stack's tags are declared with their config keys in
src/config/points.py), and the typed figures the job writes and src/results/run_result.py's `read` gives
back: the measured window (`Window`), the step-time breakdown (`Breakdown`), the telemetry summary
(`Telemetry`) and a ceilings job's figures (`CeilingFigures`). Writers: the job (src/run/), the
telemetry summary, the sweep, the importer, compare's report and anomaly tags. docs/metrics.md lists
the names for users.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from src.results.figures import Figures, figure
from src.results.logged_spec import (
    SPEC_PARAMS as SPEC_PARAMS,  # compare's too: the figures a spec sheet states
)

SCHEMA_VERSION = 2
FIRST_SCHEMA = 1  # runs without the tag

# what kind of job a run is: a training workload (measured or published) or the card's ceilings
TRAINING, CEILINGS = "training", "ceilings"
KINDS = (TRAINING, CEILINGS)
REPORT_KIND, SWEEP_KIND = "report", "sweep"  # runs that are no job: compare's report, a sweep's parent
MEASURED = "measured"  # the source of this project's own runs (they carry no `source` tag)
PROJECTED = "projected"  # the source of a point projected onto a card (src/compare/projection.py)

# ---- tags: what a run measured (compare's point reads these) ----
SCHEMA = "schema_version"
KIND = "job_kind"
GPU = "gpu"  # the gpu profile
GPU_NAME = "gpu_name"  # the device name as detected (or published)
GPU_COUNT = "gpu_count"  # GPUs in the job, all nodes
NNODES = "nnodes"
GPUS_PER_NODE = "gpus_per_node"
MODEL = "model"
CATEGORY = "category"  # vision | language
PRECISION = "precision"
UNIT = "unit"  # of throughput: images/s, tokens/s, ...
BENCHMARK = "benchmark"  # the benchmark group's name: default, smoke
SMOKE = "smoke"  # the benchmark of dry runs: tiny sizes, left out of compare unless include_smoke
SOURCE = "source"  # who measured it: absent on this project's own runs, the publisher on imported ones
MATH_PREFIX = "math_"  # math_<what>: the math that ran (math_matmul_tf32, math_autocast_dtype, ...)
MATH_MATMUL_TF32 = MATH_PREFIX + "matmul_tf32"
VERSION_SUFFIX = "_version"  # <package>_version: the software the run ran with
DRIVER_VERSION = "driver" + VERSION_SUFFIX
# NCCL's effective variables ("NCCL_ALGO=Ring NCCL_NVLS_ENABLE=0", or "default": none set) on a
# job whose GPUs talk through NCCL (src/hardware/environment.communication_settings)
NCCL_SETTINGS = "nccl_settings"
POWER_LIMIT = "power_limit_w"  # the card's enforced power limit as NVML read it, per GPU ("300" or "300/350")
HOST = "host"
GPU_FOREIGN_PROCESSES = "gpu_foreign_processes"  # other programs on the job's GPUs: pid, name, memory, when

# how the run ended
CONFIG_HASH = "config_hash"  # resume: src/run/resume.py
STOP_REASON = "stop_reason"  # ci | max_steps | time_limit
DIVERGED = "diverged"  # "true": a non-finite loss in the window
ERROR = "error"  # why a run FAILED or was KILLED

# a sweep's parent run
SWEEP = "sweep"  # "true"
OVERRIDES = "overrides"
SWEEP_DIR = "sweep_dir"
# skipped.<config_hash>.<run name of the skipped point> = the id of the FINISHED run that did the point
SKIPPED_PREFIX = "skipped."
UNAVAILABLE_PREFIX = "unavailable."  # unavailable.<num> = "<run name>: needs ..."
FAILED_JOB_PREFIX = "failed_job."  # failed_job.<num> = why that point failed
NO_RUN_JOB_PREFIX = "no_run_job."  # no_run_job.<num> = true: that point failed before opening a run

# who runs it: a RUNNING run whose process is gone is closed (src/tracking/owner.py)
OWNER_HOST, OWNER_PID, OWNER_STARTED = "owner.host", "owner.pid", "owner.started"
IDEMPOTENCY_KEY = "gpubench.key"  # one per job, set when its run is created (src/tracking/spool.py)

# imported published results (src/published/__main__.py)
IMPORT_KEY = "import_key"
# the run an import holds while it writes a source (src/published/imported.py): the source, and a
# count it raises
IMPORT_LOCK, IMPORT_HEARTBEAT = "import_lock", "import_heartbeat"
PUBLISHED_SYSTEM, PUBLISHED_TASK = "published_system", "published_task"
PUBLISHED_PRECISION, PUBLISHED_FILE = "published_precision", "published_file"
PUBLISHED_SOFTWARE, PUBLISHED_DATES = "published_software", "published_dates"  # of the source's generation
PUBLISHED_BATCH = "published_batch_size"  # per GPU, from the table's batch sizes
PUBLISHED_CELL = "published_cell"  # the table's cell, where the mean of the runs logged behind it is the figure

# compare
ANOMALY = "anomaly"  # on a run behind a flagged figure: what was flagged
REPORT = "report"  # "true" on compare's report run
BASELINE, ANOMALIES, ANOMALY_KINDS = "baseline", "anomalies", "anomaly_kinds"

# ---- metrics: throughput and the measured window (src/run/outcome.py, src/results/stats.py) ----
THROUGHPUT = "throughput"  # items/s, all GPUs
THROUGHPUT_PER_GPU = "throughput_per_gpu"
STEP_TIME_MS = "step_time_ms"  # median
STEP_TIME_MEAN_MS = "step_time_mean_ms"
STEP_TIME_P10_MS, STEP_TIME_P90_MS = "step_time_p10_ms", "step_time_p90_ms"
STEP_TIME_CI95_REL = "step_time_ci95_rel"  # the mean step time's 95% CI half-width, relative
STEP_TIME_CV = "step_time_cv"
MEASURED_STEPS = "measured_steps"
ITEMS_PER_STEP = "items_per_step"
BATCH_SIZE = "batch_size"  # per GPU, as it ran (also logged as a param: src/config/points.py)
LOSS_FIRST, LOSS_LAST = "loss_first", "loss_last"
TIME_TO_RANK_START_S, TIME_TO_FIRST_STEP_S = "time_to_rank_start_s", "time_to_first_step_s"
MEASURED_WINDOW_S = "measured_window_s"
PEAK_MEMORY_GB = "peak_memory_gb"  # the largest rank's; per rank: peak_memory_gb_rank<r>
FLOPS_PER_ITEM = "flops_per_item"
ACHIEVED_TFLOPS_PER_GPU = "achieved_tflops_per_gpu"
MFU = "mfu"  # achieved over the spec sheet's peak for the math that ran
THROUGHPUT_PER_WATT = "throughput_per_watt"  # over measured GPU power
THROUGHPUT_PER_KUSD = "throughput_per_kusd"  # per 1,000 USD of GPU list price
PUBLISHED_RUNS = "published_runs"  # an imported figure: the logged runs behind it (their mean, published)
PUBLISHED_RUNS_LOG_SE = "published_runs_log_se"  # ...and the standard error of their mean log throughput

# telemetry over the measured window (src/hardware/telemetry.py)
POWER_MEAN_W, POWER_MAX_W = "power_mean_w", "power_max_w"  # per GPU
SM_CLOCK_MEAN_MHZ, MEM_CLOCK_MEAN_MHZ = "sm_clock_mean_mhz", "mem_clock_mean_mhz"
TEMPERATURE_MAX_C = "temperature_max_c"
GPU_UTIL_MEAN_PCT, MEM_UTIL_MEAN_PCT = "gpu_util_mean_pct", "mem_util_mean_pct"
MEM_USED_MAX_GB = "mem_used_max_gb"
THROTTLED_POWER_SHARE, THROTTLED_THERMAL_SHARE = "throttled_power_share", "throttled_thermal_share"
THROTTLED_SHARE = "throttled_share"
# a run whose clocks its power limit held down for at least this share of the window ran at its power
# limit (compare's explanation and projection's sentences both say so by this one threshold)
AT_POWER_LIMIT = 0.5
PCIE_TX_MEAN_MBS, PCIE_RX_MEAN_MBS = "pcie_tx_mean_mbs", "pcie_rx_mean_mbs"
CPU_UTIL_MEAN_PCT, HOST_MEM_USED_MAX_GB = "cpu_util_mean_pct", "host_mem_used_max_gb"
TELEMETRY_SAMPLES_PER_GPU = "telemetry_samples_per_gpu"
ENERGY_J, ENERGY_PER_ITEM_J = "energy_j", "energy_per_item_j"

# the step-time breakdown, profiled after the window (src/run/profile_figures.py)
SHARES = ("matmul", "other", "comm", "memcpy", "idle")  # src/rank/step_profiler.py's categories
BREAKDOWN_STEPS, BREAKDOWN_STEP_MS, BREAKDOWN_S = "breakdown_steps", "breakdown_step_ms", "breakdown_s"
# ...and what bounds the step on its own card: each op's FLOPs and bytes, counted, against its ridge point
# src/projection/model.py's classes: tensor-, bandwidth- and clock-bound
BOUNDS = ("tensor", "bandwidth", "clock")
OP_COUNTS = "op_counts.json"  # the run's artifact: its step's ops, counted (src/projection/counts.py)

# the card's ceilings, a model=ceilings job's figures (src/run/ceiling_figures.py)
CEILING_PREFIX = "ceiling_"
MEMORY_COPY_GBS = "memory_copy_gbs"  # a ceilings figure: device memory copied, read + written
MEMORY_READ_GBS = "memory_read_gbs"
HOST_TO_DEVICE_GBS, DEVICE_TO_HOST_GBS = "host_to_device_gbs", "device_to_host_gbs"  # pinned host memory
ALLREDUCE_BUSBW_GBS = "allreduce_busbw_gbs"  # the best over message sizes; per size: ..._gbs_<size>mb
# a ceilings job's figures of fixed name, each a field of CeilingFigures
CEILING_FIGURES = (
    MEMORY_COPY_GBS,
    MEMORY_READ_GBS,
    HOST_TO_DEVICE_GBS,
    DEVICE_TO_HOST_GBS,
    ALLREDUCE_BUSBW_GBS,
)
CI_SUFFIX = "_ci95_rel"  # ceiling_<figure>_ci95_rel: the widest of the ranks' 95% CIs, relative
SHAPE_DIMS = ("m", "n", "k")  # ceiling_matmul_<math>_<dim>: the best matmul's shape


def workload_metric(model: str, precision: str, gpu_count: int | str) -> str:
    """The run's throughput again under a key of its own workload, e.g. `throughput/resnet50/amp/x1`:
    a chart of one such key in the MLflow UI sets like against like (one model, unit, precision and
    GPU count), where the plain `throughput` mixes images/s and tokens/s of different models."""
    return f"{THROUGHPUT}/{model}/{precision}/x{gpu_count}"


def peak_memory_of_rank(rank: int) -> str:
    return f"{PEAK_MEMORY_GB}_rank{rank}"


def share_metric(category: str) -> str:
    """`breakdown_matmul_share`: the share of the step one category of kernels took."""
    return f"breakdown_{category}_share"


def breakdown_phase_metric(phase: str) -> str:
    return f"breakdown_{phase}_s"


def bound_metric(bound: str) -> str:
    """`breakdown_tensor_bound_share`: the share of the step bound by the tensor rate (or bandwidth, clock)."""
    return share_metric(f"{bound}_bound")


_RANK_MEMORY = re.compile(PEAK_MEMORY_GB + r"_rank(\d+)")  # peak_memory_of_rank's, read back
_BREAKDOWN_PHASE = re.compile(r"breakdown_(\w+)_s")  # breakdown_phase_metric's, read back
_MATMUL = re.compile(r"matmul_(\w+)_tflops")  # matmul_figure's, read back
_MATMUL_DIM = re.compile(r"matmul_(\w+)_([mnk])")


def phase_metric(phase: str) -> str:
    """`phase_measure_s`: the seconds of one phase of the job (src/run/phases.py)."""
    return f"phase_{phase}_s"


def ceiling_metric(figure: str) -> str:
    """`ceiling_memory_copy_gbs`: a ceilings figure as its run logs it."""
    return CEILING_PREFIX + figure


def matmul_figure(math_: str) -> str:
    """The ceilings figure of a math's best matmul: `matmul_bf16_tflops`."""
    return f"matmul_{math_}_tflops"


def matmul_math(figure: str) -> str | None:
    """The math of a matmul_figure (`bf16`); None for another figure."""
    found = _MATMUL.fullmatch(figure)
    return found[1] if found else None


def allreduce_size(figure: str) -> str | None:
    """The message size of a per-size all-reduce figure (`64mb`); None for another figure."""
    prefix = ALLREDUCE_BUSBW_GBS + "_"
    return figure.removeprefix(prefix) if figure.startswith(prefix) else None


# ---- params a reader needs (the config's flattened keys) ----
MIN_STEPS_PARAM, TARGET_CI_PARAM = "benchmark.min_steps", "benchmark.target_ci"


@dataclass(frozen=True)
class Window(Figures):
    """The measured window's figures, written by the job (src/run/outcome.py) and read back by `read`;
    None: not logged (its inputs were missing, or the run is older than the figure)."""

    throughput: float | None = figure(THROUGHPUT)
    throughput_per_gpu: float | None = figure(THROUGHPUT_PER_GPU)
    step_time_ms: float | None = figure(STEP_TIME_MS)
    step_time_mean_ms: float | None = figure(STEP_TIME_MEAN_MS)
    step_time_p10_ms: float | None = figure(STEP_TIME_P10_MS)
    step_time_p90_ms: float | None = figure(STEP_TIME_P90_MS)
    step_time_ci95_rel: float | None = figure(STEP_TIME_CI95_REL)
    step_time_cv: float | None = figure(STEP_TIME_CV)
    measured_steps: int | None = figure(MEASURED_STEPS, int)
    items_per_step: float | None = figure(ITEMS_PER_STEP)
    batch_size: int | None = figure(BATCH_SIZE, int)
    loss_first: float | None = figure(LOSS_FIRST)
    loss_last: float | None = figure(LOSS_LAST)
    time_to_rank_start_s: float | None = figure(TIME_TO_RANK_START_S)
    time_to_first_step_s: float | None = figure(TIME_TO_FIRST_STEP_S)
    measured_window_s: float | None = figure(MEASURED_WINDOW_S)
    peak_memory_gb: float | None = figure(PEAK_MEMORY_GB)  # the largest rank's
    peak_memory_gb_of_rank: dict[int, float] = field(default_factory=dict)  # peak_memory_of_rank(r)
    flops_per_item: float | None = figure(FLOPS_PER_ITEM)
    achieved_tflops_per_gpu: float | None = figure(ACHIEVED_TFLOPS_PER_GPU)
    mfu: float | None = figure(MFU)
    throughput_per_watt: float | None = figure(THROUGHPUT_PER_WATT)
    throughput_per_kusd: float | None = figure(THROUGHPUT_PER_KUSD)

    def metrics(self) -> dict[str, float]:
        ranks = {peak_memory_of_rank(r): gb for r, gb in self.peak_memory_gb_of_rank.items()}
        return super().metrics() | ranks

    @classmethod
    def from_metrics(cls, metrics: dict) -> Window:
        ranks = {int(m[1]): v for k, v in metrics.items() if (m := _RANK_MEMORY.fullmatch(k))}
        return cls.read_named(metrics, peak_memory_gb_of_rank=ranks)


@dataclass(frozen=True)
class Breakdown(Figures):
    """The step-time breakdown profiled after the window (src/run/profile_figures.py): each SHARES
    category's share of the step; the profiled steps, the time per step and the cost, in all and
    per phase of the profiling."""

    shares: dict[str, float | None] = field(default_factory=dict)  # share_metric(category)
    steps: int | None = figure(BREAKDOWN_STEPS, int)
    step_ms: float | None = figure(BREAKDOWN_STEP_MS)
    seconds: float | None = figure(BREAKDOWN_S)
    phase_seconds: dict[str, float] = field(default_factory=dict)  # breakdown_phase_metric(phase)
    bounds: dict[str, float] = field(default_factory=dict)  # bound_metric(bound): BOUNDS' shares of the step
    counts: dict | None = None  # the step's ops, counted (OP_COUNTS, an artifact: not a metric)

    def metrics(self) -> dict[str, float]:
        shares = {share_metric(c): v for c, v in self.shares.items() if v is not None}
        phases = {breakdown_phase_metric(p): s for p, s in self.phase_seconds.items()}
        bounds = {bound_metric(b): v for b, v in self.bounds.items()}
        return shares | super().metrics() | phases | bounds

    @classmethod
    def from_metrics(cls, metrics: dict) -> Breakdown | None:
        """None for a run without one (its matmul share is the mark of one)."""
        if share_metric(SHARES[0]) not in metrics:
            return None
        shares = {c: metrics.get(share_metric(c)) for c in SHARES}
        bounds = {b: metrics[bound_metric(b)] for b in BOUNDS if bound_metric(b) in metrics}
        phases = {m[1]: v for k, v in metrics.items() if (m := _BREAKDOWN_PHASE.fullmatch(k))}
        return cls.read_named(metrics, shares=shares, phase_seconds=phases, bounds=bounds)


@dataclass(frozen=True)
class Telemetry(Figures):
    """GPU and host telemetry over the measured window (src/hardware/telemetry.py); per GPU where
    the name says mean, over all GPUs for energy."""

    power_mean_w: float | None = figure(POWER_MEAN_W)
    power_max_w: float | None = figure(POWER_MAX_W)
    sm_clock_mean_mhz: float | None = figure(SM_CLOCK_MEAN_MHZ)
    mem_clock_mean_mhz: float | None = figure(MEM_CLOCK_MEAN_MHZ)
    temperature_max_c: float | None = figure(TEMPERATURE_MAX_C)
    gpu_util_mean_pct: float | None = figure(GPU_UTIL_MEAN_PCT)
    mem_util_mean_pct: float | None = figure(MEM_UTIL_MEAN_PCT)
    mem_used_max_gb: float | None = figure(MEM_USED_MAX_GB)
    throttled_power_share: float | None = figure(THROTTLED_POWER_SHARE)
    throttled_thermal_share: float | None = figure(THROTTLED_THERMAL_SHARE)
    throttled_share: float | None = figure(THROTTLED_SHARE)
    pcie_tx_mean_mbs: float | None = figure(PCIE_TX_MEAN_MBS)
    pcie_rx_mean_mbs: float | None = figure(PCIE_RX_MEAN_MBS)
    cpu_util_mean_pct: float | None = figure(CPU_UTIL_MEAN_PCT)
    host_mem_used_max_gb: float | None = figure(HOST_MEM_USED_MAX_GB)
    telemetry_samples_per_gpu: int | None = figure(TELEMETRY_SAMPLES_PER_GPU, int)
    energy_j: float | None = figure(ENERGY_J)
    energy_per_item_j: float | None = figure(ENERGY_PER_ITEM_J)

    @classmethod
    def from_metrics(cls, metrics: dict) -> Telemetry:
        return cls.read_named(metrics)


@dataclass(frozen=True)
class CeilingFigures(Figures):
    """A model=ceilings job's figures (src/run/ceiling_figures.py), each logged as ceiling_metric(figure)
    with its 95% CI beside it: the best dense matmul per math and its shape, memory and host
    bandwidth, the all-reduce's bus bandwidth, best and per message size."""

    memory_copy_gbs: float | None = figure(ceiling_metric(MEMORY_COPY_GBS))
    memory_read_gbs: float | None = figure(ceiling_metric(MEMORY_READ_GBS))
    host_to_device_gbs: float | None = figure(ceiling_metric(HOST_TO_DEVICE_GBS))
    device_to_host_gbs: float | None = figure(ceiling_metric(DEVICE_TO_HOST_GBS))
    allreduce_busbw_gbs: float | None = figure(ceiling_metric(ALLREDUCE_BUSBW_GBS))
    matmul_tflops: dict[str, float] = field(default_factory=dict)  # per math: matmul_figure(math)
    matmul_shape: dict[str, tuple[int, ...]] = field(default_factory=dict)  # per math: (m, n, k)
    allreduce_by_size: dict[str, float] = field(default_factory=dict)  # "64mb": ..._gbs_64mb
    ci95_rel: dict[str, float] = field(default_factory=dict)  # per figure: matmul_bf16_tflops, ...

    def metrics(self) -> dict[str, float]:
        named = {matmul_figure(m): v for m, v in self.matmul_tflops.items()}
        named |= {f"{ALLREDUCE_BUSBW_GBS}_{size}": v for size, v in self.allreduce_by_size.items()}
        for math_, shape in self.matmul_shape.items():
            named |= {f"matmul_{math_}_{dim}": n for dim, n in zip(SHAPE_DIMS, shape, strict=True)}
        named |= {name + CI_SUFFIX: ci for name, ci in self.ci95_rel.items()}
        return super().metrics() | {ceiling_metric(name): value for name, value in named.items()}

    @classmethod
    def named(cls, values: dict[str, float], ci95_rel: dict[str, float], shapes: dict[str, tuple]):
        """The figures from their names (matmul_bf16_tflops, allreduce_busbw_gbs_64mb, memory_copy_gbs, ...),
        each one's CI and each matmul's best shape (m, n, k); the all-reduce's best, where not given, is
        the largest of its message sizes."""
        matmul = {math_: v for name, v in values.items() if (math_ := matmul_math(name))}
        sizes = {size: v for name, v in values.items() if (size := allreduce_size(name))}
        fixed = {name: values[name] for name in CEILING_FIGURES if name in values}
        fixed.setdefault(ALLREDUCE_BUSBW_GBS, max(sizes.values(), default=None))
        shape = {matmul_math(name): dims for name, dims in shapes.items()}
        return cls(
            **fixed, matmul_tflops=matmul, matmul_shape=shape, allreduce_by_size=sizes, ci95_rel=ci95_rel
        )

    @classmethod
    def from_metrics(cls, metrics: dict) -> CeilingFigures:
        """None and empty for a run without any (a training run)."""
        values, ci, dims = {}, {}, {}
        for key, value in metrics.items():
            name = key.removeprefix(CEILING_PREFIX)
            if name == key:
                continue
            if name.endswith(CI_SUFFIX):
                ci[name.removesuffix(CI_SUFFIX)] = value
            elif found := _MATMUL_DIM.fullmatch(name):
                dims.setdefault(matmul_figure(found[1]), {})[found[2]] = int(value)
            else:
                values[name] = value
        shapes = {name: tuple(d[dim] for dim in SHAPE_DIMS) for name, d in dims.items() if len(d) == 3}
        return cls.named(values, ci, shapes)


METRICS = (
    *Window.metric_names(),
    PUBLISHED_RUNS,
    PUBLISHED_RUNS_LOG_SE,
    *Telemetry.metric_names(),
    *Breakdown.metric_names(),
)  # every metric logged under a fixed name (the others: the functions above)
