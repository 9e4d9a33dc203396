"""The driver of the config checks: every group's own (beside its schema, src/config/groups/) and
keys added beside a schema, naming the key, the value and what is allowed."""

from __future__ import annotations

import dataclasses
import re

from omegaconf import DictConfig, OmegaConf

from src.config.checks import Errors
from src.config.groups import benchmark, gpu, launcher, model, precision, telemetry, tracking
from src.errors import ConfigError

GROUPS = (gpu, model, precision, benchmark, telemetry, tracking, launcher)  # each with check(cfg, errors)
# Names that become the run's name, its metric keys (throughput/<model>/<precision>/x<count>) and
# file names: what MLflow takes in a key on every backend, and no path of its own.
NAMED = ("gpu.name", "model.name", "benchmark.name")  # precision.name is one of a list
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def validate(cfg: DictConfig) -> None:
    """Range and cross-group checks; raises ConfigError naming key, value and what is allowed."""
    errors = Errors(unknown_keys(cfg))
    for key in NAMED:
        value = OmegaConf.select(cfg, key)
        allowed = "a name of up to 64 letters, digits, '_', '-' and '.', starting with a letter or digit"
        errors.need(isinstance(value, str) and NAME.fullmatch(value) is not None, key, value, allowed)
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
