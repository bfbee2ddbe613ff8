"""Conversion webhook benchmark: ConversionReview v1 through the operator's TLS WebhookHost.

    python bench/conversion.py [--seconds 3] [--clients 1,8] [--batch 1,100] [--json out.json]

The webhook serves examples/versioned_operator.py's Gizmo (v1alpha1 <-> v1, a renamed field
and the stash annotation) in a child process (``--serve DIR``), as the operator runs it
(`AdmissionWebhook` behind `WebhookHost`); client threads in this process POST reviews of
``batch`` objects over kept-alive TLS connections, half v1alpha1 -> v1, half v1 -> v1alpha1
(which needs the stash: replicas != 1). Per client count and batch: reviews/s, objects/s,
p50/p99 latency of a review, and the server's CPU seconds per object (from /proc). Figures
share the machine with everything else running: record ``uptime`` beside them.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import ssl
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

GROUP = "examples.cloudcoil.dev"
PATH = f"/convert/gizmos.{GROUP}"


def serve(directory: str) -> None:
    """Child: serve the conversion, print ``port`` then wait for stdin to close."""
    from testing.conversion_server import ConversionServer

    from examples.versioned_operator import GIZMOS

    server = ConversionServer(Path(directory), GIZMOS).start()
    (Path(directory) / "ca.b64").write_text(server.ca_bundle)
    print(server.port, flush=True)
    sys.stdin.read()
    server.stop()


def objects(batch: int, upward: bool) -> list[dict[str, Any]]:
    found = []
    for i in range(batch):
        metadata = {"name": f"g{i}", "namespace": "bench", "uid": f"u{i}", "resourceVersion": "1"}
        if upward:
            body = {"spec": {"greeting": f"hello {i}"}}
            version = "v1alpha1"
        else:
            body = {"spec": {"message": f"hello {i}", "replicas": 3}}
            version = "v1"
        found.append(
            {"apiVersion": f"{GROUP}/{version}", "kind": "Gizmo", "metadata": metadata, **body}
        )
    return found


def review(batch: int, upward: bool) -> bytes:
    desired = f"{GROUP}/{'v1' if upward else 'v1alpha1'}"
    request = {"uid": "bench", "desiredAPIVersion": desired, "objects": objects(batch, upward)}
    document = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": request,
    }
    return json.dumps(document).encode()


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    port: int, context: ssl.SSLContext, clients: int, batch: int, seconds: float, pid: int
) -> dict[str, Any]:
    bodies = [review(batch, True), review(batch, False)]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    stop = threading.Event()
    start_gate = threading.Barrier(clients + 1)

    def client(slot: int) -> None:
        connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        headers = {"Content-Type": "application/json"}
        start_gate.wait()
        i = slot
        while not stop.is_set():
            began = time.perf_counter()
            connection.request("POST", PATH, body=bodies[i % 2], headers=headers)
            answer = connection.getresponse()
            data = answer.read()
            latencies[slot].append(time.perf_counter() - began)
            if answer.status != 200 or b'"Success"' not in data:
                raise SystemExit(f"conversion failed: {answer.status} {data[:200]!r}")
            i += 1
        connection.close()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    cpu_before = cpu_seconds(pid)
    start_gate.wait()
    began = time.perf_counter()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    cpu = cpu_seconds(pid) - cpu_before
    every = sorted(x for slot in latencies for x in slot)
    reviews = len(every)
    return {
        "clients": clients,
        "batch": batch,
        "reviews_per_s": round(reviews / elapsed, 1),
        "objects_per_s": round(reviews * batch / elapsed, 1),
        "p50_ms": round(every[len(every) // 2] * 1000, 2),
        "p99_ms": round(every[min(len(every) - 1, int(len(every) * 0.99))] * 1000, 2),
        "server_cpu_us_per_object": round(cpu / max(1, reviews * batch) * 1e6, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", default="1,8")
    parser.add_argument("--batch", default="1,100")
    parser.add_argument("--json")
    options = parser.parse_args()
    if options.serve:
        serve(options.serve)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        child = subprocess.Popen(
            [sys.executable, __file__, "--serve", tmp],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert child.stdout is not None and child.stdin is not None
            port = int(child.stdout.readline())
            import base64

            ca = base64.b64decode((Path(tmp) / "ca.b64").read_text()).decode()
            context = ssl.create_default_context(cadata=ca)
            for clients in (int(c) for c in options.clients.split(",")):
                for batch in (int(b) for b in options.batch.split(",")):
                    result = run(port, context, clients, batch, options.seconds, child.pid)
                    results.append(result)
                    print(json.dumps(result), flush=True)
        finally:
            if child.stdin is not None:
                child.stdin.close()
            child.wait(30)
    print(f"load: {os.getloadavg()}", file=sys.stderr)
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
