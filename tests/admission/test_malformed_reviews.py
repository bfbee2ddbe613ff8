"""Issue 37, findings 2 and 4: every malformed review is a 400 and one log line at most.

Over real TLS: JSON nested hundreds of levels inside an unknown field (a RecursionError in the
mutating route's copy used to answer 500 with a ~3,000-line traceback), an integer past
Python's digit limit (a ValueError: 500 and a traceback), wrong-kind reviews (a log line each),
a 4 MiB array of empty objects (decoded into a million dicts before any limit) and the
route's own concurrency slot, within which a body is now decoded.
"""

from __future__ import annotations

import http.client
import json
import logging
import ssl
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from cloudcoil.models.kubernetes.core.v1 import ConfigMap

from cloudcoil_sync.admission._internal.request import AdmissionRequest
from cloudcoil_sync.admission._internal.review import MAX_DEPTH
from cloudcoil_sync.admission._internal.routes import AdmissionRoutes
from cloudcoil_sync.admission._internal.server import WebhookHost
from cloudcoil_sync.admission._internal.webhook import AdmissionWebhook

from .reviews import config_map, review

Factory = Callable[..., WebhookHost]


class Served:
    def __init__(self, host: WebhookHost, context: ssl.SSLContext) -> None:
        self.host, self.context = host, context
        self.handled = 0
        self.release = threading.Event()
        self.entered = threading.Event()

    def post(self, path: str, body: bytes, source: str = "127.0.0.1") -> tuple[int, Any]:
        address, port = self.host.address
        connection = http.client.HTTPSConnection(
            address, port, context=self.context, timeout=10, source_address=(source, 0)
        )
        try:
            connection.request(
                "POST", path, body=body, headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()


@pytest.fixture
def served(host_factory: Factory, client_context: ssl.SSLContext) -> Iterator[Served]:
    table = AdmissionRoutes()
    served: Served

    @table.mutating(ConfigMap, path="/mutate/cm")
    def label(request: AdmissionRequest[ConfigMap]) -> ConfigMap:
        served.handled += 1
        resource = request.resource
        assert resource is not None and resource.metadata is not None
        resource.metadata.labels = {"managed": "yes"}
        return resource

    @table.validating(ConfigMap, path="/validate/one", timeout_seconds=1, max_concurrency=1)
    def one(request: AdmissionRequest[ConfigMap]) -> None:
        served.entered.set()
        served.release.wait(10)

    webhook = AdmissionWebhook(table)
    served = Served(host_factory(webhook), client_context)
    yield served
    served.release.set()
    assert webhook.close(timeout=5)


def with_object_field(raw: str) -> bytes:
    """A CREATE review of a ConfigMap whose object carries `raw` (JSON text) in an unknown
    field: as the API server sends a custom resource with preserved unknown fields."""
    text = json.dumps(review(obj=config_map(junk="@@")))
    return text.replace('"@@"', raw).encode()


@pytest.fixture
def records(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="cloudcoil_sync")
    return caplog


def _problems(records: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in records.records if r.name.startswith("cloudcoil_sync.admission")]


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 600, 990])
def test_deep_json_in_an_unknown_field_is_400_with_one_short_line(
    served: Served, records: pytest.LogCaptureFixture, depth: int
) -> None:
    status, document = served.post("/mutate/cm", with_object_field("[" * depth + "]" * depth))
    assert status == 400
    assert "AdmissionReview" in document["message"]
    (line,) = _problems(records)
    assert line.exc_info is None and len(line.getMessage()) <= 1024
    assert served.handled == 0


def test_json_at_the_depth_limit_is_served(served: Served) -> None:
    depth = MAX_DEPTH - 3  # review > request > object > junk
    status, document = served.post("/mutate/cm", with_object_field("[" * depth + "]" * depth))
    assert status == 200 and document["response"]["allowed"] is True
    assert served.handled == 1


def test_an_integer_past_the_digit_limit_is_400_with_one_short_line(
    served: Served, records: pytest.LogCaptureFixture
) -> None:
    status, _ = served.post("/mutate/cm", with_object_field("9" * 5000))
    assert status == 400
    (line,) = _problems(records)
    assert line.exc_info is None and len(line.getMessage()) <= 1024


def test_a_huge_array_of_empty_objects_is_refused_before_decoding(
    served: Served, records: pytest.LogCaptureFixture
) -> None:
    status, _ = served.post("/mutate/cm", with_object_field("[" + "{}," * 1_300_000 + "{}]"))
    assert status == 400
    (line,) = _problems(records)
    assert "JSON values" in line.getMessage()
    assert served.handled == 0


def test_separators_inside_strings_are_not_values(served: Served) -> None:
    # 200,000 commas and brackets in a string are one value, not 200,000.
    status, document = served.post("/mutate/cm", with_object_field(json.dumps(",[{" * 200_000)))
    assert status == 200 and document["response"]["allowed"] is True


def test_wrong_kind_reviews_are_logged_once_per_client_and_interval(
    served: Served, records: pytest.LogCaptureFixture
) -> None:
    wrong = json.dumps(review(kind=("apps", "v1", "Deployment"))).encode()
    for source in ("127.0.0.2", "127.0.0.3"):
        for _ in range(20):
            status, _ = served.post("/mutate/cm", wrong, source=source)
            assert status == 400
    lines = [r.getMessage() for r in _problems(records)]
    assert len(lines) == 2  # one per client address
    assert "127.0.0.2" in lines[0] and "127.0.0.3" in lines[1]


def test_a_body_is_decoded_within_its_routes_slot(served: Served) -> None:
    # The route's only slot is held by a blocked handler: the next body, even a malformed
    # one, waits for it (and gets the route's 504) instead of being decoded meanwhile.
    valid = json.dumps(review()).encode()
    first = threading.Thread(target=served.post, args=("/validate/one", valid))
    first.start()
    try:
        assert served.entered.wait(5)
        status, document = served.post("/validate/one", b"[" * 900 + b"]" * 900)
        assert status == 504
        assert document == {"message": "Admission webhook timed out"}
    finally:
        served.release.set()
        first.join(10)
