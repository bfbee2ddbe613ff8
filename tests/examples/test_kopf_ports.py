"""The kopf ports (examples/kopf_ports/), each installed into the emulator and run with
``app.run(stop=...)`` as the patterns are (issue 43)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from example_harness import KOPF_PORTS, Running, load, prepare

from cloudcoil_sync.client import Config
from cloudcoil_sync.testing import Emulator

GROUP = "kopf.dev"


def started(name: str, kube: Emulator, tmp_path: Path) -> tuple[Any, Config, Running]:
    module = load(name)
    config = prepare(module.app, kube, tmp_path)
    return module, config, Running(module.app).start()


def test_ephemeral_volume_claims(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("ephemeral_volume_claims", kube_emulator, tmp_path)
    try:
        claims = config.client(module.EphemeralVolumeClaim).raw
        claims.create(
            {"metadata": {"name": "scratch", "labels": {"team": "a"}}, "spec": {"size": "1Gi"}}
        )

        def pvc() -> dict[str, Any]:
            return (
                kube_emulator.get_object("", "persistentvolumeclaims", "default", "scratch") or {}
            )

        def storage() -> str | None:
            return (
                ((pvc().get("spec") or {}).get("resources") or {})
                .get("requests", {})
                .get("storage")
            )

        assert kube_emulator.wait_for(lambda: storage() == "1Gi", timeout=20)
        owner = pvc()["metadata"]["ownerReferences"][0]
        assert owner["kind"] == "EphemeralVolumeClaim" and owner["controller"] is True

        def status() -> dict[str, Any]:
            obj = kube_emulator.get_object(GROUP, "ephemeralvolumeclaims", "default", "scratch")
            return (obj or {}).get("status") or {}

        assert kube_emulator.wait_for(lambda: status().get("pvcName") == "scratch", timeout=20)
        claims.merge_patch("scratch", {"spec": {"size": "2Gi"}})  # on_field("spec.size")
        assert kube_emulator.wait_for(lambda: storage() == "2Gi", timeout=20)
        claims.merge_patch("scratch", {"metadata": {"labels": {"team": "b"}}})
        assert kube_emulator.wait_for(
            lambda: pvc()["metadata"].get("labels", {}).get("team") == "b", timeout=20
        )
    finally:
        running.close()


def test_tenant_provisioner(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("tenant_provisioner", kube_emulator, tmp_path)
    databases, quotas = module.DATABASES, module.QUOTAS
    try:
        tenants = config.client(module.Tenant).raw
        tenants.create(
            {"metadata": {"name": "acme"}, "spec": {"storageGb": 50, "databases": ["a", "b"]}}
        )
        assert kube_emulator.wait_for(
            lambda: databases.live == {"acme-a", "acme-b"} and quotas.reserved == {"acme": 50},
            timeout=20,
        )
        assert databases.asked == {"acme-a": 2, "acme-b": 2}  # each item retried on its own

        def annotations() -> dict[str, str]:
            obj = kube_emulator.get_object(GROUP, "tenants", "default", "acme") or {}
            return obj.get("metadata", {}).get("annotations") or {}

        # Done: the change is recorded, the progress garbage-collected.
        assert kube_emulator.wait_for(
            lambda: (
                "handlers.cloudcoil.dev/last-handled" in annotations()
                and "handlers.cloudcoil.dev/progress" not in annotations()
            ),
            timeout=20,
        )
        tenants.delete("acme")  # held by the finalizer until cleanup ran
        assert kube_emulator.wait_for(
            lambda: kube_emulator.get_object(GROUP, "tenants", "default", "acme") is None,
            timeout=20,
        )
        assert databases.live == set() and quotas.reserved == {}
    finally:
        running.close()


def test_config_audit(kube_emulator: Emulator, tmp_path: Path) -> None:
    module, config, running = started("config_audit", kube_emulator, tmp_path)
    audit = module.AUDIT
    try:
        api = config.client(module.ConfigMap).raw
        api.create({"metadata": {"name": "cfg", "labels": {"audit": "yes"}}, "data": {"a": "1"}})

        def handled() -> bool:  # the creation is handled: what follows is an update
            obj = kube_emulator.get_object("", "configmaps", "default", "cfg") or {}
            annotations = obj.get("metadata", {}).get("annotations") or {}
            return "handlers.cloudcoil.dev/last-handled" in annotations

        assert kube_emulator.wait_for(handled, timeout=20)
        api.merge_patch("cfg", {"data": {"b": "2"}})
        api.create({"metadata": {"name": "unwatched"}, "data": {}})
        with audit.lock:
            assert audit.lock.wait_for(lambda: audit.changes, timeout=20)
        assert audit.changes == [("cfg", ["b"])]
        api.delete("cfg")
        with audit.lock:
            assert audit.lock.wait_for(lambda: audit.gone, timeout=20)
        assert audit.gone == [("cfg", {"a": "1", "b": "2"})]
        assert [t for t in audit.trail if t[1] == "cfg"][:2] == [
            ("ADDED", "cfg"),
            ("MODIFIED", "cfg"),
        ]
        assert ("DELETED", "cfg") in audit.trail
        assert all(name != "unwatched" for _, name in audit.trail)
    finally:
        running.close()


def test_every_port_is_listed_and_builds_its_manifests_offline() -> None:
    index = (KOPF_PORTS / "README.md").read_text()
    for path in sorted(KOPF_PORTS.glob("*.py")):
        assert f"({path.name})" in index, path.name
        module = load(path.stem)
        assert "kopf original" in (module.__doc__ or ""), path.name
        docs = module.app.manifests(image="example/operator:v1")
        assert "Deployment" in [doc["kind"] for doc in docs], path.name
