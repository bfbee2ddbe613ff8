"""What an admission handler receives (`AdmissionRequest`) and how it rejects one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config, ResourceClient

__all__ = ["AdmissionDenied", "AdmissionRequest", "CachedReader", "Operation", "UserInfo"]

Operation = Literal["CREATE", "UPDATE", "DELETE"]
T = TypeVar("T")
U = TypeVar("U")

CachedReader = Callable[[type[Any], str | None], Any]
"""`(Kind, namespace) -> reader` over an informer cache the operator already keeps."""


class AdmissionDenied(Exception):
    """Raise from a handler to reject the request with `message` (shown to the user).

    `code` is the HTTP-style status reported in the AdmissionReview (400..599, default 403)
    and `reason` its machine-readable reason (default "Forbidden").
    """

    def __init__(self, message: str, *, code: int = 403, reason: str = "Forbidden") -> None:
        if not isinstance(message, str) or not message:
            raise ValueError("AdmissionDenied needs a non-empty message")
        if isinstance(code, bool) or not isinstance(code, int) or not 400 <= code <= 599:
            raise ValueError("AdmissionDenied code must be an integer between 400 and 599")
        if not isinstance(reason, str) or not reason:
            raise ValueError("AdmissionDenied needs a non-empty reason")
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason


@dataclass(frozen=True)
class UserInfo:
    """The authenticated user the API server reports for the request."""

    username: str = ""
    uid: str = ""
    groups: Sequence[str] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class AdmissionRequest(Generic[T]):
    """One admission review for a handler: typed objects plus the raw JSON received.

    `resource` is None for DELETE (the deleted object is `old_resource`), `old_resource`
    is None for CREATE. A mutator edits `resource` (or a copy) and returns it.
    """

    uid: str
    operation: Operation
    resource: T | None
    old_resource: T | None = None
    name: str = ""
    namespace: str = ""
    subresource: str = ""
    dry_run: bool = False
    user_info: UserInfo = field(default_factory=UserInfo)
    options: dict[str, Any] | None = None
    raw_object: dict[str, Any] | None = None
    raw_old_object: dict[str, Any] | None = None
    config: Config | None = field(default=None, repr=False, compare=False)
    cache: CachedReader | None = field(default=None, repr=False, compare=False)

    def client(self, kind: type[U]) -> ResourceClient[U]:
        """A live API client for `kind`, defaulting to the request's namespace."""
        if self.config is None:
            raise RuntimeError(
                "Admission clients require a Config: AdmissionRoutes(config=...) or a "
                "running Application"
            )
        return self.config.client(kind, namespace=self.namespace or None)

    def cached(self, kind: type[U]) -> Any:
        """A reader over the operator's informer cache for `kind` (no API request)."""
        if self.cache is None:
            raise ValueError(
                f"Admission cached reads of {kind.__name__} need an informer cache; "
                "use request.client(...) for a live read"
            )
        return self.cache(kind, self.namespace or None)
