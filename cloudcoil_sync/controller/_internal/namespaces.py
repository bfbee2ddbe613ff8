"""Namespaces chosen by a label selector, joining and leaving while the operator runs
(`controller.watch_namespaces(selector="team=a")`).

A pooled Namespace informer, narrowed to the selector on the server, tells every
`scope.NamespaceSet` of the controller when a namespace is selected (it was created or
labelled: the set starts an informer for it) and when it is not any more (deleted or
unlabelled: the watch reports it as deleted; the set stops that informer and its cache is
dropped, so no pass starts there again; keys already queued find no object). Since the
namespaces are not known in advance, the generated RBAC grants the controller's kinds in
every namespace (a ClusterRole) plus list and watch on namespaces: the start-up line says so.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from cloudcoil_sync.client import ResourceClient
from cloudcoil_sync.controller._internal.informer import Informer
from cloudcoil_sync.controller._internal.listwatch import ClientListWatch
from cloudcoil_sync.controller._internal.scope import NamespaceSet

__all__ = ["NamespaceSelection", "own_informer"]

JSON = dict[str, Any]


class NamespaceSelection:
    """Joins and leaves of the selected namespaces, applied to a controller's sets."""

    def __init__(self, namespaces: Informer, selector: str, log: logging.Logger) -> None:
        self._log = log
        self._selector = selector
        self._lock = threading.Lock()  # a set attached while running sees joins in order
        self._sets: list[NamespaceSet] = []
        self._current: dict[str, None] = {}  # selected now, in order of joining
        self.joined: list[str] = []  # in order, for the log and tests
        self.left: list[str] = []
        namespaces.add_handler(on_add=self._added, on_delete=self._deleted)

    def build(
        self,
        client: ResourceClient[Any],
        selectors: tuple[str | None, str | None],
        *,
        resync_period: float,
        on_failure: Callable[[BaseException], None],
    ) -> NamespaceSet:
        """A kind's changing set: an informer of its own (label and field `selectors`) per
        selected namespace, once `follow`ed (before the Namespace informer starts) or
        `attach`ed (while running: its handlers go on first)."""

        def make(namespace: str) -> Informer:
            return own_informer(
                client, namespace, selectors, resync_period=resync_period, on_failure=on_failure
            )

        return NamespaceSet({}, name=f"{client.mapping.plural}@{{{self._selector}}}", make=make)

    def follow(self, scope: NamespaceSet) -> None:
        """`scope` (from `build`) joins and leaves with the namespaces selected from now on."""
        with self._lock:
            self._sets.append(scope)

    def attach(self, scope: NamespaceSet) -> None:
        """While running: `scope` (from `build`) joins the namespaces selected now, then
        follows."""
        with self._lock:
            self._sets.append(scope)
            for name in self._current:
                scope.join(name)

    def detach(self, scope: NamespaceSet, timeout: float | None) -> bool:
        """Joins and leaves no longer reach `scope`; its informers are stopped."""
        with self._lock:
            if scope in self._sets:
                self._sets.remove(scope)
        return scope.stop(timeout)

    def _added(self, obj: JSON) -> None:
        self._selected(obj, True)

    def _deleted(self, obj: JSON) -> None:
        self._selected(obj, False)

    def _selected(self, obj: JSON, selected: bool) -> None:
        name = (obj.get("metadata") or {}).get("name") or ""
        with self._lock:
            for scope in self._sets:
                (scope.join if selected else scope.leave)(name)
            if selected:
                self._current[name] = None
            else:
                self._current.pop(name, None)
        (self.joined if selected else self.left).append(name)
        if selected:
            self._log.info("Namespace %s is selected: watching it", name)
        else:
            self._log.info("Namespace %s is no longer selected (or gone): not watching it", name)

    def stop(self, timeout: float | None) -> bool:
        with self._lock:
            sets = list(self._sets)
        return all([scope.stop(timeout) for scope in sets])


def own_informer(
    client: ResourceClient[Any],
    namespace: str | None,
    selectors: tuple[str | None, str | None],
    *,
    resync_period: float,
    on_failure: Callable[[BaseException], None],
    tag: str = "",
) -> Informer:
    """An informer of a runtime's own (not pooled) for a kind in `namespace` (None: all),
    narrowed by the label and field `selectors`."""
    source = ClientListWatch(
        client, namespace=namespace, label_selector=selectors[0], field_selector=selectors[1]
    )
    return Informer(
        source,
        name=f"{client.mapping.plural}@{namespace or '*'}{tag}",
        resync_period=resync_period,
        on_failure=on_failure,
    )
