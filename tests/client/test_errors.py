"""Typed errors from recorded Status bodies and from malformed bodies."""

from __future__ import annotations

import json

import pytest
from recordings import exchange

from cloudcoil_sync.client._internal import errors as e


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("08-get-missing-configmap-404.json", e.NotFound),
        ("12-create-configmap-again-409.json", e.AlreadyExists),
        ("14-put-configmap-stale-rv-409.json", e.Conflict),
        ("22-apply-conflict-manager-b-409.json", e.Conflict),
        ("26-create-invalid-name-422.json", e.Invalid),
        ("27-forbidden-sa-list-403.json", e.Forbidden),
        ("29-unauthorized-garbage-token-401.json", e.Unauthorized),
        ("45-delete-precondition-uid-409.json", e.Conflict),
    ],
)
def test_recorded_status_bodies(name: str, cls: type[e.APIError]) -> None:
    resp = exchange(name)["response"]
    err = e.api_error(resp["status"], json.dumps(resp["body"]), method="GET", url="https://x/y")
    assert type(err) is cls
    assert err.status_code == resp["status"]
    assert err.message == resp["body"]["message"]
    assert err.status == resp["body"]
    assert "GET https://x/y" in str(err) and resp["body"]["message"] in str(err)


def test_invalid_causes_and_names() -> None:
    body = exchange("26-create-invalid-name-422.json")["response"]
    err = e.api_error(422, body["body"])
    assert isinstance(err, e.Invalid)
    assert err.causes[0]["field"] == "metadata.name"
    assert (err.kind, err.name) == ("ConfigMap", "Bad_Name")


@pytest.mark.parametrize(
    ("code", "body", "cls"),
    [
        (404, b"<html>404 page not found</html>", e.NotFound),
        (409, b"{not json", e.Conflict),
        (410, b"", e.Expired),
        (422, b'{"kind": "Other"}', e.Invalid),
        (429, b"slow down", e.TooManyRequests),
        (500, b"oops", e.ServerError),
        (502, None, e.ServerError),
        (400, b"[]", e.BadRequest),
        (405, b"", e.APIError),
    ],
)
def test_non_status_bodies_map_by_code(code: int, body: bytes | None, cls: type) -> None:
    err = e.api_error(code, body, method="PATCH", url="u")
    assert type(err) is cls
    assert err.status_code == code
    assert err.status == {}
    if body and body.strip():
        assert "non-Status error body" in err.message


def test_status_code_inside_body_wins_for_watch_errors() -> None:
    status = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Expired",
        "code": 410,
        "message": "too old resource version: 1 (88309)",
    }
    err = e.api_error(200, status)
    assert isinstance(err, e.Gone) and err.status_code == 410


def test_retry_after() -> None:
    err = e.api_error(429, b"{}", retry_after_header="3")
    assert isinstance(err, e.TooManyRequests) and err.retry_after == 3.0
    body = {
        "kind": "Status",
        "code": 429,
        "reason": "TooManyRequests",
        "details": {"retryAfterSeconds": 2},
    }
    assert e.api_error(429, body).retry_after == 2.0
    assert e.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0
    assert e.parse_retry_after("garbage") is None
