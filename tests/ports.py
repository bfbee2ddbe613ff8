"""A loopback port nothing listens on now, for a test's own server (or a refused connect)."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A port the kernel just handed out on 127.0.0.1 and that was released again."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
