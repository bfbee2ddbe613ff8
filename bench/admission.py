"""Micro benchmark of admission serving: requests/s and latency over TLS (not a test).

The server (AdmissionWebhook behind WebhookHost) runs in a child process so that client and
server do not share a GIL; both share the machine's cores, so read the figures as relative.

    python bench/admission.py [--seconds 5] [--clients 1,4] [--threads 4]

Scenarios: TLS keep-alive (one connection per client, many requests), a new TLS connection
per request, and the same app on plain waitress over its Unix socket (no TLS front) as the
baseline the front's cost is measured against.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PATH = "/validate/configmaps"


def build_app() -> Any:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.admission.request import AdmissionDenied, AdmissionRequest
    from cloudcoil_sync.admission.routes import AdmissionRoutes
    from cloudcoil_sync.admission.webhook import AdmissionWebhook

    table = AdmissionRoutes()

    @table.validating(ConfigMap, path=PATH)
    def check(request: AdmissionRequest[ConfigMap]) -> None:
        if request.resource is not None and "forbidden" in (request.resource.data or {}):
            raise AdmissionDenied("forbidden key")

    return AdmissionWebhook(table)


def review_body() -> bytes:
    obj = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "default", "labels": {"app": "bench"}},
        "data": {f"key{i}": "v" * 32 for i in range(16)},
    }
    document = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "name": "settings",
            "namespace": "default",
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "userInfo": {"username": "bench", "groups": ["system:masters"]},
        },
    }
    return json.dumps(document).encode()


# -- server (child process) ------------------------------------------------------------------


def serve(directory: str, threads: int, plain: bool) -> None:
    app = build_app()
    if plain:
        import waitress

        path = os.path.join(directory, "plain.sock")
        server = waitress.create_server(app, unix_socket=path, threads=threads)
        print(f"unix:{path}", flush=True)
        server.run()
        return
    from cloudcoil_sync.admission.server import WebhookHost

    host = WebhookHost(
        app,
        certfile=os.path.join(directory, "tls.crt"),
        keyfile=os.path.join(directory, "tls.key"),
        host="127.0.0.1",
        port=0,
        threads=threads,
    )
    host.start()
    print(f"tcp:{host.address[1]}", flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    host.stop(5)
    app.close()


# -- client ----------------------------------------------------------------------------------


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: str) -> None:
        super().__init__("localhost", timeout=10)
        self.path = path

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def run_clients(
    connect: Any, clients: int, seconds: float, body: bytes, reuse: bool
) -> tuple[int, list[float], float]:
    latencies: list[list[float]] = [[] for _ in range(clients)]
    stop_at = time.perf_counter() + seconds
    headers = {"Content-Type": "application/json"}

    def client(index: int) -> None:
        connection = connect()
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            connection.request("POST", PATH, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                raise RuntimeError(f"unexpected status {response.status}")
            latencies[index].append(time.perf_counter() - started)
            if not reuse:
                connection.close()
                connection = connect()
        connection.close()

    started = time.perf_counter()
    workers = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    flat = sorted(value for values in latencies for value in values)
    return len(flat), flat, elapsed


def report(name: str, clients: int, count: int, latencies: list[float], elapsed: float) -> None:
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(
        f"{name:<28} clients={clients:<3} {count / elapsed:8.0f} req/s   "
        f"p50 {p50:6.2f} ms   p99 {p99:6.2f} ms   ({count} requests)"
    )


def start_server(directory: str, threads: int, plain: bool) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, __file__, "--serve", directory, "--threads", str(threads)]
    if plain:
        command.append("--plain")
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def stop_server(child: subprocess.Popen[str], plain: bool) -> None:
    if plain:
        child.terminate()
    else:
        assert child.stdin is not None
        child.stdin.close()
    child.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", default="1,4")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--serve", help=argparse.SUPPRESS)
    parser.add_argument("--plain", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        serve(options.serve, options.threads, options.plain)
        return

    from tests.admission.certs import CertificateAuthority

    body = review_body()
    with tempfile.TemporaryDirectory() as directory:
        authority = CertificateAuthority()
        authority.issue(Path(directory))
        context = ssl.create_default_context(cadata=authority.pem.decode())
        print(f"AdmissionReview body {len(body)} bytes; {os.cpu_count()} CPUs; server threads "
              f"{options.threads}")  # fmt: skip
        child, address = start_server(directory, options.threads, plain=False)
        port = int(address.split(":", 1)[1])
        try:

            def tls() -> http.client.HTTPSConnection:
                return http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)

            for clients in (int(value) for value in options.clients.split(",")):
                report("TLS keep-alive", clients, *run_clients(tls, clients, options.seconds,
                    body, reuse=True))  # fmt: skip
            report("TLS new connection each", 1, *run_clients(tls, 1, options.seconds, body,
                reuse=False))  # fmt: skip
        finally:
            stop_server(child, plain=False)
        child, address = start_server(directory, options.threads, plain=True)
        path = address.split(":", 1)[1]
        try:
            for clients in (int(value) for value in options.clients.split(",")):
                report("plain waitress (unix)", clients, *run_clients(lambda: UnixConnection(
                    path), clients, options.seconds, body, reuse=True))  # fmt: skip
        finally:
            stop_server(child, plain=True)


if __name__ == "__main__":
    main()
