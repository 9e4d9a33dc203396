"""The structured-config schema: Hydra types every group against its dataclass (src/config/groups/,
one module per group, beside the group's checks), so a misspelt key or a wrong type fails at
composition. Here: the root that holds the groups, and the schemas of the other entry points."""

from __future__ import annotations

from dataclasses import dataclass, field

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf

from src.config import help_groups
from src.config.groups.benchmark import BenchmarkConfig
from src.config.groups.gpu import GpuConfig
from src.config.groups.launcher import LauncherConfig
from src.config.groups.model import MODEL_FAMILIES, ModelConfig
from src.config.groups.precision import PrecisionConfig
from src.config.groups.telemetry import TelemetryConfig
from src.config.groups.tracking import TrackingConfig
from src.paths import PROJECT_ROOT, claim_folder, user_folder


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
class Claim:
    """One figure a study states: a category mean of the gpu's ratios to the baseline."""

    category: str = MISSING
    precision: str = MISSING
    gpu_count: int = MISSING
    ratio: float = MISSING


@dataclass
class StudyConfig:
    """The question an experiment asks compare (conf/study/<experiment>.yaml); none: name '', and
    what compare asks without one (conf/study/none.yaml)."""

    name: str = ""  # the experiment's name, as `python -m src.compare experiment=<name>` gives it
    title: str = ""
    baseline: str = MISSING  # the gpu every ratio is taken against when baseline= is not given
    gpus: list[str] = field(default_factory=list)  # the published pair, shown beside your own gpus
    models: list[str] = field(default_factory=list)
    published: str = ""  # the source the claims are checked against, imported when the store lacks it
    claims: list[Claim] = field(default_factory=list)
    hint: str = MISSING  # what a store with nothing to compare is told: the command that brings runs


@dataclass
class ProjectionConfig:
    batch: str = "own"  # own: each target's largest batch that fits its memory; same: the batch as measured
    model_error: float = 0.19  # the model's error on ratios between cards (benchmarks/projection_check.py)


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
    # gpu profiles to project the measured points onto (src/projection/); empty: none
    project: list[str] = field(default_factory=list)
    projection: ProjectionConfig = field(default_factory=ProjectionConfig)
    filter_string: str = ""  # extra MLflow search filter, e.g. "tags.compile = 'False'"
    include_smoke: bool = False  # benchmark=smoke dry runs are left out unless asked for
    all: bool = False  # every gpu in the store; by default the baseline, the study's pair and your gpus
    study: StudyConfig = field(default_factory=StudyConfig)
    tag_runs: bool = True  # tag anomalous runs with `anomaly`
    charts: bool = True  # draw the PNG charts (tests that look at no chart leave them out)
    anomalies: AnomalyConfig = field(default_factory=AnomalyConfig)
    tracking: TrackingConfig = MISSING


@dataclass
class PublishedTask:
    model: str = MISSING
    category: str = MISSING
    unit: str = MISSING


@dataclass
class ImportConfig:
    """`python -m src.published FILE`: published results as FINISHED MLflow runs."""

    file: str = MISSING
    precision: PrecisionConfig = MISSING  # the precision group: `precision=amp` picks conf/precision/amp
    source: str = MISSING
    tasks: dict[str, PublishedTask] = field(default_factory=dict)  # published column -> model
    gpu_profiles: dict[str, str] = field(default_factory=dict)  # published GPU name -> profile
    # filters, empty = every figure: gpus=[a6000,rtx3090] models=[resnet50] gpu_counts=[1,8]
    gpus: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    gpu_counts: list[int] = field(default_factory=list)
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
    help_groups.register_resolver()  # the help template, where Hydra prints it (each command prints --help)
    if not OmegaConf.has_resolver("claim_folder"):
        # cached like Hydra's `now`: every job of a sweep (and Hydra's copies) sees the same folder
        OmegaConf.register_new_resolver("claim_folder", claim_folder, use_cache=True)
    if not OmegaConf.has_resolver("user_folder"):  # a folder named on the command line, checked as Hydra makes it
        OmegaConf.register_new_resolver("user_folder", user_folder)
