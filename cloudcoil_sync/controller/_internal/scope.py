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
import time
from collections.abc import Callable, Mapping

from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed
from cloudcoil_sync.controller._internal.store import JSON, IndexFunc, ObjectKey

__all__ = ["NamespaceSet", "ScopedStore", "describe"]


class ScopedStore:
    """The stores of one kind's per-namespace informers, read as one."""

    def __init__(self, informers: Mapping[str, Informer]) -> None:
        self._stores = {namespace: i.store for namespace, i in informers.items()}

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
        return [obj for store in self._stores.values() for obj in store.by_index(index, value)]

    def index_keys(self, index: str, value: str) -> builtins.list[ObjectKey]:
        keys = (key for store in self._stores.values() for key in store.index_keys(index, value))
        return sorted(keys)

    def indexes(self) -> builtins.list[str]:
        return sorted({name for store in self._stores.values() for name in store.indexes()})

    def add_indexer(self, name: str, func: IndexFunc) -> None:
        for store in self._stores.values():
            store.add_indexer(name, func)


class NamespaceSet:
    """One kind's informers of the listed namespaces, seen as one informer."""

    def __init__(self, informers: Mapping[str, Informer]) -> None:
        self.informers = dict(informers)
        first = next(iter(self.informers.values()))
        self.name = first.name.partition("@")[0] + "@" + ",".join(self.informers)
        self.store = ScopedStore(self.informers)

    def add_handler(self, **handlers: Callable[..., None] | None) -> None:
        for informer in self.informers.values():
            informer.add_handler(**handlers)

    @property
    def synced(self) -> bool:
        return all(informer.synced for informer in self.informers.values())

    @property
    def error(self) -> BaseException | None:
        return next((i.error for i in self.informers.values() if i.error is not None), None)

    def failure(self) -> InformerFailed | None:
        return next((f for i in self.informers.values() if (f := i.failure()) is not None), None)

    def wait_synced(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for informer in self.informers.values():
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
) -> str:
    """What a controller watches of its primary kind, in one line."""
    if not namespaced:
        where = "cluster-scoped, every object"
    elif len(namespaces) == 1 and namespaces[0] == "":
        where = "in every namespace"
    else:
        listed = ", ".join(namespaces)
        where = f"only in namespace{'s' if len(namespaces) > 1 else ''} {listed} (not the others)"
    selectors = [f"labels {label_selector}"] if label_selector else []
    selectors += [f"fields {field_selector}"] if field_selector else []
    return f"{kind} {where}" + (f", selected by {' and '.join(selectors)}" if selectors else "")
