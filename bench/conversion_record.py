"""Record kube-apiserver's answers for multi-version custom resources with a conversion webhook.

    python bench/conversion_record.py [--kubeconfig PATH] [--out DIR]

Serves the conversion of ``tests/testing/conversion_kinds.py``'s ``Thing`` (v1alpha1 served and
deprecated, v1 hub and storage) from a TLS WebhookHost on 127.0.0.1 (its own CA), registers
the CRD with ``conversion.strategy: Webhook`` by URL, and records, in namespace ``i40-conv``:
create in v1alpha1 (the deprecation Warning), reads in both versions, an update that needs
the stash annotation, a list and a watch in v1alpha1, a webhook ``Failure``, the storage
version moved and back (``status.storedVersions``), a no-op update (the migration's rewrite),
the refused removal of a stored version, the trimmed ``storedVersions`` and a read with the
webhook down. Writes one JSON file per request/response pair to ``--out`` (default
``tests/testing/kube_apiserver_conversion``), replayed by
``tests/testing/test_recorded_conversion.py``. Deletes the namespace and the CRD afterwards.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from cluster import raw_session  # noqa: E402
from testing.conversion_kinds import GROUP, THINGS, crd_manifest  # noqa: E402
from testing.conversion_server import ConversionServer  # noqa: E402

NS = "i40-conv"
CRD_NAME = f"things.{GROUP}"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
KEPT_HEADERS = ("Content-Type", "Warning")


def path(version: str, name: str = "") -> str:
    base = f"/apis/{GROUP}/{version}/namespaces/{NS}/things"
    return f"{base}/{name}" if name else base


class Recorder:
    def __init__(self, kubeconfig: str | None, out: Path) -> None:
        self.session, self.url = raw_session(kubeconfig)
        self.session.trust_env = False
        self.out = out
        self.count = 0
        self.pause = threading.Event()

    def send(self, method: str, where: str, body: Any = None, query: str = "") -> Any:
        target = where + (f"?{query}" if query else "")
        headers = {"Accept": "application/json", "Content-Type": "application/json"}
        data = None if body is None else json.dumps(body)
        response = self.session.request(
            method, self.url + target, data=data, headers=headers, timeout=60
        )
        if "watch=1" in query:
            answer: Any = [json.loads(line) for line in response.text.splitlines() if line]
        else:
            answer = response.json()
        kept = {k: v for k, v in response.headers.items() if k in KEPT_HEADERS}
        return response.status_code, kept, answer

    def record(
        self, case: str, method: str, where: str, body: Any = None, query: str = "", notes: str = ""
    ) -> Any:
        status, headers, answer = self.send(method, where, body, query)
        self.count += 1
        document = {
            "case": case,
            "request": {
                "method": method,
                "path": where + (f"?{query}" if query else ""),
                "headers": {"Accept": "application/json", "Content-Type": "application/json"},
                "body": body,
            },
            "response": {"status": status, "headers": headers, "body": answer},
            "notes": notes,
        }
        slug = case.split(":")[0]
        name = f"{self.count:02d}-{slug}.json"
        (self.out / name).write_text(json.dumps(document, indent=2) + "\n")
        print(f"{name}: {status}", file=sys.stderr)
        return answer

    def wait_established(self) -> None:
        for _ in range(120):
            _, _, crd = self.send("GET", f"{CRDS}/{CRD_NAME}")
            conditions = (crd.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                self.pause.wait(1.0)  # the versions' handlers start just after
                return
            self.pause.wait(0.5)
        raise SystemExit("the CRD did not become Established")

    def cleanup(self) -> None:
        self.send("DELETE", f"/api/v1/namespaces/{NS}")
        self.send("DELETE", f"{CRDS}/{CRD_NAME}")
        for _ in range(120):
            if self.send("GET", f"{CRDS}/{CRD_NAME}")[0] == 404:
                return
            self.pause.wait(0.5)


def run(recorder: Recorder, server: ConversionServer) -> None:
    url, bundle = server.url(THINGS), server.ca_bundle
    recorder.cleanup()
    recorder.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
    r = recorder.record
    r(
        "create-crd: multi-version CRD, Webhook conversion by URL",
        "POST",
        CRDS,
        crd_manifest(url, bundle),
    )
    recorder.wait_established()
    r("get-crd: storedVersions after create", "GET", f"{CRDS}/{CRD_NAME}")
    alpha = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "Thing",
        "metadata": {"name": "a"},
        "spec": {"greeting": "hi"},
    }
    r("create-v1alpha1: deprecated version, stored as v1", "POST", path("v1alpha1"), alpha)
    r("get-v1: the renamed field", "GET", path("v1", "a"))
    current = r("get-v1alpha1: back unchanged", "GET", path("v1alpha1", "a"))
    _, _, hub = recorder.send("GET", path("v1", "a"))
    hub["spec"]["replicas"] = 3
    r("put-v1-replicas: a field v1alpha1 lacks", "PUT", path("v1", "a"), hub)
    r("get-v1alpha1-stash: replicas kept in the annotation", "GET", path("v1alpha1", "a"))
    r("list-v1alpha1: converted items", "GET", path("v1alpha1"))
    r(
        "watch-v1alpha1: converted events",
        "GET",
        path("v1alpha1"),
        query="watch=1&resourceVersion=0&timeoutSeconds=2",
    )
    del current  # the reads above are the recording
    failing = {**alpha, "metadata": {"name": "f"}, "spec": {"greeting": "fail"}}
    r("create-webhook-failure: the webhook answers Failure", "POST", path("v1alpha1"), failing)
    _, _, crd = recorder.send("GET", f"{CRDS}/{CRD_NAME}")
    moved = {**crd, "spec": crd_manifest(url, bundle, storage="v1alpha1")["spec"]}
    r("put-crd-storage-v1alpha1: storage version moved", "PUT", f"{CRDS}/{CRD_NAME}", moved)
    recorder.pause.wait(2.0)
    b = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Thing",
        "metadata": {"name": "b"},
        "spec": {"message": "bee", "replicas": 1},
    }
    r("create-v1-stored-as-v1alpha1: while v1alpha1 is the storage", "POST", path("v1"), b)
    _, _, crd = recorder.send("GET", f"{CRDS}/{CRD_NAME}")
    back = {**crd, "spec": crd_manifest(url, bundle)["spec"]}
    r("put-crd-storage-v1: storage version back to v1", "PUT", f"{CRDS}/{CRD_NAME}", back)
    recorder.pause.wait(2.0)
    _, _, stored_b = recorder.send("GET", path("v1", "b"))
    r(
        "put-noop-rewrite: an unchanged PUT rewrites to the storage version",
        "PUT",
        path("v1", "b"),
        stored_b,
    )
    _, _, crd = recorder.send("GET", f"{CRDS}/{CRD_NAME}")
    dropped = json.loads(json.dumps(crd))
    dropped["spec"]["versions"] = [v for v in dropped["spec"]["versions"] if v["name"] == "v1"]
    dropped["spec"]["conversion"] = {"strategy": "None"}
    r("put-crd-drop-stored-version: refused while stored", "PUT", f"{CRDS}/{CRD_NAME}", dropped)
    trimmed = json.loads(json.dumps(crd))
    trimmed["status"]["storedVersions"] = ["v1"]
    r("put-crd-status-trim: storedVersions = [v1]", "PUT", f"{CRDS}/{CRD_NAME}/status", trimmed)
    _, _, missing = recorder.send("GET", f"{CRDS}/{CRD_NAME}")
    missing["status"]["storedVersions"] = ["v1alpha1"]
    r(
        "put-crd-status-without-storage: accepted, status writes do not check it",
        "PUT",
        f"{CRDS}/{CRD_NAME}/status",
        missing,
    )
    server.stop()
    r("get-v1alpha1-webhook-down: conversion call fails", "GET", path("v1alpha1", "a"))
    r("get-v1-webhook-down: the storage version needs no webhook", "GET", path("v1", "a"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig")
    parser.add_argument("--out", default=str(ROOT / "tests/testing/kube_apiserver_conversion"))
    options = parser.parse_args()
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("[0-9]*.json"):
        old.unlink()
    recorder = Recorder(options.kubeconfig, out)
    with tempfile.TemporaryDirectory() as tmp:
        server = ConversionServer(Path(tmp), THINGS).start()
        try:
            run(recorder, server)
        finally:
            server.stop()
            recorder.cleanup()


if __name__ == "__main__":
    main()
