"""WebhookHost over real TLS on loopback: the TLS front, waitress and the health endpoints."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import ssl
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter
from waiting import wait_until

from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.tls import TLSFront, load_server_context

from .certs import CertificateAuthority, ServingPair
from .conftest import echo_app, https, raw_connect, still_open

Factory = Callable[..., WebhookHost]


def get(host: WebhookHost, context: ssl.SSLContext, path: str) -> tuple[int, bytes, str]:
    connection = https(host, context)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.read(), response.getheader("Content-Type", "")
    finally:
        connection.close()


def peer_serial(host: WebhookHost, context: ssl.SSLContext) -> int:
    with (
        raw_connect(host) as raw,
        context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    from cryptography import x509

    return x509.load_der_x509_certificate(der).serial_number


def test_missing_tls_files_fail_clearly(tmp_path: Path, serving: ServingPair) -> None:
    missing = tmp_path / "absent.crt"
    with pytest.raises(ValueError, match=f"Webhook TLS file does not exist: {missing}"):
        load_server_context(str(missing), str(serving.keyfile))
    host = WebhookHost(lambda e, s: [], certfile=str(missing), keyfile=str(serving.keyfile))
    with pytest.raises(ValueError, match="Webhook TLS file does not exist"):
        host.start()
    assert host.stop(timeout=1)


def test_mismatched_pair_fails_clearly(
    authority: CertificateAuthority, serving: ServingPair, tmp_path: Path
) -> None:
    other = authority.issue(tmp_path / "other")
    with pytest.raises(ValueError, match="cannot be used together"):
        load_server_context(str(serving.certfile), str(other.keyfile))


def test_busy_port_fails_and_leaves_no_threads(host_factory: Factory, serving: ServingPair) -> None:
    first = host_factory()
    before = set(threading.enumerate())
    second = WebhookHost(
        lambda e, s: [],
        certfile=str(serving.certfile),
        keyfile=str(serving.keyfile),
        host="127.0.0.1",
        port=first.address[1],
    )
    with pytest.raises(OSError):
        second.start()
    assert set(threading.enumerate()) <= before
    assert second.front is None


def test_serves_https_with_keep_alive(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    connection = https(host, client_context)
    bodies = [b"{}", b"x" * 300_000, b"y" * 17_000]  # multi-record bodies broke ssl-in-waitress
    for body in bodies:
        connection.request("POST", "/echo", body=body, headers={"Content-Type": "text/plain"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        assert response.status == 200
        assert answer == {"path": "/echo", "scheme": "https", "size": len(body)}
    connection.close()
    assert host.front is not None
    assert host.front.accepted == 1  # one TLS connection carried every request


def _listening_sockets() -> dict[int, str]:
    """This process's listening TCP and Unix sockets: inode -> description."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                mine.add(int(target[8:-1]))
    listening: dict[int, str] = {}
    for table in ("tcp", "tcp6"):
        with open(f"/proc/net/{table}") as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A":  # TCP_LISTEN
                    listening[int(fields[9])] = f"tcp:{int(fields[1].rsplit(':', 1)[1], 16)}"
    with open("/proc/net/unix") as lines:
        for line in list(lines)[1:]:
            fields = line.split()
            if int(fields[3], 16) & 0x10000:  # __SO_ACCEPTCON: a listening Unix socket
                listening[int(fields[6])] = "unix:" + (fields[7] if len(fields) > 7 else "")
    return {inode: what for inode, what in listening.items() if inode in mine}


