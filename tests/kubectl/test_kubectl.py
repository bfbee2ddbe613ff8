"""Everyday kubectl verbs against the emulator, as on kube-apiserver 1.32."""

from __future__ import annotations

import base64
import json
import subprocess
import threading
from pathlib import Path

import pytest

from cloudcoil_sync.testing import Emulator
from cloudcoil_sync.testing._internal.tls import CertificateAuthority

from .conftest import Kubectl
from .session import run_session

CONFIGMAP = """
apiVersion: v1
kind: ConfigMap
metadata:
  name: applied
data:
  a: "1"
"""
DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
"""
CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {plural: gadgets, singular: gadget, kind: Gadget, shortNames: [gd]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    additionalPrinterColumns:
    - {name: Phase, type: string, jsonPath: .status.phase}
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the gadget should be.
            properties:
              size: {type: integer}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
GADGET = """
apiVersion: example.com/v1
kind: Gadget
metadata:
  name: g
spec:
  size: 3
"""


def test_apply_label_annotate_patch_get_and_delete(
    kubectl: Kubectl, kube_emulator: Emulator
) -> None:
    assert kubectl("apply", "-f", "-", input=CONFIGMAP).stdout == "configmap/applied created\n"
    assert kubectl("apply", "-f", "-", input=CONFIGMAP).stdout == "configmap/applied unchanged\n"
    changed = CONFIGMAP.replace('a: "1"', 'a: "2"')
    assert kubectl("apply", "-f", "-", input=changed).stdout == "configmap/applied configured\n"
    kubectl("label", "configmap", "applied", "tier=web")
    kubectl("annotate", "configmap", "applied", "note=x")
    kubectl("patch", "configmap", "applied", "--type=json", "-p",
            '[{"op":"add","path":"/data/b","value":"3"}]')  # fmt: skip
    kubectl("patch", "configmap", "applied", "-p", '{"data":{"c":"4"}}')  # strategic
    stored = kube_emulator.get_object("", "configmaps", "default", "applied")
    assert stored is not None
    assert stored["data"] == {"a": "2", "b": "3", "c": "4"}
    assert stored["metadata"]["labels"] == {"tier": "web"}
    assert stored["metadata"]["annotations"]["note"] == "x"
    table = kubectl("get", "configmaps", "-l", "tier=web").stdout.splitlines()
    assert table[0].split() == ["NAME", "DATA", "AGE"] and table[1].split()[:2] == ["applied", "3"]
    wide = kubectl("get", "configmap", "applied", "--show-labels").stdout.splitlines()
    assert wide[1].split()[-1] == "tier=web"
    listed = kubectl("get", "configmaps", "-A").stdout.splitlines()
    assert listed[0].split() == ["NAMESPACE", "NAME", "DATA", "AGE"]
    assert kubectl("get", "configmap", "applied", "-o", "name").stdout == "configmap/applied\n"
    assert "tier=web" in kubectl("describe", "configmap", "applied").stdout
    assert kubectl("delete", "configmap", "applied").stdout == 'configmap "applied" deleted\n'
    missing = kubectl("get", "configmap", "applied", check=False)
    assert missing.returncode == 1
    assert 'configmaps "applied" not found' in missing.stderr


def test_server_side_apply_conflicts_and_force(kubectl: Kubectl) -> None:
    kubectl("apply", "--server-side", "-f", "-", input=DEPLOYMENT)
    kubectl("scale", "deployment", "web", "--replicas=3")  # the /scale subresource
    assert kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "3"
    kubectl("patch", "deployment", "web", "-p", '{"spec":{"replicas":2}}')
    conflict = kubectl("apply", "--server-side", "-f", "-", input=DEPLOYMENT, check=False)
    assert conflict.returncode == 1
    assert 'conflict with "kubectl-patch"' in conflict.stderr, conflict.stderr
    assert ".spec.replicas" in conflict.stderr
    forced = kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=DEPLOYMENT)
    assert forced.stdout == "deployment.apps/web serverside-applied\n"
    assert kubectl("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}").stdout == "1"


def test_crd_established_discovered_printed_and_status(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", "-", input=CRD)
    kubectl("wait", "crd/gadgets.example.com", "--for=condition=Established", "--timeout=10s")
    kubectl("apply", "-f", "-", input=GADGET)  # discovery refreshed for the new kind
    status = '{"status":{"phase":"Ready","conditions":[{"type":"Ready","status":"True"}]}}'
    kubectl("patch", "gadget", "g", "--subresource=status", "--type=merge", "-p", status)
    rows = kubectl("get", "gd").stdout.splitlines()
    assert rows[0].split() == ["NAME", "PHASE", "SIZE", "READY", "AGE"]
    assert rows[1].split()[:4] == ["g", "Ready", "3", "True"]
    kubectl("patch", "gadget", "g", "--type=merge", "-p", '{"spec":{"size":4}}')
    got = json.loads(kubectl("get", "gadget", "g", "-o", "json").stdout)
    assert got["metadata"]["generation"] == 2 and got["status"]["phase"] == "Ready"
    explained = kubectl("explain", "gadget.spec").stdout
    assert "What the gadget should be." in explained
    kubectl("delete", "gadget", "g")
    kubectl("wait", "--for=delete", "gadget/g", "--timeout=10s")


def test_wait_for_a_condition_and_watch(kubectl: Kubectl, kubectl_argv: list[str]) -> None:
    kubectl("apply", "-f", "-", input=CONFIGMAP)
    watcher = subprocess.Popen(
        [*kubectl_argv, "get", "configmaps", "--watch", "--output-watch-events"],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    listed = threading.Event()

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            lines.append(line)
            if len(lines) == 2:
                listed.set()  # header and the listed object: the watch is open
            if len(lines) == 3:
                return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        assert listed.wait(20), lines
        kubectl("label", "configmap", "applied", "seen=yes")
        kubectl("wait", "configmap/applied", "--for=jsonpath={.metadata.labels.seen}=yes")
        reader.join(20)
    finally:
        watcher.kill()
        watcher.wait(10)
        reader.join(10)
    assert [line.split()[:2] for line in lines] == [
        ["EVENT", "NAME"], ["ADDED", "applied"], ["MODIFIED", "applied"]
    ]  # fmt: skip


def test_imperative_creates_token_and_auth_can_i(kubectl: Kubectl, kube_emulator: Emulator) -> None:
    """kubectl sends these as protobuf: decoded by the emulator, answered in JSON."""
    created = [
        kubectl("create", "namespace", "demo").stdout,
        kubectl("create", "configmap", "c1", "--from-literal=a=b", "-n", "demo").stdout,
        kubectl("create", "secret", "generic", "s1", "--from-literal=k=v", "-n", "demo").stdout,
        kubectl("create", "serviceaccount", "op", "-n", "demo").stdout,
        kubectl("create", "role", "reader", "--verb=get,list", "--resource=configmaps",
                "-n", "demo").stdout,
        kubectl("create", "rolebinding", "reader", "--role=reader",
                "--serviceaccount=demo:op", "-n", "demo").stdout,
    ]  # fmt: skip
    assert created == [
        "namespace/demo created\n",
        "configmap/c1 created\n",
        "secret/s1 created\n",
        "serviceaccount/op created\n",
        "role.rbac.authorization.k8s.io/reader created\n",
        "rolebinding.rbac.authorization.k8s.io/reader created\n",
    ]
    stored = kube_emulator.get_object("", "configmaps", "demo", "c1")
    assert stored is not None and stored["data"] == {"a": "b"}
    token = kubectl("create", "token", "op", "-n", "demo").stdout.strip()
    as_op = ("--token", token, "-n", "demo")
    assert kubectl("get", "configmaps", *as_op).stdout.splitlines()[1].split()[0] == "c1"
    forbidden = kubectl("get", "secrets", *as_op, check=False)
    assert forbidden.returncode == 1
    assert 'User "system:serviceaccount:demo:op" cannot list resource "secrets"' in (
        forbidden.stderr
    )
    assert kubectl("auth", "can-i", "list", "configmaps", *as_op).stdout == "yes\n"
    no = kubectl("auth", "can-i", "list", "secrets", *as_op, check=False)
    assert (no.returncode, no.stdout) == (1, "no\n")
    sa = "--as=system:serviceaccount:demo:op"
    assert kubectl("auth", "can-i", "get", "configmaps", "-n", "demo", sa).stdout == "yes\n"
    assert kubectl("auth", "can-i", "get", "/healthz", "--as=anyone").stdout == "yes\n"
    unsupported = kubectl("auth", "can-i", "--list", check=False)  # SelfSubjectRulesReview
    assert unsupported.returncode == 1
    assert "decodes protobuf bodies only for" in unsupported.stderr
    assert "not authorization.k8s.io/v1 SelfSubjectRulesReview" in unsupported.stderr


@pytest.mark.kube_emulator(deployments=None)  # as the real cluster: no nodes, 0/2 ready
def test_the_everyday_session_passes_completely(kubectl_argv: list[str]) -> None:
    """session.py's 63 steps, which also pass on the real kube-apiserver 1.32."""
    outcomes = run_session(kubectl_argv)
    failed = [f"kubectl {' '.join(o.step.args)}: {o.output.strip()}" for o in outcomes if not o.ok]
    assert not failed, "\n".join(failed)
    assert len(outcomes) == 63


