"""MLflow access: the client, the store, the experiment, retries. Only job processes and entry points call this."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import logging
import os
import sqlite3
import time
from pathlib import Path

from src import console
from src.config.groups.tracking import uri_problem
from src.errors import ConfigError, TrackingUnavailable, first_line
from src.paths import sqlite_path
from src.tracking.credentials import bare, redact

PARENT_RUN_FILE = "parent_run.json"  # in a sweep's folder: how jobs find their parent run
# Fail fast per HTTP request (MLflow's default retries for minutes): the job keeps its result on
# disk and retries delivery itself. No progress bar per artifact read (a run's counted ops): it
# would stand between the command's own lines. A user's own settings win.
CLIENT_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR": "false",
}
START_ATTEMPTS, START_BACKOFF_S = 3, 1.0
# What MLflow raises when another client (`mlflow ui`, a script) creates the same new database at
# the same moment: its tables and migrations cross ours. Once the file has stood still a while
# the other creator is done (or gone), and opening again finds the store made (or finishes it).
# An out-of-date schema is only the other creator's work in progress once a crossing was seen:
# alone, it is an old store.
CROSSED = ("already exists", "duplicate column", "expected to match one row")
UNFINISHED = (*CROSSED, "out-of-date database schema")
CREATION_ATTEMPTS, CREATION_STILL_S, CREATION_WAIT_MAX_S = 5, 10.0, 120.0
NOTHING_RUN = "nothing was run"  # what a failure before any work adds


class _WarningsOnly(logging.Filter):
    """MLflow logs a traceback for every database error it then raises; the entry point reports
    that error once, in one line (problem() below). Its INFO lines on creating and migrating a
    store ("Creating initial MLflow database tables...") are its business, not the user's."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None and logging.WARNING <= record.levelno < logging.ERROR


logging.getLogger("mlflow.store.db.utils").addFilter(_WarningsOnly())
logging.getLogger("alembic").setLevel(logging.WARNING)  # the migrations' own INFO lines
# urllib3 warns at every HTTP retry; the caller says once what became of the request (error, spool)
logging.getLogger("urllib3.connectionpool").addFilter(lambda record: not record.getMessage().startswith("Retrying"))


def prepare_store(uri: str) -> None:
    """Create the sqlite folder; the database itself is made by the first client call."""
    database = sqlite_path(uri)
    if database is not None:
        database.parent.mkdir(parents=True, exist_ok=True)


