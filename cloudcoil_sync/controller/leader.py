"""Leader election on a coordination.k8s.io/v1 Lease (settings; runtime follows)."""

from __future__ import annotations

import math
import re
import socket
from typing import Any
from uuid import uuid4

__all__ = ["LeaderElection", "LeadershipLost"]

_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_INT32_MAX = 2**31 - 1


class LeadershipLost(Exception):
    """The leader can no longer prove it holds the Lease; its leader work was stopped."""


def _dns_name(value: Any, *, label: bool) -> str:
    """A DNS subdomain (Lease name) or a DNS label (namespace), else ValueError."""
    limit = 63 if label else 253
    if (
        not isinstance(value, str)
        or not value
        or len(value) > limit
        or (label and "." in value)
        or any(len(part) > 63 or not _LABEL.fullmatch(part) for part in value.split("."))
    ):
        raise ValueError("Lease name and namespace must be valid Kubernetes DNS names")
    return value


def _seconds(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError("Require 0 < retry_period < renew_deadline < lease_duration")
    return float(value)


class LeaderElection:
    """Elect one active replica through a coordination.k8s.io/v1 Lease.

    Defaults follow client-go/controller-runtime: 15 s lease, 10 s renew deadline, 2 s retry.
    ``lease_duration`` may be a float (short values are for tests); the Lease records it
    rounded up to whole seconds, which only makes standbys wait longer.
    """

    def __init__(
        self,
        name: str,
        *,
        namespace: str | None = None,
        identity: str | None = None,
        lease_duration: float = 15,
        renew_deadline: float = 10,
        retry_period: float = 2,
        config: Any = None,
    ) -> None:
        self.name = _dns_name(name, label=False)
        self.namespace = _dns_name(namespace, label=True) if namespace is not None else None
        self.identity = identity if identity is not None else f"{socket.gethostname()}_{uuid4()}"
        if not isinstance(self.identity, str) or not 1 <= len(self.identity) <= 128:
            raise ValueError("Lease identity must have 1-128 characters")
        if (
            isinstance(lease_duration, bool)
            or not isinstance(lease_duration, int | float)
            or not math.isfinite(lease_duration)
            or not 0 < lease_duration <= _INT32_MAX
        ):
            raise ValueError("lease_duration must be a positive int32 number of seconds")
        renew, retry = _seconds(renew_deadline), _seconds(retry_period)
        if not 0 < retry < renew < lease_duration:
            raise ValueError("Require 0 < retry_period < renew_deadline < lease_duration")
        self.lease_duration = lease_duration
        self.renew_deadline = renew
        self.retry_period = retry
        self.config = config

    @property
    def lease_duration_seconds(self) -> int:
        """What the Lease records: whole seconds, never less than the configured duration."""
        return max(1, math.ceil(self.lease_duration))

    @property
    def http_timeout(self) -> float:
        """Per-request timeout, as controller-runtime: max(1 s, renew_deadline / 2)."""
        return max(1.0, self.renew_deadline / 2)
