"""Streaming watch: one HTTP request, one JSON event per line.

The read timeout is per socket read, so it is set slightly above ``timeoutSeconds``: a healthy
stream always ends (server timeout) or delivers before it fires; a silently dead one raises
:class:`~cloudcoil_sync.client._internal.errors.APITimeout`. ``ERROR`` events raise the typed error
(``Expired`` for 410). :attr:`Watch.resource_version` tracks the last seen version (bookmarks
included) so callers can resume; :meth:`Watch.close` may be called from any thread.

Lines are assembled at linear cost (pieces joined once) and bounded: an event line longer than
``max_line`` (MAX_EVENT_BYTES) raises :class:`~cloudcoil_sync.client.WatchEventTooLarge`
without buffering more of it, and an informer relists.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests

from cloudcoil_sync._compat.urllib3 import response_socket
from cloudcoil_sync.client._internal import codec
from cloudcoil_sync.client._internal.errors import (
    TransportError,
    WatchEventTooLarge,
    WatchStreamError,
    api_error,
)
from cloudcoil_sync.client._internal.failures import map_transport_error
from cloudcoil_sync.client._internal.transport import Transport

__all__ = ["EVENT_TYPES", "MAX_EVENT_BYTES", "Watch", "WatchEvent"]

JSON = dict[str, Any]
EVENT_TYPES = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})
# kube-apiserver takes request bodies of at most 3 MiB and etcd stores 1.5 MiB per object by
# default; an object stored as protobuf encodes larger in JSON, and the event adds its envelope.
MAX_EVENT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """One watch event; ``object`` is the raw JSON object (``BOOKMARK``: metadata only)."""

    type: str
    object: dict[str, Any]

    @property
    def resource_version(self) -> str | None:
        return (self.object.get("metadata") or {}).get("resourceVersion")


class Watch(Iterator[WatchEvent]):
    """An open watch stream; iterate for events, :meth:`close` to stop (any thread)."""

    def __init__(
        self,
        transport: Transport,
        path: str,
        params: dict[str, Any],
        *,
        read_timeout: float,
        resource_version: str | None = None,
        accept: str | None = None,
        decode: Callable[[JSON], JSON] | None = None,
        max_line: int | None = None,
    ) -> None:
        self.resource_version = resource_version
        self.max_line = MAX_EVENT_BYTES if max_line is None else max_line
        self._closed = threading.Event()
        self._server = transport.server
        self._decode = decode
        self.url = transport.url(path, params)
        self._resp = transport.request(
            "GET", path, params=params, stream=True, read_timeout=read_timeout, accept=accept
        )
        self._events = self._iterate()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> WatchEvent:
        return next(self._events)

    def _chunks(self) -> Iterator[bytes]:
        raw = self._resp.raw
        size = None if getattr(raw, "chunked", False) else 512
        try:
            yield from self._resp.iter_content(chunk_size=size)
        except Exception as exc:
            if self._closed.is_set():
                return  # closed from another thread: whatever the read raised is expected
            if not isinstance(exc, requests.RequestException | OSError):
                raise
            err = map_transport_error(exc, "GET", self.url, self._server)
            if type(err) is TransportError:
                err = WatchStreamError(
                    f"watch stream from {self._server} broke (resume from resourceVersion "
                    f"{self.resource_version}): {exc}",
                    method="GET",
                    url=self.url,
                )
            raise err from exc

    def _iterate(self) -> Iterator[WatchEvent]:
        pending: list[bytes] = []  # pieces of the line not yet complete, joined once
        size = 0
        try:
            for chunk in self._chunks():  # sizes checked inline: a call per line is CPU
                if b"\n" not in chunk:
                    size += len(chunk)
                    if size > self.max_line:
                        raise self._too_large()
                    pending.append(chunk)
                    continue
                lines = chunk.split(b"\n")  # one split per chunk, not per line
                if pending:
                    pending.append(lines[0])
                    lines[0] = b"".join(pending)
                    pending.clear()
                tail = lines.pop()
                size = len(tail)
                if tail:
                    pending.append(tail)
                for line in lines:
                    if len(line) > self.max_line:
                        raise self._too_large()
                    if line.strip():
                        yield self._event(line, complete=True)
                if size > self.max_line:
                    raise self._too_large()
                if self._closed.is_set():
                    return
            rest = b"".join(pending)
            if rest.strip() and not self._closed.is_set():
                yield self._event(rest, complete=False)
        finally:
            self.close()

    def _too_large(self) -> WatchEventTooLarge:
        return WatchEventTooLarge(
            f"watch stream from {self._server}: an event is longer than {self.max_line} "
            f"bytes (resume from resourceVersion {self.resource_version} by listing again)",
            method="GET",
            url=self.url,
        )

    def _event(self, line: bytes, *, complete: bool) -> WatchEvent:
        try:
            data = codec.loads(line)
        except ValueError:
            what = "malformed line" if complete else "truncated line (stream ended mid-event)"
            raise WatchStreamError(
                f"watch stream from {self._server}: {what}: {line[:200]!r}",
                method="GET",
                url=self.url,
            ) from None
        etype = data.get("type") if isinstance(data, dict) else None
        obj = data.get("object") if isinstance(data, dict) else None
        if etype not in EVENT_TYPES or not isinstance(obj, dict):
            raise WatchStreamError(
                f"watch stream from {self._server}: not a watch event: {line[:200]!r}",
                method="GET",
                url=self.url,
            )
        if etype == "ERROR":
            raise api_error(int(obj.get("code") or 500), obj, method="GET", url=self.url)
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if rv:
            self.resource_version = rv
        return WatchEvent(etype, obj if self._decode is None else self._decode(obj))

    def close(self) -> None:
        """Stop the stream; a thread blocked reading it wakes up and iteration ends."""
        if self._closed.is_set():
            return
        self._closed.set()
        sock = response_socket(self._resp.raw)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._resp.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
