"""Document order and shape from a described definition (independent of Application)."""

from __future__ import annotations

import base64
import dataclasses
from typing import Any

import pytest
from cloudcoil.models.kubernetes.apps.v1 import Deployment
from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.admission._internal.routes import build_route
from cloudcoil_sync.application._internal.manifests import Definition, assemble, certificates_only
from cloudcoil_sync.application._internal.options import ManifestOptions
from cloudcoil_sync.application._internal.rbac import ControllerAccess
from cloudcoil_sync.application._internal.settings import WebhookServer
from cloudcoil_sync.controller._internal.budgets import StopPlan
from cloudcoil_sync.controller._internal.health import HealthServer


def handler(request: Any) -> None:
    return None


def route(model: type[Any], path: str, *, mutation: bool = False, **options: Any) -> Any:
    return build_route(model, handler, mutation=mutation, path=path, **options)


#: The annotation install and uninstall go by, on every generated object.
MARK = {"cloudcoil.io/installed-by": "ops/settings"}
WIDGETS_MARK = {"cloudcoil.io/installed-by": "ops/widgets"}


def kinds(documents: list[dict[str, Any]]) -> list[str]:
    return [d["kind"] for d in documents]


def container(documents: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [d for d in documents if d["kind"] == "Deployment"]
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    return dict(only)


def crd(name: str) -> tuple[type[Any], dict[str, Any]]:
    plural, _, group = name.partition(".")
    manifest = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "kind": plural.title()},
            "versions": [{"name": "v1"}],
        },
    }
    return type(plural, (), {}), manifest