def test_client_side_apply_merges_containers_by_name(kubectl: Kubectl) -> None:
    two = DEPLOYMENT.replace(
        "        image: nginx:1.27\n",
        "        image: nginx:1.27\n        env: [{name: A, value: '1'}]\n"
        "      - name: side\n        image: busybox\n",
    )
    kubectl("apply", "-f", "-", input=two)
    changed = two.replace("nginx:1.27", "nginx:1.28")
    assert kubectl("apply", "-f", "-", input=changed).stdout == "deployment.apps/web configured\n"
    spec = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)["spec"]
    containers = spec["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [
        ("web", "nginx:1.28"),
        ("side", "busybox"),
    ]
    assert containers[0]["env"] == [{"name": "A", "value": "1"}]
    assert not any(k.startswith("$") for k in spec["template"]["spec"])
    one = changed.replace("      - name: side\n        image: busybox\n", "")
    kubectl("apply", "-f", "-", input=one)  # kubectl sends {"$patch": "delete"} for it
    names = kubectl(
        "get", "deployment", "web", "-o", "jsonpath={.spec.template.spec.containers[*].name}"
    )
    assert names.stdout == "web"


def test_create_secret_tls_stores_the_certificate_and_key(
    kubectl: Kubectl, kube_emulator: Emulator, tmp_path: Path
) -> None:
    serving = CertificateAuthority("kubectl-tls-test").issue(("tls.example.com",), cache=False)
    (tmp_path / "tls.crt").write_bytes(serving.cert_pem)
    (tmp_path / "tls.key").write_bytes(serving.key_pem)
    done = kubectl(
        "create", "secret", "tls", "t1", f"--cert={tmp_path / 'tls.crt'}",
        f"--key={tmp_path / 'tls.key'}",
    )  # fmt: skip
    assert done.stdout == "secret/t1 created\n"
    stored = kube_emulator.get_object("", "secrets", "default", "t1")
    assert stored is not None and stored["type"] == "kubernetes.io/tls"
    assert base64.b64decode(stored["data"]["tls.crt"]) == serving.cert_pem
    assert base64.b64decode(stored["data"]["tls.key"]) == serving.key_pem
