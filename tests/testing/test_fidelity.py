"""The differential cases recorded from kube-apiserver 1.32, replayed against the emulator.

``bench/fidelity.py --record`` sent them to a real server and stored its answers in
``tests/recordings/fidelity/``; here the same requests, in the same order, go to a fresh
emulator, and every answer must match (status, warnings, body without volatile values).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from recordings.fidelity import FIDELITY, Server, compare, run_cases, setup

from cloudcoil_sync.testing import Emulator

RECORDING = json.loads((FIDELITY / "kube-apiserver-1.32.json").read_text())
CASES: list[dict[str, Any]] = RECORDING["cases"]
NS = "fid39"


@pytest.fixture(scope="module")
def answers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, dict[str, Any]]]:
    ca = tmp_path_factory.mktemp("fidelity") / "ca.crt"
    with Emulator() as emu:
        ca.write_bytes(emu.ca_pem)
        session = requests.Session()
        session.verify = str(ca)
        session.headers["Authorization"] = f"Bearer {emu.admin_token}"
        server = Server(emu.url, session)
        setup(server, NS, RECORDING["crds"], emu.settle)
        done = run_cases(server, CASES, emu.settle)
        session.close()
        yield {case["name"]: case["response"] for case in done}


def test_recording_is_large_enough() -> None:
    assert len(CASES) >= 100
    assert len({case["name"] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_emulator_answers_as_kube_apiserver(
    case: dict[str, Any], answers: dict[str, dict[str, Any]]
) -> None:
    status_only = bool(case.get("status_only"))
    assert compare(case["response"], answers[case["name"]], status_only) == []


def test_compare_sees_a_changed_cause() -> None:
    invalid = next(c["response"] for c in CASES if c["response"]["status"] == 422)
    changed = json.loads(json.dumps(invalid))
    changed["body"]["details"]["causes"][0]["field"] = "spec.other"
    assert compare(invalid, changed) != []
    assert compare(invalid, invalid) == []


def test_recording_holds_the_current_cases() -> None:
    """Changing fidelity_cases.py needs a new recording (bench/fidelity.py --record)."""
    from recordings.fidelity_cases import cases

    recorded = [{k: v for k, v in case.items() if k != "response"} for case in CASES]
    assert recorded == cases()
