"""TLS front for the admission server: accept, handshake and hand each connection to HTTP.

waitress cannot terminate TLS (a TLS-wrapped listener makes its single accept thread do
handshakes, so one silent client stalls everyone). This front accepts on its own thread,
hands each connection to a thread of its own (bounded), performs the handshake there under a
deadline, then lets the caller's `serve` speak HTTP over the decrypted stream on that same
thread: no plaintext ever leaves the process, and no bytes are relayed between threads.

Serving certificates are reloaded when their files change (`serving_certs`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import select
import socket
import ssl
import threading
import time
from collections.abc import Callable

from cloudcoil_sync._internal.service import ExitCallback
from cloudcoil_sync.admission._internal.connections import Connection, ConnectionTable, Phase
from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.serving_certs import CertificateStore, load_server_context

__all__ = ["CertificateStore", "TLSFront", "TLSStream", "load_server_context"]

log = logging.getLogger("cloudcoil_sync.admission.tls")

_CHUNK = 65536
_LIMIT_WARNING_INTERVAL = 10.0
# Accept retry when it failed (EMFILE) and no connection of ours can free a descriptor.
_ACCEPT_RETRY = 1.0
# Once the front stops, how long a request begun (its first bytes in) may take to arrive in
# full: an API server writes one at once; a client dripping one is not waited for longer.
_BEGUN_REQUEST_GRACE = 1.0


Serve = Callable[["TLSStream"], None]

# What a connection over the limits is answered once its handshake is done.
_BUSY_BODY = b"The admission webhook is at its connection limit; retry later\n"
# How long a connection over the limits may take for its handshake and request headers.
_REJECT_TIMEOUT = 1.0


class TLSFront:
    """Accept TLS on `(host, port)`; `serve` speaks HTTP on each connection's own thread.

    `serve(stream)` is called once per connection after its handshake, on that connection's
    thread, and returns when the connection should close. `limits` bound how many
    connections there are, per client address and in all, and how long a handshake may
    take; a connection over them is answered 503 (see `limits`).
    """

    def __init__(
        self,
        certificates: CertificateStore,
        serve: Serve,
        *,
        host: str = "0.0.0.0",
        port: int = 9443,
        limits: ConnectionLimits | None = None,
        io_timeout: float = 30.0,
        backlog: int = 1024,
    ) -> None:
        self.certificates = certificates
        self.serve = serve
        self.host = host
        self.port = port
        self.limits = limits if limits is not None else ConnectionLimits()
        self.io_timeout = io_timeout
        # Deep enough for a flood of connections while the accept thread catches up: a full
        # backlog drops SYNs, and a client's retransmission comes only after a second.
        self.backlog = backlog
        self.table = ConnectionTable(self.limits)
        self._lock = threading.Lock()
        #: Notified when a connection of ours ends (its descriptor is free) and on stop.
        self._freed = threading.Condition(self._lock)
        self._connections: dict[threading.Thread, Connection] = {}
        self._rejecting = 0
        self._listener: socket.socket | None = None
        self._accept_thread: threading.Thread | None = None
        self._wake_r, self._wake_w = -1, -1
        self._stopping = threading.Event()
        self._drain_deadline = 0.0
        self._stop_began = 0.0
        #: A client from outside loopback connected (one that may reach us through a Service).
        self.remote_clients = False
        self.accepted = 0  # connections handed to a thread
        self.rejected = 0  # connections refused at a limit (answered 503 or closed)
        self._next_limit_warning = 0.0

    # -- lifecycle -------------------------------------------------------------------------

    def start(self, on_exit: ExitCallback | None = None) -> None:
        """Bind and start accepting; OSError if the address cannot be bound.

        `on_exit` is called if the accept loop ends without `stop` (with its error).
        """
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
            target=self._accept_loop, args=(on_exit,), name="webhook-tls-accept", daemon=True
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

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop accepting, let in-flight requests answer, then close; True if all joined.

        Idle keep-alive connections close at once; a connection waiting for its response may
        finish within `timeout`, after which it is aborted.
        """
        if self._accept_thread is None or self._stopping.is_set():
            return self._join_all(time.monotonic())
        self._stop_began = time.monotonic()
        deadline = self._stop_began + timeout
        self._drain_deadline = deadline - min(1.0, timeout / 2)
        self._stopping.set()
        os.write(self._wake_w, b"x")  # level-triggered: wakes every select, now and later
        with self._freed:
            self._freed.notify_all()  # an accept loop waiting for a free descriptor
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

    def _accept_loop(self, on_exit: ExitCallback | None) -> None:
        error: BaseException | None = None
        try:
            self._accept()
        except Exception as failure:  # the owner learns it through on_exit
            log.error("Webhook TLS accept loop failed: %s", failure)
            error = failure
        if on_exit is not None and not self._stopping.is_set():
            on_exit(error)

    def _accept(self) -> None:
        listener = self._listener
        assert listener is not None
        try:
            while not self._stopping.is_set():
                ready = _poll({listener.fileno(): select.POLLIN, self._wake_r: select.POLLIN})
                if self._wake_r in ready:
                    break
                try:
                    client, peer = listener.accept()
                except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                    continue
                except OSError as error:  # e.g. EMFILE: wait for a descriptor, keep serving
                    log.warning("Webhook TLS accept failed: %s", error)
                    self._await_descriptor()
                    continue
                if not self.remote_clients and not _loopback(str(peer[0])):
                    self.remote_clients = True
                self._dispatch(Connection(client, peer=str(peer[0])))
        finally:
            listener.close()

    def _await_descriptor(self) -> None:
        """Until one of our connections ends (freeing its descriptor) or `stop`. With none
        open the descriptors are held elsewhere in the process, which tells us nothing when
        it frees one: then accept is retried after `_ACCEPT_RETRY` (`stop` still wakes it)."""
        with self._freed:
            open_now = len(self._connections)
            self._freed.wait_for(
                lambda: self._stopping.is_set() or len(self._connections) < open_now,
                None if open_now else _ACCEPT_RETRY,
            )

    def _dispatch(self, connection: Connection) -> None:
        if self.table.admit(connection):
            self.accepted += 1
            if not self._start(connection, self._serve, f"webhook-tls-{self.accepted}"):
                self.table.release(connection)
            return
        self.rejected += 1
        self._warn_at_limit()
        with self._lock:
            room = self._rejecting < self.limits.max_rejecting
            self._rejecting += room
        if not room or not self._start(connection, self._reject, "webhook-tls-busy"):
            connection.close()  # not even a 503 can be afforded: close at once

    def _start(
        self, connection: Connection, target: Callable[[Connection], None], name: str
    ) -> bool:
        thread = threading.Thread(target=target, args=(connection,), name=name, daemon=True)
        with self._lock:
            self._connections[thread] = connection
        try:
            thread.start()
        except RuntimeError:
            with self._lock:
                del self._connections[thread]
            connection.close()
            return False
        return True

    def _warn_at_limit(self) -> None:
        now = time.monotonic()
        if now >= self._next_limit_warning:  # at most one warning per interval
            self._next_limit_warning = now + _LIMIT_WARNING_INTERVAL
            log.warning(
                "Webhook TLS front at its connection limits (%d in all, %d per client); "
                "answering new connections 503 (%d so far)",
                self.limits.max_connections,
                self.limits.max_connections_per_client,
                self.rejected,
            )

    # -- one connection --------------------------------------------------------------------

    def _serve(self, connection: Connection) -> None:
        try:
            tls = self._handshake(connection, self.limits.handshake_timeout)
            if tls is None:
                return
            connection.enter(Phase.IDLE)
            self.serve(TLSStream(self, tls, connection))
            # close_notify and a FIN, also for an idle connection at stop: a Go client
            # (kube-apiserver) reusing it just then lost ~20x more POSTs to an RST, and as
            # many to a lingering close (bench/close-race-results.md).
            with contextlib.suppress(OSError, ValueError):
                tls.unwrap()  # send close_notify; never wait for the client's
        except (OSError, ValueError) as error:
            log.debug("Webhook TLS connection ended: %s", error)
        except Exception:
            log.exception("Webhook TLS connection failed")
        finally:
            self._ended(connection)
            self.table.release(connection)

    def _reject(self, connection: Connection) -> None:
        """Answer 503 with Retry-After, briefly: the connection is over the limits."""
        try:
            timeout = min(self.limits.handshake_timeout, _REJECT_TIMEOUT)
            tls = self._handshake(connection, timeout)
            if tls is None:
                return
            stream = TLSStream(self, tls, connection)
            deadline = time.monotonic() + _REJECT_TIMEOUT
            head = b""
            with contextlib.suppress(TimeoutError):
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    data = stream.receive(deadline)
                    if not data:
                        return
                    head += data
            stream.send(_busy_answer(self.limits.retry_after), timeout=_REJECT_TIMEOUT)
            stream.discard(time.monotonic() + _REJECT_TIMEOUT / 2)
        except (OSError, ValueError) as error:
            log.debug("Webhook TLS connection over the limits ended: %s", error)
        finally:
            self._ended(connection)
            with self._lock:
                self._rejecting -= 1

    def _ended(self, connection: Connection) -> None:
        connection.close()
        with self._freed:
            self._connections.pop(threading.current_thread(), None)
            self._freed.notify_all()

    def _handshake(self, connection: Connection, timeout: float) -> ssl.SSLSocket | None:
        raw = connection.client
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        raw.setblocking(False)
        context = self.certificates.context()
        tls = context.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        with connection.lock:
            connection.client = tls  # wrap_socket detached `raw`; track the live object
        deadline = time.monotonic() + timeout
        # Silent until the first bytes of a ClientHello: only then not to be evicted.
        ready = _poll({tls.fileno(): select.POLLIN, self._wake_r: select.POLLIN}, timeout)
        if self._wake_r in ready or not ready:
            log.debug("Webhook TLS client sent no ClientHello in time")
            return None
        connection.enter(Phase.HANDSHAKE)
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
        return tls


