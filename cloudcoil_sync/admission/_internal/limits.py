"""`ConnectionLimits`: how long and how many connections one admission client may hold.

The defaults keep any single client (one address) from denying the webhook to others: a
TLS handshake must finish within `handshake_timeout`; a request's headers must be complete
`header_timeout` after its first byte; its body must then arrive at `min_body_rate` bytes/s
on average (after `body_grace` seconds); a kept-alive connection idle for `idle_timeout`
closes. One address holds at most `max_connections_per_client` of the `max_connections`.
Over either limit, a connection that has not completed its handshake or its current request
for at least `evictable_silence` seconds (the longest waiting first), else the one idle the
longest between requests (at least `evictable_idle` seconds), makes room: from the newcomer's
own address at its share, else from addresses holding more than it (see `connections`);
when none can, the newcomer is answered 503 with `Retry-After: retry_after` once its
handshake is done (at most `max_rejecting` at once; beyond that it is closed at once).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from cloudcoil_sync._internal.numbers import is_number

__all__ = ["ConnectionLimits"]


@dataclass(frozen=True)
class ConnectionLimits:
    """Limits of the admission TLS listener (see the module docstring)."""

    max_connections: int = 256
    max_connections_per_client: int = 64
    handshake_timeout: float = 5.0
    header_timeout: float = 10.0
    min_body_rate: int = 64 * 1024
    body_grace: float = 2.0
    # Above the API server's own 90 s (client-go's transport: Go's IdleConnTimeout), so
    # the client retires an idle connection first: one we close may meet a POST already
    # sent on it, which kube-apiserver does not retry. waitress's channel_timeout is 120 s.
    idle_timeout: float = 120.0
    evictable_silence: float = 0.1
    evictable_idle: float = 1.0
    max_rejecting: int = 128
    retry_after: int = 1

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            if field.type == "int":
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"Webhook {field.name} must be a positive integer")
            elif not (is_number(value) and value > 0):
                raise ValueError(f"Webhook {field.name} must be a finite positive number")
        if self.max_connections_per_client > self.max_connections:
            raise ValueError("Webhook max_connections_per_client cannot exceed max_connections")
