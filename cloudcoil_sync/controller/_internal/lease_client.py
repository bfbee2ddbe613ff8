"""`LeaseAPI` over the ``cloudcoil_sync.client`` transport, with a watch for standbys."""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import TYPE_CHECKING, Any

import requests

from cloudcoil_sync._compat.urllib3 import response_socket
from cloudcoil_sync.client import NotFound, TransportError

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["ClientLeaseAPI"]


class ClientLeaseAPI:
    """LeaseAPI over the ``cloudcoil_sync.client`` transport: raw JSON, no client retries.

    The elector does its own retrying within its deadline, so every call is a single attempt
    with the caller's read timeout.
    """

    def __init__(self, config: Config, namespace: str, name: str) -> None:
        self._transport = config.transport
        self._name = name
        self._collection = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
        self._item = f"{self._collection}/{name}"
        self._lock = threading.Lock()
        self._watching: Any = None
        self._interrupted = False

    def _send(self, method: str, path: str, timeout: float, body: Any = None) -> dict[str, Any]:
        timeout = max(0.05, timeout)
        # The connect and TLS handshake are bounded too: a partition must not outlast it.
        answer = self._transport.request_json(
            method, path, body=body, read_timeout=timeout, connect_timeout=timeout, retries=0
        )
        if not isinstance(answer, dict):
            raise TransportError(f"{method} {path}: the answer is not a JSON object")
        return answer

    def get(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self._send("GET", self._item, timeout)
        except NotFound:
            return None

    def create(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._send("POST", self._collection, timeout, body)

    def replace(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self._send("PUT", self._item, timeout, body)

    def wait_change(self, resource_version: str | None, seconds: int) -> None:
        """Return at the first watch event on the Lease after ``resource_version`` (any
        change, or a 410), or when the server ends the watch after ``seconds``."""
        params = {
            "watch": "1",
            "fieldSelector": f"metadata.name={self._name}",
            "timeoutSeconds": str(seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        response = self._transport.request(
            "GET",
            self._collection,
            params=params,
            stream=True,
            read_timeout=seconds + 2.0,
            connect_timeout=float(seconds),
            retries=0,
        )
        with self._lock:
            if self._interrupted:
                response.close()
                return
            self._watching = response
        try:
            # The end of the first event line: nothing is buffered (any line length is cheap).
            for chunk in response.iter_content(chunk_size=None):
                if b"\n" in chunk:
                    return
        except (OSError, requests.RequestException) as error:
            if not self._interrupted:
                raise TransportError(f"watch of Lease {self._name} broke: {error}") from None
        finally:
            with self._lock:
                self._watching = None
            response.close()

    def interrupt(self) -> None:
        """Wake a ``wait_change`` blocked on another thread (it returns); for stop."""
        with self._lock:
            self._interrupted = True
            response = self._watching
        sock = response_socket(getattr(response, "raw", None))
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
