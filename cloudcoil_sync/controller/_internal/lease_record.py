"""What a coordination.k8s.io/v1 Lease says, and what a candidate has seen of it.

The Lease API the elector calls (`LeaseAPI`), readers of the record (holder, uid, spec), the
MicroTime stamps it writes, and `LeaseObserver`, the takeover rule as pure bookkeeping on the
candidate's own monotonic clock (remote timestamps are never trusted).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from cloudcoil_sync.client import APIError, ClientError

__all__ = ["LeaseAPI", "LeaseObserver", "holder", "is_fatal", "micro_time", "spec", "uid"]

_RECORD_FIELDS = (
    "holderIdentity",
    "leaseDurationSeconds",
    "acquireTime",
    "renewTime",
    "leaseTransitions",
)


class LeaseAPI(Protocol):
    """The three Lease calls the elector makes; each must give up after ``timeout`` seconds.

    An implementation may also offer ``wait_change(resource_version, seconds)`` (block until
    the Lease changes; standbys then watch rather than sleep) and ``interrupt()`` (wake such a
    wait from another thread, for stop); the elector uses them when present.
    """

    def get(self, timeout: float) -> dict[str, Any] | None:
        """The Lease as JSON, or None when it does not exist."""

    def create(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """POST; AlreadyExists/Conflict when another candidate was faster."""

    def replace(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        """PUT with ``metadata.resourceVersion`` as optimistic lock; Conflict when stale."""


def micro_time() -> str:
    """A Kubernetes MicroTime: always six fractional digits, UTC."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def spec(lease: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of the Lease's spec ({} when missing or malformed)."""
    value = lease.get("spec")
    return dict(value) if isinstance(value, Mapping) else {}


def uid(lease: Mapping[str, Any]) -> str | None:
    metadata = lease.get("metadata")
    return metadata.get("uid") if isinstance(metadata, Mapping) else None


def holder(lease: Mapping[str, Any]) -> str:
    """The holder's identity, "" when released."""
    return str(spec(lease).get("holderIdentity") or "")


def is_fatal(error: BaseException) -> bool:
    """4xx answers other than 404/408/409/429 mean a setup error retrying cannot fix."""
    if isinstance(error, APIError):
        return 400 <= error.status_code < 500 and error.status_code not in (404, 408, 409, 429)
    return not isinstance(error, ClientError)


class LeaseObserver:
    """What a candidate has seen of the Lease, timed on its own monotonic clock.

    Pure bookkeeping (no I/O, the caller passes ``now``), so the takeover rule can be tested
    without HTTP: a held record may be taken once it stayed unchanged for its
    ``leaseDurationSeconds``; a released record (empty holder) or an absent Lease at once
    (a created Lease then waits out :meth:`quarantine`, zero unless a holder was seen).
    """

    def __init__(self) -> None:
        self._record: str | None = None
        self._since = 0.0
        self._longest_held = 0.0

    def observe(self, lease: Mapping[str, Any] | None, now: float, *, fallback: float) -> None:
        """Record a GET answer (None = 404). ``fallback`` replaces an invalid duration."""
        if lease is None:
            self._record = None
            return
        fields = spec(lease)
        record = json.dumps(
            {"uid": uid(lease), **{key: fields.get(key) for key in _RECORD_FIELDS}},
            sort_keys=True,
            default=str,
        )
        if record != self._record:
            self._record, self._since = record, now
        if holder(lease):
            self._longest_held = max(self._longest_held, self.duration(lease, fallback))

    @staticmethod
    def duration(lease: Mapping[str, Any], fallback: float) -> float:
        value = spec(lease).get("leaseDurationSeconds")
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            # Never shorter than our own setting: an odd record must not speed up takeover.
            return fallback
        return float(value)

    def wait_before_acquire(
        self, lease: Mapping[str, Any] | None, identity: str, now: float, *, fallback: float
    ) -> float:
        """Seconds ``identity`` must still wait before taking the Lease (0 = may take now)."""
        if lease is None:
            return 0.0
        current = holder(lease)
        if not current or current == identity:
            return 0.0
        return max(0.0, self._since + self.duration(lease, fallback) - now)

    def quarantine(self, fallback: float) -> float:
        """How long to hold a Lease we created before starting leader work.

        Zero if no holder was ever seen: the create was atomic, nobody else holds it. If one
        was, the Lease was deleted under it, maybe while it still leads (polls cannot prove
        the absence was continuous); it stops by its renew deadline, shorter than its lease
        duration: ours, or the longest a holder was seen using.
        """
        return max(fallback, self._longest_held) if self._longest_held else 0.0
