"""A controller scoped to a list of namespaces (`controller.watch_namespaces("a", "b")`).

Each namespaced kind the controller watches (primary, owned, mapped) gets one pooled
informer per listed namespace, so the operator needs a Role in each of them and no
ClusterRole (controller-runtime's `DefaultNamespaces`, kopf's `--namespace` list).
`NamespaceSet` shows those informers as one to the rest of the runtime: handlers are
registered on each, reads go to the namespace's store (`ScopedStore`), it has synced once
every one of them has, and it failed if one did. `describe` is the start-up log line that
says what a controller watches, and so what it skips.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Callable, Mapping

from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed
from cloudcoil_sync.controller._internal.store import JSON, IndexFunc, ObjectKey, Store

__all__ = ["NamespaceSet", "ScopedStore", "describe"]


class ScopedStore:
    """The stores of one kind's per-namespace informers, read as one."""

    def __init__(self, scope: NamespaceSet) -> None:
        self._scope = scope
        self._indexers: dict[str, IndexFunc] = {}  # for namespaces that join later

    @property
    def _stores(self) -> dict[str, Store]:
        return {ns: informer.store for ns, informer in self._scope.parts().items()}

    def __len__(self) -> int:
        return sum(len(store) for store in self._stores.values())

    def get(self, namespace: str | None, name: str) -> JSON | None:
        store = self._stores.get(namespace or "")
        return None if store is None else store.get(namespace, name)

    def get_json(self, namespace: str | None, name: str) -> bytes | None:
        store = self._stores.get(namespace or "")
        return None if store is None else store.get_json(namespace, name)

    def keys(self) -> builtins.list[ObjectKey]:
        return [key for store in self._stores.values() for key in store.keys()]  # noqa: SIM118

    def list(self, namespace: str | None = None) -> builtins.list[JSON]:
        if namespace is not None:
            store = self._stores.get(namespace)
            return [] if store is None else store.list(namespace)
        return [obj for store in self._stores.values() for obj in store.list()]

    def by_index(self, index: str, value: str) -> builtins.list[JSON]:
        self._known(index)
        return [obj for store in self._stores.values() for obj in store.by_index(index, value)]

    def index_keys(self, index: str, value: str) -> builtins.list[ObjectKey]:
        self._known(index)
        keys = (key for store in self._stores.values() for key in store.index_keys(index, value))
        return sorted(keys)

    def _known(self, index: str) -> None:
        if index not in self._indexers:
            raise KeyError(f"No index named {index!r}")

    def indexes(self) -> builtins.list[str]:
        return sorted(self._indexers)

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        for store in self._stores.values():
            store.add_indexer(name, func)
        self._indexers[name] = func

    def file(self, store: Store) -> None:
        """A joining namespace's store gets every index declared so far."""
        for name, func in self._indexers.items():
            store.add_indexer(name, func)


class NamespaceSet:
    """One kind's informers of the namespaces in scope, seen as one informer.

    Fixed (`watch_namespaces(...)`: pooled informers) or changing (`selector=`: `make`
    builds, and `join` starts, an informer of this runtime's own for a namespace that
    joins; `leave` stops it and forgets its cache).
    """

    def __init__(
        self,
        informers: Mapping[str, Informer],
        *,
        name: str,
        make: Callable[[str], Informer] | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._informers = dict(informers)
        self._make = make
        self._handlers: list[dict[str, Callable[..., None] | None]] = []
        self.name = name
        self.store = ScopedStore(self)

    def parts(self) -> dict[str, Informer]:
        with self._lock:
            return dict(self._informers)

    def add_handler(self, **handlers: Callable[..., None] | None) -> None:
        with self._lock:
            self._handlers.append(handlers)
            parts = list(self._informers.values())
        for informer in parts:
            informer.add_handler(**handlers)

    def join(self, namespace: str) -> Informer | None:
        """Start watching `namespace` (a selected namespace appeared); None if already."""
        if self._make is None:
            raise RuntimeError("This namespace set is fixed")
        with self._lock:
            if namespace in self._informers:
                return None
            informer = self._make(namespace)
            for handlers in self._handlers:
                informer.add_handler(**handlers)
            self.store.file(informer.store)
            self._informers[namespace] = informer
        informer.start()
        return informer

    def leave(self, namespace: str) -> Informer | None:
        """Stop watching `namespace` (no longer selected); its informer is stopped (not
        joined: this runs on the namespace informer's thread)."""
        with self._lock:
            informer = self._informers.pop(namespace, None)
        if informer is not None:
            informer.stop(timeout=0)
        return informer

    def stop(self, timeout: float | None) -> bool:
        """Stop every informer this set made (a changing set's own)."""
        if self._make is None:
            return True
        with self._lock:
            parts = list(self._informers.values())
            self._informers.clear()
        deadline = None if timeout is None else time.monotonic() + timeout
        ended = True
        for informer in parts:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ended &= informer.stop(left)
        return ended

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self.parts().values())

    @property
    def error(self) -> BaseException | None:
        return next((i.error for i in self.parts().values() if i.error is not None), None)

    def failure(self) -> InformerFailed | None:
        return next((f for i in self.parts().values() if (f := i.failure()) is not None), None)

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.parts().values():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not informer.wait_synced(left):
                return False
        return True


def describe(
    kind: str,
    *,
    namespaced: bool,
    namespaces: tuple[str, ...],
    label_selector: str | None,
    field_selector: str | None,
    namespace_selector: str | None = None,
) -> str:
    """What a controller watches of its primary kind, in one line."""
    if not namespaced:
        where = "cluster-scoped, every object"
    elif namespace_selector:
        where = (
            f"in the namespaces labelled {namespace_selector}, joining and leaving while "
            "running (RBAC: a ClusterRole)"
        )
    elif len(namespaces) == 1 and namespaces[0] == "":
        where = "in every namespace"
    else:
        listed = ", ".join(namespaces)
        where = f"only in namespace{'s' if len(namespaces) > 1 else ''} {listed} (not the others)"
    selectors = [f"labels {label_selector}"] if label_selector else []
    selectors += [f"fields {field_selector}"] if field_selector else []
    return f"{kind} {where}" + (f", selected by {' and '.join(selectors)}" if selectors else "")
