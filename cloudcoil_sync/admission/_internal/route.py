"""One admission route: the `Route` record and the checks `build_route` applies to it.

A `Route` binds one HTTPS path to one handler for one model: the kind the API server sends
(`model`), the endpoint it is registered for (`target`, e.g. `Deployment` for a `Scale` on
`deployments/scale`), the operations, scope, selector, timeout and failure policy. The table of
routes is `routes.AdmissionRoutes`; `configurations` turns routes into registrations.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from copy import deepcopy
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

from cloudcoil.resources import Resource

from cloudcoil_sync._internal.endpoints import HEALTHZ
from cloudcoil_sync._internal.names import is_dns1035_label, is_dns_subdomain
from cloudcoil_sync.admission._internal.decorators import FailurePolicy, Operation
from cloudcoil_sync.client._internal.rest import lookup
from cloudcoil_sync.crd._internal.decorator import resource_options

__all__ = ["OPERATIONS", "GVKKey", "Route", "Scope", "api_metadata", "build_route", "gvk_key"]

Scope = Literal["Namespaced", "Cluster", "*"]
GVKKey = tuple[str, str, str]
"""(group, version, kind)."""

OPERATIONS = ("CREATE", "UPDATE", "DELETE")


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
    object_selector: dict[str, Any] | None = None
    #: The handler reads `request.raw_object` (no model is built) and returns JSON Patch
    #: operations or None: for the framework's own routes, e.g. sharding's placing webhook.
    patches: bool = False

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
    if path == HEALTHZ:
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
    object_selector: Mapping[str, Any] | None = None,
    patches: bool = False,
) -> Route:
    """Validate one route's settings (offline) and fill plural/scope defaults."""
    gvk_key(model)  # Fail early for models without a concrete GVK.
    if target is not None and not subresource:
        raise ValueError("A different admission target requires subresource=...")
    endpoint = target if target is not None else model
    gvk_key(endpoint)
    plural, known_scope, _ = api_metadata(endpoint)
    resource = resource if resource is not None else plural
    chosen: Scope = scope if scope is not None else _scope(known_scope)
    if resource is None:
        raise ValueError("Supply resource=... or use a model with generated API metadata")
    _check_model(model)
    _check_path(path, taken)
    _check_endpoint(resource, subresource, operations)
    _check_settings(chosen, failure_policy, timeout_seconds, max_concurrency)
    _check_selectors(namespace_selector, object_selector)
    return Route(
        model=model,
        handler=handler,
        mutation=mutation,
        path=path,
        resource=resource,
        operations=tuple(operations),
        subresource=subresource,
        scope=chosen,
        timeout_seconds=timeout_seconds,
        failure_policy=failure_policy,
        target=target,
        max_concurrency=max_concurrency,
        namespace_selector=_copy(namespace_selector),
        object_selector=_copy(object_selector),
        patches=patches is True,
    )


def _copy(selector: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return None if selector is None else deepcopy(dict(selector))


def _scope(known: str | None) -> Scope:
    if known == "Namespaced":
        return "Namespaced"
    return "Cluster" if known == "Cluster" else "*"


def _check_model(model: type[Resource]) -> None:
    field = model.model_fields.get("api_version")
    if field is None or (field.serialization_alias or field.alias) != "apiVersion":
        raise ValueError("The resource api_version field needs Field(alias='apiVersion')")


def _check_endpoint(resource: str, subresource: str, operations: Sequence[Operation]) -> None:
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
        raise ValueError(
            f"operations must contain unique CREATE, UPDATE, or DELETE entries, got {operations!r}"
        )


def _check_settings(
    scope: str,
    failure_policy: str,
    timeout_seconds: int,
    max_concurrency: int | None,
) -> None:
    if scope not in ("Namespaced", "Cluster", "*") or failure_policy not in ("Fail", "Ignore"):
        raise ValueError(
            f"Invalid webhook scope or failure policy: scope={scope!r}, "
            f"failure_policy={failure_policy!r}"
        )
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, int)
        or not 1 <= timeout_seconds <= 30
    ):
        raise ValueError(
            f"timeout_seconds must be an integer between 1 and 30, got {timeout_seconds!r}"
        )
    if max_concurrency is not None and (
        isinstance(max_concurrency, bool)
        or not isinstance(max_concurrency, int)
        or not 1 <= max_concurrency <= 1024
    ):
        raise ValueError(
            f"max_concurrency must be an integer between 1 and 1024, got {max_concurrency!r}"
        )


def _check_selectors(
    namespace_selector: Mapping[str, Any] | None, object_selector: Mapping[str, Any] | None
) -> None:
    for label, selector in (
        ("namespace_selector", namespace_selector),
        ("object_selector", object_selector),
    ):
        if selector is not None and not isinstance(selector, Mapping):
            raise TypeError(f"{label} must be a LabelSelector mapping")