def test_controller_only_order_and_secure_deployment() -> None:
    definition = Definition(
        "settings",
        "ops",
        controllers=[ControllerAccess(ConfigMap, "ops")],
        crds=[crd("zeds.example.com"), crd("alphas.example.com")],
        lease=("settings", None),
    )
    documents = assemble(definition, ManifestOptions(image="example/settings:v1", replicas=2))
    assert kinds(documents) == [
        "CustomResourceDefinition",
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Deployment",
    ]
    assert [d["metadata"]["name"] for d in documents[:2]] == [
        "alphas.example.com",
        "zeds.example.com",
    ]
    assert documents[2] == {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "settings", "namespace": "ops", "annotations": MARK},
    }
    deployment = documents[-1]
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "settings"
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert container(documents) == {
        "name": "operator",
        "image": "example/settings:v1",
        "args": ["run"],
        "env": [
            {
                "name": "CLOUDCOIL_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
            }
        ],
        "resources": {
            "requests": {"cpu": "100m", "memory": "128Mi"},
            "limits": {"memory": "512Mi"},
        },
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    assert pod["terminationGracePeriodSeconds"] == 30


def test_grace_period_is_the_stop_plans_and_resources_are_settable() -> None:
    definition = Definition(
        "settings",
        "ops",
        controllers=[ControllerAccess(ConfigMap, "ops")],
        stop=StopPlan(shutdown_timeout=60.5),
    )
    documents = assemble(
        definition, ManifestOptions(image="example/settings:v1", requests={"cpu": "1"}, limits={})
    )
    pod = documents[-1]["spec"]["template"]["spec"]
    # The drain, a write on the wire, informers, the leader lifespan, then the exit margin.
    assert pod["terminationGracePeriodSeconds"] == 116  # ceil(60.5 + 30 + 10 + 10 + 5)
    leading = dataclasses.replace(definition, stop=StopPlan(shutdown_timeout=60.5, lease_timeout=5))
    stop = assemble(leading, ManifestOptions(image="example/settings:v1"))[-1]
    # ... and the Lease's release: 3 request timeouts and a second
    assert stop["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 116 + 16
    assert pod["containers"][0]["resources"] == {"requests": {"cpu": "1"}}
    no_resources = assemble(
        definition, ManifestOptions(image="example/settings:v1", requests={}, limits={})
    )
    assert "resources" not in container(no_resources)
    with pytest.raises(ValueError, match=r"requests.memory 1Gi is above its limit 512Mi"):
        assemble(
            definition, ManifestOptions(image="example/settings:v1", requests={"memory": "1Gi"})
        )
    with pytest.raises(ValueError, match=r"limits.memory: '12 GB' is not a resource quantity"):
        assemble(
            definition, ManifestOptions(image="example/settings:v1", limits={"memory": "12 GB"})
        )
    with pytest.raises(ValueError, match=r"unknown resource 'gpu'"):
        assemble(definition, ManifestOptions(image="example/settings:v1", limits={"gpu": "1"}))


@pytest.mark.parametrize(
    "image",
    ["bad image!!", "Example/widgets:v1", "widgets:", "widgets@sha256:abc", "-x/y", "a//b"],
)
def test_image_must_be_an_image_reference(image: str) -> None:
    definition = Definition("settings", "ops", controllers=[ControllerAccess(ConfigMap, "ops")])
    with pytest.raises(ValueError, match="is not a valid image reference"):
        assemble(definition, ManifestOptions(image=image))


@pytest.mark.parametrize(
    "image",
    [
        "busybox",
        "example/widgets:v1",
        "registry.example.com:5000/team/widgets:1.2.3-rc_1",
        "localhost/w",
        "ghcr.io/o/widgets@sha256:" + "0" * 64,
        "w:v1@sha256:" + "a" * 64,
    ],
)
def test_image_references_accepted(image: str) -> None:
    definition = Definition("settings", "ops", controllers=[ControllerAccess(ConfigMap, "ops")])
    assert container(assemble(definition, ManifestOptions(image=image)))["image"] == image


def test_health_server_only_operator_gets_port_and_probes() -> None:
    definition = Definition(
        "settings",
        "ops",
        controllers=[ControllerAccess(ConfigMap, "ops")],
        health=HealthServer(host="0.0.0.0", port=8081),
    )
    operator = container(
        assemble(definition, ManifestOptions(image="img", command=["python", "app.py"]))
    )
    assert operator["command"] == ["python", "app.py"]
    assert operator["args"] == ["run"]
    assert operator["ports"] == [{"name": "health", "containerPort": 8081}]
    http = {"port": "health", "scheme": "HTTP"}
    # Start-up is checked every second (a replica listens ~3 s after it starts: Ready about a
    # second later, not a 10 s default period later), for up to 2 minutes.
    assert operator["startupProbe"] == {
        "httpGet": {"path": "/healthz", **http},
        "periodSeconds": 1,
        "failureThreshold": 120,
    }
    # Readiness keeps its meaning (standbys are Ready), checked more often than the default.
    assert operator["readinessProbe"] == {
        "httpGet": {"path": "/readyz", **http},
        "periodSeconds": 5,
        "timeoutSeconds": 2,
    }
    # Liveness restarts only a replica silent for a minute, never one busy for seconds.
    assert operator["livenessProbe"] == {
        "httpGet": {"path": "/healthz", **http},
        "periodSeconds": 10,
        "timeoutSeconds": 5,
        "failureThreshold": 6,
    }


def test_health_server_on_loopback_or_port_zero_cannot_be_probed() -> None:
    for health, message in (
        (HealthServer(), "cannot reach the health server bound to 127.0.0.1"),
        (HealthServer(host="0.0.0.0", port=0), "fixed HealthServer port"),
    ):
        definition = Definition(
            "s", "ops", controllers=[ControllerAccess(ConfigMap, "ops")], health=health
        )
        with pytest.raises(ValueError, match=message):
            assemble(definition, ManifestOptions(image="img"))
        assert kinds(assemble(definition)) == ["ServiceAccount", "Role", "RoleBinding"]


def webhook_definition(ca: bytes, **webhook: Any) -> Definition:
    return Definition(
        "widgets",
        "ops",
        controllers=[ControllerAccess(Deployment, "apps"), ControllerAccess(Deployment, "web")],
        webhook=WebhookServer(ca_bundle=ca, tls_secret="widgets-tls", **webhook),
        routes=[
            route(Deployment, "/mutate/d", mutation=True),
            route(ConfigMap, "/validate/c"),
            route(Namespace, "/validate/n"),
            route(ConfigMap, "/validate/explicit", namespace_selector={"matchLabels": {"a": "b"}}),
            route(Deployment, "/validate/d"),
        ],
        selector_namespaces={("apps", "v1", "Deployment"): ["apps", "web"]},
    )


def test_webhook_operator_order_service_tls_and_probes(ca_pair: tuple[bytes, bytes]) -> None:
    documents = assemble(
        webhook_definition(ca_pair[0], secure_metrics=False), ManifestOptions(image="img")
    )
    assert kinds(documents) == [
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "Role",
        "RoleBinding",
        "Service",
        "Deployment",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    assert documents[5]["spec"] == {
        "selector": {"app.kubernetes.io/name": "widgets"},
        "ports": [{"name": "webhook", "port": 443, "targetPort": "webhook"}],
    }
    operator = container(documents)
    assert operator["ports"] == [{"name": "webhook", "containerPort": 9443}]
    assert operator["readinessProbe"]["httpGet"] == {
        "path": "/readyz",
        "port": "webhook",
        "scheme": "HTTPS",
    }
    assert operator["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert operator["volumeMounts"][0] == {
        "name": "webhook-tls",
        "mountPath": "/var/run/cloudcoil/tls",
        "readOnly": True,
    }
    volumes = documents[6]["spec"]["template"]["spec"]["volumes"]
    assert volumes[0] == {
        "name": "webhook-tls",
        "secret": {
            "secretName": "widgets-tls",
            "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}],
        },
    }


def test_secure_metrics_rbac_is_generated_by_default(ca_pair: tuple[bytes, bytes]) -> None:
    documents = assemble(webhook_definition(ca_pair[0]), ManifestOptions(image="img"))
    assert kinds(documents)[:8] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Role",
        "RoleBinding",
        "ClusterRole",
    ]
    operator_role, binding = documents[1], documents[2]
    assert operator_role["metadata"] == {"name": "widgets.ops", "annotations": WIDGETS_MARK}
    assert operator_role["rules"] == [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "widgets", "namespace": "ops"}
    ]
    assert documents[7] == {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "widgets.ops-metrics-reader", "annotations": WIDGETS_MARK},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }


