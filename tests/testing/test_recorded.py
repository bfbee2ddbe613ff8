"""Replay every response recorded from kube-apiserver 1.32 against the emulator.

The files are ordered and share one namespace, so they run in order against one emulator.
Each case may set up what the recording's preconditions were (objects created off the record,
a ServiceAccount token). Volatile fields (uids, resourceVersions, timestamps) are not compared,
but the recorded values are mapped to the emulator's so later requests that carry them (a PUT
with a resourceVersion, an ownerReference uid) refer to the emulator's objects.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from recordings import exchange, exchange_files

from cloudcoil_sync.testing import Emulator

from .conftest import Client, configmap, replay_in_order

FILES = exchange_files()
NS = "rec-7p0zo"
CM = f"/api/v1/namespaces/{NS}/configmaps"
VOLATILE = {
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "time",
    "lastTransitionTime",
    "lastUpdateTime",
    "continue",
    "serverAddress",
    "buildDate",
    "gitVersion",
}


@dataclass
class Replay:
    emulator: Emulator
    client: Client
    subst: dict[str, str] = field(default_factory=dict)
    sa_token: str = ""
    done: set[str] = field(default_factory=set)  # files replayed on this emulator

    def remember(self, recorded: Any, actual: Any) -> None:
        if isinstance(recorded, str) and isinstance(actual, str) and recorded != actual:
            self.subst[recorded] = actual

    def translate(self, value: Any) -> Any:
        """Recorded uids/resourceVersions → the emulator's."""
        if isinstance(value, dict):
            return {k: self.translate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.translate(v) for v in value]
        if isinstance(value, str):
            if value in self.subst:
                return self.subst[value]
            for old, new in self.subst.items():
                if len(old) == 36 and old in value:  # uids inside messages and paths
                    value = value.replace(old, new)
        return value

    def create(self, obj: dict[str, Any], recorded: dict[str, Any] | None = None) -> dict[str, Any]:
        response = self.client.post(CM, obj)
        assert response.status_code == 201, response.text
        created: dict[str, Any] = response.json()
        for key, value in (recorded or {}).items():
            self.remember(value, created["metadata"][key])
        return created


@dataclass
class Case:
    setup: Callable[[Replay], None] | None = None
    token: str | None = None  # "sa" or a literal token
    ignore: frozenset[str] = frozenset()
    # managedFields entries by these managers exist only on a real cluster (controllers).
    foreign_managers: frozenset[str] = frozenset()
    query: dict[str, str] = field(default_factory=dict)  # query overrides (shorter timeouts)
    concurrently: Callable[[Replay], None] | None = None
    subset: bool = False  # discovery: compare the entries the emulator serves


def _pages(r: Replay) -> None:
    r.client.post(CM, configmap("kube-root-ca.crt", **{"ca.crt": "x"}))
    for i in range(1, 6):
        r.client.post(CM, configmap(f"a-page-{i}", i=str(i)))


def _stale(r: Replay) -> None:
    r.create(
        configmap("cm-stale", k="v"),
        {"resourceVersion": "131973", "uid": "3158133d-ab8e-4a10-96a8-6c584a94bb82"},
    )


def _sa(r: Replay) -> None:
    r.sa_token = r.sa_token or r.emulator.service_account_token(NS, "x")


def _list_rv(r: Replay) -> None:
    rv = r.client.get(CM).json()["metadata"]["resourceVersion"]
    r.subst["131990"] = rv


def _watch_changes(r: Replay) -> None:
    r.emulator.wait_for(lambda: r.emulator.open_watches == 1)
    assert r.client.post(CM, configmap("cm-watch", k="1")).status_code == 201
    assert r.client.patch(CM + "/cm-watch", {"data": {"k": "2"}}).status_code == 200
    assert r.client.delete(CM + "/cm-watch").status_code == 200


def _forget(r: Replay) -> None:
    r.client.post(CM, configmap("after-forget"))
    r.emulator.forget_history()


def _established(r: Replay) -> None:
    def ready() -> bool:
        path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
        crd = r.client.get(path + "widgets.rec7p0zo.example.com").json()
        return any(c["type"] == "Established" for c in crd["status"].get("conditions") or [])

    assert r.emulator.wait_for(ready, 5)


