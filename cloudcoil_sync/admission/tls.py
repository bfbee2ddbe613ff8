"""TLS front for the admission server: terminate TLS, relay plaintext to a private backend.

waitress cannot terminate TLS (a TLS-wrapped listener makes its single accept thread do
handshakes, so one silent client stalls everyone). This front accepts on its own thread,
hands each connection to a thread of its own (bounded), performs the handshake there under a
deadline, then relays bytes both ways to a backend on a private Unix socket. One backend
connection per client connection keeps HTTP keep-alive end to end.

Serving certificates are reloaded when their files change (cert-manager rotation): new
connections use the new pair, established ones keep theirs, a bad new pair is logged and the
previous one kept.
"""

from __future__ import annotations

import _socket
import contextlib
import logging
import os
import select
import socket
import ssl
import threading
import time
from dataclasses import dataclass

__all__ = ["CertificateStore", "TLSFront", "load_server_context"]

log = logging.getLogger("cloudcoil_sync.admission.tls")

_CHUNK = 65536
# After the client stops sending (EOF or shutdown), how long the backend may stay quiet
# after answering before the connection is closed.
_LINGER = 0.25
_LIMIT_WARNING_INTERVAL = 10.0


def load_server_context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A TLS 1.2+ server context for the pair; ValueError naming the problem otherwise."""
    for path in (certfile, keyfile):
        if not os.path.isfile(path):
            raise ValueError(f"Webhook TLS file does not exist: {path}")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    # A client's TCP half-close (no close_notify) must not poison the session: its answer
    # still has to be written.
    context.options |= ssl.OP_IGNORE_UNEXPECTED_EOF
    try:
        context.load_cert_chain(certfile, keyfile)
    except ssl.SSLError as error:
        raise ValueError(
            f"Webhook TLS certificate {certfile} and key {keyfile} cannot be used together: "
            f"{error.reason or error}"
        ) from None
    except OSError as error:
        raise ValueError(f"Webhook TLS files cannot be read: {error}") from None
    return context


def _signature(path: str) -> tuple[int, int, int, int]:
    # stat follows symlinks: a Secret volume's atomic `..data` swap changes the inode.
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0, 0)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


class CertificateStore:
    """The current server SSLContext, rebuilt when the certificate or key file changes.

    Files are checked at most every `check_interval` seconds, from whichever connection
    thread asks first; others keep using the current context meanwhile.
    """

    def __init__(self, certfile: str, keyfile: str, *, check_interval: float = 2.0) -> None:
        self.certfile = certfile
        self.keyfile = keyfile
        self.check_interval = check_interval
        self._signatures = (_signature(certfile), _signature(keyfile))
        self._context = load_server_context(certfile, keyfile)
        self._checked = time.monotonic()
        self._lock = threading.Lock()
        self.reloads = 0

    def context(self) -> ssl.SSLContext:
        """The context for a new connection, reloading first when the files changed."""
        if time.monotonic() - self._checked >= self.check_interval and self._lock.acquire(
            blocking=False
        ):
            try:
                self._checked = time.monotonic()
                self._maybe_reload()
            finally:
                self._lock.release()
        return self._context

    def _maybe_reload(self) -> None:
        signatures = (_signature(self.certfile), _signature(self.keyfile))
        if signatures == self._signatures:
            return
        # Record before loading: a bad pair is reported once, retried only when files change.
        self._signatures = signatures
        try:
            self._context = load_server_context(self.certfile, self.keyfile)
        except ValueError as error:
            log.error("Keeping the previous webhook TLS certificate: %s", error)
            return
        self.reloads += 1
        log.info("Reloaded webhook TLS certificate from %s", self.certfile)


@dataclass
class _Connection:
    """One client connection; `abort` may be called from the owner's thread."""

    client: socket.socket
    backend: socket.socket | None = None
    closed: bool = False

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    def abort(self) -> None:
        # shutdown(2) wakes any blocked call on the fd; the raw call avoids touching the
        # SSL object, which belongs to the connection's thread.
        with self.lock:
            if self.closed:
                return
            for sock in (self.client, self.backend):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        _socket.socket.shutdown(sock, socket.SHUT_RDWR)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            for sock in (self.client, self.backend):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()