@contextlib.contextmanager
def creation_lock(uri: str):
    """Hold `<database>.lock` (an sqlite store only): MLflow creates and migrates a new database
    when a process first opens it, and two processes doing so at once break it."""
    database = sqlite_path(uri)
    if database is None:
        yield
        return
    with open(f"{database}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


RUN_LINKS = "MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT"


@contextlib.contextmanager
def without_run_links():
    """No "View run ... at:" and "View experiment at:" lines: MLflow prints both for each run it ends
    on a tracking server (and reads the run back to do so), which an import of a published table,
    a run per figure, would turn into thousands of lines. A user's own setting wins."""
    if RUN_LINKS in os.environ:
        yield
        return
    os.environ[RUN_LINKS] = "true"
    try:
        yield
    finally:
        del os.environ[RUN_LINKS]


def client(uri: str) -> Client:
    """An MlflowClient (as a Client); the first in a process opens (and if new, creates) the store,
    under the lock.

    Raises TrackingUnavailable naming the cause when the store cannot be opened.
    """
    from mlflow.tracking import MlflowClient

    for key, value in CLIENT_DEFAULTS.items():
        os.environ.setdefault(key, value)
    try:
        prepare_store(uri)
        with creation_lock(uri):
            return Client(_open(lambda: MlflowClient(tracking_uri=uri), sqlite_path(uri)), uri)
    except Exception as exc:
        raise TrackingUnavailable(f"{problem(uri, exc)}; {NOTHING_RUN}") from None


class Client:
    """An MlflowClient whose calls raise TrackingUnavailable, in one line naming the cause, once the
    store cannot be reached (a server gone, a database that drops the connection): what the
    command did so far stands, and its entry point says so instead of MLflow's traceback. Any other
    error (a value MLflow refuses) passes as it is."""

    def __init__(self, mlflow_client, uri: str):
        self._client, self._uri = mlflow_client, uri

    def __getattr__(self, name: str):
        found = getattr(self._client, name)
        if not callable(found):
            return found

        def call(*args, **kwargs):
            try:
                return found(*args, **kwargs)
            except Exception as exc:
                if away(exc) is None:
                    raise
                raise TrackingUnavailable(problem(self._uri, exc)) from exc

        return call


def _open(open_client, database: Path | None):
    """open_client(), waiting while another client creates the new sqlite `database`: the lock
    above only serialises gpubench's own processes."""
    for attempt in range(CREATION_ATTEMPTS):
        try:
            return open_client()
        except Exception as exc:
            text = " ".join(str(e) for e in _chain(exc)).lower()
            created_elsewhere = database is not None and any(
                w in text for w in (UNFINISHED if attempt else CROSSED)
            )
            if not created_elsewhere or attempt == CREATION_ATTEMPTS - 1:
                raise
            if attempt == 0:
                console.note(f"{database}: another client is creating this new store; waiting for it")
            _wait_still(database)


def _wait_still(path: Path) -> None:
    """Until `path` has not changed for CREATION_STILL_S (CREATION_WAIT_MAX_S at most)."""
    started = still_since = time.monotonic()
    seen = None
    while (
        time.monotonic() - still_since < CREATION_STILL_S and time.monotonic() - started < CREATION_WAIT_MAX_S
    ):
        with contextlib.suppress(OSError):
            stat = path.stat()
            if (stat.st_mtime_ns, stat.st_size) != seen:
                seen, still_since = (stat.st_mtime_ns, stat.st_size), time.monotonic()
        time.sleep(0.2)


def problem(uri: str, exc: BaseException) -> str:
    """One sentence for a store that failed: the cause sqlite names (a corrupt or unwritable file, a
    full disk), or what stopped the connection, rather than MLflow's or SQLAlchemy's wording around
    it. A failure before any work adds `; nothing was run`."""
    text = " ".join(str(e) for e in _chain(exc)).lower()
    database = sqlite_path(uri)
    where = f"tracking.uri={redact(uri)!r}"
    if (malformed := uri_problem(uri)) and malformed.startswith("not an address"):
        return f"{where}: {malformed}"
    if database is not None:
        if "file is not a database" in text or "malformed" in text:
            return (
                f"{where}: {database} is not an sqlite database (file is not a database); "
                "move it aside to start a new store, or restore it from a backup"
            )
        if "disk is full" in text or any(getattr(e, "errno", None) == errno.ENOSPC for e in _chain(exc)):
            return (
                f"{where}: disk full: {database} cannot grow ({_free(database)} free on its file system); "
                "free some space and run again"
            )
        if "readonly database" in text or "read-only file system" in text or "unable to open" in text:
            return f"{where}: {database} cannot be written (read-only file, folder or file system)"
    return f"{where}: the tracking store cannot be reached ({away(exc) or first_line(exc)})"


def away(exc: BaseException) -> str | None:
    """What in this failure says the store cannot be reached (a connection refused, reset or silent,
    a name that does not resolve, a database that drops the connection or answers "unavailable"), in
    a few words; None for any other failure."""
    for cause in reversed(_chain(exc)):  # the innermost first: the socket's own words
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror
        if isinstance(cause, TimeoutError) or type(cause).__name__ in ("Timeout", "ReadTimeout", "ConnectTimeout"):
            return "no answer in time"
        if getattr(cause, "error_code", None) == "TEMPORARILY_UNAVAILABLE":
            return first_line(cause)
    return next((first_line(c) for c in _chain(exc) if isinstance(c, OSError)), None)


def is_write_conflict(exc: BaseException) -> bool:
    """Another process wrote the same row at the same moment (two inserts of one run's tag):
    MLflow's check-then-insert races across processes; the other write stands."""
    text = " ".join(str(e) for e in _chain(exc)).lower()
    return "unique constraint" in text or "duplicate key value" in text


def _chain(exc: BaseException | None):
    """An exception and its causes: MLflow wraps the sqlite error that says what happened."""
    seen = []
    while exc is not None and exc not in seen:
        seen.append(exc)
        exc = exc.__cause__ or exc.__context__
    return seen


def _free(path: Path) -> str:
    with contextlib.suppress(OSError):
        stats = os.statvfs(path.parent)
        return f"{stats.f_bavail * stats.f_frsize / 2**20:,.1f} MiB"
    return "no space"


_intact: set[Path] = set()  # stores found intact by this process


def check_intact(uri: str) -> None:
    """An sqlite store whose pages are damaged opens, and answers the first queries, until a write
    lands on a broken page after the job has run: sqlite's quick_check reads every page first
    (once per process and file: a store of a GB takes a second or so)."""
    database = sqlite_path(uri)
    if database is None or database in _intact or not database.is_file():
        return
    try:
        with contextlib.closing(sqlite3.connect(database)) as db:  # read-write: it rolls back a hot journal
            found = db.execute("PRAGMA quick_check(1)").fetchone()[0]
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc):  # another process is writing to it: not damage; MLflow waits its turn
            return
        raise TrackingUnavailable(f"{problem(uri, exc)}; {NOTHING_RUN}") from None
    if found != "ok":
        found = " ".join(found.replace("*** in database main ***", "").split())  # one line
        raise TrackingUnavailable(
            f"tracking.uri={redact(uri)!r}: {database} is damaged (sqlite's check: {found}); move it aside "
            "to start a new store, or restore it from a backup; nothing was run"
        )
    _intact.add(database)


