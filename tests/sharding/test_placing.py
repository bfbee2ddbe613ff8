"""`Sharding(placing_webhook=True)`: new objects are labelled for their shard at creation by
a mutating webhook every replica serves (over real TLS, called by the emulator), so nobody
claims them; what the webhook does not place is still claimed."""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from ports import free_port

from cloudcoil_sync.application import Application, WebhookServer
from cloudcoil_sync.application._internal.placing import object_selector
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller import Controller
from cloudcoil_sync.controller._internal.cache import LabelSelector
from cloudcoil_sync.sharding import ObjectRef, Sharding, pick_shard
from cloudcoil_sync.sharding._internal.kinds import ShardedKind
from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

from .harness import KEY, LABEL, Ledger, Replica, configmap, converged
from .test_emulator import claims

PATH = "/sharding/echo/place-0-configmaps"
KIND = ShardedKind(ConfigMap, "default", f"{LABEL}=true")
POINTER = "/metadata/labels/shard.sharding.cloudcoil.dev~1echo"


def managed() -> Controller[ConfigMap]:
    controller: Controller[ConfigMap] = Controller(ConfigMap, label_selector=f"{LABEL}=true")

    @controller.reconcile()
    def reconcile(cm: ConfigMap) -> None:
        return None

    return controller


def test_the_placing_webhook_needs_a_webhook_server() -> None:
    with pytest.raises(ValueError, match=r"placing_webhook=True\) needs webhook=WebhookServer"):
        Application("echo", managed(), sharding=Sharding(placing_webhook=True))
    with pytest.raises(TypeError, match="placing_webhook must be True or False"):
        Sharding(placing_webhook="yes")  # type: ignore[arg-type]
    for timeout in (0, 31, 2.5, True):
        with pytest.raises(ValueError, match="placing_timeout must be an integer between 1"):
            Sharding(placing_webhook=True, placing_timeout=timeout)  # type: ignore[arg-type]


def test_its_registration_places_only_unlabelled_creates_and_never_refuses_one() -> None:
    app = Application(
        "echo",
        managed(),
        namespace="default",
        webhook=WebhookServer(),
        sharding=Sharding(placing_webhook=True),
    )
    ca = CertificateAuthority("placing-test-ca").cert_pem
    (mutating,) = app.webhook_configurations(ca)
    (webhook,) = mutating["webhooks"]
    assert webhook["clientConfig"]["service"]["path"] == PATH
    assert webhook["rules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "resources": ["configmaps"],
            "operations": ["CREATE"],
            "scope": "Namespaced",
        }
    ]
    assert (webhook["failurePolicy"], webhook["timeoutSeconds"]) == ("Ignore", 2)
    assert webhook["objectSelector"] == {
        "matchExpressions": [
            {"key": LABEL, "operator": "In", "values": ["true"]},
            {"key": KEY, "operator": "DoesNotExist"},
        ]
    }
    assert webhook["namespaceSelector"]["matchExpressions"][0]["values"] == ["default"]
    plain = Application("echo", managed(), webhook=WebhookServer(), sharding=Sharding())
    assert plain.routes == ()


def test_controller_selectors_become_match_expressions() -> None:
    parsed = LabelSelector("a=1,b!=2,c in (y, x),d notin (z),e,!f,g==3")
    assert parsed.expressions == [
        {"key": "a", "operator": "In", "values": ["1"]},
        {"key": "b", "operator": "NotIn", "values": ["2"]},
        {"key": "c", "operator": "In", "values": ["x", "y"]},
        {"key": "d", "operator": "NotIn", "values": ["z"]},
        {"key": "e", "operator": "Exists"},
        {"key": "f", "operator": "DoesNotExist"},
        {"key": "g", "operator": "In", "values": ["3"]},
    ]
    assert object_selector("r", None) == {
        "matchExpressions": [{"key": "shard.sharding.cloudcoil.dev/r", "operator": "DoesNotExist"}]
    }


