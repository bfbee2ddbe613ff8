"""A TLS `WebhookHost` on 127.0.0.1 serving the conversion of `Versions` kinds, with its own
test CA (used by the conversion tests, ``bench/conversion_record.py`` and the benchmarks)."""

from __future__ import annotations

import base64
from pathlib import Path
from types import TracebackType

from cloudcoil_sync.admission._internal.conversion_route import conversion_route
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook
from cloudcoil_sync.crd import Versions
from cloudcoil_sync.testing import CertificateAuthority

__all__ = ["ConversionServer"]


class ConversionServer:
    """``with ConversionServer(tmp, KIND) as server:`` then ``server.url(KIND)`` and
    ``server.ca_bundle`` (base64 PEM) for a CRD's clientConfig."""

    def __init__(self, directory: Path, *kinds: Versions, host: str = "127.0.0.1") -> None:
        authority = CertificateAuthority()
        serving = authority.issue((host,))
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tls.crt").write_bytes(serving.cert_pem)
        (directory / "tls.key").write_bytes(serving.key_pem)
        self.ca_bundle = base64.b64encode(authority.cert_pem).decode()
        table = AdmissionRoutes()
        for kind in kinds:
            route = conversion_route(kind)
            table.conversions[route.path] = route
        self.webhook = AdmissionWebhook(table)
        self.host = WebhookHost(
            self.webhook,
            certfile=str(directory / "tls.crt"),
            keyfile=str(directory / "tls.key"),
            host=host,
            port=0,
            reload_interval=0.0,
        )

    def url(self, kind: Versions) -> str:
        return f"https://{self.address}:{self.port}{kind.conversion_path}"

    def start(self) -> ConversionServer:
        self.stopped = False
        self.host.start()
        self.address, self.port = self.host.address  # kept: asked for after a stop too
        return self

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            self.host.stop(timeout=5)
            self.webhook.close(timeout=5)

    def __enter__(self) -> ConversionServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
