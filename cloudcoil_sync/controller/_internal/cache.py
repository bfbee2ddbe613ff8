"""`CachedResources`: typed reads of an informer's store (`ctx.cached`, `controller.cached`).

Models are built from the stored JSON on every read, so callers own what they get and can
never change the cache. Reads refuse to answer from an informer that has not listed yet or
that stopped with an error: an empty answer would look like "nothing exists". An object the
model rejects raises `InvalidObject` from `get` and is left out of `list` (logged once).
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync.controller._internal.informer import Informer, InformerFailed
from cloudcoil_sync.controller._internal.invalid import READS, InvalidObject, build
from cloudcoil_sync.controller._internal.types import ResourceKey

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = ["CachedResources", "Caches", "InformerNotSynced", "LabelSelector"]

U = TypeVar("U", bound=Resource)

_REQUIREMENT = re.compile(
    r"\s*(?P<neg>!)?\s*(?P<key>[A-Za-z0-9./_-]+)\s*"
    r"(?:(?P<op>==|!=|=|\s+in\s+|\s+notin\s+)\s*(?P<value>\([^)]*\)|[A-Za-z0-9._-]*))?\s*$"
)


class InformerNotSynced(RuntimeError):
    """The informer behind a cached read has not completed its first list."""


class LabelSelector:
    """A parsed label selector: `a=b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`."""

    def __init__(self, selector: str) -> None:
        self.text = selector
        self._tests: list[Callable[[Mapping[str, str]], bool]] = []
        #: The same requirements as a LabelSelector's matchExpressions (webhook selectors).
        self.expressions: list[dict[str, Any]] = []
        for part in _split(selector):
            match = _REQUIREMENT.match(part)
            if match is None or (match["neg"] and match["op"]):
                raise ValueError(f"Invalid label selector {selector!r}")
            parsed = match["key"], match["neg"], match["op"], match["value"]
            self._tests.append(_requirement(*parsed))
            self.expressions.append(_expression(*parsed))

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(test(labels) for test in self._tests)


def _split(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part for part in parts if part.strip()]


def _requirement(
    key: str, negated: str | None, op: str | None, value: str | None
) -> Callable[[Mapping[str, str]], bool]:
    if op is None:
        return (lambda labels: key not in labels) if negated else (lambda labels: key in labels)
    op = op.strip()
    if op in ("=", "=="):
        return lambda labels: labels.get(key) == value
    if op == "!=":
        return lambda labels: labels.get(key) != value
    values = _values(value)
    if op == "in":
        return lambda labels: labels.get(key) in values
    return lambda labels: labels.get(key) not in values


def _values(value: str | None) -> set[str]:
    """The values of a set requirement: `(a, b)` -> {"a", "b"}."""
    return {v.strip() for v in (value or "").strip("()").split(",") if v.strip()}


def _expression(key: str, negated: str | None, op: str | None, value: str | None) -> dict[str, Any]:
    if op is None:
        return {"key": key, "operator": "DoesNotExist" if negated else "Exists"}
    op = op.strip()
    if op in ("=", "==", "!="):
        return {"key": key, "operator": "NotIn" if op == "!=" else "In", "values": [value or ""]}
    values = sorted(_values(value))
    return {"key": key, "operator": "In" if op == "in" else "NotIn", "values": values}


class CachedResources(Generic[U]):
    """Get and list one kind from an informer's cache, as fresh models."""

    def __init__(
        self, resource: type[U], informer: Informer, *, namespace: str | None = None
    ) -> None:
        self.resource = resource
        self._informer = informer
        self._namespace = namespace

    def _check(self) -> None:
        error = self._informer.error
        if error is not None:
            raise InformerFailed(f"Informer {self._informer.name} failed: {error}") from error
        if not self._informer.synced:
            raise InformerNotSynced(
                f"The {self.resource.__name__} cache has not synced yet; read it from a "
                "reconcile pass or after the controller is ready"
            )

    def get(self, name: str, *, namespace: str | None = None) -> U | None:
        """The cached object, or None (`namespace` defaults to the reader's); `InvalidObject`
        if the stored object does not fit the model."""
        self._check()
        data = self._informer.store.get_json(namespace or self._namespace, name)
        return None if data is None else build(self.resource, data)

    def list(
        self,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        all_namespaces: bool = False,
        index: str | None = None,
        value: str | None = None,
    ) -> list[U]:
        """Cached objects of `namespace` (default: the reader's; all when it has none), or
        of every namespace the cache holds with ``all_namespaces=True``; with `index` and
        `value`, only those that index files under `value` (a look-up, not a scan:
        `controller.index`).

        Objects the model rejects are left out (and logged once each): one bad object
        must not fail every reader of its kind.
        """
        if all_namespaces and namespace is not None:
            raise ValueError("cached().list(): give namespace= or all_namespaces=True, not both")
        self._check()
        selector = LabelSelector(label_selector) if label_selector else None
        found = []
        scope = None if all_namespaces else namespace or self._namespace
        for obj in self._objects(scope, index, value):
            if selector is None or selector.matches(_labels(obj)):
                try:
                    found.append(build(self.resource, obj))
                except InvalidObject as error:
                    where = f"cached({self.resource.__name__}).list()"
                    READS.report(error, where, "left out of the list")
        return found

    def keys(
        self, *, index: str, value: str, namespace: str | None = None
    ) -> builtins.list[ResourceKey]:
        """The keys of the objects `index` files under `value` (no model is built: the
        cheapest answer for a watch mapper)."""
        self._check()
        scope = namespace or self._namespace
        return [
            ResourceKey(name, ns or None)
            for ns, name in self._lookup(index, value)
            if scope is None or ns == scope
        ]

    def _lookup(self, index: str, value: str) -> builtins.list[tuple[str, str]]:
        if not isinstance(value, str):
            raise TypeError(f"An index value must be a string, got {type(value).__name__}")
        try:
            return self._informer.store.index_keys(index, value)
        except KeyError:
            declared = ", ".join(self._informer.store.indexes()) or "none"
            raise ValueError(
                f"{self.resource.__name__} has no index named {index!r} (declared: {declared})"
            ) from None

    def _objects(
        self, namespace: str | None, index: str | None, value: str | None
    ) -> builtins.list[dict[str, Any]]:
        store = self._informer.store
        if index is None and value is None:
            return store.list(namespace)
        if index is None or value is None:
            raise ValueError("list() takes index and value together")
        keys = self._lookup(index, value)
        found = (store.get(ns, name) for ns, name in keys if namespace in (None, ns))
        return [obj for obj in found if obj is not None]  # None: deleted since the look-up

    def __len__(self) -> int:
        self._check()
        return len(self._informer.store)


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str] | None:
    labels: Mapping[str, str] | None = (obj.get("metadata") or {}).get("labels")
    return labels


class Caches:
    """One controller's informers by kind, and its Config: what a pass reads
    (`context.PassServices`), handed down to it instead of the runtime."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.informers: dict[type[Any], Informer] = {}

    def informer_for(self, resource: type[Any]) -> Informer:
        informer = self.informers.get(resource)
        if informer is None:
            raise ValueError(f"{resource.__name__} is not watched by this controller")
        return informer

    def cached(self, resource: type[Any], *, namespace: str | None = None) -> Any:
        return CachedResources(resource, self.informer_for(resource), namespace=namespace)
