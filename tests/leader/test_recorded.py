"""The Lease requests match, and the answers parse like, kube-apiserver 1.32's (recorded)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
import responses
from recordings import exchange

from cloudcoil_sync.client import Config, Conflict
from cloudcoil_sync.controller._internal.leader import LeaderElection, _ClientLeaseAPI

SERVER = "https://kube.test"
MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def recorded(prefix: str) -> dict[str, Any]:
    return exchange(prefix)


@pytest.fixture
def election() -> Iterator[LeaderElection]:
    config = Config(server=SERVER, token="t", namespace="rec-7p0zo")
    election = LeaderElection("rec-leader", identity="candidate-a", config=config)
    election._lease_api = _ClientLeaseAPI(config, "rec-7p0zo", "rec-leader")
    election._state = "acquiring"
    try:
        yield election
    finally:
        config.close()


def url(exchange: dict[str, Any]) -> str:
    return SERVER + exchange["request"]["path"]


def not_found() -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'leases.coordination.k8s.io "rec-leader" not found',
        "reason": "NotFound",
        "details": {"name": "rec-leader", "group": "coordination.k8s.io", "kind": "leases"},
        "code": 404,
    }


@responses.activate
def test_create_request_has_the_recorded_shape(election: LeaderElection) -> None:
    create = recorded("48")
    item = url(create) + "/rec-leader"
    responses.get(item, json=not_found(), status=404)
    responses.post(url(create), json=create["response"]["body"], status=201)
    acquired = election._try_acquire()
    assert acquired is not None
    lease, created = acquired
    assert created and lease["metadata"]["uid"] == create["response"]["body"]["metadata"]["uid"]
    sent = json.loads(responses.calls[1].request.body or b"")
    expected = create["request"]["body"]
    assert sent["apiVersion"] == expected["apiVersion"] and sent["kind"] == expected["kind"]
    assert sent["metadata"]["name"] == expected["metadata"]["name"]
    assert set(sent["spec"]) == set(expected["spec"])
    assert sent["spec"]["holderIdentity"] == "candidate-a"
    assert sent["spec"]["leaseTransitions"] == 0
    assert all(MICRO.fullmatch(sent["spec"][key]) for key in ("acquireTime", "renewTime"))
    assert all(MICRO.fullmatch(expected["spec"][key]) for key in ("acquireTime", "renewTime"))


@responses.activate
def test_renew_puts_the_last_resource_version(election: LeaderElection) -> None:
    create, renew = recorded("48"), recorded("49")
    election._hold(create["response"]["body"], False, election._clock())
    responses.put(url(renew), json=renew["response"]["body"], status=200)
    election._try_renew(election._clock())
    sent = json.loads(responses.calls[0].request.body or b"")
    assert sent["metadata"]["resourceVersion"] == "132007"
    assert sent["metadata"]["uid"] == create["response"]["body"]["metadata"]["uid"]
    assert sent["spec"]["acquireTime"] == create["response"]["body"]["spec"]["acquireTime"]
    assert sent["spec"]["renewTime"] != create["response"]["body"]["spec"]["renewTime"]
    assert election._lease is not None
    assert election._lease["metadata"]["resourceVersion"] == "132008"
    assert election.is_leader


@responses.activate
def test_stale_takeover_conflict_is_a_lost_race(election: LeaderElection) -> None:
    stale = recorded("50")
    released = json.loads(json.dumps(recorded("48")["response"]["body"]))
    released["spec"]["holderIdentity"] = ""
    responses.get(url(stale), json=released, status=200)
    responses.put(url(stale), json=stale["response"]["body"], status=409)
    election.identity = "candidate-b"
    assert election._try_acquire() is None
    with pytest.raises(Conflict, match="the object has been modified"):
        assert election._lease_api is not None
        election._lease_api.replace(stale["request"]["body"], 1.0)
