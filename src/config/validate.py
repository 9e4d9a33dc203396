"""The driver of the config checks: every group's own (beside its schema, src/config/groups/) and
keys added beside a schema, naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses

from omegaconf import DictConfig, OmegaConf

from src.config.checks import Errors
from src.config.groups import benchmark, gpu, launcher, model, precision, telemetry, tracking
from src.errors import ConfigError

GROUPS = (gpu, model, precision, benchmark, telemetry, tracking, launcher)  # each with check(cfg, errors)


def validate(cfg: DictConfig) -> None:
    """Range and cross-group checks; raises ConfigError naming key, value and what is allowed."""
    errors = Errors(unknown_keys(cfg))
    for group in GROUPS:
        group.check(cfg, errors)
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
