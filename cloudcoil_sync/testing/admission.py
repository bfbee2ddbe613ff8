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
  ``reinvocationPolicy``, ``warnings``, audit annotations and webhook metrics are ignored.
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

import base64
import binascii
import http.client
import json
import socket
import ssl
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from . import status as st
from .patch import PatchError, json_patch
from .request import Req
from .store import Store
from .validation import from_storage

__all__ = ["Attempt", "ServiceRoute", "WebhookCaller", "denied", "rule_matches", "selector_matches"]

JSON = dict[str, Any]
GROUP = "admissionregistration.k8s.io"
MUTATING = (GROUP, "mutatingwebhookconfigurations")
VALIDATING = (GROUP, "validatingwebhookconfigurations")
REVIEW = "admission.k8s.io/v1"
DEFAULT_TIMEOUT = 10
_NAME_LABEL = "kubernetes.io/metadata.name"
_MAX_IDLE = 4  # kept-alive connections per webhook address
# How a kept-alive connection the server closed while idle fails on reuse.
_CLOSED = (
    http.client.RemoteDisconnected,
    ConnectionResetError,
    BrokenPipeError,
    ssl.SSLEOFError,
    ssl.SSLZeroReturnError,
)
_OPTIONS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


@dataclass(frozen=True)
class ServiceRoute:
    """Where calls to a webhook Service go, and the name its certificate is checked for."""

    host: str
    port: int
    server_name: str


class CallFailed(Exception):
    """A webhook call that did not produce a usable review (failurePolicy decides)."""


@dataclass
class Attempt:
    """One admission decision: the operation, its request and the objects involved."""

    operation: str
    req: Req
    obj: JSON | None
    old: JSON | None
    options: JSON
    dry_run: bool


