"""Admission serving benchmark: cloudcoil_sync vs kopf 1.45 vs a bare waitress floor (not a test).

    python bench/admission.py [--seconds 3] [--clients 1,8,32] [--threads 4]
                              [--cloudcoil-threads 0] [--contenders cloudcoil,kopf,floor]
                              [--json out.json]

Each server runs in its own child process (`--serve NAME DIR`) with a validating and a mutating
route; the client threads run in this (driver) process, so client and server do not share a
GIL but do share the machine's cores: read the figures as ratios within one run.

- cloudcoil: `AdmissionWebhook` behind `WebhookHost` as the operator runs it (TLS front;
  waitress's parser and tasks on each connection's thread; `--cloudcoil-threads` N > 0 bounds
  concurrent app calls, 0 = the default, no bound beyond the connection limit).
- kopf: `kopf.run(standalone=True)` against the bench emulator (its API discovery is needed to
  resolve "configmaps"), `settings.admission.server = kopf.WebhookServer(certfile, pkeyfile)`,
  `settings.admission.managed = None`, `@kopf.on.validate` / `@kopf.on.mutate` handlers.
- floor: the same `AdmissionWebhook` on plain waitress over TCP (no TLS), `--threads` workers.

Per contender, route and client count: requests/s, p50/p99 latency, and the server process's
CPU seconds (user+system from /proc, over the measured window) per request. Then the stall
check: 8 keep-alive clients alone, and with a 9th client opening a new TLS connection per
request; the keep-alive p99 of both runs is reported.
"""

from __future__ import annotations

import argparse
import http.client
import json
import logging
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

ROUTES = {"validating": "/validate-configmaps", "mutating": "/mutate-configmaps"}
CONTENDERS = ("cloudcoil", "kopf", "floor")
FORBIDDEN = "forbidden"
LABEL = "bench.cloudcoil.io/mutated"
Connect = Callable[[], http.client.HTTPConnection]


def build_app() -> Any:
    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync.admission._internal.request import AdmissionDenied, AdmissionRequest
    from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
    from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

    table = AdmissionRoutes()

    @table.validating(ConfigMap, path=ROUTES["validating"])
    def check(request: AdmissionRequest[ConfigMap]) -> None:
        if request.resource is not None and FORBIDDEN in (request.resource.data or {}):
            raise AdmissionDenied("forbidden key")

    @table.mutating(ConfigMap, path=ROUTES["mutating"])
    def label(request: AdmissionRequest[ConfigMap]) -> ConfigMap | None:
        cm = request.resource
        if cm is None or cm.metadata is None:
            return None
        cm.metadata.labels = {**(cm.metadata.labels or {}), LABEL: "true"}
        return cm

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
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "name": "settings",
            "namespace": "default",
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
            "userInfo": {"username": "bench", "groups": ["system:masters"]},
        },
    }
    return json.dumps(document).encode()


# -- servers (child processes) ---------------------------------------------------------------


def _wait_eof_then(stop: Callable[[], None]) -> None:
    def wait() -> None:
        sys.stdin.read()  # until the driver closes our stdin
        stop()

    threading.Thread(target=wait, name="bench-eof", daemon=True).start()


def serve_cloudcoil(directory: str, threads: int) -> None:
    from cloudcoil_sync.admission._internal.server import WebhookHost

    app = build_app()
    host = WebhookHost(
        app,
        certfile=os.path.join(directory, "tls.crt"),
        keyfile=os.path.join(directory, "tls.key"),
        host="127.0.0.1",
        port=0,
        threads=threads or None,
    )
    host.start()
    done = threading.Event()
    _wait_eof_then(done.set)
    print(f"https:{host.address[1]}", flush=True)
    done.wait()
    host.stop(5)
    app.close()


def serve_floor(directory: str, threads: int) -> None:
    import waitress

    app = build_app()
    server = waitress.create_server(app, host="127.0.0.1", port=0, threads=threads)
    thread = threading.Thread(target=server.run, name="bench-waitress", daemon=True)
    thread.start()
    done = threading.Event()
    _wait_eof_then(done.set)
    print(f"http:{server.effective_port}", flush=True)
    done.wait()
    server.close()


