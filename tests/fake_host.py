"""`python tests/fake_host.py ARGS` = `python -m src.train ARGS` on a pretend GPU host (tests only).

NVML lists the GPUs that $GPUBENCH_FAKE_GPUS describes (a JSON list of tests/fake_nvml.FakeGpu
fields), so device selection, skipping, tags and the environment record see those GPUs; the ranks
of a job that selected them train on this machine's CPU, since it has no GPU. Everything else
(config, sweep, job process, tracking, the summary) is the product's own code.
"""

from __future__ import annotations

import dataclasses
import json
import os
import runpy
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
sys.path[:0] = [str(TESTS.parent), str(TESTS)]  # this checkout's src, and fake_nvml

from fake_nvml import FakeGpu, FakeNvml  # noqa: E402

from src.hardware import devices  # noqa: E402

FAKE_GPUS_ENV = "GPUBENCH_FAKE_GPUS"


def gpus_env(*gpus: dict) -> dict[str, str]:
    """The environment entry that gives a fake_host process these GPUs."""
    return {FAKE_GPUS_ENV: json.dumps(list(gpus))}


def _select_then_train_on_cpu(select):
    def select_on_cpu(*args, **kwargs):
        return dataclasses.replace(select(*args, **kwargs), device_kind="cpu")

    return select_on_cpu


if __name__ == "__main__":
    sys.modules["pynvml"] = FakeNvml([FakeGpu(**g) for g in json.loads(os.environ[FAKE_GPUS_ENV])])
    devices.select = _select_then_train_on_cpu(devices.select)
    sys.argv[0] = "src.train"
    runpy.run_module("src.train", run_name="__main__", alter_sys=True)
