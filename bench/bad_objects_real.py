"""Issue 36 on a real kube-apiserver: one bad object never takes the operator down.

Given KUBECONFIG (a real API server; nothing else is touched but what this script creates):

1. a CRD whose schema admits objects the operator's model rejects (``spec`` and ``status``
   are ``x-kubernetes-preserve-unknown-fields``, as an older, looser schema would),
   20 valid objects and 1 invalid one (no ``spec.target``), and a ConfigMap the operator
   watches with a mapper that lists the primary kind (the dependency_rollout pattern);
2. the operator as a subprocess (``python op.py run``, leader election on), restarted once
   with SIGTERM: it must stay up, converge the 20 valid objects (``Ready=True``) and put
   ``Ready=False``/``InvalidObject`` (naming ``spec.target``) and a Warning Event on the bad
   one, and the mapper must run on a ConfigMap change after each start; fixed, the bad
   object must become Ready at once (it is looked at again when it changes);
3. an operator with two controllers for one kind: ``manifests`` and ``run`` must fail at
   definition, naming both;
4. an operator whose Lease namespace does not exist: the WARNING must come within 5 s.

Prints the figures and exits non-zero if a check fails. Its namespaces and CRD are deleted
at the end. Usage: ``KUBECONFIG=... python bench/bad_objects_real.py [--valid 20]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from cloudcoil_sync.client import Config, NotFound

RUN = uuid.uuid4().hex[:6]
GROUP = f"b36x{RUN}.bench.cloudcoil.dev"
NAMESPACE = f"b36-{RUN}"
CRDS = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")
GADGETS = (GROUP, "v1", "gadgets")
EVENTS = ("events.k8s.io", "v1", "events")

OPERATOR = """
import sys
from typing import Literal

from cloudcoil.models.kubernetes.core.v1 import ConfigMap
from cloudcoil.pydantic import BaseModel
from cloudcoil.resources import Resource
from pydantic import Field

from cloudcoil_sync.application import Application
from cloudcoil_sync.controller import Context, LeaderElection, ReconcileStatus, ResourceKey
from cloudcoil_sync.crd import custom_resource


class GadgetSpec(BaseModel):
    target: str
    replicas: int = 1


class GadgetStatus(ReconcileStatus):
    seen: str | None = None


@custom_resource(api_version="{group}/v1", plural="gadgets")
class Gadget(Resource):
    api_version: Literal["{group}/v1"] = Field(default="{group}/v1", alias="apiVersion")
    kind: Literal["Gadget"] = "Gadget"
    spec: GadgetSpec
    status: GadgetStatus | None = None


app = Application("{name}", namespace="{namespace}", leader_election={election})
gadgets = app.controller(Gadget, workers=4{options})


@gadgets.watch(ConfigMap)
def every_gadget(config: ConfigMap):
    print("MAPPER", config.name, flush=True)
    return [ResourceKey(g.name, "{namespace}") for g in gadgets.cached(Gadget).list()]


@gadgets.stage(condition="Seen")
def seen(gadget: Gadget, ctx: Context[Gadget]) -> None:
    ctx.set_status(seen=gadget.spec.target)

{extra}

if __name__ == "__main__":
    import time

    print("STARTED", time.time(), flush=True)  # imports done: the operator's own clock
    app.main()
"""

SECOND = """
second = app.controller(Gadget, name="second")


@second.reconcile()
def also(gadget: Gadget) -> None:
    pass
"""


def operator(folder: Path, name: str, *, election: str, extra: str = "", options: str = "") -> Path:
    path = folder / f"{name}.py"
    path.write_text(
        OPERATOR.format(
            group=GROUP,
            namespace=NAMESPACE,
            name=name,
            election=election,
            extra=extra,
            options=options,
        )
    )
    return path


def crd() -> dict[str, Any]:
    loose = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"gadgets.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget",
                      "listKind": "GadgetList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": True, "storage": True,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": loose, "status": loose}}},
            }],
        },
    }  # fmt: skip


def wait(predicate: Any, timeout: float, what: str) -> float:
    """Seconds until `predicate()` held (polled: a bench, not a test)."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"FAILED: {what} within {timeout:g}s")
        time.sleep(0.2)
    return time.monotonic() - started


def after_start(text: str, needle: str) -> float | None:
    """Seconds from the operator's last STARTED line (imports done) to the first log line
    after it with `needle` (log lines carry local-time stamps with milliseconds)."""
    if "STARTED " not in text:
        return None
    tail = "STARTED " + text.rsplit("STARTED ", 1)[1]
    started, *lines = tail.splitlines()
    line = next((line for line in lines if needle in line), None)
    if line is None:
        return None
    stamp = datetime.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
    return round(stamp - float(started.split()[1]), 3)


