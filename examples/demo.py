"""See the Widget operator work in under a minute, with no cluster (``make demo``).

1. starts the embedded Kubernetes API emulator (its Deployment rollout simulator plays the
   Deployment controller, so rollouts complete after a short delay);
2. generates a CA and a serving certificate for ``widgets.<namespace>.svc`` and stores them
   as the ``widgets-tls`` Secret, as ``docker/demo.sh`` does with openssl on a real cluster;
3. installs the operator (CRD, RBAC, Service, Deployment, webhook registrations) with
   ``install --image ... --ca-file ...`` semantics, through the Python API;
4. runs the operator in this process, its webhook server on a loopback port;
5. creates a Widget and prints its conditions and children as they converge;
6. stops the operator (drained, Lease released) and the emulator, and exits 0.

Run from the repository root: ``.venv/bin/python examples/demo.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

NAMESPACE = "widgets"
IMAGE = "example/widgets:demo"
os.environ["CLOUDCOIL_NAMESPACE"] = NAMESPACE  # read when the Application is defined

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cloudcoil.apimachinery import ObjectMeta  # noqa: E402
from widget_operator import Widget, WidgetSpec, app  # noqa: E402

from cloudcoil_sync.client import Config  # noqa: E402
from cloudcoil_sync.controller import LeaderElection  # noqa: E402
from cloudcoil_sync.testing import CertificateAuthority, Emulator  # noqa: E402

JSON = dict[str, Any]
CHILDREN = (("", "configmaps"), ("apps", "deployments"), ("", "services"))


def say(text: str = "") -> None:
    print(text, flush=True)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def credentials(kube: Emulator, directory: Path) -> bytes:
    """CA + serving certificate; the key pair becomes the ``widgets-tls`` Secret."""
    import base64

    ca = CertificateAuthority("widgets-demo-ca")
    serving = ca.issue((f"widgets.{NAMESPACE}.svc", "127.0.0.1"))
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    (directory / "tls.crt").write_bytes(serving.cert_pem)
    (directory / "tls.key").write_bytes(serving.key_pem)
    (directory / "tls.key").chmod(0o600)
    kube.create_object(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "widgets-tls", "namespace": NAMESPACE},
            "type": "kubernetes.io/tls",
            "data": {
                "tls.crt": base64.b64encode(serving.cert_pem).decode(),
                "tls.key": base64.b64encode(serving.key_pem).decode(),
            },
        }
    )
    return ca.cert_pem


def install(config: Config, ca_pem: bytes) -> None:
    """``install --image IMAGE --ca-file ca.crt`` (progress lines go to stderr)."""
    app.install(image=IMAGE, ca_bundle=ca_pem, config=config, timeout=60)


def drift(kube: Emulator, config: Config) -> None:
    """A deleted child is put back: its deletion reconciles the owning Widget."""
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    old = kube.get_object("", "configmaps", NAMESPACE, "hello-config") or {}
    say("== Deleting configmap/hello-config behind the operator's back")
    config.client(ConfigMap).delete("hello-config")

    def recreated() -> bool:
        new = kube.get_object("", "configmaps", NAMESPACE, "hello-config")
        return new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]

    if kube.wait_for(recreated, timeout=20):
        say("   recreated by the operator: configmap/hello-config")
    else:
        say("   NOT recreated within 20s")


def admission(config: Config) -> None:
    """The validating webhook reads the optional widget-policy ConfigMap live."""
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.client import ClientError

    say("== Creating ConfigMap widget-policy (maxReplicas=3), then a Widget with 5 replicas")
    config.client(ConfigMap).create(
        ConfigMap(metadata=ObjectMeta(name="widget-policy"), data={"maxReplicas": "3"})
    )
    try:
        config.client(Widget).create(
            Widget(metadata=ObjectMeta(name="big"), spec=WidgetSpec(replicas=5))
        )
    except ClientError as error:
        say(f"   denied: {error}")
    else:
        raise RuntimeError("the validating webhook admitted a Widget the policy forbids")


class Operator:
    """``app.run(stop=...)`` on a thread: what ``python widget_operator.py run`` does."""

    def __init__(self) -> None:
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="widgets-operator")

    def _run(self) -> None:
        try:
            app.run(stop=self.stop)
        except BaseException as error:  # reported by close()
            self.error = error

    def start(self, timeout: float) -> None:
        self.thread.start()
        app.wait_ready(timeout)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(60)
        if self.thread.is_alive():
            raise RuntimeError("the operator did not stop within 60s")
        if self.error is not None:
            raise self.error


def describe(kube: Emulator, widget: JSON) -> list[str]:
    status = widget.get("status") or {}
    lines = [f"  phase={status.get('phase')} availableReplicas={status.get('availableReplicas')}"]
    for condition in status.get("conditions") or []:
        message = condition.get("message") or ""
        lines.append(
            f"    {condition['type']:<20} {condition['status']:<8} "
            f"{condition.get('reason', '')}{': ' + message if message else ''}"
        )
    name = widget["metadata"]["name"]
    for group, plural in CHILDREN:
        for child in kube.list_objects(group, plural, NAMESPACE):
            owners = child["metadata"].get("ownerReferences") or []
            if any(o.get("name") == name and o.get("kind") == "Widget" for o in owners):
                lines.append(f"    child {plural[:-1]}/{child['metadata']['name']}{_extra(child)}")
    return lines


def _extra(child: JSON) -> str:
    if child.get("kind") == "Deployment":
        status = child.get("status") or {}
        wanted = (child.get("spec") or {}).get("replicas")
        return f" (available {status.get('availableReplicas', 0)}/{wanted})"
    return ""


def ready(widget: JSON) -> bool:
    """Ready, for the Widget's current generation."""
    status = widget.get("status") or {}
    if status.get("observedGeneration") != widget["metadata"].get("generation"):
        return False
    return any(
        c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or []
    )


