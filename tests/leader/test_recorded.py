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
from cloudcoil_sync.controller._internal.lease import LeaseMachine, LeaseSettings
from cloudcoil_sync.controller._internal.lease_client import ClientLeaseAPI

SERVER = "https://kube.test"
MICRO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")


def recorded(prefix: str) -> dict[str, Any]:
    return exchange(prefix)


def settings(identity: str) -> LeaseSettings:
    return LeaseSettings(
        name="rec-leader",
        namespace="rec-7p0zo",
        identity=identity,
        lease_duration_seconds=15,
        renew_deadline=10,
        retry_period=2,
    )


@pytest.fixture
def api() -> Iterator[ClientLeaseAPI]:
    config = Config(server=SERVER, token="t", namespace="rec-7p0zo")
    try:
        yield ClientLeaseAPI(config, "rec-7p0zo", "rec-leader")
    finally:
        config.close()


def machine_of(api: ClientLeaseAPI, identity: str = "candidate-a") -> LeaseMachine:
    machine = LeaseMachine(settings(identity), api)
    machine.begin()
    return machine


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


def create_lease(machine: LeaseMachine, create: dict[str, Any]) -> None:
    """Answer the candidate's GET with 404 and its POST with the recorded 201."""
    responses.get(url(create) + "/rec-leader", json=not_found(), status=404)
    responses.post(url(create), json=create["response"]["body"], status=201)
    assert machine.acquire() and machine.is_leader


@responses.activate
def test_create_request_has_the_recorded_shape(api: ClientLeaseAPI) -> None:
    create = recorded("48")
    machine = machine_of(api)
    create_lease(machine, create)
    lease = machine.lease
    assert lease is not None
    assert lease["metadata"]["uid"] == create["response"]["body"]["metadata"]["uid"]
    assert [call.request.method for call in responses.calls] == ["GET", "POST"]
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
def test_renew_puts_the_last_resource_version(api: ClientLeaseAPI) -> None:
    create, renew = recorded("48"), recorded("49")
    machine = machine_of(api)
    create_lease(machine, create)
    responses.put(url(renew), json=renew["response"]["body"], status=200)
    machine.renew()
    assert responses.calls[-1].request.method == "PUT"
    sent = json.loads(responses.calls[-1].request.body or b"")
    assert sent["metadata"]["resourceVersion"] == "132007"
    assert sent["metadata"]["uid"] == create["response"]["body"]["metadata"]["uid"]
    assert sent["spec"]["acquireTime"] == create["response"]["body"]["spec"]["acquireTime"]
    assert sent["spec"]["renewTime"] != create["response"]["body"]["spec"]["renewTime"]
    renewed = machine.lease
    assert renewed is not None and renewed["metadata"]["resourceVersion"] == "132008"
    assert machine.is_leader and machine.renewal_failures == 0


@responses.activate
def test_stale_takeover_conflict_is_a_lost_race(api: ClientLeaseAPI) -> None:
    stale = recorded("50")
    released = json.loads(json.dumps(recorded("48")["response"]["body"]))
    released["spec"]["holderIdentity"] = ""
    responses.get(url(stale), json=released, status=200)
    responses.put(url(stale), json=stale["response"]["body"], status=409)
    machine = machine_of(api, "candidate-b")
    assert not machine.acquire() and machine.state == "acquiring"
    assert [call.request.method for call in responses.calls] == ["GET", "PUT"]
    with pytest.raises(Conflict, match="the object has been modified"):
        api.replace(stale["request"]["body"], 1.0)
