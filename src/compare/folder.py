"""The folder a comparison writes into is its own: one compare at a time writes there, and it holds
only what compare wrote. Each file is recorded in `.compare-files` before it is written, so a compare
killed or failed midway leaves a folder the next one takes over: that one removes the files the
record names (plain names of files in this folder only: never a path, `..`, or what a link points
to; said in one line) before writing its own. A folder holding anything else is refused, as is one
another compare is writing into now, so a report run logs the files its own comparison wrote."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from src.console import note
from src.errors import ConfigError
from src.paths import user_folder

WRITTEN = ".compare-files"  # the names the compares here wrote; locked while a compare runs


class OutFolder(contextlib.AbstractContextManager):
    def __init__(self, path):
        self.path, self.written = Path(user_folder("out", str(path))), []
        try:  # never through a link: the record is this folder's own file
            fd = os.open(self.path / WRITTEN, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
            self._record = os.fdopen(fd, "r+")
        except OSError as exc:
            raise ConfigError(f"out={str(path)!r}: cannot be written ({exc.strerror})") from None
        try:
            fcntl.flock(self._record, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released however the process ends
        except BlockingIOError:
            self._record.close()
            raise ConfigError(
                f"out={str(path)!r}: another compare is writing there now; name another folder, or "
                "leave out= unset (each compare then gets a folder of its own)"
            ) from None
        names = self._record.read().splitlines()
        self.earlier = [
            name for name in names if name not in ("", ".", "..") and os.path.basename(name) == name
        ]
        others = sorted(set(os.listdir(self.path)) - {WRITTEN, *self.earlier})
        if others:
            self._record.close()
            named = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise ConfigError(
                f"out={str(path)!r}: holds files compare did not write ({named}); must be a new or "
                "empty folder, or one an earlier compare wrote (its files are replaced)"
            )

    def _remove(self, names):
        """Remove the named files and links of this folder (a link, not what it points to); how many."""
        removed = 0
        for name in names:
            with contextlib.suppress(OSError):  # gone already, or a folder: left where it is
                os.unlink(self.path / name)
                removed += 1
        return removed

    def clear(self):
        """Remove the earlier comparisons' files, and say so."""
        if removed := self._remove(self.earlier):
            note(f"out={self.path}: removed {removed} file(s) an earlier compare wrote there")
        self._record.truncate(0)

    def new(self, name):
        """The path of a file this comparison writes, recorded first."""
        self._record.write(f"{name}\n")
        self._record.flush()
        self.written.append(self.path / name)
        return self.path / name

    def __exit__(self, kind, exc, trace):
        if exc is not None and self.written:  # a failed compare: what it wrote goes (the earlier went first)
            self._remove([path.name for path in self.written])
            self._record.truncate(0)
        if exc is not None and os.listdir(self.path) == [WRITTEN]:  # nothing left: nor its record
            os.unlink(self.path / WRITTEN)
        self._record.close()