def _final(r: Replay) -> None:
    cm = configmap("cm-final", k="v")
    cm["metadata"]["finalizers"] = ["example.com/hold"]
    r.create(cm)


def _dry(r: Replay) -> None:
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm-dry"}}
    body["data"] = {"k": "orig"}
    response = r.client.patch(CM + "/cm-dry?fieldManager=rec", body, "application/apply-patch+yaml")
    assert response.status_code == 201, response.text


def _parent(r: Replay) -> None:
    r.create(configmap("cm-parent", k="v"), {"uid": "d3cefbbc-f6b7-4d8d-9009-722c0b53ae96"})


def _child_gone(r: Replay) -> None:
    assert r.emulator.wait_for(
        lambda: r.emulator.get_object("", "configmaps", NS, "cm-child") is None, 5
    )


def _parent_fg(r: Replay) -> None:
    parent = r.create(configmap("cm-parent-fg", k="v"))
    child = configmap("cm-child-fg", k="v")
    child["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "cm-parent-fg",
            "uid": parent["metadata"]["uid"],
            "blockOwnerDeletion": True,
        }
    ]
    r.create(child)


def _now_rv(r: Replay) -> None:
    r.subst["131966"] = r.client.get(CM).json()["metadata"]["resourceVersion"]


DEPLOYMENT_CONTROLLER = frozenset({"kube-controller-manager"})
CASES: dict[str, Case] = {
    "02": Case(subset=True),
    "03": Case(subset=True),
    "04": Case(subset=True),
    "06": Case(subset=True),
    "07": Case(subset=True),
    "09": Case(setup=_pages),
    "13": Case(setup=_stale),
    "19": Case(ignore=frozenset({"status", "annotations"}), foreign_managers=DEPLOYMENT_CONTROLLER),
    "20": Case(ignore=frozenset({"status", "annotations"}), foreign_managers=DEPLOYMENT_CONTROLLER),
    "27": Case(setup=_sa, token="sa"),
    "28": Case(setup=_sa, token="sa"),
    "29": Case(token="garbage-not-a-token"),
    "30": Case(setup=_list_rv, query={"timeoutSeconds": "3"}, concurrently=_watch_changes),
    "31": Case(setup=_forget),
    "34": Case(setup=_established),
    "41": Case(setup=_final),
    "54": Case(setup=_dry),
    "59": Case(setup=_parent),
    "61": Case(setup=_child_gone),
    "62": Case(setup=_parent_fg),
    "63": Case(setup=_now_rv, query={"timeoutSeconds": "3"}),
}


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    ca = tmp_path_factory.mktemp("replay") / "ca.crt"
    with Emulator(bookmark_interval=2.0) as emulator:
        ca.write_bytes(emulator.ca_pem)
        client = Client(emulator, ca)
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}
        assert client.post("/api/v1/namespaces", body).status_code == 201
        yield Replay(emulator, client)
        client.close()


def _with_query(path: str, overrides: dict[str, str]) -> str:
    for key, value in overrides.items():
        path = re.sub(rf"([?&]){key}=[^&]*", rf"\g<1>{key}={value}", path)
    return path


def _translate_query(r: Replay, path: str) -> str:
    return re.sub(r"=([^&]+)", lambda m: "=" + str(r.translate(m.group(1))), path)


def _managed(entries: list[Any], foreign: frozenset[str]) -> list[Any]:
    """Entries of our managers, ordered by name: kube sorts them by operation, then by
    time in whole seconds, then by manager, so two writes a second apart (a slow machine)
    swap places in a recording and in a replay alike."""
    ours = [e for e in entries if e.get("manager") not in foreign]
    return sorted(
        ours, key=lambda e: (e.get("operation", ""), e.get("manager", ""), e.get("subresource", ""))
    )