def test_default_namespace_selectors(ca_pair: tuple[bytes, bytes]) -> None:
    documents = assemble(webhook_definition(ca_pair[0]))
    mutating, validating = documents[-2:]
    selectors = {
        hook["clientConfig"]["service"]["path"]: hook.get("namespaceSelector")
        for hook in (*mutating["webhooks"], *validating["webhooks"])
    }

    def names(*values: str) -> dict[str, Any]:
        return {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(values)}
            ]
        }

    assert selectors == {
        # Controllers of the route's kind watch these namespaces.
        "/mutate/d": names("apps", "web"),
        "/validate/d": names("apps", "web"),
        # Webhook-only kinds default to the operator namespace.
        "/validate/c": names("ops"),
        # Cluster-scoped kinds never get a default selector; explicit ones are kept.
        "/validate/n": None,
        "/validate/explicit": {"matchLabels": {"a": "b"}},
    }
    assert [hook["name"] for hook in validating["webhooks"]] == [
        "validate-1.widgets.ops.cloudcoil.io",
        "validate-2.widgets.ops.cloudcoil.io",
        "validate-3.widgets.ops.cloudcoil.io",
        "validate-4.widgets.ops.cloudcoil.io",
    ]


def test_all_namespaces_controller_removes_the_default_selector(
    ca_pair: tuple[bytes, bytes],
) -> None:
    definition = dataclasses.replace(
        webhook_definition(ca_pair[0]),
        selector_namespaces={("apps", "v1", "Deployment"): ["apps", None]},
    )
    mutating = assemble(definition)[-2]
    assert "namespaceSelector" not in mutating["webhooks"][0]


def test_private_keys_never_reach_the_output(ca_pair: tuple[bytes, bytes]) -> None:
    cert, key = ca_pair
    for bundle in (key + cert, cert + key):
        documents = assemble(webhook_definition(bundle), ManifestOptions(image="img"))
        text = repr(documents)
        assert "PRIVATE KEY" not in text
        for configuration in documents[-2:]:
            for hook in configuration["webhooks"]:
                decoded = base64.b64decode(hook["clientConfig"]["caBundle"])
                assert decoded == cert
    assert certificates_only(key) == b""


