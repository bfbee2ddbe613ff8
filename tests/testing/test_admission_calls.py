"""The emulator calls registered admission webhooks over real TLS (AdmissionWebhook server)."""

from __future__ import annotations

import base64
import select
import threading
import time
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace, Secret

from cloudcoil_sync.admission import AdmissionDenied, AdmissionRequest, AdmissionWebhook
from cloudcoil_sync.admission._internal.limits import ConnectionLimits
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.client import BadRequest, Config, Forbidden, Invalid, ServerError
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.admission import (
    Attempt,
    denied,
    rule_matches,
    selector_matches,
)
from cloudcoil_sync.testing._internal.request import Req
from cloudcoil_sync.testing._internal.resources import Registry
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

from .admission_server import (
    CONFIG_NAME,
    SERVICE_NAME,
    SERVICE_NAMESPACE,
    Calls,
    ScriptedWebhook,
    SilentListener,
    closed_port,
    json_patch,
    recorded,
    review_answer,
    serve,
)
from .conftest import Client

MUTATE = "/mutate/configmaps"
VALIDATE = "/validate/configmaps"
MUTATOR = f"mutate-0.{CONFIG_NAME}"
VALIDATOR = f"validate-1.{CONFIG_NAME}"
WRITES = ("CREATE", "UPDATE", "DELETE")


@pytest.fixture(scope="module")
def ca() -> CertificateAuthority:
    return CertificateAuthority("admission-calls-test-ca")


@pytest.fixture
def calls() -> Calls:
    return Calls()


@pytest.fixture
def start(ca: CertificateAuthority, tmp_path: Path) -> Iterator[Callable[..., WebhookHost]]:
    """Serve a webhook over HTTPS; stopped (threads joined) after the test."""
    servers: list[Generator[WebhookHost, None, None]] = []

    def run(webhook: AdmissionWebhook | ScriptedWebhook, **options: Any) -> WebhookHost:
        server = serve(webhook, ca, tmp_path / f"tls-{len(servers)}", **options)
        servers.append(server)
        return next(server)

    yield run
    for server in servers:
        server.close()


def add_label(request: AdmissionRequest[Any]) -> Any:
    resource = request.resource
    if resource is None:  # DELETE: nothing to mutate
        return None
    resource.metadata.labels = {**(resource.metadata.labels or {}), "mutated": "yes"}
    return resource


def allow(request: AdmissionRequest[Any]) -> None:
    return None


def install(
    kube: Emulator, webhook: AdmissionWebhook, ca_pem: bytes, host: WebhookHost | None
) -> list[dict[str, Any]]:
    """Store the webhook's generated configurations and route their Service to ``host``."""
    documents = webhook.configurations(
        name=CONFIG_NAME,
        service_name=SERVICE_NAME,
        service_namespace=SERVICE_NAMESPACE,
        ca_bundle=ca_pem,
    )
    for document in documents:
        kube.create_object(document)
    if host is not None:
        address, port = host.address
        kube.route_service(SERVICE_NAMESPACE, SERVICE_NAME, address, port)
    return documents


def configmaps(config: Config, namespace: str = "default") -> Any:
    return config.client(ConfigMap, namespace=namespace)


def new_configmap(name: str, **labels: str) -> ConfigMap:
    return ConfigMap.model_validate(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": labels or None},
            "data": {"k": "v"},
        }
    )


def stored_labels(kube: Emulator, name: str, namespace: str = "default") -> dict[str, str]:
    obj = kube.get_object("", "configmaps", namespace, name)
    assert obj is not None
    return dict(obj["metadata"].get("labels") or {})


def test_mutating_webhook_labels_created_object(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE, operations=WRITES)(recorded(calls, MUTATE, add_label))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    client = configmaps(kube_emulator.config())

    created = client.create(new_configmap("one", team="a"))

    assert created.metadata.labels == {"team": "a", "mutated": "yes"}
    assert stored_labels(kube_emulator, "one") == {"team": "a", "mutated": "yes"}
    (request,) = calls.of(MUTATE)
    assert request.operation == "CREATE"
    assert (request.name, request.namespace, request.dry_run) == ("one", "default", False)
    assert request.user_info.username == "system:admin"
    assert "system:masters" in request.user_info.groups
    assert request.old_resource is None
    assert request.options is not None and request.options["kind"] == "CreateOptions"


