"""A real admission webhook for emulator tests: `AdmissionWebhook` served by `WebhookHost`.

Certificates come from a CA generated per test session; the serving certificate is valid for
``webhook.operators.svc`` (the Service name kube-apiserver verifies) and 127.0.0.1.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudcoil_sync.admission import AdmissionRequest, AdmissionWebhook
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

SERVICE_NAMESPACE = "operators"
SERVICE_NAME = "webhook"
CONFIG_NAME = "demo.operators.cloudcoil.io"


@dataclass
class Calls:
    """Every AdmissionRequest a handler received, by route path."""

    seen: dict[str, list[AdmissionRequest[Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, path: str, request: AdmissionRequest[Any]) -> None:
        with self.lock:
            self.seen.setdefault(path, []).append(request)

    def of(self, path: str) -> list[AdmissionRequest[Any]]:
        with self.lock:
            return list(self.seen.get(path, []))


def write_pair(ca: CertificateAuthority, directory: Path, *hosts: str) -> tuple[str, str]:
    """tls.crt and tls.key for ``hosts`` signed by ``ca``."""
    serving = ca.issue(hosts)
    directory.mkdir(parents=True, exist_ok=True)
    certfile, keyfile = directory / "tls.crt", directory / "tls.key"
    certfile.write_bytes(serving.cert_pem)
    keyfile.write_bytes(serving.key_pem)
    keyfile.chmod(0o600)
    return str(certfile), str(keyfile)


def serve(
    webhook: AdmissionWebhook | ScriptedWebhook,
    ca: CertificateAuthority,
    directory: Path,
    service: str = f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc",
    **options: Any,
) -> Generator[WebhookHost, None, None]:
    """Run ``webhook`` over HTTPS on a loopback port until the generator is closed; the
    certificate covers ``service`` and 127.0.0.1; ``options`` go to ``WebhookHost``."""
    certfile, keyfile = write_pair(ca, directory, service, "127.0.0.1")
    options.setdefault("reload_interval", 0)
    host = WebhookHost(
        webhook, certfile=certfile, keyfile=keyfile, host="127.0.0.1", port=0, **options
    )
    host.start()
    try:
        yield host
    finally:
        assert host.stop(timeout=5), "webhook host threads did not stop"
        if isinstance(webhook, AdmissionWebhook):
            webhook.close()


def recorded(calls: Calls, path: str, action: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A handler that records its request under ``path`` then runs ``action``."""

    def handler(request: AdmissionRequest[Any]) -> Any:
        calls.record(path, request)
        return action(request)

    return handler


Answer = Callable[[dict[str, Any]], tuple[int, Any]]


class ScriptedWebhook:
    """A WSGI webhook whose answer ``answer(request)`` returns as (HTTP status, JSON body),
    for responses the real AdmissionWebhook never gives (wrong uid, bad patches...)."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.requests: list[dict[str, Any]] = []

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        request = json.loads(environ["wsgi.input"].read(length))["request"]
        self.requests.append(request)
        code, document = self.answer(request)
        body = json.dumps(document).encode()
        start_response(
            f"{code} Answer",
            [("Content-Type", "application/json"), ("Content-Length", str(len(body)))],
        )
        return [body]


def review_answer(request: dict[str, Any], **response: Any) -> dict[str, Any]:
    """An AdmissionReview answering ``request`` with ``response`` fields (allowed by default)."""
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": request["uid"], "allowed": True, **response},
    }


def json_patch(*ops: dict[str, Any]) -> str:
    return base64.b64encode(json.dumps(list(ops)).encode()).decode()


class SilentListener:
    """A TCP port that accepts connections (backlog) but never answers: calls time out."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0), backlog=16)
        self.port: int = self.sock.getsockname()[1]

    def close(self) -> None:
        self.sock.close()


def closed_port() -> int:
    """A loopback port nothing listens on (bound then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