def serve_kopf(directory: str, threads: int) -> None:
    import kopf
    from kopf._core.actions import loggers

    loggers.configure(debug=False, verbose=False, quiet=True)
    port = int(os.environ["BENCH_KOPF_PORT"])
    namespace = os.environ["BENCH_NAMESPACE"]

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.posting.enabled = False
        settings.admission.managed = None
        settings.admission.server = kopf.WebhookServer(
            addr="127.0.0.1",
            port=port,
            host="127.0.0.1",
            certfile=os.path.join(directory, "tls.crt"),
            pkeyfile=os.path.join(directory, "tls.key"),
        )

    @kopf.on.validate("configmaps", id=ROUTES["validating"].lstrip("/"))
    def check(body: Any, **_: Any) -> None:
        if FORBIDDEN in (body.get("data") or {}):
            raise kopf.AdmissionError("forbidden key")

    @kopf.on.mutate("configmaps", id=ROUTES["mutating"].lstrip("/"))
    def label(patch: Any, **_: Any) -> None:
        patch.setdefault("metadata", {}).setdefault("labels", {})[LABEL] = "true"

    stop = threading.Event()
    _wait_eof_then(stop.set)
    print(f"https:{port}", flush=True)
    kopf.run(standalone=True, namespaces=[namespace], stop_flag=stop)


SERVERS = {"cloudcoil": serve_cloudcoil, "floor": serve_floor, "kopf": serve_kopf}


# -- driver side -----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One server child; `connect` makes a client connection to it."""

    def __init__(
        self, name: str, directory: str, threads: int, context: ssl.SSLContext, env: dict[str, str]
    ) -> None:
        command = [sys.executable, __file__, "--serve", name, directory, "--threads", str(threads)]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            cwd=ROOT,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            raise RuntimeError(f"{name} server failed: {self._stderr()}")
        scheme, port = line.split(":")
        self.tls = scheme == "https"
        self.port = int(port)
        self.context = context

    def connect(self) -> http.client.HTTPConnection:
        if self.tls:
            return http.client.HTTPSConnection(
                "127.0.0.1", self.port, context=self.context, timeout=30
            )
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def wait_ready(self, body: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection = self.connect()
                try:
                    for path in ROUTES.values():
                        status, _ = _post(connection, path, body)
                        if status != 200:
                            raise RuntimeError(f"{path}: status {status}")
                finally:
                    connection.close()
                return
            except (OSError, RuntimeError, http.client.HTTPException) as error:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"server not ready: {error!r}; {self._stderr()}") from error
                time.sleep(0.2)

    def cpu(self) -> float:
        from common import cpu_seconds

        return cpu_seconds(self.proc.pid)

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            return "(still running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read()[-2000:]

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _post(connection: http.client.HTTPConnection, path: str, body: bytes) -> tuple[int, bytes]:
    connection.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    data = response.read()
    return response.status, data


def check_answer(data: bytes, route: str) -> None:
    answer = json.loads(data)["response"]
    if not answer.get("allowed"):
        raise RuntimeError(f"{route}: not allowed: {answer}")
    if route == "mutating" and not answer.get("patch"):
        raise RuntimeError(f"mutating route answered without a patch: {answer}")


