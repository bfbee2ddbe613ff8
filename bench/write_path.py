"""CPU of one write on the real server, by layer: the reconciler's guarded JSON patch through
`ResourceClient.json_patch`, `Transport.request_json`, urllib3's pool directly, and the
floor contender's write (`requests.Session.patch` with a merge patch, as `reconcile.py`'s
floor sends it).

    KUBECONFIG=... python bench/write_path.py [--requests 400] [--rounds 3] [--prefix i45]

One ConfigMap in a namespace of its own; each round sends the same JSON patch (a ``test`` of
the resourceVersion and an ``add``, as a converged object's write) ``--requests`` times per
layer, layers alternating; CPU is the process's (`time.process_time`) per request.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine

from cloudcoil_sync.client import Config


def _layers(config: Config, namespace: str) -> dict[str, Callable[[], Any]]:
    transport = config.transport
    client = config.client(("", "v1", "configmaps"), namespace)
    path = f"/api/v1/namespaces/{namespace}/configmaps/wp"

    def ops() -> list[dict[str, Any]]:
        merge = {"data": {"k": "v"}}  # then every JSON patch below changes nothing
        transport.request_json(
            "PATCH", path, body=merge, content_type="application/merge-patch+json"
        )
        version = transport.request_json("GET", path)["metadata"]["resourceVersion"]
        return [
            {"op": "test", "path": "/metadata/resourceVersion", "value": version},
            {"op": "add", "path": "/data/k", "value": "v"},
        ]

    def api() -> Any:
        return client.raw.json_patch("wp", current, namespace=namespace)

    def request_json() -> Any:
        return transport.request_json(
            "PATCH", path, body=current, content_type="application/json-patch+json"
        )

    def urllib3_direct() -> Any:
        pool = _pool(transport)
        authz, _ = transport.auth.credentials()
        headers = {
            "User-Agent": "cloudcoil-sync/0.1",
            "Accept": "application/json",
            "Content-Type": "application/json-patch+json",
        }
        if authz:
            headers["Authorization"] = authz
        body = json.dumps(current, separators=(",", ":")).encode()
        resp = pool.urlopen("PATCH", path, body=body, headers=headers, retries=False)
        return json.loads(resp.data)

    from cluster import raw_session

    session, server = raw_session(os.environ.get("KUBECONFIG"))
    merge = json.dumps({"data": {"k": "v"}})
    merge_headers = {"Content-Type": "application/merge-patch+json"}

    def floor() -> Any:  # the floor contender's write: requests' Session.patch, as it is
        response = session.patch(server + path, data=merge, headers=merge_headers)
        response.raise_for_status()
        return response.json()

    current = ops()
    return {
        "api": api,
        "request_json": request_json,
        "urllib3": urllib3_direct,
        "floor (requests)": floor,
    }


def _pool(transport: Any) -> Any:
    import requests

    prep = requests.Request("GET", transport.server + "/").prepare()
    adapter = transport._adapter
    return adapter.get_connection_with_tls_context(
        prep, transport.session.verify, None, transport._cert
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prefix", default="i45")
    args = parser.parse_args()
    config = Config.from_kubeconfig(None, None)
    namespace = f"{args.prefix}-write-path-{os.getpid()}"
    transport = config.transport
    if not _exists(transport, namespace):
        transport.request_json("POST", "/api/v1/namespaces", body={"metadata": {"name": namespace}})
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    if not _exists(transport, namespace, "wp"):
        transport.request_json("POST", path, body={"metadata": {"name": "wp"}, "data": {}})
    layers = _layers(config, namespace)
    for fn in layers.values():  # warm the connections
        fn()
    results: dict[str, list[float]] = {name: [] for name in layers}
    for _ in range(args.rounds):
        for name, fn in layers.items():
            cpu0 = time.process_time()
            for _ in range(args.requests):
                fn()
            results[name].append((time.process_time() - cpu0) / args.requests * 1e3)
    calls = {name: _calls(fn) for name, fn in layers.items()}
    transport.request("DELETE", f"/api/v1/namespaces/{namespace}")
    print(json.dumps({"machine": machine(), "load": os.getloadavg()}))
    for name, values in results.items():
        print(
            f"{name:14s} ms CPU/request: median {statistics.median(values):.3f}, "
            f"min {min(values):.3f}; Python calls/request {calls[name]}"
        )


def _calls(fn: Callable[[], Any]) -> int:
    """Python function calls of one request (cProfile's count: steady under any load)."""
    import cProfile
    import pstats

    profile = cProfile.Profile()
    profile.runcall(fn)
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def _exists(transport: Any, namespace: str, name: str | None = None) -> bool:
    from cloudcoil_sync.client._internal.errors import NotFound

    path = f"/api/v1/namespaces/{namespace}" + (f"/configmaps/{name}" if name else "")
    try:
        transport.request_json("GET", path)
    except NotFound:
        return False
    return True


if __name__ == "__main__":
    main()
