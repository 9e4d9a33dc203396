"""Entry point: `python -m src.doctor [key=value ...]` checks the install, one line per check.

    ok    torch     torch 2.11.0+cu130 and torchvision 0.26.0+cu130 match; torchvision's compiled ops load
    ok    gpus      NVML sees 1 x NVIDIA H200 (profile h200)
    ok    tracking  sqlite:///.../mlruns/mlflow.db: reachable and writable (experiment gpubench, id 1)
    ok    default   python -m src.train would run h200x1-resnet50-amp (batch 256, benchmark=default, on cuda)

The overrides are those of `python -m src.train` (tracking.uri=..., gpu=a6000): the check is of
what that command would do. Exit status 0 when nothing is broken (a `note` is not), 1 when a check
failed, 2 when the overrides do not compose.
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import logging
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from src import console
from src.config.schema import register_configs
from src.errors import ConfigError, exit_with_error, first_line
from src.paths import PROJECT_ROOT
from src.tracking import credentials

BROKEN = 1
NVIDIA_DRIVER = Path("/proc/driver/nvidia")  # present when the kernel driver is loaded
CHECKED_TAG = "gpubench.doctor_checked"  # the write that proves the store takes writes
CONNECT_TIMEOUT_S = 3  # a store that answers does within it; MLflow's own retries take tens of seconds
STACK_CHECK_TIMEOUT_S = 300  # a first torch import on a cold disk takes tens of seconds
CUDA_BUILD = {"torch", "triton"}  # beside the nvidia-* and cuda-* distributions a CUDA torch requires
NOT_CUDA_BUILD = {"nvidia-ml-py"}  # NVML's bindings: the suite's own, on any host


@dataclass
class Check:
    status: str  # ok | note | FAIL
    name: str
    text: str

    def line(self) -> str:
        return f"{self.status:<5} {self.name:<9} {self.text}"


def stack_report(gpu_here: bool = True) -> dict:
    """stack_check's report, from a subprocess, as the ranks would import torch: a broken build may
    crash the interpreter. `problem` says so when it could not run. On a host without a GPU, its
    `cpu_build` is the fix as it works from here (PyTorch's index may not answer)."""
    paths = [p for p in (os.environ.get("PYTHONPATH", ""), *sys.path) if p]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "src.rank.stack_check", *([] if gpu_here else ["--without-gpu"])],
            env={**os.environ, "PYTHONPATH": os.pathsep.join(paths)},
            cwd=PROJECT_ROOT,
            capture_output=True,
            text=True,
            timeout=STACK_CHECK_TIMEOUT_S,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"problem": f"importing torch took over {STACK_CHECK_TIMEOUT_S} s"}
    except (ValueError, IndexError):
        tail = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        return {"problem": f"importing torch and torchvision failed: {tail}"}


def check_torch(found: dict | None = None) -> Check:
    found = stack_report() if found is None else found
    if found["problem"]:
        return Check("FAIL", "torch", found["problem"])
    return Check(
        "ok",
        "torch",
        f"torch {found['torch']} and torchvision {found['torchvision']} match; "
        "torchvision's compiled ops load",
    )


def check_cuda_build(found: dict, gpu_here: bool) -> Check | None:
    """A CUDA build of torch on a host without a GPU: gigabytes of libraries nothing here will load."""
    if gpu_here or found["problem"] or not found.get("cuda"):
        return None
    return Check(
        "note",
        "torch",
        f"torch {found['torch']} is a CUDA {found['cuda']} build ({cuda_build_bytes() / 1e9:.1f} GB with its CUDA "
        f"libraries) on a host without a GPU; the CPU build does the same work here: "
        f"{found['cpu_build']} (then free the CUDA libraries: docs/deployment.md, CPU-only torch)",
    )


def cuda_build_bytes() -> int:
    """What torch's CUDA build occupies: torch, triton and the CUDA libraries' distributions."""
    total = 0
    for dist in importlib.metadata.distributions():
        name = (dist.metadata["Name"] or "").lower()
        if name in CUDA_BUILD or (name.startswith(("nvidia-", "cuda-")) and name not in NOT_CUDA_BUILD):
            total += sum(f.size or 0 for f in dist.files or [])
    return total


def _nvml_problem() -> str | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
    except Exception as exc:
        return first_line(exc)
    return None


def check_gpus(missing: str | None) -> Check:
    from src.hardware import devices

    if missing is not None:
        if NVIDIA_DRIVER.exists():  # the driver is loaded, so NVML should answer
            return Check("FAIL", "gpus", f"NVML does not start ({missing}) though an NVIDIA driver is loaded")
        return Check("note", "gpus", f"no NVML ({missing}): no GPU here; jobs run on the CPU (gpu=cpu)")
    found = devices.list_devices()
    if not found:
        return Check("note", "gpus", f"NVML sees {devices.host_summary(found)}; jobs run on the CPU")
    profiles = devices.known_profiles()
    described = []
    for name in dict.fromkeys(d.name for d in found):
        fits = [p for p, data in profiles.items() if devices.matches(data, name)]
        n = sum(d.name == name for d in found)
        described.append(
            f"{n} x {name} (profile {', '.join(fits) or 'none: gpu=auto tags it ' + devices.slug(name)})"
        )
    return Check("ok", "gpus", "NVML sees " + ", ".join(described))


