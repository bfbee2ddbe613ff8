"""AdmissionWebhook through its WSGI interface: every answer code and edge (0.8 semantics)."""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.autoscaling.v1 import Scale
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace
from waiting import wait_until

from cloudcoil_sync.admission._internal.request import AdmissionDenied, AdmissionRequest
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.webhook import (
    AdmissionWebhook,
    HandlerPool,
    HandlerTimeout,
    PoolClosed,
)
from cloudcoil_sync.client import Config

from .reviews import call, config_map, review

Action = Callable[[AdmissionRequest[Any]], Any]


class Handlers:
    """Route handlers whose behaviour each test sets; records every request."""

    def __init__(self) -> None:
        self.requests: list[AdmissionRequest[Any]] = []
        self.validate: Action = lambda request: None
        self.mutate: Action = lambda request: None
        self.release = threading.Event()
        self.finished = threading.Event()

    def run(self, action: Action, request: AdmissionRequest[Any]) -> Any:
        self.requests.append(request)
        return action(request)

    def slow(self, request: AdmissionRequest[Any]) -> None:
        self.requests.append(request)
        self.release.wait(10)
        self.finished.set()


@pytest.fixture
def handlers() -> Iterator[Handlers]:
    handlers = Handlers()
    yield handlers
    handlers.release.set()


def build_table(handlers: Handlers, **options: Any) -> AdmissionRoutes:
    table = AdmissionRoutes(**options)
    table.validating(ConfigMap, path="/validate/cm", operations=("CREATE", "UPDATE", "DELETE"))(
        lambda request: handlers.run(handlers.validate, request)
    )
    table.mutating(ConfigMap, path="/mutate/cm", operations=("CREATE", "UPDATE", "DELETE"))(
        lambda request: handlers.run(handlers.mutate, request)
    )
    table.validating(ConfigMap, path="/validate/slow", timeout_seconds=1)(handlers.slow)
    table.validating(Namespace, path="/validate/ns")(
        lambda request: handlers.run(handlers.validate, request)
    )
    table.validating(Scale, path="/validate/scale", target=Deployment, subresource="scale")(
        lambda request: handlers.run(handlers.validate, request)
    )
    return table


@pytest.fixture
def webhook(handlers: Handlers) -> Iterator[AdmissionWebhook]:
    webhook = AdmissionWebhook(build_table(handlers), max_workers=4)
    yield webhook
    handlers.release.set()
    assert webhook.close(timeout=5)


def response_of(document: dict[str, Any]) -> dict[str, Any]:
    assert document["apiVersion"] == "admission.k8s.io/v1"
    assert document["kind"] == "AdmissionReview"
    return document["response"]


def decoded_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response["patchType"] == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


# -- HTTP level --------------------------------------------------------------------------


def test_unknown_path_is_404(webhook: AdmissionWebhook) -> None:
    assert call(webhook, "/validate/other", review())[::2] == (
        404,
        {"message": "Unknown webhook path"},
    )


def test_standalone_healthz(webhook: AdmissionWebhook) -> None:
    """Under another WSGI server /healthz answers as the operator hosts do."""
    seen: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        seen.append((status, headers))

    body = webhook({"REQUEST_METHOD": "GET", "PATH_INFO": "/healthz"}, start_response)
    assert b"".join(body) == b"ok\n"
    assert seen[0][0] == "200 OK"
    assert ("Content-Type", "text/plain; charset=utf-8") in seen[0][1]
    assert call(webhook, "/readyz", method="GET")[::2] == (
        404,
        {"message": "Unknown webhook path"},
    )


