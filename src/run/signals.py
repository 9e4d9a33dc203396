"""Ctrl-C and a scheduler's SIGTERM become one exception, so that a job stops its ranks, ends its
run KILLED and the sweep stops with a non-zero exit code.

Python's default SIGTERM ends the process at once, skipping every `finally` and atexit handler:
runs would stay RUNNING and ranks would be left behind. Once the first signal has arrived, later
ones are ignored so that the cleanup it started (stop the ranks, close the runs) can finish.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

HANDLED = (signal.SIGINT, signal.SIGTERM)
_received: signal.Signals | None = None


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; handled wherever Ctrl-C is."""


def install() -> None:
    """Turn SIGINT and SIGTERM into Interrupted in this process (a no-op outside the main thread)."""
    if threading.current_thread() is threading.main_thread():
        for sig in HANDLED:
            signal.signal(sig, _handle)


def _handle(signum: int, frame) -> None:
    global _received
    if _received is not None:
        print(f"{signal.Signals(signum).name}: already stopping, please wait", file=sys.stderr)
        return
    _received = signal.Signals(signum)
    raise Interrupted(_received.name)


def received() -> signal.Signals | None:
    """The signal that is stopping this process, if any."""
    return _received


def exit_code() -> int:
    """The shell's convention: 128 + the signal number (130 after Ctrl-C, 143 after SIGTERM)."""
    return 128 + (_received or signal.SIGINT)


@contextlib.contextmanager
def held():
    """SIGINT and SIGTERM wait until the block has run: a write that must be whole (one imported
    run) is finished, then the signal is handled as ever (in the main thread only)."""
    pending: list[int] = []
    previous = {sig: signal.signal(sig, lambda signum, frame: pending.append(signum)) for sig in HANDLED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if pending:
            _handle(pending[0], None)
