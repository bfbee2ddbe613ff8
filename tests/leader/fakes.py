"""An in-memory Lease store with the API server's optimistic-lock rules, for unit tests."""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import uuid
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.client._internal.errors import (
    AlreadyExists,
    ClientError,
    Conflict,
    NotFound,
)
from cloudcoil_sync.controller._internal.lease import LeaseSettings

log = logging.getLogger("tests.leader.fakes")

#: The Lease settings of the state-machine tests (15/10/2 s, as client-go's defaults).
SETTINGS = LeaseSettings(
    name="lock",
    namespace="ops",
    identity="me",
    lease_duration_seconds=15,
    renew_deadline=10,
    retry_period=2,
)


class FakeLeaseStore:
    """One Lease, shared by every FakeLeaseAPI built from it (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lease: dict[str, Any] | None = None
        self.writes: list[dict[str, Any]] = []
        self._versions = itertools.count(100)

    def next_version(self) -> str:
        """The next resourceVersion (call with ``lock`` held)."""
        return str(next(self._versions))

    def snapshot(self) -> dict[str, Any] | None:
        with self.lock:
            return copy.deepcopy(self.lease)

    def delete(self) -> None:
        with self.lock:
            log.debug("store: delete")
            self.lease = None

    def put_raw(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Write a record as some other party would (new uid if absent)."""
        with self.lock:
            if self.lease is None:
                self.lease = {"metadata": {"name": "lease", "uid": str(uuid.uuid4())}}
            self.lease["spec"] = dict(spec)
            self.lease["metadata"]["resourceVersion"] = self.next_version()
            return copy.deepcopy(self.lease)

    def api(self) -> FakeLeaseAPI:
        return FakeLeaseAPI(self)


class FakeLeaseAPI:
    """LeaseAPI for one participant; ``fault`` (if set) is raised by every call."""

    def __init__(self, store: FakeLeaseStore) -> None:
        self.store = store
        self.fault: ClientError | None = None
        self.calls: list[tuple[str, float]] = []
        self.before: Callable[[str], None] | None = None
        self.saw_holder = False  # a GET answered a Lease with a holder

    @property
    def verbs(self) -> list[str]:
        return [verb for verb, _ in self.calls]

    def _enter(self, verb: str, timeout: float) -> None:
        self.calls.append((verb, timeout))
        if self.before is not None:
            self.before(verb)
        if self.fault is not None:
            raise self.fault

    def get(self, timeout: float) -> dict[str, Any] | None:
        self._enter("get", timeout)
        lease = self.store.snapshot()
        self.saw_holder |= bool(lease and lease.get("spec", {}).get("holderIdentity"))
        log.debug("get -> %s", lease and (lease["spec"], lease["metadata"]))
        return lease

    def create(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        self._enter("create", timeout)
        with self.store.lock:
            if self.store.lease is not None:
                raise AlreadyExists(409, "AlreadyExists", "leases exists")
            lease = copy.deepcopy(body)
            lease["metadata"]["uid"] = str(uuid.uuid4())
            lease["metadata"]["resourceVersion"] = self.store.next_version()
            self.store.lease = lease
            self.store.writes.append(copy.deepcopy(lease))
            log.debug("create -> %s", (lease["spec"], lease["metadata"]))
            return copy.deepcopy(lease)

    def replace(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        self._enter("replace", timeout)
        with self.store.lock:
            current = self.store.lease
            if current is None:
                raise NotFound(404, "NotFound", "leases not found")
            metadata = body.get("metadata") or {}
            if metadata.get("resourceVersion") != current["metadata"]["resourceVersion"] or (
                metadata.get("uid") not in (None, current["metadata"]["uid"])
            ):
                log.debug("replace %s -> conflict", body["spec"])
                raise Conflict(409, "Conflict", "the object has been modified")
            lease = copy.deepcopy(body)
            lease["metadata"]["uid"] = current["metadata"]["uid"]
            lease["metadata"]["resourceVersion"] = self.store.next_version()
            self.store.lease = lease
            self.store.writes.append(copy.deepcopy(lease))
            log.debug("replace -> %s", (lease["spec"], lease["metadata"]))
            return copy.deepcopy(lease)


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class ObservedLeaseAPI:
    """A real LeaseAPI (e.g. ClientLeaseAPI) that records whether a GET showed a holder."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.saw_holder = False

    def get(self, timeout: float) -> dict[str, Any] | None:
        lease = self.inner.get(timeout)
        self.saw_holder |= bool(lease and lease.get("spec", {}).get("holderIdentity"))
        return lease  # type: ignore[no-any-return]

    def create(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self.inner.create(body, timeout)  # type: ignore[no-any-return]

    def replace(self, body: dict[str, Any], timeout: float) -> dict[str, Any]:
        return self.inner.replace(body, timeout)  # type: ignore[no-any-return]

    def wait_change(self, resource_version: str | None, seconds: int) -> None:
        self.inner.wait_change(resource_version, seconds)

    def interrupt(self) -> None:
        self.inner.interrupt()
