"""`InformerPool`: the informers of one Config, shared by every controller that asks for
the same view (kind, namespace, label selector)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from cloudcoil.resources import Resource

from cloudcoil_sync.controller._internal.informer import (
    DEFAULT_PAGE_SIZE,
    DEFAULT_WATCH_TIMEOUT,
    Informer,
)
from cloudcoil_sync.controller._internal.listwatch import ClientListWatch

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["InformerPool"]

# (group, plural, namespace, label selector, field selector)
InformerKey = tuple[str, str, str | None, str | None, str | None]


class InformerPool:
    """Informers of one Config shared by (kind, namespace, label and field selectors).

    The first request for a view fixes its resync period. Failure callbacks of every
    requester are called when that informer dies; `on_synced` each time one of them
    completes its first list.
    """

    def __init__(
        self,
        config: Config,
        *,
        page_size: int = DEFAULT_PAGE_SIZE,
        watch_timeout: int = DEFAULT_WATCH_TIMEOUT,
        on_synced: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self._on_synced = on_synced
        # Every informer of the pool reads with the same page size and watch timeout.
        self._new_informer = functools.partial(
            Informer, page_size=page_size, watch_timeout=watch_timeout
        )
        self._lock = threading.Lock()
        self._informers: dict[InformerKey, Informer] = {}
        self._subscribers: dict[InformerKey, list[Callable[[BaseException], None]]] = {}
        self._started: set[InformerKey] = set()

    def informer(
        self,
        resource: type[Resource],
        *,
        namespace: str | None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resync_period: float = 300.0,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> Informer:
        """The shared informer for that view (created on first request, not started)."""
        client = self.config.client(resource)
        mapping = client.mapping
        scope = namespace if mapping.namespaced else None
        selectors = (label_selector or None, field_selector or None)
        key: InformerKey = (mapping.group, mapping.plural, scope, *selectors)
        with self._lock:
            informer = self._informers.get(key)
            if informer is None:
                source = ClientListWatch(
                    client,
                    namespace=scope,
                    label_selector=selectors[0],
                    field_selector=selectors[1],
                )
                label = mapping.plural + (f"@{scope}" if scope else "")
                query = "&".join(s for s in selectors if s)
                informer = self._new_informer(
                    source,
                    name=label + (f"?{query}" if query else ""),
                    resync_period=resync_period,
                    on_failure=lambda error, key=key: self._failed(key, error),  # type: ignore[misc]
                    on_synced=self._on_synced,
                )
                self._informers[key] = informer
                self._subscribers[key] = []
            if on_failure is not None:
                self._subscribers[key].append(on_failure)
            return informer

    def start(self) -> None:
        """Start every informer not yet started, in creation order."""
        with self._lock:
            pending = [(k, i) for k, i in self._informers.items() if k not in self._started]
            self._started.update(k for k, _ in pending)
        for _, informer in pending:
            informer.start()

    @property
    def synced(self) -> bool:
        """Every started informer completed its first list."""
        with self._lock:
            informers = [self._informers[k] for k in self._started]
        return all(informer.synced for informer in informers)

    def stop(self, timeout: float | None = 10.0) -> bool:
        """Stop and join every started informer; True when all ended in time."""
        with self._lock:
            informers = [self._informers[k] for k in self._started]
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in informers:
            informer.stop(timeout=0)
        ended = True
        for informer in informers:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ended &= informer.stop(left)
        return ended

    def __len__(self) -> int:
        with self._lock:
            return len(self._informers)

    def _failed(self, key: InformerKey, error: BaseException) -> None:
        with self._lock:
            subscribers = list(self._subscribers.get(key, ()))
        for callback in subscribers:
            callback(error)
