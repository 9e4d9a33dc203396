"""Structured-config schema, the steps that finalise a composed config, and its validation.

Hydra types every group against these dataclasses, so a misspelt key or a wrong type fails at
composition. `finalize` then applies the smoke sizes and the batch-size rule, and `validate`
checks ranges and cross-group rules, naming the key, the value and what is allowed.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

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
    channels_last: bool = False  # NHWC memory format for vision models
    timeout_s: float = 900.0  # a job (or a hung collective) past this is failed


@dataclass
class TrackingConfig:
    uri: str = MISSING
    experiment: str = "gpubench"


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


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)  # types every group: a wrong key fails at compose
    cs.store(name="compare_schema", node=CompareConfig)
    cs.store(name="import_schema", node=ImportConfig)
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


def validate(cfg: DictConfig) -> None:
    """Range and cross-group checks; raises ConfigError naming key, value and what is allowed."""
    errors: list[str] = []

    def need(ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            errors.append(f"{key}={value!r}: must be {allowed}")

    g, m, p, b = cfg.gpu, cfg.model, cfg.precision, cfg.benchmark
    need(g.device in ("cuda", "cpu", "auto"), "gpu.device", g.device, "one of cuda, cpu, auto")
    need(_positive_int(g.count), "gpu.count", g.count, "a positive integer")
    need(
        g.device != "cuda" or bool(g.match),
        "gpu.match",
        list(g.match),
        f"a non-empty list of NVML device-name substrings for cuda profile {g.name}",
    )
    need(
        p.name in g.precisions,
        "precision",
        p.name,
        f"one of {', '.join(g.precisions)} on gpu={g.name}",
    )
    need(p.name in PRECISIONS, "precision.name", p.name, f"one of {', '.join(PRECISIONS)}")
    need(m.category in CATEGORIES, "model.category", m.category, f"one of {', '.join(CATEGORIES)}")
    need(
        _positive_int(m.batch_size)
        or m.batch_size == AUTO_BATCH
        or (m.batch_size is None and g.device == "auto"),
        "model.batch_size",
        m.batch_size,
        f"a positive integer or {AUTO_BATCH!r}",
    )
    need(
        not (m.batch_size == AUTO_BATCH and g.device == "cpu"),
        "model.batch_size",
        m.batch_size,
        "a positive integer on the CPU: 'auto' searches for the largest batch that does not run "
        "out of GPU memory, and a CPU has no such limit to find",
    )
    need(
        _positive_int(m.items_per_sample), "model.items_per_sample", m.items_per_sample, "a positive integer"
    )
    for table, key in ((m.batch_sizes, "model.batch_sizes"), *_gpu_batch_tables(g)):
        for precision, value in table.items():
            need(
                precision in (*PRECISIONS, "default"),
                key,
                precision,
                f"keyed by {', '.join(PRECISIONS)} or default",
            )
            need(_positive_int(value), f"{key}.{precision}", value, "a positive integer")
    errors.extend(_model_size_errors(m))
    need(
        not (b.channels_last and m.category != "vision"),
        "benchmark.channels_last",
        b.channels_last,
        f"false for model={m.name}: the NHWC memory format applies to vision models only",
    )
    need(_builder_exists(m.builder), "model.builder", m.builder, "'package.module:function' that exists")
    t = cfg.telemetry
    need(
        _positive_int(t.interval_ms) and t.interval_ms >= 10,
        "telemetry.interval_ms",
        t.interval_ms,
        "an integer >= 10 (milliseconds between samples)",
    )
    need(
        t.pcie_interval_ms == 0
        or (_positive_int(t.pcie_interval_ms) and t.pcie_interval_ms >= t.interval_ms),
        "telemetry.pcie_interval_ms",
        t.pcie_interval_ms,
        f"0 (off) or an integer >= telemetry.interval_ms ({t.interval_ms})",
    )
    need(
        isinstance(b.warmup_steps, int) and b.warmup_steps >= 0,
        "benchmark.warmup_steps",
        b.warmup_steps,
        "an integer >= 0",
    )
    need(
        _positive_int(b.min_steps) and b.min_steps >= 2, "benchmark.min_steps", b.min_steps, "an integer >= 2"
    )
    need(
        _positive_int(b.max_steps) and b.max_steps >= b.min_steps,
        "benchmark.max_steps",
        b.max_steps,
        f"an integer >= benchmark.min_steps ({b.min_steps})",
    )
    need(b.time_limit_s > 0, "benchmark.time_limit_s", b.time_limit_s, "> 0 seconds")
    need(0 < b.target_ci < 1, "benchmark.target_ci", b.target_ci, "a fraction between 0 and 1 (0.01 = 1%)")
    need(_positive_int(b.check_every), "benchmark.check_every", b.check_every, "a positive integer")
    need(b.timeout_s > 0, "benchmark.timeout_s", b.timeout_s, "> 0 seconds")
    errors += tracking_errors(cfg.tracking)
    errors += launcher_errors(cfg.launcher)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def tracking_errors(tracking: DictConfig) -> list[str]:
    """The `tracking` group's problems, in validate's wording (shared by every entry point)."""
    errors = []
    if not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", tracking.uri):
        errors.append(
            f"tracking.uri={tracking.uri!r}: must be a URI such as sqlite:///abs/path/mlflow.db "
            "or http://host:5000"
        )
    if not tracking.experiment:
        errors.append(f"tracking.experiment={tracking.experiment!r}: must be a non-empty name")
    return errors


def launcher_errors(la: DictConfig) -> list[str]:
    """Node count, this node's index and the rendezvous endpoint of a (multi-node) job."""
    errors = []
    if not _positive_int(la.nnodes):
        return [f"launcher.nnodes={la.nnodes!r}: must be a positive integer"]
    if not (isinstance(la.node_rank, int) and 0 <= la.node_rank < la.nnodes):
        errors.append(
            f"launcher.node_rank={la.node_rank!r}: must be an integer from 0 to {la.nnodes - 1} "
            f"(launcher.nnodes={la.nnodes}); it is read from SLURM_NODEID, NODE_RANK or GROUP_RANK when set"
        )
    host, _, port = str(la.rdzv_endpoint).rpartition(":")
    if not host or not port.isdigit() or int(port) > 65535:
        errors.append(f"launcher.rdzv_endpoint={la.rdzv_endpoint!r}: must be host:port")
    elif la.nnodes > 1 and int(port) == 0:
        errors.append(
            f"launcher.rdzv_endpoint={la.rdzv_endpoint!r}: must name a fixed port, on an address of "
            f"node 0 that every node reaches, when launcher.nnodes={la.nnodes}"
        )
    if not _positive_int(la.start_timeout_s):
        errors.append(f"launcher.start_timeout_s={la.start_timeout_s!r}: must be a positive integer")
    if not _positive_int(la.time_limit_min):
        errors.append(f"launcher.time_limit_min={la.time_limit_min!r}: must be a positive integer")
    return errors


