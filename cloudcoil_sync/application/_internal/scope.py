"""A warning at start when a controller's namespace leaves out objects of its own CRD.

A controller watches the operator's namespace unless told otherwise. Objects of its custom
resource elsewhere are then never reconciled and skip its admission webhooks, silently. One
cheap request per such controller at start (the first page of the kind across all
namespaces, no retries, a short timeout) finds them and says so. It asks first whether it
may (a SelfSubjectAccessReview, allowed to everyone): an operator with a namespaced Role sends
no request RBAC denies. Without the permission, or when a request fails, nothing is said
beyond a debug line: this is advice, never a reason not to start.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.client import ClientError, TransportError
from cloudcoil_sync.crd._internal.decorator import resource_options

if TYPE_CHECKING:
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.controller import Controller

__all__ = ["warn_outside_scope"]

log = logging.getLogger("cloudcoil_sync.application")

PAGE = 500
TIMEOUT = 5.0
SHOWN = 5


def warn_outside_scope(
    controllers: Iterable[Controller[Any]], config: Config, operator_namespace: str
) -> list[str]:
    """Warn for each namespaced controller of a custom resource whose objects exist in other
    namespaces; returns the warnings (for tests)."""
    warnings = []
    for controller in controllers:
        watched = controller.watched_namespace(operator_namespace)
        if watched is None or not resource_options(controller.resource):
            continue
        found = _namespaces(controller, config)
        if found is None:
            break  # the server is unreachable: do not delay the start once per controller
        outside = sorted(found - {watched})
        if not outside:
            continue
        kind = controller.resource.__name__
        shown = ", ".join(outside[:SHOWN]) + (", ..." if len(outside) > SHOWN else "")
        text = (
            f"Controller {controller.name or kind.lower()} watches {kind} in namespace "
            f"{watched!r} only, but {kind} objects exist in {shown}: those are not reconciled "
            "and skip its admission webhooks. Give the controller namespace=... or "
            "all_namespaces=True (or the Application its namespace) if they are yours"
        )
        log.warning(text)
        warnings.append(text)
    return warnings


def _namespaces(controller: Controller[Any], config: Config) -> set[str] | None:
    """Namespaces of the kind's objects in the first page of a cluster-wide list (None: the
    API server could not be reached)."""
    try:
        mapping = config.client(controller.resource).mapping
        if not mapping.namespaced or not _may_list(config, mapping.group, mapping.plural):
            return set()
        body = config.transport.request_json(
            "GET",
            mapping.path(None),
            params={"limit": PAGE},
            read_timeout=TIMEOUT,
            connect_timeout=TIMEOUT,
            retries=0,
        )
    except ClientError as error:
        log.debug("Could not list %s across namespaces: %s", controller.resource.__name__, error)
        return None if isinstance(error, TransportError) else set()
    items = body.get("items") if isinstance(body, dict) else None
    namespaces = set()
    for item in items if isinstance(items, list) else []:
        metadata = item.get("metadata") if isinstance(item, dict) else None
        if isinstance(metadata, dict) and isinstance(metadata.get("namespace"), str):
            namespaces.add(metadata["namespace"])
    return namespaces


def _may_list(config: Config, group: str, plural: str) -> bool:
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "group": group, "resource": plural}},
    }
    answer = config.transport.request_json(
        "POST",
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        body=review,
        read_timeout=TIMEOUT,
        connect_timeout=TIMEOUT,
        retries=0,
    )
    status = answer.get("status") if isinstance(answer, dict) else None
    allowed = isinstance(status, dict) and status.get("allowed") is True
    if not allowed:
        log.debug("Not allowed to list %s across namespaces: no scope check", plural)
    return allowed
