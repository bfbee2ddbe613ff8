"""Attacks on the widget operator's webhook listener, a normal client measured (not a test).

    python bench/attacks.py [--seconds 6] [--only NAME,...] [--json out.json]

The emulator runs in a child process (bench/common.py), the Widget operator
(`examples/widget_operator.py run`) in another with a development certificate, and each attack
in a third (`--attack KIND`), so that neither the attackers nor this driver share the
operator's GIL. Loopback only: attackers bind 127.0.0.2-127.0.0.9 (another client each), the
normal client 127.0.0.1. Every attack loop is bounded in time (`--seconds` plus a warm-up) and
in count.

Per scenario, the normal client posts a Widget CREATE review to the mutating route on a fresh
TLS connection every 20 ms (the harshest case: it must be admitted each time) and reports p50/p99
and whether every request was answered 200 within 1 s; beside it, what the issue's targets
need: log bytes per malformed request (operator stderr), TokenReviews per junk token after the
first second (counted at the emulator), the operator's peak RSS under the 4 MiB reviews against
its RSS before. Then the client's watch stream on one huge line (CPU seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# CC_ATTACKS_CODE: another checkout's tree whose operator (and client) is measured instead.
CODE = Path(os.environ.get("CC_ATTACKS_CODE") or ROOT)
sys.path.insert(0, str(CODE))
sys.path.insert(0, str(ROOT / "bench"))

from common import EmulatorProcess, machine, rss  # noqa: E402

ONE = ["127.0.0.2"]
FOUR = [f"127.0.0.{n}" for n in range(2, 6)]
EIGHT = [f"127.0.0.{n}" for n in range(2, 10)]
PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01"  # a record announcing 512 bytes, then 1 of them
MAX_ATTACK_REQUESTS = 20_000  # per attacker thread
WARM_UP = 1.0

# name -> (attack kind, attacker addresses, connections per address)
SCENARIOS: dict[str, tuple[str, list[str], int]] = {
    "baseline": ("none", [], 0),
    "slow-hello x1": ("hello", ONE, 80),
    "slow-hello x4": ("hello", FOUR, 80),
    "slow-hello x8": ("hello", EIGHT, 40),
    "slow-headers same address": ("headers", ["127.0.0.1"], 150),
    "slow-headers x4": ("headers", FOUR, 80),
    "deep-json x1": ("deep", ONE, 1),
    "deep-json x4": ("deep", FOUR, 1),
    "big-int x1": ("bigint", ONE, 1),
    "big-int x4": ("bigint", FOUR, 1),
    "wrong-kind x1": ("wrongkind", ONE, 1),
    "wrong-kind x4": ("wrongkind", FOUR, 1),
    "junk-tokens x1": ("junk", ONE, 4),
    "junk-tokens x4": ("junk", FOUR, 1),
    "4MiB-reviews x1": ("big", ONE, 4),
    "4MiB-reviews x4": ("big", FOUR, 1),
}
MALFORMED = {"deep", "bigint", "wrongkind"}


# -- request bodies ---------------------------------------------------------------------------


def widget_review(kind: str = "Widget", junk: str | None = None) -> bytes:
    obj: dict[str, Any] = {
        "apiVersion": "examples.cloudcoil.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": "w", "namespace": "default"},
        "spec": {"message": "hi", "replicas": 1},
    }
    if junk is not None:
        obj["junk"] = "@@"
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "examples.cloudcoil.dev", "version": "v1alpha1", "kind": kind},
            "resource": {
                "group": "examples.cloudcoil.dev",
                "version": "v1alpha1",
                "resource": "widgets",
            },
            "operation": "CREATE",
            "name": "w",
            "namespace": "default",
            "object": obj,
            "oldObject": None,
            "dryRun": False,
            "userInfo": {"username": "alice", "groups": ["dev"]},
        },
    }
    text = json.dumps(review)
    return (text.replace('"@@"', junk) if junk is not None else text).encode()


def attack_body(kind: str) -> bytes:
    if kind == "deep":
        return widget_review(junk="[" * 600 + "]" * 600)
    if kind == "bigint":
        return widget_review(junk="9" * 5000)
    if kind == "wrongkind":
        return widget_review(kind="Gadget")
    if kind == "big":  # ~4 MiB of empty objects (about 1.4 M of them, just under the limit)
        return widget_review(junk="[" + "{}," * 1_397_000 + "{}]")
    raise ValueError(kind)


# -- the attacker child -----------------------------------------------------------------------


def _context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # attackers do not care who answers
    return context


def _connect(port: int, source: str, timeout: float = 5.0) -> socket.socket:
    return socket.create_connection(
        ("127.0.0.1", port), timeout=timeout, source_address=(source, 0)
    )


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed `sock` (readable with nothing, or an error)."""
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return False
    try:
        sock.setblocking(False)
        return sock.recv(1) == b""
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(5)