def test_updates_patches_apply_and_deletes_are_admitted(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE, operations=WRITES)(recorded(calls, MUTATE, add_label))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    client = configmaps(kube_emulator.config())
    client.create(new_configmap("two"))

    # A merge patch removing the label: the webhook sees the patched object and re-adds it.
    client.merge_patch("two", {"metadata": {"labels": {"mutated": None, "x": "1"}}})
    assert stored_labels(kube_emulator, "two") == {"x": "1", "mutated": "yes"}
    update = calls.of(MUTATE)[-1]
    assert update.operation == "UPDATE"
    assert update.old_resource is not None
    assert update.old_resource.metadata.labels == {"mutated": "yes"}
    assert update.raw_object is not None
    assert update.raw_object["metadata"]["labels"] == {"x": "1"}

    client.apply(new_configmap("three", y="2"), field_manager="tester")  # apply that creates
    assert stored_labels(kube_emulator, "three") == {"y": "2", "mutated": "yes"}
    assert calls.of(MUTATE)[-1].operation == "CREATE"

    current = client.get("two")
    current.metadata.labels = {}
    replaced = client.replace(current)  # PUT
    assert replaced.metadata.labels == {"mutated": "yes"}

    client.delete("two")
    deletion = calls.of(MUTATE)[-1]
    assert deletion.operation == "DELETE"
    assert deletion.resource is None
    assert deletion.old_resource is not None and deletion.old_resource.metadata.name == "two"
    assert kube_emulator.get_object("", "configmaps", "default", "two") is None


def test_validating_denial_reaches_the_client_as_a_typed_error(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    def deny(request: AdmissionRequest[Any]) -> None:
        raise AdmissionDenied("configmaps named bad are not allowed")

    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE)(recorded(calls, MUTATE, add_label))
    webhook.validating(ConfigMap, path=VALIDATE)(recorded(calls, VALIDATE, deny))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)

    with pytest.raises(Forbidden) as caught:
        configmaps(kube_emulator.config()).create(new_configmap("bad"))

    assert caught.value.status_code == 403
    assert caught.value.reason == "Forbidden"
    assert caught.value.message == (
        f'admission webhook "{VALIDATOR}" denied the request: configmaps named bad are not allowed'
    )
    assert kube_emulator.get_object("", "configmaps", "default", "bad") is None


def test_mutating_runs_before_validating(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    def require_label(request: AdmissionRequest[Any]) -> None:
        assert request.resource is not None
        if (request.resource.metadata.labels or {}).get("mutated") != "yes":
            raise AdmissionDenied("not mutated first")

    webhook = AdmissionWebhook()
    # Registered validating first: order comes from the configuration kinds, not registration.
    webhook.validating(ConfigMap, path=VALIDATE)(recorded(calls, VALIDATE, require_label))
    webhook.mutating(ConfigMap, path=MUTATE)(recorded(calls, MUTATE, add_label))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)

    configmaps(kube_emulator.config()).create(new_configmap("ordered"))

    (validated,) = calls.of(VALIDATE)
    assert validated.resource is not None
    assert validated.resource.metadata.labels == {"mutated": "yes"}
    assert validated.resource.metadata.uid  # validating webhooks see the prepared object
    assert stored_labels(kube_emulator, "ordered") == {"mutated": "yes"}


