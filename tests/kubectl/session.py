"""An everyday kubectl session, step by step, against any cluster (the emulator or a real one).

``python tests/kubectl/session.py [KUBECONFIG]`` runs it against that cluster (without one,
against an emulator started in this process) and prints each step, its result and a count;
``tests/kubectl/test_kubectl.py`` requires every step to pass on the emulator. Names carry a
prefix so that the session can run on a shared cluster; it removes what it created.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["STEPS", "Step", "run_session"]

PREFIX = "kcs"
NS = f"{PREFIX}-demo"
GROUP = f"{PREFIX}.example.com"
CONFIGMAP = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: applied, namespace: {NS}}}
data: {{a: "1"}}
"""
DEPLOYMENT = f"""
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: {NS}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers: [{{name: web, image: "nginx:1.27"}}]
"""
CRD = f"""
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: gadgets.{GROUP}}}
spec:
  group: {GROUP}
  names: {{plural: gadgets, singular: gadget, kind: Gadget}}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {{status: {{}}}}
    additionalPrinterColumns:
    - {{name: Phase, type: string, jsonPath: .status.phase}}
    - {{name: Age, type: date, jsonPath: .metadata.creationTimestamp}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            description: What the gadget should be.
            properties: {{size: {{type: integer}}}}
          status: {{type: object, x-kubernetes-preserve-unknown-fields: true}}
"""
GADGET = f"""
apiVersion: {GROUP}/v1
kind: Gadget
metadata: {{name: g, namespace: {NS}}}
spec: {{size: 3}}
"""
SA = f"system:serviceaccount:{NS}:op"


@dataclass(frozen=True)
class Step:
    """One command: its arguments, input, the exit status and a text its output contains."""

    args: tuple[str, ...]
    expect: str = ""
    stdin: str | None = None
    status: int = 0


def _s(*args: str, expect: str = "", stdin: str | None = None, status: int = 0) -> Step:
    return Step(tuple(args), expect, stdin, status)


