"""The structured-config schema: Hydra types every group against these dataclasses, so a misspelt key
or a wrong type fails at composition."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from src.config.help_groups import command_line_groups
from src.paths import PROJECT_ROOT, claim_folder

PRECISIONS = ("fp32", "tf32", "amp", "bf16")
CATEGORIES = ("vision", "language", "ceilings")  # ceilings: the card's own limits (model=ceilings)
AUTO_PRECISION = "auto"  # precision=auto: the gpu profile's default_precision, once the device is known
AUTO_BATCH = "auto"  # model.batch_size=auto: the largest batch that trains, found by src.rank.autobatch
RESNETS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152")  # model.backbone choices


@dataclass
class SlurmRequest:
    """What `hydra/launcher=slurm` asks Slurm for, for one job of this profile (GPUs per node)."""

    # Slurm sites name their GPU types their own way: override per site, e.g. gpu:rtx_a6000:${gpu.count}
    gres: str | None = "gpu:${gpu.name}:${gpu.count}"
    constraint: str | None = None  # a node feature, for sites that select GPU types that way
    time_limit_min: int = 60  # the job's wall-clock limit (Slurm's --time)


@dataclass
class GpuConfig:
    name: str = MISSING
    device: str = "cuda"  # cuda | cpu | auto (whatever the host has)
    match: list[str] = field(default_factory=list)  # substrings of the NVML device name (any one)
    exclude: list[str] = field(default_factory=list)  # substrings that rule a name out (e.g. "Ti")
    count: int = 1
    precisions: list[str] = field(default_factory=lambda: list(PRECISIONS))
    default_precision: str = "amp"  # what precision=auto (a single job's default) runs here
    memory_gb: float | None = None
    # GB (GiB) of device memory each rank may allocate (the allocator's per-process cap), so a large
    # card stands in for the capacity, not the speed, of a smaller one; null: the whole card
    memory_limit_gb: float | None = None
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
    """What every model declares; its family's schema below adds the sizes it takes, and only those,
    so a key the model does not take (`model=resnet50 model.n_head=7`) fails at composition."""

    _target_: str = MISSING  # the builder, "package.module.function" returning a Workload
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
    """Transformer-XL: segment recurrence and an adaptive input/softmax."""

    mem_len: int = MISSING  # hidden states kept from earlier segments; 0: none (checked on its own)
    d_head: int = MISSING  # width of one attention head (not d_model / n_head)
    cutoffs: list[int] = MISSING  # adaptive input/softmax: first id of each rarer cluster
    div_val: int = MISSING  # each rarer cluster's width is divided by this


@dataclass
class CeilingsModel(ModelConfig):
    """model=ceilings: the card's matmul, memory, host and all-reduce ceilings (src/rank/ceilings.py)."""

    category: str = "ceilings"
    unit: str = "TFLOP/s"
    matmul_sizes: list[int] = MISSING  # square n x n x n products; the best shape is the figure
    max_call_s: float = MISSING  # once one product takes longer, larger sizes are skipped
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


@dataclass
class PrecisionConfig:
    name: str = MISSING
    autocast_dtype: str | None = None  # float16 | bfloat16 | None
    grad_scaling: bool = False
    allow_tf32: bool = False
    peak_key: str = MISSING  # which gpu.peak_tflops figure this math runs at


