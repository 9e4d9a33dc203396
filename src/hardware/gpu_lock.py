"""One job at a time on a GPU: a benchmark must not measure two jobs sharing a device.

A job holds an exclusive lock per GPU while its ranks run (set-up, warm-up, measurement); a second
job that wants the same GPU waits for it and says so. The lock is an flock on a file named by the
GPU's UUID in the system's temp folder, shared by every checkout and user of the host (a folder
under multirun/ would keep jobs of two checkouts apart); the kernel releases it when its process
ends, however it ends. The file holds the current holder's name for the waiting job to print.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import tempfile
import time
from pathlib import Path

from src import console
from src.hardware.devices import Device

LOCK_DIR = Path(tempfile.gettempdir()) / "gpubench-gpu-locks"


@contextlib.contextmanager
def exclusive(devices: list[Device], holder: str):
    """Hold every device's lock for the block, which gets the seconds spent waiting; `holder` (the
    run name) tells waiting jobs who has it.

    Taken in PCI bus order, so two jobs that want overlapping sets of GPUs cannot deadlock.
    """
    started = time.monotonic()
    with contextlib.ExitStack() as held:
        for device in sorted(devices, key=lambda d: d.pci_bus_id.lower()):
            held.enter_context(_lock(device, holder))
        yield time.monotonic() - started


@contextlib.contextmanager
def _lock(device: Device, holder: str):
    with _open(LOCK_DIR / f"{device.uuid}.lock") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            file.seek(0)
            other = file.read().strip() or "another job"
            console.note(f"waiting for GPU {device.pci_bus_id} ({device.name}): {other} is running on it")
            fcntl.flock(file, fcntl.LOCK_EX)  # Ctrl-C or SIGTERM still interrupts the wait
            console.note(f"GPU {device.pci_bus_id} is free: {holder} starts")
        file.truncate(0)
        file.write(f"{holder} (pid {os.getpid()} on {socket.gethostname()})")
        file.flush()
        yield


def _open(path: Path):
    """The lock file, created readable and writable by every user (jobs of other users share it)."""
    path.parent.mkdir(exist_ok=True)
    with contextlib.suppress(OSError):
        path.parent.chmod(0o1777)  # like /tmp itself: anyone creates, only the owner removes
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(fd, 0o666)
    return os.fdopen(fd, "r+")
