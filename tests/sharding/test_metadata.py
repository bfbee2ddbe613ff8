"""What the ring reads of sharded objects is their metadata alone: the claimer's unplaced
views and the coordinator's full-round pages hold no data, against the emulator (which
answers PartialObjectMetadata as kube-apiserver does)."""

from __future__ import annotations

import threading

from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config
from cloudcoil_sync.sharding._internal.kinds import ShardedKind, informer, listed, synced

DATA = {"big": "x" * 2000}


def _create(config: Config, count: int, start: int = 0) -> None:
    client = config.client(ConfigMap, namespace="default").raw
    for index in range(start, count):
        body = {"metadata": {"name": f"o{index}", "labels": {"app": "m"}}, "data": DATA}
        client.create({"apiVersion": "v1", "kind": "ConfigMap", **body})


def test_full_round_pages_hold_metadata_only(kube_config: Config) -> None:
    _create(kube_config, 5)
    kind = ShardedKind(ConfigMap, "default", "app=m")
    pages = list(listed(kube_config, kind, page=2))
    assert [len(page) for page in pages] == [2, 2, 1]
    for obj in (obj for page in pages for obj in page):
        assert set(obj) == {"apiVersion", "kind", "metadata"}
        assert obj["kind"] == "ConfigMap" and obj["metadata"]["labels"] == {"app": "m"}


def test_metadata_informer_stores_no_data(kube_config: Config) -> None:
    _create(kube_config, 2)
    view = informer(kube_config, ConfigMap, "default", "app=m", "unplaced", metadata=True)
    added: dict[str, dict[str, object]] = {}
    late = threading.Event()

    def on_add(obj: dict[str, object]) -> None:
        name = obj["metadata"]["name"]  # type: ignore[index]
        added[name] = obj
        if name == "o2":
            late.set()

    view.add_handler(on_add=on_add)
    view.start()
    try:
        assert synced(view, threading.Event())
        _create(kube_config, 3, start=2)  # o2 arrives by the watch
        assert late.wait(10)
        for name in ("o0", "o1", "o2"):
            assert set(added[name]) == {"apiVersion", "kind", "metadata"}
            assert view.store.get("default", name) == added[name]
    finally:
        assert view.stop()
