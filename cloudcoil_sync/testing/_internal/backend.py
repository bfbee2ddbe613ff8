"""What request handling, TokenRequest and saved state need of an emulator.

``Emulator`` (``emulator.py``) has these parts; the modules that serve requests take this
protocol rather than the class, so that the emulator can import them without a cycle.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from cloudcoil_sync.testing._internal.crud import Objects, Req
    from cloudcoil_sync.testing._internal.faults import Faults
    from cloudcoil_sync.testing._internal.latency import ServiceSlots
    from cloudcoil_sync.testing._internal.rbac import Authorizer
    from cloudcoil_sync.testing._internal.resources import Registry
    from cloudcoil_sync.testing._internal.store import Store
    from cloudcoil_sync.testing._internal.tls import CertificateAuthority
    from cloudcoil_sync.testing._internal.watch import WatchRegistry

__all__ = ["AccessRecord", "Backend", "LogEntry"]

JSON = dict[str, Any]


@dataclass(frozen=True)
class LogEntry:
    """One answered request, as ``Emulator.request_log`` lists it."""

    method: str
    path: str
    query: dict[str, str]
    user: str
    status: int
    #: When the answer was about to leave (monotonic; comparable across local processes).
    at: float = field(default_factory=time.monotonic)


@dataclass(frozen=True)
class AccessRecord:
    """One authorization decision for a non-admin user, as ``Emulator.access_log`` lists it:
    what the pytest plugin checks for 403s and reports unused permissions from."""

    user: str
    verb: str
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    allowed: bool


class Backend(Protocol):
    """The store, registries and hooks of one emulator."""

    store: Store
    registry: Registry
    objects: Objects
    authorizer: Authorizer
    watches: WatchRegistry
    faults: Faults
    latency: ServiceSlots | None
    stopping: threading.Event
    bookmark_interval: float
    admin_token: str

    @property
    def port(self) -> int: ...

    @property
    def ca(self) -> CertificateAuthority | None: ...

    def add_token(
        self, token: str, user: str, groups: tuple[str, ...] | list[str] = ()
    ) -> None: ...

    def log_request(self, entry: LogEntry) -> None: ...

    def log_access(self, record: AccessRecord) -> None: ...

    def admit(self, verb: str, req: Req) -> None: ...

    def scale(self, verb: str, req: Req) -> tuple[int, JSON]: ...
