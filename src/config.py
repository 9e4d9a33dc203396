"""Structured-config schema, the steps that finalise a composed config, and its validation.

Hydra types every group against these dataclasses, so a misspelt key or a wrong type fails at
composition. `finalize` then applies the smoke sizes and the batch-size rule, and `validate`
checks ranges and cross-group rules, naming the key, the value and what is allowed.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, DictConfig, OmegaConf, open_dict

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PRECISIONS = ("fp32", "tf32", "amp", "bf16")
CATEGORIES = ("vision", "language")
AUTO_BATCH = "auto"  # model.batch_size=auto: the largest batch that trains, found by src.autobatch
RESNETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")  # model.backbone choices
SIZE_KEYS = (
    "image_size",
    "num_classes",
    "patch_size",
    "min_image_size",
    "rois_per_image",
    "min_size",
    "max_size",
    "seq_len",
    "n_layer",
    "d_model",
    "n_head",
    "vocab_size",
    "d_head",
    "d_inner",
    "n_kv_head",
    "div_val",
)


class ConfigError(ValueError):
    """A config value that cannot run; the message names key, value and what is allowed."""


@dataclass
class SlurmRequest:
    """How `hydra/launcher=slurm` asks Slurm for this profile's GPUs (per node)."""

    # Slurm sites name their GPU types their own way: override per site, e.g. gpu:rtx_a6000:${gpu.count}
    gres: str | None = "gpu:${gpu.name}:${gpu.count}"
    constraint: str | None = None  # a node feature, for sites that select GPU types that way


@dataclass
class GpuConfig:
    name: str = MISSING
    device: str = "cuda"  # cuda | cpu | auto (whatever the host has)
    match: list[str] = field(default_factory=list)  # substrings of the NVML device name (any one)
    exclude: list[str] = field(default_factory=list)  # substrings that rule a name out (e.g. "Ti")
    count: int = 1
    precisions: list[str] = field(default_factory=lambda: list(PRECISIONS))
    memory_gb: float | None = None
    peak_tflops: dict[str, float] = field(default_factory=dict)
    memory_bandwidth_gbs: float | None = None
    tdp_w: float | None = None
    price_usd: float | None = None
    interconnect: str | None = None
    # model name -> precision -> per-GPU batch size, for cards whose memory needs another size
    batch_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    slurm: SlurmRequest = field(default_factory=SlurmRequest)


@dataclass
class ModelConfig:
    name: str = MISSING
    builder: str = MISSING  # "module:function" returning a Workload
    category: str = MISSING
    unit: str = MISSING
    items_per_sample: int = 1
    flops_per_item: float | None = None
    batch_size: Any = None  # per GPU; None: the default for the precision; "auto": largest that fits
    batch_sizes: dict[str, int] = field(default_factory=dict)  # precision -> default batch
    smoke: dict[str, Any] = field(default_factory=dict)  # the tiny size for benchmark=smoke
    # vision sizes
    image_size: int | None = None
    num_classes: int | None = None
    patch_size: int | None = None  # ViT: image_size must be a multiple of it
    min_image_size: int | None = None  # the smallest image_size the architecture takes
    rois_per_image: int | None = None  # detection: regions sampled per image for the box head
    backbone: str | None = None  # detection: the torchvision ResNet under the detector
    min_size: int | None = None  # detection resize rule: shorter side scaled to min_size...
    max_size: int | None = None  # ...unless the longer side would pass max_size
    # language sizes
    seq_len: int | None = None
    n_layer: int | None = None
    d_model: int | None = None
    n_head: int | None = None
    vocab_size: int | None = None
    d_head: int | None = None  # width of one attention head where not d_model / n_head (TXL)
    d_inner: int | None = None  # feed-forward width
    n_kv_head: int | None = None  # key/value heads (grouped-query attention)
    mem_len: int | None = None  # Transformer-XL: hidden states kept from earlier segments
    cutoffs: list[int] | None = None  # adaptive input/softmax: first id of each rarer cluster
    div_val: int | None = None  # adaptive input: each rarer cluster's width is divided by this
    dropout: float | None = None
    dropatt: float | None = None  # dropout on attention probabilities
    # False where the model's tensor shapes change from step to step (Mask R-CNN's mask head sees a
    # different count of positive regions each time): cuDNN autotuning would re-tune every step.
    static_shapes: bool = True


