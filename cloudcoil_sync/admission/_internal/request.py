"""What an admission handler receives (`AdmissionRequest`) and how it rejects one."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config, ResourceClient

__all__ = [
    "CLIENT_CERTIFICATE",
    "AdmissionDenied",
    "AdmissionRequest",
    "CachedReader",
    "ClientCertificate",
    "Operation",
    "UserInfo",
    "headers_of",
    "warning_text",
]

Operation = Literal["CREATE", "UPDATE", "DELETE"]
T = TypeVar("T")
U = TypeVar("U")

CachedReader = Callable[[type[Any], str | None], Any]
"""`(Kind, namespace) -> reader` over an informer cache the operator already keeps."""

# The WSGI environ key under which the TLS host puts the caller's verified certificate
# (`ssl.SSLSocket.getpeercert()`); absent under other WSGI servers.
CLIENT_CERTIFICATE = "cloudcoil.client_certificate"
WARNING_LIMIT = 256  # kube-apiserver truncates longer ones; keep them under 120 characters
MAX_WARNINGS = 32


def warning_text(message: object) -> str:
    """A warning as sent in `AdmissionResponse.warnings`: one line, at most 256 characters."""
    if not isinstance(message, str) or not message.strip():
        raise ValueError("An admission warning must be a non-empty string")
    text = " ".join(message.split())
    return text if len(text) <= WARNING_LIMIT else text[: WARNING_LIMIT - 3] + "..."


def headers_of(environ: Mapping[str, Any]) -> Mapping[str, str]:
    """A WSGI request's headers by lower-case name (``HTTP_USER_AGENT`` → ``user-agent``)."""
    found = {
        key[5:].replace("_", "-").lower(): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }
    for key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
        if environ.get(key):
            found[key.replace("_", "-").lower()] = str(environ[key])
    return MappingProxyType(found)


def _warnings(messages: Iterable[str]) -> list[str]:
    return [warning_text(message) for message in messages]


class AdmissionDenied(Exception):
    """Raise from a handler to reject the request with `message` (shown to the user).

    `code` is the HTTP-style status reported in the AdmissionReview (400..599, default 403)
    and `reason` its machine-readable reason (default "Forbidden"); `warnings` are shown
    by kubectl beside the denial.
    """

    def __init__(
        self,
        message: str,
        *,
        code: int = 403,
        reason: str = "Forbidden",
        warnings: Sequence[str] = (),
    ) -> None:
        if not isinstance(message, str) or not message:
            raise ValueError("AdmissionDenied needs a non-empty message")
        if isinstance(code, bool) or not isinstance(code, int) or not 400 <= code <= 599:
            raise ValueError("AdmissionDenied code must be an integer between 400 and 599")
        if not isinstance(reason, str) or not reason:
            raise ValueError("AdmissionDenied needs a non-empty reason")
        if isinstance(warnings, str):
            raise TypeError("AdmissionDenied warnings is a list of strings, not one string")
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.warnings = _warnings(warnings)


@dataclass(frozen=True)
class UserInfo:
    """The authenticated user the API server reports for the request."""

    username: str = ""
    uid: str = ""
    groups: Sequence[str] = ()
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)

    @classmethod
    def from_review(cls, raw: Mapping[str, Any] | None) -> UserInfo:
        """From an AdmissionReview's `request.userInfo` (already checked for shape)."""
        raw = raw or {}
        return cls(
            username=raw.get("username", ""),
            uid=raw.get("uid", ""),
            groups=tuple(raw.get("groups") or ()),
            extra={key: tuple(values) for key, values in (raw.get("extra") or {}).items()},
        )


@dataclass(frozen=True)
class ClientCertificate:
    """The TLS client certificate the caller (normally kube-apiserver) presented, verified
    against `WebhookServer(client_ca_file=...)`; `subject`/`issuer` map attribute names
    (``commonName``, ``organizationName`` ...) to values."""

    subject: Mapping[str, str]
    issuer: Mapping[str, str]
    dns_names: tuple[str, ...] = ()
    not_after: str = ""

    @property
    def common_name(self) -> str:
        return self.subject.get("commonName", "")

    @classmethod
    def from_peer(cls, peer: Mapping[str, Any] | None) -> ClientCertificate | None:
        """From `ssl.SSLSocket.getpeercert()`; None when no certificate was verified."""
        if not peer:
            return None

        def names(rdns: Any) -> dict[str, str]:
            return {key: value for rdn in rdns or () for key, value in rdn}

        return cls(
            subject=MappingProxyType(names(peer.get("subject"))),
            issuer=MappingProxyType(names(peer.get("issuer"))),
            dns_names=tuple(v for k, v in peer.get("subjectAltName") or () if k == "DNS"),
            not_after=str(peer.get("notAfter", "")),
        )


@dataclass(frozen=True)
class AdmissionRequest(Generic[T]):
    """One admission review for a handler: typed objects plus the raw JSON received.

    `resource` is None for DELETE (the deleted object is `old_resource`), `old_resource`
    is None for CREATE. A mutator edits `resource` (or a copy) and returns it.
    `headers` are the HTTP request's headers (lower-case names, e.g. ``traceparent``),
    `client_certificate` the caller's verified TLS certificate (None without a client CA);
    `warn()` adds a warning to the answer (kubectl prints it), allowed or denied.
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
    headers: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)
    client_certificate: ClientCertificate | None = field(default=None, compare=False)
    warnings: list[str] = field(default_factory=list, repr=False, compare=False)

    @classmethod
    def from_review(
        cls,
        review: Mapping[str, Any],
        resource: T | None,
        old_resource: T | None,
        environ: Mapping[str, Any],
        *,
        config: Config | None,
        cache: CachedReader | None,
    ) -> AdmissionRequest[T]:
        """The request of a checked AdmissionReview's `request`, received with `environ`."""
        return cls(
            uid=review["uid"],
            operation=review["operation"],
            resource=resource,
            old_resource=old_resource,
            name=review.get("name", ""),
            namespace=review.get("namespace", ""),
            subresource=review.get("subResource", ""),
            dry_run=review.get("dryRun", False),
            user_info=UserInfo.from_review(review.get("userInfo")),
            options=review.get("options"),
            raw_object=review.get("object"),
            raw_old_object=review.get("oldObject"),
            config=config,
            cache=cache,
            headers=headers_of(environ),
            client_certificate=ClientCertificate.from_peer(environ.get(CLIENT_CERTIFICATE)),
        )

    def warn(self, message: str) -> None:
        """Add a warning to the answer (one line, at most 256 characters; up to 32 are
        sent). kubectl shows each as ``Warning: <message>``."""
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(warning_text(message))

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
