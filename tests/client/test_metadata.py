"""`client.metadata`: reads of one kind as metadata only (PartialObjectMetadata), against the
emulator over HTTPS, and against a server that ignores the request and sends whole objects."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import responses
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import Config

SERVER = "http://api.test"
URL = f"{SERVER}/api/v1/namespaces/default/configmaps"
PARTIAL = "as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
PARTIAL_LIST = "as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"


def _cm(name: str) -> ConfigMap:
    body = {"metadata": {"name": name, "labels": {"app": "t"}}, "data": {"big": "x" * 1000}}
    return ConfigMap.model_validate(body)


def _only_metadata(obj: dict[str, object], name: str) -> None:
    assert obj["apiVersion"] == "v1" and obj["kind"] == "ConfigMap"
    assert set(obj) == {"apiVersion", "kind", "metadata"}
    assert obj["metadata"]["name"] == name  # type: ignore[index]


def test_reads_send_no_data(kube_config: Config) -> None:
    client = kube_config.client(ConfigMap, namespace="default")
    for name in ("m1", "m2", "m3"):
        client.create(_cm(name))
    metadata = client.metadata
    _only_metadata(metadata.get("m1"), "m1")
    pages = list(metadata.pages(label_selector="app=t", limit=2))
    assert [len(page) for page in pages] == [2, 1]
    for page, names in zip(pages, (["m1", "m2"], ["m3"]), strict=True):
        assert page.resource_version
        for obj, name in zip(page, names, strict=True):
            _only_metadata(obj, name)
            assert obj["metadata"]["labels"] == {"app": "t"}
    assert [o["metadata"]["name"] for o in metadata.list(label_selector="app=t")] == [
        "m1",
        "m2",
        "m3",
    ]
    assert client.get("m1").data == {"big": "x" * 1000}  # the typed client is unchanged


def test_watch_events_are_metadata(kube_config: Config) -> None:
    client = kube_config.client(ConfigMap, namespace="default")
    version = client.metadata.list().resource_version
    with client.metadata.watch(resource_version=version, timeout_seconds=5) as watch:
        client.create(_cm("w1"))
        event = next(watch)
    assert event.type == "ADDED"
    _only_metadata(event.object, "w1")


def test_write_answers_are_cut_too(kube_config: Config) -> None:
    raw = kube_config.client(ConfigMap, namespace="default").metadata
    created = raw.create(_cm("c1"))
    _only_metadata(created, "c1")
    patched = raw.merge_patch("c1", {"metadata": {"labels": {"more": "1"}}})
    assert patched["metadata"]["labels"]["more"] == "1" and "data" not in patched


@pytest.fixture
def config() -> Iterator[Config]:
    cfg = Config(SERVER, token="t", qps=0, max_retries=0)
    yield cfg
    cfg.close()


@responses.activate
def test_a_server_sending_whole_objects_is_cut_down(config: Config) -> None:
    whole = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}}
    listed = {"kind": "ConfigMapList", "metadata": {"resourceVersion": "7"}, "items": [whole]}
    responses.get(URL, json=listed)
    responses.get(f"{URL}/a", json=whole)
    event = json.dumps({"type": "MODIFIED", "object": whole}) + "\n"
    responses.get(URL, body=event)  # the watch
    metadata = config.client(ConfigMap, namespace="default").metadata
    (page,) = metadata.pages()
    _only_metadata(page[0], "a")
    _only_metadata(metadata.get("a"), "a")
    with metadata.watch(resource_version="7") as watch:
        _only_metadata(next(watch).object, "a")
    accepts = [call.request.headers["Accept"] for call in responses.calls]
    assert accepts == [
        f"application/json;{PARTIAL_LIST},application/json",
        f"application/json;{PARTIAL},application/json",
        f"application/json;{PARTIAL},application/json",
    ]


@responses.activate
def test_the_typed_client_asks_for_plain_json(config: Config) -> None:
    whole = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {}}
    responses.get(f"{URL}/a", json=whole)
    assert config.client(ConfigMap, namespace="default").get("a").data == {}
    assert responses.calls[0].request.headers["Accept"] == "application/json"
