"""The host's processes, cores and memory, read from /proc (Linux): how many threads a CPU rank
gets, how much memory the ranks hold and how much the host has left. Every reader answers None
where /proc cannot tell."""

from __future__ import annotations

import os
from pathlib import Path


def meminfo() -> dict[str, int] | None:
    """/proc/meminfo in bytes (MemTotal, MemAvailable, ...)."""
    try:
        with open("/proc/meminfo") as f:
            return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f}  # kB
    except (OSError, ValueError, IndexError):
        return None


def threads_per_rank(ranks: int, requested: int | None = None) -> int:
    """Intra-op threads for each of `ranks` CPU ranks: `requested` (benchmark.cpu_threads), else
    the cores this process may use (its affinity: a Slurm or container cpuset, not the whole
    machine's count) shared among them."""
    return requested or max(1, len(os.sched_getaffinity(0)) // ranks)


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat from the third (state) on; None for a gone or zombie process."""
    try:  # the name in parentheses may hold spaces: the fields start after its last ')'
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] == "Z" else fields


def session_rss_bytes(session_id: int) -> int:
    """Resident memory of every live process in a process session (the ranks and what they started)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        fields = _stat(int(entry))
        if fields is not None and int(fields[3]) == session_id:
            total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE")  # rss, in pages
    return total
