"""What each config key is to a measurement, declared once: the point, the resume hash, the run's
setting tags and compare's variant labels are derived from this table.

Roles:
- MEASURED: changes the figure. Part of compare's point (runs that differ in it are never pooled),
  of the resume hash, of the variant label that tells points apart, and a run tag where `tag` is set.
  `by` says the point holds it through another field instead of its own value: the gpu profile's
  spec sheet is the point's `gpu`, the model's unit and category its `model`, the batch defaults
  the `batch_size` that ran.
- PROCEDURE: how the figure is taken (warm-up, stopping rule, telemetry sampling): in the resume
  hash only, so a point re-measured another way runs again but compares as the same point.
- PLUMBING: neither (tracking, the Slurm request, rerun, host guards).

A key is looked up by its full name, else by the longest declared prefix ending in "." (one entry
covers a group, e.g. every model size; a more specific entry overrides it).

Defaults (`default=`): a key at its declared default is left out of the hash, the point and the
tags, so labels name only what was set, and a run that lacks the key compares as that default.
This is also the extension point: a key added in a later release is declared with the default it
had before it existed, and every run logged before it keeps its hash and its point.
- A key in the hash but not in the point (e.g. `benchmark.repeat`) is PROCEDURE, with a default.
- `needs="<key>"`: the key means nothing while that switch is off; finalising resets it to its
  default then, so the point and hash do not split on a setting that was not used.
- Point fields that come from the run's environment rather than its config (the software stack,
  the detected card, the nodes, a CPU job's threads) go in TAGS: tag name -> Declared, MEASURED;
  compare reads them from the run's tags into the point as `tag:<name>` (not into the resume hash,
  which is of the config alone: resume matches them apart), and a default works the same way for
  runs that lack the tag.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from src.results import recorded

MEASURED, PROCEDURE, PLUMBING = "measured", "procedure", "plumbing"
NO_DEFAULT = object()  # a key without a default: always in the point, the hash and the tags
RAN_BATCH = recorded.BATCH_SIZE  # the param a run logs once its ranks report the per-GPU batch that ran
CPU_THREADS = "cpu_threads"  # the tag of a CPU job: the intra-op threads each of its ranks ran
CPU_MODEL = "cpu_model"  # the tag of a CPU job: its processor, the card it ran on
REPEAT = "benchmark.repeat"


@dataclass(frozen=True)
class Declared:
    role: str
    by: str | None = None  # MEASURED only: the point field that stands for it (gpu, model, ...)
    tag: str | None = None  # MEASURED only: the run tag that carries it
    default: Any = NO_DEFAULT  # at this value the key is left out (see above)
    needs: str | None = None  # the switch without which the key means nothing


KEYS: dict[str, Declared] = {
    # the hardware: the point's gpu (the profile) and gpu_count (per node x nodes)
    "gpu.": Declared(MEASURED, by="gpu"),  # device, match rule, spec sheet, batch sizes
    "gpu.count": Declared(MEASURED, by="gpu_count"),
    "gpu.slurm.": Declared(PLUMBING),  # how Slurm was asked (a longer time limit) measures the same point
    "gpu.default_precision": Declared(PLUMBING),  # what precision=auto picks; the point has what ran
    "gpu.memory_limit_gb": Declared(MEASURED, tag="memory_limit_gb", default=None),  # a capped card
    # spec-sheet figures a projection reads (the card's shape and links, with sources): no figure changes
    **dict.fromkeys(
        (
            "gpu.sm_count",
            "gpu.boost_clock_mhz",
            "gpu.l2_cache_mb",
            "gpu.host_link_gbs",
            "gpu.gpu_link_gbs",
            "gpu.sources",
            "gpu.sources.",
        ),
        Declared(PLUMBING),
    ),
    # the model: its sizes separate points; what only names or describes it is the point's model
    "model.": Declared(MEASURED),
    "model.name": Declared(MEASURED, by="model"),
    "model.kind": Declared(MEASURED, by="model", default="training"),  # the run's job_kind tag
    "model._target_": Declared(MEASURED, by="model"),
    "model.category": Declared(MEASURED, by="model"),
    "model.unit": Declared(MEASURED, by="model"),
    "model.flops_per_item": Declared(MEASURED, by="model"),
    "model.min_image_size": Declared(MEASURED, by="model"),
    "model.batch_size": Declared(MEASURED, by=RAN_BATCH),  # the request; the point has what ran
    "model.batch_sizes.": Declared(MEASURED, by=RAN_BATCH),
    "precision.": Declared(MEASURED, by="precision"),
    # how the figure is taken, and the settings that change it
    "benchmark.": Declared(PROCEDURE),
    "benchmark.compile": Declared(MEASURED, tag="compile"),
    "benchmark.channels_last": Declared(MEASURED, tag="channels_last"),
    "benchmark.cudnn_benchmark": Declared(MEASURED, tag="cudnn_benchmark"),
    "benchmark.cudnn_benchmark_limit": Declared(
        MEASURED, tag="cudnn_benchmark_limit", default=None, needs="benchmark.cudnn_benchmark"
    ),
    "benchmark.rerun": Declared(PLUMBING),
    # a CPU rank's threads as asked (null: the cores shared): the point has the threads that ran
    "benchmark.cpu_threads": Declared(MEASURED, by=CPU_THREADS, default=None),
    "benchmark.breakdown_steps": Declared(PLUMBING),  # profiled after the window: the figure is the same
    # a repeat of the point in fresh processes: its own run (hash), the same point; 0 as runs before it
    REPEAT: Declared(PROCEDURE, default=0),
    # whether a busy GPU is refused: the figure is flagged gpu_shared either way
    "benchmark.exclusive": Declared(PLUMBING),
    "telemetry.": Declared(PROCEDURE),  # the sampling behind the power and clock figures
    # hashed since the first runs, so kept in the hash: as plumbing every finished point would rerun
    "launcher.": Declared(PROCEDURE),
    "launcher.nnodes": Declared(MEASURED, by="gpu_count"),
    "launcher.host_memory_reserve_gb": Declared(PLUMBING),  # a guard on the host
    "tracking.": Declared(PLUMBING),
    RAN_BATCH: Declared(MEASURED),
}

# The stack a run measured on: the environment, not its config. Short name (compare's `by=`, the
# variant label) -> the run tag. Software: the framework and libraries that run the step, and the
# driver under them; the card: the device detected and its enforced power limit (docs/compare.md
# says why each changes a figure).
SOFTWARE = {
    "torch": "torch_version",
    "torchvision": "torchvision_version",
    "transformers": "transformers_version",
    "cuda": "cuda_version",
    "cudnn": "cudnn_version",
    "nccl": "nccl_version",
    "nccl_settings": "nccl_settings",  # the variables NCCL ran under, on GPUs that talk through it
    "driver": "driver_version",
}
CARD = {"gpu_name": "gpu_name", "power_limit": "power_limit_w", "cpu": CPU_MODEL}
STACK = SOFTWARE | CARD
STACK_NAMES = {tag: name for name, tag in STACK.items()}

# Run tags that are point fields: the stack, and how the job was laid out (nodes: the ranks per
# node follow from the point's gpu_count; a CPU job's threads). A run without one (published rows,
# runs from before the tag) compares as the tag's default: none for the stack, one node.
TAGS: dict[str, Declared] = {name: Declared(MEASURED, default=None) for name in STACK.values()} | {
    "nnodes": Declared(MEASURED, default=1),
    CPU_THREADS: Declared(MEASURED, default=None),
}


def declared(key: str, table: dict[str, Declared] | None = None) -> Declared | None:
    """The entry for `key`: its own, else its longest declared prefix; None if there is none."""
    table = KEYS if table is None else table
    if key in table:
        return table[key]
    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        if (entry := table.get(".".join(parts[:n]) + ".")) is not None:
            return entry
    return None


def role_of(key: str) -> Declared:
    """The declaration of a config key; raises for a key nobody declared."""
    entry = declared(key)
    if entry is None:
        raise LookupError(
            f"{key}: no role declared in src/config/points.py (measured, procedure or plumbing)"
        )
    return entry


def at_default(entry: Declared, value: Any) -> bool:
    """Whether the key sits at its declared default (a logged string too)."""
    return entry.default is not NO_DEFAULT and (value == entry.default or value == str(entry.default))


def hashed(data: dict, prefix: str = "") -> dict:
    """The config as the resume hash sees it: a copy without plumbing, nor keys at their default."""
    kept = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            if (subtree := KEYS.get(f"{name}.")) is not None and subtree.role == PLUMBING:
                continue
            kept[key] = hashed(value, f"{name}.")
            continue
        entry = role_of(name)
        if entry.role != PLUMBING and not at_default(entry, value):
            kept[key] = value
    return kept


def point_config(params: dict[str, str], tags: dict[str, str] | None = None) -> tuple:
    """The point's measured configuration from a run's logged params and tags (the one key that
    compare's grouping, its pairings and resume use): sorted (key, value) pairs of every measured
    key that stands for itself, the batch that ran among them, and the point's tags. A key a run
    lacks is at its default."""
    config = {}
    for key, value in params.items():
        if _in_point(declared(key), value):
            config[key] = value
    if RAN_BATCH not in config and "model.batch_size" in params:  # runs logged before the param
        config[RAN_BATCH] = params["model.batch_size"]
    for name, value in (tags or {}).items():
        if _in_point(TAGS.get(name), value):
            config[f"tag:{name}"] = value
    return tuple(sorted((key, value) for key, value in config.items() if value != "None"))


def differences(one: tuple, other: tuple) -> tuple[str, str]:
    """What sets two point configurations apart, as each side's labels: ("torch=2.14.1", "torch=2.13.0");
    a key one side lacks shows its default (a tag without one: "unrecorded")."""
    a, b = dict(one), dict(other)
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    return tuple(", ".join(f"{label(k)}={side.get(k, shown_default(k))}" for k in keys) for side in (a, b))


def shown_default(key: str) -> Any:
    """How a point without the key shows it: the default it is at."""
    if key.startswith("tag:"):
        default = TAGS[key.removeprefix("tag:")].default
        return "unrecorded" if default is None else default
    entry = declared(key)
    if entry is None or entry.default is NO_DEFAULT:
        return "unrecorded"
    return "null" if entry.default is None else entry.default


def procedure_config(params: dict[str, str]) -> tuple:
    """How a run's figure was taken: sorted (key, value) pairs of its procedure keys (warm-up,
    stopping rule, telemetry sampling), less the repeat's number and the launcher's rendezvous.
    Repeats of a point may differ in it; compare says where they do."""
    return tuple(
        sorted(
            (key, value)
            for key, value in params.items()
            if (entry := declared(key)) is not None
            and entry.role == PROCEDURE
            and key != REPEAT
            and not key.startswith("launcher.")
        )
    )


def _in_point(entry: Declared | None, value: Any) -> bool:
    return entry is not None and entry.role == MEASURED and entry.by is None and not at_default(entry, value)


def setting_tags(cfg) -> dict[str, Any]:
    """The run tags of the measured settings (`compile`, ...), each left out at its default."""
    tags = {}
    for key, entry in KEYS.items():
        if entry.tag is None:
            continue
        value = _lookup(cfg, key)
        if not at_default(entry, value):
            tags[entry.tag] = value
    return tags


def drop_unused(cfg) -> None:
    """Reset (in place) each key whose switch is off to its default: it was not used."""
    for key, entry in KEYS.items():
        if entry.needs is not None and not _lookup(cfg, entry.needs):
            group, name = key.rsplit(".", 1)
            _lookup(cfg, group)[name] = entry.default


def label(key: str) -> str:
    """A measured key's name in the variant labels compare shows ("d_model", "compile", ...)."""
    if key.startswith("tag:"):
        name = key.removeprefix("tag:")
        return STACK_NAMES.get(name, name)
    return key.split(".", 1)[1] if "." in key else key


def _lookup(cfg, dotted: str):
    node = cfg
    for part in dotted.split("."):
        node = node[part]
    return node