N = ("-n", NS)
STEPS: list[Step] = [
    _s("version", expect="Server Version: v1.32"),
    _s("api-resources", "--api-group=apps", expect="deployments"),
    _s("get", "namespaces", expect="default"),
    _s("create", "namespace", NS, expect=f"namespace/{NS} created"),
    _s("create", "configmap", "c1", "--from-literal=a=b", *N, expect="configmap/c1 created"),
    _s("create", "secret", "generic", "s1", "--from-literal=k=v", *N, expect="secret/s1 created"),
    _s("create", "serviceaccount", "op", *N, expect="serviceaccount/op created"),
    _s("create", "role", "reader", "--verb=get,list", "--resource=configmaps", *N,
       expect="role.rbac.authorization.k8s.io/reader created"),
    _s("create", "rolebinding", "reader", "--role=reader", f"--serviceaccount={NS}:op", *N,
       expect="rolebinding.rbac.authorization.k8s.io/reader created"),
    # the other built-in kinds kubectl creates imperatively (protobuf bodies)
    _s("create", "deployment", "kd", "--image=nginx:1.27", "--replicas=2", "--port=8080", *N,
       expect="deployment.apps/kd created"),
    _s("get", "deployment", "kd", "-o",
       "jsonpath={.spec.template.spec.containers[0].ports[0].containerPort}", *N, expect="8080"),
    _s("create", "service", "clusterip", "ks", "--tcp=80:8080", *N, expect="service/ks created"),
    _s("create", "service", "nodeport", "kn", "--tcp=80:8080", *N, expect="service/kn created"),
    _s("create", "service", "loadbalancer", "kl", "--tcp=80:8080", *N,
       expect="service/kl created"),
    _s("get", "service", "ks", "-o", "jsonpath={.spec.ports[0].targetPort}", *N, expect="8080"),
    _s("create", "job", "kj", "--image=busybox:1.36", *N, "--", "echo", "hi",
       expect="job.batch/kj created"),
    _s("create", "cronjob", "kc", "--image=busybox:1.36", "--schedule=*/5 * * * *", *N,
       expect="cronjob.batch/kc created"),
    _s("create", "priorityclass", f"{PREFIX}-pc", "--value=1000", "--description=x",
       expect=f"priorityclass.scheduling.k8s.io/{PREFIX}-pc created"),
    _s("create", "quota", "kq", "--hard=pods=10,services=20", *N,
       expect="resourcequota/kq created"),
    _s("get", "quota", "kq", "-o", "jsonpath={.spec.hard.pods}", *N, expect="10"),
    _s("create", "poddisruptionbudget", "kp", "--selector=app=kd", "--min-available=1", *N,
       expect="poddisruptionbudget.policy/kp created"),
    _s("create", "ingress", "ki", "--rule=foo.example.com/bar=ks:80", *N,
       expect="ingress.networking.k8s.io/ki created"),
    _s("create", "secret", "docker-registry", "kr", "--docker-server=reg.example.com",
       "--docker-username=u", "--docker-password=p", *N, expect="secret/kr created"),
    # kube's printer columns (server-side tables)
    _s("get", "deployment", "kd", *N, expect="0/2"),
    _s("get", "service", "ks", *N, expect="80/TCP"),
    _s("get", "secret", "kr", *N, expect="kubernetes.io/dockerconfigjson"),
    _s("delete", "priorityclass", f"{PREFIX}-pc",
       expect=f'priorityclass.scheduling.k8s.io "{PREFIX}-pc" deleted'),
    _s("get", "configmap", "c1", "-o", "jsonpath={.data.a}", *N, expect="b"),
    _s("describe", "configmap", "c1", *N, expect="Name:         c1"),
    _s("apply", "-f", "-", stdin=CONFIGMAP, expect="configmap/applied created"),
    _s("apply", "-f", "-", stdin=CONFIGMAP, expect="configmap/applied unchanged"),
    _s("apply", "-f", "-", stdin=CONFIGMAP.replace('"1"', '"2"'),
       expect="configmap/applied configured"),
    _s("label", "configmap", "applied", "tier=web", *N, expect="configmap/applied labeled"),
    _s("annotate", "configmap", "applied", "note=x", *N, expect="configmap/applied annotated"),
    _s("patch", "configmap", "applied", "--type=json", "-p",
       '[{"op":"add","path":"/data/b","value":"3"}]', *N, expect="configmap/applied patched"),
    _s("patch", "configmap", "applied", "--type=merge", "-p", '{"data":{"c":"4"}}', *N,
       expect="configmap/applied patched"),
    _s("patch", "configmap", "applied", "-p", '{"data":{"d":"5"}}', *N,
       expect="configmap/applied patched"),
    _s("get", "configmap", "applied", "-o", "jsonpath={.data}", *N,
       expect='{"a":"2","b":"3","c":"4","d":"5"}'),
    _s("get", "configmaps", "-l", "tier=web", "--show-labels", *N, expect="tier=web"),
    _s("get", "configmaps", "-A", expect=NS),
    _s("get", "configmap", "applied", "-o", "yaml", *N, expect="note: x"),
    _s("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT,
       expect="deployment.apps/web serverside-applied"),
    _s("scale", "deployment", "web", "--replicas=3", *N, expect="deployment.apps/web scaled"),
    _s("patch", "deployment", "web", "-p", '{"spec":{"replicas":2}}', *N,
       expect="deployment.apps/web patched"),
    _s("apply", "--server-side", "-f", "-", stdin=DEPLOYMENT, status=1,
       expect='conflict with "kubectl-patch"'),
    _s("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=DEPLOYMENT,
       expect="deployment.apps/web serverside-applied"),
    _s("get", "deployment", "web", "-o", "jsonpath={.spec.replicas}", *N, expect="1"),
    _s("create", "token", "op", *N, expect="."),
    _s("auth", "can-i", "list", "configmaps", *N, f"--as={SA}", expect="yes"),
    _s("auth", "can-i", "list", "secrets", *N, f"--as={SA}", status=1, expect="no"),
    _s("get", "secrets", *N, f"--as={SA}", status=1,
       expect=f'User "{SA}" cannot list resource "secrets"'),
    _s("apply", "-f", "-", stdin=CRD,
       expect=f"customresourcedefinition.apiextensions.k8s.io/gadgets.{GROUP} created"),
    _s("wait", f"crd/gadgets.{GROUP}", "--for=condition=Established", "--timeout=20s",
       expect="condition met"),
    _s("apply", "-f", "-", stdin=GADGET, expect=f"gadget.{GROUP}/g created"),
    _s("patch", f"gadgets.{GROUP}", "g", "--subresource=status", "--type=merge", "-p",
       '{"status":{"phase":"Ready"}}', *N, expect=f"gadget.{GROUP}/g patched"),
    _s("get", f"gadgets.{GROUP}", *N, expect="Ready"),
    _s("explain", f"gadgets.{GROUP}.spec", expect="What the gadget should be."),
    _s("delete", f"gadgets.{GROUP}", "g", *N, expect=f'gadget.{GROUP} "g" deleted'),
    _s("wait", "--for=delete", f"gadgets.{GROUP}/g", *N, "--timeout=20s"),
    _s("delete", "configmap", "applied", *N, expect='configmap "applied" deleted'),
    _s("get", "configmap", "applied", *N, status=1, expect='configmaps "applied" not found'),
    _s("delete", "crd", f"gadgets.{GROUP}", expect="deleted"),
    _s("delete", "namespace", NS, "--wait=false", expect=f'namespace "{NS}" deleted'),
]  # fmt: skip


