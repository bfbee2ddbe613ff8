"""`InvalidObject`: an object the API server stored that the caller's model rejects.

Raised instead of `pydantic.ValidationError` wherever a model is built from what the API
server sent (client reads, informer caches, admission), naming the kind, namespace, name and
the failing field paths in the wire's names (`spec.target`). The controller runtime turns it
into a state of the object (see `controller/_internal/invalid.py`), never a crash.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from cloudcoil_sync.client._internal import codec

__all__ = ["InvalidObject", "build", "identify"]

T = TypeVar("T", bound=BaseModel)
_MAX_FIELDS = 20


class InvalidObject(ValueError):
    """A stored object does not fit its model (`problems`: (field path, message) pairs)."""

    def __init__(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        problems: tuple[tuple[str, str], ...],
        *,
        resource_version: str | None = None,
    ) -> None:
        self.kind = kind
        self.namespace = namespace or None
        self.name = name
        self.problems = problems
        self.resource_version = resource_version
        super().__init__(f"{self.describe()} does not fit the {kind} model: {self.summary}")

    @classmethod
    def from_error(
        cls,
        error: ValidationError,
        kind: str,
        namespace: str | None,
        name: str,
        *,
        resource_version: str | None = None,
    ) -> InvalidObject:
        """The rejection pydantic's `error` describes, its first 20 fields by wire path."""
        problems = tuple(
            (".".join(str(part) for part in item["loc"]) or "<root>", item["msg"])
            for item in error.errors(include_url=False, include_input=False)[:_MAX_FIELDS]
        )
        return cls(kind, namespace, name, problems, resource_version=resource_version)

    @property
    def fields(self) -> tuple[str, ...]:
        """The failing field paths, in the wire's names (`spec.target`)."""
        return tuple(dict.fromkeys(field for field, _ in self.problems))

    @property
    def summary(self) -> str:
        """`field: message` pairs, at most three, for a log line or a condition message."""
        shown = "; ".join(f"{field}: {message}" for field, message in self.problems[:3])
        more = len(self.problems) - 3
        return shown + (f" (and {more} more)" if more > 0 else "")

    def describe(self) -> str:
        """`Kind namespace/name` (or `Kind name` when cluster-scoped)."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where}"


def identify(data: bytes | Mapping[str, Any]) -> tuple[str, str | None, str, str | None]:
    """(kind, namespace, name, resourceVersion) of raw object JSON, as far as it says."""
    obj = codec.loads(data) if isinstance(data, bytes) else data
    metadata = obj.get("metadata") if isinstance(obj, Mapping) else None
    metadata = metadata if isinstance(metadata, Mapping) else {}
    kind = obj.get("kind") if isinstance(obj, Mapping) else None
    return (
        str(kind or "object"),
        metadata.get("namespace") or None,
        str(metadata.get("name") or "<unnamed>"),
        metadata.get("resourceVersion"),
    )


def build(resource: type[T], data: bytes | Mapping[str, Any]) -> T:
    """`resource` validated from raw JSON (bytes or a dict); `InvalidObject` if it does not fit."""
    try:
        if isinstance(data, bytes):
            return resource.model_validate_json(data)
        return resource.model_validate(data)
    except ValidationError as error:
        kind, namespace, name, version = identify(data)
        if kind == "object":
            kind = resource.__name__
        raise InvalidObject.from_error(
            error, kind, namespace, name, resource_version=version
        ) from None
