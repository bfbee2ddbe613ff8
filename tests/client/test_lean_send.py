"""The lean send (JSON calls on urllib3's pool directly) against requests' own path, over
real HTTPS on loopback: the same requests reach the server, the same answers and errors come
back, and the lean path is the one taken where nothing asks for requests."""

from __future__ import annotations

import gzip
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import given, settings
from hypothesis import strategies as st
from ports import free_port

from cloudcoil_sync.client import Config
from cloudcoil_sync.client._internal import lean, wire
from cloudcoil_sync.client._internal.retry import RetryPolicy

from .certs import PKI
from .fakeserver import FakeAPI, Reply, Request

CM = "/api/v1/namespaces/default/configmaps"


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "code": code, "reason": reason, "message": message}


def _script(replies: list[Reply]) -> Callable[[Request], Reply]:
    """Answer with `replies` in turn (the last one again when they run out)."""
    left = list(replies)

    def handler(_: Request) -> Reply:
        return left.pop(0) if len(left) > 1 else left[0]

    return handler


_GZIP = {"Content-Encoding": "gzip", "Content-Type": "application/json"}

#: (name, replies, the call): every call goes through `Transport.request_json`.
SCENARIOS: list[tuple[str, list[Reply], Callable[[Config], Any]]] = [
    ("get", [Reply(body={"metadata": {"name": "a"}})], lambda c: c.client(_cm()).raw.get("a")),
    (
        "create",
        [Reply(201, {"metadata": {"name": "a"}})],
        lambda c: c.client(_cm()).raw.create({"metadata": {"name": "a"}}),
    ),
    (
        "json patch",
        [Reply(body={"metadata": {"name": "a"}, "data": {"k": "v"}})],
        lambda c: c.client(_cm()).raw.json_patch("a", [{"op": "add", "path": "/d", "value": 1}]),
    ),
    (
        "delete",
        [Reply(body=_status(200, "", "gone"))],
        lambda c: c.client(_cm()).raw.delete("a"),
    ),
    (
        "text 404",
        [Reply(404, b"404 page not found", {"Content-Type": "text/plain"})],
        lambda c: c.client(_cm()).raw.get("a"),
    ),
    ("non-JSON 200", [Reply(200, b"{not json")], lambda c: c.client(_cm()).raw.get("a")),
    (
        "non-JSON 200, no charset",
        [Reply(200, "caf\u00e9 <b>".encode("latin-1"), {"Content-Type": "application/x-odd"})],
        lambda c: c.client(_cm()).raw.get("a"),
    ),
    (
        "409 Status",
        [Reply(409, _status(409, "AlreadyExists", "exists"))],
        lambda c: c.client(_cm()).raw.create({"metadata": {"name": "a"}}),
    ),
    (
        "429 then created",
        [Reply(429, {}, {"Retry-After": "0"}), Reply(201, {"metadata": {"name": "a"}})],
        lambda c: c.client(_cm()).raw.create({"metadata": {"name": "a"}}),
    ),
    (
        "503 retried for GET",
        [Reply(503, b"<html>unavailable</html>"), Reply(body={"metadata": {"name": "a"}})],
        lambda c: c.client(_cm()).raw.get("a"),
    ),
    (
        "503 not retried for PATCH",
        [Reply(503, b""), Reply(body={})],
        lambda c: c.client(_cm()).raw.merge_patch("a", {"data": {"x": "1"}}),
    ),
    (
        "gzip body",
        [Reply(body=gzip.compress(b'{"metadata":{"name":"z"}}'), headers=_GZIP)],
        lambda c: c.client(_cm()).raw.get("z"),
    ),
]


def _cm() -> tuple[str, str, str]:
    return ("", "v1", "configmaps")


@pytest.fixture
def lean_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """URLs sent by the lean send (on a kept-alive connection, or through urlopen)."""
    seen: list[str] = []
    real = wire.send

    def counted(*args: Any) -> Any:
        seen.append(args[-1])
        return real(*args)

    monkeypatch.setattr(wire, "send", counted)
    yield seen


def _config(url: str, pki: PKI, **kwargs: Any) -> Config:
    config = Config(url, token="t0k", ca_data=pki.ca.cert_pem, qps=0, **kwargs)
    config.transport.retry = RetryPolicy(max_retries=3, base=0.001, cap=0.002, max_retry_after=0)
    return config


def _outcome(call: Callable[[Config], Any], config: Config) -> tuple[str, str]:
    try:
        return "ok", json.dumps(call(config), sort_keys=True)
    except Exception as error:  # the type and the message are what must match
        return type(error).__name__, str(error)


def _seen(api: FakeAPI) -> list[tuple[str, str, dict[str, list[str]], dict[str, str], bytes]]:
    return [(r.method, r.path, r.query, r.headers, r.body) for r in api.requests]


