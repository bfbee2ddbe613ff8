"""Multi-version custom resources converted by webhook: kube-apiserver 1.32's answers
(``kube_apiserver_conversion/``, recorded by ``bench/conversion_record.py``) replayed against
the emulator, which calls the same conversion webhook (a TLS WebhookHost on 127.0.0.1 with
its own CA) registered by URL.

Compared: status codes, the deprecation ``Warning``, Status messages (the webhook's URL and
port substituted), and of objects their apiVersion, kind, spec, annotations, name, namespace
and generation, of CRDs ``status.storedVersions`` and which version is stored; a no-op PUT
must change the resourceVersion (it rewrote the object to the storage version). Not
compared: uids, resourceVersions, timestamps and managedFields.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cloudcoil_sync.testing import Emulator

from .conftest import Client, replay_in_order
from .conversion_kinds import THINGS, crd_manifest
from .conversion_server import ConversionServer

RECORDED = Path(__file__).parent / "kube_apiserver_conversion"
FILES = sorted(p.name for p in RECORDED.glob("[0-9]*.json"))
NS = "i40-conv"
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.conv.i40.example.com"
_ADDRESS = re.compile(r"127\.0\.0\.1:\d+")


class Replay:
    def __init__(self, client: Client, server: ConversionServer) -> None:
        self.client, self.server = client, server
        self.crd_rv: dict[str, str] = {}
        self.done: set[str] = set()  # steps replayed on this emulator

    def body(self, request: dict[str, Any]) -> Any:
        """The recorded body with this run's webhook and current resourceVersions."""
        body = request["body"]
        if not isinstance(body, dict):
            return body
        body = json.loads(json.dumps(body))
        if body.get("kind") == "CustomResourceDefinition":
            conversion = body["spec"].get("conversion") or {}
            if conversion.get("strategy") == "Webhook":
                live = crd_manifest(self.server.url(THINGS), self.server.ca_bundle)
                conversion["webhook"]["clientConfig"] = live["spec"]["conversion"]["webhook"][
                    "clientConfig"
                ]
        if request["method"] == "PUT":
            path = request["path"].removesuffix("/status")
            current = self.client.get(path).json()
            for key in ("resourceVersion", "uid"):
                body["metadata"][key] = current["metadata"][key]
        return body


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    directory = tmp_path_factory.mktemp("conversion")
    with Emulator() as emulator, ConversionServer(directory / "tls", THINGS) as server:
        (directory / "ca.crt").write_bytes(emulator.ca_pem)
        client = Client(emulator, directory / "ca.crt")
        assert client.post("/api/v1/namespaces", {"metadata": {"name": NS}}).status_code == 201
        yield Replay(client, server)
        client.close()


def _port(text: str, server: ConversionServer) -> str:
    return _ADDRESS.sub(f"127.0.0.1:{server.port}", text)


def _object_view(obj: dict[str, Any]) -> dict[str, Any]:
    metadata = obj.get("metadata") or {}
    view = {k: obj.get(k) for k in ("apiVersion", "kind", "spec")}
    view.update({k: metadata.get(k) for k in ("name", "namespace", "annotations", "generation")})
    return view


def view(body: Any, server: ConversionServer) -> Any:
    if isinstance(body, list):  # watch events
        return [(event["type"], _object_view(event["object"])) for event in body]
    if body.get("kind") == "Status":
        return {k: _port(str(body.get(k)), server) for k in ("status", "reason", "message", "code")}
    if body.get("kind") == "CustomResourceDefinition":
        versions = [(v["name"], v["served"], v["storage"]) for v in body["spec"]["versions"]]
        return versions, body["status"].get("storedVersions")
    if "items" in body:
        return body["apiVersion"], body["kind"], [_object_view(i) for i in body["items"]]
    return _object_view(body)


@pytest.mark.parametrize("name", FILES)
def test_emulator_answers_as_recorded(replay: Replay, name: str) -> None:
    replay_in_order(name, FILES, replay.done, lambda step: _replay(replay, step))


def _replay(replay: Replay, name: str) -> None:
    replay.done.add(name)
    recorded = json.loads((RECORDED / name).read_text())
    request, expected = recorded["request"], recorded["response"]
    if "webhook-down" in name:
        replay.server.stop()
    path = request["path"]
    before = None
    if "noop-rewrite" in name:
        before = replay.client.get(path).json()["metadata"]["resourceVersion"]
    response = replay.client.request(
        request["method"], path, json=replay.body(request), headers=request["headers"]
    )
    assert response.status_code == expected["status"], response.text
    assert response.headers.get("Warning") == expected["headers"].get("Warning")
    if "watch=1" in path:
        got: Any = [json.loads(line) for line in response.text.splitlines() if line]
    else:
        got = response.json()
    assert view(got, replay.server) == view(expected["body"], replay.server)
    if before is not None:
        assert got["metadata"]["resourceVersion"] != before


def test_the_recordings_are_there() -> None:
    assert len(FILES) == 19
    assert CRDS.endswith("things.conv.i40.example.com")