def test_rule_and_namespace_selector_mismatches_are_not_called(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    webhook = AdmissionWebhook()
    webhook.validating(Secret, path="/validate/secrets")(recorded(calls, "secrets", allow))
    webhook.validating(ConfigMap, path="/validate/deletes", operations=("DELETE",))(
        recorded(calls, "deletes", allow)
    )
    webhook.validating(
        ConfigMap,
        path="/validate/team-a",
        namespace_selector={"matchLabels": {"team": "a"}},
    )(recorded(calls, "team-a", allow))
    webhook.validating(
        ConfigMap,
        path="/validate/named",
        namespace_selector={
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["blue"]},
                {"key": "frozen", "operator": "DoesNotExist"},
            ]
        },
    )(recorded(calls, "named", allow))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    config = kube_emulator.config()
    namespaces = config.client(Namespace)
    for name, labels in (("blue", {}), ("green", {"team": "a"})):
        namespaces.create(
            Namespace.model_validate({"metadata": {"name": name, "labels": labels or None}})
        )

    configmaps(config, "default").create(new_configmap("plain"))
    assert calls.seen == {}  # wrong kind, wrong operation, selectors do not match default

    configmaps(config, "green").create(new_configmap("g"))
    configmaps(config, "blue").create(new_configmap("b"))
    assert [r.namespace for r in calls.of("team-a")] == ["green"]
    assert [r.namespace for r in calls.of("named")] == ["blue"]
    assert calls.of("secrets") == [] and calls.of("deletes") == []

    configmaps(config, "blue").delete("b")
    assert [r.operation for r in calls.of("deletes")] == ["DELETE"]


MUTATING_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING_PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@pytest.mark.parametrize("unreachable", ["no-route", "refused"])
def test_unreachable_webhook_fails_or_is_ignored_by_policy(
    kube_emulator: Emulator, ca: CertificateAuthority, client: Client, unreachable: str
) -> None:
    for policy in ("Fail", "Ignore"):
        webhook = AdmissionWebhook()
        webhook.validating(ConfigMap, path=f"/validate/{policy.lower()}", failure_policy=policy)(
            allow
        )
        documents = webhook.configurations(
            name=f"{policy.lower()}.operators.cloudcoil.io",
            service_name=SERVICE_NAME,
            service_namespace=SERVICE_NAMESPACE,
            ca_bundle=ca.cert_pem,
        )
        assert client.post(VALIDATING_PATH, documents[0]).status_code == 201
    if unreachable == "refused":
        kube_emulator.route_service(SERVICE_NAMESPACE, SERVICE_NAME, "127.0.0.1", closed_port())
    cms = configmaps(kube_emulator.config())

    with pytest.raises(ServerError) as caught:
        cms.create(new_configmap("blocked"))

    name = "validate-0.fail.operators.cloudcoil.io"
    url = f"https://{SERVICE_NAME}.{SERVICE_NAMESPACE}.svc:443/validate/fail?timeout=5s"
    error = caught.value
    assert error.status_code == 500 and error.reason == "InternalError"
    assert error.message.startswith(
        f'Internal error occurred: failed calling webhook "{name}": '
        f'failed to call webhook: Post "{url}": '
    )
    assert ("connection refused" if unreachable == "refused" else "has no route") in error.message
    assert error.causes == [{"message": error.message.removeprefix("Internal error occurred: ")}]
    assert kube_emulator.get_object("", "configmaps", "default", "blocked") is None

    # Without the Fail webhook, the unreachable Ignore webhook does not block anything.
    deleted = client.delete(f"{VALIDATING_PATH}/fail.operators.cloudcoil.io")
    assert deleted.status_code == 200
    assert cms.create(new_configmap("allowed")).metadata.name == "allowed"


def test_url_client_config_and_timeout(
    kube_emulator: Emulator,
    ca: CertificateAuthority,
    calls: Calls,
    start: Callable[..., Any],
    client: Client,
) -> None:
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE)(recorded(calls, MUTATE, add_label))
    address, port = start(webhook).address
    silent = SilentListener()
    try:
        install(kube_emulator, webhook, ca.cert_pem, None)  # no service route
        path = f"{MUTATING_PATH}/{CONFIG_NAME}"
        current = client.get(path).json()
        hook = current["webhooks"][0]
        hook["clientConfig"] = {
            "url": f"https://{address}:{port}{MUTATE}",
            "caBundle": hook["clientConfig"]["caBundle"],
        }
        assert client.put(path, current).status_code == 200
        cms = configmaps(kube_emulator.config())
        assert cms.create(new_configmap("by-url")).metadata.labels == {"mutated": "yes"}

        current = client.get(path).json()
        slow = {
            **hook,
            "name": "slow.demo.operators.cloudcoil.io",
            "timeoutSeconds": 1,
            "clientConfig": {**hook["clientConfig"], "url": f"https://127.0.0.1:{silent.port}/x"},
        }
        current["webhooks"].append(slow)
        assert client.put(path, current).status_code == 200
        began = time.monotonic()
        with pytest.raises(ServerError) as caught:
            cms.create(new_configmap("too-slow"))
        elapsed = time.monotonic() - began
        assert caught.value.message == (
            'Internal error occurred: failed calling webhook "slow.demo.operators.cloudcoil.io": '
            f'failed to call webhook: Post "https://127.0.0.1:{silent.port}/x?timeout=1s": '
            "context deadline exceeded"
        )
        assert elapsed >= 0.9  # the 1 s timeout, not sooner (the message says which)
    finally:
        silent.close()