@pytest.mark.parametrize(("name", "replies", "call"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
def test_the_lean_send_sends_and_answers_as_requests_does(
    name: str,
    replies: list[Reply],
    call: Callable[[Config], Any],
    pki: PKI,
    lean_calls: list[str],
) -> None:
    results = []
    script: list[Callable[[Request], Reply]] = []
    with FakeAPI(lambda request: script[-1](request), pki) as api:
        for fast in (True, False):  # the lean send, then requests' Session.request
            script.append(_script(replies))
            api.requests.clear()
            config = _config(api.url, pki)
            config.transport._fast = fast
            outcome = _outcome(call, config)
            results.append((outcome, _seen(api)))
            config.close()
            if fast:
                assert lean_calls, "the lean send was not taken"
                lean_calls.clear()
    assert not lean_calls  # requests' path never reaches it
    (lean_outcome, lean_seen), (stock_outcome, stock_seen) = results
    assert lean_outcome == stock_outcome
    assert lean_seen == stock_seen  # method, path, query, headers (in order), body


def test_a_redirect_is_followed_by_requests_with_the_body(pki: PKI, lean_calls: list[str]) -> None:
    def handler(request: Request) -> Reply:
        if request.path.startswith("/moved"):
            return Reply(body={"metadata": {"name": "moved"}})
        return Reply(308, b"", {"Location": "/moved/a"})

    with FakeAPI(handler, pki) as api:
        config = _config(api.url, pki)
        got = config.client(_cm()).raw.merge_patch("a", {"data": {"k": "v"}})
        assert got == {"metadata": {"name": "moved"}}
        assert [(r.method, r.path, r.body) for r in api.requests] == [
            ("PATCH", f"{CM}/a", b'{"data":{"k":"v"}}'),
            ("PATCH", "/moved/a", b'{"data":{"k":"v"}}'),  # 308 keeps the method and the body
        ]
        assert api.requests[1].headers["Authorization"] == "Bearer t0k"  # the same host
        config.close()


def test_a_401_rereads_a_rotated_token_once_on_the_lean_path(
    pki: PKI, tmp_path: Path, lean_calls: list[str]
) -> None:
    token = tmp_path / "token"
    token.write_text("old")

    def handler(request: Request) -> Reply:
        if request.headers.get("Authorization") == "Bearer new":
            return Reply(body={"metadata": {"name": "a"}})
        token.write_text("new")  # rotated while the request was answered
        return Reply(401, _status(401, "Unauthorized", "Unauthorized"))

    with FakeAPI(handler, pki) as api:
        config = Config(api.url, token_file=str(token), ca_data=pki.ca.cert_pem, qps=0)
        assert config.client(_cm()).raw.get("a") == {"metadata": {"name": "a"}}
        assert [r.headers["Authorization"] for r in api.requests] == ["Bearer old", "Bearer new"]
        assert len(lean_calls) == 2
        config.close()


def test_failures_to_connect_and_to_answer_in_time_read_as_on_requests_path(pki: PKI) -> None:
    port = free_port()
    outcomes = []
    for fast in (True, False):
        config = _config(f"https://127.0.0.1:{port}", pki)
        config.transport.retry = RetryPolicy(max_retries=0)
        config.transport._fast = fast
        outcomes.append(_outcome(lambda c: c.client(_cm()).raw.get("a"), config))
        config.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == "TransportError" and "cannot connect" in outcomes[0][1]


def test_a_server_that_does_not_answer_in_time_reads_as_on_requests_path(pki: PKI) -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)  # accepts (the kernel does), never answers: a read timeout
    outcomes = []
    try:
        for fast in (True, False):
            config = _config(f"http://127.0.0.1:{listener.getsockname()[1]}", pki, timeout=0.2)
            config.transport.retry = RetryPolicy(max_retries=0)
            config.transport._fast = fast
            outcomes.append(_outcome(lambda c: c.client(_cm()).raw.get("a"), config))
            config.close()
    finally:
        listener.close()
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == "APITimeout" and "did not answer GET" in outcomes[0][1]


def test_adapters_of_the_user_and_test_doubles_see_every_json_call(
    pki: PKI, lean_calls: list[str]
) -> None:
    with FakeAPI(_script([Reply(body={"metadata": {"name": "a"}})]), pki) as api:
        config = _config(api.url, pki)
        sent: list[str] = []
        real = config.transport._adapter.send

        def spy(request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
            sent.append(str(request.url))
            return real(request, **kwargs)

        config.transport._adapter.send = spy  # type: ignore[method-assign]
        config.client(_cm()).raw.get("a")
        assert sent == [f"{api.url}{CM}/a"] and not lean_calls
        del config.transport._adapter.send
        config.client(_cm()).raw.get("a")
        assert len(sent) == 1 and lean_calls == [f"{api.url}{CM}/a"]
        config.close()


@settings(max_examples=400, deadline=None)
@given(
    server=st.sampled_from(
        ["https://127.0.0.1:6443", "HTTPS://kube.example", "https://h:1/k8s/clusters/c-1"]
    ),
    path=st.lists(
        st.sampled_from([*"abz09-._~:/?#[]@!$&'()*+,;=% \u00e9\"<>|{}^`\\", "%41", "%2F"]),
        max_size=40,
    ).map("".join),
)
def test_the_request_target_is_the_one_requests_sends(server: str, path: str) -> None:
    from cloudcoil_sync.client._internal.pools import Adapter, origin

    url = server + "/" + path
    quoted = requests.utils.requote_uri(url)
    prepared = requests.PreparedRequest()
    prepared.url = quoted
    expected = (quoted, Adapter(None, False).request_url(prepared, None))
    assert lean.target(url, len("://".join(origin(server)))) == expected
