"""Checks of the model group: the builder exists, and the sizes are positive and fit each other."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

from omegaconf import DictConfig

from src.config.checks import Errors, check_batch_table, positive_int, positive_or_none
from src.config.schema import AUTO_BATCH, CATEGORIES, RESNETS, SIZE_KEYS


def check_model(m: DictConfig, device: str, errors: Errors) -> None:
    errors.need(bool(m.name), "model.name", m.name, "a non-empty name")
    errors.need(
        target_exists(m._target_), "model._target_", m._target_, "'package.module.function' that exists"
    )
    errors.need(m.category in CATEGORIES, "model.category", m.category, f"one of {', '.join(CATEGORIES)}")
    errors.need(bool(m.unit), "model.unit", m.unit, "a non-empty unit such as images/s")
    errors.need(
        positive_int(m.items_per_sample), "model.items_per_sample", m.items_per_sample, "a positive integer"
    )
    errors.need(positive_or_none(m.flops_per_item), "model.flops_per_item", m.flops_per_item, "> 0 or null")
    errors.need(
        positive_int(m.batch_size) or m.batch_size == AUTO_BATCH,
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
    check_batch_table(m.batch_sizes, "model.batch_sizes", errors)
    sizes = Errors()
    for key in SIZE_KEYS:  # those of the model's family; positive before they are compared
        value = m.get(key)
        sizes.need(value is None or positive_int(value), f"model.{key}", value, "a positive integer")
    errors += sizes
    if not sizes:
        _check_sizes_fit(m, errors)


def _check_mask_head_regions(m: DictConfig, errors: Errors) -> None:
    """Mask R-CNN: every ground-truth box is a sure positive region, so with at least as many
    objects as the mask head's share the head trains on that many regions in every step; with
    fewer, the share fills with proposals that match an object, more as the detector learns."""
    fraction = m.positive_fraction
    errors.need(0 < fraction <= 1, "model.positive_fraction", fraction, "a share in (0, 1]")
    if 0 < fraction <= 1:
        least = int(m.rois_per_image * fraction)  # torchvision's sampler rounds down
        errors.need(
            m.objects_per_image >= least,
            "model.objects_per_image",
            m.objects_per_image,
            f">= {least} (model.positive_fraction of model.rois_per_image), so that the mask head "
            "trains on as many regions in every step",
        )


def _check_sizes_fit(m: DictConfig, errors: Errors) -> None:
    """Sizes against each other, for the keys the model's family has (m.get: None where it has not)."""
    get = m.get
    if get("mem_len") is not None:
        errors.need(
            isinstance(m.mem_len, int) and m.mem_len >= 0, "model.mem_len", m.mem_len, "an integer >= 0"
        )
    for key in ("dropout", "dropatt"):
        value = get(key)
        errors.need(value is None or 0 <= value < 1, f"model.{key}", value, "a probability in [0, 1)")
    if get("n_head") and get("d_head") is None:
        errors.need(
            m.d_model % m.n_head == 0, "model.n_head", m.n_head, f"a divisor of model.d_model ({m.d_model})"
        )
    if get("n_kv_head"):
        errors.need(
            m.n_head % m.n_kv_head == 0,
            "model.n_kv_head",
            m.n_kv_head,
            f"a divisor of model.n_head ({m.n_head})",
        )
    if get("positive_fraction") is not None:
        _check_mask_head_regions(m, errors)
    if get("backbone") is not None:
        errors.need(m.backbone in RESNETS, "model.backbone", m.backbone, f"one of {', '.join(RESNETS)}")
    if get("image_size"):  # every vision model declares the smallest image it trains at
        errors.need(
            m.image_size >= m.min_image_size,
            "model.image_size",
            m.image_size,
            f">= {m.min_image_size} for {m.name} (its model.min_image_size)",
        )
    if get("patch_size"):
        errors.need(
            m.image_size % m.patch_size == 0,
            "model.image_size",
            m.image_size,
            f"a multiple of model.patch_size ({m.patch_size})",
        )
    if get("min_size"):
        errors.need(
            m.min_size <= m.max_size, "model.min_size", m.min_size, f"<= model.max_size ({m.max_size})"
        )
    if get("cutoffs") is not None:
        _check_cutoffs(m, errors)
    if get("matmul_sizes") is not None:
        _check_ceilings(m, errors)


def _check_ceilings(m: DictConfig, errors: Errors) -> None:
    """model=ceilings: its sizes and sampling."""
    sizes = list(m.matmul_sizes)
    errors.need(
        sizes and all(positive_int(n) for n in sizes),
        "model.matmul_sizes",
        sizes,
        "a non-empty list of positive integers",
    )
    messages = list(m.allreduce_mb)
    errors.need(
        all(positive_or_none(mb) and mb is not None for mb in messages),
        "model.allreduce_mb",
        messages,
        "a list of positive sizes in MB",
    )
    for key in ("max_call_s", "memory_mb", "host_mb", "sample_s"):
        errors.need(
            positive_or_none(m[key]) and m[key] is not None, f"model.{key}", m[key], "a positive number"
        )
    errors.need(
        positive_int(m.samples) and m.samples >= 2,
        "model.samples",
        m.samples,
        "an integer >= 2 (a spread needs two)",
    )


def _check_cutoffs(m: DictConfig, errors: Errors) -> None:
    """Transformer-XL's adaptive input/softmax clusters."""
    cutoffs = list(m.cutoffs)
    errors.need(
        len(cutoffs) > 0
        and all(positive_int(c) for c in cutoffs)
        and cutoffs == sorted(set(cutoffs))
        and cutoffs[-1] < m.vocab_size,
        "model.cutoffs",
        cutoffs,
        f"increasing positive token ids below model.vocab_size ({m.vocab_size})",
    )
    errors.need(
        m.d_model // m.div_val ** len(cutoffs) >= 1,
        "model.div_val",
        m.div_val,
        f"small enough that the rarest cluster keeps a width >= 1 "
        f"(model.d_model={m.d_model} // div_val**{len(cutoffs)})",
    )


def target_exists(target: str) -> bool:
    """The builder's module exists and defines the function: a typo fails here, not in every rank.

    Read from the module's source, not imported: importing it would load torch into the job
    process, seconds per job."""
    module, _, func = target.rpartition(".")
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
