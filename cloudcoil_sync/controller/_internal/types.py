"""Queue keys and the values a reconcile pass can return or raise."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, NoReturn

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.numbers import is_number

__all__ = ["ResourceKey", "Result", "TerminalError", "Wait", "interpret"]

DEFAULT_WAIT_SECONDS = 30.0


_MARK = object()  # every key's third item: a key equals no plain tuple and no other type


@dataclass(frozen=True, init=False, repr=False, eq=False)
class ResourceKey(tuple[str, "str | None", object]):
    """Identity of one object of a controller's primary kind; namespace None = cluster scope.

    It behaves as the frozen dataclass `ResourceKey(name, namespace=None)`: `name` and
    `namespace` are read-only, `dataclasses.replace`/`asdict`/`fields` apply, a key equals
    only an equal key, and keys are neither ordered nor iterable. Underneath it is a tuple
    (`name`, `namespace`, a private marker) so that hashing and comparing keys, which the
    work queue, the store and the echoes do dozens of times per object, run no Python code.
    Indexing and `len` are the tuple's, not part of the API. Format a key with `str(key)`
    or an f-string: `"%s" % key` reads a tuple as the arguments (`"%s" % (key,)` works).
    """

    __slots__ = ()

    name: str
    namespace: str | None

    def __new__(cls, name: str, namespace: str | None = None) -> ResourceKey:
        if not name:
            raise ValueError("A resource key needs a name")
        return tuple.__new__(cls, (name, namespace, _MARK))

    @classmethod
    def from_resource(cls, obj: Resource | Mapping[str, Any]) -> ResourceKey:
        """Key of a model or of a plain JSON object (as informer stores keep them)."""
        if type(obj) is dict or isinstance(obj, Mapping):  # dict first: no ABC check
            metadata = obj.get("metadata") or {}
            name, namespace = metadata.get("name"), metadata.get("namespace")
        else:
            metadata = obj.metadata
            name = metadata.name if metadata is not None else None
            namespace = metadata.namespace if metadata is not None else None
        if not name:
            raise ValueError("A resource key needs metadata.name")
        return cls(name, namespace or None)

    def __str__(self) -> str:
        return self[0] if self[1] is None else f"{self[1]}/{self[0]}"

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(name={self[0]!r}, namespace={self[1]!r})"

    def __reduce__(self) -> tuple[type[ResourceKey], tuple[str, str | None]]:
        return type(self), (self[0], self[1])  # pickle and copy rebuild through __new__

    # The dataclass had no order and no iteration; the tuple's would expose the marker.
    def __lt__(self, other: object) -> bool:
        return NotImplemented

    __le__ = __gt__ = __ge__ = __lt__

    def __iter__(self) -> NoReturn:
        raise TypeError(f"{type(self).__name__!r} object is not iterable")

    def __contains__(self, item: object) -> NoReturn:
        raise TypeError(f"argument of type {type(self).__name__!r} is not iterable")


# C getters (no Python frame per read), set after @dataclass so it sees no field defaults.
for _index, _field in enumerate(("name", "namespace")):
    setattr(ResourceKey, _field, property(itemgetter(_index), doc=f"The object's {_field}."))
del _index, _field


@dataclass(frozen=True)
class Result:
    """A successful pass; optionally persist `resource` and schedule another pass.

    `resource` is a modified copy of the pass's primary snapshot; its differences are
    patched before `requeue_after` (seconds, finite, >= 0) schedules the next pass.
    """

    requeue_after: float | None = None
    resource: Resource | None = None

    def __post_init__(self) -> None:
        delay = self.requeue_after
        if delay is not None and (not is_number(delay) or delay < 0):
            raise ValueError("requeue_after must be finite and nonnegative")


class Wait(Exception):
    """Expected pending work: stop the pass and look again later, without backoff.

    `after` (or its low-level spelling `requeue_after`) is the delay in seconds,
    default 30; it must be finite and positive.
    """

    def __init__(
        self,
        reason: str,
        message: str = "",
        *,
        after: float | None = None,
        requeue_after: float | None = None,
    ) -> None:
        if after is not None and requeue_after is not None:
            raise ValueError("Use after or requeue_after, not both")
        if after is not None:
            delay: float = after
        elif requeue_after is not None:
            delay = requeue_after
        else:
            delay = DEFAULT_WAIT_SECONDS
        if not reason:
            raise ValueError("Wait needs a reason")
        if not is_number(delay) or delay <= 0:
            raise ValueError("Wait delay must be finite and positive")
        self.reason = reason
        self.message = message
        self.requeue_after = float(delay)
        super().__init__(message or reason)


class TerminalError(Exception):
    """A failure not worth retrying; later events or a resync still reconcile the key."""


def interpret(value: object) -> tuple[Resource | None, float | None]:
    """What a handler returned: (the desired resource, requeue_after); TypeError if neither."""
    if value is None:
        return None, None
    if isinstance(value, Wait):
        return None, value.requeue_after
    if isinstance(value, Result):
        return value.resource, value.requeue_after
    if isinstance(value, Resource):
        return value, None
    raise TypeError("Reconcile must return its resource, Result, Wait, or None")