@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_wrong_ca_bundle_fails_tls_verification(
    kube_emulator: Emulator,
    calls: Calls,
    start: Callable[..., Any],
    policy: str,
) -> None:
    other = CertificateAuthority("someone-else")
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE, failure_policy=policy)(
        recorded(calls, MUTATE, add_label)
    )
    host = start(webhook)
    install(kube_emulator, webhook, other.cert_pem, host)
    cms = configmaps(kube_emulator.config())

    if policy == "Fail":
        with pytest.raises(ServerError) as caught:
            cms.create(new_configmap("untrusted"))
        assert caught.value.status_code == 500
        assert caught.value.message.startswith(
            f'Internal error occurred: failed calling webhook "{MUTATOR}": '
        )
        assert "tls: failed to verify certificate" in caught.value.message
        assert kube_emulator.get_object("", "configmaps", "default", "untrusted") is None
    else:
        assert cms.create(new_configmap("untrusted")).metadata.labels is None
        assert stored_labels(kube_emulator, "untrusted") == {}
    assert calls.of(MUTATE) == []  # the handshake failed: the handler never ran


def test_dry_run_calls_side_effect_free_webhooks_only(
    kube_emulator: Emulator,
    ca: CertificateAuthority,
    calls: Calls,
    start: Callable[..., Any],
    client: Client,
) -> None:
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE)(recorded(calls, MUTATE, add_label))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    cms = configmaps(kube_emulator.config())

    preview = cms.create(new_configmap("preview"), dry_run=True)
    assert preview.metadata.labels == {"mutated": "yes"}
    assert kube_emulator.get_object("", "configmaps", "default", "preview") is None
    (request,) = calls.of(MUTATE)
    assert request.dry_run is True
    assert request.options == {
        "kind": "CreateOptions",
        "apiVersion": "meta.k8s.io/v1",
        "dryRun": ["All"],
    }

    path = f"{MUTATING_PATH}/{CONFIG_NAME}"
    current = client.get(path).json()
    current["webhooks"][0]["sideEffects"] = "Some"
    assert client.put(path, current).status_code == 200
    with pytest.raises(BadRequest) as caught:
        cms.create(new_configmap("preview"), dry_run=True)
    assert caught.value.message == f'admission webhook "{MUTATOR}" does not support dry run'
    assert len(calls.of(MUTATE)) == 1
    # Side effects are fine for real writes.
    assert cms.create(new_configmap("real")).metadata.labels == {"mutated": "yes"}


@pytest.mark.kube_emulator(deployments=None)  # the rollout simulator would write status too
def test_status_writes_match_status_rules_and_keep_only_status(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    def touch(request: AdmissionRequest[Any]) -> Any:
        resource = request.resource
        assert resource is not None and resource.status is not None
        resource.status.available_replicas = 42
        resource.spec.replicas = 9  # not the status endpoint's to change: dropped
        return resource

    path = "/mutate/deployments-status"
    webhook = AdmissionWebhook()
    webhook.mutating(Deployment, path=path, subresource="status")(recorded(calls, path, touch))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    deployments = kube_emulator.config().client(Deployment, namespace="default")
    deployments.create(
        Deployment.model_validate(
            {
                "metadata": {"name": "web"},
                "spec": {
                    "replicas": 1,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {"containers": [{"name": "web", "image": "nginx"}]},
                    },
                },
            }
        )
    )
    assert calls.of(path) == []  # the rule names deployments/status only

    deployments.merge_patch("web", {"status": {"replicas": 1}}, subresource="status")

    (request,) = calls.of(path)
    assert (request.operation, request.subresource) == ("UPDATE", "status")
    stored = kube_emulator.get_object("apps", "deployments", "default", "web")
    assert stored is not None
    assert stored["status"]["replicas"] == 1
    assert stored["status"]["availableReplicas"] == 42
    assert stored["spec"]["replicas"] == 1