def ready(item: dict[str, Any]) -> dict[str, Any]:
    conditions = (item.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == "Ready"), {})


class Operator:
    def __init__(self, script: Path, log: Path, *args: str) -> None:
        self.log = log
        self.out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, str(script), *(args or ("run",))],
            stdout=self.out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self.out.close()
        return code


def converge(
    config: Config, api: Any, op: Operator, valid: int, figures: dict[str, Any], tag: str
) -> None:
    def state() -> tuple[int, dict[str, Any]]:
        items = {i["metadata"]["name"]: i for i in api.list(namespace=NAMESPACE).items}
        good = sum(1 for n, i in items.items() if n != "bad" and ready(i).get("status") == "True")
        return good, ready(items.get("bad", {}))

    def done() -> bool:
        if op.proc.poll() is not None:
            return True
        good, bad = state()
        return good == valid and bad.get("reason") == "InvalidObject"

    figures[f"{tag}_converge_s"] = round(wait(done, 180, f"{tag}: converge"), 2)
    if op.proc.poll() is not None:
        raise SystemExit(f"FAILED: {tag}: the operator exited\n{op.text()[-3000:]}")
    good, bad = state()
    figures[f"{tag}_valid_ready"] = good
    figures[f"{tag}_bad_ready"] = {k: bad.get(k) for k in ("status", "reason", "message")}
    if "spec.target" not in (bad.get("message") or ""):
        raise SystemExit(f"FAILED: {tag}: the bad object's condition does not name spec.target")


def mapper_runs(config: Config, op: Operator, tag: str, figures: dict[str, Any]) -> None:
    before = op.text().count("MAPPER")
    configs = config.client(("", "v1", "configmaps"))
    configs.merge_patch("settings", {"data": {"touched": tag}}, namespace=NAMESPACE)
    figures[f"{tag}_mapper_event_s"] = round(
        wait(lambda: op.text().count("MAPPER") > before, 30, f"{tag}: the mapper ran"), 2
    )
    if op.proc.poll() is not None:
        raise SystemExit(f"FAILED: {tag}: the operator exited after a mapper event")


def fix_the_bad_one(api: Any, op: Operator, figures: dict[str, Any]) -> None:
    """Fixed, the bad object is reconciled at once (it is looked at again when it changes)."""
    api.merge_patch("bad", {"spec": {"target": "fixed", "replicas": 2}}, namespace=NAMESPACE)

    def fixed() -> bool:
        return ready(api.get("bad", namespace=NAMESPACE)).get("status") == "True"

    figures["fixed_bad_ready_s"] = round(wait(fixed, 60, "the fixed object Ready"), 2)
    if op.proc.poll() is not None:
        raise SystemExit("FAILED: the operator exited")


