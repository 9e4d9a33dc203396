"""Do torch and torchvision belong together, and do torchvision's compiled ops load?

A torchvision wheel is built against one torch release (torchvision 0.N goes with torch 2.(N-15))
and one build of it (+cpu, +cu130, ...). Installed from different indexes, the pair imports but
its C++ ops are missing, and the first detection model dies in a rank with `operator
torchvision::nms does not exist`. This check says so in one line, with the command that mends it.

    python -m src.rank.stack_check [--without-gpu]   prints {"torch": ..., "torchvision": ..., "problem": ...}

The elastic agents' preloader runs it once before any job's ranks start (src/rank/agent.py);
`python -m src.doctor` runs it as a subprocess, so that a crashing import cannot take it down.
"""

from __future__ import annotations

import functools
import gc
import importlib.metadata
import json
import re
import sys
import urllib.error
import urllib.request

TORCHVISION_MINOR_OFFSET = 15  # torchvision 0.26 <-> torch 2.11, 0.29 <-> 2.14
WHEEL_INDEX = "https://download.pytorch.org/whl"
INDEX_TIMEOUT_S = 3
WHEELS_DIR = "torch-wheels"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _release(version: str) -> tuple[int, int]:
    major, minor = re.match(r"(\d+)\.(\d+)", version).groups()
    return int(major), int(minor)


def _local(version: str) -> str | None:
    """The build tag after '+': cpu, cu130, rocm6.4; None for a plain PyPI wheel."""
    return version.partition("+")[2] or None


def cpu_build_command(torch_version: str) -> str:
    """The pip command that replaces this torch (and its torchvision) with the CPU build of its release."""
    major, minor = _release(torch_version)
    pins = f"'torch=={major}.{minor}.*' 'torchvision==0.{minor + TORCHVISION_MINOR_OFFSET}.*'"
    pins = pins if major == 2 else "torch torchvision"
    return f"pip install --force-reinstall --no-deps {pins} --index-url {WHEEL_INDEX}/cpu"


def reinstall_hint(torch_version: str) -> str:
    """The pip command that installs the torchvision made for this torch, from the same index."""
    major, minor = _release(torch_version)
    pin = f"torchvision==0.{minor + TORCHVISION_MINOR_OFFSET}.*" if major == 2 else "torchvision"
    local = _local(torch_version)
    index = f" --index-url {WHEEL_INDEX}/{local}" if local else ""
    return f"pip install --force-reinstall --no-deps '{pin}'{index}"


def index_unreachable(index: str) -> str | None:
    """Why the package index at `index` does not answer from here (through the proxy the
    environment names, as pip goes), or None."""
    request = urllib.request.Request(f"{index}/", method="HEAD")
    try:
        urllib.request.build_opener().open(request, timeout=INDEX_TIMEOUT_S).close()  # today's proxy settings
    except urllib.error.HTTPError:
        return None  # it answered
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        return getattr(reason, "strerror", None) or str(reason)
    return None


def where_reachable(command: str) -> str:
    """A pip command naming PyTorch's index, as it is where the index answers; where it does not,
    the same wheels fetched on a machine that reaches it and installed here from the folder."""
    index = command.partition(" --index-url ")[2]
    why = index_unreachable(index) if index else None
    if why is None:
        return command
    download = command.replace("pip install --force-reinstall", "pip download", 1)
    return (
        f"PyTorch's index {index} cannot be reached from here ({why}): on a machine that reaches it, "
        f"with this Python and platform, {download} -d {WHEELS_DIR}; copy {WHEELS_DIR}/ here and run "
        f"pip install --force-reinstall --no-deps {WHEELS_DIR}/*.whl (or point --index-url at a mirror of it)"
    )


def _version_problem(torch_version: str, vision_version: str) -> str | None:
    t_major, t_minor = _release(torch_version)
    v_major, v_minor = _release(vision_version)
    if t_major == 2 and (v_major, v_minor - TORCHVISION_MINOR_OFFSET) != (0, t_minor):
        return f"torchvision {vision_version} is not made for torch {torch_version}"
    t_local, v_local = _local(torch_version), _local(vision_version)
    if t_local and v_local and t_local != v_local:
        return f"torchvision {vision_version} ({v_local}) and torch {torch_version} ({t_local}) are different builds"
    return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _ops_problem(torch) -> tuple[str | None, str | None]:
    """(torchvision's own version string, the first line of the error if its ops fail): import it
    (its meta registrations fail there when the compiled library is missing) and call one op, as a
    detection model's loss does."""
    try:
        import torchvision
        import torchvision.ops

        torchvision.ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
    except Exception as exc:
        return None, _first_line(exc)
    return getattr(torchvision, "__version__", None), None


@functools.cache
def report() -> dict:
    """{"torch", "torchvision": versions or None, "problem": one line naming the fix, or None,
    "cuda": the CUDA torch was built for or None, "cpu_build": the command that installs its CPU build}."""
    found = {"torch": _version("torch"), "torchvision": _version("torchvision"), "problem": None}
    found |= {"cuda": None, "cpu_build": None}
    try:
        import torch
    except Exception as exc:
        found["problem"] = f"torch does not import ({_first_line(exc)}): reinstall it (README, Install)"
        return found
    found["torch"] = torch_version = torch.__version__  # with its build tag (+cu130), unlike the metadata
    found["cuda"] = torch.version.cuda  # the CUDA it was built for; None in a CPU build
    found["cpu_build"] = cpu_build_command(torch_version)
    if found["torchvision"] is None:
        found["problem"] = f"torchvision is not installed: {where_reachable(reinstall_hint(torch_version))}"
        return found
    why = _version_problem(torch_version, found["torchvision"])
    if why is None:
        version, failed = _ops_problem(torch)
        found["torchvision"] = version or found["torchvision"]
        if failed is not None:
            why = f"torchvision {found['torchvision']}'s compiled ops do not load ({failed})"
        else:
            why = _version_problem(torch_version, found["torchvision"])  # now with its build tag
    if why is not None:
        found["problem"] = f"{why}: reinstall it with {where_reachable(reinstall_hint(torch_version))}"
    return found


def problem() -> str | None:
    return report()["problem"]


def host_report(gpu_here: bool) -> dict:
    """report(), and on a host without a GPU its CPU build's command as it works from here."""
    found = dict(report())
    if not gpu_here and found["cuda"]:
        found["cpu_build"] = where_reachable(found["cpu_build"])
    return found


if __name__ == "__main__":
    gc.disable()  # a one-shot import of torch and torchvision: no garbage collection in it
    print(json.dumps(host_report(gpu_here="--without-gpu" not in sys.argv[1:])))
