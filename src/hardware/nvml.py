"""NVML, the driver's management library, as the job process uses it: opened on demand, every call guarded.

NVML reads the GPUs without creating a CUDA context, so the job process may use it freely while
the ranks own the devices. A host without it (no driver, a container without GPUs) gets one notice
per process and None instead of the library; a function that this driver or GPU lacks answers None.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

# nvml.h return codes after which asking again is pointless
NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND = 3, 4, 13
_PERMANENT = {NOT_SUPPORTED, NO_PERMISSION, FUNCTION_NOT_FOUND}
# nvml.h enums: nvmlClockType_t, nvmlTemperatureSensors_t, nvmlPcieUtilCounter_t
CLOCK_SM, CLOCK_MEM = 1, 2
TEMPERATURE_GPU = 0
PCIE_TX, PCIE_RX = 0, 1

_notice_shown = False


@contextlib.contextmanager
def session() -> Iterator[Any]:
    """The initialised `pynvml` module for the block, or None when this host has no usable NVML."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # ImportError, library or driver missing: a host without NVIDIA GPUs
        _notice_missing(exc)
        yield None
        return
    try:
        yield pynvml
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def _notice_missing(exc: Exception) -> None:
    global _notice_shown
    if _notice_shown:
        return
    _notice_shown = True
    from src import console

    reason = str(exc) or type(exc).__name__
    console.warning(
        f"NVML is not available ({reason}): no GPU is visible to this process and no GPU telemetry "
        "is recorded; CPU-side figures are still logged."
    )


def text(value: Any) -> str | None:
    """NVML strings arrive as bytes from older bindings and str from newer ones; None stays None."""
    if value is None:
        return None
    return value.decode() if isinstance(value, bytes) else str(value)


def scaled(value: float | None, factor: float) -> float | None:
    """A reading in NVML's unit (mW, mJ, KB/s) in ours; None stays None."""
    return None if value is None else value * factor


class Caller:
    """Calls NVML functions by name, for one device handle (or none, for system queries).

    A missing function or an unsupported query answers None and is not asked again; any other
    error answers None for this call only (a transient timeout must not end the series).
    """

    def __init__(self, lib: Any, handle: Any = None):
        self.lib, self.handle = lib, handle
        self._dead: set[tuple] = set()

    def __call__(self, name: str, *args: Any) -> Any:
        # handles (unhashable ctypes pointers) count as one argument value: unsupported for one
        # pair of GPUs means unsupported for all
        key = (name, *(a if isinstance(a, (int, str)) else type(a).__name__ for a in args))
        if key in self._dead:
            return None
        fn = getattr(self.lib, name, None)
        if fn is None:
            self._dead.add(key)
            return None
        try:
            return fn(self.handle, *args) if self.handle is not None else fn(*args)
        except Exception as exc:
            if getattr(exc, "value", None) in _PERMANENT:
                self._dead.add(key)
            return None

    def first(self, names: tuple[str, ...], *args: Any) -> Any:
        """The first of several equivalent functions that answers (NVML renames some over time)."""
        for name in names:
            value = self(name, *args)
            if value is not None:
                return value
        return None
