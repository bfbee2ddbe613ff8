"""A real admission webhook for emulator tests: `AdmissionWebhook` served by `WebhookHost`.

Certificates come from a CA generated per test session; the serving certificate is valid for
``webhook.operators.svc`` (the Service name kube-apiserver verifies) and 127.0.0.1.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cloudcoil_sync.admission import AdmissionRequest, AdmissionWebhook
from cloudcoil_sync.admission.server import WebhookHost
from cloudcoil_sync.testing.tls import CertificateAuthority

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
    webhook: AdmissionWebhook, ca: CertificateAuthority, directory: Path
) -> Generator[WebhookHost, None, None]:
    """Run ``webhook`` over HTTPS on a loopback port until the generator is closed."""
    certfile, keyfile = write_pair(
        ca, directory, f"{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc", "127.0.0.1"
    )
    host = WebhookHost(
        webhook, certfile=certfile, keyfile=keyfile, host="127.0.0.1", port=0, reload_interval=0
    )
    host.start()
    try:
        yield host
    finally:
        assert host.stop(timeout=5), "webhook host threads did not stop"
        webhook.close()


def recorded(calls: Calls, path: str, action: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """A handler that records its request under ``path`` then runs ``action``."""

    def handler(request: AdmissionRequest[Any]) -> Any:
        calls.record(path, request)
        return action(request)

    return handler


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
