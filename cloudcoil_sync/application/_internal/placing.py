"""The placing webhook's routes: one mutating CREATE route per controller of a sharded app
with `Sharding(placing_webhook=True)` (see sharding/_internal/placer.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cloudcoil_sync.admission._internal.route import Route, api_metadata, build_route
from cloudcoil_sync.controller._internal.cache import LabelSelector
from cloudcoil_sync.sharding import shard_key
from cloudcoil_sync.sharding._internal.kinds import ShardedKind, primary_kind

if TYPE_CHECKING:
    from cloudcoil_sync.admission import AdmissionRequest
    from cloudcoil_sync.controller import Controller
    from cloudcoil_sync.sharding import Sharding

__all__ = ["object_selector", "placing_routes"]


def placing_routes(
    sharding: Sharding | None, controllers: Sequence[Controller[Any]], namespace: str
) -> dict[str, Route]:
    """The placing routes of `controllers` (none unless `sharding.placing_webhook`)."""
    if sharding is None or not sharding.placing_webhook:
        return {}
    routes: dict[str, Route] = {}
    for index, controller in enumerate(controllers):
        kind = primary_kind(controller, namespace)
        plural = api_metadata(controller.resource)[0] or "objects"
        path = f"/sharding/{sharding.ring_name}/place-{index}-{plural}"
        routes[path] = build_route(
            controller.resource,
            _handler(sharding, kind),
            mutation=True,
            path=path,
            operations=("CREATE",),
            # unanswered in time, the object is created unplaced and claimed: never refused
            timeout_seconds=sharding.placing_timeout,
            failure_policy="Ignore",
            object_selector=object_selector(sharding.ring_name, controller.label_selector),
            patches=True,
        )
    return routes


def object_selector(ring: str, label_selector: str | None) -> dict[str, Any]:
    """The controller's selector as matchExpressions, and the shard label not set."""
    expressions = LabelSelector(label_selector).expressions if label_selector else []
    return {
        "matchExpressions": [
            *expressions,
            {"key": shard_key(ring), "operator": "DoesNotExist"},
        ]
    }


def _handler(sharding: Sharding, kind: ShardedKind) -> Any:
    placer = sharding.placer

    def place(request: AdmissionRequest[Any]) -> list[dict[str, Any]] | None:
        raw = request.raw_object
        return None if raw is None else placer.patch(raw, kind, request.namespace)

    place.__qualname__ = place.__name__ = f"place_{kind.resource.__name__}"
    return place
