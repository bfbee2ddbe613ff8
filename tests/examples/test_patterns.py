"""Each pattern example, installed into the emulator and run with ``app.run(stop=...)``."""

from __future__ import annotations

import json
import ssl
import sys
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from example_harness import Running, conditions, load, prepare

from cloudcoil_sync.client import Config, Forbidden
from cloudcoil_sync.testing import Emulator

GROUP = "patterns.cloudcoil.dev"


def started(name: str, kube: Emulator, tmp_path: Path) -> tuple[Any, Config, Running]:
    module = load(name)
    config = prepare(module.app, kube, tmp_path)
    return module, config, Running(module.app).start()


def deployment(name: str, labels: dict[str, str], **metadata: Any) -> dict[str, Any]:
    selector = {"app": name}
    return {
        "metadata": {"name": name, "labels": {**selector, **labels}, **metadata},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": selector},
                "spec": {"containers": [{"name": "main", "image": "example/app:1"}]},
            },
        },
    }


def test_cached_reads(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("cached_reads", kube_emulator, tmp_path)
    try:
        config.client(module.ConfigMirror).raw.create(
            {"metadata": {"name": "m"}, "spec": {"source": "settings"}}
        )

        def waiting() -> bool:
            found = conditions(kube_emulator.get_object(GROUP, "configmirrors", "default", "m"))
            return found.get("Ready", {}).get("reason") == "SourceMissing"

        assert kube_emulator.wait_for(waiting, timeout=20)
        cms = config.client(module.ConfigMap).raw
        cms.create({"metadata": {"name": "settings"}, "data": {"a": "1"}})

        def mirrored(data: dict[str, str]) -> bool:
            copy = kube_emulator.get_object("", "configmaps", "default", "m-mirror")
            return copy is not None and copy.get("data") == data

        assert kube_emulator.wait_for(lambda: mirrored({"a": "1"}), timeout=20)
        cms.merge_patch("settings", {"data": {"b": "2"}})  # the mapper finds the mirror
        assert kube_emulator.wait_for(lambda: mirrored({"a": "1", "b": "2"}), timeout=20)
        state = kube_emulator.get_object(GROUP, "configmirrors", "default", "m") or {}
        assert kube_emulator.wait_for(
            lambda: (
                (kube_emulator.get_object(GROUP, "configmirrors", "default", "m") or {})
                .get("status", {})
                .get("keys")
                == ["a", "b"]
            ),
            timeout=20,
        ), state
    finally:
        running.close()


def test_dependency_rollout(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("dependency_rollout", kube_emulator, tmp_path)
    try:
        cms = config.client(module.ConfigMap).raw
        cms.create({"metadata": {"name": "shared"}, "data": {"level": "info"}})
        apps = config.client(module.Deployment).raw
        annotations = {"annotations": {module.CONFIG: "shared"}}
        for name in ("a", "b"):
            apps.create(deployment(name, {"example.com/reload": "true"}, **annotations))
        apps.create(deployment("unlabelled", {}, **annotations))

        def digest_of(name: str) -> str | None:
            obj = kube_emulator.get_object("apps", "deployments", "default", name) or {}
            template = obj.get("spec", {}).get("template", {}).get("metadata", {})
            return (template.get("annotations") or {}).get(module.DIGEST)

        first = module.digest(module.ConfigMap(data={"level": "info"}))
        assert kube_emulator.wait_for(
            lambda: digest_of("a") == first and digest_of("b") == first, timeout=20
        )
        cms.merge_patch("shared", {"data": {"level": "debug"}})
        second = module.digest(module.ConfigMap(data={"level": "debug"}))
        assert kube_emulator.wait_for(
            lambda: digest_of("a") == second and digest_of("b") == second, timeout=20
        )
        assert digest_of("unlabelled") is None
    finally:
        running.close()


@pytest.mark.kube_emulator(deployments="available")
def test_workload_summary(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("workload_summary", kube_emulator, tmp_path)
    try:
        apps = config.client(module.Deployment).raw
        apps.create(deployment("pay-api", {"team": "payments"}))
        config.client(module.WorkloadSummary).raw.create(
            {"metadata": {"name": "payments"}, "spec": {"selector": "team=payments"}}
        )

        def status() -> dict[str, Any]:
            obj = kube_emulator.get_object(GROUP, "workloadsummaries", "default", "payments")
            return (obj or {}).get("status") or {}

        assert kube_emulator.wait_for(lambda: status().get("availableReplicas") == 1, timeout=20)
        apps.create(deployment("pay-worker", {"team": "payments"}))
        apps.create(deployment("web", {"team": "web"}))
        assert kube_emulator.wait_for(
            lambda: status().get("names") == ["pay-api", "pay-worker"], timeout=20
        )
        assert kube_emulator.wait_for(lambda: status().get("availableReplicas") == 2, timeout=20)
        assert status()["deployments"] == 2
        # Summarising never writes to the Deployments.
        web = kube_emulator.get_object("apps", "deployments", "default", "web") or {}
        assert "ownerReferences" not in web["metadata"]
    finally:
        running.close()


def child_names(kube: Emulator, prefix: str) -> set[str]:
    return {
        o["metadata"]["name"]
        for o in kube.list_objects("", "configmaps", "default")
        if o["metadata"]["name"].startswith(prefix)
    }


def test_child_pruning(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("child_pruning", kube_emulator, tmp_path)
    try:
        sets = config.client(module.ConfigSet).raw
        sets.create({"metadata": {"name": "auto"}, "spec": {"entries": {"a": "1", "b": "2"}}})
        guarded = config.client(module.GuardedConfigSet).raw
        guarded.create({"metadata": {"name": "manual"}, "spec": {"entries": {"x": "1", "y": "2"}}})
        assert kube_emulator.wait_for(
            lambda: child_names(kube_emulator, "auto-") == {"auto-a", "auto-b"}, timeout=20
        )
        assert kube_emulator.wait_for(
            lambda: child_names(kube_emulator, "manual-") == {"manual-x", "manual-y"}, timeout=20
        )
        # A child the manual variant must keep, and an unrelated ConfigMap with its prefix.
        cms = config.client(module.ConfigMap).raw
        cms.merge_patch("manual-y", {"metadata": {"annotations": {module.KEEP: "yes"}}})
        cms.create({"metadata": {"name": "auto-foreign"}, "data": {}})

        sets.merge_patch("auto", {"spec": {"entries": {"a": None}}})
        guarded.merge_patch("manual", {"spec": {"entries": {"x": None, "y": None, "z": "3"}}})
        assert kube_emulator.wait_for(
            lambda: child_names(kube_emulator, "auto-") == {"auto-b", "auto-foreign"}, timeout=20
        )
        assert kube_emulator.wait_for(
            lambda: child_names(kube_emulator, "manual-") == {"manual-y", "manual-z"}, timeout=20
        )
    finally:
        running.close()


def test_finalizers(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("finalizers", kube_emulator, tmp_path)
    provider = module.PROVIDER
    try:
        records = config.client(module.DnsRecord).raw
        records.create(
            {"metadata": {"name": "www"}, "spec": {"host": "www", "address": "10.0.0.1"}}
        )
        fqdn = "www.default.example.com"

        def published() -> bool:
            obj = kube_emulator.get_object(GROUP, "dnsrecords", "default", "www") or {}
            return provider.lookup(fqdn) == "10.0.0.1" and module.FINALIZER in (
                obj.get("metadata", {}).get("finalizers") or []
            )

        assert kube_emulator.wait_for(published, timeout=20)
        records.delete("www")
        assert kube_emulator.wait_for(
            lambda: kube_emulator.get_object(GROUP, "dnsrecords", "default", "www") is None,
            timeout=20,
        )
        assert provider.lookup(fqdn) is None
    finally:
        running.close()


@pytest.mark.kube_emulator(deployments="available")
def test_multiple_controllers(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("multiple_controllers", kube_emulator, tmp_path)
    # The groups come from the modules multiple_controllers imported (not reloaded here).
    reloader, summary = sys.modules["dependency_rollout"], sys.modules["workload_summary"]
    try:
        assert [c.resource for c in module.app.controllers] == [
            reloader.Deployment,
            summary.WorkloadSummary,
        ]
        config.client(reloader.ConfigMap).raw.create({"metadata": {"name": "cfg"}, "data": {}})
        config.client(reloader.Deployment).raw.create(
            deployment(
                "api",
                {"example.com/reload": "true", "team": "core"},
                annotations={reloader.CONFIG: "cfg"},
            )
        )
        config.client(summary.WorkloadSummary).raw.create(
            {"metadata": {"name": "core"}, "spec": {"selector": "team=core"}}
        )

        def both() -> bool:
            api = kube_emulator.get_object("apps", "deployments", "default", "api") or {}
            template = api.get("spec", {}).get("template", {}).get("metadata", {})
            core = kube_emulator.get_object(GROUP, "workloadsummaries", "default", "core") or {}
            return (template.get("annotations") or {}).get(reloader.DIGEST) is not None and (
                core.get("status") or {}
            ).get("names") == ["api"]

        assert kube_emulator.wait_for(both, timeout=20)
        lease = kube_emulator.get_object("coordination.k8s.io", "leases", "default", "workloads")
        assert lease is not None and lease["spec"]["holderIdentity"]
    finally:
        running.close()


def test_lifespans(kube_emulator: Emulator, tmp_path: Path) -> None:
    module = load("lifespans")
    state = module.STATE
    prepare(module.app, kube_emulator, tmp_path)
    identity = module.app.leader_election.identity
    running = Running(module.app).start()
    try:
        with state.changed:
            assert state.changed.wait_for(lambda: state.ticks >= 2, timeout=20)
        assert state.session is not None and state.leader == identity
        kube_emulator.create_object(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": "hello",
                    "namespace": "default",
                    "labels": {"example.com/greet": "true"},
                },
            }
        )
        assert kube_emulator.wait_for(
            lambda: (
                (kube_emulator.get_object("", "configmaps", "default", "hello") or {}).get("data")
                == {"leader": identity}
            ),
            timeout=20,
        )
    finally:
        running.close()
    assert state.history == [
        "process:startup",
        "leader:leadership_acquired",
        "leader:shutdown",
        "process:shutdown",
    ]
    assert state.session is None and state.leader is None


def review(kind: dict[str, str], resource: dict[str, str], obj: Any, **request: Any) -> bytes:
    body = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": resource,
            "requestKind": kind,
            "requestResource": resource,
            "namespace": "default",
            "operation": "UPDATE",
            "userInfo": {"username": "admin"},
            "object": obj,
            "oldObject": obj,
            "dryRun": False,
            **request,
        },
    }
    return json.dumps(body).encode()


@pytest.mark.kube_emulator(deployments="available")
def test_admission_builtin(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("admission_builtin", kube_emulator, tmp_path)
    try:
        apps = config.client(module.Deployment).raw
        with pytest.raises(Forbidden, match="need a team label"):
            apps.create(deployment("anonymous", {}))
        created = apps.create(deployment("api", {"team": "core", module.PROTECTED: "true"}))
        assert created["metadata"]["annotations"][module.CREATED_BY]  # stamped by the mutator
        with pytest.raises(Forbidden, match="is protected"):
            apps.delete("api")
        apps.merge_patch("api", {"metadata": {"labels": {module.PROTECTED: None}}})
        apps.delete("api")

        # The emulator does not admit /scale writes: post the review kube-apiserver would send.
        webhook = module.app.webhook
        (route,) = [r for r in module.app.routes if r.subresource == "scale"]
        context = ssl.create_default_context(cadata=webhook.ca_bundle.decode())
        context.check_hostname = False

        def scale(replicas: int) -> dict[str, Any]:
            scale = {
                "apiVersion": "autoscaling/v1",
                "kind": "Scale",
                "metadata": {"name": "api", "namespace": "default"},
                "spec": {"replicas": replicas},
            }
            request = urllib.request.Request(
                f"https://127.0.0.1:{webhook.port}{route.path}",
                data=review(
                    {"group": "autoscaling", "version": "v1", "kind": "Scale"},
                    {"group": "apps", "version": "v1", "resource": "deployments"},
                    scale,
                    subResource="scale",
                    name="api",
                ),
                headers={"Content-Type": "application/json"},
            )
            with urllib.request.urlopen(request, context=context, timeout=10) as answer:
                return json.load(answer)["response"]

        assert scale(3)["allowed"] is True
        denied = scale(50)
        assert denied["allowed"] is False
        assert denied["status"]["message"] == "at most 20 replicas, not 50"
    finally:
        running.close()


CERTIFICATES_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "certificates.cert-manager.io"},
    "spec": {
        "group": "cert-manager.io",
        "scope": "Namespaced",
        "names": {"plural": "certificates", "singular": "certificate", "kind": "Certificate"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


@pytest.mark.kube_emulator(deployments="available")
def test_admission_external_crd(kube_emulator: Emulator, tmp_path: Path) -> None:
    kube_emulator.create_object(CERTIFICATES_CRD)  # cert-manager installed its CRD
    assert kube_emulator.settle()
    _module, config, running = started("admission_external_crd", kube_emulator, tmp_path)
    try:
        certificates = config.client(("cert-manager.io", "v1", "certificates"))

        def certificate(name: str, *names: str) -> dict[str, Any]:
            return {
                "apiVersion": "cert-manager.io/v1",
                "kind": "Certificate",
                "metadata": {"name": name},
                "spec": {"secretName": name, "dnsNames": list(names), "issuerRef": {"name": "ca"}},
            }

        created = certificates.create(certificate("ok", "api.example.com"))
        assert created["spec"]["issuerRef"] == {"name": "ca"}  # unknown fields untouched
        with pytest.raises(Forbidden, match=r"outside \.example\.com: evil\.test"):
            certificates.create(certificate("bad", "www.example.com", "evil.test"))
        # Our install left the CRD to its owner.
        crd = kube_emulator.get_object(
            "apiextensions.k8s.io", "customresourcedefinitions", "", "certificates.cert-manager.io"
        )
        assert crd is not None
        managers = [m.get("manager") for m in crd["metadata"].get("managedFields") or []]
        assert "cloudcoil-cert-policy" not in managers
    finally:
        running.close()