def test_the_placer_places_only_what_it_can_hash_on_a_settled_ring() -> None:
    sharding = Sharding("echo", placing_webhook=True)
    placer = sharding.placer
    obj = configmap("cm-1")
    assert placer.target(obj, KIND) is None  # no running replica attached
    live = frozenset({"r0", "r1", "r2"})
    placer.attach(lambda: live)
    expected = pick_shard(live, ObjectRef("", "ConfigMap", "default", "cm-1"))
    assert placer.target(obj, KIND) == expected
    assert placer.patch(obj, KIND) == [
        {
            "op": "add",
            "path": "/metadata/labels/shard.sharding.cloudcoil.dev~1echo",
            "value": expected,
        }
    ]
    # the namespace of the review when the object names none (a create in a namespace URL)
    bare = {"metadata": {"name": "cm-1", "labels": {LABEL: "true"}}}
    assert placer.target(bare, KIND, "default") == expected
    assert placer.patch({"metadata": {"name": "cm-1"}}, KIND, "default") == [
        {"op": "add", "path": "/metadata/labels", "value": {}},
        {
            "op": "add",
            "path": "/metadata/labels/shard.sharding.cloudcoil.dev~1echo",
            "value": expected,
        },
    ]
    labelled = configmap("cm-1")
    labelled["metadata"]["labels"][KEY] = "r9"
    assert placer.target(labelled, KIND) is None  # placed already: left as it is
    assert placer.target({"metadata": {"generateName": "cm-"}}, KIND) is None  # no name yet
    placer.attach(lambda: None)  # not settled, or stopping
    assert placer.target(obj, KIND) is None
    placer.attach(None)
    assert placer.target(obj, KIND) is None


def test_replicas_label_new_objects_at_creation_and_claim_what_is_not(tmp_path: Path) -> None:
    ledger = Ledger()
    ca = CertificateAuthority("placing-test-ca")
    serving = ca.issue(("echo.default.svc", "127.0.0.1"))
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    live = {"r0", "r1", "r2"}
    with Emulator() as kube, ExitStack() as stack:
        replicas = []
        for name in sorted(live):
            webhook = WebhookServer(
                ca_bundle=ca.cert_pem,
                certfile=str(tmp_path / "tls.crt"),
                keyfile=str(tmp_path / "tls.key"),
                host="127.0.0.1",
                port=free_port(),
                secure_metrics=False,
            )
            # a loaded machine (a full suite beside it) must not time a placement out
            replica = Replica(
                kube,
                name,
                ledger,
                stack,
                webhook,
                grace=60,
                placing_webhook=True,
                placing_timeout=15,
            )
            replicas.append(replica)
        admin = kube.config(namespace="default")
        stack.callback(admin.close)
        (document,) = replicas[0].app.webhook_configurations(ca.cert_pem)
        assert document["webhooks"][0]["timeoutSeconds"] == 15
        admin.client(type_of(document)).raw.create(document)
        placing = replicas[1]  # the Service reaches this one
        assert placing.app.webhook is not None
        kube.route_service("default", "echo", "127.0.0.1", placing.app.webhook.port)
        for replica in replicas:
            replica.start()
        assert kube.wait_for(lambda: placed_on(admin, live), timeout=60)

        created = [create(admin, f"cm-{index}") for index in range(60)]
        assert created == [target(live, f"cm-{index}") for index in range(60)]  # born placed
        assert kube.wait_for(lambda: converged(kube, live), timeout=60)
        assert [claims(replica) for replica in replicas] == [0, 0, 0]
        assert not [
            entry
            for entry in kube.request_log
            if entry.method == "PATCH" and entry.query.get("fieldManager", "").startswith("cloud")
        ]

        # Its replica gone, the webhook is unreachable: creates go through (Ignore) unlabelled
        # and the live replicas claim them.
        assert placing.close() is None
        live.discard("r1")
        late = [create(admin, f"late-{index}") for index in range(20)]
        assert late == [None] * 20
        assert kube.wait_for(lambda: converged(kube, live), timeout=60)
        assert sum(claims(replica) for replica in (replicas[0], replicas[2])) >= 20
        for replica in (replicas[0], replicas[2]):
            assert replica.close() is None
    assert ledger.overlapping() == []


def type_of(document: dict[str, Any]) -> type[Any]:
    from cloudcoil.models.kubernetes.admissionregistration.v1 import (
        MutatingWebhookConfiguration,
    )

    assert document["kind"] == "MutatingWebhookConfiguration"
    return MutatingWebhookConfiguration


def target(live: set[str], name: str) -> str | None:
    return pick_shard(live, ObjectRef("", "ConfigMap", "default", name))


def create(admin: Config, name: str, *, dry_run: bool = False) -> str | None:
    """Create (or dry-run) a managed ConfigMap; the shard label it was created with."""
    made = admin.client(ConfigMap).create(configmap(name), dry_run=dry_run)
    assert made.metadata is not None
    return (made.metadata.labels or {}).get(KEY)


def placed_on(admin: Config, live: set[str]) -> bool:
    """Whether the webhook places on every one of `live` (so it sees them all live): a
    dry-run create of a probe hashed to each."""
    probes: dict[str, str] = {}
    index = 0
    while len(probes) < len(live):
        name = f"probe-{index}"
        probes.setdefault(str(target(live, name)), name)
        index += 1
    return all(create(admin, name, dry_run=True) == shard for shard, name in probes.items())
