"""Client overhead benchmark: cloudcoil_sync.client vs a bare ``requests.Session`` loop.

Runs the emulator in a subprocess (so the server does not share this process's GIL), then
measures GET and merge-PATCH requests/s through ``ResourceClient`` and through a bare session
doing the same HTTP calls, single-threaded and with 8 threads, and prints the ratios
(goal: client >= 0.9x bare) plus this process's CPU time per request.

    python bench/client.py [--seconds 3] [--threads 8] [--url URL --token T --ca FILE]
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
from collections.abc import Callable
from typing import Any

import requests
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config

ROUNDS = 4
SERVER_SCRIPT = """
import json, sys, threading
from cloudcoil_sync.testing import Emulator
emu = Emulator().start()
print(json.dumps({"url": emu.url, "token": emu.admin_token, "ca": emu.ca_pem.decode()}),
      flush=True)
sys.stdin.read()
emu.stop()
"""


def start_emulator() -> tuple[subprocess.Popen[str], dict[str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVER_SCRIPT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        proc.kill()
        raise SystemExit("emulator subprocess failed to start")
    return proc, json.loads(line)


def run(op: Callable[[int], None], threads: int, seconds: float) -> tuple[float, float]:
    """Requests/s and CPU seconds of this process per request."""
    stop = threading.Event()
    counts = [0] * threads

    def worker(i: int) -> None:
        n = 0
        while not stop.is_set():
            op(i)
            n += 1
        counts[i] = n

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    cpu0, t0 = time.process_time(), time.perf_counter()
    for t in pool:
        t.start()
    stop.wait(seconds)
    stop.set()
    for t in pool:
        t.join()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    total = sum(counts)
    return total / elapsed, cpu / max(total, 1)


def layer_overhead(n: int = 20000) -> None:
    """Microseconds the client layer adds per call, with HTTP stubbed out (noise-free)."""
    body = json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "data": {"a": "b"},
            "metadata": {"name": "p", "namespace": "default", "resourceVersion": "5"},
        }
    ).encode()

    def fake(method: str, url: str, **kwargs: Any) -> requests.Response:
        resp = requests.Response()
        resp.status_code, resp._content, resp.url = 200, body, url
        return resp

    def fake_send(prepared: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        return fake(prepared.method or "", prepared.url or "")

    config = Config("https://127.0.0.1:1", token="t", qps=0)
    setattr(config.transport._adapter, "send", fake_send)  # noqa: B010 (stub out HTTP)
    api = config.client(ConfigMap)
    cases: dict[str, Callable[[], Any]] = {
        "bare stub + json": lambda: fake("GET", "u").json(),
        "client get (raw)": lambda: api.raw.get("p"),
        "client get (model)": lambda: api.get("p"),
        "client patch (raw)": lambda: api.raw.merge_patch("p", {"data": {"n": "1"}}),
    }
    print("client layer with HTTP stubbed out:")
    for label, call in cases.items():
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        print(f"  {label:<20}{(time.perf_counter() - t0) / n * 1e6:>8.1f} us/call")
    config.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--url")
    parser.add_argument("--token")
    parser.add_argument("--ca", help="CA file for --url")
    args = parser.parse_args()
    layer_overhead()

    proc = None
    if args.url:
        with open(args.ca) if args.ca else open(os.devnull) as fh:
            url, token, ca_pem = args.url, args.token, fh.read() or None
    else:
        proc, info = start_emulator()
        url, token, ca_pem = info["url"], info["token"], info["ca"]
    ca_file = None
    if ca_pem:
        fd, ca_file = tempfile.mkstemp(suffix=".crt")
        os.write(fd, ca_pem.encode())
        os.close(fd)
    try:
        bench(url, token, ca_file, args.seconds, args.threads)
    finally:
        if ca_file:
            os.unlink(ca_file)
        if proc is not None:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait(10)


def bench(url: str, token: str, ca_file: str | None, seconds: float, threads: int) -> None:
    config = Config(url, token=token, ca_file=ca_file, qps=0)
    api = config.client(ConfigMap)
    names = [f"bench-{i}" for i in range(max(threads, 1))]
    for name in names:
        config.client(ConfigMap).raw.apply(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {}},
            field_manager="bench",
            force=True,
        )

    bare = requests.Session()
    bare.trust_env = False
    bare.verify = ca_file or False
    adapter = requests.adapters.HTTPAdapter(pool_maxsize=64)
    bare.mount("https://", adapter)
    bare.mount("http://", adapter)
    auth = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
    patch_headers = {**auth, "Content-Type": "application/merge-patch+json"}
    base = f"{url}/api/v1/namespaces/default/configmaps"
    counter = [0]

    def bare_get(i: int) -> None:
        r = bare.get(f"{base}/{names[i]}", headers=auth)
        r.raise_for_status()
        r.json()

    def bare_patch(i: int) -> None:
        counter[0] += 1
        body = json.dumps({"data": {"n": str(counter[0])}})
        r = bare.patch(f"{base}/{names[i]}", data=body, headers=patch_headers)
        r.raise_for_status()
        r.json()

    ops: dict[str, tuple[Callable[[int], Any], Callable[[int], Any]]] = {
        "get (model)": (lambda i: api.get(names[i]), bare_get),
        "get (raw)": (lambda i: api.raw.get(names[i]), bare_get),
        "patch (raw)": (
            lambda i: api.raw.merge_patch(names[i], {"data": {"n": str(time.time())}}),
            bare_patch,
        ),
        "patch (model)": (
            lambda i: api.merge_patch(names[i], {"data": {"n": str(time.time())}}),
            bare_patch,
        ),
    }
    print(f"server {url}; {seconds:g}s per measurement; CPU is this process's, per request")
    print(
        f"{'operation':<15}{'threads':>8}{'client/s':>11}{'bare/s':>10}{'ratio':>8}"
        f"{'client CPU':>12}{'bare CPU':>10}"
    )
    for name, (client_op, bare_op) in ops.items():
        for n in (1, threads):
            run(bare_op, n, min(0.5, seconds))  # warm both pools
            run(client_op, n, min(0.5, seconds))
            # alternate short rounds so load from elsewhere hits both sides alike
            c_runs, b_runs = [], []
            for _ in range(ROUNDS):
                c_runs.append(run(client_op, n, seconds / ROUNDS))
                b_runs.append(run(bare_op, n, seconds / ROUNDS))
            c_rps, c_cpu = (sum(x) / ROUNDS for x in zip(*c_runs, strict=True))
            b_rps, b_cpu = (sum(x) / ROUNDS for x in zip(*b_runs, strict=True))
            print(
                f"{name:<15}{n:>8}{c_rps:>11.0f}{b_rps:>10.0f}{c_rps / b_rps:>8.2f}"
                f"{c_cpu * 1e3:>10.2f}ms{b_cpu * 1e3:>8.2f}ms"
            )
    stats = config.transport.pool_stats()
    print(f"client pool: {stats['connections']} connections for {stats['requests']} requests")
    config.close()
    bare.close()


if __name__ == "__main__":
    main()
