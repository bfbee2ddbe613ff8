"""A tiny threaded HTTP(S) fake API server for transport, TLS and watch-timing tests."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .certs import PKI


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes
    client_cert: dict[str, Any] | None = None

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    #: Streamed (chunked) body: each item is sent as one HTTP chunk and flushed.
    chunks: Iterable[bytes] | None = None


Handler = Callable[[Request], Reply]


class FakeAPI:
    """Serve ``handler`` on 127.0.0.1 (TLS when ``pki`` is given); records requests."""

    def __init__(
        self, handler: Handler, pki: PKI | None = None, *, client_ca: bool = False
    ) -> None:
        self.handler = handler
        self.requests: list[Request] = []
        self.connections = 0
        self._lock = threading.Lock()
        outer = self

        class _H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                with outer._lock:
                    outer.connections += 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                split = urlsplit(self.path)
                cert = None
                if isinstance(self.connection, ssl.SSLSocket):
                    cert = self.connection.getpeercert() or None
                req = Request(
                    self.command,
                    split.path,
                    parse_qs(split.query),
                    dict(self.headers.items()),
                    body,
                    cert,
                )
                with outer._lock:
                    outer.requests.append(req)
                reply = outer.handler(req)
                self.send_response(reply.status)
                for k, v in reply.headers.items():
                    self.send_header(k, v)
                if reply.chunks is not None:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    try:
                        for chunk in reply.chunks:
                            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                            self.wfile.flush()
                        self.wfile.write(b"0\r\n\r\n")
                    except OSError:
                        self.close_connection = True
                    return
                data = reply.body
                if not isinstance(data, bytes):
                    data = b"" if data is None else json.dumps(data).encode()
                if "Content-Type" not in reply.headers:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _H)
        self._server.daemon_threads = True
        scheme = "http"
        if pki is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(*_files(pki))
            if client_ca:
                ctx.verify_mode = ssl.CERT_OPTIONAL
                ctx.load_verify_locations(cadata=pki.ca.cert_pem.decode())
            self._server.socket = ctx.wrap_socket(self._server.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> FakeAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


_tmp: dict[int, tuple[str, str]] = {}


def _files(pki: PKI) -> tuple[str, str]:
    import os
    import tempfile

    key = id(pki)
    if key not in _tmp:
        d = tempfile.mkdtemp(prefix="fakeapi-")
        crt, k = os.path.join(d, "tls.crt"), os.path.join(d, "tls.key")
        with open(crt, "wb") as f:
            f.write(pki.server.cert_pem)
        with open(k, "wb") as f:
            f.write(pki.server.key_pem)
        _tmp[key] = (crt, k)
    return _tmp[key]