@dataclass
class PrecisionConfig:
    name: str = MISSING
    autocast_dtype: str | None = None  # float16 | bfloat16 | None
    grad_scaling: bool = False
    allow_tf32: bool = False
    peak_key: str = MISSING  # which gpu.peak_tflops figure this math runs at


@dataclass
class BenchmarkConfig:
    name: str = "default"
    warmup_steps: int = 10
    min_steps: int = 20
    max_steps: int = 500
    time_limit_s: float = 60.0
    target_ci: float = 0.01  # 95% CI half-width of the mean step time, relative
    check_every: int = 10  # steps between stopping-rule checks (each one syncs the device)
    smoke: bool = False
    seed: int = 0
    compile: bool = False  # torch.compile the model
    channels_last: bool | None = None  # NHWC memory format; null: on for vision models, off otherwise
    cudnn_benchmark: bool | None = None  # cuDNN autotuning; null: on unless model.static_shapes is false
    timeout_s: float = 900.0  # a job (or a hung collective) past this is failed
    rerun: bool = False  # run a point even if its config already has a FINISHED run (see src/resume.py)


@dataclass
class TrackingConfig:
    uri: str = MISSING
    experiment: str = "gpubench"
    retries: int = 4  # attempts to deliver a job's result at its end before it waits in the spool
    backoff_s: float = 2.0  # first wait between attempts; doubles each time


@dataclass
class TelemetryConfig:
    enabled: bool = True
    interval_ms: int = 100  # one NVML sample of every chosen GPU per interval
    pcie_interval_ms: int = 1000  # NVML's PCIe throughput read blocks ~20 ms: take it less often; 0: never


@dataclass
class LauncherConfig:
    nnodes: int = 1
    node_rank: int = 0  # this machine's node; node 0's job process logs the run
    rdzv_endpoint: str = "localhost:0"  # host:port of the c10d rendezvous; port 0: a free port (one node)
    start_timeout_s: int = 120
    time_limit_min: int = 60  # a scheduler's wall-clock limit for one job (Slurm's --time)


@dataclass
class Config:
    gpu: GpuConfig = MISSING
    model: ModelConfig = MISSING
    precision: PrecisionConfig = MISSING
    benchmark: BenchmarkConfig = MISSING
    tracking: TrackingConfig = MISSING
    telemetry: TelemetryConfig = MISSING
    launcher: LauncherConfig = field(default_factory=LauncherConfig)


@dataclass
class AnomalyConfig:
    scaling_tolerance: float = 0.02  # scaling efficiency above 1 + this is flagged (timing noise)
    spec_tolerance: float = 0.25  # a ratio beyond the spec-sheet range by more than this is flagged


@dataclass
class CompareConfig:
    """`python -m src.compare`: relative throughput against a baseline gpu, from MLflow runs."""

    baseline: str = "rtx3090"
    baseline_source: str | None = None  # null: the row's own source when the baseline has it
    out: str = MISSING
    # filters; empty = all
    gpus: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    precisions: list[str] = field(default_factory=list)
    gpu_counts: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    filter_string: str = ""  # extra MLflow search filter, e.g. "tags.compile = 'False'"
    tag_runs: bool = True  # tag anomalous runs with `anomaly`
    anomalies: AnomalyConfig = field(default_factory=AnomalyConfig)
    tracking: TrackingConfig = MISSING


@dataclass
class PublishedTask:
    model: str = MISSING
    category: str = MISSING
    unit: str = MISSING


@dataclass
class ImportConfig:
    """`python -m src.import_results FILE`: published results as FINISHED MLflow runs."""

    file: str = MISSING
    precision: PrecisionConfig = MISSING  # the precision group: `precision=amp` picks conf/precision/amp
    source: str = MISSING
    tasks: dict[str, PublishedTask] = field(default_factory=dict)  # published column -> model
    gpu_profiles: dict[str, str] = field(default_factory=dict)  # published GPU name -> profile
    tracking: TrackingConfig = MISSING


SCHEMAS = {"config_schema": Config, "compare_schema": CompareConfig, "import_schema": ImportConfig}


