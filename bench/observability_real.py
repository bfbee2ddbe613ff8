"""Causes, changes, health checks and spans of the widget operator on a real API server.

Runs ``examples/widget_operator.py`` (``run --log-level debug --log-format json``) in a child
process against ``KUBECONFIG``, in its own namespace (``i42-obs``, deleted afterwards; the
Widget CRD is installed if absent and left installed), with
a HealthServer, one user health check (``upstream``, period 2 s, failing while a flag file
exists) and OpenTelemetry's SDK exporting every span as a JSON line to a file. Then:

1. deletes the Widget's child ConfigMap: the pass that follows names it as its cause, in its
   log line and its span;
2. edits one spec field: one pass has it as cause, and its changes name that path;
3. makes the health check fail: ``/readyz`` turns 503 within the check's period;
4. reads the span file: a pass span with its API request spans under it.

Writes the findings as markdown (``--out``, default bench/observability-results.md).

    KUBECONFIG=... python bench/observability_real.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

NAMESPACE = "i42-obs"
PERIOD = 2.0

RUNNER = """
import sys, os
sys.path.insert(0, {root!r})
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor
from cloudcoil_sync.controller import HealthServer, enable_tracing
from examples.widget_operator import app

spans = open({spans!r}, "w", buffering=1)
provider = TracerProvider()
exporter = ConsoleSpanExporter(out=spans, formatter=lambda s: s.to_json(indent=None) + "\\n")
provider.add_span_processor(SimpleSpanProcessor(exporter))
enable_tracing(provider)
app.health = HealthServer(port={health_port})

@app.health_check(period={period}, timeout=1)
def upstream() -> bool:
    return not os.path.exists({flag!r})

app.main()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    give_up = time.monotonic() + timeout
    while time.monotonic() < give_up:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def json_lines(path: Path) -> list[dict[str, Any]]:
    found = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                found.append(json.loads(line))
    return found