def test_ca_override_and_missing_ca(ca_pair: tuple[bytes, bytes]) -> None:
    documents = assemble(webhook_definition(b""), ManifestOptions(ca_bundle=ca_pair[0]))
    assert base64.b64decode(documents[-1]["webhooks"][0]["clientConfig"]["caBundle"]) == ca_pair[0]
    with pytest.raises(ValueError, match=r"^ca_bundle must contain PEM certificate bytes$"):
        assemble(webhook_definition(b""))
    # Without webhooks no CA is needed: no Service, no registrations.
    assert "Service" not in kinds(
        assemble(webhook_definition(b""), ManifestOptions(include_webhooks=False))
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"replicas": 0}, "replicas must be a positive integer"),
        ({"replicas": True}, "replicas must be a positive integer"),
        ({"image": " "}, "image must be nonempty"),
        ({"image": "i", "command": "python app.py"}, "command must be a nonempty sequence"),
        ({"image": "i", "command": []}, "command must be a nonempty sequence"),
        ({"command": ["python"]}, "command requires image"),
        (
            {"image": "i", "include_webhooks": False},
            "A Deployment for this operator requires its webhook TLS configuration",
        ),
    ],
)
def test_option_errors(options: dict[str, Any], message: str, ca_pair: tuple[bytes, bytes]) -> None:
    with pytest.raises(ValueError, match=message):
        assemble(webhook_definition(ca_pair[0]), ManifestOptions(**options))


@pytest.mark.parametrize(
    ("definition", "message"),
    [
        (Definition("Bad", "ops"), "Application name must be a Kubernetes DNS label"),
        (Definition("ok", "a.b"), "Application namespace must be a Kubernetes DNS label"),
        (
            Definition("ok", "ops", crds=[crd("as.example.com"), crd("as.example.com")]),
            "CRDs must have distinct metadata.name values",
        ),
        (
            Definition("ok", "ops", lease=("ok", "Bad")),
            "Leader election namespace must be a Kubernetes DNS label",
        ),
    ],
)
def test_definition_errors(definition: Definition, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        assemble(definition)


def test_tls_paths_and_secret_are_checked(ca_pair: tuple[bytes, bytes]) -> None:
    bad = webhook_definition(ca_pair[0], certfile="/tls.crt", keyfile="/tls.key")
    with pytest.raises(ValueError, match="distinct absolute paths in the same non-root"):
        assemble(bad, ManifestOptions(image="img"))
    secret = dataclasses.replace(
        webhook_definition(ca_pair[0]),
        webhook=WebhookServer(ca_bundle=ca_pair[0], tls_secret="Bad_Secret"),
    )
    with pytest.raises(ValueError, match="TLS Secret name must be a Kubernetes DNS label"):
        assemble(secret)
    loopback = webhook_definition(ca_pair[0], host="127.0.0.1")
    with pytest.raises(ValueError, match="cannot reach the webhook server"):
        assemble(loopback, ManifestOptions(image="img"))


def test_every_document_carries_the_installed_by_annotation(ca_pair: tuple[bytes, bytes]) -> None:
    definition = dataclasses.replace(
        webhook_definition(ca_pair[0]), crds=[crd("alphas.example.com")], lease=("widgets", None)
    )
    documents = assemble(definition, ManifestOptions(image="img"))
    assert len(documents) > 10
    for document in documents:
        assert document["metadata"]["annotations"] == WIDGETS_MARK, document["kind"]
    # the CRD manifest of the definition is not changed by it
    assert "annotations" not in definition.crds[0][1]["metadata"]


def test_a_client_ca_is_mounted_from_the_tls_secret(ca_pair: tuple[bytes, bytes]) -> None:
    # Issue 37: WebhookServer(client_ca_file=...) verifies the API server's certificate.
    definition = webhook_definition(ca_pair[0], client_ca_file="/var/run/cloudcoil/tls/ca.crt")
    (deployment,) = [
        d for d in assemble(definition, ManifestOptions(image="img")) if d["kind"] == "Deployment"
    ]
    (volume,) = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    assert volume["secret"]["items"][-1] == {"key": "ca.crt", "path": "ca.crt"}
    elsewhere = webhook_definition(ca_pair[0], client_ca_file="/etc/ca.crt")
    with pytest.raises(ValueError, match="client_ca_file must be a third file beside certfile"):
        assemble(elsewhere, ManifestOptions(image="img"))
    with pytest.raises(TypeError, match="client_ca_file must be a file path"):
        WebhookServer(client_ca_file="")
