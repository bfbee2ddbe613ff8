"""Transport edge cases with ``responses``: retries, Retry-After, bodies, auth refresh."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.client import (
    AlreadyExists,
    Config,
    Forbidden,
    NotFound,
    ServerError,
    TooManyRequests,
    TransportError,
    Unauthorized,
)
from cloudcoil_sync.client._internal.retry import RetryPolicy

SERVER = "http://api.test"
CM_URL = f"{SERVER}/api/v1/namespaces/default/configmaps"


@pytest.fixture
def config() -> Iterator[Config]:
    cfg = Config(SERVER, token="t0k", qps=0)
    # no real sleeping between retries
    cfg.transport.retry = RetryPolicy(max_retries=3, base=0.001, cap=0.002, max_retry_after=0.01)
    yield cfg
    cfg.close()


def _cm(name: str = "a") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}


@responses.activate
def test_429_retry_after_honoured_even_for_post(config: Config, monkeypatch: Any) -> None:
    waits: list[float] = []
    real_wait = config.transport._closed.wait

    def fake_wait(seconds: float) -> bool:
        waits.append(seconds)
        return real_wait(0)

    monkeypatch.setattr(config.transport._closed, "wait", fake_wait)
    config.transport.retry = RetryPolicy(max_retries=3, max_retry_after=60)
    responses.post(CM_URL, status=429, headers={"Retry-After": "2"}, json={})
    responses.post(CM_URL, status=201, json=_cm())
    out = config.client(ConfigMap).create(_cm())
    assert out.metadata is not None and out.metadata.name == "a"
    assert waits == [2.0]
    assert len(responses.calls) == 2
    assert responses.calls[0].request.headers["Authorization"] == "Bearer t0k"


@responses.activate
def test_429_gives_up_with_typed_error(config: Config) -> None:
    for _ in range(4):
        responses.get(f"{CM_URL}/a", status=429, headers={"Retry-After": "1"}, body=b"busy")
    with pytest.raises(TooManyRequests) as err:
        config.client(ConfigMap).get("a")
    assert err.value.retry_after == 1.0
    assert len(responses.calls) == 4


@responses.activate
def test_5xx_retried_for_get_not_for_post_or_patch(config: Config) -> None:
    responses.get(f"{CM_URL}/a", status=503, body=b"<html>unavailable</html>")
    responses.get(f"{CM_URL}/a", status=200, json=_cm())
    assert config.client(ConfigMap).raw.get("a")["metadata"]["name"] == "a"
    assert len(responses.calls) == 2

    responses.post(
        CM_URL,
        status=500,
        json={"kind": "Status", "code": 500, "reason": "InternalError", "message": "boom"},
    )
    with pytest.raises(ServerError, match="boom"):
        config.client(ConfigMap).create(_cm())
    responses.patch(f"{CM_URL}/a", status=503, body=b"")
    with pytest.raises(ServerError):
        config.client(ConfigMap).merge_patch("a", {"data": {"x": "1"}})
    assert len(responses.calls) == 4


@responses.activate
def test_connection_errors_retried_for_get_only(config: Config) -> None:
    responses.get(f"{CM_URL}/a", body=requests.ConnectionError("reset by peer"))
    responses.get(f"{CM_URL}/a", json=_cm())
    assert config.client(ConfigMap).get("a").metadata is not None
    responses.put(f"{CM_URL}/b", body=requests.ConnectionError("reset"))
    responses.put(f"{CM_URL}/b", json=_cm("b"))
    assert config.client(ConfigMap).replace(_cm("b")).metadata is not None
    responses.post(CM_URL, body=requests.ConnectionError("reset by peer"))
    with pytest.raises(TransportError, match="reset by peer"):
        config.client(ConfigMap).create(_cm())
    assert len(responses.calls) == 5


@responses.activate
def test_numbers_beyond_64_bits_and_non_finite_bodies(config: Config) -> None:
    big = 2**70
    responses.get(f"{CM_URL}/a", body=b'{"kind": "ConfigMap", "data": {}, "n": %d}' % big)
    assert config.client(ConfigMap).raw.get("a")["n"] == big
    with pytest.raises(ValueError, match=r"request body is not valid JSON.*NaN and Infinity"):
        config.client(ConfigMap).raw.create({"metadata": {"name": "x"}, "v": float("nan")})
    with pytest.raises(ValueError, match=r"not valid JSON \(Out of range float values.*NaN and"):
        config.client(ConfigMap).raw.create({"metadata": {"name": "x"}, "v": [-float("inf")]})
    assert len(responses.calls) == 1  # the invalid bodies were never sent
    body = {"metadata": {"name": "é\u2028"}, "data": {"f": 0.1, "t": True, "n": None, "big": big}}
    responses.post(CM_URL, json=_cm("y"))
    config.client(ConfigMap).raw.create(body)
    sent = responses.calls[-1].request.body
    assert sent == json.dumps(body, separators=(",", ":"), allow_nan=False).encode()
    assert b"\\u00e9" in sent  # ASCII on the wire, as json.dumps writes it


@responses.activate
def test_malformed_bodies(config: Config) -> None:
    responses.get(f"{CM_URL}/a", status=200, body=b"{not json")
    with pytest.raises(TransportError, match="non-JSON body"):
        config.client(ConfigMap).get("a")
    responses.get(f"{CM_URL}/b", status=404, body=b"404 page not found", content_type="text/plain")
    with pytest.raises(NotFound, match="404 page not found"):
        config.client(ConfigMap).get("b")
    responses.get(f"{CM_URL}/c", status=403, body=b'{"kind": "Status", "code"')
    with pytest.raises(Forbidden):
        config.client(ConfigMap).get("c")
    responses.post(
        CM_URL,
        status=409,
        json={"kind": "Status", "code": 409, "reason": "AlreadyExists", "message": "exists"},
    )
    with pytest.raises(AlreadyExists, match="exists"):
        config.client(ConfigMap).create(_cm())


@responses.activate
def test_401_rereads_rotated_token_once(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("old\n")
    cfg = Config(SERVER, token_file=token, qps=0)
    seen: list[str] = []

    def reply(request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        seen.append(str(request.headers["Authorization"]))
        if request.headers["Authorization"] == "Bearer new":
            return 200, {}, '{"metadata": {"name": "a"}}'
        return 401, {}, '{"kind": "Status", "code": 401, "reason": "Unauthorized"}'

    responses.add_callback(responses.GET, f"{CM_URL}/a", callback=reply)
    with pytest.raises(Unauthorized):  # file unchanged: re-read does not help, no loop
        cfg.client(ConfigMap).get("a")
    assert seen == ["Bearer old"]
    token.write_text("new\n")  # rotated within the check interval: the 401 forces a re-read
    assert cfg.client(ConfigMap).raw.get("a")["metadata"]["name"] == "a"
    assert seen == ["Bearer old", "Bearer old", "Bearer new"]
    cfg.close()


@responses.activate
def test_user_agent_and_accept(config: Config) -> None:
    responses.get(f"{CM_URL}/a", json=_cm())
    config.client(ConfigMap).get("a")
    headers = responses.calls[0].request.headers
    assert headers["Accept"] == "application/json"
    assert headers["User-Agent"].startswith("cloudcoil-sync/")


@responses.activate
def test_rate_limiter_applies_to_every_request() -> None:
    slept: list[float] = []
    cfg = Config(SERVER, token="t", qps=10, burst=2)
    cfg.transport.limiter._sleep = slept.append
    responses.get(f"{CM_URL}/a", json=_cm())
    for _ in range(4):
        cfg.client(ConfigMap).raw.get("a")
    assert len(slept) == 2 and all(0.05 < s <= 0.2 for s in slept)
    cfg.close()


@responses.activate
def test_discovery_only_for_unknown_kinds(config: Config) -> None:
    from cloudcoil_sync.client import UnknownKind

    responses.get(
        f"{SERVER}/apis/example.com/v1",
        json={
            "kind": "APIResourceList",
            "groupVersion": "example.com/v1",
            "resources": [
                {"name": "things", "kind": "Thing", "namespaced": False},
                {"name": "things/status", "kind": "Thing", "namespaced": False},
            ],
        },
    )
    responses.get(f"{SERVER}/apis/example.com/v1/things/t", json={"kind": "Thing"})
    responses.get(f"{SERVER}/apis/missing.io/v1", status=404, body=b"404 page not found")
    assert config.client(ConfigMap).mapping.plural == "configmaps"  # built-in: no request
    assert len(responses.calls) == 0
    things = config.client(("example.com", "v1", "things"), namespace="ignored")
    assert things.get("t") == {"kind": "Thing"}
    assert things.mapping.subresources == {"status"} and not things.mapping.namespaced
    assert config.mapper.resolve(("example.com/v1", "Thing")).plural == "things"
    assert len(responses.calls) == 2  # one discovery document, cached
    with pytest.raises(UnknownKind, match="does not serve API group-version"):
        config.client(("missing.io", "v1", "nothing")).get("x")
    with pytest.raises(UnknownKind, match="does not serve plural 'others'"):
        config.client(("example.com", "v1", "others")).get("x")


@responses.activate
def test_write_request_shapes(config: Config) -> None:
    responses.delete(f"{CM_URL}/a", json={"kind": "Status", "status": "Success"})
    responses.patch(f"{CM_URL}/a", json=_cm())
    api = config.client(ConfigMap)
    out = api.delete(
        "a",
        uid="u-1",
        resource_version="7",
        propagation_policy="Foreground",
        grace_period_seconds=0,
        dry_run=True,
    )
    assert out["status"] == "Success"
    body = json.loads(responses.calls[0].request.body or b"{}")
    assert body == {
        "apiVersion": "v1",
        "kind": "DeleteOptions",
        "preconditions": {"uid": "u-1", "resourceVersion": "7"},
        "propagationPolicy": "Foreground",
        "gracePeriodSeconds": 0,
        "dryRun": ["All"],
    }
    intent = {**_cm(), "metadata": {"name": "a", "managedFields": [{"manager": "x"}]}}
    api.apply(intent, field_manager="mgr", force=True, dry_run=True)
    req = responses.calls[1].request
    assert req.headers["Content-Type"] == "application/apply-patch+yaml"
    assert "fieldManager=mgr" in (req.url or "") and "force=true" in (req.url or "")
    assert "dryRun=All" in (req.url or "")
    assert "managedFields" not in json.loads(req.body or b"{}")["metadata"]
    api.json_patch("a", [{"op": "test", "path": "/a", "value": 1}])
    assert responses.calls[2].request.headers["Content-Type"] == "application/json-patch+json"
    api.merge_patch("a", {"data": None})
    req = responses.calls[3].request
    assert req.headers["Content-Type"] == "application/merge-patch+json"
    assert json.loads(req.body or b"{}") == {"data": None}
    with pytest.raises(ValueError, match="field_manager"):
        api.apply(_cm(), field_manager="")


@responses.activate
def test_per_call_retry_override(config: Config) -> None:
    responses.get(f"{CM_URL}/a", status=503, body=b"")
    responses.get(f"{CM_URL}/a", json=_cm())
    with pytest.raises(ServerError):
        config.transport.request_json("GET", "/api/v1/namespaces/default/configmaps/a", retries=0)
    assert len(responses.calls) == 1


@responses.activate
def test_per_call_timeouts_override_the_config_defaults(config: Config) -> None:
    responses.get(f"{CM_URL}/a", json=_cm())
    config.transport.request_json("GET", "/api/v1/namespaces/default/configmaps/a")
    config.transport.request_json(
        "GET",
        "/api/v1/namespaces/default/configmaps/a",
        read_timeout=1.5,
        connect_timeout=0.5,
    )
    first, second = (vars(call.request)["req_kwargs"]["timeout"] for call in responses.calls)
    assert first == (config.transport.connect_timeout, config.transport.timeout)
    assert second == (0.5, 1.5)


@responses.activate
def test_redirects_are_followed_and_cookies_never_kept(config: Config) -> None:
    responses.get(f"{CM_URL}/a", status=307, headers={"Location": f"{SERVER}/moved/a"})
    responses.get(
        f"{SERVER}/moved/a", json=_cm(), headers={"Set-Cookie": "session=s; Domain=api.test"}
    )
    responses.patch(f"{CM_URL}/a", status=308, headers={"Location": f"{SERVER}/moved/a"})
    responses.patch(f"{SERVER}/moved/a", json=_cm())
    api = config.client(ConfigMap)
    got = api.get("a")
    assert got.metadata is not None and got.metadata.name == "a"
    api.raw.merge_patch("a", {"data": {"k": "v"}})
    moved = responses.calls[3].request
    assert (moved.method, moved.url, moved.body) == (
        "PATCH",
        f"{SERVER}/moved/a",
        b'{"data":{"k":"v"}}',  # 308 keeps the method and the body
    )
    assert "Cookie" not in moved.headers  # the API server's cookies are refused
    assert not config.transport.session.cookies


def test_adapters_mounted_on_the_session_are_used(config: Config) -> None:
    seen: list[str] = []

    class Recording(requests.adapters.HTTPAdapter):
        def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
            seen.append(str(request.url))
            resp = requests.Response()
            resp.status_code, resp._content = 200, json.dumps(_cm("special")).encode()
            resp.url, resp.request = str(request.url), request
            return resp

    config.transport.session.mount(f"{CM_URL}/special", Recording())
    got = config.client(ConfigMap).get("special")
    assert got.metadata is not None and got.metadata.name == "special"
    assert seen == [f"{CM_URL}/special"]


@pytest.mark.parametrize(
    ("url", "origin", "host", "port"),
    [
        (
            "https://127.0.0.1:6443/api/v1/pods?watch=1",
            ("https", "127.0.0.1:6443"),
            "127.0.0.1",
            6443,
        ),
        ("HTTPS://[::1]:8443/apis", ("https", "[::1]:8443"), "::1", 8443),
        ("http://kube.example?x=1", ("http", "kube.example"), "kube.example", None),
        ("https://kube.example#frag", ("https", "kube.example"), "kube.example", None),
    ],
)
def test_pool_key_from_the_origin_matches_urlsplit(
    url: str, origin: tuple[str, str], host: str, port: int | None
) -> None:
    from cloudcoil_sync.client._internal.pools import origin as _origin
    from cloudcoil_sync.client._internal.pools import pool_host as _pool_host

    assert _origin(url) == origin
    assert dict(_pool_host(*origin)) == {"scheme": origin[0], "host": host, "port": port}
