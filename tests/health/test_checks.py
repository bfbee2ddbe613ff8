"""Named health checks on /healthz and /readyz (`?verbose`, `?exclude=`, `/readyz/<name>`), as
kube-apiserver shows them, over real HTTP on loopback."""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from cloudcoil_sync import Application
from cloudcoil_sync.controller._internal.checks import HealthChecks, certificate_check, serve_checks
from cloudcoil_sync.controller._internal.health import HealthServer
from tests.fake_clock import FakeClock


class Flag:
    def __init__(self) -> None:
        self.ok = True
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return self.ok


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def checks(clock: FakeClock) -> HealthChecks:
    return HealthChecks(clock=clock)


@pytest.fixture
def server(checks: HealthChecks) -> Iterator[HealthServer]:
    server = HealthServer(port=0)
    server.checks = checks
    server.probe(lambda: True, lambda: True).start()
    yield server
    server.stop()


def get(server: HealthServer, path: str) -> tuple[int, str]:
    assert server.address is not None
    host, port = server.address
    answer = requests.get(f"http://{host}:{port}{path}", timeout=5)
    return answer.status_code, answer.text


def test_verbose_lists_each_check_and_a_failing_one_turns_readyz_false_within_its_period(
    server: HealthServer, checks: HealthChecks, clock: FakeClock
) -> None:
    database = Flag()
    checks.add("database", database, period=10.0, timeout=5.0)
    checks.add("heartbeat", Flag(), liveness=True, readiness=False)
    assert get(server, "/readyz") == (200, "ok\n")
    assert get(server, "/readyz?verbose") == (
        200,
        "[+]ping ok\n[+]controllers ok\n[+]database ok\nreadyz check passed\n",
    )
    assert get(server, "/healthz?verbose")[1].splitlines()[2] == "[+]heartbeat ok"
    database.ok = False
    assert get(server, "/readyz")[0] == 200  # the result is kept for its period
    clock.advance(10.0)
    assert get(server, "/readyz") == (503, "not ready\n")
    assert get(server, "/readyz?verbose") == (
        503,
        "[+]ping ok\n[+]controllers ok\n[-]database failed: reason withheld\nreadyz check failed\n",
    )
    assert get(server, "/readyz/database") == (503, "[-]database failed: reason withheld\n")
    assert get(server, "/readyz?exclude=database")[0] == 200
    assert get(server, "/readyz/nothing")[0] == 404
    assert get(server, "/healthz") == (200, "ok\n")  # a readiness check only
    assert database.calls == 2


def test_a_check_that_hangs_fails_at_its_timeout_and_is_not_started_twice(
    server: HealthServer, checks: HealthChecks
) -> None:
    release, calls = threading.Event(), []

    def stuck() -> bool:
        calls.append(1)
        release.wait(10)
        return True

    checks.add("stuck", stuck, timeout=0.05, period=0)
    try:
        assert get(server, "/readyz/stuck") == (503, "[-]stuck failed: reason withheld\n")
        assert get(server, "/readyz")[0] == 503
        assert len(calls) == 1
    finally:
        release.set()


def test_a_check_that_raises_fails(server: HealthServer, checks: HealthChecks) -> None:
    def broken() -> bool:
        raise RuntimeError("no connection")

    checks.add("broken", broken)
    assert get(server, "/readyz")[0] == 503


def certificate(path: Path, *, days: int) -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "webhook")])
    now = datetime.datetime.now(datetime.UTC)
    end = now + datetime.timedelta(days=days)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(min(now, end) - datetime.timedelta(days=1))
        .not_valid_after(end)
        .sign(key, hashes.SHA256())
    )
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path)


def test_readiness_reflects_informer_sync_and_the_webhook_certificate(
    server: HealthServer, checks: HealthChecks, tmp_path: Path
) -> None:
    synced = Flag()
    certfile = certificate(tmp_path / "tls.crt", days=30)
    serve_checks(checks, synced=synced, certfile=certfile)
    status, body = get(server, "/readyz?verbose")
    assert status == 200
    assert "[+]informer-sync ok" in body and "[+]webhook-certificate ok" in body
    synced.ok = False
    assert get(server, "/readyz/informer-sync")[0] == 503
    synced.ok = True
    certificate(tmp_path / "tls.crt", days=-1)  # rotated to an expired one
    assert get(server, "/readyz/webhook-certificate")[0] == 503
    with pytest.raises(ValueError, match=r"tls.crt expired at 20"):
        certificate_check(certfile)()


def test_app_health_check_registers_and_validates() -> None:
    app = Application("demo")

    @app.health_check(timeout=1, period=5)
    def upstream_api() -> bool:
        return True

    assert app.checks.names("readyz") == ["upstream-api"]
    assert app.checks.names("healthz") == []
    with pytest.raises(ValueError, match="already registered"):
        app.health_check("upstream-api")(upstream_api)
    with pytest.raises(ValueError, match="lower case"):
        app.health_check("Bad Name")(upstream_api)
    with pytest.raises(ValueError, match="period must be a finite number"):
        app.health_check("x", period=float("nan"))(upstream_api)
