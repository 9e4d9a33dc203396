"""Range and cross-group checks of a composed config, naming the key, the value and what is allowed."""

from __future__ import annotations

import ast
import importlib.util
import os
from pathlib import Path

from omegaconf import DictConfig

from src.config.checks import Errors, positive_int, positive_or_none
from src.config.schema import AUTO_BATCH, CATEGORIES, PRECISIONS, RESNETS, SIZE_KEYS
from src.config.tracking_uri import tracking_errors
from src.errors import ConfigError


def validate(cfg: DictConfig) -> None:
    """Range and cross-group checks; raises ConfigError naming key, value and what is allowed."""
    errors = Errors()
    _check_gpu(cfg.gpu, cfg.precision.name, errors)
    _check_model(cfg.model, cfg.gpu.device, errors)
    _check_precision(cfg.precision, errors)
    _check_benchmark(cfg.benchmark, cfg.model, errors)
    _check_telemetry(cfg.telemetry, errors)
    errors += tracking_errors(cfg.tracking)
    _check_launcher(cfg.launcher, errors)
    if errors:
        raise ConfigError("invalid config:\n  " + "\n  ".join(errors))


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
        precision in g.precisions, "precision", precision, f"one of {', '.join(g.precisions)} on gpu={g.name}"
    )
    for key in ("memory_gb", "memory_bandwidth_gbs", "tdp_w", "price_usd"):
        errors.need(positive_or_none(g[key]), f"gpu.{key}", g[key], "a positive number or null")
    for key, value in g.peak_tflops.items():
        errors.need(positive_or_none(value), f"gpu.peak_tflops.{key}", value, "a positive number")
    for model, table in g.batch_sizes.items():
        _check_batch_table(table, f"gpu.batch_sizes.{model}", errors)


def _check_batch_table(table: DictConfig, key: str, errors: Errors) -> None:
    """A precision -> batch size table (a model's defaults, or a GPU profile's per model)."""
    for precision, value in table.items():
        errors.need(
            precision in (*PRECISIONS, "default"),
            key,
            precision,
            f"keyed by {', '.join(PRECISIONS)} or default",
        )
        errors.need(positive_int(value), f"{key}.{precision}", value, "a positive integer")


def _check_model(m: DictConfig, device: str, errors: Errors) -> None:
    errors.need(bool(m.name), "model.name", m.name, "a non-empty name")
    errors.need(
        _builder_exists(m.builder), "model.builder", m.builder, "'package.module:function' that exists"
    )
    errors.need(m.category in CATEGORIES, "model.category", m.category, f"one of {', '.join(CATEGORIES)}")
    errors.need(bool(m.unit), "model.unit", m.unit, "a non-empty unit such as images/s")
    errors.need(
        positive_int(m.items_per_sample), "model.items_per_sample", m.items_per_sample, "a positive integer"
    )
    errors.need(positive_or_none(m.flops_per_item), "model.flops_per_item", m.flops_per_item, "> 0 or null")
    # gpu.device=auto: the batch follows the profile of the device found, so None waits for it
    errors.need(
        positive_int(m.batch_size)
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


def _check_model_sizes(m: DictConfig, errors: Errors) -> None:
    """Model size keys: positive where set, and consistent with each other."""
    sizes = Errors()
    for key in SIZE_KEYS:
        value = m.get(key)
        sizes.need(value is None or positive_int(value), f"model.{key}", value, "a positive integer")
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
            and all(positive_int(c) for c in cutoffs)
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


def _check_precision(p: DictConfig, errors: Errors) -> None:
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