def test_object_selector_matches_new_or_old_labels(
    kube_emulator: Emulator,
    ca: CertificateAuthority,
    calls: Calls,
    start: Callable[..., Any],
    client: Client,
) -> None:
    webhook = AdmissionWebhook()
    webhook.validating(ConfigMap, path=VALIDATE, operations=WRITES)(
        recorded(calls, VALIDATE, allow)
    )
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    path = f"{VALIDATING_PATH}/{CONFIG_NAME}"
    current = client.get(path).json()
    current["webhooks"][0]["objectSelector"] = {"matchLabels": {"admit": "yes"}}
    assert client.put(path, current).status_code == 200
    cms = configmaps(kube_emulator.config())

    cms.create(new_configmap("ignored"))
    cms.create(new_configmap("watched", admit="yes"))
    cms.merge_patch("watched", {"metadata": {"labels": {"admit": None}}})  # old matches
    cms.merge_patch("watched", {"data": {"k": "w"}})  # neither matches now

    assert [(r.operation, r.name) for r in calls.of(VALIDATE)] == [
        ("CREATE", "watched"),
        ("UPDATE", "watched"),
    ]


def test_namespace_objects_use_their_own_labels(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    path = "/validate/namespaces"
    webhook = AdmissionWebhook()
    # scope "*": a "Cluster" route's review check refuses the namespace kube-apiserver sends.
    webhook.validating(
        Namespace, path=path, scope="*", namespace_selector={"matchLabels": {"team": "a"}}
    )(recorded(calls, path, allow))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    namespaces = kube_emulator.config().client(Namespace)

    for name, labels in (("plain", None), ("teamed", {"team": "a"})):
        namespaces.create(Namespace.model_validate({"metadata": {"name": name, "labels": labels}}))

    (request,) = calls.of(path)
    # kube-apiserver reports a Namespace's own name as the request namespace.
    assert (request.operation, request.name, request.namespace) == ("CREATE", "teamed", "teamed")


def test_webhook_reads_the_emulator_and_sees_the_requesting_user(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    def quota(request: AdmissionRequest[Any]) -> None:
        limits = request.client(ConfigMap).get("limits")  # a live read during admission
        if request.resource is not None and limits.data and request.name in limits.data:
            raise AdmissionDenied("over quota", code=422, reason="Invalid")

    kube_emulator.add_token("alice-token", "alice", ["team-a", "system:masters"])
    config = kube_emulator.config()
    webhook = AdmissionWebhook(config=config)
    webhook.validating(ConfigMap, path=VALIDATE)(recorded(calls, VALIDATE, quota))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    kube_emulator.create_object(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "limits"}, "data": {"x": ""}}
    )
    as_alice = configmaps(kube_emulator.config(token="alice-token"))

    as_alice.create(new_configmap("fine"))
    with pytest.raises(Invalid) as caught:
        as_alice.create(new_configmap("x"))

    assert caught.value.status_code == 422 and caught.value.reason == "Invalid"
    assert caught.value.message == (
        f'admission webhook "validate-0.{CONFIG_NAME}" denied the request: over quota'
    )
    users = {(r.user_info.username, tuple(r.user_info.groups)) for r in calls.of(VALIDATE)}
    assert users == {("alice", ("team-a", "system:masters", "system:authenticated"))}


# -- the matching rules, without a server -------------------------------------------------------
REGISTRY = Registry.with_builtins()


def attempt_for(
    group: str, plural: str, namespace: str = "default", sub: str = "", operation: str = "CREATE"
) -> Attempt:
    rt = next(rt for rt in REGISTRY.all() if (rt.group, rt.plural) == (group, plural))
    return Attempt(operation, Req(rt, namespace, "x", sub), {}, None, {}, False)


def rule(resources: list[str], scope: str | None = None, **fields: list[str]) -> dict[str, Any]:
    base: dict[str, Any] = {
        "operations": ["CREATE"],
        "apiGroups": ["*"],
        "apiVersions": ["*"],
        "resources": resources,
        **fields,
    }
    if scope:
        base["scope"] = scope
    return base


