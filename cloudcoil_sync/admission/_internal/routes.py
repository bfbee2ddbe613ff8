"""Admission routes: what each webhook path admits, and the registrations that call it.

A `Route` (``route.py``) binds one HTTPS path to one handler for one model. `AdmissionRoutes`
holds a path-keyed table with the path rules; the WSGI `AdmissionWebhook` serves such a
table, and `webhook_configurations` turns it into Mutating/ValidatingWebhookConfiguration
documents. `ScopedAdmission` is the decorator registry behind `@app.validate`, `@app.mutate`,
`@controller.validate` and `@controller.mutate`, which synthesise a stable default path.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.callables import function_name, is_async, parameters
from cloudcoil_sync.admission._internal.configurations import webhook_configurations
from cloudcoil_sync.admission._internal.decorators import admission_methods
from cloudcoil_sync.admission._internal.route import (
    Route,
    api_metadata,
    build_route,
    gvk_key,
)
from cloudcoil_sync.crd._internal.decorator import resource_options

if TYPE_CHECKING:
    from cloudcoil_sync.admission._internal.conversion_route import ConversionRoute
    from cloudcoil_sync.client import Config

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024

__all__ = [
    "AdmissionRoutes",
    "Route",
    "RouteTable",
    "ScopedAdmission",
    "api_metadata",
    "webhook_configurations",
]


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
        if (
            isinstance(max_body_bytes, bool)
            or not isinstance(max_body_bytes, int)
            or max_body_bytes < 1
        ):
            raise ValueError("max_body_bytes must be a positive integer")
        self.config = config
        self.max_body_bytes = max_body_bytes
        self.routes: dict[str, Route] = {}
        # Conversion endpoints of multi-version kinds (conversion.py), by path.
        self.conversions: dict[str, ConversionRoute] = {}

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
        object_selector (LabelSelector mappings, as in the webhook configuration),
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
