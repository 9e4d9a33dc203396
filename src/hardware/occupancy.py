"""Other programs on the job's GPUs: the compute processes NVML lists that are not the job's own.

The GPU lock keeps gpubench's jobs apart; this sees everything else (a training job, a notebook)
that would lower the figure. Read once before the ranks start (nothing of the job's holds a GPU
yet, so every process listed is foreign) and every second while they run.

Inside a container with its own pid namespace NVML answers host pids, which this namespace cannot
see; the job's own rank is then among them. On a GPU where none of the listed pids is the job's,
one unseen pid per GPU is taken for the job's rank and any more are foreign.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from pathlib import Path

from src.hardware import nvml

POLL_S = 1.0
NOT_AVAILABLE = 2**64 - 1  # NVML's NVML_VALUE_NOT_AVAILABLE for usedGpuMemory (no permission, MIG)


class GpuBusy(RuntimeError):
    """benchmark.exclusive=true and another program uses one of the job's GPUs."""


@dataclass(frozen=True)
class GpuProcess:
    gpu: int  # the job's local device index: gpu<i> is local rank i's GPU
    pid: int
    name: str
    memory_gb: float | None

    def describe(self) -> str:
        memory = f", {self.memory_gb:.2f} GB" if self.memory_gb is not None else ""
        return f"pid {self.pid} {self.name} (gpu{self.gpu}{memory})"


def own_pids(root: int | None = None) -> set[int]:
    """The job process and all its descendants (the preloader, the agent, the ranks)."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
            text = stat.read_text()
            parents.setdefault(int(text[text.rindex(")") + 2 :].split()[1]), []).append(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue  # a process that ended while being read
    own, todo = set(), [root or os.getpid()]
    while todo:
        pid = todo.pop()
        own.add(pid)
        todo.extend(parents.get(pid, []))
    return own


def listed(lib, devices: list) -> dict[int, list[tuple[int, float | None]]]:
    """Per local device index: (pid, GPU memory in GB) of each compute process NVML lists there."""
    found = {}
    for i, device in enumerate(devices):
        call = nvml.Caller(lib, lib.nvmlDeviceGetHandleByIndex(device.index))
        processes = call("nvmlDeviceGetComputeRunningProcesses") or []
        found[i] = [(p.pid, _memory_gb(getattr(p, "usedGpuMemory", None))) for p in processes]
    return found


def _memory_gb(used: int | None) -> float | None:
    return None if used is None or used == NOT_AVAILABLE else used / 1e9


def process_name(lib, pid: int) -> str:
    name = nvml.text(nvml.Caller(lib)("nvmlSystemGetProcessName", pid))
    if not name:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:
            name = "(not visible from this pid namespace)"
    return os.path.basename(name)


def foreign(lib, devices: list, ranks_running: bool) -> list[GpuProcess]:
    """The processes on the devices that are not the job's (see the module note on containers)."""
    own = own_pids()
    found = []
    for gpu, processes in listed(lib, devices).items():
        others = [(pid, memory) for pid, memory in processes if pid not in own]
        if ranks_running and len(others) == len(processes):  # none listed as ours: pids of another namespace
            unseen = [p for p in others if not Path(f"/proc/{p[0]}").exists()]
            if unseen:
                others.remove(max(unseen, key=lambda p: p[1] or 0))  # the job's rank: the largest unseen
        found += [GpuProcess(gpu, pid, process_name(lib, pid), memory) for pid, memory in others]
    return found


def before_start(devices: list, exclusive: bool) -> list[GpuProcess]:
    """What else is on the devices before the ranks start; with `exclusive`, refuse to start."""
    if not devices:
        return []
    with nvml.session() as lib:
        busy = foreign(lib, devices, ranks_running=False) if lib is not None else []
    if busy and exclusive:
        names = "; ".join(p.describe() for p in busy)
        raise GpuBusy(
            f"benchmark.exclusive=true: the job's GPUs are in use by {names}; stop it, or set "
            "benchmark.exclusive=false to measure anyway (the run is then flagged gpu_shared)"
        )
    return busy


class Watch:
    """Polls the devices from a thread while the ranks run; `seen` maps each foreign process to
    the times it was listed."""

    def __init__(self, devices: list, interval_s: float = POLL_S):
        self.devices, self.interval_s = devices, interval_s
        self.seen: dict[GpuProcess, list[float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="occupancy", daemon=True)

    def __enter__(self) -> Watch:
        if self.devices:
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> bool:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return False

    def _run(self) -> None:
        import time

        with nvml.session() as lib:
            if lib is None:
                return
            while True:
                try:
                    for process in foreign(lib, self.devices, ranks_running=True):
                        self.seen.setdefault(process, []).append(time.time())
                except Exception:  # a fault here must end the watching, never the job
                    return
                if self._stop.wait(self.interval_s):
                    return

    def during(self, window: tuple[float, float]) -> list[GpuProcess]:
        """The foreign processes listed within a poll of the measured window."""
        start, end = window[0] - self.interval_s, window[1] + self.interval_s
        return [p for p, times in self.seen.items() if any(start <= t <= end for t in times)]


def describe(before: list[GpuProcess], during: list[GpuProcess]) -> str:
    """The tag's text: each process once, with when it was seen; '' for none."""
    parts = []
    for process in dict.fromkeys(before + during):
        when = [w for w, found in (("before start", before), ("in the window", during)) if process in found]
        parts.append(f"{process.describe()} {' and '.join(when)}")
    return "; ".join(parts)
