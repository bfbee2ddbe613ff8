"""Per-verb service times of an API server, and the emulator latency profile they imply.

    python bench/apilatency.py [--kubeconfig PATH | --emulator [--profile NAME]]
                               [--objects 300] [--clients 16] [--json out.json]

Against a real server (``KUBECONFIG`` or ``--kubeconfig``) or the emulator (``--emulator``,
in-process, optionally with ``Emulator(latency=PROFILE)``), in a fresh namespace, with a
bare ``requests`` session per client thread:

- one client: ``--objects`` each of POST (create), GET, merge PATCH, PUT, LIST (pages of
  500, whole namespace) and DELETE of ~0.8 KB labelled ConfigMaps; median and p90 per verb;
- ``--clients`` threads: merge PATCHes and GETs for a few seconds; requests/s.

It prints the `LatencyModel` these figures imply (medians at one client; slots = PATCH
throughput at ``--clients`` x PATCH median at one client, rounded, at least 1), the form of
``cloudcoil_sync.testing._internal.latency.PROFILES``, and, when run on the emulator with a profile,
the same table to compare with the real server's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests
from cluster import raw_session
from common import configmap, machine

THROUGHPUT_SECONDS = 4.0


def timed(calls: list[Callable[[], requests.Response]]) -> list[float]:
    times = []
    for call in calls:
        started = time.perf_counter()
        resp = call()
        elapsed = time.perf_counter() - started
        if resp.status_code >= 400:
            raise SystemExit(f"{resp.request.method} {resp.url}: {resp.status_code} {resp.text}")
        times.append(elapsed)
    return times


def summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {
        "median_ms": statistics.median(ordered) * 1000,
        "p90_ms": ordered[int(0.9 * (len(ordered) - 1))] * 1000,
        "count": len(ordered),
    }


def single_client(session: requests.Session, base: str, count: int) -> dict[str, Any]:
    ns = base.rsplit("/", 2)[-2]
    names = [f"cm-{i:05d}" for i in range(count)]  # as `configmap` names them
    merge = {"Content-Type": "application/merge-patch+json"}
    out: dict[str, Any] = {}
    out["create"] = timed(
        [lambda i=i: session.post(base, json=configmap(ns, i)) for i in range(count)]
    )
    got = [session.get(f"{base}/{n}").json() for n in names]  # warm, and bodies for PUT
    out["get"] = timed([lambda n=n: session.get(f"{base}/{n}") for n in names])
    out["patch"] = timed(
        [
            lambda n=n: session.patch(f"{base}/{n}", data=b'{"data":{"p":"1"}}', headers=merge)
            for n in names
        ]
    )
    for obj in got:
        obj["metadata"].pop("resourceVersion", None)
        obj["data"]["u"] = "1"
    out["update"] = timed([lambda o=o: session.put(f"{base}/{o['metadata']['name']}", json=o)
                           for o in got])  # fmt: skip
    pages = max(3, count // 50)
    listed = timed([lambda: session.get(base, params={"limit": 500}) for _ in range(pages)])
    size = len(session.get(base, params={"limit": 500}).content)
    out["list"] = listed
    out["delete"] = timed([lambda n=n: session.delete(f"{base}/{n}") for n in names])
    result = {verb: summary(times) for verb, times in out.items()}
    result["list"]["kib"] = size / 1024
    return result


def throughput(kubeconfig: str | None, base: str, clients: int, verb: str) -> float:
    ns = base.rsplit("/", 2)[-2]
    seed, _ = raw_session(kubeconfig)
    names = [f"tp-{i:04d}" for i in range(clients * 4)]
    for i, name in enumerate(names):
        obj = configmap(ns, i)
        obj["metadata"]["name"] = name
        seed.post(base, json=obj).raise_for_status()
    stop = time.monotonic() + THROUGHPUT_SECONDS
    counts = [0] * clients
    merge = {"Content-Type": "application/merge-patch+json"}

    def run(k: int) -> None:
        session, _ = raw_session(kubeconfig)
        i = 0
        while time.monotonic() < stop:
            name = names[(k * 4 + i) % len(names)]
            if verb == "patch":
                body = json.dumps({"data": {"p": f"{k}-{i}"}})
                resp = session.patch(f"{base}/{name}", data=body, headers=merge)
            else:
                resp = session.get(f"{base}/{name}")
            resp.raise_for_status()
            counts[k] += 1
            i += 1

    threads = [threading.Thread(target=run, args=(k,)) for k in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(THROUGHPUT_SECONDS + 30)
    rate = sum(counts) / (time.monotonic() - started)
    for name in names:
        seed.delete(f"{base}/{name}")
    return rate


def profile(single: dict[str, Any], patch_rate: float) -> dict[str, Any]:
    ms = {verb: single[verb]["median_ms"] / 1000 for verb in single}
    per_kib = 0.0  # the list's cost beyond a GET, spread over its size
    if single["list"]["kib"] > 0:
        per_kib = max(0.0, ms["list"] - ms["get"]) / single["list"]["kib"]
    return {
        "get": round(ms["get"], 5),
        "list_base": round(ms["get"], 5),
        "list_per_kib": round(per_kib, 7),
        "create": round(ms["create"], 5),
        "update": round(ms["update"], 5),
        "patch": round(ms["patch"], 5),
        "delete": round(ms["delete"], 5),
        "slots": max(1, round(patch_rate * ms["patch"])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--emulator", action="store_true")
    parser.add_argument("--profile", default=None, help="emulator latency profile")
    parser.add_argument("--objects", type=int, default=300)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    emulator = None
    kubeconfig = None if args.emulator else args.kubeconfig
    if kubeconfig is None:
        from cloudcoil_sync.testing import Emulator
        from cloudcoil_sync.testing._internal import serve

        emulator = Emulator(latency=args.profile, log_size=1000).start()
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"apilatency-{uuid.uuid4().hex}.yaml"
        serve.write_kubeconfig(str(path), serve.kubeconfig(emulator))
        kubeconfig = str(path)
    session, server = raw_session(kubeconfig)
    namespace = f"ccb-latency-{uuid.uuid4().hex[:6]}"
    session.post(f"{server}/api/v1/namespaces", json={"metadata": {"name": namespace}})
    base = f"{server}/api/v1/namespaces/{namespace}/configmaps"
    try:
        single = single_client(session, base, args.objects)
        patch_rate = throughput(kubeconfig, base, args.clients, "patch")
        get_rate = throughput(kubeconfig, base, args.clients, "get")
    finally:
        session.delete(f"{server}/api/v1/namespaces/{namespace}")
        if emulator is not None:
            emulator.stop()
    target = f"emulator (latency={args.profile})" if emulator is not None else server
    report = {
        "target": target,
        "machine": machine(),
        "single_client": single,
        f"patch_per_s_{args.clients}_clients": patch_rate,
        f"get_per_s_{args.clients}_clients": get_rate,
        "profile": profile(single, patch_rate),
    }
    print(f"# API latency: {target}\n")
    print("| verb | median ms | p90 ms |\n|---|---|---|")
    for verb, figures in single.items():
        print(f"| {verb} | {figures['median_ms']:.2f} | {figures['p90_ms']:.2f} |")
    print(f"\n{args.clients} clients: PATCH {patch_rate:.0f}/s, GET {get_rate:.0f}/s")
    print(f"list page: {single['list']['kib']:.0f} KiB")
    print(f"implied profile: {json.dumps(report['profile'])}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
