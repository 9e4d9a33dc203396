"""The folder a comparison writes into is its own: one compare at a time writes there, and it holds
only what compare wrote. An earlier comparison's files are removed (said in one line) before the
new ones are written; a folder holding anything else is refused, as is one another compare is
writing into now, so a report run logs the files its own comparison wrote."""

from __future__ import annotations

import fcntl
import os
from contextlib import AbstractContextManager
from pathlib import Path

from src.console import note
from src.errors import ConfigError
from src.paths import user_folder

WRITTEN = ".compare-files"  # the names the last compare wrote here; locked while a compare runs


class OutFolder(AbstractContextManager["OutFolder"]):
    def __init__(self, path: Path):
        self.path = Path(user_folder("out", str(path)))
        try:
            self._record = open(self.path / WRITTEN, "a+")  # noqa: SIM115 (held until the with block ends)
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
        self._record.seek(0)
        self.earlier = [name for name in self._record.read().splitlines() if name]
        others = sorted(set(os.listdir(self.path)) - {WRITTEN, *self.earlier})
        if others:
            self._record.close()
            named = ", ".join(others[:3]) + (f" and {len(others) - 3} more" if len(others) > 3 else "")
            raise ConfigError(
                f"out={str(path)!r}: holds files compare did not write ({named}); must be a new or "
                "empty folder, or one an earlier compare wrote (its files are replaced)"
            )

    def clear(self) -> None:
        """Remove the earlier comparison's files, and say so."""
        removed = [self.path / name for name in self.earlier if (self.path / name).is_file()]
        for path in removed:
            path.unlink()
        if removed:
            note(f"out={self.path}: removed {len(removed)} file(s) an earlier compare wrote there")

    def record(self, files: list[Path]) -> None:
        """The names this comparison wrote: the next compare into this folder replaces them."""
        self._record.seek(0)
        self._record.truncate()
        self._record.write("".join(f"{path.name}\n" for path in files))
        self._record.flush()

    def __exit__(self, *exc) -> None:
        self._record.close()
