"""Admission routes: what each webhook path admits, and the registrations that call it.

A `Route` binds one HTTPS path to one handler for one model: the kind the API server
sends (`model`), the endpoint it is registered for (`target`, e.g. `Deployment` for a
`Scale` on `deployments/scale`), the operations, scope, selector, timeout and failure
policy. `AdmissionRoutes` holds a path-keyed table with the path rules; the WSGI
`AdmissionWebhook` serves such a table, and `webhook_configurations` turns it into
Mutating/ValidatingWebhookConfiguration documents. `ScopedAdmission` is the decorator
registry behind `@app.validate`, `@app.mutate`, `@controller.validate` and
`@controller.mutate`, which synthesise a stable default path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name, is_async, parameters
from cloudcoil_sync._internal.names import is_dns1035_label, is_dns_subdomain
from cloudcoil_sync._internal.script_errors import install_for_script
from cloudcoil_sync.admission._internal.configurations import webhook_configurations
from cloudcoil_sync.admission._internal.decorators import (
    FailurePolicy,
    Operation,
    admission_methods,
)
from cloudcoil_sync.client._internal.rest import lookup
from cloudcoil_sync.crd._internal.decorator import resource_options

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config

__all__ = [
    "HEALTH_PATHS",
    "AdmissionRoutes",
    "Route",
    "RouteTable",
    "ScopedAdmission",
    "api_metadata",
    "webhook_configurations",
]

Scope = Literal["Namespaced", "Cluster", "*"]
F = TypeVar("F", bound=Callable[..., Any])
GVKKey = tuple[str, str, str]
"""(group, version, kind)."""

OPERATIONS = ("CREATE", "UPDATE", "DELETE")
HEALTH_PATHS = frozenset({"/healthz", "/readyz", "/controllers/readyz", "/metrics"})
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


def gvk_key(model: type[Resource]) -> GVKKey:
    gvk = model.gvk()
    if not gvk.api_version or not gvk.kind:
        raise ValueError(f"{model.__name__} needs a concrete apiVersion and kind")
    return gvk.group, gvk.version, gvk.kind


def api_metadata(model: type[Resource]) -> tuple[str | None, str | None, tuple[str, ...]]:
    """(plural, scope, subresources) from the model's own `@custom_resource`, else the
    client's built-in REST table. Offline: never performs discovery; unknown kinds give
    `(None, None, ())`.
    """
    options = resource_options(model)
    if options is not None:
        status = options.status if options.status is not None else "status" in model.model_fields
        return options.plural, options.scope, ("status",) if status else ()
    try:
        mapping = lookup(model)
    except (LookupError, TypeError):
        return None, None, ()
    if mapping.subresource_only:  # e.g. Scale: only served as a subresource of others
        return None, None, ()
    scope = "Namespaced" if mapping.namespaced else "Cluster"
    return mapping.plural, scope, tuple(mapping.subresources)


@dataclass(frozen=True)
class Route:
    """One admission endpoint and its registration settings."""

    model: type[Resource]
    handler: Callable[[Any], Any]
    mutation: bool
    path: str
    resource: str
    operations: tuple[Operation, ...]
    subresource: str
    scope: Scope
    timeout_seconds: int
    failure_policy: FailurePolicy
    target: type[Resource] | None = None
    namespace_selector: dict[str, Any] | None = None
    max_concurrency: int | None = None  # handlers at once; None: the webhook's max_workers

    @property
    def kind(self) -> Literal["mutate", "validate"]:
        return "mutate" if self.mutation else "validate"

    # Cached (checked on every review): a model's apiVersion and kind never change.
    @cached_property
    def model_gvk(self) -> GVKKey:
        """(group, version, kind) of the objects in the review (`request.kind`)."""
        return gvk_key(self.model)

    @cached_property
    def target_gvk(self) -> GVKKey:
        """(group, version, kind) of the registered endpoint (`request.resource`)."""
        return gvk_key(self.target or self.model)

    @property
    def endpoint(self) -> str:
        """`plural` or `plural/subresource`, as in the webhook rule."""
        return self.resource + (f"/{self.subresource}" if self.subresource else "")


def _check_path(path: str, taken: Iterable[str]) -> None:
    if not isinstance(path, str):
        raise ValueError(f"Webhook path must be a string, not {type(path).__name__}")
    if not re.fullmatch(r"/[a-z0-9/.-]+", path):
        raise ValueError(
            f"Webhook path {path!r} must be an absolute path of lower-case letters, digits, "
            "'.', '-' and '/' (no query or escape characters)"
        )
    if path in taken:
        raise ValueError(f"Webhook path {path!r} is already registered")
    if path == "/healthz":
        raise ValueError(f"Webhook path {path!r} is the health endpoint")
    # Kubernetes validates each Service path segment as a DNS subdomain.
    for segment in path[1:].split("/"):
        if not is_dns_subdomain(segment):
            raise ValueError(
                f"Webhook path {path!r}: segment {segment!r} is not a DNS subdomain "
                "(Kubernetes checks each segment)"
            )


def build_route(
    model: type[Resource],
    handler: Callable[[Any], Any],
    *,
    mutation: bool,
    path: str,
    taken: Iterable[str] = (),
    target: type[Resource] | None = None,
    resource: str | None = None,
    operations: Sequence[Operation] = ("CREATE", "UPDATE"),
    subresource: str = "",
    scope: Scope | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
    timeout_seconds: int = 5,
    failure_policy: FailurePolicy = "Fail",
    max_concurrency: int | None = None,
) -> Route:
    """Validate one route's settings (offline) and fill plural/scope defaults."""
    gvk_key(model)  # Fail early for models without a concrete GVK.
    if target is not None and not subresource:
        raise ValueError("A different admission target requires subresource=...")
    endpoint = target if target is not None else model
    gvk_key(endpoint)
    plural, known_scope, _ = api_metadata(endpoint)
    resource = resource if resource is not None else plural
    scope = scope if scope is not None else known_scope or "*"  # type: ignore[assignment]
    if resource is None:
        raise ValueError("Supply resource=... or use a model with generated API metadata")
    field = model.model_fields.get("api_version")
    if field is None or (field.serialization_alias or field.alias) != "apiVersion":
        raise ValueError("The resource api_version field needs Field(alias='apiVersion')")
    _check_path(path, taken)
    if not is_dns1035_label(resource):
        raise ValueError("resource must be the exact lowercase Kubernetes resource plural")
    if not isinstance(subresource, str) or (
        subresource and not re.fullmatch(r"[a-z][a-z0-9]*", subresource)
    ):
        raise ValueError("subresource must be an exact lowercase subresource name")
    if (
        isinstance(operations, str)
        or not operations
        or len(set(operations)) != len(operations)
        or any(op not in OPERATIONS for op in operations)
    ):
        raise ValueError("operations must contain unique CREATE, UPDATE, or DELETE entries")
    if scope not in ("Namespaced", "Cluster", "*") or failure_policy not in ("Fail", "Ignore"):
        raise ValueError("Invalid webhook scope or failure policy")
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, int)
        or not 1 <= timeout_seconds <= 30
    ):
        raise ValueError("timeout_seconds must be an integer between 1 and 30")
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or not 1 <= max_concurrency <= 1024
    ):
        raise ValueError("max_concurrency must be an integer between 1 and 1024")
    if namespace_selector is not None and not isinstance(namespace_selector, Mapping):
        raise TypeError("namespace_selector must be a LabelSelector mapping")
    return Route(
        model=model,
        handler=handler,
        mutation=mutation,
        path=path,
        resource=resource,
        operations=tuple(operations),
        subresource=subresource,
        scope=scope,
        timeout_seconds=timeout_seconds,
        failure_policy=failure_policy,
        target=target,
        max_concurrency=max_concurrency,
        namespace_selector=None
        if namespace_selector is None
        else deepcopy(dict(namespace_selector)),
    )