@pytest.mark.parametrize(
    ("rule_", "target", "expected"),
    [
        (rule(["configmaps"], apiGroups=[""], apiVersions=["v1"]), ("", "configmaps"), True),
        (rule(["configmaps"], apiGroups=["apps"]), ("", "configmaps"), False),
        (rule(["configmaps"], apiVersions=["v2"]), ("", "configmaps"), False),
        (rule(["configmaps"], operations=["UPDATE"]), ("", "configmaps"), False),
        (rule(["configmaps"], operations=["*"]), ("", "configmaps"), True),
        (rule(["*"]), ("apps", "deployments"), True),
        (rule(["*"]), ("apps", "deployments", "default", "status"), False),
        (rule(["*/*"]), ("apps", "deployments", "default", "status"), True),
        (rule(["*/status"]), ("apps", "deployments", "default", "status"), True),
        (rule(["deployments/*"]), ("apps", "deployments"), True),
        (rule(["deployments/*"]), ("apps", "deployments", "default", "scale"), True),
        (rule(["deployments/status"]), ("apps", "deployments"), False),
        (rule(["*"], "Namespaced"), ("", "configmaps"), True),
        (rule(["*"], "Namespaced"), ("", "namespaces", ""), False),
        (rule(["*"], "Cluster"), ("", "namespaces", ""), True),
        (rule(["*"], "Cluster"), ("", "configmaps"), False),
        (rule(["*"], "Cluster"), ("", "nodes", ""), True),
        (rule(["*"], "*"), ("", "nodes", ""), True),
    ],
)
def test_rule_matching(rule_: dict[str, Any], target: tuple[str, ...], expected: bool) -> None:
    assert rule_matches(rule_, attempt_for(*target)) is expected


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({}, True),
        ({"matchLabels": {"team": "a"}}, True),
        ({"matchLabels": {"team": "b"}}, False),
        ({"matchExpressions": [{"key": "team", "operator": "In", "values": ["a", "b"]}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "absent", "operator": "NotIn", "values": ["a"]}]}, True),
        ({"matchExpressions": [{"key": "absent", "operator": "In", "values": ["a"]}]}, False),
        ({"matchExpressions": [{"key": "team", "operator": "Exists"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "DoesNotExist"}]}, False),
        ({"matchExpressions": [{"key": "absent", "operator": "DoesNotExist"}]}, True),
        ({"matchExpressions": [{"key": "team", "operator": "Gt", "values": ["1"]}]}, False),
    ],
)
def test_label_selectors(selector: dict[str, Any], expected: bool) -> None:
    assert selector_matches(selector, {"team": "a", "tier": "web"}) is expected


def test_denials_follow_kube_apiserver() -> None:
    bare = denied("v.example.com", None)
    assert (bare.code, bare.reason) == (400, "")
    assert (
        bare.message == 'admission webhook "v.example.com" denied the request without explanation'
    )
    low = denied("v.example.com", {"code": 200, "reason": "NotAllowed"})
    assert (low.code, low.message) == (
        400,
        'admission webhook "v.example.com" denied the request: NotAllowed',
    )
    full = denied("v.example.com", {"code": 409, "reason": "Conflict", "message": "taken"})
    assert (full.code, full.reason, full.message) == (
        409,
        "Conflict",
        'admission webhook "v.example.com" denied the request: taken',
    )


# -- answers the project's AdmissionWebhook never gives ------------------------------------------
def scripted_configuration(ca_pem: bytes, policy: str) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "scripted"},
        "webhooks": [
            {
                "name": "scripted.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": policy,
                "clientConfig": {
                    "service": {"namespace": SERVICE_NAMESPACE, "name": SERVICE_NAME},
                    "caBundle": base64.b64encode(ca_pem).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "resources": ["configmaps"],
                        "operations": ["CREATE"],
                    }
                ],
            }
        ],
    }


def wrong_uid(request: dict[str, Any]) -> tuple[int, Any]:
    return 200, review_answer({**request, "uid": "not-the-request"})


def server_error(request: dict[str, Any]) -> tuple[int, Any]:
    return 500, {"message": "Admission webhook failed"}


