"""Scenario 6: a running WebhookHost under abuse, all at once — half-open TCP connections,
idle TLS clients, a slow-loris client dripping its request, malformed, oversized and
wrong-kind reviews, a crashing handler — while a well-behaved client keeps being answered
correctly: its answers go on while each abuse holds its connection, each within the client's
5 s timeout. (One-at-a-time cases live in tests/admission.)"""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.request import AdmissionRequest
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

PATH = "/mutate/cm"


def review(uid: str, data: dict[str, str] | None = None, kind: str = "ConfigMap") -> bytes:
    obj = {
        "apiVersion": "v1",
        "kind": kind,
        "metadata": {"name": "cm", "namespace": "default", "uid": "u-1"},
        "data": data or {},
    }
    request = {
        "uid": uid,
        "kind": {"group": "", "version": "v1", "kind": kind},
        "resource": {"group": "", "version": "v1", "resource": "configmaps"},
        "operation": "CREATE",
        "name": "cm",
        "namespace": "default",
        "object": obj,
        "oldObject": None,
        "dryRun": False,
        "userInfo": {"username": "alice", "uid": "a-1", "groups": [], "extra": {}},
    }
    document = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(document).encode()


class Server:
    def __init__(self, host: WebhookHost, context: ssl.SSLContext) -> None:
        self.host = host
        self.context = context

    def connection(self, timeout: float = 5) -> http.client.HTTPSConnection:
        address, port = self.host.address
        return http.client.HTTPSConnection(address, port, context=self.context, timeout=timeout)

    def post(
        self, body: bytes, connection: http.client.HTTPSConnection | None = None
    ) -> tuple[int, Any]:
        own = connection is None
        conn = connection or self.connection()
        try:
            conn.request("POST", PATH, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            if own:
                conn.close()

    def raw(self) -> socket.socket:
        return socket.create_connection(self.host.address, timeout=5)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    ca = CertificateAuthority("reliability-admission-ca")
    serving = ca.issue(("127.0.0.1",))
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    table = AdmissionRoutes()

    @table.mutating(ConfigMap, path=PATH)
    def label(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        resource = request.resource
        assert resource is not None and resource.metadata is not None
        if (resource.data or {}).get("crash"):
            raise RuntimeError("handler defect")
        resource.metadata.labels = {"managed": "yes"}
        return resource

    webhook = AdmissionWebhook(table)
    host = WebhookHost(
        webhook,
        certfile=str(tmp_path / "tls.crt"),
        keyfile=str(tmp_path / "tls.key"),
        host="127.0.0.1",
        port=0,
        # The slow loris drips its body for about 2 s: the default 2 s body grace would
        # answer it 408 on a loaded machine (tests/admission proves the body limits).
        limits=ConnectionLimits(handshake_timeout=3, idle_timeout=10, body_grace=10),
        reload_interval=0,
    )
    host.start()
    context = ssl.create_default_context(cadata=ca.cert_pem.decode())
    try:
        yield Server(host, context)
    finally:
        assert host.stop(timeout=10), "webhook host threads did not stop"
        assert webhook.close(timeout=5)


def correct(answer: tuple[int, Any], uid: str) -> bool:
    status, document = answer
    response = document.get("response") or {}
    patch = json.loads(base64.b64decode(response.get("patch") or "W10="))
    return (
        status == 200
        and response.get("uid") == uid
        and response.get("allowed") is True
        and patch == [{"op": "add", "path": "/metadata/labels", "value": {"managed": "yes"}}]
    )


def test_abuse_all_at_once_does_not_stop_correct_answers(server: Server) -> None:
    stop = threading.Event()
    answered = threading.Condition()
    correct_answers = [0]
    wrong: list[Any] = []

    def answers_go_on(more: int = 3) -> bool:
        """Wait for `more` correct answers to the well-behaved client from now on."""
        with answered:
            target = correct_answers[0] + more
            return answered.wait_for(lambda: correct_answers[0] >= target or bool(wrong), 30)

    def well_behaved() -> None:
        # Alternates fresh connections (new handshakes) and one kept-alive connection.
        kept = server.connection()
        i = 0
        while not stop.is_set():
            uid = f"good-{i}"
            try:
                answer = server.post(review(uid), kept if i % 2 else None)
            except (OSError, http.client.HTTPException) as error:
                answer = (0, {"error": repr(error)})
                kept.close()
                kept = server.connection()
            with answered:
                if correct(answer, uid):
                    correct_answers[0] += 1
                else:
                    wrong.append(answer)
                answered.notify_all()
            i += 1
        kept.close()

    good = threading.Thread(target=well_behaved, name="well-behaved-client")
    good.start()
    abusers: list[socket.socket] = []
    try:
        # Half-open: TCP connected, never a ClientHello.
        abusers += [server.raw() for _ in range(20)]
        # Idle TLS clients: handshake done, then silence.
        for _ in range(5):
            abusers.append(server.context.wrap_socket(server.raw(), server_hostname="127.0.0.1"))
        # A partial ClientHello, never finished.
        partial = server.raw()
        partial.sendall(b"\x16\x03\x01\x00")
        abusers.append(partial)
        assert answers_go_on(), wrong  # answered while all of them hold their connections

        # Slow loris: a whole request, a few bytes every 20 ms (~2 s), then answered.
        body = review("slow")
        request = (
            f"POST {PATH} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        slow = server.context.wrap_socket(server.raw(), server_hostname="127.0.0.1")
        abusers.append(slow)
        step = max(1, len(request) // 100)
        pause = threading.Event()
        for offset in range(0, len(request), step):
            slow.sendall(request[offset : offset + step])
            pause.wait(0.02)  # the client's pace, not a wait for a condition
            if offset // step == 5:  # within its headers (10 s allowed for them)
                assert answers_go_on(), wrong  # answered while the slow client drips
        reply = b""
        while b"\r\n\r\n" not in reply or not reply.rstrip().endswith(b"}"):
            chunk = slow.recv(65536)
            if not chunk:
                break
            reply += chunk
        assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
        assert b'"uid": "slow"' in reply or b'"uid":"slow"' in reply

        # Bad requests, each on its own connection, answered with the right code.
        assert server.post(b"{not json")[0] == 400
        assert server.post(b'{"apiVersion": "admission.k8s.io/v1"}')[0] == 400
        assert server.post(review("wrong", kind="Secret"))[0] == 400
        huge = review("huge", {"blob": "x" * (5 * 1024 * 1024)})
        assert server.post(huge)[0] == 413
        assert server.post(review("crash", {"crash": "1"}))[0] == 500
        assert correct(server.post(review("after-crash")), "after-crash")
        assert answers_go_on(), wrong
    finally:
        stop.set()
        good.join(30)
        for sock in abusers:
            sock.close()
    assert not good.is_alive()
    assert wrong == []
    # And after the abusers left, the server still serves new clients.
    assert correct(server.post(review("last")), "last")
    assert server.host.serving
