"""Does a network store answer, as the service its URI names, within seconds?

MLflow's clients wait long on an address that accepts connections and says nothing: its HTTP
client retries for minutes, and SQLAlchemy's PostgreSQL driver waits without end (or retries,
logging a warning each time, on a port where another service answers). `python -m src.doctor`
asks first, with the opening words of each protocol, and so says in one line within its limit
what is at the address.
"""

from __future__ import annotations

import socket
import ssl
import struct
import urllib.parse

NETWORK_PORTS = {"http": 80, "https": 443, "postgresql": 5432, "mysql": 3306, "mssql": 1433}
POSTGRES_SSL_REQUEST = struct.pack("!ii", 8, 80877103)  # PostgreSQL answers it with one byte, S or N
MYSQL_PROTOCOL = 10  # the first byte of a MySQL server's greeting, after the 4-byte packet header
SERVICES = {
    "http": "an HTTP server",
    "https": "an HTTPS server",
    "postgresql": "PostgreSQL",
    "mysql": "MySQL",
}
GREETINGS = {  # what the first bytes back say: the service is there
    "http": lambda said: said.startswith(b"HTTP/"),
    "https": lambda said: said.startswith(b"HTTP/"),
    "postgresql": lambda said: said in (b"S", b"N"),
    "mysql": lambda said: said[4:5] in (bytes([MYSQL_PROTOCOL]), b"\xff"),  # its version, or an error packet
}


def silent(uri: str, timeout_s: float) -> str | None:
    """Why the store at `uri` does not answer as its scheme's service within timeout_s (a refused or
    silent port, another service), or None: it answers, or it is a file, or a scheme not probed."""
    parts = urllib.parse.urlsplit(uri)
    scheme = parts.scheme.split("+")[0]  # postgresql+psycopg2
    try:
        host, port = parts.hostname, parts.port or NETWORK_PORTS[scheme]
    except (KeyError, ValueError):
        return None
    where, service = f"{host}:{port}", SERVICES.get(scheme)
    try:
        conn = socket.create_connection((host, port), timeout=timeout_s)
    except OSError as exc:
        return f"nothing answers at {where}: {exc.strerror or f'no answer in {timeout_s:g} s'}"
    try:
        with conn:
            said = _greeting(scheme, conn, host) if service else None
    except TimeoutError:
        return f"{where} accepts connections but does not answer as {service} within {timeout_s:g} s"
    except ssl.SSLError as exc:
        return f"{where} answers, but not as {service} ({exc.reason or exc})"
    except OSError as exc:
        return f"{where} answers, but not as {service} (it closed the connection: {exc.strerror or exc})"
    if said is None or GREETINGS[scheme](said):
        return None
    return f"{where} answers, but not as {service} ({_shown(said)})"


def _greeting(scheme: str, conn: socket.socket, host: str) -> bytes:
    """The first bytes the service sends back after this protocol's opening words (MySQL speaks first)."""
    if scheme == "https":
        conn = _unverified().wrap_socket(conn, server_hostname=host)  # its certificate is MLflow's to check
    if scheme in ("http", "https"):
        conn.sendall(f"HEAD / HTTP/1.0\r\nHost: {host}\r\n\r\n".encode())
    elif scheme == "postgresql":
        conn.sendall(POSTGRES_SSL_REQUEST)
    return conn.recv(64)


def _unverified() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    return context


def _shown(said: bytes) -> str:
    """The start of what the other service said, readable; or that it closed the connection."""
    if not said:
        return "it closed the connection"
    text = said.decode("ascii", "replace").splitlines()[0].strip()
    return f"it said {text[:40]!r}" if text.isprintable() and text else "it said something else"