def follow(
    kube: Emulator, config: Config, name: str, timeout: float, shown: JSON | None = None
) -> JSON:
    """Print the Widget each time its status changes (from `shown`), until it is Ready."""
    widgets = config.client(Widget).raw
    deadline = time.monotonic() + timeout
    stream = widgets.watch(field_selector=f"metadata.name={name}", timeout_seconds=int(timeout))
    try:
        for event in stream:
            if event.type not in ("ADDED", "MODIFIED"):
                continue
            widget = event.object
            if widget.get("status") != shown:
                shown = widget.get("status")
                say(f"[{time.monotonic() - START:5.1f}s] widget/{name}")
                for line in describe(kube, widget):
                    say(line)
            if ready(widget) or time.monotonic() > deadline:
                return widget
    finally:
        stream.close()
    return widgets.get(name)


START = time.monotonic()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollout-delay", type=float, default=2.0, help="simulated rollout (s)")
    parser.add_argument("--timeout", type=float, default=45.0, help="give up after (s)")
    options = parser.parse_args(argv)

    say("== Starting the Kubernetes API emulator (with a Deployment rollout simulator)")
    with Emulator(deployments=options.rollout_delay) as kube, tempfile.TemporaryDirectory() as tmp:
        kube.create_object(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )
        config = kube.config(namespace=NAMESPACE)
        say(f"   {kube.url}, namespace {NAMESPACE}")
        say(f"== Creating TLS credentials for widgets.{NAMESPACE}.svc (Secret widgets-tls)")
        ca_pem = credentials(kube, Path(tmp))
        say(f"== Installing the operator (image {IMAGE}; waits for CRDs and the rollout)")
        install(config, ca_pem)

        # In a cluster the Pod runs `widget_operator.py run` with its ServiceAccount and the
        # mounted Secret; here the operator runs in this process with the same definition.
        port = free_port()
        assert app.webhook is not None
        app.webhook = dataclasses.replace(
            app.webhook,
            certfile=str(Path(tmp) / "tls.crt"),
            keyfile=str(Path(tmp) / "tls.key"),
            host="127.0.0.1",
            port=port,
        )
        app.config = config
        # A new leader that had to create the Lease waits one lease duration before working
        # (a deleted Lease may hide a leader still at work); 2 s instead of 15 s for the demo.
        app.leader_election = LeaderElection(
            "widgets", lease_duration=2, renew_deadline=1.5, retry_period=0.5
        )
        # The emulator calls the registered webhooks like kube-apiserver: HTTPS to Service
        # widgets/widgets, certificate checked against the caBundle for widgets.<ns>.svc.
        kube.route_service(NAMESPACE, "widgets", "127.0.0.1", port)
        say(f"== Running the operator (webhook on https://127.0.0.1:{port})")
        operator = Operator()
        try:
            operator.start(timeout=30)
            say("== Creating widget/hello (message 'Hello from the demo', 2 replicas)")
            config.client(Widget).create(
                Widget(
                    metadata=ObjectMeta(name="hello"),
                    spec=WidgetSpec(message="Hello from the demo", replicas=2),
                )
            )
            widget = follow(kube, config, "hello", options.timeout)
            labels = widget["metadata"].get("labels") or {}
            say(f"== Labels added by the mutating webhook: {labels}")
            if ready(widget):
                drift(kube, config)
                say("== Scaling widget/hello to 3 replicas")
                config.client(Widget).raw.merge_patch("hello", {"spec": {"replicas": 3}})
                shown = widget.get("status")
                widget = follow(kube, config, "hello", options.timeout, shown)
            admission(config)
        finally:
            say("== Stopping the operator")
            operator.close()
        if not ready(widget):
            say(f"FAILED: widget/hello is not Ready after {options.timeout:g}s")
            return 1
        say(f"== widget/hello is Ready after {time.monotonic() - START:.1f}s")
    config.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
