"""`ConnectionTable`: which admission connections are open, per client address, and which
one gives way when a limit is reached (see `limits`).

The accept thread asks `admit` for each new connection: admitted (possibly after evicting
one that has waited for a ClientHello, or been idle between requests, the longest), or
refused (to be answered 503). Connection threads report their phase as they go, and
`release` when they end.
"""

from __future__ import annotations

import _socket
import contextlib
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from cloudcoil_sync.admission._internal.limits import ConnectionLimits

__all__ = ["Connection", "ConnectionTable", "Phase"]


class Phase:
    """What a connection is doing; only SILENT and IDLE ones can be evicted."""

    SILENT = "silent"  # connected, not a byte of a ClientHello yet
    HANDSHAKE = "handshake"
    IDLE = "idle"  # between requests: nothing of the next one received
    ACTIVE = "active"  # receiving or answering a request


@dataclass(eq=False)
class Connection:
    """One client connection; `abort` may be called from any thread."""

    client: socket.socket
    peer: str = ""
    phase: str = Phase.SILENT
    since: float = field(default_factory=time.monotonic)
    closed: bool = False
    evicted: bool = False

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    def enter(self, phase: str) -> None:
        """Record the connection's phase (a plain store: read by the accept thread)."""
        if phase != self.phase:
            self.phase, self.since = phase, time.monotonic()

    def abort(self) -> None:
        # shutdown(2) wakes any blocked call on the fd; the raw call avoids touching the
        # SSL object, which belongs to the connection's thread.
        with self.lock:
            if not self.closed:
                with contextlib.suppress(OSError):
                    _socket.socket.shutdown(self.client, socket.SHUT_RDWR)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            with contextlib.suppress(OSError):
                self.client.close()


class ConnectionTable:
    """Open connections by client address, within `limits` (thread-safe)."""

    def __init__(self, limits: ConnectionLimits) -> None:
        self.limits = limits
        self._lock = threading.Lock()
        self._by_peer: dict[str, set[Connection]] = {}
        self._count = 0
        self.evicted = 0  # connections closed to make room
        self.refused = 0  # newcomers refused at a limit

    def __len__(self) -> int:
        return self._count

    def admit(self, connection: Connection) -> bool:
        """Count `connection` in, evicting one if a limit requires; False if refused."""
        limits = self.limits
        with self._lock:
            mine = self._by_peer.setdefault(connection.peer, set())
            if len(mine) >= limits.max_connections_per_client:
                victim = self._victim(mine)
            elif self._count >= limits.max_connections:
                victim = self._victim(c for group in self._by_peer.values() for c in group)
            else:
                victim = connection  # no room needed
            if victim is None:
                if not mine:
                    del self._by_peer[connection.peer]
                self.refused += 1
                return False
            if victim is not connection:
                self._remove(victim)
                victim.evicted = True
                self.evicted += 1
            mine.add(connection)
            self._count += 1
        if victim is not connection:
            victim.abort()
        return True

    def release(self, connection: Connection) -> None:
        """`connection` ended (a no-op if it was evicted: counted out already)."""
        with self._lock:
            if not connection.evicted:
                self._remove(connection)

    def _remove(self, connection: Connection) -> None:
        group = self._by_peer.get(connection.peer)
        if group is not None and connection in group:
            group.discard(connection)
            self._count -= 1
            if not group:
                del self._by_peer[connection.peer]

    def _victim(self, candidates: Iterable[Connection]) -> Connection | None:
        """The connection silent the longest (past `evictable_silence`), else the one idle
        the longest (past `evictable_idle`); None when every connection is in use."""
        silent: Connection | None = None
        idle: Connection | None = None
        now = time.monotonic()
        silent_before = now - self.limits.evictable_silence
        idle_before = now - self.limits.evictable_idle
        for candidate in candidates:
            phase, since = candidate.phase, candidate.since
            if phase == Phase.SILENT and since <= silent_before:
                silent = candidate if silent is None or since < silent.since else silent
            elif phase == Phase.IDLE and since <= idle_before:
                idle = candidate if idle is None or since < idle.since else idle
        return silent if silent is not None else idle
