"""A sharded operator's manifests (Lease rights, the Pod name as shard identity) and two
replicas running with exactly the generated RBAC, children following their owner's shard."""

from __future__ import annotations

import threading
from contextlib import ExitStack
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Secret
from waiting import wait_until

from cloudcoil_sync.application import Application
from cloudcoil_sync.application._internal.progress import Progress
from cloudcoil_sync.controller import Context, Controller
from cloudcoil_sync.sharding import Sharding, shard_key
from cloudcoil_sync.testing import Emulator

NAMESPACE = "shards"
LABEL = "sharding.example.com/managed"
KEY = shard_key("parents")


def parents(identity: str, config: Any = None) -> Application:
    controller: Controller[ConfigMap] = Controller(ConfigMap, label_selector=f"{LABEL}=true")
    controller.owns(Secret)

    @controller.reconcile()
    def reconcile(cm: ConfigMap, ctx: Context) -> None:
        assert cm.metadata is not None
        ctx.ensure(Secret(metadata={"name": cm.metadata.name}, string_data={"from": identity}))

    return Application(
        "parents",
        controller,
        namespace=NAMESPACE,
        config=config,
        sharding=Sharding(identity=identity, lease_duration=4, renew_deadline=3, retry_period=0.3),
    )


def rules(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [rule for doc in documents if doc["kind"] == "Role" for rule in doc["rules"]]


def test_manifests_grant_the_shard_leases_and_name_each_pod_its_shard() -> None:
    documents = parents("offline").manifests(image="parents:v1", replicas=3)
    lease_rules = [rule for rule in rules(documents) if "leases" in rule["resources"]]
    assert lease_rules == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["create", "get", "list", "patch", "update", "watch"],
        }
    ]
    deployment = next(doc for doc in documents if doc["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 3
    env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {
        "name": "CLOUDCOIL_SHARD_IDENTITY",
        "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
    } in env


def test_two_replicas_with_the_generated_rbac_shard_owners_and_their_children() -> None:
    with Emulator() as kube, ExitStack() as stack:
        kube.create_object(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        with kube.config(namespace=NAMESPACE) as admin:
            parents("installer").install(config=admin, progress=Progress(quiet=True))
        for index in range(40):
            kube.create_object(
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {
                        "name": f"p-{index}",
                        "namespace": NAMESPACE,
                        "labels": {LABEL: "true"},
                    },
                }
            )
        token = kube.service_account_token(NAMESPACE, "parents")
        runs: list[tuple[threading.Event, threading.Thread, list[BaseException]]] = []
        for identity in ("a", "b"):
            config = stack.enter_context(kube.config(namespace=NAMESPACE, token=token))
            app = parents(identity, config)
            stop, errors = threading.Event(), []

            def run(
                app: Application = app,
                stop: threading.Event = stop,
                errors: list[BaseException] = errors,
            ) -> None:
                try:
                    app.run(stop=stop)
                except BaseException as error:
                    errors.append(error)

            thread = threading.Thread(target=run)
            thread.start()
            runs.append((stop, thread, errors))
            stack.callback(thread.join, 60)
            stack.callback(stop.set)

        def labels(plural: str) -> dict[str, str | None]:
            return {
                obj["metadata"]["name"]: (obj["metadata"].get("labels") or {}).get(KEY)
                for obj in kube.list_objects("", plural, NAMESPACE)
                if plural == "secrets" or (obj["metadata"].get("labels") or {}).get(LABEL)
            }

        def settled() -> bool:
            owners, children = labels("configmaps"), labels("secrets")
            return len(owners) == 40 and set(owners.values()) == {"a", "b"} and children == owners

        assert wait_until(settled, 60, interval=0.2)
        for stop, thread, errors in runs:
            stop.set()
            thread.join(60)
            assert errors == [] and not thread.is_alive()