def compare(r: Replay, case: Case, expected: Any, actual: Any, where: str = "") -> None:
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        expected = {r.translate(k): v for k, v in expected.items()}
        keys = set(expected) - case.ignore
        got = set(actual) - case.ignore
        assert keys == got, f"{where}: keys differ: missing {keys - got}, extra {got - keys}"
        for key in sorted(keys):
            sub = f"{where}.{key}"
            if key in VOLATILE:
                if key in ("uid", "resourceVersion"):
                    r.remember(expected[key], actual[key])
                continue
            exp, act = expected[key], actual[key]
            if key == "managedFields":
                exp, act = (
                    _managed(exp, case.foreign_managers),
                    _managed(act, case.foreign_managers),
                )
            compare(r, case, exp, act, sub)
        return
    if isinstance(expected, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(expected) == len(actual), f"{where}: {len(expected)} != {len(actual)} items"
        for i, (exp, act) in enumerate(zip(expected, actual, strict=True)):
            compare(r, case, exp, act, f"{where}[{i}]")
        return
    expected = r.translate(expected)
    if isinstance(expected, str) and where.endswith(".message"):
        expected = re.sub(r"\(\d+\)", "(N)", expected)
        actual = re.sub(r"\(\d+\)", "(N)", actual)
    assert expected == actual, f"{where}: expected {expected!r}, got {actual!r}"


def _subset(r: Replay, expected: Any, actual: Any) -> None:
    """Discovery: every recorded entry the emulator also serves must match it."""
    if expected.get("kind") == "APIResourceList":
        served = {res["name"]: res for res in actual["resources"]}
        common = [res for res in expected["resources"] if res["name"] in served]
        assert len(common) >= 3
        for res in common:
            want = {k: v for k, v in res.items() if k not in ("storageVersionHash", "categories")}
            got = {k: v for k, v in served[res["name"]].items() if k != "categories"}
            assert want == got, res["name"]
    elif expected.get("kind") == "APIGroupList":
        served = {g["name"]: g for g in actual["groups"]}
        for group in expected["groups"]:
            if group["name"] in served:
                assert group == served[group["name"]]
    else:  # APIGroupDiscoveryList
        served = {i["metadata"].get("name", ""): i for i in actual["items"]}
        for item in expected["items"]:
            name = item["metadata"].get("name", "")
            if name not in served:
                continue
            for version in item["versions"]:
                got = {v["version"]: v for v in served[name]["versions"]}[version["version"]]
                have = {res["resource"]: res for res in got["resources"]}
                for res in version["resources"]:
                    want = {k: v for k, v in res.items() if k != "categories"}
                    mine = {k: v for k, v in have[res["resource"]].items() if k != "categories"}
                    assert want == mine, res["resource"]


@pytest.mark.parametrize("name", FILES)
def test_recorded(replay: Replay, name: str) -> None:
    replay_in_order(name, FILES, replay.done, lambda file: _replay(replay, file))


def _replay(replay: Replay, name: str) -> None:
    replay.done.add(name)
    record = exchange(name)
    case = CASES.get(name[:2], Case())
    if case.setup:
        case.setup(replay)
    request = record["request"]
    path = _with_query(_translate_query(replay, request["path"]), case.query)
    headers = {k: v for k, v in request["headers"].items() if k != "Authorization"}
    client = replay.client
    if case.token == "sa":
        client = client.as_token(replay.sa_token)
    elif case.token:
        client = client.as_token(case.token)
    body = replay.translate(copy.deepcopy(request["body"]))
    data = json.dumps(body) if body is not None else None
    worker = None
    if case.concurrently:
        worker = threading.Thread(target=case.concurrently, args=(replay,))
        worker.start()
    response = client.request(request["method"], path, data=data, headers=headers)
    if worker:
        worker.join(10)
    expected = record["response"]
    assert response.status_code == expected["status"], response.text
    want_type = expected["headers"].get("Content-Type")
    if want_type:
        assert response.headers["Content-Type"] == want_type
    if isinstance(expected["body"], list):  # watch: newline-delimited events
        events = [json.loads(line) for line in response.text.splitlines() if line.strip()]
        if name.startswith("63"):
            assert events and all(e["type"] == "BOOKMARK" for e in events)
            compare(replay, case, expected["body"][0], events[0])
            return
        compare(replay, case, expected["body"], events)
    elif case.subset:
        _subset(replay, expected["body"], response.json())
    else:
        compare(replay, case, expected["body"], response.json())
