"""Stop a job before its ranks exhaust the host's memory.

When a host runs out of memory the kernel's OOM killer ends whichever process it picks (often not
the job's, or the whole desktop session), and the job leaves no reason behind. The job process
watches the host's available memory while its ranks run (CPU jobs, and the host side of GPU jobs:
pinned buffers, data, compile workers) and fails the job with its reason once less than
`launcher.host_memory_reserve_gb` is left.
"""

from __future__ import annotations

from src.errors import RankFailure
from src.hardware import host


class HostMemoryExhausted(RankFailure):
    """The host's available memory fell below the reserve while the ranks ran."""


class HostMemoryGuard:
    def __init__(self, session_id: int, reserve_gb: float, batch_size):
        self.session_id, self.reserve_gb, self.batch_size = session_id, reserve_gb, batch_size

    def check(self) -> None:
        """Raise HostMemoryExhausted when the host has less than the reserve left (0: never)."""
        info = host.meminfo()
        if not self.reserve_gb or not info or "MemAvailable" not in info:
            return
        available = info["MemAvailable"]
        if available >= self.reserve_gb * 1e9:
            return
        ranks = host.session_rss_bytes(self.session_id)
        raise HostMemoryExhausted(
            f"host memory exhausted at batch {self.batch_size} per GPU: the ranks held {ranks / 1e9:.1f} GB, "
            f"{available / 1e9:.1f} GB of {info['MemTotal'] / 1e9:.1f} GB was left "
            f"(launcher.host_memory_reserve_gb={self.reserve_gb:g}); ranks stopped"
        )