class WebhookCaller:
    """Calls matching webhooks for writes made over HTTP (see the module docstring)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._routes: dict[tuple[str, str], ServiceRoute] = {}
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._idle: dict[tuple[str, int, str, str], list[_Connection]] = {}

    def close(self) -> None:
        """Close the kept-alive connections to webhooks."""
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for conn in connections:
                conn.close()

    def route_service(
        self, namespace: str, name: str, host: str, port: int, server_name: str | None = None
    ) -> None:
        """Send calls for Service ``namespace/name`` to ``host:port``."""
        route = ServiceRoute(host, int(port), server_name or f"{name}.{namespace}.svc")
        with self._lock:
            self._routes[(namespace, name)] = route

    def unroute_service(self, namespace: str, name: str) -> None:
        with self._lock:
            self._routes.pop((namespace, name), None)

    # -- the emulator's call sites ------------------------------------------------------------
    def mutate(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> JSON:
        """The object after the mutating webhooks (``obj`` itself when none patched it)."""
        if req.user is None:
            return obj
        attempt = Attempt(operation, req, obj, old, _options(operation, req), req.dry_run)
        result = obj
        for webhook in self._webhooks(MUTATING, attempt):
            response = self._call(webhook, attempt)
            if response is not None:
                result = attempt.obj = _patched(webhook, result, response)
        if result is obj or not req.rt.status_subresource:
            return result
        return _status_split(req, obj, result)

    def validate(self, operation: str, req: Req, obj: JSON, old: JSON | None) -> None:
        """Raise ``ApiError`` when a validating webhook denies or fails the write."""
        if req.user is None:
            return
        attempt = Attempt(operation, req, obj, old, _options(operation, req), req.dry_run)
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
        for key in (MUTATING, VALIDATING):
            for webhook in self._webhooks(key, attempt):
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
        if not self._namespace_matches(webhook.get("namespaceSelector"), attempt):
            return False
        selector = webhook.get("objectSelector")
        if not selector:
            return True
        return any(
            obj is not None and selector_matches(selector, _labels(obj))
            for obj in (attempt.obj, attempt.old)
        )

    def _namespace_matches(self, selector: JSON | None, attempt: Attempt) -> bool:
        req = attempt.req
        is_namespace = _is_namespace(req)
        if not selector or (not req.rt.namespaced and not is_namespace):
            return True  # cluster-scoped objects other than namespaces always match
        if is_namespace and not req.subresource and attempt.operation != "DELETE":
            labels = _labels(attempt.obj)
            name = req.name
        else:
            name = req.name if is_namespace else req.namespace
            stored = self.store.get(("", "namespaces"), "", name)
            labels = _labels(stored)
        labels.setdefault(_NAME_LABEL, name)
        return selector_matches(selector, labels)

    # -- calling -----------------------------------------------------------------------------
    def _call(self, webhook: JSON, attempt: Attempt) -> JSON | None:
        """The webhook's response if it allowed the request; None when skipped (Ignore)."""
        name = str(webhook.get("name", ""))
        if attempt.dry_run and webhook.get("sideEffects") not in ("None", "NoneOnDryRun"):
            raise st.bad_request(f'admission webhook "{name}" does not support dry run')
        uid = str(uuid.uuid4())
        try:
            response = _response(self._post(webhook, _review(uid, attempt)), uid)
        except CallFailed as failure:
            if webhook.get("failurePolicy") == "Ignore":
                return None
            message = f'failed calling webhook "{name}": {failure}'
            raise st.ApiError(
                500,
                "InternalError",
                f"Internal error occurred: {message}",
                {"causes": [{"message": message}]},
            ) from None
        if not response["allowed"]:
            raise denied(name, response.get("status"))
        return response

    def _post(self, webhook: JSON, review: JSON) -> JSON:
        client = webhook.get("clientConfig") or {}
        timeout = webhook.get("timeoutSeconds") or DEFAULT_TIMEOUT
        url, host, port, server_name, target = self._target(client, timeout)
        failing = f'failed to call webhook: Post "{url}"'
        if host is None:
            raise CallFailed(f"{failing}: {server_name}")
        try:
            context = self._context(client.get("caBundle"))
        except (ValueError, ssl.SSLError) as exc:
            raise CallFailed(f"{failing}: invalid caBundle: {exc}") from None
        deadline = time.monotonic() + timeout
        body = json.dumps(review, separators=(",", ":")).encode()
        key = (host, port, server_name, str(client.get("caBundle") or ""))
        try:
            status, data = self._exchange(key, context, target, body, timeout, deadline)
        except TimeoutError:
            raise CallFailed(f"{failing}: context deadline exceeded") from None
        except ssl.SSLCertVerificationError as exc:
            detail = exc.verify_message or str(exc)
            raise CallFailed(f"{failing}: tls: failed to verify certificate: {detail}") from None
        except ConnectionRefusedError:
            raise CallFailed(
                f"{failing}: dial tcp {host}:{port}: connect: connection refused"
            ) from None
        except (OSError, http.client.HTTPException) as exc:
            raise CallFailed(f"{failing}: {type(exc).__name__}: {exc}") from None
        if status != 200:
            text = data[:512].decode("utf-8", "replace")
            raise CallFailed(f'{failing}: the server responded with status {status} ("{text}")')
        try:
            document: JSON = json.loads(data)
        except ValueError as exc:
            raise CallFailed(f"received invalid webhook response: {exc}") from None
        return document

    def _exchange(
        self,
        key: tuple[str, int, str, str],
        context: ssl.SSLContext,
        target: str,
        body: bytes,
        timeout: float,
        deadline: float,
    ) -> tuple[int, bytes]:
        """POST on a kept-alive connection (one fresh retry if the server had closed it)."""
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        while True:
            with self._lock:
                idle = self._idle.get(key)
                conn = idle.pop() if idle else None
            reused = conn is not None
            if conn is None:
                conn = _Connection(key[0], key[1], key[2], context, timeout)
            try:
                if not reused:
                    conn.connect()
                _remaining(conn, deadline)
                conn.request("POST", target, body, headers)
                answer = conn.getresponse()
                data = answer.read()
            except _CLOSED:
                conn.close()
                if reused:
                    continue  # closed while idle: the request never reached a handler
                raise
            except BaseException:
                conn.close()
                raise
            if answer.will_close:
                conn.close()
            else:
                with self._lock:
                    pool = self._idle.setdefault(key, [])
                    if len(pool) < _MAX_IDLE:
                        pool.append(conn)
                        conn = None
                if conn is not None:
                    conn.close()
            return answer.status, data

    def _target(self, client: JSON, timeout: int) -> tuple[str, str | None, int, str, str]:
        """(shown URL, host, port, TLS server name, request target); host None: no route."""
        query = f"?timeout={timeout}s"
        if client.get("url"):
            parts = urlsplit(str(client["url"]))
            target = (parts.path or "/") + query
            hostname = parts.hostname or ""
            return str(client["url"]) + query, hostname, parts.port or 443, hostname, target
        service = client.get("service") or {}
        namespace, name = service.get("namespace", ""), service.get("name", "")
        port = int(service.get("port") or 443)
        path = service.get("path") or "/"
        url = f"https://{name}.{namespace}.svc:{port}{path}{query}"
        with self._lock:
            route = self._routes.get((namespace, name))
        if route is None:
            why = (
                f"service {namespace}/{name} has no route in the emulator (Emulator.route_service)"
            )
            return url, None, port, why, path + query
        return url, route.host, route.port, route.server_name, path + query

    def _context(self, bundle: Any) -> ssl.SSLContext:
        key = str(bundle or "")
        with self._lock:
            context = self._contexts.get(key)
        if context is not None:
            return context
        if key:
            try:
                pem = base64.b64decode(key, validate=True).decode("ascii")
            except (binascii.Error, UnicodeDecodeError) as exc:
                raise ValueError(f"not base64-encoded PEM ({exc})") from None
            context = ssl.create_default_context(cadata=pem)
        else:
            context = ssl.create_default_context()  # the system roots, as kube-apiserver
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with self._lock:
            self._contexts[key] = context
        return context