def not_a_review(request: dict[str, Any]) -> tuple[int, Any]:
    return 200, {**review_answer(request), "kind": "Status"}


def failing_test_op(request: dict[str, Any]) -> tuple[int, Any]:
    patch = json_patch({"op": "test", "path": "/data/k", "value": "other"})
    return 200, review_answer(request, patchType="JSONPatch", patch=patch)


def renaming(request: dict[str, Any]) -> tuple[int, Any]:
    patch = json_patch({"op": "replace", "path": "/metadata/name", "value": "renamed"})
    return 200, review_answer(request, patchType="JSONPatch", patch=patch)


def untyped_patch(request: dict[str, Any]) -> tuple[int, Any]:
    return 200, review_answer(request, patch=json_patch({"op": "remove", "path": "/data"}))


@pytest.mark.parametrize(
    ("answer", "ignorable", "expected"),
    [
        (wrong_uid, True, 'received invalid webhook response: expected response.uid="'),
        (server_error, True, "the server responded with status 500"),
        (not_a_review, True, "received invalid webhook response: expected webhook response of"),
        (failing_test_op, False, "returned a patch that cannot be applied"),
        (renaming, False, "changed the apiVersion, kind, name or namespace"),
        (untyped_patch, False, "returned a patch with patchType None"),
    ],
)
@pytest.mark.parametrize("policy", ["Fail", "Ignore"])
def test_malformed_answers(
    kube_emulator: Emulator,
    ca: CertificateAuthority,
    start: Callable[..., Any],
    answer: Callable[[dict[str, Any]], tuple[int, Any]],
    ignorable: bool,
    expected: str,
    policy: str,
) -> None:
    scripted = ScriptedWebhook(answer)
    address, port = start(scripted).address
    kube_emulator.create_object(scripted_configuration(ca.cert_pem, policy))
    kube_emulator.route_service(SERVICE_NAMESPACE, SERVICE_NAME, address, port)
    cms = configmaps(kube_emulator.config())

    if policy == "Ignore" and ignorable:
        assert cms.create(new_configmap("passes")).metadata.name == "passes"
    else:
        with pytest.raises(ServerError) as caught:
            cms.create(new_configmap("passes"))
        assert caught.value.status_code == 500 and caught.value.reason == "InternalError"
        assert caught.value.message.startswith("Internal error occurred: ")
        assert expected in caught.value.message
        assert kube_emulator.get_object("", "configmaps", "default", "passes") is None
    (request,) = scripted.requests
    assert request["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert request["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert request["requestKind"] == request["kind"]
    assert request["requestResource"] == request["resource"]
    assert request["oldObject"] is None and request["object"]["metadata"]["name"] == "passes"


def test_application_routes_and_generated_configurations(
    kube_emulator: Emulator, ca: CertificateAuthority, start: Callable[..., Any]
) -> None:
    app = Application("demo", namespace="operators", webhook=WebhookServer(ca_bundle=ca.cert_pem))

    @app.mutate(Deployment)
    def annotate(request: AdmissionRequest[Deployment]) -> Deployment | None:
        resource = request.resource
        if resource is None or resource.metadata is None:
            return None
        resource.metadata.annotations = {"demo/admitted": request.operation.lower()}
        return resource

    @app.validate(ConfigMap)
    def no_secrets(request: AdmissionRequest[ConfigMap]) -> None:
        if request.resource is not None and "password" in (request.resource.data or {}):
            raise AdmissionDenied("put passwords in a Secret")

    host = start(AdmissionWebhook(app.admission_routes()), service="demo.operators.svc")
    for document in app.webhook_configurations():
        kube_emulator.create_object(document)
    kube_emulator.route_service("operators", "demo", *host.address)
    config = kube_emulator.config()
    config.client(Namespace).create(Namespace.model_validate({"metadata": {"name": "operators"}}))
    template = {
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "web", "image": "nginx"}]},
            },
        }
    }

    for namespace in ("operators", "default"):
        config.client(Deployment, namespace=namespace).create(
            Deployment.model_validate({"metadata": {"name": "web"}, **template})
        )
    config.client(Deployment, namespace="operators").merge_patch("web", {"spec": {"replicas": 2}})

    # The default namespaceSelector limits routes to the operator namespace.
    inside = kube_emulator.get_object("apps", "deployments", "operators", "web")
    outside = kube_emulator.get_object("apps", "deployments", "default", "web")
    assert inside is not None and outside is not None
    assert inside["metadata"]["annotations"] == {"demo/admitted": "update"}
    assert "annotations" not in outside["metadata"]
    configs = configmaps(config, "operators")
    configs.create(new_configmap("settings"))
    with pytest.raises(Forbidden, match="put passwords in a Secret"):
        configs.create(
            ConfigMap.model_validate({"metadata": {"name": "creds"}, "data": {"password": "x"}})
        )
    configmaps(config, "default").create(
        ConfigMap.model_validate({"metadata": {"name": "creds"}, "data": {"password": "x"}})
    )