class Cluster:
    def __init__(self) -> None:
        from cloudcoil_sync.client import Config

        self.config = Config.from_kubeconfig(namespace=NAMESPACE)

    def setup(self) -> None:
        from cloudcoil_sync.client import AlreadyExists
        from cloudcoil_sync.crd import CRD
        from examples.widget_operator import Widget

        crds = self.config.client(("apiextensions.k8s.io", "v1", "customresourcedefinitions"))
        with contextlib.suppress(AlreadyExists):  # installed already
            crds.create(CRD(Widget).manifest())
        wait("the Widget CRD", lambda: _established(crds.get("widgets.examples.cloudcoil.dev")))
        namespaces = self.config.client(("", "v1", "namespaces"))
        namespaces.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        )

    def widgets(self) -> Any:
        return self.config.client(("examples.cloudcoil.dev", "v1alpha1", "widgets"))

    def configmaps(self) -> Any:
        return self.config.client(("", "v1", "configmaps"))

    def teardown(self) -> None:
        namespaces = self.config.client(("", "v1", "namespaces"))
        try:
            namespaces.delete(NAMESPACE)
        except Exception as error:  # best effort: say so
            print(f"could not delete namespace {NAMESPACE}: {error}", file=sys.stderr)


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def passes(log: Path) -> list[dict[str, Any]]:
    """The controller's own lines (its debug line per pass, its pass outcome lines)."""
    return [
        r for r in json_lines(log)
        if str(r.get("logger", "")).startswith("cloudcoil_sync.controller.")
        and r.get("kind") == "Widget"
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", default=str(ROOT / "bench" / "observability-results.md"))
    args = parser.parse_args()
    if not os.environ.get("KUBECONFIG"):
        raise SystemExit("set KUBECONFIG to the cluster to use")
    work = Path(tempfile.mkdtemp(prefix="i42-obs-"))
    spans, flag, log = work / "spans.jsonl", work / "upstream-down", work / "operator.log"
    health_port, webhook_port = free_port(), free_port()
    runner = work / "runner.py"
    runner.write_text(
        RUNNER.format(
            root=str(ROOT), spans=str(spans), health_port=health_port, period=PERIOD, flag=str(flag)
        )
    )
    env = {**os.environ, "CLOUDCOIL_NAMESPACE": NAMESPACE}
    subprocess.run(
        [sys.executable, str(runner), "certs", "--dir", str(work / "tls")], env=env, check=True
    )
    cluster = Cluster()
    cluster.setup()
    load = os.getloadavg()[0]
    command = [
        sys.executable, str(runner), "run", "--log-level", "debug", "--log-format", "json",
        "--tls-dir", str(work / "tls"), "--webhook-host", "127.0.0.1",
        "--webhook-port", str(webhook_port),
    ]  # fmt: skip
    with open(log, "w") as stderr:
        child = subprocess.Popen(command, env=env, stderr=stderr, stdout=subprocess.DEVNULL)
    try:
        report = observe(cluster, health_port, log, spans, flag)
    finally:
        child.send_signal(signal.SIGTERM)
        try:
            child.wait(60)
        except subprocess.TimeoutExpired:
            child.kill()
        cluster.teardown()
    report.append(f"\nLoad (1 min) at the start: {load:.2f}. Files: {work}.")
    Path(args.out).write_text("\n".join(report) + "\n")
    print("\n".join(report))


def readyz(port: int, query: str = "") -> tuple[int, str]:
    answer = requests.get(f"http://127.0.0.1:{port}/readyz{query}", timeout=5)
    return answer.status_code, answer.text


def observe(cluster: Cluster, port: int, log: Path, spans: Path, flag: Path) -> list[str]:
    out = ["# Observability on the real control plane (issue 42)", ""]
    out.append(
        f"`examples/widget_operator.py run` in namespace `{NAMESPACE}` on kube-apiserver 1.32, "
        "`--log-level debug --log-format json`, spans to a file (OTel SDK)."
    )
    wait("/readyz", lambda: _safe(lambda: readyz(port)[0] == 200))
    out += [
        "",
        "## /readyz?verbose once running",
        "",
        "```",
        readyz(port, "?verbose")[1].rstrip(),
        "```",
    ]
    cluster.widgets().create(
        {
            "apiVersion": "examples.cloudcoil.dev/v1alpha1",
            "kind": "Widget",
            "metadata": {"name": "w1", "namespace": NAMESPACE},
            "spec": {"message": "hello", "replicas": 1},
        }
    )
    wait("the child ConfigMap", lambda: _safe(lambda: cluster.configmaps().get("w1-config")))
    wait("the first passes", lambda: any("added" in r["message"] for r in passes(log)))
    time.sleep(3)  # let the create's echo passes run (their lines are not the ones counted)
    out += child_deleted(cluster, log, spans)
    out += spec_edited(cluster, log)
    out += health_fails(port, flag)
    out += nesting(spans)
    return out


def _safe(check: Callable[[], Any]) -> Any:
    try:
        return check()
    except Exception:
        return None


def cause_lines(log: Path, text: str) -> list[dict[str, Any]]:
    return [r for r in passes(log) if r["message"].startswith("Pass ") and text in r["message"]]


def child_deleted(cluster: Cluster, log: Path, spans: Path) -> list[str]:
    cause = f"child ConfigMap {NAMESPACE}/w1-config deleted"
    cluster.configmaps().delete("w1-config")
    wait("the child's pass", lambda: cause_lines(log, cause))
    wait("its span", lambda: _pass_spans(spans, cause))
    time.sleep(2)  # a second pass for the same cause would show by now
    lines, found = cause_lines(log, cause), _pass_spans(spans, cause)
    span = found[0]
    return [
        "", "## 1. A child deleted", "",
        f"`kubectl delete configmap w1-config`: {len(lines)} pass(es) with the cause `{cause}`.",
        "", "Its log line (JSON):", "", "```json", json.dumps(lines[0]), "```", "",
        "Its span:", "", "```json",
        json.dumps({"name": span["name"], "attributes": span["attributes"]}, indent=1), "```",
    ]  # fmt: skip


def _pass_spans(path: Path, cause: str) -> list[dict[str, Any]]:
    return [
        span for span in json_lines(path)
        if span.get("name", "").startswith("reconcile ")
        and cause in span.get("attributes", {}).get("cloudcoil.causes", [])
    ]  # fmt: skip


def spec_edited(cluster: Cluster, log: Path) -> list[str]:
    cluster.widgets().merge_patch("w1", {"spec": {"message": "hello again"}})
    wait("the edit's pass", lambda: cause_lines(log, "spec (spec.message)"))
    wait("its changes", lambda: _changes(log))
    time.sleep(2)
    lines = cause_lines(log, "spec (spec.message)")
    changes = _changes(log)
    return [
        "", "## 2. One spec field edited", "",
        f"`spec.message: hello → hello again`: {len(lines)} pass(es) caused by it.", "",
        "```json", json.dumps(lines[0]), json.dumps(changes[0]), "```",
    ]  # fmt: skip


def _changes(log: Path) -> list[dict[str, Any]]:
    return [r for r in passes(log) if "spec.message: 'hello' -> 'hello again'" in r["message"]]


def health_fails(port: int, flag: Path) -> list[str]:
    polled = time.monotonic() + PERIOD + 0.5
    while time.monotonic() < polled:  # probed all along: the check's result is fresh
        assert readyz(port)[0] == 200
        time.sleep(0.1)
    flag.write_text("down")
    started = time.monotonic()
    wait("/readyz 503", lambda: _safe(lambda: readyz(port)[0] == 503), timeout=30)
    took = time.monotonic() - started
    body = readyz(port, "?verbose")[1].rstrip()
    flag.unlink()
    wait("/readyz 200 again", lambda: _safe(lambda: readyz(port)[0] == 200), timeout=30)
    return [
        "", "## 3. A user health check failing", "",
        f"`upstream` (period {PERIOD:g} s) starts failing: `/readyz` answered 503 after "
        f"{took:.2f} s (polled every 0.1 s), and 200 again once it passed.", "",
        "```", body, "```",
    ]  # fmt: skip


def nesting(path: Path) -> list[str]:
    found = json_lines(path)
    by_parent: dict[str, list[dict[str, Any]]] = {}
    for span in found:
        parent = span.get("parent_id")
        if parent:
            by_parent.setdefault(parent, []).append(span)
    passes_ = [s for s in found if s.get("name", "").startswith("reconcile ")]
    with_children = [s for s in passes_ if by_parent.get(s["context"]["span_id"])]
    example = with_children[-1]
    lines = [f"{example['name']}  causes={example['attributes'].get('cloudcoil.causes')}"]
    lines += [
        f"  └ {child['name']}  ({child['kind']}, "
        f"{child['attributes'].get('http.response.status_code')})"
        for child in by_parent[example["context"]["span_id"]]
    ]
    return [
        "", "## 4. Spans: pass → API requests", "",
        f"{len(found)} spans exported; {len(passes_)} pass spans, {len(with_children)} with "
        "API request spans under them (same trace, parent = the pass). One of them:", "",
        "```", *lines, "```",
    ]  # fmt: skip


if __name__ == "__main__":
    main()
