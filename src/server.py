"""One MLflow tracking server for a team: `python -m src.server [--host ADDR] [--port N] ...`.

Runs are kept in an SQL database (sqlite under mlruns/server/ by default, PostgreSQL for a busy
team) and artifacts under one root that the server proxies, so machines need only its URL:
`export MLFLOW_TRACKING_URI=http://HOST:PORT` (or `tracking.uri=http://HOST:PORT`) on each.
It binds 127.0.0.1 unless told otherwise: MLflow's server has no login of its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from src.paths import PROJECT_ROOT
from src.tracking import credentials

SERVER_DIR = PROJECT_ROOT / "mlruns" / "server"  # apart from the embedded store: its own runs
LOOPBACK = ("127.0.0.1", "localhost", "::1")
STORE_ENV = "MLFLOW_BACKEND_STORE_URI"  # mlflow server's own variable: a URI kept off command lines
CONNECT_TIMEOUT_S = 10


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m src.server",
        description="Run one MLflow tracking server that every machine of a team logs to.",
        epilog="Arguments after `--` go to `mlflow server` unchanged (e.g. -- --workers 8 "
        "--allowed-hosts mlflow.example.org).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=5000, help="port to listen on (default: 5000)")
    parser.add_argument(
        "--backend-store-uri",
        default=os.environ.get(STORE_ENV) or f"sqlite:///{SERVER_DIR / 'mlflow.db'}",
        help="SQL database of runs: sqlite:////abs/path.db (default: $MLFLOW_BACKEND_STORE_URI, else "
        "mlruns/server/mlflow.db) or postgresql://USER:PASSWORD@DBHOST:5432/DB (pip install -e "
        "'.[server]' brings its driver); with a password, prefer the variable or a ~/.pgpass file to "
        "this option, which other users see in the process list while the server starts",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server worker processes (default: 1; one per core of a busy team's server, see "
        "docs/deployment.md)",
    )
    parser.add_argument(
        "--artifacts-destination",
        default=str(SERVER_DIR / "artifacts"),
        help="where the server stores artifacts it receives: a folder or s3://... "
        "(default: mlruns/server/artifacts)",
    )
    parser.add_argument("mlflow_args", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port={args.port}: must be a port number from 1 to 65535")
    if args.workers < 1:
        parser.error(f"--workers={args.workers}: must be a whole number >= 1")
    problem = store_problem(args.backend_store_uri)
    if problem:
        parser.error(f"--backend-store-uri={credentials.redact(args.backend_store_uri)}: {problem}")
    return args


def store_problem(uri: str) -> str | None:
    """Why the server could not open this database URI here (bad form, no driver), else None.

    Checked before MLflow starts: its own failure is a long traceback from inside a worker.
    """
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        url = make_url(uri)
        url.get_dialect().import_dbapi()
    except (ArgumentError, NoSuchModuleError, ValueError):  # ValueError: a port that is no number
        return "not a database URI (sqlite:////abs/path.db or postgresql://USER:PASSWORD@HOST:PORT/DB)"
    except ImportError as exc:
        return f"its database driver is missing ({exc}); PostgreSQL's comes with pip install -e '.[server]'"
    if url.get_backend_name() == "sqlite" and not Path(url.database or "").is_absolute():
        return "an sqlite store needs an absolute path (four slashes: sqlite:////abs/path.db)"
    return None


def connect_problem(uri: str) -> str | None:
    """Why the server's database refuses a connection now (wrong password, no such host), else None.

    Tried once before MLflow starts: MLflow retries a refused login for minutes, one traceback each.
    """
    import sqlalchemy
    from sqlalchemy.exc import SQLAlchemyError

    url = sqlalchemy.engine.make_url(uri)
    if url.get_backend_name() == "sqlite":
        return None  # a file: prepare_local_paths made its folder, sqlite creates it
    args = {"connect_timeout": CONNECT_TIMEOUT_S} if url.get_backend_name() in ("postgresql", "mysql") else {}
    engine = sqlalchemy.create_engine(url, connect_args=args, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect():
            return None
    except SQLAlchemyError as exc:
        cause = str(getattr(exc, "orig", None) or exc).strip()
        return "cannot connect: " + " ".join(cause.split())
    finally:
        engine.dispose()


def server_command(args: argparse.Namespace) -> list[str]:
    return [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--workers",
        str(args.workers),
        "--serve-artifacts",  # clients upload through the server: no shared disk or cloud keys
        "--artifacts-destination",
        args.artifacts_destination,
        *args.mlflow_args,
    ]  # the store URI goes by the environment (STORE_ENV): only its owner reads a process's environment


def prepare_local_paths(args: argparse.Namespace) -> None:
    """Create the sqlite folder and the artifact folder when they are local paths."""
    if args.backend_store_uri.startswith("sqlite:///"):
        Path(args.backend_store_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    if "://" not in args.artifacts_destination:
        Path(args.artifacts_destination).mkdir(parents=True, exist_ok=True)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    prepare_local_paths(args)
    problem = connect_problem(args.backend_store_uri)
    if problem:
        print(
            f"error: --backend-store-uri={credentials.redact(args.backend_store_uri)}: {credentials.redact(problem)}",
            file=sys.stderr,
        )
        sys.exit(2)
    url_host = f"[{args.host}]" if ":" in args.host else args.host
    if args.host in ("0.0.0.0", "::"):
        url_host = "<this machine's address>"
    store = credentials.redact(args.backend_store_uri)  # the console may be a shared log
    print(f"MLflow tracking server: runs in {store}, artifacts in {args.artifacts_destination}")
    print(f"On every machine: export MLFLOW_TRACKING_URI=http://{url_host}:{args.port}")
    if args.host not in LOOPBACK:
        print(
            f"warning: bound to {args.host}: anyone who reaches this port can read and change runs "
            "(MLflow has no login here); keep it on a trusted network or behind a proxy",
            file=sys.stderr,
        )
    sys.stdout.flush()
    # Tracking needs none of MLflow's background job runners (GenAI jobs): fewer processes to host.
    os.environ.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    command = server_command(args)
    os.execve(command[0], command, {**os.environ, STORE_ENV: args.backend_store_uri})


if __name__ == "__main__":
    main()
