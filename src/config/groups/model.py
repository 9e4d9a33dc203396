"""The model group: what every model declares, its family's sizes (one dataclass per family), and
their checks: the builder exists, and the sizes are positive and fit each other (conf/model/)."""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from omegaconf import MISSING, DictConfig

from src.config.checks import Errors, positive_int, positive_or_none
from src.config.groups.precision import check_batch_table
from src.results.recorded import KINDS

CATEGORIES = ("vision", "language", "ceilings")  # ceilings: the card's own limits (model=ceilings)
AUTO_BATCH = "auto"  # model.batch_size=auto: the largest batch that trains, found by src.rank.autobatch
RESNETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")  # model.backbone choices


@dataclass
class ModelConfig:
    """What every model declares; its family's schema below adds the sizes it takes, and only those,
    so a key the model does not take (`model=resnet50 model.n_head=7`) fails at composition."""

    _target_: str = MISSING  # the builder, "package.module.function" returning a Workload
    kind: str = "training"  # what the job measures: a training workload, or the card's ceilings
    name: str = MISSING
    category: str = MISSING
    unit: str = MISSING
    items_per_sample: int = 1
    flops_per_item: float | None = None
    batch_size: Any = None  # per GPU; None: the default for the precision; "auto": largest that fits
    batch_sizes: dict[str, int] = field(default_factory=dict)  # precision -> default batch
    # False: cuDNN autotuning off by default (it re-tunes whenever a convolution's shapes change).
    # Set for Mask R-CNN, measured when its mask head's region count varied from step to step.
    static_shapes: bool = True


@dataclass
class VisionModel(ModelConfig):
    """Image classifiers (ResNet-50)."""

    category: str = "vision"
    unit: str = "images/s"
    image_size: int = MISSING
    min_image_size: int = MISSING  # the smallest image_size the architecture trains at
    num_classes: int = MISSING


@dataclass
class VisionTransformerModel(VisionModel):
    """ViT: image_size must be a multiple of patch_size."""

    patch_size: int = MISSING
    n_layer: int = MISSING
    d_model: int = MISSING
    n_head: int = MISSING
    d_inner: int = MISSING  # MLP width


@dataclass
class SsdModel(VisionModel):
    """Detection, SSD300: square images fed at image_size."""

    backbone: str = MISSING  # the torchvision ResNet under the detector


@dataclass
class MaskRcnnModel(VisionModel):
    """Detection, Mask R-CNN: 4:3 photos of shorter side image_size, resized by the model."""

    min_size: int = MISSING  # resize rule: shorter side scaled to min_size...
    max_size: int = MISSING  # ...unless the longer side would pass max_size
    rois_per_image: int = MISSING  # regions sampled per image for the box head
    positive_fraction: float = MISSING  # share of those regions that may be positive: the mask head's
    objects_per_image: int = MISSING  # ground-truth objects in every synthetic image


@dataclass
class TransformerSizes(ModelConfig):
    """The sizes every transformer language model here has."""

    category: str = "language"
    seq_len: int = MISSING
    n_layer: int = MISSING
    d_model: int = MISSING
    n_head: int = MISSING
    d_inner: int = MISSING  # feed-forward width
    vocab_size: int = MISSING


@dataclass
class LanguageModel(TransformerSizes):
    """Transformer language models (GPT-2, BERT)."""

    dropout: float = MISSING  # embeddings and residual branches
    dropatt: float = MISSING  # attention probabilities


@dataclass
class LlamaModel(TransformerSizes):
    """Llama decoders: grouped-query attention, no dropout in the architecture."""

    n_kv_head: int = MISSING  # key/value heads (grouped-query attention)


@dataclass
class TransformerXLModel(LanguageModel):
    """Transformer-XL: segment recurrence; an adaptive input/softmax, or a full softmax (no cutoffs)."""

    mem_len: int = MISSING  # hidden states kept from earlier segments; 0: none (checked on its own)
    d_head: int = MISSING  # width of one attention head (not d_model / n_head)
    cutoffs: list[int] = MISSING  # adaptive input/softmax: first id of each rarer cluster; []: full softmax
    div_val: int = MISSING  # each rarer cluster's width is divided by this (no effect without cutoffs)


