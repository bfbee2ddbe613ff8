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
import logging
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
    """Serve until stdin closes; print the address, then CPU seconds used while serving."""
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth" notes
    app = build_app()
    if plain:
        import waitress

        path = os.path.join(directory, "plain.sock")
        server = waitress.create_server(app, unix_socket=path, threads=threads)
        threading.Thread(target=server.run, daemon=True).start()
        address = f"unix:{path}"
    else:
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
        address = f"tcp:{host.address[1]}"
    started = time.process_time()
    print(address, flush=True)
    sys.stdin.read()  # until the parent closes our stdin
    print(time.process_time() - started, flush=True)
    if not plain:
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

    errors: list[BaseException] = []

    def client(index: int) -> None:
        connection = connect()
        try:
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
        except Exception as error:  # reported below; a benchmark must not hide failures
            errors.append(error)
        finally:
            connection.close()

    started = time.perf_counter()
    workers = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed, first: {errors[0]!r}")
    flat = sorted(value for values in latencies for value in values)
    return len(flat), flat, elapsed


def report(
    name: str, clients: int, result: tuple[int, list[float], float], server_cpu: float
) -> None:
    count, latencies, elapsed = result
    p50 = statistics.median(latencies) * 1000
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000
    print(
        f"{name:<26} clients={clients:<2} {count / elapsed:7.0f} req/s  p50 {p50:6.2f} ms  "
        f"p99 {p99:6.2f} ms  server CPU {server_cpu / count * 1000:5.2f} ms/req  ({count} req)"
    )


def start_server(directory: str, threads: int, plain: bool) -> tuple[subprocess.Popen[str], str]:
    command = [sys.executable, __file__, "--serve", directory, "--threads", str(threads)]
    if plain:
        command.append("--plain")
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None
    return child, child.stdout.readline().strip()


def stop_server(child: subprocess.Popen[str]) -> float:
    """Stop the child; the CPU seconds it spent serving."""
    assert child.stdin is not None and child.stdout is not None
    child.stdin.close()
    cpu = float(child.stdout.readline())
    child.wait(10)
    return cpu


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
    client_counts = [int(value) for value in options.clients.split(",")]
    scenarios = [("TLS keep-alive", False, clients, True) for clients in client_counts]
    scenarios.append(("TLS new connection each", False, 1, False))
    scenarios += [("plain waitress (unix)", True, clients, True) for clients in client_counts]
    with tempfile.TemporaryDirectory() as directory:
        authority = CertificateAuthority()
        authority.issue(Path(directory))
        context = ssl.create_default_context(cadata=authority.pem.decode())
        print(
            f"AdmissionReview body {len(body)} bytes; {os.cpu_count()} CPUs; "
            f"server threads {options.threads}; {options.seconds:g} s per scenario"
        )
        for name, plain, clients, reuse in scenarios:
            child, address = start_server(directory, options.threads, plain)
            connect = _connector(address, context)
            try:
                result = run_clients(connect, clients, options.seconds, body, reuse)
            finally:
                cpu = stop_server(child)
            report(name, clients, result, cpu)


def _connector(address: str, context: ssl.SSLContext) -> Any:
    scheme, where = address.split(":", 1)
    if scheme == "unix":
        return lambda: UnixConnection(where)
    return lambda: http.client.HTTPSConnection("127.0.0.1", int(where), context=context, timeout=10)


if __name__ == "__main__":
    main()
