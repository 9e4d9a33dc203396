"""A private one-node Slurm (munge + slurmctld + slurmd) for the slow tests.

The node declares two GPUs of each of two types, each GPU bound to a character device that exists
everywhere (/dev/null...), so CPU jobs can ask for `gpu:a6000:1` or `gpu:rtx3090:1` and Slurm
schedules them as it would GPU jobs. Two GPUs and four CPUs (declared, not counted) let four jobs
run at once: on one node, a pending job of one array would otherwise hold the other back. The
cluster is private: its own munge socket, its own ports, its own state folders, reached through
SLURM_CONF (conftest's `slurm_cluster` fixture yields that environment).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import missing_service

from tests.services import free_port

# Slurm 22.05 keeps a GPU only when it has a device file of its own
GRES_FILES = {"a6000": ("/dev/null", "/dev/zero"), "rtx3090": ("/dev/full", "/dev/urandom")}


def _need(program: str) -> str:
    path = shutil.which(program) or shutil.which(program, path="/usr/sbin:/sbin")
    if path is None:
        missing_service(f"{program} not found: install the Debian packages slurm-wlm and munge")
    return path


def _write_configs(folder: Path, host: str) -> Path:
    gres = ",".join(f"gpu:{kind}:{len(files)}" for kind, files in GRES_FILES.items())
    (folder / "slurm.conf").write_text(
        f"""ClusterName=gpubenchtest
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
AuthType=auth/munge
AuthInfo=socket={folder}/munge.sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
StateSaveLocation={folder}/state
SlurmdSpoolDir={folder}/spool
SlurmctldPidFile={folder}/slurmctld.pid
SlurmdPidFile={folder}/slurmd.pid
SlurmctldLogFile={folder}/slurmctld.log
SlurmdLogFile={folder}/slurmd.log
SlurmdParameters=config_overrides
GresTypes=gpu
NodeName={host} CPUs=4 RealMemory=4000 Gres={gres}
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""
    )
    (folder / "gres.conf").write_text(
        "".join(
            f"NodeName={host} Name=gpu Type={kind} File={file}\n"
            for kind, files in GRES_FILES.items()
            for file in files
        )
    )
    return folder / "slurm.conf"


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:  # slurmd can hang on SIGTERM
        process.kill()
        process.wait(timeout=10)


@contextlib.contextmanager
def one_node_slurm(folder: Path) -> Iterator[dict[str, str]]:
    """The environment (SLURM_CONF) of a running one-node cluster with 2 x a6000 and 2 x rtx3090,
    its state kept in `folder`; every job is cancelled and every daemon stopped on leaving."""
    munged, slurmctld, slurmd = _need("munged"), _need("slurmctld"), _need("slurmd")
    for sub in ("state", "spool"):
        (folder / sub).mkdir()
    key = folder / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o400)
    conf = _write_configs(folder, socket.gethostname().split(".")[0])
    env = {**os.environ, "SLURM_CONF": str(conf)}
    # --force: munged refuses root without it; it forks and writes its pid file
    munge_files = {
        "socket": "munge.sock",
        "pid-file": "munged.pid",
        "log-file": "munged.log",
        "seed-file": "munged.seed",
    }
    options = [f"--{option}={folder / name}" for option, name in munge_files.items()]
    subprocess.run([munged, "--force", f"--key-file={key}", *options], check=True, timeout=30)
    daemons = []
    for daemon in (slurmctld, slurmd):
        with open(folder / f"{Path(daemon).name}.out", "w") as out:
            daemons.append(subprocess.Popen([daemon, "-D", "-f", str(conf)], env=env, stdout=out, stderr=out))
    try:
        _wait_idle(env, folder)
        yield env
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, timeout=10, check=False)
        _wait_drained(env)  # a step whose slurmd is gone waits for it forever
        for process in reversed(daemons):
            _stop(process)
        _kill_orphan_steps(conf)
        os.kill(int((folder / "munged.pid").read_text()), signal.SIGTERM)


def _wait_drained(env: dict, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if not slurm(["squeue", "-h", "-t", "running,completing"], env).strip():
                return
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
            return
        time.sleep(1)


def _kill_orphan_steps(conf: Path) -> None:
    """slurmstepd processes of this cluster still up (their slurmd inherited SLURM_CONF to them)."""
    for proc in Path("/proc").iterdir():
        try:
            if (proc / "comm").read_text().strip() != "slurmstepd":
                continue
            if f"SLURM_CONF={conf}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                os.kill(int(proc.name), signal.SIGKILL)
        except (OSError, ValueError):  # not a process, or it ended meanwhile
            continue


def _wait_idle(env: dict, folder: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        try:  # bounded: with the controller down, Slurm's clients block
            state = slurm(["sinfo", "-h", "-o", "%t"], env, timeout=5)
        except (subprocess.TimeoutExpired, subprocess.CalledProcessError):
            state = ""
        if state.strip() == "idle":
            return
        time.sleep(0.5)
    logs = "".join(
        (folder / f).read_text()[-1500:] for f in ("slurmctld.log", "slurmd.log") if (folder / f).exists()
    )
    pytest.fail(f"the one-node Slurm did not come up (node state {state.strip()!r}):\n{logs}")


def slurm(command: list[str], env: dict, timeout: float = 10) -> str:
    return subprocess.run(
        command, env=env, capture_output=True, text=True, timeout=timeout, check=True
    ).stdout
