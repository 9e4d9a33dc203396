"""A job's processes, read from /proc (Linux; no psutil needed): its ranks, and who outlives it.

A job's ranks run under an elastic agent in a session of its own; once the job process exits they
are re-parented to init and can no longer be found by walking down from it. So the tree is watched
while the job runs, and whatever was seen is checked for survivors afterwards. The drills in
benchmarks/fault_drill.py and the CPU tests in tests/test_robust.py share this.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

# torch's elastic agent sends each rank's stdout to <log dir>/<run>/attempt_<n>/<local rank>/stdout.log
RANK_STDOUT = re.compile(r"/attempt_\d+/(\d+)/stdout\.log$")


def proc_table() -> dict[int, tuple[int, int, str]]:
    """pid -> (parent pid, start time, state) for live processes (zombies count as gone)."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:  # the name in parentheses may hold spaces: the fields start after its last ')'
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":
                table[int(entry)] = (int(fields[1]), int(fields[19]), fields[0])
    return table


def descendants(root: int, table: dict[int, tuple[int, int, str]]) -> list[int]:
    """Live descendants of `root` in `table` (children first), `root` itself left out."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, frontier = [], list(children.get(root, []))
    while frontier:
        pid = frontier.pop(0)
        found.append(pid)
        frontier += children.get(pid, [])
    return found


def rank_processes(job_pid: int) -> dict[int, int]:
    """local rank -> pid of the job's live ranks, told apart by the log their stdout goes to."""
    ranks: dict[int, int] = {}
    for pid in descendants(job_pid, proc_table()):  # parents first: a rank before its own children
        try:
            match = RANK_STDOUT.search(os.readlink(f"/proc/{pid}/fd/1"))
        except OSError:  # gone meanwhile
            continue
        if match:
            ranks.setdefault(int(match.group(1)), pid)
    return ranks


class ProcessTree:
    """Records every process started under `root` while it runs, to show that none outlives it."""

    def __init__(self, root: int, interval_s: float = 0.1):
        self.root, self.seen = root, {}  # pid -> start time (tells a reused pid apart)
        self._interval_s = interval_s
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(self._interval_s):
            table = proc_table()
            for pid in descendants(self.root, table):
                self.seen.setdefault(pid, table[pid][1])

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def alive(self) -> list[int]:
        """The processes seen under the root that still run (the same process, not a reused pid)."""
        table = proc_table()
        return [pid for pid, start in self.seen.items() if pid in table and table[pid][1] == start]