def _bind_method(
    callback: Callable[..., Any], model: type[Resource], inject_client: bool
) -> Callable[[Any], Any]:
    def invoke(request: Any) -> Any:
        if inject_client:
            return callback(request, request.client(model))
        return callback(request)

    invoke.__name__ = getattr(callback, "__name__", "invoke")
    invoke.__qualname__ = getattr(callback, "__qualname__", invoke.__name__)
    return invoke


def _kebab(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "handler"


class AdmissionRoutes:
    """A table of admission routes keyed by path (the low-level registration API).

    `path` is required here; the scoped decorators synthesise one. `config` is the
    operator Config handlers' `request.client(...)` uses; it stays owned by the caller.
    """

    def __init__(
        self, *, config: Config | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        install_for_script()
        if (
            isinstance(max_body_bytes, bool)
            or not isinstance(max_body_bytes, int)
            or max_body_bytes < 1
        ):
            raise ValueError("max_body_bytes must be a positive integer")
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.routes: dict[str, Route] = {}

    def add(self, route: Route) -> Route:
        if route.path in self.routes:
            raise ValueError(f"Webhook path {route.path!r} is already registered")
        self.routes[route.path] = route
        return route

    def _decorator(
        self, model: type[Resource], mutation: bool, path: str, options: dict[str, Any]
    ) -> Callable[[F], F]:
        def register(handler: F) -> F:
            check_handler(handler)
            self.add(
                build_route(
                    model, handler, mutation=mutation, path=path, taken=self.routes, **options
                )
            )
            return handler

        return register

    def mutating(self, model: type[Resource], *, path: str, **options: Any) -> Callable[[F], F]:
        """Register a mutator returning its edited resource, or None for no patch.

        Options: target, resource, operations, subresource, scope, namespace_selector,
        timeout_seconds, failure_policy, max_concurrency (handlers of this route at once).
        """
        return self._decorator(model, True, path, options)

    def validating(self, model: type[Resource], *, path: str, **options: Any) -> Callable[[F], F]:
        """Register a validator; return None to allow or raise AdmissionDenied."""
        return self._decorator(model, False, path, options)

    def register(self, *models: type[Resource]) -> AdmissionRoutes:
        """Register the `@mutating`/`@validating` methods of `@custom_resource` models."""
        return self.register_models(models, require_config=True)

    def register_models(
        self, models: Sequence[type[Resource]], *, require_config: bool
    ) -> AdmissionRoutes:
        """All-or-nothing model registration; manifests register before any Config exists."""
        staged = dict(self.routes)
        for model in models:
            crd = resource_options(model)
            if crd is None:
                raise ValueError(
                    f"{model.__name__} needs @custom_resource(plural=...) for registration"
                )
            methods = admission_methods(model)
            if not methods:
                raise ValueError(f"{model.__name__} has no decorated admission methods")
            group, version, _ = gvk_key(model)
            for method in methods:
                if method.needs_client and self.config is None and require_config:
                    raise ValueError(
                        f"{model.__name__}.{method.name} needs AdmissionWebhook(config=...)"
                    )
                policy = method.options
                path = policy.path or "/".join(
                    (
                        "",
                        "mutate" if policy.mutation else "validate",
                        group.replace(".", "/"),
                        version,
                        crd.plural,
                        _kebab(method.name),
                    )
                )
                route = build_route(
                    model,
                    _bind_method(method.handler, model, method.needs_client),
                    mutation=policy.mutation,
                    path=path,
                    taken=staged,
                    operations=policy.operations,
                    subresource=policy.subresource,
                    timeout_seconds=policy.timeout_seconds,
                    failure_policy=policy.failure_policy,
                )
                staged[route.path] = route
        self.routes = staged
        return self

    def configurations(
        self,
        *,
        name: str,
        service_name: str,
        service_namespace: str,
        ca_bundle: bytes,
        service_port: int = 443,
    ) -> list[dict[str, Any]]:
        """Mutating then Validating configuration for these routes (each only if non-empty)."""
        return webhook_configurations(
            self.routes.values(),
            name=name,
            service_name=service_name,
            service_namespace=service_namespace,
            ca_bundle=ca_bundle,
            service_port=service_port,
        )


def check_handler(handler: Callable[..., Any]) -> None:
    """An admission handler is a plain `def` taking exactly one AdmissionRequest."""
    if is_async(handler):
        raise TypeError(
            f"{function_name(handler)}: admission handlers must be synchronous; "
            "use def, not async def"
        )
    declared = parameters(handler) if callable(handler) else []
    if len(declared) != 1 or declared[0].kind not in (
        declared[0].POSITIONAL_ONLY,
        declared[0].POSITIONAL_OR_KEYWORD,
    ):
        raise TypeError(
            f"{function_name(handler)}: admission handlers must take one AdmissionRequest"
        )


def default_path(
    handler: Callable[..., Any], *, mutation: bool, target: type[Resource], subresource: str
) -> str:
    """`/{mutate|validate}/{kebab(name)[:40]}-{12 hex}`: stable across processes and runs."""
    identity = f"{handler.__module__}.{handler.__qualname__}:{target.gvk()}:{subresource}"
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    name = _kebab(getattr(handler, "__name__", "handler"))[:40].strip("-") or "handler"
    return f"/{'mutate' if mutation else 'validate'}/{name}-{digest}"


class RouteTable(Protocol):
    """Anything holding routes by path: `AdmissionRoutes` or a serving `AdmissionWebhook`."""

    routes: dict[str, Any]
    config: Any
    max_body_bytes: int


class ScopedAdmission:
    """Decorator registry of one Application or Controller (`@x.validate`, `@x.mutate`).

    With `table`, routes are added to that table (an app's `admission=`), as 0.8 does.
    """

    def __init__(self, check: Callable[[], None], table: RouteTable | None = None) -> None:
        self.check = check
        self.table: RouteTable = table if table is not None else AdmissionRoutes()

    @property
    def routes(self) -> dict[str, Route]:
        return self.table.routes

    def _register(
        self, model: type[Resource], mutation: bool, options: dict[str, Any]
    ) -> Callable[[F], F]:
        def register(handler: F) -> F:
            self.check()
            check_handler(handler)
            settings = dict(options)
            path = settings.pop("path", None)
            if path is None:
                path = default_path(
                    handler,
                    mutation=mutation,
                    target=settings.get("target") or model,
                    subresource=settings.get("subresource", ""),
                )
            route = build_route(
                model, handler, mutation=mutation, path=path, taken=self.routes, **settings
            )
            self.routes[route.path] = route
            return handler

        return register

    def validate(self, model: type[Resource], **options: Any) -> Callable[[F], F]:
        return self._register(model, False, options)

    def mutate(self, model: type[Resource], **options: Any) -> Callable[[F], F]:
        return self._register(model, True, options)
