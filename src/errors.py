"""The project's error types, and how an entry point reports one: a line on stderr, exit status 2.

Exit statuses are documented in docs/failures.md.
"""

from __future__ import annotations

import sys
from typing import NoReturn

from src.credentials import redact

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


def first_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one redacted line for a person: its first line, or its type's name."""
    text = redact(str(exc)).strip()
    return text.splitlines()[0][:limit] if text else type(exc).__name__


def exit_with_error(exc: BaseException) -> NoReturn:
    """Print `error: ...` (whole message, redacted) and exit with USAGE_ERROR."""
    print(f"error: {redact(str(exc) or type(exc).__name__)}", file=sys.stderr)
    raise SystemExit(USAGE_ERROR) from None
