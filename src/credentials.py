"""Tracking credentials stay out of everything the project writes.

A `user:password@` in tracking.uri moves to MLflow's own variables (MLFLOW_TRACKING_USERNAME and
MLFLOW_TRACKING_PASSWORD) as soon as the config is read, so the URI that is logged as a param,
spooled, printed, and shown by MLflow's own "View run at" line is the bare one. `redact` is the
last line of defence for text that comes from elsewhere (exception messages, Hydra's snapshot of
the command line): it masks any URL's user-info and the values of the secret variables.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

SECRET_ENV = ("MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")
MASK = "***"
# scheme://user:password@host ; Hydra prints overrides with `:` escaped as `\:`, so allow that too.
# A password written raw may hold any character (`p@ss/w`, spaces, quotes): the user-info runs to
# the line's last `@`. Masking too much of a line is harmless; a password's tail is not.
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*\\?://)[^\n]*@")
_MIN_SECRET_LEN = 4  # shorter values would mask ordinary text


def split_uri(uri: str) -> tuple[str, str | None, str | None]:
    """(URI without user-info, username, password)."""
    parts = urlsplit(uri)
    if not parts.netloc or "@" not in parts.netloc:
        return uri, None, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    bare = urlunsplit(parts._replace(netloc=host))
    return bare, unquote(user) or None, unquote(password) or None


def adopt_uri_credentials(uri: str) -> str:
    """Move a URI's user:password into MLflow's variables; return the bare URI."""
    bare, user, password = split_uri(uri)
    if user:
        os.environ["MLFLOW_TRACKING_USERNAME"] = user
    if password:
        os.environ["MLFLOW_TRACKING_PASSWORD"] = password
    return bare


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