def test_connections_are_kept_alive_and_renewed_when_the_server_closed_them(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE)(recorded(calls, MUTATE, add_label))
    host = start(webhook, limits=ConnectionLimits(idle_timeout=0.3))
    install(kube_emulator, webhook, ca.cert_pem, host)
    cms = configmaps(kube_emulator.config())

    for name in ("a", "b", "c"):
        cms.create(new_configmap(name))
    idle = [conn for conns in kube_emulator.webhooks.transport._idle.values() for conn in conns]
    assert len(idle) == 1  # three calls, one connection
    assert idle[0].sock is not None
    readable, _, _ = select.select([idle[0].sock], [], [], 5)
    assert readable, "the webhook server did not close the idle connection"

    assert cms.create(new_configmap("after-idle")).metadata.labels == {"mutated": "yes"}
    assert len(calls.of(MUTATE)) == 4


def test_concurrent_writers_share_kept_alive_connections(
    kube_emulator: Emulator, ca: CertificateAuthority, calls: Calls, start: Callable[..., Any]
) -> None:
    webhook = AdmissionWebhook()
    webhook.mutating(ConfigMap, path=MUTATE)(recorded(calls, MUTATE, add_label))
    host = start(webhook)
    install(kube_emulator, webhook, ca.cert_pem, host)
    failures: list[BaseException] = []

    def writer(index: int) -> None:
        try:
            cms = configmaps(kube_emulator.config())
            for item in range(10):
                cms.create(new_configmap(f"w{index}-{item}"))
        except BaseException as error:  # reported below, not lost in the thread
            failures.append(error)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads)
    assert failures == []
    assert len(calls.of(MUTATE)) == 60
    stored = kube_emulator.list_objects("", "configmaps", "default")
    labelled = [o for o in stored if o["metadata"]["name"].startswith("w")]
    assert len(labelled) == 60
    assert all(o["metadata"]["labels"] == {"mutated": "yes"} for o in labelled)
    idle = sum(len(conns) for conns in kube_emulator.webhooks.transport._idle.values())
    assert 1 <= idle <= 4


def test_webhook_warnings_reach_the_caller_as_warning_headers(
    kube_emulator: Emulator, ca: CertificateAuthority, start: Callable[..., Any], client: Client
) -> None:
    """kube-apiserver sends each warning of a webhook's answer as `Warning: 299 - "text"`
    (quotes escaped, repeats dropped), on allowed and on denied writes alike."""

    def warn(request: AdmissionRequest[Any]) -> None:
        request.warn('data "k" is deprecated')
        request.warn('data "k" is deprecated')
        if request.name == "bad":
            raise AdmissionDenied("bad is not allowed", warnings=["see the docs"])

    webhook = AdmissionWebhook()
    webhook.validating(ConfigMap, path=VALIDATE)(warn)
    install(kube_emulator, webhook, ca.cert_pem, start(webhook))
    path = "/api/v1/namespaces/default/configmaps"
    allowed = client.post(path, {"metadata": {"name": "good"}})
    assert allowed.status_code == 201
    assert allowed.headers["Warning"] == '299 - "data \\"k\\" is deprecated"'
    refused = client.post(path, {"metadata": {"name": "bad"}})
    assert refused.status_code == 403
    assert refused.headers["Warning"] == (
        '299 - "data \\"k\\" is deprecated", 299 - "see the docs"'
    )
