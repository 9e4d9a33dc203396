"""Which process owns a run, and closing the runs whose owner has gone.

A run is RUNNING until its process ends it; a process killed hard (SIGKILL, the OOM killer, a
power cut) never does. Every run gpubench opens carries its owner (host, pid, the process's start
time), so the next command that opens a run in the store (a job, a sweep, compare, an import) and
`python -m src.sync` can tell a run still being written from one nobody will end, and end the
latter KILLED. Runs of other hosts are left alone: from here there is no telling whether their
process lives.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

from src import console
from src.results import recorded
from src.tracking import store

VANISHED = "owner process vanished"
_checked: set[str] = set()  # the stores this process has closed the vanished runs of


def process_started(pid: int) -> str | None:
    """When process `pid` started, in seconds since the epoch ("%.2f"); None if no such process (or a
    zombie). A pid is reused once its process has gone: the pair (pid, start time) names one process."""
    try:  # the name in parentheses may hold spaces: the fields start after its last ')'
        state, *fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        with open("/proc/stat") as f:
            boot = next(int(line.split()[1]) for line in f if line.startswith("btime "))
    except (OSError, IndexError, StopIteration, ValueError):
        return None
    return None if state == "Z" else f"{boot + int(fields[18]) / os.sysconf('SC_CLK_TCK'):.2f}"


def tags() -> dict[str, str]:
    """This process as the owner of the runs it opens."""
    pid = os.getpid()
    return {
        recorded.OWNER_HOST: socket.gethostname(),
        recorded.OWNER_PID: str(pid),
        recorded.OWNER_STARTED: process_started(pid) or "",
    }


def vanished(run_tags: dict[str, str]) -> bool:
    """True when the run's owner ran on this host and that process is gone (its pid dead, or reused
    by a process started at another time)."""
    if run_tags.get(recorded.OWNER_HOST) != socket.gethostname() or not run_tags.get(recorded.OWNER_STARTED):
        return False  # another host's process, or a start time this host could not read
    return process_started(int(run_tags[recorded.OWNER_PID])) != run_tags.get(recorded.OWNER_STARTED)


def close_vanished(uri: str, experiment_ids: list[str] | None = None) -> int:
    """End KILLED, with error=owner process vanished, every RUNNING run of these experiments (all:
    None) whose owner on this host is gone; returns how many. Store errors: TrackingUnavailable."""

    def close() -> list:
        client = store.client(uri)
        ids = experiment_ids or [e.experiment_id for e in client.search_experiments()]
        if not ids:
            return []
        ours = f"attributes.status = 'RUNNING' and tags.`{recorded.OWNER_HOST}` = '{socket.gethostname()}'"
        running = store.every_run(client, ids, ours)
        closed = [run for run in running if vanished(run.data.tags)]
        for run in closed:  # repeating this after a failure is harmless
            client.set_tag(run.info.run_id, recorded.ERROR, VANISHED)
            client.set_terminated(run.info.run_id, "KILLED")
        return closed

    closed = store.at_start(close, uri)
    if closed:
        names = ", ".join(run.info.run_name for run in closed[:5]) + (", ..." if len(closed) > 5 else "")
        console.note(f"ended {len(closed)} run(s) KILLED whose process had vanished: {names}")
    return len(closed)


def close_vanished_once(uri: str) -> None:
    """close_vanished in every experiment of the store, the first time this process opens a run there."""
    if uri not in _checked:
        close_vanished(uri)
        _checked.add(uri)