def register_configs(*schemas: str) -> None:
    """Store the schemas an entry point composes (all when none is named). Only those: Hydra
    deep-copies the whole store for every config group it lists (`--help` lists them all), so each
    extra schema costs start-up time."""
    for name in schemas or SCHEMAS:
        ConfigStore.instance().store(name=name, node=SCHEMAS[name])  # a wrong key fails at compose
    if not OmegaConf.has_resolver("project_root"):
        OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))


def override_keys(overrides: list[str]) -> set[str]:
    """Dotted keys set by command-line overrides (`model.d_model=64` -> `model.d_model`)."""
    keys = set()
    for item in overrides:
        key = item.split("=", 1)[0].lstrip("+~")
        keys.add(key)
    return keys


def finalize(cfg: DictConfig, cli_keys: set[str]) -> DictConfig:
    """Apply smoke sizes and the batch-size rule, then validate. Returns a new config.

    Precedence for model sizes: command line > smoke block (under benchmark=smoke) > model yaml.
    Batch size: command line > smoke > gpu profile's per-model figure > model's per-precision default.
    """
    cfg = cfg.copy()
    with open_dict(cfg):
        if cfg.benchmark.smoke:
            for key, value in cfg.model.smoke.items():
                if f"model.{key}" not in cli_keys:
                    if key not in cfg.model:
                        raise ConfigError(f"model.smoke.{key}: not a key of model {cfg.model.name}")
                    cfg.model[key] = value
        # NHWC is what tuned vision training uses on tensor cores (about 2x ResNet-50 amp on an H200)
        if cfg.benchmark.channels_last is None:
            cfg.benchmark.channels_last = cfg.model.category == "vision"
        # Autotuning picks each convolution's fastest algorithm once per shape: a gain where shapes
        # repeat, a new search every step where they do not.
        if cfg.benchmark.cudnn_benchmark is None:
            cfg.benchmark.cudnn_benchmark = cfg.model.static_shapes
        # gpu=auto: the batch follows the profile of the device found, so it is set once found
        if cfg.model.batch_size is None and cfg.gpu.device != "auto":
            cfg.model.batch_size = default_batch_size(cfg)
    validate(cfg)
    return cfg


def default_batch_size(cfg: DictConfig) -> int:
    precision = cfg.precision.name
    per_gpu = cfg.gpu.batch_sizes.get(cfg.model.name, {})
    for table in (per_gpu, cfg.model.batch_sizes):
        if precision in table:
            return table[precision]
        if "default" in table:
            return table["default"]
    raise ConfigError(
        f"model.batch_size: no default for model={cfg.model.name} precision={precision}; "
        f"set model.batch_size=N (a positive integer)"
    )


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _positive_or_none(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0)


