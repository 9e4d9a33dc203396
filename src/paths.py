"""Where the project lives and where an sqlite store keeps its database: no path depends on the cwd."""

from __future__ import annotations

import os
from pathlib import Path

from src.errors import ConfigError

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SQLITE_PREFIX = "sqlite:///"


def sqlite_path(uri: str) -> Path | None:
    """The database file of an `sqlite:///...` tracking URI, or None for any other store."""
    return Path(uri.removeprefix(SQLITE_PREFIX)) if uri.startswith(SQLITE_PREFIX) else None


def claim_folder(base: str) -> str:
    """Create a folder no other process has: `base`, else `base-2`, `base-3`, ... (mkdir is atomic).

    Job and sweep folders are named to the second; two commands started in the same second must
    not share one, or each would read the other's files.
    """
    Path(base).parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        candidate = base if n == 1 else f"{base}-{n}"
        try:
            os.mkdir(candidate)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"{base}: 10,000 folders of that name exist already")


def user_folder(key: str, path: str) -> str:
    """`path`, a folder the user named to write into, made if missing; ConfigError naming `key`
    when it is a file or cannot be made or written (checked before any work)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{key}={path!r}: is a file; must be a folder (made when missing)")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{key}={path!r}: cannot be made ({exc.strerror}); must be a folder you can write") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{key}={path!r}: cannot be written; must be a folder you can write")
    return path
