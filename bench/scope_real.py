"""Issue 41's scope must-show on a real API server (KUBECONFIG: admin, to set up only): an
operator scoped by namespace label, running as a ServiceAccount with exactly the RBAC its
definition generates, picks up a namespace labelled after start and stops reconciling one
unlabelled; no 403 (no informer fails).

    KUBECONFIG=... .venv/bin/python bench/scope_real.py

Namespaces i41-scope-* (the operator's, two team namespaces); all deleted at the end; the
generated ClusterRole and binding too. One JSON line; record `uptime` beside it.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from typing import Any

from cloudcoil.models.kubernetes.core.v1 import ConfigMap, Namespace

from cloudcoil_sync.application import Application
from cloudcoil_sync.client import Config
from cloudcoil_sync.controller._internal.runtime import ControllerRuntime

KUBECTL = "/root/.cache/kube-control-plane/bin/kubectl"
STAMP = int(time.time())
OPERATOR, TEAM1, TEAM2 = (f"i41-scope-{p}-{STAMP}" for p in ("op", "t1", "t2"))
LABEL = f"i41-team-{STAMP}"


def kubectl(*args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [KUBECTL, *args], input=stdin, capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def main() -> dict[str, Any]:
    admin = Config.from_kubeconfig(None, None)
    namespaces = admin.client(Namespace).raw
    namespaces.create({"metadata": {"name": OPERATOR}})
    namespaces.create({"metadata": {"name": TEAM1, "labels": {LABEL: "a"}}})
    namespaces.create({"metadata": {"name": TEAM2}})
    app = Application("i41-scope", namespace=OPERATOR)
    controller = app.controller(ConfigMap, events=False, label_selector="i41=yes")
    controller.watch_namespaces(selector=f"{LABEL}=a")
    passes: dict[str, float] = {}
    cond = threading.Condition()

    @controller.reconcile()
    def reconcile(cm: ConfigMap) -> None:
        with cond:
            passes.setdefault(f"{cm.namespace}/{cm.name}", time.monotonic())
            cond.notify_all()

    rbac = [
        d
        for d in app.manifests(image="example/i41:v1")
        if d["kind"]
        in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
    ]
    kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": rbac})
    )
    token = kubectl("create", "token", "i41-scope", "-n", OPERATOR).strip()
    config = Config(server=admin.server, token=token, ca_data=admin_ca(), namespace=OPERATOR)
    api = admin.client(ConfigMap).raw
    for namespace in (TEAM1, TEAM2):
        api.create({"metadata": {"name": "x", "namespace": namespace, "labels": {"i41": "yes"}}})

    def wait(key: str, timeout: float) -> bool:
        with cond:
            return cond.wait_for(lambda: key in passes, timeout)

    runtime = ControllerRuntime(controller, config)
    try:
        runtime.start(wait=True)
        assert wait(f"{TEAM1}/x", 30)
        first_only = f"{TEAM2}/x" not in passes
        labelled = time.monotonic()
        namespaces.merge_patch(TEAM2, {"metadata": {"labels": {LABEL: "a"}}})
        joined = wait(f"{TEAM2}/x", 30)
        join_seconds = passes[f"{TEAM2}/x"] - labelled if joined else None
        namespaces.merge_patch(TEAM1, {"metadata": {"labels": {LABEL: None}}})
        selection = runtime._selection
        deadline = time.monotonic() + 30
        while selection is not None and TEAM1 not in selection.left and time.monotonic() < deadline:
            threading.Event().wait(0.05)
        api.create({"metadata": {"name": "y", "namespace": TEAM1, "labels": {"i41": "yes"}}})
        api.create({"metadata": {"name": "z", "namespace": TEAM2, "labels": {"i41": "yes"}}})
        assert wait(f"{TEAM2}/z", 30)
        runtime.queue.join(10)
        return {
            "bench": "scope",
            "before_label_only_team1": first_only,
            "joined_seconds_after_label": round(join_seconds, 3) if join_seconds else None,
            "left": TEAM1 in (selection.left if selection else []),
            "passes_in_unlabelled_after_leave": f"{TEAM1}/y" in passes,
            "fatal": repr(runtime.fatal_error),
            "healthy": runtime.healthy(),
        }
    finally:
        runtime.stop(timeout=10)
        for namespace in (TEAM1, TEAM2, OPERATOR):
            namespaces.delete(namespace)
        for doc in rbac:
            if doc["kind"].startswith("Cluster"):
                kubectl("delete", doc["kind"], doc["metadata"]["name"], "--ignore-not-found")


def admin_ca() -> bytes:
    import base64

    import yaml

    path = "/root/.cache/kube-control-plane/admin.kubeconfig"
    with open(path) as handle:
        kubeconfig = yaml.safe_load(handle)
    cluster = kubeconfig["clusters"][0]["cluster"]
    if "certificate-authority-data" in cluster:
        return base64.b64decode(cluster["certificate-authority-data"])
    with open(cluster["certificate-authority"], "rb") as handle:
        return handle.read()


if __name__ == "__main__":
    print(json.dumps(main()), flush=True)
