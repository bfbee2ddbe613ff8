"""The vendored kube-apiserver recordings are all here, each listed in their README."""

from __future__ import annotations

import re

from recordings import KUBE_APISERVER_1_32, exchange, exchange_files


def test_every_recording_is_present_and_listed() -> None:
    readme = (KUBE_APISERVER_1_32 / "README.md").read_text()
    listed = re.findall(r"^- `(\d\d-[^`]+\.json)`", readme, flags=re.MULTILINE)
    assert listed == exchange_files()
    assert len(listed) == 64


def test_each_recording_is_a_request_and_its_answer() -> None:
    for name in exchange_files():
        record = exchange(name)
        assert {"method", "path"} <= set(record["request"]), name
        assert isinstance(record["response"]["status"], int), name
    assert exchange("48")["request"]["method"] == "POST"  # a prefix finds its one file