@dataclass
class BenchmarkConfig:
    name: str = MISSING  # the option's own name (conf/benchmark/<name>.yaml)
    warmup_steps: int = 10  # at most; the first step always (autotuning, compilation)
    warmup_s: float = 2.0  # warm-up ends sooner once the steps after the first have taken this long
    min_steps: int = 20
    max_steps: int = 500
    time_limit_s: float = 60.0
    target_ci: float = 0.01  # 95% CI half-width of the mean step time, relative
    check_every: int = 10  # steps between stopping-rule checks (each one syncs the device)
    seed: int = 0
    compile: bool = False  # torch.compile the model
    channels_last: bool | None = None  # NHWC memory format; null: on for vision models, off otherwise
    cudnn_benchmark: bool | None = None  # cuDNN autotuning; null: on unless model.static_shapes is false
    cudnn_benchmark_limit: int | None = (
        None  # algorithms autotuning tries per convolution, 0: all; null: torch's 10
    )
    breakdown_steps: int = 3  # steps profiled after the window for the step-time breakdown; 0: off
    timeout_s: float = 900.0  # a job (or a hung collective) past this is failed
    rerun: bool = False  # run a point even if its config already has a FINISHED run (see src/run/resume.py)
    repeat: int = 0  # which repeat of the point (benchmark.repeat=0,1,2): a run of its own, the same point
    exclusive: bool = False  # true: refuse to start on a GPU another program is using (else: run, flag it)


@dataclass
class TrackingConfig:
    uri: str = MISSING
    experiment: str = "gpubench"
    published_experiment: str = "gpubench-published"  # imported results; src.compare reads both
    report_experiment: str = "gpubench-reports"  # src.compare's report runs, apart from the measured ones
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
    node_rank: int = MISSING  # this machine's node; node 0's job process logs the run (from the scheduler)
    rdzv_endpoint: str = MISSING  # host:port of the c10d rendezvous; port 0: a free port (one node)
    start_timeout_s: int = 120  # the rendezvous and the ranks' start
    # stop the ranks (FAILED: host memory exhausted) once the host has less than this many GB
    # available, before the kernel's OOM killer picks a process to end; 0: no guard
    host_memory_reserve_gb: float = 1.0


@dataclass
class Config:
    gpu: GpuConfig = MISSING
    model: ModelConfig = MISSING
    precision: PrecisionConfig = MISSING
    benchmark: BenchmarkConfig = MISSING
    tracking: TrackingConfig = MISSING
    telemetry: TelemetryConfig = MISSING
    launcher: LauncherConfig = MISSING


@dataclass
class AnomalyConfig:
    scaling_tolerance: float = 0.02  # scaling efficiency above 1 + this is flagged (timing noise)
    spec_tolerance: float = 0.25  # a ratio beyond the spec-sheet range by more than this is flagged


@dataclass
class CompareConfig:
    """`python -m src.compare`: relative throughput against a baseline gpu, from MLflow runs."""

    baseline: str | None = None  # null: rtx3090; with `by`, the oldest value
    baseline_source: str | None = None  # null: the row's own source when the baseline has it
    by: str | None = None  # null: compare gpus; a stack key or tag: compare its values on one gpu
    out: str = MISSING
    # filters; empty = all
    gpus: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    precisions: list[str] = field(default_factory=list)
    gpu_counts: list[int] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    # two cards, gpu or gpu@<memory_limit_gb> (h200@48,h200@24): the ratio of the first to the
    # second split into speed (iso-batch) and capacity (max-batch); empty: no split
    capacity_split: list[str] = field(default_factory=list)
    filter_string: str = ""  # extra MLflow search filter, e.g. "tags.compile = 'False'"
    include_smoke: bool = False  # benchmark=smoke dry runs are left out unless asked for
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
    store = ConfigStore.instance()
    for name in schemas or SCHEMAS:
        store.store(name=name, node=SCHEMAS[name])  # a wrong key fails at compose
    if not schemas or "config_schema" in schemas:
        for name, node in MODEL_FAMILIES.items():
            store.store(group="model/family", name=name, node=node)
    if not OmegaConf.has_resolver("project_root"):
        OmegaConf.register_new_resolver("project_root", lambda: str(PROJECT_ROOT))
    if not OmegaConf.has_resolver("command_line_groups"):
        OmegaConf.register_new_resolver("command_line_groups", command_line_groups)  # for --help
    if not OmegaConf.has_resolver("claim_folder"):
        # cached like Hydra's `now`: every job of a sweep (and Hydra's copies) sees the same folder
        OmegaConf.register_new_resolver("claim_folder", claim_folder, use_cache=True)
