"""Optional objects (off by default): PodDisruptionBudget, NetworkPolicy, cert-manager, and
``manifests --split DIR``; offline, through the API and the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner, Result
from cloudcoil.resources import parse

from cloudcoil_sync.application import Extras, NetworkPolicyOptions
from cloudcoil_sync.application._internal.cli import build_cli

from .apps import settings, watcher, widgets

MARK = {"cloudcoil.io/installed-by": "operators/widgets"}


def by_kind(documents: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in documents}


def kinds(documents: list[dict[str, Any]]) -> list[str]:
    return [d["kind"] for d in documents]


def test_none_by_default(ca_pair: tuple[bytes, bytes]) -> None:
    app, options = widgets(ca_pair[0])
    assert app.manifests(**options, replicas=2) == app.manifests(
        **options, replicas=2, extras=Extras()
    )
    generated = set(kinds(app.manifests(**options, replicas=2)))
    assert not generated & {"PodDisruptionBudget", "NetworkPolicy", "Certificate", "Issuer"}


def test_pod_disruption_budget_for_two_or_more_replicas(ca_pair: tuple[bytes, bytes]) -> None:
    app, options = widgets(ca_pair[0])
    documents = app.manifests(**options, replicas=2, extras=Extras(pod_disruption_budget=True))
    assert kinds(documents)[-4:] == [
        "Deployment",
        "PodDisruptionBudget",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
    ]
    budget = by_kind(documents)["PodDisruptionBudget"]
    assert budget == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "widgets", "namespace": "operators", "annotations": MARK},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": "widgets"}},
        },
    }
    deployment = by_kind(documents)["Deployment"]
    assert budget["spec"]["selector"] == deployment["spec"]["selector"]
    for replicas, image in ((1, "widgets:v1"), (2, None)):
        with pytest.raises(ValueError, match="needs a Deployment of 2 or more replicas"):
            app.manifests(image=image, replicas=replicas, extras=Extras(pod_disruption_budget=True))


def test_network_policy_admits_the_api_server_and_the_metrics_namespace(
    ca_pair: tuple[bytes, bytes],
) -> None:
    app, options = widgets(ca_pair[0])
    policy = NetworkPolicyOptions(("10.0.0.0/24", "fd00::/64"), "monitoring")
    documents = app.manifests(**options, extras=Extras(network_policy=policy))
    assert by_kind(documents)["NetworkPolicy"]["spec"] == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "widgets"}},
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [{"ipBlock": {"cidr": "10.0.0.0/24"}}, {"ipBlock": {"cidr": "fd00::/64"}}],
                "ports": [{"protocol": "TCP", "port": 9443}],
            },
            {  # /metrics is served by the webhook listener
                "from": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": 9443}],
            },
        ],
    }
    with pytest.raises(ValueError, match=r"give its address ranges \(--api-server-cidr\)"):
        app.manifests(**options, extras=Extras(network_policy=NetworkPolicyOptions()))
    for bad in ("10.0.0.1/24", "somewhere"):
        with pytest.raises(ValueError, match=f"API server range '{bad}' is not a CIDR"):
            NetworkPolicyOptions((bad,))
    with pytest.raises(ValueError, match="metrics namespace"):
        NetworkPolicyOptions(metrics_namespace="Not_A_Namespace")


def test_network_policy_of_a_health_server_operator(ca_pair: tuple[bytes, bytes]) -> None:
    app, _ = watcher(ca_pair[0])  # HealthServer on 8081, no webhook
    extras = Extras(network_policy=NetworkPolicyOptions(metrics_namespace="monitoring"))
    (policy,) = [
        d for d in app.manifests(image="s:v1", extras=extras) if d["kind"] == "NetworkPolicy"
    ]
    assert [rule["ports"] for rule in policy["spec"]["ingress"]] == [
        [{"protocol": "TCP", "port": 8081}]
    ]


def test_cert_manager_issues_the_tls_secret_and_injects_the_ca(
    ca_pair: tuple[bytes, bytes],
) -> None:
    app, _ = widgets(ca_pair[0])
    documents = app.manifests(image="widgets:v1", extras=Extras(cert_manager=True))
    assert kinds(documents).index("Certificate") < kinds(documents).index("Deployment")
    issuer, certificate = by_kind(documents)["Issuer"], by_kind(documents)["Certificate"]
    assert issuer == {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {"name": "widgets-selfsigned", "namespace": "operators", "annotations": MARK},
        "spec": {"selfSigned": {}},
    }
    assert certificate["spec"] == {
        "dnsNames": ["widgets.operators.svc", "widgets.operators.svc.cluster.local"],
        "issuerRef": {"kind": "Issuer", "name": "widgets-selfsigned"},
        "secretName": "widgets-tls",  # what the Deployment mounts
    }
    volumes = by_kind(documents)["Deployment"]["spec"]["template"]["spec"]["volumes"]
    assert volumes[0]["secret"]["secretName"] == "widgets-tls"
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        configuration = by_kind(documents)[kind]
        assert configuration["metadata"]["annotations"] == {
            **MARK,
            "cert-manager.io/inject-ca-from": "operators/widgets-serving-cert",
        }
        for webhook in configuration["webhooks"]:
            assert "caBundle" not in webhook["clientConfig"]
        assert type(parse(configuration)).__name__ == kind  # still a valid registration
    no_webhook, _ = settings(ca_pair[0])
    with pytest.raises(ValueError, match="it needs a webhook"):
        no_webhook.manifests(extras=Extras(cert_manager=True))


def invoke(app: Any, *args: str) -> Result:
    return CliRunner().invoke(build_cli(app), list(args))


def test_flags(tmp_path: Path, ca_pair: tuple[bytes, bytes]) -> None:
    app, _ = widgets(ca_pair[0])
    result = invoke(
        app, "manifests", "--image", "widgets:v1", "--replicas", "2", "--pod-disruption-budget",
        "--network-policy", "--api-server-cidr", "10.0.0.1/32", "--metrics-namespace", "monitoring",
        "--cert-manager",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert {"PodDisruptionBudget", "NetworkPolicy", "Certificate", "Issuer"} <= set(
        kinds(documents)
    )
    assert documents == app.manifests(
        image="widgets:v1",
        replicas=2,
        extras=Extras(True, NetworkPolicyOptions(("10.0.0.1/32",), "monitoring"), True),
    )
    ca = tmp_path / "ca.crt"
    ca.write_bytes(ca_pair[0])
    for args, code, message in [
        (
            ["--api-server-cidr", "10.0.0.0/8"],
            2,
            "--api-server-cidr and --metrics-namespace need --network-policy",
        ),
        (["--network-policy", "--api-server-cidr", "10.0.0.0"], 0, ""),
        (
            ["--network-policy", "--api-server-cidr", "ten"],
            2,
            "API server range 'ten' is not a CIDR",
        ),
        (
            ["--cert-manager", "--ca-file", str(ca)],
            2,
            "--ca-file / --cert-manager: cert-manager injects the webhooks' CA: leave out",
        ),
        (["--pod-disruption-budget"], 1, "needs a Deployment of 2 or more replicas"),
        (["--network-policy"], 1, "give its address ranges (--api-server-cidr)"),
    ]:
        extra = [] if "--ca-file" in args or code == 0 else ["--ca-file", str(ca)]
        result = invoke(app, "manifests", "--image", "widgets:v1", *extra, *args)
        assert result.exit_code == code, (args, result.stderr)
        if code:
            assert result.stderr.count("\n") == 1 and message in result.stderr, result.stderr


def test_split_writes_a_kustomize_layout(tmp_path: Path, ca_pair: tuple[bytes, bytes]) -> None:
    app, options = widgets(ca_pair[0])
    ca = tmp_path / "ca.crt"
    ca.write_bytes(ca_pair[0])
    out = tmp_path / "deploy"
    (out).mkdir()
    (out / "99-configmap-stale.yaml").write_text("stale")  # an earlier split's
    (out / "overlay-notes.md").write_text("mine")  # not ours: kept
    result = invoke(
        app, "manifests", "--image", "widgets:v1", "--ca-file", str(ca), "--split", str(out)
    )
    assert result.exit_code == 0, result.stderr
    assert result.stdout == ""
    documents = app.manifests(image="widgets:v1", ca_bundle=ca_pair[0])
    assert result.stderr == f"wrote {len(documents) + 1} files to {out}\n"
    kustomization = yaml.safe_load((out / "kustomization.yaml").read_text())
    assert kustomization["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert kustomization["kind"] == "Kustomization"
    files = kustomization["resources"]
    assert files[0] == "01-customresourcedefinition-widgets.examples.cloudcoil.dev.yaml"
    assert files[-1] == "11-validatingwebhookconfiguration-widgets.operators.cloudcoil.io.yaml"
    assert [yaml.safe_load((out / f).read_text()) for f in files] == documents
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [*files, "kustomization.yaml", "overlay-notes.md"]
    )
    unwritable = tmp_path / "file"
    unwritable.write_text("")
    result = invoke(
        app,
        "manifests",
        "--image",
        "widgets:v1",
        "--ca-file",
        str(ca),
        "--split",
        str(unwritable / "x"),
    )
    assert result.exit_code == 1 and result.stderr.startswith("Error: cannot write ")
    assert options == {"image": "widgets:v1"}
