"""Structured-config schema, the steps that finalise a composed config, and its validation.

Hydra types every group against these dataclasses, so a misspelt key or a wrong type fails at
composition. `finalize` then applies the smoke sizes and the batch-size rule, and `validate`
checks ranges and cross-group rules, naming the key, the value and what is allowed.
"""

from __future__ import annotations

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


class ConfigError(ValueError):
    """A config value that cannot run; the message names key, value and what is allowed."""


@dataclass
class GpuConfig:
    name: str = MISSING
    device: str = "cuda"  # cuda | cpu | auto (whatever the host has)
    match: list[str] = field(default_factory=list)  # substrings of the NVML device name
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
    rerun: bool = False  # run a point even if its config already has a FINISHED run (see src/resume.py)


@dataclass
class TrackingConfig:
    uri: str = MISSING
    experiment: str = "gpubench"
    retries: int = 4  # attempts to deliver a job's result at its end before it waits in the spool
    backoff_s: float = 2.0  # first wait between attempts; doubles each time


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
    _check_model(cfg.model, errors)
    _check_precision(cfg.precision, errors)
    _check_benchmark(cfg.benchmark, errors)
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
        errors.need(bool(g.match), "gpu.match", list(g.match), "a non-empty list of GPU-name substrings")
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
        for key, value in table.items():
            errors.need(_positive_int(value), f"gpu.batch_sizes.{model}.{key}", value, "a positive integer")


def _check_model(m: DictConfig, errors: _Errors) -> None:
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
    errors.need(_positive_int(m.batch_size), "model.batch_size", m.batch_size, "a positive integer")
    for key, value in m.batch_sizes.items():
        errors.need(_positive_int(value), f"model.batch_sizes.{key}", value, "a positive integer")
    for key in ("image_size", "num_classes", "seq_len", "n_layer", "d_model", "n_head", "vocab_size"):
        value = m.get(key)
        errors.need(value is None or _positive_int(value), f"model.{key}", value, "a positive integer")
    if _positive_int(m.get("d_model")) and _positive_int(m.get("n_head")):
        errors.need(
            m.d_model % m.n_head == 0, "model.d_model", m.d_model, f"a multiple of model.n_head ({m.n_head})"
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


def _check_benchmark(b: DictConfig, errors: _Errors) -> None:
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


URI_FORMS = (
    "must be sqlite:////absolute/path/mlflow.db, file:///absolute/path, http(s)://host[:port][/path], "
    "databricks, or postgresql|mysql|mssql://host/database"
)


def tracking_errors(t: DictConfig) -> list[str]:
    """Problems with the tracking keys; also checked by a sweep before its parent run opens."""
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


def _check_launcher(launcher: DictConfig, errors: _Errors) -> None:
    n = launcher.nnodes
    errors.need(_positive_int(n), "launcher.nnodes", n, "a positive integer")
    errors.need(
        isinstance(launcher.node_rank, int) and 0 <= launcher.node_rank < max(n, 1),
        "launcher.node_rank",
        launcher.node_rank,
        f"an integer from 0 to launcher.nnodes - 1 ({max(n, 1) - 1})",
    )
    host, _, port = launcher.rdzv_endpoint.rpartition(":")
    errors.need(
        bool(host) and port.isdigit() and int(port) <= 65535,
        "launcher.rdzv_endpoint",
        launcher.rdzv_endpoint,
        "host:port with a port from 0 (any free port) to 65535",
    )
    errors.need(
        launcher.start_timeout_s > 0, "launcher.start_timeout_s", launcher.start_timeout_s, "> 0 seconds"
    )


def _builder_exists(builder: str) -> bool:
    """The builder's module imports and has the function: a typo fails here, not in every rank."""
    module, _, func = builder.partition(":")
    if not module or not func:
        return False
    try:
        return importlib.util.find_spec(module) is not None and callable(
            getattr(importlib.import_module(module), func, None)
        )
    except (ImportError, ValueError):
        return False
