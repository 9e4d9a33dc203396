"""The project's error types, and how an entry point reports one: a line on stderr, exit status 2.

Exit statuses are documented in docs/failures.md.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import NoReturn

from src.tracking.credentials import redact

JOB_FAILED = 1  # a job failed (a sweep: any point did), and said why
USAGE_ERROR = 2  # bad input or an unusable store: nothing was run
RESULT_SPOOLED = 3  # measured, but the result waits on disk for `python -m src.sync`


class ConfigError(ValueError):
    """A config value that cannot run; the message names key, value and what is allowed."""


class DeviceUnavailable(ConfigError):
    """The host lacks the GPUs a gpu profile asks for. A single run stops; a sweep skips the point."""

    def __init__(self, profile: str, needs: str, host: str):
        self.shortfall = f"needs {needs}; this host has {host}"
        self._parts = (profile, needs, host)
        super().__init__(f"gpu={profile} {self.shortfall}")

    def __reduce__(self):  # pickled with its own arguments: a Slurm job's error travels back this way
        return type(self), self._parts


class TrackingUnavailable(RuntimeError):
    """The tracking store cannot be reached before a job starts: nothing is run."""


class RankFailure(RuntimeError):
    """A rank raised, died or hung; the message carries its traceback or exit reason."""


class JobFailed(RuntimeError):
    """A job failed after opening its run: its FAILED line is printed and its run ended FAILED
    with the reason (the cause is chained), so nothing more needs showing."""


@dataclass(frozen=True)
class PointFailed:
    """What a sweep's job returns for a point that failed and said why (its `error:` or FAILED line).

    Returned, not raised: Hydra takes a raised exception for the whole sweep's failure, skipping
    on_multirun_end (the summary) and printing a traceback, twice. The sweep's exit status says it.
    """

    reason: str
    has_run: bool  # its run was opened (and ended FAILED); else only the sweep's summary shows it


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one redacted line for a person: its first line (cut between words past
    `limit` characters), or its type's name."""
    text = redact(str(exc)).strip()
    if not text:
        return type(exc).__name__
    line = text.splitlines()[0]
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " ..."


def exit_with_error(exc: BaseException) -> NoReturn:
    """Print `error: ...` (whole message, redacted) and exit with USAGE_ERROR."""
    print(f"error: {redact(str(exc) or type(exc).__name__)}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR) from None