def ensure_experiment(uri: str, name: str, key: str = "tracking.experiment") -> str:
    """The experiment's id, created on first use with artifacts beside an sqlite store; one deleted
    (which MLflow takes no run into) is a ConfigError naming `key`, the setting that names it.

    Called once before any job of a sweep starts: concurrent first-time migrations of a fresh
    sqlite database fail, so parallel jobs must find it ready.
    """
    check_intact(uri)
    mlflow_client = client(uri)
    experiment = at_start(lambda: mlflow_client.get_experiment_by_name(name), uri)
    if experiment is not None and experiment.lifecycle_stage == "deleted":
        raise ConfigError(deleted_experiment(uri, key, experiment))
    if experiment is not None:
        return experiment.experiment_id
    database = sqlite_path(uri)
    artifact_location = (database.parent / "artifacts").as_uri() if database is not None else None

    def create_or_find() -> str:
        from mlflow.exceptions import MlflowException

        try:
            return mlflow_client.create_experiment(name, artifact_location=artifact_location)
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            # another sweep created it since we looked (two workstations starting on one server)
            return mlflow_client.get_experiment_by_name(name).experiment_id

    return at_start(create_or_find, uri)


def deleted_experiment(uri: str, key: str, experiment) -> str:
    """What a command says of an experiment deleted in the store (its name stays taken until `mlflow gc`)."""
    return (
        f"{key}={experiment.name!r}: deleted in the store at {bare(uri)}; restore it (its runs with it): "
        f"MLFLOW_TRACKING_URI={bare(uri)} mlflow experiments restore -x {experiment.experiment_id}, or name "
        f"another experiment: {key}=NAME"
    )


def every_run(mlflow_client, experiment_ids: list[str], filter_string: str = "", order_by=None) -> list:
    """The runs of the experiments that match, each once, every page read before any is returned.

    MLflow pages by offset (at most 1,000 runs a call): a run deleted before the next page is asked
    for shifts that page past a run never read, and a run written or ended meanwhile shifts it back
    over one read already. So the caller deletes after the search (an import's repairs), and a run
    read twice (a job that ended while a compare read) counts once."""
    runs, token = {}, None
    while token != "":  # MLflow's last page has no token
        page = mlflow_client.search_runs(
            experiment_ids, filter_string=filter_string, order_by=order_by, max_results=1000, page_token=token
        )
        for run in page:
            runs.setdefault(run.info.run_id, run)
        token = page.token or ""
    return list(runs.values())


def retry(action, attempts: int, backoff_s: float):
    """Call `action` up to `attempts` times, sleeping backoff_s, 2 x backoff_s, ... in between."""
    for attempt in range(attempts):
        try:
            return action()
        except Exception:
            if attempt == attempts - 1:
                raise
            time.sleep(backoff_s * 2**attempt)


def at_start(action, uri: str):
    """A call made before any work: retried briefly (sqlite locks), then a clear error."""
    try:
        return retry(action, START_ATTEMPTS, START_BACKOFF_S)
    except Exception as exc:
        cause = exc.__cause__ if isinstance(exc, TrackingUnavailable) else exc  # a Client call's
        if cause is None:  # said already (the store could not be opened)
            raise
        raise TrackingUnavailable(f"{problem(uri, cause)}; {NOTHING_RUN}") from None


def read_parent_run(sweep_dir: Path) -> str | None:
    path = sweep_dir / PARENT_RUN_FILE
    if path.exists():
        return json.loads(path.read_text())["run_id"]
    return None
