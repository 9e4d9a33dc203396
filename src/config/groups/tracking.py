"""The tracking group: where runs go (an MLflow store or server), and the checks of its keys, which
every entry point shares (a sweep checks them before its parent run, compare and import before
they read or write)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from omegaconf import MISSING, DictConfig

from src.config.checks import Errors, positive_int
from src.tracking.credentials import redact

URI_FORMS = (
    "must be sqlite:////absolute/path/mlflow.db, http(s)://host[:port][/path], "
    "databricks, or postgresql|mysql|mssql://host/database"
)


@dataclass
class TrackingConfig:
    uri: str = MISSING
    experiment: str = "gpubench"
    published_experiment: str = "gpubench-published"  # imported results; src.compare reads both
    report_experiment: str = "gpubench-reports"  # src.compare's report runs, apart from the measured ones
    retries: int = 4  # attempts to deliver a job's result at its end before it waits in the spool
    backoff_s: float = 2.0  # first wait between attempts; doubles each time


def check(cfg: DictConfig, errors: Errors) -> None:
    errors += tracking_errors(cfg.tracking)


def tracking_errors(t: DictConfig) -> list[str]:
    """Problems with the tracking keys, shared by every entry point (a sweep checks them before its parent run)."""
    errors = Errors()
    problem = uri_problem(t.uri)
    if problem:
        errors.append(f"tracking.uri={redact(t.uri)!r}: {problem}")
    errors.need(bool(t.experiment), "tracking.experiment", t.experiment, "a non-empty name")
    errors.need(positive_int(t.retries), "tracking.retries", t.retries, "a positive integer")
    errors.need(t.backoff_s >= 0, "tracking.backoff_s", t.backoff_s, ">= 0 seconds")
    return errors


def uri_problem(uri: str) -> str | None:
    """What is wrong with `uri` as a tracking store's address, or None."""
    try:
        parts = urlsplit(uri)
    except ValueError as exc:  # an unclosed [ of an IPv6 address
        return f"not an address ({exc}); {URI_FORMS}"
    scheme = parts.scheme.split("+")[0]  # postgresql+psycopg2://...
    if scheme == "sqlite":
        path = uri.removeprefix("sqlite:///")
        if path == uri or not Path(path).is_absolute():
            return f"an sqlite store needs an absolute path (four slashes); {URI_FORMS}"
        return _unwritable(Path(path))
    if scheme == "file":  # MLflow 3.13+ refuses a folder store unless forced, and then runs one job
        folder = Path(parts.path) if parts.path.startswith("/") else Path("/abs/path")
        return (
            "MLflow's folder stores are not supported here; use an sqlite file in that folder instead, "
            f"tracking.uri=sqlite:///{folder / 'mlflow.db'}"
        )
    if scheme in ("http", "https", "postgresql", "mysql", "mssql"):
        try:
            return (
                None if parts.hostname and (parts.port is None or parts.port > 0) else f"no host; {URI_FORMS}"
            )
        except ValueError:
            return "the port must be a number from 1 to 65535"
    if uri == "databricks" or scheme in ("databricks", "databricks-uc"):
        return None
    return f"{'unknown scheme ' + repr(parts.scheme) if parts.scheme else 'no scheme'}; {URI_FORMS}"


def _unwritable(path: Path) -> str | None:
    """Why `path` (a file to create or update) cannot be written, or None."""
    if path.exists():
        if not path.is_file():
            return f"{path} cannot be written: not a file"
        try:  # opened for update, not changed: the error names the cause (permissions, read-only mount)
            with open(path, "r+b"):
                return None
        except OSError as exc:
            return f"{path} cannot be written ({exc.strerror})"
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not a folder this user can write into"
    return None