def check_tracking(cfg) -> Check:
    import mlflow  # noqa: F401  (it sets its logger's level on import: set ours after)

    from src.config.groups.tracking import tracking_errors
    from src.errors import TrackingUnavailable
    from src.tracking import probe, store

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # its INFO lines on creating a new store
    uri = credentials.bare(cfg.tracking.uri)
    if errors := tracking_errors(cfg.tracking):
        return Check("FAIL", "tracking", "; ".join(errors))
    nothing = probe.silent(cfg.tracking.uri, CONNECT_TIMEOUT_S)
    if nothing:
        return Check(
            "FAIL",
            "tracking",
            f"tracking.uri={uri!r}: the tracking store cannot be reached "
            f"({nothing}); start it, or check tracking.uri",
        )
    try:
        experiment_id = store.ensure_experiment(cfg.tracking.uri, cfg.tracking.experiment)
        stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
        store.client(cfg.tracking.uri).set_experiment_tag(experiment_id, CHECKED_TAG, stamp)
    except TrackingUnavailable as exc:
        return Check("FAIL", "tracking", str(exc).removesuffix("; nothing was run"))
    except ConfigError as exc:  # its experiment deleted
        return Check("FAIL", "tracking", str(exc))
    except Exception as exc:
        return Check("FAIL", "tracking", store.problem(cfg.tracking.uri, exc))
    return Check(
        "ok",
        "tracking",
        f"{uri}: reachable and writable (experiment {cfg.tracking.experiment}, id {experiment_id})",
    )


def check_default(cfg, overrides: list[str], nvml_missing: str | None) -> Check:
    from src.run.job import job_name
    from src.run.prepare import prepare

    # the tracking store has its own line
    command = " ".join(["python -m src.train", *(o for o in overrides if not o.startswith("tracking."))])
    try:
        # without NVML a job sees no GPU (check_gpus said why; list_devices would say it again)
        cfg, selection = prepare(cfg, None if nvml_missing is None else [])
    except ConfigError as exc:
        return Check("FAIL", "default", f"{command} would stop: {first_line(exc)}")
    return Check(
        "ok",
        "default",
        f"{command} would run {job_name(cfg, selection)} (batch {cfg.model.batch_size}, benchmark={cfg.benchmark.name}, "
        f"on {selection.device_kind})",
    )


def compose(overrides: list[str]):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from src.config.cli import composition_error

    register_configs("config_schema")
    try:
        with initialize_config_dir(config_dir=str(PROJECT_ROOT / "conf"), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=overrides)
    except Exception as exc:  # Hydra's and OmegaConf's errors: a bad override, as for src.train
        exit_with_error(ConfigError(composition_error(exc)))


def as_the_job_runs(overrides: list[str], nvml_missing: str | None) -> list[str]:
    """The overrides as `python -m src.train` runs them: on a host without a GPU, a single job that
    names no gpu= is the CPU dry run."""
    from src.config import cli
    from src.hardware import devices

    if cli.names_the_hardware(overrides) or (nvml_missing is None and devices.list_devices()):
        return overrides
    return [cli.CPU_DRY_RUN, *overrides]


def gpu_here(nvml_missing: str | None) -> bool:
    from src.hardware import devices

    return NVIDIA_DRIVER.exists() or (nvml_missing is None and bool(devices.list_devices()))


def run_checks(overrides: list[str]) -> list[Check]:
    nvml_missing = _nvml_problem()
    cfg = compose(as_the_job_runs(overrides, nvml_missing))
    credentials.adopt_tracking_credentials(cfg)
    here = gpu_here(nvml_missing)
    stack = stack_report(here)
    checks = [
        check_torch(stack),
        check_gpus(nvml_missing),
        check_cuda_build(stack, here),
        check_tracking(cfg),
        check_default(cfg, overrides, nvml_missing),
    ]
    return [c for c in checks if c is not None]


def main(argv: list[str] | None = None) -> int:
    overrides = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help") for a in overrides):
        print(__doc__.strip())
        return 0
    checks = run_checks(overrides)
    for check in checks:
        console.hanging_line(check.line(), len(check.line()) - len(check.text))
    broken = [c.name for c in checks if c.status == "FAIL"]
    if broken:
        console.note(f"broken: {', '.join(broken)} (each FAIL line says what to do)")
    return BROKEN if broken else 0


if __name__ == "__main__":
    sys.exit(main())