def _gpu_batch_tables(g) -> list[tuple[Any, str]]:
    return [(table, f"gpu.batch_sizes.{model}") for model, table in g.batch_sizes.items()]


def _model_size_errors(m) -> list[str]:
    """Model size keys: positive where set, and consistent with each other."""
    errors = []

    def need(ok: bool, key: str, value: Any, allowed: str) -> None:
        if not ok:
            errors.append(f"model.{key}={value!r}: must be {allowed}")

    for key in SIZE_KEYS:
        value = m.get(key)
        need(value is None or _positive_int(value), key, value, "a positive integer")
    if errors:
        return errors  # the cross-checks below assume positive integers
    if m.mem_len is not None:
        need(isinstance(m.mem_len, int) and m.mem_len >= 0, "mem_len", m.mem_len, "an integer >= 0")
    for key in ("dropout", "dropatt"):
        value = m.get(key)
        need(value is None or 0 <= value < 1, key, value, "a probability in [0, 1)")
    if m.n_head and m.d_model and m.d_head is None:
        need(m.d_model % m.n_head == 0, "n_head", m.n_head, f"a divisor of model.d_model ({m.d_model})")
    if m.n_kv_head and m.n_head:
        need(m.n_head % m.n_kv_head == 0, "n_kv_head", m.n_kv_head, f"a divisor of model.n_head ({m.n_head})")
    if m.backbone is not None:
        need(m.backbone in RESNETS, "backbone", m.backbone, f"one of {', '.join(RESNETS)}")
    if m.min_image_size and m.image_size:
        need(
            m.image_size >= m.min_image_size,
            "image_size",
            m.image_size,
            f">= {m.min_image_size} for {m.name}",
        )
    if m.patch_size and m.image_size:
        need(
            m.image_size % m.patch_size == 0,
            "image_size",
            m.image_size,
            f"a multiple of model.patch_size ({m.patch_size})",
        )
    if m.min_size and m.max_size:
        need(m.min_size <= m.max_size, "min_size", m.min_size, f"<= model.max_size ({m.max_size})")
    if m.cutoffs is not None:
        cutoffs = list(m.cutoffs)
        vocab = m.vocab_size or 0
        need(
            len(cutoffs) > 0
            and all(_positive_int(c) for c in cutoffs)
            and cutoffs == sorted(set(cutoffs))
            and cutoffs[-1] < vocab,
            "cutoffs",
            cutoffs,
            f"increasing positive token ids below model.vocab_size ({vocab})",
        )
        if m.div_val and m.d_model:
            need(
                m.d_model // m.div_val ** len(cutoffs) >= 1,
                "div_val",
                m.div_val,
                f"small enough that the rarest cluster keeps a width >= 1 "
                f"(model.d_model={m.d_model} // div_val**{len(cutoffs)})",
            )
    return errors


def _builder_exists(builder: str) -> bool:
    module, _, func = builder.partition(":")
    if not module or not func:
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