@dataclass
class CeilingsModel(ModelConfig):
    """model=ceilings: the card's matmul, memory, host and all-reduce ceilings, measured by
    src/rank/ceiling_probes.py."""

    kind: str = "ceilings"
    category: str = "ceilings"
    unit: str = "TFLOP/s"
    matmul_dims: list[int] = MISSING  # m, n, k each take every value; the best shape is the figure
    screen_s: float = MISSING  # each shape's screening block of calls
    screen_budget_s: float = MISSING  # per math: shapes past it are skipped
    max_call_s: float = MISSING  # a shape whose call would take longer is skipped
    finalists: int = MISSING  # the fastest screened shapes, timed in full
    target_spread: float = MISSING  # the best shape is sampled until its 95% CI is within this...
    max_samples: int = MISSING  # ...or it has this many samples
    l2_flush_mb: float = MISSING  # zeroed before each timed product on a GPU; 0: none
    rest: float = MISSING  # the GPU idles this many times each timed block's length
    memory_mb: float = MISSING  # device buffer copied and read (several times the L2)
    host_mb: float = MISSING  # pinned host buffer copied to and from the device
    allreduce_mb: list[float] = MISSING  # all-reduce message sizes (gpu.count >= 2)
    sample_s: float = MISSING  # each timed sample is a block of calls about this long
    samples: int = MISSING  # timed samples per figure (median and 95% CI)


# conf/model/*.yaml pick one in their defaults list (`- family@_here_: vision`)
MODEL_FAMILIES = {
    "vision": VisionModel,
    "vision_transformer": VisionTransformerModel,
    "ssd": SsdModel,
    "mask_rcnn": MaskRcnnModel,
    "language": LanguageModel,
    "llama": LlamaModel,
    "transformer_xl": TransformerXLModel,
    "ceilings": CeilingsModel,
}
NON_NEGATIVE_SIZES = ("mem_len",)  # integer sizes where 0 is a setting (no recurrence memory)
# model keys that must be positive integers: every family's own integer fields (a new size is
# checked once it is declared), in whichever family has them
SIZE_KEYS = tuple(
    dict.fromkeys(
        f.name
        for family in MODEL_FAMILIES.values()
        for f in fields(family)
        if f.type == "int"
        and f.name not in {base.name for base in fields(ModelConfig)}
        and f.name not in NON_NEGATIVE_SIZES
    )
)


def check(cfg: DictConfig, errors: Errors) -> None:
    m, device = cfg.model, cfg.gpu.device
    errors.need(m.kind in KINDS, "model.kind", m.kind, f"one of {', '.join(KINDS)}")
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
        _need_divisor(errors, "n_head", m.n_head, "d_model", m.d_model)
    if get("n_kv_head"):
        _need_divisor(errors, "n_kv_head", m.n_kv_head, "n_head", m.n_head)
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
    if get("matmul_dims") is not None:
        _check_ceilings(m, errors)


def _check_ceilings(m: DictConfig, errors: Errors) -> None:
    """model=ceilings: its sizes and sampling."""
    dims = list(m.matmul_dims)
    errors.need(
        dims and all(positive_int(n) for n in dims),
        "model.matmul_dims",
        dims,
        "a non-empty list of positive integers",
    )
    messages = list(m.allreduce_mb)
    errors.need(
        all(positive_or_none(mb) and mb is not None for mb in messages),
        "model.allreduce_mb",
        messages,
        "a list of positive sizes in MB",
    )
    for key in ("max_call_s", "memory_mb", "host_mb", "sample_s", "screen_s", "screen_budget_s", "target_spread"):
        errors.need(
            positive_or_none(m[key]) and m[key] is not None, f"model.{key}", m[key], "a positive number"
        )
    errors.need(m.l2_flush_mb is not None and m.l2_flush_mb >= 0, "model.l2_flush_mb", m.l2_flush_mb, ">= 0 MB")
    errors.need(m.rest is not None and m.rest >= 0, "model.rest", m.rest, ">= 0 (times a timed block)")
    errors.need(positive_int(m.finalists), "model.finalists", m.finalists, "a positive integer")
    errors.need(
        positive_int(m.samples) and m.samples >= 2,
        "model.samples",
        m.samples,
        "an integer >= 2 (a spread needs two)",
    )
    errors.need(
        positive_int(m.max_samples) and m.max_samples >= m.samples,
        "model.max_samples",
        m.max_samples,
        f"an integer >= model.samples ({m.samples})",
    )


def _need_divisor(errors: Errors, key: str, part, whole_key: str, whole) -> None:
    """model.<key> must divide model.<whole_key> (heads into the width, query heads into groups)."""
    errors.need(whole % part == 0, f"model.{key}", part, f"a divisor of model.{whole_key} ({whole})")


def _check_cutoffs(m: DictConfig, errors: Errors) -> None:
    """Transformer-XL's adaptive input/softmax clusters ([]: one, the whole vocabulary)."""
    cutoffs = list(m.cutoffs)
    errors.need(
        all(positive_int(c) for c in cutoffs)
        and cutoffs == sorted(set(cutoffs))
        and all(c < m.vocab_size for c in cutoffs),
        "model.cutoffs",
        cutoffs,
        f"increasing positive token ids below model.vocab_size ({m.vocab_size}), or [] for a full softmax",
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
