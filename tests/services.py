"""Real services on the loopback interface, for the slow tests and the load benchmark.

`local_postgres(folder)` runs a throw-away PostgreSQL cluster (Debian's `postgresql` package:
initdb, pg_ctl) on a free port; `TrackingServer` runs `python -m src.server` on a free port and
can be stopped and started again on the same one. Both bind 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_USER = "mlflow"  # the cluster's superuser, as a team's server would log in


class ServiceMissing(RuntimeError):
    """What a service needs is not installed here."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def postgres_bin() -> Path:
    """The folder of initdb and pg_ctl: Debian keeps them off PATH, under /usr/lib/postgresql/N/bin."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[4]))
    on_path = shutil.which("initdb")
    if found:
        return Path(found[-1]).parent
    if on_path:
        return Path(on_path).resolve().parent
    raise ServiceMissing("PostgreSQL not found (no initdb): apt-get install postgresql")


def _as_owner() -> list[str]:
    """initdb and postgres refuse root: as root, run them as the `postgres` user the package made."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam("postgres")
    except KeyError:
        raise ServiceMissing("running as root and no `postgres` user to run PostgreSQL as") from None
    return ["runuser", "-u", "postgres", "--"]


@contextlib.contextmanager
def local_postgres(database: str = "mlflow") -> Iterator[str]:
    """A fresh PostgreSQL cluster on 127.0.0.1 with one database; yields its postgresql:// URI.

    Its folder is a private temporary one owned by whoever runs the server (pytest's tmp_path is
    not readable by the `postgres` user); the cluster is stopped and the folder removed after.
    """
    bin_dir, owner = postgres_bin(), _as_owner()
    folder = Path(tempfile.mkdtemp(prefix="gpubench-pg-"))
    if owner:
        shutil.chown(folder, "postgres", "postgres")
    password, port = secrets.token_hex(8), free_port()
    pwfile = folder / "pw"
    pwfile.write_text(password + "\n")
    if owner:
        shutil.chown(pwfile, "postgres", "postgres")
    data = folder / "data"
    pg = [*owner, str(bin_dir / "pg_ctl"), "-D", str(data)]

    def run(command: list[str], timeout: float = 120) -> None:
        result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(command[len(owner)]).name} failed: {result.stdout}{result.stderr}")

    try:
        run([*owner, str(bin_dir / "initdb"), "-D", str(data), "-U", PG_USER, f"--pwfile={pwfile}",
             "--auth=scram-sha-256", "--encoding=UTF8", "--no-sync"])  # fmt: skip
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off"
        run([*pg, "-o", options, "-l", str(folder / "server.log"), "-w", "-t", "60", "start"])
        env = {**os.environ, "PGPASSWORD": password}
        subprocess.run(
            [str(bin_dir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", PG_USER, database],
            env=env, check=True, capture_output=True, timeout=60,
        )  # fmt: skip
        yield f"postgresql://{PG_USER}:{password}@127.0.0.1:{port}/{database}"
    finally:
        if (data / "postmaster.pid").exists():
            subprocess.run([*pg, "-m", "immediate", "-w", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(folder, ignore_errors=True)


class TrackingServer:
    """`python -m src.server` on 127.0.0.1, in its own process group (uvicorn's workers go with it)."""

    def __init__(self, folder: Path, backend_store_uri: str | None = None, workers: int = 1):
        """Artifacts and the server's log go under `folder`, and the sqlite store unless one is named."""
        folder.mkdir(parents=True, exist_ok=True)
        self.backend_store_uri = backend_store_uri or f"sqlite:///{folder}/mlflow.db"
        self.artifacts, self.log, self.workers = folder / "artifacts", folder / "server.log", workers
        self.port = free_port()  # kept across a restart: clients know one URL
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 180) -> TrackingServer:
        command = [
            sys.executable, "-m", "src.server", f"--port={self.port}",
            f"--artifacts-destination={self.artifacts}", f"--workers={self.workers}",
        ]  # fmt: skip
        env = {**os.environ, "MLFLOW_BACKEND_STORE_URI": self.backend_store_uri}  # off the process list
        with self.log.open("a") as log:
            self.proc = subprocess.Popen(
                command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the tracking server exited: {self.log.read_text()[-3000:]}")
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"no answer from {self.url}/health within {timeout_s} s")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop the server and its workers: SIGTERM for a clean stop, SIGKILL for a crash."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        with contextlib.suppress(ProcessLookupError):  # workers the server left behind
            os.killpg(self.proc.pid, signal.SIGKILL)

    def __enter__(self) -> TrackingServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()