def run_clients(
    server: Server, path: str, body: bytes, clients: int, seconds: float, fresh: int = 0
) -> tuple[list[float], list[float], float]:
    """`clients` keep-alive clients plus `fresh` new-connection-per-request clients.

    Returns (keep-alive latencies, new-connection latencies, elapsed seconds).
    """
    kept: list[list[float]] = [[] for _ in range(clients + fresh)]
    errors: list[BaseException] = []
    start = threading.Barrier(clients + fresh + 1)
    stop_at = [0.0]

    def client(index: int, reuse: bool) -> None:
        connection = server.connect()
        try:
            start.wait(30)
            while time.perf_counter() < stop_at[0]:
                began = time.perf_counter()
                status, _ = _post(connection, path, body)
                if status != 200:
                    raise RuntimeError(f"unexpected status {status}")
                kept[index].append(time.perf_counter() - began)
                if not reuse:
                    connection.close()
                    connection = server.connect()
        except Exception as error:  # reported below; a benchmark must not hide failures
            errors.append(error)
        finally:
            connection.close()

    workers = [
        threading.Thread(target=client, args=(i, i < clients), daemon=True)
        for i in range(clients + fresh)
    ]
    for worker in workers:
        worker.start()
    stop_at[0] = time.perf_counter() + seconds
    started = time.perf_counter()
    start.wait(30)
    for worker in workers:
        worker.join(seconds + 60)
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"{len(errors)} client(s) failed, first: {errors[0]!r}")
    alive = sorted(v for values in kept[:clients] for v in values)
    new = sorted(v for values in kept[clients:] for v in values)
    return alive, new, elapsed


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(len(values) * q))] * 1000


def measure(
    server: Server, route: str, body: bytes, clients: int, seconds: float, fresh: int = 0
) -> dict[str, Any]:
    cpu_before, client_before = server.cpu(), time.process_time()
    alive, new, elapsed = run_clients(server, ROUTES[route], body, clients, seconds, fresh)
    cpu = server.cpu() - cpu_before
    client_cpu = time.process_time() - client_before
    count = len(alive) + len(new)
    return {
        "route": route,
        "clients": clients,
        "requests": count,
        "rps": round(count / elapsed, 1),
        "p50_ms": round(percentile(alive, 0.50), 2),
        "p99_ms": round(percentile(alive, 0.99), 2),
        "cpu_ms_per_request": round(cpu / max(count, 1) * 1000, 3),
        "client_cpu_ms_per_request": round(client_cpu / max(count, 1) * 1000, 3),
        "new_connection_requests": len(new),
        "new_connection_p50_ms": round(percentile(new, 0.50), 2) if new else None,
    }


def note(message: str) -> None:
    print(f"[admission {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def bench(
    contenders: list[str],
    clients: list[int],
    seconds: float,
    threads: int,
    cloudcoil_threads: int = 0,
) -> dict[str, Any]:
    from common import EmulatorProcess

    from tests.admission.certs import CertificateAuthority

    body = review_body()
    rows: list[dict[str, Any]] = []
    stalls: list[dict[str, Any]] = []
    emulator: EmulatorProcess | None = None
    with tempfile.TemporaryDirectory(prefix="cc-admission-") as directory:
        authority = CertificateAuthority()
        authority.issue(Path(directory), name="127.0.0.1")
        context = ssl.create_default_context(cadata=authority.pem.decode())
        context.check_hostname = False  # the serving cert names localhost/127.0.0.1 as SANs
        try:
            for name in contenders:
                env: dict[str, str] = {}
                if name == "kopf":
                    if emulator is None:
                        emulator = EmulatorProcess()
                    env = {
                        "KUBECONFIG": emulator.kubeconfig("default"),
                        "BENCH_KOPF_PORT": str(free_port()),
                        "BENCH_NAMESPACE": "default",
                    }
                note(f"starting {name}")
                count = cloudcoil_threads if name == "cloudcoil" else threads
                server = Server(name, directory, count, context, env)
                try:
                    server.wait_ready(body)
                    for route in ROUTES:
                        connection = server.connect()
                        _, data = _post(connection, ROUTES[route], body)
                        connection.close()
                        check_answer(data, route)
                        measure(server, route, body, 4, min(1.0, seconds))  # warm-up
                        for count in clients:
                            row = measure(server, route, body, count, seconds)
                            row["contender"] = name
                            row["loadavg_1m"] = os.getloadavg()[0]
                            rows.append(row)
                            note(f"{name} {route} x{count}: {row['rps']} req/s")
                    if name != "floor":
                        for fresh in (0, 1):
                            stall = measure(server, "validating", body, 8, seconds, fresh)
                            stall["contender"] = name
                            stall["fresh_clients"] = fresh
                            stalls.append(stall)
                finally:
                    server.stop()
        finally:
            if emulator is not None:
                emulator.close()
    ratios(rows)
    return {
        "body_bytes": len(body),
        "seconds": seconds,
        "threads": threads,
        "cloudcoil_threads": cloudcoil_threads,
        "results": rows,
        "stall": stalls,
    }


