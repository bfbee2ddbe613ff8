"""Extension points: admission (webhook calls) and store observers.

Admission webhooks
    Built in :mod:`cloudcoil_sync.testing._internal.admission` (``Emulator.webhooks``). Creates and
    updates reach it through ``Objects.admission`` (an :class:`ObjectAdmission`): ``mutate``
    after defaulting, with the object the write will store (after the patch or apply), then
    ``validate`` just before the store write. Deletes reach it as an :class:`AdmissionHook`
    in ``Emulator.admission_hooks``, which the API layer calls with the verb and the
    :class:`~cloudcoil_sync.testing._internal.request.Req` before any create/update/patch/delete.
    Only requests made over HTTP carry a user (``Req.user``) and are admitted.

Deployment-status simulator
    Built in :mod:`cloudcoil_sync.testing._internal.rollout` (``Emulator(deployments=...)``): a
    :class:`StoreObserver` in ``Store.listeners`` queues Deployments whose generation is not yet
    observed, and its own thread writes their status through the ``status`` subresource.
"""

from __future__ import annotations

from typing import Any, Protocol

from cloudcoil_sync.testing._internal.request import Req
from cloudcoil_sync.testing._internal.store import WatchEvent

__all__ = ["AdmissionHook", "ObjectAdmission", "StoreObserver"]

JSON = dict[str, Any]


class AdmissionHook(Protocol):
    """Called before every create/update/patch/delete; raise ``ApiError`` to reject."""

    def __call__(self, verb: str, req: Req) -> None: ...


class ObjectAdmission(Protocol):
    """Admission of the object a create (``old`` None) or update is about to store."""

    def mutate(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> JSON:
        """The object to store: ``obj`` itself, or a new object when it was changed."""
        ...

    def validate(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> None:
        """Raise ``ApiError`` to reject the write."""
        ...


class StoreObserver(Protocol):
    """Called under the store lock for every event; must only record or queue work."""

    def __call__(self, event: WatchEvent) -> None: ...