class TLSFront:
    """Accept TLS on `(host, port)` and relay each connection to the Unix socket `backend`."""

    def __init__(
        self,
        certificates: CertificateStore,
        backend: str,
        *,
        host: str = "0.0.0.0",
        port: int = 9443,
        max_connections: int = 64,
        handshake_timeout: float = 10.0,
        idle_timeout: float = 120.0,
        io_timeout: float = 30.0,
        backlog: int = 128,
    ) -> None:
        self.certificates = certificates
        self.backend = backend
        self.host = host
        self.port = port
        self.max_connections = max_connections
        self.handshake_timeout = handshake_timeout
        self.idle_timeout = idle_timeout
        self.io_timeout = io_timeout
        self.backlog = backlog
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._connections: dict[threading.Thread, _Connection] = {}
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._stopping = threading.Event()
        self._drain_deadline = 0.0
        self.accepted = 0  # connections handed to a thread
        self.rejected = 0  # connections closed at the limit
        self._next_limit_warning = 0.0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Bind and start accepting; OSError if the address cannot be bound."""
        if self._accept_thread is not None:
            raise RuntimeError("The webhook TLS front can only be started once")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        listener = socket.create_server(
            (self.host, self.port),
            family=family,
            backlog=self.backlog,
            dualstack_ipv6=self.host == "::" and socket.has_dualstack_ipv6(),
        )
        listener.setblocking(False)
        self._listener = listener
        self._wake_r, self._wake_w = os.pipe()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name="webhook-tls-accept", daemon=True
        )
        self._accept_thread.start()

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); port resolved when 0 was asked."""
        if self._listener is None:
            return (self.host, self.port)
        name = self._listener.getsockname()
        return (name[0], name[1])

    @property
    def accepting(self) -> bool:
        thread = self._accept_thread
        return thread is not None and thread.is_alive() and not self._stopping.is_set()

    @property
    def active_connections(self) -> int:
        with self._lock:
            return len(self._connections)

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop accepting, let in-flight requests answer, then close; True if all joined.

        Idle keep-alive connections close at once; a connection waiting for its response may
        finish within `timeout`, after which it is aborted.
        """
        if self._accept_thread is None or self._stopping.is_set():
            return self._join_all(time.monotonic())
        deadline = time.monotonic() + timeout
        self._drain_deadline = deadline - min(1.0, timeout / 2)
        self._stopping.set()
        os.write(self._wake_w, b"x")  # level-triggered: wakes every select, now and later
        self._accept_thread.join(max(0.0, deadline - time.monotonic()))
        return self._join_all(deadline)

    def _join_all(self, deadline: float) -> bool:
        with self._lock:
            pending = dict(self._connections)
        for thread in pending:
            thread.join(max(0.0, self._drain_deadline - time.monotonic()))
        for thread, connection in pending.items():
            if thread.is_alive():
                connection.abort()
            thread.join(max(0.0, deadline - time.monotonic()))
        joined = not any(thread.is_alive() for thread in pending)
        if self._accept_thread is not None:
            joined = joined and not self._accept_thread.is_alive()
        if joined and self._wake_r >= 0:
            os.close(self._wake_r)
            os.close(self._wake_w)
            self._wake_r = self._wake_w = -1
        return joined

    # -- accepting -------------------------------------------------------------------------

    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        try:
            while not self._stopping.is_set():
                ready = _poll({listener.fileno(): select.POLLIN, self._wake_r: select.POLLIN})
                if self._wake_r in ready:
                    break
                try:
                    client, _ = listener.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                except OSError as error:  # e.g. EMFILE: back off briefly, keep serving
                    log.warning("Webhook TLS accept failed: %s", error)
                    self._stopping.wait(0.1)
                    continue
                self._dispatch(client)
        finally:
            listener.close()

    def _dispatch(self, client: socket.socket) -> None:
        if not self._slots.acquire(blocking=False):
            self.rejected += 1
            now = time.monotonic()
            if now >= self._next_limit_warning:  # at most one warning per interval
                self._next_limit_warning = now + _LIMIT_WARNING_INTERVAL
                log.warning(
                    "Webhook TLS front at its %d connection limit; closing new connections "
                    "(%d so far)",
                    self.max_connections,
                    self.rejected,
                )
            client.close()
            return
        self.accepted += 1
        connection = _Connection(client)
        thread = threading.Thread(
            target=self._serve,
            args=(connection,),
            name=f"webhook-tls-{self.accepted}",
            daemon=True,
        )
        with self._lock:
            self._connections[thread] = connection
        try:
            thread.start()
        except RuntimeError:
            with self._lock:
                del self._connections[thread]
            self._slots.release()
            client.close()

    # -- one connection --------------------------------------------------------------------

    def _serve(self, connection: _Connection) -> None:
        try:
            tls = self._handshake(connection)
            if tls is None:
                return
            backend = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            with connection.lock:
                connection.backend = backend
            backend.settimeout(self.io_timeout)
            backend.connect(self.backend)
            self._relay(tls, backend)
            with contextlib.suppress(OSError, ValueError):
                tls.unwrap()  # send close_notify; never wait for the client's
        except (OSError, ValueError) as error:
            log.debug("Webhook TLS connection ended: %s", error)
        except Exception:
            log.exception("Webhook TLS connection failed")
        finally:
            connection.close()
            with self._lock:
                self._connections.pop(threading.current_thread(), None)
            self._slots.release()

    def _handshake(self, connection: _Connection) -> ssl.SSLSocket | None:
        raw = connection.client
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.setblocking(False)
        context = self.certificates.context()
        tls = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        with connection.lock:
            connection.client = tls  # wrap_socket detached `raw`; track the live object
        deadline = time.monotonic() + self.handshake_timeout
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                events = select.POLLIN
            except ssl.SSLWantWriteError:
                events = select.POLLOUT
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                log.debug("Webhook TLS handshake timed out")
                return None
            ready = _poll({tls.fileno(): events, self._wake_r: select.POLLIN}, remaining)
            if self._wake_r in ready:
                return None
        tls.settimeout(self.io_timeout)
        return tls

    def _relay(self, tls: ssl.SSLSocket, backend: socket.socket) -> None:
        _Relay(self, tls, backend).run()


class _Relay:
    """Pump bytes both ways for one connection, on its one thread (SSL objects are not
    thread-safe). The TLS socket stays non-blocking: a partial record from the client
    never blocks the backend direction.
    """

    def __init__(self, front: TLSFront, tls: ssl.SSLSocket, backend: socket.socket) -> None:
        self.front = front
        self.tls = tls
        self.backend = backend
        self.client_fd, self.backend_fd = tls.fileno(), backend.fileno()
        self.poller = select.poll()
        for fd in (self.client_fd, self.backend_fd, front._wake_r):
            self.poller.register(fd, select.POLLIN)
        self.awaiting = False  # request bytes went to the backend since it last answered
        self.client_open = True
        self.finishing = False  # client closed or front stopping: only answers flow now
        self.answer_pending = False  # a request was in flight when finishing began
        self.last_activity = self.answered_at = self.closed_at = time.monotonic()
        tls.setblocking(False)

    def run(self) -> None:
        front = self.front
        while True:
            now = time.monotonic()
            draining = front._stopping.is_set()
            if draining or not self.client_open:
                self._finish()
            wait = self._wait(now, draining)
            if wait is None:
                return
            if not self.finishing and self.tls.pending():
                ready = {self.client_fd}
            else:
                ready = {fd for fd, _ in self.poller.poll(max(0.0, wait) * 1000)}
            if self.backend_fd in ready and not self._to_client():
                return
            if self.client_fd in ready and not self.finishing:
                self._from_client()

    def _finish(self) -> None:
        if not self.finishing:
            self.finishing = True
            self.answer_pending = self.awaiting  # else nothing is owed: close at once
            self.poller.unregister(self.client_fd)
            self.poller.unregister(self.front._wake_r)  # level-triggered once stopping

    def _wait(self, now: float, draining: bool) -> float | None:
        """How long to wait for I/O, or None when the connection should end now."""
        front = self.front
        idle_left = self.last_activity + front.idle_timeout - now
        if idle_left <= 0 or (draining and now >= front._drain_deadline):
            return None
        if not self.finishing:
            return idle_left
        if not self.awaiting:
            # Nothing in flight: close now, unless an answer owed at finish has just
            # arrived, whose remaining chunks get a short grace.
            linger = self.answered_at + _LINGER - now
            return linger if self.answer_pending and linger > 0 else None
        if not self.client_open and now - self.closed_at >= front.io_timeout:
            return None  # the client left mid-request and no answer came
        wait = min(idle_left, front.io_timeout)
        return min(wait, front._drain_deadline - now) if draining else wait

    def _to_client(self) -> bool:
        data = self.backend.recv(_CHUNK)
        if not data:
            return False
        self._send_client(data)
        self.awaiting = False
        self.answered_at = self.last_activity = time.monotonic()
        return True

    def _send_client(self, data: bytes) -> None:
        deadline = time.monotonic() + self.front.io_timeout
        view = memoryview(data)
        while view:
            try:
                view = view[self.tls.send(view) :]
                continue
            except ssl.SSLWantWriteError:
                events = select.POLLOUT
            except ssl.SSLWantReadError:
                events = select.POLLIN
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not _poll({self.client_fd: events}, remaining):
                raise TimeoutError("Webhook client did not read its answer in time")

    def _from_client(self) -> None:
        try:
            data = self.tls.recv(_CHUNK)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return  # a record is still incomplete
        except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
            data = b""
        if not data:
            self.client_open = False
            self.closed_at = time.monotonic()
            return
        self.backend.sendall(data)
        self.awaiting = True
        self.last_activity = time.monotonic()


def _poll(fds: dict[int, int], timeout: float | None = None) -> set[int]:
    """The fds of `fds` that are ready (errors and hang-ups count as ready); None waits."""
    poller = select.poll()
    for fd, events in fds.items():
        poller.register(fd, events)
    millis = None if timeout is None else max(0.0, timeout) * 1000
    return {fd for fd, _ in poller.poll(millis)}