def ratios(rows: list[dict[str, Any]]) -> None:
    index = {(r["contender"], r["route"], r["clients"]): r for r in rows}
    for row in rows:
        for other in ("floor", "kopf"):
            peer = index.get((other, row["route"], row["clients"]))
            if peer and row["contender"] != other and peer["rps"]:
                row[f"rps_vs_{other}"] = round(row["rps"] / peer["rps"], 2)
                if peer["p99_ms"]:
                    row[f"p99_vs_{other}"] = round(row["p99_ms"] / peer["p99_ms"], 2)
                if peer["cpu_ms_per_request"]:
                    row[f"cpu_vs_{other}"] = round(
                        row["cpu_ms_per_request"] / peer["cpu_ms_per_request"], 2
                    )


def table(report: dict[str, Any]) -> str:
    lines = [
        "| contender | route | clients | req/s | p50 ms | p99 ms | server CPU ms/req "
        "| client CPU ms/req | req/s vs floor | req/s vs kopf | p99 vs kopf | CPU vs kopf "
        "| load 1m |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        lines.append(
            f"| {r['contender']} | {r['route']} | {r['clients']} | {r['rps']:.0f} "
            f"| {r['p50_ms']} | {r['p99_ms']} | {r['cpu_ms_per_request']} "
            f"| {r['client_cpu_ms_per_request']} | {r.get('rps_vs_floor', '')} "
            f"| {r.get('rps_vs_kopf', '')} | {r.get('p99_vs_kopf', '')} "
            f"| {r.get('cpu_vs_kopf', '')} | {r['loadavg_1m']:.2f} |"
        )
    if report["stall"]:
        lines += [
            "",
            "Stall check (validating route, 8 keep-alive clients; +1 = a 9th client opening a "
            "new TLS connection per request):",
            "",
            "| contender | extra new-conn client | keep-alive req/s | keep-alive p50 ms "
            "| keep-alive p99 ms | new-conn requests | new-conn p50 ms |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for s in report["stall"]:
            alive_rps = (s["requests"] - s["new_connection_requests"]) / report["seconds"]
            lines.append(
                f"| {s['contender']} | {s['fresh_clients']} | {alive_rps:.0f} | {s['p50_ms']} "
                f"| {s['p99_ms']} | {s['new_connection_requests']} "
                f"| {s['new_connection_p50_ms'] or ''} |"
            )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--threads", type=int, default=4, help="the floor's waitress threads")
    parser.add_argument(
        "--cloudcoil-threads", type=int, default=0, help="WebhookHost threads (0: its default)"
    )
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--serve", nargs=2, metavar=("NAME", "DIR"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth"
        name, directory = options.serve
        SERVERS[name](directory, options.threads)
        return
    load_before = os.getloadavg()
    report = bench(
        [c for c in options.contenders.split(",") if c],
        [int(c) for c in options.clients.split(",")],
        options.seconds,
        options.threads,
        options.cloudcoil_threads,
    )
    report["loadavg_before"] = load_before
    report["loadavg_after"] = os.getloadavg()
    print(
        f"AdmissionReview body {report['body_bytes']} bytes; {os.cpu_count()} CPUs; floor "
        f"threads {options.threads}, cloudcoil threads {options.cloudcoil_threads or 'default'}; "
        f"{options.seconds:g} s per scenario; "
        f"clients are threads in the driver process; load average before "
        f"{load_before[0]:.2f}/{load_before[1]:.2f}, after "
        f"{report['loadavg_after'][0]:.2f}/{report['loadavg_after'][1]:.2f}"
    )
    print()
    print(table(report))
    if options.json:
        Path(options.json).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