@dataclass
class Outcome:
    step: Step
    ok: bool
    output: str


def run_session(kubectl: Sequence[str], steps: Sequence[Step] = STEPS) -> list[Outcome]:
    """Run every step with ``kubectl`` (its argv prefix); each is judged on its own."""
    outcomes = []
    for step in steps:
        done = subprocess.run(
            [*kubectl, *step.args], input=step.stdin, capture_output=True, text=True, timeout=60
        )
        output = done.stdout + done.stderr
        ok = done.returncode == step.status and step.expect in output
        outcomes.append(Outcome(step, ok, output))
    return outcomes


def _print(outcomes: list[Outcome], write: Callable[[str], object]) -> None:
    for outcome in outcomes:
        mark = "ok  " if outcome.ok else "FAIL"
        write(f"{mark} kubectl {' '.join(outcome.step.args)}")
        if not outcome.ok:
            write("     " + outcome.output.strip().replace("\n", "\n     ")[:400])
    passed = sum(o.ok for o in outcomes)
    write(f"{passed} of {len(outcomes)} steps passed")


def main(argv: list[str]) -> int:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        print("kubectl not found", file=sys.stderr)
        return 2
    if argv:
        outcomes = run_session([kubectl, "--kubeconfig", argv[0]])
    else:
        from cloudcoil_sync.testing import Emulator

        with Emulator() as emulator, tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "kubeconfig"
            ca = base64.b64encode(emulator.ca_pem).decode()
            path.write_text(
                "apiVersion: v1\nkind: Config\ncurrent-context: e\n"
                f"clusters: [{{name: e, cluster: {{server: '{emulator.url}', "
                f"certificate-authority-data: {ca}}}}}]\n"
                f"users: [{{name: e, user: {{token: '{emulator.admin_token}'}}}}]\n"
                "contexts: [{name: e, context: {cluster: e, user: e}}]\n"
            )
            outcomes = run_session([kubectl, "--kubeconfig", str(path)])
    _print(outcomes, print)
    return 0 if all(o.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