def test_only_post_is_allowed(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    status, headers, _ = call(webhook, "/validate/cm", method="GET")
    assert status == 405 and headers["Allow"] == "POST"
    assert handlers.requests == []


def test_only_json_is_accepted(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    status, _, document = call(webhook, "/validate/cm", review(), content_type="text/plain")
    assert (status, document) == (415, {"message": "Expected application/json"})
    status, _, document = call(
        webhook, "/validate/cm", review(), content_type="application/json; charset=utf-8"
    )
    assert status == 200 and response_of(document)["allowed"] is True


def test_body_limit_is_413(handlers: Handlers) -> None:
    webhook = AdmissionWebhook(build_table(handlers, max_body_bytes=2000))
    big = review(obj=config_map(data={"blob": "x" * 3000}))
    assert call(webhook, "/validate/cm", big)[0] == 413
    # A lying Content-Length cannot smuggle more than the limit.
    raw = json.dumps(big).encode()
    assert call(webhook, "/validate/cm", raw, content_length=0)[0] == 413
    assert handlers.requests == []
    assert webhook.close()


def test_default_body_limit_is_4_mib(webhook: AdmissionWebhook) -> None:
    assert webhook.max_body_bytes == 4 * 1024 * 1024
    oversized = b"{" + b" " * (4 * 1024 * 1024) + b"}"
    assert call(webhook, "/validate/cm", oversized)[0] == 413


INVALID = {"message": "Invalid or mismatched admission.k8s.io/v1 AdmissionReview"}


def _mutated(change: Callable[[dict[str, Any]], None], **options: Any) -> dict[str, Any]:
    document = review(**options)
    change(document)
    return document


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(document: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        target = document
        for key in parents:
            target = target[key]
        if value is _DELETE:
            del target[last]
        else:
            target[last] = value

    return change


_DELETE = object()

MALFORMED = {
    "wrong apiVersion": _mutated(_set("apiVersion", "admission.k8s.io/v1beta1")),
    "wrong kind": _mutated(_set("kind", "Review")),
    "no request": _mutated(_set("request", _DELETE)),
    "missing uid": _mutated(_set("request.uid", _DELETE)),
    "empty uid": _mutated(_set("request.uid", "")),
    "kind mismatch": review(kind=("", "v1", "Secret")),
    "kind not an object": _mutated(_set("request.kind", "ConfigMap")),
    "resource mismatch": review(resource=("", "v1", "secrets")),
    "CONNECT": review("CONNECT"),
    "subresource mismatch": review(subResource="status"),
    "namespaced without namespace": review(namespace=""),
    "DELETE with object": review("DELETE", obj=config_map(), old=config_map()),
    "CREATE with oldObject": review("CREATE", obj=config_map(), old=config_map()),
    "UPDATE without oldObject": review("UPDATE", obj=config_map()),
    "object of another kind": review(obj={**config_map(), "kind": "Secret"}),
    "object apiVersion mismatch": review(obj={**config_map(), "apiVersion": "v2"}),
    "object not an object": review(obj=["x"]),  # type: ignore[arg-type]
    "dryRun not strict bool": review(dryRun="false"),
    "name not a string": review(name=5),  # type: ignore[arg-type]
    "groups not a list": _mutated(_set("request.userInfo.groups", "dev")),
    "extra values not lists": _mutated(_set("request.userInfo.extra", {"a": "b"})),
    "options not an object": review(options="x"),
    "not an object": [1, 2],
}


@pytest.mark.parametrize("document", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_or_mismatched_review_is_400_and_never_handled(
    webhook: AdmissionWebhook, handlers: Handlers, document: Any
) -> None:
    body = json.dumps(document).encode()
    assert call(webhook, "/validate/cm", body)[::2] == (400, INVALID)
    assert handlers.requests == []


@pytest.mark.parametrize(
    "body",
    [
        b"{",
        b"\xff\xfe{}",
        b'{"apiVersion": NaN}',
        b"[Infinity]",
        b'{"a": -Infinity}',
        b'{"a": 1e999}',
        b"",
        b"[" * 100_000,
    ],
    ids=["truncated", "not utf-8", "NaN", "Infinity", "-Infinity", "overflow", "empty", "deep"],
)
def test_invalid_json_is_400(webhook: AdmissionWebhook, handlers: Handlers, body: bytes) -> None:
    assert call(webhook, "/validate/cm", body)[::2] == (400, INVALID)
    assert handlers.requests == []


def test_operation_not_registered_is_400(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    # /validate/slow registers CREATE and UPDATE only.
    assert call(webhook, "/validate/slow", review("DELETE"))[::2] == (400, INVALID)
    assert handlers.requests == []


def test_cluster_route_rejects_a_namespace(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}}
    base: dict[str, Any] = {
        "obj": namespace,
        "kind": ("", "v1", "Namespace"),
        "resource": ("", "v1", "namespaces"),
        "name": "team",
    }
    assert call(webhook, "/validate/ns", review(namespace="x", **base))[0] == 400
    status, _, document = call(webhook, "/validate/ns", review(namespace="", **base))
    assert status == 200 and response_of(document)["allowed"] is True
    # kube-apiserver >= 1.20 sends a Namespace's own name as request.namespace.
    status, _, document = call(webhook, "/validate/ns", review(namespace="team", **base))
    assert status == 200 and response_of(document)["allowed"] is True
    assert len(handlers.requests) == 2


def test_subresource_route_with_a_target(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    scale = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"replicas": 3},
    }
    document = review(
        "UPDATE",
        obj=scale,
        old=scale,
        kind=("autoscaling", "v1", "Scale"),
        resource=("apps", "v1", "deployments"),
        subResource="scale",
    )
    status, _, answer = call(webhook, "/validate/scale", document)
    assert status == 200 and response_of(answer)["allowed"] is True
    assert handlers.requests[0].subresource == "scale"
    assert call(webhook, "/validate/scale", {**document, "request": {**document["request"],
        "subResource": ""}})[0] == 400  # fmt: skip


# -- admission outcomes --------------------------------------------------------------------


def test_model_invalid_object_is_denied_with_422(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    bad = config_map(data={"a": 1, "b": 2})
    status, _, document = call(webhook, "/validate/cm", review(obj=bad))
    response = response_of(document)
    assert status == 200 and response["allowed"] is False and response["uid"] == "review-1"
    assert response["status"]["code"] == 422
    assert response["status"]["reason"] == "Invalid"
    message = response["status"]["message"]
    assert message.startswith(
        "ConfigMap default/settings does not fit the operator's ConfigMap model, so its "
        "validating admission handler "
    )
    assert "(/validate/cm) did not run: data.a: " in message
    causes = response["status"]["details"]["causes"]
    assert [cause["field"] for cause in causes] == ["data.a", "data.b"]
    assert all(cause["reason"] == "FieldValueInvalid" for cause in causes)
    assert handlers.requests == []


def test_a_mutating_route_names_itself_and_the_fields_when_the_model_rejects(
    webhook: AdmissionWebhook, handlers: Handlers, caplog: pytest.LogCaptureFixture
) -> None:
    bad = config_map(data={"a": 1})
    with caplog.at_level(logging.INFO, logger="cloudcoil_sync.admission"):
        status, _, document = call(webhook, "/mutate/cm", review(obj=bad))
    response = response_of(document)
    assert status == 200 and response["allowed"] is False
    message = response["status"]["message"]
    assert "mutating admission handler" in message and "(/mutate/cm) did not run" in message
    assert "data.a: Input should be a valid string" in message
    assert handlers.requests == []
    (line,) = [r for r in caplog.records if r.getMessage().startswith("Denied")]
    assert "ConfigMap default/settings on /mutate/cm" in line.getMessage()
    assert "data.a" in line.getMessage()


def test_a_deleting_object_the_model_rejects_can_lose_its_finalizers(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    """Else an object stored invalid could never be deleted past a finalizer."""
    deleting = config_map(data={"a": 1})
    deleting["metadata"]["deletionTimestamp"] = "2026-12-06T00:00:00Z"
    old = {**deleting, "metadata": {**deleting["metadata"], "finalizers": ["example.com/x"]}}
    for path in ("/validate/cm", "/mutate/cm"):
        status, _, document = call(webhook, path, review("UPDATE", obj=deleting, old=old))
        assert status == 200 and response_of(document) == {"uid": "review-1", "allowed": True}
    assert handlers.requests == []
    # Not being deleted: still denied.
    invalid = config_map(data={"a": 1})
    status, _, document = call(webhook, "/validate/cm", review("UPDATE", obj=invalid, old=old))
    assert response_of(document)["allowed"] is False
    # Deleting it is allowed (its handler cannot judge it), ...
    status, _, document = call(webhook, "/validate/cm", review("DELETE", obj=None, old=invalid))
    assert response_of(document)["allowed"] is True and handlers.requests == []
    # ... and the update that fixes it is judged on the new object alone.
    fixed = config_map(data={"a": "1"})
    status, _, document = call(webhook, "/validate/cm", review("UPDATE", obj=fixed, old=invalid))
    assert response_of(document)["allowed"] is True
    (request,) = handlers.requests
    assert request.resource is not None and request.old_resource is None


def test_validator_allows_and_sees_the_request(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    document = review("UPDATE", obj=config_map(data={"k": "new"}), old=config_map(), dryRun=True)
    status, _, answer = call(webhook, "/validate/cm", document)
    assert status == 200
    assert response_of(answer) == {"uid": "review-1", "allowed": True}
    request = handlers.requests[0]
    assert request.operation == "UPDATE"
    assert isinstance(request.resource, ConfigMap) and request.resource.data == {"k": "new"}
    assert isinstance(request.old_resource, ConfigMap)
    assert (request.name, request.namespace, request.dry_run) == ("settings", "default", True)
    assert request.user_info.username == "alice" and list(request.user_info.groups) == ["dev"]
    assert request.raw_object == config_map(data={"k": "new"})


def test_delete_has_no_resource(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    status, _, answer = call(webhook, "/validate/cm", review("DELETE"))
    assert status == 200 and response_of(answer)["allowed"] is True
    request = handlers.requests[0]
    assert request.resource is None and isinstance(request.old_resource, ConfigMap)


def test_admission_denied(
    webhook: AdmissionWebhook, handlers: Handlers, caplog: pytest.LogCaptureFixture
) -> None:
    def deny(request: AdmissionRequest[Any]) -> None:
        raise AdmissionDenied("settings are frozen")

    handlers.validate = deny
    with caplog.at_level(logging.INFO, logger="cloudcoil_sync.admission"):
        response = response_of(call(webhook, "/validate/cm", review())[2])
    # A denial is in `kubectl logs` at the default level, naming the route and the object.
    (line,) = [r.getMessage() for r in caplog.records if "denied" in r.getMessage()]
    assert line.startswith("/validate/cm denied CREATE ConfigMap ")
    assert line.endswith(": settings are frozen")
    assert response["allowed"] is False
    assert response["status"] == {
        "code": 403,
        "reason": "Forbidden",
        "message": "settings are frozen",
    }

    def custom(request: AdmissionRequest[Any]) -> None:
        raise AdmissionDenied("quota", code=429, reason="TooManyRequests")

    handlers.validate = custom
    response = response_of(call(webhook, "/validate/cm", review())[2])
    assert response["status"]["code"] == 429 and response["status"]["reason"] == "TooManyRequests"


def test_admission_denied_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="non-empty message"):
        AdmissionDenied("")
    with pytest.raises(ValueError, match="between 400 and 599"):
        AdmissionDenied("x", code=200)


def test_handler_crash_is_500_and_logged(
    webhook: AdmissionWebhook, handlers: Handlers, caplog: pytest.LogCaptureFixture
) -> None:
    def crash(request: AdmissionRequest[Any]) -> None:
        raise KeyError("boom")

    handlers.validate = crash
    with caplog.at_level(logging.ERROR, logger="cloudcoil_sync.admission"):
        assert call(webhook, "/validate/cm", review())[::2] == (
            500,
            {"message": "Admission webhook failed"},
        )
    assert "KeyError" in caplog.text and "/validate/cm" in caplog.text
    (failed,) = [r for r in caplog.records if "failed" in r.getMessage()]
    assert "on CREATE ConfigMap default/settings" in failed.getMessage()  # the object
    # The webhook keeps serving.
    handlers.validate = lambda request: None
    assert call(webhook, "/validate/cm", review())[0] == 200


def test_handler_exiting_is_500_and_the_pool_survives(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    def leave(request: AdmissionRequest[Any]) -> None:
        raise SystemExit(3)

    handlers.validate = leave
    assert call(webhook, "/validate/cm", review())[0] == 500
    handlers.validate = lambda request: None
    assert call(webhook, "/validate/cm", review())[0] == 200


def test_validator_returning_a_value_is_500(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    handlers.validate = lambda request: request.resource
    assert call(webhook, "/validate/cm", review())[0] == 500


def test_mutator_patch_holds_only_its_change(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    def label(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        resource = request.resource
        assert resource is not None
        resource.metadata.labels = {"team": "a"}  # type: ignore[union-attr]
        return resource

    handlers.mutate = label
    raw = config_map(data={"k": "v"}, futureField={"kept": True})
    status, _, answer = call(webhook, "/mutate/cm", review(obj=raw))
    response = response_of(answer)
    assert status == 200 and response["allowed"] is True
    assert decoded_patch(response) == [
        {"op": "add", "path": "/metadata/labels", "value": {"team": "a"}}
    ]


def test_mutator_editing_the_raw_object_cannot_skew_the_patch(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    def meddle(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        assert request.raw_object is not None and request.resource is not None
        request.raw_object["data"] = {"k": "changed"}
        request.resource.data = {"k": "changed"}
        return request.resource

    handlers.mutate = meddle
    response = response_of(call(webhook, "/mutate/cm", review(obj=config_map(data={"k": "v"})))[2])
    assert decoded_patch(response) == [{"op": "replace", "path": "/data/k", "value": "changed"}]


def test_mutator_returning_none_or_unchanged_gives_no_patch(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    def edit_in_place(request: AdmissionRequest[ConfigMap]) -> None:
        assert request.resource is not None
        request.resource.data = {"ignored": "yes"}

    handlers.mutate = edit_in_place
    assert response_of(call(webhook, "/mutate/cm", review())[2]) == {
        "uid": "review-1",
        "allowed": True,
    }
    handlers.mutate = lambda request: request.resource
    response = response_of(call(webhook, "/mutate/cm", review())[2])
    assert "patch" not in response and response["allowed"] is True


@pytest.mark.parametrize(
    ("operation", "result"),
    [
        ("CREATE", lambda request: "not a model"),
        ("CREATE", lambda request: Namespace(metadata={"name": "x"})),
        ("CREATE", lambda request: request.resource.model_copy(update={"kind": "Secret"})),
        ("DELETE", lambda request: request.old_resource),
    ],
    ids=["wrong type", "other model", "kind changed", "object for DELETE"],
)
def test_unusable_mutator_results_are_500(
    webhook: AdmissionWebhook, handlers: Handlers, operation: str, result: Action
) -> None:
    handlers.mutate = result
    assert call(webhook, "/mutate/cm", review(operation))[::2] == (
        500,
        {"message": "Admission webhook failed"},
    )


def test_mutator_renaming_the_object_is_500(webhook: AdmissionWebhook, handlers: Handlers) -> None:
    def rename(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        assert request.resource is not None and request.resource.metadata is not None
        request.resource.metadata.name = "other"
        return request.resource

    handlers.mutate = rename
    assert call(webhook, "/mutate/cm", review())[0] == 500


# -- deadlines -----------------------------------------------------------------------------


def test_slow_handler_is_504_at_its_deadline_and_others_are_served(
    webhook: AdmissionWebhook, handlers: Handlers
) -> None:
    results: list[int] = []
    started = time.monotonic()
    slow = threading.Thread(
        target=lambda: results.append(call(webhook, "/validate/slow", review())[0])
    )
    slow.start()
    assert call(webhook, "/validate/cm", review())[0] == 200  # not blocked meanwhile
    slow.join(5)
    elapsed = time.monotonic() - started
    assert results == [504]
    assert elapsed >= 0.9  # not before the 1 s deadline
    assert not handlers.finished.is_set()  # answered by the deadline, not by the handler
    handlers.release.set()  # the abandoned handler ends on its own; its result is discarded
    assert handlers.finished.wait(5)


def test_saturated_pool_times_out_without_running_queued_handlers(handlers: Handlers) -> None:
    webhook = AdmissionWebhook(build_table(handlers), max_workers=1)
    first = threading.Thread(target=lambda: call(webhook, "/validate/slow", review()))
    first.start()
    assert wait_until(lambda: bool(handlers.requests), 5)
    status, _, document = call(webhook, "/validate/slow", review(uid="second"))
    assert (status, document) == (504, {"message": "Admission webhook timed out"})
    first.join(5)
    assert len(handlers.requests) == 1  # the queued one was cancelled, never run
    handlers.release.set()
    assert webhook.close(timeout=5)


def test_closed_webhook_refuses_work(handlers: Handlers) -> None:
    webhook = AdmissionWebhook(build_table(handlers))
    assert webhook.close()
    assert call(webhook, "/validate/cm", review())[0] == 503


def test_pool_run_returns_raises_and_abandons(caplog: pytest.LogCaptureFixture) -> None:
    pool = HandlerPool(max_workers=1)
    assert pool.run(lambda: 42, timeout=5) == 42
    with pytest.raises(KeyError):
        pool.run(lambda: {}["missing"], timeout=5)
    started, release = threading.Event(), threading.Event()

    def stuck() -> None:
        started.set()
        release.wait(10)
        raise ValueError("late failure")

    with pytest.raises(HandlerTimeout) as abandoned:
        pool.run(stuck, timeout=0.2)
    assert abandoned.value.abandoned and started.is_set()
    ran: list[int] = []
    with pytest.raises(HandlerTimeout) as queued:  # the only worker is busy
        pool.run(lambda: ran.append(1), timeout=0.1)
    assert not queued.value.abandoned
    with caplog.at_level(logging.INFO, logger="cloudcoil_sync.admission"):
        release.set()
        assert pool.run(lambda: "next", timeout=5) == "next"  # after the abandoned one
    assert ran == []  # the timed-out queued call never ran
    assert "An abandoned admission handler later failed: ValueError('late failure')" in (
        caplog.text
    )
    assert pool.submit(lambda: 7).result(timeout=5) == 7
    assert pool.close(timeout=5)
    with pytest.raises(PoolClosed):
        pool.run(lambda: 1, timeout=1)


# -- request helpers -----------------------------------------------------------------------


def test_client_needs_a_config_and_uses_the_request_namespace(handlers: Handlers) -> None:
    captured: dict[str, Any] = {}

    def use_client(request: AdmissionRequest[Any]) -> None:
        captured["client"] = request.client(ConfigMap)

    handlers.validate = use_client
    webhook = AdmissionWebhook(build_table(handlers))
    assert call(webhook, "/validate/cm", review())[0] == 500  # RuntimeError: no Config
    webhook.close()
    with Config(server="https://127.0.0.1:1", token="t", namespace="ops") as config:
        webhook = AdmissionWebhook(build_table(handlers, config=config))
        assert call(webhook, "/validate/cm", review(namespace="team"))[0] == 200
        assert captured["client"].namespace == "team"
        webhook.close()


def test_cached_reads_use_the_supplied_hook(handlers: Handlers) -> None:
    seen: list[tuple[type[Any], str | None]] = []

    def cache(kind: type[Any], namespace: str | None) -> str:
        seen.append((kind, namespace))
        return "reader"

    def use_cache(request: AdmissionRequest[Any]) -> None:
        assert request.cached(ConfigMap) == "reader"

    handlers.validate = use_cache
    webhook = AdmissionWebhook(build_table(handlers), cache=cache)
    assert call(webhook, "/validate/cm", review())[0] == 200
    assert seen == [(ConfigMap, "default")]
    webhook.close()
    without: AdmissionRequest[ConfigMap] = AdmissionRequest(
        uid="u", operation="CREATE", resource=None
    )
    with pytest.raises(ValueError, match="informer cache"):
        without.cached(ConfigMap)


# -- construction ----------------------------------------------------------------------------


def test_webhook_is_a_route_table_as_in_0_8() -> None:
    webhook = AdmissionWebhook(max_body_bytes=1024)

    @webhook.validating(ConfigMap, path="/validate/configmaps")
    def check(request: AdmissionRequest[ConfigMap]) -> None:
        raise AdmissionDenied("no")

    response = response_of(call(webhook, "/validate/configmaps", review())[2])
    assert response["allowed"] is False and webhook.max_body_bytes == 1024
    assert webhook.configurations(
        name="ops.example.com", service_name="ops", service_namespace="default", ca_bundle=CA_PEM
    )
    assert webhook.close()


def test_webhook_serves_a_table_live_or_a_route_list(handlers: Handlers) -> None:
    table = AdmissionRoutes(max_body_bytes=2048)
    live = AdmissionWebhook(table)
    assert live.max_body_bytes == 2048
    assert call(live, "/validate/late", review())[0] == 404
    table.validating(ConfigMap, path="/validate/late")(lambda request: None)
    assert call(live, "/validate/late", review())[0] == 200
    listed = AdmissionWebhook(build_table(handlers).routes.values())
    assert call(listed, "/validate/cm", review())[0] == 200
    assert live.close() and listed.close()


CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def test_a_patches_route_answers_its_handlers_operations_on_the_raw_object() -> None:
    seen: list[AdmissionRequest[Any]] = []
    answers: list[Any] = [[{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}], None]

    def place(request: AdmissionRequest[Any]) -> Any:
        seen.append(request)
        return answers.pop(0)

    routes = AdmissionRoutes()
    routes.mutating(ConfigMap, path="/place", operations=("CREATE",), patches=True)(place)
    webhook = AdmissionWebhook(routes)
    try:
        bad = config_map(data={"a": 1})  # not a valid ConfigMap model: never built
        status, _, answer = call(webhook, "/place", review(obj=bad))
        response = response_of(answer)
        assert status == 200 and response["allowed"] is True
        assert decoded_patch(response) == [
            {"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}
        ]
        assert seen[0].resource is None and seen[0].raw_object == bad
        status, _, answer = call(webhook, "/place", review(obj=bad))
        assert status == 200 and "patch" not in response_of(answer)  # None: no change
        answers.append([{"path": "/metadata"}])  # no op: the handler's defect
        status, _, _ = call(webhook, "/place", review(obj=bad))
        assert status == 500
    finally:
        webhook.close()