def _busy_answer(retry_after: int) -> bytes:
    return (
        "HTTP/1.1 503 Service Unavailable\r\n"
        f"Retry-After: {retry_after}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(_BUSY_BODY)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + _BUSY_BODY


class TLSStream:
    """The decrypted bytes of one connection, for its own thread only (SSL objects are not
    thread-safe). The socket stays non-blocking; waits are polls bounded by the caller's
    deadlines and the front's I/O timeout, and a stopping front ends them.
    """

    def __init__(self, front: TLSFront, tls: ssl.SSLSocket, connection: Connection) -> None:
        self.front = front
        self.tls = tls
        self.connection = connection
        self.fd = tls.fileno()
        self.peer: tuple[str, int] = tls.getpeername()[:2]
        # A certificate was sent and verified against the client CA (when one is configured).
        self.client_certificate = tls.getpeercert() or None
        self.client_verified = self.client_certificate is not None
        self.poller = select.poll()
        self.poller.register(self.fd, select.POLLIN)
        self.poller.register(front._wake_r, select.POLLIN)
        tls.setblocking(False)

    def receive(self, deadline: float) -> bytes:
        """The next decrypted bytes; b"" when the connection should end (the client closed
        it, or the front stops and it is idle: see `_receive_stopping`); TimeoutError when
        none came by `deadline` (time.monotonic).
        """
        front = self.front
        while not front._stopping.is_set():
            if not self.tls.pending():
                wait = deadline - time.monotonic()
                if wait <= 0:
                    raise TimeoutError("Webhook client sent nothing in time")
                ready = {fd for fd, _ in self.poller.poll(wait * 1000)}
                if self.fd not in ready:
                    continue  # woken by stop, or the wait ran out: re-check
            try:
                data = self.tls.recv(_CHUNK)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                continue  # a record is still incomplete
            except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
                return b""
            return data
        return self._receive_stopping(deadline)

    def _receive_stopping(self, deadline: float) -> bytes:
        """Once the front stops: b"" for an idle connection with nothing to read (it is
        closed); else what arrived and the rest of a request begun (for at most
        `_BEGUN_REQUEST_GRACE`), so that a request that reached us is answered, not dropped."""
        idle = self.connection.phase == Phase.IDLE
        grace = self.front._stop_began + _BEGUN_REQUEST_GRACE
        while True:
            if not self.tls.pending():
                now = time.monotonic()
                if not idle and now >= deadline:
                    raise TimeoutError("Webhook client sent nothing in time")
                done = idle or now >= grace  # nothing more to wait for
                if not _poll({self.fd: select.POLLIN}, 0.0 if done else min(deadline, grace) - now):
                    if done:
                        return b""
                    continue
            try:
                return self.tls.recv(_CHUNK)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
                idle = False  # part of a record: a request is arriving
            except (ConnectionResetError, ssl.SSLEOFError, ssl.SSLZeroReturnError):
                return b""

    def discard(self, deadline: float, limit: int = 8 << 20, quiet: float = 0.25) -> None:
        """Read and drop what the client still sends, until it closes, pauses for `quiet`
        seconds, or `limit` bytes or `deadline` pass: closing with unread input would reset
        the connection, and the client could lose the answer it was sent."""
        with contextlib.suppress(OSError, ValueError, TimeoutError):
            while limit > 0:
                data = self.receive(min(deadline, time.monotonic() + quiet))
                if not data:
                    return
                limit -= len(data)

    def send(self, data: bytes, timeout: float | None = None) -> None:
        """Write all of `data`; TimeoutError when the client does not read it within
        `timeout` seconds (the front's I/O timeout by default)."""
        deadline = time.monotonic() + (self.front.io_timeout if timeout is None else timeout)
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
            if remaining <= 0 or not _poll({self.fd: events}, remaining):
                raise TimeoutError("Webhook client did not read its answer in time")


def _loopback(address: str) -> bool:
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(address.split("%", 1)[0])
        mapped = getattr(ip, "ipv4_mapped", None)
        return bool((mapped or ip).is_loopback)
    return False


def _poll(fds: dict[int, int], timeout: float | None = None) -> set[int]:
    """The fds of `fds` that are ready (errors and hang-ups count as ready); None waits."""
    poller = select.poll()
    for fd, events in fds.items():
        poller.register(fd, events)
    millis = None if timeout is None else max(0.0, timeout) * 1000
    return {fd for fd, _ in poller.poll(millis)}
