"""`PlacingWebhook`: what a cluster gives a `Sharding(placing_webhook=True)` operator, for the
sharding benchmark: a certificate for its replicas, one address in front of their webhook
servers (`forwarder.Forwarder`, per connection in turn, as a Service), and its
MutatingWebhookConfiguration registered with that address as its ``clientConfig.url``
(a loopback API server cannot resolve a Service). Everything is removed on `close()`.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from cluster import raw_session
from common import configmap
from forwarder import Forwarder

from cloudcoil_sync.testing._internal.tls import CertificateAuthority

__all__ = ["PlacingWebhook"]

_CONFIGS = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"


class PlacingWebhook:
    def __init__(self, kubeconfig: str, namespace: str, work: Path, service_host: str) -> None:
        self.namespace = namespace
        self.session, self.server = raw_session(kubeconfig)
        self.tls = work / f"tls-{namespace}"
        self.tls.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority(f"placing-{namespace}")
        serving = ca.issue((service_host, "127.0.0.1"))
        (self.tls / "ca.crt").write_bytes(ca.cert_pem)
        (self.tls / "tls.crt").write_bytes(serving.cert_pem)
        (self.tls / "tls.key").write_bytes(serving.key_pem)
        self.forwarder = Forwarder([])
        self.ports: list[int] = []
        self.names: list[str] = []

    def register(self, documents: list[dict[str, Any]]) -> None:
        """Create `documents` (named after the namespace: they are cluster-scoped) calling
        the forwarder."""
        for document in documents:
            if document["kind"] != "MutatingWebhookConfiguration":
                raise SystemExit(f"unexpected webhook configuration {document['kind']}")
            document["metadata"]["name"] = f"{document['metadata']['name']}-{self.namespace}"
            for webhook in document["webhooks"]:
                client = webhook["clientConfig"]
                path = client["service"]["path"]
                url = f"https://127.0.0.1:{self.forwarder.port}{path}"
                webhook["clientConfig"] = {"url": url, "caBundle": client["caBundle"]}
            resp = self.session.post(f"{self.server}{_CONFIGS}", json=document, timeout=30)
            resp.raise_for_status()
            self.names.append(document["metadata"]["name"])

    def add(self) -> int:
        """A port for one more replica's webhook server, behind the front from now on."""
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        self.ports.append(port)
        self.forwarder.set_backends(self.ports)
        return port

    def remove(self, port: int) -> None:
        if port in self.ports:
            self.ports.remove(port)
            self.forwarder.set_backends(self.ports)

    def places_on(self, targets: dict[str, str], timeout: float) -> bool:
        """Whether dry-run creates of `targets` (name → expected shard) come back labelled
        so (the replica the API server reaches sees the whole ring)."""
        base = f"{self.server}/api/v1/namespaces/{self.namespace}/configmaps"
        give_up = time.monotonic() + timeout
        while time.monotonic() < give_up:
            if all(self._probe(base, name) == shard for name, shard in targets.items()):
                return True
            time.sleep(0.5)
        return False

    def _probe(self, base: str, name: str) -> str | None:
        body = configmap(self.namespace, 0)
        body["metadata"]["name"] = name
        resp = self.session.post(base, params={"dryRun": "All"}, json=body, timeout=30)
        resp.raise_for_status()
        labels = resp.json()["metadata"].get("labels") or {}
        return next((value for key, value in labels.items() if key.startswith("shard.")), None)

    def connections(self) -> dict[int, int]:
        return dict(self.forwarder.connections)

    def close(self) -> None:
        for name in self.names:
            resp = self.session.delete(f"{self.server}{_CONFIGS}/{name}", timeout=30)
            if resp.status_code not in (200, 404):
                resp.raise_for_status()
        self.forwarder.close()
        self.session.close()
