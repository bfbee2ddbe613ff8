"""A loopback TCP relay that a test can break, to cut one replica off the API server.

Modes: ``pass`` relays bytes (TLS passes through untouched); ``blackhole`` stops relaying in
both directions on every connection, old and new (a network partition: requests time out);
``reset`` aborts every connection with a RST and refuses new ones the same way.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading


class FaultProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._mode = "pass"
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, name="fault-proxy", daemon=True)

    def __enter__(self) -> FaultProxy:
        self._acceptor.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def mode(self) -> str:
        return self._mode

    def set_mode(self, mode: str) -> None:
        assert mode in ("pass", "blackhole", "reset")
        with self._lock:
            self._mode = mode
            doomed = list(self._sockets) if mode == "reset" else []
        for sock in doomed:
            _abort(sock)

    def close(self) -> None:
        self._closed.set()
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _abort(sock)
        self._acceptor.join(5)
        for thread in self._threads:
            thread.join(5)

    def _track(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets.update(socks)

    def _forget(self, *socks: socket.socket) -> None:
        with self._lock:
            self._sockets.difference_update(socks)
        for sock in socks:
            sock.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._mode == "reset":
                _abort(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=2)
            except OSError:
                _abort(client)
                continue
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._track(client, upstream)
            thread = threading.Thread(
                target=self._pump, args=(client, upstream), name="fault-proxy-pump", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _pump(self, client: socket.socket, upstream: socket.socket) -> None:
        peers = {client: upstream, upstream: client}
        # A selector, not select.select: that one fails on descriptors numbered past 1024,
        # which a long suite's worker process reaches (every connection then looked reset).
        selector = selectors.DefaultSelector()
        try:
            for sock in peers:
                selector.register(sock, selectors.EVENT_READ)
            while not self._closed.is_set():
                if self._mode != "pass":
                    # Partition: hold the bytes. A reset aborts the sockets from set_mode.
                    if self._closed.wait(0.02) or client.fileno() < 0:
                        return
                    continue
                for key, _ in selector.select(0.05):
                    if self._mode != "pass":
                        break
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            selector.close()
            self._forget(client, upstream)


def _abort(sock: socket.socket) -> None:
    """Close with a RST (SO_LINGER 0), as a dropped connection looks to the peer."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()
