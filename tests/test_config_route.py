"""One job's config is finalised (and validated) once, after gpu=auto's device is found, and run_job
receives it finished (docs/architecture.md): followed through the calls that receive it."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from src.paths import PROJECT_ROOT

# gpu=auto on a host whose GPUs are hidden: the CPU, found the way a GPU would be
JOB = ["gpu=auto", "benchmark=smoke", "model=resnet50", "model.name=tiny", "model._target_=tests.workloads.by_name"]


@pytest.mark.slow  # a real CPU smoke job, traced call by call (~20 s alone on 2 cores)
def test_the_jobs_config_is_finalised_once_after_its_devices_are_found():
    done = subprocess.run(
        [sys.executable, "tests/config_route.py", "--json", *JOB],
        cwd=PROJECT_ROOT,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    routes = json.loads(done.stdout.splitlines()[-1])
    from_run_job, from_entry = routes["run_job"], routes["entry"]
    assert from_entry["route"].count("src.config.finalise") == 1, from_entry["route"]
    route = from_entry["route"]
    # the tracking credentials are taken out of the config first; then its devices are found
    # before the config is finalised (gpu=auto's card decides what is validated)
    assert route.index("src.run.prepare") < route.index("src.hardware.devices") < route.index("src.config.finalise")
    assert from_run_job["route"][0] == "src.run.job" and "src.config.finalise" not in from_run_job["route"]
