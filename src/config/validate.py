"""Range and cross-group checks of a composed config, naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import os

from omegaconf import DictConfig, OmegaConf

from src.config.checks import Errors, check_batch_table, check_memory_cap, positive_int, positive_or_none
from src.config.model_checks import check_model
from src.config.schema import PRECISIONS
from src.config.tracking_uri import tracking_errors
from src.errors import ConfigError


def validate(cfg: DictConfig) -> None:
    """Range and cross-group checks; raises ConfigError naming key, value and what is allowed."""
    errors = Errors(unknown_keys(cfg))
    _check_gpu(cfg.gpu, cfg.precision.name, errors)
    check_model(cfg.model, cfg.gpu.device, errors)
    _check_precision(cfg.precision, cfg.gpu.device, errors)
    _check_benchmark(cfg.benchmark, cfg.model, errors)
    _check_telemetry(cfg.telemetry, errors)
    errors += tracking_errors(cfg.tracking)
    _check_launcher(cfg.launcher, errors)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


def unknown_keys(node: DictConfig, prefix: str = "") -> list[str]:
    """Keys that `+key=value` added beside a schema's fields. Hydra lets `+` add a key anywhere; such a
    key changes nothing a run does but would enter its params and its resume hash."""
    schema = OmegaConf.get_type(node)
    if not dataclasses.is_dataclass(schema):
        return []  # a free-form table (gpu.batch_sizes, ...): its own check reads its keys
    fields = {f.name for f in dataclasses.fields(schema)}
    found = []
    for key in node:
        name = f"{prefix}{key}"
        if key not in fields:
            found.append(
                f"{name}={node.get(key)!r}: not a key of {schema.__name__}; a key added with + "
                "would change the run's resume hash and nothing the run does"
            )
        elif not OmegaConf.is_missing(node, key) and isinstance(node[key], DictConfig):
            found += unknown_keys(node[key], f"{name}.")
    return found


def _check_gpu(g: DictConfig, precision: str, errors: Errors) -> None:
    errors.need(bool(g.name), "gpu.name", g.name, "a non-empty profile name")
    errors.need(g.device in ("cuda", "cpu", "auto"), "gpu.device", g.device, "one of cuda, cpu, auto")
    errors.need(positive_int(g.count), "gpu.count", g.count, "a positive integer")
    limit = g.slurm.time_limit_min
    errors.need(positive_int(limit), "gpu.slurm.time_limit_min", limit, "a positive integer (minutes)")
    if g.device == "cpu" and positive_int(g.count):
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
        g.default_precision in g.precisions,
        "gpu.default_precision",
        g.default_precision,
        f"one of gpu.precisions ({', '.join(g.precisions)}) on gpu={g.name}",
    )
    errors.need(
        precision in g.precisions,
        "precision",
        precision,
        f"one of {', '.join(g.precisions)} on gpu={g.name}",
    )
    for key in ("memory_gb", "memory_bandwidth_gbs", "tdp_w", "price_usd"):
        errors.need(positive_or_none(g[key]), f"gpu.{key}", g[key], "a positive number or null")
    check_memory_cap(g.memory_limit_gb, g.memory_gb, g.device, f"gpu={g.name} (gpu.memory_gb)", errors)
    for key, value in g.peak_tflops.items():
        errors.need(positive_or_none(value), f"gpu.peak_tflops.{key}", value, "a positive number")
    for model, table in g.batch_sizes.items():
        check_batch_table(table, f"gpu.batch_sizes.{model}", errors)


def _check_precision(p: DictConfig, device: str, errors: Errors) -> None:
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


def _check_benchmark(b: DictConfig, m: DictConfig, errors: Errors) -> None:
    errors.need(
        isinstance(b.warmup_steps, int) and b.warmup_steps >= 0,
        "benchmark.warmup_steps",
        b.warmup_steps,
        "an integer >= 0",
    )
    errors.need(
        isinstance(b.warmup_s, int | float) and b.warmup_s >= 0,
        "benchmark.warmup_s",
        b.warmup_s,
        "a number of seconds >= 0",
    )
    errors.need(
        positive_int(b.min_steps) and b.min_steps >= 2, "benchmark.min_steps", b.min_steps, "an integer >= 2"
    )
    errors.need(
        positive_int(b.max_steps) and b.max_steps >= b.min_steps,
        "benchmark.max_steps",
        b.max_steps,
        f"an integer >= benchmark.min_steps ({b.min_steps})",
    )
    errors.need(b.time_limit_s > 0, "benchmark.time_limit_s", b.time_limit_s, "> 0 seconds")
    errors.need(
        0 < b.target_ci < 1, "benchmark.target_ci", b.target_ci, "a fraction between 0 and 1 (0.01 = 1%)"
    )
    errors.need(positive_int(b.check_every), "benchmark.check_every", b.check_every, "a positive integer")
    errors.need(isinstance(b.seed, int) and b.seed >= 0, "benchmark.seed", b.seed, "an integer >= 0")
    errors.need(
        b.timeout_s > b.time_limit_s,
        "benchmark.timeout_s",
        b.timeout_s,
        f"more seconds than benchmark.time_limit_s ({b.time_limit_s:g}): it bounds the whole job",
    )
    errors.need(
        isinstance(b.breakdown_steps, int) and b.breakdown_steps >= 0,
        "benchmark.breakdown_steps",
        b.breakdown_steps,
        "an integer >= 0 (steps profiled after the window; 0: no step-time breakdown)",
    )
    errors.need(isinstance(b.repeat, int) and b.repeat >= 0, "benchmark.repeat", b.repeat, "an integer >= 0")
    limit = b.cudnn_benchmark_limit
    errors.need(
        limit is None or (isinstance(limit, int) and limit >= 0),
        "benchmark.cudnn_benchmark_limit",
        limit,
        "an integer >= 0 (0: every algorithm) or null (torch's default, 10)",
    )
    errors.need(
        not (b.channels_last and m.category != "vision"),
        "benchmark.channels_last",
        b.channels_last,
        f"false for model={m.name}: the NHWC memory format applies to vision models only",
    )


def _check_telemetry(t: DictConfig, errors: Errors) -> None:
    errors.need(
        positive_int(t.interval_ms) and t.interval_ms >= 10,
        "telemetry.interval_ms",
        t.interval_ms,
        "an integer >= 10 (milliseconds between samples)",
    )
    errors.need(
        t.pcie_interval_ms == 0 or (positive_int(t.pcie_interval_ms) and t.pcie_interval_ms >= t.interval_ms),
        "telemetry.pcie_interval_ms",
        t.pcie_interval_ms,
        f"0 (off) or an integer >= telemetry.interval_ms ({t.interval_ms})",
    )


def _check_launcher(la: DictConfig, errors: Errors) -> None:
    """Node count, this node's index and the rendezvous endpoint of a (multi-node) job."""
    errors.need(positive_int(la.nnodes), "launcher.nnodes", la.nnodes, "a positive integer")
    if not positive_int(la.nnodes):
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
        positive_int(la.start_timeout_s),
        "launcher.start_timeout_s",
        la.start_timeout_s,
        "a positive integer",
    )
    errors.need(
        la.host_memory_reserve_gb >= 0,
        "launcher.host_memory_reserve_gb",
        la.host_memory_reserve_gb,
        ">= 0 GB (0: no guard)",
    )
