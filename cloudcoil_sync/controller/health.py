"""Plain-HTTP health and metrics server (settings; runtime follows)."""

from __future__ import annotations

__all__ = ["HealthServer"]


class HealthServer:
    """Serve GET /healthz, /readyz and /metrics on plain HTTP, on its own thread.

    Defaults to loopback; bind host="0.0.0.0" for container probes. Port 0 picks a free port
    (see ``address`` after start).
    """

    def __init__(self, *, host: str = "127.0.0.1", port: int = 8080) -> None:
        if not isinstance(host, str) or not host:
            raise ValueError("host must be a non-empty string")
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError("port must be an integer between 0 and 65535")
        self.host = host
        self.port = port