def _hold(
    kind: str, port: int, source: str, count: int, deadline: float, stats: dict[str, int]
) -> None:
    """Keep `count` connections that never complete a handshake (hello) or a request
    (headers, a byte every 2 s); reopen those the server closes."""
    context = _context()
    held: list[socket.socket] = []
    next_drip = time.monotonic() + 2.0
    pause = threading.Event()
    while time.monotonic() < deadline and stats["opened"] < MAX_ATTACK_REQUESTS:
        for sock in [s for s in held if _closed(s)]:
            held.remove(sock)
            sock.close()
            stats["closed"] += 1
        while len(held) < count and time.monotonic() < deadline:
            try:
                sock = _connect(port, source)
                if kind == "hello":
                    sock.sendall(PARTIAL_HELLO)
                else:
                    sock = context.wrap_socket(sock)
                    sock.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\n")
                held.append(sock)
                stats["opened"] += 1
            except OSError:
                stats["failed"] += 1
                break
        if kind == "headers" and time.monotonic() >= next_drip:
            next_drip += 2.0
            for sock in held:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X")
        pause.wait(0.05)
    for sock in held:
        sock.close()


def _post_loop(
    kind: str, port: int, source: str, path: str, deadline: float, stats: dict[str, int]
) -> None:
    """POST the attack's body (or GET /metrics with a new junk token) as fast as answered."""
    body = b"" if kind == "junk" else attack_body(kind)
    context = _context()
    connection: http.client.HTTPSConnection | None = None
    start = time.monotonic()
    sent = 0
    while time.monotonic() < deadline and sent < MAX_ATTACK_REQUESTS:
        if connection is None:
            connection = http.client.HTTPSConnection(
                "127.0.0.1", port, context=context, timeout=10, source_address=(source, 0)
            )
        try:
            if kind == "junk":
                token = f"junk-{source}-{threading.get_ident()}-{sent}"
                connection.request("GET", "/metrics", headers={"Authorization": f"Bearer {token}"})
            else:
                headers = {"Content-Type": "application/json"}
                connection.request("POST", path, body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            sent += 1
            if time.monotonic() - start <= 1.0:
                stats["first_second"] += 1
            stats[str(response.status)] = stats.get(str(response.status), 0) + 1
            if response.getheader("Connection", "").lower() == "close":
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException):
            stats["failed"] += 1
            connection.close()
            connection = None
    stats["sent"] += sent
    if connection is not None:
        connection.close()