class _Connection(http.client.HTTPSConnection):
    """HTTPS to ``host:port`` whose certificate is verified for ``server_name``."""

    def __init__(
        self, host: str, port: int, server_name: str, context: ssl.SSLContext, timeout: float
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self._server_name = server_name
        self._tls = context

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self.sock = self._tls.wrap_socket(raw, server_hostname=self._server_name)
        except BaseException:
            raw.close()
            raise


def _remaining(conn: _Connection, deadline: float) -> None:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    if conn.sock is not None:
        conn.sock.settimeout(left)


# -- reviews ----------------------------------------------------------------------------------
def _options(operation: str, req: Req) -> JSON:
    options: JSON = {"kind": _OPTIONS[operation], "apiVersion": "meta.k8s.io/v1"}
    if req.dry_run:
        options["dryRun"] = ["All"]
    if req.query.get("fieldManager"):
        options["fieldManager"] = req.query["fieldManager"]
    return options


def _is_namespace(req: Req) -> bool:
    return req.rt.group == "" and req.rt.plural == "namespaces"


def _review(uid: str, attempt: Attempt) -> JSON:
    req = attempt.req
    rt = req.rt
    kind = {"group": rt.group, "version": rt.version, "kind": rt.kind}
    resource = {"group": rt.group, "version": rt.version, "resource": rt.plural}
    # For Namespace objects kube-apiserver reports the namespace's own name (since 1.20,
    # kubernetes/kubernetes#95012, for every operation).
    namespace = req.name if _is_namespace(req) else req.namespace
    user = req.user
    request: JSON = {
        "uid": uid,
        "kind": kind,
        "resource": resource,
        "requestKind": kind,
        "requestResource": resource,
        "name": req.name,
        "namespace": namespace,
        "operation": attempt.operation,
        "userInfo": {
            "username": user.name if user else "",
            "groups": list(user.groups) if user else [],
        },
        "object": attempt.obj,
        "oldObject": attempt.old,
        "dryRun": attempt.dry_run,
        "options": attempt.options,
    }
    if req.subresource:
        request["subResource"] = request["requestSubResource"] = req.subresource
    return {"apiVersion": REVIEW, "kind": "AdmissionReview", "request": request}


def _response(document: Any, uid: str) -> JSON:
    """The ``response`` of a well-formed review answering ``uid``."""
    if not isinstance(document, dict):
        raise CallFailed("received invalid webhook response: not an object")
    if document.get("apiVersion") != REVIEW or document.get("kind") != "AdmissionReview":
        raise CallFailed(
            "received invalid webhook response: expected webhook response of "
            f"{REVIEW}, Kind=AdmissionReview, got {document.get('apiVersion')}, "
            f"Kind={document.get('kind')}"
        )
    response = document.get("response")
    if not isinstance(response, dict):
        raise CallFailed("received invalid webhook response: response is missing")
    if response.get("uid") != uid:
        raise CallFailed(
            f'received invalid webhook response: expected response.uid="{uid}", '
            f'got "{response.get("uid")}"'
        )
    if not isinstance(response.get("allowed"), bool):
        raise CallFailed("received invalid webhook response: response.allowed is not a bool")
    return response


def denied(name: str, status: Any) -> st.ApiError:
    """kube-apiserver's rejection for ``allowed: false`` with the webhook's ``status``."""
    result = status if isinstance(status, dict) else {}
    code = result.get("code")
    code = code if isinstance(code, int) and code >= 400 else 400
    reason = str(result.get("reason") or "")
    by = f'admission webhook "{name}" denied the request'
    if result.get("message"):
        message = f"{by}: {result['message']}"
    elif reason:
        message = f"{by}: {reason}"
    else:
        message = f"{by} without explanation"
    details = result.get("details") if isinstance(result.get("details"), dict) else None
    return st.ApiError(code, reason, message, details)


def _patched(webhook: JSON, obj: JSON, response: JSON) -> JSON:
    """``obj`` with the response's JSONPatch applied (a new object), else ``obj`` itself."""
    patch = response.get("patch")
    if patch is None:
        return obj
    name = webhook.get("name", "")
    if response.get("patchType") != "JSONPatch":
        raise _internal(
            f'webhook "{name}" returned a patch with patchType {response.get("patchType")!r}'
        )
    try:
        ops = json.loads(base64.b64decode(str(patch), validate=True))
        result = json_patch(obj, ops)
    except (ValueError, binascii.Error) as exc:
        raise _internal(f'webhook "{name}" returned an undecodable patch: {exc}') from None
    except PatchError as exc:
        raise _internal(
            f'webhook "{name}" returned a patch that cannot be applied: {exc.why}'
        ) from None
    if not isinstance(result, dict) or _identity(result) != _identity(obj):
        raise _internal(f'webhook "{name}" changed the apiVersion, kind, name or namespace')
    return result


def _status_split(req: Req, before: JSON, after: JSON) -> JSON:
    """Keep only what the endpoint may change, as the strategies after admission do: a
    ``/status`` write keeps only the new status, any other write keeps the old status."""
    if req.subresource == "status":
        kept = {**before, "status": after.get("status")}
    else:
        kept = {**after, "status": before.get("status")}
    if kept["status"] is None:
        del kept["status"]
    return kept


def _internal(message: str) -> st.ApiError:
    return st.ApiError(
        500,
        "InternalError",
        f"Internal error occurred: {message}",
        {"causes": [{"message": message}]},
    )


def _identity(obj: JSON) -> tuple[Any, ...]:
    meta = obj.get("metadata") or {}
    return obj.get("apiVersion"), obj.get("kind"), meta.get("name"), meta.get("namespace")


# -- matching ---------------------------------------------------------------------------------
def _labels(obj: JSON | None) -> dict[str, str]:
    labels = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return dict(labels) if isinstance(labels, dict) else {}


def _listed(values: Any, wanted: str) -> bool:
    return isinstance(values, list) and ("*" in values or wanted in values)


def rule_matches(rule: Any, attempt: Attempt) -> bool:
    """kube-apiserver's rule matcher: ``*`` is every resource but no subresource, ``x/*``
    the resource and all its subresources, ``*/*`` everything."""
    if not isinstance(rule, dict):
        return False
    rt, req = attempt.req.rt, attempt.req
    if not (
        _listed(rule.get("operations"), attempt.operation)
        and _listed(rule.get("apiGroups"), rt.group)
        and _listed(rule.get("apiVersions"), rt.version)
    ):
        return False
    scope = rule.get("scope") or "*"
    is_namespace = _is_namespace(req)
    if scope == "Namespaced" and (is_namespace or not rt.namespaced):
        return False
    if scope == "Cluster" and rt.namespaced:
        return False
    for entry in rule.get("resources") or []:
        resource, _, sub = str(entry).partition("/")
        if resource in ("*", rt.plural) and sub in ("*", req.subresource):
            return True
    return False


def selector_matches(selector: JSON, labels: dict[str, str]) -> bool:
    """A ``LabelSelector`` (matchLabels, matchExpressions In/NotIn/Exists/DoesNotExist)."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        if operator == "In":
            ok = key in labels and labels[key] in values
        elif operator == "NotIn":
            ok = key not in labels or labels[key] not in values
        elif operator == "Exists":
            ok = key in labels
        elif operator == "DoesNotExist":
            ok = key not in labels
        else:
            return False  # kube rejects such a selector when the configuration is stored
        if not ok:
            return False
    return True
