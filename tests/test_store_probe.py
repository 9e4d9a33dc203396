"""doctor's tracking line within its 3 s against an address that accepts connections and says
nothing, and against another service on the port; and the real services pass the same probe."""

from __future__ import annotations

import contextlib
import socket
import threading

import pytest
from conftest import compose_cfg

from src import doctor
from src.tracking import probe

LIMIT_S = 60  # far above the 3 s asked of the check, far below what MLflow's clients wait (minutes)


@pytest.fixture
def silent_port():
    """A port that accepts connections and never sends a byte."""
    accepted = []

    def accept() -> None:
        with contextlib.suppress(OSError):  # closed after the test
            while True:
                accepted.append(listener.accept()[0])

    with socket.create_server(("127.0.0.1", 0)) as listener:
        threading.Thread(target=accept, daemon=True).start()
        yield listener.getsockname()[1]


def tracking_check(uri: str) -> doctor.Check:
    """doctor's tracking line for `uri`; fails past LIMIT_S."""
    found = []
    worker = threading.Thread(
        target=lambda: found.append(doctor.check_tracking(compose_cfg([f"tracking.uri={uri}"])))
    )
    worker.daemon = True
    worker.start()
    worker.join(LIMIT_S)
    assert found, f"doctor's tracking check of {uri} took over {LIMIT_S} s"
    return found[0]


@pytest.fixture
def a_short_limit(monkeypatch):
    """doctor's limit cut to 0.2 s: a store that never answers is waited for to the end of it."""
    monkeypatch.setattr(doctor, "CONNECT_TIMEOUT_S", 0.2)


def test_a_store_that_accepts_and_never_answers_fails_its_line_in_seconds(silent_port):
    address = f"127.0.0.1:{silent_port}"
    check = tracking_check(f"http://u:p@{address}/db")
    assert check.status == "FAIL"
    assert f"({address} accepts connections but does not answer as an HTTP server within 3 s)" in check.text


def test_a_postgresql_store_that_accepts_and_never_answers_fails_its_line(silent_port, a_short_limit):
    address = f"127.0.0.1:{silent_port}"
    check = tracking_check(f"postgresql://u:p@{address}/db")
    assert check.status == "FAIL"
    assert f"({address} accepts connections but does not answer as PostgreSQL within 0.2 s)" in check.text


def test_a_postgresql_uri_on_another_service_s_port_fails_in_one_line(http_port, capfd, a_short_limit):
    address = f"127.0.0.1:{http_port}"
    check = tracking_check(f"postgresql://u:p@{address}/db")
    assert check.status == "FAIL"
    assert f"({address} accepts connections but does not answer as PostgreSQL within 0.2 s)" in check.text
    out, err = capfd.readouterr()
    assert out == err == ""  # the check's line is all: no driver warnings, no retries


def test_an_https_uri_on_a_plain_http_port_is_named(http_port):
    said = probe.silent(f"https://127.0.0.1:{http_port}", 3)
    assert said.startswith(f"127.0.0.1:{http_port} answers, but not as an HTTPS server (")


@pytest.mark.slow  # PostgreSQL and the server
def test_the_real_services_answer_the_probe(postgres_uri, start_server):
    assert probe.silent(postgres_uri, 3) is None
    server = start_server(postgres_uri)
    assert probe.silent(server.url, 3) is None
    check = doctor.check_tracking(compose_cfg([f"tracking.uri={server.url}"]))
    assert check.status == "ok", check.text
