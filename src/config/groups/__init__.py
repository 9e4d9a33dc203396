"""The config groups, one module each: the dataclass Hydra types the group against (its keys and
their defaults) and `check(cfg, errors)`, the group's range and cross-group checks. The driver that
runs them all is src/config/validate.py; the root schema that holds them is src/config/schema.py."""
