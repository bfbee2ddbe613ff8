"""The versioned example on a real control plane (or the emulator): conversion, kubectl in
both versions, the deprecation warning, install's refusal, migration, conversion throughput.

    python bench/versions_real.py [--kubeconfig PATH] [--kubectl PATH] [--emulator]
                                  [--objects 200]

examples/versioned_operator.py's conversion webhook runs on 127.0.0.1 (a TLS WebhookHost
with its own CA) and the Gizmo CRD calls it by URL (as the admission acceptance registers its
webhooks). In namespace ``i40-show``: the previous release's CRD (v1alpha1 only) and an object
stored in it; this release's CRD (v1 storage and hub, v1alpha1 served and deprecated); an
object created as v1alpha1 with kubectl (the warning it prints) read back as v1 (the renamed
field) and as v1alpha1 (unchanged); ``kubectl get`` in both versions; a v1-only release
refused by ``install``; ``python examples/versioned_operator.py migrate`` leaving
``storedVersions`` = [v1], then run again; the v1-only release accepted (server-side dry run).
Then ``--objects`` objects listed in each version (objects/s through kube-apiserver and the
webhook). ``--emulator`` runs the same sequence against an in-process emulator instead. The
namespace and the CRD are deleted at the end. Prints a markdown report on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from click.testing import CliRunner  # noqa: E402
from testing.conversion_server import ConversionServer  # noqa: E402

from cloudcoil_sync.application import Application, build_cli  # noqa: E402
from cloudcoil_sync.client import Config, NotFound  # noqa: E402
from cloudcoil_sync.crd import CRD  # noqa: E402
from examples.versioned_operator import GIZMOS, Gizmo, GizmoV1Alpha1  # noqa: E402

NS = "i40-show"
GROUP = "examples.cloudcoil.dev"
NAME = f"gizmos.{GROUP}"
CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
PAUSE = threading.Event()


def say(text: str = "") -> None:
    print(text, flush=True)


def block(title: str, text: str) -> None:
    say(f"**{title}**\n\n```\n{text.rstrip()}\n```\n")


class Show:
    def __init__(self, kubeconfig: str, kubectl: str) -> None:
        self.kubeconfig, self.kubectl_path = kubeconfig, kubectl
        self.config = Config.from_kubeconfig(path=kubeconfig, namespace=NS)
        self.crds = self.config.client(CRDS)

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.kubectl_path, "--kubeconfig", self.kubeconfig, "-n", NS, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
        )
        shown = " ".join(["kubectl", *args])
        block(f"$ {shown}", (done.stdout + done.stderr) or "(no output)")
        return done

    def until(self, what: str, check: Any, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}")
            PAUSE.wait(0.3)

    def served(self, version: str) -> bool:
        try:
            self.config.client((GROUP, version, "gizmos")).list(limit=1)
            return True
        except Exception:
            return False

    def stored_versions(self) -> list[str]:
        return list(self.crds.get(NAME)["status"]["storedVersions"])

    def cleanup(self) -> None:
        for path in (f"/api/v1/namespaces/{NS}",):
            subprocess.run(
                [
                    self.kubectl_path,
                    "--kubeconfig",
                    self.kubeconfig,
                    "delete",
                    "--wait=false",
                    "--ignore-not-found",
                    "namespace",
                    NS,
                ],
                capture_output=True,
                timeout=60,
            )
            del path
        try:
            self.crds.delete(NAME)
        except NotFound:
            return
        self.until("the CRD to go", lambda: not self._exists(), timeout=120)

    def _exists(self) -> bool:
        try:
            self.crds.get(NAME)
            return True
        except NotFound:
            return False


def previous_release(show: Show) -> None:
    say("## 1. The previous release: v1alpha1 only\n")
    show.crds.create(CRD(GizmoV1Alpha1).manifest())
    show.until("v1alpha1 served", lambda: show.served("v1alpha1"))
    show.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "Gizmo",
                "metadata": {"name": "old"},
                "spec": {"greeting": "stored as v1alpha1"},
            }
        ),
    )


def this_release(show: Show, server: ConversionServer) -> None:
    say("## 2. This release: v1 (storage, hub) and v1alpha1 (served, deprecated), by webhook\n")
    current = show.crds.get(NAME)
    manifest = CRD(GIZMOS).manifest()
    manifest["spec"]["conversion"]["webhook"]["clientConfig"] = {
        "url": server.url(GIZMOS),
        "caBundle": server.ca_bundle,
    }
    current["spec"] = manifest["spec"]
    show.crds.replace(current)
    show.until("v1 served", lambda: show.served("v1"))
    block("status.storedVersions", json.dumps(show.stored_versions()))
    show.kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": f"{GROUP}/v1alpha1",
                "kind": "Gizmo",
                "metadata": {"name": "a"},
                "spec": {"greeting": "hello from v1alpha1"},
            }
        ),
    )
    show.kubectl("get", f"gizmos.v1.{GROUP}")
    show.kubectl("get", f"gizmos.v1alpha1.{GROUP}")
    show.kubectl("get", f"gizmos.v1.{GROUP}", "a", "-o", 'jsonpath={.apiVersion} {.spec}{"\\n"}')
    show.kubectl(
        "get", f"gizmos.v1alpha1.{GROUP}", "a", "-o", 'jsonpath={.apiVersion} {.spec}{"\\n"}'
    )
    hub = show.config.client(Gizmo).get("a")
    spoke = show.config.client(GizmoV1Alpha1).get("a")
    assert hub.spec.message == "hello from v1alpha1", hub.spec
    assert spoke.spec.greeting == "hello from v1alpha1", spoke.spec
    block("Python client", f"as v1: {hub.spec!r}\nas v1alpha1: {spoke.spec!r}  (round trip)")
    hub.spec.replicas = 3
    show.config.client(Gizmo).replace(hub)
    annotations = show.config.client(GizmoV1Alpha1).raw.get("a")["metadata"]["annotations"]
    show.config.client(GizmoV1Alpha1).raw.merge_patch("a", {"spec": {"greeting": "edited"}})
    after = show.config.client(Gizmo).get("a").spec
    assert (after.message, after.replicas) == ("edited", 3), after
    block(
        "replicas=3 set in v1, greeting edited in v1alpha1",
        f"v1alpha1 annotations: {annotations}\nv1 now: {after!r}",
    )
    old = show.config.client(Gizmo).get("old").spec
    block("the object stored as v1alpha1, read as v1", repr(old))


def release(model: Any, config: Config) -> Application:
    app = Application(NAME.split(".")[0], namespace=NS, resources=(CRD(model),))
    app.config = config

    @app.controller(model).reconcile()
    def reconcile(obj: Any, ctx: Any) -> None:
        return None

    return app


def migration(show: Show) -> None:
    say("## 3. The next release drops v1alpha1: refused, migrate, accepted\n")
    block("status.storedVersions", json.dumps(show.stored_versions()))
    next_release = release(Gizmo, show.config)
    refused = CliRunner().invoke(build_cli(next_release), ["install", "--without-webhooks"])
    block(
        "$ python next_release.py install --without-webhooks (v1 only)",
        f"{refused.output}exit status {refused.exit_code}",
    )
    assert refused.exit_code == 1 and "migrate" in refused.output
    env = {**os.environ, "KUBECONFIG": show.kubeconfig, "CLOUDCOIL_NAMESPACE": NS}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(ROOT / "examples/versioned_operator.py"), "migrate"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        block(
            "$ python examples/versioned_operator.py migrate",
            f"{done.stdout}{done.stderr}exit status {done.returncode}",
        )
        assert done.returncode == 0
    block("status.storedVersions", json.dumps(show.stored_versions()))
    assert show.stored_versions() == ["v1"]
    accepted = CliRunner().invoke(
        build_cli(next_release), ["install", "--without-webhooks", "--dry-run", "--force", "-q"]
    )
    block(
        "$ python next_release.py install --without-webhooks --dry-run --force "
        "(--force: this script applied the CRD, not install)",
        f"{accepted.output}exit status {accepted.exit_code}",
    )
    assert accepted.exit_code == 0


def throughput(show: Show, count: int) -> None:
    say(f"## 4. Listing {count} objects in each version\n")
    objects = show.config.client(Gizmo)
    for i in range(count):
        objects.create(
            Gizmo.model_validate(
                {"metadata": {"name": f"n{i}"}, "spec": {"message": f"m{i}", "replicas": 2}}
            )
        )
    rows = []
    for model in (Gizmo, GizmoV1Alpha1):
        client = show.config.client(model).raw
        times = []
        for _ in range(3):
            began = time.perf_counter()
            listed = client.list(limit=500)
            times.append(time.perf_counter() - began)
        n = len(listed.items)
        best = min(times)
        rows.append(f"| {model.__name__} | {n} | {best * 1000:.0f} ms | {n / best:.0f} |")
    say("| listed as | objects | best of 3 | objects/s |\n|---|---|---|---|")
    say("\n".join(rows))
    say(f"\nload average: {os.getloadavg()}\n")


def run(kubeconfig: str, kubectl: str, count: int) -> None:
    show = Show(kubeconfig, kubectl)
    show.cleanup()
    show.kubectl("create", "namespace", NS)
    with tempfile.TemporaryDirectory() as tmp:
        server = ConversionServer(Path(tmp), GIZMOS).start()
        try:
            previous_release(show)
            this_release(show, server)
            migration(show)
            throughput(show, count)
        finally:
            server.stop()
            show.cleanup()
            show.config.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--kubectl", default="kubectl")
    parser.add_argument("--emulator", action="store_true")
    parser.add_argument("--objects", type=int, default=200)
    options = parser.parse_args()
    if not options.emulator:
        say(f"# Versions and conversion on {options.kubeconfig}\n")
        run(options.kubeconfig, options.kubectl, options.objects)
        return
    from cloudcoil_sync.testing import Emulator
    from cloudcoil_sync.testing._internal.serve import kubeconfig, write_kubeconfig

    with Emulator() as emulator, tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "kubeconfig")
        write_kubeconfig(path, kubeconfig(emulator))
        say("# Versions and conversion on the emulator\n")
        run(path, options.kubectl, options.objects)


if __name__ == "__main__":
    main()
