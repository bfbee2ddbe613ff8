"""Calling the registered admission webhooks, as kube-apiserver does, over real HTTPS.

``WebhookCaller`` reads the stored ``admissionregistration.k8s.io/v1``
``MutatingWebhookConfiguration`` and ``ValidatingWebhookConfiguration`` objects on every
write made through the HTTP API. Mutating configurations run first (configurations in name
order, webhooks in list order), each returned ``JSONPatch`` applied before the next call;
the object is then validated and the validating webhooks run. A webhook is called when a
rule matches (operations, apiGroups, apiVersions, resources incl. ``plural/sub``, ``*``,
``*/*``, scope) and its ``namespaceSelector`` and ``objectSelector`` match. The call is an
``AdmissionReview`` v1 POST whose server certificate is verified with
``clientConfig.caBundle``, under ``timeoutSeconds`` (default 10).

Outcomes as kube-apiserver: a call that fails (unreachable, TLS verification, timeout,
non-200 answer, malformed review) is skipped under ``failurePolicy: Ignore`` and otherwise
rejects the write with 500 ``Internal error occurred: failed calling webhook "<name>": ...``;
``allowed: false`` rejects it with the webhook's status (code below 400 becomes 400) and the
message ``admission webhook "<name>" denied the request: <message>``. Dry-run writes call a
webhook only if its ``sideEffects`` is ``None`` or ``NoneOnDryRun``; any other value rejects
the write with 400 ``admission webhook "<name>" does not support dry run``.

``clientConfig.url`` is called directly. A ``clientConfig.service`` cannot be resolved in
process: ``route_service(namespace, name, host, port)`` maps it to a loopback address, and
the certificate is verified for ``<name>.<namespace>.svc`` (what kube-apiserver checks)
unless the route names another ``server_name``. A service without a route fails like an
unreachable webhook.

Simplifications:

- Only writes arriving over HTTP are admitted (create, update, every kind of patch incl.
  server-side apply, delete). Writes of the in-process controllers (garbage collection,
  namespace finalization, the rollout simulator), ``Emulator.create_object``, ``/scale``
  writes and the items of a ``deletecollection`` are not.
- Webhooks are called before the emulator checks that the namespace exists and is not
  terminating (kube-apiserver's NamespaceLifecycle plugin rejects such writes first).
- ``matchPolicy`` is always ``Exact`` (one served version per group); ``matchConditions``,
  ``reinvocationPolicy``, audit annotations and webhook metrics are ignored. A response's
  ``warnings`` become ``Warning`` headers of the answer, as kube-apiserver sends them.
- Validating webhooks are called one after the other (kube calls them in parallel); the
  first denial or failure ends the request.
- Mutating webhooks see the object after generateName and defaulting; ``managedFields`` of
  an apply that creates an object do not record fields the webhooks added.
- A patch that changes apiVersion, kind, name or namespace, like one that cannot be
  applied, rejects the write with 500 ``InternalError`` whatever the failure policy.
- ``timeoutSeconds`` bounds connecting and each later socket operation with the time left,
  not a slowly dripping answer as a whole. Connections are kept alive between calls.
- After ``failed calling webhook "<name>": failed to call webhook: Post "<url>": `` refused
  connections and deadlines read as Go's (``dial tcp ...: connect: connection refused``,
  ``context deadline exceeded``); TLS and other failures give OpenSSL's/Python's reason.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

from cloudcoil_sync.testing._internal import status as st
from cloudcoil_sync.testing._internal.admission_match import (
    Attempt,
    labels_of,
    namespace_matches,
    rule_matches,
    selector_matches,
)
from cloudcoil_sync.testing._internal.admission_review import (
    CallFailed,
    denied,
    internal,
    options_for,
    patched,
    response_of,
    review,
    status_split,
)
from cloudcoil_sync.testing._internal.admission_transport import ServiceRoute, WebhookTransport
from cloudcoil_sync.testing._internal.policies import PolicyEvaluator
from cloudcoil_sync.testing._internal.request import Req
from cloudcoil_sync.testing._internal.store import Store
from cloudcoil_sync.testing._internal.validation import from_storage

__all__ = ["Attempt", "ServiceRoute", "WebhookCaller", "denied", "rule_matches", "selector_matches"]

JSON = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
MUTATING = (GROUP, "mutatingwebhookconfigurations")
VALIDATING = (GROUP, "validatingwebhookconfigurations")


class WebhookCaller:
    """Calls matching webhooks for writes made over HTTP (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.transport = WebhookTransport()
        self.policies = PolicyEvaluator(store)  # ValidatingAdmissionPolicies (CEL)

    def close(self) -> None:
        """Close the kept-alive connections to webhooks."""
        self.transport.close()

    def route_service(
        self, namespace: str, name: str, host: str, port: int, server_name: str | None = None
    ) -> None:
        """Send calls for Service ``namespace/name`` to ``host:port``."""
        self.transport.route_service(namespace, name, host, port, server_name)

    def unroute_service(self, namespace: str, name: str) -> None:
        self.transport.unroute_service(namespace, name)

    # -- the emulator's call sites ------------------------------------------------------------
    def mutate(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> JSON:
        """The object after the mutating webhooks (``obj`` itself when none patched it)."""
        if req.user is None:
            return obj
        attempt = Attempt(operation, req, obj, old, options_for(operation, req), req.dry_run)
        result = obj
        for webhook in self._webhooks(MUTATING, attempt):
            response = self._call(webhook, attempt)
            if response is not None:
                result = attempt.obj = patched(webhook, result, response)
        if result is obj or not req.rt.status_subresource:
            return result
        return status_split(req, obj, result)

    def validate(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> None:
        """Raise ``ApiError`` when a validating webhook denies or fails the write."""
        if req.user is None:
            return
        attempt = Attempt(operation, req, obj, old, options_for(operation, req), req.dry_run)
        self.policies.validate(attempt)  # kube's ValidatingAdmissionPolicy plugin runs first
        for webhook in self._webhooks(VALIDATING, attempt):
            self._call(webhook, attempt)

    def __call__(self, verb: str, req: Req) -> None:
        """The ``AdmissionHook`` for deletes: both kinds of webhook see the stored object."""
        if verb != "delete" or req.user is None:
            return
        stored = self.store.get(req.rt.key, req.namespace, req.name)
        if stored is None:
            return  # the delete answers 404
        body = req.body if isinstance(req.body, dict) else {}
        options = {**body, "kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
        dry_run = req.dry_run or body.get("dryRun") == ["All"]
        old = from_storage(req.rt, stored)
        attempt = Attempt("DELETE", req, None, old, options, dry_run)
        for webhook in self._webhooks(MUTATING, attempt):
            self._call(webhook, attempt)
        self.policies.validate(attempt)
        for webhook in self._webhooks(VALIDATING, attempt):
            self._call(webhook, attempt)

    # -- selection ---------------------------------------------------------------------------
    def _webhooks(self, key: tuple[str, str], attempt: Attempt) -> Iterator[JSON]:
        entries, _ = self.store.scan(key, "")  # sorted by name
        for entry in entries:
            for webhook in entry.obj.get("webhooks") or []:
                if isinstance(webhook, dict) and self._matches(webhook, attempt):
                    yield webhook

    def _matches(self, webhook: JSON, attempt: Attempt) -> bool:
        if not any(rule_matches(rule, attempt) for rule in webhook.get("rules") or []):
            return False
        if not namespace_matches(self.store, webhook.get("namespaceSelector"), attempt):
            return False
        selector = webhook.get("objectSelector")
        if not selector:
            return True
        return any(
            obj is not None and selector_matches(selector, labels_of(obj))
            for obj in (attempt.obj, attempt.old)
        )

    # -- calling -----------------------------------------------------------------------------
    def _call(self, webhook: JSON, attempt: Attempt) -> JSON | None:
        """The webhook's response if it allowed the request; None when skipped (Ignore)."""
        name = str(webhook.get("name", ""))
        if attempt.dry_run and webhook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise st.bad_request(f'admission webhook "{name}" does not support dry run')
        uid = str(uuid.uuid4())
        try:
            response = response_of(self.transport.post(webhook, review(uid, attempt)), uid)
        except CallFailed as failure:
            if webhook.get("failurePolicy") == "Ignore":
                return None
            raise internal(f'failed calling webhook "{name}": {failure}') from None
        for text in response.get("warnings") or ():
            if isinstance(text, str):
                attempt.req.warn(text)
        if not response["allowed"]:
            raise denied(name, response.get("status"))
        return response