def attack_main(
    kind: str, sources: list[str], per_source: int, port: int, path: str, seconds: float
) -> None:
    print("ready", flush=True)
    deadline = time.monotonic() + seconds
    stats: dict[str, int] = {"opened": 0, "closed": 0, "failed": 0, "sent": 0, "first_second": 0}
    threads = []
    for source in sources:
        for _ in range(1 if kind in ("hello", "headers") else per_source):
            if kind in ("hello", "headers"):
                args: tuple[Any, ...] = (kind, port, source, per_source, deadline, stats)
                target: Any = _hold
            else:
                args = (kind, port, source, path, deadline, stats)
                target = _post_loop
            threads.append(threading.Thread(target=target, args=args, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 30)
    print(json.dumps(stats), flush=True)


# -- the driver ---------------------------------------------------------------------------------


class Operator:
    """The Widget operator in a child process, its stderr in a file."""

    def __init__(self, emulator: EmulatorProcess, folder: str, *, first: bool = True) -> None:
        self.folder = folder
        self.kubeconfig = emulator.kubeconfig("default")
        self.env = {**os.environ, "KUBECONFIG": self.kubeconfig, "PYTHONPATH": str(CODE)}
        script = str(CODE / "examples" / "widget_operator.py")
        tls = os.path.join(folder, "tls")
        for command in (["certs", "--dir", tls], ["install", "--without-webhooks"]) * first:
            subprocess.run(
                [sys.executable, script, *command], env=self.env, check=True, capture_output=True
            )
        self.port = _free_port()
        self.log_path = os.path.join(folder, "operator.log")
        self.log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                script,
                "run",
                "--tls-dir",
                tls,
                "--webhook-host",
                "127.0.0.1",
                "--webhook-port",
                str(self.port),
            ],
            env=self.env,
            stderr=self.log,
            stdout=self.log,
        )
        self.context = ssl.create_default_context(cafile=os.path.join(tls, "ca.crt"))
        self.context.check_hostname = False
        self.mutate_path = _mutating_path(script, self.env, os.path.join(tls, "ca.crt"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the operator exited: {Path(self.log_path).read_text()[-2000:]}")
            try:
                if self._get("/readyz") == 200:
                    threading.Event().wait(2.0)  # settled: informers synced, idle
                    return
            except OSError:
                pass
            threading.Event().wait(0.1)
        raise SystemExit("the operator did not become ready")

    def _get(self, path: str) -> int:
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.context, timeout=2
        )
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            return response.status
        finally:
            connection.close()

    def log_bytes(self) -> int:
        self.log.flush()
        return os.path.getsize(self.log_path)

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _mutating_path(script: str, env: dict[str, str], ca_file: str) -> str:
    """The mutating route's path as the operator serves it (run as a script: `__main__`)."""
    import yaml

    out = subprocess.run(
        [
            sys.executable,
            script,
            "manifests",
            "--image",
            "example/widgets:v1",
            "--ca-file",
            ca_file,
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    for document in yaml.safe_load_all(out):
        if document and document.get("kind") == "MutatingWebhookConfiguration":
            return str(document["webhooks"][0]["clientConfig"]["service"]["path"])
    raise SystemExit("the widget operator has no mutating webhook")


def normal_client(operator: Operator, seconds: float) -> list[tuple[float, int]]:
    """(latency, status) of one review per fresh connection every 20 ms for `seconds`;
    status 0 when no answer came within 5 s."""
    body = widget_review()
    results: list[tuple[float, int]] = []
    pause = threading.Event()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        connection = http.client.HTTPSConnection(
            "127.0.0.1",
            operator.port,
            context=operator.context,
            timeout=5,
            source_address=("127.0.0.1", 0),
        )
        try:
            connection.request(
                "POST",
                operator.mutate_path,
                body=body,
                headers={"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            status = 0
        finally:
            connection.close()
        results.append((time.monotonic() - started, status))
        pause.wait(0.02)
    return results


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def run_scenario(
    name: str, emulator: EmulatorProcess, operator: Operator, seconds: float
) -> dict[str, Any]:
    kind, sources, per_source = SCENARIOS[name]
    rss_before = rss(operator.proc.pid)
    peak = [rss_before]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            peak[0] = max(peak[0], rss(operator.proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    log_before = operator.log_bytes()
    emulator.count("tokenreviews")
    attacker = None
    if kind != "none":
        attacker = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--attack",
                kind,
                "--sources",
                ",".join(sources),
                "--per-source",
                str(per_source),
                "--port",
                str(operator.port),
                "--path",
                operator.mutate_path,
                "--seconds",
                str(seconds + WARM_UP),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert attacker.stdout is not None
        attacker.stdout.readline()  # ready
    threading.Event().wait(WARM_UP)
    first_reviews = emulator.count("tokenreviews")
    results = normal_client(operator, seconds)
    stats: dict[str, Any] = {}
    if attacker is not None:
        out, _ = attacker.communicate(timeout=seconds + 60)
        stats = json.loads(out.strip().splitlines()[-1])
    reviews = emulator.count("tokenreviews")
    done.set()
    sampler.join(5)
    latencies = [latency for latency, _ in results]
    row: dict[str, Any] = {
        "scenario": name,
        "normal_requests": len(results),
        "normal_ok_within_1s": sum(1 for lat, st in results if st == 200 and lat <= 1.0),
        "normal_statuses": sorted({st for _, st in results}),
        "p50_ms": round(_percentile(latencies, 0.5) * 1000, 1),
        "p99_ms": round(_percentile(latencies, 0.99) * 1000, 1),
        "attack": stats,
        "rss_before_mib": round(rss_before / 2**20, 1),
        "rss_peak_mib": round(peak[0] / 2**20, 1),
    }
    row["all_ok_within_1s"] = row["normal_ok_within_1s"] == len(results)
    if kind in MALFORMED:
        malformed = max(1, int(stats.get("sent", 0)))
        row["log_bytes_per_malformed"] = round((operator.log_bytes() - log_before) / malformed, 2)
    if kind == "junk":
        later = max(1, int(stats.get("sent", 0)) - int(stats.get("first_second", 0)))
        row["tokenreviews_first_second"] = first_reviews
        row["tokenreviews_per_junk_after_1s"] = round(reviews / later, 4)
    if kind == "big":
        row["rss_ratio"] = round(peak[0] / rss_before, 2)
    return row


# -- the client's watch on one huge line --------------------------------------------------------


def watch_line_cost(size: int, limit: int) -> dict[str, Any]:
    """CPU seconds for the client to read one watch event line of `size` bytes (HTTP chunks
    of 16 KiB) with the line limit at `limit`, and what it ended with."""
    import http.server

    from cloudcoil.models.kubernetes.core.v1 import ConfigMap

    from cloudcoil_sync import client
    from cloudcoil_sync.client import Config
    from cloudcoil_sync.client._internal import watch

    too_large = getattr(client, "WatchEventTooLarge", None) or type("NoLimit", (Exception,), {})

    blob = "x" * (size - 100)
    line = (
        json.dumps(
            {
                "type": "ADDED",
                "object": {
                    "metadata": {"name": "big", "resourceVersion": "1"},
                    "data": {"b": blob},
                },
            }
        ).encode()
        + b"\n"
    )

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for start in range(0, len(line), 16384):
                    piece = line[start : start + 16384]
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                self.wfile.write(b"0\r\n\r\n")
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    saved = getattr(watch, "MAX_EVENT_BYTES", None)
    watch.MAX_EVENT_BYTES = limit  # type: ignore[attr-defined]  (none before issue 37)
    outcome = "event"
    try:
        with Config(f"http://127.0.0.1:{server.server_address[1]}", token="t", qps=0) as config:
            started = time.process_time()
            try:
                for _ in config.client(ConfigMap).raw.watch(timeout_seconds=30):
                    pass
            except too_large:
                outcome = "WatchEventTooLarge"
            cpu = time.process_time() - started
    finally:
        watch.MAX_EVENT_BYTES = saved
        server.shutdown()
        server.server_close()
    return {
        "line_mib": round(size / 2**20, 1),
        "limit_mib": round(limit / 2**20, 1),
        "outcome": outcome,
        "client_cpu_s": round(cpu, 3),
    }


# -- report -------------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]], watches: list[dict[str, Any]]) -> str:
    lines = [
        "| scenario | normal p50 ms | p99 ms | all 200 within 1 s | extra |",
        "|---|---:|---:|---|---|",
    ]
    for row in rows:
        extra = []
        if "log_bytes_per_malformed" in row:
            extra.append(
                f"log {row['log_bytes_per_malformed']} B/malformed request "
                f"({row['attack'].get('sent', 0)} sent)"
            )
        if "tokenreviews_per_junk_after_1s" in row:
            extra.append(
                f"{row['tokenreviews_per_junk_after_1s']} TokenReviews/junk token after "
                f"1 s ({row['attack'].get('sent', 0)} tokens)"
            )
        if "rss_ratio" in row:
            extra.append(
                f"RSS {row['rss_before_mib']} -> {row['rss_peak_mib']} MiB ({row['rss_ratio']}x)"
            )
        if row["attack"].get("opened"):
            extra.append(f"{row['attack']['opened']} attack connections opened")
        ok = (
            f"{'yes' if row['all_ok_within_1s'] else 'NO'} "
            f"({row['normal_ok_within_1s']}/{row['normal_requests']})"
        )
        lines.append(
            f"| {row['scenario']} | {row['p50_ms']} | {row['p99_ms']} | {ok} | {'; '.join(extra)} |"
        )
    lines += ["", "| watch line | limit | outcome | client CPU s |", "|---:|---:|---|---:|"]
    for w in watches:
        lines.append(
            f"| {w['line_mib']} MiB | {w['limit_mib']} MiB | {w['outcome']} | {w['client_cpu_s']} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--only", default="")
    parser.add_argument("--json")
    parser.add_argument("--watch-only", action="store_true")
    parser.add_argument("--attack")
    parser.add_argument("--sources", default="")
    parser.add_argument("--per-source", type=int, default=1)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--path", default="")
    args = parser.parse_args()
    if args.attack:
        attack_main(
            args.attack,
            args.sources.split(","),
            args.per_source,
            args.port,
            args.path,
            min(args.seconds, 120.0),
        )
        return
    names = [n for n in SCENARIOS if not args.only or n in args.only.split(",")]
    names = [] if args.watch_only else names
    rows: list[dict[str, Any]] = []
    with EmulatorProcess() as emulator, tempfile.TemporaryDirectory(prefix="cc-attacks-") as folder:
        operator = Operator(emulator, folder) if names else None
        try:
            for name in names:
                assert operator is not None
                if SCENARIOS[name][0] == "big":  # measured against a fresh, idle operator
                    operator.stop()
                    operator = Operator(emulator, folder, first=False)
                rows.append(run_scenario(name, emulator, operator, args.seconds))
                print(json.dumps(rows[-1]), flush=True)
        finally:
            if operator is not None:
                operator.stop()
    mib = 2**20
    watches = [
        watch_line_cost(4 * mib, 64 * mib),
        watch_line_cost(16 * mib, 64 * mib),
        watch_line_cost(16 * mib, 8 * mib),
    ]
    report = {"machine": machine(), "seconds": args.seconds, "scenarios": rows, "watch": watches}
    print(table(rows, watches))
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
