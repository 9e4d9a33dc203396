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


class ConfigError(ValueError):
    """A config value that cannot run; the message names key, value and what is allowed."""


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


@dataclass
class ModelConfig:
    name: str = MISSING
    builder: str = MISSING  # "module:function" returning a Workload
    category: str = MISSING
    unit: str = MISSING
    items_per_sample: int = 1
    flops_per_item: float | None = None
    batch_size: Any = None  # per GPU; None: take the default for the precision
    batch_sizes: dict[str, int] = field(default_factory=dict)  # precision -> default batch
    smoke: dict[str, Any] = field(default_factory=dict)  # the tiny size for benchmark=smoke
    # vision sizes
    image_size: int | None = None
    num_classes: int | None = None
    # language sizes
    seq_len: int | None = None
    n_layer: int | None = None
    d_model: int | None = None
    n_head: int | None = None
    vocab_size: int | None = None


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
    node_rank: int = 0
    rdzv_endpoint: str = "localhost:0"  # port 0: a free port per job
    start_timeout_s: int = 120


@dataclass
class Config:
    gpu: GpuConfig = MISSING
    model: ModelConfig = MISSING
    precision: PrecisionConfig = MISSING
    benchmark: BenchmarkConfig = MISSING
    tracking: TrackingConfig = MISSING
    telemetry: TelemetryConfig = MISSING
    launcher: LauncherConfig = field(default_factory=LauncherConfig)


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="config_schema", node=Config)  # types every group: a wrong key fails at compose
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
        if cfg.model.batch_size is None:
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
    need(_positive_int(m.batch_size), "model.batch_size", m.batch_size, "a positive integer")
    need(
        _positive_int(m.items_per_sample), "model.items_per_sample", m.items_per_sample, "a positive integer"
    )
    for key in ("image_size", "num_classes", "seq_len", "n_layer", "d_model", "n_head", "vocab_size"):
        value = m.get(key)
        need(value is None or _positive_int(value), f"model.{key}", value, "a positive integer")
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
    need(
        bool(re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", cfg.tracking.uri)),
        "tracking.uri",
        cfg.tracking.uri,
        "a URI such as sqlite:///abs/path/mlflow.db or http://host:5000",
    )
    need(bool(cfg.tracking.experiment), "tracking.experiment", cfg.tracking.experiment, "a non-empty name")
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def _builder_exists(builder: str) -> bool:
    module, _, func = builder.partition(":")
    if not module or not func:
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False
