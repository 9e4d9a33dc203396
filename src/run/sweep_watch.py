"""A job process that a parallel launcher started (joblib's loky workers) ends with its sweep.

Killed hard (SIGKILL, the OOM killer), the sweep's main process runs no cleanup, and its launcher's
workers are left to themselves: they would train on for minutes, hold their GPUs and preloaders,
and log results under a parent run nobody ends. A worker therefore watches the sweep's main process
(its parent, through a pidfd); when that dies, a job under way is stopped as SIGTERM stops it (its
ranks stopped, its run ended KILLED), the sweep's parent run is ended KILLED as an orphan, and the
worker exits, taking its preloader with it (that one dies with its parent).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Iterator

from src.run import signals
from src.tracking import owner

SWEEP_PID_ENV = "GPUBENCH_SWEEP_PID"  # the sweep's main process; its launcher's workers inherit it
_watching: list[str] = []  # the tracking URI, once this process watches
_in_job = threading.Event()
_sweep_died = threading.Event()


def mark_sweep_process() -> None:
    """In the process that runs Hydra: name it as the one its workers watch."""
    os.environ[SWEEP_PID_ENV] = str(os.getpid())


def watch(uri: str) -> None:
    """Start watching the sweep's main process, if it is this process's parent (a launcher's worker
    on this host; not the main process itself, nor a Slurm job, whose parent is Slurm's)."""
    sweep_pid = int(os.environ.get(SWEEP_PID_ENV) or 0)
    if _watching or not sweep_pid or sweep_pid == os.getpid() or os.getppid() != sweep_pid:
        return
    try:
        sweep = os.pidfd_open(sweep_pid)
    except OSError:  # already gone
        sweep = None
    _watching.append(uri)
    threading.Thread(target=_wait_for_end, args=(sweep,), name="sweep-watch", daemon=True).start()


@contextlib.contextmanager
def job() -> Iterator[None]:
    """Around one job: if the sweep dies meanwhile, the job is interrupted and this process exits
    once it has closed its run."""
    _in_job.set()
    try:
        yield
    finally:
        _in_job.clear()
        if _sweep_died.is_set():
            _end_worker()


def _wait_for_end(sweep: int | None) -> None:
    if sweep is not None:
        select.select([sweep], [], [])
    _sweep_died.set()
    if _in_job.is_set():
        os.kill(os.getpid(), signal.SIGTERM)  # the job stops as under a scheduler's SIGTERM; job() exits
    else:
        _end_worker()


def _end_worker() -> None:
    with contextlib.suppress(Exception):  # the store may be away: src.sync or the next job ends it
        owner.close_vanished(_watching[0])
    os._exit(signals.exit_code() if signals.received() else 128 + signal.SIGTERM)
