"""`ConnectionTable`: which admission connections are open, per client address, and which
one gives way when a limit is reached (see `limits`).

The accept thread asks `admit` for each new connection: admitted (possibly after evicting
one), or refused (to be answered 503). Connection threads report their phase as they go, and
`release` when they end.

Who gives way: first a connection that has not completed its TLS handshake or its current
request (silent, handshaking or still receiving a request: it has not made progress for
`evictable_silence`), the one waiting the longest; then one idle between requests (past
`evictable_idle`), the longest idle. A connection whose request is complete (being answered)
never does, nor one whose silence is the server's own lag: bytes it sent wait unread in the
kernel, or its thread holds bytes it has not parsed yet (`busy`) — on a starved CPU a client
that keeps pace would otherwise be closed for the server's delay. Victims are taken from the
newcomer's own address when it is at its share (`max_connections_per_client`); when the
whole table is full, from the addresses that hold more connections than the newcomer's (the
largest first), else from its own: so N addresses that fill the table cannot starve the
N+1th, and the slow connections of one address cannot starve a client that makes progress
from the same address.
"""

from __future__ import annotations

import _socket
import array
import contextlib
import fcntl
import socket
import termios
import threading
import time
from dataclasses import dataclass, field

from cloudcoil_sync.admission._internal.limits import ConnectionLimits

__all__ = ["Connection", "ConnectionTable", "Phase"]


class Phase:
    """What a connection is doing; all but ACTIVE ones can be evicted."""

    SILENT = "silent"  # connected, not a byte of a ClientHello yet
    HANDSHAKE = "handshake"
    IDLE = "idle"  # between requests: nothing of the next one received
    RECEIVING = "receiving"  # part of a request received, not all of it
    ACTIVE = "active"  # a complete request: being processed or answered


# Phases of a connection that has not completed its handshake or its current request.
PENDING = frozenset({Phase.SILENT, Phase.HANDSHAKE, Phase.RECEIVING})


@dataclass(eq=False)
class Connection:
    """One client connection; `abort` may be called from any thread."""

    client: socket.socket
    peer: str = ""
    phase: str = Phase.SILENT
    since: float = field(default_factory=time.monotonic)
    closed: bool = False
    evicted: bool = False
    busy: bool = False  # its thread holds received bytes it has not parsed yet

    def __post_init__(self) -> None:
        self.lock = threading.Lock()

    def lagging(self) -> bool:
        """Whether its silence is the server's: busy, or bytes wait unread in the kernel."""
        if self.busy:
            return True
        unread = array.array("i", [0])
        with self.lock:  # the fd stays this connection's while the lock is held
            if self.closed:
                return False
            try:
                fcntl.ioctl(self.client.fileno(), termios.FIONREAD, unread)
            except (OSError, ValueError):
                return False
        return unread[0] > 0

    def enter(self, phase: str) -> None:
        """Record the connection's phase (a plain store: read by the accept thread).

        `since` is when the phase began: a request dripped a byte at a time stays as old
        as its first byte.
        """
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
                victim = self._victim([mine])
            elif self._count >= limits.max_connections:
                # Larger holders first, the newcomer's own address last.
                groups = sorted(
                    (g for g in self._by_peer.values() if len(g) > len(mine)), key=len, reverse=True
                )
                victim = self._victim([*groups, mine])
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

    def _victim(self, groups: list[set[Connection]]) -> Connection | None:
        """From `groups` in order of preference: the connection that has waited the longest
        to complete its handshake or request (past `evictable_silence`), in the first group
        that has one; else the one idle the longest (past `evictable_idle`), likewise; None
        when every connection is answering a request or too young to judge."""
        now = time.monotonic()
        pending_before = now - self.limits.evictable_silence
        idle_before = now - self.limits.evictable_idle
        any_idle = False
        for group in groups:
            pending: Connection | None = None
            for candidate in sorted(group, key=_since):
                phase = candidate.phase
                if phase in PENDING:
                    if candidate.since <= pending_before and not candidate.lagging():
                        pending = candidate
                        break
                elif phase == Phase.IDLE and candidate.since <= idle_before:
                    any_idle = True
            if pending is not None:
                return pending
        return self._oldest_idle(groups, idle_before) if any_idle else None

    @staticmethod
    def _oldest_idle(groups: list[set[Connection]], idle_before: float) -> Connection | None:
        """The longest idle connection of the first group that has one past `idle_before`
        (and is not lagging)."""
        for group in groups:
            for candidate in sorted(group, key=_since):
                if candidate.since > idle_before:
                    break
                if candidate.phase == Phase.IDLE and not candidate.lagging():
                    return candidate
        return None


def _since(connection: Connection) -> float:
    return connection.since
