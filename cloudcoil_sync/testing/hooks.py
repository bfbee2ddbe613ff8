"""Extension points: admission webhooks (designed, not built) and store observers.

Admission webhooks (design)
    ``Emulator.admission_hooks`` is a list of :class:`AdmissionHook`; the API layer calls each
    one with the verb and the :class:`~cloudcoil_sync.testing.request.Req` before a create,
    update, patch or delete reaches the store. The webhook caller will be one such hook:

    1. Read the stored ``Mutating``/``ValidatingWebhookConfiguration`` objects (cache them,
       invalidated by a store listener like RBAC's) and select webhooks whose ``rules``
       (operations, apiGroups, apiVersions, resources incl. ``*/status``, scope),
       ``namespaceSelector`` and ``objectSelector`` match.
    2. For patches and updates it needs the object *after* the change, so the hook will run
       from ``Objects.update``/``create`` (a second call site, ``Objects.admit``) with
       ``oldObject``/``object`` rather than on the raw request body; deletes pass ``oldObject``.
    3. Build an ``admission.k8s.io/v1`` ``AdmissionReview`` (uid, kind, resource, subResource,
       requestKind, name, namespace, operation, userInfo from the authenticated user, object,
       oldObject, dryRun, options) and POST it over HTTPS to ``clientConfig.url`` or the
       ``service`` (resolved to ``https://127.0.0.1:<port>`` through a test-supplied service
       map), verifying with ``clientConfig.caBundle``, honouring ``timeoutSeconds`` and
       ``failurePolicy`` (Fail → 500 ``InternalError`` "failed calling webhook ...",
       Ignore → continue).
    4. Mutating webhooks run first, in name order, applying returned base64 JSON patches;
       then validating webhooks; a denial becomes the kube-apiserver Status
       ``admission webhook "<name>" denied the request: <message>`` with the webhook's code
       (default 403 Forbidden). ``reinvocationPolicy`` is not modelled.

Deployment-status simulator
    Built in :mod:`cloudcoil_sync.testing.rollout` (``Emulator(deployments=...)``): a
    :class:`StoreObserver` in ``Store.listeners`` queues Deployments whose generation is not yet
    observed, and its own thread writes their status through the ``status`` subresource.
"""

from __future__ import annotations

from typing import Protocol

from .request import Req
from .store import WatchEvent

__all__ = ["AdmissionHook", "StoreObserver"]


class AdmissionHook(Protocol):
    """Called before every create/update/patch/delete; raise ``ApiError`` to reject."""

    def __call__(self, verb: str, req: Req) -> None: ...


class StoreObserver(Protocol):
    """Called under the store lock for every event; must only record or queue work."""

    def __call__(self, event: WatchEvent) -> None: ...