class _Errors(list):
    """Collects every problem, so one run of a bad command line shows them all."""

    def need(self, ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            self.append(f"{key}={value!r}: must be {allowed}")


def validate(cfg: DictConfig) -> None:
    """Range and cross-group checks; raises ConfigError naming key, value and what is allowed."""
    errors = _Errors()
    _check_gpu(cfg.gpu, cfg.precision.name, errors)
    _check_model(cfg.model, cfg.gpu.device, errors)
    _check_precision(cfg.precision, errors)
    _check_benchmark(cfg.benchmark, cfg.model, errors)
    _check_telemetry(cfg.telemetry, errors)
    errors += tracking_errors(cfg.tracking)
    _check_launcher(cfg.launcher, errors)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def _check_gpu(g: DictConfig, precision: str, errors: _Errors) -> None:
    errors.need(bool(g.name), "gpu.name", g.name, "a non-empty profile name")
    errors.need(g.device in ("cuda", "cpu", "auto"), "gpu.device", g.device, "one of cuda, cpu, auto")
    errors.need(_positive_int(g.count), "gpu.count", g.count, "a positive integer")
    if g.device == "cpu" and _positive_int(g.count):
        cores = os.cpu_count() or 1
        errors.need(g.count <= cores, "gpu.count", g.count, f"at most {cores} (the CPU cores of this host)")
    if g.device == "cuda":
        errors.need(
            bool(g.match),
            "gpu.match",
            list(g.match),
            f"a non-empty list of NVML device-name substrings for cuda profile {g.name}",
        )
    unknown = [p for p in g.precisions if p not in PRECISIONS]
    errors.need(
        not unknown, "gpu.precisions", list(g.precisions), f"a list drawn from {', '.join(PRECISIONS)}"
    )
    errors.need(
        precision in g.precisions, "precision", precision, f"one of {', '.join(g.precisions)} on gpu={g.name}"
    )
    for key in ("memory_gb", "memory_bandwidth_gbs", "tdp_w", "price_usd"):
        errors.need(_positive_or_none(g[key]), f"gpu.{key}", g[key], "a positive number or null")
    for key, value in g.peak_tflops.items():
        errors.need(_positive_or_none(value), f"gpu.peak_tflops.{key}", value, "a positive number")
    for model, table in g.batch_sizes.items():
        _check_batch_table(table, f"gpu.batch_sizes.{model}", errors)


def _check_batch_table(table: DictConfig, key: str, errors: _Errors) -> None:
    """A precision -> batch size table (a model's defaults, or a GPU profile's per model)."""
    for precision, value in table.items():
        errors.need(
            precision in (*PRECISIONS, "default"),
            key,
            precision,
            f"keyed by {', '.join(PRECISIONS)} or default",
        )
        errors.need(_positive_int(value), f"{key}.{precision}", value, "a positive integer")


def _check_model(m: DictConfig, device: str, errors: _Errors) -> None:
    errors.need(bool(m.name), "model.name", m.name, "a non-empty name")
    errors.need(
        _builder_exists(m.builder), "model.builder", m.builder, "'package.module:function' that exists"
    )
    errors.need(m.category in CATEGORIES, "model.category", m.category, f"one of {', '.join(CATEGORIES)}")
    errors.need(bool(m.unit), "model.unit", m.unit, "a non-empty unit such as images/s")
    errors.need(
        _positive_int(m.items_per_sample), "model.items_per_sample", m.items_per_sample, "a positive integer"
    )
    errors.need(_positive_or_none(m.flops_per_item), "model.flops_per_item", m.flops_per_item, "> 0 or null")
    # gpu.device=auto: the batch follows the profile of the device found, so None waits for it
    errors.need(
        _positive_int(m.batch_size)
        or m.batch_size == AUTO_BATCH
        or (m.batch_size is None and device == "auto"),
        "model.batch_size",
        m.batch_size,
        f"a positive integer or {AUTO_BATCH!r}",
    )
    errors.need(
        not (m.batch_size == AUTO_BATCH and device == "cpu"),
        "model.batch_size",
        m.batch_size,
        "a positive integer on the CPU: 'auto' searches for the largest batch that does not run "
        "out of GPU memory, and a CPU has no such limit to find",
    )
    _check_batch_table(m.batch_sizes, "model.batch_sizes", errors)
    _check_model_sizes(m, errors)


def _check_model_sizes(m: DictConfig, errors: _Errors) -> None:
    """Model size keys: positive where set, and consistent with each other."""
    sizes = _Errors()
    for key in SIZE_KEYS:
        value = m.get(key)
        sizes.need(value is None or _positive_int(value), f"model.{key}", value, "a positive integer")
    errors += sizes
    if sizes:
        return  # the cross-checks below assume positive integers
    if m.mem_len is not None:
        errors.need(
            isinstance(m.mem_len, int) and m.mem_len >= 0, "model.mem_len", m.mem_len, "an integer >= 0"
        )
    for key in ("dropout", "dropatt"):
        value = m.get(key)
        errors.need(value is None or 0 <= value < 1, f"model.{key}", value, "a probability in [0, 1)")
    if m.n_head and m.d_model and m.d_head is None:
        errors.need(
            m.d_model % m.n_head == 0, "model.n_head", m.n_head, f"a divisor of model.d_model ({m.d_model})"
        )
    if m.n_kv_head and m.n_head:
        errors.need(
            m.n_head % m.n_kv_head == 0,
            "model.n_kv_head",
            m.n_kv_head,
            f"a divisor of model.n_head ({m.n_head})",
        )
    if m.backbone is not None:
        errors.need(m.backbone in RESNETS, "model.backbone", m.backbone, f"one of {', '.join(RESNETS)}")
    if m.min_image_size and m.image_size:
        errors.need(
            m.image_size >= m.min_image_size,
            "model.image_size",
            m.image_size,
            f">= {m.min_image_size} for {m.name}",
        )
    if m.patch_size and m.image_size:
        errors.need(
            m.image_size % m.patch_size == 0,
            "model.image_size",
            m.image_size,
            f"a multiple of model.patch_size ({m.patch_size})",
        )
    if m.min_size and m.max_size:
        errors.need(
            m.min_size <= m.max_size, "model.min_size", m.min_size, f"<= model.max_size ({m.max_size})"
        )
    if m.cutoffs is not None:
        cutoffs = list(m.cutoffs)
        vocab = m.vocab_size or 0
        errors.need(
            len(cutoffs) > 0
            and all(_positive_int(c) for c in cutoffs)
            and cutoffs == sorted(set(cutoffs))
            and cutoffs[-1] < vocab,
            "model.cutoffs",
            cutoffs,
            f"increasing positive token ids below model.vocab_size ({vocab})",
        )
        if m.div_val and m.d_model:
            errors.need(
                m.d_model // m.div_val ** len(cutoffs) >= 1,
                "model.div_val",
                m.div_val,
                f"small enough that the rarest cluster keeps a width >= 1 "
                f"(model.d_model={m.d_model} // div_val**{len(cutoffs)})",
            )


def _check_precision(p: DictConfig, errors: _Errors) -> None:
    errors.need(p.name in PRECISIONS, "precision.name", p.name, f"one of {', '.join(PRECISIONS)}")
    errors.need(
        p.autocast_dtype in (None, "float16", "bfloat16"),
        "precision.autocast_dtype",
        p.autocast_dtype,
        "null, float16 or bfloat16",
    )
    errors.need(
        bool(p.peak_key), "precision.peak_key", p.peak_key, "the gpu.peak_tflops key this math runs at"
    )


def _check_benchmark(b: DictConfig, m: DictConfig, errors: _Errors) -> None:
    errors.need(
        isinstance(b.warmup_steps, int) and b.warmup_steps >= 0,
        "benchmark.warmup_steps",
        b.warmup_steps,
        "an integer >= 0",
    )
    errors.need(
        _positive_int(b.min_steps) and b.min_steps >= 2, "benchmark.min_steps", b.min_steps, "an integer >= 2"
    )
    errors.need(
        _positive_int(b.max_steps) and b.max_steps >= b.min_steps,
        "benchmark.max_steps",
        b.max_steps,
        f"an integer >= benchmark.min_steps ({b.min_steps})",
    )
    errors.need(b.time_limit_s > 0, "benchmark.time_limit_s", b.time_limit_s, "> 0 seconds")
    errors.need(
        0 < b.target_ci < 1, "benchmark.target_ci", b.target_ci, "a fraction between 0 and 1 (0.01 = 1%)"
    )
    errors.need(_positive_int(b.check_every), "benchmark.check_every", b.check_every, "a positive integer")
    errors.need(isinstance(b.seed, int) and b.seed >= 0, "benchmark.seed", b.seed, "an integer >= 0")
    errors.need(
        b.timeout_s > b.time_limit_s,
        "benchmark.timeout_s",
        b.timeout_s,
        f"more seconds than benchmark.time_limit_s ({b.time_limit_s:g}): it bounds the whole job",
    )
    errors.need(
        not (b.channels_last and m.category != "vision"),
        "benchmark.channels_last",
        b.channels_last,
        f"false for model={m.name}: the NHWC memory format applies to vision models only",
    )


def _check_telemetry(t: DictConfig, errors: _Errors) -> None:
    errors.need(
        _positive_int(t.interval_ms) and t.interval_ms >= 10,
        "telemetry.interval_ms",
        t.interval_ms,
        "an integer >= 10 (milliseconds between samples)",
    )
    errors.need(
        t.pcie_interval_ms == 0
        or (_positive_int(t.pcie_interval_ms) and t.pcie_interval_ms >= t.interval_ms),
        "telemetry.pcie_interval_ms",
        t.pcie_interval_ms,
        f"0 (off) or an integer >= telemetry.interval_ms ({t.interval_ms})",
    )


URI_FORMS = (
    "must be sqlite:////absolute/path/mlflow.db, file:///absolute/path, http(s)://host[:port][/path], "
    "databricks, or postgresql|mysql|mssql://host/database"
)


def tracking_errors(t: DictConfig) -> list[str]:
    """Problems with the tracking keys, shared by every entry point (a sweep checks them before its parent run)."""
    from src.credentials import redact

    errors = _Errors()
    problem = _uri_problem(t.uri)
    if problem:
        errors.append(f"tracking.uri={redact(t.uri)!r}: {problem}")
    errors.need(bool(t.experiment), "tracking.experiment", t.experiment, "a non-empty name")
    errors.need(_positive_int(t.retries), "tracking.retries", t.retries, "a positive integer")
    errors.need(t.backoff_s >= 0, "tracking.backoff_s", t.backoff_s, ">= 0 seconds")
    return errors


def _uri_problem(uri: str) -> str | None:
    parts = urlsplit(uri)
    scheme = parts.scheme.split("+")[0]  # postgresql+psycopg2://...
    if scheme == "sqlite":
        path = uri.removeprefix("sqlite:///")
        if path == uri or not Path(path).is_absolute():
            return f"an sqlite store needs an absolute path (four slashes); {URI_FORMS}"
        return _unwritable(Path(path))
    if scheme == "file":
        if not parts.path.startswith("/"):
            return f"a file store needs an absolute path; {URI_FORMS}"
        return _unwritable(Path(parts.path))
    if scheme in ("http", "https", "postgresql", "mysql", "mssql"):
        try:
            return (
                None if parts.hostname and (parts.port is None or parts.port > 0) else f"no host; {URI_FORMS}"
            )
        except ValueError:
            return "the port must be a number from 1 to 65535"
    if uri == "databricks" or scheme in ("databricks", "databricks-uc"):
        return None
    return f"{'unknown scheme ' + repr(parts.scheme) if parts.scheme else 'no scheme'}; {URI_FORMS}"


def _unwritable(path: Path) -> str | None:
    """Why `path` (a file to create or update) cannot be written, or None."""
    if path.exists():
        return None if path.is_file() and os.access(path, os.W_OK) else f"{path} cannot be written"
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not a folder this user can write into"
    return None


def _check_launcher(la: DictConfig, errors: _Errors) -> None:
    """Node count, this node's index and the rendezvous endpoint of a (multi-node) job."""
    errors.need(_positive_int(la.nnodes), "launcher.nnodes", la.nnodes, "a positive integer")
    if not _positive_int(la.nnodes):
        return  # node_rank and the endpoint are checked against a node count
    errors.need(
        isinstance(la.node_rank, int) and 0 <= la.node_rank < la.nnodes,
        "launcher.node_rank",
        la.node_rank,
        f"an integer from 0 to {la.nnodes - 1} (launcher.nnodes={la.nnodes}); "
        "it is read from SLURM_NODEID, NODE_RANK or GROUP_RANK when set",
    )
    host, _, port = str(la.rdzv_endpoint).rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        errors.need(
            False, "launcher.rdzv_endpoint", la.rdzv_endpoint, "host:port with a port from 0 to 65535"
        )
    elif la.nnodes > 1:
        errors.need(
            int(port) != 0,
            "launcher.rdzv_endpoint",
            la.rdzv_endpoint,
            f"a fixed port, on an address of node 0 that every node reaches, when launcher.nnodes={la.nnodes}",
        )
    errors.need(
        _positive_int(la.start_timeout_s),
        "launcher.start_timeout_s",
        la.start_timeout_s,
        "a positive integer",
    )
    errors.need(
        _positive_int(la.time_limit_min), "launcher.time_limit_min", la.time_limit_min, "a positive integer"
    )


def _builder_exists(builder: str) -> bool:
    """The builder's module exists and defines the function: a typo fails here, not in every rank.

    Read from the module's source, not imported: importing it would load torch into the job
    process, seconds per job."""
    module, _, func = builder.partition(":")
    if not module or not func:
        return False
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    tree = ast.parse(Path(spec.origin).read_text())
    defined = {node.name for node in tree.body if isinstance(node, ast.FunctionDef | ast.ClassDef)}
    defined |= {
        t.id
        for node in tree.body
        if isinstance(node, ast.Assign)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    return func in defined