def test_the_tls_port_is_the_only_listener(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    before = _listening_sockets()
    host = host_factory()
    connection = https(host, client_context)  # a kept-alive connection is open meanwhile
    connection.request("POST", "/echo", body=b"{}")
    assert connection.getresponse().read()
    opened = {k: v for k, v in _listening_sockets().items() if k not in before}
    connection.close()
    assert list(opened.values()) == [f"tcp:{host.address[1]}"]


def test_no_plaintext_on_the_tls_port(host_factory: Factory) -> None:
    host = host_factory()
    with raw_connect(host) as raw:
        raw.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        received = b""
        try:
            while chunk := raw.recv(4096):
                received += chunk
        except ConnectionResetError:
            pass
    assert b"HTTP/" not in received and b"ok" not in received


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_1_1_is_refused(host_factory: Factory, client_context: ssl.SSLContext) -> None:
    host = host_factory()
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.check_hostname = False
    old.verify_mode = ssl.CERT_NONE
    old.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.1 at all
    old.minimum_version = ssl.TLSVersion.TLSv1_1
    old.maximum_version = ssl.TLSVersion.TLSv1_1
    with raw_connect(host) as raw, pytest.raises(ssl.SSLError) as refused:
        old.wrap_socket(raw, server_hostname="127.0.0.1")
    assert "PROTOCOL_VERSION" in str(refused.value)  # the server's alert, not a client limit
    # TLS 1.2 on its own is accepted.
    modern = ssl.create_default_context(cafile=None)
    modern.load_verify_locations(cadata=client_context.get_ca_certs(binary_form=True)[0])
    modern.maximum_version = ssl.TLSVersion.TLSv1_2
    with (
        raw_connect(host) as raw,
        modern.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        assert tls.version() == "TLSv1.2"


def test_idle_client_that_never_handshakes_does_not_block_others(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory(handshake_timeout=30)
    with raw_connect(host) as silent:  # connected, silent: no ClientHello
        status, _, _ = get(host, client_context, "/other")
        assert status == 200
        assert still_open(silent)  # served while the silent client holds its connection


def test_half_open_client_does_not_block_others(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    with (
        raw_connect(host) as raw,
        client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        status, _, _ = get(host, client_context, "/other")
        assert status == 200  # before the slow client's body, which is still awaited:
        tls.sendall(b"}" * 99)  # the slow client finishes and is answered too
        assert tls.recv(4096).startswith(b"HTTP/1.1 200")


def test_handshake_times_out(host_factory: Factory) -> None:
    host = host_factory(handshake_timeout=0.3)
    with raw_connect(host) as raw:
        raw.sendall(b"\x16\x03\x01")  # the start of a ClientHello, never finished
        raw.settimeout(5)  # the default handshake timeout: reaching it raises TimeoutError
        assert raw.recv(100) == b""  # closed by the server


def test_client_half_close_still_gets_its_answer(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    with (
        raw_connect(host) as raw,
        client_context.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        socket.socket.shutdown(tls, socket.SHUT_WR)  # TCP half-close under the TLS session
        received = b""
        while chunk := tls.recv(4096):
            received += chunk
    assert received.startswith(b"HTTP/1.1 200")
    assert received.endswith(b'"size": 2}')


def test_health_and_metrics_on_the_same_listener(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    registry = CollectorRegistry()
    Counter("cloudcoil_test_total", "A test counter", registry=registry).inc(3)
    state = {"healthy": True, "ready": False, "controllers": True}
    host = host_factory(
        healthy=lambda: state["healthy"],
        ready=lambda: state["ready"],
        controllers_ready=lambda: state["controllers"],
        registry=registry,
    )
    assert get(host, client_context, "/healthz") == (200, b"ok\n", "text/plain; charset=utf-8")
    assert get(host, client_context, "/readyz") == (
        503,
        b"not ready\n",
        "text/plain; charset=utf-8",
    )
    assert get(host, client_context, "/controllers/readyz")[:2] == (200, b"ok\n")
    state.update(healthy=False, ready=True)
    assert get(host, client_context, "/healthz")[:2] == (503, b"unhealthy\n")
    assert get(host, client_context, "/readyz")[:2] == (200, b"ok\n")
    status, body, content_type = get(host, client_context, "/metrics")
    assert status == 200 and content_type == "text/plain; version=0.0.4; charset=utf-8"
    assert b"cloudcoil_test_total 3.0" in body
    assert json.loads(get(host, client_context, "/other")[1])["path"] == "/other"


def test_certificate_rotation_without_restart_or_failed_request(
    host_factory: Factory,
    authority: CertificateAuthority,
    serving: ServingPair,
    client_context: ssl.SSLContext,
    gates: Any,
) -> None:
    host = host_factory()
    assert peer_serial(host, client_context) == serving.serial
    in_flight = https(host, client_context)
    in_flight.request("POST", "/block", body=b"{}")
    assert gates.entered.wait(5)
    rotated = authority.issue(serving.certfile.parent)  # same paths, new pair
    assert peer_serial(host, client_context) == rotated.serial
    gates.release.set()
    response = in_flight.getresponse()
    assert response.status == 200 and json.loads(response.read())["path"] == "/block"
    in_flight.close()


def test_bad_new_pair_keeps_the_old_certificate(
    host_factory: Factory,
    authority: CertificateAuthority,
    serving: ServingPair,
    client_context: ssl.SSLContext,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = host_factory()
    other = authority.issue(tmp_path / "other")
    with caplog.at_level(logging.ERROR, logger="cloudcoil_sync.admission._internal.tls"):
        os.replace(other.keyfile, serving.keyfile)  # key no longer matches the certificate
        assert peer_serial(host, client_context) == serving.serial
    assert "Keeping the previous webhook TLS certificate" in caplog.text
    assert "PRIVATE KEY" not in caplog.text


def test_in_flight_request_finishes_during_stop(
    host_factory: Factory, client_context: ssl.SSLContext, gates: Any
) -> None:
    host = host_factory()
    connection = https(host, client_context)
    connection.request("POST", "/block", body=b"{}")
    assert gates.entered.wait(5)
    with ThreadPoolExecutor(1) as pool:
        stopped = pool.submit(host.stop, 5)
        threading.Timer(0.2, gates.release.set).start()
        response = connection.getresponse()
        assert response.status == 200
        assert stopped.result(timeout=10) is True
    connection.close()


def test_stop_joins_every_thread_with_clients_connected(
    host_factory: Factory, client_context: ssl.SSLContext
) -> None:
    before = set(threading.enumerate())
    host = host_factory(handshake_timeout=30, idle_timeout=60)
    silent = raw_connect(host)  # never handshakes
    kept = https(host, client_context)  # idle keep-alive connection
    kept.request("GET", "/x")
    kept.getresponse().read()
    half = raw_connect(host)
    half_tls = client_context.wrap_socket(half, server_hostname="127.0.0.1")
    half_tls.sendall(b"POST /echo HTTP/1.1\r\nContent-Length: 9\r\n\r\n{")
    assert host.serving
    assert host.stop(timeout=3) is True  # every thread joined within the timeout
    assert not host.serving
    assert set(threading.enumerate()) <= before
    for sock in (silent, half_tls):
        sock.close()
    kept.close()


def test_secret_volume_symlink_swap_is_picked_up(
    host_factory: Callable[..., WebhookHost],
    authority: CertificateAuthority,
    client_context: ssl.SSLContext,
    tmp_path: Path,
) -> None:
    # Kubernetes Secret volumes: tls.crt -> ..data/tls.crt, ..data -> ..<timestamp>/,
    # updated by atomically re-pointing ..data.
    volume = tmp_path / "volume"
    first = authority.issue(volume / "..v1")
    (volume / "..data").symlink_to("..v1")
    for name in ("tls.crt", "tls.key"):
        (volume / name).symlink_to(f"..data/{name}")
    host = host_factory(
        certfile=str(volume / "tls.crt"), keyfile=str(volume / "tls.key"), reload_interval=0.0
    )
    assert peer_serial(host, client_context) == first.serial
    second = authority.issue(volume / "..v2")
    (volume / "..data.tmp").symlink_to("..v2")
    os.replace(volume / "..data.tmp", volume / "..data")
    assert peer_serial(host, client_context) == second.serial


def test_chunked_request_body_over_tls(
    host_factory: Callable[..., WebhookHost], client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    connection = https(host, client_context)
    chunks = [b"a" * 10_000, b"b" * 70_000, b"c"]
    connection.request("POST", "/echo", body=iter(chunks), encode_chunked=True)
    response = connection.getresponse()
    assert response.status == 200 and json.loads(response.read())["size"] == 80_001
    connection.close()


def test_large_response_over_tls(
    host_factory: Callable[..., WebhookHost], client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    status, body, _ = get(host, client_context, "/big")
    assert status == 200 and len(body) == 16 * 1024 * 1024 and body.count(b"z") == len(body)


def test_many_concurrent_clients(
    host_factory: Callable[..., WebhookHost], client_context: ssl.SSLContext
) -> None:
    host = host_factory(max_connections=64)

    def client(index: int) -> list[int]:
        connection = https(host, client_context, timeout=10)
        statuses = []
        for _ in range(5):
            connection.request("POST", "/echo", body=b"x" * index)
            response = connection.getresponse()
            assert json.loads(response.read())["size"] == index
            statuses.append(response.status)
        connection.close()
        return statuses

    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(client, range(32)))
    assert results == [[200] * 5] * 32
    assert host.front is not None and host.front.rejected == 0


def test_waitress_is_imported_only_by_the_server_module() -> None:
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import cloudcoil_sync.admission, cloudcoil_sync.admission._internal.webhook\n"
        "import cloudcoil_sync.admission._internal.tls, cloudcoil_sync.application\n"
        "assert not any(m.startswith('waitress') for m in sys.modules), 'waitress imported'\n"
        "import cloudcoil_sync.admission._internal.server\n"
        "assert 'waitress' in sys.modules\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr


def test_host_from_application_settings(
    serving: ServingPair, client_context: ssl.SSLContext
) -> None:
    from cloudcoil_sync.application import ConnectionLimits
    from cloudcoil_sync.application._internal.settings import WebhookServer

    limits = ConnectionLimits(max_connections=10, max_connections_per_client=2)
    settings = WebhookServer(
        certfile=str(serving.certfile), keyfile=str(serving.keyfile), limits=limits
    )
    host = WebhookHost.from_settings(lambda e, s: [], settings, ready=lambda: False)
    assert (host.certfile, host.keyfile, host.host, host.port, host.limits) == (
        str(serving.certfile),
        str(serving.keyfile),
        "0.0.0.0",
        9443,
        limits,
    )
    assert WebhookServer().limits == ConnectionLimits()
    with pytest.raises(TypeError, match=r"WebhookServer\.limits must be a ConnectionLimits"):
        WebhookServer(limits={"max_connections": 3})  # type: ignore[arg-type]
    assert host.stop(timeout=1)


def test_server_close_sends_close_notify(
    host_factory: Callable[..., WebhookHost], client_context: ssl.SSLContext
) -> None:
    host = host_factory()
    with (
        raw_connect(host) as raw,
        client_context.wrap_socket(
            raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False
        ) as tls,
    ):
        tls.sendall(b"GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        received = b""
        while chunk := tls.recv(4096):  # a ragged EOF would raise SSLEOFError here
            received += chunk
    assert received.startswith(b"HTTP/1.1 200")


def test_closed_connections_free_their_slot_at_once(
    host_factory: Callable[..., WebhookHost], client_context: ssl.SSLContext
) -> None:
    host = host_factory(max_connections=2, idle_timeout=60)
    front = host.front
    assert front is not None
    for _ in range(30):  # one connection per request, back to back
        assert get(host, client_context, "/x")[0] == 200
        # Freed by the client's close, long before the 60 s idle timeout could free it (the
        # server's thread may take a moment to read the close on a loaded machine).
        assert wait_until(lambda: len(front.table) == 0, 10)
    assert front.rejected == 0


def test_head_and_post_on_health_paths(
    host_factory: Callable[..., WebhookHost], client_context: ssl.SSLContext
) -> None:
    host = host_factory(ready=lambda: False)
    connection = https(host, client_context)
    connection.request("HEAD", "/healthz")
    response = connection.getresponse()
    assert response.status == 200 and response.read() == b""
    connection.request("POST", "/readyz")  # GET and HEAD only, as the HealthServer answers
    response = connection.getresponse()
    assert (response.status, response.read()) == (405, b"method not allowed\n")
    assert response.getheader("Allow") == "GET, HEAD"
    connection.request("POST", "/readyz", body=b"{}")  # never a body
    assert connection.getresponse().status == 413
    connection.close()


def test_head_answers_carry_headers_but_no_body() -> None:
    from cloudcoil_sync._internal.endpoints import OperatorEndpoints

    closed: list[bool] = []

    class Body(list[bytes]):
        def close(self) -> None:
            closed.append(True)

    def app(environ: dict[str, Any], start_response: Any) -> Body:
        start_response("405 Method Not Allowed", [("Content-Length", "9")])
        return Body([b"not POST\n"])

    endpoints = OperatorEndpoints(
        healthy=lambda: True, ready=lambda: True, controllers_ready=lambda: True, fallback=app
    )
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen.append((status, headers))
        return seen.append

    for path in ("/healthz", "/validate/x"):
        body = endpoints({"REQUEST_METHOD": "HEAD", "PATH_INFO": path}, start_response)
        assert list(body) == []
    assert [status for status, _ in seen] == ["200 OK", "405 Method Not Allowed"]
    assert ("Content-Length", "3") in seen[0][1]  # the length a GET would have
    assert closed == [True]
    get = endpoints({"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz"}, start_response)
    assert list(get) == [b"ok\n"]


def test_an_accept_loop_that_dies_is_reported_through_on_exit(
    serving: ServingPair, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(front: TLSFront) -> None:
        raise OSError("listener broken")

    monkeypatch.setattr(TLSFront, "_accept", broken)
    host = WebhookHost(
        echo_app,
        certfile=str(serving.certfile),
        keyfile=str(serving.keyfile),
        host="127.0.0.1",
        port=0,
    )
    exits: list[BaseException | None] = []
    ended = threading.Event()

    def on_exit(error: BaseException | None) -> None:
        exits.append(error)
        ended.set()

    host.start(on_exit=on_exit)
    assert ended.wait(10)
    assert [str(e) for e in exits] == ["listener broken"]
    assert not host.healthy() and not host.serving
    assert host.stop(timeout=5)
    assert len(exits) == 1
