"""`Forwarder`: a loopback TCP front that hands each new connection to the next backend in
turn, as a Service's kube-proxy does (per connection, not per request), for benchmarks that
put several replicas' webhook servers behind one address. Backends that refuse are skipped.
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading

__all__ = ["Forwarder"]

_CHUNK = 65536


class Forwarder:
    """Listens on 127.0.0.1:`port` (0: any free one) until `close()`."""

    def __init__(self, backends: list[int], port: int = 0) -> None:
        self._lock = threading.Lock()
        self._backends = list(backends)
        self._turn = itertools.count()
        self._listener = socket.create_server(("127.0.0.1", port))
        self._listener.settimeout(0.25)
        self.port = int(self._listener.getsockname()[1])
        self._closed = threading.Event()
        self._pumps: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()
        self.connections: dict[int, int] = {}  # connections handed to each backend port
        self._thread = threading.Thread(target=self._accept, name="forwarder", daemon=False)
        self._thread.start()

    def set_backends(self, backends: list[int]) -> None:
        with self._lock:
            self._backends = list(backends)

    def close(self) -> None:
        self._closed.set()
        self._thread.join(10)
        with self._lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            _shut(sock)
        for pump in self._pumps:
            pump.join(10)
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            backend = self._connect()
            if backend is None:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, backend))
            for source, sink in ((client, backend), (backend, client)):
                pump = threading.Thread(target=self._pump, args=(source, sink), daemon=False)
                self._pumps.append(pump)
                pump.start()

    def _connect(self) -> socket.socket | None:
        with self._lock:
            backends = list(self._backends)
        for _ in backends:
            port = backends[next(self._turn) % len(backends)]
            try:
                backend = socket.create_connection(("127.0.0.1", port), timeout=5)
            except OSError:
                continue
            with self._lock:
                self.connections[port] = self.connections.get(port, 0) + 1
            return backend
        return None

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        source.settimeout(None)
        try:
            while chunk := source.recv(_CHUNK):
                sink.sendall(chunk)
        except OSError:
            pass
        finally:
            _shut(sink)
            with self._lock:
                self._sockets.discard(source)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
