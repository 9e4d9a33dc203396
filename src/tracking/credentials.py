"""Tracking credentials stay out of everything the project writes.

Each backend gets its credentials the way it reads them. A tracking server's `user:password@`
(http, https) moves to MLflow's own variables (MLFLOW_TRACKING_USERNAME and
MLFLOW_TRACKING_PASSWORD) as soon as an entry point has its config, so the URI that is logged,
spooled, printed, and shown by MLflow's own "View run at" line is the bare one. A database URI
(postgresql://, mysql://) keeps its password: SQLAlchemy reads it from the URI and nowhere else,
so the whole URI stays in memory and only `bare()` of it is written to disk. `redact` is the last
line of defence for text that comes from elsewhere (exception messages, Hydra's snapshot of the
command line, a report that names the store): it masks any URL's user-info and the values of the
secret variables.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from urllib.parse import quote, unquote

SECRET_ENV = ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")
MASK = "***"
# scheme://user:password@host ; Hydra prints overrides with `:` escaped as `\:`, so allow that too.
# A password written raw may hold any character (`p@ss/w`, spaces, quotes): the user-info runs to
# the line's last `@`. Masking too much of a line is harmless; a password's tail is not.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*\\?://)[^\n]*@")
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary text


SERVER_SCHEMES = ("http", "https")  # MLflow's REST client: credentials from its variables
PATH_SCHEMES = ("sqlite", "file")  # no user-info: an `@` there is part of a file name


def split_uri(uri: str) -> tuple[str, str | None, str | None]:
    """(URI without user-info, username, password). A password typed raw may hold `@` and `/`: the
    user-info runs to the last `@`, as in redact()."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() in PATH_SCHEMES or "@" not in rest:
        return uri, None, None
    userinfo, host = rest.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    return f"{scheme}://{host}", unquote(user) or None, unquote(password) or None


def bare(uri: str) -> str:
    """The URI as it may be shown or written: without user-info."""
    return split_uri(uri)[0]


def adopt_uri_credentials(uri: str) -> str:
    """The URI the process goes on with. A server's user:password moves into MLflow's variables (and
    a MLFLOW_TRACKING_URI that held them is replaced by the bare URI, for MLflow's own reads of it);
    a database URI is returned whole, its password kept in memory for SQLAlchemy. Any text is taken
    (the config checks say what is wrong with a malformed one, in one line)."""
    if uri.partition("://")[0].lower() not in SERVER_SCHEMES:
        return uri
    stripped, user, password = split_uri(uri)
    if user:
        os.environ["MLFLOW_TRACKING_USERNAME"] = user
    if password:
        os.environ["MLFLOW_TRACKING_PASSWORD"] = password
    if bare(os.environ.get("MLFLOW_TRACKING_URI", "")) == stripped:
        os.environ["MLFLOW_TRACKING_URI"] = stripped
    return stripped


def adopt_tracking_credentials(cfg) -> None:
    """adopt_uri_credentials for an entry point's composed config (its `tracking.uri`)."""
    from omegaconf import open_dict

    with open_dict(cfg):
        cfg.tracking.uri = adopt_uri_credentials(cfg.tracking.uri)


def with_credentials(uri: str) -> str:
    """A bare URI read back from disk (a spooled run's store), with the credentials MLFLOW_TRACKING_URI
    gives the same store: a database's password is never written, so a later process takes it
    from there (or from the database client's own files, such as ~/.pgpass)."""
    known = os.environ.get("MLFLOW_TRACKING_URI", "")
    return known if known and bare(known) == bare(uri) else uri


def redact(text: str) -> str:
    text = _USERINFO.sub(lambda m: f"{m['scheme']}{MASK}@", text)
    for name in SECRET_ENV:
        value = os.environ.get(name, "")
        if len(value) >= _MIN_SECRET_LEN:
            for form in {value, quote(value, safe=""), quote(value)}:  # as written, or percent-encoded
                text = text.replace(form, MASK)
    return text


def scrub_files(paths) -> None:
    """Rewrite files (Hydra's saved command line and config) with their secrets masked."""
    for path in map(Path, paths):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        clean = redact(text)
        if clean != text:
            tmp = path.with_name(path.name + ".redacting")
            tmp.write_text(clean)
            os.replace(tmp, path)


class RedactingFilter(logging.Filter):
    """Masks secrets in log records; conf/config.yaml puts it on Hydra's and the jobs' log handlers."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        return True