def start_and_check(
    config: Config, api: Any, script: Path, log: Path, tag: str, valid: int, figures: dict[str, Any]
) -> None:
    """Start the operator, wait for "is running", check convergence and a mapper event, stop."""
    started = time.monotonic()
    running = log.read_text().count("Operator op is running") if log.exists() else 0
    op = Operator(script, log)

    def up() -> bool:
        return op.text().count("Operator op is running") > running or op.proc.poll() is not None

    try:
        seconds = wait(up, 120, f"{tag}: 'Operator op is running'")
        figures[f"{tag}_running_from_spawn_s"] = round(seconds, 2)
        figures[f"{tag}_running_from_start_s"] = after_start(op.text(), "Operator op is running")
        converge(config, api, op, valid, figures, tag)
        mapper_runs(config, op, tag, figures)
        if tag == "after_restart":
            fix_the_bad_one(api, op, figures)
        figures[f"{tag}_up_s"] = round(time.monotonic() - started, 2)
    finally:
        figures[f"{tag}_exit_code"] = op.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--valid", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="leave the namespace and CRD")
    args = parser.parse_args()
    if not os.environ.get("KUBECONFIG"):
        raise SystemExit("set KUBECONFIG to a real API server")
    config = Config.from_kubeconfig()
    folder = Path(tempfile.mkdtemp(prefix="cc-b36-"))
    figures: dict[str, Any] = {"namespace": NAMESPACE, "group": GROUP, "logs": str(folder)}
    crds = config.client(CRDS)
    try:
        config.client(("", "v1", "namespaces")).create({"metadata": {"name": NAMESPACE}})
        crds.create(crd())
        wait(lambda: any(c.get("type") == "Established" and c.get("status") == "True"
                         for c in (crds.get(f"gadgets.{GROUP}").get("status") or {})
                         .get("conditions") or []), 60, "CRD established")  # fmt: skip
        api = config.client(GADGETS)
        wait(lambda: _served(api), 60, "the CRD served")
        for index in range(args.valid):
            api.create({"apiVersion": f"{GROUP}/v1", "kind": "Gadget",
                        "metadata": {"name": f"g{index:02d}", "namespace": NAMESPACE},
                        "spec": {"target": f"t{index}"}}, namespace=NAMESPACE)  # fmt: skip
        api.create({"apiVersion": f"{GROUP}/v1", "kind": "Gadget",
                    "metadata": {"name": "bad", "namespace": NAMESPACE},
                    "spec": {"replicas": "many"}}, namespace=NAMESPACE)  # fmt: skip
        config.client(("", "v1", "configmaps")).create(
            {"metadata": {"name": "settings", "namespace": NAMESPACE}}, namespace=NAMESPACE
        )
        election = 'LeaderElection("b36-op")'
        script = operator(folder, "op", election=election)
        log = folder / "op.log"
        for tag in ("first_start", "after_restart"):
            start_and_check(config, api, script, log, tag, args.valid, figures)
        text = log.read_text(errors="replace")
        figures["operator_tracebacks"] = text.count("Traceback")
        figures["invalid_log_lines"] = sum(
            1 for line in text.splitlines() if "Gadget " + NAMESPACE + "/bad does not fit" in line
        )
        events = config.client(EVENTS).list(namespace=NAMESPACE).items
        figures["invalid_object_events"] = sum(
            1 for e in events if e.get("reason") == "InvalidObject" and e.get("type") == "Warning"
        )
        if figures["first_start_exit_code"] != 0 or figures["after_restart_exit_code"] != 0:
            raise SystemExit(f"FAILED: the operator did not exit 0 on SIGTERM\n{text[-3000:]}")
        if figures["invalid_object_events"] < 1:
            raise SystemExit("FAILED: no InvalidObject Warning Event")
        two_controllers(folder, figures)
        missing_namespace(folder, figures)
    finally:
        print(json.dumps(figures, indent=2))
        if not args.keep:
            _cleanup(config, crds)
        config.close()
    print("OK")


def two_controllers(folder: Path, figures: dict[str, Any]) -> None:
    script = operator(folder, "two", election="None", extra=SECOND)
    for command in ("manifests", "run"):
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, str(script), command], capture_output=True, text=True, timeout=120
        )
        line = done.stderr.strip().splitlines()[-1] if done.stderr.strip() else ""
        figures[f"two_controllers_{command}"] = {
            "exit_code": done.returncode, "seconds": round(time.monotonic() - started, 2),
            "stderr": line,
        }  # fmt: skip
        if done.returncode == 0 or "Two controllers reconcile the same Gadget" not in line:
            raise SystemExit(f"FAILED: two controllers for one kind were accepted by {command}")


def missing_namespace(folder: Path, figures: dict[str, Any]) -> None:
    missing = f"b36-missing-{RUN}"
    script = operator(
        folder, "lease", election=f'LeaderElection("b36-lease", namespace="{missing}")'
    )
    log = folder / "lease.log"
    started = time.monotonic()
    op = Operator(script, log)
    try:
        text = f"namespace '{missing}' does not exist"
        seconds = wait(lambda: text in op.text() or op.proc.poll() is not None, 30, "the warning")
        figures["missing_lease_namespace_warning_from_spawn_s"] = round(seconds, 2)
        own = after_start(op.text(), text)
        figures["missing_lease_namespace_warning_from_start_s"] = own
        lines = [line for line in op.text().splitlines() if text in line]
        figures["missing_lease_namespace_line"] = lines[0] if lines else None
        if not lines or "WARNING" not in lines[0] or own is None or own > 5:
            raise SystemExit("FAILED: no WARNING about the missing Lease namespace within 5 s")
    finally:
        op.stop()
        figures["missing_lease_namespace_total_s"] = round(time.monotonic() - started, 2)


def _served(api: Any) -> bool:
    try:
        api.list(namespace=NAMESPACE)
    except NotFound:
        return False
    return True


def _cleanup(config: Config, crds: Any) -> None:
    for delete in (
        lambda: config.client(("", "v1", "namespaces")).delete(NAMESPACE),
        lambda: crds.delete(f"gadgets.{GROUP}"),
    ):
        try:
            delete()
        except Exception as error:  # best effort: report and go on
            print(f"cleanup: {error}", file=sys.stderr)


if __name__ == "__main__":
    main()
